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

    .venv/bin/python bench/profile_pages.py --browser [--pages budget,frontier,] [--repeat 3]
                                            [--compare CHECKOUT] [--floor]

``--browser`` instead splits a cold first render in Chromium (a new context, nothing cached,
on a server that has served every page once; bench/pages.py's "cold" visit) into its phases,
from the Chrome DevTools Protocol's Network events and the page's own clock: the HTML
received; Streamlit's JavaScript fetched and run until its websocket opens (with the health
and host-config checks before it); the run, from the websocket's opening to the server's
script_finished message; and the charts, from there to every chart drawn. Beside them: when
the frontend asked for the run, the first message, when the title showed, and when Plotly's
chunk was asked for and received; then per visit the files fetched before the websocket and
after it (how many, MiB, how many compressed or cached as immutable), the websocket's KiB
(the Plotly JSON among them), and the renderer's main-thread time (Performance.getMetrics);
then one more visit of each under V8's sampling profiler, its JavaScript filed by script file.
Last, the largest chunks the frontend loads on demand, each timed alone (fetch, then import:
compile and run) in a tab of Streamlit's smallest app. ``--floor`` adds three apps of
Streamlit's own, a title and a line, a title and one three-point chart, and that chart on a
page with a lesson page's kinds of element (bench/pages.py's st-lesson, opened at /lesson),
served with this app's .streamlit/config.toml: the least any page can take on this machine.
``--compare`` times another checkout too, the visits alternating page by page.
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

from pages import (  # noqa: E402  (beside this script)
    CHANGES,
    FLOOR_PATHS,
    floor_apps,
    keep_bytecode,
)

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


# -- the first render in the browser: where its time goes (--browser) ---------------------------

PHASES = (
    ("doc", "the page's HTML received (server's time to first byte and body)"),
    ("boot", "Streamlit's JavaScript fetched, run, health check answered: the websocket opens"),
    ("run", "websocket open to the server's script_finished message (the run, deltas drawn)"),
    ("charts", "script_finished to every chart drawn (Plotly's chunk loaded, run; plots drawn)"),
)


class Recorder:
    """What one tab fetched and received, on the browser's own clock (Chrome DevTools Protocol:
    Network events), from the document's request on."""

    def __init__(self, cdp):
        self.t0: float | None = None
        self.requests: dict[str, dict] = {}
        self.ws_open = self.first_frame = self.finished = self.asked = None
        self.ws_bytes = self.plotly_bytes = self.charts = self.ws_msgs = self.ws_largest = 0
        cdp.on("Network.requestWillBeSent", self._request)
        cdp.on("Network.responseReceived", self._response)
        cdp.on("Network.loadingFinished", self._done)
        cdp.on("Network.webSocketWillSendHandshakeRequest", self._ws)
        cdp.on("Network.webSocketFrameReceived", self._frame)
        cdp.on("Network.webSocketFrameSent", self._sent)

    def _at(self, ts: float) -> float:
        return ts - (self.t0 or ts)

    def _request(self, e) -> None:
        if self.t0 is None:
            self.t0 = e["timestamp"]
        self.requests[e["requestId"]] = {
            "url": e["request"]["url"],
            "start": self._at(e["timestamp"]),
        }

    def _response(self, e) -> None:
        r = self.requests.get(e["requestId"])
        if r is not None:
            headers = {k.lower(): v for k, v in e["response"]["headers"].items()}
            r["gzip"] = headers.get("content-encoding", "") in ("gzip", "br", "zstd")
            r["immutable"] = "immutable" in headers.get("cache-control", "")
            r["response"] = self._at(e["timestamp"])

    def _done(self, e) -> None:
        r = self.requests.get(e["requestId"])
        if r is not None:
            r["end"], r["bytes"] = self._at(e["timestamp"]), e["encodedDataLength"]

    def _ws(self, e) -> None:
        if self.ws_open is None:
            self.ws_open = self._at(e["timestamp"])

    def _sent(self, e) -> None:
        if self.asked is None:  # the frontend's first BackMsg: its request to run the page
            self.asked = self._at(e["timestamp"])

    def _frame(self, e) -> None:
        import base64

        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        at = self._at(e["timestamp"])
        if self.first_frame is None:
            self.first_frame = at
        payload = e["response"]["payloadData"]
        if e["response"]["opcode"] != 2:
            return
        data = base64.b64decode(payload)
        self.ws_bytes += len(data)
        self.ws_msgs += 1
        self.ws_largest = max(self.ws_largest, len(data))
        fm = ForwardMsg()
        try:
            fm.ParseFromString(data)
        except Exception:  # noqa: BLE001 - not a ForwardMsg
            return
        kind = fm.WhichOneof("type")
        if kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
            el = fm.delta.new_element
            if el.WhichOneof("type") == "plotly_chart":
                self.charts += 1
                self.plotly_bytes += len(el.plotly_chart.spec)
        elif kind == "script_finished" and self.finished is None:
            self.finished = at


# The charts drawn (as pages.DRAWN), noting when on the page's clock (ms from navigation start).
DRAWN_AT = (
    "(n) => { const ok = !document.querySelector('[data-testid=stStatusWidget]') &&"
    " [...document.querySelectorAll('.js-plotly-plot')].filter("
    "p => p.querySelector('.main-svg')).length >= n;"
    " if (ok && !window.__drawn) window.__drawn = performance.now(); return ok; }"
)


# When the page's title first shows (ms on the page's clock): what a student sees first.
TITLE_AT = (
    "new MutationObserver((_, obs) => { if (document.querySelector('[data-testid=stMain] h1'))"
    " { window.__title = performance.now(); obs.disconnect(); } })"
    ".observe(document, {subtree: true, childList: true});"
)


def _visit(page, rec, url: str) -> None:
    """Open ``url`` and wait for the title, the end of the run (``rec`` sees the script
    finish) and every chart the server sent being drawn."""
    page.goto(url)
    page.wait_for_selector("[data-testid=stMain] h1", timeout=60_000)
    deadline = time.time() + 60
    while rec.finished is None and time.time() < deadline:
        page.wait_for_timeout(10)
    page.wait_for_function(DRAWN_AT, arg=rec.charts, timeout=60_000, polling=10)


def _visit_recorded(browser, url: str) -> dict:
    """One cold visit (a new context: nothing cached) of ``url``, until every chart the
    server sent is drawn: its phases (ms from the document's request), what it fetched and
    received, and the renderer's main-thread time (Performance.getMetrics)."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    ctx.add_init_script(TITLE_AT)
    page = ctx.new_page()
    cdp = ctx.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send("Performance.enable")
    rec = Recorder(cdp)
    _visit(page, rec, url)
    drawn = page.evaluate("window.__drawn") / 1e3 if rec.charts else rec.finished
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    title = page.evaluate("window.__title") / 1e3
    ctx.close()
    return summarize(rec, drawn, title, metrics)


def summarize(rec: Recorder, drawn: float, title: float, metrics: dict) -> dict:
    """One visit's figures (seconds, counts, MiB, KiB) from what ``rec`` recorded, the charts'
    and the title's times and Performance.getMetrics' values. Files asked for before the
    websocket opened are the boot's; JavaScript asked for after it, the on-demand chunks."""
    reqs = list(rec.requests.values())
    doc = reqs[0]
    boot = [r for r in reqs[1:] if r["start"] < (rec.ws_open or 0) and "/static/" in r["url"]]
    later = [r for r in reqs if r["start"] >= (rec.ws_open or 0) and "/static/js/" in r["url"]]
    plotly = [r for r in later if "/PlotlyChart." in r["url"]]
    return {
        "doc": doc.get("end", 0),
        "boot": rec.ws_open,
        "run": rec.finished,
        "charts": drawn,
        "first frame": rec.first_frame,
        "asked": rec.asked,
        "title": title,
        "boot files": len(boot),
        "boot MiB": sum(r.get("bytes", 0) for r in boot) / 2**20,
        "boot gzip": sum(bool(r.get("gzip")) for r in boot),
        "immutable": sum(bool(r.get("immutable")) for r in boot),
        "later files": len(later),
        "later MiB": sum(r.get("bytes", 0) for r in later) / 2**20,
        "plotly asked": plotly[0]["start"] if plotly else None,
        "plotly got": plotly[0].get("end") if plotly else None,
        "ws KiB": rec.ws_bytes / 1024,
        "ws msgs": rec.ws_msgs,
        "largest KiB": rec.ws_largest / 1024,
        "plotly KiB": rec.plotly_bytes / 1024,
        "charts n": rec.charts,
        "main task": metrics.get("TaskDuration", 0),
        "main script": metrics.get("ScriptDuration", 0),
        "main layout": metrics.get("LayoutDuration", 0) + metrics.get("RecalcStyleDuration", 0),
    }


def _visit_profiled(browser, url: str) -> dict[str, float]:
    """One more cold visit of ``url`` under V8's sampling profiler (a sample every ms, on the
    renderer's main thread), until every chart is drawn: ms of JavaScript per script file,
    each function's own time filed under its file (``(program)``: the engine's own work,
    parsing and compiling among it; ``(idle)``: waiting)."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    cdp = ctx.new_cdp_session(page)
    cdp.send("Network.enable")
    rec = Recorder(cdp)
    cdp.send("Profiler.enable")
    cdp.send("Profiler.setSamplingInterval", {"interval": 1000})
    cdp.send("Profiler.start")
    _visit(page, rec, url)
    profile = cdp.send("Profiler.stop")["profile"]
    ctx.close()
    return self_ms_by_file(profile)


def self_ms_by_file(profile: dict) -> dict[str, float]:
    """A V8 CPU profile (Profiler.stop's) as ms of own time per script file, largest first; a
    sample's time is the gap to the next one (timeDeltas[i + 1])."""
    nodes = {n["id"]: n["callFrame"] for n in profile["nodes"]}
    gaps = profile["timeDeltas"][1:] + [0]
    out: dict[str, float] = collections.Counter()
    for node, gap in zip(profile["samples"], gaps):
        frame = nodes[node]
        name = frame["url"].rsplit("/", 1)[-1] or frame["functionName"] or "(program)"
        out[name] += gap / 1e3
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


# The frontend's largest chunks that load only when an element needs them, each alone in a tab of
# Streamlit's smallest app (which has loaded none of them): fetched, then imported (compiled and
# run; the fetch has just put it in the cache), as the frontend does for its first such element.
LAZY_CHUNKS = {
    "PlotlyChart": "st.plotly_chart",
    "StreamlitSyntaxHighlighter": "st.code, and code in Markdown",
    "arrowFormatUtils": "st.table and st.dataframe (Arrow)",
}
CHUNK_COST = """async (url) => {
  let t = performance.now();
  const body = await (await fetch(url)).arrayBuffer();
  const fetched = performance.now() - t;
  t = performance.now();
  await import(url);
  return [fetched, performance.now() - t, body.byteLength];
}"""


def _chunk(name: str) -> str:
    """The URL path of the frontend's chunk ``name`` in the installed Streamlit (the file's
    name carries a content hash)."""
    import streamlit

    js = Path(streamlit.__file__).parent / "static" / "static" / "js"
    return "/static/js/" + next(js.glob(f"{name}.*.js")).name


def browser_breakdown(paths: list[str], roots: dict[str, Path], repeat: int, floor: bool) -> None:
    """Where a cold first render's time goes, per page and checkout (medians of ``repeat``
    visits, alternating between checkouts page by page), then the largest chunks alone."""
    import tempfile

    from pages import launch, start_server
    from playwright.sync_api import sync_playwright

    tmp = tempfile.TemporaryDirectory()
    targets = [(name, root, p) for p in paths for name, root in roots.items()]
    floors = floor_apps(Path(tmp.name))
    if floor:
        targets += [(name, root, FLOOR_PATHS.get(name, "")) for name, root in floors.items()]
    apps = {t[0]: t[1] for t in targets} | {"st-minimal": floors["st-minimal"]}
    servers = {name: start_server(root) for name, root in apps.items()}
    got: dict = {}
    try:
        with sync_playwright() as pw:
            b = launch(pw)
            for name, _, path in targets:  # every page once: a server that has been up
                _visit_recorded(b, f"{servers[name][1]}/{path}")
            for _ in range(repeat):
                for name, _, path in targets:
                    got.setdefault((name, path), []).append(
                        _visit_recorded(b, f"{servers[name][1]}/{path}")
                    )
            profiles = {
                (name, path): _visit_profiled(b, f"{servers[name][1]}/{path}")
                for name, _, path in targets
            }
            chunks: dict[str, list] = {}
            for _ in range(repeat):
                for name in LAZY_CHUNKS:
                    ctx = b.new_context()
                    page = ctx.new_page()
                    page.goto(servers["st-minimal"][1] + "/")
                    page.wait_for_selector("[data-testid=stMain] h1", timeout=60_000)
                    page.wait_for_timeout(300)  # the run has ended: the main thread is idle
                    chunks.setdefault(name, []).append(page.evaluate(CHUNK_COST, _chunk(name)))
                    ctx.close()
            b.close()
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(10)
        tmp.cleanup()
    _print_breakdown(got, chunks, profiles)


def _print_breakdown(got: dict, chunks: dict, profiles: dict) -> None:
    def med(rows, key):
        vals = [r[key] for r in rows if r[key] is not None]
        return statistics.median(vals) if vals else float("nan")

    print(
        "\nfirst render in Chromium, cold (a new context: nothing cached), where the time goes: "
        "ms from the document's request to the end of each phase (the phase's own ms in "
        "brackets), medians"
    )
    for key, what in PHASES:
        print(f"  {key:<7}{what}")
    head = "".join(f"{k:>13}" for k, _ in PHASES)
    print(
        f"{'page':<16}{'checkout':<12}{head}{'run asked':>10}{'1st frame':>10}{'title':>6}"
        f"{'plotly asked':>13}{'got':>6}"
    )
    for (name, path), rows in got.items():
        ends = [med(rows, k) * 1e3 for k, _ in PHASES]
        cells = "".join(
            f"{e:>7.0f} ({e - (ends[i - 1] if i else 0):>4.0f})" for i, e in enumerate(ends)
        )
        print(
            f"{path or 'home':<16}{name:<12}{cells}{med(rows, 'asked') * 1e3:>10.0f}"
            f"{med(rows, 'first frame') * 1e3:>10.0f}"
            f"{med(rows, 'title') * 1e3:>6.0f}"
            f"{med(rows, 'plotly asked') * 1e3:>13.0f}{med(rows, 'plotly got') * 1e3:>6.0f}"
        )
    print(
        "\nwhat each visit fetched (files before the websocket, and JavaScript after it: count, "
        "MiB, how many compressed, cached as immutable) and received (websocket messages, KiB, "
        "the largest message's KiB, the Plotly JSON's), and the renderer's main thread (ms busy: "
        "all tasks, JavaScript, style and layout)"
    )
    print(
        f"{'page':<16}{'checkout':<12}{'boot files':>11}{'MiB':>6}{'gzip':>5}{'immut.':>7}"
        f"{'later files':>12}{'MiB':>6}{'ws msgs':>8}{'KiB':>6}{'largest':>8}{'plotly KiB':>11}"
        f"{'charts':>7}"
        f"{'main':>6}{'JS':>6}{'layout':>7}"
    )
    for (name, path), rows in got.items():
        print(
            f"{path or 'home':<16}{name:<12}{med(rows, 'boot files'):>11.0f}"
            f"{med(rows, 'boot MiB'):>6.2f}{med(rows, 'boot gzip'):>5.0f}"
            f"{med(rows, 'immutable'):>7.0f}{med(rows, 'later files'):>12.0f}"
            f"{med(rows, 'later MiB'):>6.2f}{med(rows, 'ws msgs'):>8.0f}{med(rows, 'ws KiB'):>6.1f}"
            f"{med(rows, 'largest KiB'):>8.1f}"
            f"{med(rows, 'plotly KiB'):>11.1f}{med(rows, 'charts n'):>7.0f}"
            f"{med(rows, 'main task') * 1e3:>6.0f}{med(rows, 'main script') * 1e3:>6.0f}"
            f"{med(rows, 'main layout') * 1e3:>7.0f}"
        )
    print(
        "\nJavaScript on the main thread by script file, one more cold visit under V8's "
        "sampling profiler (ms of own time until every chart is drawn; the largest six)"
    )
    for (name, path), files in profiles.items():
        top = ", ".join(f"{f} {ms:.0f}" for f, ms in list(files.items())[:6])
        print(f"  {path or 'home':<12}{name:<13}{top}")
    print(
        "\nthe largest chunks loaded on demand, each alone in a tab of Streamlit's smallest app "
        "(medians): ms to fetch, then ms of import() (compile and run, on the main thread)"
    )
    for name, rows in chunks.items():
        f, i, n = (statistics.median(c[j] for c in rows) for j in range(3))
        print(
            f"  {name:<28}{n / 2**20:>5.2f} MiB{f:>7.0f} ms fetch{i:>7.0f} ms import   "
            f"({LAZY_CHUNKS[name]})"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reruns", type=int, default=20)
    ap.add_argument("--interval-ms", type=float, default=0.5)
    ap.add_argument("--top", type=int, default=8, help="functions listed per page")
    ap.add_argument(
        "--browser",
        action="store_true",
        help="instead: where a cold first render's time goes in Chromium, per page",
    )
    ap.add_argument(
        "--pages",
        default="budget,frontier",
        help="with --browser: the pages by url path, comma separated (home is the empty one)",
    )
    ap.add_argument("--compare", metavar="CHECKOUT", help="with --browser: another checkout too")
    ap.add_argument("--repeat", type=int, default=3, help="with --browser: visits per page")
    ap.add_argument(
        "--floor",
        action="store_true",
        help="with --browser: also Streamlit's smallest apps (a title; a title and one chart)",
    )
    args = ap.parse_args()
    if not 1 <= args.reruns <= 500 or not 0.1 <= args.interval_ms <= 50:
        ap.error("reruns 1..500, interval-ms 0.1..50")
    if not 1 <= args.repeat <= 10:
        ap.error("repeat 1..10")
    if args.browser:
        roots = {"this": ROOT}
        if args.compare:
            if not (Path(args.compare) / "app.py").is_file():
                ap.error(f"{args.compare} has no app.py: give the folder of a checkout")
            roots["other"] = Path(args.compare).resolve()
        print(
            f"machine: {os.cpu_count()} cores, load average "
            f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
        )
        paths = [p.strip() for p in args.pages.split(",")]
        browser_breakdown(paths, roots, args.repeat, args.floor)
        return
    profile(args.reruns, args.interval_ms, args.top)


if __name__ == "__main__":
    main()
