"""The cache-fill timeline: which cells are written, kept, recomputed; work and bytes."""

import pytest
from conftest import llama_config

from kvcalc import get_model, spec_from_config
from kvcalc.teach.fill import CACHED, EMPTY, NEW, RECOMPUTED, fill_timeline, shown_layers

L8B = get_model("llama-3.1-8b").spec


def test_prefill_then_one_column_per_step():
    steps = fill_timeline(L8B, 5, 3, layers=2)
    assert len(steps) == 4 and [s.tokens for s in steps] == [5, 6, 7, 8]
    assert len(steps[0].grid) == 4  # K and V rows of 2 layers
    assert steps[0].grid[0] == (NEW,) * 5 + (EMPTY,) * 3
    assert steps[2].grid[0] == (CACHED,) * 6 + (NEW, EMPTY)


def test_no_cache_recomputes_every_earlier_column():
    steps = fill_timeline(L8B, 5, 3, layers=1, use_cache=False)
    assert steps[2].grid[1] == (RECOMPUTED,) * 6 + (NEW, EMPTY)
    assert steps[-1].cache_bytes == 0


def test_work_counts_match_the_chapter():
    # With a cache: P + N passes. Without: P + sum (P + i) = N(N+1)/2 when the prompt is 1 token
    # and the first "step" is the prefill of that token.
    last = fill_timeline(L8B, 10, 20)[-1]
    assert last.passes_with_cache == 30
    assert last.passes_without_cache == 10 + sum(10 + i for i in range(1, 21))


def test_bytes_follow_the_model():
    steps = fill_timeline(L8B, 4, 2, kv_dtype="fp8")
    assert [s.cache_bytes for s in steps] == [n * 65_536 for n in (4, 5, 6)]


def test_sliding_layers_drop_old_columns():
    spec = spec_from_config(
        llama_config(num_hidden_layers=2, sliding_window=4, sliding_window_pattern=2)
    )
    steps = fill_timeline(spec, 6, 2, layers=2)
    sliding_row = steps[-1].grid[0]  # layer 1 slides (window 4), layer 2 is full
    full_row = steps[-1].grid[2]
    assert sliding_row == (EMPTY,) * 4 + (CACHED,) * 3 + (NEW,)
    assert full_row == (CACHED,) * 7 + (NEW,)
    # By hand: 2 KV heads x head size 64 (512 / 8) x K and V x 2 B = 512 B per token and layer;
    # the sliding layer keeps its window of 4 tokens, the full layer all 8: (4 + 8) x 512 B.
    assert steps[-1].cache_bytes == (4 + 8) * 512


def test_shown_layers_spread():
    assert shown_layers(L8B, 4) == [0, 10, 21, 31]
    assert shown_layers(L8B, 1) == [0] and len(shown_layers(L8B, 100)) == 32


@pytest.mark.parametrize(
    "kw",
    [
        dict(prompt=0, new_tokens=1),
        dict(prompt=100, new_tokens=100),
        dict(prompt=5, new_tokens=-1),
        dict(prompt=5, new_tokens=5, layers=0),
    ],
)
def test_bad_inputs(kw):
    with pytest.raises(ValueError):
        fill_timeline(L8B, **kw)


def test_chunked_layers_keep_only_the_current_chunk():
    # Llama 4 style: attention_chunk_size 8; layers 1-3 chunked, layer 4 global (interval 4).
    spec = spec_from_config(llama_config(model_type="llama4_text", attention_chunk_size=8))
    assert [lay.kind for lay in spec.layers] == ["chunked"] * 3 + ["full"]
    steps = fill_timeline(spec, 18, 2, layers=4)
    chunked_row = steps[-1].grid[0]  # 20 tokens: the current chunk holds positions 16..19
    assert chunked_row == (EMPTY,) * 16 + (CACHED,) * 3 + (NEW,)
    assert steps[-1].grid[-1] == (CACHED,) * 19 + (NEW,)  # the global layer keeps all 20
    prefill = steps[0].grid[0]  # 18 tokens: positions 16 and 17 form the current chunk
    assert prefill == (EMPTY,) * 16 + (NEW,) * 2 + (EMPTY,) * 2


def test_mla_and_recurrent_rows_say_what_they_hold():
    ds = get_model("deepseek-v3").spec
    assert ds.layers[0].cache_rows == ("latent", "RoPE key")
    nxt = get_model("qwen3-next-80b-a3b").spec
    state = next(lay for lay in nxt.layers if lay.kind == "state")
    assert state.cache_rows == ()
    steps = fill_timeline(nxt, 4, 1, layers=4)
    # shown layers 0, 16, 31, 47: 0 is a Gated DeltaNet layer: one empty row, no K/V.
    assert steps[-1].grid[0] == (EMPTY,) * 5


def test_grid_every_bounds_the_frames():
    steps = fill_timeline(L8B, 1, 20, layers=2, grid_every=7)
    drawn = [s.step for s in steps if s.grid]
    assert drawn == [0, 7, 14, 20]  # every 7th step and the last
    assert len(steps) == 21 and all(s.passes_with_cache for s in steps)
    assert steps[14].grid == fill_timeline(L8B, 1, 20, layers=2)[14].grid
