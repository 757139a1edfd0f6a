"""KV-cache bytes: per layer per token, per token, per sequence at context N, per batch.

    per-layer bytes/token = elements stored per token x bytes per element
                          = 2 x kv_heads x head_dim x bytes      (full, sliding, chunked)
                          = (kv_lora_rank + qk_rope_head_dim) x bytes   (MLA latent)
    bytes of one sequence = sum over layers of per-layer bytes/token x tokens that layer keeps

Recurrent layers (Mamba, Gated DeltaNet) keep a fixed state per sequence instead, reported apart
as ``state_bytes``. With ``tp``/``pp`` the figures are one GPU's (max(1, kv_heads // tp) heads of
its stage's layers, an MLA latent whole: docs/vllm.md); with pp > 1, the stage that holds most.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields, replace

from ..core.dtypes import KV_DTYPES, DType, get_dtype
from ..core.model import Layer, ModelSpec, counted
from ..core.units import check_int, check_parallel


def layer_bytes_per_token(layer: Layer, dtype: DType, scales: bool = False) -> int:
    """Bytes one token adds to one layer's cache (0 where it keeps none); with ``scales`` a
    quantized format also stores one fp32 scale per vector: 2 per KV head, 1 per MLA latent."""
    return layer.bytes_per_token(dtype, scales)


def pp_partition(num_layers: int, pp: int) -> list[int]:
    """Layers per pipeline stage, as vLLM's get_pp_indices splits them: an even share each, and
    the remainder one apiece to the stages just before the last (the last holds the LM head).
    27 layers on 2 stages -> [14, 13]."""
    if pp > num_layers:
        raise ValueError(f"pipeline parallel size {pp} exceeds the {num_layers} layers")
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    return parts


def stage_layers(spec: ModelSpec, tp: int = 1, pp: int = 1) -> list[tuple[Layer, ...]]:
    """The layers each pipeline stage holds, as one of its ``tp`` GPUs sees them; a speculative
    drafter's layers sit on the last stage (vLLM runs the drafter on the last rank)."""
    tp, pp = check_parallel(tp, pp)
    layers = list(spec.layers)
    if tp > 1:
        split: dict[int, Layer] = {}  # once per distinct layer, so equal layers stay one object
        layers = [split.get(id(lay)) or split.setdefault(id(lay), lay.split(tp)) for lay in layers]
    own = len(layers) - spec.draft_layers
    stages, start = [], 0
    for count in pp_partition(own, pp):
        stages.append(tuple(layers[start : start + count]))
        start += count
    stages[-1] += tuple(layers[own:])
    return stages


@dataclass(frozen=True, kw_only=True)
class KindRow:
    """All layers of one kind and size, for the breakdown and its derivation."""

    kind: str  # full, sliding, chunked, mla, shared, state, none
    label: str  # the kind with its size: "sliding 1,024", "state (mamba2)", ...
    layers: int
    bytes_per_token_per_layer: int
    tokens_kept: int  # per sequence at the context asked for
    bytes: int  # this row's share of the whole batch
    formula: str
    state_bytes: int = 0  # per layer per sequence, recurrent layers only
    scale_bytes: int = 0  # per token per layer, included in bytes_per_token_per_layer
    stores_tokens: bool = True

    def to_dict(self) -> dict:
        d = asdict(self)
        del d["stores_tokens"]
        return {"state_bytes_per_layer" if k == "state_bytes" else k: v for k, v in d.items()}


@dataclass(frozen=True, kw_only=True)
class KVCache:
    model: str
    context: int
    batch: int
    kv_dtype: str
    scales: bool
    tp: int
    pp: int
    kv_bytes: int  # attention K/V (and MLA latents) of the whole batch at `context`
    kv_bytes_per_token: int  # what one more token adds to one sequence at `context`
    kv_bytes_per_token_nominal: int  # one token in every K/V layer (as at the first token)
    state_bytes: int  # fixed recurrent state of the whole batch
    rows: tuple[KindRow, ...]
    # A speculative drafter's share (kvcalc.core.speculative): its words, the bytes per token
    # and in all that its layers add on this GPU (included in the figures above), and its share
    # of the cache. None without a drafter.
    drafter: dict | None = None

    @property
    def total_bytes(self) -> int:
        return self.kv_bytes + self.state_bytes

    def per_token_formula(self) -> str:
        """The nominal per-token bytes with the values substituted, e.g.
        "32 full layers x 2 x 8 KV heads x 128 x 2 B = 131,072 B"."""
        el = f"{get_dtype(self.kv_dtype).bytes_per_element:g} B"
        parts = [
            f"{r.layers} {r.label} layer{'s' if r.layers != 1 else ''} x ({r.formula} x {el}"
            + (f" + {r.scale_bytes} B scales)" if r.scale_bytes else ")")
            for r in self.rows
            if r.stores_tokens
        ]
        if not parts:
            return "no layer keeps K/V: 0 B"
        return " + ".join(parts) + f" = {self.kv_bytes_per_token_nominal:,} B"

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        rows, drafter = d.pop("rows"), d.pop("drafter")
        return d | {
            "total_bytes": self.total_bytes,
            "per_sequence_kv_bytes": self.kv_bytes // self.batch if self.batch else 0,
            "breakdown": [r.to_dict() for r in rows],
            "per_token_formula": self.per_token_formula(),
            "drafter": drafter,
        }


def sequence_bytes(layers: Iterable[Layer], n: int, dtype: DType, scales: bool) -> int:
    """KV bytes one sequence of ``n`` tokens holds in ``layers`` (per-token and fixed cache,
    no state)."""
    return sum(count * lay.seq_bytes(n, dtype, scales) for lay, count in counted(layers))


def _rows(
    layers: Iterable[Layer], n: int, batch: int, dtype: DType, scales: bool, state_dtype: DType
) -> tuple[KindRow, ...]:
    rows: dict[KindRow, int] = {}
    for lay, count in counted(layers):
        bpt, kept = lay.bytes_per_token(dtype, scales), lay.tokens_kept(n)
        row = KindRow(
            kind=lay.kind,
            label=lay.label,
            layers=0,
            bytes_per_token_per_layer=bpt,
            tokens_kept=kept,
            bytes=bpt * kept + (lay.fixed_kv_bytes(dtype, scales) if n else 0),  # a layer's
            formula=lay.formula(),
            state_bytes=lay.state_bytes(state_dtype),
            scale_bytes=bpt - lay.bytes_per_token(dtype, False),
            stores_tokens=lay.stores_tokens,
        )
        rows[row] = rows.get(row, 0) + count
    return tuple(replace(r, layers=c, bytes=c * r.bytes * batch) for r, c in rows.items())


def kv_cache(
    spec: ModelSpec,
    context: int,
    batch: int = 1,
    kv_dtype: str = "bf16",
    *,
    scales: bool = False,
    state_dtype: str = "bf16",
    tp: int = 1,
    pp: int = 1,
) -> KVCache:
    """KV bytes of ``batch`` sequences of ``context`` tokens each (per GPU when tp/pp > 1)."""
    context = check_int("context", context, 0, 10**12)
    batch = check_int("batch", batch, 1, 10**9)
    dtype = get_dtype(kv_dtype, KV_DTYPES)
    sdtype = get_dtype(state_dtype, ("fp32", "fp16", "bf16"))
    stages = stage_layers(spec, tp, pp)

    def seq(layers: Iterable[Layer], n: int) -> int:
        return sequence_bytes(layers, n, dtype, scales)

    def state(layers: Iterable[Layer]) -> int:
        return sum(count * lay.state_bytes(sdtype) for lay, count in counted(layers))

    # The binding stage: the one that holds the most at this context.
    layers = max(stages, key=lambda ls: (seq(ls, context) * batch + state(ls) * batch, seq(ls, 1)))
    drafter = None
    if spec.drafter:
        # the drafter's layers end the last stage; on another stage's GPU they add nothing
        own = layers[-spec.draft_layers :] if spec.draft_layers and layers is stages[-1] else ()
        total = seq(layers, context) + state(layers)
        drafted = seq(own, context) + state(own)
        drafter = {
            "drafter": spec.drafter,
            "layers": len(own),
            "bytes_per_token": seq(own, 1),
            "bytes": drafted * batch,
            "share_pct": 100 * drafted / total if total else 0.0,
        }
    return KVCache(
        model=spec.name,
        context=context,
        batch=batch,
        kv_dtype=dtype.name,
        scales=scales,
        tp=tp,
        pp=pp,
        kv_bytes=seq(layers, context) * batch,
        kv_bytes_per_token=seq(layers, context + 1) - seq(layers, context),
        # one token in every layer that keeps tokens (a cross-attention layer's image K/V are
        # per image, not per token: in kv_bytes, not here)
        kv_bytes_per_token_nominal=sum(
            count * lay.bytes_per_token(dtype, scales) for lay, count in counted(layers)
        ),
        state_bytes=state(layers) * batch,
        rows=_rows(layers, context, batch, dtype, scales, sdtype),
        drafter=drafter,
    )
