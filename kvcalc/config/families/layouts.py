"""Which kind each layer is, read from the one layout convention a config uses (``layer_types``,
pattern strings and codes, periods, ``block_configs``), and which layers share another's cache."""

from __future__ import annotations

from ...core.model import FullAttention, Layer, NoCache, SharedKV
from ...core.text import short as _short
from ..fields import Fields, Geometry
from ..limits import MAX_LAYERS
from .attention import heads_of, window_of

# Each layout convention maps its own tokens to a layer kind.
_LAYER_TYPE_NAMES = {
    "full_attention": "full",
    "attention": "full",
    "sliding_attention": "sliding",
    "chunked_attention": "chunked",
    "linear_attention": "state",
    "mamba": "state",
    "mamba2": "state",
    "conv": None,
    "moe": "none",
    "mlp": "none",
    "indexed_attention": "full",
    "deepseek_sparse_attention": "full",
}
_NEMOTRON_PATTERN = {"M": "state", "*": "full", "-": "none", "E": "none"}


def layer_kinds(f: Fields, honor_sliding: bool, geo: Geometry) -> list[str]:  # noqa: C901
    """One kind per layer: full, sliding, chunked, state or none (MLA is decided by
    kv_lora_rank). Every convention lives here, keyed by the field that carries it."""
    declared = f.int(
        "num_hidden_layers", "n_layer", "num_layers", "n_layers", required=False, maximum=MAX_LAYERS
    )
    kinds: list[str] | None = None
    source = None
    if f.has("hybrid_override_pattern"):
        source = "hybrid_override_pattern"
        pattern = f.raw(source)
        if not isinstance(pattern, str) or not pattern:
            raise ValueError(
                "config field 'hybrid_override_pattern' must be a string such as 'M-M*-'"
            )
        bad = sorted(set(pattern) - set(_NEMOTRON_PATTERN))
        if bad:
            raise ValueError(
                f"config field 'hybrid_override_pattern' has the letters {bad}, "
                "which are not understood; expected M (Mamba), * (attention), "
                "- (MLP) and E (MoE)"
            )
        kinds = [_NEMOTRON_PATTERN[c] for c in pattern]
    elif f.has("layers_block_type"):
        source = "layers_block_type"
        kinds = _from_names(f, source)
    elif f.has("hybrid_layer_pattern"):
        # MiMo-V2: 0 = full attention, 1 = sliding window attention.
        source = "hybrid_layer_pattern"
        kinds = _from_codes(f, source, {0: "full", 1: "sliding"})
    elif f.has("attn_type_list"):
        # MiniMax: 0 = lightning (linear) attention, 1 = softmax attention.
        source = "attn_type_list"
        kinds = _from_codes(f, source, {0: "state", 1: "full"})
    elif f.has("layer_types"):
        source = "layer_types"
        kinds = _from_names(f, source)
        # transformers derives layer_types from these when it is absent; given, it decides
        f.seen.update(
            "use_sliding_window max_window_layers sliding_window_pattern _sliding_window_pattern "
            "no_rope_layer_interval".split()
        )
        if f.raw("use_sliding_window") is False and "sliding" in kinds:
            # Qwen2/Qwen3/SmolLM3: use_sliding_window false sets sliding_window to None, so the
            # layers listed as sliding attend to everything (transformers and vLLM alike)
            kinds = ["full" if k == "sliding" else k for k in kinds]
            geo.notes.append(
                "use_sliding_window is false: the layers layer_types lists as "
                "sliding attend to the whole context"
            )
        if "sliding" not in kinds:
            f.seen.add("sliding_window")  # no layer of this model uses a window
        if f.has("full_attention_interval"):
            # Qwen3.5 writes both; layer_types decides (transformers builds the one from the
            # other), and a disagreement is refused rather than resolved by a guess.
            k = f.int("full_attention_interval")
            implied = ["full" if (i + 1) % k == 0 else "state" for i in range(len(kinds))]
            if implied != kinds:
                raise ValueError(
                    "config fields 'layer_types' and 'full_attention_interval' "
                    "disagree on which layers attend"
                )
    if kinds is not None:
        if declared is not None and declared != len(kinds):
            if source in ("hybrid_override_pattern", "layers_block_type"):
                geo.notes.append(
                    f"num_hidden_layers ({declared}) differs from the {len(kinds)} "
                    f"entries of '{source}'; the pattern decides, as in transformers"
                )
            else:
                raise ValueError(
                    f"config field '{source}' must list one entry for each of the "
                    f"{declared} layers, got {len(kinds)}"
                )
        n = len(kinds)
    else:
        n = f.int("num_hidden_layers", "n_layer", "num_layers", "n_layers", maximum=MAX_LAYERS)
        kinds = _kinds_from_periods(f, n)
    if source == "layer_types":
        f.seen.add("no_rope_layers")  # layer_types already says which layers are chunked
    if source is None and f.model_type == "llama4_text" and f.has("attention_chunk_size"):
        # Llama 4: RoPE layers attend within chunks; every no_rope_layer_interval-th layer is a
        # global NoPE layer. ``no_rope_layers[i]`` is 1 where layer i uses RoPE (is chunked).
        flags = f.raw("no_rope_layers")
        if isinstance(flags, list) and len(flags) == n:
            kinds = ["chunked" if flags[i] else kinds[i] for i in range(n)]
        elif flags not in (None, []):
            raise ValueError(
                f"config field 'no_rope_layers' must list 0/1 for each of the {n} layers"
            )
        else:
            every = f.int("no_rope_layer_interval", default=4)
            kinds = [kinds[i] if (i + 1) % every == 0 else "chunked" for i in range(n)]
    if any(k == "sliding" for k in kinds):
        window_of(f)  # validates presence and value
    if not honor_sliding:
        kinds = ["full" if k == "sliding" else k for k in kinds]
    return kinds


def _from_names(f: Fields, name: str) -> list[str]:
    types = f.raw(name)
    if not isinstance(types, list) or not types:
        raise ValueError(f"config field '{name}' must be a list with one type per layer")
    kinds = []
    for i, t in enumerate(types):
        kind = _LAYER_TYPE_NAMES.get(t) if isinstance(t, str) else None
        if kind is None:
            known = ", ".join(sorted(k for k, v in _LAYER_TYPE_NAMES.items() if v))
            raise ValueError(
                f"config field '{name}[{i}]' = {_short(t)} is not a layer type kvcalc "
                f"understands ({known}); open an issue with this model"
            )
        kinds.append(kind)
    return kinds


def _from_codes(f: Fields, name: str, codes: dict) -> list[str]:
    values = f.raw(name)
    if not isinstance(values, list) or not values:
        raise ValueError(f"config field '{name}' must be a list with one entry per layer")
    kinds = []
    for i, v in enumerate(values):
        # isinstance first: a nested list or object is unhashable, and `in` would raise
        if isinstance(v, bool) or not isinstance(v, (int, float, str)) or v not in codes:
            raise ValueError(
                f"config field '{name}[{i}]' = {_short(v)} is not understood; "
                f"expected one of {sorted(codes)}"
            )
        kinds.append(codes[v])
    return kinds


def _kinds_from_periods(f: Fields, n: int) -> list[str]:
    window_on = f.raw("use_sliding_window", default=True) is not False
    # A family whose config class places its sliding layers by a rule of its own when
    # layer_types is absent (Family.layout_by_class_rule: olmo3 sliding unless (i + 1) % 4 == 0;
    # cwm and granite_swa full at i % 4 == 0; vaultgemma alternating; exaone4 a pattern of 4;
    # qwen2_moe sliding on odd layers below max_window_layers; smollm3 the NoPE layers;
    # MiMo-V2-Flash full at 0 and every 6th): kvcalc reads the layout from layer_types only.
    if (
        f.family is not None
        and f.family.layout_by_class_rule
        and window_on
        and f.has("sliding_window", "sliding_window_size")
    ):
        raise ValueError(
            f"config field 'layer_types' is missing: for model_type "
            f"{f.model_type} the config class places its sliding layers by a rule "
            "of its own, which kvcalc does not repeat; give a config with "
            "layer_types (transformers writes it)"
        )
    hybrid = f.has("full_attention_interval") or f.has("attn_layer_period")
    if hybrid and window_on and f.raw("use_sliding_window") is True and f.has("sliding_window"):
        raise ValueError(
            "config field 'use_sliding_window' is true in a hybrid model "
            "(full_attention_interval / attn_layer_period): which layers use the "
            "window is not defined; kvcalc does not guess it"
        )
    if f.has("full_attention_interval"):
        k = f.int("full_attention_interval")
        return ["full" if (i + 1) % k == 0 else "state" for i in range(n)]
    if f.has("attn_layer_period"):
        period = f.int("attn_layer_period")
        offset = f.int("attn_layer_offset", minimum=0)
        if offset >= period:
            raise ValueError(
                f"config field 'attn_layer_offset' ({offset}) must be smaller than "
                f"'attn_layer_period' ({period})"
            )
        return ["full" if i % period == offset else "state" for i in range(n)]
    if not window_on:
        # use_sliding_window false (Qwen2): no window applies, so the window's size and the
        # layers it would start from are read and known not to matter.
        f.seen.update({"sliding_window", "max_window_layers", "sliding_window_pattern"})
    if f.has("sliding_window") and window_on:
        if f.has("sliding_window_pattern"):
            p = f.int("sliding_window_pattern")
            kinds = ["full" if (i + 1) % p == 0 else "sliding" for i in range(n)]
            if f.defaults.get("last_layer_full"):
                kinds[-1] = "full"  # Gemma 4 forces its last layer to full attention
            return kinds
        if f.has("max_window_layers") and f.has("use_sliding_window"):
            # Qwen2 with use_sliding_window true: layers from max_window_layers on use the window.
            m = f.int("max_window_layers", minimum=0)
            return ["sliding" if i >= m else "full" for i in range(n)]
        return ["sliding"] * n
    return ["full"] * n


def share_kv(f: Fields, layers: list, kinds: list[str]) -> list:
    """Gemma 3n / Gemma 4: the last num_kv_shared_layers layers store nothing and read the cache
    of the last earlier layer of the same type (transformers' ``kv_sharing_modes``)."""
    shared = f.int("num_kv_shared_layers", default=0, minimum=0)
    if not shared:
        return layers
    n = len(layers)
    if shared >= n:
        raise ValueError(
            f"config field 'num_kv_shared_layers' ({shared}) leaves no layer to "
            f"store a cache (the model has {n})"
        )
    first = n - shared
    out = list(layers[:first])
    for i in range(first, n):
        src = next((j for j in range(first - 1, -1, -1) if kinds[j] == kinds[i]), None)
        if src is None or not layers[src].stores_tokens:
            raise ValueError(
                f"config field 'num_kv_shared_layers': layer {i} ({kinds[i]}) has "
                "no earlier layer of its type to share a cache with"
            )
        out.append(SharedKV(source=src, reads=layers[src]))
    return out


_NAS_ATTENTION_KEYS = frozenset(
    """
    no_op replace_with_linear n_heads_in_group sparsify num_sink_tokens
    use_prefill_window_in_sink_attention unshifted_sink window_length llama4
    """.split()
)


def nas_layers(f: Fields, geo: Geometry) -> list:
    """Nemotron-NAS (``block_configs``): per layer, attention may be a no-op, replaced by a
    linear layer, or grouped-query attention with its own ``n_heads_in_group``."""
    blocks = f.raw("block_configs")
    if not isinstance(blocks, list) or not blocks:
        raise ValueError("config field 'block_configs' must be a list with one entry per layer")
    layers: list[Layer] = []
    for i, block in enumerate(blocks):
        attn = block.get("attention") if isinstance(block, dict) else None
        if not isinstance(attn, dict):
            raise ValueError(f"config field 'block_configs[{i}].attention' must be an object")
        unknown = set(attn) - _NAS_ATTENTION_KEYS
        if unknown:
            raise ValueError(
                f"config field 'block_configs[{i}].attention' has "
                f"{', '.join(sorted(unknown))}, which kvcalc does not understand"
            )
        if attn.get("no_op") is True:
            layers.append(NoCache(why="attention is a no-op"))
            continue
        if attn.get("replace_with_linear") is True:
            layers.append(NoCache(why="attention replaced by a linear layer"))
            continue
        if any(
            attn.get(k) is not None
            for k in ("window_length", "num_sink_tokens", "llama4", "sparsify")
        ):
            raise ValueError(
                f"config field 'block_configs[{i}].attention' uses a window, sink "
                "tokens or sparsity, which kvcalc does not support yet"
            )
        group = attn.get("n_heads_in_group")
        if (
            isinstance(group, bool)
            or not isinstance(group, int)
            or group < 1
            or geo.q_heads % group
        ):
            raise ValueError(
                f"config field 'block_configs[{i}].attention.n_heads_in_group' must "
                f"be a whole number that divides {geo.q_heads}, got {_short(group)}"
            )
        layers.append(FullAttention(**{**heads_of(geo), "kv_heads": geo.q_heads // group}))
    declared = f.int("num_hidden_layers", required=False, maximum=MAX_LAYERS)
    if declared is not None and declared != len(layers):
        raise ValueError(
            f"config field 'block_configs' has {len(layers)} entries but "
            f"'num_hidden_layers' is {declared}"
        )
    return layers
