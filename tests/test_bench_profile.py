"""bench/profile_pages.py --browser: what one visit's Chrome DevTools Protocol events become
(Recorder, summarize), fed events written by hand, and the floor apps of bench/pages.py
--floor run as Streamlit runs them."""

import base64
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import pages  # noqa: E402  (bench/pages.py, as the bench scripts import it)
import profile_pages  # noqa: E402
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg  # noqa: E402


class FakeCDP:
    """Takes the handlers Recorder registers and plays events to them."""

    def __init__(self):
        self.handlers = {}

    def on(self, name, handler):
        self.handlers[name] = handler

    def emit(self, name, **event):
        self.handlers[name](event)


def _frame(cdp, t, fm: ForwardMsg):
    data = base64.b64encode(fm.SerializeToString()).decode()
    cdp.emit(
        "Network.webSocketFrameReceived",
        timestamp=t,
        response={"opcode": 2, "payloadData": data},
    )


def _request(cdp, rid, t, url, done, size, gzip=False):
    cdp.emit("Network.requestWillBeSent", requestId=rid, timestamp=t, request={"url": url})
    headers = {"Cache-Control": "public, immutable, max-age=31536000"}
    if gzip:
        headers["Content-Encoding"] = "gzip"
    cdp.emit(
        "Network.responseReceived", requestId=rid, timestamp=done, response={"headers": headers}
    )
    cdp.emit("Network.loadingFinished", requestId=rid, timestamp=done, encodedDataLength=size)


def test_a_visit_is_split_at_the_websocket_and_the_run_end():
    cdp = FakeCDP()
    rec = profile_pages.Recorder(cdp)
    base = "http://127.0.0.1:1"
    # The document asked at t = 100.000 s (the browser's clock) and done 20 ms later.
    _request(cdp, "1", 100.000, base + "/budget", 100.020, 2_000, gzip=True)
    # Two boot files before the websocket: 1 MiB and 0.5 MiB.
    _request(cdp, "2", 100.030, base + "/static/js/index.X.js", 100.300, 2**20)
    _request(cdp, "3", 100.031, base + "/static/js/protobuf.Y.js", 100.350, 2**19)
    cdp.emit("Network.webSocketWillSendHandshakeRequest", timestamp=100.900)
    cdp.emit("Network.webSocketFrameSent", timestamp=100.910)
    cdp.emit("Network.webSocketFrameSent", timestamp=101.500)  # a later message: not the ask
    chart = ForwardMsg()
    chart.delta.new_element.plotly_chart.spec = "x" * 3072  # 3 KiB of JSON
    _frame(cdp, 100.920, chart)
    _request(cdp, "4", 101.000, base + "/static/js/PlotlyChart.Z.js", 101.400, 4 * 2**20)
    _frame(cdp, 101.050, chart)
    finished = ForwardMsg()
    finished.script_finished = 1
    _frame(cdp, 101.200, finished)
    _frame(cdp, 101.300, finished)  # a second run's end: the first one counts
    got = profile_pages.summarize(rec, drawn=2.5, title=1.1, metrics={"TaskDuration": 2.0})
    # By hand: every time from the document's request (100.000 s).
    assert got["doc"] == pytest.approx(0.020)
    assert got["boot"] == pytest.approx(0.900)
    assert got["asked"] == pytest.approx(0.910)
    assert got["first frame"] == pytest.approx(0.920)
    assert got["run"] == pytest.approx(1.200)
    assert (got["charts"], got["title"]) == (2.5, 1.1)
    assert (got["boot files"], got["boot MiB"], got["boot gzip"]) == (2, 1.5, 0)
    assert got["immutable"] == 2
    assert (got["later files"], got["later MiB"]) == (1, 4.0)
    assert got["plotly asked"] == pytest.approx(1.000)
    assert got["plotly got"] == pytest.approx(1.400)
    assert (got["charts n"], got["plotly KiB"]) == (2, 6.0)
    sizes = 2 * len(chart.SerializeToString()) + 2 * len(finished.SerializeToString())
    assert got["ws KiB"] == pytest.approx(sizes / 1024)
    assert got["ws msgs"] == 4
    assert got["largest KiB"] == pytest.approx(len(chart.SerializeToString()) / 1024)
    assert got["main task"] == 2.0


@pytest.mark.slow
def test_the_floor_apps_run_as_written(tmp_path):
    from streamlit.testing.v1 import AppTest

    apps = pages.floor_apps(tmp_path)
    assert sorted(apps) == ["st-lesson", "st-minimal", "st-one-chart"]
    for name, folder in apps.items():
        # This app's own settings travel with them, so the floor is served alike.
        config = (folder / ".streamlit" / "config.toml").read_text()
        assert config == (ROOT / ".streamlit" / "config.toml").read_text()
        at = AppTest.from_file(str(folder / "app.py"), default_timeout=60).run()
        assert not at.exception
        if name == "st-lesson":  # its default page; the lesson page is run by itself below
            assert at.title[0].value == "Other"
            continue
        assert at.title[0].value == {"st-minimal": "Minimal", "st-one-chart": "One chart"}[name]
        assert len(at.get("plotly_chart")) == (name == "st-one-chart")
    # The lesson floor's page: the one chart, and one or two of each element a lesson page has.
    code = (apps["st-lesson"] / "app.py").read_text()
    assert pages.FLOOR_PATHS == {"st-lesson": "lesson"} and 'url_path="lesson"' in code
    at = AppTest.from_string(code.split("\nmenu = ")[0] + "\nlesson()\n", default_timeout=60).run()
    assert not at.exception
    assert at.title[0].value == "One chart" and len(at.get("plotly_chart")) == 1
    assert len(at.sidebar.selectbox) == 1 and len(at.number_input) == 1
    assert [m.value for m in at.metric] == ["128.00 KiB", "1.00 GiB"] and len(at.caption) == 1


@pytest.mark.slow
def test_each_floor_part_is_the_one_chart_app_and_one_kind_of_element_more(tmp_path):
    from streamlit.testing.v1 import AppTest

    apps = pages.floor_apps(tmp_path, parts=True)
    assert set(apps) == set(pages.FLOOR_APPS) | set(pages.FLOOR_PARTS)
    kinds = {
        "+selectbox": ("selectbox", 1),
        "+6 selectboxes": ("selectbox", 6),
        "+number input": ("number_input", 1),
        "+2 metrics": ("metric", 2),
        "+radio": ("radio", 1),
        "+segmented": ("button_group", 1),
        "+slider": ("slider", 1),
        "+multiselect": ("multiselect", 1),
        "+second chart": ("plotly_chart", 2),
    }
    assert set(kinds) == set(pages.FLOOR_PARTS)
    for name, (kind, count) in kinds.items():
        at = AppTest.from_file(str(apps[name] / "app.py"), default_timeout=60).run()
        assert not at.exception and at.title[0].value == "One chart"
        assert len(at.get(kind)) == count, name
        assert len(at.get("plotly_chart")) == (2 if name == "+second chart" else 1)


def test_a_cpu_profile_is_filed_by_script_file():
    # Three nodes: a function in PlotlyChart's chunk, one in react-dom, and the engine's own.
    url = "http://127.0.0.1:1/static/js/"
    profile = {
        "nodes": [
            {"id": 1, "callFrame": {"url": url + "PlotlyChart.Z.js", "functionName": "a"}},
            {"id": 2, "callFrame": {"url": url + "react-dom.Q.js", "functionName": "b"}},
            {"id": 3, "callFrame": {"url": "", "functionName": "(program)"}},
            {"id": 4, "callFrame": {"url": "", "functionName": ""}},
        ],
        # Each sample lasts until the next one (microseconds): 1, 1, 3 ms, then 2 and 4 ms.
        "samples": [1, 2, 1, 3, 4, 2],
        "timeDeltas": [0, 1000, 1000, 3000, 2000, 4000],
    }
    got = profile_pages.self_ms_by_file(profile)
    # By hand: PlotlyChart 1 + 3, react-dom 1 + 0 (the last sample has no next),
    # (program) 2 + 4 (a nameless frame counts as the engine's).
    assert got == {"(program)": 6.0, "PlotlyChart.Z.js": 4.0, "react-dom.Q.js": 1.0}
    assert list(got) == ["(program)", "PlotlyChart.Z.js", "react-dom.Q.js"]


def test_load_compare_says_when_the_rounds_overlap():
    """bench/load.py --compare: the ratio of medians, each tree's range and the ratio's range
    (worked by hand), and a warning when one tree's rounds reach into the other's."""
    import load  # bench/load.py

    # Same tree measured with and without uvloop on 2 cores (this session's rounds).
    with_uv, without = [34.2, 31.8, 33.9], [33.5, 34.5, 37.5]
    text = load.spread_verdict(with_uv, without)
    # medians 33.9 / 34.5 = 0.98; ratio range 31.8 / 37.5 = 0.85 to 34.2 / 33.5 = 1.02
    assert text.startswith("interactions per second, this / other: 0.98x")
    assert "this 31.8-34.2, other 33.5-37.5; ratio 0.85-1.02x" in text
    assert "within this machine's noise" in text
    # Apart (issue 27's side by side): 29.0 and 28.6 against 10.4 and 13.0.
    apart = load.spread_verdict([29.4, 28.6], [10.4, 13.0])
    assert "0.85" not in apart and "noise" not in apart
    assert "2.48x" in apart  # medians 29.0 / 11.7
    assert "ratio 2.20-2.83x" in apart  # 28.6 / 13.0 and 29.4 / 10.4


def test_profile_server_splits_the_cpu_by_part_from_two_snapshots():
    # bench/profile_server.py's report from two hand-written snapshots of the server's sums:
    # 10 interactions, 3 full runs of 20 ms and 7 fragment runs of 10 ms (0.13 s), 500 messages
    # handed over in 0.03 s of which the 10 new_session messages took 0.01 s, 0.005 s of
    # sending, 0.004 s of BackMsgs; the process used 0.25 s, so 0.25 - 0.13 - 0.03 - 0.005 -
    # 0.004 = 0.081 s was nobody's: 8.1 ms per interaction, 32% of the whole.
    import profile_server

    zero = {"sums": {}, "process_cpu_s": 1.0}
    after = {
        "sums": {
            "ScriptRunner._run_script.full": [3, 0.06],
            "ScriptRunner._run_script.fragment": [7, 0.07],
            "AppSession._handle_scriptrunner_event_on_event_loop": [500, 0.03],
            "AppSession._create_new_session_message": [10, 0.01],
            "AppSession.handle_backmsg": [10, 0.004],
            "Runtime._send_message": [510, 0.005],
        },
        "process_cpu_s": 1.25,
    }
    lines = profile_server.breakdown(zero, after, 10)
    assert lines[0].startswith("10 interactions, 10 script runs (3 full, 7 fragment), 51.0 ")
    assert "25.0 ms per interaction, 25.0 ms per run" in lines[0]
    rows = {ln.split(" | ")[0].lstrip("| "): ln.split(" | ")[1:] for ln in lines[4:]}
    assert rows["script thread: full runs (frame, sidebar, page)"][:3] == ["3", "6.00", "24%"]
    assert rows["event loop: messages from the script thread"][:3] == ["500", "2.00", "8%"]
    assert rows["event loop: the new_session message of each run"][1:3] == ["1.00", "4%"]
    rest = rows["the rest: uvicorn, websocket frames, asyncio, other threads"]
    assert rest[1:3] == ["8.10", "32%"]
    assert profile_server.breakdown(zero, zero, 0) == ["no script ran: nothing to split"]
