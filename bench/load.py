"""Load test: N concurrent sessions against one server, changing controls for a fixed time.

    .venv/bin/python bench/load.py [--sessions 20] [--seconds 30] [--think 3] [--hostile 3]
    .venv/bin/python bench/load.py --url http://127.0.0.1:8500 --sessions 100   # a running app

``--url`` targets a server that is already running, typically HAProxy in front of several
replicas (deploy/replicas.py). Each session then first loads the page over HTTP, as a browser
does, keeps the cookies it is given (HAProxy's KVLAB_REPLICA names its replica) and sends them
with the websocket upgrade; the replica that answered each request is read from HAProxy's
X-Served-By header. The report adds the sessions per replica and whether every websocket
reached the replica that served its page (stickiness). A session whose websocket closes under
it (a replica killed, see bench/scale.py) reconnects as Streamlit's frontend does: same
cookies, the page's link (its query string, which carries every input) sent again; it counts
the interaction in flight as failed, times the reconnect and checks that the reloaded inputs
equal the ones it had.

Twenty Chromium tabs would need more CPU than the 2 cores of this machine have for the server
itself, so each session here speaks Streamlit's own websocket protocol, exactly as the browser's
frontend does: it asks for a page, reads the widgets' ids from the elements the server sends,
and sends new widget values; latency is from sending the new value to the server's "script
finished" message, i.e. input to updated chart, without the browser's drawing time (see
bench/pages.py for that). Prints interactions, errors, p50/p95 latency and server memory per
session. Target (issue 6): 20 sessions, zero errors, p95 under 1.5 s.

``--hostile N`` adds N "hostile neighbours": sessions that open the worst link of every page
(each one a new session, as a person opening the link would be) again and again, while the
normal sessions work; the figure that matters is the normal sessions' p95 (issue 11: under 1 s
with 3 neighbours).
Traffic goes only to 127.0.0.1, bounded in count and time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

from serve import start_app  # beside this script
from worst_links import WORST_LINKS  # beside this script

ROOT = Path(__file__).resolve().parent.parent

RECONNECT_GIVE_UP_S = 30.0


class _Closed(Exception):
    """The websocket closed while the person was reading the page (nothing was lost)."""


async def _read(ws, seconds: float) -> None:
    """Wait while a person reads the page; like the browser, notice at once if the websocket
    closes meanwhile (then reconnect before the next change)."""
    try:
        await asyncio.wait_for(asyncio.shield(ws.wait_closed()), timeout=seconds)
    except TimeoutError:
        return
    raise _Closed


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


# page url path -> (widget label, values to alternate between); a label renamed since an older
# tree that --compare serves is given as "new|old": the first one the page draws is moved.
ACTIONS = {
    "budget": ("Context per sequence (tokens)", [8192, 32768, 131072, 4096]),
    "step_time": ("Batch (sequences decoded together)", [1, 8, 32, 64]),
    "lab": ("Context per sequence (tokens)", [8192, 65536, 2048]),
    "techniques": ("Context per sequence (tokens)", [32768, 8192, 131072]),
    "engine": ("Go to step|Step", [3, 10, 20, 6]),
    "cache_fill": ("Decode steps|Tokens to generate", [20, 40, 10]),
}


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


async def http_get(base: str, path: str, cookies: dict[str, str]) -> tuple[int, dict, dict]:
    """GET base+path over a fresh connection, as a browser's page load: (status, headers (lower
    case), cookies set). Plain asyncio, so a hundred sessions do not queue on a thread pool."""
    from urllib.parse import urlsplit

    u = urlsplit(base)
    reader, writer = await asyncio.open_connection(u.hostname, u.port or 80)
    try:
        head = f"GET {path} HTTP/1.1\r\nHost: {u.netloc}\r\nConnection: close\r\n"
        if cookies:
            head += "Cookie: " + "; ".join(f"{k}={v}" for k, v in cookies.items()) + "\r\n"
        writer.write((head + "\r\n").encode())
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), timeout=60)
    finally:
        writer.close()
    lines = raw.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers, set_cookies = {}, {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        headers[k.strip().lower()] = v.strip()
        if k.strip().lower() == "set-cookie":
            name, _, value = v.strip().split(";", 1)[0].partition("=")
            set_cookies[name] = value
    return status, headers, set_cookies


class Session:
    def __init__(self, url: str, name: int, http_base: str | None = None):
        self.url, self.name = url, name
        self.http_base = http_base  # set: behind a load balancer (--url); load the page first
        self.cookies: dict[str, str] = {}
        self.page_replica = ""  # X-Served-By of the page load
        self.ws_replicas: list[str] = []  # X-Served-By of each websocket (reconnects append)
        self.query = ""  # the page's query string, as the browser's address bar holds it
        self.inputs: dict[str, float] = {}  # number inputs' values at the last finished run
        self.failed = 0  # interactions whose answer never came (their replica died)
        self.reconnects: list[float] = []  # seconds from the drop to the reloaded page
        self.same_inputs: list[bool] = []  # per reconnect: reloaded inputs equal the old ones
        self.pages: dict[str, str] = {}  # url path -> page script hash
        # label -> (id, value kind, fragment id: "" when the widget is not in a fragment)
        self.widgets: dict[str, tuple[str, str, str]] = {}
        self.latencies: list[float] = []
        self.bytes_in: list[int] = []  # per interaction: bytes of the messages it brought
        self.page_loads = 0  # runs that opened a page (not timed: no input changed)
        self.errors: list[str] = []
        self.start_delay = 0.0

    async def connect(self):
        """Open the websocket as the browser does: behind a load balancer, load the page first
        and send its cookies with the upgrade."""
        import websockets

        headers = {}
        if self.http_base:
            if not self.cookies:
                status, h, set_cookies = await http_get(self.http_base, "/", self.cookies)
                if status != 200:
                    raise OSError(f"page load answered {status}")
                self.cookies.update(set_cookies)
                self.page_replica = h.get("x-served-by", "")
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        ws = await websockets.connect(
            self.url,
            subprotocols=["streamlit"],
            max_size=2**26,
            additional_headers=headers,
            open_timeout=30,
        )
        self.ws_replicas.append(ws.response.headers.get("X-Served-By", ""))
        for value in ws.response.headers.get_all("Set-Cookie"):  # a new replica after failover
            name, _, v = value.split(";", 1)[0].partition("=")
            self.cookies[name] = v
        return ws

    async def _run(self, ws, page_hash: str = "", widget=None, query: str = "") -> None:
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        msg = BackMsg()
        msg.rerun_script.query_string = query
        msg.rerun_script.page_script_hash = page_hash
        if widget is not None:
            wid, kind, value = widget
            fragment = next((v[2] for v in self.widgets.values() if v[0] == wid), "")
            if fragment:  # as the frontend does: a widget in a fragment reruns only that
                msg.rerun_script.fragment_id = fragment
            w = msg.rerun_script.widget_states.widgets.add()
            w.id = wid
            if kind == "int":
                w.int_value = int(value)
            else:
                w.double_value = float(value)
        t0 = time.perf_counter()
        await ws.send(msg.SerializeToString())
        inputs, url_keys = {}, {}
        received = 0
        while True:
            raw = await asyncio.wait_for(ws.recv(), timeout=60)
            received += len(raw)
            fm = ForwardMsg()
            fm.ParseFromString(raw)
            kind = fm.WhichOneof("type")
            if kind == "navigation":
                for p in fm.navigation.app_pages:
                    self.pages[p.url_pathname] = p.page_script_hash
            elif kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
                el = fm.delta.new_element
                etype = el.WhichOneof("type")
                if etype == "exception":
                    self.errors.append(el.exception.message[:120])
                elif etype == "number_input":
                    ni = el.number_input
                    dtype = "int" if ni.data_type == ni.INT else "float"
                    self.widgets[ni.label] = (ni.id, dtype, fm.delta.fragment_id)
                    inputs[ni.label] = ni.value if ni.set_value else ni.default
                    if ni.query_param_key:
                        url_keys[ni.label] = ni.query_param_key
            elif kind == "script_finished":
                if widget is None:
                    self.page_loads += 1
                else:
                    self.latencies.append(time.perf_counter() - t0)
                    self.bytes_in.append(received)
                    inputs[next(k for k, v in self.widgets.items() if v[0] == widget[0])] = float(
                        widget[2]
                    )
                self.inputs = inputs
                # The frontend writes every input bound to the link into the address bar; do
                # the same for the number inputs this client changes.
                self.query = urlencode(
                    {url_keys[k]: _num(v) for k, v in inputs.items() if k in url_keys}
                )
                return

    async def hostile(self, deadline: float) -> None:
        """Open the worst link of every page, each in a new session, until the deadline."""
        visits = 0
        while time.time() < deadline:
            for path, query in WORST_LINKS.items():
                if time.time() >= deadline:
                    break
                self.cookies = {}  # a new visitor: a new page load, and a replica of its own
                async with await self.connect() as ws:
                    if not self.pages:
                        await self._run(ws)  # learn the page list once
                    await self._run_query(ws, self.pages.get(path, ""), query)
                    visits += 1
        self.visits = visits

    async def _run_query(self, ws, page_hash: str, query: str) -> None:
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        msg = BackMsg()
        msg.rerun_script.query_string = query
        msg.rerun_script.page_script_hash = page_hash
        t0 = time.perf_counter()
        await ws.send(msg.SerializeToString())
        while True:
            fm = ForwardMsg()
            fm.ParseFromString(await asyncio.wait_for(ws.recv(), timeout=120))
            kind = fm.WhichOneof("type")
            if kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
                el = fm.delta.new_element
                if el.WhichOneof("type") == "exception":
                    self.errors.append(el.exception.message[:120])
            elif kind == "script_finished":
                self.latencies.append(time.perf_counter() - t0)
                return

    async def run(self, deadline: float, max_actions: int, think: float = 0.0) -> None:
        import websockets

        rng = random.Random(self.name)
        await asyncio.sleep(self.start_delay)  # students arrive over the ramp, not at once
        ws = await self.connect()
        try:
            await self._run(ws)  # the home page; learn the page list
            actions = 0
            while time.time() < deadline and actions < max_actions:
                path = rng.choice(list(ACTIONS))
                labels, values = ACTIONS[path]
                try:
                    self.widgets.clear()
                    self.query = ""  # a page chosen in the menu opens without a query string
                    await self._run(ws, self.pages.get(path, ""))
                    label = next((x for x in labels.split("|") if x in self.widgets), labels)
                    if label not in self.widgets:
                        self.errors.append(f"{path}: no widget {label!r}")
                        continue
                    for value in rng.sample(values, k=min(2, len(values))):
                        if think:  # a person reads the result before the next change
                            await _read(ws, rng.uniform(0.5 * think, 1.5 * think))
                        if time.time() >= deadline:
                            break
                        wid, kind, _ = self.widgets[label]
                        await self._run(ws, self.pages[path], (wid, kind, value), self.query)
                        actions += 1
                except TimeoutError:
                    self.errors.append("no answer within 60 s")
                    return
                except (websockets.exceptions.WebSocketException, OSError, _Closed) as e:
                    if not self.http_base:
                        raise
                    if not isinstance(e, _Closed):
                        self.failed += 1  # sent, and the answer never came
                    ws = await self._reconnect(self.pages.get(path, ""), deadline)
                    if ws is None:
                        return
        finally:
            if ws is not None:
                await ws.close()

    async def _reconnect(self, page_hash: str, deadline: float):
        """Reconnect through the load balancer with the same cookies and reload the page's
        link, as Streamlit's frontend does when its websocket closes; None if it gives up."""
        import websockets

        t0 = time.perf_counter()
        before, query = dict(self.inputs), self.query
        while time.perf_counter() - t0 < RECONNECT_GIVE_UP_S:
            try:
                ws = await self.connect()
                self.widgets.clear()
                await self._run(ws, page_hash, query=query)
            except (TimeoutError, websockets.exceptions.WebSocketException, OSError):
                await asyncio.sleep(0.2)  # the frontend, too, retries after a short wait
                continue
            self.reconnects.append(time.perf_counter() - t0)
            self.same_inputs.append(self.inputs == before)
            return ws
        self.errors.append(f"no reconnect within {RECONNECT_GIVE_UP_S:.0f} s")
        return None


async def run_load(
    ws_url: str,
    http_base: str | None,
    n: int,
    seconds: float,
    think: float,
    hostile: int = 0,
    warm_cookies: list[dict] | None = None,
    during=None,
    ramp: float = 0.0,
):
    """Warm the server(s) up, then run n sessions (and hostile neighbours) for ``seconds``.
    ``warm_cookies``: one warm-up session per entry, with those cookies (one per replica);
    ``during(t0)``: a coroutine run beside the load (bench/scale.py kills a replica in it);
    ``ramp``: the sessions arrive evenly over this many seconds (0: all at once).
    Returns (sessions, hostile sessions, elapsed seconds)."""
    warm = []
    for i, cookies in enumerate(warm_cookies or [{}]):
        w = Session(ws_url, -1 - i, http_base)  # import everything once, not charged to the load
        w.cookies = dict(cookies)
        warm.append(w)
    await asyncio.gather(*(w.run(time.time() + 15, 6) for w in warm))
    sessions = [Session(ws_url, i, http_base) for i in range(n)]
    for i, s in enumerate(sessions):
        s.start_delay = ramp * i / n
    hostiles = [Session(ws_url, 1000 + i, http_base) for i in range(hostile)]
    t0 = time.time()
    await asyncio.gather(
        *(s.run(t0 + seconds, 10_000, think) for s in sessions),
        *(h.hostile(t0 + seconds) for h in hostiles),
        *([during(t0)] if during else []),
    )
    return sessions, hostiles, time.time() - t0


def summarize(sessions: list[Session], elapsed: float) -> dict:
    """The figures of one load run (latencies in seconds)."""
    lat = sorted(x for s in sessions for x in s.latencies)
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")  # noqa
    per_replica: dict[str, int] = {}
    for s in sessions:
        if s.ws_replicas:
            per_replica[s.ws_replicas[0]] = per_replica.get(s.ws_replicas[0], 0) + 1
    return {
        "sessions": len(sessions),
        "elapsed_s": elapsed,
        "interactions": len(lat),
        "errors": [e for s in sessions for e in s.errors],
        "p50_s": p(0.5),
        "p95_s": p(0.95),
        "max_s": lat[-1] if lat else float("nan"),
        "mean_s": statistics.mean(lat) if lat else float("nan"),
        "per_replica": dict(sorted(per_replica.items())),
        "sticky": sum(1 for s in sessions if s.ws_replicas and s.ws_replicas[0] == s.page_replica),
        "failed": sum(s.failed for s in sessions),
        "reconnects": sorted(x for s in sessions for x in s.reconnects),
        "same_inputs": sum(x for s in sessions for x in s.same_inputs),
        "kib_per_interaction": (
            statistics.mean(b for s in sessions for b in s.bytes_in) / 1024 if lat else float("nan")
        ),
        "page_loads": sum(s.page_loads for s in sessions),
    }


def print_summary(f: dict, behind_lb: bool) -> None:
    print(
        f"interactions: {f['interactions']} ({f['interactions'] / f['elapsed_s']:.1f}/s)   "
        f"errors: {len(f['errors'])}"
    )
    if f["interactions"]:
        print(
            f"latency input -> script finished: p50 {f['p50_s'] * 1e3:.0f} ms, p95 "
            f"{f['p95_s'] * 1e3:.0f} ms, max {f['max_s'] * 1e3:.0f} ms, mean "
            f"{f['mean_s'] * 1e3:.0f} ms"
        )
    if behind_lb:
        counts = ", ".join(
            f"{k or '(no X-Served-By header)'} {v}" for k, v in f["per_replica"].items()
        )
        print(f"sessions per replica (the replica that served each websocket): {counts}")
        print(
            f"sticky: {f['sticky']} of {f['sessions']} sessions' websockets reached the "
            "replica that served their page"
        )
    for e in f["errors"][:5]:
        print("  error:", e)


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the process has used so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run_local(root: Path, args, python: str | None = None) -> tuple[dict, list]:
    """One load run against a server of ``root`` started for it (by ``python``, or this
    interpreter): the summary (with the server's memory and its CPU seconds during the load)
    and the hostile sessions."""
    server, port = start_app(root, python)
    try:
        url = f"ws://127.0.0.1:{port}/_stcore/stream"
        start = {}

        async def _at_start(t0):
            start["rss"], start["cpu"] = rss_bytes(server.pid), _cpu_s(server.pid)

        sessions, hostile, elapsed = await run_load(
            url, None, args.sessions, args.seconds, args.think, args.hostile, during=_at_start
        )
        rss, cpu = rss_bytes(server.pid), _cpu_s(server.pid)
    finally:
        server.terminate()
        server.wait(10)
    f = summarize(sessions, elapsed)
    f.update(base_rss=start["rss"], rss=rss, cpu_s=cpu - start["cpu"])
    return f, hostile


def print_local(f: dict, args) -> None:
    print_summary(f, behind_lb=False)
    runs = f["interactions"] + f["page_loads"]
    print(
        f"server CPU during the load: {f['cpu_s']:.1f} s = {f['cpu_s'] / f['elapsed_s']:.2f} "
        f"cores; {f['cpu_s'] / max(1, f['interactions']) * 1e3:.0f} ms per interaction "
        f"({f['cpu_s'] / max(1, runs) * 1e3:.0f} ms per script run, page loads included); "
        f"{f['kib_per_interaction']:.1f} KiB sent per interaction"
    )
    print(
        f"server memory: {f['base_rss'] / 2**20:.0f} MiB before, {f['rss'] / 2**20:.0f} MiB "
        f"with the sessions: {(f['rss'] - f['base_rss']) / max(1, args.sessions) / 2**20:.1f}"
        " MiB per session"
    )


async def compare(args) -> None:
    """Rounds of the same load against two checkouts, alternating (A B A B ...), so that
    what else runs on the machine falls on both alike; then both side by side."""
    roots = {"this": Path(args.root).resolve(), "other": Path(args.compare).resolve()}
    got: dict[str, list[dict]] = {k: [] for k in roots}
    load_before = os.getloadavg()
    for r in range(args.rounds):
        for name in ("other", "this") if r % 2 == 0 else ("this", "other"):
            python = args.compare_python if name == "other" else None
            f, _ = await run_local(roots[name], args, python)
            got[name].append(f)
            print(
                f"round {r + 1} {name:<5} ({roots[name]}): {f['interactions']} interactions "
                f"({f['interactions'] / f['elapsed_s']:.1f}/s), p50 {f['p50_s'] * 1e3:.0f} "
                f"ms, p95 {f['p95_s'] * 1e3:.0f} ms, errors {len(f['errors'])}, "
                f"{f['cpu_s'] / max(1, f['interactions']) * 1e3:.0f} ms CPU per interaction",
                flush=True,
            )
    if args.compare_python:
        print(f"other ran on {args.compare_python}, this on {sys.executable}")
    print(
        f"\n{args.sessions} sessions x {args.seconds:g} s, think {args.think:g} s (+-50%), "
        f"{args.rounds} rounds each, alternating; load average before "
        f"{' '.join(f'{x:.2f}' for x in load_before)}, after "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)"
    )
    print(
        f"{'checkout':<52}{'inter./s':>9}{'p50 ms':>8}{'p95 ms':>8}{'max ms':>8}{'errors':>7}"
        f"{'CPU ms/inter.':>14}{'KiB/inter.':>11}"
    )
    for name, fs in got.items():
        med = lambda key, fs=fs: statistics.median(f[key] for f in fs)  # noqa: E731
        rate = statistics.median(f["interactions"] / f["elapsed_s"] for f in fs)
        cpu = statistics.median(f["cpu_s"] / max(1, f["interactions"]) for f in fs)
        print(
            f"{name + ': ' + str(roots[name])[-44:]:<52}{rate:>9.1f}{med('p50_s') * 1e3:>8.0f}"
            f"{med('p95_s') * 1e3:>8.0f}{med('max_s') * 1e3:>8.0f}"
            f"{sum(len(f['errors']) for f in fs):>7}{cpu * 1e3:>14.0f}"
            f"{med('kib_per_interaction'):>11.1f}"
        )
    rates = {k: [f["interactions"] / f["elapsed_s"] for f in fs] for k, fs in got.items()}
    print(spread_verdict(rates["this"], rates["other"]))


def spread_verdict(this: list[float], other: list[float]) -> str:
    """The ratio of the two trees' median interactions per second, with every round's range and
    the range of the ratio itself; when the two trees' rounds overlap, it says the difference is
    within what this machine varies between rounds of the same tree (one tree's rounds have
    differed by 10-15% on 2 cores: measure a small change with more rounds, or not at all)."""
    med_this, med_other = statistics.median(this), statistics.median(other)
    lo, hi = min(this) / max(max(other), 1e-9), max(this) / max(min(other), 1e-9)
    line = (
        f"interactions per second, this / other: {med_this / max(med_other, 1e-9):.2f}x "
        f"(rounds: this {min(this):.1f}-{max(this):.1f}, other {min(other):.1f}-{max(other):.1f}"
        f"; ratio {lo:.2f}-{hi:.2f}x)"
    )
    if len(this) > 1 and len(other) > 1 and min(this) <= max(other) and min(other) <= max(this):
        line += "\nthe two trees' rounds overlap: the difference is within this machine's noise"
    return line


async def main_async(args) -> None:
    if args.compare:
        await compare(args)
        return
    if args.url:
        base = args.url.rstrip("/")
        ws_url = "ws" + base[4:] + "/_stcore/stream"
        sessions, hostile, elapsed = await run_load(
            ws_url,
            base,
            args.sessions,
            args.seconds,
            args.think,
            args.hostile,
            warm_cookies=[{}] * 4,
        )
        print(
            f"{args.sessions} sessions for {elapsed:.0f} s against {base} (websocket "
            f"protocol, no browsers), think time {args.think:g} s (+-50%) between changes"
        )
        print_summary(summarize(sessions, elapsed), behind_lb=True)
        print("server memory: not measured with --url (the server is not a child of this script)")
    else:
        f, hostile = await run_local(Path(args.root), args)
        print(
            f"{args.sessions} sessions for {f['elapsed_s']:.0f} s against one server on "
            f"{os.cpu_count()} cores (websocket protocol, no browsers), think time "
            f"{args.think:g} s (+-50%) between changes; load average "
            f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
        )
        print_local(f, args)
    if hostile:
        hl = sorted(x for h in hostile for x in h.latencies)
        he = [e for h in hostile for e in h.errors]
        print(
            f"hostile neighbours: {args.hostile} opening the worst link of every page: "
            f"{sum(getattr(h, 'visits', 0) for h in hostile)} visits, errors {len(he)}; "
            f"their own page time p50 {hl[len(hl) // 2] * 1e3:.0f} ms, max "
            f"{hl[-1] * 1e3:.0f} ms"
            if hl
            else "hostile neighbours: no visit finished"
        )
        for e in he[:3]:
            print("  hostile error:", e)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument(
        "--hostile",
        type=int,
        default=0,
        help="sessions that open every page's worst link, again and again",
    )
    ap.add_argument(
        "--think",
        type=float,
        default=3.0,
        help="seconds a user looks at a result before the next change (0: hammer)",
    )
    ap.add_argument(
        "--url",
        help="a running server or load balancer, e.g. "
        "http://127.0.0.1:8500 (deploy/replicas.py); default: start one server",
    )
    ap.add_argument(
        "--root",
        default=str(ROOT),
        help="the checkout whose app.py the started server runs (default: this one)",
    )
    ap.add_argument(
        "--compare",
        metavar="CHECKOUT",
        help="another checkout (e.g. the previous commit, from git archive): run "
        "the same load against both, alternating, and print them side by side",
    )
    ap.add_argument(
        "--compare-python",
        metavar="PYTHON",
        help="with --compare: the interpreter of the other checkout's own environment (e.g. "
        "a venv with the previous commit's requirements), when a change is in the "
        "dependencies; default: this one",
    )
    ap.add_argument("--rounds", type=int, default=2, help="with --compare: runs of each")
    args = ap.parse_args()
    if args.compare and args.url:
        ap.error("--compare starts its own servers; it does not take --url")
    if args.compare_python and not args.compare:
        ap.error("--compare-python goes with --compare")
    if args.compare_python and not os.access(args.compare_python, os.X_OK):
        ap.error(f"--compare-python {args.compare_python}: not an executable interpreter")
    for root in filter(None, (args.root, args.compare)):
        if not (Path(root) / "app.py").is_file():
            ap.error(f"{root} has no app.py: give the folder of a checkout")
    if not 1 <= args.rounds <= 10:
        ap.error("rounds 1..10")
    if args.url and not re.fullmatch(
        r"http://(127\.\d+\.\d+\.\d+|localhost|\[::1\])"
        r"(:\d+)?/?",
        args.url,
    ):
        ap.error(
            "--url must be http:// on this machine (127.x.x.x, localhost or [::1]) with "
            "an optional port: load is never sent anywhere else"
        )
    if not 1 <= args.sessions <= 200 or not 1 <= args.seconds <= 600 or not 0 <= args.hostile <= 20:
        ap.error("sessions 1..200, seconds 1..600, hostile 0..20")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
