"""Layers that keep a recurrent state: one state layer's size from a config's fields, the
attention-free layouts, and the readers of the hybrid families (docs/families.md has their
structure fields). The convolution keeps kernel - 1 past inputs, as vLLM sizes it
(vllm/model_executor/layers/mamba/mamba_utils.py); transformers keeps the whole kernel.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...core.model import AttentionWithState, RecurrentState, SlidingWindow
from ..fields import CONV_KERNEL, EXPAND, STATE_SIZE, Fields, Geometry, per_layer, refuse_unknown
from ..limits import MAX_LAYERS, over_cap
from .attention import full_layer, head_dim_is_derived, heads_of, index_list, mla_latent


def state_flavor(f: Fields, model_type: str) -> str:
    if f.has("linear_num_value_heads"):
        return "gated_deltanet"
    if f.has("attn_type_list") or model_type == "minimax":
        return "lightning"
    if f.has("mamba_num_heads", "mamba_n_heads"):
        return "mamba2"
    if f.has(*STATE_SIZE):
        return "mamba"
    raise ValueError(
        "the config has non-attention layers but no state sizes: expected "
        "'linear_num_value_heads' (Gated DeltaNet), 'mamba_num_heads' (Mamba-2) or "
        "'mamba_d_state' / 'state_size' (Mamba)"
    )


# The SSM state's own format where a config declares it (issue 38, item 1): Qwen3.5's
# mamba_ssm_dtype (in its text config) and NemotronH's mamba_ssm_cache_dtype (transformers'
# NemotronHConfig: float32 by default). vLLM keeps the state in it while its
# --mamba-ssm-cache-dtype is 'auto' (MambaStateDtypeCalculator; kvcalc.engines.vllm.kv_cache,
# which also applies the flags and the version rules), so every figure counts it so.
_SSM_FORMATS = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


def declared_ssm_dtype(f: Fields) -> tuple[str | None, str | None]:
    """The recurrent state's format the config declares ('fp32', 'fp16', 'bf16') and the field
    that declares it, or (None, None) when it declares none ('auto': the state format chosen)."""
    for name in ("mamba_ssm_dtype", "mamba_ssm_cache_dtype"):
        asked = f.raw(name)
        if asked is None or asked == "auto":
            continue
        if not isinstance(asked, str) or asked.lower() not in _SSM_FORMATS:
            raise ValueError(
                f"config field '{name}' is {asked!r}: expected 'float32', 'float16', "
                "'bfloat16' or 'auto'"
            )
        return _SSM_FORMATS[asked.lower()], name
    return None, None


def state_layer(f: Fields, hidden: int | None, flavor: str) -> RecurrentState:
    """The fixed per-sequence state of one recurrent layer (its SSM state in the format the
    config declares, if it declares one)."""
    if flavor == "lightning":  # one state, no SSM format of its own (vLLM: --mamba-cache-dtype)
        return _state_layer(f, hidden, flavor)
    fmt, field = declared_ssm_dtype(f)
    return dataclasses.replace(
        _state_layer(f, hidden, flavor), ssm_dtype=fmt, ssm_dtype_field=field
    )


def _state_layer(f: Fields, hidden: int | None, flavor: str) -> RecurrentState:
    if flavor == "gated_deltanet":
        kh, vh = f.int("linear_num_key_heads"), f.int("linear_num_value_heads")
        kd, vd = f.int("linear_key_head_dim"), f.int("linear_value_head_dim")
        kernel = f.int("linear_conv_kernel_dim")
        conv_dim = 2 * kh * kd + vh * vd  # q, k and v all pass the short convolution
        return conv_state(conv_dim, kernel, vh * kd * vd, flavor)
    if flavor == "lightning":
        # MiniMax lightning attention: one head_dim x head_dim key-value state per head.
        heads = f.int("num_attention_heads")
        d = f.int("head_dim", default=None, required=False) or f.int("hidden_size") // heads
        return conv_state(0, 1, heads * d * d, flavor)
    d_state = f.int(*STATE_SIZE)
    kernel = f.int(*CONV_KERNEL, default=4)
    if flavor == "mamba2":
        # Mamba-2: the convolution runs over x, B and C: intermediate + 2 x n_groups x d_state
        # channels; the SSM state is heads x head_dim x d_state.
        heads = f.int("mamba_num_heads", "mamba_n_heads", "num_heads")
        # head_dim is the Mamba head only where no mamba_* name is given or defaulted (Mamba2Config;
        # Nemotron-H's head_dim is its attention's, NemotronHConfig.mamba_head_dim defaults to 64)
        own = ("mamba_head_dim", "mamba_d_head")
        head = f.int(*own) if f.has(*own) else f.int(*own, "head_dim")
        groups = f.int("n_groups", "mamba_n_groups", default=1)
        return mamba2_state(heads * head, heads * head, groups, d_state, kernel)
    if hidden is None:
        raise ValueError("config field 'hidden_size' is missing (the Mamba state needs it)")
    # MambaConfig / FalconMambaConfig / JambaConfig: the width is expand (default 2) x hidden;
    # MambaConfig writes it as intermediate_size too, which must then agree.
    d_inner = f.int(*EXPAND, default=2) * hidden
    if f.model_type in ("mamba", "falcon_mamba") and f.has("intermediate_size"):
        written = f.int("intermediate_size")
        if written != d_inner:
            raise ValueError(
                f"config field 'intermediate_size' ({written:,}) differs from "
                f"expand x hidden_size ({d_inner:,}), which transformers uses"
            )
    return conv_state(d_inner, kernel, d_inner * d_state, flavor)


def conv_state(channels: int, kernel: int, ssm: int, flavor: str, **more: Any) -> RecurrentState:
    """A recurrent state: kernel - 1 past inputs of ``channels`` (as vLLM keeps them) and ``ssm``
    elements of the recurrence."""
    conv = channels * (kernel - 1)
    return RecurrentState(
        conv_elements=conv, ssm_elements=ssm, flavor=flavor, conv_kernel=kernel, **more
    )


def _equal_to_hidden(f: Fields, hidden: int | None, name: str, needs: str, why: str) -> int:
    """A width field that must equal hidden_size (defaulting to it), or a ValueError saying why
    the two readings it would allow differ."""
    if hidden is None:
        raise ValueError(f"config field 'hidden_size' is missing ({needs} needs it)")
    width = f.int(name, default=hidden)
    if width != hidden:
        raise ValueError(
            f"config field '{name}' ({width:,}) differs from 'hidden_size' ({hidden:,}): {why}"
        )
    return width


def lfm2_layers(f: Fields, geo: Geometry, max_layers: int) -> list:
    """LFM2: attention layers and short-convolution layers (vLLM's short_conv_state_shape)."""
    types = f.raw("layer_types")
    if types is not None:
        if (
            not isinstance(types, list)
            or not types
            or any(t not in ("conv", "full_attention") for t in types)
        ):
            raise ValueError(
                "config field 'layer_types' must list 'conv' or 'full_attention' for each layer"
            )
        declared = f.int("num_hidden_layers", required=False, maximum=max_layers)
        if declared is not None and declared != len(types):
            raise ValueError(
                f"config field 'layer_types' must list one entry for each of the "
                f"{declared} layers, got {len(types)}"
            )
        if len(types) > max_layers:
            raise ValueError(
                f"config field 'layer_types' lists {len(types):,} layers (at most {max_layers:,})"
            )
        f.seen.add("full_attn_idxs")  # superseded by layer_types, as in transformers
        attn = {i for i, t in enumerate(types) if t == "full_attention"}
        n = len(types)
    else:
        n = f.int("num_hidden_layers", maximum=max_layers)
        attn = set(range(n))
        if f.has("full_attn_idxs"):
            attn = index_list("full_attn_idxs", f.raw("full_attn_idxs"), n)
    width = _equal_to_hidden(
        f,
        geo.hidden,
        "conv_dim",
        "LFM2's conv state",
        "vLLM sizes the conv state by conv_dim, transformers by "
        "hidden_size, and kvcalc does not pick one",
    )
    kernel = f.int("conv_L_cache", default=3, minimum=2)
    conv = conv_state(width, kernel, 0, "short conv")
    return [full_layer(geo) if i in attn else conv for i in range(n)]


def falcon_h1_layers(f: Fields, geo: Geometry, max_layers: int) -> list:
    """Falcon-H1: attention and a Mamba-2 mixer in every layer (FalconH1Mixer, vLLM's
    falcon_h1.py)."""
    n = f.int("num_hidden_layers", maximum=max_layers)
    hidden = geo.hidden
    if "mamba_d_ssm" in f.cfg and f.cfg["mamba_d_ssm"] is None:
        # FalconH1Config: an explicit null means mamba_expand x hidden_size
        if hidden is None:
            raise ValueError("config field 'hidden_size' is missing (the Mamba width needs it)")
        inner = f.int("mamba_expand", default=2) * hidden
    elif f.has("mamba_d_ssm"):
        inner = f.int("mamba_d_ssm")
    else:
        inner = 1024  # FalconH1Config's default when the field is absent
        geo.assumptions.append(
            "'mamba_d_ssm' is not in the config: took 1024, the default of "
            "transformers' falcon_h1 config class"
        )
    f.seen.add("mamba_expand")
    heads = f.int("mamba_n_heads")
    head = _mamba_head(f, inner, heads, "the Mamba width")
    groups = f.int("mamba_n_groups", default=1)
    d_state = f.int("mamba_d_state")
    kernel = f.int("mamba_d_conv", default=4, minimum=2)
    state = mamba2_state(inner, heads * head, groups, d_state, kernel)
    return [AttentionWithState(**heads_of(geo), state=state)] * n


def recurrent_gemma_layers(f: Fields, geo: Geometry, max_layers: int) -> list:
    """RecurrentGemma (Griffin): block_types repeats over the layers
    (RecurrentGemmaRecurrentBlock)."""
    n = f.int("num_hidden_layers", maximum=max_layers)
    # transformers reads block_types (default recurrent, recurrent, attention) and keeps a
    # published file's _block_types as an unused extra: where the two differ, refuse.
    blocks = f.raw("block_types", default=["recurrent", "recurrent", "attention"])
    if (
        not isinstance(blocks, list)
        or not blocks
        or any(b not in ("recurrent", "attention") for b in blocks)
    ):
        raise ValueError("config field 'block_types' must list 'recurrent' or 'attention'")
    legacy = f.raw("_block_types")
    if legacy is not None and list(legacy) != list(blocks):
        raise ValueError(
            "config field '_block_types' differs from 'block_types': transformers "
            "uses block_types and ignores _block_types, so the file's own layout "
            "would not be the one that runs; kvcalc does not pick one"
        )
    head_dim_is_derived(f, geo, "RecurrentGemmaConfig")
    if f.cfg.get("sliding_window") not in (None, f.cfg.get("attention_window_size")):
        raise ValueError(
            "config fields 'sliding_window' and 'attention_window_size' differ; "
            "transformers reads attention_window_size"
        )
    width = f.int("lru_width", default=geo.hidden)
    kernel = f.int("conv1d_width", default=4, minimum=2)
    window = f.int("attention_window_size")
    f.seen.add("sliding_window")  # transformers' alias of attention_window_size
    state = conv_state(width, kernel, width, "rg-lru", ssm_dtype="fp32")
    local = SlidingWindow(**heads_of(geo), window=window)
    # transformers keeps the whole window and conv1d_width - 1 inputs (its own cache, not a
    # Cache object): the meta-device check cannot read it, so the source is its modeling code.
    return [local if blocks[i % len(blocks)] == "attention" else state for i in range(n)]


def rwkv_layout(f: Fields, hidden: int | None) -> tuple[list, Geometry]:
    """RWKV-4 (attention-free): per layer five vectors of hidden_size, the two token-shift
    inputs in the model dtype and the three WKV accumulators (numerator, denominator, maximum)
    in float32 (transformers' RwkvModel state; vLLM does not serve RWKV)."""
    geo = _no_attention(hidden, "no attention: every layer keeps a fixed RWKV state and no K/V")
    n = f.int("num_hidden_layers", maximum=MAX_LAYERS)
    hidden = _equal_to_hidden(
        f,
        hidden,
        "attention_hidden_size",
        "RWKV's state",
        "transformers' RWKV state is sized by hidden_size and would not run",
    )
    # the feed-forward width, the fp16 rescaling schedule and the embeddings: weights only
    f.seen.update("intermediate_size rescale_every vocab_size tie_word_embeddings".split())
    f.seen.add("layer_norm_epsilon")
    state = RecurrentState(
        conv_elements=2 * hidden,
        ssm_elements=3 * hidden,
        flavor="rwkv",
        conv_kernel=1,
        ssm_dtype="fp32",
    )
    return [state] * n, geo


def _no_attention(hidden: int | None, note: str) -> Geometry:
    return Geometry(hidden=hidden, q_heads=0, kv_heads=0, head_dim=0, notes=[note])


def state_layout(flavor: str):
    """The layout of an attention-free model (Mamba, Falcon-Mamba, Mamba-2): every layer a
    recurrent state of ``flavor``."""

    def layout(f: Fields, hidden: int | None) -> tuple[list, Geometry]:
        n = f.int("num_hidden_layers", "n_layer", "num_layers", maximum=MAX_LAYERS)
        state = state_layer(f, hidden, flavor)
        if flavor == "mamba2" and f.has("expand") and hidden is not None:
            # Mamba2Mixer (transformers and vLLM) sizes the convolution from expand x
            # hidden_size and the SSM state from num_heads x head_dim; they must agree.
            inner = f.int("expand") * hidden
            heads, head = f.int("num_heads"), f.int("head_dim")
            if inner != heads * head:
                raise ValueError(
                    f"config fields 'expand' x 'hidden_size' ({inner:,}) and "
                    f"'num_heads' x 'head_dim' ({heads * head:,}) disagree on the "
                    "Mamba-2 inner width"
                )
        note = "no attention: every layer keeps a fixed recurrent state and no K/V"
        return [state] * n, _no_attention(hidden, note)

    return layout


# The names GraniteMoeHybridConfig's layer_types (alias layers_block_type) take: the published
# files write "mamba" / "attention", which transformers 5.24 remaps to "linear_attention" /
# "full_attention" (configuration_utils._LEGACY_LAYER_TYPE_REMAP).
_GRANITE_TYPES = {
    "mamba": "mamba",
    "linear_attention": "mamba",
    "attention": "attention",
    "full_attention": "attention",
}


def granite_hybrid_layers(f: Fields, geo: Geometry, max_layers: int) -> list:
    """Granite 4.0-H: each layer GQA attention or a Mamba-2 mixer (GraniteMoeHybridDecoderLayer,
    vLLM's granitemoehybrid.py)."""
    n = f.int("num_hidden_layers", maximum=max_layers)
    name = "layer_types" if f.cfg.get("layer_types") is not None else "layers_block_type"
    f.seen.update({"layer_types", "layers_block_type"})
    types = f.cfg.get(name)
    if types is None:
        kinds = ["mamba"] * n
        geo.assumptions.append(
            "neither layer_types nor layers_block_type is in the config: every layer is Mamba, "
            "the default of transformers' granitemoehybrid config class"
        )
    else:
        types = per_layer(name, types, n, _GRANITE_TYPES, "'mamba' or 'attention'")
        kinds = [_GRANITE_TYPES[t] for t in types]
        other = "layers_block_type" if name == "layer_types" else "layer_types"
        if f.cfg.get(other) is not None and f.cfg.get(other) != types:
            raise ValueError(
                "config fields 'layer_types' and 'layers_block_type' disagree (transformers "
                "reads them as one field); kvcalc does not pick one"
            )
    # RoPE on or off: the attention layers cache the same K and V (GraniteMoeHybridAttention)
    f.seen.add("position_embedding_type")
    state = _granite_mamba_state(f, geo, "granitemoehybrid") if "mamba" in kinds else None
    return [state if kind == "mamba" else full_layer(geo) for kind in kinds]


# GraniteMoeHybridConfig's defaults (transformers 5.24) for the fields that size the state
_GRANITE_MAMBA_DEFAULTS = dict(
    mamba_expand=2, mamba_n_heads=128, mamba_n_groups=1, mamba_d_state=256, mamba_d_conv=4
)


def _granite_mamba_state(f: Fields, geo: Geometry, family: str) -> RecurrentState:
    """One Granite Mamba-2 layer's state, checked as GraniteMoeHybridConfig checks it."""
    if geo.hidden is None:
        raise ValueError("config field 'hidden_size' is missing (the Mamba width needs it)")
    for name, value in _GRANITE_MAMBA_DEFAULTS.items():
        if f.cfg.get(name) is None:
            geo.assumptions.append(
                f"'{name}' is not in the config: took {value}, the default of transformers' "
                f"{family} config class"
            )
    inner = f.int("mamba_expand", default=2) * geo.hidden
    heads = f.int("mamba_n_heads", default=128)
    why = ", as transformers' GraniteMoeHybridConfig requires"
    head = _mamba_head(f, inner, heads, "mamba_expand x hidden_size", why)
    groups = f.int("mamba_n_groups", default=1)
    d_state = f.int("mamba_d_state", default=256)
    kernel = f.int("mamba_d_conv", default=4, minimum=2)
    fmt, field = declared_ssm_dtype(f)
    return mamba2_state(
        inner, heads * head, groups, d_state, kernel, ssm_dtype=fmt, ssm_dtype_field=field
    )


def mamba2_state(
    inner: int, heads_x_dim: int, groups: int, d_state: int, kernel: int, **fmt: Any
) -> RecurrentState:
    """A Mamba-2 layer's state: the conv over x, B and C (inner + 2 x groups x d_state channels)
    and the SSM state of heads x head_dim x d_state."""
    return RecurrentState(
        conv_elements=(inner + 2 * groups * d_state) * (kernel - 1),
        ssm_elements=heads_x_dim * d_state,
        flavor="mamba2",
        conv_kernel=kernel,
        groups=groups,
        group_conv_elements=2 * d_state * (kernel - 1),
        **fmt,
    )


def _mamba_head(f: Fields, inner: int, heads: int, width: str, why: str = "") -> int:
    """mamba_d_head, derived ("auto") as the Mamba width // mamba_n_heads: Falcon-H1's and
    Granite's config classes refuse a head size whose heads do not make up that width."""
    head = f.raw("mamba_d_head", default="auto")
    if head == "auto":
        if inner % heads:
            raise ValueError(
                f"config field 'mamba_n_heads' ({heads}) must divide {width} ({inner:,})"
            )
        head = inner // heads
    else:
        head = f.int("mamba_d_head")
    if head * heads != inner:
        raise ValueError(
            f"config fields 'mamba_n_heads' x 'mamba_d_head' ({heads * head:,}) must equal "
            f"{width} ({inner:,}){why}"
        )
    return head


def bamba_layers(f: Fields, geo: Geometry, max_layers: int) -> list:
    """Bamba: attn_layer_indices (0-based) are GQA attention layers, the others Granite 4.0-H's
    Mamba-2 mixer (BambaConfig, vLLM's bamba.py)."""
    n = f.int("num_hidden_layers", maximum=max_layers)
    if f.cfg.get("attn_layer_indices") is None:
        f.seen.add("attn_layer_indices")
        attn: set[int] = set()
        geo.assumptions.append(
            "attn_layer_indices is not in the config: every layer is Mamba, the default of "
            "transformers' bamba config class"
        )
    else:
        attn = index_list("attn_layer_indices", f.raw("attn_layer_indices"), n)
    state = _granite_mamba_state(f, geo, "bamba") if len(attn) < n else None
    return [full_layer(geo) if i in attn else state for i in range(n)]


# Kimi K3's KDA settings that change no state (vLLM's kimi_linear.py sizes the state from
# num_heads, head_dim and short_conv_kernel_size only, MambaStateShapeCalculator.kda_state_shape):
# gate_lower_bound bounds the forget gate, g = exp(lower_bound x sigmoid(...)), a number inside
# the recurrence; use_full_rank_gate picks the output gate's projection, one g_proj of
# hidden x heads x head_dim instead of the low-rank g_a_proj / g_b_proj pair (weights only:
# vLLM's KimiLinearModel.load_weights maps one or the other into in_proj_qkvgfab).
_KDA_NUMERICS = frozenset({"gate_lower_bound", "use_full_rank_gate"})


def kimi_linear_layers(f: Fields, geo: Geometry, max_layers: int) -> list:
    """Kimi-Linear: linear_attn_config's 1-based KDA layers, the others MLA (vLLM's
    KimiLinearConfig.is_kda_layer)."""
    n = f.int("num_hidden_layers", maximum=max_layers)
    cfg = f.obj("linear_attn_config")
    if cfg is None:
        return _kimi_linear_saved(f, geo, n)
    known = {*"kda_layers full_attn_layers num_heads head_dim short_conv_kernel_size".split()}
    known |= {"head_k_dim", "head_v_dim"} | _KDA_NUMERICS
    refuse_unknown("linear_attn_config", sorted(set(cfg) - known))

    def ints(name: str) -> set[int]:
        return index_list(f"linear_attn_config.{name}", cfg.get(name), n, 1)

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
        allowed = ("linear_attention", "full_attention")
        said = "'linear_attention' or 'full_attention'"
        types = per_layer("layer_types", types, n, allowed, said)
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
    state = conv_state(3 * heads * d, kernel, heads * d * d, "kda", ssm_dtype="fp32")
    mla = mla_latent(f, geo.q_heads)
    # MLA: num_key_value_heads and head_dim are not the cache's (q_lora_rank sizes weights)
    f.seen.update({"num_key_value_heads", "head_dim", "q_lora_rank", "qk_head_dim"})
    geo.notes.append(
        "Kimi-Linear: KDA layers keep a float32 recurrent state whatever the state "
        "format; MLA layers one latent of kv_lora_rank + qk_rope_head_dim per token "
        "(num_key_value_heads and head_dim do not apply)"
    )
    return [state if i in kda else mla for i in range(n)]
