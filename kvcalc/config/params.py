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
from .params_own import OWN_COUNTERS as _OWN_COUNTERS
from .params_own import tied_head as _tied

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
    # score_bias: the router's e_score_correction_bias (_score_bias says when)
    "deepseek_v3": {"score_bias": True},
    "deepseek_v2": {"no_score_bias": True},
    # tied_default: the output head's tie when the config names none, the default of the
    # family's transformers config class where kvcalc's generic default, tied, is not it.
    # Kimi K2 / K2.5's language model is DeepSeek-V3's (vLLM serves kimi_k2 with
    # DeepseekV3ForCausalLM; transformers' kimi_k25 builds DeepseekV3 from the text config)
    "kimi_k2": {"score_bias": True, "tied_default": False},
    # DeepSeek sparse attention: DeepSeek-V3's blocks plus the indexer's projections in every
    # layer (transformers' GlmMoeDsaIndexer and DeepseekV32Indexer: wq_b, wk, k_norm,
    # weights_proj)
    "deepseek_v32": {"indexer": True, "score_bias": True, "tied_default": False},
    "glm_moe_dsa": {"indexer": True, "score_bias": True, "tied_default": False},
    # MiMo (7B): Qwen2's blocks (vLLM's mimo.py); its MTP layers are the drafter's, not counted
    "mimo": {"qkv_bias": True, "tied_default": False},
    # EXAONE 4 and EXAONE 4.5's language model: per-head q/k RMSNorms, and the two norms after
    # attention and after the MLP (Exaone4DecoderLayer)
    "exaone4": {"qk_norm": True, "tied_default": False},
    "exaone4_5_text": {"qk_norm": True, "tied_default": False},
    # MiniMax-M2: q/k RMSNorm over the whole projection (qk_norm_type "per_layer"), every layer
    # MoE, and the router's score-correction bias where use_routing_bias (vLLM's minimax_m2.py)
    "minimax_m2": {
        "qk_norm_full": True,
        "routing_bias": "use_routing_bias",
        "tied_default": False,
    },
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
    special = _OWN_COUNTERS.get(model_type)
    mlx = _mlx_quantization(f) or _draft_head(f)
    if mlx:
        return ParamReading(error=mlx)
    try:
        family = {} if special else _countable(model_type, layers, geo)
        hidden = f.int("hidden_size", "n_embd", "d_model")
        vocab = f.int("vocab_size")
    except ValueError as exc:
        return ParamReading(error=str(exc))
    try:
        if special:
            moe, params = special(f, layers, geo, hidden, vocab)
            _check_total(params)
            return ParamReading(moe=moe, params=params, vocab=vocab)
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
        _check_total(params)
    except ValueError as exc:
        return ParamReading(vocab=vocab, error=str(exc))
    return ParamReading(moe=moe, params=params, vocab=vocab)


def _mlx_quantization(f: Fields) -> str | None:
    """Why the weight figures are not derived for a checkpoint mlx-lm quantized, or None.

    mlx-lm writes its block as ``quantization`` (and again as ``quantization_config``, with no
    quant_method): ``bits`` and ``group_size`` (and ``mode``) for every Linear and Embedding
    whose input width the group divides, each group with its own scale and, in the default
    affine mode, bias in the model's 16-bit type (mlx-lm's ``nn.quantize`` /
    ``mx.quantize``), and per-tensor entries that override them. Weight bytes therefore depend
    on which tensors were quantized at which width, which the config alone does not settle;
    the cache does not depend on it at all."""
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
    tied = _tied(f, family.get("tied_default", True))
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
            if family.get("indexer") and layer.extra is not None:
                attention += _indexer_params(f, hidden)
        elif layer.kind == "state":
            attention += _state_params(f, hidden, layer)
        else:
            attention += _gqa_params(f, family, hidden, head_dim, q_heads, kv_heads, bias)

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
        router += moe.layers * moe.num_experts * _score_bias(f, family)

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


def _score_bias(f: Fields, family: dict) -> int:
    """1 when the router has a score-correction bias per expert (a buffer in transformers, a
    weight in vLLM and the checkpoint), else 0.

    DeepSeek-V3's router (DeepseekV3TopkRouter, and the families built on it) always has one
    in transformers; vLLM's deepseek_v2.py makes it only for topk_method "noaux_tc", so another
    method is refused. DeepSeek-V2's router (transformers' DeepseekV2Moe) has none, and vLLM
    none without noaux_tc. MiniMax-M2's router always has one in transformers and in vLLM's
    minimax_m2.py with use_routing_bias (its real files say true); false is read as vLLM does."""
    if family.get("score_bias") or family.get("no_score_bias"):
        method = f.raw("topk_method", default="noaux_tc" if family.get("score_bias") else None)
        if (method == "noaux_tc") != bool(family.get("score_bias")):
            raise ValueError(
                f"config field 'topk_method' is {_short(method)}: vLLM gives the router a "
                "score-correction bias for 'noaux_tc' only, transformers' "
                f"{_short(f.model_type)} {'always' if family.get('score_bias') else 'never'}"
            )
        return 1 if family.get("score_bias") else 0
    if family.get("routing_bias"):
        return 1 if f.bool(family["routing_bias"], True) else 0
    return 0


def _gqa_params(
    f: Fields, family: dict, hidden: int, head_dim: int, q_heads: int, kv_heads: int, bias: bool
) -> int:
    """One attention layer of query and KV heads: q, k, v, o, their biases, sinks and q/k norms
    as the family builds them."""
    q_out = q_heads * head_dim * (2 if family.get("gated_q") else 1)
    kv_out = kv_heads * head_dim
    a = hidden * (q_out + 2 * kv_out) + q_heads * head_dim * hidden
    if family.get("qkv_bias"):
        # Qwen2's q, k and v biases and no o_proj bias, whatever attention_bias says
        # (Qwen2Attention in transformers and vLLM never reads it; MiMo's files write
        # attention_bias: true)
        f.seen.add("attention_bias")
        a += q_out + 2 * kv_out
    elif bias or family.get("attn_bias") or f.raw("attention_bias", default=False) is True:
        a += q_out + 2 * kv_out + hidden
    if family.get("sinks"):
        a += q_heads
    if family.get("qk_norm"):
        a += 2 * head_dim
    if family.get("qk_norm_full"):
        a += _full_qk_norm(f, q_out + kv_out)
    return a


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


def _full_qk_norm(f: Fields, widths: int) -> int:
    """MiniMax-M2's q/k RMSNorms span the whole q and k projections (transformers'
    MiniMaxM2Attention, vLLM's MiniMaxText01RMSNormTP), which qk_norm_type "per_layer" names;
    another value is not counted."""
    kind = f.raw("qk_norm_type", default="per_layer")
    if kind != "per_layer":
        raise ValueError(
            f"config field 'qk_norm_type' is {_short(kind)}: the parameter counter knows "
            "MiniMax-M2's 'per_layer' q/k norms only"
        )
    if f.raw("use_qk_norm", default=True) is False:
        return 0
    return widths


def _indexer_params(f: Fields, hidden: int) -> int:
    """The DeepSeek-sparse-attention indexer of one layer (transformers 5.24's GlmMoeDsaIndexer
    and DeepseekV32Indexer): wq_b from the query latent to index_n_heads x index_head_dim, wk
    from the hidden state to one index_head_dim key, its LayerNorm (weight and bias) and
    weights_proj to one weight per index head."""
    heads, dim = f.int("index_n_heads"), f.int("index_head_dim")
    q_rank = f.int("q_lora_rank")
    return q_rank * heads * dim + hidden * dim + 2 * dim + hidden * heads


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
