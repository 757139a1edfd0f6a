"""Who a visitor is (webui/visitor.py), seen by a real Streamlit server over a websocket: the
key of the per-visitor limits of the device queue and the Hub fetch (issue 22 B5, B10)."""

import asyncio
import os
import sys
import time

import pytest

websockets = pytest.importorskip("websockets")

APP = """
import os
from webui.visitor import visitor_id
with open(os.environ["KVLAB_E2E_LOG"], "a") as fh:
    fh.write(visitor_id() + "\\n")
"""


def seen(tmp_path, behind_proxy: bool, headers: dict) -> str:
    from conftest import start_server
    from streamlit.proto.BackMsg_pb2 import BackMsg

    app, log = tmp_path / "app.py", tmp_path / "log.txt"
    app.write_text(APP)
    log.write_text("")
    env = {
        **os.environ,
        "KVLAB_E2E_LOG": str(log),
        "KVLAB_BEHIND_PROXY": "1" if behind_proxy else "",
    }
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

    async def tab():
        async with websockets.connect(
            f"ws://127.0.0.1:{port}/_stcore/stream", additional_headers=headers
        ) as ws:
            msg = BackMsg()
            msg.rerun_script.query_string = ""
            await ws.send(msg.SerializeToString())
            deadline = time.monotonic() + 20
            while not log.read_text().strip():
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)

    try:
        asyncio.run(tab())
    finally:
        proc.terminate()
        proc.wait(10)
    return log.read_text().split()[0]


def test_behind_the_proxy_the_last_forwarded_address_is_the_visitor(tmp_path):
    # HAProxy replaces the header with the real source; with two entries (a client's own and
    # HAProxy's), only the last one, the one HAProxy appended, counts.
    assert seen(tmp_path, True, {"X-Forwarded-For": "6.6.6.6, 10.1.2.3"}) == "ip:10.1.2.3"


def test_directly_on_loopback_every_tab_is_one_visitor(tmp_path):
    assert seen(tmp_path, False, {}) == "ip:local"


def test_a_loopback_peers_forwarded_header_is_taken_by_the_server_itself(tmp_path):
    # Streamlit 1.67 serves through uvicorn, whose proxy-header support trusts
    # X-Forwarded-For from loopback peers (FORWARDED_ALLOW_IPS, default "127.0.0.1,::1"): the
    # case of HAProxy on the same machine (deploy/replicas.py), which replaces the header. A
    # remote peer's header is not trusted by uvicorn; behind a proxy on another host (compose,
    # Kubernetes) KVLAB_BEHIND_PROXY=1 makes the app read it.
    assert seen(tmp_path, False, {"X-Forwarded-For": "6.6.6.6"}) == "ip:6.6.6.6"
