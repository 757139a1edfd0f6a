"""One replica vs two behind HAProxy, and a replica killed under load: the figures of issue 17.

    .venv/bin/python bench/scale.py                     # 100 sessions, 60 s per phase
    .venv/bin/python bench/scale.py --sessions 100 --seconds 60 --think 3 --ramp 10

Three phases in one run, each on a fresh deployment started by deploy/replicas.py (HAProxy in
front, ports chosen by the system), each driven by bench/load.py's sessions (Streamlit's own
websocket protocol, each session loading the page over HTTP first and keeping HAProxy's cookie):

1. 1 replica behind HAProxy, N sessions;
2. 2 replicas behind HAProxy, the same N sessions; the ratio of the two;
3. 2 replicas, N sessions, and replica app1 killed (SIGKILL, as a crash) halfway through.
   Its sessions reconnect with the same cookie; HAProxy sends them to app2, where the page's
   link (every input is in it) rebuilds the view. Reported: the interactions that failed (in
   flight when app1 died), the reconnect time (drop -> reloaded page, without the browser's own
   retry delay), whether every reloaded view had the inputs it had before, and the errors seen
   by the sessions that were on app2.

The load generator runs on the same machine as HAProxy and the replicas, and takes its share of
the cores: the figures are for the whole machine, not for the replicas alone.

Every session comes from this machine: one source address to HAProxy, which holds it to a
class's share (deploy/haproxy.cfg). The run keeps the shipped limits (4,000 connections, 1,000
websockets, 4,000 new connections per 10 s: a class of 400, deploy/replicas.py --class-size),
which the 200 sessions at most admitted here stay under, and prints them. ``--raise-limits``
raises each to fit the sessions (never below the shipped value); limits set in the environment
(KVLAB_LB_CONN_PER_SOURCE and the others) are used as they are.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "deploy"))
import load  # noqa: E402
import replicas  # noqa: E402


def _load_avg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


# Per session, what --raise-limits allows: a session holds a websocket and opens one connection
# for its page load, twice when it reconnects.
PER_SESSION = {
    "KVLAB_LB_WEBSOCKETS_PER_SOURCE": 2,
    "KVLAB_LB_CONN_PER_SOURCE": 4,
    "KVLAB_LB_CONN_RATE_PER_SOURCE": 8,
}


def shipped_limits() -> dict[str, int]:
    """HAProxy's per-source limits as shipped (deploy/haproxy.cfg's defaults, a class of
    deploy/replicas.py's CLASS_SIZE)."""
    return {k: int(v) for k, v in replicas.class_limits(replicas.CLASS_SIZE).items()}


def limits_for(sessions: int, raise_limits: bool, environ=os.environ) -> dict[str, str]:
    """The per-source limits HAProxy runs with: those set in ``environ``, else the shipped ones,
    or with ``raise_limits`` enough for ``sessions`` (never below the shipped). Only the
    variables to set are returned: an empty dict leaves deploy/haproxy.cfg's defaults."""
    if not raise_limits:
        return {}
    shipped = shipped_limits()
    return {
        var: str(max(shipped[var], per * sessions))
        for var, per in PER_SESSION.items()
        if var not in environ
    }


def _limits_line(sessions: int) -> str:
    shipped = shipped_limits()
    have = {var: int(os.environ.get(var, shipped[var])) for var in PER_SESSION}
    said = ", ".join(
        f"{var}={n}" + ("" if n != shipped[var] else " (shipped)") for var, n in have.items()
    )
    need = {var: per * sessions for var, per in PER_SESSION.items()}
    short = [var for var in PER_SESSION if have[var] < need[var]]
    return f"HAProxy per-source limits: {said}" + (
        f"; below the worst case of {sessions} sessions for {', '.join(short)}" if short else ""
    )


async def _phase(n_replicas: int, args, kill_at: float | None = None) -> dict:
    with replicas.Cluster(replicas=n_replicas, port=0, base_port=0) as c:
        base = c.url
        ws_url = "ws" + base[4:] + "/_stcore/stream"
        killed = {}

        async def during(t0: float) -> None:
            if kill_at is None:
                return
            await asyncio.sleep(max(0.0, t0 + kill_at - time.time()))
            killed["before"] = c.stats()
            killed["t"] = time.time() - t0
            c.kill("app1", signal.SIGKILL)

        warm = [{"KVLAB_REPLICA": r.name} for r in c.members if r.healthy]
        sessions, _, elapsed = await load.run_load(
            ws_url,
            base,
            args.sessions,
            args.seconds,
            args.think,
            warm_cookies=warm,
            during=during,
            ramp=args.ramp,
        )
        f = load.summarize(sessions, elapsed)
        f["haproxy"] = c.stats()
        if kill_at is not None:
            on_app1 = [s for s in sessions if s.ws_replicas and s.ws_replicas[0] == "app1"]
            others = [s for s in sessions if s.ws_replicas and s.ws_replicas[0] != "app1"]
            f["killed_at_s"] = killed.get("t")
            f["on_killed"] = len(on_app1)
            f["moved"] = sum(
                1 for s in on_app1 if len(s.ws_replicas) > 1 and s.ws_replicas[-1] != "app1"
            )
            f["other_errors"] = [e for s in others for e in s.errors] + [
                f"failed interaction on {s.ws_replicas[0]}" for s in others for _ in range(s.failed)
            ]
    return f


def _ms(x: float) -> str:
    return f"{x * 1e3:.0f} ms"


async def main_async(args) -> None:
    cmd = (
        f".venv/bin/python bench/scale.py --sessions {args.sessions} --seconds "
        f"{args.seconds:g} --think {args.think:g} --ramp {args.ramp:g}"
        + (" --raise-limits" if args.raise_limits else "")
    )
    print(
        f"bench/scale.py: {args.sessions} sessions arriving over {args.ramp:g} s, "
        f"{args.seconds:g} s per phase, think time {args.think:g} s (+-50%), "
        f"{os.cpu_count()} cores, load average before: "
        f"{_load_avg()}"
    )
    print(f"rerun: {cmd}")
    os.environ.update(limits_for(args.sessions, args.raise_limits))
    print(_limits_line(args.sessions) + " (every session from 127.0.0.1: one source address)")
    one = await _phase(1, args)
    print(f"\n[1] 1 replica behind HAProxy (load average now {_load_avg()})")
    load.print_summary(one, behind_lb=True)
    two = await _phase(2, args)
    print(f"\n[2] 2 replicas behind HAProxy (load average now {_load_avg()})")
    load.print_summary(two, behind_lb=True)
    rate = (two["interactions"] / two["elapsed_s"]) / (one["interactions"] / one["elapsed_s"])
    print(
        f"\nratio 1 replica / 2 replicas: p50 {one['p50_s'] / two['p50_s']:.2f}x, p95 "
        f"{one['p95_s'] / two['p95_s']:.2f}x, interactions per second {rate:.2f}x (2 over 1)"
    )
    kill_at = args.seconds / 2
    fault = await _phase(2, args, kill_at=kill_at)
    print(
        f"\n[3] 2 replicas, app1 killed (SIGKILL) at {fault['killed_at_s']:.1f} s of "
        f"{args.seconds:g} s (load average now {_load_avg()})"
    )
    load.print_summary(fault, behind_lb=True)
    rc = fault["reconnects"]
    print(
        f"sessions on app1 when it died: {fault['on_killed']}; reconnected to another "
        f"replica: {fault['moved']}"
    )
    print(
        f"interactions that failed: {fault['failed']} (sent to app1 and never answered; a "
        "session that was reading its page when app1 died reconnects at once, as the "
        "browser does, and loses nothing)"
    )
    if rc:
        print(
            f"reconnect time, drop -> reloaded page on the survivor: p50 "
            f"{_ms(rc[len(rc) // 2])}, max {_ms(rc[-1])} ({len(rc)} reconnects)"
        )
    print(f"reloaded views with the same inputs as before: {fault['same_inputs']} of {len(rc)}")
    print(f"sessions on the surviving replica: errors {len(fault['other_errors'])}")
    for e in fault["other_errors"][:5]:
        print("  error:", e)
    print(f"HAProxy afterwards: {fault['haproxy']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument(
        "--ramp", type=float, default=10, help="the sessions arrive evenly over this many seconds"
    )
    ap.add_argument(
        "--think",
        type=float,
        default=3.0,
        help="seconds a user looks at a result before the next change",
    )
    ap.add_argument(
        "--raise-limits",
        action="store_true",
        help="raise HAProxy's per-source limits to fit the sessions (default: the shipped "
        "limits, sized for a class of 400 behind one address)",
    )
    args = ap.parse_args()
    if (
        not 1 <= args.sessions <= 200
        or not 10 <= args.seconds <= 600
        or not 0 <= args.think <= 60
        or not 0 <= args.ramp < args.seconds / 2
    ):
        ap.error("sessions 1..200, seconds 10..600, think 0..60, ramp 0..seconds/2")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
