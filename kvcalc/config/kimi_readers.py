"""The Kimi-Linear reader (Kimi-Linear 48B, Kimi K3's language model): Kimi Delta Attention
(KDA) layers with a fixed state and MLA layers with a latent, named by ``linear_attn_config``
(vLLM's KimiLinearConfig) or by ``layer_types`` as transformers saves it. One of the family
readers of ``kvcalc.config.family_readers`` (FAMILY_READERS), apart for that module's size."""

from __future__ import annotations

from typing import Any

from ..core.model import MLALatent, RecurrentState
from ..core.text import short as _short
from .fields import Fields, Geometry
from .limits import over_cap

__all__ = ["kimi_linear_layers"]


# Kimi K3's KDA settings that change no state (vLLM's kimi_linear.py sizes the state from
# num_heads, head_dim and short_conv_kernel_size only, MambaStateShapeCalculator.kda_state_shape):
# gate_lower_bound bounds the forget gate, g = exp(lower_bound x sigmoid(...)), a number inside
# the recurrence; use_full_rank_gate picks the output gate's projection, one g_proj of
# hidden x heads x head_dim instead of the low-rank g_a_proj / g_b_proj pair (weights only:
# vLLM's KimiLinearModel.load_weights maps one or the other into in_proj_qkvgfab).
_KDA_NUMERICS = frozenset({"gate_lower_bound", "use_full_rank_gate"})


def kimi_linear_layers(f: Fields, geo: Geometry, max_layers: int) -> list:
    """Kimi-Linear: ``linear_attn_config`` names the Kimi Delta Attention (KDA) layers,
    1-based; every other layer is MLA (vLLM's KimiLinearConfig.is_kda_layer). A KDA layer
    keeps one conv state over q, k and v (3 x heads x head_dim channels, kernel - 1 inputs) in
    the model dtype and a float32 recurrent state of heads x head_dim x head_dim
    (MambaStateDtypeCalculator.kda_state_dtype)."""
    n = f.int("num_hidden_layers", maximum=max_layers)
    cfg = f.obj("linear_attn_config")
    if cfg is None:
        return _kimi_linear_saved(f, geo, n)
    known = {
        "kda_layers",
        "full_attn_layers",
        "num_heads",
        "head_dim",
        "short_conv_kernel_size",
        "head_k_dim",
        "head_v_dim",
    } | _KDA_NUMERICS
    unknown = sorted(set(cfg) - known)
    if unknown:
        raise ValueError(
            "config field 'linear_attn_config' has "
            + ", ".join(_short(u) for u in unknown)
            + ", which kvcalc does not "
            "understand"
        )

    def ints(name: str) -> set[int]:
        values = cfg.get(name)
        if not isinstance(values, list) or any(
            isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= n for v in values
        ):
            raise ValueError(
                f"config field 'linear_attn_config.{name}' must list layer numbers from 1 to {n}"
            )
        return {v - 1 for v in values}

    kda = ints("kda_layers")
    if cfg.get("full_attn_layers") is not None:
        full = ints("full_attn_layers")
        if full & kda or len(full | kda) != n:
            raise ValueError(
                "config fields 'linear_attn_config.kda_layers' and "
                "'full_attn_layers' must together name every layer once"
            )

    def whole(name: str, default: Any = None) -> int:
        v = cfg.get(name, default)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"config field 'linear_attn_config.{name}' must be a whole number")
        refused = over_cap(name, v)
        if refused:
            raise ValueError(refused.replace(f"'{name}'", f"'linear_attn_config.{name}'", 1))
        return v

    heads, d = whole("num_heads"), whole("head_dim")
    for name in ("head_k_dim", "head_v_dim"):
        if cfg.get(name) not in (None, d):
            raise ValueError(
                f"config field 'linear_attn_config.{name}' differs from head_dim; "
                "kvcalc reads KDA with equal key and value head sizes only"
            )
    kernel = whole("short_conv_kernel_size", 4)
    return _kimi_layers(f, geo, n, kda, heads, d, kernel)


def _kimi_linear_saved(f: Fields, geo: Geometry, n: int) -> list:
    """Kimi-Linear as transformers saves it: ``layer_types`` (linear_attention / full_attention)
    and ``linear_num_heads`` / ``linear_head_dim`` / ``linear_conv_kernel_dim``; without
    layer_types, KimiLinearConfig's default: full attention at layers 4, 8, 12, ..."""
    types = f.raw("layer_types")
    if types is None:
        kda = {i for i in range(n) if not (i and i % 4 == 0)}
        geo.assumptions.append(
            "neither linear_attn_config nor layer_types: took "
            "KimiLinearConfig's default, full attention at every 4th layer "
            "from layer 4"
        )
    else:
        if (
            not isinstance(types, list)
            or len(types) != n
            or any(t not in ("linear_attention", "full_attention") for t in types)
        ):
            raise ValueError(
                f"config field 'layer_types' must list 'linear_attention' or "
                f"'full_attention' for each of the {n} layers"
            )
        kda = {i for i, t in enumerate(types) if t == "linear_attention"}
    return _kimi_layers(
        f,
        geo,
        n,
        kda,
        f.int("linear_num_heads", default=32),
        f.int("linear_head_dim", default=128),
        f.int("linear_conv_kernel_dim", default=4, minimum=2),
    )


def _kimi_layers(
    f: Fields, geo: Geometry, n: int, kda: set[int], heads: int, d: int, kernel: int
) -> list:
    state = RecurrentState(
        conv_elements=3 * heads * d * (kernel - 1),
        ssm_elements=heads * d * d,
        flavor="kda",
        conv_kernel=kernel,
        ssm_dtype="fp32",
    )
    rope = f.int("qk_rope_head_dim")
    mla = MLALatent(
        kv_lora_rank=f.int("kv_lora_rank"),
        qk_rope_head_dim=rope,
        q_heads=geo.q_heads,
        qk_head_dim=f.int("qk_nope_head_dim") + rope,
        v_head_dim=f.int("v_head_dim"),
    )
    # MLA: num_key_value_heads and head_dim are not the cache's (q_lora_rank sizes weights)
    f.seen.update({"num_key_value_heads", "head_dim", "q_lora_rank", "qk_head_dim"})
    geo.notes.append(
        "Kimi-Linear: KDA layers keep a float32 recurrent state whatever the state "
        "format; MLA layers one latent of kv_lora_rank + qk_rope_head_dim per token "
        "(num_key_value_heads and head_dim do not apply)"
    )
    return [state if i in kda else mla for i in range(n)]
