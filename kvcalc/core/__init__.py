"""The core: units and their formatting, message text, number formats, the layer kinds.

Imports nothing else of kvcalc; every other layer may import it.
"""
