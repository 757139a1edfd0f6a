"""The app in a real browser: Debian's Chromium driven by Python playwright.

Starts the Streamlit server, visits every page the way a student does (from the home page, through
the sidebar), changes a control, sees the result change, and checks there is no exception on the
page and no error in the browser console. Screenshots of every page are saved in a temp folder.
Skips, saying why, when Chromium or playwright is missing; .ci/run installs both.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from browser_support import sync_api, wait_ready  # the fixtures server and browser: conftest.py
from pages import open_from_menu  # bench/pages.py (on the path by browser_support): the menu

SHOTS = Path(tempfile.mkdtemp(prefix="kvlab-shots-"))
# (title in the sidebar, url path, a number input to change, a metric that must change)
PAGES = [
    ("Home", "", None, "KV cache per token"),
    ("Budget", "budget", "Context per sequence (tokens)", "vLLM logs at"),
    ("Decode step time", "step_time", "Batch (sequences decoded together)", "Crossover context"),
    ("Shrinking the cache", "techniques", "Context per sequence (tokens)", "One sequence of"),
    ("Inference Lab", "lab", "Context per sequence (tokens)", "Max concurrency at"),
    ("Cache fill", "cache_fill", "Decode steps", "Token passes without"),
    ("Engine view: blocks", "engine", "Go to step", "Blocks used"),
    ("Interview check", "interview", None, None),
    ("vLLM start-up lines", "vllm_startup", "max_model_len (tokens)", "Blocks per request"),
]


def _page(browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return page, errors


def _metric(page, label: str) -> str:
    """The value of the metric whose label contains ``label``."""
    box = page.locator("[data-testid=stMetric]", has_text=label).first
    box.wait_for(timeout=30_000)
    return box.locator("[data-testid=stMetricValue]").inner_text()


_VALUE = """([label, before]) => {
    const m = [...document.querySelectorAll('[data-testid=stMetric]')]
        .find(e => e.innerText.includes(label));
    const v = m && m.querySelector('[data-testid=stMetricValue]');
    const text = v ? v.innerText : null;
    return text !== null && text !== before;
}"""


def _wait_change(page, label: str, before: str, seconds: float = 20) -> str:
    """The metric's value once it differs from ``before`` (or ``before`` after ``seconds``)."""
    try:
        page.wait_for_function(_VALUE, arg=[label, before], polling=100, timeout=seconds * 1000)
    except sync_api.TimeoutError:
        return before
    return _metric(page, label)


def _set_number(page, label: str, value: int):
    box = page.get_by_label(label, exact=True).first
    box.fill(str(value))
    box.press("Enter")


def _no_exception(page):
    assert page.locator("[data-testid=stException]").count() == 0
    assert "Traceback" not in page.inner_text("body")


def test_every_page_from_the_menu(server, browser):
    page, errors = _page(browser)
    page.goto(server + "/")
    wait_ready(page)
    for title, path, control, result in PAGES:
        if path:
            open_from_menu(page, title)
            page.wait_for_url(re.compile(rf".*/{path}(\?.*)?$"), timeout=30_000)
            wait_ready(page)
        _no_exception(page)
        page.screenshot(path=str(SHOTS / f"{path or 'home'}.png"), full_page=True)
        if control:
            before = _metric(page, result)
            _set_number(
                page,
                control,
                {"Decode steps": 40, "Go to step": 5}.get(
                    control, 65536 if "Context" in control else 32
                ),
            )
            assert _wait_change(page, result, before) != before, f"{title}: {result} unchanged"
            _no_exception(page)
            page.screenshot(path=str(SHOTS / f"{path or 'home'}-changed.png"), full_page=True)
    assert errors == [], errors
    page.close()


def test_shared_link_opens_the_same_view(server, browser):
    page, errors = _page(browser)
    page.goto(server + "/budget?model=deepseek-v3&gpu=h200-141gb&tp=8&b_ctx=32768&kvdtype=fp8")
    wait_ready(page)
    _no_exception(page)
    assert _metric(page, "KV per token") == "34.31 KiB"  # 61 x 576 B in FP8
    # the input shows the link's value (Playwright retries: on a loaded machine the number
    # input can still show its default for a moment after the run has ended; one full-suite run
    # of stop 56 read 8192 there)
    ctx = page.get_by_label("Context per sequence (tokens)").first
    sync_api.expect(ctx).to_have_value("32768", timeout=30_000)
    # Opening a page's link directly makes Streamlit probe <page>/_stcore/... before the root;
    # those two 404s are the framework's base-path discovery, not errors of this app.
    real = [e for e in errors if "404" not in e]
    assert real == [], errors
    page.close()


def test_bad_link_values_are_noted_not_crashing(server, browser):
    page, _ = _page(browser)
    page.goto(server + "/?model=nope&tp=7&b_ctx=abc&x=%3Cscript%3Ealert(1)%3C/script%3E")
    wait_ready(page)
    _no_exception(page)
    note = page.locator("[data-testid=stAlert]", has_text="Ignored in the link").inner_text()
    assert "model" in note and "tp" in note and "<script>" not in note
    page.close()


def _open_from_menu(browser, server, title):
    page, errors = _page(browser)
    page.goto(server + "/")
    wait_ready(page)
    open_from_menu(page, title)
    wait_ready(page)
    return page, errors


def test_cache_fill_plays_in_the_browser(server, browser):
    page, errors = _open_from_menu(browser, server, "Cache fill")
    page.wait_for_selector(".js-plotly-plot .slider-container")
    before = page.locator(".slider-container .slider-label").first.text_content()
    page.locator(".updatemenu-button", has_text="Play").first.click()
    # Frames play on the client (no rerun, no server round trip): the slider's label moves on.
    page.wait_for_function(
        "(before) => { const l = document.querySelector('.slider-container .slider-label');"
        " return l && l.textContent !== before; }",
        arg=before,
        polling=100,
        timeout=10_000,
    )
    after = page.locator(".slider-container .slider-label").first.text_content()
    assert before != after, (before, after)
    page.screenshot(path=str(SHOTS / "cache_fill-playing.png"), full_page=True)
    assert errors == [], errors
    page.close()


# Cells of the last frame of the cache-fill grid in the "recomputed this step" state (3).
_RECOMPUTED = """() => {
    const gd = document.querySelector('.js-plotly-plot');
    const frames = gd && gd._transitionData && gd._transitionData._frames;
    if (!frames || !frames.length) return -1;
    return frames[frames.length - 1].data[0].z.flat().filter(v => v === 3).length;
}"""


def test_cache_fill_no_cache_is_one_move(server, browser):
    # The chapter's no-cache comparison in one click. A 12-token prompt, 20 decode steps, 4 layers
    # shown (a K and a V row each: 8 rows): with a cache the last step recomputes nothing; without
    # one it recomputes all 12 + 20 - 1 = 31 earlier columns in every row, 8 x 31 = 248 cells.
    page, errors = _open_from_menu(browser, server, "Cache fill")
    page.wait_for_selector(".js-plotly-plot .slider-container")
    assert page.evaluate(_RECOMPUTED) == 0
    page.get_by_test_id("stRadioGroup").get_by_text("No cache", exact=True).click()
    page.wait_for_function(f"() => ({_RECOMPUTED})() === 248", polling=200, timeout=30_000)
    page.screenshot(path=str(SHOTS / "cache_fill-no-cache.png"), full_page=True)
    assert errors == [], errors
    page.close()


def test_interview_answer_is_graded_in_the_browser(server, browser):
    page, errors = _open_from_menu(browser, server, "Interview check")
    box = page.get_by_role("textbox", name=re.compile("Your answer")).first
    box.fill("160 KiB")
    box.press("Enter")
    page.wait_for_selector("[data-testid=stAlertContentSuccess]", timeout=20_000)
    assert "163,840 B" in page.inner_text("[data-testid=stAlertContentSuccess]")
    page.screenshot(path=str(SHOTS / "interview-graded.png"), full_page=True)
    assert errors == [], errors
    page.close()


def test_the_glossary_is_built_when_opened(server, browser):
    # issue 42: the sidebar's glossary is not sent until its fold opens; a click opens it with
    # its terms
    page = browser.new_page()
    page.goto(f"{server}/budget")
    wait_ready(page)
    assert "Multi-head latent attention" not in page.inner_text("[data-testid=stSidebar]")
    page.get_by_text("Glossary: MHA").click()
    page.get_by_text("Multi-head latent attention").wait_for(timeout=30_000)
    assert "Grouped-query attention" in page.inner_text("[data-testid=stSidebar]")
    page.close()


def test_the_budget_settings_are_built_when_they_can_matter(server, browser):
    # issue 42: the Budget's settings fold sends no widget while its settings hold their
    # defaults (no slider, so no slider code on the first screen); opened, it has them; a
    # setting changed stays in the link with the fold closed, and that link gives the same view
    page, errors = _page(browser)
    page.goto(f"{server}/budget")
    wait_ready(page)
    fold = page.get_by_text("Engine settings: memory share")
    fold.wait_for(timeout=30_000)
    assert page.locator("[data-testid=stSlider]").count() == 0
    logged = _metric(page, "vLLM logs at")
    fold.click()
    page.locator("[data-testid=stSlider]").first.wait_for(timeout=30_000)
    _set_number(page, "Reserve for activations and runtime (GiB)", 40)
    changed = _wait_change(page, "vLLM logs at", logged)
    assert changed != logged
    page.wait_for_function("() => location.search.includes('b_reserve=40')", timeout=30_000)
    fold.click()  # closed again: the changed setting still holds, and stays in the link
    page.wait_for_timeout(1_000)
    assert "b_reserve=40" in page.url and _metric(page, "vLLM logs at") == changed
    other = browser.new_page(viewport={"width": 1400, "height": 1000})
    other.goto(f"{server}/budget?b_reserve=40")
    wait_ready(other)
    assert _metric(other, "vLLM logs at") == changed
    # the link's setting built it (in the closed fold: attached, not shown; waited for, as a
    # loaded machine may draw the metric before the fold's widgets)
    other.locator("[data-testid=stSlider]").first.wait_for(state="attached", timeout=30_000)
    assert other.locator("[data-testid=stSlider]").count() == 1
    _no_exception(page)
    assert [e for e in errors if "404" not in e] == [], errors
    other.close()
    page.close()


def test_live_page_runs_a_twin(server, browser):
    pytest.importorskip("torch", reason="torch is not installed")
    page, errors = _open_from_menu(browser, server, "Live: a real model")
    page.get_by_role("button", name="Run").first.click()
    page.wait_for_selector("[data-testid=stAlertContentSuccess]", timeout=120_000)
    assert "byte for byte" in page.inner_text("[data-testid=stAlertContentSuccess]")
    page.wait_for_function(
        "() => document.querySelectorAll('.js-plotly-plot .main-svg').length >= 2", timeout=60_000
    )
    _no_exception(page)
    page.screenshot(path=str(SHOTS / "live.png"), full_page=True)
    assert errors == [], errors
    page.close()


def test_two_sessions_never_see_each_others_state(server, browser):
    a_page, a_errors = _open_from_menu(browser, server, "Budget")
    ctx_b = browser.new_context(viewport={"width": 1400, "height": 1000})
    b_page = ctx_b.new_page()
    b_page.goto(server + "/")
    wait_ready(b_page)
    open_from_menu(b_page, "Budget")
    wait_ready(b_page)
    before_b = _metric(b_page, "vLLM logs at")
    before_a = _metric(a_page, "vLLM logs at")
    assert before_a == before_b
    _set_number(a_page, "Context per sequence (tokens)", 65536)
    assert _wait_change(a_page, "vLLM logs at", before_a) != before_a
    # B changes a control of its own; it must rerun with its own state, not A's.
    _set_number(b_page, "Concurrent sequences", 17)
    # B's rerun is done when its verdict speaks of its own 17 sequences.
    b_page.wait_for_selector("text=17 x 8,192 tokens need", timeout=30_000)
    wait_ready(b_page)
    assert _metric(b_page, "vLLM logs at") == before_b
    assert b_page.get_by_label("Context per sequence (tokens)").first.input_value() == "8192"
    assert a_errors == []
    a_page.close()
    ctx_b.close()


def test_link_names_and_pasted_text_stay_inert(server, browser):
    # A link whose parameter *names* are markdown: a link to a foreign host and an image from
    # one. Both end up in the "Ignored in the link" note; neither may become an <a> or an <img>,
    # and the browser must not request anything from those hosts.
    from urllib.parse import quote

    evil = {
        "[Click here to log in again](https://evil.example/login)": "1",
        "![p](http://pixel.example/p.png)": "1",
        "see www.evil.example": "1",
    }
    query = "&".join(f"{quote(k)}={v}" for k, v in evil.items())
    page, errors = _page(browser)
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    page.goto(f"{server}/?{query}")
    wait_ready(page)
    note = page.locator("[data-testid=stAlert]", has_text="Ignored in the link").first
    note.wait_for(timeout=30_000)
    assert "Click here to log in again" in note.inner_text()
    assert page.locator("a[href*='evil.example']").count() == 0
    assert page.locator("img[src*='pixel.example']").count() == 0
    from urllib.parse import urlparse

    hosts = {urlparse(u).hostname for u in requested}
    assert not hosts & {"evil.example", "pixel.example", "www.evil.example"}, hosts
    _no_exception(page)
    page.close()


# A phone (390 x 844 CSS pixels, an iPhone 12-14): each calculator page's first screen must show
# its answer (issue 13), not only its title and inputs. (path, the headline element's text)
PHONE = [
    ("budget", "vLLM logs at"),
    ("step_time", "Step time, ideal bound"),
    ("techniques", "as configured"),
    ("lab", "Max concurrency at"),
    ("vllm_startup", "GPU KV cache size"),
    ("roofline", "Ridge point"),
    ("frontier", "Under the objective: tokens/s per GPU"),
    ("disagg", "Cache per decode GPU"),
]


def test_phone_first_screen_shows_the_answer(server, browser):
    page = browser.new_page(
        viewport={"width": 390, "height": 844},
        is_mobile=True,
        has_touch=True,
        device_scale_factor=2,
    )
    for path, headline in PHONE:
        page.goto(f"{server}/{path}")
        wait_ready(page)
        _no_exception(page)
        element = page.locator(
            "[data-testid=stMetric], [data-testid=stCode], pre.kv-formula", has_text=headline
        ).first
        element.wait_for(timeout=30_000)
        box = element.bounding_box()
        page.screenshot(path=str(SHOTS / f"phone-{path}.png"))  # the first screen only
        assert box is not None and box["y"] + min(box["height"], 80) <= 844, (
            f"{path}: '{headline}' starts at y={box and box['y']:.0f}, below the first screen"
        )
        # Stacked one per row: nothing wider than the screen, no sideways scrolling.
        assert page.evaluate("document.documentElement.scrollWidth") <= 390 + 1
    page.close()
