"""Two replicas behind HAProxy, started by deploy/replicas.py: stickiness, draining, failover
(a killed replica's session reloads its link on the other replica and gets the same view), and
replicas that do not start (port taken, missing dependency).

Ports: HAProxy's is bound by the script and handed over as an open socket (--port 0); the
replicas' are chosen by the system and re-chosen if taken meanwhile (--base-port 0), and the
script checks in /proc that the replica's own process listens there. The one port a test
names itself (the "taken" one) is a socket the test holds open. Every process started here is
in the script's own process group, and is killed with it at the end, pass or fail.

The clients below speak Streamlit's websocket protocol as the browser's frontend does, with
HAProxy's cookie from the page load; X-Served-By (set by deploy/haproxy.cfg) names the replica
that answered."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import ROOT

if shutil.which("haproxy") is None:
    pytest.skip(
        "HAProxy is not installed (apt-get install haproxy); .ci/run installs it",
        allow_module_level=True,
    )
websockets_sync = pytest.importorskip("websockets.sync.client")

SCRIPT = ROOT / "deploy" / "replicas.py"
COOKIE = "KVLAB_REPLICA"
# A link that is not the default view: another model, context and concurrency on the Budget page.
LINK = "model=qwen3-8b&b_ctx=32768&b_conc=3"


def _start(tmp: Path, *args: str, wait_ready: bool = True, timeout: float = 90):
    out, err = tmp / "stdout.txt", tmp / "stderr.txt"
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--run-dir", str(tmp / "run"), *args],
        cwd=ROOT,
        stdout=open(out, "wb"),  # noqa: SIM115 (the child's, for its whole life)
        stderr=open(err, "wb"),  # noqa: SIM115
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    if not wait_ready:
        return proc, None
    deadline = time.time() + timeout
    while time.time() < deadline:
        for line in out.read_text().splitlines():
            if line.startswith("READY "):
                return proc, json.loads(line[6:])
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    _stop(proc)
    pytest.fail(f"deploy/replicas.py did not get ready:\n{out.read_text()}\n{err.read_text()}")


def _stop(proc) -> None:
    """SIGTERM (the script stops HAProxy and its replicas), then SIGKILL to the whole group."""
    if proc.poll() is None:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(20)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # anything left in the group, whatever happened
    proc.wait(10)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("replicas")
    proc, info = _start(tmp, "--replicas", "2", "--port", "0", "--base-port", "0")
    info["tmp"] = tmp
    try:
        yield info
    finally:
        _stop(proc)
        for pid in [info["haproxy_pid"]] + [r["pid"] for r in info["replicas"].values()]:
            assert not Path(f"/proc/{pid}").exists() or _zombie(pid), f"process {pid} survived"


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


def _get(url: str, cookie: str | None = None):
    req = urllib.request.Request(url, headers={"Cookie": f"{COOKIE}={cookie}"} if cookie else {})
    with urllib.request.urlopen(req, timeout=30) as r:
        set_cookie = [
            v
            for k, v in r.headers.items()
            if k.lower() == "set-cookie" and v.startswith(COOKIE + "=")
        ]
        given = set_cookie[0].split(";")[0].split("=", 1)[1] if set_cookie else None
        return r.status, r.headers.get("X-Served-By"), given


class Client:
    """One browser tab: a websocket with HAProxy's cookie, reruns as the frontend sends them."""

    def __init__(self, base: str, cookie: str):
        self.cookie = cookie
        self.ws = websockets_sync.connect(
            "ws" + base[4:] + "/_stcore/stream",
            subprotocols=["streamlit"],
            max_size=2**26,
            additional_headers={"Cookie": f"{COOKIE}={cookie}"},
            open_timeout=30,
            legacy=True,
        )
        self.served_by = self.ws.response.headers.get("X-Served-By")
        self.pages: dict[str, str] = {}

    def run(self, page: str = "", query: str = "") -> tuple[list[str], list[str]]:
        """Rerun page (url path; "" is Home) with the link's query: (texts shown, exceptions)."""
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        msg = BackMsg()
        msg.rerun_script.query_string = query
        msg.rerun_script.page_script_hash = self.pages.get(page, "")
        self.ws.send(msg.SerializeToString())
        texts, errors = [], []
        while True:
            fm = ForwardMsg()
            fm.ParseFromString(self.ws.recv(timeout=60))
            kind = fm.WhichOneof("type")
            if kind == "navigation":
                self.pages = {p.url_pathname: p.page_script_hash for p in fm.navigation.app_pages}
            elif kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
                el = fm.delta.new_element
                etype = el.WhichOneof("type")
                if etype == "exception":
                    errors.append(el.exception.message)
                elif etype in ("markdown", "text", "alert"):
                    texts.append(getattr(el, etype).body)
                elif etype == "metric":
                    texts.append(f"{el.metric.label}: {el.metric.body}")
            elif kind == "script_finished":
                return texts, errors

    def open(self, page: str, query: str = ""):
        if not self.pages:
            self.run()  # the first run sends the page list
        return self.run(page, query)

    def closed_within(self, seconds: float) -> bool:
        """True when the websocket closes within seconds (messages before that are read)."""
        from websockets.exceptions import ConnectionClosed

        deadline = time.time() + seconds
        while time.time() < deadline:
            try:
                self.ws.recv(timeout=max(0.01, deadline - time.time()))
            except ConnectionClosed:
                return True
            except TimeoutError:
                return False
        return False

    def close(self) -> None:
        self.ws.close()


def _stats(info) -> dict:
    sys.path.insert(0, str(ROOT / "deploy"))
    import replicas

    return replicas.server_stats(info["socket"])


def test_new_visitors_spread_and_each_stays_on_its_replica(cluster):
    base = cluster["url"]
    given = [_get(base + "/") for _ in range(6)]
    assert all(status == 200 for status, _, _ in given)
    # Each first page load gets a cookie naming the replica that served it...
    assert all(cookie == served for _, served, cookie in given)
    # ...and new visitors go to both replicas (leastconn, round robin among equals).
    assert {cookie for _, _, cookie in given} == {"app1", "app2"}
    for name in ("app1", "app2"):
        for path in ("/", "/budget", "/_stcore/health", "/_stcore/host-config"):
            status, served, new_cookie = _get(base + path, cookie=name)
            assert (status, served) == (200, name), path
            assert new_cookie is None  # a valid cookie is kept, not replaced
        c = Client(base, name)  # the websocket, too, reaches the replica the cookie names
        try:
            assert c.served_by == name
            texts, errors = c.open("budget", LINK)
            assert texts and not errors
        finally:
            c.close()


def _fetch(url: str, **headers: str) -> tuple[dict, bytes]:
    """(headers with lower-case names, body as sent) of one GET; urllib does not decode gzip."""
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as r:
        return {k.lower(): v for k, v in r.headers.items()}, r.read()


def test_static_files_are_gzipped_for_browsers_that_accept_it(cluster):
    # deploy/haproxy.cfg "compression algo gzip": Streamlit itself sends its scripts and styles
    # as they are; through HAProxy a browser that says "Accept-Encoding: gzip" gets them
    # gzipped, the same bytes once decompressed, and one that does not gets them plain.
    import gzip
    import re

    base, cookie = cluster["url"], {"Cookie": f"{COOKIE}=app1"}
    _, page = _fetch(base + "/", **cookie)
    assets = re.findall(rb'(?:src|href)="\.?/?(static/(?:js|css)/[^"]+)"', page)
    assert any(a.endswith(b".js") for a in assets) and any(a.endswith(b".css") for a in assets)
    for asset in assets:
        url = base + "/" + asset.decode()
        plain_h, plain = _fetch(url, **cookie)
        assert "content-encoding" not in plain_h, asset
        gz_h, gz = _fetch(url, **cookie, **{"Accept-Encoding": "gzip"})
        assert gz_h.get("content-encoding") == "gzip", asset
        assert gzip.decompress(gz) == plain, asset
        if len(plain) > 100_000:  # scripts compress to well under half
            assert len(gz) < len(plain) / 2, (asset, len(gz), len(plain))
    # the page itself too, and the websocket's upgrade is untouched (the other tests use it)
    h, body = _fetch(base + "/", **cookie, **{"Accept-Encoding": "gzip"})
    assert h.get("content-encoding") == "gzip" and gzip.decompress(body) == page


def test_replicas_know_they_are_behind_haproxy(cluster):
    # The app takes X-Forwarded-For as the visitor's address only with KVLAB_BEHIND_PROXY=1,
    # which is safe here: HAProxy replaces the header (tests/test_haproxy_limits.py).
    for r in cluster["replicas"].values():
        env = Path(f"/proc/{r['pid']}/environ").read_bytes().split(b"\0")
        assert b"KVLAB_BEHIND_PROXY=1" in env and b"KVLAB_HOSTED=1" in env


def test_a_drained_replica_gets_no_new_visitors(cluster):
    drain = [sys.executable, str(SCRIPT), "--socket", cluster["socket"]]
    out = subprocess.run(drain + ["--drain", "app1"], capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    try:
        assert _stats(cluster)["app1"]["status"] == "DRAIN"
        assert {_get(cluster["url"] + "/")[1] for _ in range(4)} == {"app2"}
        # A student already on app1 keeps it.
        assert _get(cluster["url"] + "/", cookie="app1")[1] == "app1"
    finally:
        subprocess.run(drain + ["--ready", "app1"], timeout=20, check=True)
    assert _stats(cluster)["app1"]["status"] == "UP"
    bad = subprocess.run(
        drain + ["--drain", "app1; shutdown"], capture_output=True, text=True, timeout=20
    )
    assert bad.returncode == 2 and "app1, app2" in bad.stderr


def test_killed_replica_sessions_reload_their_link_on_the_survivor(cluster):
    base = cluster["url"]
    victim, survivor = "app1", "app2"
    a, b = Client(base, victim), Client(base, survivor)
    try:
        assert (a.served_by, b.served_by) == (victim, survivor)
        view, errors = a.open("budget", LINK)
        assert not errors
        default_view, _ = b.open("budget")
        assert view != default_view  # the link's values show, so "the same view" means something
        b_view, _ = b.open("budget", LINK)
        assert b_view == view  # the two replicas render one link alike

        os.kill(cluster["replicas"][victim]["pid"], signal.SIGKILL)  # a crash, no goodbye
        t_kill = time.time()
        assert a.closed_within(15)  # the frontend sees its websocket close

        # The tab reconnects with the same cookie and sends its link again (every input is in
        # it). HAProxy sends it to the survivor, and the view is the one it had.
        deadline = time.time() + 20
        while True:
            try:
                again = Client(base, victim)
                break
            except (OSError, Exception) as e:  # noqa: BLE001 (refused while HAProxy retries)
                if time.time() > deadline:
                    raise AssertionError(f"no reconnect within 20 s: {e!r}") from e
                time.sleep(0.2)
        try:
            assert again.served_by == survivor
            reloaded, errors = again.open("budget", LINK)
            assert not errors and reloaded == view
            # How long it took is a bench figure (bench/scale.py's reconnect time), not a bound
            # here (issue 39, item 9): the deadlines above only tell a hang from a slow machine.
            print(f"\nreconnected and reloaded {time.time() - t_kill:.1f} s after the kill")
        finally:
            again.close()

        # The session on the survivor never noticed: same websocket, no error.
        texts, errors = b.run("budget", LINK)
        assert texts == view and not errors
        # HAProxy has taken the dead replica out; new visitors go to the survivor only.
        deadline = time.time() + 10
        while _stats(cluster)[victim]["status"] != "DOWN" and time.time() < deadline:
            time.sleep(0.2)
        assert _stats(cluster)[victim]["status"] == "DOWN"
        assert {_get(base + "/")[1] for _ in range(4)} == {survivor}
    finally:
        a.close()
        b.close()
    # The start script reports the replica that ended, with its log.
    deadline = time.time() + 5
    err = cluster["tmp"] / "stderr.txt"
    while f"replica {victim} ended" not in err.read_text() and time.time() < deadline:
        time.sleep(0.2)
    assert f"replica {victim} ended" in err.read_text()


def test_replica_on_a_taken_port_is_reported_and_never_routed_to(tmp_path):
    with socket.socket() as taken:  # held open by this test for the whole test: no race
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc, info = _start(
            tmp_path, "--replicas", "2", "--port", "0", "--replica-ports", f"{port},0"
        )
        try:
            assert info["replicas"]["app1"]["started"] is False
            assert info["replicas"]["app2"]["started"] is True
            err = (tmp_path / "stderr.txt").read_text()
            assert f"replica app1 (127.0.0.1:{port}) did not start" in err
            assert f"Port {port} is not available" in err  # the replica's own log, shown
            # HAProxy was given app2 only.
            assert set(_stats(info)) == {"app2"}
            assert {_get(info["url"] + "/")[1] for _ in range(3)} == {"app2"}
            assert _get(info["url"] + "/", cookie="app1")[1] == "app2"
        finally:
            _stop(proc)


def test_missing_dependency_is_reported_and_nothing_is_left_running(tmp_path):
    bare = tmp_path / "bare"  # an interpreter without streamlit
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=60
    )
    proc, _ = _start(
        tmp_path,
        "--replicas",
        "2",
        "--port",
        "0",
        "--base-port",
        "0",
        "--python",
        str(bare / "bin" / "python"),
        wait_ready=False,
    )
    try:
        assert proc.wait(60) == 1
    finally:
        _stop(proc)
    err = (tmp_path / "stderr.txt").read_text()
    assert err.count("did not start: its process ended with exit status 1") == 2
    assert "No module named streamlit" in err
    assert "no replica started" in err and "HAProxy was not started" in err
    assert not (tmp_path / "run" / "haproxy.log").exists()
    assert "READY" not in (tmp_path / "stdout.txt").read_text()


def test_bad_arguments_are_refused():
    def run(*args):
        return subprocess.run(
            [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=30
        )

    for args, words in [
        (["--replicas", "0"], "--replicas must be 1 to 16"),
        (["--replicas", "2", "--replica-ports", "8601"], "one per replica"),
        (["--replica-ports", "80,8602"], "between 1024 and 65535"),
        (["--replica-ports", "8601,8601"], "its own port"),
        (["--replica-ports", "86o1"], "numbers separated by commas"),
        (["--drain", "app1"], "need --socket"),
    ]:
        out = run(*args)
        assert out.returncode == 2 and words in out.stderr, (args, out.stderr)
        assert "Traceback" not in out.stderr
