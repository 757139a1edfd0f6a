"""Start N replicas of the app on local ports, with HAProxy in front (for a course).

    python deploy/replicas.py --replicas 2                  # students open http://127.0.0.1:8500
    python deploy/replicas.py --replicas 4 --bind 0.0.0.0 --port 8501 --base-port 8601

One Streamlit server is one Python process with one interpreter lock; several processes use
several cores. Each replica is a plain ``streamlit run app.py`` in hosted mode (KVLAB_HOSTED=1,
as in the Dockerfile, with its allocator settings: webui/memtrim.py) on its own port of
127.0.0.1, with KVLAB_BEHIND_PROXY=1 (the visitor's address is HAProxy's X-Forwarded-For);
HAProxy (Debian's ``haproxy`` package, configured by deploy/haproxy.cfg) pins each browser to
one replica with a cookie, health-checks every replica on /_stcore/health and limits what one
source address may hold. Each replica is started by deploy/launch.py (``streamlit run`` that
never looks up the machine's external address). The live class keeps its classes in one
database every replica shares: ``--database-url`` gives the replicas a PostgreSQL
(KVLAB_DATABASE_URL); without it they share the SQLite file in data/, which works for replicas
on one machine. HAProxy gets this
script's environment, so KVLAB_LB_CONN_PER_SOURCE and the other limits of deploy/haproxy.cfg
can be set where it is started; ``--class-size N`` sets the three per-source limits for a class
of N students behind one address (``class_limits``: the arithmetic of deploy/haproxy.cfg).

TLS: ``--cert PEM`` (or KVLAB_LB_CERT) serves HTTPS with that certificate; ``--self-signed``
makes one with openssl for a trial (browsers warn about it); ``--http-port`` adds a plain-HTTP
port that redirects to HTTPS. Plain HTTP is allowed on a loopback address only (the tests, the
benches, a trial on this machine): ``--bind 0.0.0.0`` without a certificate is refused, unless
``--plain-http`` says so on purpose.

A replica that does not start (port taken, missing dependency, an error at start) is reported
with the end of its log and left out of HAProxy's server list, so HAProxy never routes to it;
the others are started. A port counts as started only when the replica's own process listens
on it (read from /proc), so another program that already answers there (a copy of the app
started earlier, say) is never taken for it. With no replica started, nothing is left running
and the exit status is 1.

The script stays in the foreground; Ctrl-C (or SIGTERM) stops HAProxy and every replica. The
replicas also stop if this script is killed (Linux: a parent-death signal). Logs, the generated
server list and HAProxy's runtime socket are in the run folder it prints. One line starting with
``READY `` gives the same in JSON, for scripts (tests, bench/scale.py).

``--port 0`` lets the system choose HAProxy's port: it is bound here and handed to HAProxy as
an open socket (fd@N), so no other program can take it in between. ``--base-port 0`` lets the
system choose the replicas' ports; Streamlit cannot take an open socket, so a port taken by
another program between the choice and the replica's start is detected (the replica says "Port
N is not available", or /proc shows that another process listens there) and a new one is chosen,
up to 3 times. The tests and the bench use both.

``--drain NAME --socket PATH`` asks a running HAProxy to drain one replica (its students keep
their sessions, new ones go elsewhere); ``--ready NAME`` undoes it.

Linux only (the /proc check and the parent-death signal).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from webui.memtrim import SERVER_ENV  # noqa: E402, I001  (standard library only)

HAPROXY_CFG = ROOT / "deploy" / "haproxy.cfg"
BACKEND = "replicas"  # the backend name in deploy/haproxy.cfg's comments and the server files
MAX_REPLICAS = 16
LOG_TAIL_LINES = 25

LAUNCH = ROOT / "deploy" / "launch.py"  # streamlit run, never looking up its external address
# The class deploy/haproxy.cfg's shipped limits admit from one source: 400 students, each with a
# phone, plus the projector.
CLASS_SIZE = 400
# Per browser tab, from deploy/haproxy.cfg's comments: 7 connections while the page loads over
# HTTP/1.1 (6 for its files, kept alive 10 s, and its websocket), plus 1 while an earlier
# websocket of the tab still counts (a reload or a reconnect: 2 websockets).
CONNECTIONS_PER_PAGE_LOAD = 7
WEBSOCKETS_PER_TAB = 2

__all__ = [
    "Cluster",
    "Replica",
    "StartError",
    "class_limits",
    "haproxy_command",
    "runtime_api",
    "self_signed_certificate",
    "server_stats",
]


class StartError(RuntimeError):
    """Nothing could be started; the message says what and shows the logs."""


def _round_up(n: int, step: int) -> int:
    return -(-n // step) * step


def class_limits(students: int) -> dict[str, str]:
    """HAProxy's per-source limits (deploy/haproxy.cfg's variables) that admit a class of
    ``students`` behind one address, each with one browser tab (a phone), plus the projector:
    T = students + 1 tabs, every one loading the page in the same second while its earlier
    websocket still counts: connections at once (7 + 1) T; websockets 2 T (every tab
    reconnecting at once); new connections per 10 s 7 T (every tab loading the page), plus a
    thousand for retries (refused attempts count). Each rounded up to a thousand. For 400
    students: 4,000, 1,000 and 4,000, the shipped defaults."""
    if students < 1:
        raise ValueError(f"a class has at least 1 student, not {students}")
    tabs = students + 1
    return {
        "KVLAB_LB_CONN_PER_SOURCE": str(_round_up((CONNECTIONS_PER_PAGE_LOAD + 1) * tabs, 1000)),
        "KVLAB_LB_WEBSOCKETS_PER_SOURCE": str(_round_up(WEBSOCKETS_PER_TAB * tabs, 1000)),
        "KVLAB_LB_CONN_RATE_PER_SOURCE": str(
            _round_up(CONNECTIONS_PER_PAGE_LOAD * tabs, 1000) + 1000
        ),
    }


def self_signed_certificate(pem: Path, hosts: list[str], days: int = 30) -> Path:
    """A self-signed certificate for ``hosts`` (names or IP addresses) made by openssl, for a
    trial: ``pem`` holds the certificate and then its key, as HAProxy reads them (readable by
    this user only). Browsers warn about it; a course needs a real one (docs/deploy.md)."""
    if shutil.which("openssl") is None:
        raise StartError("openssl is not installed (Debian: apt-get install openssl).")
    pem = Path(pem)
    pem.parent.mkdir(parents=True, exist_ok=True)
    san = ",".join(
        f"IP:{h}" if re.fullmatch(r"[0-9.]+|[0-9a-fA-F:]*:[0-9a-fA-F:]*", h) else f"DNS:{h}"
        for h in hosts
    )
    with tempfile.TemporaryDirectory() as tmp:
        key, cert = Path(tmp) / "key.pem", Path(tmp) / "cert.pem"
        # The openssl command docs/deploy.md gives for compose, with the hosts filled in.
        out = subprocess.run(
            [
                "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256",
                "-days", str(days), "-subj", f"/CN={hosts[0]}", "-addext",
                f"subjectAltName={san}", "-keyout", str(key), "-out", str(cert),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )  # fmt: skip
        if out.returncode != 0:
            raise StartError(f"openssl could not make a certificate:\n{out.stderr[-1000:]}")
        fd = os.open(pem, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(cert.read_text() + key.read_text())
    return pem


def _loopback(bind: str) -> bool:
    return bind == "localhost" or bind.startswith("127.") or bind == "::1"


@dataclass
class Replica:
    name: str
    address: str  # "127.0.0.1:8601"
    log: Path
    proc: subprocess.Popen | None = None
    healthy: bool = False
    problem: str = ""


@dataclass
class Cluster:
    """N replicas and HAProxy; use as a context manager so that everything stops."""

    replicas: int = 2
    bind: str = "127.0.0.1"
    port: int = 8500  # 0: the system chooses (see the module docstring)
    base_port: int = 8601  # 0: the system chooses (see the module docstring)
    replica_ports: list[int] | None = None
    run_dir: Path | None = None
    python: str = sys.executable
    ready_timeout_s: float = 90.0
    hosted: bool = True
    database_url: str | None = None  # KVLAB_DATABASE_URL of every replica (the live class)
    cert: Path | None = None  # HAProxy's TLS certificate (PEM); None: plain HTTP
    http_port: int | None = None  # with cert: a plain-HTTP port that redirects (0: any free)
    class_size: int | None = None  # sets HAProxy's per-source limits for this class
    members: list[Replica] = field(default_factory=list)
    haproxy: subprocess.Popen | None = None
    url: str = ""
    plain_port: int | None = None  # the redirecting plain-HTTP port, once started
    socket_path: Path | None = None

    # -- start ------------------------------------------------------------------------------
    def start(self, out=sys.stderr) -> Cluster:
        if not 1 <= self.replicas <= MAX_REPLICAS:
            raise ValueError(f"--replicas must be 1 to {MAX_REPLICAS}, not {self.replicas}.")
        if shutil.which("haproxy") is None:
            raise StartError("haproxy is not installed (Debian: apt-get install haproxy).")
        if self.run_dir is None:
            self.run_dir = Path(tempfile.mkdtemp(prefix="kvlab-replicas-"))
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.socket_path = self.run_dir / "haproxy.sock"
        ports = self._replica_ports()
        for i in range(self.replicas):
            name = f"app{i + 1}"
            self.members.append(
                Replica(name, f"127.0.0.1:{ports[i]}", self.run_dir / f"{name}.log")
            )
        try:
            for r in self.members:  # all at once: each spends seconds importing
                self._spawn(r)
            for r, auto in zip(self.members, self._auto):
                self._wait_ready(r)
                tries = 1
                while auto and not r.healthy and tries < 3 and _port_taken(r):
                    r.address, r.problem, tries = f"127.0.0.1:{_free_port()}", "", tries + 1
                    self._spawn(r)
                    self._wait_ready(r)
            good = [r for r in self.members if r.healthy]
            for r in self.members:
                if not r.healthy:
                    print(
                        f"replica {r.name} ({r.address}) did not start: {r.problem}\n"
                        f"--- the end of its log, {r.log} ---\n{_tail(r.log)}\n---",
                        file=out,
                    )
            if not good:
                raise StartError(
                    f"no replica started (logs in {self.run_dir}); HAProxy was not started."
                )
            self._start_haproxy(good)
        except BaseException:
            self.stop()
            raise
        return self

    def _replica_ports(self) -> list[int]:
        """One port per replica; a 0 (or --base-port 0) is chosen by the system."""
        if self.replica_ports:
            ports = list(self.replica_ports)
        elif self.base_port == 0:
            ports = [0] * self.replicas
        else:
            ports = [self.base_port + i for i in range(self.replicas)]
        if len(ports) != self.replicas:
            raise ValueError(
                f"--replica-ports names {len(ports)} ports for {self.replicas} "
                "replicas; give one per replica."
            )
        fixed = [p for p in ports if p]
        for p in fixed:
            if not 1024 <= p <= 65535:
                raise ValueError(f"replica port {p} is not between 1024 and 65535.")
        if len(set(fixed)) != len(fixed) or (self.port and self.port in fixed):
            raise ValueError("every replica needs its own port, other than HAProxy's (--port).")
        self._auto = [p == 0 for p in ports]
        return [p or _free_port() for p in ports]

    def _spawn(self, r: Replica) -> None:
        host, port = r.address.rsplit(":", 1)
        cmd = [
            self.python,
            str(LAUNCH),  # `streamlit run`, never looking up the external address
            "run",
            "app.py",
            "--server.address",
            host,
            "--server.port",
            port,
            "--server.headless",
            "true",
            "--browser.gatherUsageStats",
            "false",
        ]
        # Behind HAProxy: the app may take X-Forwarded-For as the visitor's address, because
        # deploy/haproxy.cfg replaces whatever the client sent with the real source, and the
        # replica listens on 127.0.0.1 only (no client outside this machine reaches it but
        # through HAProxy). SERVER_ENV: the Dockerfile's allocator settings.
        env = {**os.environ, **SERVER_ENV, "KVLAB_BEHIND_PROXY": "1"}
        if self.hosted:
            env["KVLAB_HOSTED"] = "1"
        if self.database_url:
            env["KVLAB_DATABASE_URL"] = self.database_url
        with open(r.log, "wb") as log:
            r.proc = subprocess.Popen(
                cmd,
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )

    def _wait_ready(self, r: Replica) -> None:
        deadline = time.time() + self.ready_timeout_s
        while time.time() < deadline:
            code = r.proc.poll()
            if code is not None:
                r.problem = f"its process ended with exit status {code}"
                return
            if _health(r.address) and _listens(r.proc.pid, r.address):
                r.healthy = True
                return
            time.sleep(0.25)
        r.problem = (
            f"no answer on /_stcore/health from its own process within {self.ready_timeout_s:.0f} s"
        )
        _stop_proc(r.proc)

    def _start_haproxy(self, good: list[Replica]) -> None:
        backend = self.run_dir / "backend.cfg"
        lines = [f"backend {BACKEND}"]
        lines += [f"    server {r.name} {r.address} cookie {r.name}" for r in good]
        backend.write_text("\n".join(lines) + "\n")
        env = dict(os.environ, KVLAB_HAPROXY_SOCKET=str(self.socket_path))
        if self.class_size:
            env.update(class_limits(self.class_size))
        env.pop("KVLAB_LB_CERT", None)  # TLS only as this Cluster says (its cert)
        env.pop("KVLAB_LB_HTTP_BIND", None)
        env.pop("KVLAB_LB_HTTPS_PORT", None)
        socks: list[socket.socket] = []
        port, env["KVLAB_LB_BIND"] = self._bind(self.port, socks)
        if self.cert is not None:
            env["KVLAB_LB_CERT"] = str(self.cert)
            env["KVLAB_LB_HTTPS_PORT"] = str(port)
            if self.http_port is not None:
                self.plain_port, env["KVLAB_LB_HTTP_BIND"] = self._bind(self.http_port, socks)
        log = self.run_dir / "haproxy.log"
        with open(log, "wb") as fh:
            self.haproxy = subprocess.Popen(
                haproxy_command(backend),
                env=env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                pass_fds=tuple(s.fileno() for s in socks),
                preexec_fn=_die_with_parent,
            )
        for s in socks:
            s.close()  # HAProxy holds its own copies
        host = "127.0.0.1" if self.bind in ("0.0.0.0", "") else self.bind
        self.url = f"{'https' if self.cert else 'http'}://{host}:{port}"
        deadline = time.time() + 15
        while time.time() < deadline:
            if self.haproxy.poll() is not None:
                raise StartError(
                    f"HAProxy did not start (exit status {self.haproxy.returncode})."
                    f"\n--- {log} ---\n{_tail(log)}"
                )
            if _health(f"{host}:{port}", tls=self.cert is not None) and self.socket_path.exists():
                return
            time.sleep(0.1)
        raise StartError(
            f"HAProxy did not answer on {self.url} within 15 s.\n--- {log} ---\n{_tail(log)}"
        )

    def _bind(self, port: int, socks: list[socket.socket]) -> tuple[int, str]:
        """HAProxy's address for ``port``: (port, KVLAB_LB_BIND-style address). Port 0 is bound
        here (appended to ``socks``, passed to HAProxy as fd@N), so it cannot be taken between
        choosing and use."""
        if port != 0:
            return port, f"{self.bind}:{port}"
        s = socket.socket(socket.AF_INET6 if ":" in self.bind else socket.AF_INET)
        s.bind((self.bind, 0))
        s.listen(1024)
        s.set_inheritable(True)
        socks.append(s)
        return s.getsockname()[1], f"fd@{s.fileno()}"

    # -- use --------------------------------------------------------------------------------
    def ready_info(self) -> dict:
        return {
            "url": self.url,
            "http_redirect_port": self.plain_port,
            "run_dir": str(self.run_dir),
            "socket": str(self.socket_path),
            "haproxy_pid": self.haproxy.pid if self.haproxy else None,
            "replicas": {
                r.name: {
                    "address": r.address,
                    "pid": r.proc.pid if r.proc else None,
                    "started": r.healthy,
                    "log": str(r.log),
                }
                for r in self.members
            },
        }

    def stats(self) -> dict[str, dict]:
        return server_stats(self.socket_path)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Kill one replica as a crash would (SIGKILL by default)."""
        r = next(r for r in self.members if r.name == name)
        r.proc.send_signal(sig)
        r.proc.wait(10)

    def check_alive(self) -> list[str]:
        """Names of started replicas whose process has ended since."""
        return [r.name for r in self.members if r.healthy and r.proc.poll() is not None]

    # -- stop -------------------------------------------------------------------------------
    def stop(self) -> None:
        procs = [self.haproxy] + [r.proc for r in self.members]
        for p in procs:
            if p is not None and p.poll() is None:
                p.terminate()
        for p in procs:
            if p is not None:
                _stop_proc(p)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def haproxy_command(backend_cfg: Path) -> list[str]:
    """HAProxy in the foreground (-db) with the shared config and one server list."""
    return ["haproxy", "-db", "-f", str(HAPROXY_CFG), "-f", str(backend_cfg)]


def runtime_api(socket_path: Path | str, command: str, timeout: float = 5.0) -> str:
    """One command on HAProxy's runtime API (the stats socket) and its answer."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(timeout)
        s.connect(str(socket_path))
        s.sendall(command.encode() + b"\n")
        chunks = []
        while True:
            data = s.recv(65536)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks).decode(errors="replace")


def server_stats(socket_path: Path | str) -> dict[str, dict]:
    """Per replica: HAProxy's status (UP, DOWN, DRAIN, MAINT...), current sessions (scur) and
    sessions since start (stot), from "show stat" (CSV)."""
    text = runtime_api(socket_path, "show stat")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    header = lines[0].lstrip("# ").split(",")
    out = {}
    for ln in lines[1:]:
        row = dict(zip(header, ln.split(",")))
        if row.get("pxname") == BACKEND and row.get("svname") not in ("BACKEND", "FRONTEND"):
            out[row["svname"]] = {
                "status": row["status"],
                "scur": int(row["scur"] or 0),
                "stot": int(row["stot"] or 0),
            }
    return out


# -- helpers ----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_taken(r: Replica) -> bool:
    """Did replica r fail because another program holds its port?"""
    return "is not available" in _tail(r.log, 5)  # Streamlit's own words for a port in use


def _health(address: str, timeout: float = 2.0, tls: bool = False) -> bool:
    """True when /_stcore/health answers 200 at address ("host:port"); over TLS, with any
    certificate (ours, possibly self-signed: this only asks whether HAProxy is up)."""
    try:
        host, port = address.rsplit(":", 1)
        if tls:
            ctx = ssl.create_default_context()
            ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
            conn = http.client.HTTPSConnection(host, int(port), timeout=timeout, context=ctx)
        else:
            conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
        try:
            conn.request("GET", "/_stcore/health")
            return conn.getresponse().status == 200
        finally:
            conn.close()
    except (OSError, http.client.HTTPException):
        return False


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except OSError:
        pass
    return inodes


def _listens(pid: int, address: str) -> bool:
    """True when process pid itself listens at address (not some other program)."""
    inodes = _socket_inodes(pid)
    port = int(address.rsplit(":", 1)[1])
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as fh:
                next(fh)
                for ln in fh:
                    parts = ln.split()
                    local, state, inode = parts[1], parts[3], parts[9]
                    if (
                        state == "0A"
                        and int(local.rsplit(":", 1)[1], 16) == port
                        and inode in inodes
                    ):
                        return True
        except OSError:
            continue
    return False


def _die_with_parent() -> None:
    """In the child: get SIGTERM when this script dies, however it dies (Linux prctl)."""
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _stop_proc(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.terminate()
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(10)


def _tail(path: Path, n: int = LOG_TAIL_LINES) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-n:]) or "(empty log)"


def _ports(text: str) -> list[int]:
    if not re.fullmatch(r"\d+(,\d+)*", text):
        raise argparse.ArgumentTypeError(
            "give ports as numbers separated by commas, e.g. 8601,8602"
        )
    return [int(p) for p in text.split(",")]


def _drain_or_ready(ap: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """--drain NAME / --ready NAME: one state change through a running HAProxy's socket."""
    if args.socket is None:
        ap.error("--drain and --ready need --socket (printed by the running script)")
    name = args.drain or args.ready
    if not re.fullmatch(r"app\d{1,2}", name):
        ap.error(f"a replica is named app1, app2, ...; not {name!r}")
    state = "drain" if args.drain else "ready"
    try:
        answer = runtime_api(args.socket, f"set server {BACKEND}/{name} state {state}")
    except OSError as e:
        print(f"cannot reach HAProxy's socket {args.socket}: {e}", file=sys.stderr)
        return 1
    if answer.strip():
        print(f"HAProxy: {answer.strip()}", file=sys.stderr)
        return 1
    print(f"{name}: {state}")
    return 0


def _print_started(cluster: Cluster, self_signed: bool) -> None:
    good = [r for r in cluster.members if r.healthy]
    print(
        f"KV Cache Lab: {len(good)} of {cluster.replicas} replicas behind HAProxy at {cluster.url}"
    )
    if cluster.plain_port is not None:
        print(f"  plain HTTP on port {cluster.plain_port} redirects there")
    if self_signed:
        print(f"  self-signed certificate (browsers warn about it): {cluster.cert}")
    for r in cluster.members:
        state = "serving" if r.healthy else "NOT STARTED, not routed to"
        print(f"  {r.name}  {r.address}  {state}  log {r.log}")
    print(
        f"  HAProxy runtime socket {cluster.socket_path} (per-replica sessions: "
        f"echo 'show stat' | socat stdio unix-connect:{cluster.socket_path})"
    )
    print("Ctrl-C stops HAProxy and every replica.")
    print("READY " + json.dumps(cluster.ready_info()), flush=True)


def _certificate(ap: argparse.ArgumentParser, args: argparse.Namespace) -> Path | None:
    """HAProxy's certificate from --cert / --self-signed (made now, in the run folder), or
    None for plain HTTP, which is refused off loopback unless --plain-http says so."""
    if args.cert and args.self_signed:
        ap.error("give --cert or --self-signed, not both")
    tls = bool(args.cert or args.self_signed)
    if args.http_port is not None and not tls:
        ap.error("--http-port redirects to HTTPS: give --cert or --self-signed too")
    if not tls and not args.plain_http and not _loopback(args.bind):
        ap.error(
            f"--bind {args.bind} without TLS would send teacher keys and student links in "
            "clear: give --cert PEM (or --self-signed for a trial), or --plain-http"
        )
    if args.cert and not args.cert.is_file():
        ap.error(f"--cert {args.cert}: no such file")
    if not args.self_signed:
        return args.cert
    args.run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="kvlab-replicas-"))
    hosts = ["localhost", "127.0.0.1"]
    if not _loopback(args.bind) and args.bind not in ("0.0.0.0", "::", ""):
        hosts.insert(0, args.bind)
    return self_signed_certificate(args.run_dir / "kvlab-self-signed.pem", hosts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--replicas", type=int, default=2, help="app processes (1 to 16)")
    ap.add_argument(
        "--bind", default="127.0.0.1", help="HAProxy's address; 0.0.0.0 for the students' network"
    )
    ap.add_argument("--port", type=int, default=8500, help="HAProxy's port; 0: any free one")
    ap.add_argument(
        "--base-port",
        type=int,
        default=8601,
        help="replica i listens on base-port + i - 1; 0: free ports",
    )
    ap.add_argument(
        "--replica-ports", type=_ports, help="or one port per replica: 8601,8602 (0: a free one)"
    )
    ap.add_argument("--run-dir", type=Path, help="logs and sockets (default: a new temp folder)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter of the replicas")
    ap.add_argument(
        "--ready-timeout",
        type=float,
        default=90.0,
        help="seconds a replica may take to answer /_stcore/health",
    )
    ap.add_argument(
        "--not-hosted",
        action="store_true",
        help="run without hosted mode's limits (KVLAB_HOSTED unset)",
    )
    ap.add_argument(
        "--database-url",
        metavar="URL",
        help="the live class's database for every replica (KVLAB_DATABASE_URL, "
        "e.g. postgresql://kvlab:secret@127.0.0.1:5432/kvlab); without it the "
        "replicas share the SQLite file in data/ (one machine only)",
    )
    ap.add_argument(
        "--cert",
        type=Path,
        default=os.environ.get("KVLAB_LB_CERT") or None,
        metavar="PEM",
        help="serve HTTPS with this certificate and key (one PEM; default: KVLAB_LB_CERT)",
    )
    ap.add_argument(
        "--self-signed",
        action="store_true",
        help="serve HTTPS with a self-signed certificate made by openssl in the run folder "
        "(a trial: browsers warn about it)",
    )
    ap.add_argument(
        "--http-port",
        type=int,
        metavar="PORT",
        help="with HTTPS: a plain-HTTP port that redirects every request to HTTPS (0: any free)",
    )
    ap.add_argument(
        "--plain-http",
        action="store_true",
        help="allow plain HTTP on an address other than loopback (students' tokens then cross "
        "the network in clear)",
    )
    ap.add_argument(
        "--class-size",
        type=int,
        metavar="N",
        help=f"set HAProxy's per-source limits for a class of N behind one address "
        f"(default: the file's, sized for {CLASS_SIZE})",
    )
    ap.add_argument("--drain", metavar="NAME", help="drain replica NAME of a running HAProxy")
    ap.add_argument("--ready", metavar="NAME", help="put replica NAME back in service")
    ap.add_argument("--socket", type=Path, help="HAProxy's runtime socket, for --drain/--ready")
    args = ap.parse_args(argv)

    if args.drain or args.ready:
        return _drain_or_ready(ap, args)
    if not 0 <= args.port <= 65535:
        ap.error("--port must be 0 to 65535")
    if args.class_size is not None and args.class_size < 1:
        ap.error("--class-size must be 1 or more")
    try:
        cert = _certificate(ap, args)
    except StartError as e:
        print(str(e), file=sys.stderr)
        return 1
    cluster = Cluster(
        replicas=args.replicas,
        bind=args.bind,
        port=args.port,
        base_port=args.base_port,
        replica_ports=args.replica_ports,
        run_dir=args.run_dir,
        python=args.python,
        ready_timeout_s=args.ready_timeout,
        hosted=not args.not_hosted,
        database_url=args.database_url,
        cert=cert,
        http_port=args.http_port,
        class_size=args.class_size,
    )

    def _on_signal(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _on_signal)
    try:
        cluster.start()
    except ValueError as e:
        ap.error(str(e))
    except StartError as e:
        print(str(e), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        cluster.stop()
        return 130
    try:
        _print_started(cluster, self_signed=args.self_signed)
        reported: set[str] = set()
        while True:
            time.sleep(1)
            if cluster.haproxy.poll() is not None:
                print(
                    f"HAProxy ended (exit status {cluster.haproxy.returncode}); stopping.\n"
                    f"{_tail(cluster.run_dir / 'haproxy.log')}",
                    file=sys.stderr,
                )
                return 1
            for name in cluster.check_alive():
                if name not in reported:
                    reported.add(name)
                    r = next(r for r in cluster.members if r.name == name)
                    print(
                        f"replica {name} ended (exit status {r.proc.returncode}); HAProxy "
                        f"routes its students to the others.\n--- {r.log} ---\n{_tail(r.log)}",
                        file=sys.stderr,
                        flush=True,
                    )
    except KeyboardInterrupt:
        return 0
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
