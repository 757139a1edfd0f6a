"""``verify`` in a child process with hard limits, for a server that must not hang or grow.

The meta-device check builds a whole model's modules: for an ordinary config a few seconds and a
few hundred MiB, but a hostile one can pin a core for minutes or take gigabytes. Here it runs in
a fresh process (``spawn``: nothing of the server's state is shared) with an address-space limit
(``resource.setrlimit(RLIMIT_AS)``) and a wall-time limit; the child is killed and reaped when
the time is up, so the server's own memory never grows with it.

Before any process starts, the config is read (the reader's size caps refuse a hostile one in
milliseconds), its ``model_type`` must be one the check may build (kvcalc.measure.verify_types:
never a model whose transformers code loads or compiles native code), and its depth must be one the
check can build within its limits (``MAX_CHECK_LAYERS``). ``should_stop`` lets a caller (the
app's device queue: Stop, a closed tab, its own time cap) end the check early: the child is
killed and reaped then too.

torch is imported in the child only; ``import kvcalc`` never loads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = [
    "BoundedVerdict",
    "verify_bounded",
    "DEFAULT_TIMEOUT_S",
    "DEFAULT_MEMORY_GIB",
    "MAX_CHECK_LAYERS",
    "precheck",
]

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MEMORY_GIB = 4.0  # torch alone maps about 1 GiB of address space
# The deepest real decoders have 126 (Llama 3.1 405B) to about 160 layers; building 512 on the
# meta device takes about a second per hundred layers and well under the memory limit.
MAX_CHECK_LAYERS = 512
POLL_S = 0.1


@dataclass(frozen=True)
class BoundedVerdict:
    agrees: bool | None  # None: could not be checked (refused, not buildable, out of limits)
    line: str  # one sentence: the verdict, what differs, or why it was not checked
    report: dict | None = None  # VerifyReport.to_dict() when the check ran


def _limit(memory_gib: float):
    def apply() -> None:  # runs in the child, before it executes Python
        import resource

        limit = int(memory_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def precheck(config: object) -> str | None:
    """Why ``config`` will not be built by the check, in one line, or None when it may be.
    Milliseconds: the reader's caps, the model-type allow-list and the depth limit."""
    from ..config.hfconfig import spec_from_config
    from .verify_types import refusal

    if not isinstance(config, dict):
        return "not checked: a config.json is a JSON object"
    why = refusal(config.get("model_type"))
    if why:
        return why
    try:
        spec = spec_from_config(config, unverified=True)
    except ValueError as exc:
        return f"not checked: {str(exc)[:400]}"
    if spec.num_layers > MAX_CHECK_LAYERS:
        return (
            f"not checked: {spec.num_layers:,} layers is more than the {MAX_CHECK_LAYERS} "
            "this check builds within its limits"
        )
    return None


def verify_bounded(
    config: dict,
    *,
    context: int | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_gib: float = DEFAULT_MEMORY_GIB,
    should_stop: Callable[[], bool] | None = None,
) -> BoundedVerdict:
    """The meta-device check of ``config`` in a child process (``python -m
    kvcalc.measure.verify_bounded``): at most ``timeout_s`` seconds and ``memory_gib`` GiB of
    address space, refused before it starts when ``precheck`` says so; when the time is up or
    ``should_stop()`` turns true the child's whole process group is killed, and it is always
    reaped."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    why = precheck(config)
    if why:
        return BoundedVerdict(None, why)
    payload = json.dumps({"config": config, "context": context}, allow_nan=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kvcalc.measure.verify_bounded"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        preexec_fn=_limit(memory_gib),
        start_new_session=True,
        text=True,
    )
    deadline = time.monotonic() + timeout_s
    stopped = None
    send: str | None = payload
    try:
        while True:
            try:
                out, _ = proc.communicate(send, timeout=POLL_S)
                break
            except subprocess.TimeoutExpired:
                send = None  # the input went on the first call
            if time.monotonic() > deadline:
                stopped = f"the check took longer than {timeout_s:g} s and was stopped"
            elif should_stop is not None and should_stop():
                stopped = "the check was stopped before it finished"
            if stopped:
                break
    finally:
        if proc.returncode is None:  # stopped, or an exception in should_stop: kill and reap
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.communicate()
    if stopped:
        return BoundedVerdict(None, f"not checked: {stopped}")
    try:
        got = json.loads(out.strip().splitlines()[-1]) if out.strip() else None
    except ValueError:
        got = None
    if not isinstance(got, dict):
        if proc.returncode and proc.returncode < 0:
            why = f"the check's process died (signal {-proc.returncode})"
        else:
            why = (
                f"the check's process ended (status {proc.returncode}) without a result, "
                f"probably over its {memory_gib:g} GiB limit"
            )
        return BoundedVerdict(None, f"not checked: {why}")
    return BoundedVerdict(
        agrees=got.get("agrees"), line=str(got.get("line", "")), report=got.get("report")
    )


def _main() -> None:
    """The child: a JSON request on stdin, one JSON line on stdout, nothing else printed."""
    import json
    import os
    import sys
    import warnings

    request = json.loads(sys.stdin.read())
    real_stdout = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # transformers and torch print; only the result goes to stdout
    warnings.simplefilter("ignore")
    try:
        try:
            import torch  # noqa: F401  (first: under a tight limit this is what fails)
        except ImportError as exc:
            raise ValueError(
                f"not checked: torch could not be loaded in the check's process "
                f"(not installed, or its memory limit is too small: {exc})"[:300]
            )
        from transformers.utils import logging

        logging.set_verbosity_error()
        from .verify import verify

        r = verify(request["config"], context=request.get("context"))
        line = r.verdict
        if r.differences:
            line += " (named differences: " + "; ".join(r.differences) + ")"
        out = {"agrees": r.agrees if r.checkable else None, "line": line, "report": r.to_dict()}
    except MemoryError:
        out = {
            "agrees": None,
            "line": "not checked: building the model needs more address "
            "space than the check is given",
        }
    except ValueError as exc:
        out = {"agrees": None, "line": str(exc)}
    except Exception as exc:  # transformers failing inside: still one line, never a traceback
        out = {"agrees": None, "line": f"not checked: {type(exc).__name__}: {str(exc)[:200]}"}
    with os.fdopen(real_stdout, "w") as fh:
        fh.write(json.dumps(out, default=str) + "\n")


if __name__ == "__main__":
    _main()
