"""Series for the charts: one result of the core per point, as plain lists."""

from __future__ import annotations

import math

from ..cache.deployment import Deployment
from ..core.arith import last_true
from ..core.model import ModelSpec
from ..core.units import check_int
from ..engines.budget import budget
from .roofline import step_time


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


def concurrency_curve(
    dep: Deployment, contexts: list[int], convention: str = "vllm"
) -> list[float]:
    """Max concurrent sequences of ``dep`` at each context (``convention``'s definition)."""
    return [
        budget(dep, c, convention=convention, find_max_context=False).max_concurrency
        for c in contexts
    ]


def _curve(dep: Deployment, what: str, values: list[int], step_kwargs: dict) -> dict:
    """One decode step of ``dep`` at each of ``values`` of ``what`` (context or batch): its time,
    tokens/s and the weights' and the caches' reading times (seconds)."""
    names = ("step_s", "tokens_per_s", "weight_s", "kv_s")
    out: dict[str, list] = {what: list(values), **{k: [] for k in names}}
    for v in values:
        s = step_time(dep, find_crossover=False, **{what: v}, **step_kwargs)
        bw = s.bandwidth_gbs * 1e9
        out["step_s"].append(s.step_time_s)
        out["tokens_per_s"].append(s.tokens_per_s)
        out["weight_s"].append(s.weight_read_bytes / bw)
        out["kv_s"].append((s.kv_read_bytes + s.state_read_bytes) / bw)
    return out


def step_curve(dep: Deployment, contexts: list[int], **step_kwargs) -> dict:
    """Weight-read and KV-read time (seconds) of one decode step of ``dep`` at each context."""
    c = _curve(dep, "context", contexts, step_kwargs)
    return {k: c[k] for k in ("context", "weight_s", "kv_s", "step_s")}


def batch_curve(dep: Deployment, batches: list[int], **step_kwargs) -> dict:
    """Step time and tokens/s of ``dep`` against batch size at a fixed context."""
    return _curve(dep, "batch", batches, step_kwargs)


def max_batch_at(pool: Deployment, context: int) -> int:
    """How many sequences of ``context`` tokens the KV pool of ``pool`` holds at once: vLLM's
    maximum concurrency rounded down (a fraction of a sequence does not run)."""
    b = budget(pool, context, find_max_context=False)
    return max(int(math.floor(b.max_concurrency)), 0)


def max_context_at(pool: Deployment, batch: int) -> int:
    """The longest context (at most the model's limit) at which ``batch`` sequences fit in the
    KV pool of ``pool`` together (0: not one token each), by bisecting ``max_batch_at``."""
    batch = check_int("batch", batch, 1, 10**7)
    hi = pool.spec.max_context

    def fits(n: int) -> bool:
        return max_batch_at(pool, n) >= batch

    if fits(hi):
        return hi
    if not fits(1):
        return 0
    return last_true(fits, 1, hi)


def no_speed_reason(
    spec: ModelSpec, context: int, batch: int = 1, pool: Deployment | None = None
) -> str | None:
    """Why no decode speed may be stated for ``batch`` sequences of ``context`` tokens each (past
    the model's limit, or more than the KV pool of ``pool`` holds), or None when one may: the one
    rule every page and the CLI apply (issue 23 [16])."""
    limit = spec.max_context
    if context > limit:
        return (
            f"{context:,} tokens is past this model's limit of {limit:,} tokens "
            "(max_position_embeddings): it was not trained for it and engines refuse it"
        )
    if pool is not None:
        most = max_batch_at(pool, context)
        if most < batch:
            seqs = f"{batch:,} sequence{'s' if batch != 1 else ''}"
            return (
                f"{seqs} of {context:,} tokens do{'es' if batch == 1 else ''} not fit in "
                f"the KV pool: at most {most:,} fit{'s' if most == 1 else ''} at that length"
            )
    return None
