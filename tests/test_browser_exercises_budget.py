"""The chapter's Budget exercises in a real browser (Debian's Chromium, Python playwright), at the
projector's 1366 x 768 (teaching review 4, section 2 a-c; F2, F10, F14):

- "Push the context to 32K, raise the concurrency, and watch the cache overflow the GPU": 32K
  is one click, and the overflow (the red box and the red bar) is on the first screen;
- "Then try DeepSeek-V3": on the default H100 the page still shows its cache per token, and one
  button moves to a setup that fits, where the capacity appears;
- "Select Llama 2 7B (MHA), then Llama 3.1 8B (GQA) ... 4x less cache per token": side by side
  in one move, with the sentence that says why the concurrency is not 4x.

Every expected figure is worked by hand below from the models' config.json and the GPUs' memory
as the driver reports it. Skips, saying why, when Chromium or playwright is missing.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from pathlib import Path

import pytest
from browser_support import choose, chosen, wait_ready  # server, browser: conftest.py

pytestmark = pytest.mark.browser


SHOTS = Path(os.environ.get("KVLAB_SHOTS") or tempfile.mkdtemp(prefix="kvlab-budget-shots-"))
SHOTS.mkdir(parents=True, exist_ok=True)
GiB, KiB = 2**30, 2**10

# --- the figures, by hand ---------------------------------------------------------------------
# vLLM's pool: requested = ceil(memory as the driver reports it x 0.92); pool = requested -
# weights on one GPU - a 2 GiB reserve; blocks of 16 tokens across every layer.
H100 = 81_559 * 2**20  # 85,520,809,984 B
H200 = 143_771 * 2**20  # 150,754,820,096 B
RESERVE = 2 * GiB


def pool(memory: int, weights: int, tp: int = 1) -> int:
    return math.ceil(memory * 0.92) - math.ceil(weights / tp) - RESERVE


# Llama 3.1 8B: 2 (K, V) x 32 layers x 8 KV heads x 128 x 2 B; 8,030,261,248 BF16 parameters.
L31_TOKEN, L31_WEIGHTS = 2 * 32 * 8 * 128 * 2, 8_030_261_248 * 2
# Llama 2 7B: every one of its 32 heads keeps K and V; 6,738,415,616 BF16 parameters.
L2_TOKEN, L2_WEIGHTS = 2 * 32 * 32 * 128 * 2, 6_738_415_616 * 2
# DeepSeek-V3: one latent of 512 + a 64-dimension RoPE key, 61 layers, 2 B; replicated per GPU.
DS_TOKEN, DS_WEIGHTS = 61 * (512 + 64) * 2, 671_026_419_200  # FP8 weights (624.94 GiB)

assert (L31_TOKEN, L2_TOKEN, DS_TOKEN) == (131_072, 524_288, 70_272)
assert L2_TOKEN == 4 * L31_TOKEN


def blocks(memory: int, weights: int, token_bytes: int, tp: int = 1) -> int:
    return pool(memory, weights, tp) // (16 * token_bytes)


L31_BLOCKS = blocks(H100, L31_WEIGHTS, L31_TOKEN)
assert pool(H100, L31_WEIGHTS) == 60_471_139_042 and L31_BLOCKS == 28_834


def _open(browser, server, path: str):
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(server + path)
    wait_ready(page)
    return page, errors


def _metric(page, label: str, value: str | None = None, seconds: float = 60) -> str:
    """The value of the metric whose label contains ``label`` (once it reads ``value``)."""
    box = page.locator("[data-testid=stMetric]", has_text=label).first
    if value is not None:
        box.locator("[data-testid=stMetricValue]", has_text=value).wait_for(timeout=seconds * 1000)
    box.wait_for(timeout=seconds * 1000)
    return box.locator("[data-testid=stMetricValue]").inner_text()


# Metrics whose box starts on the first screen (1366 x 768, nothing scrolled).
_ABOVE = """() => [...document.querySelectorAll('[data-testid=stMain] [data-testid=stMetric]')]
    .filter(m => { const r = m.getBoundingClientRect(); return r.height > 0 && r.top < 768; })
    .map(m => m.innerText.replace(/\\n+/g, ' '))"""

# The memory bar as the browser drew it: its traces by name and their widths in GiB.
_BARS = """() => {
    const p = [...document.querySelectorAll('.js-plotly-plot')].find(d => d._fullLayout &&
        /GiB/.test((d._fullLayout.xaxis.title || {}).text || ''));
    if (!p) return null;
    const top = p.getBoundingClientRect().top;
    return {top, traces: p.data.filter(t => t.name).map(t => [t.name, t.x[0]]),
            notes: (p._fullLayout.annotations || []).map(a => a.text)};
}"""


def test_32k_in_one_move_and_the_cache_overflows_on_the_first_screen(server, browser):
    page, errors = _open(browser, server, "/budget")
    assert _metric(page, "vLLM logs at 8,192") == f"{L31_BLOCKS / 512:.2f}x" == "56.32x"
    before = page.evaluate(_ABOVE)
    assert len(before) <= 3, before

    # One click: 32K. 32,768 tokens take 2,048 blocks: 28,834 / 2,048 = 14.08 sequences.
    page.locator("[data-testid=stMain] button", has_text=re.compile(r"^32K$")).first.click()
    assert _metric(page, "vLLM logs at 32,768", "14.08x") == f"{L31_BLOCKS / 2048:.2f}x"
    wait_ready(page)
    assert page.get_by_label("Context per sequence (tokens)", exact=True).input_value() == "32768"
    assert "b_ctx=32768" in page.evaluate("location.href")  # the link keeps it
    # One sequence of 32,768 tokens: 32,768 x 131,072 B = 4 GiB.
    assert _metric(page, "One sequence of 32,768 tokens") == "4.00 GiB"

    # Raise the concurrency to 64: 64 x 4 GiB = 256 GiB asked against 28,834 blocks of 2 MiB.
    box = page.get_by_label("Concurrent sequences", exact=True)
    box.fill("64")
    box.press("Enter")
    over = 64 * 32_768 * L31_TOKEN - L31_BLOCKS * 16 * L31_TOKEN
    assert f"{over / GiB:.2f}" == "199.68"
    alert = page.locator("[data-testid=stAlert]", has_text="over by 199.68 GiB")
    alert.wait_for(timeout=60_000)
    wait_ready(page)
    assert alert.first.bounding_box()["y"] < 768
    bars = page.evaluate(_BARS)
    traces = dict(bars["traces"])
    assert traces["Overflow"] == pytest.approx(over / GiB, abs=0.01)
    assert bars["top"] < 768  # the red bar is on the first screen, not below it
    above = page.evaluate(_ABOVE)
    assert len(above) <= 3, above
    # The capacity once: no second rendering of 14.08 in the first screen's text.
    first = page.locator("[data-testid=stMain]").inner_text()
    assert first.count("14.08") == 1, first
    page.screenshot(path=str(SHOTS / "budget-1-32k-overflow.png"))
    assert page.locator("[data-testid=stException]").count() == 0
    assert errors == [], errors
    page.close()


def test_deepseek_v3_shows_its_cache_per_token_and_one_move_makes_it_fit(server, browser):
    page, errors = _open(browser, server, "/budget")
    choose(page, "Model", "DeepSeek-V3")
    # 70,272 B = 68.625 KiB, shown with two decimals; 8,192 tokens of it: 549 MiB.
    assert _metric(page, "KV per token at 8,192", "68.62 KiB") == f"{DS_TOKEN / KiB:.2f} KiB"
    assert _metric(page, "One sequence of 8,192 tokens") == f"{8192 * DS_TOKEN / 2**20:.2f} MiB"
    # On one H100 the weights alone pass what the engine may use: no capacity metric.
    assert pool(H100, DS_WEIGHTS) < 0 and pool(H100, DS_WEIGHTS, 8) < 0
    page.locator("[data-testid=stAlert]", has_text="does not fit").first.wait_for()
    assert page.locator("[data-testid=stMetric]", has_text="vLLM logs").count() == 0
    page.screenshot(path=str(SHOTS / "budget-2-deepseek-h100.png"))

    # The fix: 8 x H200 (4 of them hold a quarter each, too much), 52,668,648,441 B of pool
    # per GPU, blocks of 16 tokens x 1,152 B x 61 layers: 46,843; 8,192 tokens take 512.
    assert pool(H200, DS_WEIGHTS, 4) < 0 < pool(H200, DS_WEIGHTS, 8) == 52_668_648_441
    fit = blocks(H200, DS_WEIGHTS, DS_TOKEN, tp=8)
    assert fit == 46_843
    button = page.get_by_role("button", name=re.compile("Switch to 8 x NVIDIA H200"))
    assert button.bounding_box()["y"] < 768  # the one move is on the first screen
    button.click()
    assert _metric(page, "vLLM logs at 8,192", f"{fit / 512:.2f}x") == "91.49x"
    wait_ready(page)
    assert "H200" in chosen(page, "GPU") and chosen(page, "Tensor parallel").strip() == "8"
    assert "tp=8" in page.evaluate("location.href")  # the link keeps the new setup
    assert _metric(page, "KV per token at 8,192") == "68.62 KiB"  # the latent, whole per GPU
    page.screenshot(path=str(SHOTS / "budget-3-deepseek-fixed.png"))
    assert page.locator("[data-testid=stException]").count() == 0
    assert errors == [], errors
    page.close()


def test_llama_2_7b_beside_llama_3_1_8b_in_one_move(server, browser):
    page, errors = _open(browser, server, "/budget")
    page.get_by_role("button", name="The chapter's three").click()
    table = page.locator("[data-testid=stMarkdownContainer] table").first
    table.wait_for(timeout=60_000)
    wait_ready(page)
    cells = table.evaluate(
        "t => [...t.querySelectorAll('tbody tr')].map(r => "
        "[...r.querySelectorAll('th,td')].map(c => c.innerText.trim()).filter(x => x !== ''))"
    )
    rows = {r[0]: r for r in cells}
    assert rows["Llama 3.1 8B"][1] == "128.00 KiB" and rows["Llama 2 7B"][1] == "512.00 KiB"
    assert rows["DeepSeek-V3"][1] == f"{DS_TOKEN / KiB:.2f} KiB"
    # Not 4x in sequences: Llama 2 7B's lighter weights leave a larger pool.
    l2_blocks = blocks(H100, L2_WEIGHTS, L2_TOKEN)
    assert l2_blocks == 7_516
    ratio = (L31_BLOCKS / 512) / (l2_blocks / 512)
    assert f"{ratio:.2f}" == "3.84"
    w2, w31 = f"{L2_WEIGHTS / GiB:.2f} GiB", f"{L31_WEIGHTS / GiB:.2f} GiB"
    assert (w2, w31) == ("12.55 GiB", "14.96 GiB")
    said = page.locator("[data-testid=stMarkdown]", has_text="Per token Llama 2 7B").first
    text = said.inner_text()
    assert "4.00x more" in text and f"{ratio:.2f}x fewer" in text, text
    assert f"{w2} against {w31}" in text, text
    # Llama 2 7B's limit is 4,096 tokens: its row at 8,192 says so; DeepSeek-V3 has no pool.
    assert rows["Llama 2 7B"][4] == f"{l2_blocks / 512:.2f} (past its limit, 4,096)"
    assert rows["DeepSeek-V3"][3] == "does not fit (weights 624.94 GiB)"
    said.scroll_into_view_if_needed()
    page.evaluate("window.scrollBy(0, -80)")
    page.screenshot(path=str(SHOTS / "budget-4-side-by-side.png"))
    assert page.locator("[data-testid=stException]").count() == 0
    assert errors == [], errors
    page.close()
