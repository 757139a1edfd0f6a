"""The zoo: kvcalc judged against transformers over every architecture transformers ships.

    python -m kvcalc verify --zoo [--markdown | --json] [--only TYPE[,TYPE]]

Each ``model_type`` is built from its config class's defaults in a child process of its own and
gets one of ``VERDICTS``, cache and parameters (kvcalc.measure.param_check) alike. The verdicts
and the child processes: docs/measurement.md. ``classify`` needs no torch.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field, fields

from .param_check import counts, exc_line, markdown_lines, summary_lines
from .verify import limit_memory

VERDICTS = ("exact", "named difference", "refused", "cannot build", "wrong", "error")
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MEMORY_GIB = 8  # address space of one child; torch alone maps about 1 GiB
DEFAULT_WORKERS = 2
# What the forkserver imports once, before it forks a child per type (docs/measurement.md).
PRELOAD = (
    "torch",
    "transformers",
    "transformers.models.auto.modeling_auto",
    "transformers.modeling_utils",
    "transformers.modeling_layers",
    "transformers.cache_utils",
    "transformers.masking_utils",
    "transformers.generation.utils",
    "transformers.utils.type_validators",
    "kvcalc.config.hfconfig",
    "kvcalc.measure.runtime",
    "kvcalc.measure.zoo",
    "kvcalc.measure.param_check",
    "kvcalc.measure.verify",
)

# verify's rows name each legitimate difference by a key; the zoo's short names for them.
_SHORT = {
    "sliding": "window vs window-1",
    "chunked": "chunk vs chunk-1",
    "state": "conv kernel vs kernel-1",
    "mla": "MLA latent layout",
    "indexer": "indexer keys in the model dtype",
    "none": "placeholder layers (nothing cached)",
}
_EXTRA_LAYERS = "extra cache layers (multi-token prediction)"


@dataclass(frozen=True, kw_only=True)
class ZooEntry:
    """One architecture to check: a ``CONFIG_MAPPING`` key and the causal-LM class that runs it.
    ``via_text`` names the text sub-config's model_type when the type itself has no causal-LM
    class and its text model is checked instead."""

    model_type: str
    model_class: str
    via_text: str | None = None


@dataclass(frozen=True, kw_only=True)
class ZooResult:
    model_type: str
    model_class: str
    verdict: str  # one of VERDICTS
    detail: str = ""  # the refusal, the failure, the first differing layer, the named differences
    via_text: str | None = None
    differences: tuple[str, ...] = ()  # short names of the named differences
    context: int | None = None  # tokens of the forward pass
    layers: int | None = None
    seconds: float = 0.0
    noise: int = 0  # warning and log lines the child printed (captured, not shown)
    # the parameter check (kvcalc.measure.param_check): its verdict, what it says, both totals
    params: str = ""
    params_detail: str = ""
    params_kvcalc: int | None = None
    params_transformers: int | None = None

    @classmethod
    def of(cls, entry: ZooEntry, **kw) -> ZooResult:
        return cls(
            model_type=entry.model_type,
            model_class=entry.model_class,
            via_text=entry.via_text,
            **kw,
        )

    @classmethod
    def failed(cls, entry: ZooEntry, why: str, **kw) -> ZooResult:
        """``entry`` could not be built: both checks say ``why``."""
        kw |= {"detail": why, "params": "cannot build", "params_detail": why}
        return cls.of(entry, verdict="cannot build", **kw)


@dataclass(frozen=True, kw_only=True)
class ZooRun:
    results: tuple[ZooResult, ...]
    transformers_version: str
    torch_version: str
    date: str
    seconds: float  # wall time of the whole run
    workers: int
    timeout_s: float
    memory_gib: float
    found: tuple[str, ...] = field(default_factory=tuple)  # every model_type the listing found

    def counts(self) -> dict[str, int]:
        c = Counter(r.verdict for r in self.results)
        return {v: c.get(v, 0) for v in VERDICTS}

    def params_counts(self) -> dict[str, int]:
        return counts(self.results)

    def by_cause(self, verdict: str) -> dict[str, list[str]]:
        """The model types of ``verdict`` (refused, cannot build), grouped by cause_of."""
        return group_by_cause(r for r in self.results if r.verdict == verdict)

    def to_dict(self) -> dict:
        """The run's fields but ``results`` and ``found``, then what is counted and the results."""
        d = {f.name: getattr(self, f.name) for f in fields(self)[1:-1]}
        return d | {
            "seconds": round(self.seconds, 1),
            "counts": self.counts(),
            "params_counts": self.params_counts(),
            "refusals_by_cause": self.by_cause("refused"),
            "cannot_build_by_cause": self.by_cause("cannot build"),
            "results": [asdict(r) for r in self.results],
        }

    def summary(self) -> list[str]:
        c = self.counts()
        lines = [
            f"kvcalc against transformers {self.transformers_version} (torch "
            f"{self.torch_version}): {len(self.results)} architectures in "
            f"{self.seconds:.0f} s ({self.workers} workers)",
            "  " + ", ".join(f"{v}: {c[v]}" for v in VERDICTS),
        ]
        bad = [r for r in self.results if r.verdict in ("wrong", "error")]
        lines += [f"  {r.verdict.upper()}: {_label(r)}: {r.detail}" for r in bad]
        lines += summary_lines(self.results)
        named = Counter(d for r in self.results for d in r.differences)
        if named:
            lines.append(
                "  named differences: " + ", ".join(f"{k} ({n})" for k, n in named.most_common())
            )
        for title in ("refused", "cannot build"):
            groups = self.by_cause(title)
            if groups:
                lines.append(f"  {title}, by cause:")
                for cause, types in groups.items():
                    lines.append(f"    {len(types):>3}  {cause}: {', '.join(types)}")
        return lines

    def markdown(self, command: str = "python -m kvcalc verify --zoo --markdown") -> list[str]:
        c = self.counts()
        lines = [
            f"<!-- written by `{command}` with transformers {self.transformers_version} "
            f"(torch {self.torch_version}) on {self.date} -->",
            "",
            "# The zoo: kvcalc against transformers' own cache",
            "",
            f"Written by `{command}` with transformers {self.transformers_version} "
            f"(torch {self.torch_version}) on {self.date}: {len(self.results)} "
            "architectures, each in a child process of its own.",
            "Every `model_type` with a causal-LM class is built from its config class's "
            "defaults on the meta device and run once; the cache transformers allocates is "
            "compared with kvcalc's layers (`python -m kvcalc verify`). A type without a "
            "causal-LM class of its own is checked through its text sub-config (the class "
            "column says which).",
            "",
            "| verdict | count |",
            "|---|---:|",
        ]
        lines += [f"| {v} | {c[v]} |" for v in VERDICTS]
        for verdict, title in (
            ("refused", "Refused by kvcalc, by cause"),
            ("cannot build", "Not buildable by transformers on the meta device, by cause"),
        ):
            groups = self.by_cause(verdict)
            if groups:
                lines += ["", f"## {title}", ""]
                lines += [
                    f"- {_cell(cause)} ({len(types)}): " + ", ".join(f"`{t}`" for t in types)
                    for cause, types in groups.items()
                ]
        lines += ["", "## Every architecture"]
        lines += ["", "| model_type | class | verdict | detail |", "|---|---|---|---|"]
        for r in self.results:
            cls = r.model_class + (f" (text model `{r.via_text}`)" if r.via_text else "")
            lines.append(f"| `{r.model_type}` | {cls} | {r.verdict} | {_cell(r.detail)} |")
        return lines + markdown_lines(self.results, _cell)


def _label(r: ZooResult) -> str:
    return r.model_type + (f" (text model {r.via_text})" if r.via_text else "")


def _cell(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text.replace("|", "\\|")


def cause_of(message: str) -> str:
    """The cause a refusal or failure names, without the values that differ from type to type,
    so that messages with the same cause group together."""
    text = " ".join(message.split())
    text = re.sub(r", got .*$", "", text)  # the offending value
    # numbers become N (layer_types[3] -> [N]); versions (5.24.0) and names (qwen3) stay
    text = re.sub(r"(?<![\w.])\d[\d,]*(?![\w.]*\d)", "N", text)
    return text[:160]


def group_by_cause(results) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for r in results:
        groups.setdefault(cause_of(r.detail), []).append(r.model_type)
    return dict(sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])))


def classify(report) -> tuple[str, str, tuple[str, ...]]:
    """(verdict, detail, short names of the named differences) of one ``VerifyReport``.

    ``report`` needs only ``checkable``, ``reason``, ``rows`` (each with ``layer``, ``kvcalc``,
    ``transformers``, ``verdict`` and ``why``) and ``differences``; torch is not needed."""
    if not report.checkable:
        return "cannot build", report.reason, ()
    rows = tuple(report.rows)
    differs = [r for r in rows if r.verdict == "differs"]
    if differs:
        d = differs[0]
        return (
            "wrong",
            f"{len(differs)} of {len(rows)} layers differ; first: layer {d.layer} "
            f"({d.kvcalc} / {d.transformers}): {d.why}",
            (),
        )
    agreed = [r.why for r in rows if r.verdict == "agrees (named difference)"]
    keys = (k.strip() for why in agreed for k in why.split(","))
    named = list(dict.fromkeys(_SHORT.get(k, k) for k in keys if k))
    if any("more layer" in d for d in report.differences):
        named.append(_EXTRA_LAYERS)
    if named or report.differences:
        return "named difference", "; ".join(named) or "; ".join(report.differences), tuple(named)
    return "exact", "", ()


def entries(only: list[str] | None = None) -> list[ZooEntry]:
    """Every architecture the zoo checks, in CONFIG_MAPPING's order (or those in ``only``)."""
    import warnings

    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES as LM
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES as BASE

    wanted = set(only) if only else None
    if wanted:
        unknown = sorted(wanted - set(CONFIG_MAPPING.keys()))
        if unknown:
            raise ValueError(f"transformers has no model_type {', '.join(unknown)}")
    out = []
    for mt in CONFIG_MAPPING:
        if wanted is not None and mt not in wanted:
            continue
        if mt in LM:
            out.append(ZooEntry(model_type=mt, model_class=LM[mt]))
            continue
        with _quiet(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                cfg = CONFIG_MAPPING[mt]()
                text = cfg.get_text_config()
            except Exception:  # its defaults do not even build a config: not a causal LM here
                continue
        tt = getattr(text, "model_type", None)
        if text is cfg or not isinstance(tt, str):
            continue
        if tt in LM:
            cls = LM[tt]
        elif tt in BASE and tt in CONFIG_MAPPING:
            # a text model with no causal-LM class of its own (Mistral Large 4): verify builds
            # its base model, which runs the same decoder and returns the same cache. A type
            # with several base classes (funnel) names them in a tuple; the auto classes build
            # the first.
            cls = BASE[tt] if isinstance(BASE[tt], str) else BASE[tt][0]
        else:
            continue
        out.append(ZooEntry(model_type=mt, model_class=cls, via_text=tt))
    return out


@contextmanager
def _quiet():
    """Silence transformers' logger in this process (the listing instantiates config classes)."""
    from transformers.utils import logging

    level = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(level)


def _check(entry: ZooEntry) -> ZooResult:
    """One type, in the current process: build its default config, read it, verify its cache
    and count its parameters (kvcalc.measure.param_check) on the model verify built."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from ..config.hfconfig import spec_from_config
    from . import param_check
    from .verify import verify

    t0 = time.perf_counter()

    def result(verdict: str, detail: str = "", **kw) -> ZooResult:
        seconds = round(time.perf_counter() - t0, 2)
        return ZooResult.of(entry, verdict=verdict, detail=detail, seconds=seconds, **kw)

    def failed(why: str) -> ZooResult:
        return ZooResult.failed(entry, why, seconds=round(time.perf_counter() - t0, 2))

    unread = {"params": "refused", "params_detail": "the config is refused (see its cache verdict)"}
    try:
        cfg = CONFIG_MAPPING[entry.model_type]()
        if entry.via_text:
            cfg = cfg.get_text_config()
        config = cfg.to_dict() | {"model_type": cfg.model_type}
    except Exception as exc:
        return failed(f"the config class's defaults fail: {exc_line(exc, 240)}")
    try:
        spec = spec_from_config(config, name=entry.model_type)
    except ValueError as exc:
        return result("refused", str(exc), **unread)
    except Exception as exc:
        return result("error", f"spec_from_config raised {exc_line(exc, 240)}", **unread)
    counted: list = []
    try:
        report = verify(
            config,
            name=entry.model_type,
            on_model=lambda m: counted.append(param_check.count_model(m)),
        )
    except ValueError as exc:  # verify re-reads the config; a refusal there is still a refusal
        return result("refused", str(exc), **unread)
    except MemoryError:
        return failed(_OUT_OF_MEMORY)
    except Exception as exc:
        return result(
            "error",
            f"verify raised {exc_line(exc, 240)}",
            **param_check.fields(spec, counted, entry.model_type, entry.via_text),
        )
    verdict, detail, named = classify(report)
    if not counted:
        counted.append(report.reason or "transformers built no model")
    return result(
        verdict,
        detail,
        differences=named,
        context=report.context,
        layers=spec.num_layers,
        **param_check.fields(spec, counted, entry.model_type, entry.via_text),
    )


_OUT_OF_MEMORY = "out of memory (the child's address-space limit)"


def _child(entry: ZooEntry, memory_gib: float, conn) -> None:
    """The body of one child process: limits, captured output, one check, the result sent."""
    import os
    import tempfile
    import warnings

    if memory_gib:
        limit_memory(memory_gib)()
    log = tempfile.TemporaryFile()  # noqa: SIM115 (open for the child's life: fds 1 and 2)
    os.dup2(log.fileno(), 1)  # C-level and Python output both land in the log
    os.dup2(log.fileno(), 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            res = _check(entry)
        except MemoryError:
            res = ZooResult.failed(entry, _OUT_OF_MEMORY)
        noise = len(caught)
    with suppress(Exception):
        log.seek(0)
        noise += sum(1 for line in log.read().splitlines() if line.strip())
    conn.send(ZooResult(**{**asdict(res), "noise": noise}))
    conn.close()


def _run_one(ctx, entry: ZooEntry, timeout_s: float, memory_gib: float) -> ZooResult:
    t0 = time.perf_counter()
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(entry, memory_gib, send), daemon=True)
    proc.start()
    send.close()
    res = None
    try:
        if receive.poll(timeout_s):
            res = receive.recv()
    except (EOFError, OSError):  # the child died before it sent anything
        pass
    finally:
        receive.close()
    if res is not None:
        proc.join(10)  # a child that sent its result ends by itself
    alive = proc.is_alive()
    if alive:
        proc.kill()
    proc.join(10)
    if res is not None:
        return res
    code = proc.exitcode
    if alive:
        why = f"timeout: no result in {timeout_s:g} s"
    elif code and code < 0:
        why = f"the child process died (signal {-code})"
    else:
        why = f"the child process exited with status {code} and no result"
    return ZooResult.failed(entry, why, seconds=round(time.perf_counter() - t0, 2))


def run_zoo(
    *,
    only: list[str] | None = None,
    workers: int = DEFAULT_WORKERS,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_gib: float = DEFAULT_MEMORY_GIB,
    progress=None,
) -> ZooRun:
    """Check every architecture (or those in ``only``), each in a child process of its own.
    ``progress(done, total, result)`` is called as results arrive."""
    import datetime
    import multiprocessing
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from .runtime import import_torch

    torch = import_torch("the zoo")
    import transformers

    t0 = time.perf_counter()
    todo = entries(only)
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(PRELOAD))
    results: list[ZooResult | None] = [None] * len(todo)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {
            pool.submit(_run_one, ctx, e, timeout_s, memory_gib): i for i, e in enumerate(todo)
        }
        for done, fut in enumerate(as_completed(futures), 1):
            i = futures[fut]
            results[i] = fut.result()
            if progress:
                progress(done, len(todo), results[i])
    return ZooRun(
        results=tuple(r for r in results if r is not None),
        transformers_version=transformers.__version__,
        torch_version=torch.__version__.split("+")[0],
        seconds=time.perf_counter() - t0,
        date=datetime.date.today().isoformat(),
        workers=workers,
        timeout_s=timeout_s,
        memory_gib=memory_gib,
        found=tuple(e.model_type for e in todo),
    )
