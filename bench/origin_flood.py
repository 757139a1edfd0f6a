"""A same-origin visitor's page loads while foreign-origin websocket handshakes arrive
(issue 39, B17): the times tests/test_haproxy_origin.py prints but does not bound.

    .venv/bin/python bench/origin_flood.py                    # as shipped
    .venv/bin/python bench/origin_flood.py --before           # HEAD~'s way: no Origin rule in
                                                              #   HAProxy, plain `streamlit run`
    .venv/bin/python bench/origin_flood.py --haproxy-cfg OLD.cfg --plain-streamlit

One replica (deploy/replicas.py, 1 replica behind HAProxy, hosted mode). A network where the
external-address lookup times out is made with a proxy that accepts and never answers
(HTTP_PROXY for the replica; ``--no-slow-lookup`` leaves it out: this machine has no network, and
a lookup then fails at once). Then ``--handshakes`` foreign-origin websocket handshakes,
``--at-a-time`` at a time, go to HAProxy while a visitor from the same origin loads the page and
opens its websocket every ``--every`` seconds until the flood has ended (at least ``--visits``
times); ``--direct`` sends both to the replica itself, past HAProxy (the replica's own fix).
Printed: who answered the foreign handshakes (HAProxy's own 403, or the replica's, named by
X-Served-By), the visits' times (median, slowest, those over 0.5 s), and the failed lookups
the replica logged.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "deploy"))
import haproxy_support as hs  # noqa: E402
import replicas  # noqa: E402

# `streamlit run` as it was started before deploy/launch.py (the lookup left in place).
PLAIN_STREAMLIT = "from streamlit.web.cli import main\nmain(prog_name='streamlit')\n"


def _proxy_env(port: int) -> dict[str, str]:
    proxy = f"http://127.0.0.1:{port}"
    return {"HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "NO_PROXY": "127.0.0.1,localhost"}


async def flood_and_visit(port: int, args) -> tuple[list, list]:
    host = f"127.0.0.1:{port}"

    def handshake(origin: str):
        return hs.request(
            port, hs.upgrade_request(f"Origin: {origin}\r\n", host=host).decode(), timeout=120
        )

    def visit():
        t0 = time.perf_counter()
        try:
            page = hs.request(
                port, f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n", timeout=120
            )[0]
            ws = handshake(f"http://{host}")[0]
        except OSError as e:
            return f"{type(e).__name__}", "", time.perf_counter() - t0, t0
        return page, ws, time.perf_counter() - t0, t0

    gate = asyncio.Semaphore(args.at_a_time)

    async def foreign():
        async with gate:
            status, headers, _, seconds = await asyncio.to_thread(handshake, "http://evil.example")
            who = "the replica" if args.direct else headers.get("x-served-by", "HAProxy")
            return status, who, seconds

    flood = asyncio.ensure_future(asyncio.gather(*(foreign() for _ in range(args.handshakes))))
    visits = []
    ended = None
    while not flood.done() or len(visits) < args.visits:
        visits.append(await asyncio.to_thread(visit))
        if flood.done() and ended is None:
            ended = time.perf_counter()
        await asyncio.sleep(args.every)
    ended = ended or time.perf_counter()
    # The visits that began while foreign handshakes were still arriving.
    return await flood, [v for v in visits if v[3] < ended] or visits[:1]


def report(foreign, visits, log: Path, label: str) -> None:
    by: dict[str, int] = {}
    for status, who, _ in foreign:
        key = f"{status} from {who}"
        by[key] = by.get(key, 0) + 1
    times = sorted(v[2] for v in visits)
    failed = [v for v in visits if v[0] != 200 or v[1] != 101]
    print(label)
    print(
        f"  foreign handshakes: {len(foreign)}, answered "
        + ", ".join(f"{n} x {k}" for k, n in sorted(by.items()))
        + f"; slowest answer {max(s for _, _, s in foreign):.3f} s"
    )
    if times:
        print(
            f"  same-origin visits (page + websocket) during the flood: {len(times)}, median "
            f"{times[len(times) // 2]:.3f} s, slowest {times[-1]:.3f} s, "
            f"{sum(t > 0.5 for t in times)} over 0.5 s, {len(failed)} failed"
        )
    print(f"  failed external-address lookups in the replica's log: {_lookups(log)}")


def _lookups(log: Path) -> int:
    return log.read_text(errors="replace").count("Did not auto detect external IP")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--handshakes", type=int, default=40)
    ap.add_argument("--at-a-time", type=int, default=4)
    ap.add_argument("--every", type=float, default=0.2, help="seconds between visits")
    ap.add_argument(
        "--visits", type=int, default=10, help="at least this many visits (more while flooded)"
    )
    ap.add_argument(
        "--direct",
        action="store_true",
        help="send the handshakes and visits to the replica itself, past HAProxy",
    )
    ap.add_argument("--haproxy-cfg", type=Path, help="another HAProxy main file")
    ap.add_argument(
        "--plain-streamlit",
        action="store_true",
        help="start the replica with plain `streamlit run` (not deploy/launch.py)",
    )
    ap.add_argument(
        "--before",
        action="store_true",
        help="both of the above as before issue 39: HEAD's HAProxy file without its Origin "
        "rule, plain `streamlit run`",
    )
    ap.add_argument("--no-slow-lookup", action="store_true")
    args = ap.parse_args()
    if not (
        1 <= args.handshakes <= 1000
        and 1 <= args.at_a_time <= 50
        and args.every > 0
        and 1 <= args.visits <= 1000
    ):
        ap.error("handshakes 1..1000, at-a-time 1..50, every > 0, visits 1..1000")
    run_dir = Path(tempfile.mkdtemp(prefix="kvlab-origin-"))
    label = "as shipped"
    if args.before or args.haproxy_cfg:
        cfg = args.haproxy_cfg
        if cfg is None:  # the shipped file without its Origin rule
            cfg = run_dir / "haproxy-no-origin-rule.cfg"
            cfg.write_text(
                "".join(
                    ln
                    for ln in hs.HAPROXY_CFG.read_text().splitlines(keepends=True)
                    if "if two_origins" not in ln and "if has_origin !same_origin" not in ln
                )
            )
        replicas.HAPROXY_CFG = cfg
        label = f"HAProxy file {cfg.name}"
    if args.before or args.plain_streamlit:
        plain = run_dir / "plain_streamlit.py"
        plain.write_text(PLAIN_STREAMLIT)
        replicas.LAUNCH = plain
        label += ", plain `streamlit run`"
    hole = None
    if not args.no_slow_lookup:
        hole = hs.Blackhole()
        os.environ.update(_proxy_env(hole.port))
        label += ", lookups time out (a proxy that never answers)"
    try:
        with replicas.Cluster(replicas=1, port=0, base_port=0, run_dir=run_dir) as c:
            where = c.members[0].address if args.direct else c.url
            port = int(where.rsplit(":", 1)[1])
            if args.direct:
                label += ", straight to the replica (past HAProxy)"
            foreign, visits = asyncio.run(flood_and_visit(port, args))
            report(foreign, visits, c.members[0].log, label)
    finally:
        if hole:
            hole.close()


if __name__ == "__main__":
    main()
