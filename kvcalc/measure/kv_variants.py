"""The KV-cache variants the quality table (kvcalc.measure.quality) compares: what each stores,
its bytes, its number formats, which keys each query reads, and one pass of the text through it
(``run_variant``). Sources (vLLM, KIVI, StreamingLLM, H2O): docs/measurement.md."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

KIVI_GROUP = 32  # KIVI's group size G (its example scripts: GROUP_SIZE = 32)
KIVI_RESIDUAL = 128  # KIVI's residual length R (RESIDUAL_LENGTH = 128), a multiple of G
SINKS = 4  # StreamingLLM keeps 4 initial tokens
FP8_MAX = 448.0  # largest finite e4m3 value (OCP FP8: S.1111.110 = 448)

VARIANTS = (
    "exact",
    "fp8",
    "int8-token",
    "int4-token",
    "int4-kivi",
    "int2-kivi",
    "window-W",
    "sink4-window-W",
)
EXTRA_VARIANTS = ("fp16", "bf16", "h2o-W")


@dataclass(frozen=True)
class Variant:
    """One cache: a number format for what it stores, and/or a rule for what it keeps."""

    name: str
    fmt: str = "exact"  # exact, fp16, bf16, fp8, int8-token, int4-token, int4-kivi, int2-kivi
    window: int | None = None  # tokens each query reads (itself included), None: all
    sinks: int = 0  # initial tokens always kept
    h2o: bool = False
    residual: int = 0  # newest tokens kept unquantized (KIVI)
    label: str = ""

    @property
    def quantizes(self) -> bool:
        return self.fmt != "exact"


_LABELS = {
    "exact": "exact cache (fp32, as the model runs here)",
    "fp16": "FP16 round trip",
    "bf16": "BF16 round trip",
    "fp8": "FP8 e4m3, scale 1",
    "int8-token": "INT8, one fp32 scale per token and KV head",
    "int4-token": "INT4, one fp32 scale per token and KV head",
    "int4-kivi": "INT4 KIVI: keys per channel, values per token, 128 newest exact",
    "int2-kivi": "INT2 KIVI: keys per channel, values per token, 128 newest exact",
}
_WINDOW_LABELS = {
    "window": "sliding window: each token reads the last {w:,}",
    "sink4-window": "StreamingLLM: {sinks} sink tokens + the last {w:,}",
    "h2o": "H2O-style: {new:,} newest + {heavy:,} heavy hitters per KV head, chosen once per chunk",
}


def variant(name: str, window: int) -> Variant:
    """The variant called ``name``; window-W / sink4-window-W / h2o-W take ``window``."""
    if name in _LABELS:  # a number format: KIVI's keep a residual
        residual = KIVI_RESIDUAL if name.endswith("-kivi") else 0
        return Variant(name=name, fmt=name, residual=residual, label=_LABELS[name])
    m = re.fullmatch(r"(window|sink4-window|h2o)-(W|[0-9]+)", name)
    if m:
        kind, w = m.group(1), window if m.group(2) == "W" else int(m.group(2))
        label = _WINDOW_LABELS[kind].format(w=w, sinks=SINKS, new=w // 2, heavy=w - w // 2)
        sinks = SINKS if kind == "sink4-window" else 0
        return Variant(name=f"{kind}-{w}", window=w, sinks=sinks, h2o=kind == "h2o", label=label)
    raise ValueError(
        f"unknown variant {name!r}; choose from {', '.join(VARIANTS + EXTRA_VARIANTS)}"
    )


def kv_bytes(
    v: Variant, tokens: int, *, layers: int, kv_heads: int, head_dim: int, exact_bytes: int = 4
) -> tuple[int, str]:
    """(bytes the cache holds after ``tokens`` tokens, derivation). Per layer and token, K and
    V each have ``kv_heads`` x ``head_dim`` numbers; ``exact_bytes`` is the unquantized
    element size (4: fp32, as the model runs here)."""
    e = kv_heads * head_dim  # numbers per token, per layer, for K or for V
    per_layer = 2 * layers  # K and V, in every layer
    if v.fmt in ("exact", "fp16", "bf16", "fp8"):  # a window keeps its tokens exact
        kept = tokens if v.window is None else min(tokens, v.window + v.sinks)
        size = {"exact": exact_bytes, "fp16": 2, "bf16": 2, "fp8": 1}[v.fmt]
        b = kept * per_layer * e * size
        return b, (
            f"{kept:,} tokens{'' if v.window is None else ' kept'} x 2 (K, V) x {layers} layers "
            f"x {kv_heads} KV heads x {head_dim} x {size} B = {b:,} B"
        )
    if v.fmt in ("int8-token", "int4-token"):
        bits = 8 if v.fmt == "int8-token" else 4
        per_vec = head_dim * bits // 8 + 4  # codes + one fp32 scale
        b = tokens * per_layer * kv_heads * per_vec
        return b, (
            f"{tokens:,} tokens x 2 (K, V) x {layers} layers x {kv_heads} KV heads x "
            f"({head_dim} x {bits} bit + 4 B scale = {per_vec} B) = {b:,} B"
        )
    # KIVI: the tokens before the residual are quantized; the residual (1 to R tokens) is not.
    bits = 4 if v.fmt == "int4-kivi" else 2
    quant = v.residual * ((tokens - 1) // v.residual) if tokens else 0
    rest = tokens - quant
    g = KIVI_GROUP
    # keys: per channel, groups of g tokens, an fp16 scale + fp16 zero point per group;
    # values: per token, groups of g channels, the same.
    k_bytes = layers * kv_heads * (quant * head_dim * bits // 8 + (quant // g) * head_dim * 4)
    v_bytes = layers * kv_heads * (quant * head_dim * bits // 8 + quant * (head_dim // g) * 4)
    r_bytes = rest * per_layer * e * exact_bytes
    b = k_bytes + v_bytes + r_bytes
    return b, (
        f"{quant:,} quantized tokens x {layers} layers x {kv_heads} KV heads x "
        f"[K: {head_dim} x {bits} bit + {head_dim} x 4 B / {g} tokens; "
        f"V: {head_dim} x {bits} bit + {head_dim // g} x 4 B] + {rest:,} residual tokens "
        f"x 2 x {layers} x {kv_heads} x {head_dim} x {exact_bytes} B = {b:,} B"
    )


def roundtrip(x, fmt: str, start: int = 0):
    """``x`` [kv_heads, n, head_dim] stored in ``fmt`` and read back (float32 again).

    ``start``: the position of x's first token; KIVI's key groups are aligned to positions
    0, 32, 64, ... (so ``start`` must be a multiple of 32 for KIVI)."""
    import torch

    if fmt == "exact":
        return x
    if fmt in ("fp16", "bf16"):
        return x.to(torch.float16 if fmt == "fp16" else torch.bfloat16).float()
    if fmt == "fp8":
        return x.clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).float()
    if fmt in ("int8-token", "int4-token"):
        qmax = 127 if fmt == "int8-token" else 7  # symmetric: codes -qmax .. qmax
        s = x.abs().amax(dim=-1, keepdim=True) / qmax
        s = torch.where(s > 0, s, torch.ones_like(s))
        return (x / s).round().clamp(-qmax, qmax) * s
    if fmt in ("int4-kivi", "int2-kivi"):
        raise ValueError("KIVI quantizes keys and values differently: use kivi_roundtrip")
    raise ValueError(f"unknown format {fmt!r}")


def _asym(x, dim: int, bits: int):
    """Asymmetric min-max quantization along ``dim``: codes 0 .. 2^bits - 1."""
    import torch

    lo = x.amin(dim=dim, keepdim=True)
    hi = x.amax(dim=dim, keepdim=True)
    levels = 2**bits - 1
    s = (hi - lo) / levels
    s = torch.where(s > 0, s, torch.ones_like(s))
    return ((x - lo) / s).round().clamp(0, levels) * s + lo


def kivi_roundtrip(k, v, bits: int, start: int = 0):
    """KIVI's formats for keys k and values v [kv_heads, n, head_dim] whose first token sits at
    position ``start`` (a multiple of the group size): keys per channel over groups of 32
    positions, values per token over groups of 32 channels. A last group that is not full is
    rounded over what it has (KIVI keeps such tokens in the residual; the masks never read them
    rounded)."""
    import torch

    g = KIVI_GROUP
    if start % g:
        raise ValueError(f"KIVI key groups start at multiples of {g}, got position {start}")
    h, n, d = k.shape
    full = (n // g) * g
    parts = []
    if full:
        parts.append(_asym(k[:, :full].reshape(h, full // g, g, d), 2, bits).reshape(h, full, d))
    if n > full:
        parts.append(_asym(k[:, full:], 1, bits))
    kq = torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]
    if d % g:
        raise ValueError(f"head_dim {d} is not a multiple of KIVI's group size {g}")
    vq = _asym(v.reshape(h, n, d // g, g), 3, bits).reshape(h, n, d)
    return kq, vq


def attention_allowed(v: Variant, q_pos, k_pos):
    """[n_q, n_k] mask: True where a query at q_pos reads the key at k_pos (causal, then the
    window and sinks). H2O's kept set is applied separately, per KV head."""
    allowed = k_pos.view(1, -1) <= q_pos.view(-1, 1)
    if v.window is not None and not v.h2o:
        recent = k_pos.view(1, -1) > q_pos.view(-1, 1) - v.window
        if v.sinks:
            recent = recent | (k_pos.view(1, -1) < v.sinks)
        allowed = allowed & recent
    return allowed


def _residual_edges(v: Variant, s: int, e: int):
    """KIVI's residual rule for the queries at positions s .. e - 1, as (a, b, edge) blocks of
    query rows a:b that read the keys (and values) before ``edge`` rounded and the rest exact.

    Per-token formats round a token as it is written, so every read is rounded: None. KIVI
    keeps the newest tokens exact: at query i the keys before R * floor(i / R) are quantized,
    the residual from there to i (1 to R tokens) is not."""
    if v.residual == 0:
        return None
    out, a = [], s
    while a < e:
        edge = (a // v.residual) * v.residual
        b = min(e, edge + v.residual)
        out.append((a - s, b - s, edge))
        a = b
    return out


def _bias(allowed, torch):
    return torch.zeros(allowed.shape, dtype=torch.float32, device=allowed.device).masked_fill(
        ~allowed, float("-inf")
    )


def run_variant(net, ids, v: Variant, chunk: int, stop_check, tick, torch):
    """(mean NLL, greedy next tokens [T], mean attention TV distance, notes) for variant v."""
    T = ids.numel()
    L = net.n_layers
    # Per layer this run's keys and values as computed (Kx, Vx) and as the cache stores them
    # (Kq, Vq, round-tripped): a tensor once the first chunk has run, None before.
    empty: list[Any] = [None] * L  # torch comes in untyped
    Kx, Vx, Kq, Vq = (list(empty) for _ in range(4))
    keep = [None] * L  # H2O: per layer, [kv_heads, n_past] bool of past tokens kept
    score = [None] * L  # H2O: accumulated attention per layer, [kv_heads, n_past]
    nll_sum, tv_sum, tv_n = 0.0, 0.0, 0
    argmax = torch.empty(T, dtype=torch.long, device=ids.device)
    clipped = 0
    with torch.inference_mode():
        for s in range(0, T, chunk):
            stop_check()
            e = min(T, s + chunk)
            x = net.embed(ids[s:e])
            cos, sin = net.rope(x, s)
            q_pos = torch.arange(s, e, device=ids.device)
            k_pos = torch.arange(0, e, device=ids.device)
            allowed = attention_allowed(v, q_pos, k_pos)
            bias = _bias(allowed, torch)  # 0 where read, -inf where masked: one add per layer
            causal_bias = _bias(k_pos.view(1, -1) <= q_pos.view(-1, 1), torch)
            edges = _residual_edges(v, s, e)
            for i in range(L):
                q, k, val = net.qkv(i, x, cos, sin)
                Kx[i] = k if Kx[i] is None else torch.cat([Kx[i], k], 1)
                Vx[i] = val if Vx[i] is None else torch.cat([Vx[i], val], 1)
                s_exact = net.scores(q, Kx[i])
                if v.quantizes:
                    if v.fmt in ("int4-kivi", "int2-kivi"):
                        kq, vq = kivi_roundtrip(k, val, 4 if v.fmt == "int4-kivi" else 2, s)
                    else:
                        if v.fmt == "fp8":
                            clipped += int((k.abs() > FP8_MAX).sum() + (val.abs() > FP8_MAX).sum())
                        kq, vq = roundtrip(k, v.fmt), roundtrip(val, v.fmt)
                    Kq[i] = kq if Kq[i] is None else torch.cat([Kq[i], kq], 1)
                    Vq[i] = vq if Vq[i] is None else torch.cat([Vq[i], vq], 1)
                if v.h2o:
                    mask = _h2o_mask(net, allowed, keep[i], s, e)
                    p = torch.softmax(s_exact.masked_fill(~mask, float("-inf")), dim=-1)
                    out = net.weighted(p, Vx[i])
                elif not v.quantizes:
                    p = torch.softmax(s_exact + bias, dim=-1)
                    out = net.weighted(p, Vx[i])
                elif edges is None:  # every read sees the rounded K/V
                    p = torch.softmax(net.scores(q, Kq[i]) + bias, dim=-1)
                    out = net.weighted(p, Vq[i])
                else:  # KIVI: per block of queries, the keys before its edge are rounded
                    ps, outs = [], []
                    for a, b, edge in edges:
                        km = torch.cat([Kq[i][:, :edge], Kx[i][:, edge:]], 1)
                        vm = torch.cat([Vq[i][:, :edge], Vx[i][:, edge:]], 1)
                        pb = torch.softmax(net.scores(q[:, a:b], km) + bias[a:b], dim=-1)
                        ps.append(pb)
                        outs.append(net.weighted(pb, vm))
                    p, out = torch.cat(ps, 1), torch.cat(outs, 1)
                if v.quantizes or v.window is not None:
                    ref = torch.softmax(s_exact + causal_bias, dim=-1)
                    tv_sum += 0.5 * float((p - ref).abs().sum())
                tv_n += net.n_heads * (e - s)
                if v.h2o:
                    keep[i], score[i] = _h2o_update(
                        net, p, keep[i], score[i], v.window, s, e, torch
                    )
                x = net.finish(i, x, out)
            logits = net.logits(x)
            argmax[s:e] = logits.argmax(-1)
            lp = torch.log_softmax((logits[: T - 1 - s] if e == T else logits).double(), dim=-1)
            tgt = ids[s + 1 : e + 1] if e < T else ids[s + 1 :]
            nll_sum -= float(lp.gather(1, tgt.view(-1, 1)).double().sum())
            tick(v.name)
    notes = []
    if v.fmt == "fp8":
        notes.append(
            f"{clipped:,} values were beyond e4m3's ±448 and were clipped"
            if clipped
            else "no value reached e4m3's ±448 limit: scale 1 clipped nothing"
        )
    if v.residual and v.residual >= T:
        notes.append(
            f"the text is no longer than KIVI's {v.residual}-token residual, so "
            "nothing was quantized: read it with a longer text"
        )
    if v.h2o:
        notes.append(
            "evictions decided once per chunk of "
            f"{chunk} tokens (the paper decides after every token)"
        )
    return nll_sum / (T - 1), argmax, tv_sum / tv_n, notes


def _h2o_mask(net, allowed, keep, s, e):
    """H2O's mask [heads, n_q, n_k]: a query reads the chunk causally and the past tokens its
    KV head still keeps."""
    nq = e - s
    m = allowed.view(1, nq, e).expand(net.n_heads, nq, e).clone()
    if keep is not None:
        past = keep.repeat_interleave(net.group, dim=0)  # [heads, s]
        m[:, :, :s] &= past.view(net.n_heads, 1, s)
    return m


def _h2o_update(net, p, keep, score, budget, s, e, torch):
    """After a chunk: accumulate each past token's attention (summed over the chunk's queries
    and the KV head's query heads), then keep the budget // 2 newest tokens and the highest
    scoring older ones, per KV head."""
    nq = e - s
    got = p.view(net.n_kv, net.group, nq, e).sum(dim=(1, 2))  # [kv_heads, e]
    new_score = (
        got
        if score is None
        else torch.cat([score, torch.zeros(net.n_kv, e - score.shape[1], device=p.device)], 1) + got
    )
    new_keep = torch.ones(net.n_kv, e, dtype=torch.bool, device=p.device)
    if keep is not None:
        new_keep[:, :s] = keep
    recent = budget // 2
    heavy = budget - recent
    if e > budget:
        old = e - recent
        cand = new_score[:, :old].masked_fill(~new_keep[:, :old], float("-inf"))
        top = cand.topk(min(heavy, old), dim=1).indices
        kept_old = torch.zeros(net.n_kv, old, dtype=torch.bool, device=p.device)
        kept_old.scatter_(1, top, True)
        new_keep[:, :old] = kept_old & new_keep[:, :old]
    return new_keep, new_score
