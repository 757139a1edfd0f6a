"""The transformers check of the largest configs the caps admit (tests/worst_inputs.py), as the
app runs it (kvcalc.measure.verify.verify_bounded: a child process with the hosted limits of
webui.hosted.verify_caps), and what it leaves in the server: this process's RSS before and
after, the child's wall time and its verdict.

    .venv/bin/python bench/verify_memory.py [--hosted]

Issue 22's target: each check finishes or is stopped within its limits, and the server's RSS
before and after differs by less than 50 MiB.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def rss_mib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosted", action="store_true", help="the hosted limits (30 s, 2 GiB)")
    args = ap.parse_args()
    if args.hosted:
        os.environ["KVLAB_HOSTED"] = "1"
    import worst_inputs as W

    from kvcalc.measure.verify import verify_bounded
    from webui.hosted import verify_caps

    caps = verify_caps()
    configs = {
        name: getattr(W, name)()
        for name in (
            "dense_at_caps",
            "dense_fits",
            "hybrid_at_caps",
            "hybrid_fits",
            "layer_types_at_caps",
            "moe_at_caps",
            "mla_at_caps",
            "mamba_at_caps",
        )
    }
    configs["paste_at_max_chars"] = json.loads(W.paste_at_max_chars())
    # The largest the check itself admits: 512 layers (MAX_CHECK_LAYERS), every width at its cap
    # or the most experts; these are built in the child, under its limits.
    from kvcalc.measure.verify import MAX_CHECK_LAYERS

    configs["dense_512_at_caps"] = {**W.dense_at_caps(), "num_hidden_layers": MAX_CHECK_LAYERS}
    configs["dense_512_fits"] = {**W.dense_fits(), "num_hidden_layers": MAX_CHECK_LAYERS}
    moe = W.moe_fits()
    configs["moe_512_fits"] = {**moe, "num_hidden_layers": MAX_CHECK_LAYERS}
    configs["llama_3.1_8b"] = W._real("llama-3.1-8b.json")
    gc.collect()
    start = rss_mib()
    print(
        f"limits: {caps['timeout_s']:g} s, {caps['memory_gib']:g} GiB; server RSS at start "
        f"{start:,.1f} MiB"
    )
    print(f"{'config':<22}{'seconds':>9}{'RSS after (MiB)':>17}  verdict")
    for name, cfg in configs.items():
        t = time.perf_counter()
        r = verify_bounded(cfg, timeout_s=caps["timeout_s"], memory_gib=caps["memory_gib"])
        dt = time.perf_counter() - t
        gc.collect()
        print(f"{name:<22}{dt:>9.2f}{rss_mib():>17,.1f}  {r.line[:90]}")
    print(f"server RSS kept: {rss_mib() - start:+,.1f} MiB")


if __name__ == "__main__":
    main()
