"""Series for the charts: one result of the core per point, as plain lists."""

from __future__ import annotations

import math

from .budget import budget
from .model import ModelSpec
from .roofline import step_time
from .units import check_int
from .weights import Weights

__all__ = ["context_grid", "concurrency_curve", "step_curve", "batch_curve"]


def context_grid(lo: int, hi: int, points: int = 60, include: tuple[int, ...] = ()) -> list[int]:
    """About ``points`` contexts spaced evenly on a log scale from lo to hi, plus ``include``."""
    lo = check_int("lowest context", lo, 1, 10**9)
    hi = check_int("highest context", hi, lo, 10**9)
    if hi == lo:
        return [lo]
    step = (math.log(hi) - math.log(lo)) / (points - 1)
    grid = {round(math.exp(math.log(lo) + i * step)) for i in range(points)}
    grid.update(c for c in include if lo <= c <= hi)
    return sorted(grid)


def concurrency_curve(spec: ModelSpec, contexts: list[int], **budget_kwargs) -> list[float]:
    """Max concurrent sequences at each context (vLLM's definition)."""
    return [budget(spec, context=c, find_max_context=False, **budget_kwargs).max_concurrency
            for c in contexts]


def step_curve(spec: ModelSpec, w: Weights, contexts: list[int], **step_kwargs) -> dict:
    """Weight-read and KV-read time (seconds) of one decode step at each context."""
    weight_s, kv_s, total = [], [], []
    for c in contexts:
        s = step_time(spec, w, context=c, find_crossover=False, **step_kwargs)
        bw = s.bandwidth_gbs * 1e9
        weight_s.append(s.weight_read_bytes / bw)
        kv_s.append((s.kv_read_bytes + s.state_read_bytes) / bw)
        total.append(s.step_time_s)
    return {"context": list(contexts), "weight_s": weight_s, "kv_s": kv_s, "step_s": total}


def batch_curve(spec: ModelSpec, w: Weights, batches: list[int], **step_kwargs) -> dict:
    """Step time and tokens/s against batch size at a fixed context."""
    steps, tps, weight_s, kv_s = [], [], [], []
    for b in batches:
        s = step_time(spec, w, batch=b, find_crossover=False, **step_kwargs)
        bw = s.bandwidth_gbs * 1e9
        steps.append(s.step_time_s)
        tps.append(s.tokens_per_s)
        weight_s.append(s.weight_read_bytes / bw)
        kv_s.append((s.kv_read_bytes + s.state_read_bytes) / bw)
    return {"batch": list(batches), "step_s": steps, "tokens_per_s": tps, "weight_s": weight_s,
            "kv_s": kv_s}
