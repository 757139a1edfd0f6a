"""``python -m kvcalc simulate``: the serving simulator (kvcalc.sim) from the command line.

With --json it prints exactly the keys of ``kvcalc.sim.CLI_KEYS``; the text form adds the
setup and the other metrics. Kept apart from cli.py so that file only registers it.
"""

from __future__ import annotations

import argparse
import math

from .catalog import registry
from .hfconfig import checkpoint_format, load_config_file, spec_from_config
from .model import ModelSpec
from .sim import (
    CLI_KEYS,
    MAX_REQUESTS,
    MAX_TOKENS,
    Workload,
    estimated_steps,
    fixed,
    setup,
    simulate,
)
from .units import GiB, fmt_seconds
from .weight_bytes import Weights, weights_given, weights_in

__all__ = ["HELP", "add_arguments", "cmd_simulate", "CAPACITY_HELP", "add_capacity_arguments",
           "cmd_capacity"]


def _rate(text: str) -> float:
    """Requests per second: a number above 0 and at most 1,000,000, or inf (all at time 0)."""
    t = text.strip().lower()
    if t in ("inf", "infinity"):
        return math.inf
    try:
        v = float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of requests/s or inf, got "
                                         f"{text[:40]!r}") from None
    if not math.isfinite(v) or not 0 < v <= 1e6:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 1,000,000 requests/s, "
                                         f"or inf, got {text[:40]!r}")
    return v


def _share(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text[:40]!r}") from None
    if not math.isfinite(v) or not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 1, got {text[:40]!r}")
    return v


# A run the CLI takes: at about 6 us an estimated step (measured: 225,970 in 1.3 s), about half
# a minute at most (one command of 2.6e9 steps ran 85 minutes before this cap, issue 22 B9).
MAX_STEPS = 5_000_000

HELP = ("serve a workload: continuous batching on the KV pool (TTFT, TPOT, tokens/s, "
        "preemptions, which limit binds)")


def add_arguments(p, *, key, int_arg, path=str) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", type=key, help="registry key")
    src.add_argument("--config", metavar="PATH", type=path,
                     help="a Hugging Face config.json file")
    p.add_argument("--gpu", type=key, required=True, help="GPU key")
    p.add_argument("--requests", type=int_arg(1, MAX_REQUESTS), required=True)
    load = p.add_mutually_exclusive_group(required=True)
    load.add_argument("--rate", type=_rate, help="Poisson arrivals, requests/s (inf: all at "
                      "once, as vLLM's benchmark default)")
    load.add_argument("--users", type=int_arg(1, MAX_REQUESTS),
                      help="a closed loop: each user sends the next request when one ends")
    p.add_argument("--prompt-tokens", type=int_arg(1, MAX_TOKENS), required=True)
    p.add_argument("--output-tokens", type=int_arg(1, MAX_TOKENS), required=True)
    p.add_argument("--kv-dtype", default="bf16", choices=("bf16", "fp16", "fp8", "int8"))
    p.add_argument("--max-num-seqs", type=int_arg(1, 10**6), default=None,
                   help="default: vLLM's for the GPU")
    p.add_argument("--max-num-batched-tokens", type=int_arg(1, 10**7), default=None,
                   help="default: vLLM's for the GPU")
    p.add_argument("--tp", type=int_arg(1, 64), default=1, help="tensor parallel size")
    p.add_argument("--prefix-share", type=float, default=0.0,
                   help="fraction of each prompt shared by every request (0 to 1)")
    p.add_argument("--bw-share", type=_share, default=1.0,
                   help="achieved share of peak bandwidth (1.0 = ideal)")
    p.add_argument("--seed", type=int_arg(0, 2**31), default=0)
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _model(args) -> tuple[ModelSpec, Weights, str]:
    """(spec, weights in the checkpoint's format, name) from --model or --config. The
    simulator times prefill from the parameters, so a config must be one kvcalc counts."""
    if args.model:
        m = registry().model(args.model)
        return m.spec, m.weights(), m.name
    cfg = load_config_file(args.config)
    spec = spec_from_config(cfg, name=args.config)
    if spec.params is None:
        return spec, weights_given(0, "bf16"), spec.name  # setup() says why it cannot run
    wd, ed = checkpoint_format(cfg)
    return spec, weights_in(spec, "auto", wd, ed), spec.name


def cmd_simulate(args):
    spec, w, name = _model(args)
    gpu = registry().gpu(args.gpu)
    if not 0.0 <= args.prefix_share <= 1.0 or not math.isfinite(args.prefix_share):
        raise ValueError(f"--prefix-share must be between 0 and 1, got {args.prefix_share:g}")
    wl = Workload(requests=args.requests, prompt=fixed(args.prompt_tokens, "prompt tokens"),
                  output=fixed(args.output_tokens, "output tokens"), rate=args.rate,
                  users=args.users, prefix_share=args.prefix_share, seed=args.seed)
    s = setup(spec, w, total_bytes=gpu.memory_bytes, bandwidth_gbs=gpu.bandwidth_gbs,
              peak_tflops=gpu.peak_tflops(w.dtype), max_model_len=wl.longest,
              kv_dtype=args.kv_dtype, tp=args.tp, max_num_seqs=args.max_num_seqs,
              max_num_batched_tokens=args.max_num_batched_tokens, bw_share=args.bw_share,
              gpu_name=gpu.name)
    steps = estimated_steps(s, wl)
    if steps > MAX_STEPS:
        raise ValueError(f"this run would simulate about {steps:,} engine steps, more than the "
                         f"{MAX_STEPS:,} one command may take (about half a minute of work); "
                         "send fewer requests or shorter outputs, or pick a setup whose pool "
                         "holds more requests at once")
    r = simulate(s, wl, series=False)
    out = {k: getattr(r, k) for k in CLI_KEYS}
    load = (f"{args.users:,} users (closed loop)" if args.users is not None else
            "all at once" if args.rate == math.inf else f"Poisson {args.rate:g} requests/s")
    text = [
        f"{name} on {gpu.name}"
        + (f" x {args.tp} (TP)" if args.tp > 1 else "")
        + f", KV cache {args.kv_dtype.upper()}",
        f"  workload:   {args.requests:,} requests of {args.prompt_tokens:,} prompt + "
        f"{args.output_tokens:,} output tokens, {load}",
        f"  pool:       {s.num_blocks:,} blocks of {s.block_size} tokens "
        f"({s.kv_pool_bytes / GiB:,.2f} GiB per GPU); max_num_seqs {s.max_num_seqs:,}, "
        f"max_num_batched_tokens {s.max_num_batched_tokens:,}",
        f"  TTFT:       p50 {fmt_seconds(r.ttft_p50_s)}, p99 {fmt_seconds(r.ttft_p99_s)}",
        f"  TPOT:       p50 {fmt_seconds(r.tpot_p50_s)}, p99 {fmt_seconds(r.tpot_p99_s)}",
        f"  ITL:        p50 {fmt_seconds(r.itl_p50_s)}, p99 {fmt_seconds(r.itl_p99_s)}",
        f"  output:     {r.output_tokens_per_s:,.0f} tokens/s ({r.output_tokens_per_s_per_gpu:,.0f}"
        f" per GPU, {r.output_tokens_per_s_per_user:,.1f} per user) over "
        f"{r.duration_s:,.2f} s",
        f"  batch:      at most {r.max_batch:,} running; limited by {r.binding_limit}",
        f"  KV blocks:  {r.kv_utilization_mean:.0%} used on average, peak "
        f"{r.kv_utilization_peak:.0%}; {r.preemptions:,} preemptions; "
        f"{r.kv_wait_steps:,} steps with a request waiting for blocks; prefix hit rate "
        f"{r.prefix_hit_rate:.0%}",
    ]
    if r.ttft_p50_steady_s is not None:
        text.append(f"  TTFT after the warm-up ({r.warmup_requests:,} requests sent before the "
                    f"first finished left out): p50 {fmt_seconds(r.ttft_p50_steady_s)}, p99 "
                    f"{fmt_seconds(r.ttft_p99_steady_s)}")
    return out, text + [f"  note: {n}" for n in s.notes]


CAPACITY_HELP = ("logged vs running capacity: vLLM's start-up worst case, what a decoding "
                 "request holds, and the users at which the simulated pool starts to bind")


def add_capacity_arguments(p, *, key, int_arg) -> None:
    p.add_argument("--model", type=key, required=True, help="registry key")
    p.add_argument("--gpu", type=key, required=True, help="GPU key")
    p.add_argument("--prompt-tokens", type=int_arg(1, MAX_TOKENS), required=True)
    p.add_argument("--output-tokens", type=int_arg(1, MAX_TOKENS), required=True)
    p.add_argument("--kv-dtype", default="bf16", choices=("bf16", "fp16", "fp8", "int8"))
    p.add_argument("--max-num-seqs", type=int_arg(1, 10**6), default=None,
                   help="default: vLLM's for the GPU")
    p.add_argument("--max-num-batched-tokens", type=int_arg(1, 10**7), default=None,
                   help="default: vLLM's for the GPU")
    p.add_argument("--tp", type=int_arg(1, 64), default=1, help="tensor parallel size")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def cmd_capacity(args):
    from .capacity import running_capacity

    m = registry().model(args.model)
    gpu = registry().gpu(args.gpu)
    w = m.weights()
    s = setup(m.spec, w, total_bytes=gpu.memory_bytes, bandwidth_gbs=gpu.bandwidth_gbs,
              peak_tflops=gpu.peak_tflops(w.dtype),
              max_model_len=args.prompt_tokens + args.output_tokens, kv_dtype=args.kv_dtype,
              tp=args.tp, max_num_seqs=args.max_num_seqs,
              max_num_batched_tokens=args.max_num_batched_tokens, gpu_name=gpu.name)
    c = running_capacity(s, args.prompt_tokens, args.output_tokens, max_steps=MAX_STEPS)
    text = [f"{m.name} on {gpu.name}" + (f" x {args.tp} (TP)" if args.tp > 1 else "")
            + f", KV cache {args.kv_dtype.upper()}, requests of {args.prompt_tokens:,} + "
            f"{args.output_tokens:,} tokens"]
    text += [f"  {line}" for line in c.derivation().splitlines()]
    return c.to_dict(), text + [f"  note: {n}" for n in c.notes + s.notes]
