"""Architecture twins (a registry model rebuilt small, each attention layer's cache byte for byte
the real model's) and the transformers view of a spec: pure Python, no torch. docs/measurement.md.
"""

from __future__ import annotations

import copy
import statistics
from collections.abc import Sequence

from ..cache.kv import kv_cache
from ..config.catalog import get_model, registry
from ..config.hfconfig import spec_from_config
from ..core.model import MLALatent, ModelSpec

TWIN_KEYS = registry().twins  # kvcalc/config/models.yaml's twins
TWIN_VOCAB = 512  # a twin's vocabulary: small, the cache does not depend on it


def _period(spec: ModelSpec, cap: int = 8) -> int:
    """The shortest number of leading layers whose kinds repeat through the model."""
    kinds = [lay.kind for lay in spec.layers]
    for p in range(1, min(cap, len(kinds)) + 1):
        if all(kinds[i] == kinds[i % p] for i in range(len(kinds))):
            return p
    return min(cap, len(kinds))


def twin_config(key: str) -> dict:
    """The config.json dict of ``key``'s architecture twin (see the module docstring)."""
    m = get_model(key)
    full = copy.deepcopy(m.config)
    cfg = dict(full["text_config"]) if isinstance(full.get("text_config"), dict) else full
    if "model_type" not in cfg or cfg.get("model_type") == "gemma3":
        cfg["model_type"] = "gemma3_text"
    spec = m.spec
    layers = max(2, _period(spec))
    mt = cfg["model_type"]
    cfg.pop("quantization_config", None)
    cfg.pop("torch_dtype", None)
    tokens = dict(vocab_size=TWIN_VOCAB, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    if mt == "gpt2":  # head_dim = n_embd / n_head: keep the width, shrink the rest
        cfg.update(n_layer=layers, **tokens)
        return cfg
    if mt == "falcon":  # head_dim = hidden / heads; with one KV head the query count is free
        head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
        cfg.update(
            num_attention_heads=2, hidden_size=2 * head_dim, num_hidden_layers=layers, **tokens
        )
        return cfg
    attn = spec.kv_layers[0] if spec.kv_layers else None
    mla = isinstance(attn, MLALatent)
    heads = 8 if attn is None or mla else attn.q_heads
    hidden = max(64, 8 * heads)  # a multiple of the query heads, as every config requires
    cfg.update(
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        **tokens,
    )
    if attn is not None and not isinstance(attn, MLALatent):
        cfg["head_dim"] = attn.head_dim  # keep the real head size although hidden shrank
    if isinstance(cfg.get("layer_types"), list):
        cfg["layer_types"] = cfg["layer_types"][:layers]
    if mla:
        # The latent (kv_lora_rank + qk_rope_head_dim) is what is cached; heads are not.
        cfg.update(
            num_attention_heads=8,
            num_key_value_heads=8,
            q_lora_rank=64,
            first_k_dense_replace=1,
            n_group=1,
            topk_group=1,
        )
    for k in ("num_local_experts", "n_routed_experts", "num_experts"):
        if cfg.get(k) and cfg[k] > 1:
            cfg[k] = 4
    for k in ("num_experts_per_tok", "experts_per_token"):
        if cfg.get(k):
            cfg[k] = min(cfg[k], 2)
    for k in ("moe_intermediate_size", "shared_expert_intermediate_size"):
        if cfg.get(k):
            cfg[k] = 64
    if mt == "gemma3_text":
        cfg.setdefault("sliding_window_pattern", 6)
    return cfg


def runtime_spec(config: dict) -> ModelSpec:
    """The kvcalc spec of ``config`` as transformers lays out its cache: sliding layers keep
    window - 1 tokens between steps, and a convolution state keeps the whole kernel (kvcalc's
    engine figure, like vLLM's, keeps kernel - 1 past inputs)."""
    spec = spec_from_config(config)
    return spec.with_layers(lay.transformers_view() for lay in spec.layers)


def predicted_bytes(spec: ModelSpec, tokens: int, batch: int, dtype: str) -> int:
    r = kv_cache(spec, tokens, batch, dtype, state_dtype=dtype)
    return r.kv_bytes + r.state_bytes


def fit_line(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Intercept and slope of y = a + b x by Theil-Sen: the median of the slopes between all
    pairs, so a few steps slowed by something else on the machine do not tilt the line."""
    if not points:
        return 0.0, 0.0
    slopes = sorted(
        (y2 - y1) / (x2 - x1)
        for i, (x1, y1) in enumerate(points)
        for x2, y2 in points[i + 1 :]
        if x2 != x1
    )
    b = statistics.median(slopes) if slopes else 0.0
    return statistics.median([y - b * x for x, y in points]), b
