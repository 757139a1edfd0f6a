"""Build a ModelSpec from the fields of a Hugging Face config.json: the model_type's family
record (kvcalc.config.families.table) reads the layers, the parameters are counted apart, and a
field no reader understands is refused by name (UnknownFields). The rules: docs/families.md.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..core.model import ModelSpec, interned
from ..core.text import SHORT as _SHORT
from ..core.text import short as _short
from .families.decoder import read_layers
from .families.table import FAMILIES, TEXT_FAMILIES, WRAPPERS
from .families.understood import understood
from .fields import Fields, Geometry
from .files import read_regular_file
from .limits import MAX_CONTEXT, MAX_LAYERS, UPFRONT, over_cap
from .mtp import mtp_layers, mtp_parameters
from .params import count_parameters

MAX_CONFIG_BYTES = 1_000_000  # a real config.json is a few KiB; refuse anything far larger


def load_config_file(path: str | Path) -> dict:
    """Read a config.json file into a dict, with clear errors for the usual mistakes (only a
    regular file, at most MAX_CONFIG_BYTES + 1 bytes of it: kvcalc.config.files)."""
    data = read_regular_file(
        path,
        limit=MAX_CONFIG_BYTES,
        what="config file",
        give="give the path of a config.json",
        too_large=lambda shown, size: f"config file {shown} is {size:,} bytes; a config.json is "
        f"at most {MAX_CONFIG_BYTES:,} bytes",
    )
    shown = _short(str(path))
    if len(data) > MAX_CONFIG_BYTES:
        raise ValueError(
            f"config file {shown} holds more than {MAX_CONFIG_BYTES:,} bytes; a "
            f"config.json is at most {MAX_CONFIG_BYTES:,} bytes"
        )
    return parse_config_text(data.decode("utf-8", errors="replace"), source=f"config file {shown}")


def parse_config_text(text: str, source: str = "config") -> dict:
    if len(source) > _SHORT:
        source = source[:_SHORT] + "..."
    if (
        len(text) > MAX_CONFIG_BYTES
        or len(text.encode("utf-8", errors="replace")) > MAX_CONFIG_BYTES
    ):
        raise ValueError(f"{source} is larger than {MAX_CONFIG_BYTES:,} bytes; paste a config.json")
    try:
        # Infinity and NaN are kept: real configs hold them in fields kvcalc does not read
        # (NVIDIA's time_step_limit); a field that is read must still be a finite number.
        cfg = json.loads(text)
    except RecursionError:
        raise ValueError(f"{source} is nested too deeply to be a config.json") from None
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{source} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from None
    except ValueError:  # an integer past Python's 4,300-digit limit
        raise ValueError(
            f"{source} holds a number of more than 4,300 digits; no config field needs one"
        ) from None
    if not isinstance(cfg, dict):
        raise ValueError(f"{source} must be a JSON object ({{...}}), got {type(cfg).__name__}")
    return cfg


def _check_sizes(cfg: dict) -> None:
    """Before any per-layer work (kvcalc.config.limits): every size field under its cap, and no
    per-layer list, pattern string or table over MAX_LAYERS layers, whichever field carries it."""
    for name, value in cfg.items():
        if name in UPFRONT:
            refused = over_cap(name, value)
            if refused:
                raise ValueError(refused)
        size = None
        if isinstance(value, list) or isinstance(value, str) and name in _PATTERN_STRINGS:
            size = len(value)
        elif isinstance(value, dict) and name in ("per_layer_config", "linear_attn_config"):
            size = max([len(value)] + [len(v) for v in value.values() if isinstance(v, list)])
        if size is not None and size > MAX_LAYERS:
            raise ValueError(
                f"config field {_short(name)} describes {size:,} layers; kvcalc "
                f"sizes models of at most {MAX_LAYERS:,} layers (the deepest "
                "published one has 162)"
            )


_PATTERN_STRINGS = ("hybrid_override_pattern", "mtp_hybrid_override_pattern")


class UnknownFields(ValueError):
    """A config holds fields no reader of its family understands: kvcalc refuses to guess.

    ``fields`` are the field names, ``model_type`` the family (``""`` when the config names
    none) and ``known_family`` whether kvcalc has a reader for it."""

    def __init__(self, model_type: str, fields: list[str], known_family: bool, why: str = ""):
        self.model_type, self.fields, self.known_family = model_type, fields, known_family
        shown = ", ".join(_short(f) for f in fields[:12]) + (" ..." if len(fields) > 12 else "")
        who = (
            f"kvcalc's reader for model_type {_short(model_type)}"
            if known_family
            else f"kvcalc (model_type {_short(model_type or '(none)')} has no reader of its own)"
        )
        super().__init__(
            f"config fields not understood by {who}: {shown}. kvcalc does not guess what a "
            "field does to the cache: check the config against transformers (verify), or ask "
            "for the generic decoder estimate, labelled unverified (--unverified)"
            + (f"; read as a standard decoder it also fails: {why}" if why else "")
        )


def spec_from_config(
    config: dict,
    *,
    name: str | None = None,
    honor_sliding_window: bool = True,
    unverified: bool = False,
) -> ModelSpec:
    """A config.json dict as a ModelSpec (the module docstring says how). A field no reader
    understands raises UnknownFields (a ValueError), unless ``unverified=True``: then the generic
    reading, its spec's ``unverified`` listing those fields. ``honor_sliding_window=False`` treats
    every sliding layer as full attention, as runtimes do that ignore a config's window (several
    do for Mistral-7B-v0.1 and Phi-3)."""
    if not isinstance(config, dict):
        raise ValueError(f"a config must be a JSON object, got {type(config).__name__}")
    notes: list[str] = []
    cfg, model_type = _language_model(config, notes)
    _check_sizes(cfg)
    fam = FAMILIES.get(model_type)
    f = Fields(cfg, dict(fam.defaults) if fam is not None else {})
    f.top = config
    f.model_type = model_type
    f.family = fam
    known = fam is not None or model_type == ""
    f.seen.update(understood(FAMILIES.get(model_type or "llama"), cfg))
    layers, geo, max_ctx = _read_cache(f, fam, honor_sliding_window, known)
    notes += geo.notes
    assumptions = list(geo.assumptions)
    assumptions += _engine_conventions(f, layers)
    for name_, value in f.defaults_used():
        assumptions.append(
            f"'{name_}' is not in the config: took {value!r}, the default of "
            f"transformers' {model_type} config class"
        )
    drafts, mtp_field, mtp_error = mtp_layers(f, layers)
    counted = count_parameters(f, fam, layers, geo)
    mtp_params = mtp_parameters(f, fam, layers, drafts, geo, counted)
    if counted.error:
        notes.append(
            f"parameters not counted ({counted.error}): weight figures need a weight "
            "size given by hand; the cache figures are complete"
        )
    unread = sorted(f.unread())
    if unread and not unverified:
        raise UnknownFields(model_type, unread, known)
    if unread:
        assumptions.insert(
            0,
            "UNVERIFIED: read as a standard decoder although these fields "
            "are not understood: "
            + ", ".join(_short(u) for u in unread[:40])
            + (" ..." if len(unread) > 40 else ""),
        )
    if not known:
        assumptions.append(
            f"model_type {_short(model_type)} has no reader of its own in "
            "kvcalc: its layers were read from the standard decoder fields"
        )
    elif model_type == "":
        assumptions.append("the config names no model_type: read as a standard decoder")

    label = (
        name or cfg.get("_name_or_path") or config.get("_name_or_path") or model_type or "custom"
    )
    return ModelSpec(
        name=str(label)[:_SHORT],
        layers=interned(layers),
        params=counted.params,
        moe=counted.moe,
        hidden_size=geo.hidden,
        vocab_size=counted.vocab,
        max_context=max_ctx,
        notes=tuple(notes),
        assumptions=tuple(assumptions),
        params_error=counted.error,
        unverified=tuple(unread),
        family_reader=fam is not None,
        mtp_layers=interned(drafts),
        mtp_field=mtp_field,
        mtp_error=mtp_error,
        mtp_params=mtp_params,
    )


def _language_model(config: dict, notes: list[str]) -> tuple[dict, str]:
    """The language model's fields (a multimodal config's text_config, said in ``notes``) and
    the model_type whose reader reads them."""
    top_type = config.get("model_type")
    cfg = config
    if "speculators_model_type" in config:
        return _speculator_layer(config, notes)
    if isinstance(config.get("text_config"), dict):
        cfg = dict(config["text_config"])
        notes.append("language model read from text_config; vision parameters are not counted")
    elif "text_config" in config and config["text_config"] is not None:
        raise ValueError("config field 'text_config' must be an object")
    if cfg is config and isinstance(top_type, str) and top_type in _TEXT_CONFIG_ONLY:
        raise ValueError(_TEXT_CONFIG_ONLY[top_type])
    model_type = cfg.get("model_type") or top_type or ""
    if not isinstance(model_type, str):
        raise ValueError(f"config field 'model_type' must be a string, got {_short(model_type)}")
    if isinstance(top_type, str) and top_type in WRAPPERS and cfg is config:
        model_type = WRAPPERS[top_type]
    return cfg, TEXT_FAMILIES.get(model_type, model_type)


# The speculators format (vLLM's speculators library; vllm/transformers_utils/configs/speculators:
# SpeculatorsConfig builds the draft's config from transformer_layer_config, update_eagle3 adds
# draft_vocab_size, target_hidden_size, norm_before_residual and the aux layer ids, which size the
# fc and the vocabulary): for EAGLE and EAGLE-3 the drafter's layers are transformer_layer_config's.
_SPECULATOR_LAYERS = ("eagle", "eagle3")


def _speculator_layer(config: dict, notes: list[str]) -> tuple[dict, str]:
    kind = config.get("speculators_model_type")
    layer = config.get("transformer_layer_config")
    if kind not in _SPECULATOR_LAYERS:
        raise ValueError(
            f"config field 'speculators_model_type' is {_short(kind)}: kvcalc reads the "
            "drafter's layers of 'eagle' and 'eagle3' speculators only"
        )
    if not isinstance(layer, dict):
        raise ValueError(
            "config field 'transformer_layer_config' must be an object (the speculator's "
            "decoder layers)"
        )
    model_type = layer.get("model_type") or "llama"
    if not isinstance(model_type, str):
        raise ValueError(f"config field 'model_type' must be a string, got {_short(model_type)}")
    notes.append(
        f"{_short(kind)} speculator: its draft layers read from transformer_layer_config "
        "(the fusion layer and vocabulary fields size weights only)"
    )
    return dict(layer), TEXT_FAMILIES.get(model_type, model_type)


def _read_cache(
    f: Fields, fam, honor_sliding_window: bool, known: bool
) -> tuple[list, Geometry, int]:
    """The layers, the base geometry and the model's context limit. A family kvcalc has no
    reader for that fails on a field it lacks is refused by the fields it has instead."""
    try:
        layers, geo = read_layers(f, fam, honor_sliding_window)
        max_ctx = f.int(
            "max_position_embeddings",
            "n_positions",
            "max_seq_len",
            "seq_length",
            "context_length",
            "model_max_length",
            default=2048,
            maximum=MAX_CONTEXT,
        )
    except UnknownFields:
        raise
    except ValueError as exc:
        rest = sorted(set(f.unread()) - _STANDARD_FIELDS)  # the standard ones are never named
        if not known and rest:
            raise UnknownFields(f.model_type, rest, False, why=str(exc)) from None
        raise
    return layers, geo, max_ctx


# The standard decoder's own fields: never "not understood", even where a failed reading did
# not reach them.
_STANDARD_FIELDS = frozenset(
    """
    num_hidden_layers n_layer num_layers n_layers num_attention_heads n_head num_heads n_heads
    num_key_value_heads head_dim hidden_size n_embd d_model max_position_embeddings n_positions
    sliding_window layer_types
    """.split()
)

# Wrappers whose transformers config class reads the language model from text_config only: a
# file of that model_type without text_config is not read as its text model, because the engines
# would not read it so. Step3p7Config (transformers 5.24) builds Step3p7TextConfig's defaults
# (45 full-attention layers, no window) and keeps top-level layer_types and sliding_window as
# unused attributes (checked: Step3p7Config(**file).text_config.layer_types is all
# full_attention); vLLM's step3p7.py builds the language model from config.text_config.
_TEXT_CONFIG_ONLY = {
    "step3p7": (
        "config field 'text_config' is missing: model_type 'step3p7' (transformers' "
        "Step3p7Config, vLLM's step3p7.py) reads its language model from text_config only, and "
        "without it takes Step3p7TextConfig's defaults (45 full-attention layers, no sliding "
        "window), ignoring this file's top-level 'layer_types' and 'sliding_window'; give the "
        "published config.json, whose text_config (model_type step3p5) holds them"
    ),
}


def _engine_conventions(f: Fields, layers: list) -> list[str]:
    """The engine conventions a figure for these layers rests on, said once."""
    out = []
    if any(lay.state_elements for lay in layers):
        fixed = sorted({lay.ssm_dtype for lay in layers if getattr(lay, "ssm_dtype", None)})
        out.append(
            "recurrent state: the convolution keeps conv_kernel - 1 past inputs, as vLLM "
            "allocates it (transformers keeps conv_kernel), in the state format chosen (BF16 "
            "unless set); "
            + (
                f"the recurrent (SSM) state in {'/'.join(x.upper() for x in fixed)}, the format "
                "the model keeps it in (for vLLM: its --mamba-ssm-cache-dtype 'auto')"
                if fixed
                else "the recurrent (SSM) state in the same format"
            )
        )
    if any(lay.token_bound() is not None for lay in layers):
        out.append(
            "window or chunk layers keep at most window (chunk) tokens here; vLLM reserves "
            "blocks for window - 1 + one batch of new tokens, and transformers keeps "
            "window - 1 (chunk - 1) between steps"
        )
    return out


_TORCH_DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


# A checkpoint whose weights are quantised in a format kvcalc does not turn into bytes (AWQ,
# GPTQ, bitsandbytes, NVFP4, integer compressed-tensors, MLX): its "auto" weights are refused
# and the user gives a format or a size (weights_in says so).
UNMODELLED = "unmodelled"


def checkpoint_format(config: dict) -> tuple[str, str | None]:
    """(weight dtype, expert dtype or None) of a checkpoint, read from its config:
    ``quantization_config.quant_method`` (fp8, mxfp4; compressed-tensors with 8-bit float
    weights is FP8) first, then ``torch_dtype``/``dtype``; BF16 when the config says nothing.
    UNMODELLED for any other quantisation (quantization_scheme says which)."""
    cfg = config if isinstance(config, dict) else {}
    q = cfg.get("quantization_config")
    method = q.get("quant_method") if isinstance(q, dict) else None
    if method == "mxfp4":  # gpt-oss: only the MoE experts are MXFP4, the rest stays BF16
        return "bf16", "mxfp4"
    if method == "fp8" or (
        method == "compressed-tensors" and isinstance(q, dict) and _float8_weights(q)
    ):
        return "fp8", None
    if quantization_scheme(cfg):
        return UNMODELLED, None
    text = cfg.get("text_config")
    text = text if isinstance(text, dict) else {}
    name = cfg.get("torch_dtype") or cfg.get("dtype") or text.get("torch_dtype")
    return _TORCH_DTYPES.get(name, "bf16") if isinstance(name, str) else "bf16", None


def quantization_scheme(config: dict) -> str | None:
    """The checkpoint's weight quantisation in words when kvcalc does not size it (its bytes
    depend on which tensors were quantised, at which width, with which scales), else None."""
    cfg: dict = config if isinstance(config, dict) else {}
    inner = cfg.get("text_config")
    text: dict = inner if isinstance(inner, dict) else {}
    for where in (cfg, text):
        q = where.get("quantization_config")
        if isinstance(q, dict):
            method = q.get("quant_method")
            if method in ("fp8", "mxfp4") or (
                method == "compressed-tensors" and _float8_weights(q)
            ):
                return None
            if method is not None or "bits" in q or "group_size" in q:
                bits = q.get("bits", q.get("w_bit"))
                groups = q.get("config_groups")
                if bits is None and isinstance(groups, dict):
                    first = next(iter(groups.values()), None)
                    w = first.get("weights") if isinstance(first, dict) else None
                    bits = w.get("num_bits") if isinstance(w, dict) else None
                what = str(method)[:40] if method is not None else "MLX"
                return what + (f", {_short(bits)}-bit" if bits is not None else "")
        m = where.get("quantization")
        if isinstance(m, dict) and ("bits" in m or "group_size" in m):
            return f"MLX, {_short(m.get('bits'))}-bit"
    return None


def _float8_weights(q: dict) -> bool:
    """compressed-tensors whose every weight group is 8-bit float (FP8 W8A8 / W8A16)."""
    groups = q.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        return False
    weights = [g.get("weights") if isinstance(g, dict) else None for g in groups.values()]
    return all(
        isinstance(w, dict) and w.get("num_bits") == 8 and w.get("type") == "float" for w in weights
    )
