"""What a simulated run reports, as vLLM's benchmark names it (benchmarks/benchmark_serving.py):
TTFT = first token - arrival; TPOT = (last token - first token) / (output tokens - 1), per request
with more than one output token; ITL = every gap between two successive tokens of a request;
E2EL = last token - arrival; output tokens/s = all output tokens / (last finish - first arrival);
percentiles with linear interpolation (numpy's default). Tokens/s per user = 1 / median TPOT.
``summarize`` makes the ``SimResult`` of a run from its requests and its ``Tally``."""

from __future__ import annotations

import bisect
import itertools
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from .engine import Setup

BINDING_LIMITS = ("kv_pool", "max_num_seqs", "max_num_batched_tokens", "arrivals")
# ``simulate --json``: the first keys as vLLM's benchmark names its metrics (in seconds), then
# the simulator's own.
CLI_KEYS = tuple(
    """
    ttft_p50_s ttft_mean_s ttft_p99_s tpot_p50_s tpot_mean_s tpot_p99_s itl_p50_s itl_mean_s
    itl_p99_s e2el_p50_s e2el_mean_s duration_s request_throughput output_tokens_per_s
    total_tokens_per_s preemptions kv_utilization_mean max_batch binding_limit
    """.split()
)
SERIES_POINTS = 400  # utilization-over-time samples kept for a chart


def _interpolated(n: int, p: float, at: Callable[[int], float]) -> float:
    """numpy.percentile's default (linear interpolation between closest ranks) of ``n`` values,
    ``at(k)`` the k-th smallest (0-based)."""
    if n == 0:
        return 0.0
    pos = (n - 1) * p / 100.0
    i = int(math.floor(pos))
    if i + 1 >= n:
        return at(n - 1)
    return at(i) + (at(i + 1) - at(i)) * (pos - i)


def percentile_sorted(xs: Sequence[float], p: float) -> float:
    """``percentile(xs, p)`` of values already sorted ascending (several percentiles of one
    list sort it once)."""
    return _interpolated(len(xs), p, xs.__getitem__)


def percentile(values: list[float], p: float, weights: list[int] | None = None) -> float:
    """numpy.percentile's default. With ``weights``, each value counts that many times (values
    sorted ascending)."""
    if weights is None:
        return percentile_sorted(sorted(values), p)
    cum = list(itertools.accumulate(weights))
    return _interpolated(sum(weights), p, lambda k: values[bisect.bisect_right(cum, k)])


@dataclass(frozen=True, kw_only=True)
class SimResult:
    requests: int
    duration_s: float
    output_tokens: int
    prompt_tokens: int
    ttft_mean_s: float
    ttft_p50_s: float
    ttft_p99_s: float
    tpot_mean_s: float
    tpot_p50_s: float
    tpot_p99_s: float
    itl_p50_s: float
    itl_p99_s: float
    itl_mean_s: float
    e2el_mean_s: float
    e2el_p50_s: float
    e2el_p99_s: float
    output_tokens_per_s: float  # the whole deployment (tp GPUs)
    request_throughput: float  # requests / duration
    total_tokens_per_s: float  # (prompt + output tokens) / duration
    output_tokens_per_s_per_gpu: float
    output_tokens_per_s_per_user: float  # 1 / median TPOT
    preemptions: int
    prefix_hit_rate: float
    kv_utilization_mean: float  # blocks held by running requests / usable blocks, time-weighted
    kv_utilization_peak: float
    mean_in_system: float  # time-average of requests arrived and not finished
    max_batch: int
    binding_limit: str
    steps: int
    num_blocks: int
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    tp: int
    kv_dtype: str
    utilization_series: tuple[tuple[float, float], ...] = ()  # (time s, share of blocks used)
    batch_series: tuple[tuple[float, int], ...] = ()  # (time s, running requests)
    ttft_s: tuple[float, ...] = ()  # per request, in arrival order
    e2el_s: tuple[float, ...] = ()
    notes: tuple[str, ...] = ()
    kv_wait_steps: int = 0  # steps in which a waiting request found too few free blocks
    warmup_requests: int = 0  # sent before the first request finished
    ttft_p50_steady_s: float | None = None  # TTFT of the others (None: every request warm-up)
    ttft_p99_steady_s: float | None = None
    ttft_mean_steady_s: float | None = None
    mean_batch: float = 0.0  # running requests, time-weighted over the whole run
    steady_batch: float | None = None  # the same from the first finish to the last admission

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("utilization_series", "batch_series", "ttft_s", "e2el_s"):
            d.pop(k)
        d["notes"] = list(self.notes)
        return d


@dataclass(kw_only=True)
class Tally:
    """What the scheduler counts as it runs: time integrals and peaks, the steps at the peak batch
    by what held it, the ITL gaps, the warm-up's end (first finish) and the last admission."""

    area_used: float = 0.0
    area_in_system: float = 0.0
    area_run: float = 0.0  # time integral of the running batch
    peak_used: int = 0
    max_batch: int = 0
    at_max: dict[str, int] = field(default_factory=dict)
    trace: list[tuple[float, int, int]] = field(default_factory=list)  # (start, used, running)
    itl_steps: list[tuple[float, int]] = field(default_factory=list)  # (step time, decodes)
    itl_extra: list[float] = field(default_factory=list)  # gaps across a preemption
    preemptions: int = 0
    kv_waits: int = 0  # steps in which a request waited for blocks
    hit_tokens: int = 0
    query_tokens: int = 0
    t_first_finish: float = -1.0
    run_at_first_finish: float = 0.0
    t_last_admit: float = -1.0
    run_at_last_admit: float = 0.0
    duration: float = 0.0  # the run's, set at its end
    steps: int = 0

    def peak(self, used: int) -> None:
        if used > self.peak_used:
            self.peak_used = used

    def batch(self, nrun: int, reason: str | None) -> None:
        """A full step ran ``nrun`` requests; ``reason``: what stopped its admissions."""
        if nrun > self.max_batch:
            self.max_batch = nrun
            self.at_max = {}
        if nrun == self.max_batch:
            key = reason or "arrivals"
            self.at_max[key] = self.at_max.get(key, 0) + 1

    def binding(self) -> str:
        """Pool-bound once anything was preempted or waited for blocks (issue 23, finding 13: a
        label from the peak alone hid hundreds of preemptions); else what held the peak batch."""
        if self.preemptions or self.kv_waits:
            return "kv_pool"
        at_max = self.at_max
        return (
            max(at_max, key=lambda k: (at_max[k], -BINDING_LIMITS.index(k)))
            if at_max
            else "arrivals"
        )

    def itl(self) -> tuple[list[float], list[int]]:
        """Every decode token's gap is its step's time; tokens after a preemption add theirs:
        the distinct gaps, ascending, and how many tokens had each."""
        itl = Counter(self.itl_extra)
        for dt, n in self.itl_steps:
            itl[dt] += n
        ivals = sorted(itl)
        return ivals, [itl[v] for v in ivals]


def summarize(
    s: Setup,
    arrival: Sequence[float],
    first: Sequence[float],
    finish: Sequence[float],
    prompt: Sequence[int],
    output: list[int],
    tally: Tally,
) -> SimResult:
    """The run's figures from the requests' times and lengths, by request id (the serving
    stack's time added back to TTFT and E2EL)."""
    nreq, total = len(arrival), s.num_blocks
    duration, steps, api = tally.duration, tally.steps, s.api_overhead_s
    out_tokens = sum(output)
    prompt_tokens = sum(prompt)
    ttft = [f - a + api for a, f in zip(arrival, first)]
    e2el = [e - a + api for a, e in zip(arrival, finish)]
    o = output[0] if nreq else 0
    if o > 1 and output.count(o) == nreq:  # one length (the same quotients, one loop less)
        d = o - 1
        tpots = [(e - f) / d for f, e in zip(first, finish)]
    else:
        tpots = [(e - f) / (o - 1) for f, e, o in zip(first, finish, output) if o > 1]
    ivals, iw = tally.itl()
    # The warm-up: requests sent before the first one finished (a closed loop's users all send
    # at t = 0). The steady figures leave them out.
    t0 = tally.t_first_finish
    steady = [x for a, x in zip(arrival, ttft) if a >= t0] if t0 >= 0 else []
    span = tally.t_last_admit - t0
    steady_batch = (
        (tally.run_at_last_admit - tally.run_at_first_finish) / span
        if t0 >= 0 and span > 0
        else None
    )
    trace = thin(tally.trace)
    # each list sorted once for its percentiles
    by_ttft, by_e2el, by_tpot, by_steady = sorted(ttft), sorted(e2el), sorted(tpots), sorted(steady)
    tpot50 = percentile_sorted(by_tpot, 50) if tpots else 0.0
    return SimResult(
        requests=nreq,
        duration_s=duration,
        output_tokens=out_tokens,
        prompt_tokens=prompt_tokens,
        ttft_mean_s=sum(ttft) / nreq,
        ttft_p50_s=percentile_sorted(by_ttft, 50),
        ttft_p99_s=percentile_sorted(by_ttft, 99),
        tpot_mean_s=sum(tpots) / len(tpots) if tpots else 0.0,
        tpot_p50_s=tpot50,
        tpot_p99_s=percentile_sorted(by_tpot, 99) if tpots else 0.0,
        itl_p50_s=percentile(ivals, 50, iw),
        itl_p99_s=percentile(ivals, 99, iw),
        itl_mean_s=sum(v * c for v, c in zip(ivals, iw)) / sum(iw) if iw else 0.0,
        e2el_mean_s=sum(e2el) / nreq,
        e2el_p50_s=percentile_sorted(by_e2el, 50),
        e2el_p99_s=percentile_sorted(by_e2el, 99),
        output_tokens_per_s=out_tokens / duration,
        request_throughput=nreq / duration,
        total_tokens_per_s=(out_tokens + prompt_tokens) / duration,
        output_tokens_per_s_per_gpu=out_tokens / duration / (s.tp * s.dp),
        output_tokens_per_s_per_user=1.0 / tpot50 if tpot50 else 0.0,
        preemptions=tally.preemptions,
        prefix_hit_rate=tally.hit_tokens / tally.query_tokens if tally.query_tokens else 0.0,
        kv_utilization_mean=tally.area_used / total / duration,
        kv_utilization_peak=tally.peak_used / total,
        mean_in_system=tally.area_in_system / duration,
        max_batch=tally.max_batch,
        binding_limit=tally.binding(),
        steps=steps,
        num_blocks=total,
        block_size=s.block_size,
        max_num_seqs=s.max_num_seqs,
        max_num_batched_tokens=s.max_num_batched_tokens,
        tp=s.tp,
        kv_dtype=s.kv_dtype,
        utilization_series=tuple((x, u / total) for x, u, _ in trace),
        batch_series=tuple((x, n) for x, _, n in trace),
        ttft_s=tuple(ttft),
        e2el_s=tuple(e2el),
        notes=s.notes,
        kv_wait_steps=tally.kv_waits,
        warmup_requests=nreq - len(steady),
        ttft_p50_steady_s=percentile_sorted(by_steady, 50) if steady else None,
        ttft_p99_steady_s=percentile_sorted(by_steady, 99) if steady else None,
        ttft_mean_steady_s=sum(steady) / len(steady) if steady else None,
        mean_batch=tally.area_run / duration,
        steady_batch=steady_batch,
    )


def thin(points: list, n: int = SERIES_POINTS) -> list:
    """At most about ``n`` of ``points``, evenly strided, the last one kept."""
    if len(points) <= n:
        return points
    stride = len(points) / n
    return [points[int(i * stride)] for i in range(n)] + [points[-1]]
