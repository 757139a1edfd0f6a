"""The two paths (issue 37, docs/design.md principles 7 and 8): the Learn pages teach the chapter's
formula alone, so neither they nor the sidebar beside them state the engine-aware (calibrated)
estimate or its measured error band; the Engineer pages keep both.

The words below are the ones the calibrated figures are written with (kvcalc.perf.calibration's
band texts: "within ±61% of the measured value on half of 148 held-back published measurements,
7.16x off at worst"; the sidebar's "A real engine (the calibrated estimate)"); a Learn page that
printed any of them would be showing the second speed model.
"""

from __future__ import annotations

import re

import pytest
from conftest import open_page

from webui import pages


def text(element) -> str:
    """An element's text as the user reads it (markdown escapes removed)."""
    return re.sub(r"\\(.)", r"\1", str(element.value))


# The calibrated estimate and its band, as any page words them.
BAND = re.compile(
    r"calibrat|held-back|held back|off at worst|within ±|error band|"
    r"achieved share of peak|fixed cost per engine step",
    re.IGNORECASE,
)
LEARN = [p for p in pages.PAGES if p.section == pages.LEARN]
ENGINEER = [p for p in pages.PAGES if p.section == pages.ENGINEER]


def everything_said(at) -> list[str]:
    """Every text the page and the sidebar show: markdown, captions, boxes, metrics (label,
    value and help), widget labels and their help."""
    out: list[str] = []
    for kind in ("markdown", "caption", "info", "warning", "error", "success", "latex"):
        out += [text(e) for e in at.get(kind)]
    for m in at.metric:
        out += [m.label, str(m.value), m.help or ""]
    for kind in ("slider", "number_input", "selectbox", "toggle", "checkbox", "radio"):
        for w in at.get(kind):
            out += [str(w.label), str(getattr(w, "help", "") or "")]
    return out


def test_the_paths_are_the_chapters_order_then_the_engineers():
    # The chapter's order (issue 37, item 1): Home, Cache fill, Budget, Decode step time,
    # Shrinking, Engine view, Interview, the tour, Live class; then what a deployment needs.
    assert [p.name for p in LEARN] == [
        "home",
        "cache_fill",
        "budget",
        "step_time",
        "techniques",
        "engine",
        "interview",
        "tour",
        "live_class",
    ]
    assert [p.name for p in ENGINEER] == [
        "lab",
        "roofline",
        "frontier",
        "vllm_startup",
        "disagg",
    ]
    assert pages.next_page("home").name == "cache_fill"
    assert pages.next_page("live_class") is None  # the last lesson has no "Next"
    assert pages.by_url("").section == pages.LEARN and pages.by_url("lab").section != pages.LEARN


@pytest.mark.parametrize("page", [p.name for p in LEARN])
def test_a_learn_page_states_no_calibrated_speed_or_band(page):
    at = open_page(pages.path(page))
    assert not at.exception
    said = [s for s in everything_said(at) if BAND.search(s)]
    assert said == [], f"{page} shows the second speed model: {said[:3]}"
    # The sidebar's engine inputs are not drawn on a Learn page.
    assert not any(s.label.startswith("Achieved share") for s in at.sidebar.slider)


def test_an_engineer_page_keeps_the_engine_inputs_and_the_band():
    at = open_page(pages.path("lab"))
    assert not at.exception
    labels = [s.label for s in at.sidebar.slider]
    assert "Achieved share of peak bandwidth" in labels
    assert any(BAND.search(s) for s in everything_said(at))


def test_the_engine_inputs_survive_a_visit_to_a_learn_page():
    # Set on an Engineer page, kept through a Learn page that does not draw them.
    at = open_page(pages.path("lab"), bw_share="0.8")
    assert at.sidebar.slider(key="bw_share").value == pytest.approx(0.8)
    at.switch_page(pages.path("budget"))
    at.run()
    assert not at.sidebar.slider
    at.switch_page(pages.path("lab"))
    at.run()
    assert at.sidebar.slider(key="bw_share").value == pytest.approx(0.8)


def test_the_sidebar_names_the_model_and_the_gpu():
    # Names people read (issue 37, F11), the link's old registry keys still understood.
    at = open_page(pages.path("budget"), model="llama-2-7b", gpu="h200-141gb")
    assert not at.exception
    model = at.sidebar.selectbox(key="model")
    gpu = at.sidebar.selectbox(key="gpu")
    assert model.value == "llama-2-7b" and model.format_func(model.value) == "Llama 2 7B"
    assert gpu.format_func(gpu.value) == "NVIDIA H200 SXM 141GB"
    assert not any("Ignored in the link" in text(w) for w in at.warning)
    # The name itself, as the selectbox now writes it into a link.
    at = open_page(pages.path("budget"), model="Llama 2 7B")
    assert at.sidebar.selectbox(key="model").value == "llama-2-7b"
