"""Measurement with torch and transformers, each imported inside the functions that need it
(importing these modules stays light): architecture twins, the live run, the check against
transformers' own cache (one config, or the zoo of every architecture), the measured cost of
shrinking, the attention microscope, work-is-not-time timings. docs/measurement.md explains each.

Uses kvcalc.core, kvcalc.config and kvcalc.cache only.
"""
