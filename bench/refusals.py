"""How long the refusals and stops take whose unit tests assert behaviour, not seconds (issue 39,
item 9: a wall-time bound in a unit test is a flaky test on a loaded 2-core CI machine).

    .venv/bin/python bench/refusals.py              # every part this machine can run
    .venv/bin/python bench/refusals.py --repeat 5   # the median of 5 runs of each

Each line: what is timed, its median wall time (and CPU time of this process where the work is
in it), and the test that asserts what the time used to stand for:

1. a config refused by its size caps (tests/test_limits.py, tests/test_config_traps.py: the
   layers are never read): a 10,000,000 hidden size, a 199,000-layer pattern, 1,500
   layer_types, and a context over its cap (refused where it is read);
2. the head-sharing figure of 16,384 heads beside 128 (tests/test_diagrams.py: the same points);
3. ``simulate`` of about 5 x 10^8 steps refused from its estimate (tests/test_cli.py: the
   simulator never runs), and ``kv`` of the 199,000-layer pattern as a command, the
   interpreter's start included (tests/test_limits.py);
4. the Budget page's rerun with that pattern pasted (tests/test_limits.py), with Streamlit;
5. the device queue: a job past its 0.1 s cap, a running job cancelled (tests/test_device_queue.py:
   stopped at its first check past the cap, on the queue's clock);
6. the live class's store on a database that refuses connections: the first call and the next
   (tests/test_classroom_store.py: one connection attempt, then none); with PostgreSQL installed,
   a read behind another session's lock (the lock timeout ends it);
7. the bounded transformers check, with torch: a 600-layer config refused before a process, the
   check stopped at its 1 s limit, stopped by the caller at its 4th poll, and the worst input
   (tests/test_verify_bounded.py, tests/test_worst.py: killed, reaped, polls counted).

The figures depend on the machine and its load, printed with them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

REPEAT = 3


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (5 min {five:.1f}), {os.cpu_count()} cores"


def timed(fn, repeat: int | None = None) -> tuple[float, float]:
    """(median wall seconds, median CPU seconds of this process) of ``repeat`` calls of fn()."""
    wall, cpu = [], []
    for _ in range(repeat or REPEAT):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return statistics.median(wall), statistics.median(cpu)


def _ms(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s >= 0.01 else f"{s * 1e3:.3f} ms"


def show(what: str, wall: float, cpu: float | None = None, note: str = "") -> None:
    took = f"{_ms(wall):>11}" + (f" ({_ms(cpu)} CPU)" if cpu is not None else "")
    print(f"  {what:<58} {took}" + (f"  {note}" if note else ""), flush=True)


def refused(fn) -> None:
    try:
        fn()
    except ValueError:
        return
    raise SystemExit("expected a refusal, got none")


def config_caps() -> None:
    from conftest import llama_config

    from kvcalc import spec_from_config
    from kvcalc.config.hfconfig import load_config_file
    from kvcalc.config.limits import MAX_CONTEXT

    data = ROOT / "tests" / "data" / "configs"
    pattern = load_config_file(data / "nemotron-h-56b.json")
    pattern["hybrid_override_pattern"] = "M*" * 99_500
    pattern.pop("num_hidden_layers")
    types = load_config_file(data / "llama-3.1-8b.json")
    types["layer_types"] = ["full_attention"] * 1500
    types.pop("num_hidden_layers")
    print("1. configs refused by kvcalc.config.limits (spec_from_config)")
    for what, cfg in (
        ("hidden_size 10,000,000 (checked up front)", llama_config(hidden_size=10_000_000)),
        ("hybrid_override_pattern of 199,000 layers", pattern),
        ("layer_types of 1,500 layers", types),
        (
            "max_position_embeddings over its cap (where it is read)",
            llama_config(max_position_embeddings=MAX_CONTEXT + 1),
        ),
    ):
        show(what, *timed(lambda cfg=cfg: refused(lambda: spec_from_config(cfg))))


def figure() -> None:
    try:
        from webui import figures
    except ImportError as exc:
        print(f"2. skipped: {exc}")
        return
    print("2. the head-sharing figure (webui/figures/diagrams.py), built each time")
    build = getattr(figures.head_sharing_figure, "fn", figures.head_sharing_figure)  # not memo
    for q in (figures.MAX_DRAWN_HEADS, 16384):
        show(f"{q:,} query and K/V heads", *timed(lambda q=q: build(q, q, 1)))


def cli() -> None:
    from kvcalc.cli import main

    print("3. the command line")
    argv = [
        "simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--requests", "20000",
        "--rate", "inf", "--prompt-tokens", "16", "--output-tokens", "100000",
    ]  # fmt: skip
    import contextlib
    import io

    def run() -> None:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            assert main(argv) == 2

    show("simulate of ~5 x 10^8 steps, refused (in process)", *timed(run))
    cfg = json.loads((ROOT / "tests" / "data" / "configs" / "nemotron-h-56b.json").read_text())
    cfg["hybrid_override_pattern"] = "M*" * 99_500
    cfg.pop("num_hidden_layers", None)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.json"
        path.write_text(json.dumps(cfg))
        cmd = [sys.executable, "-m", "kvcalc", "kv", "--config", str(path), "--context", "4096"]
        wall, _ = timed(lambda: subprocess.run(cmd, capture_output=True, cwd=ROOT, timeout=120))
        show("python -m kvcalc kv, 199,000-layer pattern (a process)", wall)


def page() -> None:
    try:
        from conftest import open_page
    except ImportError as exc:
        print(f"4. skipped: {exc}")
        return
    cfg = json.loads((ROOT / "tests" / "data" / "configs" / "nemotron-h-56b.json").read_text())
    cfg["hybrid_override_pattern"] = "M*" * 99_500
    cfg.pop("num_hidden_layers", None)
    print("4. the Budget page (AppTest, server side)")
    import logging

    import streamlit.testing.v1  # noqa: F401  (its loggers exist from here)

    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").setLevel(
        logging.ERROR  # AppTest's own "missing ScriptRunContext" warning
    )
    at = open_page("app_pages/budget.py")
    at.sidebar.selectbox(key="model").set_value("my-config")
    at.run()
    at.sidebar.text_area(key="cfg_text").set_value(json.dumps(cfg))
    show("the first rerun with the 199,000-layer pattern pasted", *timed(at.run, 1))


def device_queue() -> None:
    from webui import device_queue as dq

    print("5. the device queue (webui/device_queue.py)")

    def until_stopped(should_stop):
        while not should_stop():
            time.sleep(0.005)
        raise ValueError("stopped")

    def capped() -> None:
        q = dq.DeviceQueue(cap_s=0.1, is_alive=lambda s: True)
        try:
            q.run("A", until_stopped, poll_s=0.01)
        except dq.QueueError:
            return
        raise SystemExit("the cap did not stop the job")

    show("a job past its 0.1 s cap, submit to error", timed(capped)[0])
    waits = []
    for _ in range(REPEAT):
        q = dq.DeviceQueue(is_alive=lambda s: True)
        job = q.submit("A", until_stopped)
        while job.state != "running":
            time.sleep(0.001)
        t = time.perf_counter()
        job.cancel()
        job.wait(30)
        waits.append(time.perf_counter() - t)
    show("a running job cancelled, cancel to done", statistics.median(waits))


def store() -> None:
    try:
        from webui.classroom.store import Limits, Store, Unavailable
    except ImportError as exc:
        print(f"6. skipped: {exc}")
        return
    print("6. the live class's store (webui/classroom/store.py)")
    first, second = [], []
    for _ in range(REPEAT):
        s = Store("postgresql://kvlab@127.0.0.1:1/none", limits=Limits())
        for took in (first, second):
            t = time.perf_counter()
            with contextlib.suppress(Unavailable):
                s.class_view("AB3K7M")
            took.append(time.perf_counter() - t)
        s.dispose()
    show("a database that refuses connections: first call", statistics.median(first))
    show("... the next call (known down)", statistics.median(second))
    sys.path.insert(0, str(ROOT / "deploy"))
    from pgtemp import TempPostgres, pg_bin

    if pg_bin() is None:
        print("  a read behind a lock: skipped, PostgreSQL is not installed")
        return
    import sqlalchemy as sa

    with TempPostgres() as pg:
        s = Store(pg.url, limits=Limits())
        c = s.create_class(1, "ip:t")
        blocker = sa.create_engine(pg.url)
        with blocker.connect() as conn:
            conn.exec_driver_sql("BEGIN")
            conn.exec_driver_sql("LOCK TABLE classroom_classes IN ACCESS EXCLUSIVE MODE")
            t = time.perf_counter()
            with contextlib.suppress(Unavailable):
                s.results(c.code, c.key)
            show("a read behind another session's lock (lock timeout 3 s)", time.perf_counter() - t)
            conn.exec_driver_sql("ROLLBACK")
        blocker.dispose()
        s.dispose()


def bounded_check() -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        print("7. skipped: torch is not installed (the [live] extra)")
        return
    import worst_inputs as W

    from kvcalc import load_config_file
    from kvcalc.measure.verify import verify_bounded

    print("7. the bounded transformers check (kvcalc/measure/verify.py), once each")
    llama = load_config_file(ROOT / "tests" / "data" / "configs" / "llama-3.1-8b.json")
    show(
        "600 layers, refused before a process",
        *timed(lambda: verify_bounded({**llama, "num_hidden_layers": 600}), 1),
    )
    show(
        "Llama 3.1 8B stopped at its 1 s limit, to reaped",
        *timed(lambda: verify_bounded(llama, timeout_s=1), 1),
    )
    calls = []

    def stop() -> bool:
        calls.append(1)
        return len(calls) > 3

    show(
        "... stopped by the caller at its 4th poll, to reaped",
        *timed(lambda: verify_bounded(llama, timeout_s=60, should_stop=stop), 1),
    )
    show(
        "the worst input (moe_at_caps), 3 s limit",
        *timed(lambda: verify_bounded(W.moe_at_caps(), timeout_s=3, memory_gib=4), 1),
    )


def main() -> None:
    global REPEAT
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs of each, the median printed")
    args = ap.parse_args()
    if not 1 <= args.repeat <= 50:
        ap.error("--repeat 1..50")
    REPEAT = args.repeat
    import logging

    for name in ("webui.classroom.store", "streamlit"):  # the refusals' own log lines
        logging.getLogger(name).setLevel(logging.CRITICAL)
    print(f"bench/refusals.py: median of {REPEAT} runs each; {_load()}")
    config_caps()
    figure()
    cli()
    page()
    device_queue()
    store()
    bounded_check()
    print(f"done; {_load()}")


if __name__ == "__main__":
    main()
