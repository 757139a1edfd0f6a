"""The Budget page's two charts after teaching review 4: the pool line's label clear of the
legend and no pool line for a setup that does not fit (F20); each model's curve stopped at its
own limit (F10); log axes ticked at the powers of ten only (F21)."""

import math

import pytest

pytest.importorskip("plotly")

from kvcalc import GiB, budget, get_gpu, get_model  # noqa: E402
from kvcalc.cache.deployment import Deployment  # noqa: E402
from kvcalc.perf.sweeps import concurrency_curve, context_grid  # noqa: E402
from webui.figures import budget_figure, concurrency_figure  # noqa: E402

L8B, L2 = get_model("llama-3.1-8b"), get_model("llama-2-7b")
H100 = get_gpu("h100-sxm-80gb")


def test_pool_line_is_labelled_between_the_bars_not_in_the_legend_row():
    # 80 GiB x 0.9 - 15 - 2 = 55 GiB of pool: the line at 15 + 2 + 55 = 72 GiB.
    d = Deployment(spec=L8B.spec, memory_bytes=80 * GiB, weights_bytes=15 * GiB)
    b = budget(d.but(gpu_memory_utilization=0.9), 8192, 16)
    fig = budget_figure(b)
    [line] = [s for s in fig.layout.shapes if s.type == "line"]
    assert line.x0 == 72
    [label] = [a for a in fig.layout.annotations if a.text == "end of KV pool"]
    # The legend sits above the plot (y > 1 of its height); the label sits inside, halfway
    # down, in the gap between the "GPU memory" and "Requested KV" bars.
    assert label.y == 0.5 and label.yref == "paper" and fig.layout.legend.y > 1


def test_a_setup_that_does_not_fit_draws_no_pool_line():
    # DeepSeek-V3 on one H100: 671,026,419,200 B of weights against ceil(85,520,809,984 x 0.92)
    # = 78,679,145,186 B the engine may use (73.28 GiB, 0.92 is vLLM 0.33.0's default): no
    # pool, so no pool line and no request bar, only the line of what the engine may use.
    m = get_model("deepseek-v3")
    d = Deployment(spec=m.spec, gpu=H100, weights=m.weights())
    b = budget(d.but(version="0.33.0"), 8192, 16)
    assert b.requested_bytes == math.ceil(85_520_809_984 * 0.92) == 78_679_145_186
    fig = budget_figure(b)
    texts = [a.text for a in fig.layout.annotations]
    assert "end of KV pool" not in texts and texts == ["the engine may use 73.28 GiB"]
    [line] = [s for s in fig.layout.shapes if s.type == "line"]
    assert line.x0 == pytest.approx(78_679_145_186 / GiB)
    assert {t.y[0] for t in fig.data} == {"GPU memory"}  # no "Requested KV" row
    legend = [t.name for t in fig.data if t.name and t.showlegend is not False]
    assert "KV pool" not in legend and "Weights" in legend  # no entry for a pool of 0 GiB


def on_h100(model, weights_bytes: int) -> Deployment:
    d = Deployment(spec=model.spec, gpu=H100, weights_bytes=weights_bytes)
    return d.but(gpu_memory_utilization=0.92, reserve_bytes=2 * GiB)


def test_each_curve_stops_at_its_own_limit_with_a_marker():
    grid = context_grid(256, 131_072, points=20, include=(8192,))
    short = [c for c in grid if c <= 4096] + [4096]  # Llama 2 7B's max_position_embeddings
    assert short[-2] < 4096
    series = [
        ("Llama 3.1 8B", grid, concurrency_curve(on_h100(L8B, 16 * 10**9), grid)),
        ("Llama 2 7B", short, concurrency_curve(on_h100(L2, 13 * 10**9), short)),
    ]
    fig = concurrency_figure(series, marker=8192, limits=(131_072, 4096))
    lines = {t.name: list(t.x) for t in fig.data if t.mode == "lines"}
    assert max(lines["Llama 2 7B"]) == 4096 and max(lines["Llama 3.1 8B"]) == 131_072
    ends = {t.text[0] for t in fig.data if t.mode == "markers+text"}
    assert ends == {"limit 4,096", "limit 131,072"}


def test_a_model_with_no_pool_draws_no_curve():
    grid = context_grid(256, 131_072, points=10)
    zero = [0.0] * len(grid)
    ok = concurrency_curve(on_h100(L8B, 16 * 10**9), grid)
    fig = concurrency_figure([("L8B", grid, ok), ("too big", grid, zero)])
    assert [t.name for t in fig.data if t.mode == "lines"] == ["L8B"]


def test_log_axes_are_ticked_at_powers_of_ten_only():
    grid = context_grid(256, 131_072, points=20)
    values = concurrency_curve(on_h100(L8B, 16 * 10**9), grid)
    fig = concurrency_figure([("L8B", grid, values)])
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        assert axis.type == "log"
        for v in axis.tickvals:
            assert v > 0 and math.log10(v) == round(math.log10(v))  # 0.1, 1, 10, 100 ...
        assert len(axis.ticktext) == len(axis.tickvals)
    assert list(fig.layout.xaxis.ticktext) == ["100", "1,000", "10,000", "100,000", "1,000,000"]
