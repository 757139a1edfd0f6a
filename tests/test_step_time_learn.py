"""Decode step time as a Learn page (issue 37; teaching review 4, F1, F2, F3, F13, F24): the
chapter's formula only, at most three headline metrics, an x axis that stays put while the
chapter's moves shift the crossover, a ghost of the crossover before, DeepSeek-V3's cache and
one move to a setup that fits on the default GPU. Expected numbers are worked by hand from the
models' config.json."""

import json
import math
import re

import pytest

pytest.importorskip("streamlit")
from conftest import open_page  # noqa: E402

PAGE = "app_pages/step_time.py"

# Llama 3.1 8B: 32 layers, 8 KV heads x 128, BF16 (2 B): 131,072 B of K and V per token.
# Weights 8,030,261,248 parameters x 2 B; a decode step reads all but the untied input table
# (128,256 x 4,096 x 2 B), plus one row of it per sequence.
KV = 2 * 32 * 8 * 128 * 2


def weight_read(batch: int) -> int:
    return 8_030_261_248 * 2 - 128_256 * 4096 * 2 + batch * 4096 * 2


def crossover(batch: int, kv: int = KV) -> int:
    return math.ceil(weight_read(batch) / (batch * kv))


def text(element) -> str:
    return re.sub(r"\\(.)", r"\1", element.value)


def chart(at) -> dict:
    for c in at.get("plotly_chart"):
        if c.proto.id and "s_fig" in c.proto.id and "s_batch_fig" not in c.proto.id:
            return json.loads(c.proto.spec)
    raise AssertionError("no step-time chart")


def shape_x(fig: dict, name: str):
    xs = [s["x0"] for s in fig["layout"].get("shapes", []) if s.get("name") == name]
    return xs[0] if xs else None


def said(at) -> str:
    """Everything the page's main area says: text, captions, alerts, metric labels and help,
    expander labels, link labels, chart legends."""
    main = at.main
    parts = [
        text(e)
        for kind in ("markdown", "caption", "info", "warning", "error")
        for e in getattr(main, kind)
    ]
    parts += [f"{m.label} {m.value} {m.help or ''}" for m in main.metric]
    parts += [e.label for e in main.expander]
    parts += [p.proto.label for p in main.get("page_link")]
    for c in main.get("plotly_chart"):
        parts += [t.get("name", "") for t in json.loads(c.proto.spec)["data"]]
    return " ".join(parts)


# What the calibrated estimate and its error bands say wherever they are shown
# (kvcalc.perf.calibration's band sentences: "within ±61% of the measured value on half of 148
# held-back published measurements, 7.16x off at worst").
ENGINE_WORDS = ("calibrated", "within ±", "off at worst", "held-back", "held back", "estimate")


@pytest.mark.parametrize(
    "query",
    [{}, {"s_batch": "16"}, {"s_batch": "32"}, {"s_batch": "4096"}, {"s_ctx": "1000000"}],
)
def test_the_learn_page_shows_the_ideal_bound_only_in_three_metrics(query):
    at = open_page(PAGE, **query)
    assert not at.exception
    words = said(at)
    assert not [w for w in ENGINE_WORDS if w in words], words
    assert len(at.main.metric) <= 3, [m.label for m in at.main.metric]
    assert [m.label for m in at.main.metric] == [
        "Step time, ideal bound",
        "Tokens/s, ideal bound",
        "Crossover context (tokens)",
    ]
    assert len([c for c in at.main.get("plotly_chart") if "s_fig" in c.proto.id]) == 1
    # The one link to where a real engine's figures live.
    links = [p.proto for p in at.main.get("page_link")]
    assert [(p.label, p.page) for p in links if "real engine" in p.label] == [
        ("What a real engine adds (Inference Lab)", "lab")
    ]


def test_the_chapters_numbers_at_batch_1_and_16():
    # (weights read + batch x 8,192 x 131,072 B) / 3.35 TB/s: 4.80 ms and 9.61 ms.
    at = open_page(PAGE)
    step1 = (weight_read(1) + 8192 * KV) / 3.35e12
    assert [m.value for m in at.main.metric] == [
        f"{step1 * 1e3:.2f} ms",
        f"{1 / step1:,.1f}",
        f"{crossover(1):,}",
    ]
    at.number_input(key="s_batch").set_value(16).run()
    step16 = (weight_read(16) + 16 * 8192 * KV) / 3.35e12
    assert [m.value for m in at.main.metric] == [
        f"{step16 * 1e3:.2f} ms",
        f"{16 / step16:,.1f}",
        f"{crossover(16):,}",
    ]
    assert (f"{step1 * 1e3:.2f}", f"{step16 * 1e3:.2f}") == ("4.80", "9.61")


def test_the_axis_stays_and_the_crossover_moves_with_a_ghost():
    at = open_page(PAGE)
    one = chart(at)
    assert shape_x(one, "crossover") == crossover(1) == 114_517
    assert shape_x(one, "crossover before") is None  # no change yet: no ghost
    at.number_input(key="s_batch").set_value(16).run()
    sixteen = chart(at)
    assert sixteen["layout"]["xaxis"]["range"] == one["layout"]["xaxis"]["range"] == [0, 131_072]
    assert shape_x(sixteen, "crossover") == crossover(16) == 7_158  # left
    assert shape_x(sixteen, "crossover before") == 114_517
    assert any(
        a.get("text") == "before" and a.get("showarrow") for a in sixteen["layout"]["annotations"]
    )
    body = " ".join(text(m) for m in at.main.markdown)
    assert "Your last change (batch 1 → 16) moved it left, from 114,517 tokens" in body
    at.sidebar.selectbox(key="kvdtype").set_value("fp8").run()
    fp8 = chart(at)
    assert fp8["layout"]["xaxis"]["range"] == [0, 131_072]
    assert shape_x(fp8, "crossover") == crossover(16, KV // 2) == 14_315  # right
    assert shape_x(fp8, "crossover before") == 7_158
    body = " ".join(text(m) for m in at.main.markdown)
    assert "(KV cache BF16 → FP8) moved it right, from 7,158 tokens" in body
    # Remembered in the session, never in the link.
    assert not [k for k in at.query_params if "cross" in k]


def test_a_crossover_past_the_chart_is_an_arrow_at_its_edge():
    # FP8 at batch 1: 15,009,857,536 B / 65,536 B = 229,032.4, so 229,033 tokens: past 131,072.
    at = open_page(PAGE, kvdtype="fp8")
    fig = chart(at)
    assert shape_x(fig, "crossover") is None
    assert f"crossover {crossover(1, KV // 2):,} tokens →" in [
        a.get("text") for a in fig["layout"]["annotations"]
    ]


def test_deepseek_on_one_h100_shows_its_cache_and_one_move_that_fits():
    at = open_page(PAGE)
    at.sidebar.selectbox(key="model").set_value("deepseek-v3").run()
    assert not at.exception
    assert any("does not fit on" in text(e) for e in at.error)
    # 61 layers x (a 512-wide latent + a 64-wide RoPE key) x 2 B = 70,272 B = 68.62 KiB.
    assert [(m.label, m.value) for m in at.main.metric] == [
        ("KV cache per token", f"{61 * (512 + 64) * 2 / 1024:.2f} KiB")
    ]
    # The inputs stay, so a link's batch is taken even before the setup fits.
    assert at.number_input(key="s_batch").value == 1
    fix = at.button(key="s_fit")
    assert fix.label.startswith(("Switch to ", "Split it over "))
    fix.click().run()
    assert not at.exception and not at.error
    assert [m.label for m in at.main.metric][2] == "Crossover context (tokens)"
