"""Build a ModelSpec from the fields of a Hugging Face config.json.

Only config fields decide anything. Where a field is absent, the default is the one of the
transformers config class named by ``model_type`` (the architecture, not the model's name): for
example Gemma 2 alternates sliding and full layers although its config.json has no pattern field,
because ``Gemma2Config`` builds ``layer_types`` that way.

The cache comes first: the layers need only attention and state fields. Parameters are counted
afterwards and apart; when that fails (an unknown family, per-layer shapes) the spec carries
``params=None`` and a note, and only the weight figures are lost. A layout field that is not
understood is refused by name; nothing falls back to "every layer full attention".

Layout conventions, each read in one place (``_layer_kinds``, ``_nas_layers``, ``_share_kv``):
- ``layer_types`` / ``layers_block_type`` (names), ``hybrid_override_pattern`` (Nemotron-H:
  M Mamba-2, * attention, - MLP, E MoE), ``hybrid_layer_pattern`` (MiMo-V2: 0 full, 1 sliding),
  ``attn_type_list`` (MiniMax: 0 lightning attention, 1 softmax), ``block_configs``
  (Nemotron-NAS: per-layer no-op / linear / ``n_heads_in_group``)
- per-type geometry: ``global_head_dim`` / ``num_global_key_value_heads`` with
  ``attention_k_eq_v`` (Gemma 4 full layers), ``swa_*`` (MiMo-V2 sliding layers),
  ``v_head_dim`` different from the K dim
- ``num_kv_shared_layers`` (Gemma 3n / 4): the last layers read an earlier layer's cache
- ``index_topk`` (DeepSeek sparse attention): an fp8 indexer-key cache beside the MLA latent
- attention-free models (``mamba``, ``mamba2``): a state per layer and no K/V

Config traps handled here (see docs/engine-facts.md#config-traps):
- ``head_dim`` explicit (Gemma 2: 256, not 3584/16 = 224; gpt-oss: 64, not 2880/64 = 45)
- ``num_key_value_heads`` missing -> multi-head attention
- Falcon: ``multi_query`` (one KV head) or ``num_kv_heads`` with ``new_decoder_architecture``
- GPT-2 names: ``n_embd``, ``n_head``, ``n_layer``, ``n_positions``, ``n_inner``; MPT's
  ``n_layers`` / ``n_heads`` / ``d_model`` / ``attn_config``; ChatGLM's ``num_layers``,
  ``multi_query_group_num``, ``kv_channels``, ``padded_vocab_size``, ``seq_length``
- multimodal configs: the language model under ``text_config``
- ``layer_types``; ``sliding_window`` with ``sliding_window_pattern``; ``use_sliding_window: false``
- MLA (``kv_lora_rank``, ``qk_rope_head_dim``); hybrids (``full_attention_interval``,
  ``attn_layer_period`` + ``attn_layer_offset``); MoE placement fields
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..core.model import (
    ChunkedLocal,
    ExtraCache,
    FullAttention,
    Layer,
    MLALatent,
    ModelSpec,
    NoCache,
    RecurrentState,
    SharedKV,
    SlidingWindow,
    interned,
)
from ..core.text import SHORT as _SHORT
from ..core.text import short as _short
from .families import FAMILIES, NEVER_CACHE, understood
from .family_readers import (
    FAMILY_READERS,
    SEQ2SEQ_DECODERS,
    rwkv_layers,
    seq2seq_decoder_layers,
)
from .fields import CONV_KERNEL, EXPAND, STATE_SIZE, Fields, Geometry
from .files import read_regular_file
from .limits import MAX_CONTEXT, MAX_LAYERS, UPFRONT, cap_of, over_cap
from .params import count_parameters

__all__ = ["spec_from_config", "load_config_file", "MAX_CONFIG_BYTES", "UnknownFields"]

MAX_CONFIG_BYTES = 1_000_000  # a real config.json is a few KiB; refuse anything far larger
# One bound on model size (kvcalc.config.limits): the layer cap bounds all per-layer work;
# the context cap is vLLM's arithmetic's (kvcalc.engines.vllm.predict); the other sizes have a
# cap each by field.
_MAX_CONTEXT = MAX_CONTEXT


# Defaults of transformers config classes, by model_type, for fields a config.json may omit.
_CLASS_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma2": {"sliding_window_pattern": 2, "head_dim": 256, "vocab_size": 256000},
    "gemma3_text": {"sliding_window_pattern": 6, "head_dim": 256, "vocab_size": 262208,
                    "sliding_window": 4096, "num_attention_heads": 8, "num_key_value_heads": 4,
                    "max_position_embeddings": 131072},
    "gemma4_text": {"sliding_window_pattern": 6, "last_layer_full": True,
                    "sliding_window": 512, "global_head_dim": 512},
    "cohere2": {"sliding_window_pattern": 4},
    "falcon": {"tie_word_embeddings": True},
    "gpt2": {"n_positions": 1024, "tie_word_embeddings": True},
    # GPTBigCodeConfig: multi_query defaults to true (one KV head)
    "gpt_bigcode": {"multi_query": True},
    # JambaConfig: the Mamba width is mamba_expand (2) x hidden_size, not intermediate_size
    "jamba": {"mamba_expand": 2},
    # The new families' config-class defaults, so that a file that leaves them out is read as
    # transformers reads it and the assumptions say so (transformers 5.24's config classes)
    "lfm2": {"conv_L_cache": 3}, "lfm2_moe": {"conv_L_cache": 3},
    "falcon_h1": {"mamba_d_conv": 4, "mamba_n_groups": 1, "mamba_expand": 2},
    "kimi_linear": {"linear_num_heads": 32, "linear_head_dim": 128,
                    "linear_conv_kernel_dim": 4},
    "recurrent_gemma": {"conv1d_width": 4},
    # MllamaTextConfig's cross-attention layers when the file leaves them out
    "mllama_text_model": {"cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38]},
}

# Families whose config class builds the layer layout by a rule of its own when layer_types is
# absent (olmo3: sliding unless (i + 1) % 4 == 0; cwm and granite_swa: full at i % 4 == 0;
# vaultgemma: alternating; exaone4: a pattern of 4; qwen2_moe: sliding on odd layers below
# max_window_layers; smollm3: the NoPE layers; MiMo-V2-Flash: full at 0 and every 6th). kvcalc
# reads their layout from layer_types (or the family's own pattern field) only.
_LAYOUT_BY_CLASS_RULE = frozenset({
    "olmo3", "cwm", "vaultgemma", "granite_swa", "granitemoe_swa", "exaone4", "exaone_moe",
    "qwen2_moe", "smollm3", "mellum", "mimo_v2_flash"})



def load_config_file(path: str | Path) -> dict:
    """Read a config.json file into a dict, with clear errors for the usual mistakes.

    Only a regular file is read, and at most MAX_CONFIG_BYTES + 1 bytes of it
    (kvcalc.config.files: a FIFO or /dev/stdin would block, /dev/zero would never end)."""
    data = read_regular_file(
        path, limit=MAX_CONFIG_BYTES, what="config file", give="give the path of a config.json",
        too_large=lambda shown, size: f"config file {shown} is {size:,} bytes; a config.json is "
                                      f"at most {MAX_CONFIG_BYTES:,} bytes")
    shown = _short(str(path))
    if len(data) > MAX_CONFIG_BYTES:
        raise ValueError(f"config file {shown} holds more than {MAX_CONFIG_BYTES:,} bytes; a "
                         f"config.json is at most {MAX_CONFIG_BYTES:,} bytes")
    return parse_config_text(data.decode("utf-8", errors="replace"), source=f"config file {shown}")


def parse_config_text(text: str, source: str = "config") -> dict:
    if len(source) > _SHORT:
        source = source[:_SHORT] + "..."
    if len(text) > MAX_CONFIG_BYTES or \
            len(text.encode("utf-8", errors="replace")) > MAX_CONFIG_BYTES:
        raise ValueError(f"{source} is larger than {MAX_CONFIG_BYTES:,} bytes; paste a config.json")
    try:
        # Infinity and NaN are kept: real configs hold them in fields kvcalc does not read
        # (NVIDIA's time_step_limit); a field that is read must still be a finite number.
        cfg = json.loads(text)
    except RecursionError:
        raise ValueError(f"{source} is nested too deeply to be a config.json") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{source} is not valid JSON: {exc.msg} at line {exc.lineno}, "
                         f"column {exc.colno}") from None
    except ValueError:  # an integer past Python's 4,300-digit limit
        raise ValueError(f"{source} holds a number of more than 4,300 digits; no config field "
                         "needs one") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"{source} must be a JSON object ({{...}}), got {type(cfg).__name__}")
    return cfg


def _check_sizes(cfg: dict) -> None:
    """One bound on model size, before any per-layer work (kvcalc.config.limits): no per-layer list,
    pattern string or per-layer table may describe more than MAX_LAYERS layers, whichever
    field carries it, and no size field (hidden size, heads, head size, vocabulary, MLP width,
    experts, ranks) may be over its cap."""
    for name, value in cfg.items():
        if name in UPFRONT:
            refused = over_cap(name, value)
            if refused:
                raise ValueError(refused)
        size = None
        if isinstance(value, list):
            size = len(value)
        elif isinstance(value, str) and name in _PATTERN_STRINGS:
            size = len(value)
        elif isinstance(value, dict) and name in ("per_layer_config", "linear_attn_config"):
            size = max([len(value)] + [len(v) for v in value.values() if isinstance(v, list)])
        if size is not None and size > MAX_LAYERS:
            raise ValueError(f"config field {_short(name)} describes {size:,} layers; kvcalc "
                             f"sizes models of at most {MAX_LAYERS:,} layers (the deepest "
                             "published one has 162)")


_PATTERN_STRINGS = ("hybrid_override_pattern", "mtp_hybrid_override_pattern")


class UnknownFields(ValueError):
    """A config holds fields no reader of its family understands: kvcalc refuses to guess.

    ``fields`` are the field names, ``model_type`` the family (``""`` when the config names
    none) and ``known_family`` whether kvcalc has a reader for it."""

    def __init__(self, model_type: str, fields: list[str], known_family: bool, why: str = ""):
        self.model_type, self.fields, self.known_family = model_type, fields, known_family
        shown = ", ".join(_short(f) for f in fields[:12]) + (" ..." if len(fields) > 12 else "")
        who = (f"kvcalc's reader for model_type {_short(model_type)}" if known_family else
               f"kvcalc (model_type {_short(model_type or '(none)')} has no reader of its own)")
        super().__init__(
            f"config fields not understood by {who}: {shown}. kvcalc does not guess what a "
            "field does to the cache: check the config against transformers (verify), or ask "
            "for the generic decoder estimate, labelled unverified (--unverified)"
            + (f"; read as a standard decoder it also fails: {why}" if why else ""))


# Complex by design (C901): one pass in the order a reading can fail: text_config, layers,
# parameters, unread fields.
def spec_from_config(  # noqa: C901
        config: dict, *, name: str | None = None,
        honor_sliding_window: bool = True, unverified: bool = False) -> ModelSpec:
    """Turn a config.json dict into a ModelSpec: the cache first, then, separately, the
    parameters (whose failure only loses the weight figures, with a note saying why).

    Every field must be understood, by the family's reader or as one that cannot change the
    cache (kvcalc.config.families); otherwise UnknownFields (a ValueError) names them. With
    ``unverified=True`` the generic reading is returned instead, and the spec's
    ``unverified`` lists the fields it did not understand.

    ``honor_sliding_window=False`` treats every sliding layer as full attention, as runtimes do
    that ignore a config's window (several do for Mistral-7B-v0.1 and Phi-3)."""
    if not isinstance(config, dict):
        raise ValueError(f"a config must be a JSON object, got {type(config).__name__}")
    top_type = config.get("model_type")
    cfg = config
    notes: list[str] = []
    if isinstance(config.get("text_config"), dict):
        cfg = dict(config["text_config"])
        notes.append("language model read from text_config; vision parameters are not counted")
    elif "text_config" in config and config["text_config"] is not None:
        raise ValueError("config field 'text_config' must be an object")
    model_type = cfg.get("model_type") or top_type or ""
    if not isinstance(model_type, str):
        raise ValueError(f"config field 'model_type' must be a string, got {_short(model_type)}")
    if isinstance(top_type, str) and top_type in _WRAPPER_TEXT and cfg is config:
        model_type = _WRAPPER_TEXT[top_type]
    model_type = _TEXT_TYPES.get(model_type, model_type)
    _check_sizes(cfg)
    f = Fields(cfg, _CLASS_DEFAULTS.get(model_type, {}))
    f.top = config
    f.model_type = model_type
    known = model_type in FAMILIES or model_type == ""
    f.seen.update(understood(model_type or "llama", cfg))

    def unknown_fields() -> list[str]:
        return sorted(f.unread())

    try:
        layers, geo = _read_layers(f, model_type, honor_sliding_window)
        max_ctx = f.int("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                        "context_length", "model_max_length", default=2048,
                        maximum=_MAX_CONTEXT)
    except UnknownFields:
        raise
    except ValueError as exc:
        # A family kvcalc has no reader for fails on a field it lacks: name what it has instead
        # (the standard fields the failed reading did not reach are not among them).
        rest = sorted(set(unknown_fields()) - _STANDARD_FIELDS)
        if not known and rest:
            raise UnknownFields(model_type, rest, False, why=str(exc)) from None
        raise
    notes += geo.notes
    assumptions = list(geo.assumptions)
    assumptions += _engine_conventions(f, layers)
    for name_, value in f.defaults_used():
        assumptions.append(f"'{name_}' is not in the config: took {value!r}, the default of "
                           f"transformers' {model_type} config class")
    counted = count_parameters(f, model_type, layers, geo)
    if counted.error:
        notes.append(f"parameters not counted ({counted.error}): weight figures need a weight "
                     "size given by hand; the cache figures are complete")
    unread = unknown_fields()
    if unread and not unverified:
        raise UnknownFields(model_type, unread, known)
    if unread:
        assumptions.insert(0, "UNVERIFIED: read as a standard decoder although these fields "
                           "are not understood: " + ", ".join(_short(u) for u in unread[:40])
                           + (" ..." if len(unread) > 40 else ""))
    if not known:
        assumptions.append(f"model_type {_short(model_type)} has no reader of its own in "
                           "kvcalc: its layers were read from the standard decoder fields")
    elif model_type == "":
        assumptions.append("the config names no model_type: read as a standard decoder")

    label = (
        name or cfg.get("_name_or_path") or config.get("_name_or_path") or model_type or "custom"
    )
    return ModelSpec(name=str(label)[:_SHORT], layers=interned(layers), params=counted.params,
                     moe=counted.moe, hidden_size=geo.hidden, vocab_size=counted.vocab,
                     max_context=max_ctx, notes=tuple(notes), assumptions=tuple(assumptions),
                     params_error=counted.error, unverified=tuple(unread),
                     family_reader=model_type in FAMILIES)


# The standard decoder's own fields: never "not understood", even where a failed reading did
# not reach them.
_STANDARD_FIELDS = frozenset({
    "num_hidden_layers", "n_layer", "num_layers", "n_layers", "num_attention_heads", "n_head",
    "num_heads", "n_heads", "num_key_value_heads", "head_dim", "hidden_size", "n_embd",
    "d_model", "max_position_embeddings", "n_positions", "sliding_window", "layer_types"})

# Wrappers whose language model is not under text_config: the whole config is read under the
# text family's reader.
_WRAPPER_TEXT: dict[str, str] = {"qwen2_5_vl": "qwen2_5_vl_text", "qwen2_vl": "qwen2_vl_text"}

# model_type of a text config that names the whole multimodal model instead
_TEXT_TYPES = {"gemma3": "gemma3_text", "gemma3n": "gemma3n_text", "gemma4": "gemma4_text",
               "llama4": "llama4_text", "qwen3_5": "qwen3_5_text",
               "qwen3_5_moe": "qwen3_5_moe_text"}

# Complex by design (C901): one early return per layout (seq2seq, RWKV, all-state, a family's
# reader, NAS), then the standard decoder.
def _read_layers(f: Fields, model_type: str, honor_sliding: bool):  # noqa: C901
    """The layers and the base attention geometry, from cache fields only."""
    hidden = f.int("hidden_size", "n_embd", "d_model", required=False)
    geo_notes: list[str] = []
    assumptions: list[str] = []

    if model_type in SEQ2SEQ_DECODERS:
        layers, heads, head = seq2seq_decoder_layers(f, MAX_LAYERS, geo_notes)
        geo = Geometry(hidden=hidden, q_heads=heads, kv_heads=heads,
                        head_dim=head, notes=geo_notes, assumptions=assumptions)
        return layers, geo
    if model_type == "rwkv":
        geo = Geometry(hidden=hidden, q_heads=0, kv_heads=0, head_dim=0,
                        notes=["no attention: every layer keeps a fixed RWKV state and no K/V"],
                        assumptions=assumptions)
        return rwkv_layers(f, hidden, MAX_LAYERS), geo
    # Attention-free models: every layer is a recurrent state.
    if model_type in _ALL_STATE_TYPES:
        n = f.int("num_hidden_layers", "n_layer", "num_layers", maximum=MAX_LAYERS)
        state = _state_layer(f, hidden, _ALL_STATE_TYPES[model_type])
        if model_type == "mamba2" and f.has("expand") and hidden is not None:
            # Mamba2Mixer (transformers and vLLM) sizes the convolution from expand x
            # hidden_size and the SSM state from num_heads x head_dim; they must agree.
            inner = f.int("expand") * hidden
            heads, head = f.int("num_heads"), f.int("head_dim")
            if inner != heads * head:
                raise ValueError(f"config fields 'expand' x 'hidden_size' ({inner:,}) and "
                                 f"'num_heads' x 'head_dim' ({heads * head:,}) disagree on the "
                                 "Mamba-2 inner width")
        geo = Geometry(hidden=hidden, q_heads=0, kv_heads=0, head_dim=0,
                        notes=["no attention: every layer keeps a fixed recurrent state and no "
                               "K/V"], assumptions=assumptions)
        return [state] * n, geo

    attn_cfg = f.obj("attn_config")  # MPT keeps the attention settings in a sub-object
    q_heads = f.int("num_attention_heads", "n_head", "num_heads", "n_heads")
    kv_heads = _kv_heads(f, q_heads, attn_cfg)
    if q_heads % kv_heads:
        raise ValueError(f"config field 'num_key_value_heads' ({kv_heads}) must divide "
                         f"'num_attention_heads' ({q_heads})")
    if f.has("head_dim", "kv_channels", "attention_head_dim"):
        head_dim = f.int("head_dim", "kv_channels", "attention_head_dim")
    else:
        if hidden is None:
            raise ValueError("config field 'head_dim' is missing, and without 'hidden_size' it "
                             "cannot be derived")
        if hidden % q_heads:
            raise ValueError(f"'hidden_size' ({hidden}) is not divisible by 'num_attention_heads' "
                             f"({q_heads}); the config must give 'head_dim'")
        head_dim = hidden // q_heads
    geo = Geometry(hidden=hidden, q_heads=q_heads, kv_heads=kv_heads,
                    head_dim=head_dim, notes=geo_notes, assumptions=assumptions)

    reader = FAMILY_READERS.get(model_type)
    if reader is not None:
        return reader(f, geo, MAX_LAYERS), geo
    if f.has("block_configs"):
        return _nas_layers(f, geo), geo

    _bidirectional(f)
    kinds = _layer_kinds(f, model_type, honor_sliding, geo)
    mla = f.has("kv_lora_rank")
    if mla and any(k in ("sliding", "chunked") for k in kinds):
        raise ValueError("MLA (kv_lora_rank) together with sliding or chunked layers is not "
                         "supported yet; open an issue with this model")
    extras = _indexer(f, len(kinds), geo_notes, assumptions)
    v_dim = f.int("v_head_dim", default=head_dim) if not mla else head_dim
    layers = []
    for i, kind in enumerate(kinds):
        extra = extras[i]
        if kind == "state":
            layers.append(_state_layer(f, hidden, _state_flavor(f, model_type)))
        elif kind == "none":
            layers.append(NoCache(why="MLP or MoE block only"))
        elif mla:
            rope = f.int("qk_rope_head_dim")
            layers.append(MLALatent(
                kv_lora_rank=f.int("kv_lora_rank"), qk_rope_head_dim=rope, q_heads=q_heads,
                qk_head_dim=f.int("qk_nope_head_dim") + rope, v_head_dim=f.int("v_head_dim"),
                extra=extra))
        else:
            layers.append(_attention_layer(f, kind, geo, v_dim, extra))
    if mla:
        geo_notes.append("MLA: the cache holds one latent of kv_lora_rank + qk_rope_head_dim per "
                         "token and layer; num_key_value_heads does not apply")
    if f.has("per_layer_config"):
        layers = _per_layer_overrides(f, layers)
        geo.per_layer_heads = True
    layers = _share_kv(f, layers, kinds)
    return layers, geo


_PER_LAYER_KEYS = {"head_dim", "num_key_value_heads"}


def _bidirectional(f: Fields) -> None:
    """use_bidirectional_attention: off (None/false) is a causal decoder. 'vision' (Gemma 4
    unified) and PaliGemma's true (gemma, gemma2: a prefix attended both ways) keep the same
    cache; anywhere else a true value makes an encoder (EmbeddingGemma's gemma3_text also halves
    its window), which keeps no KV cache while generating."""
    value = f.raw("use_bidirectional_attention")
    if value in (None, False):
        return
    if value == "vision" and f.model_type in ("gemma4_text", "gemma4_unified_text"):
        return
    if value is True and f.model_type in ("gemma", "gemma2"):
        return
    raise ValueError(f"config field 'use_bidirectional_attention' is {_short(value)}: for "
                     f"model_type {_short(f.model_type or '(none)')} this is not a causal "
                     "decoder, so it keeps no KV cache while generating")


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
            raise ValueError(f"config field 'per_layer_config' names layer {_short(key)}, which "
                             f"the model's {len(out)} layers do not have")
        if not isinstance(over, dict):
            raise ValueError(f"config field 'per_layer_config[{_short(key)}]' must be an object")
        unknown = sorted(set(over) - _PER_LAYER_KEYS)
        if unknown:
            raise ValueError(f"config field 'per_layer_config[{_short(key)}]' overrides "
                             + ", ".join(_short(u) for u in unknown) + ", which kvcalc does "
                             "not understand per layer")
        lay = out[i]
        if not lay.stores_tokens or lay.kind == "mla":
            raise ValueError(f"config field 'per_layer_config[{_short(key)}]' overrides "
                             f"attention geometry on layer {i}, which is {lay.label}")
        changes: dict[str, int] = {}
        if "head_dim" in over:
            d = _plain_int(over["head_dim"], f"per_layer_config[{key}].head_dim")
            changes.update(head_dim=d, v_head_dim=d)
        if "num_key_value_heads" in over:
            changes["kv_heads"] = _plain_int(over["num_key_value_heads"],
                                             f"per_layer_config[{key}].num_key_value_heads")
        out[i] = replace(lay, **changes)
    return out


def _plain_int(value: Any, label: str) -> int:
    cap = cap_of(label.rsplit(".", 1)[-1])
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= cap:
        raise ValueError(f"config field '{label}' must be a whole number from 1 to {cap:,}")
    return value


_ALL_STATE_TYPES = {"mamba": "mamba", "falcon_mamba": "mamba", "mamba2": "mamba2"}

def _engine_conventions(f: Fields, layers: list) -> list[str]:
    """The engine conventions a figure for these layers rests on, said once."""
    out = []
    if any(lay.state_elements for lay in layers):
        asked = f.raw("mamba_ssm_cache_dtype", "mamba_ssm_dtype")
        out.append("recurrent state: the convolution keeps conv_kernel - 1 past inputs, as vLLM "
                   "allocates it (transformers keeps conv_kernel); the state is counted in the "
                   "state format chosen (BF16 unless set)"
                   + (f"; this config asks for {asked} SSM state (mamba_ssm_cache_dtype)"
                      if isinstance(asked, str) else ""))
    if any(lay.token_bound() is not None for lay in layers):
        out.append("window or chunk layers keep at most window (chunk) tokens here; vLLM reserves "
                   "blocks for window - 1 + one batch of new tokens, and transformers keeps "
                   "window - 1 (chunk - 1) between steps")
    return out


def _indexer(f: Fields, n: int, notes: list, assumptions: list) -> list:
    """Per layer, the DeepSeek-sparse-attention indexer key cache (``index_topk``), or None.

    vLLM stores the indexer's keys as fp8 plus one fp32 scale per 128 values; transformers keeps
    them in the model dtype. ``indexer_types`` (GLM-5.2) marks layers that reuse another
    layer's top-k ("shared") and so compute and cache no indexer keys."""
    if not f.has("index_topk"):
        return [None] * n
    idx = f.int("index_head_dim")
    extra = ExtraCache(name="indexer keys", elements=idx, dtype="fp8", scale_bytes=idx // 128 * 4)
    types = f.raw("indexer_types")
    f.seen.add("index_topk_freq")  # read below, or superseded by indexer_types
    if types is None:
        for name in ("index_topk_pattern", "index_topk_freq"):
            value = f.raw(name)
            if value not in (None, 1):
                raise ValueError(f"config field '{name}' sets a per-layer indexer pattern that "
                                 "kvcalc does not derive; a config with 'indexer_types' works")
        flags = [True] * n
    else:
        if not isinstance(types, list) or len(types) != n or \
                any(t not in ("full", "shared") for t in types):
            raise ValueError(f"config field 'indexer_types' must list 'full' or 'shared' for "
                             f"each of the {n} layers")
        flags = [t == "full" for t in types]
        assumptions.append("layers whose indexer_types entry is 'shared' keep no indexer keys "
                           "(transformers computes none there)")
    notes.append(f"sparse attention indexer (index_topk): {sum(flags)} layers also cache {idx} "
                 f"fp8 indexer-key values + {idx // 128 * 4} B of scales per token, as vLLM "
                 "stores them")
    return [extra if flag else None for flag in flags]


def _attention_layer(f: Fields, kind: str, geo: Geometry, v_dim: int, extra):
    """One attention layer of ``kind`` with its own geometry: full layers may have their own
    head size and KV heads (Gemma 4's global_*), sliding ones theirs (MiMo-V2's swa_*)."""
    kv, k_dim, v, q = geo.kv_heads, geo.head_dim, v_dim, geo.q_heads
    if kind == "full" and f.has("global_head_dim") and not f.has("per_layer_config"):
        k_dim = v = f.int("global_head_dim")
        if f.bool("attention_k_eq_v", False) and f.has("num_global_key_value_heads"):
            # transformers' Gemma4TextConfig: the global KV-head override applies only to the
            # models that declare attention_k_eq_v (V is computed from the K projection, but
            # both K and V are cached).
            kv = f.int("num_global_key_value_heads")
        geo.per_layer_heads = True
    if kind == "sliding" and f.model_type == "mimo_v2_flash":
        # MiMoV2FlashAttention (transformers) gives sliding layers 2 x num_key_value_heads;
        # vLLM's mimo_v2_flash.py reads swa_num_key_value_heads. Published files agree.
        doubled = 2 * kv
        kv = f.int("swa_num_key_value_heads", default=doubled)
        if kv != doubled:
            raise ValueError(f"config field 'swa_num_key_value_heads' ({kv}) is not twice "
                             f"'num_key_value_heads' ({doubled // 2}): vLLM would cache {kv} "
                             f"heads and transformers {doubled}; kvcalc does not pick one")
        q = f.int("swa_num_attention_heads", default=q)
        k_dim = f.int("swa_head_dim", default=k_dim)
        v = f.int("swa_v_head_dim", default=v)
        geo.per_layer_heads = True
    elif kind == "sliding" and f.has("swa_num_key_value_heads", "swa_head_dim"):
        kv = f.int("swa_num_key_value_heads", default=kv)
        q = f.int("swa_num_attention_heads", default=q)
        k_dim = f.int("swa_head_dim", default=k_dim)
        v = f.int("swa_v_head_dim", default=v)
        geo.per_layer_heads = True
    common = dict(kv_heads=kv, head_dim=k_dim, v_head_dim=v, q_heads=q, extra=extra)
    if kind == "sliding" and f.model_type == "mimo_v2_flash" and f.has("sliding_window_size"):
        # vLLM attends within sliding_window_size tokens (per_layer_sliding_window); transformers'
        # MiMoV2FlashConfig within sliding_window_size + 1.
        size = f.int("sliding_window_size")
        f.seen.add("sliding_window")
        return SlidingWindow(window=size, transformers_window=size + 1, **common)
    if kind == "sliding":
        return SlidingWindow(window=_window(f), **common)
    if kind == "chunked":
        return ChunkedLocal(chunk=f.int("attention_chunk_size"), **common)
    return FullAttention(**common)


def _window(f: Fields) -> int:
    if f.has("sliding_window_size") and not f.has("sliding_window"):
        # MiMo-V2: the reference implementation attends to sliding_window_size previous tokens
        # plus the query, so the window is one larger (transformers' MiMoV2FlashConfig).
        return f.int("sliding_window_size") + 1
    return f.int("sliding_window")


# MPT's attn_config: numerics, kernels and the bias; none changes what is cached
_MPT_ATTN_KEYS = frozenset({
    "attn_type", "kv_n_heads", "attn_pdrop", "attn_impl", "qk_ln", "qk_gn", "clip_qkv",
    "softmax_scale", "prefix_lm", "attn_uses_sequence_id", "alibi", "alibi_bias_max", "rope",
    "rope_theta", "rope_impl", "rope_dail_config", "rope_hf_config", "fused_qkv",
    "sliding_window_size", "is_encoder_decoder"})


# Complex by design (C901): one branch per KV-head convention (MPT, GPTBigCode, ChatGLM, Falcon),
# each refusing its own bad values.
def _kv_heads(f: Fields, q_heads: int, attn_cfg: dict | None) -> int:  # noqa: C901
    if attn_cfg is not None:  # MPT
        # (a config saved by transformers writes the sub-config whole, base fields included)
        unknown = sorted(set(attn_cfg) - _MPT_ATTN_KEYS - NEVER_CACHE)
        if unknown:
            raise ValueError("config field 'attn_config' has " + ", ".join(_short(u) for u in
                             unknown) + ", which kvcalc does not understand")
        if attn_cfg.get("sliding_window_size", -1) not in (-1, None):
            raise ValueError("config field 'attn_config.sliding_window_size' sets a window, "
                             "which kvcalc does not read for MPT")
        kind = attn_cfg.get("attn_type", "multihead_attention")
        if kind == "multiquery_attention":
            return 1
        if kind == "grouped_query_attention":
            value = attn_cfg.get("kv_n_heads")
            if isinstance(value, int) and not isinstance(value, bool) and \
                    1 <= value <= cap_of("kv_n_heads"):
                return value
            raise ValueError(f"config field 'attn_config.kv_n_heads' must be a whole number up "
                             f"to {cap_of('kv_n_heads'):,} for "
                             "grouped-query attention")
        if kind != "multihead_attention":
            raise ValueError(
                f"config field 'attn_config.attn_type' = {_short(kind)} is not understood; "
                "expected multihead_attention, multiquery_attention or "
                "grouped_query_attention"
            )
        return q_heads
    if f.model_type == "gpt_bigcode":
        # GPTBigCodeConfig derives num_key_value_heads from multi_query (default true) and
        # GPTBigCodeAttention uses multi_query alone: a file whose two disagree is refused.
        kv = 1 if f.bool("multi_query", True) else q_heads
        given = f.int("num_key_value_heads", required=False)
        if given is not None and given != kv:
            raise ValueError(f"config fields 'multi_query' and 'num_key_value_heads' ({given}) "
                             f"disagree; transformers uses multi_query ({kv} KV heads)")
        return kv
    if f.has("multi_query_group_num"):  # ChatGLM: groups used when multi_query_attention is on
        if f.raw("multi_query_attention", default=False) is True:
            return f.int("multi_query_group_num")
        f.seen.add("multi_query_group_num")
        return q_heads
    if f.has("num_key_value_heads"):
        return f.int("num_key_value_heads")
    if f.raw("new_decoder_architecture", default=False) is True:
        f.seen.add("multi_query")  # FalconAttention ignores it under the new architecture
        return f.int("num_kv_heads", "n_head_kv")
    mq = f.raw("multi_query", default=False)
    if mq is True:
        f.seen.update({"num_kv_heads", "n_head_kv"})  # multi_query rules (FalconAttention)
        return 1
    if mq not in (False, None):
        raise ValueError(f"config field 'multi_query' must be true or false, got {_short(mq)}")
    if f.has("num_kv_heads", "n_head_kv"):
        return f.int("num_kv_heads", "n_head_kv")
    return q_heads  # no KV-head field at all: multi-head attention


# Each layout convention maps its own tokens to a layer kind.
_LAYER_TYPE_NAMES = {
    "full_attention": "full", "attention": "full", "sliding_attention": "sliding",
    "chunked_attention": "chunked", "linear_attention": "state", "mamba": "state",
    "mamba2": "state", "conv": None, "moe": "none", "mlp": "none",
    "indexed_attention": "full", "deepseek_sparse_attention": "full",
}
_NEMOTRON_PATTERN = {"M": "state", "*": "full", "-": "none", "E": "none"}


# Complex by design (C901): every layout convention in one place, keyed by the field that carries it
# (the docstring's rule).
def _layer_kinds(f: Fields, model_type: str, honor_sliding: bool, geo: Geometry) -> list[str]:  # noqa: C901
    """One kind per layer: full, sliding, chunked, state or none (MLA is decided by
    kv_lora_rank). Every convention lives here, keyed by the field that carries it."""
    declared = f.int("num_hidden_layers", "n_layer", "num_layers", "n_layers", required=False,
                     maximum=MAX_LAYERS)
    kinds: list[str] | None = None
    source = None
    if f.has("hybrid_override_pattern"):
        source = "hybrid_override_pattern"
        pattern = f.raw(source)
        if not isinstance(pattern, str) or not pattern:
            raise ValueError("config field 'hybrid_override_pattern' must be a string such as "
                             "'M-M*-'")
        bad = sorted(set(pattern) - set(_NEMOTRON_PATTERN))
        if bad:
            raise ValueError(f"config field 'hybrid_override_pattern' has the letters {bad}, "
                             "which are not understood; expected M (Mamba), * (attention), "
                             "- (MLP) and E (MoE)")
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
        f.seen.update({"use_sliding_window", "max_window_layers", "sliding_window_pattern",
                       "_sliding_window_pattern"})
        f.seen.add("no_rope_layer_interval")
        if f.raw("use_sliding_window") is False and "sliding" in kinds:
            # Qwen2/Qwen3/SmolLM3: use_sliding_window false sets sliding_window to None, so the
            # layers listed as sliding attend to everything (transformers and vLLM alike)
            kinds = ["full" if k == "sliding" else k for k in kinds]
            geo.notes.append("use_sliding_window is false: the layers layer_types lists as "
                             "sliding attend to the whole context")
        if "sliding" not in kinds:
            f.seen.add("sliding_window")  # no layer of this model uses a window
        if f.has("full_attention_interval"):
            # Qwen3.5 writes both; layer_types decides (transformers builds the one from the
            # other), and a disagreement is refused rather than resolved by a guess.
            k = f.int("full_attention_interval")
            implied = ["full" if (i + 1) % k == 0 else "state" for i in range(len(kinds))]
            if implied != kinds:
                raise ValueError("config fields 'layer_types' and 'full_attention_interval' "
                                 "disagree on which layers attend")
    if kinds is not None:
        if declared is not None and declared != len(kinds):
            if source in ("hybrid_override_pattern", "layers_block_type"):
                geo.notes.append(f"num_hidden_layers ({declared}) differs from the {len(kinds)} "
                                 f"entries of '{source}'; the pattern decides, as in transformers")
            else:
                raise ValueError(f"config field '{source}' must list one entry for each of the "
                                 f"{declared} layers, got {len(kinds)}")
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
            raise ValueError(f"config field 'no_rope_layers' must list 0/1 for each of the {n} "
                             "layers")
        else:
            every = f.int("no_rope_layer_interval", default=4)
            kinds = [kinds[i] if (i + 1) % every == 0 else "chunked" for i in range(n)]
    if any(k == "sliding" for k in kinds):
        _window(f)  # validates presence and value
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
            raise ValueError(f"config field '{name}[{i}]' = {_short(t)} is not a layer type kvcalc "
                             f"understands ({known}); open an issue with this model")
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
            raise ValueError(f"config field '{name}[{i}]' = {_short(v)} is not understood; "
                             f"expected one of {sorted(codes)}")
        kinds.append(codes[v])
    return kinds


def _kinds_from_periods(f: Fields, n: int) -> list[str]:
    window_on = f.raw("use_sliding_window", default=True) is not False
    if f.model_type in _LAYOUT_BY_CLASS_RULE and window_on and \
            f.has("sliding_window", "sliding_window_size"):
        raise ValueError(f"config field 'layer_types' is missing: for model_type "
                         f"{f.model_type} the config class places its sliding layers by a rule "
                         "of its own, which kvcalc does not repeat; give a config with "
                         "layer_types (transformers writes it)")
    hybrid = f.has("full_attention_interval") or f.has("attn_layer_period")
    if hybrid and window_on and f.raw("use_sliding_window") is True and f.has("sliding_window"):
        raise ValueError("config field 'use_sliding_window' is true in a hybrid model "
                         "(full_attention_interval / attn_layer_period): which layers use the "
                         "window is not defined; kvcalc does not guess it")
    if f.has("full_attention_interval"):
        k = f.int("full_attention_interval")
        return ["full" if (i + 1) % k == 0 else "state" for i in range(n)]
    if f.has("attn_layer_period"):
        period = f.int("attn_layer_period")
        offset = f.int("attn_layer_offset", minimum=0)
        if offset >= period:
            raise ValueError(f"config field 'attn_layer_offset' ({offset}) must be smaller than "
                             f"'attn_layer_period' ({period})")
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


def _share_kv(f: Fields, layers: list, kinds: list[str]) -> list:
    """Gemma 3n / Gemma 4: the last num_kv_shared_layers layers store nothing and read the cache
    of the last earlier layer of the same type (transformers' ``kv_sharing_modes``)."""
    shared = f.int("num_kv_shared_layers", default=0, minimum=0)
    if not shared:
        return layers
    n = len(layers)
    if shared >= n:
        raise ValueError(f"config field 'num_kv_shared_layers' ({shared}) leaves no layer to "
                         f"store a cache (the model has {n})")
    first = n - shared
    out = list(layers[:first])
    for i in range(first, n):
        src = next((j for j in range(first - 1, -1, -1) if kinds[j] == kinds[i]), None)
        if src is None or not layers[src].stores_tokens:
            raise ValueError(f"config field 'num_kv_shared_layers': layer {i} ({kinds[i]}) has "
                             "no earlier layer of its type to share a cache with")
        out.append(SharedKV(source=src, reads=layers[src]))
    return out


def _nas_layers(f: Fields, geo: Geometry) -> list:
    """Nemotron-NAS (``block_configs``): per layer, attention may be a no-op, replaced by a
    linear layer, or grouped-query attention with its own ``n_heads_in_group``."""
    blocks = f.raw("block_configs")
    if not isinstance(blocks, list) or not blocks:
        raise ValueError("config field 'block_configs' must be a list with one entry per layer")
    layers: list[Layer] = []
    geo.per_layer_heads = True
    for i, block in enumerate(blocks):
        attn = block.get("attention") if isinstance(block, dict) else None
        if not isinstance(attn, dict):
            raise ValueError(f"config field 'block_configs[{i}].attention' must be an object")
        unknown = set(attn) - {
            "no_op",
            "replace_with_linear",
            "n_heads_in_group",
            "sparsify",
            "num_sink_tokens",
            "use_prefill_window_in_sink_attention",
            "unshifted_sink",
            "window_length",
            "llama4",
        }
        if unknown:
            raise ValueError(f"config field 'block_configs[{i}].attention' has "
                             f"{', '.join(sorted(unknown))}, which kvcalc does not understand")
        if attn.get("no_op") is True:
            layers.append(NoCache(why="attention is a no-op"))
            continue
        if attn.get("replace_with_linear") is True:
            layers.append(NoCache(why="attention replaced by a linear layer"))
            continue
        if attn.get("window_length") not in (None,) or attn.get("num_sink_tokens") not in (None,) \
                or attn.get("llama4") not in (None,) or attn.get("sparsify") not in (None,):
            raise ValueError(f"config field 'block_configs[{i}].attention' uses a window, sink "
                             "tokens or sparsity, which kvcalc does not support yet")
        group = attn.get("n_heads_in_group")
        if isinstance(group, bool) or not isinstance(group, int) or group < 1 \
                or geo.q_heads % group:
            raise ValueError(f"config field 'block_configs[{i}].attention.n_heads_in_group' must "
                             f"be a whole number that divides {geo.q_heads}, got {_short(group)}")
        kv = geo.q_heads // group
        layers.append(FullAttention(kv_heads=kv, head_dim=geo.head_dim, v_head_dim=geo.head_dim,
                                    q_heads=geo.q_heads))
    declared = f.int("num_hidden_layers", required=False, maximum=MAX_LAYERS)
    if declared is not None and declared != len(layers):
        raise ValueError(f"config field 'block_configs' has {len(layers)} entries but "
                         f"'num_hidden_layers' is {declared}")
    return layers


def _state_flavor(f: Fields, model_type: str) -> str:
    if f.has("linear_num_value_heads"):
        return "gated_deltanet"
    if f.has("attn_type_list") or model_type == "minimax":
        return "lightning"
    if f.has("mamba_num_heads", "mamba_n_heads"):
        return "mamba2"
    if f.has(*STATE_SIZE):
        return "mamba"
    raise ValueError("the config has non-attention layers but no state sizes: expected "
                     "'linear_num_value_heads' (Gated DeltaNet), 'mamba_num_heads' (Mamba-2) or "
                     "'mamba_d_state' / 'state_size' (Mamba)")


def _state_layer(f: Fields, hidden: int | None, flavor: str) -> RecurrentState:
    """The fixed per-sequence state of one recurrent layer. The convolution keeps kernel - 1
    past inputs, as vLLM sizes it (transformers keeps the whole kernel)."""
    if flavor == "gated_deltanet":
        kh, vh = f.int("linear_num_key_heads"), f.int("linear_num_value_heads")
        kd, vd = f.int("linear_key_head_dim"), f.int("linear_value_head_dim")
        kernel = f.int("linear_conv_kernel_dim")
        conv_dim = 2 * kh * kd + vh * vd  # q, k and v all pass the short convolution
        return RecurrentState(conv_elements=conv_dim * (kernel - 1), ssm_elements=vh * kd * vd,
                              flavor=flavor, conv_kernel=kernel)
    if flavor == "lightning":
        # MiniMax lightning attention: one head_dim x head_dim key-value state per head.
        heads = f.int("num_attention_heads")
        d = f.int("head_dim", default=None, required=False) or f.int("hidden_size") // heads
        return RecurrentState(conv_elements=0, ssm_elements=heads * d * d, flavor=flavor,
                              conv_kernel=1)
    d_state = f.int(*STATE_SIZE)
    kernel = f.int(*CONV_KERNEL, default=4)
    if flavor == "mamba2":
        # Mamba-2: the convolution runs over x, B and C: intermediate + 2 x n_groups x d_state
        # channels; the SSM state is heads x head_dim x d_state.
        heads = f.int("mamba_num_heads", "mamba_n_heads", "num_heads")
        head = f.int("mamba_head_dim", "mamba_d_head", "head_dim")
        groups = f.int("n_groups", "mamba_n_groups", default=1)
        inner = heads * head
        conv = inner + 2 * groups * d_state
        return RecurrentState(conv_elements=conv * (kernel - 1), ssm_elements=inner * d_state,
                              flavor=flavor, conv_kernel=kernel, groups=groups,
                              group_conv_elements=2 * d_state * (kernel - 1))
    if hidden is None:
        raise ValueError("config field 'hidden_size' is missing (the Mamba state needs it)")
    # MambaConfig / FalconMambaConfig / JambaConfig: the width is expand (default 2) x hidden;
    # MambaConfig writes it as intermediate_size too, which must then agree.
    d_inner = f.int(*EXPAND, default=2) * hidden
    if f.model_type in ("mamba", "falcon_mamba") and f.has("intermediate_size"):
        written = f.int("intermediate_size")
        if written != d_inner:
            raise ValueError(f"config field 'intermediate_size' ({written:,}) differs from "
                             f"expand x hidden_size ({d_inner:,}), which transformers uses")
    return RecurrentState(conv_elements=d_inner * (kernel - 1), ssm_elements=d_inner * d_state,
                          flavor=flavor, conv_kernel=kernel)


_TORCH_DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


def checkpoint_format(config: dict) -> tuple[str, str | None]:
    """(weight dtype, expert dtype or None) of a checkpoint, read from its config:
    ``quantization_config.quant_method`` (fp8, mxfp4) first, then ``torch_dtype``/``dtype``;
    BF16 when the config says nothing."""
    cfg = config if isinstance(config, dict) else {}
    q = cfg.get("quantization_config")
    method = q.get("quant_method") if isinstance(q, dict) else None
    if method == "mxfp4":  # gpt-oss: only the MoE experts are MXFP4, the rest stays BF16
        return "bf16", "mxfp4"
    if method == "fp8":
        return "fp8", None
    text = cfg.get("text_config")
    text = text if isinstance(text, dict) else {}
    name = cfg.get("torch_dtype") or cfg.get("dtype") or text.get("torch_dtype")
    return _TORCH_DTYPES.get(name, "bf16") if isinstance(name, str) else "bf16", None
