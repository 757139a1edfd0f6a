"""Serving simulator speed: requests simulated per second on one core (kvcalc.perf.sim).

    .venv/bin/python bench/sim.py [--repeats 5]

Target (issue 16): 1,000 requests in under 0.5 s, fast enough to follow a slider. Each case is
run ``repeats`` times; the best and the median wall time are printed with the run's own figures,
so a reader sees what was simulated.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kvcalc import get_gpu, get_model  # noqa: E402
from kvcalc.perf.sim import Workload, fixed, lognormal, setup, simulate, uniform  # noqa: E402

CASES = [
    ("1,000 x 512+256, all at once, BF16 KV", dict(rate=math.inf), {}),
    ("1,000 x 512+256, all at once, FP8 KV", dict(rate=math.inf), {"kv_dtype": "fp8"}),
    ("1,000 x 512+256, Poisson 20/s, BF16", dict(rate=20.0), {}),
    ("1,000 x 512+256, 64 users, BF16", dict(users=64), {}),
    ("1,000 x 512+256, 1 user (worst: 256,000 steps)", dict(users=1), {}),
    (
        "1,000 log-normal prompts (median 1,000), uniform outputs, 30/s, 50% shared prefix",
        dict(
            rate=30.0, prompt=lognormal(1000, 1.0, 8000), output=uniform(10, 500), prefix_share=0.5
        ),
        {},
    ),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    m = get_model("llama-3.1-8b")
    g = get_gpu("h100-sxm-80gb")
    w = m.weights()
    print(
        f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}; "
        f"{m.name} on {g.name}; best and median of {args.repeats} runs"
    )
    print(f"{'case':<82}{'best s':>8}{'median s':>10}{'requests/s':>12}{'steps':>8}")
    for name, load, kw in CASES:
        spec = dict(requests=1000, prompt=fixed(512), output=fixed(256), seed=0)
        spec.update(load)
        wl = Workload(**spec)
        s = setup(
            m.spec,
            w,
            total_bytes=g.memory_bytes,
            bandwidth_gbs=g.bandwidth_gbs,
            peak_tflops=g.bf16_tflops,
            max_model_len=wl.longest,
            gpu_name=g.name,
            **kw,
        )
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            r = simulate(s, wl)
            times.append(time.perf_counter() - t)
        best = min(times)
        print(
            f"{name:<82}{best:>8.3f}{statistics.median(times):>10.3f}"
            f"{wl.requests / best:>12,.0f}{r.steps:>8,}"
        )
        print(
            f"    -> {r.output_tokens_per_s:,.0f} output tokens/s, TTFT p50 "
            f"{r.ttft_p50_s * 1e3:,.1f} ms, TPOT p50 {r.tpot_p50_s * 1e3:,.2f} ms, "
            f"{r.preemptions} preemptions, limited by {r.binding_limit}"
        )


if __name__ == "__main__":
    main()
