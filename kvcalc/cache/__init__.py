"""What the cache and the weights occupy: KV bytes per layer, token, sequence and GPU; weight
bytes and what one decode step reads of them. Imports only kvcalc.core.
"""
