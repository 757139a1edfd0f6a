"""Ways to shrink the cache, each applied to one model and measured, not quoted.

For a model at context N every technique gives the K/V bytes one sequence keeps on the GPU and
the saving against the model as configured. The variants change one term of the formula:

    bytes = sum over layers of elements/token x bytes/element x tokens kept
            (heads: MHA/GQA/MQA, MLA)   (FP8/INT8/INT4)  (sliding window, offload)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..config.catalog import Link, registry
from ..core.dtypes import KV_DTYPES, DType, get_dtype
from ..core.model import ModelSpec
from ..core.units import check_int, fmt_seconds
from ..perf.roofline import offload_vs_recompute

__all__ = ["Technique", "techniques", "DEFAULT_LATENT"]

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

    def to_dict(self) -> dict:
        return asdict(self)


def _bytes(layers, n: int, dtype, cap: int | None = None) -> tuple[int, int]:
    """(bytes per token in every K/V layer, bytes of one sequence at n tokens), each layer keeping
    at most ``cap`` tokens when a cap is given."""
    per_token = seq = 0
    for layer in layers:
        b = layer.bytes_per_token(dtype)
        kept = layer.tokens_kept(n)
        if cap is not None:
            kept = min(kept, cap)
        per_token += b
        seq += b * kept
    return per_token, seq


# Offload saves GPU memory only for blocks nobody reads: with full attention a running sequence
# reads its whole cache at every step, so its blocks cannot stay in CPU memory.
_IDLE = (
    "Only while the sequence is idle, between a user's turns (or for cached prefixes no "
    "request is reading): a running sequence with full attention reads its whole cache at "
    "every step, so all of it must be back on the GPU before it decodes again."
)


def _offload_line(
    spec: ModelSpec,
    n: int,
    dtype: DType,
    *,
    gpu_tokens: int,
    moved: int,
    link_gbs: float,
    link_name: str,
    peak_tflops: float | None,
    tp: int,
) -> str:
    """The trade-off text of CPU offload: what reloading the ``moved`` bytes of the tokens
    beyond the newest ``gpu_tokens`` costs over the link, against recomputing them when the
    parameter count and the GPU's peak are known."""
    cold = n - min(n, gpu_tokens)
    # What comes back when the user returns: each layer's tokens it needs (min(window, n) for a
    # sliding layer) less the newest gpu_tokens it kept on the GPU. A sliding layer whose window
    # fits in what stayed reloads nothing (issue 23 [24]: they were counted twice). Per GPU,
    # each over its own link.
    reload_s = moved / (link_gbs * 1e9)
    per = " per GPU" if tp > 1 else ""
    if moved and spec.params is not None and peak_tflops:
        # The chapter's convention on the Learn path (issue 37, F17): the ideal bound, the
        # prefill's FLOPs at the full dense peak (MFU 1), as the interview and the tour state it.
        off = offload_vs_recompute(
            spec,
            cold,
            link_gbs=link_gbs,
            peak_tflops=peak_tflops,
            mfu=1.0,
            kv_dtype=dtype.name,
            tp=tp,
        )
        verdict = "reloading is faster" if reload_s < off.recompute_s else "recomputing is faster"
        line = (
            f"{_IDLE} When the user returns, reloading the other {cold:,} tokens "
            f"({moved:,} B{per}) over {link_name} takes {fmt_seconds(reload_s)}, "
            f"recomputing them at least {fmt_seconds(off.recompute_s)} (the ideal bound: "
            "their prefill FLOPs at the full dense peak): "
            f"{verdict}."
        )
    elif moved:
        # Recomputing needs the parameter count and the GPU's peak (prefill FLOPs / peak);
        # reloading needs only bytes.
        missing = (
            "the parameter count, which kvcalc could not take from this config"
            if spec.params is None
            else "the GPU's peak TFLOPS, which is not stated"
        )
        line = (
            f"{_IDLE} When the user returns, reloading the other {cold:,} tokens "
            f"({moved:,} B{per}) over {link_name} takes {fmt_seconds(reload_s)}; the time to "
            f"recompute them needs {missing}."
        )
    else:
        line = (
            f"Every layer's tokens fit in the newest {gpu_tokens:,} kept on the GPU: nothing "
            "to offload at this length."
        )
    return line


# The number formats a cache can shrink to, each with its trade-off.
_QUANTIZED = (
    (
        "fp8",
        "Half the bytes of 16-bit. Usually safe, but long-context recall "
        "can suffer: check on your own evals.",
    ),
    (
        "int8",
        "Half of 16-bit with integer codes; the scales that decode them are "
        "not counted here (vLLM's per-token-head INT8 adds 8 B per head and "
        "token: see the vLLM page). Similar risk to FP8.",
    ),
    (
        "int4",
        "A quarter of 16-bit before scales: with a scale per small group of "
        "values the real saving is nearer 3.6x. The largest accuracy risk "
        "of the three.",
    ),
)


def _per_gpu(layers, tp: int) -> list:
    """The layers as one GPU holds them at tensor parallel ``tp`` (ValueError where they do not
    split)."""
    return [lay.split(tp) for lay in layers] if tp > 1 else list(layers)


@dataclass(frozen=True, kw_only=True)
class _Rows:
    """The table as it is built: the context, format and TP every row is sized at, one
    sequence's bytes as configured (the reference of every saving), and the rows so far."""

    n: int
    dtype: DType
    tp: int
    own_seq: int
    rows: list[Technique] = field(default_factory=list)

    def variant(self, layers, cap: int | None = None):
        """(bytes per token, bytes of one sequence) with ``layers`` per GPU, or None where the
        variant cannot be split over the GPUs."""
        try:
            split = _per_gpu(layers, self.tp)
        except ValueError:
            return None
        return _bytes(split, self.n, self.dtype, cap=cap)

    def add(self, key, name, term, pt_seq, tradeoff, applies=True):
        if pt_seq is None:  # this variant cannot be split over the GPUs
            return
        pt, seq = pt_seq
        self.rows.append(
            Technique(
                key=key,
                name=name,
                term=term,
                bytes_per_token=pt,
                seq_bytes=seq,
                saving=self.own_seq / seq if seq else float("inf"),
                tradeoff=tradeoff,
                applies=applies,
            )
        )


def _head_rows(t: _Rows, spec: ModelSpec, own_pt: int, rank: int, rope: int) -> None:
    """The rows that change the heads' term: MHA, GQA (for an MHA model), the model as
    configured, MQA and an MLA latent."""
    attn = spec.kv_layers
    q_heads = attn[0].q_heads
    # KV heads per layer as stored (an MLA latent has none: it counts as neither MHA nor MQA).
    own_heads = {lay.kv_heads for lay in attn}
    latent_only = own_heads == {None}
    t.add(
        "mha",
        f"MHA (multi-head attention): {q_heads} K/V heads",
        "KV heads",
        t.variant([lay.as_mha() for lay in spec.layers]),
        "Every query head keeps its own K and V: the largest cache, and the baseline that "
        "grouped and multi-query attention improve on.",
        applies=not (own_heads == {q_heads}),
    )
    if own_heads == {q_heads} and q_heads >= 8 and q_heads % 8 == 0:
        # An MHA model: what grouped-query attention with 8 K/V heads would keep.
        t.add(
            "gqa",
            "GQA (grouped-query attention): 8 K/V heads",
            "KV heads",
            t.variant([lay.with_kv_heads(8) for lay in spec.layers]),
            f"Groups of {q_heads // 8} query heads share one K/V head: the choice of Llama 3, "
            "Mistral and Qwen; it needs a model trained (or up-trained) that way.",
        )
    own_label = (
        "MLA latent"
        if latent_only
        else "MHA"
        if own_heads == {q_heads}
        else "MQA"
        if own_heads == {1}
        else f"GQA, {min(h for h in own_heads if h)} K/V heads"
    )
    t.add(
        "own",
        f"As configured ({own_label}, {t.dtype.name.upper()})",
        "(the reference)",
        (own_pt, t.own_seq),
        "What this checkpoint stores: the reference for every saving on this page.",
    )
    t.add(
        "mqa",
        "MQA (multi-query attention): 1 K/V head",
        "KV heads",
        t.variant([lay.with_kv_heads(1) for lay in spec.layers]),
        "All query heads share one K/V head: the smallest cache without changing the layer "
        "type, at a larger quality cost than GQA.",
        applies=own_heads != {1},
    )
    t.add(
        "mla",
        f"MLA (multi-head latent attention) ({rank} + {rope} RoPE)",
        "K and V -> one latent",
        t.variant([lay.as_latent(rank, rope) for lay in spec.layers]),
        "Caches one compressed latent per token (plus a small key for RoPE, the rotary position "
        "encoding); decode kernels fold the up-projections into the query and output and attend "
        "over the latent directly. Needs a model trained this way (DeepSeek-V2/V3, Kimi K2).",
        applies=not latent_only,
    )


def _format_rows(t: _Rows, own_layers) -> None:
    """The rows that change the bytes per element: FP8, INT8, INT4."""
    for q, line in _QUANTIZED:
        qd = get_dtype(q)
        t.add(
            q,
            f"{q.upper()} KV",
            "bytes per element",
            _bytes(own_layers, t.n, qd),
            line,
            applies=qd.bits < t.dtype.bits,
        )


def _kept_rows(
    t: _Rows,
    spec: ModelSpec,
    own_layers,
    *,
    window: int,
    gpu_tokens: int,
    link: Link,
    peak_tflops: float | None,
) -> None:
    """The rows that change the tokens kept on the GPU: a sliding window, CPU offload."""
    n = t.n
    t.add(
        "window",
        f"Sliding window of {window:,} tokens",
        "tokens kept",
        _bytes(own_layers, n, t.dtype, cap=window),
        "Layers forget tokens older than the window: memory stops growing, but those layers "
        "lose far context. Needs a model trained this way; real models (Gemma, gpt-oss) "
        "interleave window layers with a few global ones, which this row does not.",
        applies=n > window,
    )
    kept = _bytes(own_layers, n, t.dtype, cap=gpu_tokens)
    moved = t.own_seq - kept[1]
    line = _offload_line(
        spec,
        n,
        t.dtype,
        gpu_tokens=gpu_tokens,
        moved=moved,
        link_gbs=link.gbs,
        link_name=link.name,
        peak_tflops=peak_tflops,
        tp=t.tp,
    )
    t.add(
        "offload",
        f"CPU offload while idle (the newest {gpu_tokens:,} tokens stay on the GPU)",
        "memory tier",
        kept,
        line,
        applies=moved > 0,
    )


def techniques(
    spec: ModelSpec,
    context: int,
    *,
    kv_dtype: str = "bf16",
    window: int = 4096,
    latent: tuple[int, int] = DEFAULT_LATENT,
    gpu_tokens: int = 4096,
    link: str = "pcie5-x16",
    peak_tflops: float | None = None,
    tp: int = 1,
) -> list[Technique]:
    """Every technique applied to ``spec`` at ``context`` tokens, with its saving computed.
    ``link`` is a link of the catalog (models.yaml), over which an offloaded cache comes back;
    ``peak_tflops`` the GPU's dense peak for the recompute time (None: not stated).

    Bytes are per GPU under tensor parallelism ``tp`` (issue 23 [23]): each variant's layers
    are split as vLLM splits them, so K/V heads are divided among the GPUs and a single head
    (MQA) or an MLA latent is replicated on every one. A variant that cannot be split over
    ``tp`` GPUs (8 K/V heads over 3) is left out."""
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
    dtype = get_dtype(kv_dtype, KV_DTYPES)
    tp = check_int("tensor parallel size", tp, 1, 4096)

    own_layers = _per_gpu(spec.layers, tp)  # a TP that does not fit the model raises here
    own_pt, own_seq = _bytes(own_layers, n, dtype)
    if not spec.kv_layers:
        raise ValueError(
            "this model keeps no K/V at all (only recurrent state): there is no cache to shrink"
        )
    t = _Rows(n=n, dtype=dtype, tp=tp, own_seq=own_seq)
    _head_rows(t, spec, own_pt, rank, rope)
    _format_rows(t, own_layers)
    _kept_rows(
        t,
        spec,
        own_layers,
        window=window,
        gpu_tokens=gpu_tokens,
        link=lk,
        peak_tflops=peak_tflops,
    )
    return t.rows
