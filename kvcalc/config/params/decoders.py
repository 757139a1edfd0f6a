"""Parameter counters of the attention-only families the generic counter does not describe,
checked against transformers 5.24's model on the meta device, or by hand from vLLM's model file
where transformers ships none (ChatGLM). What each counts: docs/families.md."""

from __future__ import annotations

from ...core.model import MoE
from ..fields import Fields, Geometry
from .blocks import Counted, counts, never_tied, qkvo, tied_head, top_k


def gemma4_params(f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int) -> Counted:
    """Gemma 4's language model as transformers 5.24 builds it (Gemma4TextModel)."""
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
        k = top_k(f.int("top_k_experts"), experts, "top_k_experts")
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
    return moe, counts(
        hidden,
        vocab,
        tied,
        attention=attention,
        mlp=mlp,
        norms=norms,
        other=other,
        experts=(routed, 0, router),
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


def gemma3n_params(f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int) -> Counted:
    """Gemma 3n's language model (transformers' Gemma3nForCausalLM / Gemma3nTextModel)."""
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
    return None, counts(
        hidden, vocab, tied, attention=attention, mlp=mlp, norms=(4 * n + 1) * hidden, other=other
    )


def mpt_params(f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int) -> Counted:
    """MPT (transformers' MptForCausalLM), where both engines read the file alike."""
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
    return None, counts(
        hidden,
        vocab,
        True,
        attention=n * 4 * hidden * hidden,
        mlp=n * 2 * hidden * width,
        norms=(2 * n + 1) * hidden,
    )


def opt_params(f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int) -> Counted:
    """OPT (transformers' OPTForCausalLM, vLLM's opt.py)."""
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
    return None, counts(
        proj,
        vocab,
        tied,
        attention=n * (4 * hidden * hidden + (4 * hidden if bias else 0)),
        mlp=n * (2 * hidden * ffn + (ffn + hidden if bias else 0)),
        norms=(2 * n + int(final)) * ln,
        other=other,
    )


def gpt_neox_japanese_params(
    f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int
) -> Counted:
    """GPT-NeoX-Japanese (transformers' GPTNeoXJapaneseForCausalLM)."""
    n = len(layers)
    width = f.int("intermediate_multiple_size", default=4) * hidden
    tied = tied_head(f, True)  # GPTNeoXJapaneseConfig's default: tied
    return None, counts(
        hidden,
        vocab,
        tied,
        attention=n * 4 * hidden * hidden + hidden,
        mlp=n * 2 * hidden * width,
        norms=(2 * n + 1) * 2 * hidden,
    )


def chatglm_params(f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int) -> Counted:
    """ChatGLM 2 / 3 and GLM-4 in its first format (remote code: vLLM's chatglm.py is the
    oracle)."""
    n = len(layers)
    linear_bias = f.bool("add_bias_linear", False)
    qkv_bias = f.bool("add_qkv_bias", False) or linear_bias
    norm = hidden if f.bool("rmsnorm", True) else 2 * hidden
    ffn = f.int("ffn_hidden_size")
    attention = sum(qkvo(hidden, layer, qkv_bias, linear_bias) for layer in layers)
    mlp = n * (3 * hidden * ffn + ((2 * ffn + hidden) if linear_bias else 0))
    final = f.bool("post_layer_norm", True)
    tied = tied_head(f, False)  # vLLM ties output_layer only when the file says so
    return None, counts(
        hidden, vocab, tied, attention=attention, mlp=mlp, norms=(2 * n + int(final)) * norm
    )


def dbrx_params(f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int) -> Counted:
    """DBRX (transformers' DbrxForCausalLM, vLLM's dbrx.py)."""
    ffn = f.obj("ffn_config") or {}

    def whole(name: str, default: int) -> int:
        value = ffn.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"config field 'ffn_config.{name}' must be a whole number")
        return value

    experts = whole("moe_num_experts", 4)
    k = top_k(whole("moe_top_k", 1), experts, "ffn_config.moe_top_k")
    per_expert = 3 * hidden * whole("ffn_hidden_size", 3584)
    n = len(layers)
    attention = sum(qkvo(hidden, lay) for lay in layers)
    tied = never_tied(f, "DbrxForCausalLM")  # DbrxConfig refuses tie_word_embeddings true
    return MoE(num_experts=experts, top_k=k, expert_params=per_expert, layers=n), counts(
        hidden,
        vocab,
        tied,
        attention=attention,
        mlp=0,
        norms=(2 * n + 1) * hidden,
        experts=(n * experts * per_expert, 0, n * experts * hidden),
    )


_NAS_FFN_KEYS = frozenset({"ffn_mult", "no_op", "replace_with_linear", "sparsify"})


def nas_intermediate(ffn_mult: float, hidden: int) -> int:
    """A Nemotron-NAS FFN's width: int(2 x ffn_mult x hidden / 3) rounded up to a multiple of
    256 (``_ffn_mult_to_intermediate_size`` in vLLM's nemotron_nas.py, SGLang's and
    TensorRT-LLM's, from NVIDIA's modeling_decilm.py)."""
    width = int(2 * ffn_mult * hidden / 3)
    return -(-width // 256) * 256


def nemotron_nas_params(f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int) -> Counted:
    """Nemotron-NAS (DeciLM; vLLM's nemotron_nas.py, TensorRT-LLM's modeling_nemotron_nas.py):
    each entry of block_configs is its own layer. Its attention is grouped-query attention with
    num_attention_heads // n_heads_in_group K/V heads (the layer the cache reader built), a
    hidden x hidden linear layer (replace_with_linear) or nothing (no_op); its FFN a gated MLP
    of ``nas_intermediate`` width, a linear layer or nothing. The input norm exists where the
    attention does, the post-attention norm where the FFN does."""
    blocks = f.raw("block_configs")
    qkv_bias = f.bool("attention_bias", False)
    mlp_bias = f.bool("mlp_bias", False)
    attention = mlp = norms = 0
    for i, (block, layer) in enumerate(zip(blocks, layers)):
        attn, ffn = block["attention"], block.get("ffn")
        if layer.kind == "full":
            attention += qkvo(hidden, layer, qkv_bias=qkv_bias, o_bias=qkv_bias)
            norms += hidden
        elif attn.get("replace_with_linear") is True:
            attention += hidden * hidden
            norms += hidden
        if not isinstance(ffn, dict):
            raise ValueError(f"config field 'block_configs[{i}].ffn' must be an object")
        unknown = set(ffn) - _NAS_FFN_KEYS
        if unknown or ffn.get("sparsify") is not None:
            what = ", ".join(sorted(unknown)) or "sparsify"
            raise ValueError(
                f"config field 'block_configs[{i}].ffn' has {what}, which the parameter "
                "counter does not understand"
            )
        if ffn.get("no_op") is True:
            continue
        norms += hidden
        if ffn.get("replace_with_linear") is True:
            mlp += hidden * hidden
            continue
        mult = ffn.get("ffn_mult")
        if isinstance(mult, bool) or not isinstance(mult, (int, float)) or not 0 < mult <= 64:
            raise ValueError(
                f"config field 'block_configs[{i}].ffn.ffn_mult' must be a number above 0 "
                f"(at most 64), got {mult!r}"
            )
        inter = nas_intermediate(mult, hidden)
        mlp += 3 * hidden * inter + (2 * inter + hidden if mlp_bias else 0)
    norms += hidden  # the final norm
    return None, counts(
        hidden, vocab, tied_head(f, False), attention=attention, mlp=mlp, norms=norms
    )
