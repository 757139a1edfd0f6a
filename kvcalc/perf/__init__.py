"""Speed: the roofline bound (decode step, prefill, crossover), arithmetic intensity, the
calibrated step model, chart sweeps, the serving simulator and running capacity.
"""
