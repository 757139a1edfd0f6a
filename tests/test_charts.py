"""Figure builders, tested directly: traces, values (GiB, ms), markers."""

import math

import pytest

pytest.importorskip("plotly")

from kvcalc import GiB, budget, get_model, step_time  # noqa: E402
from kvcalc.cache.deployment import Deployment  # noqa: E402
from kvcalc.perf.sweeps import (  # noqa: E402
    batch_curve,
    concurrency_curve,
    context_grid,
    step_curve,
)
from kvcalc.teach.techniques import techniques  # noqa: E402
from webui.figures import (  # noqa: E402
    batch_figure,
    budget_figure,
    concurrency_figure,
    step_time_figure,
    techniques_figure,
)

L8B = get_model("llama-3.1-8b")
# the hand-worked example: 80 GiB x 0.9 - 15 GiB of weights - 2 GiB of reserve = 55 GiB of pool
HAND = Deployment(spec=L8B.spec, memory_bytes=80 * GiB, weights_bytes=15 * GiB).but(
    gpu_memory_utilization=0.9, reserve_bytes=2 * GiB
)


def _budget(concurrency):
    return budget(HAND, 8192, concurrency)


def test_budget_figure_splits_memory_in_gib():
    fig = budget_figure(_budget(16))
    by_name = {t.name: t for t in fig.data if t.name}
    assert list(by_name["Weights"].x) == [15.0]
    assert list(by_name["Reserve (activations, runtime)"].x) == [2.0]
    assert list(by_name["KV pool"].x) == [55.0]
    assert list(by_name["Left unused (utilization)"].x) == [8.0]
    assert "Overflow" not in by_name
    assert fig.layout.shapes[0].x0 == 15 + 2 + 55  # the pool ends at 72 GiB


def test_budget_figure_turns_red_on_overflow():
    fig = budget_figure(_budget(64))  # 64 GiB asked against a 55 GiB pool
    over = [t for t in fig.data if t.name == "Overflow"]
    assert len(over) == 1 and list(over[0].x) == [9.0]
    assert over[0].marker.color == "#d62728"


def test_concurrency_figure_series():
    grid = context_grid(256, 131072, points=20, include=(8192,))
    assert 8192 in grid and grid == sorted(grid) and grid[0] == 256 and grid[-1] == 131072
    values = concurrency_curve(HAND, grid)
    assert values[grid.index(8192)] == 55.0  # the hand-worked vLLM example
    fig = concurrency_figure([("Llama 3.1 8B", grid, values)], marker=8192)
    assert list(fig.data[0].y) == values and fig.layout.xaxis.type == "log"
    # On a log axis a shape's x0 is a data value and an annotation's x is log10 of it
    # (docs/engine-facts.md#platform-facts: mixing them drew the marker at 3.9 tokens).
    assert fig.layout.shapes[0].x0 == 8192
    assert fig.layout.annotations[0].x == pytest.approx(math.log10(8192))
    # vLLM's max_num_seqs as a ceiling: a horizontal line at that many sequences.
    fig = concurrency_figure([("Llama 3.1 8B", grid, values)], marker=8192, ceiling=256)
    assert fig.layout.shapes[1].y0 == 256 and fig.layout.shapes[1].yref == "y"


def test_step_time_figure_band_wedge_and_crossover():
    w = L8B.weights("bf16")
    xs = [0, 50_000, 100_000, 150_000, 200_000]
    curve = step_curve(Deployment(spec=L8B.spec, weights=w), xs, batch=1, bandwidth_gbs=3350)
    s = step_time(Deployment(spec=L8B.spec, weights=w), context=1, batch=1, bandwidth_gbs=3350)
    fig = step_time_figure(curve, s.crossover_context, batch=1)
    band, wedge = fig.data
    assert len(set(band.y)) == 1  # weights: the same read at every context
    # All weights but the untied input table (128,256 x 4,096 BF16), plus the one row gathered.
    assert band.y[0] == pytest.approx((w.bytes - 128_256 * 4096 * 2 + 4096 * 2) / 3350e9 * 1e3)
    assert wedge.y[0] == 0 and wedge.y[2] == pytest.approx(100_000 * 131_072 / 3350e9 * 1e3)
    assert fig.layout.shapes[0].x0 == s.crossover_context
    # Outside the plotted range there is no marker.
    assert not step_time_figure(curve, 10**9, 1).layout.shapes


def test_batch_figure():
    bc = batch_curve(
        Deployment(spec=L8B.spec, weights=L8B.weights()),
        [1, 8, 64],
        context=8192,
        bandwidth_gbs=3350,
    )
    fig = batch_figure(bc)
    assert [t.name for t in fig.data] == [
        "reading weights",
        "reading the KV cache",
        "tokens/s, ideal bound (right axis)",
    ]
    assert list(fig.data[2].y) == bc["tokens_per_s"]
    assert bc["tokens_per_s"][2] > bc["tokens_per_s"][0]
    # A real engine's tokens/s, named, dashed over the bound's; none where the batch does not fit.
    real = [t * 0.5 for t in bc["tokens_per_s"]]
    fig = batch_figure(bc, max_batch=8, estimate_tps=real)
    assert fig.data[3].name == "tokens/s, calibrated estimate (right axis)"
    assert list(fig.data[3].y) == [real[0], real[1], None] and fig.data[3].line.dash == "dash"


def test_step_time_figure_draws_a_real_engines_step_over_the_bound():
    xs = [0, 50_000, 100_000]
    curve = step_curve(
        Deployment(spec=L8B.spec, weights=L8B.weights()), xs, batch=1, bandwidth_gbs=3350
    )
    real = [t + 0.0035 for t in curve["step_s"]]
    fig = step_time_figure(curve, None, 1, estimate=real, estimate_name="your step model")
    assert fig.data[2].name == "your step model (a real engine)"
    assert list(fig.data[2].y) == pytest.approx([t * 1e3 for t in real])


def test_techniques_figure():
    rows = techniques(Deployment(spec=L8B.spec), 32768)
    fig = techniques_figure(rows, "GiB")
    assert list(fig.data[0].y) == [r.name for r in rows]
    own = [r.name for r in rows].index(next(r.name for r in rows if r.key == "own"))
    assert fig.data[0].x[own] == 4.0  # 32,768 x 128 KiB = 4 GiB
    assert fig.data[0].text[0] == "4.0x larger"  # MHA: 32 heads instead of 8


def test_fill_figure_has_one_frame_per_step_and_work_bars():
    from kvcalc.teach.fill import NEW, fill_timeline
    from webui.figures import fill_figure

    steps = fill_timeline(L8B.spec, 4, 3, layers=1)
    fig = fill_figure(steps, ["layer 1 K", "layer 1 V"])
    assert [f["name"] for f in fig["frames"]] == ["0", "1", "2", "3"]
    last = fig["frames"][-1]["data"]
    assert last[0]["z"][0] == [1, 1, 1, 1, 1, 1, NEW]  # 6 kept, the 7th written now
    assert last[1]["x"] == [4 + 5 + 6 + 7, 7]  # without / with a cache
    assert fig["layout"]["updatemenus"][0]["buttons"][0]["label"] == "Play"
    import plotly.graph_objects as go

    go.Figure(fig)  # a valid Plotly figure (validation raises otherwise)


def test_charts_mark_what_does_not_fit_and_the_models_limit():
    # Llama 3.1 8B in an 80 GiB pool budget: 80 x 0.9 - 15 - 2 = 55 GiB = 28,160 blocks of 16
    # tokens x 128 KiB (2 MiB each). 32 sequences fit up to 28,160 // 32 = 880 blocks = 14,080
    # tokens each; at 8,192 tokens (512 blocks) 28,160 // 512 = 55 sequences fit.
    from kvcalc.perf.sweeps import max_batch_at, max_context_at

    assert max_context_at(HAND, 32) == 14_080
    assert max_context_at(HAND, 1) == 131_072  # the model's limit binds first
    assert max_batch_at(HAND, 8192) == 55
    assert max_context_at(HAND.but(memory_bytes=16 * GiB, gpu_memory_utilization=None), 1) == 0

    w = L8B.weights("bf16")
    xs = [0, 50_000, 100_000, 150_000, 200_000]
    curve = step_curve(Deployment(spec=L8B.spec, weights=w), xs, batch=32, bandwidth_gbs=3350)
    fig = step_time_figure(curve, None, 32, fits_to=14_080, model_max=131_072)
    assert list(fig.data[0].x) == [0]  # contexts that do not fit are not drawn
    rects = [sh for sh in fig.layout.shapes if sh.type == "rect"]
    lines = [sh for sh in fig.layout.shapes if sh.type == "line"]
    assert [(r.x0, r.x1) for r in rects] == [(131_072, 200_000), (14_080, 131_072)]
    assert [ln.x0 for ln in lines] == [131_072]
    assert any("do not fit" in a.text for a in fig.layout.annotations)

    bc = batch_curve(
        Deployment(spec=L8B.spec, weights=w), [1, 32, 64], context=8192, bandwidth_gbs=3350
    )
    fig = batch_figure(bc, max_batch=55)
    assert list(fig.data[2].y)[:2] == bc["tokens_per_s"][:2] and fig.data[2].y[2] is None
    assert list(fig.data[0].marker.pattern.shape) == ["", "", "/"]

    grid = context_grid(256, 262_144, points=10)
    series = [("L8B", grid, concurrency_curve(HAND, grid))]
    fig = concurrency_figure(series, marker=8192, model_max=131_072)
    assert 131_072 in [sh.x0 for sh in fig.layout.shapes if sh.type == "line"]
    # The curve drops below one sequence past 28,160 x 16 = 450,560 tokens: not in this grid,
    # so no "below 1" line; with a 1M grid there is one.
    assert not any(sh.y0 == 1 for sh in fig.layout.shapes if sh.type == "line")
    grid = context_grid(256, 1_048_576, points=10)
    fig = concurrency_figure([("L8B", grid, concurrency_curve(HAND, grid))])
    assert any(sh.y0 == 1 and sh.yref == "y" for sh in fig.layout.shapes)
