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
        ref = next((lay for lay in layers if isinstance(lay, SlidingWindow)), None)
        if ref is None:
            return [], name, "its MTP layer is a sliding-window one and the model has none"
        return [ref] * n, name, None
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
