"""What the HAProxy tests and bench/haproxy_limits.py share: deploy/haproxy.cfg run by the real
binary in front of a stand-in replica, and raw clients (a GET, a websocket upgrade, a flood).

The stand-in replica (asyncio, in a thread of this process) is not Streamlit: it answers
/_stcore/health for HAProxy's checks, answers every other GET with the X-Forwarded-For values
it received, accepts websocket upgrades and then holds them, as a replica holds a session.
Thousands of held websockets cost it nothing, where thousands of Streamlit sessions would cost
minutes of CPU. HAProxy gets its listening sockets already bound (fd@N, as deploy/replicas.py
does), so no other program can take a port in between.

No pytest here (the bench imports it too): a caller that cannot run decides what to do.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import re
import resource
import socket
import ssl
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HAPROXY_CFG = ROOT / "deploy" / "haproxy.cfg"
WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455's, for Sec-WebSocket-Accept
# How long a client waits before it calls a connection hung: HAProxy answers or refuses within
# milliseconds, so this only separates "answered, however slowly on a busy machine" from
# "never answered" (issue 39, item 9: no wall-time bound in a unit test).
HANG_S = 10.0


# -- a stand-in replica ---------------------------------------------------------------------


class Backend:
    """asyncio server on 127.0.0.1 in its own thread. ``ping_every``: seconds between websocket
    ping frames on every held websocket (Streamlit's server pings every 30 s), or None."""

    def __init__(self, ping_every: float | None = None):
        self.ping_every = ping_every
        self.held = 0  # websockets open right now
        self.upgrades: list[list[str]] = []  # the X-Forwarded-For values of each upgrade
        self.requests: list[dict[str, str]] = []  # every request's headers (lower-case names)
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
                if path != "/_stcore/health":
                    self.requests.append(h)
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
        except asyncio.CancelledError:  # stop(): the server goes, quietly
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


class Blackhole:
    """A TCP server that accepts connections and never answers: the proxy (HTTP_PROXY for a
    replica) of a network where the external-address lookup times out (bench/origin_flood.py,
    tests/test_haproxy_origin.py)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(256)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self):
        self.sock.close()
        for c in self.held:
            c.close()


# -- HAProxy --------------------------------------------------------------------------------


@dataclass
class Lb:
    """A running HAProxy: its main port (TLS when started with a certificate), the plain-HTTP
    port that redirects (0 when none), and the CA file a TLS client trusts (None: plain)."""

    port: int
    http_port: int = 0
    cafile: Path | None = None
    log: Path | None = None


def _listening_socket() -> socket.socket:
    lb = socket.socket()
    lb.bind(("127.0.0.1", 0))
    lb.listen(4096)
    lb.set_inheritable(True)
    return lb


def self_signed(tmp: Path) -> Path:
    """A self-signed certificate for 127.0.0.1 and localhost, made by deploy/replicas.py's
    openssl call: the PEM (certificate and key) HAProxy reads."""
    import sys

    sys.path.insert(0, str(ROOT / "deploy"))
    import replicas  # noqa: PLC0415

    return replicas.self_signed_certificate(tmp / "kvlab.pem", ["127.0.0.1", "localhost"])


@contextmanager
def haproxy_lb(
    tmp: Path,
    backend: Backend,
    cfg: Path = HAPROXY_CFG,
    cert: Path | None = None,
    redirect: bool = False,
    https_port: bool = True,
    **env_extra: str,
):
    """HAProxy with ``cfg`` and one server (the backend): yields an Lb. ``cert``: TLS on the
    main port with that PEM; ``redirect``: a second, plain-HTTP port (KVLAB_LB_HTTP_BIND) whose
    redirects name the main port (KVLAB_LB_HTTPS_PORT) unless ``https_port`` is False."""
    servers = tmp / "backend.cfg"
    servers.write_text(f"backend replicas\n    server app1 127.0.0.1:{backend.port} cookie app1\n")
    socks = [_listening_socket()]
    env = dict(
        os.environ,
        KVLAB_LB_BIND=f"fd@{socks[0].fileno()}",
        KVLAB_HAPROXY_SOCKET=str(tmp / "haproxy.sock"),
        **env_extra,
    )
    for name in ("KVLAB_LB_CERT", "KVLAB_LB_HTTP_BIND", "KVLAB_LB_HTTPS_PORT"):
        env.pop(name, None)  # only as the arguments say
    if cert is not None:
        env["KVLAB_LB_CERT"] = str(cert)
        if https_port:
            env["KVLAB_LB_HTTPS_PORT"] = str(socks[0].getsockname()[1])
    if redirect:
        socks.append(_listening_socket())
        env["KVLAB_LB_HTTP_BIND"] = f"fd@{socks[1].fileno()}"
    lb = Lb(
        port=socks[0].getsockname()[1],
        http_port=socks[1].getsockname()[1] if redirect else 0,
        cafile=cert,
        log=tmp / "haproxy.log",
    )
    with open(lb.log, "wb") as fh:
        proc = subprocess.Popen(
            ["haproxy", "-db", "-f", str(cfg), "-f", str(servers)],
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            pass_fds=tuple(s.fileno() for s in socks),
        )
    for s in socks:
        s.close()  # HAProxy holds its own copies
    try:
        deadline = time.time() + 15
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"HAProxy did not start:\n{lb.log.read_text()}")
            try:
                if get(lb.port, "/_stcore/health", timeout=1, cafile=cert)[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError(f"HAProxy did not answer:\n{lb.log.read_text()}")
            time.sleep(0.1)
        yield lb
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@contextmanager
def haproxy(tmp: Path, backend: Backend, cfg: Path = HAPROXY_CFG, **env_extra: str):
    """HAProxy with ``cfg`` and one server (the backend), plain HTTP: yields its port."""
    with haproxy_lb(tmp, backend, cfg, **env_extra) as lb:
        yield lb.port


def _client_context(cafile: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(cafile))
    ctx.check_hostname = False  # the certificate names 127.0.0.1; the tests send Host: lab
    return ctx


def request(
    port: int,
    head: str,
    source: str = "127.0.0.1",
    timeout: float = HANG_S,
    cafile: Path | None = None,
) -> tuple[int, dict[str, str], bytes, float]:
    """One raw request (``head``, the request line and headers) through HAProxy from
    ``source``, read to the end: (status, headers (lower-case names; the last of each),
    body, seconds). TLS when ``cafile`` is given."""
    t0 = time.perf_counter()
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0))
    s = _client_context(cafile).wrap_socket(raw) if cafile else raw
    with s:
        s.sendall(head.encode())
        data = b""
        length = None  # the body's length, once the head is in (None: until the end)
        while length is None or len(data.partition(b"\r\n\r\n")[2]) < length:
            try:
                chunk = s.recv(65536)
            except ssl.SSLZeroReturnError:
                break
            if not chunk:
                break
            data += chunk
            if length is None and b"\r\n\r\n" in data:
                if data.startswith(b"HTTP/1.1 101"):
                    break  # a websocket: the handshake's answer is all there is to read
                m = re.search(rb"\r\ncontent-length:\s*(\d+)", data.partition(b"\r\n\r\n")[0], re.I)
                length = int(m.group(1)) if m else None  # an answer kept alive stops here
    head_b, _, body = data.partition(b"\r\n\r\n")
    lines = head_b.decode("latin-1").split("\r\n")
    headers = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        headers[k.strip().lower()] = v.strip()
    return int(lines[0].split(" ")[1]), headers, body, time.perf_counter() - t0


def get(
    port: int,
    path: str = "/",
    source: str = "127.0.0.1",
    timeout: float = HANG_S,
    headers: str = "",
    cafile: Path | None = None,
) -> tuple[int, bytes, float]:
    """One GET through HAProxy from ``source``: (status, body, seconds)."""
    status, _, body, seconds = request(
        port,
        f"GET {path} HTTP/1.1\r\nHost: lab\r\n{headers}Connection: close\r\n\r\n",
        source,
        timeout,
        cafile,
    )
    return status, body, seconds


def upgrade_request(headers: str = "", host: str = "lab") -> bytes:
    key = base64.b64encode(os.urandom(16)).decode()
    return (
        f"GET /_stcore/stream HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        f"{headers}\r\n"
    ).encode()


async def open_websocket(port: int, source: str, timeout: float = HANG_S, headers: str = ""):
    """One websocket upgrade from ``source``: ("upgraded", (reader, writer)), ("refused",
    seconds) when HAProxy closes, resets or answers it with an error, or ("hung", seconds) when
    nothing answers within ``timeout``."""
    t0 = time.perf_counter()
    writer = None
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0)), timeout
        )
        writer.write(upgrade_request(headers))
        line = await asyncio.wait_for(reader.readline(), timeout - (time.perf_counter() - t0))
    except TimeoutError:
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


async def flood(
    port: int, n: int, source: str, timeout: float = HANG_S, parallel: int = 200, headers=""
):
    """n websockets from one source as fast as they open (``parallel`` at a time), the ones
    that open held open: {"upgraded": [...], "refused": [seconds], "hung": [seconds]}."""
    out: dict[str, list] = {"upgraded": [], "refused": [], "hung": []}
    gate = asyncio.Semaphore(parallel)

    async def one():
        async with gate:
            kind, what = await open_websocket(port, source, timeout, headers)
            out[kind].append(what)

    await asyncio.gather(*(one() for _ in range(n)))
    return out


def close_all(upgraded) -> None:
    for _, writer in upgraded:
        writer.close()


def global_maxconn(cfg: Path = HAPROXY_CFG) -> int:
    text = cfg.read_text()
    return int(re.search(r"^global\b.*?^\s+maxconn\s+(\d+)", text, re.M | re.S).group(1))


def default_limit(name: str, cfg: Path = HAPROXY_CFG) -> int:
    """The default of a per-source limit in the file: KVLAB_LB_..._PER_SOURCE-<n>."""
    return int(re.search(rf"{name}-(\d+)", cfg.read_text()).group(1))


def raise_open_files(n: int) -> bool:
    """This process holds both ends of many connections (client and backend): raise the soft
    limit on open files to ``n``; False when the hard limit is lower."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < n:
        return False
    if soft != resource.RLIM_INFINITY and soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))
    return True


def idle(port: int, source: str) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=2, source_address=(source, 0))


def closed_by_haproxy(s: socket.socket, wait: float = 0.5) -> bool:
    """True when HAProxy closed (or reset) the connection within ``wait`` seconds; False when
    it is still open then."""
    s.settimeout(wait)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionError:
        return True


def attack(
    tmp: Path, backend: Backend, cfg: Path = HAPROXY_CFG, visit_timeout=HANG_S, timeout=HANG_S
) -> dict:
    """The attack of issue 22 at the configuration's own global maxconn: one source
    (127.0.0.2) opens more websockets than HAProxy may hold at all, holds them, and then a
    visitor from 127.0.0.3 asks for the page. {"upgraded", "refused", "hung", "seconds",
    "visit": (status, body, seconds) or the OSError it got}."""
    n = global_maxconn(cfg) + 100
    # Open at once in this process: both ends of each websocket held, and those in flight.
    rule = re.search(r"KVLAB_LB_WEBSOCKETS_PER_SOURCE-(\d+)", cfg.read_text())
    held = min(n, int(rule.group(1))) if rule else n
    if not raise_open_files(2 * held + 1000):
        raise OSError(f"needs {2 * held + 1000} open files (ulimit -Hn is lower)")
    with haproxy(tmp, backend, cfg) as port:

        async def attack_then_visit():
            t0 = time.perf_counter()
            got = await flood(port, n, "127.0.0.2", timeout)
            got["seconds"] = time.perf_counter() - t0
            try:
                got["visit"] = await asyncio.to_thread(get, port, "/", "127.0.0.3", visit_timeout)
            except OSError as e:  # a timeout included
                got["visit"] = e
            close_all(got["upgraded"])
            return got

        got = asyncio.run(attack_then_visit())
    visit = got["visit"]
    seen = visit if isinstance(visit, OSError) else f"{visit[0]} in {visit[2]:.3f} s"
    got["summary"] = (
        f"{cfg.name}: {n} websockets from 127.0.0.2 in {got['seconds']:.1f} s: "
        f"{len(got['upgraded'])} upgraded, {len(got['refused'])} refused (slowest "
        f"{max(got['refused'], default=0):.3f} s), {len(got['hung'])} unanswered; visitor "
        f"from 127.0.0.3: {seen}"
    )
    return got
