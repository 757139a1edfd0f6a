"""Run a real Hugging Face model and measure its KV cache and step time against kvcalc.

``measure_cache``: cache bytes against kvcalc's prediction (in transformers' conventions) and the
time of each step; ``measure_work_time``: recomputing n tokens against one cached step. Both check
``should_stop()`` before every step (a LiveError ends the run). docs/measurement.md.
"""

from __future__ import annotations

import statistics
import time
from contextlib import suppress
from dataclasses import asdict, dataclass, field

from ..core.units import check_int
from .runtime import LiveError, RealModel, import_torch, load_model, resolve_device
from .twins import TWIN_VOCAB, fit_line, predicted_bytes, runtime_spec

MAX_NEW_TOKENS = 512
# Twin prompts up to 32K tokens, so that a 4,096-token window (Gemma 2) can be passed; the
# hosted page keeps its own, smaller caps (webui.hosted.live_caps).
MAX_PROMPT_TOKENS = 32_768
MAX_BATCH = 16
DEFAULT_NS = (8, 32, 128, 512)  # the token counts measure_work_time times by default


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
        return fit_line([(s.tokens, s.step_time_s) for s in self.steps[1:]])

    def to_dict(self) -> dict:
        d = asdict(self)
        d["all_match"] = self.all_match
        a, b = self.fit()
        d["fit"] = {"intercept_s": a, "slope_s_per_token": b}
        return d


@dataclass
class WorkPoint:
    tokens: int
    recompute_s: float  # one forward over n tokens, no cache: n token passes
    cached_step_s: float  # one token with n tokens in the cache: 1 token pass

    @property
    def work_ratio(self) -> int:
        return self.tokens

    @property
    def time_ratio(self) -> float:
        return self.recompute_s / self.cached_step_s


@dataclass
class WorkTime:
    model: str
    source: str
    device: str
    dtype: str
    weight_bytes: int  # bytes of the model's parameters (what one forward reads at least)
    points: list[WorkPoint] = field(default_factory=list)


def cache_bytes(cache) -> tuple[int, int]:
    """(tensor bytes, storage bytes) of the floating-point tensors the cache object holds: what
    the cache logically holds (kvcalc's prediction), and the memory those tensors keep alive,
    each storage once (why they differ: docs/measurement.md)."""
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
    with suppress(OSError), open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _about(model: RealModel, dev: str) -> dict:
    """What a Measurement and a WorkTime say about the run."""
    return {"model": model.key, "source": model.source, "device": dev, "dtype": model.dtype}


def _load(model: RealModel):
    """(torch, device, model, config dict, tokenizer, its context or None) of ``model``."""
    torch = import_torch()
    dev = resolve_device(torch, model.device, model.dtype)
    net, cfg_dict, tok = load_model(
        model.source, model.key, model.dtype, dev, model.local_files_only
    )
    max_pos = getattr(net.config, "max_position_embeddings", None) or getattr(
        net.config, "n_positions", None
    )
    return torch, dev, net, cfg_dict, tok, max_pos


def measure_cache(
    model: RealModel,
    *,
    prompt_tokens: int = 32,
    new_tokens: int = 32,
    batch: int = 1,
    no_cache_tokens: int = 0,
    prompt_text: str | None = None,
    should_stop=None,
) -> Measurement:
    """Prefill, then decode one token at a time; after each step compare the cache's own
    bytes with kvcalc's prediction and time the step. ``no_cache_tokens`` > 0 also runs that
    many steps without a cache (recomputing the whole sequence) for comparison."""
    import_torch()
    prompt_tokens = check_int("prompt tokens", prompt_tokens, 1, MAX_PROMPT_TOKENS)
    new_tokens = check_int("new tokens", new_tokens, 1, MAX_NEW_TOKENS)
    batch = check_int("batch", batch, 1, MAX_BATCH)
    no_cache_tokens = check_int("no-cache tokens", no_cache_tokens, 0, MAX_NEW_TOKENS)
    torch, dev, net, cfg_dict, tok, max_pos = _load(model)
    spec = runtime_spec(cfg_dict)
    ids = _prompt(torch, net, tok, prompt_text, prompt_tokens, batch, dev)
    prompt_tokens = ids.shape[1]
    if max_pos and prompt_tokens + new_tokens > max_pos:
        raise LiveError(
            f"{prompt_tokens + new_tokens} tokens exceed this model's {max_pos}-token context"
        )
    result = Measurement(
        **_about(model, dev), batch=batch, prompt_tokens=prompt_tokens, new_tokens=new_tokens
    )
    total = new_tokens + 1 + min(no_cache_tokens, new_tokens)
    run = _Run(torch, net, dev, total=total, should_stop=should_stop)
    if dev == "cuda":
        torch.cuda.reset_peak_memory_stats()
    try:
        with torch.inference_mode():
            generated = _decode(run, ids, spec, result, new_tokens, batch, model.dtype)
            if no_cache_tokens:
                result.tokens_match_no_cache = _no_cache(
                    run, ids, generated, min(no_cache_tokens, new_tokens), result, new_tokens + 1
                )
    except torch.OutOfMemoryError:
        if dev == "cuda":
            torch.cuda.empty_cache()
        raise LiveError(
            f"Out of GPU memory at batch {batch} x {prompt_tokens + new_tokens} "
            "tokens: lower the batch or the number of tokens."
        ) from None
    except MemoryError:
        raise LiveError(
            "The machine ran out of memory: lower the batch or the number of tokens."
        ) from None
    if tok is not None and generated:
        result.text = tok.decode(torch.cat(generated, dim=1)[0], skip_special_tokens=True)
    kinds = {lay.kind for lay in spec.layers}
    result.notes += [note for kind, note in _NOTES.items() if kind in kinds]
    return result


def _prompt(torch, net, tok, prompt_text: str | None, prompt_tokens: int, batch: int, dev: str):
    """The prompt's ids [batch, n] on ``dev``: ``prompt_text`` tokenized (its last 4,096 tokens)
    when the model has a tokenizer, else ``prompt_tokens`` random ids (seeded: the same at
    every run)."""
    vocab = int(getattr(net.config, "vocab_size", TWIN_VOCAB))
    if tok is not None and prompt_text:
        ids = tok(prompt_text, return_tensors="pt").input_ids[:, -4096:]
    else:
        gen = torch.Generator().manual_seed(1234)
        ids = torch.randint(0, vocab, (1, prompt_tokens), generator=gen)
    return ids.repeat(batch, 1).to(dev)


class _Run:
    """What the timed loops share: torch, the model, the device, the clock (a step's time with
    the device synchronized around it) and the stop check (``total`` steps in the run)."""

    def __init__(self, torch, net, dev: str, *, total: int, should_stop):
        self.torch, self.net, self.dev, self.total = torch, net, dev, total
        self.sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
        self.should_stop = should_stop

    def check_stop(self, done: int | None = None) -> None:
        """LiveError when ``should_stop()``, saying how many steps ran (None: not counted)."""
        if self.should_stop is not None and self.should_stop():
            where = "" if done is None else f" after {done} of its {self.total} steps"
            raise LiveError(f"The run was stopped{where}.")

    def step(self, greedy: bool = True, **kwargs):
        """One forward pass, timed: (output, greedy next token [batch, 1] or None, seconds)."""
        self.sync()
        t0 = time.perf_counter()
        out = self.net(**kwargs)
        nxt = out.logits[:, -1, :].argmax(-1, keepdim=True) if greedy else None
        self.sync()
        return out, nxt, time.perf_counter() - t0


def _decode(run: _Run, ids, spec, result: Measurement, new_tokens: int, batch: int, dtype: str):
    """The prefill and ``new_tokens`` decode steps with transformers' DynamicCache, each step's
    cache bytes measured against kvcalc's prediction (appended to result.steps); the greedy
    tokens it generated."""
    from transformers import DynamicCache

    generated = []
    cache = DynamicCache(config=run.net.config)
    x = ids
    for step in range(new_tokens + 1):
        run.check_stop(step)
        out, nxt, dt = run.step(input_ids=x, cache=cache, use_cache=True)
        cache = out.cache
        n = cache.get_seq_length()
        held, pinned = cache_bytes(cache)
        result.steps.append(
            Step(
                tokens=n,
                measured_bytes=held,
                predicted_bytes=predicted_bytes(spec, n, batch, dtype),
                step_time_s=dt,
                memory_bytes=_memory(run.torch, run.dev),
                storage_bytes=pinned,
            )
        )
        if step < new_tokens:
            generated.append(nxt)
            x = nxt
    return generated


def _no_cache(run: _Run, ids, generated, steps: int, result: Measurement, done: int) -> bool:
    """``steps`` steps without a cache, each recomputing the whole sequence (appended to
    result.no_cache_steps; ``done`` steps ran before them); whether every greedy token is the
    one the cached run generated."""
    seq = ids
    same = True
    for i in range(steps):
        run.check_stop(done + i)
        _, nxt, dt = run.step(input_ids=seq, use_cache=False)
        same = same and bool(run.torch.equal(nxt, generated[i]))
        result.no_cache_steps.append(
            Step(
                tokens=seq.shape[1],
                measured_bytes=0,
                predicted_bytes=0,
                step_time_s=dt,
                memory_bytes=_memory(run.torch, run.dev),
            )
        )
        seq = run.torch.cat([seq, generated[i]], dim=1)
    return same


# What the measurement follows of transformers' conventions, for each kind of layer it has.
_NOTES = {
    "sliding": "transformers keeps window - 1 tokens in a sliding layer between "
    "steps (the next token makes the window); the prediction does too. "
    "It cuts them as a view of a larger tensor, so the memory it keeps "
    "allocated (storage bytes) can be up to a window, or the whole prompt "
    "right after a long prefill",
    "state": "transformers keeps the whole convolution kernel in a recurrent "
    "layer's state (vLLM keeps kernel - 1 inputs); the prediction here "
    "follows transformers",
}


def measure_work_time(
    model: RealModel, *, ns=DEFAULT_NS, repeats: int = 3, should_stop=None
) -> WorkTime:
    """At each n of ``ns``: one forward over n tokens without a cache (n token passes of work)
    against one decode step with n tokens cached (one token pass), each the median of
    ``repeats`` timings."""
    import_torch()
    ns = sorted({check_int("tokens", n, 1, 4096) for n in ns})
    if not ns:
        raise ValueError("give at least one token count")
    repeats = check_int("repeats", repeats, 1, 10)
    torch, dev, net, _, _, max_pos = _load(model)
    if max_pos and ns[-1] + repeats + 1 > max_pos:
        raise LiveError(f"{ns[-1]:,} tokens exceed this model's {max_pos:,}-token context")
    from transformers import DynamicCache

    run = _Run(torch, net, dev, total=0, should_stop=should_stop)
    vocab = int(net.config.vocab_size)
    gen = torch.Generator().manual_seed(7)
    ids = torch.randint(0, vocab, (1, ns[-1] + repeats + 1), generator=gen).to(dev)
    weight_bytes = sum(p.numel() * p.element_size() for p in net.parameters())
    out = WorkTime(**_about(model, dev), weight_bytes=int(weight_bytes))

    def timed(**kwargs):
        run.check_stop()
        return run.step(greedy=False, **kwargs)

    with torch.inference_mode():
        net(input_ids=ids[:, :8], use_cache=False)  # warm-up
        for n in ns:
            rec = [timed(input_ids=ids[:, :n], use_cache=False)[2] for _ in range(repeats)]
            run.check_stop()
            cache = DynamicCache(config=net.config)
            cache = net(input_ids=ids[:, :n], cache=cache, use_cache=True).cache
            step = []
            for r in range(repeats):
                got, _, dt = timed(input_ids=ids[:, n + r : n + r + 1], cache=cache, use_cache=True)
                cache = got.cache
                step.append(dt)
            out.points.append(
                WorkPoint(
                    tokens=n,
                    recompute_s=statistics.median(rec),
                    cached_step_s=statistics.median(step),
                )
            )
    return out
