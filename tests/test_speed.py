"""What makes a rerun cheap (issue 27) keeps the pages the same: results kept per input
(webui.memo), figures that make their dict once, the cache-fill animation's light frames, and
a page's own inputs rerunning only the page on a real server."""

import pytest

from kvcalc import get_model
from kvcalc.cache.deployment import Deployment

L8B = get_model("llama-3.1-8b")


# -- webui.memo -------------------------------------------------------------------------------


def test_memo_computes_once_per_value_and_keeps_at_most_its_bound():
    from webui.memo import memo

    calls = []

    @memo(2)
    def f(*args, **kwargs):
        calls.append((args, kwargs))
        return len(calls)

    assert f([1, 2], k={"a": 1}) == 1
    assert f([1, 2], k={"a": 1}) == 1  # equal by value: kept
    assert f((1, 2), k={"a": 1}) == 2  # a tuple is not the list it equals
    assert f([1.0, 2], k={"a": 1}) == 3  # 1.0 prints otherwise than 1: its own entry
    assert len(f) == 2  # the bound: the oldest went
    assert f([1, 2], k={"a": 1}) == 4  # ... so it is computed again
    assert f(True) == 5 and f(1) == 6  # True and 1 hash alike; not the same argument


def test_memo_keys_frozen_results_by_value_and_runs_what_it_cannot_key():
    from dataclasses import replace

    from webui.memo import memo

    calls = []

    @memo(8)
    def kv_layers(spec):
        calls.append(spec)
        return spec.num_layers

    spec = L8B.spec
    assert kv_layers(spec) == 32 and kv_layers(replace(spec)) == 32  # an equal copy: a hit
    assert len(calls) == 1
    assert kv_layers(replace(spec, name="other")) == 32 and len(calls) == 2

    @memo(8)
    def size(obj):
        calls.append(obj)
        return 1

    class Unhashable:
        __hash__ = None

    size(Unhashable())
    size(Unhashable())
    assert len(calls) == 4  # nothing to key it by: run every time, never kept
    assert len(size) == 0


def test_memo_refuses_an_empty_bound():
    from webui.memo import memo

    with pytest.raises(ValueError, match="at least one"):
        memo(0)


def test_size_of_counts_what_a_result_holds():
    import sys

    from webui.memo import size_of

    # Expected from sys.getsizeof of each part, summed by hand: the list, its three floats.
    floats = [0.5, 1.5, 2.5]
    assert size_of(floats) == sys.getsizeof(floats) + 3 * sys.getsizeof(0.5)
    # A dict counts its keys and values; a string at every place it stands (errs high).
    shared = "x" * 1000
    d = {"a": shared, "b": shared}
    assert size_of(d) == sys.getsizeof(d) + 2 * sys.getsizeof("a") + 2 * sys.getsizeof(shared)
    # A shared container counts once.
    inner = [[1.5] * 10]
    assert size_of([inner, inner]) == sys.getsizeof([inner, inner]) + size_of(inner)
    # A numpy array: its buffer (8 bytes a float64) on top of the object.
    np = pytest.importorskip("numpy")
    a = np.zeros(1000)
    assert size_of(a) >= 8000
    # A frozen dataclass (a model's spec) reaches its fields: far more than its own object.
    assert size_of(L8B.spec) > 10 * sys.getsizeof(L8B.spec)


def test_memos_together_keep_at_most_their_byte_bound(monkeypatch):
    from webui import memo as memo_mod

    memo_mod.clear_all()
    # Entries of about 1 MiB each (a list of 32,768 floats: an 8-byte pointer and a 24-byte
    # float each): with the bound at 3.5 MiB, three fit and a fourth pushes the least recently
    # used out, across two memos.
    monkeypatch.setattr(memo_mod, "MEMO_BYTES", int(3.5 * 2**20))
    monkeypatch.setattr(memo_mod, "MEMO_ENTRY_BYTES", 2 * 2**20)
    one = 0.25
    calls = []

    @memo_mod.memo(8)
    def big(i):
        calls.append(("big", i))
        return [one] * (2**15)

    @memo_mod.memo(8)
    def other(i):
        calls.append(("other", i))
        return [one] * (2**15)

    @memo_mod.memo(8)
    def small(i):
        return [one] * 10

    big(1), big(2), other(1)
    assert memo_mod.kept_bytes() <= memo_mod.MEMO_BYTES and len(big) == 2 and len(other) == 1
    big(1)  # a hit: now the most recently used
    other(2)  # a fourth MiB: big(2), the least recently used, goes
    assert len(calls) == 4 and len(big) == 1 and len(other) == 2
    big(1)
    assert len(calls) == 4  # still kept
    big(2)
    assert len(calls) == 5  # was dropped, so computed again
    assert memo_mod.kept_bytes() <= memo_mod.MEMO_BYTES
    # A result larger than one entry's bound (here 1/2 MiB) is returned but not kept.
    monkeypatch.setattr(memo_mod, "MEMO_ENTRY_BYTES", 2**20 // 2)
    assert len(big(3)) == 2**15 and big(3) is not big(3)
    assert small(1) is small(1)  # a small one still is

    @memo_mod.memo(8, entry_bytes=2 * 2**20)
    def large(i):
        return [one] * (2**15)

    assert large(1) is large(1)  # a memo may allow larger results than the default

    # A memo with a byte bound of its own (2.5 MiB: two 1 MiB results) evicts within itself
    # and leaves the shared bound to the others.
    monkeypatch.setattr(memo_mod, "MEMO_BYTES", int(3.5 * 2**20))
    monkeypatch.setattr(memo_mod, "MEMO_ENTRY_BYTES", 2 * 2**20)
    memo_mod.clear_all()
    shared = [other(i) for i in (10, 11, 12)]  # three MiB in the shared bound

    @memo_mod.memo(8, entry_bytes=2 * 2**20, own_bytes=int(2.5 * 2**20))
    def own(i):
        return [one] * (2**15)

    kept = [own(i) for i in (1, 2, 3)]
    assert len(own) == 2 and own(3) is kept[2] and own(1) is not kept[0]
    assert len(other) == 3 and other(10) is shared[0]  # nothing shared was pushed out

    # ... and so is one larger than the whole bound, whatever the entry bound.
    monkeypatch.setattr(memo_mod, "MEMO_ENTRY_BYTES", 8 * 2**20)
    monkeypatch.setattr(memo_mod, "MEMO_BYTES", 2**20 // 2)
    assert big(4) is not big(4)
    memo_mod.clear_all()
    assert memo_mod.kept_bytes() == 0


# -- figures -----------------------------------------------------------------------------------


def test_kept_figures_give_plotlys_own_dict_made_once():
    import plotly.graph_objects as go

    from webui.figures import Figure

    data = [{"type": "scatter", "x": [1, 2, 3], "y": [4, 5, 6], "line": {"color": "#2f9e6e"}}]
    layout = {"height": 300, "xaxis": {"title": {"text": "tokens"}}}
    fig = Figure(data=data, layout=layout)
    assert fig.to_dict() == go.Figure(data=data, layout=layout).to_dict()
    assert fig.to_dict() is fig.to_dict()  # once: st.plotly_chart asks on every rerun


def test_a_builder_returns_the_kept_figure_for_equal_inputs():
    from kvcalc.perf.sweeps import step_curve
    from webui.figures import step_time_figure

    dep = Deployment(spec=L8B.spec, weights=L8B.weights("auto"))  # BF16 KV, tp = pp = 1
    xs = [1024 * i for i in range(9)]
    a = step_time_figure(step_curve(dep, xs, batch=4, bandwidth_gbs=3350.0), 8000, 4)
    b = step_time_figure(step_curve(dep, xs, batch=4, bandwidth_gbs=3350.0), 8000, 4)
    c = step_time_figure(step_curve(dep, xs, batch=8, bandwidth_gbs=3350.0), 8000, 8)
    assert a is b and a is not c
    assert "batch 8" in c.data[1].name and "batch 4" in a.data[1].name


def test_fill_frames_carry_what_changes_and_replay_every_step():
    """Plotly's animate merges a frame's traces onto the figure's: each frame, merged onto the
    first step's traces, must be that step's full picture (grid from kvcalc.fill itself)."""
    from kvcalc.teach.fill import fill_timeline
    from webui.figures import fill_figure

    steps = fill_timeline(L8B.spec, 5, 4, layers=2)
    labels = ["layer 1 K", "layer 1 V", "layer 32 K", "layer 32 V"]
    fig = fill_figure(steps, labels)
    heat, bars = fig["data"]
    assert len(fig["frames"]) == len(steps) == 5
    for frame, step in zip(fig["frames"], steps, strict=True):
        assert frame["traces"] == [0, 1]
        f_heat, f_bars = frame["data"]
        assert set(f_heat) == {"type", "z"} and set(f_bars) == {"type", "x", "text"}
        merged = {**heat, **f_heat}
        assert merged["z"] == [list(r) for r in step.grid]
        assert merged["x"] == list(range(1, 10)) and merged["y"] == labels
        merged = {**bars, **f_bars}
        assert merged["x"] == [step.passes_without_cache, step.passes_with_cache]
        assert merged["text"] == [f"{step.passes_without_cache:,}", f"{step.passes_with_cache:,}"]
        assert merged["orientation"] == "h"


# -- a real server: a page's own input reruns only the page ----------------------------------


@pytest.mark.slow
def test_a_page_input_reruns_only_the_page_and_a_sidebar_input_everything():
    """On a real server, as the browser speaks: the Budget page's context changed with the
    fragment id the page's widget came with reruns the page alone (nothing in the sidebar is
    sent again) and shows the new context's numbers; the sidebar's KV format reruns the whole
    app, sidebar included."""
    websockets = pytest.importorskip("websockets")
    import asyncio
    import sys

    from conftest import ROOT, start_server
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    proc, base = start_server(
        lambda port: [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            f"--server.port={port}",
            "--server.address=127.0.0.1",
            "--server.headless=true",
            "--browser.gatherUsageStats=false",
        ],
        cwd=ROOT,
    )
    port = int(base.rsplit(":", 1)[1])

    async def run(ws, page="", query="", widget=None, fragment=""):
        msg = BackMsg()
        msg.rerun_script.query_string = query
        msg.rerun_script.page_script_hash = page
        if fragment:
            msg.rerun_script.fragment_id = fragment
        if widget is not None:
            w = msg.rerun_script.widget_states.widgets.add()
            w.id = widget[0]
            if isinstance(widget[1], str):
                w.string_value = widget[1]
            else:
                w.int_value = widget[1]
        await ws.send(msg.SerializeToString())
        got = {"pages": {}, "inputs": {}, "sidebar": 0, "metrics": {}, "errors": []}
        while True:
            fm = ForwardMsg()
            fm.ParseFromString(await asyncio.wait_for(ws.recv(), timeout=60))
            kind = fm.WhichOneof("type")
            if kind == "navigation":
                got["pages"] = {p.url_pathname: p.page_script_hash for p in fm.navigation.app_pages}
            elif kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
                if fm.metadata.delta_path[0] == 1:  # the sidebar's root container
                    got["sidebar"] += 1
                el = fm.delta.new_element
                what = el.WhichOneof("type")
                if what in ("number_input", "selectbox"):
                    w = getattr(el, what)
                    got["inputs"][w.label] = (w.id, fm.delta.fragment_id)
                elif what == "metric":
                    got["metrics"][el.metric.label] = el.metric.body
                elif what == "exception":
                    got["errors"].append(el.exception.message)
            elif kind == "script_finished":
                return got

    async def scenario():
        async with websockets.connect(
            f"ws://127.0.0.1:{port}/_stcore/stream", subprotocols=["streamlit"], max_size=2**26
        ) as ws:
            pages = (await run(ws))["pages"]
            full = await run(ws, pages["budget"])
            assert full["sidebar"] > 5 and not full["errors"]  # its inputs, captions, folds
            wid, fragment = full["inputs"]["Context per sequence (tokens)"]
            assert fragment  # the page's widgets are drawn in a fragment
            page_only = await run(ws, pages["budget"], "b_ctx=32768", (wid, 32768), fragment)
            assert not page_only["errors"] and page_only["sidebar"] == 0
            # Llama 3.1 8B: 2 (K and V) x 32 layers x 8 K/V heads x 128 x 2 B = 128 KiB a token
            assert page_only["metrics"]["KV per token at 32,768"] == "128.00 KiB"
            kv_id, kv_fragment = full["inputs"]["KV cache"]
            assert kv_fragment == ""  # the sidebar is outside it
            again = await run(ws, pages["budget"], "b_ctx=32768", (kv_id, "fp8"))
            assert not again["errors"] and again["sidebar"] > 5
            assert again["metrics"]["KV per token at 32,768"] == "64.00 KiB"  # 1 B a number

    try:
        asyncio.run(scenario())
    finally:
        proc.terminate()
        proc.wait(10)


# -- tables -------------------------------------------------------------------------------------


def test_regular_rows_go_to_the_table_as_arrow_and_the_rest_as_they_are():
    import pyarrow as pa

    from webui.render import arrow_rows

    t = arrow_rows(
        [
            {"model": "a", "blocks": 3, "x": 1.5, "ok": True},
            {"model": "b", "blocks": 40, "x": 2.0, "ok": False},
        ]
    )
    assert t.schema == pa.schema(
        [("model", pa.string()), ("blocks", pa.int64()), ("x", pa.float64()), ("ok", pa.bool_())]
    )
    assert t.column("blocks").to_pylist() == [3, 40]
    assert arrow_rows([{"a": 1}, {"a": "1"}]) is None  # mixed kinds: pandas' own conversion
    assert arrow_rows([{"a": 1}, {"a": 1.5}]) is None  # (pandas would make both floats)
    assert arrow_rows([{"a": True}, {"a": 1}]) is None
    assert arrow_rows([{"a": 1}, {"b": 1}]) is None and arrow_rows([{"a": None}]) is None
    assert arrow_rows([{"a": 2**63}]) is None and arrow_rows([]) is None


def test_a_table_shows_the_same_frame_either_way(tmp_path):
    from streamlit.testing.v1 import AppTest

    script = tmp_path / "t.py"
    script.write_text(
        "import streamlit as st\n"
        "from webui.render import table\n"
        "rows = [{'request': 'r1', 'state': 'running', 'tokens': 40, 'share': 0.25},\n"
        "        {'request': 'r2', 'state': 'waiting', 'tokens': 7, 'share': 1.0}]\n"
        "table(rows, border='horizontal', hide_index=True)\n"
        "st.table(rows, border='horizontal', hide_index=True)\n"
    )
    at = AppTest.from_file(str(script)).run()
    mine, streamlits = (t.value for t in at.table)
    assert (
        mine.to_dict("records")
        == streamlits.to_dict("records")
        == [
            {"request": "r1", "state": "running", "tokens": 40, "share": 0.25},
            {"request": "r2", "state": "waiting", "tokens": 7, "share": 1.0},
        ]
    )
    assert [str(d) for d in mine.dtypes][2:] == [str(d) for d in streamlits.dtypes][2:]
    a, b = (t.proto for t in at.table)
    assert (a.border_mode, a.hide_index, a.hide_header) == (
        b.border_mode,
        b.hide_index,
        b.hide_header,
    )
