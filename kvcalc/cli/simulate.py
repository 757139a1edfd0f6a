"""``simulate`` (kvcalc.perf.sim; --json: the keys of ``CLI_KEYS`` and the setup's) and
``capacity``."""

from __future__ import annotations

import argparse
from dataclasses import replace

from ..cache.weight_bytes import (
    MAX_WEIGHT_BITS,
    MIN_WEIGHT_BITS,
    Weights,
    weights,
    weights_at_bits,
    weights_given,
    weights_in,
)
from ..config.catalog import registry
from ..core.units import GiB, fmt_seconds
from ..engines.budget import (
    DEFAULT_RESERVE_BYTES,
    LMDEPLOY_RESERVE_BYTES,
    free_memory_pool,
)
from ..perf.calibration import StepModel, error_band_text
from ..perf.engines import engine_band_text, sglang_pool
from ..perf.sim import CLI_KEYS, MAX_TOKENS, Speed, estimated_steps, setup, simulate
from .common import gpu_of, load_model
from .flags import deployment_args, deployment_from, float_arg, int_arg, number_arg, share_arg
from .step_model import engine_from_args, speed_arguments, speed_from_args, speed_text
from .workload import load_text, workload_arguments, workload_from

# A run the CLI takes: at about 6 us an estimated step (measured: 225,970 in 1.3 s), about half
# a minute at most (one command of 2.6e9 steps ran 85 minutes before this cap, issue 22 B9).
MAX_STEPS = 5_000_000

HELP = (
    "serve a workload: continuous batching on the KV pool (TTFT, TPOT, tokens/s, "
    "preemptions, which limit binds)"
)


# simulate's and capacity's own versions of the deployment flags: kvcalc.perf.sim's caps.
SIM_FLAGS: dict[str, dict] = dict(
    model={"help": "registry key"},
    gpu={"help": "GPU key"},
    kv_dtype={"choices": ("bf16", "fp16", "fp8", "int8")},
    tp={"type": int_arg(1, 64)},
    max_num_seqs={"type": int_arg(1, 10**6), "help": "default: vLLM's for the GPU"},
    max_num_batched_tokens={"type": int_arg(1, 10**7), "help": "default: vLLM's for the GPU"},
)
# The simulator's scheduling policies (kvcalc.perf.sim.scheduler), as vLLM's documentation names
# them: chunked prefill, or the V0 default that "prioritizes prefills".
SCHEDULERS = ("chunked-prefill", "prefill-first")
_gib = number_arg("GiB", 0.0, float(2**20), "GiB")


def add_arguments(p: argparse.ArgumentParser) -> None:
    deployment_args(p, "model|config!", "gpu!", **SIM_FLAGS)
    workload_arguments(p)
    deployment_args(p, "kv_dtype", **SIM_FLAGS)
    w = p.add_mutually_exclusive_group()
    weights_help = "weights of the whole model, GiB (read whole every step)"
    deployment_args(
        w, "weight_dtype", "weights_gib", weights_gib={"type": _gib, "help": weights_help}
    )
    deployment_args(p, "expert_weight_dtype", "expert_gemm_dtype")
    bits = number_arg("bits", MIN_WEIGHT_BITS, MAX_WEIGHT_BITS, "bits per weight")
    deployment_args(w, "weight_bits", weight_bits={"type": bits})
    p.add_argument(
        "--dequant-gemm",
        nargs="?",
        const=0,
        type=int_arg(1, 10**7),
        metavar="TOKENS",
        help="the 4-bit group-quantised weights (AWQ; with --weight-bits or --weight-dtype "
        "int4) are dequantised inside every matrix multiply, which the calibrated estimate "
        "times at kvcalc.perf.calibration.DEQUANT_GEMM_MFU of the 16-bit peak (vLLM's "
        "awq_gemm); with TOKENS, only in steps of fewer tokens, the others dequantising "
        "once for a 16-bit GEMM (vLLM's AWQ from 0.3: 256)",
    )
    limits = ("max_num_seqs", "max_num_batched_tokens", "tp", "attention_dp", "ep")
    deployment_args(p, *limits, **SIM_FLAGS)
    p.add_argument(
        "--scheduler",
        choices=SCHEDULERS,
        default="chunked-prefill",
        help="chunked-prefill: decodes first, prompts in chunks of what is left of "
        "max_num_batched_tokens (vLLM V1; V0 with --enable-chunked-prefill); prefill-first: "
        "vLLM V0's default scheduler (0.4-0.6 unless --enable-chunked-prefill), whole prompts in "
        "steps of their own while the decodes wait (max_num_batched_tokens then defaults to "
        "max(longest request, 2,048))",
    )
    p.add_argument(
        "--prefix-share",
        type=float,
        default=0.0,
        help="fraction of each prompt shared by every request (0 to 1)",
    )
    pool = p.add_argument_group("the KV pool")
    deployment_args(
        pool,
        "block_size",
        "gpu_mem_util",
        "reserve_gib",
        block_size={
            "type": int_arg(1, 1024),
            "help": "tokens per KV block (vLLM's --block-size, 16 by default; LMDeploy's "
            "cache_block_seq_len is 64)",
        },
        gpu_mem_util={
            "flags": ("--gpu-memory-utilization", "--gpu-mem-util"),
            "dest": "gpu_mem_util",
            "type": share_arg,
            "help": "vLLM's share of total memory (default: vLLM's own)",
        },
        reserve_gib={
            "type": _gib,
            "default": None,
            "help": "activations, CUDA graphs and non-torch memory (default 2 GiB)",
        },
    )
    for flag, kind, text in (
        ("--kv-pool-gib", _gib, "the pool's size per GPU instead of vLLM's arithmetic"),
        (
            "--kv-free-fraction",
            share_arg,
            "TensorRT-LLM's kv_cache_free_gpu_mem_fraction: the "
            "pool is this share of the memory left after the weights and the reserve",
        ),
        (
            "--cache-max-entry-count",
            share_arg,
            "LMDeploy's cache_max_entry_count (0.8 by default "
            "from v0.2.2): the pool is this share of the memory free once the weights are loaded "
            "(the reserve then defaults to 0.5 GiB, the CUDA context: LMDeploy allocates its "
            "activations after the pool)",
        ),
        (
            "--mem-fraction-static",
            share_arg,
            "SGLang's mem_fraction_static: the weights and the pool take this share of the "
            "memory free at start (an sglang@ profile's default: its release's rule for the "
            "GPU and the layout)",
        ),
    ):
        pool.add_argument(flag, type=kind, default=None, help=text)
    speed_arguments(p)
    p.add_argument("--seed", type=int_arg(0, 2**31), default=0)
    p.add_argument(
        "--price-per-gpu-hour",
        type=float_arg(10_000.0, unit=" $"),
        default=None,
        metavar="DOLLARS",
        help="your price of one GPU for an hour: adds dollars and energy per million output "
        "tokens at the simulated throughput",
    )
    deployment_args(p, "json")


def cmd_simulate(args):
    m = load_model(args)
    gpu = registry().gpu(args.gpu)
    wl = workload_from(args)
    if args.serving_stack and (args.direct or args.api_overhead_ms is not None):
        raise ValueError(
            f"--serving-stack gives the API overhead; "
            f"{'--direct' if args.direct else '--api-overhead-ms'} does too: "
            "give one of them"
        )
    _check_dequant(args)
    profile, engine_note = engine_from_args(args)
    calibration = None
    if args.calibrate_from:
        if profile is None:
            raise ValueError(
                "--calibrate-from fits an engine profile's coefficients: name the engine "
                "the benchmark ran (--engine vllm@0.18.0, sglang@0.5.6 or trtllm@1.0)"
            )
        calibration = _calibrate(args, m, gpu, profile)
        profile = calibration.profile
    speed, engine, w, s, r = _run(args, m, gpu, wl, profile)
    out = {k: getattr(r, k) for k in CLI_KEYS}
    # the pool per GPU: its blocks as a log counts them, and those a request can hold (no null)
    out.update(kv_pool_blocks=s.pool_blocks, usable_blocks=s.num_blocks, block_size=s.block_size)
    out.update(estimate=speed.name, step_model=speed.to_dict())
    if args.dequant_gemm is not None:  # the linear layers' share, named only where used
        out["step_model"]["dequant_mfu"] = s.dequant_mfu or s.mfu
    out["ttft_mean_steady_s"] = r.ttft_mean_steady_s
    band = error_band_text() if speed.is_calibrated else None
    if profile is not None:
        band = engine_band_text(profile, calibration)
        out.update(engine=profile.key, engine_note=engine_note)
    out["error_band"] = band
    text = _report(args, m, gpu, w, s, r, wl, engine)
    if engine_note:
        text.append(f"  engine: {engine_note}")
    if calibration is not None:
        out["calibration"] = calibration.to_dict()
        text += [f"  {line}" for line in calibration.report()]
    if args.cache_max_entry_count is not None and s.block_size != 64:
        text.append("  note: LMDeploy's own blocks hold 64 tokens: --block-size 64")
    if args.price_per_gpu_hour is not None:
        text += _cost(out, r, s, gpu, args.price_per_gpu_hour)
    if band:
        text.append(f"  error band: {band}")
    return out, text + [f"  note: {n}" for n in s.notes]


def _cost(out: dict, r, s, gpu, price: float) -> list[str]:
    """--price-per-gpu-hour: dollars and energy per million output tokens at the run's
    throughput, on every GPU the deployment takes."""
    from ..perf.cost import cost_per_million

    c = cost_per_million(r.output_tokens_per_s, s.tp * s.dp, price, gpu.power_w)
    out["cost"] = c.to_dict()
    energy = (
        f", {c.kwh_per_million:.3g} kWh at {gpu.power_w:g} W a GPU (its maximum board power)"
        if c.kwh_per_million is not None
        else f" (no energy: the registry gives no board power for {gpu.name})"
    )
    d = c.dollars_per_million
    dollars = f"{d:,.2f}" if d >= 1 else f"{d:.3g}"
    return [
        f"  cost: ${dollars} per million output tokens on {c.gpus} GPU"
        f"{'s' if c.gpus > 1 else ''} at ${price:g} an hour each{energy}; as uncertain as the "
        "throughput"
    ]


def expert_peak(args, m, gpu) -> float | None:
    """The routed experts' GEMM peak under --expert-gemm-dtype (None: their weights' format
    decides, as every other GEMM's); ValueError where the model has no experts or the GPU no
    tensor cores for that format."""
    fmt = getattr(args, "expert_gemm_dtype", None)
    if fmt is None:
        return None
    if m.spec.moe is None:
        raise ValueError(f"{m.name} has no routed experts: leave out --expert-gemm-dtype")
    peak = gpu.tflops(fmt)
    if not peak:
        raise ValueError(
            f"the {gpu.name} has no {fmt.upper()} tensor cores for --expert-gemm-dtype {fmt}"
        )
    return peak


def _weights(args, m, gpu) -> Weights:
    """The weights of --weight-dtype (--expert-weight-dtype), --weight-bits or the checkpoint."""
    expert = getattr(args, "expert_weight_dtype", None)
    if expert is not None:
        if args.weight_bits is not None or args.weights_gib is not None:
            raise ValueError(
                "--expert-weight-dtype sets the experts' format beside --weight-dtype's; "
                "--weight-bits and --weights-gib give every weight at once: give one way"
            )
        if m.spec.moe is None:
            raise ValueError(f"{m.name} has no routed experts: leave out --expert-weight-dtype")
        base = args.weight_dtype
        if base in (None, "auto"):
            base = m.weight_dtype or "bf16"
            if base == "unmodelled":
                raise ValueError(
                    "--expert-weight-dtype needs the other weights' format too: add "
                    "--weight-dtype (bf16, fp8, ...)"
                )
        return weights(m.spec, base, expert)
    if args.weight_bits is not None:
        return weights_at_bits(m.spec, args.weight_bits, half=gpu.half)
    if m.spec.params is None:  # parameters not counted: 0 B of weights, and setup() says why
        return weights_given(0, "bf16")
    return weights_in(
        m.spec, args.weight_dtype, m.weight_dtype, m.expert_weight_dtype, half=gpu.half
    )


def _run(args, m, gpu, wl, profile):
    """(step model, the engine's, weights, setup, result) of ``wl`` simulated."""
    speed, engine, w, s = engine_setup(args, m, gpu, wl, profile)
    steps = estimated_steps(s, wl)
    if steps > MAX_STEPS:
        raise ValueError(
            f"this run would simulate about {steps:,} engine steps, more than the "
            f"{MAX_STEPS:,} one command may take (about half a minute of work); "
            "send fewer requests or shorter outputs, or pick a setup whose pool "
            "holds more requests at once"
        )
    r = simulate(s, wl, series=False)
    return speed, engine, w, s, r


def engine_setup(args, m, gpu, wl, profile):
    """(step model, the engine's, weights, setup) of one engine for ``wl`` (``args.tp``)."""
    speed = speed_from_args(args, profile)
    w = _weights(args, m, gpu)
    chunk = 0
    if profile is not None:  # the engine's own batching defaults, where not given
        seqs, tokens, chunk = profile.batching(gpu.memory_bytes, args.attention_dp)
        if args.max_num_seqs is None:
            args.max_num_seqs = seqs
        if args.max_num_batched_tokens is None:
            args.max_num_batched_tokens = tokens
    # --direct: the same step model, but no serving stack between client and engine.
    engine = replace(speed, api_overhead_s=0.0) if args.direct else speed
    dep = deployment_from(args, m.spec, w, enable_chunked_prefill=args.scheduler != "prefill-first")
    pool_bytes = _pool_bytes(args, m, dep)
    shares = (args.kv_free_fraction, args.cache_max_entry_count, args.mem_fraction_static)
    if any(x is not None for x in shares):
        args.gpu_mem_util = 1.0  # a share of the free memory: the reserve is what is left
        dep = dep.but(gpu_memory_utilization=1.0)  # of the whole
    own_pool = False
    if profile is not None:
        dep = profile.pool_release(dep)
        if chunk:  # SGLang's chunk at DP attention
            dep = dep.but(long_prefill_token_threshold=chunk)
        if pool_bytes is None and _no_pool_flag(args):  # the engine's own rule (TensorRT-LLM)
            dep, pool_bytes = profile.own_pool(dep)
            own_pool = pool_bytes is not None
    s = setup(
        dep,
        wl.longest,
        Speed.of(
            gpu,
            w.dtype,
            engine,
            attention_peak_tflops=gpu.attention_tflops(args.kv_dtype),
            dequant_gemm=args.dequant_gemm,
            expert_peak_tflops=expert_peak(args, m, gpu),
        ),
        kv_pool_bytes=pool_bytes,
    )
    said = None  # where the pool came from, where it is not vLLM's arithmetic or given
    if own_pool and pool_bytes is not None and profile is not None:
        said = profile.pool_text(dep, pool_bytes)
    elif pool_bytes is not None and args.kv_pool_gib is None:
        said = _share_text(args, pool_bytes)
    if said:
        said = f"{said}, blocks of {s.block_size} tokens"
        notes = tuple(said if n.startswith("pool: ") else n for n in s.notes)
        s = replace(s, notes=notes)
    return speed, engine, w, s


def simulate_row(args, profile, row) -> dict[str, float]:
    """A benchmark row (calibrate_from.BenchRow) simulated in ``args``'s setup under
    ``profile``, in its client's loop (calibrate_from.bench_row_loop): mean TTFT (over every
    request) and TPOT, or a static batch's latency, in seconds."""
    from ..perf.calibrate_from import bench_row_loop

    a = argparse.Namespace(**vars(args))
    loop = bench_row_loop(row, profile.engine)
    a.direct = bool(row.batch)
    if loop.max_num_seqs is not None:
        a.max_num_seqs = loop.max_num_seqs
    m = load_model(a)
    _, _, _, _, r = _run(a, m, gpu_of(a), loop.workload, profile)
    return {"TTFT": r.ttft_mean_s, "TPOT": r.tpot_mean_s, "latency": r.e2el_mean_s}


def _calibrate(args, m, gpu, profile):
    """``--calibrate-from FILE``: its rows fitted, each simulated in this setup."""
    from pathlib import Path

    from ..perf.calibrate_from import calibrate, read_benchmark

    p = Path(args.calibrate_from)
    if not p.is_file():
        raise ValueError(f"--calibrate-from: no file {args.calibrate_from!r}")
    if p.stat().st_size > 2_000_000:
        raise ValueError("--calibrate-from: the file is over 2 MB; give the benchmark's results")
    rows = read_benchmark(p.read_text(errors="replace"))
    return calibrate(profile, rows, lambda prof, row: simulate_row(args, prof, row))


def _check_dequant(args) -> None:
    """--dequant-gemm needs 4-bit weights; --dequant-mfu needs --dequant-gemm."""
    four_bit = args.weight_dtype == "int4" or (
        args.weight_bits is not None and args.weight_bits < 8
    )
    if args.dequant_gemm is not None and not four_bit:
        raise ValueError(
            "--dequant-gemm times matrix multiplies that dequantise 4-bit group-quantised "
            "weights: give their size with --weight-bits (AWQ in groups of 128: 4.125) "
            "or --weight-dtype int4"
        )
    if args.dequant_mfu is not None and args.dequant_gemm is None:
        raise ValueError(
            "--dequant-mfu is the share of the dequantising matrix multiplies of "
            "--dequant-gemm: add --dequant-gemm, or leave --dequant-mfu out"
        )


# the flags that size the pool, at most one at a time
POOL_SIZES = (
    "gpu_mem_util",
    "kv_pool_gib",
    "kv_free_fraction",
    "cache_max_entry_count",
    "mem_fraction_static",
)
_FLAG = {k: "--" + k.replace("_", "-") for k in POOL_SIZES} | {
    "gpu_mem_util": "--gpu-memory-utilization"
}


def _share_text(args, pool_bytes: int) -> str:
    """The pool a share flag sized, in words."""
    size = f"{pool_bytes / GiB:,.2f} GiB"
    if args.mem_fraction_static is not None:
        return (
            f"pool: SGLang's mem_fraction_static {args.mem_fraction_static:g} of the memory "
            f"free at start, less the weights ({size})"
        )
    if args.kv_free_fraction is not None:
        return (
            f"pool: TensorRT-LLM's kv_cache_free_gpu_mem_fraction {args.kv_free_fraction:g} of "
            f"the memory the weights and the reserve leave ({size})"
        )
    return (
        f"pool: LMDeploy's cache_max_entry_count {args.cache_max_entry_count:g} of the memory "
        f"free once the weights and the reserve are in ({size})"
    )


def _no_pool_flag(args) -> bool:
    return all(getattr(args, k, None) is None for k in POOL_SIZES)


def _pool_bytes(args, m, dep) -> int | None:
    """The pool per GPU of at most one sizing flag (None: vLLM's arithmetic or the engine's
    own rule), one GPU's weights those of ``dep`` (a data parallel rank's share)."""
    given = [_FLAG[k] for k in POOL_SIZES if getattr(args, k, None) is not None]
    if len(given) > 1:
        raise ValueError(f"{' and '.join(given)} each size the pool; give one of them")
    if args.kv_pool_gib is not None:
        return round(args.kv_pool_gib * GiB)
    if args.mem_fraction_static is not None:
        kv = sglang_pool(dep, fraction=args.mem_fraction_static)
        if kv <= 0:
            raise ValueError(
                f"{m.name}'s weights take more than --mem-fraction-static "
                f"{args.mem_fraction_static:g} of {dep.gpu_name}'s free memory at tensor "
                f"parallel {args.tp}: raise it, or use tensor parallel or smaller weights"
            )
        return kv
    # TensorRT-LLM and LMDeploy: a fraction of what the weights and reserve leave, not the total.
    for fraction, reserve in (
        (args.kv_free_fraction, DEFAULT_RESERVE_BYTES),
        (args.cache_max_entry_count, LMDEPLOY_RESERVE_BYTES),
    ):
        if fraction is None:
            continue
        if args.reserve_gib is not None:
            reserve = round(args.reserve_gib * GiB)
        kv = free_memory_pool(dep.total_bytes, dep.gpu_weights_bytes, reserve, fraction)
        if kv <= 0:
            raise ValueError(
                f"{m.name}'s weights and the reserve leave no free memory on "
                f"{dep.gpu_name} at tensor parallel {args.tp}"
            )
        return kv
    return None


def _report(args, m, gpu, w: Weights, s, r, wl, speed: StepModel) -> list[str]:
    load = load_text(wl)
    wfmt = (
        f"weights {args.weights_gib:g} GiB as given"
        if args.weights_gib is not None
        else f"weights {args.weight_bits:g} bits each"
        if args.weight_bits is not None
        else f"weights {w.dtype.upper()}"
    )
    text = [
        f"{m.name} on {gpu.name}"
        + _layout_text(args)
        + f", {wfmt}, KV cache {args.kv_dtype.upper()}",
        f"  workload:   {args.requests:,} requests of {wl.prompt.describe()} prompt + "
        f"{wl.output.describe()} output tokens, {load}",
        f"  pool:       {s.num_blocks:,} blocks of {s.block_size} tokens "
        f"({s.kv_pool_bytes / GiB:,.2f} GiB per GPU); max_num_seqs {s.max_num_seqs:,}, "
        f"max_num_batched_tokens {s.max_num_batched_tokens:,}",
        f"  speed:      the {speed.name}: {speed_text(speed, args.tp, s)}"
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
    if not s.chunked_prefill:
        text.insert(
            3,
            "  scheduler:  prefill-first (vLLM V0's default): whole prompts in steps of their "
            f"own, the decodes waiting; a prompt is admitted while {s.watermark_blocks:,} "
            "blocks stay free",
        )
    if r.ttft_p50_steady_s is not None:
        text.append(
            f"  TTFT after the warm-up ({r.warmup_requests:,} "
            f"request{'' if r.warmup_requests == 1 else 's'} sent before the "
            f"first finished left out): p50 {fmt_seconds(r.ttft_p50_steady_s)}, p99 "
            f"{fmt_seconds(r.ttft_p99_steady_s)}"
        )
    return text


def _layout_text(args) -> str:
    dp, ep = getattr(args, "attention_dp", 1), getattr(args, "ep", 1)
    if dp == 1 and ep == 1:
        return f" x {args.tp} (TP)" if args.tp > 1 else ""
    parts = [f"TP {args.tp}"] + ([f"attention DP {dp}"] if dp > 1 else [])
    parts += [f"EP {ep}"] if ep > 1 else []
    return f" x {args.tp * dp} ({', '.join(parts)})"


CAPACITY_HELP = (
    "logged vs running capacity: vLLM's start-up worst case, what a decoding "
    "request holds, and the users at which the simulated pool starts to bind"
)


def add_capacity_arguments(p: argparse.ArgumentParser) -> None:
    deployment_args(p, "model!", "gpu!", **SIM_FLAGS)
    p.add_argument("--prompt-tokens", type=int_arg(1, MAX_TOKENS), required=True)
    p.add_argument("--output-tokens", type=int_arg(1, MAX_TOKENS), required=True)
    limits = ("max_num_seqs", "max_num_batched_tokens", "tp")
    deployment_args(p, "kv_dtype", *limits, "json", **SIM_FLAGS)


def cmd_capacity(args):
    from ..perf.capacity import running_capacity

    m = registry().model(args.model)
    gpu = registry().gpu(args.gpu)
    w = m.weights()
    dep = deployment_from(args, m.spec, w)
    s = setup(dep, args.prompt_tokens + args.output_tokens, Speed.of(gpu, w.dtype))
    c = running_capacity(s, args.prompt_tokens, args.output_tokens, max_steps=MAX_STEPS)
    text = [
        f"{m.name} on {gpu.name}{_layout_text(args)}, KV cache {args.kv_dtype.upper()}, requests "
        f"of {args.prompt_tokens:,} + {args.output_tokens:,} tokens"
    ]
    text += [f"  {line}" for line in c.derivation().splitlines()]
    return c.to_dict(), text + [f"  note: {n}" for n in c.notes + s.notes]
