"""Where a rerun's time goes, per page: a sampling profile of the script thread, split into what
the time was spent on, and what the rerun sends to the browser.

    .venv/bin/python bench/profile_pages.py [--reruns 20] [--interval-ms 0.5] [--top 8]

Each page is opened in AppTest (the same script run a server does, without the websocket) and
rerun after one input change (bench/pages.py's CHANGES: the same input and values). A sampler
thread reads the script thread's stack every ``--interval-ms`` (Python's switch interval is
lowered to match, so the samples are not bunched at the default 5 ms switches) and files each
sample under the first of these that is on the stack, innermost first:

    kvcalc          a frame in kvcalc/ (the computation itself)
    figure build    a frame in webui/figures/ (our builders and the
                    plotly validation they call)
    plotly_chart    st.plotly_chart: the figure turned into a dict and JSON, the chart's id hashed
    st.table        pandas and pyarrow under a table element
    elements        any other Streamlit element or widget call (building and queueing protos)
    runtime         everything else in the run: the script runner, session state, page exec

and, separately, under where in the script it happened: the shared ``sidebar`` (its glossary
apart), the ``page`` script, the ``app.py`` frame around them, or ``outside`` the script
(the runner's own work before and after). Per page the report gives the median rerun (wall,
unprofiled), the share of each part, the bytes of the ForwardMsgs the rerun produced (what
the browser receives) with the Plotly JSON among them, the number of elements, and the
functions that took the most samples.

AppTest times the script run; the server's event loop (protobuf serialisation, websocket
frames) comes on top and is in bench/load.py's figures.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pages import CHANGES, keep_bytecode  # noqa: E402  (beside this script: pages.py's inputs)

WHAT = ("kvcalc", "figure build", "plotly_chart", "st.table", "elements", "runtime")
WHERE = ("sidebar", "glossary", "page", "app.py", "outside")


def _classify(frames: list[tuple[str, str]]) -> tuple[str, str]:
    """(what, where) of one sample; ``frames`` innermost first, as (file, function)."""
    what = "runtime"
    for path, _ in frames:
        p = path.replace(os.sep, "/")
        if "/kvcalc/" in p:
            what = "kvcalc"
            break
        if "/webui/figures/" in p:
            what = "figure build"
            break
        if p.endswith("streamlit/elements/plotly_chart.py"):
            what = "plotly_chart"
            break
        if "/pandas/" in p or "/pyarrow/" in p or p.endswith("streamlit/elements/arrow.py"):
            what = "st.table"
            break
    if what == "runtime" and any(
        "/streamlit/elements/" in p.replace(os.sep, "/") for p, _ in frames
    ):
        what = "elements"
    where = "outside"
    for path, func in reversed(frames):  # outermost first: the first script frame decides
        p = path.replace(os.sep, "/")
        if p.endswith("/webui/selection.py") and func == "sidebar":
            where = "sidebar"
            if any(q.endswith("/webui/selection.py") and f == "_glossary" for q, f in frames):
                where = "glossary"
            break
        if "/app_pages/" in p:
            where = "page"
            break
        if p.endswith("/app.py"):
            where = "app.py"
    return what, where


class Sampler:
    """Samples one thread's stack at a fixed interval while ``active``."""

    def __init__(self, interval_s: float):
        self.interval_s = interval_s
        self.tid: int | None = None
        self.active = False
        self.counts: collections.Counter = collections.Counter()
        self.funcs: collections.Counter = collections.Counter()
        self.lines: collections.Counter = collections.Counter()  # page or sidebar statement
        self._stop = False
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop:
            time.sleep(self.interval_s)
            if not self.active or self.tid is None:
                continue
            frame = sys._current_frames().get(self.tid)
            if frame is None:
                continue
            frames = []
            leaf = None
            statement = None  # the outermost line of a page (or of webui) on the stack
            while frame is not None:
                code = frame.f_code
                frames.append((code.co_filename, code.co_name))
                if "/app_pages/" in code.co_filename or (
                    statement is None and "/webui/" in code.co_filename
                ):
                    statement = f"{Path(code.co_filename).name}:{frame.f_lineno}"
                if leaf is None and not any(
                    s in code.co_filename
                    for s in ("/site-packages/", "/lib/python", "<frozen", "<string>")
                ):
                    leaf = f"{Path(code.co_filename).name}:{code.co_name}"
                frame = frame.f_back
            self.counts[_classify(frames)] += 1
            if statement:
                self.lines[statement] += 1
            inner = frames[0]
            self.funcs[
                (f"{Path(inner[0]).parent.name}/{Path(inner[0]).name}:{inner[1]}", leaf or "")
            ] += 1

    def stop(self) -> None:
        self._stop = True


def _install_hooks(sampler: Sampler, sizes: list, cpu: list):
    """Point the sampler at AppTest's script thread while a script runs, and record the size of
    the ForwardMsgs each run produced."""
    from streamlit.runtime.scriptrunner import script_runner
    from streamlit.testing.v1 import local_script_runner

    original_run = script_runner.ScriptRunner._run_script

    def run_script(self, rerun_data):
        sampler.tid = threading.get_ident()
        sampler.active = True
        t = time.thread_time()
        try:
            return original_run(self, rerun_data)
        finally:
            sampler.active = False
            cpu.append(time.thread_time() - t)

    script_runner.ScriptRunner._run_script = run_script
    original_parse = local_script_runner.parse_tree_from_messages

    def parse(messages):
        total = plotly = elements = 0
        for m in messages:
            total += m.ByteSize()
            if m.WhichOneof("type") == "delta" and m.delta.WhichOneof("type") == "new_element":
                elements += 1
                el = m.delta.new_element
                if el.WhichOneof("type") == "plotly_chart":
                    plotly += len(el.plotly_chart.spec)
        sizes.append((total, plotly, elements))
        return original_parse(messages)

    local_script_runner.parse_tree_from_messages = parse
    keep_bytecode()


def profile(reruns: int, interval_ms: float, top: int) -> None:
    from streamlit.testing.v1 import AppTest

    sys.setswitchinterval(interval_ms / 1e3)
    sampler = Sampler(interval_ms / 1e3)
    sizes: list = []
    cpu: list = []  # CPU seconds of each script run (its thread's own)
    _install_hooks(sampler, sizes, cpu)
    print(
        f"machine: {os.cpu_count()} cores, load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; {reruns} reruns per page, a "
        f"sample every {interval_ms:g} ms"
    )
    summary = []
    for page, (kind, key, values, in_sidebar, query) in CHANGES.items():
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
        for k, v in query.items():
            at.query_params[k] = v
        at.run()
        if page != "app_pages/home.py":
            at.switch_page(page)
            at.run()
        first = sizes[-1]
        # Unprofiled wall times first, then the same reruns sampled.
        walls = []
        del cpu[:]
        for i in range(reruns):
            root = at.sidebar if in_sidebar else at
            getattr(root, kind)(key=key).set_value(values[i % 2])
            t = time.perf_counter()
            at.run()
            walls.append(time.perf_counter() - t)
            assert not at.exception, at.exception
        cpu_ms = statistics.median(cpu) * 1e3
        sampler.counts.clear()
        sampler.funcs.clear()
        sampler.lines.clear()
        del sizes[:]
        for i in range(reruns):
            root = at.sidebar if in_sidebar else at
            getattr(root, kind)(key=key).set_value(values[i % 2])
            at.run()
        counts, funcs = dict(sampler.counts), sampler.funcs.most_common(top)
        lines = sampler.lines.most_common(top)
        n = sum(counts.values()) or 1
        total, plotly, elements = (statistics.median(x[j] for x in sizes) for j in range(3))
        what = {w: sum(c for (a, _), c in counts.items() if a == w) / n for w in WHAT}
        where = {w: sum(c for (_, b), c in counts.items() if b == w) / n for w in WHERE}
        med = statistics.median(walls) * 1e3
        summary.append((page, med, what, where, total, plotly, elements, first, cpu_ms))
        print(
            f"\n{page}: rerun median {med:.1f} ms wall, {cpu_ms:.1f} ms CPU (unprofiled), "
            f"{n} samples; sends "
            f"{total / 1024:.1f} KiB in {elements:.0f} elements (Plotly JSON "
            f"{plotly / 1024:.1f} KiB); first run {first[0] / 1024:.1f} KiB, "
            f"{first[2]} elements"
        )
        print("  on what: " + ", ".join(f"{w} {what[w]:.0%}" for w in WHAT))
        print("  where:   " + ", ".join(f"{w} {where[w]:.0%}" for w in WHERE))
        print("  the statements that took the most (the page's line, or the sidebar's):")
        for where_, c in lines:
            print(f"    {c / n:5.1%}  {where_}")
        print("  the functions that took the most (innermost frame, and our code it ran for):")
        for (func, ours), c in funcs:
            print(f"    {c / n:5.1%}  {func:<60} {('(from ' + ours + ')') if ours else ''}")
    sampler.stop()
    print(
        "\nsummary: CPU ms per rerun (the script thread's, median), split by what it was "
        "spent on (x the share of samples); wall ms; KiB sent, Plotly JSON among them"
    )
    print(
        f"{'page':<14}{'wall':>6}{'CPU':>6}"
        + "".join(f"{w[:12]:>13}" for w in WHAT)
        + f"{'sidebar':>9}{'KiB':>7}{'plotly':>8}"
    )
    for page, med, what, where, total, plotly, _, _, cpu_ms in summary:
        print(
            f"{Path(page).stem:<14}{med:>6.1f}{cpu_ms:>6.1f}"
            + "".join(f"{cpu_ms * what[w]:>13.1f}" for w in WHAT)
            + f"{cpu_ms * (where['sidebar'] + where['glossary']):>9.1f}"
            f"{total / 1024:>7.1f}{plotly / 1024:>8.1f}"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reruns", type=int, default=20)
    ap.add_argument("--interval-ms", type=float, default=0.5)
    ap.add_argument("--top", type=int, default=8, help="functions listed per page")
    args = ap.parse_args()
    if not 1 <= args.reruns <= 500 or not 0.1 <= args.interval_ms <= 50:
        ap.error("reruns 1..500, interval-ms 0.1..50")
    profile(args.reruns, args.interval_ms, args.top)


if __name__ == "__main__":
    main()
