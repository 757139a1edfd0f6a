"""From files to models: config.json fields read by family (with their limits), parameter
counts, and the registry (models.yaml: models with their weights, GPUs, links).
Imports kvcalc.core and kvcalc.cache.
"""
