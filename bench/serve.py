"""One way for the bench scripts to start the app: a Streamlit server of a checkout on a free
port of 127.0.0.1, returned once its health check answers.

    proc, port = start_app(root)                       # this interpreter, this environment
    proc, port = start_app(root, python=other, env=e,  # another venv, its own variables,
                           extra=["--server.disconnectedSessionTTL", "5"])  # more flags

The script's folder (``root``) comes first on the server's sys.path, so it runs that
checkout's own kvcalc and webui.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

__all__ = ["free_port", "start_app", "wait_healthy"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(port: int, tries: int = 300) -> bool:
    """True once /_stcore/health answers (every 0.2 s, ``tries`` times at most)."""
    for _ in range(tries):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1)
            return True
        except OSError:
            time.sleep(0.2)
    return False


def run_args(port: int) -> list[str]:
    """``streamlit``'s arguments that serve this app on 127.0.0.1:``port``, headless."""
    return [
        "run",
        "app.py",
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
    ]


def start_app(
    root: Path,
    python: str | None = None,
    env: dict[str, str] | None = None,
    extra: list[str] | tuple[str, ...] = (),
) -> tuple[subprocess.Popen, int]:
    """The app of ``root`` served by ``python`` (default: this interpreter) with ``env`` added
    to this process's environment and ``extra`` Streamlit flags; (process, port), healthy."""
    port = free_port()
    proc = subprocess.Popen(
        [python or sys.executable, "-m", "streamlit", *run_args(port), *extra],
        cwd=root,
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_healthy(port)
    return proc, port
