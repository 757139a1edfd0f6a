"""The device queue of the live page (webui/device_queue.py): one run at a time for the whole
server, FIFO, one job per session, Stop and leaving cancel, a wall-clock cap, a wait timeout.
Fake jobs with tiny sleeps; one test runs a tiny twin through kvcalc.measure.live.measure_cache."""

from __future__ import annotations

import threading
import time
import types

import pytest

from webui import device_queue as dq


def blocker():
    """A job that holds the device until released; ``started`` is set once it runs."""
    started, release = threading.Event(), threading.Event()

    def fn(should_stop):
        started.set()
        release.wait(5)
        return "held"

    return fn, started, release


def until_stopped(log=None):
    """A job that runs until should_stop() turns true, or gives up after 5 s."""

    def fn(should_stop):
        t0 = time.monotonic()
        while not should_stop():
            if time.monotonic() - t0 > 5:
                return "ran to the end"
            time.sleep(0.005)
        if log is not None:
            log.append(time.monotonic() - t0)
        raise ValueError("The run was stopped.")

    return fn


def wait_for(cond, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_second_session_waits_in_line_and_sees_position_2():
    q = dq.DeviceQueue(is_alive=lambda s: True)
    fn, started, release = blocker()
    a = q.submit("A", fn)
    started.wait(5)
    positions, spans = [], {}

    def b_job(should_stop):
        spans["b"] = time.monotonic()
        time.sleep(0.05)  # long enough for the waiter to see itself on the device
        return "b done"

    t = threading.Thread(
        target=lambda: spans.setdefault(
            "result", q.run("B", b_job, on_wait=positions.append, poll_s=0.01)
        )
    )
    t.start()
    wait_for(lambda: positions)
    assert positions[0] == 2 and q.position(a) == 1
    time.sleep(0.05)
    assert "b" not in spans  # B has not started while A holds the device
    released = time.monotonic()
    release.set()
    t.join(5)
    assert spans["result"] == "b done" and spans["b"] >= released
    assert positions == [2, 1]  # then on the device
    assert a.result() == "held" and q.position(a) is None


def test_fifo_order():
    q = dq.DeviceQueue(is_alive=lambda s: True)
    fn, started, release = blocker()
    q.submit("hold", fn)
    started.wait(5)
    order = []
    jobs = [q.submit(f"s{i}", lambda stop, i=i: order.append(i)) for i in range(4)]
    assert [q.position(j) for j in jobs] == [2, 3, 4, 5]
    release.set()
    for j in jobs:
        j.wait(5)
    assert order == [0, 1, 2, 3]


def test_clear_cache_does_not_make_a_second_queue():
    """Issue 11: a client's clear_cache message replaced the st.cache_resource lock, and runs
    overlapped. The queue is a module global: after clearing, it is the same object, and runs
    submitted before and after the clear never overlap."""
    from streamlit.runtime import caching

    before = dq.QUEUE
    running, peak, lock = [0], [0], threading.Lock()

    def job(should_stop):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.03)
        with lock:
            running[0] -= 1
        return "ok"

    results = []
    threads = []
    for i in range(6):
        if i % 2:  # what the server does on a clear_cache message (AppSession)
            caching.cache_data.clear()
            caching.cache_resource.clear()
        from webui.device_queue import QUEUE as queue_now

        assert queue_now is before
        t = threading.Thread(
            target=lambda q=queue_now, i=i: results.append(
                q.run(f"clear-cache-{i}", job, poll_s=0.01)
            )
        )
        t.start()
        threads.append(t)
    for t in threads:
        t.join(10)
    assert results == ["ok"] * 6
    assert peak[0] == 1  # one run on the device at a time, across the clears


def test_stop_cancels_a_running_job():
    q = dq.DeviceQueue(is_alive=lambda s: True)
    stopped_after = []
    job = q.submit("A", until_stopped(stopped_after))
    wait_for(lambda: job.state == "running")
    time.sleep(0.02)
    job.cancel()
    assert job.should_stop()  # the job's next check stops it (its time: bench/refusals.py)
    assert job.wait(2)
    assert job.stop_reason == "cancelled" and stopped_after  # stopped, not run to its end
    with pytest.raises(ValueError, match="stopped"):
        job.result()


def test_streamlit_stop_in_the_wait_cancels_the_job():
    """On the page Streamlit raises StopException at the checkpoint (a session-state read) when
    the user presses Stop; the queue's finally cancels the job, the device is freed."""
    from streamlit.runtime.scriptrunner_utils.exceptions import StopException

    q = dq.DeviceQueue(is_alive=lambda s: True)
    stopped_after = []
    calls = [0]

    def checkpoint():
        calls[0] += 1
        if calls[0] == 3:
            raise StopException()

    job = q.submit("A", until_stopped(stopped_after))
    with pytest.raises(StopException):
        q.wait(job, checkpoint=checkpoint, poll_s=0.01)
    assert job.wait(2) and job.stop_reason == "cancelled" and stopped_after
    # The device is free for the next session at once.
    assert q.run("B", lambda stop: "next", poll_s=0.01) == "next"


def test_a_queued_job_of_a_session_that_left_never_runs():
    gone = set()
    q = dq.DeviceQueue(is_alive=lambda s: s not in gone)
    fn, started, release = blocker()
    q.submit("A", fn)
    started.wait(5)
    ran = threading.Event()
    b = q.submit("B", lambda stop: ran.set())
    c = q.submit("C", lambda stop: "c ran")
    gone.add("B")  # B's tab closes while it waits
    release.set()
    assert c.wait(5) and c.result() == "c ran"
    assert b.done and not ran.is_set() and b.stop_reason == "session left"
    with pytest.raises(dq.QueueError, match="left"):
        b.result()


def test_a_running_job_stops_when_its_session_leaves():
    gone = set()
    q = dq.DeviceQueue(is_alive=lambda s: s not in gone)
    job = q.submit("A", until_stopped())
    wait_for(lambda: job.state == "running")
    gone.add("A")
    assert job.wait(2) and job.stop_reason == "session left"


def test_the_wall_clock_cap_stops_a_long_job(monkeypatch):
    # The queue's clock is the job's: each step of the job takes 0.04 s of it, so a cap of 0.1 s
    # stops the job at its third check (0.12 s), whatever the machine's load. How long the
    # stop takes in real time is bench/refusals.py's figure, not a bound here.
    clock = types.SimpleNamespace(now=1000.0)
    monkeypatch.setattr(dq, "time", types.SimpleNamespace(monotonic=lambda: clock.now))
    steps = []

    def long_job(should_stop):
        for step in range(1, 10_000):
            clock.now += 0.04
            if should_stop():
                steps.append(step)
                raise ValueError("The run was stopped.")
        return "ran to the end"

    q = dq.DeviceQueue(cap_s=0.1, is_alive=lambda s: True)
    with pytest.raises(dq.QueueError, match="longer than the 0 s allowed") as info:
        q.run("A", long_job, poll_s=0.01)
    assert steps == [3]  # stopped at the first check past its cap
    assert isinstance(info.value.__cause__, ValueError)  # the job's own "stopped" error
    assert q.run("B", lambda stop: "next", poll_s=0.01) == "next"


def test_hosted_and_local_caps(monkeypatch):
    monkeypatch.setenv("KVLAB_HOSTED", "1")
    assert dq.DeviceQueue().run_cap_s() == 60
    monkeypatch.setenv("KVLAB_HOSTED", "0")
    assert dq.DeviceQueue().run_cap_s() == dq.LOCAL_LIMITS[0] > 60


def test_one_job_per_session():
    q = dq.DeviceQueue(is_alive=lambda s: True)
    fn, started, release = blocker()
    q.submit("hold", fn)
    started.wait(5)
    first_ran = threading.Event()
    first = q.submit("A", lambda stop: first_ran.set())
    other = q.submit("B", lambda stop: "b")
    second = q.submit("A", lambda stop: "a again")
    assert first.done and first.stop_reason == "replaced"
    assert [q.position(j) for j in (other, second)] == [2, 3]  # A's new job joins the end
    with pytest.raises(dq.QueueError, match="replaced"):
        q.wait(first)
    release.set()
    assert second.wait(5) and second.result() == "a again" and not first_ran.is_set()
    # A running job is replaced too: it is asked to stop, and the new one runs after it.
    long = q.submit("C", until_stopped())
    wait_for(lambda: long.state == "running")
    again = q.submit("C", lambda stop: "c2")
    assert long.wait(2) and long.stop_reason == "replaced"
    assert again.wait(2) and again.result() == "c2"


def test_wait_timeout_leaves_the_line():
    q = dq.DeviceQueue(wait_timeout_s=0.1, is_alive=lambda s: True)
    fn, started, release = blocker()
    q.submit("hold", fn)
    started.wait(5)
    ran = threading.Event()
    job = q.submit("B", lambda stop: ran.set())
    with pytest.raises(dq.QueueError, match="busy"):
        q.wait(job, poll_s=0.01)
    assert q.position(job) is None and job.stop_reason == "wait timeout"
    release.set()
    time.sleep(0.05)
    assert not ran.is_set()


def test_errors_reach_the_waiter_and_the_worker_goes_on():
    q = dq.DeviceQueue(is_alive=lambda s: True)

    def bad(stop):
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        q.run("A", bad, poll_s=0.01)
    assert q.run("A", lambda stop: 42, poll_s=0.01) == 42


def test_the_line_is_bounded():
    q = dq.DeviceQueue(is_alive=lambda s: True, max_queued=2)
    fn, started, release = blocker()
    q.submit("hold", fn)
    started.wait(5)
    q.submit("a", lambda stop: None)
    q.submit("b", lambda stop: None)
    with pytest.raises(dq.QueueError, match="already waiting"):
        q.submit("c", lambda stop: None)
    release.set()


def test_session_alive_asks_the_streamlit_runtime(monkeypatch):
    from unittest.mock import MagicMock

    from streamlit.runtime import Runtime

    fake = MagicMock()
    fake.get_client.side_effect = lambda sid: object() if sid == "here" else None
    monkeypatch.setattr(Runtime, "_instance", fake)
    assert dq.session_alive("here") and not dq.session_alive("gone")
    monkeypatch.setattr(Runtime, "_instance", None)
    assert dq.session_alive("anything")  # no server: plain Python counts as alive


def test_measure_stops_between_steps():
    pytest.importorskip("torch", reason="torch is not installed (requirements.txt)")
    from kvcalc.measure import live

    calls = [0]

    def stop_on_third():
        calls[0] += 1
        return calls[0] >= 3

    with pytest.raises(live.LiveError, match="stopped after 2 of its 11 steps"):
        live.measure_cache(
            live.RealModel("llama-3.1-8b", device="cpu"),
            prompt_tokens=4,
            new_tokens=6,
            no_cache_tokens=4,
            should_stop=stop_on_third,
        )
    seen = [0]

    def never():
        seen[0] += 1
        return False

    m = live.measure_cache(
        live.RealModel("llama-3.1-8b", device="cpu"),
        prompt_tokens=4,
        new_tokens=6,
        no_cache_tokens=4,
        should_stop=never,
    )
    assert m.all_match and seen[0] == 11  # checked before every step, with and without a cache


async def open_tab(websockets, port: int):
    """One browser tab: a websocket to the server whose messages are read and dropped."""
    import asyncio

    ws = await websockets.connect(f"ws://127.0.0.1:{port}/_stcore/stream", max_size=None)

    async def drain():
        try:
            async for _ in ws:
                pass
        except Exception:  # noqa: BLE001 - the tab was closed
            pass

    asyncio.ensure_future(drain())
    return ws


E2E_APP = """
import os, time
import streamlit as st
from webui import device_queue, visitor

who = st.query_params.get("who", "?")

def log(*words):
    with open(os.environ["KVLAB_E2E_LOG"], "a") as fh:
        fh.write(" ".join([who, *map(str, words)]) + "\\n")

def job(should_stop):
    log("start")
    t0 = time.monotonic()
    while not should_stop():
        time.sleep(0.01)
        if time.monotonic() - t0 > 20:
            log("unstopped")
            return "done"
    log("stopped")
    raise ValueError("stopped")

note = st.empty()
device_queue.QUEUE.run(visitor.session_id(), job,
                       on_wait=lambda pos: (log("pos", pos), note.write(pos)),
                       checkpoint=lambda: st.session_state.get("x"))
"""


def test_real_server_stop_leave_and_clear_cache(tmp_path):
    """A real Streamlit server and two websocket clients, the page's own pattern: A runs, B
    sends clear_cache and waits at position 2; A's Stop frees the device at once (B starts);
    B's tab closing stops B's run."""
    websockets = pytest.importorskip("websockets")
    import asyncio
    import os
    import sys

    from conftest import start_server
    from streamlit.proto.BackMsg_pb2 import BackMsg

    app, log = tmp_path / "app.py", tmp_path / "log.txt"
    app.write_text(E2E_APP)
    log.write_text("")
    env = {**os.environ, "KVLAB_E2E_LOG": str(log)}
    proc, base = start_server(
        lambda port: [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(app),
            f"--server.port={port}",
            "--server.address=127.0.0.1",
            "--server.headless=true",
            "--server.fileWatcherType=none",
            "--browser.gatherUsageStats=false",
        ],
        cwd=tmp_path,
        env=env,
    )
    port = int(base.rsplit(":", 1)[1])

    def lines():
        return log.read_text().splitlines()

    async def until(line, seconds=10.0):
        deadline = time.monotonic() + seconds
        while line not in lines():
            assert time.monotonic() < deadline, f"no {line!r} in {lines()}"
            await asyncio.sleep(0.02)

    async def tab(**send):
        return await open_tab(websockets, port)

    async def send(ws, who=None, stop=False, clear=False):
        msg = BackMsg()
        if who:
            msg.rerun_script.query_string = f"who={who}"
        if stop:
            msg.stop_script = True
        if clear:
            msg.clear_cache = True
        await ws.send(msg.SerializeToString())

    async def scenario():
        a = await tab()
        await send(a, who="A")
        await until("A start")
        b = await tab()
        await send(b, clear=True)
        await send(b, who="B")
        await until("B pos 2")
        await asyncio.sleep(0.2)
        assert "B start" not in lines()  # the clear made no second queue
        await send(a, stop=True)  # A presses Stop
        await until("A stopped", 3)
        await until("B start", 3)
        await b.close()  # B closes the tab
        await until("B stopped", 3)
        await a.close()

    try:
        asyncio.run(scenario())
    finally:
        proc.terminate()
        proc.wait(10)
    assert "A unstopped" not in lines() and "B unstopped" not in lines()


def test_one_visitor_with_many_tabs_cannot_hold_the_line():
    """Issue 22 B5: 17 tabs of one visitor filled the 16-job line and the next visitor was
    refused. Now a visitor holds at most MAX_PER_VISITOR jobs (queued or running) whatever its
    number of tabs, and the next visitor still gets in line."""
    q = dq.DeviceQueue(is_alive=lambda s: True)
    fn, started, release = blocker()
    q.submit("tab-0", fn, visitor="mallory")
    started.wait(5)
    q.submit("tab-1", lambda stop: "second", visitor="mallory")
    for i in range(2, 17):
        with pytest.raises(dq.QueueError, match=f"at most {dq.MAX_PER_VISITOR} per visitor"):
            q.submit(f"tab-{i}", lambda stop: "more", visitor="mallory")
    honest = q.submit("alice-tab", lambda stop: "alice", visitor="alice")
    # Behind the running job only: mallory has just been served, so alice goes first.
    assert q.position(honest) == 2
    release.set()
    assert honest.wait(5) and honest.result() == "alice"


def test_visitors_take_turns():
    """A visitor who has just run goes behind visitors who have not: with mallory's three
    queued tabs ahead of alice's one, alice runs second, not fourth."""
    q = dq.DeviceQueue(is_alive=lambda s: True, max_per_visitor=10)
    fn, started, release = blocker()
    q.submit("hold", fn, visitor="bob")
    started.wait(5)
    order = []
    jobs = [
        q.submit(f"m{i}", lambda stop, i=i: order.append(f"m{i}"), visitor="mallory")
        for i in range(3)
    ]
    jobs.append(q.submit("a0", lambda stop: order.append("a0"), visitor="alice"))
    # Neither has run yet: arrival order among them first, then turns.
    assert [q.position(j) for j in jobs] == [2, 4, 5, 3]
    release.set()
    for j in jobs:
        assert j.wait(5)
    assert order == ["m0", "a0", "m1", "m2"]


def test_without_a_visitor_each_session_is_its_own():
    q = dq.DeviceQueue(is_alive=lambda s: True)
    fn, started, release = blocker()
    q.submit("s0", fn)
    started.wait(5)
    jobs = [q.submit(f"s{i}", lambda stop: "ok") for i in range(1, 5)]  # no per-visitor refusal
    release.set()
    assert all(j.wait(5) and j.result() == "ok" for j in jobs)


CLEAR_APP = """
import os
import streamlit as st
import webui
from webui import shared

webui.warm_up()

def log(line):
    with open(os.environ["KVLAB_E2E_LOG"], "a") as fh:
        fh.write(line + "\\n")

@st.cache_data
def shared_result():
    log("computed")
    return 1

shared_result()
if "rows" not in shared.QUALITY_ROWS:
    shared.QUALITY_ROWS["rows"] = 1
    log("stored")
log("ran")
"""


@pytest.mark.parametrize("hosted", [True, False])
def test_a_clients_clear_cache_cannot_empty_shared_caches_when_hosted(tmp_path, hosted):
    """Issue 22 B6: one anonymous clear_cache websocket message emptied every cache of the
    server. Hosted, it now clears only the sender's session state: a cached result is not
    computed again and the shared quality rows stay. Locally Streamlit's behaviour is kept
    (the second case: the same message does make the cache compute again)."""
    websockets = pytest.importorskip("websockets")
    import asyncio
    import os
    import sys

    from conftest import start_server
    from streamlit.proto.BackMsg_pb2 import BackMsg

    app, log = tmp_path / "app.py", tmp_path / "log.txt"
    app.write_text(CLEAR_APP)
    log.write_text("")
    env = {**os.environ, "KVLAB_E2E_LOG": str(log), "KVLAB_HOSTED": "1" if hosted else "0"}
    proc, base = start_server(
        lambda port: [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(app),
            f"--server.port={port}",
            "--server.address=127.0.0.1",
            "--server.headless=true",
            "--server.fileWatcherType=none",
            "--browser.gatherUsageStats=false",
        ],
        cwd=tmp_path,
        env=env,
    )
    port = int(base.rsplit(":", 1)[1])

    async def runs(n, seconds=20.0):
        deadline = time.monotonic() + seconds
        while log.read_text().splitlines().count("ran") < n:
            assert time.monotonic() < deadline, log.read_text()
            await asyncio.sleep(0.05)

    async def scenario():
        async def tab():
            return await open_tab(websockets, port)

        rerun = BackMsg()
        rerun.rerun_script.query_string = ""
        clear = BackMsg()
        clear.clear_cache = True
        a = await tab()
        await a.send(rerun.SerializeToString())
        await runs(1)
        b = await tab()
        await b.send(clear.SerializeToString())
        await asyncio.sleep(0.3)
        await a.send(rerun.SerializeToString())
        await runs(2)
        await a.close()
        await b.close()

    try:
        asyncio.run(scenario())
    finally:
        proc.terminate()
        proc.wait(10)
    lines = log.read_text().splitlines()
    assert lines.count("stored") == 1  # a module global: no clear reaches it
    assert lines.count("computed") == (1 if hosted else 2), lines
