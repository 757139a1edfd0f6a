"""``python -m kvcalc simulate``: the serving simulator (kvcalc.perf.sim) from the command line.

With --json it prints exactly the keys of ``kvcalc.perf.sim.CLI_KEYS``; the text form adds the
setup and the other metrics. Kept apart from commands.py so that file only registers it.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, replace

from ..cache.weight_bytes import (
    MAX_WEIGHT_BITS,
    MIN_WEIGHT_BITS,
    Weights,
    weights_at_bits,
    weights_given,
    weights_in,
)
from ..config.catalog import registry
from ..config.hfconfig import checkpoint_format, load_config_file, spec_from_config
from ..core.arith import cdiv
from ..core.dtypes import WEIGHT_DTYPES
from ..core.model import ModelSpec
from ..core.units import GiB, fmt_seconds
from ..engines.budget import DEFAULT_RESERVE_BYTES
from ..perf.calibration import (
    API_OVERHEAD_BY_STACK,
    STACK_NAMES,
    StepModel,
    error_band_text,
    step_model,
)
from ..perf.sim import (
    CLI_KEYS,
    MAX_REQUESTS,
    MAX_TOKENS,
    Dist,
    Workload,
    estimated_steps,
    fixed,
    lognormal,
    setup,
    simulate,
    uniform,
)

__all__ = [
    "HELP",
    "add_arguments",
    "cmd_simulate",
    "CAPACITY_HELP",
    "add_capacity_arguments",
    "cmd_capacity",
]


def _rate(text: str) -> float:
    """Requests per second: a number above 0 and at most 1,000,000, or inf (all at time 0)."""
    t = text.strip().lower()
    if t in ("inf", "infinity"):
        return math.inf
    try:
        v = float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of requests/s or inf, got {text[:40]!r}"
        ) from None
    if not math.isfinite(v) or not 0 < v <= 1e6:
        raise argparse.ArgumentTypeError(
            f"must be above 0 and at most 1,000,000 requests/s, or inf, got {text[:40]!r}"
        )
    return v


def _num(x: float) -> str:
    return f"{x:,.0f}" if x == int(x) else f"{x:g}"


def _number(what: str, lo: float, hi: float, unit: str = "", *, lo_open: bool = False):
    """An argparse type: a finite number in [lo, hi] (above lo with ``lo_open``), in ``unit``;
    the message says what to type."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a number{' of ' + what if what else ''}, got {text[:40]!r}"
            ) from None
        if not math.isfinite(v) or not (lo < v if lo_open else lo <= v) or v > hi:
            raise argparse.ArgumentTypeError(
                f"must be {'above' if lo_open else 'at least'} {_num(lo)} and at most "
                f"{_num(hi)}{' ' + unit if unit else ''}, got {text[:40]!r}"
            )
        return v

    return parse


_share = _number("", 0.0, 1.0, lo_open=True)


# A run the CLI takes: at about 6 us an estimated step (measured: 225,970 in 1.3 s), about half
# a minute at most (one command of 2.6e9 steps ran 85 minutes before this cap, issue 22 B9).
MAX_STEPS = 5_000_000

HELP = (
    "serve a workload: continuous batching on the KV pool (TTFT, TPOT, tokens/s, "
    "preemptions, which limit binds)"
)


# ShareGPT as vLLM's and SGLang's benchmarks sample it (prompts of 4 to 1,024 tokens, outputs of
# at least 4): log-normal, sigma 1 each (a heavy tail: the published mean end-to-end latency is
# 1.6x the median), medians set so that the clipped means are the corpus's own, 224 prompt and
# 190 output tokens per request (sglang-h200-datacrunch.yaml: 269,081 / 1,200 and
# 226,901 / 1,200 tokens of Llama 3's tokenizer).
SHAREGPT = {"prompt": "lognormal:145:1:1024:4", "output": "lognormal:120:1:1024:4"}
LENGTH_PRESETS = {"sharegpt": SHAREGPT}


def dist_arg(text: str, what: str = "length") -> Dist:
    """A length distribution: 'fixed:N', 'uniform:LO:HI' or 'lognormal:MEDIAN:SIGMA:CLIP[:LO]'
    (tokens; a bare number is fixed)."""
    parts = text.strip().lower().split(":")
    kind, nums = parts[0], parts[1:]
    try:
        if len(parts) == 1:
            return fixed(int(parts[0]), what)
        if kind == "fixed" and len(nums) == 1:
            return fixed(int(nums[0]), what)
        if kind == "uniform" and len(nums) == 2:
            return uniform(int(nums[0]), int(nums[1]), what)
        if kind == "lognormal" and len(nums) in (3, 4):
            lo = int(nums[3]) if len(nums) == 4 else 1
            return lognormal(float(nums[0]), float(nums[1]), int(nums[2]), lo=lo, what=what)
    except ValueError as exc:
        if "invalid literal" not in str(exc) and "could not convert" not in str(exc):
            raise argparse.ArgumentTypeError(str(exc)) from None
    raise argparse.ArgumentTypeError(
        f"expected fixed:N, uniform:LO:HI or lognormal:MEDIAN:SIGMA:CLIP[:LO] (tokens), got "
        f"{text[:60]!r}"
    )


_ms = _number("milliseconds", 0.0, 10_000.0, "ms")
_us = _number("microseconds", 0.0, 10_000_000.0, "µs")


_gib = _number("GiB", 0.0, float(2**20), "GiB")


_bits = _number("bits", MIN_WEIGHT_BITS, MAX_WEIGHT_BITS, "bits per weight")


def add_arguments(p, *, key, int_arg, path=str) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", type=key, help="registry key")
    src.add_argument("--config", metavar="PATH", type=path, help="a Hugging Face config.json file")
    p.add_argument("--gpu", type=key, required=True, help="GPU key")
    p.add_argument("--requests", type=int_arg(1, MAX_REQUESTS), required=True)
    load = p.add_mutually_exclusive_group(required=True)
    load.add_argument(
        "--rate",
        type=_rate,
        help="Poisson arrivals, requests/s (inf: all at once, as vLLM's benchmark default)",
    )
    load.add_argument(
        "--users",
        type=int_arg(1, MAX_REQUESTS),
        help="a closed loop: each user sends the next request when one ends",
    )
    lengths = p.add_argument_group(
        "request lengths (tokens): a fixed prompt and output, a distribution for each, or a preset"
    )
    lengths.add_argument("--prompt-tokens", type=int_arg(1, MAX_TOKENS))
    lengths.add_argument("--output-tokens", type=int_arg(1, MAX_TOKENS))
    lengths.add_argument(
        "--prompt-dist",
        type=lambda s: dist_arg(s, "prompt tokens"),
        metavar="SPEC",
        help="fixed:N, uniform:LO:HI or lognormal:MEDIAN:SIGMA:CLIP[:LO]",
    )
    lengths.add_argument(
        "--output-dist",
        type=lambda s: dist_arg(s, "output tokens"),
        metavar="SPEC",
        help="as --prompt-dist",
    )
    lengths.add_argument(
        "--lengths",
        choices=tuple(LENGTH_PRESETS),
        help="a preset for both: sharegpt (log-normal, means 224 prompt and "
        "190 output tokens, each clipped to 4-1,024)",
    )
    p.add_argument("--kv-dtype", default="bf16", choices=("bf16", "fp16", "fp8", "int8"))
    w = p.add_mutually_exclusive_group()
    w.add_argument(
        "--weight-dtype",
        choices=("auto",) + WEIGHT_DTYPES,
        default="auto",
        help="format of the weights (auto: the checkpoint's own)",
    )
    w.add_argument(
        "--weights-gib", type=_gib, help="weights of the whole model, GiB (read whole every step)"
    )
    w.add_argument(
        "--weight-bits",
        type=_bits,
        default=None,
        help="bits per weight of a quantised checkpoint, scales included (GGUF "
        "Q4_K_M: about 4.84); it computes in 16 bits",
    )
    p.add_argument(
        "--max-num-seqs", type=int_arg(1, 10**6), default=None, help="default: vLLM's for the GPU"
    )
    p.add_argument(
        "--max-num-batched-tokens",
        type=int_arg(1, 10**7),
        default=None,
        help="default: vLLM's for the GPU",
    )
    p.add_argument("--tp", type=int_arg(1, 64), default=1, help="tensor parallel size")
    p.add_argument(
        "--prefix-share",
        type=float,
        default=0.0,
        help="fraction of each prompt shared by every request (0 to 1)",
    )
    pool = p.add_argument_group("the KV pool")
    pool.add_argument(
        "--gpu-memory-utilization",
        "--gpu-mem-util",
        dest="gpu_mem_util",
        type=_share,
        default=None,
        help="vLLM's share of total memory (default: vLLM's own)",
    )
    pool.add_argument(
        "--reserve-gib",
        type=_gib,
        default=None,
        help="activations, CUDA graphs and non-torch memory (default 2 GiB)",
    )
    pool.add_argument(
        "--kv-pool-gib",
        type=_gib,
        default=None,
        help="the pool's size per GPU instead of vLLM's arithmetic",
    )
    pool.add_argument(
        "--kv-free-fraction",
        type=_share,
        default=None,
        help="TensorRT-LLM's kv_cache_free_gpu_mem_fraction: the pool is this "
        "share of the memory left after the weights and the reserve",
    )
    speed = p.add_argument_group(
        "the step model (default: the calibrated estimate, kvcalc.perf.calibration; each flag "
        "replaces one fitted coefficient)"
    )
    speed.add_argument(
        "--ideal",
        action="store_true",
        help="the ideal bound instead: full bandwidth, MFU 0.5, nothing added",
    )
    speed.add_argument(
        "--bw-share",
        type=_share,
        default=None,
        help="achieved share of peak bandwidth (1.0 = ideal)",
    )
    speed.add_argument(
        "--step-overhead-ms", type=_ms, default=None, help="fixed cost of each engine step, ms"
    )
    speed.add_argument(
        "--mfu",
        type=_share,
        default=None,
        help="share of the dense peak the matrix multiplies reach",
    )
    speed.add_argument(
        "--allreduce-latency-us",
        type=_us,
        default=None,
        help="latency of one tensor-parallel all-reduce, us (0 to 10,000)",
    )
    speed.add_argument(
        "--api-overhead-ms",
        type=_ms,
        default=None,
        help="a serving stack's time per request before the engine sees it "
        "(HTTP, tokenizer, template), ms; 0 for a benchmark that calls "
        "the engine directly",
    )
    speed.add_argument(
        "--serving-stack",
        choices=sorted(API_OVERHEAD_BY_STACK),
        default=None,
        help="the API overhead fitted on that engine's own served runs, in place "
        "of the pooled one (kvcalc.perf.calibration.API_OVERHEAD_BY_STACK)",
    )
    speed.add_argument(
        "--direct",
        action="store_true",
        help="the client calls the engine in its own process (vLLM's LLM class, "
        "trtllm-bench, a static batch): no serving stack, no API overhead",
    )
    p.add_argument("--seed", type=int_arg(0, 2**31), default=0)
    p.add_argument("--json", action="store_true", help="print one JSON object")


@dataclass(frozen=True)
class _ConfigModel:
    """A config.json given with --config, answering what cmd_simulate asks of a registry
    model: its spec, name and weights in a format. The simulator times prefill from the
    parameters, so a config kvcalc cannot count gets weights of 0 B and setup() says why."""

    spec: ModelSpec
    name: str
    weight_dtype: str
    expert_weight_dtype: str | None

    def weights(self, dtype: str | None = None, *, half: str = "bf16") -> Weights:
        if self.spec.params is None:
            return weights_given(0, "bf16")
        return weights_in(self.spec, dtype, self.weight_dtype, self.expert_weight_dtype, half=half)


def _model(args):
    """The registry model of --model, or the config.json of --config."""
    if args.model:
        return registry().model(args.model)
    cfg = load_config_file(args.config)
    spec = spec_from_config(cfg, name=args.config)
    wd, ed = checkpoint_format(cfg)
    return _ConfigModel(spec=spec, name=spec.name, weight_dtype=wd, expert_weight_dtype=ed)


def _lengths(args) -> tuple[Dist, Dist]:
    """The prompt and output distributions from exactly one way of giving each."""
    if args.lengths:
        if any(
            v is not None
            for v in (args.prompt_tokens, args.output_tokens, args.prompt_dist, args.output_dist)
        ):
            raise ValueError(
                "--lengths sets both the prompt and the output; leave out "
                "--prompt-tokens, --output-tokens, --prompt-dist and --output-dist"
            )
        preset = LENGTH_PRESETS[args.lengths]
        return (
            dist_arg(preset["prompt"], "prompt tokens"),
            dist_arg(preset["output"], "output tokens"),
        )
    out = []
    for what, n, d in (
        ("prompt", args.prompt_tokens, args.prompt_dist),
        ("output", args.output_tokens, args.output_dist),
    ):
        if (n is None) == (d is None):
            raise ValueError(
                f"give the {what} lengths once: --{what}-tokens N or "
                f"--{what}-dist SPEC (or --lengths sharegpt for both)"
            )
        out.append(fixed(n, f"{what} tokens") if d is None else d)
    return out[0], out[1]


def speed_from_args(args) -> StepModel:
    """The step model the flags ask for: the calibrated estimate unless --ideal, with each
    coefficient given in place of its fitted value."""

    def ms(v):
        return None if v is None else v / 1e3

    return step_model(
        ideal=args.ideal,
        bw_share=args.bw_share,
        step_overhead_s=ms(args.step_overhead_ms),
        mfu=args.mfu,
        allreduce_latency_s=(
            None if args.allreduce_latency_us is None else args.allreduce_latency_us / 1e6
        ),
        api_overhead_s=ms(args.api_overhead_ms),
        stack=args.serving_stack,
    )


def cmd_simulate(args):
    m = _model(args)
    gpu = registry().gpu(args.gpu)
    if not 0.0 <= args.prefix_share <= 1.0 or not math.isfinite(args.prefix_share):
        raise ValueError(f"--prefix-share must be between 0 and 1, got {args.prefix_share:g}")
    prompt, output = _lengths(args)
    wl = Workload(
        requests=args.requests,
        prompt=prompt,
        output=output,
        rate=args.rate,
        users=args.users,
        prefix_share=args.prefix_share,
        seed=args.seed,
    )
    if args.serving_stack and (args.direct or args.api_overhead_ms is not None):
        raise ValueError(
            f"--serving-stack gives the API overhead; "
            f"{'--direct' if args.direct else '--api-overhead-ms'} does too: "
            "give one of them"
        )
    speed = speed_from_args(args)
    w = (
        m.weights(args.weight_dtype, half=gpu.half)
        if args.weight_bits is None
        else weights_at_bits(m.spec, args.weight_bits, half=gpu.half)
    )
    pool = {}
    if args.reserve_gib is not None:
        pool["reserve_bytes"] = round(args.reserve_gib * GiB)
    given = [
        f
        for f, v in (
            ("--gpu-memory-utilization", args.gpu_mem_util),
            ("--kv-pool-gib", args.kv_pool_gib),
            ("--kv-free-fraction", args.kv_free_fraction),
        )
        if v is not None
    ]
    if len(given) > 1:
        raise ValueError(f"{' and '.join(given)} each size the pool; give one of them")
    if args.kv_pool_gib is not None:
        pool["kv_pool_bytes"] = round(args.kv_pool_gib * GiB)
    if args.kv_free_fraction is not None:
        # TensorRT-LLM: a fraction of what is free once the weights (and the runtime's own
        # memory, the reserve) are in, not of the total as vLLM takes it.
        wb = w.bytes if args.weights_gib is None else round(args.weights_gib * GiB)
        free = (
            gpu.memory_bytes - cdiv(wb, args.tp) - pool.get("reserve_bytes", DEFAULT_RESERVE_BYTES)
        )
        if free <= 0:
            raise ValueError(
                f"{m.name}'s weights and the reserve leave no free memory on "
                f"{gpu.name} at tensor parallel {args.tp}"
            )
        pool["kv_pool_bytes"] = int(args.kv_free_fraction * free)
        args.gpu_mem_util = 1.0  # the reserve is then what is left of the whole memory
    # --direct: the same step model, but no serving stack between client and engine.
    engine = replace(speed, api_overhead_s=0.0) if args.direct else speed
    s = setup(
        m.spec,
        w,
        total_bytes=gpu.memory_bytes,
        bandwidth_gbs=gpu.bandwidth_gbs,
        peak_tflops=gpu.peak_tflops(w.dtype),
        max_model_len=wl.longest,
        kv_dtype=args.kv_dtype,
        tp=args.tp,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        gpu_name=gpu.name,
        gpu_mem_util=args.gpu_mem_util,
        speed=engine,
        tp_link_gbs=gpu.tp_link_gbs,
        weights_bytes=(None if args.weights_gib is None else round(args.weights_gib * GiB)),
        **pool,
    )
    steps = estimated_steps(s, wl)
    if steps > MAX_STEPS:
        raise ValueError(
            f"this run would simulate about {steps:,} engine steps, more than the "
            f"{MAX_STEPS:,} one command may take (about half a minute of work); "
            "send fewer requests or shorter outputs, or pick a setup whose pool "
            "holds more requests at once"
        )
    r = simulate(s, wl, series=False)
    out = {k: getattr(r, k) for k in CLI_KEYS}
    out["estimate"] = speed.name
    out["step_model"] = speed.to_dict()
    band = error_band_text() if speed.is_calibrated else None
    out["error_band"] = band
    load = (
        f"{args.users:,} users (closed loop)"
        if args.users is not None
        else "all at once"
        if args.rate == math.inf
        else f"Poisson {args.rate:g} requests/s"
    )
    wfmt = (
        f"weights {args.weights_gib:g} GiB as given"
        if args.weights_gib is not None
        else f"weights {args.weight_bits:g} bits each"
        if args.weight_bits is not None
        else f"weights {w.dtype.upper()}"
    )
    text = [
        f"{m.name} on {gpu.name}"
        + (f" x {args.tp} (TP)" if args.tp > 1 else "")
        + f", {wfmt}, KV cache {args.kv_dtype.upper()}",
        f"  workload:   {args.requests:,} requests of {prompt.describe()} prompt + "
        f"{output.describe()} output tokens, {load}",
        f"  pool:       {s.num_blocks:,} blocks of {s.block_size} tokens "
        f"({s.kv_pool_bytes / GiB:,.2f} GiB per GPU); max_num_seqs {s.max_num_seqs:,}, "
        f"max_num_batched_tokens {s.max_num_batched_tokens:,}",
        f"  speed:      the {speed.name}: {_speed_text(engine, args.tp)}"
        + (" (called directly)" if args.direct else ""),
        f"  TTFT:       p50 {fmt_seconds(r.ttft_p50_s)}, mean {fmt_seconds(r.ttft_mean_s)}, "
        f"p99 {fmt_seconds(r.ttft_p99_s)}",
        f"  TPOT:       p50 {fmt_seconds(r.tpot_p50_s)}, p99 {fmt_seconds(r.tpot_p99_s)}",
        f"  ITL:        p50 {fmt_seconds(r.itl_p50_s)}, p99 {fmt_seconds(r.itl_p99_s)}",
        f"  E2EL:       p50 {fmt_seconds(r.e2el_p50_s)} (end-to-end latency of a request)",
        f"  output:     {r.output_tokens_per_s:,.0f} tokens/s ({r.output_tokens_per_s_per_gpu:,.0f}"
        f" per GPU, {r.output_tokens_per_s_per_user:,.1f} per user), "
        f"{r.request_throughput:,.2f} requests/s over {r.duration_s:,.2f} s",
        f"  batch:      at most {r.max_batch:,} running; limited by {r.binding_limit}",
        f"  KV blocks:  {r.kv_utilization_mean:.0%} used on average, peak "
        f"{r.kv_utilization_peak:.0%}; {r.preemptions:,} preemptions; "
        f"{r.kv_wait_steps:,} steps with a request waiting for blocks; prefix hit rate "
        f"{r.prefix_hit_rate:.0%}",
    ]
    if r.ttft_p50_steady_s is not None:
        text.append(
            f"  TTFT after the warm-up ({r.warmup_requests:,} requests sent before the "
            f"first finished left out): p50 {fmt_seconds(r.ttft_p50_steady_s)}, p99 "
            f"{fmt_seconds(r.ttft_p99_steady_s)}"
        )
    if band:
        text.append(f"  error band: {band}")
    return out, text + [f"  note: {n}" for n in s.notes]


def _speed_text(speed: StepModel, tp: int) -> str:
    parts = [
        f"bandwidth share {speed.bw_share:g}",
        f"MFU {speed.mfu:g}",
        f"step overhead {speed.step_overhead_s * 1e3:g} ms",
    ]
    if tp > 1:
        parts.append(
            f"all-reduce latency {speed.allreduce_latency_s * 1e6:g} us"
            if speed.allreduce
            else "no all-reduce time"
        )
    parts.append(
        f"API overhead {speed.api_overhead_s * 1e3:g} ms"
        + (f" ({STACK_NAMES[speed.stack]}'s serving stack)" if speed.stack else "")
    )
    return ", ".join(parts)


CAPACITY_HELP = (
    "logged vs running capacity: vLLM's start-up worst case, what a decoding "
    "request holds, and the users at which the simulated pool starts to bind"
)


def add_capacity_arguments(p, *, key, int_arg) -> None:
    p.add_argument("--model", type=key, required=True, help="registry key")
    p.add_argument("--gpu", type=key, required=True, help="GPU key")
    p.add_argument("--prompt-tokens", type=int_arg(1, MAX_TOKENS), required=True)
    p.add_argument("--output-tokens", type=int_arg(1, MAX_TOKENS), required=True)
    p.add_argument("--kv-dtype", default="bf16", choices=("bf16", "fp16", "fp8", "int8"))
    p.add_argument(
        "--max-num-seqs", type=int_arg(1, 10**6), default=None, help="default: vLLM's for the GPU"
    )
    p.add_argument(
        "--max-num-batched-tokens",
        type=int_arg(1, 10**7),
        default=None,
        help="default: vLLM's for the GPU",
    )
    p.add_argument("--tp", type=int_arg(1, 64), default=1, help="tensor parallel size")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def cmd_capacity(args):
    from ..perf.capacity import running_capacity

    m = registry().model(args.model)
    gpu = registry().gpu(args.gpu)
    w = m.weights()
    s = setup(
        m.spec,
        w,
        total_bytes=gpu.memory_bytes,
        bandwidth_gbs=gpu.bandwidth_gbs,
        peak_tflops=gpu.peak_tflops(w.dtype),
        max_model_len=args.prompt_tokens + args.output_tokens,
        kv_dtype=args.kv_dtype,
        tp=args.tp,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        gpu_name=gpu.name,
    )
    c = running_capacity(s, args.prompt_tokens, args.output_tokens, max_steps=MAX_STEPS)
    text = [
        f"{m.name} on {gpu.name}"
        + (f" x {args.tp} (TP)" if args.tp > 1 else "")
        + f", KV cache {args.kv_dtype.upper()}, requests of {args.prompt_tokens:,} + "
        f"{args.output_tokens:,} tokens"
    ]
    text += [f"  {line}" for line in c.derivation().splitlines()]
    return c.to_dict(), text + [f"  note: {n}" for n in c.notes + s.notes]
