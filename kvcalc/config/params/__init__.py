"""Parameter counts from a config.json, apart from the cache: only weight figures need them.
A family counts by its record's ``params`` entry (the generic counter here, adding up
``blocks``) or its own ``counter``; without either it gets ``params=None`` and a reason.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ...core.model import MoE, ParamCounts
from ...core.text import short as _short
from ..families.understood import Family
from ..fields import Fields, Geometry
from ..limits import MAX_LAYERS, MAX_PARAMS
from .blocks import (
    counts,
    cross_params,
    dense_mlp,
    gqa_params,
    indexer_params,
    mla_params,
    norm_width,
    state_params,
    switch,
    top_k,
)
from .blocks import tied_head as _tied

__all__ = ["count_parameters", "ParamReading"]


@dataclass(frozen=True, kw_only=True)
class ParamReading:
    """What counting the parameters read: the counts (and the MoE layout), or ``error`` saying
    why they cannot be counted exactly. ``vocab`` is the vocabulary once it was read, even when
    the count failed afterwards (it sizes the embedding rows a forward pass gathers)."""

    moe: MoE | None = None
    params: ParamCounts | None = None
    vocab: int | None = None
    error: str | None = None


def count_parameters(f: Fields, fam: Family | None, layers: list, geo: Geometry) -> ParamReading:
    """The parameters of the layers read from ``f`` by the family's record ``fam``; never raises
    for a config it cannot count (``error`` says why instead), so that only the weight figures
    are lost."""
    model_type = f.model_type
    special = fam.counter if fam is not None else None
    mlx = _mlx_quantization(f) or _draft_head(f)
    if mlx:
        return ParamReading(error=mlx)
    try:
        family = {} if special else _countable(model_type, fam, layers, geo)
        hidden = f.int("hidden_size", "n_embd", "d_model")
        # ChatGLM's embedding and head are padded_vocab_size wide (vLLM's chatglm.py)
        vocab = f.int("padded_vocab_size" if model_type == "chatglm" else "vocab_size")
    except ValueError as exc:
        return ParamReading(error=str(exc))
    # the family's config-class defaults of the fields only the count reads, for this count
    cache_defaults = f.defaults
    f.defaults = {**family.get("defaults", {}), **cache_defaults}
    try:
        if special:
            moe, params = special(f, layers, geo, hidden, vocab)
        else:
            moe = _moe(f, hidden, len(layers), family)
            params = _count_params(f, family, layers, moe, hidden, vocab)
        _check_total(params)
    except ValueError as exc:
        return ParamReading(vocab=vocab, error=str(exc))
    finally:
        f.defaults = cache_defaults
    return ParamReading(moe=moe, params=params, vocab=vocab)


def _mlx_quantization(f: Fields) -> str | None:
    """Why the weight figures are not derived for a checkpoint mlx-lm quantized (its block:
    ``quantization``, or ``quantization_config`` without quant_method), or None; why:
    docs/families.md (Two rules of the parameter count)."""
    for where in (f.top, f.cfg):
        block = where.get("quantization") if isinstance(where, dict) else None
        if not isinstance(block, dict):
            q = where.get("quantization_config") if isinstance(where, dict) else None
            block = q if isinstance(q, dict) and "quant_method" not in q else None
        if isinstance(block, dict) and ("bits" in block or "group_size" in block):
            bits, group = block.get("bits"), block.get("group_size")
            return (
                f"the weights are MLX-quantized ({_short(bits)} bits in groups of "
                f"{_short(group)}, per-group scales): their bytes depend "
                "on which tensors mlx-lm quantized, which the config does not settle"
            )
    return None


# What marks an EAGLE draft head's config (the "eagle" field group of kvcalc.config.families).
_EAGLE_MARKS = frozenset(
    {"draft_vocab_size", "truncated_vocab_size", "target_hidden_size", "eagle_config"}
)


def _draft_head(f: Fields) -> str | None:
    """Why an EAGLE draft head gets no parameter count, or None for any other model. The head
    is no Llama decoder: vLLM's llama_eagle3.py gives it an fc from the target's aux hidden
    states, q/k/v over 2 x hidden_size (embeddings and hidden states side by side), an lm_head
    of draft_vocab_size and no embedding of its own in most checkpoints."""
    top = f.top if isinstance(f.top, dict) else {}
    archs = top.get("architectures")
    named = isinstance(archs, list) and any(
        isinstance(a, str) and "eagle" in a.lower() for a in archs
    )
    if (
        named
        or "speculators_model_type" in top
        or any(f.cfg.get(k) is not None for k in _EAGLE_MARKS)
    ):
        return (
            "an EAGLE draft head: its fusion layer, q/k/v over twice hidden_size and "
            "draft-vocabulary lm_head are not a Llama decoder's, which is all the parameter "
            "counter describes"
        )
    return None


def _check_total(params: ParamCounts) -> None:
    if params.total > MAX_PARAMS:
        raise ValueError(
            f"the config describes {params.total:.3g} parameters, over the "
            f"{MAX_PARAMS:.3g} kvcalc counts (the largest published models "
            "have about 2 x 10^12)"
        )


# The layer kinds the generic counter describes; a family's entry adds others it knows how to
# count ("layers").
_GENERIC_KINDS = frozenset({"full", "sliding", "chunked", "mla", "state"})


def _countable(model_type: str, fam: Family | None, layers: list, geo: Geometry) -> dict[str, Any]:
    """The family's building blocks, or ValueError when the counter does not cover the model."""
    if fam is not None and fam.uncountable:
        raise ValueError(fam.uncountable)
    family = fam.params if fam is not None else None
    if family is None:
        raise ValueError(
            f"parameter counting is not implemented for model_type {_short(model_type or '(none)')}"
        )
    family = dict(family)
    allowed = _GENERIC_KINDS | set(family.get("layers", ()))
    if any(lay.kind not in allowed for lay in layers):
        raise ValueError(
            "layers differ in shape (shared or attention-free blocks), which the parameter "
            "counter does not cover for this family"
        )
    states = ("mamba", "gated_deltanet", *family.get("states", ()))
    if any(lay.state_elements and lay.flavor not in states for lay in layers):
        raise ValueError("the parameter counter covers Mamba-1 and Gated DeltaNet layers only")
    return family


_EXPERTS = ("num_local_experts", "n_routed_experts", "num_experts", "moe_num_experts")
_TOP_K = tuple(
    """
    num_experts_per_tok experts_per_token num_experts_per_token moe_top_k top_k moe_topk moe_k
    """.split()
)
_SHARED = ("n_shared_experts", "num_shared_experts", "moe_num_shared_experts")


def _moe(f: Fields, hidden: int, n: int, family: dict) -> MoE | None:
    e = f.raw(*_EXPERTS)
    if e is None or e in (0, 1):
        return None
    e = f.int(*_EXPERTS)
    k = top_k(f.int(*_TOP_K), e)
    inter = f.int(*family.get("expert_width", ("moe_intermediate_size", "intermediate_size")))
    per_expert = 3 * hidden * inter
    if family.get("expert_bias"):
        per_expert += 2 * inter + hidden
    moe_layers = _moe_layer_count(f, n, family)
    shared = family.get("shared_count", 0) * 3 * hidden * inter
    if f.has(*_SHARED):
        shared = f.int(*_SHARED, minimum=0) * 3 * hidden * inter
    width_field = family.get("shared_width", "shared_expert_intermediate_size")
    if f.has(width_field):
        width = f.int(width_field, minimum=0)
        if width:
            # Qwen2-MoE's shared_expert_gate: one weight per hidden channel
            shared += 3 * hidden * width + (hidden if family.get("shared_expert_gate") else 0)
    if shared and switch(f, family, "shared_bias"):
        width = shared // (3 * hidden)  # the shared experts side by side: one wider MLP
        shared += 2 * width + hidden
    return MoE(
        num_experts=e,
        top_k=k,
        expert_params=per_expert,
        layers=moe_layers,
        shared_params_per_layer=shared,
    )


# The fields of the older MoE layouts, one of which _older_layout reads.
_OLDER_LAYOUT = tuple(
    """
    first_k_dense_replace moe_layer_freq expert_layer_period expert_layer_offset decoder_sparse_step
    mlp_only_layers moe_layer_start_index moe_layer_end_index moe_layer_interval moe_layers
    interleave_moe_layer_step num_dense_layers
    """.split()
)


def _moe_layer_count(f: Fields, n: int, family: dict) -> int:
    """How many of the n layers route to experts, by whichever of the layouts the config gives:
    mlp_layer_types ("dense" / "sparse", transformers' newer field) or an older one
    (_older_layout), else every layer. Where the file gives mlp_layer_types and an older field
    both, they must agree (transformers reads the first, vLLM the others); layers past the list
    (an MTP layer counted on top) follow the older fields."""
    kinds = f.raw("mlp_layer_types")
    older = _older_layout(f, n, family)
    if kinds is None:
        return sum(older) if older is not None else n
    if (
        not isinstance(kinds, list)
        or len(kinds) > MAX_LAYERS
        or any(k not in ("dense", "sparse") for k in kinds)
    ):
        raise ValueError("config field 'mlp_layer_types' must list 'dense' or 'sparse'")
    listed = [k == "sparse" for k in kinds]
    if older is not None and any(f.cfg.get(k) is not None for k in _OLDER_LAYOUT):
        if listed != older[: len(listed)]:
            raise ValueError(
                "config fields 'mlp_layer_types' and the older MoE layout fields "
                "(first_k_dense_replace, moe_layer_freq, mlp_only_layers...) give different MoE "
                "layers: transformers reads the first, vLLM the others"
            )
        return sum(older)
    if len(listed) != n:
        raise ValueError(
            f"config field 'mlp_layer_types' must give one entry for each of the {n} layers"
        )
    return sum(listed)


def _older_layout(f: Fields, n: int, family: dict) -> list[bool] | None:  # noqa: C901
    """Which layers route to experts by the older layouts (the file's fields, else the family's
    config-class defaults): first_k_dense_replace and moe_layer_freq (DeepSeek's),
    expert_layer_period and offset (Jamba's), decoder_sparse_step and mlp_only_layers
    (Qwen-MoE's), Llama 4's moe_layers, ERNIE 4.5's start / end / interval; None for none.

    One branch per layout (C901), read in the order the engines give them."""
    dense_first = family.get("first_dense_field")
    if dense_first and f.has(dense_first):
        first = f.int(dense_first, minimum=0)  # AFMoE's num_dense_layers
        return [i >= first for i in range(n)]
    if isinstance(f.raw("moe_layer_freq"), list):
        return _moe_layer_list(f, n)
    if f.has("first_k_dense_replace", "moe_layer_freq"):
        first = f.int("first_k_dense_replace", default=0, minimum=0)
        freq = f.int("moe_layer_freq", default=1)
        return [i >= first and i % freq == 0 for i in range(n)]
    if f.has("expert_layer_period"):
        period = f.int("expert_layer_period")
        offset = f.int("expert_layer_offset", default=0, minimum=0)
        return [i % period == offset for i in range(n)]
    if f.has("decoder_sparse_step", "mlp_only_layers"):
        step = f.int("decoder_sparse_step", default=1)
        only = f.raw("mlp_only_layers", default=[]) or []
        if (
            not isinstance(only, list)
            or len(only) > MAX_LAYERS
            or any(isinstance(i, bool) or not isinstance(i, int) for i in only)
        ):
            raise ValueError("config field 'mlp_only_layers' must be a list of layer indices")
        dense = set(only)  # a set: a list membership test in the loop was quadratic
        return [i not in dense and (i + 1) % step == 0 for i in range(n)]
    if family.get("moe_layers") == "llama4":
        # Llama 4: the moe_layers indices, else every interleave_moe_layer_step-th layer
        # (Llama4TextConfig builds the list from the step when it is absent)
        step = f.int("interleave_moe_layer_step", default=1)
        given = f.raw("moe_layers", default=list(range(step - 1, n, step)))
        if not isinstance(given, list) or any(not isinstance(i, int) for i in given):
            raise ValueError("config field 'moe_layers' must be a list of layer indices")
        chosen = set(given)
        return [i in chosen for i in range(n)]
    if family.get("moe_layers") == "ernie":
        start = f.int("moe_layer_start_index", default=0, minimum=0)
        end = f.int("moe_layer_end_index", default=n - 1, minimum=0)
        every = f.int("moe_layer_interval", default=1)
        return [start <= i <= end and (i - start) % every == 0 for i in range(n)]
    return None


def _moe_layer_list(f: Fields, n: int) -> list[bool]:
    """moe_layer_freq given as one flag a layer (MiMo-V2-Flash's: transformers'
    MiMoV2FlashDecoderLayer builds its sparse MoE block where ``config.moe_layer_freq[layer_idx]``
    is true, as vLLM's mimo_v2_flash.py does). A list must flag every layer with 0 or 1; a
    first_k_dense_replace beside it must not make a flagged layer dense (the two readings would
    build different layers)."""
    flags = f.raw("moe_layer_freq")
    if (
        len(flags) != n
        or len(flags) > MAX_LAYERS
        or any(isinstance(x, bool) or x not in (0, 1) for x in flags)
    ):
        raise ValueError(
            f"config field 'moe_layer_freq' given as a list must give 0 (dense) or 1 (MoE) for "
            f"each of the {n} layers"
        )
    first = f.int("first_k_dense_replace", default=0, minimum=0)
    if any(flags[:first]):
        raise ValueError(
            "config fields 'moe_layer_freq' (a list) and 'first_k_dense_replace' give different "
            "MoE layers: one flags a layer the other keeps dense"
        )
    return [x == 1 for x in flags]


def _count_params(
    f: Fields, family: dict, layers: list, moe: MoE | None, hidden: int, vocab: int
) -> ParamCounts:
    """Parameters from config fields, layer by layer. Norm weights are counted; rotary tables
    and buffers are not parameters."""
    n = len(layers)
    for name, why in family.get("must_be_zero", {}).items():
        if f.raw(name, default=0) not in (0, None):
            raise ValueError(f"config field '{name}' is not 0: {why}")
    tied = _tied(f, family.get("tied_default", True))
    other = 0
    if family.get("learned_positions"):
        positions = f.int("n_positions", "max_position_embeddings")
        other += (positions + family.get("positions_offset", 0)) * hidden
    if switch(f, family, "head_bias"):
        other += vocab  # the output head's bias (Phi, GPT-J, CodeGen, CTRL), tied or not

    attention = sum(_layer_params(f, family, hidden, layer) for layer in layers)

    # Feed-forward: dense layers are those that are not MoE.
    dense_layers = n - (moe.layers if moe else 0)
    dense = family.get("dense_width")
    mlp_family = family if dense is None else {**family, "mlp_width": dense}
    mlp = dense_layers * dense_mlp(f, mlp_family, hidden, required=dense_layers > 0)

    routed = shared = router = 0
    if moe is not None:
        routed = moe.layers * moe.num_experts * moe.expert_params
        shared = moe.layers * moe.shared_params_per_layer
        bias = (1 if family.get("expert_bias") else 0) + _score_bias(f, family)
        router = moe.layers * moe.num_experts * (hidden + bias)

    per_layer_norms = family.get("norms_per_layer", 2)
    if switch(f, family, "post_norms_field"):
        per_layer_norms += 2  # HyperCLOVA X's post_norm1 and post_norm2 (use_post_norm)
    if switch(f, family, "parallel_norms_field"):
        per_layer_norms = 1  # StableLM's parallel residual: one input norm, no second
    if (
        family.get("falcon_norms")
        and f.raw("parallel_attn", default=False) is True
        and f.raw("new_decoder_architecture", default=False) is not True
    ):
        per_layer_norms = 1  # Falcon-7B: attention and MLP read the same normed input
    width = norm_width(f, family, hidden)
    norms = n * per_layer_norms * width
    if moe is not None and family.get("moe_norm"):
        norms += moe.layers * width  # A.X K1's post_mlp_layernorm inside each MoE block
    norms += width * (int(family.get("final_norm", True)) + int(family.get("embed_norm", False)))
    counted = counts(
        hidden,
        vocab,
        tied,
        attention=attention,
        mlp=mlp,
        norms=norms,
        other=other,
        experts=(routed, shared, router),
    )
    # Mllama's embedding has 8 more rows than the head (its image-related special tokens)
    return replace(counted, embedding=(vocab + family.get("extra_vocab", 0)) * hidden)


def _layer_params(f: Fields, family: dict, hidden: int, layer) -> int:
    """One layer's attention (or mixer) block, by its kind."""
    # MLA: the latent layer, or one transformers caches per head (MiniCPM3's reading)
    if layer.kind == "mla" or getattr(layer, "latent_rank", None):
        p = mla_params(f, hidden, layer.q_heads)
        if family.get("indexer") and layer.extra is not None:
            p += indexer_params(f, hidden)
        return p
    if layer.kind == "state":
        return state_params(f, hidden, layer)
    if layer.kind == "cross":
        return cross_params(f, hidden, layer)
    return gqa_params(f, family, hidden, layer)


def _score_bias(f: Fields, family: dict) -> int:
    """1 when the router has a score-correction bias per expert, else 0: the family's
    ``score_bias`` / ``no_score_bias`` / ``routing_bias`` rule (DeepSeek-V3, DeepSeek-V2,
    MiniMax-M2; the rules and their sources: docs/families.md, Two rules of the parameter
    count)."""
    bias = family.get("score_bias")
    if bias == "always":
        return 1
    if bias or family.get("no_score_bias"):
        method = f.raw("topk_method", default="noaux_tc" if bias else None)
        if (method == "noaux_tc") != bool(bias):
            raise ValueError(
                f"config field 'topk_method' is {_short(method)}: vLLM gives the router a "
                "score-correction bias for 'noaux_tc' only, transformers' "
                f"{_short(f.model_type)} {'always' if bias else 'never'}"
            )
        return 1 if bias else 0
    if family.get("routing_bias"):
        return 1 if f.bool(family["routing_bias"], True) else 0
    return 0
