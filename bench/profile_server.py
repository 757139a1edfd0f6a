"""Where one server's CPU goes under load, by thread and by part of Streamlit (issue 27).

    .venv/bin/python bench/profile_server.py [--sessions 20] [--seconds 30] [--think 0]

bench/profile_pages.py samples the script thread in AppTest, which has no websocket; this starts
the real server (the same ``streamlit run app.py`` as bench/load.py, in a process whose
Streamlit functions below are wrapped to add up their own thread's CPU time, time.thread_time,
which a thread waiting for the GIL does not spend) and puts bench/load.py's sessions on it. It
prints, per script run and per interaction (one input change: load.py's cycle is a page switch,
a full run, and then two changes, each a page-only fragment run):

- the script thread's runs, full (the frame, the sidebar and the page) and fragment (the page);
- the event loop's share: each ForwardMsg handed over from the script thread
  (AppSession._handle_scriptrunner_event_on_event_loop, which includes the new_session
  message built at the start of every run), serialising and queueing it for the websocket
  (Runtime._send_message), and each BackMsg (AppSession.handle_backmsg);
- what is left: the process's CPU (user + system) that no wrapped function took (uvicorn, the
  websocket frames, asyncio, the other threads).

The wrappers cost a few microseconds a call (about 60 messages a run), so the totals are a little
above bench/load.py's own "ms per interaction"; the split is the figure of interest.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (module, Class.method): the parts measured, each its own thread's CPU time, not nested twice
WRAPPED = (
    ("streamlit.runtime.scriptrunner.script_runner", "ScriptRunner._run_script"),
    ("streamlit.runtime.app_session", "AppSession._handle_scriptrunner_event_on_event_loop"),
    ("streamlit.runtime.app_session", "AppSession._create_new_session_message"),
    ("streamlit.runtime.app_session", "AppSession.handle_backmsg"),
    ("streamlit.runtime.runtime", "Runtime._send_message"),
)


def _serve(port: int, out: str) -> None:
    """In the server's process: wrap WRAPPED, dump the sums to ``out`` on SIGUSR1, run the app."""
    import importlib
    import threading
    from collections import defaultdict

    sums: dict[str, list] = defaultdict(lambda: [0, 0.0])
    inside = threading.local()

    def wrap(module: str, qual: str) -> None:
        owner_name, name = qual.split(".")
        owner = getattr(importlib.import_module(module), owner_name)
        f = getattr(owner, name)

        def timed(*a, **k):
            key = qual
            if name == "_run_script":  # a fragment run carries the fragments it reruns
                rerun = a[1] if len(a) > 1 else k.get("rerun_data")
                key += ".fragment" if getattr(rerun, "fragment_id_queue", None) else ".full"
            depth = getattr(inside, qual, 0)
            setattr(inside, qual, depth + 1)
            t = time.thread_time()
            try:
                return f(*a, **k)
            finally:
                setattr(inside, qual, depth)
                if depth == 0:
                    s = sums[key]
                    s[0] += 1
                    s[1] += time.thread_time() - t

        setattr(owner, name, timed)

    def dump(*_) -> None:
        user, system = os.times()[:2]
        data = {k: list(v) for k, v in sums.items()}
        Path(out).write_text(json.dumps({"sums": data, "process_cpu_s": user + system}))

    for module, qual in WRAPPED:
        wrap(module, qual)
    signal.signal(signal.SIGUSR1, dump)
    from streamlit.web import cli

    sys.path.insert(0, str(Path(__file__).parent))
    from serve import run_args

    sys.argv = ["streamlit", *run_args(port)]
    os.chdir(ROOT)
    sys.exit(cli.main())


def _snapshot(proc: subprocess.Popen, out: Path) -> dict:
    """The server's sums now (it writes them on SIGUSR1)."""
    out.unlink(missing_ok=True)
    proc.send_signal(signal.SIGUSR1)
    for _ in range(200):
        if out.exists() and out.stat().st_size:
            time.sleep(0.05)  # the write is one call; let it finish
            return json.loads(out.read_text())
        time.sleep(0.05)
    raise RuntimeError("the server wrote no figures within 10 s")


def breakdown(before: dict, after: dict, interactions: int) -> list[str]:
    """The report's lines from two snapshots and the interactions between them."""

    def delta(key: str) -> tuple[int, float]:
        a, b = before["sums"].get(key, [0, 0.0]), after["sums"].get(key, [0, 0.0])
        return b[0] - a[0], b[1] - a[1]

    cpu = after["process_cpu_s"] - before["process_cpu_s"]
    full, frag = delta("ScriptRunner._run_script.full"), delta("ScriptRunner._run_script.fragment")
    runs = full[0] + frag[0]
    handle = delta("AppSession._handle_scriptrunner_event_on_event_loop")
    new_session = delta("AppSession._create_new_session_message")
    back = delta("AppSession.handle_backmsg")
    send = delta("Runtime._send_message")
    if not runs or not interactions:
        return ["no script ran: nothing to split"]
    rest = cpu - full[1] - frag[1] - handle[1] - back[1] - send[1]
    rows = [
        ("script thread: full runs (frame, sidebar, page)", full),
        ("script thread: page-only (fragment) runs", frag),
        ("event loop: messages from the script thread", (handle[0], handle[1] - new_session[1])),
        ("event loop: the new_session message of each run", new_session),
        ("event loop: serialise and queue for the websocket", send),
        ("event loop: browser messages (BackMsg)", back),
        ("the rest: uvicorn, websocket frames, asyncio, other threads", (0, rest)),
    ]
    lines = [
        f"{interactions:,} interactions, {runs:,} script runs ({full[0]:,} full, {frag[0]:,} "
        f"fragment), {send[0] / runs:.1f} messages a run; server CPU {cpu:.2f} s = "
        f"{cpu / interactions * 1e3:.1f} ms per interaction, {cpu / runs * 1e3:.1f} ms per run",
        "",
        "| part | calls | ms per interaction | share | per call |",
        "|---|---|---|---|---|",
    ]
    for label, (n, t) in rows:
        per_call = f"{t / n * 1e6:,.1f} µs" if n else ""
        lines.append(
            f"| {label} | {n:,} | {t / interactions * 1e3:.2f} | {t / cpu:.0%} | {per_call} |"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--think", type=float, default=0.0)
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # internal: the server's port
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        _serve(args.serve, args.out)
        return

    sys.path.insert(0, str(Path(__file__).parent))
    from load import run_load, summarize
    from serve import free_port, wait_healthy

    port = free_port()
    out = Path(tempfile.mkdtemp()) / "sums.json"
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port), "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_healthy(port)
        url = f"ws://127.0.0.1:{port}/_stcore/stream"
        # warm-up (every page once, imports and caches), then the measured load
        asyncio.run(run_load(url, None, 2, 5, 0.0))
        before = _snapshot(proc, out)
        sessions, _, elapsed = asyncio.run(
            run_load(url, None, args.sessions, args.seconds, args.think)
        )
        after = _snapshot(proc, out)
    finally:
        proc.terminate()
        proc.wait(10)
    f = summarize(sessions, elapsed)
    print(
        f"{args.sessions} sessions for {elapsed:.0f} s, think {args.think:g} s: "
        f"{f['interactions']:,} interactions ({f['interactions'] / elapsed:.1f}/s), "
        f"{len(f['errors'])} errors, p95 {f['p95_s'] * 1e3:.0f} ms"
    )
    for line in breakdown(before, after, f["interactions"]):
        print(line)


if __name__ == "__main__":
    main()
