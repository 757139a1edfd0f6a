"""``python -m kvcalc simulate``: the serving simulator (kvcalc.perf.sim) from the command line.

With --json it prints exactly the keys of ``kvcalc.perf.sim.CLI_KEYS``; the text form adds the
setup and the other metrics. Kept apart from commands.py so that file only registers it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..cache.weight_bytes import Weights, weights_at_bits, weights_given, weights_in
from ..config.catalog import registry
from ..config.hfconfig import checkpoint_format, load_config_file, spec_from_config
from ..core.arith import cdiv
from ..core.model import ModelSpec
from ..core.units import GiB, fmt_seconds
from ..engines.budget import DEFAULT_RESERVE_BYTES, LMDEPLOY_RESERVE_BYTES, free_memory_pool
from ..perf.calibration import STACK_NAMES, StepModel, error_band_text, step_model
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
    speed = speed_from_args(args)
    w = (
        m.weights(args.weight_dtype, half=gpu.half)
        if args.weight_bits is None
        else weights_at_bits(m.spec, args.weight_bits, half=gpu.half)
    )
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
    band = error_band_text() if speed.is_calibrated else None
    out["error_band"] = band
    text = _report(args, m, gpu, w, s, r, speed=speed, engine=engine, lengths=(prompt, output))
    if args.cache_max_entry_count is not None:
        text.append(
            f"  note: LMDeploy's pool: cache_max_entry_count {args.cache_max_entry_count:g} of the "
            f"memory free once the weights and the reserve are in, in blocks of {s.block_size} "
            "tokens (LMDeploy's own hold 64: --block-size 64)"
        )
    if band:
        text.append(f"  error band: {band}")
    return out, text + [f"  note: {n}" for n in s.notes]


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
        + (f" x {args.tp} (TP)" if args.tp > 1 else "")
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


def _speed_text(speed: StepModel, tp: int, s=None) -> str:
    parts = [f"bandwidth share {speed.bw_share:g}", f"MFU {speed.mfu:g}"]
    if s is not None and s.dequant_mfu:
        parts.append(
            f"dequantising GEMMs {s.dequant_mfu:g} of the 16-bit peak"
            + (f" in steps under {s.dequant_below:,} tokens" if s.dequant_below else "")
        )
    parts.append(f"step overhead {speed.step_overhead_s * 1e3:g} ms")
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
