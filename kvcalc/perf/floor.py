"""The physical floor of a measured run (issue 41, item 3): what the run's own loop takes on
its GPUs with nothing a real engine adds (``floor_profile``: every byte at the full bandwidth,
every FLOP at the dense peak, no fixed cost, no exchange latency, no host time). A run measured
faster than that cannot be met by any coefficient: a calibration leaves it out and says what to
check (``past_floor``; docs/calibration.md#calibrating-from-your-own-benchmark).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

from .engines import EngineProfile


class MeasuredRun(Protocol):
    """A measured run as kvcalc.perf.calibrate_from.BenchRow gives one."""

    def measured(self) -> dict[str, float]: ...

    def describe(self) -> str: ...


# Nothing a real engine adds: every byte at the full bandwidth, every FLOP at the dense peak, no
# fixed cost, no exchange latency, no host time (``floor_profile``). A run measured faster than
# its own loop under this is past what any coefficient can reach.
IDEAL_COEFFICIENTS: dict[str, Any] = {
    **dict.fromkeys(
        ("bw_share", "kv_bw_share", "mfu", "attn_mfu", "expert_bw_share", "expert_mfu"), 1.0
    ),
    "fp8_gemm_share": 1.0,
    "host_overlap": 1.0,
    **dict.fromkeys(
        (
            "step_overhead_s",
            "allreduce_latency_s",
            "ep_latency_s",
            "api_overhead_s",
            "seq_overhead_s",
            "request_overhead_s",
            "layer_overhead_s",
        ),
        0.0,
    ),
}
FLOOR_QUANTITIES = ("TPOT", "latency")  # a decode's pace; a client's TTFT includes its queue
# how far below the floor a run must be to be past it: the loop a row is simulated in is its
# client's only in the large (lengths, arrivals), so a run within 5% of the floor is fitted
FLOOR_MARGIN = 0.95


def floor_profile(base: EngineProfile) -> EngineProfile:
    """``base`` (its engine's pool and batching) with nothing a real engine adds."""
    return replace(base, **IDEAL_COEFFICIENTS, gpu_time_factor=1.0)


def past_floor(base: EngineProfile, row: MeasuredRun, predict) -> str | None:
    """Why no coefficient can meet ``row``: a TPOT (or a batch's latency) measured below what
    its own loop takes under ``floor_profile`` (by more than FLOOR_MARGIN leaves); None when it
    is not, or the floor cannot be simulated (the fit then says why)."""
    try:
        floor = predict(floor_profile(base), row)
    except ValueError:
        return None
    for q in FLOOR_QUANTITIES:
        m = row.measured().get(q)
        if m is None or q not in floor or m >= FLOOR_MARGIN * floor[q]:
            continue
        unit, k = ("s", 1.0) if q == "latency" else ("ms", 1e3)
        return (
            f"{row.describe()}: its measured {q}, {m * k:,.3g} {unit}, is below the "
            f"{floor[q] * k:,.3g} {unit} these GPUs take for it with nothing a real engine "
            "adds (every byte at the full bandwidth, every FLOP at the dense peak), so no "
            "coefficient can meet it. Check that the run kept that many requests in flight, "
            "that its prompts were not served from the prefix cache, and its lengths"
        )
    return None
