"""Every CLI output of a matrix of models, GPUs and settings, from this tree and from another
commit, compared: the proof that a refactor changed no number, flag or --json key.

    python bench/outputs.py --against c8f5173      # run both trees, print the differences
    python bench/outputs.py --write out.json       # this tree only

The other commit is exported with `git archive` into a temporary folder and run there with the
same interpreter. Each case runs in-process (kvcalc.cli.main), its stdout and exit status kept.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MODELS = [
    "llama-3.1-8b",
    "llama-3.1-70b",
    "mistral-7b-v0.1",
    "mixtral-8x7b",
    "qwen3-235b-a22b",
    "gemma-2-9b",
    "gemma-3-27b",
    "deepseek-v3",
    "gpt-oss-20b",
    "gpt-oss-120b",
    "gpt2",
    "phi-3-mini-4k",
    "qwen3-next-80b-a3b",
    "jamba-v0.1",
    "falcon-7b",
]
LENS = "--prompt-tokens 1000 --output-tokens 200"
GPUS = ["h100-sxm-80gb", "a100-40gb", "l4", "mi300x", "t4"]


def cases() -> list[str]:
    out = []
    for m in MODELS:
        out += [
            f"kv --model {m} --context 8192 --batch 4 --json",
            f"kv --model {m} --context 8192 --kv-dtype fp8 --tp 2 --json",
            f"kv --model {m} --context 32768",
            f"budget --model {m} --gpu h100-sxm-80gb --context 8192 --json",
            f"budget --model {m} --gpu h100-sxm-80gb --context 8192 --tp 4 --kv-dtype fp8 --json",
            f"budget --model {m} --gpu a100-80gb --context 4096 --engine trtllm --json",
            f"budget --model {m} --gpu a100-80gb --context 4096 --engine ideal --json",
            f"budget --model {m} --gpu h200-141gb --context 16384 --pp 2 --tp 2 "
            "--vllm-version 0.10.0 --max-num-seqs 64 --json",
            f"budget --model {m} --gpu h100-sxm-80gb --context 8192",
            f"step-time --model {m} --gpu h100-sxm-80gb --context 4096 --batch 8 --json",
            f"step-time --model {m} --gpu a100-80gb --context 4096 --batch 1 --engine vllm@0.12.0"
            " --tp 2 --json",
            f"prefill --model {m} --gpu h100-sxm-80gb --prompt-tokens 2048 --json",
            f"vllm --model {m} --available-kv-gib 20 --max-model-len 8192 --json",
            f"vllm --model {m} --gpu h100-sxm-80gb --available-kv-gib 12 --max-model-len 8192 "
            "--tp 2 --vllm-version 0.11.0 --json",
            f"vllm --model {m} --available-kv-gib 30 --max-model-len 8192",
            f"capacity --model {m} --gpu h100-sxm-80gb --prompt-tokens 1000 --output-tokens 200"
            " --json",
            f"offload --model {m} --gpu h100-sxm-80gb --prefix-tokens 4096 --json",
            f"simulate --model {m} --gpu h100-sxm-80gb --requests 40 --rate 4 --seed 1 {LENS}"
            " --json",
            f"simulate --model {m} --gpu h200-141gb --tp 8 --users 32 --requests 64 --seed 5 "
            "--prompt-dist uniform:200:3000 --output-dist uniform:50:400 --json",
        ]
    for g in GPUS:
        out += [
            f"budget --model llama-3.1-8b --gpu {g} --context 8192 --json",
            f"step-time --model llama-3.1-8b --gpu {g} --context 8192 --batch 16 --json",
            f"simulate --model llama-3.1-8b --gpu {g} --users 16 --requests 30 --seed 2 {LENS}"
            " --json",
        ]
    out += [
        "simulate --model llama-3.1-70b --gpu h100-sxm-80gb --tp 4 --requests 60 --rate 8"
        f" --scheduler prefill-first --seed 3 {LENS} --json",
        "simulate --model qwen3-235b-a22b --gpu h200-141gb --tp 8 --ep 8 --attention-dp 2"
        f" --users 16 --requests 30 --seed 4 {LENS} --json",
        "simulate --model llama-3.1-8b --gpu h100-sxm-80gb --requests 50 --rate 10"
        f" --prefix-share 0.5 --kv-dtype fp8 --engine sglang@0.5.6 {LENS} --json",
        f"simulate --model llama-3.1-8b --gpu l4 --rate 2 --requests 30 --ideal {LENS} --json",
        "simulate --model llama-3.1-8b --gpu h100-sxm-80gb --rate 20 --requests 200 "
        "--lengths sharegpt --seed 7 --json",
        f"simulate --model llama-3.1-8b --gpu l4 --rate 2 --requests 30 --kv-pool-gib 4 {LENS}"
        " --json",
        "simulate --model deepseek-v3 --gpu h200-141gb --tp 8 --requests 20 --engine"
        f" trtllm@1.0 --rate 1 {LENS} --json",
        "budget --model llama-3.1-8b --vram-gib 24 --context 8192 --weight-bits 4 --json",
        "budget --model llama-3.1-8b --gpu h100-sxm-80gb --context 8192 --gpu-mem-util 0.8"
        " --reserve-gib 3 --block-size 32 --max-num-batched-tokens 4096 --json",
        "budget --model qwen3-8b --gpu h100-sxm-80gb --context 8192 --speculative-config"
        ' {"method":"ngram","num_speculative_tokens":4} --json',
        "vllm --model qwen3-next-80b-a3b --gpu h200-141gb --available-kv-gib 40 "
        "--max-model-len 32768 --mamba-ssm-cache-dtype float32 --enable-prefix-caching --json",
        "vllm --model deepseek-v3 --gpu h200-141gb --available-kv-gib 40 --tp 8 "
        "--max-model-len 32768 --kv-dtype fp8 --num-draft-layers 1 --json",
        "passes --new-tokens 100 --prompt-tokens 500 --json",
        "table --json",
        "models --json",
        "gpus --json",
        "tour --model llama-3.1-8b --gpu h100-sxm-80gb --json",
        "tour --model deepseek-v3 --gpu h200-141gb --json",
        "tour --model qwen3-next-80b-a3b --gpu a100-80gb",
    ]
    return out


def run_here() -> dict:
    sys.path.insert(0, str(Path.cwd()))
    from kvcalc.cli import main

    results = {}
    for case in cases():
        argv = case.split(" ")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(argv)
            except SystemExit as exc:
                rc = exc.code
        results[case] = {"rc": rc, "out": out.getvalue(), "err": err.getvalue()}
    return results


def run_at(rev: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--write", "-"],
            cwd=tmp,
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(proc.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", help="a commit to compare this tree with")
    ap.add_argument("--write", help="write this tree's outputs to a file ('-': stdout)")
    args = ap.parse_args()
    here = run_here()
    if args.write:
        text = json.dumps(here, indent=1, sort_keys=True)
        if args.write == "-":
            sys.stdout.write(text)
        else:
            Path(args.write).write_text(text)
    if not args.against:
        return 0
    there = run_at(args.against)
    differ = [c for c in here if here[c] != there.get(c)]
    failed = [c for c in here if here[c]["rc"] not in (0, None)]
    print(
        f"{len(here)} cases; {len(differ)} differ from {args.against}; "
        f"{len(failed)} exit non-zero here"
    )
    for c in differ:
        print(f"DIFFERS: {c}")
        a, b = there.get(c, {}), here[c]
        for key in ("rc", "out", "err"):
            if a.get(key) != b.get(key):
                print(f"  {key}: {str(a.get(key))[:300]!r}\n   -> {str(b.get(key))[:300]!r}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
