"""Foreign-origin websocket handshakes cost nothing (issue 39, B17 / item 6).

The break: for each websocket handshake whose Origin was another site, Streamlit looked up the
server's external address (checkip.amazonaws.com) synchronously in its event loop, uncached
when the lookup failed; 4 such handshakes at a time held every other visitor's page load at
about 5 s. Two fixes, each checked here:

* HAProxy refuses a request whose Origin host is not its Host (deploy/haproxy.cfg): the
  handshake never reaches a replica. Checked on a stand-in replica (every case of the rule),
  and on a real one (deploy/replicas.py's cluster) under 40 foreign handshakes, 4 at a time,
  while a same-origin visitor loads the page and opens its websocket.
* A replica never looks the address up (deploy/launch.py, which starts it): foreign
  handshakes sent to the replica directly, past HAProxy, are refused by Streamlit at once and
  its log has no "Did not auto detect external IP" (the warning each failed lookup writes).

This machine has no network, where a lookup fails at once; the replicas here get a proxy that
accepts and never answers (HTTP_PROXY, which the lookup's `requests` obeys), so a lookup takes
its two 1-second timeouts as on a network that drops the packets. Times are printed, not
asserted (bench/origin_flood.py prints them with the figures before the fix).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time

import pytest
from conftest import ROOT
from haproxy_support import Backend, Blackhole, haproxy, request, upgrade_request

pytestmark = pytest.mark.slow
if shutil.which("haproxy") is None:
    pytest.skip(
        "HAProxy is not installed (apt-get install haproxy); .ci/run installs it",
        allow_module_level=True,
    )
sys.path.insert(0, str(ROOT / "deploy"))

LOOKUP_FAILED = "Did not auto detect external IP"  # Streamlit's warning per failed lookup
FOREIGN = 40
AT_A_TIME = 4


@pytest.fixture
def backend():
    b = Backend()
    yield b
    b.stop()


def _handshake(port: int, origin: str | None, host: str = "lab", extra: str = ""):
    headers = (f"Origin: {origin}\r\n" if origin is not None else "") + extra
    return request(port, upgrade_request(headers, host=host).decode())


@pytest.mark.parametrize(
    "origin,host,allowed",
    [
        ("http://lab", "lab", True),
        ("https://LAB", "lab", True),  # host names are case-insensitive
        ("http://lab:8443", "lab:8443", True),
        (None, "lab", True),  # no Origin: not a browser (see deploy/haproxy.cfg)
        ("http://evil.example", "lab", False),
        ("http://lab.evil.example", "lab", False),
        ("http://lab:99", "lab", False),  # another port is another origin
        ("http://lab", "lab:8443", False),
        ("null", "lab", False),  # a sandboxed frame or a file
        ("", "lab", False),
    ],
)
def test_haproxy_admits_only_same_origin_requests(tmp_path, backend, origin, host, allowed):
    with haproxy(tmp_path, backend) as port:
        status, headers, _, _ = _handshake(port, origin, host)
        http_status = request(
            port,
            f"GET /_stcore/health HTTP/1.1\r\nHost: {host}\r\n"
            + (f"Origin: {origin}\r\n" if origin is not None else "")
            + "Connection: close\r\n\r\n",
        )[0]
    if allowed:
        assert status == 101 and headers.get("x-served-by") == "app1"
        assert len(backend.upgrades) == 1 and http_status == 200
    else:
        # Refused by HAProxy itself: no replica named, nothing reached the backend.
        assert status == 403 and "x-served-by" not in headers
        assert backend.upgrades == [] and http_status == 403


def test_two_origins_are_refused(tmp_path, backend):
    with haproxy(tmp_path, backend) as port:
        status, _, _, _ = _handshake(port, "http://lab", extra="Origin: http://evil.example\r\n")
        assert status == 403
        status, _, _, _ = _handshake(port, "http://lab", extra="Origin: http://lab\r\n")
        assert status == 403
    assert backend.upgrades == []


# -- a real replica -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    pytest.importorskip("streamlit", reason="streamlit is not installed (the [app] extra)")
    import replicas

    hole = Blackhole()
    proxy = f"http://127.0.0.1:{hole.port}"
    saved = {k: os.environ.get(k) for k in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")}
    os.environ.update(HTTP_PROXY=proxy, HTTPS_PROXY=proxy, NO_PROXY="127.0.0.1,localhost")
    try:
        c = replicas.Cluster(
            replicas=1, port=0, base_port=0, run_dir=tmp_path_factory.mktemp("origin")
        )
        c.start()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    try:
        yield c
    finally:
        c.stop()
        hole.close()


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def _flood_and_visit(port: int, host: str):
    """40 foreign-origin handshakes, 4 at a time, on ``port`` (Host: ``host``), while a
    same-origin visitor loads the page and opens its websocket, twice. Returns the foreign
    answers [(status, headers)] and the visits [(page status, websocket status, seconds)]."""

    async def foreign(gate):
        async with gate:
            status, headers, _, _ = await asyncio.to_thread(
                _handshake, port, "http://evil.example", host
            )
            return status, headers

    def visit():
        t0 = time.perf_counter()
        page = request(port, f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
        ws = _handshake(port, f"http://{host}", host)
        return page[0], ws[0], time.perf_counter() - t0

    async def run():
        gate = asyncio.Semaphore(AT_A_TIME)
        flood = asyncio.gather(*(foreign(gate) for _ in range(FOREIGN)))
        await asyncio.sleep(0.3)  # the flood under way
        visits = [await asyncio.to_thread(visit) for _ in range(2)]
        return await flood, visits

    return asyncio.run(run())


def test_foreign_origin_flood_through_haproxy_leaves_the_page_loading(cluster):
    port = _port(cluster.url)
    host = f"127.0.0.1:{port}"
    log = cluster.members[0].log
    foreign, visits = _flood_and_visit(port, host)
    print(
        f"\nthrough HAProxy: {FOREIGN} foreign handshakes ({AT_A_TIME} at a time) answered "
        f"{sorted(set(s for s, _ in foreign))}; same-origin visits (page + websocket): "
        + ", ".join(f"{v[2]:.3f} s" for v in visits)
    )
    assert [s for s, _ in foreign] == [403] * FOREIGN
    assert not any("x-served-by" in h for _, h in foreign)  # HAProxy's own answer
    assert all(page == 200 and ws == 101 for page, ws, _ in visits)
    assert LOOKUP_FAILED not in log.read_text()


def test_a_replica_never_looks_up_its_external_address(cluster):
    """Past HAProxy, straight to the replica: Streamlit refuses the foreign handshakes itself,
    and makes no lookup for them (none started at start either)."""
    replica = cluster.members[0]
    port = _port(replica.address)
    foreign, visits = _flood_and_visit(port, f"127.0.0.1:{port}")
    print(
        f"\nstraight to the replica: {FOREIGN} foreign handshakes answered "
        f"{sorted(set(s for s, _ in foreign))}; same-origin visits: "
        + ", ".join(f"{v[2]:.3f} s" for v in visits)
    )
    assert [s for s, _ in foreign] == [403] * FOREIGN
    assert all(page == 200 and ws == 101 for page, ws, _ in visits)
    log = replica.log.read_text()
    assert LOOKUP_FAILED not in log and "External URL" not in log


def test_the_launcher_empties_streamlits_cache_of_the_address(monkeypatch):
    """deploy/launch.py on the installed Streamlit: after it, the origin check refuses a
    foreign origin and admits this machine's own without any HTTP request."""
    pytest.importorskip("streamlit", reason="streamlit is not installed (the [app] extra)")
    import launch
    from streamlit import net_util
    from streamlit.web.server import server_util

    calls = []
    monkeypatch.setattr(net_util, "_make_blocking_http_get", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(net_util, "_external_ip", None)
    assert not server_util.is_url_from_allowed_origins("http://evil.example")
    assert calls, "without the launcher Streamlit looks the address up (the break)"
    calls.clear()
    launch.never_look_up_the_external_address()
    assert not server_util.is_url_from_allowed_origins("http://evil.example")
    assert server_util.is_url_from_allowed_origins("http://localhost:8501")
    assert net_util.get_external_ip() == "" and calls == []
