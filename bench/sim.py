"""Serving simulator speed: requests simulated per second on one core (kvcalc.perf.sim).

    .venv/bin/python bench/sim.py [--repeats 5]
    .venv/bin/python bench/sim.py --compare /tmp/previous   # a checkout beside this one

Target (issue 16): 1,000 requests in under 0.5 s, fast enough to follow a slider. Each case is
run ``repeats`` times; the best and the median wall time and the best CPU time (the process's:
what the machine's other load changes least) are printed with the run's own figures, so a
reader sees what was simulated.

The last cases are the serving frontier page's sweeps at a new input (issue 27: its first rerun
after an input change ran them all): for each of the page's three curves (the calibrated
estimate, the ideal bound, the FP8 overlay), webui.serving.frontier's work in kvcalc: where the
pool starts to bind (kvcalc.perf.capacity.running_capacity, a search of closed loops) and one run
per frontier_users point, for Llama 3.1 8B on an H100 with 512 + 128 tokens.

``--compare`` times the same cases with another checkout's kvcalc, in a process of its own,
case by case in turn with this one, so that the machine's other load falls on both alike.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CASE_NAMES = [
    "1,000 x 512+256, all at once, BF16 KV",
    "1,000 x 512+256, all at once, FP8 KV",
    "1,000 x 512+256, Poisson 20/s, BF16",
    "1,000 x 512+256, 64 users, BF16",
    "1,000 x 512+256, 1 user (worst: 256,000 steps)",
    "1,000 log-normal prompts (median 1,000), uniform outputs, 30/s, 50% shared prefix",
    "frontier sweep, calibrated estimate (512+128, 27 runs)",
    "frontier sweep, ideal bound",
    "frontier sweep, FP8 overlay",
]


def _cases():
    """(name, function running the case once, returning (requests, steps, what it gave))."""
    from kvcalc import get_gpu, get_model
    from kvcalc.cache.deployment import CacheFormat, Deployment
    from kvcalc.perf.calibration import CALIBRATED, IDEAL
    from kvcalc.perf.capacity import frontier_users, requests_for, running_capacity
    from kvcalc.perf.sim import Speed, Workload, fixed, lognormal, setup, simulate, uniform

    m = get_model("llama-3.1-8b")
    g = get_gpu("h100-sxm-80gb")
    w = m.weights()

    def on_gpu(longest, speed=None, **kw):
        dep = Deployment(spec=m.spec, gpu=g, weights=w, **kw)
        return setup(dep, longest, Speed.of(g, "bf16", speed))

    def one(load, kw):
        spec = dict(requests=1000, prompt=fixed(512), output=fixed(256), seed=0)
        spec.update(load)
        wl = Workload(**spec)
        s = on_gpu(wl.longest, **kw)

        def run():
            r = simulate(s, wl)
            return (
                wl.requests,
                r.steps,
                f"{r.output_tokens_per_s:,.0f} output tokens/s, TTFT p50 "
                f"{r.ttft_p50_s * 1e3:,.1f} ms, TPOT p50 {r.tpot_p50_s * 1e3:,.2f} ms, "
                f"{r.preemptions} preemptions, limited by {r.binding_limit}",
            )

        return run

    def sweep(**kw):
        """webui.serving.frontier's simulations for the page's inputs (its default lengths at
        an output of 128): the onset search, then every frontier point not yet run."""
        p, o = fixed(512, "prompt tokens"), fixed(128, "output tokens")
        s = on_gpu(p.hi + o.hi, **kw)

        def run():
            cap = running_capacity(s, p, o, max_steps=300_000)
            known = dict(cap.runs)
            results = list(known.values()) + [
                simulate(
                    s,
                    Workload(requests=requests_for(u), prompt=p, output=o, users=u, seed=0),
                    series=False,
                )
                for u in frontier_users(cap)
                if u not in known
            ]
            best = max(r.output_tokens_per_s for r in results)
            return (
                sum(r.requests for r in results),
                sum(r.steps for r in results),
                f"{len(results)} runs, onset {cap.onset_users} users, best "
                f"{best:,.0f} output tokens/s",
            )

        return run

    loads = [
        (dict(rate=math.inf), {}),
        (dict(rate=math.inf), {"cache": CacheFormat(kv_dtype="fp8")}),
        (dict(rate=20.0), {}),
        (dict(users=64), {}),
        (dict(users=1), {}),
        (
            dict(
                rate=30.0,
                prompt=lognormal(1000, 1.0, 8000),
                output=uniform(10, 500),
                prefix_share=0.5,
            ),
            {},
        ),
    ]
    runs = [one(load, kw) for load, kw in loads]
    runs += [
        sweep(speed=CALIBRATED),
        sweep(speed=IDEAL),
        sweep(speed=CALIBRATED, cache=CacheFormat(kv_dtype="fp8")),
    ]
    return list(zip(CASE_NAMES, runs))


def timings(case: int, repeats: int) -> dict:
    """One case ``repeats`` times: its wall times and what it simulated."""
    _, run = _cases()[case]
    times, cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        requests, steps, what = run()
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return dict(times=times, cpu=cpu, requests=requests, steps=steps, what=what)


def _timings_of(root: Path, case: int, repeats: int) -> dict:
    """``timings`` with another checkout's kvcalc (its folder first on the path)."""
    code = (
        f"import json, sys; sys.path.insert(0, {str(root)!r}); "
        f"sys.path.insert(1, {str(Path(__file__).parent)!r}); import sim; "
        f"print(json.dumps(sim.timings({case}, {repeats})))"
    )
    got = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    return json.loads(got.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(
        "--compare",
        metavar="CHECKOUT",
        help="another checkout (e.g. the previous commit): the same cases with its kvcalc",
    )
    args = ap.parse_args()
    if args.compare and not (Path(args.compare) / "kvcalc").is_dir():
        ap.error(f"{args.compare} has no kvcalc: give the folder of a checkout")
    print(
        f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}, load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; Llama 3.1 8B on H100 SXM; best "
        f"and median of {args.repeats} runs"
        + ("; this checkout, then the other" if args.compare else "")
    )
    cols = f"{'best s':>8}{'median s':>10}{'CPU s':>8}{'requests/s':>12}"
    print(f"{'case':<82}{cols}{cols if args.compare else ''}{'steps':>9}")
    roots = [ROOT] + ([Path(args.compare).resolve()] if args.compare else [])
    for i, name in enumerate(CASE_NAMES):
        got = [_timings_of(root, i, args.repeats) for root in roots]
        row = ""
        for g in got:
            best = min(g["times"])
            row += (
                f"{best:>8.3f}{statistics.median(g['times']):>10.3f}{min(g['cpu']):>8.3f}"
                f"{g['requests'] / best:>12,.0f}"
            )
        print(f"{name:<82}{row}{got[0]['steps']:>9,}")
        print(f"    -> {got[0]['what']}")
        if len(got) > 1 and (got[1]["steps"], got[1]["what"]) != (got[0]["steps"], got[0]["what"]):
            print(f"    -> the other: {got[1]['steps']:,} steps, {got[1]['what']}")


if __name__ == "__main__":
    main()
