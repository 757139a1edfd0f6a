"""The measured price of shrinking the KV cache: quality against bytes, on a real model.

SmolLM2-135M reads a fixed text through each cache variant (kvcalc.measure.kv_variants);
``evaluate`` measures perplexity, next-token agreement, attention error and bytes against the
exact cache, on one CPU thread (``THREADS``) so that every number repeats; committed results are
in kvcalc/results/. The text, the schedule and why one thread: docs/measurement.md. No torch at
import (a test checks it).
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
import time
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from ..core.units import check_int
from .kv_variants import (
    KIVI_GROUP,
    SINKS,
    VARIANTS,
    Variant,
    kv_bytes,
    run_variant,
    variant,
)

MODEL_KEY = "smollm2-135m"
MIN_TOKENS = 64
MAX_TOKENS = 8192  # SmolLM2's context (max_position_embeddings)
CHUNK = 256
THREADS = 1  # CPU threads a measurement runs on: the same sums in the same order at every run
TEXT_SOURCE = (
    "pydoc_data.topics: the Python {version} documentation shipped with Python, "
    "topics in sorted order joined by blank lines, the first {tokens:,} tokens "
    "(SmolLM2's tokenizer)"
)
RESULT_FORMAT = 1  # the layout of a written result (write_result)
PACKAGE = Path(__file__).resolve().parents[1]  # kvcalc/: what a result's commit must match


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
    load_seconds: float = 0.0
    rows: list[QualityRow] = field(default_factory=list)

    def row(self, name: str) -> QualityRow:
        return next(r for r in self.rows if r.variant == name)

    @classmethod
    def from_dict(cls, d: dict) -> QualityTable:
        """The table ``to_dict`` wrote (a committed result's ``table``)."""
        names = {f.name for f in fields(QualityRow)}
        rows = [QualityRow(**{k: v for k, v in r.items() if k in names}) for r in d["rows"]]
        kw = {f.name: d[_KEYS.get(f.name, f.name)] for f in fields(cls)[:6]}
        return cls(**kw, load_seconds=d.get("load_seconds", 0.0), rows=rows)

    def to_dict(self) -> dict:
        return {_KEYS.get(k, k): v for k, v in asdict(self).items()}


_KEYS = {"chunk": "chunk_tokens"}  # a QualityTable field -> its key in a written table


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
) -> QualityTable:
    """Measure every variant on the text (see the module docstring). ``progress(done, total,
    what)`` is called as chunks finish; ``should_stop()`` is checked before each chunk (a
    LiveError then ends the run). The exact cache's row (the reference for agreement) is kept
    per process and reused (``forget_exact`` drops it); the exact row is always part of the
    table."""
    from . import runtime
    from .llama_forward import Net

    tokens, window, chunk, vs = check_inputs(
        model, tokens, window, chunk, list(variants) if variants else list(VARIANTS)
    )
    torch = runtime.import_torch()
    dev = runtime.resolve_device(torch, device)
    with _threads(torch, THREADS):
        t0 = time.perf_counter()
        net_model, _, tok = runtime.load_model("gguf", MODEL_KEY, "fp32", dev)
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
        for v in vs:
            t1 = time.perf_counter()

            def tick(what):
                nonlocal done
                done += 1
                if progress is not None:
                    progress(done, total, what)

            def stop_check(v: Variant = v) -> None:
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


def forget_exact() -> None:
    """Drop the exact cache's row kept by ``evaluate``: the next run measures it again."""
    _EXACT.clear()


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


def machine(torch, device: str = "cpu") -> dict:
    """What sets the table's last bits besides the code (see the module docstring)."""
    import transformers

    cpu, isa = platform.processor() or platform.machine(), []
    with suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as fh:
        lines = fh.read().split("\n\n")[0].splitlines()
        info = {k.strip(): v.strip() for k, v in (ln.split(":", 1) for ln in lines if ":" in ln)}
        cpu = info.get("model name", cpu)
        # the vector instructions the kernels choose between (a model name can hide them)
        isa = sorted(
            f for f in info.get("flags", "").split() if f.startswith(("avx", "amx", "fma", "f16c"))
        )
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "isa": isa,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": THREADS,
        "device": device,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "os": platform.platform(terse=True),
    }


def _git(*args: str) -> str | None:
    try:
        r = subprocess.run(["git", *args], cwd=PACKAGE, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def result_document(
    table: QualityTable,
    *,
    command: str,
    seconds: float,
    load_average: tuple[float, float],
    text_sha256: str,
    torch,
) -> dict:
    """A measured table with its provenance: the document ``write_result`` writes.
    ``load_average``: the 1-minute load average before and after the run."""
    commit = _git("rev-parse", "HEAD")
    # Uncommitted changes to the package (its results folder aside) would make the commit lie.
    changed = (
        _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results")
        if commit
        else None
    )
    return {
        "format": RESULT_FORMAT,
        "command": command,
        "commit": commit,
        "uncommitted_changes": bool(changed),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine(torch, table.device),
        "seconds": round(seconds, 1),
        "load_average": [round(x, 2) for x in load_average],
        "text_sha256": text_sha256,
        "table": table.to_dict(),
    }


def check_result_path(path: str) -> None:
    """ValueError unless ``path`` names a file (new or to replace) in a folder one can write."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ValueError(
            f"the result path {path[:200]!r} is a folder; give a file name such "
            "as quality-smollm2-135m-2048-w256.json"
        )
    if not os.path.isdir(folder):
        raise ValueError(
            f"the folder of the result path {path[:200]!r} does not exist; create it first"
        )
    if not os.access(folder, os.W_OK):
        raise ValueError(f"cannot write in the folder of the result path {path[:200]!r}")


def write_result(path: str, doc: dict) -> None:
    """Write ``doc`` as JSON at ``path`` (whole or not at all: a temporary file, renamed)."""
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1, allow_nan=False)
            fh.write("\n")
        os.replace(tmp, path)
    except OSError as exc:
        with suppress(OSError):
            os.unlink(tmp)
        raise ValueError(
            f"cannot write the result to {path[:200]!r}: "
            f"{exc.strerror or exc}; give a path in a folder you can write"
        ) from None


def text_sha256(ids) -> str:
    """SHA-256 of the text's token ids (int64, little-endian): the text, exactly."""
    import hashlib

    return hashlib.sha256(ids.cpu().numpy().astype("<i8").tobytes()).hexdigest()


# What a whole result holds (result_document, machine): a file without one of them is left out.
_RESULT_KEYS = set(
    "format command commit uncommitted_changes date machine seconds load_average text_sha256 "
    "table".split()
)
_MACHINE_KEYS = set(
    "cpu cores isa cpu_capability threads device torch transformers python os".split()
)


def committed_results(folder=None) -> list[dict]:
    """The results committed in kvcalc/results/ (or ``folder``): quality-*.json, each with its
    file name as ``file``; a file that is not a whole result of this format is left out (a test
    checks that none of the committed ones is)."""
    from importlib import resources

    out: list[dict] = []
    folder = resources.files("kvcalc") / "results" if folder is None else Path(folder)
    try:
        entries = sorted(folder.iterdir(), key=lambda e: e.name)
    except (OSError, FileNotFoundError):
        return out
    for entry in entries:
        if not (entry.name.startswith("quality-") and entry.name.endswith(".json")):
            continue
        try:
            doc = json.loads(entry.read_text(encoding="utf-8"))
            if (
                doc.get("format") != RESULT_FORMAT
                or not set(doc) >= _RESULT_KEYS
                or not set(doc["machine"]) >= _MACHINE_KEYS
            ):
                continue
            doc["table"] = QualityTable.from_dict(doc["table"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        doc["file"] = entry.name
        out.append(doc)
    return out


def committed_result(tokens: int, window: int) -> dict | None:
    """The committed result measured on ``tokens`` tokens with window ``window`` (its
    ``table`` a QualityTable), or None."""
    for d in committed_results():
        if (d["table"].tokens, d["table"].window) == (tokens, window):
            return d
    return None
