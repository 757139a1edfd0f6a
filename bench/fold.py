"""What a student sees first: words and metrics above the fold, page by page, for two trees.

    .venv/bin/python bench/fold.py [--compare PATH] [--phone]

Serves this checkout (and, with ``--compare``, another one, e.g. a ``git worktree`` of the
previous commit) and opens every page by its direct link in Chromium at 1366 x 768 (``--phone``:
390 x 844), then counts, in the main area once the run is over: the words of the visible text
above the fold (chart tick labels included, as a reader counts them), the metrics whose top is
above it, the words of the whole page (closed folds not counted: a reader does not see them)
and the page's height in pixels. The instructor's review counted the same way (issue 37: Frontier
317 words above the fold, Lab 7 metrics, Shrinking 1,193 words in all).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pages import launch  # noqa: E402  (beside this script)
from serve import start_app  # noqa: E402

sys.path.insert(0, str(ROOT))
from webui import pages as pages_registry  # noqa: E402  (the one list of pages)

# Every page of the Learn and Engineer paths by its url path, in the registry's order (this
# tree's registry: an older tree serves the same paths).
PATHS = [
    "" if p.default else p.name for p in pages_registry.PAGES if p.section != pages_registry.MEASURE
]
QUIET = """() => { const busy = !!document.querySelector('[data-testid=stStatusWidget]');
    window.__q = busy ? 0 : (window.__q || 0) + 1; return window.__q >= 5; }"""
COUNT = """(h) => {
    const main = document.querySelector('[data-testid=stMain]');
    const words = t => t.split(/\\s+/).filter(w => /\\w/.test(w)).length;
    let above = 0, all = 0;
    const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
        const e = walker.currentNode.parentElement;
        if (!e || !e.offsetParent || e.closest('[data-testid=stSidebar]')) continue;
        const r = e.getBoundingClientRect();
        if (r.height === 0) continue;
        const n = words(walker.currentNode.textContent);
        all += n;
        if (r.top < h && r.bottom > 0) above += n;
    }
    const metrics = [...main.querySelectorAll('[data-testid=stMetric]')]
        .filter(e => { const r = e.getBoundingClientRect(); return r.height > 0 && r.top < h; });
    return {above, metrics: metrics.length, all, height: main.scrollHeight};
}"""


def measure(root: Path, phone: bool) -> dict[str, dict]:
    from playwright.sync_api import sync_playwright

    width, height = (390, 844) if phone else (1366, 768)
    proc, port = start_app(root)
    out = {}
    try:
        with sync_playwright() as p:
            b = launch(p)
            for path in PATHS:
                page = b.new_page(viewport={"width": width, "height": height}, is_mobile=phone)
                page.goto(f"http://127.0.0.1:{port}/{path}")
                page.wait_for_selector("[data-testid=stMain] h1", timeout=60_000)
                page.wait_for_function(QUIET, polling=200, timeout=60_000)
                out[path or "home"] = page.evaluate(COUNT, height)
                page.close()
            b.close()
    finally:
        proc.terminate()
        proc.wait(10)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--compare", help="another checkout to measure beside this one")
    ap.add_argument("--phone", action="store_true", help="390 x 844 instead of 1366 x 768")
    args = ap.parse_args()
    trees = {"this": ROOT}
    if args.compare:
        trees = {"other": Path(args.compare).resolve(), **trees}
    got = {name: measure(root, args.phone) for name, root in trees.items()}
    names = list(got)
    head = "page".ljust(14) + "".join(
        f"{f'{n}: words above / metrics / words / px':>44}" for n in names
    )
    print(head)
    for path in PATHS:
        key = path or "home"
        row = key.ljust(14)
        for n in names:
            r = got[n].get(key)
            row += f"{r['above']:>20,} {r['metrics']:>5} {r['all']:>8,} {r['height']:>8,}"
        print(row)


if __name__ == "__main__":
    main()
