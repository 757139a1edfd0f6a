"""Committed quality results: a table measured once by ``python -m kvcalc quality ...
--write-result PATH`` and committed in kvcalc/results/, so the quality page can show a real
measurement at once instead of minutes of CPU first. The file is the table (its --json object,
unchanged) with where it came from: the command, the commit, the date, the machine and the
text. No torch at import (a test checks it)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from pathlib import Path

from .quality import THREADS, QualityTable

__all__ = [
    "RESULT_FORMAT",
    "machine",
    "result_document",
    "check_result_path",
    "write_result",
    "text_sha256",
    "committed_results",
    "committed_result",
]

RESULT_FORMAT = 1  # the layout of a written result (write_result)
PACKAGE = Path(__file__).resolve().parents[1]  # kvcalc/: what a result's commit must match


def machine(torch, device: str = "cpu") -> dict:
    """What sets the table's last bits besides the code (see the module docstring)."""
    import transformers

    cpu, isa = platform.processor() or platform.machine(), []
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            info = dict(
                ln.split(":", 1) for ln in fh.read().split("\n\n")[0].splitlines() if ":" in ln
            )
        info = {k.strip(): v.strip() for k, v in info.items()}
        cpu = info.get("model name", cpu)
        # the vector instructions the kernels choose between (a model name can hide them)
        isa = sorted(
            f for f in info.get("flags", "").split() if f.startswith(("avx", "amx", "fma", "f16c"))
        )
    except OSError:
        pass
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
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise ValueError(
            f"cannot write the result to {path[:200]!r}: "
            f"{exc.strerror or exc}; give a path in a folder you can write"
        ) from None


def text_sha256(ids) -> str:
    """SHA-256 of the text's token ids (int64, little-endian): the text, exactly."""
    import hashlib

    return hashlib.sha256(ids.cpu().numpy().astype("<i8").tobytes()).hexdigest()


_RESULT_KEYS = {
    "format",
    "command",
    "commit",
    "uncommitted_changes",
    "date",
    "machine",
    "seconds",
    "load_average",
    "text_sha256",
    "table",
}
_MACHINE_KEYS = {
    "cpu",
    "cores",
    "isa",
    "cpu_capability",
    "threads",
    "device",
    "torch",
    "transformers",
    "python",
    "os",
}


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
                or not _RESULT_KEYS <= set(doc)
                or not _MACHINE_KEYS <= set(doc["machine"])
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
    return next(
        (
            d
            for d in committed_results()
            if d["table"].tokens == tokens and d["table"].window == window
        ),
        None,
    )
