"""HAProxy (deploy/haproxy.cfg, the real binary) against one hostile source (issue 22, B7).

The lock that was reported: one client opened 4,000 idle websockets in 37 s; with "maxconn 4000",
an hour of "timeout tunnel" and no per-source limit, HAProxy held them all and every new visitor's
GET / waited in the kernel's queue until it timed out. Here the same attack runs from one loopback
address (Linux answers on all of 127.0.0.0/8, so a client can bind 127.0.0.2 as its source) while
a visitor from another address loads the page; per-source limits must refuse the attacker's
connections quickly and keep the visitor's answer fast.

The backend is a stand-in replica (asyncio, in a thread of this process), not Streamlit: it
answers /_stcore/health for HAProxy's checks, answers every other GET with the X-Forwarded-For
values it received, accepts websocket upgrades and then holds them, as a replica holds a session.
Thousands of held websockets cost it nothing, where thousands of Streamlit sessions would cost
minutes of CPU. HAProxy gets its listening socket already bound (fd@N, as deploy/replicas.py
does), so no other program can take the port in between."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import ROOT

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

HAPROXY_CFG = ROOT / "deploy" / "haproxy.cfg"
WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455's, for Sec-WebSocket-Accept


# -- a stand-in replica ---------------------------------------------------------------------


class Backend:
    """asyncio server on 127.0.0.1 in its own thread. ``ping_every``: seconds between websocket
    ping frames on every held websocket (Streamlit's server pings every 30 s), or None."""

    def __init__(self, ping_every: float | None = None):
        self.ping_every = ping_every
        self.held = 0  # websockets open right now
        self.upgrades: list[list[str]] = []  # the X-Forwarded-For values of each upgrade
        self.pongs = 0
        self.loop = asyncio.new_event_loop()
        self.port = 0
        ready = threading.Event()

        def run():
            asyncio.set_event_loop(self.loop)
            server = self.loop.run_until_complete(
                asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=4096)
            )
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            self.loop.run_forever()
            server.close()
            self.loop.run_until_complete(server.wait_closed())

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        ready.wait(10)

    def stop(self) -> None:
        async def close():
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.loop.stop()

        asyncio.run_coroutine_threadsafe(close(), self.loop)
        self.thread.join(10)
        self.loop.close()

    async def _handle(self, reader, writer):
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
                lines = head.split("\r\n")
                path = lines[0].split(" ")[1]
                headers = [tuple(p.strip() for p in ln.split(":", 1)) for ln in lines[1:] if ln]
                xff = [v for k, v in headers if k.lower() == "x-forwarded-for"]
                h = {k.lower(): v for k, v in headers}
                if h.get("upgrade", "").lower() == "websocket":
                    self.upgrades.append(xff)
                    accept = base64.b64encode(
                        hashlib.sha1(h["sec-websocket-key"].encode() + WS_GUID).digest()
                    )
                    writer.write(
                        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                        b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n"
                    )
                    await writer.drain()
                    await self._hold(reader, writer)
                    return
                body = json.dumps({"path": path, "x-forwarded-for": xff}).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n" % len(body) + body
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, IndexError, KeyError):
            pass
        finally:
            writer.close()

    async def _hold(self, reader, writer):
        """A websocket as a replica holds it: open until the other side closes it."""
        self.held += 1
        pinger = asyncio.ensure_future(self._ping(writer)) if self.ping_every else None
        try:
            while data := await reader.read(4096):
                self.pongs += data.count(b"\x8a")  # a pong frame's first byte (FIN + opcode 10)
        except ConnectionError:
            pass
        finally:
            self.held -= 1
            if pinger:
                pinger.cancel()

    async def _ping(self, writer):
        while True:
            await asyncio.sleep(self.ping_every)
            writer.write(b"\x89\x00")  # an empty ping frame (server frames are not masked)
            await writer.drain()


@pytest.fixture
def backend():
    b = Backend()
    yield b
    b.stop()


# -- HAProxy --------------------------------------------------------------------------------


@contextmanager
def haproxy(tmp: Path, backend: Backend, cfg: Path = HAPROXY_CFG, **env_extra: str):
    """HAProxy with ``cfg`` and one server (the backend): yields its port on 127.0.0.1."""
    servers = tmp / "backend.cfg"
    servers.write_text(f"backend replicas\n    server app1 127.0.0.1:{backend.port} cookie app1\n")
    lb = socket.socket()
    lb.bind(("127.0.0.1", 0))
    lb.listen(4096)
    lb.set_inheritable(True)
    port = lb.getsockname()[1]
    env = dict(
        os.environ,
        KVLAB_LB_BIND=f"fd@{lb.fileno()}",
        KVLAB_HAPROXY_SOCKET=str(tmp / "haproxy.sock"),
        **env_extra,
    )
    log = tmp / "haproxy.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            ["haproxy", "-db", "-f", str(cfg), "-f", str(servers)],
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            pass_fds=(lb.fileno(),),
        )
    lb.close()
    try:
        deadline = time.time() + 15
        while True:
            assert proc.poll() is None, f"HAProxy did not start:\n{log.read_text()}"
            try:
                if _get(port, "/_stcore/health", timeout=1)[0] == 200:
                    break
            except OSError:
                pass
            assert time.time() < deadline, f"HAProxy did not answer:\n{log.read_text()}"
            time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _get(
    port: int, path: str = "/", source: str = "127.0.0.1", timeout: float = 2.0, headers: str = ""
) -> tuple[int, bytes, float]:
    """One GET through HAProxy from ``source``: (status, body, seconds)."""
    t0 = time.perf_counter()
    with socket.create_connection(
        ("127.0.0.1", port), timeout=timeout, source_address=(source, 0)
    ) as s:
        s.sendall(
            f"GET {path} HTTP/1.1\r\nHost: lab\r\n{headers}Connection: close\r\n\r\n".encode()
        )
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body, time.perf_counter() - t0


def _upgrade_request(headers: str = "") -> bytes:
    key = base64.b64encode(os.urandom(16)).decode()
    return (
        f"GET /_stcore/stream HTTP/1.1\r\nHost: lab\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        f"{headers}\r\n"
    ).encode()


async def _open_websocket(port: int, source: str, timeout: float):
    """One websocket upgrade from ``source``: ("upgraded", writer), ("refused", seconds) when
    HAProxy closes or resets it, or ("hung", seconds) when nothing answers within timeout."""
    t0 = time.perf_counter()
    writer = None
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0)), timeout
        )
        writer.write(_upgrade_request())
        line = await asyncio.wait_for(reader.readline(), timeout - (time.perf_counter() - t0))
    except (asyncio.TimeoutError, TimeoutError):
        if writer:
            writer.close()
        return "hung", time.perf_counter() - t0
    except OSError:
        if writer:
            writer.close()
        return "refused", time.perf_counter() - t0
    if line.startswith(b"HTTP/1.1 101"):
        return "upgraded", (reader, writer)
    writer.close()
    return "refused", time.perf_counter() - t0


async def _flood(port: int, n: int, source: str, timeout: float = 2.0, parallel: int = 200):
    """n websockets from one source as fast as they open (``parallel`` at a time), the ones
    that open held open: {"upgraded": [...], "refused": [seconds], "hung": [seconds]}."""
    out: dict[str, list] = {"upgraded": [], "refused": [], "hung": []}
    gate = asyncio.Semaphore(parallel)

    async def one():
        async with gate:
            kind, what = await _open_websocket(port, source, timeout)
            out[kind].append(what)

    await asyncio.gather(*(one() for _ in range(n)))
    return out


def _close_all(upgraded) -> None:
    for _, writer in upgraded:
        writer.close()


def _global_maxconn(cfg: Path = HAPROXY_CFG) -> int:
    text = cfg.read_text()
    return int(re.search(r"^global\b.*?^\s+maxconn\s+(\d+)", text, re.M | re.S).group(1))


def _enough_files(n: int) -> None:
    """This process holds both ends of every connection (client and backend): raise the soft
    limit on open files, or skip when the hard limit is too low."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < n:
        pytest.skip(f"needs {n} open files, the hard limit is {hard} (ulimit -Hn)")
    if soft != resource.RLIM_INFINITY and soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))


# -- the lock --------------------------------------------------------------------------------


def _attack(tmp: Path, backend: Backend, cfg: Path = HAPROXY_CFG) -> dict:
    """The reported attack at the configuration's own global maxconn: one source (127.0.0.2)
    opens more websockets than HAProxy may hold at all, holds them, and then a visitor from
    127.0.0.3 asks for the page (1 s timeout)."""
    n = _global_maxconn(cfg) + 100
    _enough_files(2 * n + 500)
    with haproxy(tmp, backend, cfg) as port:

        async def attack_then_visit():
            t0 = time.perf_counter()
            got = await _flood(port, n, "127.0.0.2")
            got["seconds"] = time.perf_counter() - t0
            try:
                got["visit"] = await asyncio.to_thread(_get, port, "/", "127.0.0.3", 1.0)
            except OSError as e:  # a timeout included
                got["visit"] = e
            _close_all(got["upgraded"])
            return got

        got = asyncio.run(attack_then_visit())
    visit = got["visit"]
    seen = visit if isinstance(visit, OSError) else f"{visit[0]} in {visit[2]:.3f} s"
    print(
        f"\n{cfg.name}: {n} websockets from 127.0.0.2 in {got['seconds']:.1f} s: "
        f"{len(got['upgraded'])} upgraded, {len(got['refused'])} refused (slowest "
        f"{max(got['refused'], default=0):.3f} s), {len(got['hung'])} unanswered; visitor "
        f"from 127.0.0.3: {seen}"
    )
    return got


def test_one_source_cannot_lock_out_the_others(tmp_path, backend):
    """Its connections past its share are refused at once, and the visitor from another
    address still gets the page in well under a second."""
    got = _attack(tmp_path, backend)
    visit = got["visit"]
    assert not isinstance(visit, OSError), f"the visitor's GET / failed: {visit!r}"
    status, _, seconds = visit
    assert status == 200 and seconds < 0.5
    # The attacker got its share (the default websockets per source), no more, and every
    # connection past it was turned away at once, none left waiting.
    assert len(got["upgraded"]) == 150
    assert not got["hung"]
    assert max(got["refused"]) < 1.0


def test_without_the_per_source_limits_the_attack_locks_haproxy(tmp_path, backend):
    """The same attack on the same file with its per-source rules taken out (as before
    issue 22): the attacker holds every connection HAProxy may hold, and the visitor's GET /
    gets no answer. So the test above reproduces the lock. Scaled down to maxconn 400 to take
    one second, not ten; at the file's 4,000 it locks the same way."""
    text = HAPROXY_CFG.read_text()
    rules = [
        ln
        for ln in text.splitlines()
        if re.match(r"\s+(tcp-request connection reject|http-request deny)", ln)
    ]
    assert len(rules) == 3
    text = "\n".join(ln for ln in text.splitlines() if ln not in rules) + "\n"
    old = tmp_path / "haproxy-without-limits.cfg"
    old.write_text(re.sub(r"^(\s+maxconn) \d+", r"\1 400", text, count=1, flags=re.M))
    got = _attack(tmp_path, backend, old)
    assert isinstance(got["visit"], OSError)  # timed out: waiting in the kernel's queue
    assert len(got["upgraded"]) == 400 == _global_maxconn(old)


# -- the limits, one by one ---------------------------------------------------------------------

SMALL = {
    "KVLAB_LB_CONN_PER_SOURCE": "12",
    "KVLAB_LB_WEBSOCKETS_PER_SOURCE": "5",
    "KVLAB_LB_CONN_RATE_PER_SOURCE": "40",
}


def _idle(port: int, source: str) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=2, source_address=(source, 0))


def _closed_by_haproxy(s: socket.socket, wait: float = 0.5) -> bool:
    """True when HAProxy closed (or reset) the connection; False when it is still open."""
    s.settimeout(wait)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionError:
        return True


def test_limits_are_per_source_and_come_from_the_environment(tmp_path, backend):
    with haproxy(tmp_path, backend, **SMALL) as port:

        async def websockets_then_more():
            first = await _flood(port, 8, "127.0.0.4", parallel=1)
            other = await _flood(port, 5, "127.0.0.5", parallel=1)  # another source: its own 5
            _close_all(first["upgraded"][:2])  # a current limit: two closed, two more may open
            await asyncio.sleep(0.2)
            again = await _flood(port, 3, "127.0.0.4", parallel=1)
            counts = [len(x["upgraded"]) for x in (first, other, again)]
            for x in (first, other, again):
                _close_all(x["upgraded"])
            return counts, first["refused"]

        counts, refused = asyncio.run(websockets_then_more())
        assert counts == [5, 5, 2] and len(refused) == 3 and backend.held <= 12

        # Connections at once, whatever they carry: 12 held (idle, no request yet), the 13th
        # closed at once.
        held = [_idle(port, "127.0.0.6") for _ in range(12)]
        assert not any(_closed_by_haproxy(s, 0.05) for s in held)
        t0 = time.perf_counter()
        try:
            extra = _idle(port, "127.0.0.6")
        except ConnectionResetError:  # closed so fast that connect() saw it
            pass
        else:
            assert _closed_by_haproxy(extra)
            extra.close()
        assert time.perf_counter() - t0 < 0.5
        assert _get(port, "/", "127.0.0.7")[0] == 200  # another source is served meanwhile
        for s in held:
            s.close()

        # New connections per 10 s: 40 answered, then refused.
        answered = 0
        for _ in range(50):
            try:
                answered += _get(port, "/", "127.0.0.8", timeout=1)[0] == 200
            except OSError:
                pass
        assert answered == 40
        assert _get(port, "/", "127.0.0.9")[0] == 200


def test_a_class_behind_one_address_gets_in(tmp_path, backend):
    """60 students behind one school NAT open the link at the same moment: each browser tab
    opens its websocket and 6 kept-alive connections for the page's files (what Chromium did
    through HAProxy), 420 connections from one address, then each opens a second tab."""
    _enough_files(2000)
    with haproxy(tmp_path, backend) as port:

        async def student():
            files = []
            for _ in range(6):
                reader, writer = await asyncio.open_connection(
                    "127.0.0.1", port, local_addr=("127.0.0.10", 0)
                )
                writer.write(b"GET /static/app.js HTTP/1.1\r\nHost: lab\r\n\r\n")
                files.append((reader, writer))
            statuses = [(await r.readline())[:12] for r, _ in files]
            kind, ws = await _open_websocket(port, "127.0.0.10", 5.0)
            return statuses, kind, ws, files

        async def course():
            tabs = await asyncio.gather(*(student() for _ in range(60)))
            second = await _flood(port, 60, "127.0.0.10", timeout=5.0)
            out = ([s for t in tabs for s in t[0]], [t[1] for t in tabs], second)
            _close_all([t[2] for t in tabs if t[1] == "upgraded"] + second["upgraded"])
            for t in tabs:
                _close_all(t[3])
            return out

        statuses, kinds, second = asyncio.run(course())
    assert statuses == [b"HTTP/1.1 200"] * 360
    assert kinds == ["upgraded"] * 60
    assert len(second["upgraded"]) == 60


# -- who the visitor is -----------------------------------------------------------------------


def test_a_forged_x_forwarded_for_is_replaced_by_the_real_source(tmp_path, backend):
    forged = "X-Forwarded-For: 6.6.6.6\r\nX-Forwarded-For: 10.0.0.1, 10.0.0.2\r\n"
    with haproxy(tmp_path, backend) as port:
        status, body, _ = _get(port, "/", "127.0.0.11", headers=forged)
        assert status == 200
        assert json.loads(body)["x-forwarded-for"] == ["127.0.0.11"]
        # The websocket's own request too: Streamlit's st.context.headers are that request's.
        with socket.create_connection(
            ("127.0.0.1", port), timeout=2, source_address=("127.0.0.12", 0)
        ) as s:
            s.sendall(_upgrade_request(forged))
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


def test_tunnel_timeout_closes_a_silent_websocket_and_keeps_a_pinged_one(tmp_path):
    """HAProxy's own behaviour, on a copy of the file with timeouts shortened to seconds: a
    slow request head is cut, a websocket with no traffic is closed after "timeout tunnel",
    and one with a ping and its pong every 0.25 s (Streamlit's: every 30 s) stays open past it.
    """
    text = HAPROXY_CFG.read_text()
    text = re.sub(r"(timeout http-request) \S+", r"\1 1s", text)
    text = re.sub(r"(timeout tunnel) \S+", r"\1 1s", text)
    short = tmp_path / "haproxy-short.cfg"
    short.write_text(text)

    silent, pinged = Backend(), Backend(ping_every=0.25)
    try:
        with haproxy(tmp_path, silent, short) as port:
            s = _idle(port, "127.0.0.13")
            s.sendall(b"GET / HTTP/1.1\r\nHost: lab\r\n")  # and never the end of the head
            t0 = time.perf_counter()
            s.settimeout(5)
            assert s.recv(4096).startswith(b"HTTP/1.1 408")
            assert 0.8 < time.perf_counter() - t0 < 2
            s.close()

            s = _idle(port, "127.0.0.13")
            s.sendall(_upgrade_request())
            assert s.recv(4096).startswith(b"HTTP/1.1 101")
            t0 = time.perf_counter()
            assert _closed_by_haproxy(s, 5)
            assert 0.8 < time.perf_counter() - t0 < 2
            s.close()
        with haproxy(tmp_path, pinged, short) as port:
            s = _idle(port, "127.0.0.14")
            s.sendall(_upgrade_request())
            assert s.recv(4096).startswith(b"HTTP/1.1 101")
            s.settimeout(1)
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
