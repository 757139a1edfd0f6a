"""More parameter counters of families whose blocks the generic counter of
``kvcalc.config.params`` does not describe (Kimi-Linear, the Mamba families, MPT, OPT,
GPT-NeoX-Japanese, RWKV, Gemma 3n, LFM2-MoE, RecurrentGemma, ChatGLM, DBRX), one function
each, checked against transformers 5.24's own model built on the meta device
(tests/test_params_round6b.py, tests/test_params_families.py, tests/test_params_switches.py
and the zoo), or by hand from vLLM's model file where transformers ships none (ChatGLM)."""

from __future__ import annotations

from ..core.model import MoE, ParamCounts
from .fields import CONV_KERNEL, EXPAND, STATE_SIZE, Fields, Geometry
from .params_blocks import biased_moe, mamba1_mixer
from .params_head import never_tied, tied_head

__all__ = ["MORE_COUNTERS"]


# Kimi K3's fields (kvcalc.config.family_table, kimi_linear): an MLA output gate, latent MoE,
# Attention Residuals' projections and norms, a full-rank KDA gate; transformers' KimiLinear
# builds none of them, so a config that sets one gets no count.
_KIMI_K3_WEIGHTS = (
    "mla_use_output_gate",
    "routed_expert_hidden_size",
    "latent_moe_use_norm",
    "attn_res_block_size",
)


def _kimi_linear_params(
    f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int
) -> tuple[MoE | None, ParamCounts]:
    """Kimi-Linear (transformers' KimiLinearForCausalLM, vLLM's kimi_linear.py with
    layers/kda.py). A KDA layer of H heads x D: q, k, v projections of hidden x H x D, one
    depthwise conv of conv kernel taps over the 3 x H x D channels (no bias), the forget
    gate's dt_bias (H x D), A_log (H) and low-rank f_a / f_b projections (rank D), b_proj
    (hidden x H), the low-rank output gate g_a / g_b, o_norm (D) and o_proj. An MLA layer:
    q_proj (or q_a / norm / q_b with q_lora_rank), kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj,
    o_proj. Every layer two RMSNorms and either a SwiGLU MLP of intermediate_size (the first
    first_k_dense_replace layers, and those off moe_layer_freq) or a MoE: router with its
    score-correction bias (a weight in vLLM and the checkpoint), experts of
    moe_intermediate_size, and a shared MLP of num_shared_experts x moe_intermediate_size."""
    set_k3 = [k for k in _KIMI_K3_WEIGHTS if f.cfg.get(k) not in (None, False)]
    gate = f.cfg.get("linear_attn_config")
    if isinstance(gate, dict) and gate.get("use_full_rank_gate"):
        set_k3.append("linear_attn_config.use_full_rank_gate")
    if set_k3:
        raise ValueError(
            "config fields "
            + ", ".join(f"'{k}'" for k in set_k3)
            + " are Kimi K3's (latent MoE, output gates, attention residuals): transformers' "
            "KimiLinear builds none of them, and the parameter counter knows Kimi-Linear only"
        )
    attention = 0
    for layer in layers:
        if layer.kind == "mla":
            attention += _kimi_mla(f, hidden, layer)
        else:
            kernel = layer.conv_kernel
            width = layer.conv_elements // (3 * (kernel - 1))  # H x D
            d = layer.ssm_elements // width
            h = width // d
            attention += 3 * hidden * width + 3 * width * kernel  # q, k, v; conv
            attention += width + h + hidden * d + d * width  # dt_bias, A_log, f_a, f_b
            attention += hidden * h + hidden * d + d * width  # b_proj, g_a, g_b
            attention += d + width * hidden  # o_norm, o_proj
    n = len(layers)
    experts = f.int("num_experts", required=False)
    if experts is None and "num_experts" not in f.cfg:
        raise ValueError(
            "config field 'num_experts' is missing: transformers' KimiLinearConfig takes 256 "
            "experts, vLLM's none"
        )
    moe_layers = _kimi_moe_layers(f, n) if experts is not None else 0
    mlp = (n - moe_layers) * 3 * hidden * f.int("intermediate_size") if moe_layers < n else 0
    moe = None
    routed = shared = router = 0
    if moe_layers:
        k = f.int("num_experts_per_token", "num_experts_per_tok")
        if k > experts:
            raise ValueError(
                f"config field 'num_experts_per_token' ({k}) exceeds the number of experts "
                f"({experts})"
            )
        inter = f.int("moe_intermediate_size")
        per_expert = 3 * hidden * inter
        if f.raw("num_shared_experts") is None:
            raise ValueError(
                "config field 'num_shared_experts' is missing: transformers' KimiLinearConfig "
                "takes 1 shared expert, vLLM's none"
            )
        per_shared = 3 * hidden * inter * f.int("num_shared_experts", minimum=0)
        moe, routed, shared, router = biased_moe(
            experts, k, per_expert, moe_layers, per_shared, hidden
        )
    tied = never_tied(f, "KimiLinearForCausalLM")
    return moe, ParamCounts(
        embedding=vocab * hidden,
        lm_head=0 if tied else vocab * hidden,
        attention=attention,
        mlp=mlp,
        routed_experts=routed,
        shared_experts=shared,
        router=router,
        norms=(2 * n + 1) * hidden,
        tied=tied,
    )


def _kimi_moe_layers(f: Fields, n: int) -> int:
    """How many layers route to experts. transformers' KimiLinearConfig reads mlp_layer_types
    ("dense" / "sparse" per layer), built from first_k_dense_replace when absent (default 1),
    and ignores moe_layer_freq; vLLM's kimi_linear.py reads first_k_dense_replace (default 0)
    and moe_layer_freq. Where the two would build different layers, the count is refused."""
    first = f.int("first_k_dense_replace", required=False, minimum=0)
    freq = f.int("moe_layer_freq", default=1)
    vllm = None
    if first is not None:
        vllm = [i >= first and i % freq == 0 for i in range(n)]
    kinds = f.raw("mlp_layer_types")
    if kinds is None:
        if vllm is None:
            raise ValueError(
                "config field 'first_k_dense_replace' is missing: transformers' KimiLinearConfig "
                "takes 1 dense layer, vLLM's 0"
            )
        if freq != 1:
            raise ValueError(
                "config field 'moe_layer_freq' is not 1: vLLM routes every moe_layer_freq-th "
                "layer, transformers' KimiLinear every layer past first_k_dense_replace"
            )
        return sum(vllm)
    if (
        not isinstance(kinds, list)
        or len(kinds) != n
        or any(k not in ("dense", "sparse") for k in kinds)
    ):
        raise ValueError(
            "config field 'mlp_layer_types' must give 'dense' or 'sparse' for each of the "
            f"{n} layers"
        )
    sparse = [k == "sparse" for k in kinds]
    if vllm is not None and vllm != sparse:
        raise ValueError(
            "config fields 'mlp_layer_types' and 'first_k_dense_replace' / 'moe_layer_freq' "
            "give different MoE layers: transformers reads the first, vLLM the others"
        )
    return sum(sparse)


def _kimi_mla(f: Fields, hidden: int, layer) -> int:
    if f.bool("attention_bias", False):
        raise ValueError(
            "config field 'attention_bias' is true: transformers gives Kimi-Linear's MLA "
            "projections biases, vLLM's kimi_linear.py none, and the parameter counter does "
            "not pick"
        )
    heads, rope, rank = layer.q_heads, layer.qk_rope_head_dim, layer.kv_lora_rank
    q_dim = heads * layer.qk_head_dim
    nope = layer.qk_head_dim - rope
    if f.has("q_lora_rank"):
        q_rank = f.int("q_lora_rank")
        q = hidden * q_rank + q_rank + q_rank * q_dim
    else:
        q = hidden * q_dim
    kv = hidden * (rank + rope) + rank + rank * heads * (nope + layer.v_head_dim)
    return q + kv + heads * layer.v_head_dim * hidden


def _counts(
    hidden: int, vocab: int, tied: bool, *, attention: int, mlp: int, norms: int, other: int = 0
) -> ParamCounts:
    return ParamCounts(
        embedding=vocab * hidden,
        lm_head=0 if tied else vocab * hidden,
        attention=attention,
        mlp=mlp,
        routed_experts=0,
        shared_experts=0,
        router=0,
        norms=norms,
        other=other,
        tied=tied,
    )


def _mamba_params(
    f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int
) -> tuple[MoE | None, ParamCounts]:
    """Mamba and Falcon-Mamba (transformers' MambaForCausalLM, FalconMambaForCausalLM, vLLM's
    mamba.py): every layer one RMSNorm and a Mamba-1 mixer (in_proj and out_proj biased with
    use_bias, the conv with use_conv_bias; Falcon-Mamba's B/C/dt norms have no weights), a final
    norm; tied by default."""
    n = len(layers)
    tied = tied_head(f, True)  # MambaConfig's and FalconMambaConfig's default: tied
    mixer = mamba1_mixer(f, hidden, bias_field="use_bias")
    return None, _counts(hidden, vocab, tied, attention=n * mixer, mlp=0, norms=(n + 1) * hidden)


def _mamba2_params(
    f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int
) -> tuple[MoE | None, ParamCounts]:
    """Mamba-2 (transformers' Mamba2ForCausalLM, vLLM's mamba2.py): every layer one RMSNorm and
    a Mamba-2 mixer: in_proj to 2 x inner + 2 x n_groups x state_size + num_heads (inner =
    expand x hidden), the depthwise conv over inner + 2 x n_groups x state_size channels,
    dt_bias, A_log and D per head, the gated RMSNorm over inner, out_proj; use_bias biases the
    projections, use_conv_bias the conv. A final norm; untied by default."""
    n = len(layers)
    inner = f.int(*EXPAND, default=2) * hidden
    heads = f.int("num_heads")
    groups_state = 2 * f.int("n_groups", default=1) * f.int(*STATE_SIZE)
    conv_dim = inner + groups_state
    kernel = f.int(*CONV_KERNEL, default=4)
    mixer = hidden * (2 * inner + groups_state + heads) + conv_dim * kernel + 3 * heads + inner
    mixer += inner * hidden
    if f.bool("use_conv_bias", True):
        mixer += conv_dim
    if f.bool("use_bias", False):
        mixer += 2 * inner + groups_state + heads + hidden
    tied = tied_head(f, False)  # Mamba2Config's default: untied
    return None, _counts(hidden, vocab, tied, attention=n * mixer, mlp=0, norms=(n + 1) * hidden)


def _mpt_params(
    f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int
) -> tuple[MoE | None, ParamCounts]:
    """MPT (transformers' MptForCausalLM): every layer two LayerNorms, Wqkv (3 x d_model) and
    out_proj, an MLP of expansion_ratio x d_model; ALiBi positions; the head tied to wte. Only
    the files both engines read alike are counted: no_bias true (transformers builds no linear
    biases whatever it says, vLLM's mpt.py biases them without it), ALiBi (no learned positions
    in transformers), no q/k LayerNorms (qk_ln), multi-head attention, tied."""
    attn = f.obj("attn_config") or {}
    refused = [
        name
        for name, bad in (
            ("no_bias", not f.bool("no_bias", True)),
            ("attn_config.alibi", attn.get("alibi", True) is not True),
            ("attn_config.qk_ln", attn.get("qk_ln", False) is not False),
            ("tie_word_embeddings", not tied_head(f, True)),
            ("attn_config.kv_n_heads", any(lay.kv_heads != lay.q_heads for lay in layers)),
        )
        if bad
    ]
    if refused:
        raise ValueError(
            f"config field '{refused[0]}' describes an MPT that transformers' MptForCausalLM "
            "and vLLM's mpt.py build differently (or transformers not at all): the parameter "
            "counter does not pick"
        )
    n = len(layers)
    width = f.int("expansion_ratio", default=4) * hidden
    return None, _counts(
        hidden,
        vocab,
        True,
        attention=n * 4 * hidden * hidden,
        mlp=n * 2 * hidden * width,
        norms=(2 * n + 1) * hidden,
    )


def _opt_params(
    f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int
) -> tuple[MoE | None, ParamCounts]:
    """OPT (transformers' OPTForCausalLM, vLLM's opt.py): embeddings of word_embed_proj_dim
    with project_in / project_out to hidden where it differs (no biases), learned positions of
    max_position_embeddings + 2 (OPT's offset), every layer q, k, v, out_proj and an MLP of
    ffn_dim (biased with enable_bias), two LayerNorms (weight and bias, none without
    layer_norm_elementwise_affine), a final one with do_layer_norm_before; tied by default."""
    n = len(layers)
    proj = f.int("word_embed_proj_dim", default=hidden)
    bias = f.bool("enable_bias", True)
    ln = 2 * hidden if f.bool("layer_norm_elementwise_affine", True) else 0
    final = f.bool("do_layer_norm_before", True) and not f.bool("_remove_final_layer_norm", False)
    ffn = f.int("ffn_dim")
    other = (f.int("max_position_embeddings") + 2) * hidden
    if proj != hidden:
        other += 2 * proj * hidden  # project_in, project_out
    tied = tied_head(f, True)  # OPTConfig's default: tied
    counts = _counts(
        proj,
        vocab,
        tied,
        attention=n * (4 * hidden * hidden + (4 * hidden if bias else 0)),
        mlp=n * (2 * hidden * ffn + (ffn + hidden if bias else 0)),
        norms=(2 * n + int(final)) * ln,
        other=other,
    )
    return None, counts


def _gpt_neox_japanese_params(
    f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int
) -> tuple[MoE | None, ParamCounts]:
    """GPT-NeoX-Japanese (transformers' GPTNeoXJapaneseForCausalLM): every layer two LayerNorms
    (weight and bias), an unbiased query_key_value and dense, an unbiased MLP of
    intermediate_multiple_size x hidden; the last layer's attention adds one dense_bias; a
    final LayerNorm; tied by default."""
    n = len(layers)
    width = f.int("intermediate_multiple_size", default=4) * hidden
    tied = tied_head(f, True)  # GPTNeoXJapaneseConfig's default: tied
    return None, _counts(
        hidden,
        vocab,
        tied,
        attention=n * 4 * hidden * hidden + hidden,
        mlp=n * 2 * hidden * width,
        norms=(2 * n + 1) * 2 * hidden,
    )


def _rwkv_params(
    f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int
) -> tuple[MoE | None, ParamCounts]:
    """RWKV-4 (transformers' RwkvForCausalLM, vLLM serves none): every layer two LayerNorms
    (weight and bias) and the first a third (pre_ln); time mixing: time_decay and time_first
    of attention_hidden_size, three time_mix vectors of hidden, key, value, receptance (hidden
    to attention_hidden_size) and output back; channel mixing: two time_mix vectors, key to
    intermediate_size, receptance, value back; a final LayerNorm; the head untied by default."""
    n = len(layers)
    a = f.int("attention_hidden_size", default=hidden)
    width = f.int("intermediate_size", default=4 * hidden)
    time_mix = 2 * a + 3 * hidden + 3 * hidden * a + a * hidden
    channel_mix = 2 * hidden + 2 * hidden * width + hidden * hidden
    tied = tied_head(f, False)  # RwkvConfig's default: untied
    return None, _counts(
        hidden,
        vocab,
        tied,
        attention=n * time_mix,
        mlp=n * channel_mix,
        norms=(2 * n + 2) * 2 * hidden,
    )


def _gemma3n_params(
    f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int
) -> tuple[MoE | None, ParamCounts]:
    """Gemma 3n's language model (transformers' Gemma3nForCausalLM / Gemma3nTextModel): every
    layer q_proj, q_norm and o_proj, and, unless it reads another layer's cache
    (num_kv_shared_layers), k_proj, v_proj and k_norm (v_norm has no weight), the projections
    biased with attention_bias; a GeGLU MLP of
    its own intermediate_size (a list or one width); four RMSNorms; AltUp (correct_output_scale,
    correction_coefs of altup_num_inputs^2, prediction_coefs of altup_num_inputs^3, a router
    of hidden x altup_num_inputs and its norm); LAuReL (two projections of laurel_rank and a
    norm); the per-layer input gate and projection of hidden_size_per_layer_input and a norm.
    Beside the layers: the per-layer embeddings (vocab_size_per_layer_input x layers x
    hidden_size_per_layer_input), their projection from hidden and norm, the AltUp projections
    and unembedding projections (altup_num_inputs - 1 each), the final norm; tied by default."""
    n = len(layers)
    widths = f.raw("intermediate_size")
    if isinstance(widths, list):
        if len(widths) != n or any(isinstance(w, bool) or not isinstance(w, int) for w in widths):
            raise ValueError(
                f"config field 'intermediate_size' must give a width for each of the {n} layers"
            )
    else:
        widths = [f.int("intermediate_size")] * n
    inputs = f.int("altup_num_inputs", default=4)
    rank = f.int("laurel_rank", default=64)
    per_layer = f.int("hidden_size_per_layer_input", default=256)
    table = f.int("vocab_size_per_layer_input", default=262144)
    bias = f.bool("attention_bias", False)  # biases on q, k, v and o_proj
    attention = 0
    for layer in layers:
        shared = layer.kind == "shared"
        own = layer.reads if shared else layer
        q = own.q_heads * own.head_dim
        attention += 2 * hidden * q + own.head_dim  # q_proj, o_proj, q_norm
        attention += (q + hidden) if bias else 0
        if not shared:
            kv = own.kv_heads * own.head_dim
            attention += 2 * hidden * kv + own.head_dim + (2 * kv if bias else 0)
    mlp = sum(3 * hidden * w for w in widths)
    altup = hidden + inputs * inputs + inputs**3 + hidden * inputs + hidden
    laurel = 2 * hidden * rank + hidden
    per_layer_blocks = 2 * hidden * per_layer + hidden
    other = n * (altup + laurel + per_layer_blocks)
    other += table * n * per_layer + hidden * n * per_layer + per_layer
    other += 2 * (inputs - 1) * hidden * hidden
    tied = tied_head(f, True)  # Gemma3nTextConfig's default: tied
    return None, _counts(
        hidden,
        vocab,
        tied,
        attention=attention,
        mlp=mlp,
        norms=(4 * n + 1) * hidden,
        other=other,
    )


def _lfm2_moe_params(
    f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int
) -> tuple[MoE | None, ParamCounts]:
    """LFM2-MoE (transformers' Lfm2MoeForCausalLM, vLLM's lfm2_moe.py): LFM2's layers (attention
    with per-head q/k RMSNorms, or the short convolution: in_proj to 3 x hidden, a depthwise
    conv of conv_L_cache taps, out_proj, biases with conv_bias), two RMSNorms each, a SwiGLU
    MLP of intermediate_size (as given) in the first num_dense_layers and a MoE in the rest:
    a router of num_experts x hidden with, under use_expert_bias, its per-expert bias (a buffer
    in transformers, the router's score-correction bias in vLLM and the checkpoint), experts of
    moe_intermediate_size; a final embedding_norm; tied by default (tie_embedding, its older
    name, read as transformers reads it)."""
    n = len(layers)
    kernel = f.int("conv_L_cache", default=3, minimum=2)
    bias = f.bool("conv_bias", False)
    attention = 0
    for layer in layers:
        if layer.stores_tokens:
            q, kv = layer.q_heads * layer.head_dim, layer.kv_heads * layer.head_dim
            attention += 2 * hidden * (q + kv) + 2 * layer.head_dim
        else:
            attention += 4 * hidden * hidden + hidden * kernel + (5 * hidden if bias else 0)
    dense = min(f.int("num_dense_layers", default=2, minimum=0), n)
    experts = f.int("num_experts", default=32)
    k = f.int("num_experts_per_tok", default=4)
    if k > experts:
        raise ValueError(
            f"config field 'num_experts_per_tok' ({k}) exceeds the number of experts ({experts})"
        )
    per_expert = 3 * hidden * f.int("moe_intermediate_size", default=1792)
    moe_layers = n - dense
    moe = MoE(num_experts=experts, top_k=k, expert_params=per_expert, layers=moe_layers)
    router = moe_layers * experts * (hidden + (1 if f.bool("use_expert_bias", True) else 0))
    if "tie_word_embeddings" not in f.cfg and isinstance(f.cfg.get("tie_embedding"), bool):
        f.seen.add("tie_embedding")
        tied = f.cfg["tie_embedding"]
    else:
        tied = tied_head(f, True)  # Lfm2MoeConfig's default: tied
    return moe, ParamCounts(
        embedding=vocab * hidden,
        lm_head=0 if tied else vocab * hidden,
        attention=attention,
        mlp=dense * 3 * hidden * f.int("intermediate_size", default=7168),
        routed_experts=moe_layers * experts * per_expert,
        shared_experts=0,
        router=router,
        norms=(2 * n + 1) * hidden,
        tied=tied,
    )


def _recurrent_gemma_params(
    f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int
) -> tuple[MoE | None, ParamCounts]:
    """RecurrentGemma (transformers' RecurrentGemmaForCausalLM): every layer two RMSNorms
    (temporal_pre_norm, channel_pre_norm) and a gated MLP of intermediate_size / 2 with biases;
    its temporal block is local attention (q, k, v biased with attention_bias, o_proj always)
    or a recurrent block of lru_width: linear_x, linear_y, linear_out (biased), a depthwise
    conv of conv1d_width taps with bias, and the RG-LRU (recurrent_param, input and recurrent
    gates: one lru_width / heads square per head, with biases). A final norm; the head is the
    embedding (tied)."""
    n = len(layers)
    width = f.int("lru_width", default=hidden)
    heads = f.int("num_attention_heads")
    if width % heads:
        raise ValueError("config field 'lru_width' must be a multiple of 'num_attention_heads'")
    taps = f.int("conv1d_width", default=4)
    recurrent = 2 * (hidden * width + width) + width * hidden + hidden  # linear_x, _y, _out
    recurrent += width * taps + width + width  # conv_1d with its bias, recurrent_param
    recurrent += 2 * (width * width // heads + width)  # input and recurrent gates
    bias = f.bool("attention_bias", False)
    attention = 0
    for layer in layers:
        if layer.kind == "state":
            attention += recurrent
            continue
        q, kv = layer.q_heads * layer.head_dim, layer.kv_heads * layer.head_dim
        attention += hidden * (q + 2 * kv) + q * hidden + hidden + ((q + 2 * kv) if bias else 0)
    mlp_width = f.int("intermediate_size") // 2
    if not tied_head(f, True):
        raise ValueError(
            "config field 'tie_word_embeddings' is false: transformers' "
            "RecurrentGemmaForCausalLM ties its head whatever it says"
        )
    return None, _counts(
        hidden,
        vocab,
        True,
        attention=attention,
        mlp=n * (3 * hidden * mlp_width + 2 * mlp_width + hidden),
        norms=(2 * n + 1) * hidden,
    )


def _chatglm_params(
    f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int
) -> tuple[MoE | None, ParamCounts]:
    """ChatGLM 2 / 3 and GLM-4 in its first format (remote code; transformers ships no
    chatglm, so the oracle is vLLM's chatglm.py, by hand in tests/test_params_families.py):
    embedding and output_layer of padded_vocab_size, every layer query_key_value for the query
    heads and the multi-query groups (biased with add_qkv_bias or add_bias_linear), dense and
    an MLP of ffn_hidden_size with gate and up fused (biased with add_bias_linear), two norms
    (RMSNorm with rmsnorm, else LayerNorm with bias), a final norm with post_layer_norm; untied
    unless tie_word_embeddings says so."""
    n = len(layers)
    linear_bias = f.bool("add_bias_linear", False)
    qkv_bias = f.bool("add_qkv_bias", False) or linear_bias
    norm = hidden if f.bool("rmsnorm", True) else 2 * hidden
    ffn = f.int("ffn_hidden_size")
    attention = 0
    for layer in layers:
        q, kv = layer.q_heads * layer.head_dim, layer.kv_heads * layer.head_dim
        attention += hidden * (q + 2 * kv) + q * hidden
        attention += ((q + 2 * kv) if qkv_bias else 0) + (hidden if linear_bias else 0)
    mlp = n * (3 * hidden * ffn + ((2 * ffn + hidden) if linear_bias else 0))
    final = f.bool("post_layer_norm", True)
    tied = tied_head(f, False)  # vLLM ties output_layer only when the file says so
    return None, _counts(
        hidden, vocab, tied, attention=attention, mlp=mlp, norms=(2 * n + int(final)) * norm
    )


def _dbrx_params(
    f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int
) -> tuple[MoE | None, ParamCounts]:
    """DBRX (transformers' DbrxForCausalLM, vLLM's dbrx.py): every block two LayerNorms without
    bias, Wqkv for the query heads and attn_config.kv_n_heads K/V heads and out_proj (no
    biases), and a MoE in every layer: a router of moe_num_experts x d_model and experts (w1,
    v1, w2) of ffn_config.ffn_hidden_size; a final norm; never tied (DbrxConfig refuses
    tie_word_embeddings true)."""
    ffn = f.obj("ffn_config") or {}

    def whole(name: str, default: int) -> int:
        value = ffn.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"config field 'ffn_config.{name}' must be a whole number")
        return value

    experts, k = whole("moe_num_experts", 4), whole("moe_top_k", 1)
    if k > experts:
        raise ValueError(
            f"config field 'ffn_config.moe_top_k' ({k}) exceeds the number of experts ({experts})"
        )
    per_expert = 3 * hidden * whole("ffn_hidden_size", 3584)
    n = len(layers)
    attention = sum(
        hidden * (lay.q_heads + 2 * lay.kv_heads) * lay.head_dim
        + lay.q_heads * lay.head_dim * hidden
        for lay in layers
    )
    tied = never_tied(f, "DbrxForCausalLM")  # DbrxConfig refuses tie_word_embeddings true
    return MoE(num_experts=experts, top_k=k, expert_params=per_expert, layers=n), ParamCounts(
        embedding=vocab * hidden,
        lm_head=0 if tied else vocab * hidden,
        attention=attention,
        mlp=0,
        routed_experts=n * experts * per_expert,
        shared_experts=0,
        router=n * experts * hidden,
        norms=(2 * n + 1) * hidden,
        tied=tied,
    )


MORE_COUNTERS = {
    "dbrx": _dbrx_params,
    "chatglm": _chatglm_params,
    "recurrent_gemma": _recurrent_gemma_params,
    "lfm2_moe": _lfm2_moe_params,
    "gemma3n_text": _gemma3n_params,
    "kimi_linear": _kimi_linear_params,
    "mamba": _mamba_params,
    "falcon_mamba": _mamba_params,
    "mamba2": _mamba2_params,
    "mpt": _mpt_params,
    "opt": _opt_params,
    "gpt_neox_japanese": _gpt_neox_japanese_params,
    "rwkv": _rwkv_params,
}
