"""The multi-token-prediction (MTP) layers a config declares, as the cache layers they add when
they serve as the speculative drafter (kvcalc.core.speculative).

An MTP module is one more decoder layer after the model's last one, with the model's attention:
DeepSeek-V3's and GLM-5's are MLA layers (with DeepSeek sparse attention's indexer where the
model has one), Qwen3-Next's and Qwen3.5's full-attention layers, MiMo's and GLM-4.5's GQA
layers (vLLM's deepseek_mtp.py, glm4_moe_mtp.py, qwen3_next_mtp.py, qwen3_5_mtp.py, mimo_mtp.py
build them from the target's config; tests/data/vllm-speculative-facts.md)."""

from __future__ import annotations

from kvcalc.core.model import ChunkedLocal, FullAttention, Layer, MLALatent, SlidingWindow

from .fields import Fields

# The fields that count MTP layers, by the families that use them.
COUNT_FIELDS = (
    "num_nextn_predict_layers",  # DeepSeek-V3, GLM-4.5 and GLM-5, MiMo, NemotronH, Kimi
    "mtp_num_hidden_layers",  # Qwen3.5 and Qwen3.6
    "num_mtp_layers",
)
MAX_MTP_LAYERS = 16
# Families whose checkpoints carry MTP modules the config need not count: vLLM builds this many
# when the field is absent (qwen3_next_mtp.py: getattr(config, "num_nextn_predict_layers", 1);
# qwen3_5_mtp.py: getattr(config, "mtp_num_hidden_layers", 1); exaone_moe_mtp.py likewise) or
# always (longcat_flash_mtp.py and mimo_v2_mtp.py: one; tests/data/vllm-speculative-facts.md Q1).
_DEFAULT_COUNT = {"qwen3_next": 1, "qwen3_5_text": 1, "qwen3_5_moe_text": 1, "exaone_moe": 1}
_FIXED_COUNT = {"longcat_flash": 1, "mimo_v2_flash": 1}
# MiMo-V2's MTP layer is a sliding-window one (MiMoV2Attention with the swa_* fields).
_SLIDING_MTP = {"mimo_v2_flash"}
# Declared MTP modules vLLM does not build (minimax_m2.py has no MTP drafter up to v0.34.0).
_NOT_BUILT = {
    "minimax_m2": "vLLM builds no MTP drafter for MiniMax-M2 (up to v0.34.0 its num_mtp_modules "
    "are not read)"
}


def mtp_layers(f: Fields, layers: list) -> tuple[list[Layer], str | None, str | None]:
    """The MTP layers' cache layers, the field that declared them, and why they cannot be sized
    (None when they can, or when the config declares none)."""
    family = f.model_type
    if family in _NOT_BUILT and (f.cfg.get("num_mtp_modules") or f.cfg.get("use_mtp")):
        return [], "num_mtp_modules", _NOT_BUILT[family]
    name = next((n for n in COUNT_FIELDS if f.cfg.get(n) is not None), None)
    if family in _FIXED_COUNT:
        n, name = _FIXED_COUNT[family], f"fixed at 1 for {family}"
    elif name is not None:
        n = f.int(name, minimum=0, maximum=MAX_MTP_LAYERS)
    elif family in _DEFAULT_COUNT:
        n, name = _DEFAULT_COUNT[family], f"1, vLLM's default for {family}"
    else:
        return [], None, None
    if n == 0:
        return [], None, None
    pattern = f.cfg.get("mtp_hybrid_override_pattern")
    if pattern is not None:
        # NemotronH: each MTP module is the pattern's blocks; '*' marks an attention block.
        if not isinstance(pattern, str) or not pattern:
            raise ValueError("config field 'mtp_hybrid_override_pattern' must be a string")
        n *= pattern.count("*")
        if n == 0:
            return [], None, None
    if family in _SLIDING_MTP:
        window = next((lay for lay in layers if isinstance(lay, SlidingWindow)), None)
        if window is None:
            return [], name, "its MTP layer is a sliding-window one and the model has none"
        return [window] * n, name, None
    if any(isinstance(lay, (SlidingWindow, ChunkedLocal)) for lay in layers):
        return (
            [],
            name,
            "the model mixes windowed and full attention, and which its MTP layers use is not read",
        )
    ref = next(
        (lay for lay in reversed(layers) if isinstance(lay, (FullAttention, MLALatent))), None
    )
    if ref is None:
        return [], name, "the model has no full-attention or MLA layer an MTP layer would repeat"
    return [ref] * n, name, None


# Families whose MTP module is one decoder layer of the model plus a fusion projection of 2 x
# hidden to hidden and three norms, the embedding and output head shared with the target (vLLM
# from v0.16.0: tests/data/vllm-speculative-facts.md Q6): deepseek_mtp.py (enorm, hnorm, eh_proj,
# shared_head.norm), glm4_moe_mtp.py (the same), mimo_mtp.py (token_layernorm,
# hidden_layernorm, input_proj, final_layernorm), qwen3_next_mtp.py and qwen3_5_mtp.py
# (pre_fc_norm_embedding, pre_fc_norm_hidden, fc, norm).
_ONE_LAYER_MTP = frozenset(
    """
    deepseek_v3 deepseek_v32 kimi_k2 glm4_moe glm_moe_dsa mimo qwen3_next qwen3_5_text
    qwen3_5_moe_text
    """.split()
)


def mtp_parameters(f: Fields, fam, layers: list, drafts: list, geo, counted):
    """The parameters the MTP modules add (what vLLM loads for them), or None where kvcalc
    does not know a family's module: each module's decoder layer, counted as the model's next
    layer (the parameter counter with one more layer, minus without), plus its 2 x hidden x
    hidden projection and three norms of hidden."""
    if not drafts or counted.params is None or f.model_type not in _ONE_LAYER_MTP:
        return None
    from .params import count_parameters  # the counter reads the same fields again

    more = count_parameters(f, fam, layers + [drafts[0]], geo)
    hidden = geo.hidden
    if more.params is None or not hidden:
        return None
    layer = more.params.total - counted.params.total
    return len(drafts) * (layer + 2 * hidden * hidden + 3 * hidden)
