"""HAProxy (deploy/haproxy.cfg, the real binary) against one hostile source (issue 22, B7), and
for a class behind one school address (issue 39, B12).

The lock that was reported: one client opened 4,000 idle websockets in 37 s; with "maxconn 4000",
an hour of "timeout tunnel" and no per-source limit, HAProxy held them all and every new visitor's
GET / waited in the kernel's queue until it timed out. Here the same attack runs from one loopback
address (Linux answers on all of 127.0.0.0/8, so a client can bind 127.0.0.2 as its source) while
a visitor from another address loads the page; per-source limits must refuse the attacker's
connections (none left hanging) and still serve the visitor. The other way round (issue 39,
B12): the shipped limits refused half of a class of 300 behind one address (150 websockets a
source); they must admit the class they are sized for, 400 students with a phone each and the
projector.

These tests assert behaviour only: refused, answered, or hung (no answer within
haproxy_support.HANG_S, 10 s, where HAProxy answers in milliseconds). How long each took is a
bench figure: bench/haproxy_limits.py prints them (issue 39, item 9: a 1.0 s bound here once
failed at 1.56 s on a busy CI machine).

The backend is a stand-in replica (tests/haproxy_support.py), not Streamlit."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import sys
import time

import pytest
from conftest import ROOT
from haproxy_support import (
    HANG_S,
    HAPROXY_CFG,
    Backend,
    attack,
    close_all,
    closed_by_haproxy,
    default_limit,
    flood,
    get,
    global_maxconn,
    haproxy,
    idle,
    open_websocket,
    raise_open_files,
    upgrade_request,
)

if shutil.which("haproxy") is None:
    pytest.skip(
        "HAProxy is not installed (apt-get install haproxy); .ci/run installs it",
        allow_module_level=True,
    )

try:  # Linux answers on all of 127.0.0.0/8; elsewhere each address needs an alias
    with socket.socket() as _s:
        _s.bind(("127.0.0.2", 0))
except OSError:
    pytest.skip(
        "needs source addresses 127.0.0.2 and up on loopback (Linux)", allow_module_level=True
    )

sys.path.insert(0, str(ROOT / "deploy"))
import contextlib

import replicas  # noqa: E402


@pytest.fixture
def backend():
    b = Backend()
    yield b
    b.stop()


def _attack(tmp, backend, cfg=HAPROXY_CFG, wait=HANG_S) -> dict:
    try:
        got = attack(tmp, backend, cfg, wait, wait)
    except OSError as e:
        pytest.skip(str(e))
    print("\n" + got["summary"])
    return got


# -- the lock --------------------------------------------------------------------------------


def test_one_source_cannot_lock_out_the_others(tmp_path, backend):
    """Its connections past its share are refused, none is left hanging, and the visitor from
    another address still gets the page (how fast: bench/haproxy_limits.py)."""
    got = _attack(tmp_path, backend)
    visit = got["visit"]
    assert not isinstance(visit, OSError), f"the visitor's GET / failed: {visit!r}"
    assert visit[0] == 200
    # The attacker got its share (the default websockets per source), no more, and every
    # connection past it was turned away (answered with 429 or closed), none left waiting.
    share = default_limit("KVLAB_LB_WEBSOCKETS_PER_SOURCE")
    assert len(got["upgraded"]) == share
    assert not got["hung"]
    assert len(got["refused"]) == global_maxconn() + 100 - share


def test_without_the_per_source_limits_the_attack_locks_haproxy(tmp_path, backend):
    """The same attack on the same file with its per-source rules taken out (as before
    issue 22): the attacker holds every connection HAProxy may hold, and the visitor's GET /
    gets no answer. So the test above reproduces the lock. Scaled down to maxconn 400 to take
    one second, not ten; at the file's maxconn it locks the same way. (Clients wait 2 s here:
    it is the answer that must not come, so a slow machine cannot make this fail.)"""
    text = HAPROXY_CFG.read_text()
    rules = [
        ln
        for ln in text.splitlines()
        if re.match(r"\s+(tcp-request connection reject|http-request deny deny_status 429)", ln)
    ]
    assert len(rules) == 3
    text = "\n".join(ln for ln in text.splitlines() if ln not in rules) + "\n"
    old = tmp_path / "haproxy-without-limits.cfg"
    old.write_text(re.sub(r"^(\s+maxconn) \d+", r"\1 400", text, count=1, flags=re.M))
    got = _attack(tmp_path, backend, old, wait=2.0)
    assert isinstance(got["visit"], OSError)  # timed out: waiting in the kernel's queue
    assert len(got["upgraded"]) == 400 == global_maxconn(old)


# -- the limits, one by one ---------------------------------------------------------------------

SMALL = {
    "KVLAB_LB_CONN_PER_SOURCE": "12",
    "KVLAB_LB_WEBSOCKETS_PER_SOURCE": "5",
    "KVLAB_LB_CONN_RATE_PER_SOURCE": "40",
}


def test_limits_are_per_source_and_come_from_the_environment(tmp_path, backend):
    with haproxy(tmp_path, backend, **SMALL) as port:

        async def websockets_then_more():
            first = await flood(port, 8, "127.0.0.4", parallel=1)
            other = await flood(port, 5, "127.0.0.5", parallel=1)  # another source: its own 5
            close_all(first["upgraded"][:2])  # a current limit: two closed, two more may open
            await asyncio.sleep(0.2)
            again = await flood(port, 3, "127.0.0.4", parallel=1)
            counts = [len(x["upgraded"]) for x in (first, other, again)]
            hung = sum(len(x["hung"]) for x in (first, other, again))
            for x in (first, other, again):
                close_all(x["upgraded"])
            return counts, first["refused"], hung

        counts, refused, hung = asyncio.run(websockets_then_more())
        assert counts == [5, 5, 2] and len(refused) == 3 and backend.held <= 12 and hung == 0

        # Connections at once, whatever they carry: 12 held (idle, no request yet), the 13th
        # closed by HAProxy (not left open: it is closed long before HANG_S).
        held = [idle(port, "127.0.0.6") for _ in range(12)]
        assert not any(closed_by_haproxy(s, 0.05) for s in held)
        try:
            extra = idle(port, "127.0.0.6")
        except ConnectionResetError:  # closed so fast that connect() saw it
            pass
        else:
            assert closed_by_haproxy(extra, HANG_S)
            extra.close()
        assert get(port, "/", "127.0.0.7")[0] == 200  # another source is served meanwhile
        for s in held:
            s.close()

        # New connections per 10 s: 40 answered, then refused.
        answered = 0
        for _ in range(50):
            with contextlib.suppress(OSError):
                answered += get(port, "/", "127.0.0.8")[0] == 200
        assert answered == 40
        assert get(port, "/", "127.0.0.9")[0] == 200


def _class_loads_the_page(port: int, source: str, tabs: int, files: int = 6):
    """``tabs`` browser tabs behind one address open the link at the same moment: each opens
    ``files`` kept-alive connections for the page's files (what Chromium did through HAProxy
    over HTTP/1.1) and its websocket; then every tab reconnects (a second websocket while the
    first still counts). Returns the file answers' status lines, the first websockets' kinds
    and the second round."""

    async def tab():
        conns = []
        for _ in range(files):
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, local_addr=(source, 0)
            )
            writer.write(b"GET /static/app.js HTTP/1.1\r\nHost: lab\r\n\r\n")
            conns.append((reader, writer))
        statuses = [(await r.readline())[:12] for r, _ in conns]
        kind, ws = await open_websocket(port, source)
        return statuses, kind, ws, conns

    async def course():
        opened = await asyncio.gather(*(tab() for _ in range(tabs)))
        second = await flood(port, tabs, source)
        out = ([s for t in opened for s in t[0]], [t[1] for t in opened], second)
        close_all([t[2] for t in opened if t[1] == "upgraded"] + second["upgraded"])
        for t in opened:
            close_all(t[3])
        return out

    return asyncio.run(course())


def test_a_class_behind_one_address_gets_in(tmp_path, backend):
    """Issue 39, B12, with the shipped limits: the class they are sized for (400 students with
    a phone each, and the projector: 401 tabs) behind one school address opens the link at the
    same moment, 7 connections a tab (2,807 from one address), and then, with those still
    open, every tab reconnects while its first websocket still counts (3,208 connections, 802
    websockets). Before, the file admitted 150 websockets a source and 500 connections: this
    failed."""
    tabs = replicas.CLASS_SIZE + 1
    if not raise_open_files(2 * 7 * tabs + 1000):
        pytest.skip(f"needs {2 * 7 * tabs + 1000} open files (ulimit -Hn is lower)")
    with haproxy(tmp_path, backend) as port:
        statuses, kinds, second = _class_loads_the_page(port, "127.0.0.10", tabs)
    assert statuses == [b"HTTP/1.1 200"] * (6 * tabs)
    assert kinds == ["upgraded"] * tabs
    assert len(second["upgraded"]) == tabs, {k: len(v) for k, v in second.items()}


def test_shipped_limits_are_the_class_arithmetic():
    """deploy/haproxy.cfg's defaults are class_limits(400), the arithmetic its comments and the
    docs/deploy.md state; maxconn leaves room for other sources beside one source at its share."""
    shipped = {
        name: str(default_limit(name))
        for name in (
            "KVLAB_LB_CONN_PER_SOURCE",
            "KVLAB_LB_WEBSOCKETS_PER_SOURCE",
            "KVLAB_LB_CONN_RATE_PER_SOURCE",
        )
    }
    assert shipped == replicas.class_limits(replicas.CLASS_SIZE)
    assert replicas.class_limits(400) == {
        "KVLAB_LB_CONN_PER_SOURCE": "4000",  # 401 tabs x (7 + 1) = 3,208
        "KVLAB_LB_WEBSOCKETS_PER_SOURCE": "1000",  # 401 x 2 = 802
        "KVLAB_LB_CONN_RATE_PER_SOURCE": "4000",
    }
    assert replicas.class_limits(600) == {
        "KVLAB_LB_CONN_PER_SOURCE": "5000",  # 601 x 8 = 4,808
        "KVLAB_LB_WEBSOCKETS_PER_SOURCE": "2000",  # 601 x 2 = 1,202
        "KVLAB_LB_CONN_RATE_PER_SOURCE": "6000",  # 601 x 7 = 4,207 -> 5,000, + 1,000
    }
    assert global_maxconn() >= 2 * int(shipped["KVLAB_LB_CONN_PER_SOURCE"])
    with pytest.raises(ValueError):
        replicas.class_limits(0)


# -- who the visitor is -----------------------------------------------------------------------


def test_a_forged_x_forwarded_for_is_replaced_by_the_real_source(tmp_path, backend):
    forged = "X-Forwarded-For: 6.6.6.6\r\nX-Forwarded-For: 10.0.0.1, 10.0.0.2\r\n"
    with haproxy(tmp_path, backend) as port:
        status, body, _ = get(port, "/", "127.0.0.11", headers=forged)
        assert status == 200
        assert json.loads(body)["x-forwarded-for"] == ["127.0.0.11"]
        # The websocket's own request too: Streamlit's st.context.headers are that request's.
        with socket.create_connection(
            ("127.0.0.1", port), timeout=HANG_S, source_address=("127.0.0.12", 0)
        ) as s:
            s.sendall(upgrade_request(forged))
            assert s.recv(4096).startswith(b"HTTP/1.1 101")
        assert backend.upgrades[-1] == ["127.0.0.12"]


# -- timeouts ---------------------------------------------------------------------------------


def _seconds(text: str) -> float:
    value, unit = re.fullmatch(r"(\d+)(ms|s|m|h)?", text).groups()
    return int(value) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 0.001}[unit]


def _timeout(name: str, cfg_text: str | None = None) -> float:
    text = cfg_text or HAPROXY_CFG.read_text()
    return _seconds(re.search(rf"^\s+timeout {name} (\S+)", text, re.M).group(1))


def test_timeouts_are_short_but_never_cut_an_open_tab():
    # Streamlit pings each websocket every websocketPingInterval seconds and gives up on a peer
    # that does not answer within as long again; HAProxy's tunnel timeout must cover both, or
    # it would cut an open tab that only reads.
    toml = (ROOT / ".streamlit" / "config.toml").read_text()
    ping = int(re.search(r"^websocketPingInterval\s*=\s*(\d+)", toml, re.M).group(1))
    assert 2 * ping < _timeout("tunnel") <= 300
    assert _timeout("http-request") <= 5


def shortened(tmp_path):
    """deploy/haproxy.cfg with its request-head and tunnel timeouts at 1 s."""
    text = HAPROXY_CFG.read_text()
    text = re.sub(r"(timeout http-request) \S+", r"\1 1s", text)
    text = re.sub(r"(timeout tunnel) \S+", r"\1 1s", text)
    short = tmp_path / "haproxy-short.cfg"
    short.write_text(text)
    return short


def test_tunnel_timeout_closes_a_silent_websocket_and_keeps_a_pinged_one(tmp_path):
    """HAProxy's own behaviour, on a copy of the file with timeouts shortened to 1 s: a slow
    request head is cut (408), a websocket with no traffic is closed by "timeout tunnel", and
    one with a ping and its pong every 0.25 s (Streamlit's: every 30 s) stays open past it.
    Each close is waited for up to HANG_S, and comes no sooner than the timeout (a timer does
    not fire early; the time each took is bench/haproxy_limits.py's)."""
    short = shortened(tmp_path)
    silent, pinged = Backend(), Backend(ping_every=0.25)
    try:
        with haproxy(tmp_path, silent, short) as port:
            s = idle(port, "127.0.0.13")
            s.sendall(b"GET / HTTP/1.1\r\nHost: lab\r\n")  # and never the end of the head
            t0 = time.perf_counter()
            s.settimeout(HANG_S)
            assert s.recv(4096).startswith(b"HTTP/1.1 408")
            assert time.perf_counter() - t0 > 0.8
            s.close()

            s = idle(port, "127.0.0.13")
            s.sendall(upgrade_request())
            assert s.recv(4096).startswith(b"HTTP/1.1 101")
            t0 = time.perf_counter()
            assert closed_by_haproxy(s, HANG_S)
            assert time.perf_counter() - t0 > 0.8
            s.close()
        with haproxy(tmp_path, pinged, short) as port:
            s = idle(port, "127.0.0.14")
            s.sendall(upgrade_request())
            assert s.recv(4096).startswith(b"HTTP/1.1 101")
            s.settimeout(HANG_S)
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < 2.5:  # over twice the tunnel timeout
                frame = s.recv(2)
                assert frame == b"\x89\x00", "the connection was closed"
                s.sendall(b"\x8a\x80" + os.urandom(4))  # a masked empty pong, as a browser's
            assert pinged.held == 1
            s.close()
    finally:
        silent.stop()
        pinged.stop()
