"""Page speed: median rerun after one input change (AppTest, server side) and first render in a
real browser (Chromium), for every page.

    .venv/bin/python bench/pages.py [--reruns 15] [--no-browser] [--hostile]

``--hostile`` times instead one fresh session of every page opened with its worst link
(bench/worst_links.py), three times each: issue 11's budget is about 0.5 s per rerun. Then the
worst-input corpus (tests/worst_inputs.py: the largest configs kvcalc's caps admit), pasted on
every page and given to the CLI commands: per page or command, the slowest config's seconds
per rerun (median of 3) and the MiB of RSS this process kept after them all (after gc);
``--matrix`` prints every config's row too.

Targets (issue 3): every calculator rerun under 100 ms on a 2-core machine, first render under
2 s. AppTest times the script run on the server; the browser figure is from navigation start to
the page's last metric or chart being drawn, including the websocket round trips.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

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
        print(f"  {page:<28} max {max(times) * 1e3:7.0f} ms   median "
              f"{statistics.median(times) * 1e3:7.0f} ms" + (f"   EXCEPTION {problems[:1]}"
                                                           if problems else ""))


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
    print(f"\nworst-input corpus: {len(corpus)} configs (the largest the caps admit) on every "
          "page and CLI command; seconds per rerun, median of "
          f"{repeats} (wall; the slowest config), MiB of RSS kept after them all")
    print(f"{'page or command':<16}{'s/rerun':>9}{'CPU s':>8}{'MiB kept':>10}  slowest config"
          "  problems")
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
                print(f"  {page:<14}{wall:>9.3f}{cpu:>8.3f}{'':>10}  {name}"
                      + (f"  {problems[:1]}" if problems else ""))
        wall, cpu, name, _ = max(rows)
        bad = sum(1 for r in rows if r[3])
        print(f"{page:<16}{wall:>9.3f}{cpu:>8.3f}{kept:>10.1f}  {name:<21}"
              + (f"  {bad} with a generic error" if bad else ""))
    args = {"kv": ["--context", "100000000", "--batch", "1000000"],
            "budget": ["--gpu", "h100-sxm-80gb", "--context", "100000000"],
            "vllm": ["--available-kv-gib", "40", "--max-model-len", "100000000"],
            "simulate": ["--gpu", "h100-sxm-80gb", "--requests", "2000", "--rate", "inf",
                         "--prompt-tokens", "4096", "--output-tokens", "1024"]}
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
                        codes.add(cli([command, "--config", str(Path(tmp, f"{name}.json")),
                                       *extra]))
                    times.append(time.perf_counter() - t)
                    cpus.append(time.process_time() - c)
                bad = codes - {0, 2} or "internal error" in err.getvalue()
                rows.append((statistics.median(times), statistics.median(cpus), name, bad))
            kept = _kept(before)
            wall, cpu, name, _ = max(rows)
            bad = sum(1 for r in rows if r[3])
            print(f"{'cli ' + command:<16}{wall:>9.3f}{cpu:>8.3f}{kept:>10.1f}  {name:<21}"
                  + (f"  {bad} internal errors" if bad else ""))


def apptest_reruns(reruns: int) -> dict[str, list[float]]:
    from streamlit.testing.v1 import AppTest

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


def browser_first_render(paths: list[str]) -> dict[str, list[float]]:
    """Per page: [cold, warm, click round 1, click round 2] seconds. Cold: a fresh browser
    context (nothing cached, as a student's first visit). Warm: a new tab in a context that has
    loaded the app before."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port",
                             str(port), "--server.headless", "true",
                             "--browser.gatherUsageStats", "false"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            urllib.request.urlopen(base + "/_stcore/health", timeout=1)
            break
        except OSError:
            time.sleep(0.2)
    out = {}
    try:
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=chromium, args=[
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync"])
            # One warm-up visit so the server's module imports are not charged to a page.
            page = b.new_page()
            page.goto(base + "/")
            page.wait_for_selector("[data-testid=stMetric]", timeout=60_000)
            page.close()

            def visit(context, path) -> float:
                page = context.new_page()
                t = time.perf_counter()
                page.goto(f"{base}/{path}")
                page.wait_for_selector("[data-testid=stMain] h1", timeout=60_000)
                page.wait_for_timeout(200)  # let the run start before waiting for it to end
                page.wait_for_function(
                    "() => !document.querySelector('[data-testid=stStatusWidget]') &&"
                    " document.querySelectorAll('.js-plotly-plot .main-svg').length >="
                    " document.querySelectorAll('[data-testid=stPlotlyChart]').length",
                    timeout=60_000)
                dt = time.perf_counter() - t
                page.close()
                return dt

            warm_ctx = b.new_context(viewport={"width": 1400, "height": 1000})
            visit(warm_ctx, "")  # fill this context's cache with the app's static files
            for path in paths:
                cold_ctx = b.new_context(viewport={"width": 1400, "height": 1000})
                cold = visit(cold_ctx, path)
                cold_ctx.close()
                out[path or "home"] = [cold, visit(warm_ctx, path)]
            # In-app navigation: one tab, click each page in the sidebar (the JavaScript, Plotly
            # included, is already loaded; this is what a student waits for between pages).
            page = warm_ctx.new_page()
            page.goto(base + "/")
            page.wait_for_selector("[data-testid=stMetric]", timeout=60_000)
            titles = {"": "Home", "budget": "Budget", "step_time": "Decode step time",
                      "techniques": "Shrinking the cache", "lab": "Inference Lab",
                      "cache_fill": "Cache fill", "engine": "Engine view",
                      "interview": "Interview check", "roofline": "Roofline",
                      "frontier": "Serving frontier", "tour": "Start here: a tour"}
            for path in (paths[1:] + paths[:1]) * 2:  # two rounds: the first has one-off loads
                t = time.perf_counter()
                page.locator("[data-testid=stSidebarNav] a", has_text=titles[path]).first.click()
                page.wait_for_function(
                    "(t) => { const h = document.querySelector('[data-testid=stMain] h1');"
                    " return h && h.innerText.startsWith(t) &&"
                    " !document.querySelector('[data-testid=stStatusWidget]') &&"
                    " document.querySelectorAll('.js-plotly-plot .main-svg').length >="
                    " document.querySelectorAll('[data-testid=stPlotlyChart]').length; }",
                    arg={"": "KV Cache Lab", "budget": "Budget", "step_time": "Decode",
                         "techniques": "Shrinking", "lab": "Inference", "cache_fill": "Cache fill",
                         "engine": "Engine view", "interview": "Interview",
                         "roofline": "Roofline", "frontier": "Throughput and latency",
                         "tour": "Start here"}[path],
                    timeout=60_000)
                out[path or "home"].append(time.perf_counter() - t)
            b.close()
    finally:
        proc.terminate()
        proc.wait(10)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reruns", type=int, default=15)
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--hostile", action="store_true",
                    help="time each page's worst link instead (one fresh session per visit), "
                         "then the worst-input corpus on every page and CLI command")
    ap.add_argument("--matrix", action="store_true",
                    help="with --hostile: a row for every corpus config on every page")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}")
    if args.hostile:
        hostile_links()
        worst_inputs(matrix=args.matrix)
        return
    print(f"\nrerun after one input change (AppTest, {args.reruns} reruns; target < 100 ms)")
    print(f"{'page':<28}{'median ms':>10}{'p90 ms':>10}{'max ms':>10}")
    for page, times in apptest_reruns(args.reruns).items():
        ms = sorted(t * 1e3 for t in times)
        p90 = ms[int(0.9 * (len(ms) - 1))]
        print(f"{page:<28}{statistics.median(ms):>10.1f}{p90:>10.1f}{ms[-1]:>10.1f}")
    if args.no_browser:
        return
    print("\nfirst render in Chromium, opening the page's link (target < 2 s)")
    print("cold: new browser, nothing cached; warm: new tab, static files cached; click: switching")
    print(
        "to the page in the sidebar of an open tab. Each: until title, metrics and every chart "
        "are drawn"
    )
    print(f"{'page':<28}{'cold ms':>10}{'warm ms':>10}{'click 1 ms':>12}{'click 2 ms':>12}")
    for path, (cold, warm, click1, click2) in browser_first_render(
            ["", "budget", "step_time", "techniques", "lab", "cache_fill", "engine",
             "interview", "roofline", "frontier", "tour"]).items():
        print(f"{path:<28}{cold * 1e3:>10.0f}{warm * 1e3:>10.0f}{click1 * 1e3:>12.0f}"
              f"{click2 * 1e3:>12.0f}")


if __name__ == "__main__":
    main()
