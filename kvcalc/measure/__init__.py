"""Measurement with torch and transformers, each imported inside the functions that need it
(importing these modules stays light); what each module measures: docs/measurement.md. Uses
kvcalc.core, kvcalc.config and kvcalc.cache only.
"""
