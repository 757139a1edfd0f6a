"""Ways to shrink the cache, each applied to one model and measured, not quoted.

For a model at context N every technique gives the K/V bytes one sequence keeps on the GPU and
the saving against the model as configured. The variants change one term of the formula:

    bytes = sum over layers of elements/token x bytes/element x tokens kept
            (heads: MHA/GQA/MQA, MLA)   (FP8/INT8/INT4)  (sliding window, offload)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..cache.deployment import Deployment
from ..config.catalog import Link, registry
from ..core.dtypes import KV_DTYPES, DType, get_dtype
from ..core.model import ModelSpec
from ..core.units import check_int, fmt_seconds
from ..perf.roofline import offload_vs_recompute
from .prose import prose

DEFAULT_LATENT = (512, 64)  # DeepSeek-V2/V3: kv_lora_rank 512 + qk_rope_head_dim 64


@dataclass(frozen=True, kw_only=True)
class Technique:
    key: str
    name: str
    term: str  # which term of the formula it shrinks
    bytes_per_token: int  # nominal: one token in every K/V layer
    seq_bytes: int  # one sequence at the context asked for, on the GPU
    saving: float  # bytes as configured / bytes with the technique (>1 = smaller)
    tradeoff: str
    applies: bool = True  # False where the model already does this


def _bytes(layers, n: int, dtype, cap: int | None = None) -> tuple[int, int]:
    """(bytes per token in every K/V layer, of one sequence at n tokens, at most ``cap`` kept)."""
    per_token = seq = 0
    for layer in layers:
        b = layer.bytes_per_token(dtype)
        kept = layer.tokens_kept(n) if cap is None else min(layer.tokens_kept(n), cap)
        per_token += b
        seq += b * kept
    return per_token, seq


TEXT = prose("techniques")
GQA_HEADS = 8  # the GQA row of an MHA model: Llama 3's, Mistral's and Qwen's K/V heads


def _offload_line(
    rows: _Rows, spec: ModelSpec, gpu_tokens: int, moved: int, link: Link, peak: float | None
) -> str:
    """The trade-off text of CPU offload: what reloading the ``moved`` bytes of the tokens
    beyond the newest ``gpu_tokens`` costs over the link, against recomputing them when the
    parameter count and the GPU's ``peak`` are known."""
    t, n, tp = TEXT["offload"], rows.n, rows.tp
    if not moved:
        return t["nothing"].format(gpu_tokens=gpu_tokens)
    cold = n - min(n, gpu_tokens)
    # What comes back: each layer's tokens (min(window, n) if sliding) less the newest gpu_tokens
    # kept; a window that fits in what stayed reloads nothing (issue 23 [24]). Per GPU and link.
    reload_s = moved / (link.gbs * 1e9)
    nums = dict(
        idle=t["idle"], cold=cold, moved=moved, link=link.name, reload=fmt_seconds(reload_s)
    )
    nums["per"] = " per GPU" if tp > 1 else ""
    if spec.params is None or not peak:
        # Recomputing needs the parameter count and the GPU's peak; reloading only bytes.
        nums["missing"] = t["no_params" if spec.params is None else "no_peak"]
        return t["untimed"].format(**nums)
    # The Learn path's convention (issue 37, F17): the prefill's FLOPs at the full peak (MFU 1).
    off = offload_vs_recompute(
        spec, cold, link_gbs=link.gbs, peak_tflops=peak, mfu=1.0, kv_dtype=rows.dtype.name, tp=tp
    )
    nums["recompute"] = fmt_seconds(off.recompute_s)
    nums["verdict"] = (
        "reloading is faster" if reload_s < off.recompute_s else "recomputing is faster"
    )
    return t["timed"].format(**nums)


def _per_gpu(layers, tp: int) -> list:
    """The layers as one GPU holds them at tensor parallel ``tp`` (else ValueError)."""
    return [lay.split(tp) for lay in layers] if tp > 1 else list(layers)


@dataclass(frozen=True, kw_only=True)
class _Rows:
    """The rows so far; ``own_seq`` (as configured) is every saving's reference."""

    n: int
    dtype: DType
    tp: int
    own_seq: int
    rows: list[Technique] = field(default_factory=list)

    def variant(self, layers, cap: int | None = None):
        """(bytes per token, of one sequence) of ``layers`` per GPU, or None (no split)."""
        try:
            split = _per_gpu(layers, self.tp)
        except ValueError:
            return None
        return _bytes(split, self.n, self.dtype, cap=cap)

    def add(self, key: str, pt_seq, applies: bool = True, **nums) -> None:
        """The row ``key`` (techniques.toml's, filled with ``nums``) of ``pt_seq``, unless None."""
        if pt_seq is None:
            return
        pt, seq = pt_seq
        text = {k: v.format(**nums) for k, v in TEXT["rows"][key].items()}
        saving = self.own_seq / seq if seq else float("inf")
        self.rows.append(
            Technique(
                key=key, **text, bytes_per_token=pt, seq_bytes=seq, saving=saving, applies=applies
            )
        )


def _head_rows(t: _Rows, spec: ModelSpec, own_pt: int, rank: int, rope: int) -> None:
    """The heads' rows: MHA, GQA (for an MHA model), as configured, MQA, an MLA latent."""
    q_heads = spec.kv_layers[0].q_heads
    # KV heads per layer as stored (an MLA latent has none: it counts as neither MHA nor MQA).
    own_heads = {lay.kv_heads for lay in spec.kv_layers}
    latent_only, mha = own_heads == {None}, own_heads == {q_heads}
    layers = spec.layers
    t.add("mha", t.variant([lay.as_mha() for lay in layers]), not mha, q_heads=q_heads)
    if mha and q_heads >= GQA_HEADS and q_heads % GQA_HEADS == 0:
        # An MHA model: what grouped-query attention with 8 K/V heads would keep.
        gqa = t.variant([lay.with_kv_heads(GQA_HEADS) for lay in layers])
        t.add("gqa", gqa, gqa=GQA_HEADS, group=q_heads // GQA_HEADS)
    own_label = (
        "MLA latent"
        if latent_only
        else "MHA"
        if mha
        else "MQA"
        if own_heads == {1}
        else f"GQA, {min(h for h in own_heads if h)} K/V heads"
    )
    t.add("own", (own_pt, t.own_seq), own_label=own_label, dtype=t.dtype.name.upper())
    t.add("mqa", t.variant([lay.with_kv_heads(1) for lay in layers]), own_heads != {1})
    mla = t.variant([lay.as_latent(rank, rope) for lay in layers])
    t.add("mla", mla, not latent_only, rank=rank, rope=rope)


def techniques(
    dep: Deployment,
    context: int,
    *,
    window: int = 4096,
    latent: tuple[int, int] = DEFAULT_LATENT,
    gpu_tokens: int = 4096,
    link: str = "pcie5-x16",
    peak_tflops: float | None = None,
) -> list[Technique]:
    """Every technique applied to ``dep``'s model at ``context`` tokens, its saving computed;
    ``link`` (models.yaml) brings an offloaded cache back, ``peak_tflops`` times a recompute.
    Bytes are per GPU, each variant split as vLLM splits it (issue 23 [23]: an MQA head or an
    MLA latent on every GPU); a variant that cannot be split (8 K/V heads over 3) is left out."""
    try:
        lk = registry().links[link]
    except KeyError:
        raise ValueError(
            f"unknown link {link!r}; choose one of {', '.join(registry().links)}"
        ) from None
    n = check_int("context", context, 1, 10**9)
    window = check_int("window", window, 1, 10**9)
    gpu_tokens = check_int("tokens kept on the GPU", gpu_tokens, 1, 10**9)
    rank = check_int("latent rank", latent[0], 1, 1 << 20)
    rope = check_int("RoPE dimension", latent[1], 0, 1 << 20)
    spec, dtype, tp = dep.spec, get_dtype(dep.cache.kv_dtype, KV_DTYPES), dep.tp

    own_layers = _per_gpu(spec.layers, tp)  # a TP that does not fit the model raises here
    own_pt, own_seq = _bytes(own_layers, n, dtype)
    if not spec.kv_layers:
        raise ValueError(
            "this model keeps no K/V at all (only recurrent state): there is no cache to shrink"
        )
    t = _Rows(n=n, dtype=dtype, tp=tp, own_seq=own_seq)
    _head_rows(t, spec, own_pt, rank, rope)
    for q in ("fp8", "int8", "int4"):  # the number formats a cache can shrink to
        qd = get_dtype(q)
        t.add(q, _bytes(own_layers, n, qd), qd.bits < dtype.bits)
    # The rows that change the tokens kept on the GPU: a sliding window, CPU offload.
    t.add("window", _bytes(own_layers, n, dtype, cap=window), n > window, window=window)
    kept = _bytes(own_layers, n, dtype, cap=gpu_tokens)
    moved = own_seq - kept[1]
    line = _offload_line(t, spec, gpu_tokens, moved, lk, peak_tflops)
    t.add("offload", kept, moved > 0, gpu_tokens=gpu_tokens, line=line)
    return t.rows
