"""The diagrams drawn from a model's own numbers (webui/figures/diagrams.py) and the pages that show
them. Expected values come from the models' config.json files, read by hand:
- Llama 3.1 8B: num_attention_heads 32, num_key_value_heads 8, head_dim 4096 / 32 = 128.
- DeepSeek-V3: hidden_size 7168, num_attention_heads 128, kv_lora_rank 512, qk_rope_head_dim 64,
  qk_nope_head_dim 128, v_head_dim 128.
- Gemma 3 27B: 62 layers, sliding_window 1024, every 6th layer full (transformers'
  Gemma3TextConfig: sliding_window_pattern 6), so layers 5, 11, ..., 59 are full: 10 full, 52
  sliding.
"""

import json

import pytest

pytest.importorskip("plotly")
pytest.importorskip("streamlit")

from conftest import open_page, tables  # noqa: E402

from webui import figures  # noqa: E402
from webui.pages import path  # noqa: E402


def segments(trace):
    """((x0, y0), (x1, y1)) pairs of a lines trace drawn with None separators."""
    xs, ys = trace.x, trace.y
    return [((xs[i], ys[i]), (xs[i + 1], ys[i + 1])) for i in range(0, len(xs), 3)]


def trace(fig, name):
    return next(t for t in fig.data if t.name == name)


def annotations(fig):
    return [a.text for a in fig.layout.annotations]


def test_head_sharing_groups_query_heads_on_kv_heads():
    fig = figures.head_sharing_figure(32, 8, 128)
    assert [t.name for t in fig.data if t.name.endswith("query heads")] == [
        "MHA: query heads",
        "GQA: query heads",
        "MQA: query heads",
    ]
    for name, kv in (("MHA", 32), ("GQA", 8), ("MQA", 1)):
        q = trace(fig, f"{name}: query heads")
        k = trace(fig, f"{name}: K/V heads")
        assert len(q.x) == 32 and len(k.x) == kv
        group = 32 // kv  # 1, 4, 32 query heads per K/V head
        lines = segments(trace(fig, f"{name}: sharing"))
        assert len(lines) == 32
        for i, ((x0, _), (x1, _)) in enumerate(lines):
            assert x0 == i and x1 == k.x[i // group]  # query head i reads K/V head i // group
    text = " ".join(annotations(fig))
    # Per token and layer: 8 x (128 + 128) = 2,048 numbers, 4,096 B in BF16; MHA 8,192; MQA 256.
    assert (
        "<b>GQA</b> (this model): 32 query heads, 8 K/V heads, 4 query heads per K/V head" in text
    )
    assert "8 x (128 + 128) = 2,048 numbers per layer (4,096 B)" in text
    assert "32 x (128 + 128) = 8,192 numbers" in text and "1 x (128 + 128) = 256 numbers" in text


def test_head_sharing_refuses_an_uneven_grouping():
    with pytest.raises(ValueError, match="evenly"):
        figures.head_sharing_figure(32, 6, 128)
    # An MHA model is its own first row; no GQA row appears.
    names = [t.name for t in figures.head_sharing_figure(16, 16, 64).data]
    assert "GQA: query heads" not in names and "MHA: query heads" in names


def points(fig) -> int:
    return sum(len(t.x) for t in fig.data if t.x is not None)


def test_head_sharing_of_16384_heads_draws_a_sample():
    # The heads cap (kvcalc.config.limits) admits 16,384 query and K/V heads: every head drawn made
    # a figure of 150,000 points that took over a second to build (issue 22's worst inputs). The
    # work is the points drawn: past MAX_DRAWN_HEADS it no longer grows with the heads (the time
    # it takes is bench/refusals.py's figure, not a bound here).
    fig = figures.head_sharing_figure(16384, 16384, 1)
    for t in fig.data:
        assert len(t.x) <= 3 * figures.MAX_DRAWN_HEADS
    cap = figures.MAX_DRAWN_HEADS
    assert points(fig) == points(figures.head_sharing_figure(cap, cap, 1))
    assert points(figures.head_sharing_figure(16384, 2, 1)) == points(
        figures.head_sharing_figure(2 * cap, 2, 1)
    )
    text = " ".join(annotations(fig))
    assert "16,384 query heads, 16,384 K/V heads" in text
    assert "128 of the 16,384 query heads drawn" in text
    # A sample still draws each query head on its own K/V head: 256 query heads on 2 K/V heads.
    fig = figures.head_sharing_figure(256, 2, 64)
    q, k = trace(fig, "GQA: query heads"), trace(fig, "GQA: K/V heads")
    assert len(q.x) == 128 and list(k.customdata) == [0, 1]
    for (x0, _), (x1, _) in segments(trace(fig, "GQA: sharing")):
        assert x1 == k.x[0 if x0 < 64 else 1]  # heads 0-127 read K/V head 0, 128-255 head 1


def test_mla_diagram_has_deepseek_v3s_numbers():
    fig = figures.mla_figure(
        hidden=7168, q_heads=128, rank=512, rope=64, qk_nope=128, v_head_dim=128, own=True
    )
    sizes = {t.name: t.customdata[0] for t in fig.data}
    assert sizes["latent"] == 512 and sizes["rope"] == 64 and sizes["hidden"] == 7168
    assert sizes["absorbed"] == 512 + 64  # the query after W_UK: it scores the latent itself
    assert sizes["value"] == 128 and sizes["query"] == 128 + 64
    text = " ".join(annotations(fig))
    assert "cached per token and layer: 512 + 64 = 576 numbers" in text
    # MHA alternative: 128 heads x (192 K + 128 V) = 40,960 numbers, 40,960 / 576 = 71.1x.
    assert "128 heads x (192 K + 128 V)<br>= 40,960 numbers per token and layer, 71.1x more" in text
    assert "x W_UK,i<br>(absorbed)" in text and "x W_DKV<br>(compress)" in text


def test_window_band_has_the_windows_width():
    fig = figures.window_figure(1024, 4096, [])
    band = trace(fig, "sliding window: the last 1,024 keys")
    # Key j is kept for query i when i - 1024 < j <= i: the band between the diagonal and the
    # line shifted by the window.
    assert list(zip(band.x, band.y)) == [
        (0, 0),
        (4096, 4096),
        (3072, 4096),
        (0, 1024),
        (0, 0),
    ]
    kept = trace(fig, "kept in the cache now")
    assert kept.x[1] - kept.x[0] == 1024
    assert not any(t.name == "layers" for t in fig.data)  # nothing interleaves
    short = trace(figures.window_figure(4096, 1000, []), "sliding window: the last 1,000 keys")
    assert list(zip(short.x, short.y))[2] == (
        0,
        1000,
    )  # shorter than the window: all of it


def test_window_marks_interleaved_layers_of_gemma_3():
    from kvcalc import get_model

    spec = get_model("gemma-3-27b").spec
    kinds = [lay.kind for lay in spec.layers]
    fig = figures.window_figure(1024, 8192, kinds)
    strip = trace(fig, "layers")
    full_at = [i for i, c in enumerate(strip.marker.color) if c == "#555"]
    assert full_at == list(range(5, 62, 6))  # 5, 11, ..., 59
    assert "layers interleave: 52 sliding (green), 10 full (dark), in model order" in annotations(
        fig
    )


def test_paged_figure_follows_each_block_table():
    from kvcalc.engines.paging import SCENARIOS, parse_requests, simulate

    reqs = parse_requests(SCENARIOS["shared-prompt"]["text"])
    _, snap, _ = simulate(reqs, 6, num_blocks=48, block_size=8)
    fig = figures.paged_figure(list(snap.tables), 8, 48)
    running = [t for t in snap.tables if t.blocks]
    assert len(running) >= 2
    pool = trace(fig, "physical blocks")
    assert len(pool.x) == 48
    where = {int(b): (x, y) for b, x, y in zip(pool.text, pool.x, pool.y)}
    for t in running:
        lines = segments(trace(fig, f"{t.rid}: block table"))
        assert [end for _, end in lines] == [where[b] for b in t.blocks]
        logical = trace(fig, f"{t.rid}: logical blocks")
        k = len(t.blocks)
        # Every block but the last is full; the last holds tokens - (k - 1) x 8 slots.
        assert [f for _, f in logical.customdata] == [8] * (k - 1) + [t.tokens - 8 * (k - 1)]
    # The shared 32-token system prompt: the first 4 blocks of every request are the same ones.
    firsts = {tuple(t.blocks[:4]) for t in running}
    assert len(firsts) == 1


def figure_of(at, key):
    return next(
        json.loads(c.proto.spec) for c in at.get("plotly_chart") if c.proto.id.endswith("-" + key)
    )


def test_techniques_page_draws_the_models_own_heads_and_window():
    # The drawings live in a fold built only when opened; the link opens it (t_how=true).
    at = open_page(path("techniques"))
    assert not any(c.proto.id.endswith("-t_fig_heads") for c in at.get("plotly_chart"))
    at = open_page(path("techniques"), t_how="true")
    assert not at.exception and not at.error
    heads = figure_of(at, "t_fig_heads")
    names = [t["name"] for t in heads["data"]]
    assert "GQA: K/V heads" in names
    assert len(next(t for t in heads["data"] if t["name"] == "GQA: K/V heads")["x"]) == 8
    win = figure_of(at, "t_fig_window")
    assert any(t["name"] == "sliding window: the last 4,096 keys" for t in win["data"])
    caps = " ".join(c.value for c in at.caption)
    assert (
        "Llama 3.1 8B has no sliding-window layer: drawn with this page's window of 4,096 "
        "tokens, at 32,768 tokens of context." in caps
    )
    mla = figure_of(at, "t_fig_mla")  # Llama's layer made MLA: 32 heads, 64 + 64 RoPE keys
    assert (
        "32 heads x (128 K + 128 V)<br>= 8,192 numbers per token and layer, 14.2x more"
        in " ".join(a["text"] for a in mla["layout"]["annotations"])
    )


def test_techniques_page_with_gemma_and_deepseek():
    at = open_page(path("techniques"), model="gemma-3-27b", t_how="true")
    assert not at.exception and not at.error
    caps = " ".join(c.value for c in at.caption)
    assert "own window of 1,024 tokens" in caps and "52 of 62 keep a window" in caps
    assert "the 10 full-attention layers keep every token" in caps
    at = open_page(path("techniques"), model="deepseek-v3", t_how="true")
    assert not at.exception and not at.error
    assert not any(
        c.proto.id.endswith("-t_fig_heads") for c in at.get("plotly_chart")
    )  # no K/V heads
    mla = figure_of(at, "t_fig_mla")
    assert "512 + 64 = 576 numbers" in " ".join(a["text"] for a in mla["layout"]["annotations"])


def test_engine_page_names_pagedattention_and_draws_the_tables():
    at = open_page(path("engine"), e_step="5")
    assert not at.exception and not at.error
    assert any(s.value.startswith("PagedAttention") for s in at.subheader)
    fig = figure_of(at, "e_paged")
    table = tables(at)[0]  # the page's own block tables
    for _, row in table.iterrows():
        if row["blocks"] != "none":
            lines = next(t for t in fig["data"] if t["name"] == f"{row['request']}: block table")
            assert len(lines["x"]) // 3 == len(row["blocks"].split(", "))
    at = open_page(path("engine"))  # step 0: nobody holds blocks yet
    assert not at.exception
    assert any("press Next step to admit some" in c.value for c in at.caption)


def test_a_narrow_window_is_drawn_wide_enough_to_see():
    """Issue 23 [26]: Gemma 3's 1,024-token window at 131,072 tokens was a hairline (0.8% of
    the matrix). It is drawn at 2% at least, and its name says it was widened."""
    from webui.figures import window_figure

    fig = window_figure(1024, 131072, []).to_dict()
    band = next(t for t in fig["data"] if t["name"].startswith("sliding window"))
    assert "drawn wider" in band["name"] and "1,024" in band["name"]
    assert band["x"][2] == 131072 - 2622  # ceil(0.02 x 131,072)
    fig = window_figure(4096, 32768, []).to_dict()
    band = next(t for t in fig["data"] if t["name"].startswith("sliding window"))
    assert "drawn wider" not in band["name"] and band["x"][2] == 32768 - 4096
