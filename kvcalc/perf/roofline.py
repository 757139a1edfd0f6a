"""Decode step time, the crossover context, prefill time, and cache-versus-recompute arithmetic,
per GPU under tensor parallelism (pipeline stages do not shorten a step). Decode is bandwidth
bound: each step reads every (touched) weight once and the whole cache of every sequence
(docs/formulas.md#decode-step-and-the-crossover); prefill is compute bound: 2 x active params
FLOPs per prompt token plus attention, at a stated MFU of the dense peak
(docs/formulas.md#prefill-and-work-without-a-cache). ``attention_flops`` is the one count of
attention FLOPs every page and the simulator use, MLA absorbed at decode as vLLM computes it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..cache.deployment import Deployment
from ..cache.kv import sequence_bytes, stage_layers
from ..config.limits import MAX_CONTEXT
from ..core.arith import UNBOUNDED_CONTEXT, first_true
from ..core.dtypes import KV_DTYPES, get_dtype
from ..core.model import ChunkedLocal, Layer, ModelSpec, counted
from ..core.units import GB, check_float, check_int, check_parallel

DEFAULT_MFU = 0.5  # a well-tuned prefill reaches roughly half of dense peak; a stated assumption


@dataclass(frozen=True, kw_only=True)
class StepTime:
    context: int
    batch: int
    bandwidth_gbs: float
    weight_read_bytes: int
    kv_read_bytes: int
    state_read_bytes: int
    # The ideal bound: max(the bytes at the full bandwidth, the FLOPs at the full dense peak)
    step_time_s: float
    tokens_per_s: float
    crossover_context: int | None  # None: the cache never outweighs the weights (bounded layers)
    kv_share: float  # fraction of the step spent reading the cache
    # 2 x batch x active params / the GEMM peak + the step's attention FLOPs / the attention
    # peak, when the peaks are known
    compute_time_s: float | None
    bound: str  # "memory" or "compute"
    memory_time_s: float  # the bytes alone at the full bandwidth
    # the GEMMs' part of compute_time_s (2 x batch x active params / the GEMM peak); None with it
    gemm_time_s: float | None = None
    # the routed experts' part of weight_read_bytes (the experts the batch touches, per GPU;
    # 0 for a dense model or weights given as one number): an engine reads them at its own share
    expert_read_bytes: int = 0
    # ... and the routed experts' part of gemm_time_s (2 x batch x the experts a token uses)
    expert_gemm_time_s: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


def decode_span(context: int, queries: int = 1) -> tuple[int, int]:
    """The positions a decode step computes, as (start, end) for ``attention_flops``: the
    ``queries`` new tokens (more than one: speculative decoding or multi-token prediction) of a
    sequence whose first new token is its ``context``-th (attending to ``context`` tokens)."""
    start = max(context - 1, 0)
    return start, start + queries


def attention_flops(spec: ModelSpec, start: int, end: int, *, decode: bool, tp: int = 1) -> float:
    """Attention FLOPs of one sequence's tokens at positions start + 1 .. end, over every layer,
    per GPU at tensor parallel ``tp``, computed as prefill does or as a decode step does
    (``decode``; only MLA differs, absorbed at decode)."""
    return sum(lay.attention_flops(start, end, decode) for lay in spec.layers) / tp


def per_gpu_layers(spec: ModelSpec, tp: int) -> list[Layer]:
    """The layers one GPU at tensor parallel ``tp`` computes, every stage's in turn."""
    return [lay for stage in stage_layers(spec, tp, 1) for lay in stage]


def _read_bytes(layers, n: int, dtype, scales: bool) -> int:
    """Cache bytes one decode step reads for one sequence at context n: every layer's own cache,
    and a shared-KV layer's source cache once more."""
    return sum(count * lay.read_bytes(n, dtype, scales) for lay, count in counted(layers))


def crossover_context(
    spec: ModelSpec,
    weight_read_bytes: int,
    batch: int = 1,
    kv_dtype: str = "bf16",
    *,
    scales: bool = False,
    tp: int = 1,
) -> int | None:
    """Smallest context N at which reading the batch's cache costs at least as much as reading
    the weights (``weight_read_bytes`` of the whole model, per step); None when it never does
    (every layer keeps a bounded number of tokens). With ``tp`` both sides are one GPU's share."""
    batch = check_int("batch", batch, 1, 10**9)
    dtype = get_dtype(kv_dtype, KV_DTYPES)
    layers = per_gpu_layers(spec, tp)
    target = math.ceil(weight_read_bytes / tp)

    def kv(n):
        return batch * _read_bytes(layers, n, dtype, scales)

    chunks = {lay.chunk for lay in layers if isinstance(lay, ChunkedLocal)}
    if len(chunks) == 1:  # chunked reads rise through each chunk and drop at the next
        return _chunked_crossover(kv, target, chunks.pop())
    if kv(UNBOUNDED_CONTEXT) < target:
        return None
    if kv(0) >= target:
        return 0
    return first_true(lambda n: kv(n) >= target, 0, UNBOUNDED_CONTEXT)


def _chunked_crossover(kv, target: int, chunk: int) -> int | None:
    """``crossover_context`` where chunked layers read their chunk so far: within a chunk the
    reads rise with the context, and at a chunk's last token they are the most that chunk
    reads, rising from chunk to chunk. So the first context that reaches ``target`` is in the
    first chunk whose last token does (by bisection over chunks), then within it."""
    if kv(0) >= target:
        return 0
    last = UNBOUNDED_CONTEXT // chunk
    if kv(last * chunk) < target:
        return None
    k = first_true(lambda k: kv(k * chunk) >= target, 0, last)  # the first chunk that reaches
    lo = (k - 1) * chunk  # its first context is lo + 1, where not kv(lo) >= target ...
    if kv(lo + 1) >= target:
        return lo + 1
    return first_true(lambda n: kv(n) >= target, lo + 1, k * chunk)


def _peaks(peak: float, attention: float | None) -> tuple[float, float]:
    """The GEMMs' dense peak and attention's (the GEMMs' when not given), checked."""
    peak = check_float("peak TFLOPS", peak, 0.0, 1e6, lo_open=True)
    if attention is None:
        return peak, peak
    return peak, check_float("attention peak TFLOPS", attention, 0.0, 1e6, lo_open=True)


def step_time(
    dep: Deployment,
    *,
    context: int,
    batch: int,
    bandwidth_gbs: float | None = None,
    peak_tflops: float | None = None,
    attention_tflops: float | None = None,
    find_crossover: bool = True,
) -> StepTime:
    """One decode step of ``batch`` sequences that each hold ``context`` tokens, on ``dep``
    (its model, weights, cache format, tp and pp) at ``bandwidth_gbs`` (its GPU's when None).

    ``peak_tflops`` is the GEMMs' dense peak, ``attention_tflops`` attention's (``peak_tflops``
    when not given): the compute time, which only says whether the step is compute bound, is
    the FLOPs of each over its peak; None: no compute time.

    Weights given as one number (``dep.weights_bytes``, whole model) are read whole each step.
    ``find_crossover=False`` skips the crossover search (crossover_context None)."""
    spec, tp = dep.spec, dep.tp
    context = check_int("context", context, 0, 10**9)
    batch = check_int("batch", batch, 1, 10**7)
    if bandwidth_gbs is None:
        if dep.gpu is None:
            raise ValueError("no GPU and no bandwidth: give a GPU or its bandwidth")
        bandwidth_gbs = dep.gpu.bandwidth_gbs
    bandwidth_gbs = check_float("bandwidth (GB/s)", bandwidth_gbs, 0.0, 1e7, lo_open=True)
    kv_dtype, scales = dep.cache.kv_dtype, dep.cache.scales
    dtype = get_dtype(kv_dtype, KV_DTYPES)
    sdtype = dep.cache.state
    stage_layers(spec, tp, dep.pp)  # validates the split
    layers = per_gpu_layers(spec, tp)  # a token passes every stage in turn
    # Each tensor-parallel GPU reads 1/tp of the weights; the pipeline stages take turns.
    expert_read = 0
    if dep.weights_bytes is not None:
        weight_read_bytes = dep.weights_bytes
    else:
        assert dep.weights is not None, "a deployment without weights: give their bytes"
        weight_read_bytes = dep.weights.read_per_step(spec, batch)
        expert_read = math.ceil(dep.weights.experts_read_per_step(spec, batch) / tp)
    weight_read = math.ceil(weight_read_bytes / tp)
    kv_read = batch * _read_bytes(layers, context, dtype, scales)
    state_read = batch * sum(count * lay.state_bytes(sdtype) for lay, count in counted(layers))
    total = weight_read + kv_read + state_read
    t = total / (bandwidth_gbs * GB)
    compute = gemm = None
    expert_gemm = 0.0
    bound = "memory"
    if peak_tflops and spec.params is not None:  # compute needs the parameter count
        peak_tflops, attention_tflops = _peaks(peak_tflops, attention_tflops)
        start, end = decode_span(context)
        linear = 2 * batch * spec.active_params / tp
        attn = batch * attention_flops(spec, start, end, decode=True, tp=tp)
        gemm = linear / (peak_tflops * 1e12)
        if spec.moe is not None:
            routed = spec.moe.layers * spec.moe.top_k * spec.moe.expert_params
            expert_gemm = 2 * batch * routed / tp / (peak_tflops * 1e12)
        compute = gemm + attn / (attention_tflops * 1e12)
        if compute > t:
            bound = "compute"
    return StepTime(
        context=context,
        batch=batch,
        bandwidth_gbs=bandwidth_gbs,
        weight_read_bytes=weight_read,
        kv_read_bytes=kv_read,
        state_read_bytes=state_read,
        step_time_s=max(t, compute or 0.0),
        tokens_per_s=batch / max(t, compute or 0.0),
        crossover_context=crossover_context(
            spec, weight_read_bytes, batch, kv_dtype, scales=scales, tp=tp
        )
        if find_crossover
        else None,
        kv_share=kv_read / total if total else 0.0,
        compute_time_s=compute,
        bound=bound,
        memory_time_s=t,
        gemm_time_s=gemm,
        expert_read_bytes=min(expert_read, weight_read),
        expert_gemm_time_s=expert_gemm,
    )


@dataclass(frozen=True, kw_only=True)
class Prefill:
    prompt_tokens: int
    linear_flops: float  # 2 x active params x tokens
    attention_flops: float
    flops: float
    peak_tflops: float
    mfu: float
    time_s: float  # time to first token, one request on an idle GPU: max(compute, memory)
    compute_time_s: float = 0.0  # FLOPs / (peak x MFU)
    memory_time_s: float = 0.0  # weight bytes read once / bandwidth (0 when not given)
    bound: str = "compute"

    def to_dict(self) -> dict:
        return asdict(self)


def prefill(
    spec: ModelSpec,
    prompt_tokens: int,
    peak_tflops: float,
    *,
    mfu: float = DEFAULT_MFU,
    tp: int = 1,
    weight_read_bytes: int | None = None,
    bandwidth_gbs: float | None = None,
    attention_tflops: float | None = None,
) -> Prefill:
    """Time to first token of one request on an idle GPU: max(FLOPs / (peak x MFU), weight bytes
    / bandwidth) with ``weight_read_bytes`` (whole model) and ``bandwidth_gbs`` (a forward pass
    reads every weight it uses), else the FLOPs alone. ``peak_tflops`` is the GEMMs' dense peak,
    ``attention_tflops`` attention's (``peak_tflops`` when not given), both at the same MFU."""
    p = check_int("prompt tokens", prompt_tokens, 1, MAX_CONTEXT)
    peak_tflops, attention_tflops = _peaks(peak_tflops, attention_tflops)
    mfu = check_float("MFU", mfu, 0.0, 1.0, lo_open=True)
    tp, _ = check_parallel(tp)
    linear = 2.0 * spec.active_params * p
    attn = attention_flops(spec, 0, p, decode=False)
    flops = linear + attn
    compute = (linear / (peak_tflops * 1e12 * mfu) + attn / (attention_tflops * 1e12 * mfu)) / tp
    memory = 0.0
    if weight_read_bytes is not None and bandwidth_gbs is not None:
        weight_read_bytes = check_int("weight bytes", weight_read_bytes, 0, 2**60)
        bandwidth_gbs = check_float("bandwidth (GB/s)", bandwidth_gbs, 0.0, 1e7, lo_open=True)
        memory = weight_read_bytes / tp / (bandwidth_gbs * GB)
    return Prefill(
        prompt_tokens=p,
        linear_flops=linear,
        attention_flops=attn,
        flops=flops,
        peak_tflops=peak_tflops,
        mfu=mfu,
        time_s=max(compute, memory),
        compute_time_s=compute,
        memory_time_s=memory,
        bound="memory" if memory > compute else "compute",
    )


def token_passes(new_tokens: int, prompt_tokens: int = 0) -> dict:
    """Token passes through the network for a prompt and ``new_tokens`` decode steps.

    With a cache the prompt goes through once (prefill) and each step adds one token: P + N.
    Without one, step i runs the whole sequence so far again, P + i tokens:
    P + sum_{i=1..N} (P + i) = P(N + 1) + N(N + 1)/2, which is N(N + 1)/2 against N when P = 0.
    """
    n = check_int("new tokens", new_tokens, 0, 10**9)
    p = check_int("prompt tokens", prompt_tokens, 0, 10**9)
    with_cache = p + n
    without = p * (n + 1) + n * (n + 1) // 2
    return {
        "with_cache": with_cache,
        "without_cache": without,
        "ratio": without / with_cache if with_cache else 1.0,
    }


@dataclass(frozen=True, kw_only=True)
class Offload:
    prefix_tokens: int
    kv_bytes: int
    link_gbs: float
    reload_s: float
    recompute_s: float
    offload_wins: bool
    break_even_tokens: int | None  # shortest prefix for which reloading beats recomputing

    def to_dict(self) -> dict:
        return asdict(self)


def offload_vs_recompute(
    spec: ModelSpec,
    prefix_tokens: int,
    *,
    link_gbs: float,
    peak_tflops: float,
    kv_dtype: str = "bf16",
    mfu: float = DEFAULT_MFU,
    tp: int = 1,
    fixed_s: float = 0.0,
) -> Offload:
    """Is reloading a cached prefix over a link (PCIe, NVLink-C2C) faster than recomputing it?
    ``fixed_s``: a fixed cost per reload (finding the blocks, issuing and waiting for the copy)."""
    link_gbs = check_float("link bandwidth (GB/s)", link_gbs, 0.0, 1e6, lo_open=True)
    fixed_s = check_float("fixed reload cost (s)", fixed_s, 0.0, 3600.0)
    dtype = get_dtype(kv_dtype, KV_DTYPES)
    layers = per_gpu_layers(spec, tp)

    def reload(n):
        return fixed_s + sequence_bytes(layers, n, dtype, False) / (link_gbs * GB)

    def recompute(n):
        return prefill(spec, n, peak_tflops, mfu=mfu, tp=tp).time_s

    n = check_int("prefix tokens", prefix_tokens, 1, MAX_CONTEXT)
    r, c = reload(n), recompute(n)
    # Recompute grows at least as fast as reload (attention adds a quadratic term), so once
    # reloading wins it keeps winning: search the smallest prefix where it does.
    break_even = None
    hi = MAX_CONTEXT
    if reload(hi) < recompute(hi):
        if reload(1) < recompute(1):
            break_even = 1
        else:
            break_even = first_true(lambda m: reload(m) < recompute(m), 1, hi)
    return Offload(
        prefix_tokens=n,
        kv_bytes=sequence_bytes(layers, n, dtype, False),
        link_gbs=link_gbs,
        reload_s=r,
        recompute_s=c,
        offload_wins=r < c,
        break_even_tokens=break_even,
    )
