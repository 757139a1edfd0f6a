"""Page speed: median rerun after one input change (AppTest, server side) and first render in a
real browser (Chromium), for every page.

    .venv/bin/python bench/pages.py [--reruns 15] [--no-browser] [--repeat 3] [--cold-server]
    .venv/bin/python bench/pages.py --compare /tmp/previous   # a checkout beside this one
    .venv/bin/python bench/pages.py --hostile
    .venv/bin/python bench/pages.py --floor   # Streamlit's smallest apps too, the same way

``--hostile`` times instead one fresh session of every page opened with its worst link
(bench/worst_links.py), three times each: issue 11's budget is about 0.5 s per rerun. Then the
worst-input corpus (tests/worst_inputs.py: the largest configs kvcalc's caps admit), pasted on
every page and given to the CLI commands: per page or command, the slowest config's seconds
per rerun (median of 3) and the MiB of RSS this process kept after them all (after gc);
``--matrix`` prints every config's row too.

``--compare`` gives the same figures for another checkout (e.g. ``git archive`` of the previous
commit): its reruns in a process of its own, its server beside this one's, the browser's
visits alternating between the two page by page so that the machine's other load falls on
both alike.

Targets (issue 27): every rerun under 100 ms on a 2-core machine, first render under 1.5 s.
AppTest times the script run on the server, the script compiled once as a server does
(AppTest compiles app.py and the page anew for every run: 10-20 ms a server never spends).
The browser figure is from navigation start to the title and the end of the run ("idle", the
condition of issue 3) and to every chart the server sent being drawn ("drawn"): a Plotly
chart's element only appears once Plotly's script (4.7 MB) is loaded and evaluated, so "idle"
is reached before any chart is on the screen.

``--floor`` times Streamlit's two smallest apps beside the first page, in the same visits (a
title and a line; a title and one three-point Plotly chart), with this app's settings: what
no page of any Streamlit app can beat on this machine; and a third, st-lesson, the same chart
on a page of a three-section menu with one or two of each element a lesson page has (a
selectbox in the sidebar, two metrics, a number input, a caption), opened at its own path:
what Streamlit's own elements cost before this app adds anything. Each page's cold render is
printed over both ("x chart", issue 42's ratio, and "x lesson"). ``--floor-parts`` adds the
one-chart app with one kind of element more each (FLOOR_PARTS): what each kind costs. Where a
first render's time goes is bench/profile_pages.py --browser.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from serve import start_app  # beside this script

ROOT = Path(__file__).resolve().parent.parent  # kvcalc and webui: the installed package

# page: (widget kind, key, values to alternate between, in the sidebar?, link parameters)
CHANGES = {
    "app_pages/home.py": ("selectbox", "kvdtype", ["fp8", "bf16"], True, {}),
    "app_pages/budget.py": ("number_input", "b_ctx", [32768, 8192], False, {}),
    "app_pages/step_time.py": ("number_input", "s_batch", [32, 1], False, {}),
    "app_pages/techniques.py": ("number_input", "t_ctx", [65536, 32768], False, {}),
    "app_pages/lab.py": ("number_input", "l_ctx", [65536, 8192], False, {}),
    "app_pages/cache_fill.py": ("number_input", "f_new", [40, 20], False, {}),
    "app_pages/engine.py": ("number_input", "e_step", [12, 4], False, {}),
    "app_pages/interview.py": ("number_input", "i_seed", [2, 1], False, {"i_mode": "Practice"}),
    "app_pages/roofline.py": ("number_input", "r_batch", [256, 32], False, {}),
    "app_pages/frontier.py": ("number_input", "fr_output", [128, 256], False, {}),
    "app_pages/tour.py": ("radio", "stop", [3, 1], False, {}),
}


def hostile_links(repeats: int = 3) -> None:
    """One fresh session per visit, opened with the page's worst link; the page's run time."""
    from urllib.parse import parse_qsl

    from streamlit.testing.v1 import AppTest
    from worst_links import WORST_LINKS  # beside this script

    print(f"worst link of each page, {repeats} fresh sessions each (AppTest, server side)")
    for path, query in WORST_LINKS.items():
        page = f"app_pages/{path or 'home'}.py"
        times = []
        for _ in range(repeats):
            at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
            for k, v in parse_qsl(query, keep_blank_values=True):
                at.query_params[k] = v
            t = time.perf_counter()
            at.run()
            if page != "app_pages/home.py":
                at.switch_page(page)
                t = time.perf_counter()
                at.run()
            times.append(time.perf_counter() - t)
            problems = [e.value for e in at.exception]
        print(
            f"  {page:<28} max {max(times) * 1e3:7.0f} ms   median "
            f"{statistics.median(times) * 1e3:7.0f} ms"
            + (f"   EXCEPTION {problems[:1]}" if problems else "")
        )


def _rss_mib() -> float:
    """This process's resident memory now, MiB (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError):
        return 0.0


def _kept(before: float) -> float:
    import gc

    gc.collect()
    return _rss_mib() - before


def worst_inputs(repeats: int = 3, matrix: bool = False) -> None:
    """The worst-input corpus on every page (a fresh session each, the config pasted) and
    through the CLI's kv, budget, vllm and simulate (in this process)."""
    import gc
    import tempfile

    sys.path.insert(0, str(ROOT / "tests"))
    import worst_inputs as W  # the corpus lives with the tests

    from kvcalc.cli import main as cli

    corpus = W.texts()
    gc.collect()
    print(
        f"\nworst-input corpus: {len(corpus)} configs (the largest the caps admit) on every "
        "page and CLI command; seconds per rerun, median of "
        f"{repeats} (wall; the slowest config), MiB of RSS kept after them all"
    )
    print(
        f"{'page or command':<16}{'s/rerun':>9}{'CPU s':>8}{'MiB kept':>10}  slowest config"
        "  problems"
    )
    for page in W.PAGES:
        before = _rss_mib()
        rows = []
        for name, text in corpus.items():
            at = W.open_with(text, page)
            wall, cpu = W.rerun_seconds(at, repeats)
            rows.append((wall, cpu, name, W.generic_errors(at)))
            del at
        kept = _kept(before)
        if matrix:
            for wall, cpu, name, problems in rows:
                print(
                    f"  {page:<14}{wall:>9.3f}{cpu:>8.3f}{'':>10}  {name}"
                    + (f"  {problems[:1]}" if problems else "")
                )
        wall, cpu, name, _ = max(rows)
        bad = sum(1 for r in rows if r[3])
        print(
            f"{page:<16}{wall:>9.3f}{cpu:>8.3f}{kept:>10.1f}  {name:<21}"
            + (f"  {bad} with a generic error" if bad else "")
        )
    args = {
        "kv": ["--context", "100000000", "--batch", "1000000"],
        "budget": ["--gpu", "h100-sxm-80gb", "--context", "100000000"],
        "vllm": ["--available-kv-gib", "40", "--max-model-len", "100000000"],
        "simulate": [
            "--gpu",
            "h100-sxm-80gb",
            "--requests",
            "2000",
            "--rate",
            "inf",
            "--prompt-tokens",
            "4096",
            "--output-tokens",
            "1024",
        ],
    }
    import contextlib
    import io

    with tempfile.TemporaryDirectory() as tmp:
        for name, text in corpus.items():
            Path(tmp, f"{name}.json").write_text(text)
        for command, extra in args.items():
            before = _rss_mib()
            rows = []
            for name in corpus:
                times, cpus, codes = [], [], set()
                for _ in range(repeats):
                    out, err = io.StringIO(), io.StringIO()
                    t, c = time.perf_counter(), time.process_time()
                    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                        codes.add(
                            cli([command, "--config", str(Path(tmp, f"{name}.json")), *extra])
                        )
                    times.append(time.perf_counter() - t)
                    cpus.append(time.process_time() - c)
                bad = codes - {0, 2} or "internal error" in err.getvalue()
                rows.append((statistics.median(times), statistics.median(cpus), name, bad))
            kept = _kept(before)
            wall, cpu, name, _ = max(rows)
            bad = sum(1 for r in rows if r[3])
            print(
                f"{'cli ' + command:<16}{wall:>9.3f}{cpu:>8.3f}{kept:>10.1f}  {name:<21}"
                + (f"  {bad} internal errors" if bad else "")
            )


def keep_bytecode() -> None:
    """Compile each script once, as a server does: AppTest makes a new ScriptCache for every
    run, so it parses and compiles app.py and the page again each time (10-20 ms of a rerun
    that a server never spends)."""
    from streamlit.runtime.scriptrunner import script_cache

    if getattr(script_cache.ScriptCache, "_bench_shared", False):
        return
    shared: dict = {}
    original = script_cache.ScriptCache.get_bytecode

    def get_bytecode(self, script_path):
        key = os.path.abspath(script_path)
        stamp = os.stat(key).st_mtime_ns
        got = shared.get(key)
        if got is None or got[0] != stamp:
            got = shared[key] = (stamp, original(self, script_path))
        return got[1]

    script_cache.ScriptCache.get_bytecode = get_bytecode
    script_cache.ScriptCache._bench_shared = True


def apptest_reruns(reruns: int, compile_each_run: bool = False) -> dict[str, list[float]]:
    from streamlit.testing.v1 import AppTest

    if not compile_each_run:
        keep_bytecode()

    out = {}
    for page, (kind, key, values, in_sidebar, query) in CHANGES.items():
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
        for k, v in query.items():
            at.query_params[k] = v
        at.run()
        if page != "app_pages/home.py":
            at.switch_page(page)
            at.run()
        times = []
        for i in range(reruns):
            root = at.sidebar if in_sidebar else at
            getattr(root, kind)(key=key).set_value(values[i % 2])
            t = time.perf_counter()
            at.run()
            times.append(time.perf_counter() - t)
            assert not at.exception, at.exception
        out[page] = times
    return out


TITLES = {
    "": "Home",
    "budget": "Budget",
    "step_time": "Decode step time",
    "techniques": "Shrinking the cache",
    "lab": "Inference Lab",
    "cache_fill": "Cache fill",
    "engine": "Engine view",
    "interview": "Interview check",
    "roofline": "Roofline",
    "frontier": "Serving frontier",
    "tour": "tour",  # "Guided tour" now, "Start here: a tour" before the two paths
}
HEADINGS = {
    "": "KV Cache Lab",
    "budget": "Budget",
    "step_time": "Decode",
    "techniques": "Shrinking",
    "lab": "Inference",
    "cache_fill": "Cache fill",
    "engine": "Engine view",
    "interview": "Interview",
    "roofline": "Roofline",
    "frontier": "Throughput and latency",
    "tour": "Start here",
}
# Today's condition (issue 3): the run has ended and every chart element has its SVG. A chart's
# element only exists once Plotly's script (4.7 MB) has been loaded and evaluated, so until then
# this holds with no chart at all: it times the page without its charts.
IDLE = (
    "() => !document.querySelector('[data-testid=stStatusWidget]') &&"
    " document.querySelectorAll('.js-plotly-plot .main-svg').length >="
    " document.querySelectorAll('[data-testid=stPlotlyChart]').length"
)
# And the charts drawn: as many Plotly plots with their SVG as the server sent charts.
DRAWN = (
    "(n) => !document.querySelector('[data-testid=stStatusWidget]') &&"
    " [...document.querySelectorAll('.js-plotly-plot')].filter("
    "p => p.querySelector('.main-svg')).length >= n"
)


# The two smallest apps Streamlit serves, timed like the pages (--floor): the least a page can
# take on this machine, with no chart and with one.
FLOOR_APPS = {
    "st-minimal": 'import streamlit as st\nst.title("Minimal")\nst.write("One line of text.")\n',
    "st-one-chart": (
        "import plotly.graph_objects as go\nimport streamlit as st\n"
        'st.title("One chart")\n'
        "st.plotly_chart(go.Figure(go.Scatter(x=[1, 2, 3], y=[1, 3, 2])))\n"
    ),
    # The same chart on a page that has what every lesson page has, each kind of element once
    # or twice: the header's menu of three sections, a selectbox in the sidebar, two metrics,
    # a number input and a caption, opened by its own link (/lesson, not the app's root: the
    # frontend first looks for the server under the page's path and waits 100 ms after the
    # 404 before it tries the root). What Streamlit's own elements cost a page of this app.
    "st-lesson": (
        "import plotly.graph_objects as go\nimport streamlit as st\n\n\n"
        "def lesson():\n"
        '    st.sidebar.selectbox("Model", ["A", "B", "C"], key="m")\n'
        '    st.title("One chart")\n'
        "    c = st.columns(2)\n"
        '    c[0].metric("Per token", "128.00 KiB", help="a help icon, as ours have")\n'
        '    c[1].metric("One sequence", "1.00 GiB")\n'
        '    st.number_input("Context (tokens)", 1, 10_000_000, 8192, 1024, key="n")\n'
        '    st.caption("A caption.")\n'
        "    st.plotly_chart(go.Figure(go.Scatter(x=[1, 2, 3], y=[1, 3, 2])))\n\n\n"
        "def other():\n"
        '    st.title("Other")\n\n\n'
        "def p(title, path, default=False):\n"
        "    return st.Page(other, title=title, url_path=path, default=default)\n\n\n"
        "menu = {\n"
        '    "Learn": [p("Home", "home", True)]\n'
        '    + [st.Page(lesson, title="Lesson", url_path="lesson")]\n'
        '    + [p(f"Learn {i}", f"l{i}") for i in range(8)],\n'
        '    "Engineer": [p(f"Engineer {i}", f"e{i}") for i in range(5)],\n'
        '    "Measure": [p(f"Measure {i}", f"m{i}") for i in range(3)],\n'
        "}\n"
        'st.navigation(menu, position="top").run()\n'
    ),
}
# The page of a floor app the visits open: its root unless named here.
FLOOR_PATHS = {"st-lesson": "lesson"}

# --floor-parts: the one-chart app with one kind of element more each, at its root, to say what
# each kind costs a cold render (its chunks of JavaScript fetched, compiled and run).
_CHART = "st.plotly_chart(go.Figure(go.Scatter(x=[1, 2, 3], y=[1, 3, 2])))\n"
_PARTS = {
    "+selectbox": 'st.sidebar.selectbox("Model", ["A", "B", "C"], key="m")\n',
    "+6 selectboxes": "for i in range(6):\n"
    '    st.sidebar.selectbox(f"Choice {i}", ["A", "B", "C"], key=f"s{i}")\n',
    "+number input": 'st.number_input("Context (tokens)", 1, 10_000_000, 8192, 1024, key="n")\n',
    "+2 metrics": 'c = st.columns(2)\nc[0].metric("Per token", "128.00 KiB", help="a help")\n'
    'c[1].metric("One sequence", "1.00 GiB")\n',
    "+radio": 'st.radio("Mode", ["KV cache", "No cache"], horizontal=True, key="r")\n',
    "+segmented": 'st.segmented_control("Or in one move", ["4K", "8K"], key="g")\n',
    "+slider": 'st.slider("Share", 0.05, 1.0, 0.9, 0.01, key="u")\n',
    "+multiselect": 'st.multiselect("Compare with", ["A", "B", "C"], key="c")\n',
    "+second chart": _CHART.replace("))\n", '), key="second")\n'),
}
FLOOR_PARTS = {
    name: 'import plotly.graph_objects as go\nimport streamlit as st\nst.title("One chart")\n'
    + code
    + _CHART
    for name, code in _PARTS.items()
}


def floor_apps(folder: Path, parts: bool = False) -> dict[str, Path]:
    """FLOOR_APPS (and FLOOR_PARTS with ``parts``) written out under ``folder``, each in a
    folder of its own with this app's .streamlit/config.toml (the same server and client
    settings)."""
    out = {}
    for name, code in (FLOOR_APPS | (FLOOR_PARTS if parts else {})).items():
        app = folder / name
        (app / ".streamlit").mkdir(parents=True)
        shutil.copy(ROOT / ".streamlit" / "config.toml", app / ".streamlit" / "config.toml")
        (app / "app.py").write_text(code)
        out[name] = app
    return out


def start_server(root: Path) -> tuple[subprocess.Popen, str]:
    """The app of ``root`` on a free port (bench/serve.py), and its base URL."""
    proc, port = start_app(root)
    return proc, f"http://127.0.0.1:{port}"


class _Charts:
    """Counts the charts the server sends a tab (its websocket messages, as the browser
    receives them) and notes when the run ends."""

    def __init__(self, page):
        self.charts, self.finished = 0, False
        page.on("websocket", lambda ws: ws.on("framereceived", self._frame))

    def reset(self) -> None:
        self.charts, self.finished = 0, False

    def _frame(self, payload) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        if not isinstance(payload, bytes):
            return
        fm = ForwardMsg()
        try:
            fm.ParseFromString(payload)
        except Exception:  # noqa: BLE001 - not a ForwardMsg: nothing to count
            return
        kind = fm.WhichOneof("type")
        if (
            kind == "delta"
            and fm.delta.WhichOneof("type") == "new_element"
            and fm.delta.new_element.WhichOneof("type") == "plotly_chart"
        ):
            self.charts += 1
        elif kind == "script_finished":
            self.finished = True


def _until_drawn(page, charts: _Charts) -> None:
    deadline = time.time() + 60
    while not charts.finished:
        if time.time() > deadline:
            raise TimeoutError("the run did not finish within 60 s")
        page.wait_for_timeout(10)
    page.wait_for_function(DRAWN, arg=charts.charts, timeout=60_000)


def open_from_menu(page, title: str) -> None:
    """Click the menu entry ``title`` as a person does: in the header's menu (Learn, Engineer,
    Measure: open the section that holds it) or, in a tree from before the two paths, in the
    sidebar's list of pages."""
    side = page.locator("[data-testid=stSidebarNav] a", has_text=title)
    if side.count():
        side.first.click()
        return
    sections = page.locator("[data-testid=stTopNavSection]")
    for i in range(sections.count()):
        sections.nth(i).click()
        link = page.locator("[data-testid=stTopNavDropdownLink]", has_text=title)
        try:
            link.first.wait_for(state="visible", timeout=3_000)
        except Exception:  # not in this section: close it and try the next
            page.keyboard.press("Escape")
            continue
        link.first.click()
        return
    raise AssertionError(f"no menu entry {title!r}")


def launch(playwright):
    """The system's Chromium, headless, with nothing of its own on the network."""
    return playwright.chromium.launch(
        executable_path=shutil.which("chromium") or "/usr/bin/chromium",
        args=[
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ],
    )


def browser_first_render(
    paths: list[str],
    roots: dict[str, Path],
    repeat: int = 1,
    warm_server: bool = True,
    floor: dict[str, Path] | None = None,
) -> dict[str, dict[str, dict[str, list]]]:
    """Per checkout and page: {"cold": [(idle, drawn) per repeat], "warm": [...], "click":
    [round 1, round 2]} in seconds. Cold: a fresh browser context (nothing cached, as a
    student's first visit). Warm: a new tab in a context that has loaded the app before.
    Idle: today's condition (title, run ended; charts not waited for, see IDLE); drawn: every
    chart the server sent has been drawn too. Click: switching to the page in the sidebar of
    an open tab, until drawn. With several checkouts, their visits alternate page by page.

    ``warm_server``: every page is opened once (in a context of its own) before the timing, as
    on a server that has been up for a while: the first visit of a page after a restart also
    computes what every later visitor gets from the memo (the frontier's simulation: about a
    second).

    ``floor``: more apps (FLOOR_APPS), their one page visited in the same way, cold and warm,
    beside each checkout's first page; out[name]["home"]."""
    from playwright.sync_api import sync_playwright

    floor = floor or {}
    servers = {name: start_server(root) for name, root in {**roots, **floor}.items()}
    out = {n: {p or "home": {"cold": [], "warm": [], "click": []} for p in paths} for n in roots}
    out |= {n: {"home": {"cold": [], "warm": [], "click": []}} for n in floor}
    try:
        with sync_playwright() as p:
            b = launch(p)

            def visit(context, base, path, drawn: bool) -> tuple[float, float]:
                page = context.new_page()
                charts = _Charts(page)
                t = time.perf_counter()
                page.goto(f"{base}/{path}")
                page.wait_for_selector("[data-testid=stMain] h1", timeout=60_000)
                page.wait_for_timeout(200)  # let the run start before waiting for it to end
                page.wait_for_function(IDLE, timeout=60_000)
                idle = time.perf_counter() - t
                if drawn:
                    _until_drawn(page, charts)
                dt = time.perf_counter() - t
                page.close()
                return idle, dt

            warm = {}
            for name, (_, base) in servers.items():
                # One warm-up visit so the server's module imports are not charged to a page.
                page = b.new_page()
                page.goto(base + "/")
                page.wait_for_selector(
                    "[data-testid=stMain] h1" if name in floor else "[data-testid=stMetric]",
                    timeout=60_000,
                )
                page.close()
                if warm_server:
                    for path in [FLOOR_PATHS.get(name, "")] if name in floor else paths:
                        ctx = b.new_context()
                        visit(ctx, base, path, drawn=True)
                        ctx.close()
                warm[name] = b.new_context(viewport={"width": 1400, "height": 1000})
                visit(warm[name], base, "", drawn=True)  # this context caches the static files
            for _ in range(repeat):
                for path in paths:
                    for name, (_, base) in servers.items():
                        if name in floor and path != paths[0]:
                            continue  # the floor's one page, beside the first page
                        at = FLOOR_PATHS.get(name, "") if name in floor else path
                        cold_ctx = b.new_context(viewport={"width": 1400, "height": 1000})
                        key = "home" if name in floor else at or "home"
                        out[name][key]["cold"].append(visit(cold_ctx, base, at, drawn=True))
                        cold_ctx.close()
                        out[name][key]["warm"].append(visit(warm[name], base, at, drawn=True))
            # In-app navigation: one tab, click each page in the sidebar (the JavaScript, Plotly
            # included, is already loaded; this is what a student waits for between pages).
            for name, (_, base) in servers.items():
                if name in floor:
                    continue
                page = warm[name].new_page()
                charts = _Charts(page)
                page.goto(base + "/")
                page.wait_for_selector("[data-testid=stMetric]", timeout=60_000)
                for _ in range(2):  # two rounds: the first has one-off loads
                    for path in paths[1:] + paths[:1]:
                        charts.reset()
                        t = time.perf_counter()
                        open_from_menu(page, TITLES[path])
                        page.wait_for_function(
                            "(t) => { const h = document.querySelector('[data-testid=stMain] h1');"
                            " return h && h.innerText.startsWith(t); }",
                            arg=HEADINGS[path],
                            timeout=60_000,
                        )
                        _until_drawn(page, charts)
                        out[name][path or "home"]["click"].append(time.perf_counter() - t)
            b.close()
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(10)
    return out


PAGES = [
    "",
    "budget",
    "step_time",
    "techniques",
    "lab",
    "cache_fill",
    "engine",
    "interview",
    "roofline",
    "frontier",
    "tour",
]


def _reruns_of(root: Path, reruns: int, compile_each_run: bool) -> dict[str, list[float]]:
    """apptest_reruns for another checkout, in a process of its own (its kvcalc and webui)."""
    import json

    code = (
        f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
        f"import pages; pages.ROOT = __import__('pathlib').Path({str(root)!r}); "
        f"print(json.dumps(pages.apptest_reruns({reruns}, {compile_each_run})))"
    )
    got = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    return json.loads(got.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reruns", type=int, default=15)
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument(
        "--hostile",
        action="store_true",
        help="time each page's worst link instead (one fresh session per visit), "
        "then the worst-input corpus on every page and CLI command",
    )
    ap.add_argument(
        "--matrix",
        action="store_true",
        help="with --hostile: a row for every corpus config on every page",
    )
    ap.add_argument(
        "--compare",
        metavar="CHECKOUT",
        help="another checkout (e.g. the previous commit, from git archive): the "
        "same figures for both, their runs and visits alternating",
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="cold and warm visits of each page (the median is shown)",
    )
    ap.add_argument(
        "--pages",
        help="the browser's pages only, by url path, comma separated "
        "(home is the empty one: ',budget')",
    )
    ap.add_argument(
        "--compile-each-run",
        action="store_true",
        help="let AppTest compile the scripts for every run, as issue 3's figures did",
    )
    ap.add_argument(
        "--floor",
        action="store_true",
        help="also time Streamlit's two smallest apps (a title and a line; a title and one "
        "chart) the same way, with this app's .streamlit/config.toml: the least a page takes",
    )
    ap.add_argument(
        "--floor-parts",
        action="store_true",
        help="--floor, and the one-chart app with one kind of element more each (FLOOR_PARTS): "
        "what each kind costs a cold render",
    )
    ap.add_argument(
        "--cold-server",
        action="store_true",
        help="do not open every page once before timing (the first visit of each "
        "page after a restart then also computes what later visitors reuse)",
    )
    args = ap.parse_args()
    if not 1 <= args.repeat <= 10 or not 1 <= args.reruns <= 500:
        ap.error("repeat 1..10, reruns 1..500")
    if args.compare and not (Path(args.compare) / "app.py").is_file():
        ap.error(f"{args.compare} has no app.py: give the folder of a checkout")
    print(
        f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}, load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    if args.hostile:
        hostile_links()
        worst_inputs(matrix=args.matrix)
        return
    roots = {"this": ROOT}
    if args.compare:
        roots["other"] = Path(args.compare).resolve()
    print(
        f"\nrerun after one input change (AppTest, {args.reruns} reruns, scripts compiled "
        + ("every run" if args.compile_each_run else "once, as a server does")
        + "; target < 100 ms)"
        + ("; this checkout, then the other" if args.compare else "")
    )
    print(
        f"{'page':<28}" + "".join(f"{'median ms':>10}{'p90 ms':>10}{'max ms':>10}" for _ in roots)
    )
    runs = {"this": apptest_reruns(args.reruns, args.compile_each_run)}
    if args.compare:
        runs["other"] = _reruns_of(roots["other"], args.reruns, args.compile_each_run)
    for page in CHANGES:
        row = ""
        for name in roots:
            ms = sorted(t * 1e3 for t in runs[name][page])
            row += (
                f"{statistics.median(ms):>10.1f}{ms[int(0.9 * (len(ms) - 1))]:>10.1f}"
                f"{ms[-1]:>10.1f}"
            )
        print(f"{page:<28}{row}")
    if args.no_browser:
        return
    print(
        "\nfirst render in Chromium, opening the page's link (target < 1.5 s)"
        + (f", median of {args.repeat}" if args.repeat > 1 else "")
    )
    print(
        "cold: new browser context, nothing cached; warm: new tab, static files cached; click: "
        "switching to the page in the sidebar of an open tab (rounds 1 and 2).\n"
        "idle: until title and end of run (today's condition: charts not waited for); drawn: "
        "until every chart the server sent is drawn"
        + (
            ""
            if args.cold_server
            else ".\nEvery page was opened once before the timing (a server that has been up)"
        )
    )
    pages = PAGES if args.pages is None else [p.strip() for p in args.pages.split(",")]
    if any(p not in TITLES for p in pages):
        ap.error(f"--pages: each one of {', '.join(repr(p) for p in PAGES)}")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        floor = floor_apps(Path(tmp), args.floor_parts) if args.floor or args.floor_parts else {}
        got = browser_first_render(
            pages, roots, repeat=args.repeat, warm_server=not args.cold_server, floor=floor
        )
    _print_renders(got, pages, roots, floor)


def _print_renders(got: dict, pages: list[str], roots: dict, floor: dict) -> None:
    """The first-render table: each page's medians, and its cold drawn time over the one-chart
    app's (issue 42's ratio) and over the lesson floor's (st-lesson: the same chart with
    Streamlit's own elements that a lesson page has) where --floor ran them."""
    head = f"{'cold idle':>10}{'drawn':>7}{'warm idle':>10}{'drawn':>7}{'click 1':>9}{'click 2':>9}"
    bases = {
        label: statistics.median(x[1] for x in got[app]["home"]["cold"])
        for label, app in (("x chart", "st-one-chart"), ("x lesson", "st-lesson"))
        if app in got
    }
    ratio_head = "".join(f"{label:>9}" for label in bases)
    print(f"{'page':<14}" + (head + ratio_head) * len(roots))

    def medians(r: dict) -> str:
        cold = [statistics.median(x[i] for x in r["cold"]) * 1e3 for i in (0, 1)]
        warm = [statistics.median(x[i] for x in r["warm"]) * 1e3 for i in (0, 1)]
        row = f"{cold[0]:>10.0f}{cold[1]:>7.0f}{warm[0]:>10.0f}{warm[1]:>7.0f}"
        row += "".join(f"{c * 1e3:>9.0f}" for c in r["click"]) + " " * 9 * (2 - len(r["click"]))
        return row + "".join(f"{cold[1] / (base * 1e3):>8.2f}x" for base in bases.values())

    for path in pages:
        rows = (medians(got[name][path or "home"]) for name in roots)
        print(f"{path or 'home':<14}" + "".join(rows))
    if len(roots) > 1:
        print("(left: this checkout; right: the other)")
    for name in floor:
        print(f"{name:<14}{medians(got[name]['home'])}")
    if floor:
        print(
            "(st-minimal, st-one-chart: Streamlit's smallest apps; st-lesson: the one chart with "
            "a lesson page's kinds of element, at /lesson; FLOOR_APPS, the same visits)"
        )


if __name__ == "__main__":
    main()
