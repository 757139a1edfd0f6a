"""Kept memory: what N heavy sessions leave in the server after they have left (issue 22).

    .venv/bin/python bench/memory.py [--sessions 36] [--ref HEAD~1] [--ttl 120]

Starts one server (this tree, or ``--ref``: a git revision checked out in a temporary worktree)
with the environment that tree's Dockerfile gives the container (its ``ENV`` lines: hosted mode,
the allocator settings), warms it up with one session, then connects N sessions at once. Each
opens every heavy page with its worst link (bench/worst_links.py), each link varied per session
so the caches see new keys (as different people's inputs would), then pastes a config.json from
the corpus (tests/data/configs, with a per-session field so no two texts are equal) and opens
every heavy page again with it. Then all N disconnect. The live, microscope and quality pages
(torch) are left out.

Streamlit keeps a disconnected session for ``server.disconnectedSessionTTL`` seconds (120 by
default; this tree's .streamlit/config.toml may set it) so a reconnecting tab finds its state.
The bench waits that long plus a margin, then opens and closes one small probe session (Streamlit
1.67 reaps expired sessions only when its session store is written to), waits again and reads
the server's RSS (VmRSS in /proc/<pid>/status). Printed: RSS before the sessions, at the peak
(all N connected, every page done), right after they disconnected, after the TTL, and at the
end; "kept" is the end minus before. Target (issue 22): under 50 MiB for 36 heavy sessions.
Also printed: the server's CPU seconds (user + system) for the sessions' script runs.

With ``--ref`` the same run is made against that revision first, then against this tree, and
the two are printed side by side (the machine's other load moves both alike).
Traffic goes only to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shlex
import subprocess
import tempfile
import time
import tomllib
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

from load import rss_bytes  # beside this script
from serve import start_app
from worst_links import WORST_LINKS

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ["budget", "step_time", "frontier", "cache_fill", "engine", "lab", "roofline"]
CONFIGS = sorted((ROOT / "tests" / "data" / "configs").glob("*.json"))
MODEL_CUSTOM_LABEL = "my own config.json"  # what the Model selectbox writes into the link
# Per-session variation of each page's worst link: (parameter, values cycled by session index).
VARY = {
    "budget": ("b_ctx", lambda i: 10_000_000 - 1000 * i),
    "step_time": ("s_ctx", lambda i: 10_000_000 - 1000 * i),
    "frontier": ("fr_prompt", lambda i: 3000 - 10 * i),
    "cache_fill": ("f_new", lambda i: 159 - i),
    "engine": ("e_step", lambda i: 2000 - i),
    "lab": ("l_ctx", lambda i: 10_000_000 - 1000 * i),
    "roofline": ("r_ctx", lambda i: 1_000_000 - 1000 * i),
}


def _link(page: str, i: int, custom: bool) -> str:
    params = dict(parse_qsl(WORST_LINKS[page], keep_blank_values=True))
    key, value = VARY[page]
    params[key] = str(value(i))
    if custom:
        params["model"] = MODEL_CUSTOM_LABEL
    elif page in ("cache_fill", "engine", "frontier"):  # no model in their worst link
        params.setdefault("model", "llama-3.1-8b")
    return urlencode(params)


def _pasted(i: int) -> str:
    cfg = json.loads(CONFIGS[i % len(CONFIGS)].read_text())
    cfg["_name_or_path"] = f"bench-session-{i}"  # every session's text is its own
    return json.dumps(cfg, indent=2)


class HeavySession:
    def __init__(self, url: str, i: int):
        self.url, self.i = url, i
        self.pages: dict[str, str] = {}
        self.text_area_id = ""
        self.errors: list[str] = []
        self.runs = 0
        self.ws = None

    async def rerun(self, page_hash: str = "", query: str = "", text: str | None = None):
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        msg = BackMsg()
        msg.rerun_script.query_string = query
        msg.rerun_script.page_script_hash = page_hash
        if text is not None and self.text_area_id:
            w = msg.rerun_script.widget_states.widgets.add()
            w.id = self.text_area_id
            w.string_value = text
        await self.ws.send(msg.SerializeToString())
        while True:
            fm = ForwardMsg()
            fm.ParseFromString(await asyncio.wait_for(self.ws.recv(), timeout=300))
            kind = fm.WhichOneof("type")
            if kind == "navigation":
                for p in fm.navigation.app_pages:
                    self.pages[p.url_pathname] = p.page_script_hash
            elif kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
                el = fm.delta.new_element
                etype = el.WhichOneof("type")
                if etype == "exception":
                    self.errors.append(el.exception.message[:120])
                elif etype == "text_area":
                    self.text_area_id = el.text_area.id
            elif kind == "script_finished":
                self.runs += 1
                return

    async def run(self, connected: asyncio.Event | None = None) -> None:
        import websockets

        self.ws = await websockets.connect(
            self.url, subprotocols=["streamlit"], max_size=2**27, open_timeout=60
        )
        await self.rerun()  # the home page; learn the page list
        for page in HEAVY:
            await self.rerun(self.pages[page], _link(page, self.i, custom=False))
        text = _pasted(self.i)
        # Choose "my own config.json", then paste into the text box it shows.
        await self.rerun(self.pages["budget"], _link("budget", self.i, custom=True))
        if not self.text_area_id:
            self.errors.append("no config text box")
            return
        for page in HEAVY:
            await self.rerun(self.pages[page], _link(page, self.i, custom=True), text)

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()


def _server_ttl(tree: Path) -> int:
    cfg = tree / ".streamlit" / "config.toml"
    if cfg.exists():
        return int(
            tomllib.loads(cfg.read_text()).get("server", {}).get("disconnectedSessionTTL", 120)
        )
    return 120


def dockerfile_env(tree: Path) -> dict[str, str]:
    """The ``ENV`` settings of ``tree``'s Dockerfile (what its container starts with)."""
    text = (tree / "Dockerfile").read_text()
    env = {}
    for m in re.finditer(r"^ENV\s+((?:[^\n]*\\\n)*[^\n]*)$", text, re.M):
        for part in shlex.split(m.group(1).replace("\\\n", " ")):
            if "=" in part:
                k, v = part.split("=", 1)
                env[k] = v
    return env


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _mib(b: int) -> str:
    return f"{b / 2**20:,.0f}"


async def measure(tree: Path, n: int, ttl: int | None, margin: float, log) -> dict:
    ttl_used = _server_ttl(tree) if ttl is None else ttl
    denv = dockerfile_env(tree)
    denv.pop("PYTHONDONTWRITEBYTECODE", None)  # the container's; irrelevant here
    log(
        "  server environment from its Dockerfile: "
        + " ".join(f"{k}={v}" for k, v in sorted(denv.items()))
    )
    extra = ["--server.disconnectedSessionTTL", str(ttl)] if ttl is not None else []
    server, port = start_app(tree, env=denv, extra=extra)
    url = f"ws://127.0.0.1:{port}/_stcore/stream"
    out: dict = {
        "ttl_s": ttl_used,
        "env": " ".join(
            f"{k}={v}" for k, v in sorted(denv.items()) if k.startswith(("PYTHONMALLOC", "MALLOC_"))
        ),
    }
    try:
        warm = HeavySession(url, 10_000)  # every import, once; not charged to the sessions
        await warm.run()
        await warm.close()
        await asyncio.sleep(2)
        out["before"] = rss_bytes(server.pid)
        log(f"  before: {_mib(out['before'])} MiB; {n} sessions connecting")
        t0, cpu0 = time.time(), _cpu_s(server.pid)
        sessions = [HeavySession(url, i) for i in range(n)]
        results = await asyncio.gather(*(s.run() for s in sessions), return_exceptions=True)
        out["peak"] = rss_bytes(server.pid)
        out["cpu_s"] = _cpu_s(server.pid) - cpu0
        out["runs"] = sum(s.runs for s in sessions)
        out["errors"] = [e for s in sessions for e in s.errors] + [
            repr(r)[:120] for r in results if isinstance(r, BaseException)
        ]
        log(
            f"  peak: {_mib(out['peak'])} MiB after {out['runs']} script runs in "
            f"{time.time() - t0:.0f} s ({out['cpu_s']:.1f} CPU s); errors {len(out['errors'])}"
        )
        await asyncio.gather(*(s.close() for s in sessions))
        await asyncio.sleep(3)
        out["left"] = rss_bytes(server.pid)
        log(
            f"  just after they left: {_mib(out['left'])} MiB; waiting {ttl_used} s "
            f"(disconnected-session TTL) + {margin:.0f} s"
        )
        await asyncio.sleep(ttl_used + margin)
        out["after_ttl"] = rss_bytes(server.pid)
        probe = HeavySession(url, 20_000)  # a small visit: its disconnect reaps the expired
        import websockets

        probe.ws = await websockets.connect(url, subprotocols=["streamlit"], open_timeout=60)
        await probe.rerun()
        await probe.close()
        await asyncio.sleep(margin)
        out["after"] = rss_bytes(server.pid)
        log(
            f"  after the TTL: {_mib(out['after_ttl'])} MiB; after a probe visit: "
            f"{_mib(out['after'])} MiB"
        )
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
    return out


def _print(results: list[tuple[str, dict]], n: int) -> None:
    rows = [
        ("RSS before (MiB)", "before"),
        ("RSS at the peak", "peak"),
        ("RSS just after they left", "left"),
        ("RSS after the TTL", "after_ttl"),
        ("RSS at the end (after a probe visit)", "after"),
    ]
    width = max(len(r[0]) for r in rows) + 2
    print(f"\n{n} heavy sessions, one server on this machine (websocket protocol, no browsers)")
    print(" " * width + "".join(f"{name:>16}" for name, _ in results))
    for label, key in rows:
        print(f"{label:<{width}}" + "".join(f"{_mib(r[key]):>16}" for _, r in results))
    print(
        f"{'kept: end - before (MiB)':<{width}}"
        + "".join(f"{_mib(r['after'] - r['before']):>16}" for _, r in results)
    )
    print(
        f"{'disconnected-session TTL (s)':<{width}}"
        + "".join(f"{r['ttl_s']:>16}" for _, r in results)
    )
    print(
        f"{'server CPU s for the runs':<{width}}"
        + "".join(f"{r['cpu_s']:>16.1f}" for _, r in results)
    )
    print(
        f"{'script runs / errors':<{width}}"
        + "".join(f"{str(r['runs']) + ' / ' + str(len(r['errors'])):>16}" for _, r in results)
    )
    for name, r in results:
        print(f"  {name}: allocator settings {r['env'] or '(the defaults)'}")
        for e in r["errors"][:3]:
            print(f"  {name} error: {e}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=36)
    ap.add_argument("--ref", help="also measure this git revision (e.g. HEAD~1), first")
    ap.add_argument("--ttl", type=int, help="override server.disconnectedSessionTTL (seconds)")
    ap.add_argument(
        "--margin",
        type=float,
        default=10.0,
        help="seconds waited past the TTL, and after the probe visit",
    )
    args = ap.parse_args()
    if not 1 <= args.sessions <= 100:
        ap.error("sessions 1..100")
    results = []
    if args.ref:
        with tempfile.TemporaryDirectory(prefix="kvlab-ref-") as tmp:
            tree = Path(tmp) / "tree"
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), args.ref],
                check=True,
                capture_output=True,
            )
            try:
                print(f"{args.ref}:", flush=True)
                results.append(
                    (
                        args.ref,
                        asyncio.run(
                            measure(
                                tree,
                                args.sessions,
                                args.ttl,
                                args.margin,
                                lambda m: print(m, flush=True),
                            )
                        ),
                    )
                )
            finally:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                    capture_output=True,
                )
    print("this tree:", flush=True)
    results.append(
        (
            "this tree",
            asyncio.run(
                measure(ROOT, args.sessions, args.ttl, args.margin, lambda m: print(m, flush=True))
            ),
        )
    )
    _print(results, args.sessions)


if __name__ == "__main__":
    main()
