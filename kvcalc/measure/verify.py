"""An independent check of kvcalc's layers against the cache transformers itself allocates.

    python -m kvcalc verify --config path/to/config.json [--context N]

The model is built on PyTorch's meta device (``with torch.device("meta")``): tensors have shapes
but no storage, so even a 671B model costs no memory and a few seconds. One forward pass of
``context`` tokens with ``use_cache=True`` returns the real cache object; its layers are read one
by one (class, K and V shapes, indexer keys, convolution and recurrent states) and compared with
kvcalc's layers as transformers lays them out (``Layer.transformers_view``).

Where transformers and vLLM (kvcalc's default) legitimately differ, the row names the
difference instead of calling it a mismatch:
- a sliding layer keeps window - 1 tokens between steps (vLLM reserves window - 1 + one batch);
- a chunked layer is kept as a rolling window of chunk - 1 tokens (vLLM keeps the current chunk);
- a recurrent layer keeps the whole convolution kernel (vLLM keeps kernel - 1);
- the MLA latent is cached as "keys" (kv_lora_rank) and "values" (the RoPE key);
- the sparse-attention indexer keys stay in the model dtype (vLLM: fp8 plus scales);
- MLP/MoE-only and KV-sharing layers hold a DummyLayer (nothing stored).

torch and transformers are imported inside ``verify``; ``import kvcalc`` never loads them.
Remote code is never run: a model_type transformers does not ship cannot be checked, and the
report says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..config.hfconfig import spec_from_config
from ..core.units import check_int

__all__ = ["verify", "VerifyReport", "VerifyRow"]

MAX_VERIFY_CONTEXT = 1 << 17


@dataclass(frozen=True, kw_only=True)
class VerifyRow:
    layer: int
    kvcalc: str  # the layer as kvcalc reads it
    transformers: str  # the cache layer class transformers built
    expected: dict  # elements kvcalc predicts in transformers' layout at the context
    found: dict  # elements read off transformers' tensors
    verdict: str  # "agrees", "agrees (named difference)" or "differs"
    why: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class VerifyReport:
    model: str
    context: int
    transformers_version: str
    checkable: bool
    verdict: str
    reason: str = ""
    rows: tuple[VerifyRow, ...] = ()
    differences: tuple[str, ...] = field(default_factory=tuple)  # named, legitimate ones
    unverified: tuple[str, ...] = ()  # fields the reading left out (spec_from_config refuses)

    @property
    def agrees(self) -> bool:
        return self.checkable and all(r.verdict != "differs" for r in self.rows)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["agrees"] = self.agrees
        return d

    def table(self) -> list[str]:
        lines = [f"{'layer':>5}  {'kvcalc':<34} {'transformers':<28} verdict"]
        for r in self.rows:
            lines.append(
                f"{r.layer:>5}  {r.kvcalc[:34]:<34} {r.transformers[:28]:<28} "
                f"{r.verdict}{': ' + r.why if r.why else ''}"
            )
        return lines


def _expected(layer, n: int) -> dict:
    """Elements one sequence holds in this layer at context n, in transformers' layout."""
    view = layer.transformers_view()
    kept = view.tokens_kept(n)
    out = {
        "kv": view.elements_per_token * kept if view.stores_tokens else 0,
        "indexer": view.extra.elements * kept if view.extra else 0,
        "state": view.state_elements,
    }
    return out


def _numel(t) -> int:
    if t is None:
        return 0
    if isinstance(t, dict):
        return sum(_numel(v) for v in t.values())
    if isinstance(t, (list, tuple)):
        return sum(_numel(v) for v in t)
    return int(t.numel()) if hasattr(t, "numel") else 0


def _found(cache, i: int) -> tuple[str, dict]:
    layers = getattr(cache, "layers", [])
    layer = layers[i] if i < len(layers) else None
    name = type(layer).__name__ if layer is not None else "(none)"
    kv = _numel(getattr(layer, "keys", None)) + _numel(getattr(layer, "values", None))
    state = _numel(getattr(layer, "conv_states", None)) + _numel(
        getattr(layer, "recurrent_states", None)
    )
    linear = getattr(cache, "linear_cache", None)  # MiniMax keeps its states beside the layers
    if linear is not None and i < len(linear) and _numel(linear[i]):
        state += _numel(linear[i])
        name = "linear_cache"
    rnn = getattr(cache, "rnn_state", None)  # xLSTMCache: {layer: (C, n, m)}, no layers at all
    if isinstance(rnn, dict) and _numel(rnn.get(i)):
        state += _numel(rnn[i])
        name = f"{type(cache).__name__}.rnn_state"
    return name, {"kv": kv, "indexer": _numel(getattr(layer, "indexer_keys", None)), "state": state}


_DIFFERENCES = {
    "sliding": "sliding layers: transformers keeps window - 1 tokens between steps; vLLM reserves "
    "blocks for window - 1 + one batch of new tokens",
    "chunked": "chunked layers: transformers keeps a rolling window of chunk - 1 tokens; vLLM "
    "keeps the current chunk",
    "state": "recurrent layers: transformers keeps the whole convolution kernel; vLLM keeps "
    "kernel - 1 inputs",
    "mla": "MLA: transformers caches the latent as 'keys' and the RoPE key as 'values'",
    "indexer": "indexer keys: transformers keeps them in the model dtype; vLLM stores fp8 plus "
    "fp32 scales",
    "none": "MLP/MoE-only and KV-sharing layers: transformers holds a placeholder that stores "
    "nothing",
}


def _transformers_config(config: dict):
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    model_type = config.get("model_type")
    if not isinstance(model_type, str) or model_type not in CONFIG_MAPPING:
        raise LookupError(
            f"transformers has no built-in model_type {model_type!r}; it would "
            "need the model's own remote code, which kvcalc never runs"
        )
    # The weights' format (MXFP4, FP8) does not change the cache; dropping it keeps transformers
    # from building quantized kernels that cannot run on meta tensors.
    rest = {k: v for k, v in config.items() if k not in ("model_type", "quantization_config")}
    if isinstance(rest.get("text_config"), dict):
        rest["text_config"] = {
            k: v for k, v in rest["text_config"].items() if k != "quantization_config"
        }
    return AutoConfig.for_model(model_type, **rest)


def verify(
    config: dict,
    *,
    context: int | None = None,
    name: str | None = None,
    on_model: Callable[[Any], None] | None = None,
) -> VerifyReport:
    """Build ``config`` on the meta device, run one forward of ``context`` tokens and compare the
    cache transformers allocates with kvcalc's layers, layer by layer. ``on_model`` is called
    with the model once it is built, before the forward pass (the zoo counts its parameters).

    In order: kvcalc's reading, transformers' config, the model built (``_build``), one forward
    pass (``_forward``), then a row per layer (``_row``) and the verdict (``_report``); each way
    transformers can fail is a report that says why the config cannot be checked."""
    # The generic reading of a config kvcalc refuses is what a user asks this check about:
    # compare it too, and say that it is unverified.
    spec = spec_from_config(config, name=name, unverified=True)
    if context is None:
        bounds = [b for b in (lay.token_bound() for lay in spec.layers) if b is not None]
        context = min(MAX_VERIFY_CONTEXT, max(bounds, default=31) + 33)
    n = check_int("context", context, 2, MAX_VERIFY_CONTEXT)
    from .runtime import import_torch

    torch = import_torch("verify")
    import transformers

    version = transformers.__version__

    def refused(reason: str) -> VerifyReport:
        return VerifyReport(
            model=spec.name,
            context=n,
            transformers_version=version,
            checkable=False,
            verdict=f"cannot be checked: {reason}",
            reason=reason,
        )

    try:
        cfg = _transformers_config(config)
    except LookupError as exc:
        return refused(str(exc))
    except Exception as exc:  # transformers rejects the config itself
        return refused(
            f"transformers {version} refuses this config ({type(exc).__name__}: {str(exc)[:200]})"
        )
    errors: list[str] = []
    model = _build(torch, cfg, errors)
    if model is None:
        return refused(
            f"transformers {version} cannot build a causal LM from it (" + "; ".join(errors) + ")"
        )
    if on_model is not None:
        on_model(model)
    out = _forward(torch, model, n, errors)
    if out is None:
        return refused("a forward pass on the meta device fails (" + "; ".join(errors[-2:]) + ")")
    cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
    if cache is None:
        return refused("the forward pass returned no cache")
    named: list[str] = []
    rows = [_row(i, layer, n, cache, named) for i, layer in enumerate(spec.layers)]
    return _report(spec, n, version, rows, named, cache)


def _build(torch, cfg, errors: list[str]):
    """The model of ``cfg`` on the meta device, or None (each failure appended to ``errors``).

    A causal LM first; else the base model (vision-language classes have no causal-LM entry).
    Eager attention builds the mask as a tensor instead of reading values to skip it; BF16
    because some MoE kernels (gpt-oss) accept nothing else. Shapes do not depend on it."""
    from transformers import AutoModel, AutoModelForCausalLM

    text = getattr(cfg, "get_text_config", lambda: cfg)()
    for auto, candidate in (
        (AutoModelForCausalLM, cfg),
        (AutoModelForCausalLM, text),
        (AutoModel, cfg),
    ):
        try:
            with torch.device("meta"):
                return auto.from_config(
                    candidate, attn_implementation="eager", dtype=torch.bfloat16
                )
        except Exception as exc:  # no such class for this config: try the next
            errors.append(f"{type(exc).__name__}: {str(exc)[:160]}")
    return None


def _forward(torch, model, n: int, errors: list[str]):
    """One forward pass of ``n`` tokens with the cache on, or None (each failure appended to
    ``errors``). Explicit masks and positions keep transformers' mask code from reading values
    (.item()) off meta tensors; without them some models (Gemma 4) cannot run on the meta
    device, so they are tried first."""
    ids = torch.zeros((1, n), dtype=torch.long, device="meta")
    attempts: tuple[dict[str, Any], ...] = (
        {
            "attention_mask": torch.ones((1, n), dtype=torch.long, device="meta"),
            "position_ids": torch.arange(n, device="meta")[None],
        },
        {},
    )
    for extra in attempts:
        try:
            with torch.no_grad():
                return model(input_ids=ids, use_cache=True, **extra)
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {str(exc)[:160]}")
    return None


def _row(i: int, layer, n: int, cache, named: list[str]) -> VerifyRow:
    """Layer ``i``'s row: kvcalc's elements against transformers' at context ``n``; an agreement
    lists the named differences that apply (each added once to ``named``)."""
    expected = _expected(layer, n)
    cls, found = _found(cache, i)
    why = []
    if expected == found:
        verdict = "agrees"
        for key, applies in (
            ("sliding", layer.kind == "sliding"),
            ("chunked", layer.kind == "chunked"),
            (
                "state",
                bool(layer.state_elements)
                and layer.state_elements != layer.transformers_view().state_elements,
            ),
            ("mla", layer.kind == "mla"),
            ("indexer", bool(expected["indexer"])),
            ("none", layer.kind in ("none", "shared")),
        ):
            if applies:
                why.append(key)
                if _DIFFERENCES[key] not in named:
                    named.append(_DIFFERENCES[key])
        own = layer.transformers_note()
        if own:
            why.append(getattr(layer, "transformers_note_key", layer.kind))
            if own not in named:
                named.append(own)
        if why:
            verdict = "agrees (named difference)"
    else:
        verdict = "differs"
        why = [
            f"{k}: kvcalc {expected[k]:,} elements, transformers {found[k]:,}"
            for k in expected
            if expected[k] != found[k]
        ]
    return VerifyRow(
        layer=i,
        kvcalc=layer.label,
        transformers=cls,
        expected=expected,
        found=found,
        verdict=verdict,
        why=", ".join(why),
    )


def _report(
    spec, n: int, version: str, rows: list[VerifyRow], named: list[str], cache
) -> VerifyReport:
    """The checked report: the first differing layer, or agreement with the cache's extra
    (multi-token-prediction) layers named; a reading that left fields out says so."""
    extra_layers = len(getattr(cache, "layers", [])) - spec.num_layers
    differs = [r for r in rows if r.verdict == "differs"]
    if differs:
        verdict = (
            f"differs on {len(differs)} of {len(rows)} layers (first: layer "
            f"{differs[0].layer}, {differs[0].why})"
        )
    else:
        verdict = f"checked against transformers {version}: layer geometry agrees"
        if extra_layers > 0:
            named.append(
                f"transformers' cache has {extra_layers} more layer(s) than the config "
                "declares (multi-token-prediction layers), not counted here"
            )
    if spec.unverified:
        verdict = (
            f"the standard-decoder reading (without the fields kvcalc does not "
            f"understand: {', '.join(spec.unverified[:8])}"
            f"{' ...' if len(spec.unverified) > 8 else ''}) {verdict[0].lower()}"
            f"{verdict[1:]}"
        )
    return VerifyReport(
        model=spec.name,
        context=n,
        transformers_version=version,
        checkable=True,
        verdict=verdict,
        rows=tuple(rows),
        differences=tuple(named),
        unverified=spec.unverified,
    )
