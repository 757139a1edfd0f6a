"""The parameter counters of families whose blocks the generic counter of
``kvcalc.config.params`` does not describe (Granite 4.0-H, Nemotron-H / Nemotron 3, LFM2,
Gemma 4, Falcon-H1; more in kvcalc.config.params_more), one function each, gathered in
``OWN_COUNTERS``. Each is checked against transformers' own model built on the meta device
(tests/test_readers_round6.py, tests/test_params_round6b.py, tests/test_params_switches.py)."""

from __future__ import annotations

from ..core.model import MoE, ParamCounts, RecurrentState
from .fields import Fields, Geometry
from .params_blocks import biased_moe
from .params_head import never_tied, tied_head
from .params_more import MORE_COUNTERS

__all__ = ["OWN_COUNTERS"]


def _granite_hybrid_params(
    f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int
) -> tuple[MoE | None, ParamCounts]:
    """Granite 4.0-H (transformers' GraniteMoeHybridForCausalLM, vLLM's granitemoehybrid.py):
    every layer has two RMSNorms, a shared MLP of shared_intermediate_size (gate and up in one
    input_linear, then output_linear) and, when num_local_experts > 0, a router and experts of
    intermediate_size; beside them GQA attention or a Mamba-2 mixer. A dense model (0 experts)
    reads intermediate_size nowhere."""
    n = len(layers)
    shared_width = f.int("shared_intermediate_size", default=1024)
    shared = 3 * hidden * shared_width
    experts = f.int("num_local_experts", default=8, minimum=0)
    moe = None
    routed = router = 0
    if experts:
        inter = f.int("intermediate_size")
        k = f.int("num_experts_per_tok", default=2)
        if k > experts:
            raise ValueError(
                f"config field 'num_experts_per_tok' ({k}) exceeds the number of experts "
                f"({experts})"
            )
        moe = MoE(
            num_experts=experts,
            top_k=k,
            expert_params=3 * hidden * inter,
            layers=n,
            shared_params_per_layer=shared,
        )
        routed = n * experts * 3 * hidden * inter
        router = n * experts * hidden
    else:
        f.seen.update({"intermediate_size", "num_experts_per_tok"})  # unused without experts
    bias = f.bool("attention_bias", False)
    q_out, kv_out = geo.q_heads * geo.head_dim, geo.kv_heads * geo.head_dim
    attn = hidden * (q_out + 2 * kv_out) + q_out * hidden
    if bias:
        attn += q_out + 2 * kv_out + hidden
    attention = 0
    for layer in layers:
        if layer.kind == "state":
            attention += _granite_mamba_params(f, hidden, layer)
        else:
            attention += attn
    tied = f.bool("tie_word_embeddings", False)  # GraniteMoeHybridConfig's default: untied
    return moe, ParamCounts(
        embedding=vocab * hidden,
        lm_head=0 if tied else vocab * hidden,
        attention=attention,
        mlp=0 if experts else n * shared,
        routed_experts=routed,
        shared_experts=n * shared if experts else 0,
        router=router,
        norms=(2 * n + 1) * hidden,
        tied=tied,
    )


def _granite_mamba_params(f: Fields, hidden: int, layer: RecurrentState) -> int:
    """GraniteMoeHybridMambaLayer: in_proj to inner + conv channels + heads, the depthwise
    conv (with its bias when mamba_conv_bias), dt_bias, A_log and D per head, the gated norm
    over inner, out_proj; mamba_proj_bias adds the two projections' biases."""
    inner = f.int("mamba_expand", default=2) * hidden
    heads = f.int("mamba_n_heads", default=128)
    conv_dim = layer.conv_elements // (layer.conv_kernel - 1)
    p = hidden * (inner + conv_dim + heads) + conv_dim * layer.conv_kernel + 3 * heads + inner
    p += inner * hidden
    if f.bool("mamba_conv_bias", True):
        p += conv_dim
    if f.bool("mamba_proj_bias", False):
        p += inner + conv_dim + heads + hidden
    return p


def _bamba_params(
    f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int
) -> tuple[MoE | None, ParamCounts]:
    """Bamba (transformers' BambaForCausalLM, vLLM's bamba.py): every layer GQA attention (at
    attn_layer_indices; biases with attention_bias) or Granite 4.0-H's Mamba-2 mixer, then a
    SwiGLU MLP of intermediate_size (biases with mlp_bias) and two RMSNorms; a final norm;
    untied by default."""
    n = len(layers)
    q_out, kv_out = geo.q_heads * geo.head_dim, geo.kv_heads * geo.head_dim
    attn = hidden * (q_out + 2 * kv_out) + q_out * hidden
    if f.bool("attention_bias", False):
        attn += q_out + 2 * kv_out + hidden
    attention = sum(
        _granite_mamba_params(f, hidden, layer) if layer.kind == "state" else attn
        for layer in layers
    )
    inter = f.int("intermediate_size")
    mlp = 3 * hidden * inter + ((2 * inter + hidden) if f.bool("mlp_bias", False) else 0)
    tied = tied_head(f, False)  # BambaConfig's default: untied
    return None, ParamCounts(
        embedding=vocab * hidden,
        lm_head=0 if tied else vocab * hidden,
        attention=attention,
        mlp=n * mlp,
        routed_experts=0,
        shared_experts=0,
        router=0,
        norms=(2 * n + 1) * hidden,
        tied=tied,
    )


_NEMOTRON_BLOCKS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}


def _nemotron_h_params(
    f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int
) -> tuple[MoE | None, ParamCounts]:
    """Nemotron-H and Nemotron 3 (transformers' NemotronHForCausalLM, vLLM's nemotron_h.py): one
    block per layer, each one RMSNorm and one mixer: a Mamba-2 mixer (M), attention (*), an
    MLP of up and down projections (-, squared ReLU, no gate) or a MoE (E): a router of
    n_routed_experts x hidden (with its score-correction bias, a weight in the checkpoint and in
    vLLM), experts of up and down projections over moe_latent_size when set (Nemotron 3
    Super / Ultra, with fc1_latent_proj and fc2_latent_proj between hidden and the latent
    width; counted with the shared expert, as both run for every token), else over hidden, and
    one shared expert of moe_shared_expert_intermediate_size. Attention has no biases
    (NemotronHAttention builds none)."""
    blocks = _nemotron_blocks(f, len(layers))
    mlp_bias = f.bool("mlp_bias", False)
    if f.bool("attention_bias", False):
        raise ValueError(
            "config field 'attention_bias' is true: NemotronHAttention builds no biases, and "
            "the parameter counter does not pick one reading"
        )
    q_out, kv_out = geo.q_heads * geo.head_dim, geo.kv_heads * geo.head_dim
    attention = mamba = 0
    for block, layer in zip(blocks, layers):
        if block == "mamba":
            mamba += _nemotron_mamba_params(f, hidden, layer)
        elif block == "attention":
            attention += hidden * (q_out + 2 * kv_out) + q_out * hidden
    n_mlp = blocks.count("mlp")
    mlp = 0
    if n_mlp:
        inter = f.int("intermediate_size")
        mlp = n_mlp * (2 * hidden * inter + (inter + hidden if mlp_bias else 0))
    moe = None
    routed = shared = router = 0
    n_moe = blocks.count("moe")
    if n_moe:
        experts = f.int("n_routed_experts", "num_local_experts")
        k = f.int("num_experts_per_tok")
        if k > experts:
            raise ValueError(
                f"config field 'num_experts_per_tok' ({k}) exceeds the number of experts "
                f"({experts})"
            )
        if f.int("n_shared_experts", default=1, minimum=0) != 1:
            raise ValueError(
                "config field 'n_shared_experts' is not 1: vLLM's NemotronHMoE builds a shared "
                "expert of n_shared_experts x moe_shared_expert_intermediate_size (none at 0), "
                "transformers' one of moe_shared_expert_intermediate_size whatever it says"
            )
        inter = f.int("moe_intermediate_size")
        width = f.int("moe_latent_size", default=hidden)
        per_expert = 2 * width * inter
        s_inter = f.int("moe_shared_expert_intermediate_size")
        per_shared = 2 * hidden * s_inter + (s_inter + hidden if mlp_bias else 0)
        if f.has("moe_latent_size"):
            per_shared += 2 * hidden * width + (width + hidden if mlp_bias else 0)
        moe, routed, shared, router = biased_moe(experts, k, per_expert, n_moe, per_shared, hidden)
    tied = never_tied(f, "NemotronHForCausalLM")
    return moe, ParamCounts(
        embedding=vocab * hidden,
        lm_head=0 if tied else vocab * hidden,
        attention=attention + mamba,
        mlp=mlp,
        routed_experts=routed,
        shared_experts=shared,
        router=router,
        norms=(len(layers) + 1) * hidden,
        tied=tied,
    )


def _nemotron_blocks(f: Fields, n: int) -> list[str]:
    """Each layer's block, from the field the cache reader read its layout from."""
    pattern = f.raw("hybrid_override_pattern")
    if isinstance(pattern, str):
        blocks = [_NEMOTRON_BLOCKS.get(c, "?") for c in pattern]
    else:
        names = f.raw("layers_block_type")
        # transformers 5.24's NemotronHConfig writes Mamba and attention blocks as
        # "linear_attention" and "full_attention" (its _pattern_to_list mapping)
        renamed = {"linear_attention": "mamba", "full_attention": "attention"}
        blocks = [str(renamed.get(b, b)) for b in names] if isinstance(names, list) else []
    if len(blocks) != n or any(b not in _NEMOTRON_BLOCKS.values() for b in blocks):
        raise ValueError(
            "the layer pattern does not give one Mamba, attention, MLP or MoE block for each "
            "layer, which the parameter counter needs"
        )
    return blocks


def _nemotron_mamba_params(f: Fields, hidden: int, layer: RecurrentState) -> int:
    """NemotronHMamba2Mixer (vLLM's MambaMixer2): in_proj to inner + conv channels + heads,
    the depthwise conv (its bias with use_conv_bias), dt_bias, A_log and D per head, the gated
    RMSNorm over inner, out_proj; use_bias adds the two projections' biases."""
    heads = f.int("mamba_num_heads")
    inner = heads * f.int("mamba_head_dim")
    conv_dim = layer.conv_elements // (layer.conv_kernel - 1)
    p = hidden * (inner + conv_dim + heads) + conv_dim * layer.conv_kernel + 3 * heads + inner
    p += inner * hidden
    if f.bool("use_conv_bias", True):
        p += conv_dim
    if f.bool("use_bias", False):
        p += inner + conv_dim + heads + hidden
    return p


def _lfm2_params(
    f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int
) -> tuple[MoE | None, ParamCounts]:
    """LFM2 (transformers' Lfm2ForCausalLM, vLLM's lfm2.py): every layer has two RMSNorms and a
    SwiGLU MLP (w1, w3, w2) beside either attention (q/k/v/out, no biases, per-head q and k
    RMSNorms) or a short convolution (in_proj to 3 x hidden, a depthwise conv of conv_L_cache
    taps, out_proj; biases with conv_bias); a final embedding_norm; tied by default.

    The MLP width: intermediate_size (block_ff_dim, its older name, wins in transformers),
    with block_auto_adjust_ff_dim taken to int(2/3 x) times block_ffn_dim_multiplier and
    rounded up to block_multiple_of. vLLM rounds even without a multiplier and transformers
    only with one, so a width the two would round differently is refused."""
    width = _lfm2_ff_width(f)
    if f.int("block_dim", default=hidden) != hidden:
        raise ValueError(
            "config field 'block_dim' differs from 'hidden_size': vLLM's LFM2 MLP reads "
            "block_dim, transformers' hidden_size"
        )
    bias = f.bool("conv_bias", False)
    kernel = f.int("conv_L_cache", default=3, minimum=2)
    q_out, kv_out = geo.q_heads * geo.head_dim, geo.kv_heads * geo.head_dim
    attention = conv = 0
    for layer in layers:
        if layer.stores_tokens:
            attention += hidden * (q_out + 2 * kv_out) + q_out * hidden + 2 * geo.head_dim
        else:
            conv += 3 * hidden * hidden + hidden * kernel + hidden * hidden
            if bias:
                conv += 3 * hidden + hidden + hidden
    n = len(layers)
    tied = tied_head(f, True)  # Lfm2Config's default: tied
    return None, ParamCounts(
        embedding=vocab * hidden,
        lm_head=0 if tied else vocab * hidden,
        attention=attention + conv,
        mlp=n * 3 * hidden * width,
        routed_experts=0,
        shared_experts=0,
        router=0,
        norms=(2 * n + 1) * hidden,
        tied=tied,
    )


def _lfm2_ff_width(f: Fields) -> int:
    base = f.int("intermediate_size", required=False)
    older = f.int("block_ff_dim", required=False)
    if base is not None and older is not None and base != older:
        raise ValueError(
            f"config fields 'block_ff_dim' ({older:,}) and 'intermediate_size' ({base:,}) "
            "differ: transformers reads block_ff_dim, and the parameter counter does not pick"
        )
    width = older if older is not None else f.int("intermediate_size", default=12288)
    if not f.bool("block_auto_adjust_ff_dim", True):
        return width
    width = int(2 * width / 3)
    # null in the file is None in Lfm2Config (absent, its default 1.0)
    multiplier = f.raw("block_ffn_dim_multiplier", default=1.0)
    if "block_ffn_dim_multiplier" in f.cfg and f.cfg["block_ffn_dim_multiplier"] is None:
        multiplier = None
    step = f.int("block_multiple_of", default=256)
    rounded = step * ((width + step - 1) // step)
    if multiplier is None:
        if rounded != width:
            raise ValueError(
                "config field 'block_ffn_dim_multiplier' is null: vLLM rounds the MLP width "
                f"up to block_multiple_of ({rounded:,}), transformers keeps {width:,}"
            )
        return width
    if isinstance(multiplier, bool) or not isinstance(multiplier, (int, float)):
        raise ValueError("config field 'block_ffn_dim_multiplier' must be a number")
    width = int(multiplier * width)
    return step * ((width + step - 1) // step)


def _gemma4_params(
    f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int
) -> tuple[MoE | None, ParamCounts]:
    """Gemma 4's language model as transformers 5.24 builds it (Gemma4TextModel): in every
    layer q and o projections over the layer's own heads and head size (global_head_dim on the
    full layers), a q RMSNorm, and, unless the layer reads another's cache
    (num_kv_shared_layers), k and v projections with a k RMSNorm (no v_proj on full layers with
    attention_k_eq_v: V is K); four RMSNorms and a GeGLU MLP, twice as wide on the KV-shared
    layers with use_double_wide_mlp; with enable_moe_block a router (a scale over hidden, one
    scale per expert, a projection) and experts of moe_intermediate_size beside the dense MLP,
    with three more RMSNorms; with hidden_size_per_layer_input (Gemma 4 E2B / E4B) the per-layer
    input embeddings, their projection and norm, and in every layer a gate, a projection and a
    norm. No biases (attention_bias true is refused)."""
    if f.bool("attention_bias", False):
        raise ValueError(
            "config field 'attention_bias' is true: the parameter counter knows Gemma 4 "
            "without attention biases only"
        )
    inter = f.int("intermediate_size")
    wide = f.bool("use_double_wide_mlp", False)
    k_eq_v = f.bool("attention_k_eq_v", False)
    attention = mlp = 0
    for layer in layers:
        shared = layer.kind == "shared"
        own = layer.reads if shared else layer
        q = own.q_heads * own.head_dim
        attention += 2 * hidden * q + own.head_dim  # q_proj, o_proj, q_norm
        if not shared:
            attention += hidden * own.kv_heads * own.head_dim + own.head_dim  # k_proj, k_norm
            if not (k_eq_v and own.kind == "full"):
                attention += hidden * own.kv_heads * own.v_head_dim
        mlp += 3 * hidden * inter * (2 if shared and wide else 1)
    n = len(layers)
    norms = (4 * n + 1) * hidden
    moe = None
    routed = router = other = 0
    unified = f.model_type == "gemma4_unified_text"
    if unified:
        _unified_without_gemma4_extras(f)
    if f.bool("enable_moe_block", False):
        experts = f.int("num_experts")
        k = f.int("top_k_experts")
        if k > experts:
            raise ValueError(
                f"config field 'top_k_experts' ({k}) exceeds the number of experts ({experts})"
            )
        per_expert = 3 * hidden * f.int("moe_intermediate_size", "expert_intermediate_size")
        moe = MoE(num_experts=experts, top_k=k, expert_params=per_expert, layers=n)
        routed = n * experts * per_expert
        router = n * (hidden + experts + experts * hidden)
        norms += 3 * n * hidden
    # absent: Gemma4TextConfig's 256; null (None in the class): none
    null = "hidden_size_per_layer_input" in f.cfg and f.cfg["hidden_size_per_layer_input"] is None
    per_layer = (
        0 if null or unified else f.int("hidden_size_per_layer_input", default=256, minimum=0)
    )
    if per_layer:
        table = f.int("vocab_size_per_layer_input", default=vocab)
        other = table * n * per_layer + n * per_layer * hidden + per_layer
        other += n * (2 * hidden * per_layer + hidden)
    tied = tied_head(f, True)  # Gemma4TextConfig's default: tied
    return moe, ParamCounts(
        embedding=vocab * hidden,
        lm_head=0 if tied else vocab * hidden,
        attention=attention,
        mlp=mlp,
        routed_experts=routed,
        shared_experts=0,
        router=router,
        norms=norms,
        other=other,
        tied=tied,
    )


def _unified_without_gemma4_extras(f: Fields) -> None:
    """Gemma 4 Unified's language model (Gemma4UnifiedTextModel) builds neither Gemma 4's MoE
    block nor its per-layer input embeddings: a file that asks for them is refused."""
    asked = [
        name
        for name in ("enable_moe_block", "hidden_size_per_layer_input")
        if f.cfg.get(name) not in (None, False, 0)
    ]
    if asked:
        raise ValueError(
            f"config field '{asked[0]}' is set: transformers' Gemma4UnifiedTextModel builds no "
            "MoE block or per-layer inputs, and the parameter counter does not pick"
        )


def _falcon_h1_params(
    f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int
) -> tuple[MoE | None, ParamCounts]:
    """Falcon-H1 (transformers' FalconH1ForCausalLM, vLLM's falcon_h1.py): every layer runs
    attention and a Mamba-2 mixer side by side, then a SwiGLU MLP, with two RMSNorms; a final
    norm; untied by default. The mixer: in_proj to inner + conv channels + heads (its bias with
    mamba_proj_bias), the depthwise conv (mamba_conv_bias), dt_bias, A_log and D per head, a
    gated RMSNorm over inner only with mamba_rms_norm, out_proj (its bias with projectors_bias,
    in transformers; vLLM's MambaMixer2 gives both projections mamba_proj_bias, so the two must
    agree). Attention and MLP biases with attention_bias and mlp_bias."""
    if f.raw("mamba_use_mlp", default=True) is not True:
        raise ValueError(
            "config field 'mamba_use_mlp' is not true: transformers' FalconH1DecoderLayer "
            "builds the MLP in every layer whatever it says"
        )
    proj_bias = f.bool("mamba_proj_bias", False)
    if f.bool("projectors_bias", False) != proj_bias:
        raise ValueError(
            "config fields 'projectors_bias' and 'mamba_proj_bias' differ: transformers gives "
            "the Mamba out_proj one and vLLM the other"
        )
    attn_bias = f.bool("attention_bias", False)
    mlp_bias = f.bool("mlp_bias", False)
    inter = f.int("intermediate_size")
    heads = f.int("mamba_n_heads")
    q_out, kv_out = geo.q_heads * geo.head_dim, geo.kv_heads * geo.head_dim
    per_attention = hidden * (q_out + 2 * kv_out) + q_out * hidden
    if attn_bias:
        per_attention += q_out + 2 * kv_out + hidden
    attention = 0
    for layer in layers:
        state = layer.state
        conv_dim = state.conv_elements // (state.conv_kernel - 1)
        inner = state.ssm_elements // f.int("mamba_d_state")
        mixer = hidden * (inner + conv_dim + heads) + conv_dim * state.conv_kernel + 3 * heads
        mixer += inner * hidden
        if f.bool("mamba_conv_bias", True):
            mixer += conv_dim
        if f.bool("mamba_rms_norm", False):
            mixer += inner
        if proj_bias:
            mixer += inner + conv_dim + heads + hidden
        attention += per_attention + mixer
    n = len(layers)
    mlp = n * (3 * hidden * inter + (2 * inter + hidden if mlp_bias else 0))
    tied = tied_head(f, False)  # FalconH1Config's default: untied
    return None, ParamCounts(
        embedding=vocab * hidden,
        lm_head=0 if tied else vocab * hidden,
        attention=attention,
        mlp=mlp,
        routed_experts=0,
        shared_experts=0,
        router=0,
        norms=(2 * n + 1) * hidden,
        tied=tied,
    )


# Families whose blocks the generic counter does not describe, each counted by its own function.
OWN_COUNTERS = {
    "granitemoehybrid": _granite_hybrid_params,
    "bamba": _bamba_params,
    "nemotron_h": _nemotron_h_params,
    "lfm2": _lfm2_params,
    "gemma4_text": _gemma4_params,
    # Gemma 4 Unified's language model: Gemma 4's blocks, per-layer head sizes from
    # per_layer_config (the cache reader's layers carry them)
    "gemma4_unified_text": _gemma4_params,
    "falcon_h1": _falcon_h1_params,
    **MORE_COUNTERS,
}
