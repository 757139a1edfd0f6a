"""The registry in models.yaml: models (HF config fields + published counts) and GPUs.

Loading validates every entry; a malformed one fails with a message that names the entry and the
field. YAML aliases are refused (an alias "bomb" can expand a small file into gigabytes).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

import yaml

from ..cache.weight_bytes import Weights, weights_in
from ..core.dtypes import WEIGHT_DTYPES, get_dtype
from ..core.gpu import GPU
from ..core.model import ModelSpec
from .hfconfig import spec_from_config

DEFAULT_PATH = Path(__file__).resolve().parent / "models.yaml"
MAX_REGISTRY_BYTES = 5_000_000


@dataclass(frozen=True, kw_only=True)
class RegistryModel:
    key: str
    name: str
    hf_id: str
    config: dict
    spec: ModelSpec
    params_total: int  # published
    params_active: int | None  # published (MoE)
    weight_dtype: str
    expert_weight_dtype: str | None
    sources: dict

    def weights(self, dtype: str | None = None, *, half: str = "bf16") -> Weights:
        """Weight bytes in ``dtype``; None or "auto" means the published checkpoint as vLLM
        loads it (with its expert format, e.g. gpt-oss's MXFP4 experts; an FP32 checkpoint in
        ``half``, the GPU's 16-bit format)."""
        return weights_in(self.spec, dtype, self.weight_dtype, self.expert_weight_dtype, half=half)


@dataclass(frozen=True, kw_only=True)
class Link:
    key: str
    name: str
    gbs: float
    source: str


@dataclass(frozen=True, kw_only=True)
class Registry:
    models: dict[str, RegistryModel]
    gpus: dict[str, GPU]
    links: dict[str, Link]
    path: str
    twins: tuple[str, ...] = ()  # models the live page rebuilds as architecture twins
    hub_fetch: tuple[str, ...] = ()  # Hub ids whose config.json the hosted app may fetch
    hub_run: tuple[str, ...] = ()  # Hub models the live page may run

    def model(self, key: str) -> RegistryModel:
        return _lookup(self.models, key, "model")

    def gpu(self, key: str) -> GPU:
        return _lookup(self.gpus, key, "GPU")

    def link(self, key: str) -> Link:
        return _lookup(self.links, key, "link")


def _lookup(table: dict, key, what: str):
    if isinstance(key, str) and key in table:
        return table[key]
    near = difflib.get_close_matches(str(key), list(table), n=3)
    hint = f" Did you mean {', '.join(near)}?" if near else ""
    raise ValueError(f"unknown {what} {key!r}.{hint} Known: {', '.join(table)}")


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases (*name), so no entry can expand into a huge tree."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise ValueError(
                f"line {mark.line + 1}: YAML aliases (*name) are not allowed in the "
                "registry; write the values out"
            )
        return super().compose_node(parent, index)


def parse_yaml(text: str, source: str = "registry") -> dict:
    if len(text) > MAX_REGISTRY_BYTES:
        raise ValueError(f"{source} is larger than {MAX_REGISTRY_BYTES:,} bytes")
    try:
        data = yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except ValueError as exc:
        raise ValueError(f"{source}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"{source} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{source} must be a mapping with 'models' and 'gpus'")
    return data


def _num(entry: dict, where: str, name: str, *, required=True, integer=False, positive=True):
    value = entry.get(name)
    if value is None:
        if required:
            raise ValueError(f"{where}: field '{name}' is missing")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{where}: field '{name}' must be a number, got {value!r}")
    if integer and value != int(value):
        raise ValueError(f"{where}: field '{name}' must be a whole number, got {value!r}")
    if positive and value <= 0:
        raise ValueError(f"{where}: field '{name}' must be positive, got {value!r}")
    return int(value) if integer else value


def _str(entry: dict, where: str, name: str) -> str:
    value = entry.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where}: field '{name}' must be a non-empty string, got {value!r}")
    return value


def _sources(entry: dict, where: str, needed: tuple[str, ...]) -> dict:
    src = entry.get("sources")
    if not isinstance(src, dict):
        raise ValueError(f"{where}: field 'sources' must map each number to a link")
    for k in needed:
        if not isinstance(src.get(k), str) or not src[k].startswith("http"):
            raise ValueError(f"{where}: field 'sources.{k}' must be a link (http...)")
    return dict(src)


def _model(key: str, entry: dict, where: str) -> RegistryModel:
    config = entry.get("config")
    if not isinstance(config, dict):
        raise ValueError(f"{where}: field 'config' must be a mapping of config.json fields")
    for name, dflt in (("weight_dtype", "bf16"), ("expert_weight_dtype", None)):
        value = entry.get(name, dflt)
        if value is not None:
            try:
                get_dtype(value, WEIGHT_DTYPES)
            except ValueError as exc:
                raise ValueError(f"{where}: field '{name}': {exc}") from None
    try:
        spec = spec_from_config(config, name=entry.get("name") or key)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    return RegistryModel(
        key=key,
        name=_str(entry, where, "name"),
        hf_id=_str(entry, where, "hf_id"),
        config=config,
        spec=spec,
        params_total=_num(entry, where, "params_total", integer=True),
        params_active=_num(entry, where, "params_active", required=False, integer=True),
        weight_dtype=get_dtype(entry.get("weight_dtype", "bf16"), WEIGHT_DTYPES).name,
        expert_weight_dtype=entry.get("expert_weight_dtype"),
        sources=_sources(entry, where, ("config", "params")),
    )


def _gpu(key: str, entry: dict, where: str) -> GPU:
    gpu = GPU(
        key=key,
        name=_str(entry, where, "name"),
        memory_gb=_num(entry, where, "memory_gb"),
        memory_mib_driver=_num(entry, where, "memory_mib_driver", required=False, integer=True),
        bandwidth_gbs=_num(entry, where, "bandwidth_gbs"),
        bf16_tflops=_num(entry, where, "bf16_tflops", required=False),
        fp8_tflops=_num(entry, where, "fp8_tflops", required=False),
        fp16_tflops=_num(entry, where, "fp16_tflops", required=False),
        fp32_tflops=_num(entry, where, "fp32_tflops", required=False),
        fp4_tflops=_num(entry, where, "fp4_tflops", required=False),
        power_w=_num(entry, where, "power_w", required=False),
        fp8_attention=_flag(entry, where, "fp8_attention"),
        sources=_sources(entry, where, ("specs",)),
        tp_link=None if entry.get("tp_link") is None else _str(entry, where, "tp_link"),
    )
    if gpu.bf16_tflops is None and gpu.fp16_tflops is None:
        raise ValueError(f"{where}: give 'bf16_tflops' or 'fp16_tflops'")
    if gpu.fp8_attention and not str(gpu.sources.get("fp8_attention", "")).startswith("http"):
        raise ValueError(f"{where}: field 'sources.fp8_attention' must be a link (http...)")
    return gpu


def _flag(entry: dict, where: str, name: str) -> bool:
    value = entry.get(name, False)
    if not isinstance(value, bool):
        raise ValueError(f"{where}: field '{name}' must be true or false, got {value!r}")
    return value


def _link(key: str, entry: dict, where: str) -> Link:
    return Link(
        key=key,
        name=_str(entry, where, "name"),
        gbs=_num(entry, where, "gbs"),
        source=_str(entry, where, "source"),
    )


_Entry = TypeVar("_Entry")


def _section(
    data: dict, name: str, build: Callable[[str, Any, str], _Entry], fname: str, *, required=True
) -> dict[str, _Entry]:
    """Section ``name`` of the registry file, each entry (a mapping of fields) built and checked
    by ``build``, with where it is for messages ("models.yaml: gpu 'h100'")."""
    section = data.get(name)
    if section is None and not required:
        section = {}
    if not isinstance(section, dict):
        raise ValueError(f"{fname}: section '{name}' must be a mapping of entries")
    built = {}
    for key, entry in section.items():
        where = f"models.yaml: {name[:-1]} '{key}'"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: entry must be a mapping of fields")
        built[str(key)] = build(str(key), entry, where)
    return built


def load_registry(path: str | Path | None = None, text: str | None = None) -> Registry:
    """Load and validate a registry file (default: the project's models.yaml)."""
    p = Path(path) if path else DEFAULT_PATH
    if text is None:
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read registry '{p}': {exc.strerror or exc}") from None
    data = parse_yaml(text, p.name)
    models = _section(data, "models", _model, p.name)
    gpus = _section(data, "gpus", _gpu, p.name)
    links = _section(data, "links", _link, p.name, required=False)
    for key, g in list(gpus.items()):
        if g.tp_link is None:
            continue
        if g.tp_link not in links:
            raise ValueError(
                f"{p.name}: gpu '{key}': field 'tp_link' names '{g.tp_link}', which "
                f"is not a key of links: ({', '.join(links) or 'none'})"
            )
        gpus[key] = replace(g, tp_link_gbs=links[g.tp_link].gbs)
    twins = _names(data.get("twins", []), f"{p.name}: twins")
    unknown = [t for t in twins if t not in models]
    if unknown:
        raise ValueError(
            f"{p.name}: twins names models that are not in the registry: {', '.join(unknown)}"
        )
    hub = data.get("hub", {})
    if not isinstance(hub, dict):
        raise ValueError(f"{p.name}: section 'hub' must be a mapping with 'fetch' and 'run'")
    return Registry(
        models=models,
        gpus=gpus,
        links=links,
        path=str(p),
        twins=twins,
        hub_fetch=_names(hub.get("fetch", []), f"{p.name}: hub.fetch"),
        hub_run=_names(hub.get("run", []), f"{p.name}: hub.run"),
    )


def _names(value, where: str) -> tuple[str, ...]:
    """A list of plain names (model keys, Hub ids), or ValueError naming where."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"{where} must be a list of names")
    return tuple(value)


@lru_cache(maxsize=1)
def registry() -> Registry:
    """The project's registry, loaded once."""
    return load_registry()


def get_model(key: str) -> RegistryModel:
    return registry().model(key)


def get_gpu(key: str) -> GPU:
    return registry().gpu(key)
