"""The serving simulator for the pages: setups built from the sidebar's selection, one change
applied for an overlay, and frontier sweeps cached per input (kvcalc.perf.sim and
kvcalc.perf.capacity do the work)."""

from __future__ import annotations

from dataclasses import dataclass

from kvcalc.cache.deployment import Deployment
from kvcalc.config.catalog import GPU, registry
from kvcalc.perf.calibration import StepModel
from kvcalc.perf.capacity import RunningCapacity, frontier_users, requests_for, running_capacity
from kvcalc.perf.engines import resolve
from kvcalc.perf.sim import (
    Dist,
    SimResult,
    Speed,
    Workload,
    estimated_steps,
    fixed,
    lognormal,
    setup,
    simulate,
)

from .memo import LARGE_ENTRY_BYTES, LARGE_MEMO_BYTES, memo

MAX_STEPS = 300_000  # per curve and its onset search: about two seconds of simulation
OVERLAYS = {
    "none": "nothing",
    "fp8": "FP8 KV cache",
    "mha": "MHA: one K/V head per query head",
    "prefix": "a shared system prompt (half of each prompt) with prefix caching",
    "tp2": "tensor parallel 2",
    "gpu": "a larger GPU",
}
# Request lengths: every request alike, or log-normal around the chosen lengths (median), clipped
# to 4 x the median, so that requests do not all reach their longest at once.
LENGTHS = {
    "fixed": "every request the same",
    "lognormal-0.5": "log-normal, sigma 0.5",
    "lognormal-1": "log-normal, sigma 1",
}
CLIP = 4  # a log-normal length is clipped to CLIP x its median


def overlay_label(key: str) -> str:
    return OVERLAYS.get(key, str(key))


def lengths_label(key: str) -> str:
    return LENGTHS.get(key, str(key))


def larger_gpu(gpu: GPU) -> GPU:
    """The registry GPU with the next larger memory (the largest one stays itself)."""
    bigger = [g for g in registry().gpus.values() if g.memory_bytes > gpu.memory_bytes]
    return min((g for g in bigger if g.bf16_tflops), key=lambda g: g.memory_bytes, default=gpu)


def lengths(kind: str, prompt: int, output: int) -> tuple[Dist, Dist]:
    """The prompt and output length distributions for a LENGTHS key."""
    if kind == "fixed":
        return fixed(prompt, "prompt tokens"), fixed(output, "output tokens")
    sigma = float(kind.split("-", 1)[1])
    return (
        lognormal(prompt, sigma, CLIP * prompt, what="prompt tokens"),
        lognormal(output, sigma, CLIP * output, lo=2, what="output tokens"),
    )


@dataclass(frozen=True)
class Frontier:
    capacity: RunningCapacity  # vLLM's logged worst case, the onset, the sustained batch
    users: tuple[int, ...]  # one simulated run per count, densest where the pool binds
    results: tuple[SimResult, ...]


def _setup(inputs: tuple, longest: int, max_num_seqs: int | None, pool: tuple = (), engine=None):
    """The simulator's setup for ``inputs`` = (spec, weights, gpu, kv_dtype, tp, speed);
    ``pool`` = (gpu_mem_util, reserve_bytes, block_size) when a page has its own (the Budget's
    inputs: vLLM's arithmetic), else the lab's defaults; ``engine`` ("sglang@0.5.9"): that
    engine's pool and batching defaults, as ``simulate --engine`` runs them (the ideal bound
    beside a profile's curve keeps the profile's pool)."""
    spec, w, gpu, kv_dtype, tp, speed = inputs
    kw = dict(zip(("gpu_memory_utilization", "reserve_bytes", "block_size"), pool))
    dep = Deployment(spec=spec, gpu=gpu, weights=w, tp=tp)
    dep = dep.but(kv_dtype=kv_dtype, max_num_seqs=max_num_seqs, **kw)
    if pool or not engine:
        return setup(dep, longest, Speed.of(gpu, w.dtype, speed))
    dep, pool_bytes = resolve(engine)[0].serve(dep)
    attention = gpu.attention_tflops(kv_dtype)  # attention in the cache's format, as simulate's
    return setup(
        dep,
        longest,
        Speed.of(gpu, w.dtype, speed, attention_peak_tflops=attention),
        kv_pool_bytes=pool_bytes,
    )


# Kept by webui.memo, not cache_data (which would unpickle every run on every rerun) nor
# cache_resource (which hashed the whole model spec on every call: a fifth of a Budget rerun).
SIMULATING = "Simulating the serving engine..."


@memo(24, spinner=SIMULATING, entry_bytes=LARGE_ENTRY_BYTES, own_bytes=LARGE_MEMO_BYTES)
def frontier(
    spec,
    w,
    gpu: GPU,
    kv_dtype: str,
    tp: int,
    speed: StepModel,
    prompt: int,
    output: int,
    share: float,
    max_num_seqs: int | None,
    kind: str = "fixed",
    engine: str | None = None,
) -> Frontier:
    """Where the pool starts to bind (kvcalc.perf.capacity.running_capacity), then one closed-loop
    run per user count of frontier_users: powers of two and densely around the onset.
    ``engine``: whose pool and batching defaults (``_setup``)."""
    p, o = lengths(kind, prompt, output)
    s = _setup((spec, w, gpu, kv_dtype, tp, speed), p.hi + o.hi, max_num_seqs, engine=engine)
    cap = running_capacity(s, p, o, prefix_share=share, max_steps=MAX_STEPS)
    users = frontier_users(cap)
    loads = {
        u: Workload(
            requests=requests_for(u), prompt=p, output=o, users=u, prefix_share=share, seed=0
        )
        for u in users
    }
    known = dict(cap.runs)
    steps = sum(estimated_steps(s, wl) for u, wl in loads.items() if u not in known)
    if steps > MAX_STEPS:
        raise ValueError(
            f"This sweep would simulate about {steps:,} engine steps, more than the "
            f"{MAX_STEPS:,} a page may ask for (several seconds of work). Shorten "
            "the output or the prompt, or pick a setup whose pool holds more "
            "requests."
        )
    results = tuple(known[u] if u in known else simulate(s, loads[u], series=False) for u in users)
    return Frontier(capacity=cap, users=users, results=results)


@memo(24, spinner=SIMULATING, entry_bytes=LARGE_ENTRY_BYTES, own_bytes=LARGE_MEMO_BYTES)
def one_run(
    spec,
    w,
    gpu: GPU,
    kv_dtype: str,
    tp: int,
    speed: StepModel,
    prompt: int,
    output: int,
    share: float,
    max_num_seqs: int | None,
    kind: str,
    users: int,
    engine: str | None = None,
) -> SimResult:
    """One closed loop of ``users``, with its utilization and batch over time (``engine``: as
    ``frontier``'s)."""
    p, o = lengths(kind, prompt, output)
    s = _setup((spec, w, gpu, kv_dtype, tp, speed), p.hi + o.hi, max_num_seqs, engine=engine)
    wl = Workload(
        requests=requests_for(users), prompt=p, output=o, users=users, prefix_share=share, seed=0
    )
    if estimated_steps(s, wl) > MAX_STEPS:
        raise ValueError(
            f"{users:,} users would take more than {MAX_STEPS:,} engine steps to "
            "simulate; pick fewer users or shorter requests"
        )
    return simulate(s, wl)


@memo(24, spinner=SIMULATING, entry_bytes=LARGE_ENTRY_BYTES, own_bytes=LARGE_MEMO_BYTES)
def capacity(
    spec,
    w,
    gpu: GPU,
    kv_dtype: str,
    tp: int,
    speed: StepModel,
    prompt: int,
    output: int,
    pool: tuple = (),
) -> RunningCapacity:
    """Logged vs running capacity for requests of ``prompt`` + ``output`` tokens on the
    Budget's pool (kvcalc.perf.capacity.running_capacity)."""
    s = _setup((spec, w, gpu, kv_dtype, tp, speed), prompt + output, None, pool)
    return running_capacity(s, prompt, output, max_steps=MAX_STEPS)
