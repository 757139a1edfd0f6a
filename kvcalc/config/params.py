"""Parameter counts from a config.json, apart from the cache: only weight figures need them.

A config whose family is not listed here, or whose layers differ in shape, gets no count: the
spec then carries ``params=None`` and a reason, and only the weight figures are refused. The
cache (kvcalc.config.hfconfig) never depends on this module succeeding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..core.model import MoE, ParamCounts, RecurrentState
from ..core.text import short as _short
from .fields import CONV_KERNEL, EXPAND, STATE_SIZE, Fields, Geometry
from .limits import MAX_LAYERS, MAX_PARAMS

__all__ = ["count_parameters", "ParamReading"]

# How each architecture builds the blocks that parameter counting needs. Unlisted model types
# are counted as Llama-style (gated MLP of three matrices, no biases), and the spec says so.
_FAMILY: dict[str, dict[str, Any]] = {
    "gpt2": {"mlp": "plain", "bias": True, "norm_bias": True, "learned_positions": True},
    "falcon": {"mlp": "plain", "norm_bias": True},
    "qwen2": {"qkv_bias": True},
    "qwen2_moe": {"qkv_bias": True},
    "gpt_oss": {"attn_bias": True, "sinks": True, "expert_bias": True},
    "qwen3_next": {"gated_q": True, "qk_norm": True},
    # Qwen3.5: Qwen3-Next's blocks (gated query, q/k norms, Gated DeltaNet, MoE with a shared
    # expert); checked against transformers 5.24 on the meta device (tests/test_params_qwen35.py)
    "qwen3_5_text": {"gated_q": True, "qk_norm": True},
    "qwen3_5_moe_text": {"gated_q": True, "qk_norm": True},
    "qwen3": {"qk_norm": True},
    "qwen3_moe": {"qk_norm": True},
    "gemma2": {"norms_per_layer": 4},
    "gemma3_text": {"norms_per_layer": 4, "qk_norm": True},
    "jamba": {},
    "deepseek_v3": {},
    "deepseek_v2": {},
    "llama": {},
    "mistral": {},
    "mixtral": {},
    "phi3": {},
}


@dataclass(frozen=True, kw_only=True)
class ParamReading:
    """What counting the parameters read: the counts (and the MoE layout), or ``error`` saying
    why they cannot be counted exactly. ``vocab`` is the vocabulary once it was read, even when
    the count failed afterwards (it sizes the embedding rows a forward pass gathers)."""

    moe: MoE | None = None
    params: ParamCounts | None = None
    vocab: int | None = None
    error: str | None = None


def count_parameters(f: Fields, model_type: str, layers: list, geo: Geometry) -> ParamReading:
    """The parameters of the layers read from ``f``; never raises for a config it cannot count
    (``error`` says why instead), so that only the weight figures are lost."""
    try:
        family = _countable(model_type, layers, geo)
        hidden = f.int("hidden_size", "n_embd", "d_model")
        vocab = f.int("vocab_size")
    except ValueError as exc:
        return ParamReading(error=str(exc))
    try:
        moe = _moe(f, hidden, len(layers), family)
        params = _count_params(
            f,
            family,
            layers,
            moe,
            hidden,
            vocab,
            geo.head_dim,
            geo.q_heads,
            geo.kv_heads,
            len(layers),
        )
        if params.total > MAX_PARAMS:
            raise ValueError(
                f"the config describes {params.total:.3g} parameters, over the "
                f"{MAX_PARAMS:.3g} kvcalc counts (the largest published models "
                "have about 2 x 10^12)"
            )
    except ValueError as exc:
        return ParamReading(vocab=vocab, error=str(exc))
    return ParamReading(moe=moe, params=params, vocab=vocab)


def _countable(model_type: str, layers: list, geo: Geometry) -> dict[str, Any]:
    """The family's building blocks, or ValueError when the counter does not cover the model."""
    family = _FAMILY.get(model_type)
    if family is None:
        raise ValueError(
            f"parameter counting is not implemented for model_type {_short(model_type or '(none)')}"
        )
    if geo.per_layer_heads or any(
        not lay.stores_tokens and not lay.state_elements for lay in layers
    ):
        raise ValueError(
            "layers differ in shape (per-layer heads, shared or attention-free "
            "blocks), which the parameter counter does not cover"
        )
    if any(lay.state_elements and lay.flavor not in ("mamba", "gated_deltanet") for lay in layers):
        raise ValueError("the parameter counter covers Mamba-1 and Gated DeltaNet layers only")
    return family


def _tied(f: Fields) -> bool:
    """Whether the output head shares the input embedding. A wrapper's (vision-language) model
    follows its own top-level tie_word_embeddings when it has one, whatever its text config
    says: checked with transformers 5.24 on the meta device (Qwen3.5's and Qwen3.6's composite
    models are tied with the top-level field true, with the text config's false or absent)."""
    if f.top is not f.cfg:
        top = f.top.get("tie_word_embeddings")
        if top is not None:
            f.seen.add("tie_word_embeddings")
            if not isinstance(top, bool):
                raise ValueError(
                    f"config field 'tie_word_embeddings' must be true or false, got {_short(top)}"
                )
            return top
    return f.bool("tie_word_embeddings", True)


def _moe(f: Fields, hidden: int, n: int, family: dict) -> MoE | None:
    e = f.raw("num_local_experts", "n_routed_experts", "num_experts")
    if e is None or e in (0, 1):
        return None
    e = f.int("num_local_experts", "n_routed_experts", "num_experts")
    k = f.int(
        "num_experts_per_tok", "experts_per_token", "num_experts_per_token", "moe_top_k", "top_k"
    )
    if k > e:
        raise ValueError(
            f"config field 'num_experts_per_tok' ({k}) exceeds the number of experts ({e})"
        )
    inter = f.int("moe_intermediate_size", "intermediate_size")
    per_expert = 3 * hidden * inter
    if family.get("expert_bias"):
        per_expert += 2 * inter + hidden
    # Which layers are MoE.
    if f.has("first_k_dense_replace", "moe_layer_freq"):
        first = f.int("first_k_dense_replace", default=0, minimum=0)
        freq = f.int("moe_layer_freq", default=1)
        moe_layers = sum(1 for i in range(n) if i >= first and i % freq == 0)
    elif f.has("expert_layer_period"):
        period = f.int("expert_layer_period")
        offset = f.int("expert_layer_offset", default=0, minimum=0)
        moe_layers = sum(1 for i in range(n) if i % period == offset)
    elif f.has("decoder_sparse_step", "mlp_only_layers"):
        step = f.int("decoder_sparse_step", default=1)
        only = f.raw("mlp_only_layers", default=[]) or []
        if (
            not isinstance(only, list)
            or len(only) > MAX_LAYERS
            or any(isinstance(i, bool) or not isinstance(i, int) for i in only)
        ):
            raise ValueError("config field 'mlp_only_layers' must be a list of layer indices")
        dense = set(only)  # a set: a list membership test in the loop was quadratic
        moe_layers = sum(1 for i in range(n) if i not in dense and (i + 1) % step == 0)
    else:
        moe_layers = n
    shared = 0
    if f.has("n_shared_experts"):
        shared = f.int("n_shared_experts", minimum=0) * 3 * hidden * inter
    if f.has("shared_expert_intermediate_size"):
        shared += 3 * hidden * f.int("shared_expert_intermediate_size", minimum=0) + hidden
    return MoE(
        num_experts=e,
        top_k=k,
        expert_params=per_expert,
        layers=moe_layers,
        shared_params_per_layer=shared,
    )


def _count_params(
    f: Fields,
    family: dict,
    layers,
    moe: MoE | None,
    hidden: int,
    vocab: int,
    head_dim: int,
    q_heads: int,
    kv_heads: int,
    n: int,
) -> ParamCounts:
    """Parameters from config fields, layer by layer. Norm weights are counted; rotary tables
    and buffers are not parameters."""
    tied = _tied(f)
    embedding = vocab * hidden
    lm_head = 0 if tied else vocab * hidden
    other = 0
    if family.get("learned_positions"):
        other += f.int("n_positions", "max_position_embeddings") * hidden
    bias = family.get("bias", False) or f.raw("bias", default=False) is True
    norm_w = 2 * hidden if (family.get("norm_bias") or bias) else hidden

    attention = 0
    for layer in layers:
        if layer.kind == "mla":
            attention += _mla_params(f, hidden, q_heads)
        elif layer.kind == "state":
            attention += _state_params(f, hidden, layer)
        else:
            q_out = q_heads * head_dim * (2 if family.get("gated_q") else 1)
            kv_out = kv_heads * head_dim
            a = hidden * (q_out + 2 * kv_out) + q_heads * head_dim * hidden
            if bias or family.get("attn_bias") or f.raw("attention_bias", default=False) is True:
                a += q_out + 2 * kv_out + hidden
            elif family.get("qkv_bias"):
                a += q_out + 2 * kv_out
            if family.get("sinks"):
                a += q_heads
            if family.get("qk_norm"):
                a += 2 * head_dim
            attention += a

    # Feed-forward: dense layers are those that are not MoE.
    dense_layers = n - (moe.layers if moe else 0)
    if family.get("mlp") == "plain":
        inter = f.int("n_inner", "ffn_hidden_size", "intermediate_size", default=4 * hidden)
        per = 2 * hidden * inter + ((inter + hidden) if bias else 0)
    else:
        inter = f.int("intermediate_size", required=dense_layers > 0, default=None)
        per = 3 * hidden * inter if inter else 0
    mlp = dense_layers * per

    routed = shared = router = 0
    if moe is not None:
        routed = moe.layers * moe.num_experts * moe.expert_params
        shared = moe.layers * moe.shared_params_per_layer
        router = moe.layers * moe.num_experts * hidden
        if family.get("expert_bias"):
            router += moe.layers * moe.num_experts
        if f.has("n_group") and f.has("topk_method"):
            router += moe.layers * moe.num_experts  # DeepSeek-V3's e_score_correction_bias

    per_layer_norms = family.get("norms_per_layer", 2)
    if (
        family.get("mlp") == "plain"
        and f.raw("parallel_attn", default=False) is True
        and f.raw("new_decoder_architecture", default=False) is not True
    ):
        per_layer_norms = 1  # Falcon-7B: attention and MLP read the same normed input
    norms = n * per_layer_norms * norm_w + norm_w
    return ParamCounts(
        embedding=embedding,
        lm_head=lm_head,
        attention=attention,
        mlp=mlp,
        routed_experts=routed,
        shared_experts=shared,
        router=router,
        norms=norms,
        other=other,
        tied=tied,
    )


def _mla_params(f: Fields, hidden: int, heads: int) -> int:
    nope, rope = f.int("qk_nope_head_dim"), f.int("qk_rope_head_dim")
    v, kv_rank = f.int("v_head_dim"), f.int("kv_lora_rank")
    q_dim = heads * (nope + rope)
    if f.has("q_lora_rank"):
        q_rank = f.int("q_lora_rank")
        q = hidden * q_rank + q_rank + q_rank * q_dim  # down, norm, up
    else:
        q = hidden * q_dim
    kv = hidden * (kv_rank + rope) + kv_rank + kv_rank * heads * (nope + v)
    return q + kv + heads * v * hidden


def _state_params(f: Fields, hidden: int, layer: RecurrentState) -> int:
    if layer.flavor == "gated_deltanet":
        kh, vh = f.int("linear_num_key_heads"), f.int("linear_num_value_heads")
        kd, vd = f.int("linear_key_head_dim"), f.int("linear_value_head_dim")
        kernel = f.int("linear_conv_kernel_dim")
        key_dim, value_dim = kh * kd, vh * vd
        conv_dim = 2 * key_dim + value_dim
        return (
            hidden * (2 * key_dim + 2 * value_dim)  # in_proj_qkvz
            + hidden * 2 * vh  # in_proj_ba
            + conv_dim * kernel  # depthwise conv
            + 2 * vh
            + vd  # dt_bias, A_log, gated norm
            + value_dim * hidden
        )  # out_proj
    d_state = f.int(*STATE_SIZE)
    kernel = f.int(*CONV_KERNEL, default=4)
    d_inner = f.int(*EXPAND, default=2) * hidden
    dt_rank = f.raw("mamba_dt_rank", "time_step_rank", default="auto")
    dt_rank = (
        math.ceil(hidden / 16) if dt_rank == "auto" else f.int("mamba_dt_rank", "time_step_rank")
    )
    p = hidden * 2 * d_inner  # in_proj
    if f.raw("mamba_proj_bias", default=False) is True:
        p += 2 * d_inner + hidden
    p += d_inner * kernel + (d_inner if f.raw("mamba_conv_bias", default=True) is True else 0)
    p += d_inner * (dt_rank + 2 * d_state)  # x_proj
    p += dt_rank * d_inner + d_inner  # dt_proj with bias
    p += d_inner * d_state + d_inner  # A_log, D
    p += d_inner * hidden  # out_proj
    p += dt_rank + 2 * d_state  # Jamba's dt/B/C layer norms
    return p
