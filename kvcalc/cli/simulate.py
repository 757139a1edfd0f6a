"""``python -m kvcalc simulate``: the serving simulator (kvcalc.perf.sim) from the command line.

With --json it prints exactly the keys of ``kvcalc.perf.sim.CLI_KEYS``; the text form adds the
setup and the other metrics. Kept apart from commands.py so that file only registers it.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, replace

from ..cache.weight_bytes import Weights, weights, weights_at_bits, weights_given, weights_in
from ..config.catalog import registry
from ..config.hfconfig import checkpoint_format, load_config_file, spec_from_config
from ..core.arith import cdiv
from ..core.model import ModelSpec
from ..core.units import GiB, fmt_seconds
from ..engines.budget import DEFAULT_RESERVE_BYTES, LMDEPLOY_RESERVE_BYTES, free_memory_pool
from ..perf.calibration import STACK_NAMES, StepModel, error_band_text, step_model
from ..perf.engines import engine_band_text
from ..perf.engines import resolve as resolve_engine
from ..perf.sim import CLI_KEYS, MAX_TOKENS, Dist, Workload, estimated_steps, fixed, setup, simulate
from .simulate_flags import LENGTH_PRESETS, add_arguments, add_engine_limits, dist_arg

__all__ = [
    "HELP",
    "add_arguments",
    "cmd_simulate",
    "CAPACITY_HELP",
    "add_capacity_arguments",
    "cmd_capacity",
]


# A run the CLI takes: at about 6 us an estimated step (measured: 225,970 in 1.3 s), about half
# a minute at most (one command of 2.6e9 steps ran 85 minutes before this cap, issue 22 B9).
MAX_STEPS = 5_000_000

HELP = (
    "serve a workload: continuous batching on the KV pool (TTFT, TPOT, tokens/s, "
    "preemptions, which limit binds)"
)


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


def engine_from_args(args):
    """(profile, note) for --engine (kvcalc.perf.engines), or (None, None) without it."""
    name = getattr(args, "engine", None)
    if not name:
        return None, None
    if args.ideal:
        raise ValueError(
            "--engine times steps with an engine's fitted profile, --ideal with none: "
            "give one of them"
        )
    if getattr(args, "serving_stack", None):
        raise ValueError("--engine has its own serving stack's overhead: leave out --serving-stack")
    return resolve_engine(name)


def _profile_model(profile, args) -> StepModel:
    """The profile's step model, with each coefficient the flags give in its place."""
    m = profile.step_model()
    given = {
        "bw_share": args.bw_share,
        "step_overhead_s": None if args.step_overhead_ms is None else args.step_overhead_ms / 1e3,
        "mfu": args.mfu,
        "allreduce_latency_s": (
            None if args.allreduce_latency_us is None else args.allreduce_latency_us / 1e6
        ),
        "api_overhead_s": None if args.api_overhead_ms is None else args.api_overhead_ms / 1e3,
        "dequant_mfu": getattr(args, "dequant_mfu", None),
    }
    changed = {k: v for k, v in given.items() if v is not None}
    if changed:
        m = replace(m, name=f"{m.name}, your coefficients", **changed)
    return m


def speed_from_args(args, profile=None) -> StepModel:
    """The step model the flags ask for: the calibrated estimate unless --ideal (or the engine
    profile of --engine), with each coefficient given in place of its fitted value."""
    if profile is not None:
        return _profile_model(profile, args)

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
        dequant_mfu=args.dequant_mfu,
    )


def cmd_simulate(args):
    m = _model(args)
    gpu = registry().gpu(args.gpu)
    wl, prompt, output = _workload(args)
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
    # the pool the run had, per GPU: its blocks as an engine's log counts them, and those a
    # request can hold (vLLM's null block taken out)
    out["kv_pool_blocks"] = s.pool_blocks
    out["usable_blocks"] = s.num_blocks
    out["block_size"] = s.block_size
    out["estimate"] = speed.name
    out["step_model"] = speed.to_dict()
    if args.dequant_gemm is not None:  # the linear layers' share, named only where used
        out["step_model"]["dequant_mfu"] = s.dequant_mfu or s.mfu
    out["ttft_mean_steady_s"] = r.ttft_mean_steady_s
    band = error_band_text() if speed.is_calibrated else None
    if profile is not None:
        band = engine_band_text(profile, calibration)
        out["engine"] = profile.key
        out["engine_note"] = engine_note
    out["error_band"] = band
    text = _report(args, m, gpu, w, s, r, speed=speed, engine=engine, lengths=(prompt, output))
    if engine_note:
        text.append(f"  engine: {engine_note}")
    if calibration is not None:
        out["calibration"] = calibration.to_dict()
        text += [f"  {line}" for line in calibration.report()]
    if args.cache_max_entry_count is not None:
        text.append(
            f"  note: LMDeploy's pool: cache_max_entry_count {args.cache_max_entry_count:g} of the "
            f"memory free once the weights and the reserve are in, in blocks of {s.block_size} "
            "tokens (LMDeploy's own hold 64: --block-size 64)"
        )
    if band:
        text.append(f"  error band: {band}")
    return out, text + [f"  note: {n}" for n in s.notes]


def _weights(args, m, gpu) -> Weights:
    """The weights the flags give: a format (the experts' own with --expert-weight-dtype), bits
    per weight, or the checkpoint's."""
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
            base = getattr(m, "weight_dtype", None) or "bf16"
            if base == "unmodelled":
                raise ValueError(
                    "--expert-weight-dtype needs the other weights' format too: add "
                    "--weight-dtype (bf16, fp8, ...)"
                )
        return weights(m.spec, base, expert)
    if args.weight_bits is not None:
        return weights_at_bits(m.spec, args.weight_bits, half=gpu.half)
    return m.weights(args.weight_dtype, half=gpu.half)


def _run(args, m, gpu, wl, profile):
    """The setup of the flags and the simulated run of ``wl``: (step model, the engine's own,
    weights, setup, result)."""
    speed = speed_from_args(args, profile)
    w = _weights(args, m, gpu)
    if profile is not None:  # the engine's own batching defaults, where not given
        if args.max_num_seqs is None:
            args.max_num_seqs = profile.max_num_seqs
        if args.max_num_batched_tokens is None:
            args.max_num_batched_tokens = profile.max_num_batched_tokens
    pool = _pool(args, m, gpu, w)
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
        dequant_gemm=args.dequant_gemm is not None,
        dequant_below=args.dequant_gemm or 0,
        chunked_prefill=args.scheduler != "prefill-first",
        attention_dp=args.attention_dp,
        ep=args.ep,
        attention_peak_tflops=gpu.attention_tflops(args.kv_dtype),
        **({} if args.block_size is None else {"block_size": args.block_size}),
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
    return speed, engine, w, s, r


def simulate_row(args, profile, row) -> dict[str, float]:
    """One measured row of a user's benchmark (kvcalc.perf.calibrate_from.BenchRow) simulated
    in the setup of ``args`` under ``profile``: its TTFT and TPOT (a served run's mean, the
    warm-up's prompts left out of TTFT where a steady part exists) or a static batch's
    end-to-end latency, in seconds."""
    a = argparse.Namespace(**vars(args))
    a.prompt_tokens, a.output_tokens = row.isl, row.osl
    a.prompt_dist = a.output_dist = a.lengths = None
    a.prefix_share = 0.0
    if row.batch:
        a.users, a.rate, a.requests = None, math.inf, row.batch
        a.direct = True
    else:
        a.users, a.rate = row.users, (None if row.users else row.rate)
        a.requests = row.requests or max(8, 3 * (row.users or 1))
        if row.users:
            a.requests = max(8, 3 * row.users)
    wl, _, _ = _workload(a)
    m = _model(a)
    _, _, _, _, r = _run(a, m, gpu_of(a), wl, profile)
    ttft = r.ttft_mean_steady_s if r.ttft_mean_steady_s is not None else r.ttft_mean_s
    return {"TTFT": ttft, "TPOT": r.tpot_mean_s, "latency": r.e2el_mean_s}


def gpu_of(args):
    return registry().gpu(args.gpu)


def _calibrate(args, m, gpu, profile):
    """``--calibrate-from FILE``: the file's rows fitted in this setup (each simulated with the
    other flags and its own lengths and load)."""
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


def _workload(args) -> tuple[Workload, Dist, Dist]:
    """The workload of the flags (the shared prefix checked), and its prompt and output
    distributions."""
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
    return wl, prompt, output


def _pool(args, m, gpu, w: Weights) -> dict:
    """setup's pool arguments from the flags: the reserve, and at most one of vLLM's share, a
    pool size, or TensorRT-LLM's or LMDeploy's fraction of free memory (which set
    args.gpu_mem_util to 1)."""
    pool = {}
    if args.reserve_gib is not None:
        pool["reserve_bytes"] = round(args.reserve_gib * GiB)
    given = [
        f
        for f, v in (
            ("--gpu-memory-utilization", args.gpu_mem_util),
            ("--kv-pool-gib", args.kv_pool_gib),
            ("--kv-free-fraction", args.kv_free_fraction),
            ("--cache-max-entry-count", args.cache_max_entry_count),
        )
        if v is not None
    ]
    if len(given) > 1:
        raise ValueError(f"{' and '.join(given)} each size the pool; give one of them")
    if args.kv_pool_gib is not None:
        pool["kv_pool_bytes"] = round(args.kv_pool_gib * GiB)
    # TensorRT-LLM and LMDeploy: a fraction of what is free once the weights (and the runtime's
    # own memory, the reserve) are in, not of the total as vLLM takes it.
    for fraction, reserve in (
        (args.kv_free_fraction, DEFAULT_RESERVE_BYTES),
        (args.cache_max_entry_count, LMDEPLOY_RESERVE_BYTES),
    ):
        if fraction is None:
            continue
        wb = w.bytes if args.weights_gib is None else round(args.weights_gib * GiB)
        kv = free_memory_pool(
            gpu.memory_bytes, cdiv(wb, args.tp), pool.get("reserve_bytes", reserve), fraction
        )
        if kv <= 0:
            raise ValueError(
                f"{m.name}'s weights and the reserve leave no free memory on "
                f"{gpu.name} at tensor parallel {args.tp}"
            )
        pool["kv_pool_bytes"] = kv
        args.gpu_mem_util = 1.0  # the reserve is then what is left of the whole memory
    return pool


def _report(args, m, gpu, w: Weights, s, r, *, speed, engine, lengths) -> list[str]:
    """The text form: the setup, the workload, the pool, the step model and the metrics (the
    error band and the notes are added by cmd_simulate)."""
    prompt, output = lengths
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
        + _layout_text(args)
        + f", {wfmt}, KV cache {args.kv_dtype.upper()}",
        f"  workload:   {args.requests:,} requests of {prompt.describe()} prompt + "
        f"{output.describe()} output tokens, {load}",
        f"  pool:       {s.num_blocks:,} blocks of {s.block_size} tokens "
        f"({s.kv_pool_bytes / GiB:,.2f} GiB per GPU); max_num_seqs {s.max_num_seqs:,}, "
        f"max_num_batched_tokens {s.max_num_batched_tokens:,}",
        *(
            [
                "  scheduler:  prefill-first (vLLM V0's default): whole prompts in steps of "
                f"their own, the decodes waiting; a prompt is admitted while "
                f"{s.watermark_blocks:,} blocks stay free"
            ]
            if not s.chunked_prefill
            else []
        ),
        f"  speed:      the {speed.name}: {_speed_text(engine, args.tp, s)}"
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


def _speed_text(speed: StepModel, tp: int, s=None) -> str:
    parts = [f"bandwidth share {speed.bw_share:g}", f"MFU {speed.mfu:g}"]
    if s is not None and s.dequant_mfu:
        parts.append(
            f"dequantising GEMMs {s.dequant_mfu:g} of the 16-bit peak"
            + (f" in steps under {s.dequant_below:,} tokens" if s.dequant_below else "")
        )
    if speed.engine:  # an engine profile's own shares
        parts.append(f"KV reads {speed.kv_share:.3g} of the bandwidth")
        parts.append(f"attention MFU {speed.attention_mfu:.3g}")
    parts.append(f"step overhead {speed.step_overhead_s * 1e3:g} ms")
    if tp > 1:
        parts.append(
            f"all-reduce latency {speed.allreduce_latency_s * 1e6:g} us"
            if speed.allreduce
            else "no all-reduce time"
        )
        if speed.engine and s is not None and s.ep > 1:
            parts.append(f"expert-parallel all-to-all {speed.ep_latency_s * 1e6:.3g} us")
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
    add_engine_limits(p, int_arg)
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
