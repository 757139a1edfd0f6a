"""The building blocks parameter counters add up, one layer at a time: attention of query and
K/V heads, MLA, the Mamba-1 and Gated DeltaNet mixers, the dense MLP, the output head's tie, and
the switches each family's entry names (kvcalc.config.families.table). Each function reads only
the fields its family's modeling code reads."""

from __future__ import annotations

import math

from ...core.model import MoE, ParamCounts, RecurrentState
from ...core.text import short as _short
from ..fields import CONV_KERNEL, EXPAND, STATE_SIZE, Fields

# What a family's own parameter counter returns: its MoE (None without experts) and counts
Counted = tuple[MoE | None, ParamCounts]


def switch(f: Fields, family: dict, key: str, default: bool | str = False) -> bool:
    """A family's switch: True or False as the entry says, or the value of the config field it
    names (false when the field is absent, unless the entry names it with its class default:
    ("attention_bias", True))."""
    value = family.get(key, default)
    if isinstance(value, tuple):
        return f.bool(value[0], value[1])
    if isinstance(value, str):
        return f.bool(value, False)
    return bool(value)


def norm_width(f: Fields, family: dict, hidden: int) -> int:
    """The parameters of one normalisation over ``width``: its weight (RMSNorm, LayerNorm
    without bias), weight and bias (LayerNorm), or none (OLMo's non-parametric LayerNorm,
    nanochat's RMSNorm)."""
    kind = family.get("norm", "rms")
    if kind == "none":
        return 0
    if kind == "ln" or family.get("norm_bias") or switch(f, family, "bias"):
        return 2 * hidden
    return hidden


def qkvo(hidden: int, heads, qkv_bias: bool = False, o_bias: bool = False) -> int:
    """The q, k, v and o projections of ``heads`` (a layer or a Geometry: q_heads and kv_heads
    of head_dim), with the q, k, v biases and the o bias where asked."""
    q, kv = heads.q_heads * heads.head_dim, heads.kv_heads * heads.head_dim
    bias = (q + 2 * kv if qkv_bias else 0) + (hidden if o_bias else 0)
    return hidden * (q + 2 * kv) + q * hidden + bias


def gqa_params(f: Fields, family: dict, hidden: int, layer) -> int:
    """One attention layer of query and K/V heads (the layer's own counts): q, k, v, o, the
    biases, sinks, q/k norms, gates and the extras the family's entry names."""
    q_heads, kv_heads, head_dim = layer.q_heads, layer.kv_heads, layer.head_dim
    v_dim = getattr(layer, "v_head_dim", head_dim) or head_dim
    q_out = q_heads * head_dim * (2 if family.get("gated_q") else 1)
    kv_out = kv_heads * (head_dim + v_dim)
    o_in = q_heads * v_dim
    a = hidden * (q_out + kv_out) + o_in * hidden
    if switch(f, family, "qkv_bias"):
        # Qwen2's q, k and v biases and no o_proj bias, whatever attention_bias says
        # (Qwen2Attention in transformers and vLLM never reads it; MiMo's files write
        # attention_bias: true)
        f.seen.add("attention_bias")
        a += q_out + kv_out
    elif (
        family.get("attn_bias")
        or switch(f, family, "bias")
        or switch(f, family, "bias_field", "attention_bias")
    ):
        a += q_out + kv_out + hidden
    elif switch(f, family, "qkv_bias_field"):
        a += q_out + kv_out + (hidden if switch(f, family, "o_bias_field") else 0)
    elif switch(f, family, "o_bias_field"):
        a += hidden
    if family.get("sinks") and (family["sinks"] is True or layer.kind == family["sinks"]):
        a += q_heads
    a += _qk_norm(f, family, q_heads, kv_heads, head_dim)
    if family.get("qk_norm_full"):
        a += _full_qk_norm(f, q_out + kv_heads * head_dim)
    if family.get("out_gate"):
        a += hidden * q_heads * head_dim  # AFMoE's gate_proj, no bias
    if family.get("attn_out_gate"):
        a += hidden * q_heads * head_dim + q_heads  # Beam's gate_proj and its per-head gate_bias
    if family.get("head_gate"):
        a += hidden * q_heads * _head_gate(f, family["head_gate"], head_dim)
    if family.get("attn_sub_norm"):
        a += o_in  # BitNet's attn_sub_norm before o_proj
    if family.get("diff_lambdas"):
        a += 4 * head_dim  # DiffLlama's lambda_q1, lambda_k1, lambda_q2, lambda_k2
    return a


def _head_gate(f: Fields, field: str, head_dim: int) -> int:
    """Laguna's g_proj outputs per query head: one (gating true or "per-head"; true when
    absent, LagunaConfig's default); transformers builds one per channel for any other value,
    which the counter does not vouch for."""
    value = f.raw(field, default=True)
    if value is True or value == "per-head":
        return 1
    raise ValueError(
        f"config field '{field}' is {_short(value)}: the parameter counter knows Laguna's "
        "per-head gate (true or 'per-head') only"
    )


def _qk_norm(f: Fields, family: dict, q_heads: int, kv_heads: int, head_dim: int) -> int:
    """Query and key norms: "head" (one RMSNorm of head_dim for all heads), "head_ln" (one
    LayerNorm of head_dim with bias), "full" (a weight for every head's every channel: OLMo 2's
    RMSNorm over the whole projection, Cohere's and StableLM's per-head LayerNorms), "head_l2"
    (Llama 4's weightless L2 norm); switched by the field ``qk_norm_field`` names."""
    kind = family.get("qk_norm")
    if not kind or ("qk_norm_field" in family and not switch(f, family, "qk_norm_field")):
        return 0
    if kind is True or kind == "head":
        return 2 * head_dim
    if kind == "head_ln":
        return 4 * head_dim
    if kind == "full":
        return (q_heads + kv_heads) * head_dim
    return 0  # "head_l2": no weights


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


def mla_params(f: Fields, hidden: int, heads: int) -> int:
    """One MLA layer (DeepSeek-V2/V3's): the query (q_proj, or q_a_proj, its norm and q_b_proj
    with q_lora_rank), kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj. attention_bias
    true is refused: transformers then gives q_a_proj, kv_a_proj_with_mqa and o_proj biases,
    vLLM's deepseek_v2.py none."""
    if f.bool("attention_bias", False):
        raise ValueError(
            "config field 'attention_bias' is true: transformers gives the MLA projections "
            "biases, vLLM's deepseek_v2.py none, and the parameter counter does not pick"
        )
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


def indexer_params(f: Fields, hidden: int) -> int:
    """The DeepSeek-sparse-attention indexer of one layer (transformers 5.24's GlmMoeDsaIndexer
    and DeepseekV32Indexer): wq_b from the query latent to index_n_heads x index_head_dim, wk
    from the hidden state to one index_head_dim key, its LayerNorm (weight and bias) and
    weights_proj to one weight per index head."""
    heads, dim = f.int("index_n_heads"), f.int("index_head_dim")
    q_rank = f.int("q_lora_rank")
    return q_rank * heads * dim + hidden * dim + 2 * dim + hidden * heads


def state_params(f: Fields, hidden: int, layer: RecurrentState) -> int:
    """A Gated DeltaNet layer (Qwen3-Next's), MiniMax's lightning attention or a Mamba-1 mixer
    with Jamba's dt/B/C norms."""
    if layer.flavor == "lightning":
        # MiniMaxLightningAttention: qkv_proj (3 x heads x head_dim), out_proj, output_gate
        # and an RMSNorm over heads x head_dim, no biases
        heads = f.int("num_attention_heads")
        width = heads * f.int("head_dim", default=hidden // heads)
        return 5 * hidden * width + width
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
    return mamba1_mixer(f, hidden) + _jamba_norms(f, hidden)


def mamba1_mixer(f: Fields, hidden: int, bias_field: str = "mamba_proj_bias") -> int:
    """A Mamba-1 mixer: in_proj to 2 x inner, the depthwise conv, x_proj to dt_rank + 2 x
    d_state, dt_proj with its bias, A_log and D, out_proj (transformers' MambaMixer and
    JambaMambaMixer); ``bias_field`` adds the in/out projections' biases."""
    d_state = f.int(*STATE_SIZE)
    kernel = f.int(*CONV_KERNEL, default=4)
    d_inner = f.int(*EXPAND, default=2) * hidden
    p = hidden * 2 * d_inner  # in_proj
    if f.raw(bias_field, default=False) is True:
        p += 2 * d_inner + hidden
    conv_bias = f.raw("mamba_conv_bias", "use_conv_bias", default=True) is True
    p += d_inner * kernel + (d_inner if conv_bias else 0)
    rank = _dt_rank(f, hidden)
    p += d_inner * (rank + 2 * d_state)  # x_proj
    p += rank * d_inner + d_inner  # dt_proj with bias
    p += d_inner * d_state + d_inner  # A_log, D
    return p + d_inner * hidden  # out_proj


def _dt_rank(f: Fields, hidden: int) -> int:
    rank = f.raw("mamba_dt_rank", "time_step_rank", default="auto")
    if rank == "auto":
        return math.ceil(hidden / 16)
    return f.int("mamba_dt_rank", "time_step_rank")


def _jamba_norms(f: Fields, hidden: int) -> int:
    """Jamba's RMSNorms over dt (rank), B and C (d_state each) in every Mamba layer."""
    return _dt_rank(f, hidden) + 2 * f.int(*STATE_SIZE)


def cross_params(f: Fields, hidden: int, layer) -> int:
    """A cross-attention layer over image states (Mllama's MllamaTextCrossAttention): q, k, v,
    o projections without biases, q and k RMSNorms of head_dim, and the layer's two scalar
    gates (cross_attn_attn_gate, cross_attn_mlp_gate)."""
    return qkvo(hidden, layer) + 2 * layer.head_dim + 2


def dense_mlp(f: Fields, family: dict, hidden: int, required: bool) -> int:
    """One dense feed-forward block: gated (gate, up, down) of intermediate_size, or plain (up,
    down) of the width the entry's ``mlp_width`` names, with biases where the entry says."""
    bias = switch(f, family, "mlp_bias") or switch(f, family, "bias")
    plain = family.get("mlp") == "plain"
    names = family.get(
        "mlp_width", ("n_inner", "ffn_hidden_size", "intermediate_size") if plain else None
    ) or ("intermediate_size",)
    if plain:
        default = family.get("mlp_default", 4)
        inter = f.int(*names, default=default * hidden if default else None)
        per = 2 * hidden * inter + ((inter + hidden) if bias else 0)
    else:
        inter = f.int(*names, required=required, default=None)
        if not inter:
            return 0
        per = 3 * hidden * inter + ((2 * inter + hidden) if bias else 0)
    if family.get("ffn_sub_norm"):
        per += inter  # BitNet's ffn_sub_norm before down_proj
    if family.get("xielu"):
        per += 2  # Apertus's xIELU activation: alpha_p and alpha_n
    return per


def biased_moe(
    experts: int, k: int, per_expert: int, layers: int, per_shared: int, hidden: int
) -> tuple[MoE, tuple[int, int, int]]:
    """A mixture of experts whose router keeps a bias per expert (Nemotron-H, Kimi-Linear: the
    checkpoint's e_score_correction_bias): the MoE, and its routed, shared and router
    parameters over ``layers`` MoE layers."""
    moe = MoE(
        num_experts=experts,
        top_k=k,
        expert_params=per_expert,
        layers=layers,
        shared_params_per_layer=per_shared,
    )
    return moe, (
        layers * experts * per_expert,
        layers * per_shared,
        layers * (experts * hidden + experts),
    )


def tied_head(f: Fields, default: bool = True) -> bool:
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
    return f.bool("tie_word_embeddings", default)


def never_tied(f: Fields, model_class: str) -> bool:
    """False, for a family whose transformers class never ties its output head (no tied
    weights, whatever tie_word_embeddings says); true is refused, as vLLM ties the head then."""
    if tied_head(f, False):
        raise ValueError(
            f"config field 'tie_word_embeddings' is true: transformers' {model_class} never ties "
            "the output head, vLLM ties it, and the parameter counter does not pick"
        )
    return False


def counts(
    hidden: int,
    vocab: int,
    tied: bool,
    *,
    attention: int,
    mlp: int,
    norms: int,
    other: int = 0,
    experts: tuple[int, int, int] = (0, 0, 0),
) -> ParamCounts:
    """The counts of a model whose embedding and (untied) head are vocab x hidden; ``experts``:
    its routed experts, shared experts and router."""
    routed, shared, router = experts
    return ParamCounts(
        embedding=vocab * hidden,
        lm_head=0 if tied else vocab * hidden,
        attention=attention,
        mlp=mlp,
        routed_experts=routed,
        shared_experts=shared,
        router=router,
        norms=norms,
        other=other,
        tied=tied,
    )


def top_k(k: int, experts: int, field: str = "num_experts_per_tok") -> int:
    """``k`` experts per token, refused when over the ``experts`` there are."""
    if k > experts:
        raise ValueError(f"config field '{field}' ({k}) exceeds the number of experts ({experts})")
    return k
