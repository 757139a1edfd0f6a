"""The layers of a config and its base attention geometry, from cache fields only
(kvcalc.config.hfconfig's first step; the order of the readers: read_layers)."""

from __future__ import annotations

from dataclasses import replace

from ...core.model import Layer, NoCache
from ...core.text import short as _short
from ..fields import Fields, Geometry, whole
from ..limits import MAX_LAYERS, cap_of, over_cap
from .attention import attention_layer, indexer_caches, kv_heads_of, mla_latent
from .layouts import layer_kinds, nas_layers, share_kv
from .recurrent import state_flavor, state_layer
from .understood import Family


def read_layers(f: Fields, fam: Family | None, honor_sliding: bool) -> tuple[list, Geometry]:
    """The layers and the base attention geometry, from cache fields only: a layout of its
    own, then a family's reader, NAS, and the standard decoder."""
    hidden = f.int("hidden_size", "n_embd", "d_model", required=False)
    if fam is not None and fam.layout is not None:
        return fam.layout(f, hidden)
    geo = _attention_geometry(f, hidden)
    if fam is not None and fam.checks is not None:
        fam.checks(f, geo)
    if fam is not None and fam.reader is not None:
        return fam.reader(f, geo, MAX_LAYERS), geo
    if f.has("block_configs"):
        return nas_layers(f, geo), geo
    return _decoder_layers(f, fam, honor_sliding, geo), geo


def _attention_geometry(f: Fields, hidden: int | None) -> Geometry:
    """The base attention geometry: query and KV heads (which must divide them) and the head
    size, given or derived from hidden_size."""
    attn_cfg = f.obj("attn_config")  # MPT keeps the attention settings in a sub-object
    q_heads = f.int("num_attention_heads", "n_head", "num_heads", "n_heads")
    kv_heads = kv_heads_of(f, q_heads, attn_cfg)
    if q_heads % kv_heads:
        raise ValueError(
            f"config field 'num_key_value_heads' ({kv_heads}) must divide "
            f"'num_attention_heads' ({q_heads})"
        )
    if f.has("head_dim", "kv_channels", "attention_head_dim"):
        head_dim = f.int("head_dim", "kv_channels", "attention_head_dim")
    elif (
        f.has("kv_lora_rank")
        and f.has("qk_nope_head_dim")
        and f.has("qk_rope_head_dim")
        and (hidden is None or hidden % q_heads)
    ):
        # MLA (issue 38): the cache holds kv_lora_rank + qk_rope_head_dim per token, and a query
        # head is qk_nope + qk_rope wide; no figure needs hidden_size / heads, which a config such
        # as Kimi K3's need not make whole (no head_dim, hidden not divisible by the heads).
        head_dim = f.int("qk_nope_head_dim") + f.int("qk_rope_head_dim")
    else:
        if hidden is None:
            raise ValueError(
                "config field 'head_dim' is missing, and without 'hidden_size' it cannot be derived"
            )
        if hidden % q_heads:
            raise ValueError(
                f"'hidden_size' ({hidden}) is not divisible by 'num_attention_heads' "
                f"({q_heads}); the config must give 'head_dim'"
            )
        head_dim = hidden // q_heads
    return Geometry(hidden=hidden, q_heads=q_heads, kv_heads=kv_heads, head_dim=head_dim)


def _decoder_layers(f: Fields, fam: Family | None, honor_sliding: bool, geo: Geometry) -> list:
    """The standard decoder's layers: each layer's kind, then its cache (a recurrent state,
    none, an MLA latent or attention), per-layer overrides and shared caches. Notes and
    assumptions go to ``geo``."""
    hidden, q_heads, head_dim = geo.hidden, geo.q_heads, geo.head_dim
    geo_notes, assumptions = geo.notes, geo.assumptions
    _bidirectional(f)
    kinds = layer_kinds(f, honor_sliding, geo)
    mla = f.has("kv_lora_rank")
    if mla and any(k in ("sliding", "chunked") for k in kinds):
        raise ValueError(
            "MLA (kv_lora_rank) together with sliding or chunked layers is not "
            "supported yet; open an issue with this model"
        )
    extras = indexer_caches(f, len(kinds), geo_notes, assumptions)
    v_dim = f.int("v_head_dim", default=head_dim) if not mla else head_dim
    layers: list[Layer] = []
    for kind, extra in zip(kinds, extras):
        if kind == "state":
            layers.append(state_layer(f, hidden, state_flavor(f, f.model_type)))
        elif kind == "none":
            layers.append(NoCache(why="MLP or MoE block only"))
        elif mla:
            layers.append(mla_latent(f, q_heads, extra))
        else:
            layers.append(attention_layer(f, kind, geo, v_dim, extra))
    if mla:
        geo_notes.append(
            "MLA: the cache holds one latent of kv_lora_rank + qk_rope_head_dim per "
            "token and layer; num_key_value_heads does not apply"
        )
    if f.has("per_layer_config"):
        layers = _per_layer_overrides(f, layers)
    if fam is not None and fam.query_heads_per_layer:
        layers = _query_heads_per_layer(f, layers, geo)
    return share_kv(f, layers, kinds)


def _query_heads_per_layer(f: Fields, layers: list, geo: Geometry) -> list:
    heads = f.raw("num_attention_heads_per_layer")
    if heads is None:
        return layers
    if (
        not isinstance(heads, list)
        or len(heads) != len(layers)
        or any(isinstance(h, bool) or not isinstance(h, int) or h < 1 for h in heads)
    ):
        raise ValueError(
            "config field 'num_attention_heads_per_layer' must give a whole number of query "
            f"heads for each of the {len(layers)} layers"
        )
    out = []
    for i, (lay, q) in enumerate(zip(layers, heads)):
        refused = over_cap("num_attention_heads", q)
        if refused:
            raise ValueError(
                refused.replace("'num_attention_heads'", f"'num_attention_heads_per_layer[{i}]'", 1)
            )
        if q % geo.kv_heads:
            raise ValueError(
                f"config field 'num_attention_heads_per_layer[{i}]' ({q}) is not a multiple of "
                f"'num_key_value_heads' ({geo.kv_heads})"
            )
        out.append(replace(lay, q_heads=q) if lay.stores_tokens and lay.kind != "mla" else lay)
    return out


def hunyuan_switches(f: Fields, geo: Geometry) -> None:
    """Hunyuan (Tencent's remote code; Hunyuan-A13B): a standard decoder unless use_cla or
    use_mla is on (refused), with the head size both engines agree on."""
    if f.bool("use_cla", False):
        raise ValueError(
            "config field 'use_cla' is true: Hunyuan's cross-layer attention shares each "
            "layer's K/V with the next 'cla_share_factor' - 1 layers; Tencent's modeling code "
            "still caches every layer and vLLM gives the sharing layers their own cache, so "
            "kvcalc does not pick one"
        )
    f.seen.add("cla_share_factor")  # read only with use_cla
    if f.bool("use_mla", False):
        raise ValueError(
            "config field 'use_mla' is true: Hunyuan's modeling code (HunYuanAttention) has no "
            "MLA, so kvcalc cannot say what such a model caches"
        )
    # use_mla false: HunYuanConfig keeps its MLA fields (kv_lora_rank 512, v_head_dim 128...
    # by default) and nothing reads them; dropped here so that the standard decoder does not
    # take kv_lora_rank for an MLA latent or v_head_dim for the V width
    f.seen.update(_HUNYUAN_MLA)
    f.cfg = {k: v for k, v in f.cfg.items() if k not in _HUNYUAN_MLA}
    if geo.hidden is not None and geo.head_dim * geo.q_heads != geo.hidden:
        raise ValueError(
            f"config field 'attention_head_dim' ({geo.head_dim}) x 'num_attention_heads' "
            f"({geo.q_heads}) is not 'hidden_size' ({geo.hidden}): Hunyuan's modeling code "
            "takes hidden_size // num_attention_heads, vLLM attention_head_dim"
        )


_HUNYUAN_MLA = frozenset(
    {"kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"}
)


# eagle_config of an EAGLE draft head (SpecForge's and ModelOpt's exports): which target layers
# feed the head and how its norms are placed. vLLM's llama_eagle3.py reads use_aux_hidden_state
# (whether fc fuses the aux hidden states) and the aux layer ids; ModelOpt writes the layernorm
# switches and parallel_draft_step. None changes the head's cache (see the "eagle" group in
# kvcalc.config.families); any other key is refused by name.
_EAGLE_CONFIG_KEYS = frozenset(
    """
    eagle_aux_hidden_state_layer_ids use_aux_hidden_state use_input_layernorm_in_first_layer
    use_last_layernorm use_mtp_layernorm parallel_draft_step has_lm_head norm_before_fc
    norm_before_residual
    """.split()
)


def eagle_head(f: Fields, geo: Geometry) -> None:
    """An EAGLE draft head's eagle_config, key by key (the head itself is a Llama decoder)."""
    block = f.obj("eagle_config")
    if block is None:
        return
    unknown = sorted(set(block) - _EAGLE_CONFIG_KEYS)
    if unknown:
        raise ValueError(
            "config field 'eagle_config' has "
            + ", ".join(f"'{_short(k)}'" for k in unknown)
            + ", which kvcalc does not understand"
        )


_PER_LAYER_KEYS = {"head_dim", "num_key_value_heads"}


def _bidirectional(f: Fields) -> None:
    """use_bidirectional_attention: off (None/false) is a causal decoder. 'vision' (Gemma 4
    unified) and PaliGemma's true (gemma, gemma2: a prefix attended both ways) keep the same
    cache; anywhere else a true value makes an encoder (EmbeddingGemma's gemma3_text also halves
    its window), which keeps no KV cache while generating."""
    value = f.raw("use_bidirectional_attention")
    if value in (None, False):
        return
    allowed = f.family.bidirectional if f.family is not None else None
    if value == allowed and type(value) is type(allowed):
        return
    raise ValueError(
        f"config field 'use_bidirectional_attention' is {_short(value)}: for "
        f"model_type {_short(f.model_type or '(none)')} this is not a causal "
        "decoder, so it keeps no KV cache while generating"
    )


def _per_layer_overrides(f: Fields, layers: list) -> list:
    """transformers' ``per_layer_config`` (HeterogeneousConfigMixin): a sparse map from layer
    index to the attributes that differ there (Gemma 4 writes its full layers' head_dim 512 and
    KV heads this way). It supersedes global_head_dim and num_global_key_value_heads."""
    table = f.obj("per_layer_config")
    out = list(layers)
    for key, over in (table or {}).items():
        try:
            i = int(key)
        except (TypeError, ValueError):
            i = -1
        if not 0 <= i < len(out):
            raise ValueError(
                f"config field 'per_layer_config' names layer {_short(key)}, which "
                f"the model's {len(out)} layers do not have"
            )
        if not isinstance(over, dict):
            raise ValueError(f"config field 'per_layer_config[{_short(key)}]' must be an object")
        unknown = sorted(set(over) - _PER_LAYER_KEYS)
        if unknown:
            raise ValueError(
                f"config field 'per_layer_config[{_short(key)}]' overrides "
                + ", ".join(_short(u) for u in unknown)
                + ", which kvcalc does "
                "not understand per layer"
            )
        lay = out[i]
        if not lay.stores_tokens or lay.kind == "mla":
            raise ValueError(
                f"config field 'per_layer_config[{_short(key)}]' overrides "
                f"attention geometry on layer {i}, which is {lay.label}"
            )
        changes: dict[str, int] = {}
        for name, to in (
            ("head_dim", ("head_dim", "v_head_dim")),
            ("num_key_value_heads", ("kv_heads",)),
        ):
            if name in over:
                value = whole(over[name], f"per_layer_config[{key}].{name}", cap_of(name))
                changes.update(dict.fromkeys(to, value))
        out[i] = replace(lay, **changes)
    return out
