"""Parameter counters of the other families with a recurrent state (LFM2's short convolutions,
KDA, RWKV, RG-LRU), checked against transformers' model on the meta device
(tests/test_params_round6b.py, tests/test_params_switches.py, the zoo). What each counts:
docs/families.md."""

from __future__ import annotations

from ...core.model import MoE
from ..fields import Fields, Geometry, per_layer
from .blocks import Counted, biased_moe, counts, mla_params, never_tied, qkvo, tied_head, top_k


def lfm2_params(f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int) -> Counted:
    """LFM2 (transformers' Lfm2ForCausalLM, vLLM's lfm2.py)."""
    width = _lfm2_ff_width(f)
    if f.int("block_dim", default=hidden) != hidden:
        raise ValueError(
            "config field 'block_dim' differs from 'hidden_size': vLLM's LFM2 MLP reads "
            "block_dim, transformers' hidden_size"
        )
    attention = _lfm2_blocks(f, layers, hidden)
    n = len(layers)
    tied = tied_head(f, True)  # Lfm2Config's default: tied
    return None, counts(
        hidden,
        vocab,
        tied,
        attention=attention,
        mlp=n * 3 * hidden * width,
        norms=(2 * n + 1) * hidden,
    )


def _lfm2_blocks(f: Fields, layers: list, hidden: int) -> int:
    """LFM2's and LFM2-MoE's mixers: attention (q, k, v, o and the q/k norms of head_dim), or
    the short convolution (in_proj of 3 x hidden, the conv kernel, out_proj; their biases with
    conv_bias)."""
    kernel = f.int("conv_L_cache", default=3, minimum=2)
    bias = f.bool("conv_bias", False)
    return sum(
        qkvo(hidden, lay) + 2 * lay.head_dim
        if lay.stores_tokens
        else 4 * hidden * hidden + hidden * kernel + (5 * hidden if bias else 0)
        for lay in layers
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


def lfm2_moe_params(f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int) -> Counted:
    """LFM2-MoE (transformers' Lfm2MoeForCausalLM, vLLM's lfm2_moe.py)."""
    n = len(layers)
    attention = _lfm2_blocks(f, layers, hidden)
    dense = min(f.int("num_dense_layers", default=2, minimum=0), n)
    experts = f.int("num_experts", default=32)
    k = top_k(f.int("num_experts_per_tok", default=4), experts)
    per_expert = 3 * hidden * f.int("moe_intermediate_size", default=1792)
    moe_layers = n - dense
    moe = MoE(num_experts=experts, top_k=k, expert_params=per_expert, layers=moe_layers)
    router = moe_layers * experts * (hidden + (1 if f.bool("use_expert_bias", True) else 0))
    if "tie_word_embeddings" not in f.cfg and isinstance(f.cfg.get("tie_embedding"), bool):
        f.seen.add("tie_embedding")
        tied = f.cfg["tie_embedding"]
    else:
        tied = tied_head(f, True)  # Lfm2MoeConfig's default: tied
    return moe, counts(
        hidden,
        vocab,
        tied,
        attention=attention,
        mlp=dense * 3 * hidden * f.int("intermediate_size", default=7168),
        norms=(2 * n + 1) * hidden,
        experts=(moe_layers * experts * per_expert, 0, router),
    )


# Kimi K3's fields (kvcalc.config.families.table, kimi_linear): an MLA output gate, latent MoE,
# Attention Residuals' projections and norms, a full-rank KDA gate; transformers' KimiLinear
# builds none of them, so a config that sets one gets no count.
_KIMI_K3_WEIGHTS = tuple(
    """
    mla_use_output_gate routed_expert_hidden_size latent_moe_use_norm attn_res_block_size
    """.split()
)


def kimi_linear_params(f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int) -> Counted:
    """Kimi-Linear (transformers' KimiLinearForCausalLM, vLLM's kimi_linear.py,
    layers/kda.py)."""
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
    moe, parts = None, (0, 0, 0)
    if moe_layers:
        k = top_k(
            f.int("num_experts_per_token", "num_experts_per_tok"), experts, "num_experts_per_token"
        )
        inter = f.int("moe_intermediate_size")
        per_expert = 3 * hidden * inter
        if f.raw("num_shared_experts") is None:
            raise ValueError(
                "config field 'num_shared_experts' is missing: transformers' KimiLinearConfig "
                "takes 1 shared expert, vLLM's none"
            )
        per_shared = 3 * hidden * inter * f.int("num_shared_experts", minimum=0)
        moe, parts = biased_moe(experts, k, per_expert, moe_layers, per_shared, hidden)
    tied = never_tied(f, "KimiLinearForCausalLM")
    return moe, counts(
        hidden, vocab, tied, attention=attention, mlp=mlp, norms=(2 * n + 1) * hidden, experts=parts
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
    kinds = per_layer(
        "mlp_layer_types", kinds, n, ("dense", "sparse"), "'dense' or 'sparse'", "give"
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
    return mla_params(f, hidden, layer.q_heads)  # DeepSeek's MLA, from the fields it was read from


def rwkv_params(f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int) -> Counted:
    """RWKV-4 (transformers' RwkvForCausalLM; vLLM serves none)."""
    n = len(layers)
    a = f.int("attention_hidden_size", default=hidden)
    width = f.int("intermediate_size", default=4 * hidden)
    time_mix = 2 * a + 3 * hidden + 3 * hidden * a + a * hidden
    channel_mix = 2 * hidden + 2 * hidden * width + hidden * hidden
    tied = tied_head(f, False)  # RwkvConfig's default: untied
    return None, counts(
        hidden,
        vocab,
        tied,
        attention=n * time_mix,
        mlp=n * channel_mix,
        norms=(2 * n + 2) * 2 * hidden,
    )


def recurrent_gemma_params(
    f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int
) -> Counted:
    """RecurrentGemma (transformers' RecurrentGemmaForCausalLM)."""
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
    attention = sum(
        recurrent if lay.kind == "state" else qkvo(hidden, lay, bias, o_bias=True) for lay in layers
    )
    mlp_width = f.int("intermediate_size") // 2
    if not tied_head(f, True):
        raise ValueError(
            "config field 'tie_word_embeddings' is false: transformers' "
            "RecurrentGemmaForCausalLM ties its head whatever it says"
        )
    return None, counts(
        hidden,
        vocab,
        True,
        attention=attention,
        mlp=n * (3 * hidden * mlp_width + 2 * mlp_width + hidden),
        norms=(2 * n + 1) * hidden,
    )
