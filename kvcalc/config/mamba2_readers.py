"""The readers of attention + Mamba-2 hybrids that name their layers in fields of their own:
IBM Granite 4.0-H (``granitemoehybrid``: ``layer_types`` / ``layers_block_type``) and Bamba
(``attn_layer_indices``), both with Granite's Mamba-2 state. One of the family readers of
``kvcalc.config.family_readers`` (FAMILY_READERS), apart for that module's size."""

from __future__ import annotations

from ..core.model import RecurrentState
from .fields import Fields, Geometry
from .layer_readers import declared_ssm_dtype
from .layer_readers import full_layer as _full
from .layer_readers import index_list as _index_list
from .layer_readers import layer_count as _layer_count

__all__ = ["granite_hybrid_layers", "bamba_layers"]

# -- Granite 4.0-H (granitemoehybrid) ---------------------------------------------------------

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
    """Granite 4.0-H: each layer is either GQA attention or a Mamba-2 mixer (transformers'
    GraniteMoeHybridDecoderLayer, vLLM's granitemoehybrid.py); the MoE, the shared MLP and the
    muP multipliers sit beside it and keep nothing. Attention layers keep K/V whether they rotate
    (position_embedding_type "rope") or not (NoPE, the published models): the same tensors are
    cached either way. A Mamba layer keeps a conv state over mamba_expand x hidden + 2 x
    mamba_n_groups x mamba_d_state channels (kernel - 1 past inputs, as vLLM sizes it) and an SSM
    state of mamba_n_heads x mamba_d_head x mamba_d_state; without layer_types every layer is
    Mamba (GraniteMoeHybridConfig's default)."""
    n = _layer_count(f, max_layers)
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
        if (
            not isinstance(types, list)
            or len(types) != n
            or any(not isinstance(t, str) or t not in _GRANITE_TYPES for t in types)
        ):
            raise ValueError(
                f"config field '{name}' must list 'mamba' or 'attention' for each of the {n} layers"
            )
        kinds = [_GRANITE_TYPES[t] for t in types]
        other = "layers_block_type" if name == "layer_types" else "layer_types"
        if f.cfg.get(other) is not None and f.cfg.get(other) != types:
            raise ValueError(
                "config fields 'layer_types' and 'layers_block_type' disagree (transformers "
                "reads them as one field); kvcalc does not pick one"
            )
    # RoPE on or off: the attention layers cache the same K and V (GraniteMoeHybridAttention)
    f.seen.add("position_embedding_type")
    layers: list = []
    state = _granite_mamba_state(f, geo, "granitemoehybrid") if "mamba" in kinds else None
    for kind in kinds:
        layers.append(state if kind == "mamba" else _full(geo))
    return layers


# GraniteMoeHybridConfig's defaults (transformers 5.24) for the fields that size the state
_GRANITE_MAMBA_DEFAULTS = {
    "mamba_expand": 2,
    "mamba_n_heads": 128,
    "mamba_n_groups": 1,
    "mamba_d_state": 256,
    "mamba_d_conv": 4,
}


def _granite_mamba_state(f: Fields, geo: Geometry, family: str) -> RecurrentState:
    """One Granite Mamba-2 layer's state. GraniteMoeHybridConfig derives mamba_d_head ("auto")
    as mamba_expand x hidden_size // mamba_n_heads and refuses a config where mamba_n_heads x
    mamba_d_head differs from mamba_expand x hidden_size (its conv runs over the one width, the
    SSM state over the other), so kvcalc does too."""
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
    head = f.raw("mamba_d_head", default="auto")
    if head == "auto":
        if inner % heads:
            raise ValueError(
                f"config field 'mamba_n_heads' ({heads}) must divide mamba_expand x "
                f"hidden_size ({inner:,})"
            )
        head = inner // heads
    else:
        head = f.int("mamba_d_head")
    if head * heads != inner:
        raise ValueError(
            f"config fields 'mamba_n_heads' x 'mamba_d_head' ({heads * head:,}) must equal "
            f"mamba_expand x hidden_size ({inner:,}), as transformers' GraniteMoeHybridConfig "
            "requires"
        )
    groups = f.int("mamba_n_groups", default=1)
    d_state = f.int("mamba_d_state", default=256)
    kernel = f.int("mamba_d_conv", default=4, minimum=2)
    fmt, field = declared_ssm_dtype(f)
    return RecurrentState(
        conv_elements=(inner + 2 * groups * d_state) * (kernel - 1),
        ssm_elements=heads * head * d_state,
        flavor="mamba2",
        conv_kernel=kernel,
        groups=groups,
        group_conv_elements=2 * d_state * (kernel - 1),
        ssm_dtype=fmt,
        ssm_dtype_field=field,
    )


# -- Bamba (bamba) -----------------------------------------------------------------------------


def bamba_layers(f: Fields, geo: Geometry, max_layers: int) -> list:
    """Bamba: attn_layer_indices (0-based) are GQA attention layers, every other layer a
    Mamba-2 mixer (transformers' BambaConfig.layers_block_type, vLLM's bamba.py); without the
    field every layer is Mamba, as in BambaConfig. BambaMixer is Granite 4.0-H's mixer (the same
    mamba_* fields and defaults, the same conv width mamba_expand x hidden + 2 x mamba_n_groups x
    mamba_d_state and SSM state mamba_n_heads x mamba_d_head x mamba_d_state), so the state is
    read by the same function."""
    n = _layer_count(f, max_layers)
    if f.cfg.get("attn_layer_indices") is None:
        f.seen.add("attn_layer_indices")
        attn: set[int] = set()
        geo.assumptions.append(
            "attn_layer_indices is not in the config: every layer is Mamba, the default of "
            "transformers' bamba config class"
        )
    else:
        attn = _index_list(f, "attn_layer_indices", n)
    state = _granite_mamba_state(f, geo, "bamba") if len(attn) < n else None
    return [_full(geo) if i in attn else state for i in range(n)]


# -- GPT-Neo (gpt_neo) ------------------------------------------------------------------------
