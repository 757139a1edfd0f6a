"""Load test: N concurrent sessions against one server, changing controls for a fixed time.

    .venv/bin/python bench/load.py [--sessions 20] [--seconds 30] [--think 3] [--hostile 3]

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
import random
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
from worst_links import WORST_LINKS  # beside this script

# page url path -> (widget label, values to alternate between)
ACTIONS = {
    "budget": ("Context per sequence (tokens)", [8192, 32768, 131072, 4096]),
    "step_time": ("Batch (sequences decoded together)", [1, 8, 32, 64]),
    "lab": ("Context per sequence (tokens)", [8192, 65536, 2048]),
    "techniques": ("Context per sequence (tokens)", [32768, 8192, 131072]),
    "engine": ("Step", [3, 10, 20, 6]),
    "cache_fill": ("Tokens to generate", [20, 40, 10]),
}


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class Session:
    def __init__(self, url: str, name: int):
        self.url, self.name = url, name
        self.pages: dict[str, str] = {}  # url path -> page script hash
        self.widgets: dict[str, tuple[str, str]] = {}  # label -> (id, value kind)
        self.latencies: list[float] = []
        self.errors: list[str] = []

    async def _run(self, ws, page_hash: str = "", widget=None) -> None:
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        msg = BackMsg()
        msg.rerun_script.query_string = ""
        msg.rerun_script.page_script_hash = page_hash
        if widget is not None:
            wid, kind, value = widget
            w = msg.rerun_script.widget_states.widgets.add()
            w.id = wid
            if kind == "int":
                w.int_value = int(value)
            else:
                w.double_value = float(value)
        t0 = time.perf_counter()
        await ws.send(msg.SerializeToString())
        while True:
            raw = await asyncio.wait_for(ws.recv(), timeout=60)
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
                    self.widgets[ni.label] = (ni.id, dtype)
            elif kind == "script_finished":
                if widget is not None:
                    self.latencies.append(time.perf_counter() - t0)
                return

    async def hostile(self, deadline: float) -> None:
        """Open the worst link of every page, each in a new session, until the deadline."""
        import websockets

        visits = 0
        while time.time() < deadline:
            for path, query in WORST_LINKS.items():
                if time.time() >= deadline:
                    break
                async with websockets.connect(self.url, subprotocols=["streamlit"],
                                              max_size=2**26) as ws:
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
        async with websockets.connect(self.url, subprotocols=["streamlit"],
                                      max_size=2**26) as ws:
            await self._run(ws)  # the home page; learn the page list
            actions = 0
            while time.time() < deadline and actions < max_actions:
                path = rng.choice(list(ACTIONS))
                label, values = ACTIONS[path]
                self.widgets.clear()
                await self._run(ws, self.pages.get(path, ""))
                if label not in self.widgets:
                    self.errors.append(f"{path}: no widget {label!r}")
                    continue
                wid, kind = self.widgets[label]
                for value in rng.sample(values, k=min(2, len(values))):
                    if think:  # a person reads the result before the next change
                        await asyncio.sleep(rng.uniform(0.5 * think, 1.5 * think))
                    if time.time() >= deadline:
                        break
                    await self._run(ws, self.pages[path], (wid, kind, value))
                    actions += 1


async def main_async(args) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py",
                               "--server.port", str(port), "--server.address", "127.0.0.1",
                               "--server.headless", "true", "--browser.gatherUsageStats",
                               "false"], cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1)
                break
            except OSError:
                time.sleep(0.2)
        url = f"ws://127.0.0.1:{port}/_stcore/stream"
        warm = Session(url, -1)  # import everything once, so it is not charged to the load
        await warm.run(time.time() + 10, 6)
        base_rss = _rss(server.pid)
        sessions = [Session(url, i) for i in range(args.sessions)]
        hostile = [Session(url, 1000 + i) for i in range(args.hostile)]
        t0 = time.time()
        await asyncio.gather(*(s.run(t0 + args.seconds, 10_000, args.think) for s in sessions),
                             *(h.hostile(t0 + args.seconds) for h in hostile))
        elapsed = time.time() - t0
        rss = _rss(server.pid)
    finally:
        server.terminate()
        server.wait(10)
    lat = sorted(x for s in sessions for x in s.latencies)
    errors = [e for s in sessions for e in s.errors]
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")  # noqa
    print(f"{args.sessions} sessions for {elapsed:.0f} s against one server on "
          f"{__import__('os').cpu_count()} cores (websocket protocol, no browsers), think time "
          f"{args.think:g} s (+-50%) between changes")
    print(f"interactions: {len(lat)} ({len(lat) / elapsed:.1f}/s)   errors: {len(errors)}")
    if lat:
        print(f"latency input -> script finished: p50 {p(0.5) * 1e3:.0f} ms, p95 "
              f"{p(0.95) * 1e3:.0f} ms, max {lat[-1] * 1e3:.0f} ms, mean "
              f"{statistics.mean(lat) * 1e3:.0f} ms")
    print(f"server memory: {base_rss / 2**20:.0f} MiB before, {rss / 2**20:.0f} MiB with the "
          f"sessions: {(rss - base_rss) / max(1, args.sessions) / 2**20:.1f} MiB per session")
    for e in errors[:5]:
        print("  error:", e)
    if hostile:
        hl = sorted(x for h in hostile for x in h.latencies)
        he = [e for h in hostile for e in h.errors]
        print(f"hostile neighbours: {args.hostile} opening the worst link of every page: "
              f"{sum(getattr(h, 'visits', 0) for h in hostile)} visits, errors {len(he)}; "
              f"their own page time p50 {hl[len(hl) // 2] * 1e3:.0f} ms, max "
              f"{hl[-1] * 1e3:.0f} ms" if hl else "hostile neighbours: no visit finished")
        for e in he[:3]:
            print("  hostile error:", e)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--hostile", type=int, default=0,
                    help="sessions that open every page's worst link, again and again")
    ap.add_argument("--think", type=float, default=3.0,
                    help="seconds a user looks at a result before the next change (0: hammer)")
    args = ap.parse_args()
    if not 1 <= args.sessions <= 200 or not 1 <= args.seconds <= 600 or \
            not 0 <= args.hostile <= 20:
        ap.error("sessions 1..200, seconds 1..600, hostile 0..20")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
