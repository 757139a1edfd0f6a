"""Does a change leave every page looking the same? Screenshots of each page from two checkouts
(this one and another, e.g. ``git archive`` of the previous commit), pixel by pixel.

    .venv/bin/python bench/same_pixels.py --other /tmp/previous [--pages ,budget] [--out DIR]

Each page is opened by its link on both servers in a tall window (6,000 px: the whole page in
view, Streamlit scrolls inside its own frame), waited on until its run has ended and every chart
is drawn, and captured; the cache-fill animation is also moved to two steps by its slider. The
report names every pair that differs and the box of the differing pixels (differences of at
most 2/255 are anti-aliasing, said as such); the images are kept in ``--out``. A few pixels can
move from one load to the next (a caret, a scrollbar): run a differing page again before reading
much into it.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from pages import PAGES, start_server  # beside this script

ROOT = Path(__file__).resolve().parent.parent
TOLERANCE = 2  # of 255 per channel: anti-aliasing of an edge that moved by a fraction of a pixel
DONE = (
    "() => !document.querySelector('[data-testid=stStatusWidget]') &&"
    " [...document.querySelectorAll('[data-testid=stPlotlyChart]')].every("
    "c => c.querySelector('.main-svg'))"
)


def capture(page, base: str, path: str, out: Path, slider: float | None = None) -> Path:
    page.goto(f"{base}/{path}")
    page.wait_for_selector("[data-testid=stMain] h1", timeout=60_000)
    page.wait_for_timeout(2500)
    page.wait_for_function(DONE, timeout=60_000)
    if slider is not None:  # Plotly's own slider: a click on its rail at this share
        page.wait_for_selector(".slider-container .slider-rail-rect", timeout=60_000)
        x, y, w, h = page.evaluate(
            "() => { const r = document.querySelector('.slider-container .slider-rail-rect')"
            ".getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; }"
        )
        page.mouse.click(x + w * slider, y + h / 2)
    page.mouse.move(0, 0)  # no hover toolbar, no tooltip
    page.wait_for_timeout(1500)
    page.screenshot(path=str(out))
    return out


def main() -> None:
    from PIL import Image, ImageChops
    from playwright.sync_api import sync_playwright

    ap = argparse.ArgumentParser()
    ap.add_argument("--other", required=True, help="the other checkout's folder")
    ap.add_argument("--pages", help="url paths, comma separated ('' is Home)")
    ap.add_argument("--out", help="folder for the screenshots (default: a new temp folder)")
    args = ap.parse_args()
    if not (Path(args.other) / "app.py").is_file():
        ap.error(f"{args.other} has no app.py: give the folder of a checkout")
    pages = PAGES + ["vllm_startup"] if args.pages is None else args.pages.split(",")
    out = Path(args.out or tempfile.mkdtemp(prefix="kvlab-pixels-"))
    out.mkdir(parents=True, exist_ok=True)
    servers = {"this": start_server(ROOT), "other": start_server(Path(args.other).resolve())}
    shots = [(p, None) for p in pages] + [("cache_fill", 0.3), ("cache_fill", 0.999)]
    differ = 0
    try:
        with sync_playwright() as p:
            b = p.chromium.launch(
                executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                args=["--headless", "--no-sandbox", "--disable-gpu"],
            )
            for path, slider in shots:
                name = (path or "home") + ("" if slider is None else f"-step{slider:g}")
                files = {}
                for side, (_, base) in servers.items():
                    page = b.new_page(viewport={"width": 1400, "height": 6000})
                    files[side] = capture(page, base, path, out / f"{name}-{side}.png", slider)
                    page.close()
                a, o = (Image.open(files[s]).convert("RGB") for s in ("this", "other"))
                if a.size != o.size:
                    differ += 1
                    print(f"{name:<24}DIFFERS in size: {a.size} and {o.size}")
                    continue
                diff = ImageChops.difference(a, o)
                box, most = diff.getbbox(), max(hi for _, hi in diff.getextrema())
                differ += most > TOLERANCE
                print(
                    f"{name:<24}"
                    + (
                        "the same"
                        if box is None
                        else f"the same but for anti-aliasing (at most {most}/255 in {box})"
                        if most <= TOLERANCE
                        else f"DIFFERS at {box} (by up to {most}/255)"
                    )
                )
            b.close()
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(10)
    print(f"{len(shots) - differ} of {len(shots)} the same; screenshots in {out}")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
