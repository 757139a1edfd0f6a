"""Arithmetic intensity (FLOPs per byte) of prefill, decode and attention alone: the roofline.

A kernel that does F FLOPs while moving B bytes runs at min(peak, (F / B) x bandwidth). The
ridge point peak / bandwidth is where the two limits meet (H100 SXM, dense BF16:
989.4 TFLOPS / 3,350 GB/s = 295 FLOP/B). Below it the memory limits, above it the compute.
(Williams, Waterman and Patterson, "Roofline", CACM 2009.)

    prefill of P tokens:  F = 2 x active params x P + attention(P),  B = weights + KV(P)
    decode at batch b:    F = b x (2 x active params + attention per token at context c),
                          B = weights + b x KV(c)
    attention alone, one decode token at context c, one layer (e = bytes per cached number):
        MHA/GQA/MQA: F = 2 x h x (d_k + d_v) x c,  B = kv_heads x (d_k + d_v) x c x e
                     -> F / B = 2 x (h / kv_heads) / e: the group size, in BF16
        MLA absorbed (DeepSeek-V2): queries are multiplied into the latent space, so each of
        the h heads scores against the (r + r_rope)-wide cached latent and sums r-wide values:
                     F = 2 x h x (2r + r_rope) x c,  B = (r + r_rope) x c x e

Attention's intensity does not depend on the batch (each sequence reads its own cache) nor on
the context (both grow with c), which is why a large batch cannot make long-context decode
compute bound. The times on the pages use the same law: max(FLOPs / (peak x MFU), bytes /
bandwidth).
"""

from __future__ import annotations

from dataclasses import dataclass

from .dtypes import KV_DTYPES, get_dtype
from .kv import stage_layers
from .model import ModelSpec
from .units import check_int
from .weight_bytes import Weights

__all__ = ["Point", "ridge_point", "prefill_point", "decode_point", "attention_points"]


@dataclass(frozen=True, kw_only=True)
class Point:
    label: str
    flops: float
    bytes: float
    formula: str  # with the values substituted

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes


def ridge_point(peak_tflops: float, bandwidth_gbs: float) -> float:
    """FLOPs per byte at which compute and memory take the same time."""
    return peak_tflops * 1e12 / (bandwidth_gbs * 1e9)


def _layers(spec: ModelSpec, tp: int):
    return [lay for stage in stage_layers(spec, tp, 1) for lay in stage]


def _kv(spec, n, dtype, tp) -> int:
    return sum(lay.read_bytes(n, dtype) for lay in _layers(spec, tp))


def _attn_flops(spec, pairs_of, tp) -> float:
    return (
        sum(2.0 * lay.q_heads * (lay.qk_dim + lay.av_dim) * pairs_of(lay) for lay in spec.layers)
        / tp
    )


def prefill_point(spec: ModelSpec, w: Weights, prompt: int, *, kv_dtype: str = "bf16",
                  tp: int = 1) -> Point:
    p = check_int("prompt tokens", prompt, 1, 10**8)
    dtype = get_dtype(kv_dtype, KV_DTYPES)
    lin = 2.0 * spec.active_params * p / tp
    attn = _attn_flops(spec, lambda lay: lay.attended_pairs(p), tp)
    wb = w.read_per_step(spec, p) / tp
    kv = _kv(spec, p, dtype, tp)
    return Point(label=f"prefill {p:,} tokens", flops=lin + attn, bytes=wb + kv,
                 formula=(f"prefill: ({lin:.3e} + {attn:.3e} attention) FLOPs / "
                          f"({wb:,.0f} B weights + {kv:,} B KV) = "
                          f"{(lin + attn) / (wb + kv):,.1f} FLOP/B"))


def decode_point(spec: ModelSpec, w: Weights, *, batch: int, context: int,
                 kv_dtype: str = "bf16", tp: int = 1) -> Point:
    b = check_int("batch", batch, 1, 10**7)
    c = check_int("context", context, 1, 10**9)
    dtype = get_dtype(kv_dtype, KV_DTYPES)
    lin = 2.0 * spec.active_params * b / tp
    attn = b * _attn_flops(spec, lambda lay: lay.attended(c), tp)
    wb = w.read_per_step(spec, b) / tp
    kv = b * _kv(spec, c, dtype, tp)
    return Point(label=f"decode, batch {b:,}", flops=lin + attn, bytes=wb + kv,
                 formula=(f"decode b={b:,}: ({lin:.3e} + {attn:.3e} attention) FLOPs / "
                          f"({wb:,.0f} B weights + {kv:,} B KV) = "
                          f"{(lin + attn) / (wb + kv):,.1f} FLOP/B"))


def attention_points(spec: ModelSpec, *, kv_dtype: str = "bf16", context: int = 8192,
                     rank: int = 512, rope: int = 64) -> list[Point]:
    """Attention alone for one decode token at ``context``, in one layer shaped like the model's
    first attention layer (h query heads of d_k, d_v): MHA, GQA (the model's KV heads, or 8),
    MQA, and MLA absorbed with a latent of ``rank`` + ``rope`` (DeepSeek-V3's 512 + 64)."""
    c = check_int("context", context, 1, 10**9)
    e = get_dtype(kv_dtype, KV_DTYPES).bits / 8
    layer = next((lay for lay in spec.layers if lay.q_heads and lay.stores_tokens), None)
    if layer is None:
        raise ValueError(f"{spec.name} has no attention layer that keeps a cache")
    h, dk, dv = layer.q_heads, layer.qk_dim, layer.av_dim
    kv = layer.kv_heads if layer.kv_heads and 1 < layer.kv_heads < h else (8 if h > 8 and
                                                                          h % 8 == 0 else 1)
    out = []
    for name, heads in (("MHA", h), (f"GQA, {kv} KV heads", kv), ("MQA", 1)):
        f = 2.0 * h * (dk + dv) * c
        b = heads * (dk + dv) * c * e
        out.append(Point(label=f"attention {name}", flops=f, bytes=b,
                         formula=(f"{name}: 2 x {h} x ({dk} + {dv}) x c / ({heads} x ({dk} + "
                                  f"{dv}) x c x {e:g} B) = {f / b:,.1f} FLOP/B")))
    f = 2.0 * h * (2 * rank + rope) * c
    b = (rank + rope) * c * e
    out.append(Point(label="attention MLA (absorbed)", flops=f, bytes=b,
                     formula=(f"MLA: 2 x {h} x (2 x {rank} + {rope}) x c / (({rank} + {rope}) x "
                              f"c x {e:g} B) = {f / b:,.1f} FLOP/B")))
    return out
