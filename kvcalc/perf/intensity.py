"""Arithmetic intensity (FLOPs per byte) of prefill, decode and attention alone: the roofline
(Williams, Waterman and Patterson, "Roofline", CACM 2009): F FLOPs moving B bytes run at
min(peak, (F / B) x bandwidth). A step's GEMMs and its attention each have their own roof
(``Roofs``: the weights' format, the format attention computes in over the cache). The F and B of
each case: docs/formulas.md#arithmetic-intensity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..cache.deployment import CacheFormat, Deployment
from ..cache.weight_bytes import Weights
from ..config.catalog import GPU
from ..config.limits import MAX_CONTEXT
from ..core.dtypes import KV_DTYPES, get_dtype
from ..core.model import ModelSpec
from ..core.units import GB, check_float, check_int
from .roofline import attention_flops, decode_span, per_gpu_layers


@dataclass(frozen=True, kw_only=True)
class Point:
    label: str
    flops: float  # per GPU
    bytes: float  # per GPU
    formula: str  # with the values substituted
    # Which roof bounds it ("gemm", "attention"), or None for a mix of both, drawn at the time
    # the page states for it (``time_s``).
    roof: str | None = None
    time_s: float | None = None

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes

    @property
    def achieved_tflops(self) -> float | None:
        """FLOPs over the stated time, in TFLOP/s (None without a time)."""
        return self.flops / self.time_s / 1e12 if self.time_s else None


_NAMES = {"fp32": "FP32", "bf16": "BF16", "fp16": "FP16", "fp8": "FP8"}


@dataclass(frozen=True, kw_only=True)
class Roofs:
    """The two roofs of one GPU for a choice of formats: the GEMMs' (the weights' format) and
    attention's (the format its kernels compute in over the cache), with the bandwidth."""

    gemm_format: str
    gemm_tflops: float
    attention_format: str
    attention_tflops: float
    bandwidth_gbs: float
    assumptions: tuple[str, ...] = ()

    @property
    def gemm_ridge(self) -> float:
        return ridge_point(self.gemm_tflops, self.bandwidth_gbs)

    @property
    def attention_ridge(self) -> float:
        return ridge_point(self.attention_tflops, self.bandwidth_gbs)

    @property
    def one_roof(self) -> bool:
        return self.gemm_tflops == self.attention_tflops

    def name(self, which: str) -> str:
        return _NAMES[self.gemm_format if which == "gemm" else self.attention_format]

    def time(self, flops: float, nbytes: float, which: str) -> float:
        """max(FLOPs / peak, bytes / bandwidth) under the roof ``which`` ("gemm", "attention")."""
        peak = self.gemm_tflops if which == "gemm" else self.attention_tflops
        return max(flops / (peak * 1e12), nbytes / (self.bandwidth_gbs * GB))


def roofs(gpu: GPU, weight_dtype: str, kv_dtype: str, bandwidth_gbs: float) -> Roofs:
    """The roofs of ``gpu`` for weights in ``weight_dtype`` and a cache in ``kv_dtype``, at
    ``bandwidth_gbs`` (the achieved share applied); ValueError when a peak is not known."""
    bandwidth_gbs = check_float("bandwidth (GB/s)", bandwidth_gbs, 0.0, 1e7, lo_open=True)
    g, a = gpu.gemm_format(weight_dtype), gpu.attention_format(kv_dtype)
    peaks: dict[str, float] = {}
    for fmt, what in ((g, f"{weight_dtype.upper()} weights"), (a, f"a {kv_dtype.upper()} cache")):
        peak = gpu.tflops(fmt)
        if peak is None:
            raise ValueError(
                f"{gpu.name} has no known dense {_NAMES[fmt]} peak, which "
                f"{what} compute in; pick a registry GPU or other formats"
            )
        peaks[fmt] = peak
    notes = [
        f"GEMMs of {weight_dtype.upper()} weights run in {_NAMES[g]}"
        + {
            "fp32": " on the FP32 units (TF32 off, PyTorch's default for matrix multiplies)",
            "fp8": " (8-bit weights and activations)",
        }.get(g, "")
        + (
            "; 4-bit weights are dequantised to 16 bits for the multiply"
            if weight_dtype in ("int4", "mxfp4")
            else ""
        )
    ]
    if kv_dtype == "fp8" and a == "fp8":
        notes.append(
            "attention over an FP8 cache computes in FP8 on this GPU (vLLM's "
            "FlashAttention 3 and FlashMLA quantise the queries too)"
        )
    elif kv_dtype in ("fp8", "int8", "int4"):
        notes.append(
            f"attention over a {kv_dtype.upper()} cache computes in {_NAMES[a]}: the "
            "cache is dequantised as it is read"
        )
    else:
        notes.append(f"attention computes in {_NAMES[a]}, the cache's format")
    return Roofs(
        gemm_format=g,
        gemm_tflops=peaks[g],
        attention_format=a,
        attention_tflops=peaks[a],
        bandwidth_gbs=bandwidth_gbs,
        assumptions=tuple(notes),
    )


def ridge_point(peak_tflops: float, bandwidth_gbs: float) -> float:
    """FLOPs per byte at which compute and memory take the same time."""
    return peak_tflops * 1e12 / (bandwidth_gbs * 1e9)


def prefill_point(
    spec: ModelSpec,
    w: Weights,
    prompt: int,
    *,
    kv_dtype: str = "bf16",
    tp: int = 1,
    time_s: float | None = None,
) -> Point:
    """Prefill of ``prompt`` tokens, per GPU; ``time_s``: the time to first token the page
    states, to draw it where that time puts it."""
    p = check_int("prompt tokens", prompt, 1, MAX_CONTEXT)
    dtype = get_dtype(kv_dtype, KV_DTYPES)
    lin = 2.0 * spec.active_params * p / tp
    attn = attention_flops(spec, 0, p, decode=False, tp=tp)
    wb = w.read_per_step(spec, p) / tp
    kv = sum(lay.read_bytes(p, dtype) for lay in per_gpu_layers(spec, tp))
    return _both(f"prefill {p:,} tokens", "prefill", lin, attn, wb, kv, time_s)


def _both(label: str, what: str, lin: float, attn: float, wb: float, kv: int, time_s) -> Point:
    """A step's GEMMs and attention as one point."""
    return Point(
        label=label,
        flops=lin + attn,
        bytes=wb + kv,
        time_s=time_s,
        formula=(
            f"{what}: ({lin:.3e} + {attn:.3e} attention) FLOPs / "
            f"({wb:,.0f} B weights + {kv:,} B KV) = "
            f"{(lin + attn) / (wb + kv):,.1f} FLOP/B"
        ),
    )


@dataclass(frozen=True, kw_only=True)
class DecodeStep:
    """One decode step split into its GEMMs and its attention, each under its own roof, and
    the whole step; ``time_s`` is the ideal time, the sum of the two parts' times."""

    batch: int
    context: int
    queries: int
    gemm: Point
    attention: Point
    whole: Point
    gemm_time_s: float
    attention_time_s: float
    gemm_bound: str  # "memory" or "compute", under its own roof
    attention_bound: str

    @property
    def time_s(self) -> float:
        return self.gemm_time_s + self.attention_time_s


def decode_step(
    dep: Deployment, r: Roofs, *, batch: int, context: int, queries: int = 1
) -> DecodeStep:
    """A decode step of ``batch`` sequences at ``context`` tokens, each computing ``queries``
    new tokens (speculative decoding or multi-token prediction when more than 1), per GPU of
    ``dep`` (its weights, KV format, state format and tensor parallel size)."""
    spec, w, tp = dep.spec, dep.weights, dep.tp
    if w is None:
        raise ValueError(f"{spec.name}: the decode step's GEMMs need the weights")
    b = check_int("batch", batch, 1, 10**7)
    c = check_int("context", context, 1, 10**9)
    q = check_int("query tokens per step", queries, 1, 1024)
    dtype = get_dtype(dep.cache.kv_dtype, KV_DTYPES)
    sdtype = dep.cache.state
    layers = per_gpu_layers(spec, tp)
    lin = 2.0 * spec.active_params * b * q / tp
    wb = math.ceil(w.read_per_step(spec, b * q) / tp)
    start, end = decode_span(c, q)
    attn = b * attention_flops(spec, start, end, decode=True, tp=tp)
    kv = b * sum(lay.read_bytes(c + q - 1, dtype) + lay.state_bytes(sdtype) for lay in layers)
    tag = f"b={b:,}" + (f", {q} query tokens" if q > 1 else "")

    def part(what: str, flops: float, nbytes: int, roof: str, read: str) -> Point:
        return Point(
            label=f"decode {what}, batch {b:,}",
            flops=flops,
            bytes=nbytes,
            roof=roof,
            formula=f"decode {what} {tag}: {flops:.3e} FLOPs / {nbytes:,} B {read} = "
            f"{flops / nbytes:,.1f} FLOP/B",
        )

    gemm = part("GEMMs", lin, wb, "gemm", "weights")
    at = part("attention", attn, kv, "attention", "KV")
    tg, ta = r.time(lin, wb, "gemm"), r.time(attn, kv, "attention")
    bps = r.bandwidth_gbs * GB
    whole = _both(f"decode, batch {b:,}", f"decode {tag}", lin, attn, wb, kv, tg + ta)
    return DecodeStep(
        batch=b,
        context=c,
        queries=q,
        gemm=gemm,
        attention=at,
        whole=whole,
        gemm_time_s=tg,
        attention_time_s=ta,
        gemm_bound="compute" if tg > wb / bps else "memory",
        attention_bound="compute" if ta > kv / bps else "memory",
    )


def decode_point(
    spec: ModelSpec,
    w: Weights,
    *,
    batch: int,
    context: int,
    kv_dtype: str = "bf16",
    tp: int = 1,
    queries: int = 1,
) -> Point:
    """The whole decode step as one point (FLOPs and bytes of both parts), per GPU."""
    one = Roofs(
        gemm_format="bf16",
        gemm_tflops=1.0,
        attention_format="bf16",
        attention_tflops=1.0,
        bandwidth_gbs=1.0,
    )  # no time needed here
    dep = Deployment(spec=spec, weights=w, tp=tp, cache=CacheFormat(kv_dtype=kv_dtype))
    s = decode_step(dep, one, batch=batch, context=context, queries=queries)
    return replace(s.whole, time_s=None)


def gqa_heads(q_heads: int, kv_heads: int | None) -> int | None:
    """The KV heads of the grouped-query variant the page compares: the model's own when it is
    grouped (1 < kv_heads < q_heads), else the most, at most 8, that divide the query heads
    evenly (12 heads: 6); None when none does (a prime head count such as Falcon-7B's 71)."""
    if kv_heads and 1 < kv_heads < q_heads:
        return kv_heads
    fits = [d for d in range(2, min(q_heads, 9)) if q_heads % d == 0]
    return max(fits) if fits else None


def attention_points(
    spec: ModelSpec,
    *,
    kv_dtype: str = "bf16",
    context: int = 8192,
    queries: int = 1,
    rank: int = 512,
    rope: int = 64,
) -> list[Point]:
    """Attention alone for one sequence's decode step at ``context`` (``queries`` query tokens),
    in one layer shaped like the model's first attention layer (h query heads of d_k, d_v):
    MHA, GQA (``gqa_heads``; left out when h has no divisor to group by), MQA, and MLA absorbed
    with a latent of ``rank`` + ``rope`` (DeepSeek-V3's 512 + 64), each labelled by what it is."""
    c = check_int("context", context, 1, 10**9)
    q = check_int("query tokens per step", queries, 1, 1024)
    dtype = get_dtype(kv_dtype, KV_DTYPES)
    e = dtype.bits / 8
    layer = next((lay for lay in spec.layers if lay.q_heads and lay.stores_tokens), None)
    if layer is None:
        raise ValueError(f"{spec.name} has no attention layer that keeps a cache")
    h, dk, dv = layer.q_heads, layer.qk_dim, layer.av_dim
    start, end = decode_span(c, q)
    n = c + q - 1  # cached tokens the step reads, its new ones included
    mha = layer.as_mha()
    grouped = gqa_heads(h, getattr(layer, "kv_heads", None))
    variants = (
        [("MHA", h)] + ([(f"GQA, {grouped} KV heads", grouped)] if grouped else []) + [("MQA", 1)]
    )
    qx = f"{q} x " if q > 1 else ""
    out = []
    for name, heads in variants + [("MLA (absorbed)", 0)]:
        v = mha.with_kv_heads(heads) if heads else layer.as_latent(rank, rope)
        f, b = v.attention_flops(start, end, decode=True), v.read_bytes(n, dtype)
        formula = (
            f"{name}: {qx}2 x {h} x ({dk} + {dv}) x c / ({heads} x ({dk} + {dv}) x c x {e:g} B)"
            if heads
            else f"MLA: {qx}2 x {h} x (2 x {rank} + {rope}) x c / (({rank} + {rope}) x c x {e:g} B)"
        )
        out.append(
            Point(
                label=f"attention {name}",
                flops=f,
                bytes=b,
                roof="attention",
                formula=f"{formula} = {f / b:,.1f} FLOP/B",
            )
        )
    return out
