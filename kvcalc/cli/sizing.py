"""The sizing commands: kv, budget, step-time, prefill, passes and offload."""

from __future__ import annotations

import argparse
from dataclasses import asdict

from ..cache.deployment import Deployment
from ..cache.weight_bytes import weights_in
from ..config.catalog import registry
from ..core.speculative import drafter_weight_bytes
from ..core.units import GB, fmt_bytes, fmt_gib, fmt_seconds
from ..engines.budget import (
    DEFAULT_GPU_MEM_UTIL,
    ENGINES,
    TRTLLM_FREE_FRACTION,
    budget,
)
from ..engines.vllm import DEFAULT_BLOCK_SIZE
from ..perf.calibration import (
    band_for_batch,
    error_band_text,
    estimate_step,
)
from ..perf.engines import engine_band_text
from ..perf.engines import resolve as resolve_engine
from ..perf.roofline import DEFAULT_MFU, offload_vs_recompute, prefill, step_time, token_passes
from ..perf.sim.plan import lone_prompt
from ..perf.sweeps import no_speed_reason
from .common import gpu_of, load_model, spec_said, weights_of, with_speculative
from .flags import (
    count0,
    deployment_args,
    deployment_from,
    float_arg,
    key_arg,
    mfu_arg,
    model_args,
    positive_int,
)
from .registry import command
from .step_model import add_engine_argument, speed_from_args


def _kv_arguments(p: argparse.ArgumentParser) -> None:
    model_args(p)
    p.add_argument("--context", type=positive_int, required=True)
    p.add_argument("--batch", type=positive_int, default=1)
    deployment_args(p, "speculative_config")


@command("kv", "KV bytes of a batch at a context length", _kv_arguments)
def cmd_kv(args):
    spec = with_speculative(args, load_model(args)[0])
    r = deployment_from(args, spec).kv_cache(args.context, args.batch)
    out = r.to_dict()
    said, said_text = spec_said(spec)
    out.update(said)
    text = [
        f"{spec.name}: KV cache at {args.context:,} tokens x batch {args.batch}, "
        f"{args.kv_dtype.upper()}"
        + (f", per GPU (TP={args.tp}, PP={args.pp})" if args.tp * args.pp > 1 else ""),
        f"  per token:  {r.per_token_formula()} ({fmt_bytes(r.kv_bytes_per_token_nominal)})",
        f"  growth now: {r.kv_bytes_per_token:,} B per extra token at this context",
        f"  KV bytes:   {r.kv_bytes:,} B = {fmt_gib(r.kv_bytes, 3)} ({r.kv_bytes / GB:,.3f} GB)",
    ]
    for row in r.rows:
        if row.state_bytes:
            what = f": {row.state_bytes:,} B state each per sequence (does not grow; {row.formula})"
        elif not row.stores_tokens:
            what = f": {row.formula}"
        else:
            what = f" keep {row.tokens_kept:,} tokens: {row.bytes:,} B"
        text.append(f"  {row.layers} {row.label} layers{what}")
    if r.state_bytes:
        text.append(f"  state:      {r.state_bytes:,} B = {fmt_gib(r.state_bytes, 3)} (fixed)")
    if spec.drafter and (d := r.drafter) is not None:
        text += [
            f"  drafter:    {d['drafter']}",
            f"  drafter adds {d['bytes_per_token']:,} B per token "
            f"({d['share_pct']:.1f}% of the total), {d['bytes']:,} B here",
        ]
    return out, text + said_text


def _budget_arguments(p: argparse.ArgumentParser) -> None:
    model_args(p)
    deployment_args(p, "gpu|vram_gib!")
    deployment_args(p, "weights_gib|weight_dtype|weight_bits")
    p.add_argument("--context", type=positive_int, required=True)
    p.add_argument(
        "--concurrency",
        type=positive_int,
        default=1,
        help="sequences you want to run at once (checked against the pool)",
    )
    help_util = (
        "vLLM's gpu_memory_utilization (default: the vLLM version's own, "
        f"{DEFAULT_GPU_MEM_UTIL:g} in the newest; TensorRT-LLM: the share of memory "
        f"free after weights, default {TRTLLM_FREE_FRACTION:g})"
    )
    deployment_args(
        p,
        "gpu_mem_util",
        "reserve_gib",
        "block_size",
        gpu_mem_util={"help": help_util},
        block_size={"default": DEFAULT_BLOCK_SIZE},
    )
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="vllm",
        help="vllm: as vLLM allocates (default); ideal: bytes actually held; "
        "trtllm: TensorRT-LLM's share of free memory",
    )
    deployment_args(
        p,
        "vllm_version",
        "max_num_seqs",
        "max_num_batched_tokens",
        "speculative_config",
        vllm_version={"help": "whose rules to apply (default: the newest kvcalc knows)"},
        max_num_seqs={"help": "vLLM's scheduler cap (default: vLLM's for the version and GPU)"},
        max_num_batched_tokens={
            "help": "vLLM's batch budget (default: vLLM's for the version and GPU)"
        },
    )


@command("budget", "GPU memory budget, blocks and max concurrency", _budget_arguments)
def cmd_budget(args):
    spec, wd, ed, label = load_model(args)
    gpu = gpu_of(args)
    w, wbytes = weights_of(args, spec, wd, ed)
    spec = with_speculative(args, spec)
    drafter_bytes = drafter_weight_bytes(spec, w.bytes, w.total_params) if spec.drafter else None
    dep = deployment_from(args, spec, w, weights_bytes=wbytes + (drafter_bytes or 0))
    b = budget(dep, args.context, args.concurrency, convention=args.engine)
    out = b.to_dict()
    out.update(
        drafter=spec.drafter,
        drafter_weight_bytes=drafter_bytes,
        model=label,
        gpu=gpu.key if gpu else None,
        weight_dtype=w.dtype,
        checkpoint_dtype=w.checkpoint_dtype or w.dtype,
    )
    mc = (
        "unbounded (every layer keeps a bounded number of tokens)"
        if b.max_context_tokens is None
        else f"{b.max_context_tokens:,} tokens"
    )
    gpus, per_gpu = args.tp * args.pp, " per GPU" if args.tp * args.pp > 1 else ""
    its = "not known, not counted"
    if drafter_bytes is not None:
        its = f"{fmt_gib(drafter_bytes / gpus)}{per_gpu} (in the weights above)"
    text = [
        f"{label} on {gpu.name if gpu else f'{args.vram_gib:g} GiB'}"
        + (f" (per GPU, TP={args.tp} PP={args.pp})" if gpus > 1 else ""),
        f"  GPU memory:   {fmt_gib(b.total_bytes)}",
        b.setup_line(),
        f"  weights:      {fmt_gib(b.weights_bytes)}"
        + (
            f" ({w.dtype.upper()}: vLLM serves the {w.checkpoint_dtype.upper()} checkpoint "
            "in 16 bits)"
            if w.checkpoint_dtype
            else ""
        ),
        *([f"  drafter:      {spec.drafter}; its weights {its}"] if spec.drafter else []),
        f"  reserve:      {fmt_gib(b.reserve_bytes)}",
        f"  KV pool:      {fmt_gib(b.kv_pool_bytes)}",
        (
            f"  blocks:       {b.num_blocks:,} of {b.block_size} tokens "
            f"({fmt_bytes(b.page_bytes)} per layer, {b.kv_layers} K/V layers)"
            if b.has_blocks
            else f"  blocks:       none (the ideal counts bytes, not blocks; {b.kv_layers} K/V "
            "layers)"
        ),
        (
            f"  capacity:     {b.kv_capacity_tokens:,} tokens"
            if b.has_blocks
            else "  capacity:     not in tokens (the ideal has no blocks: see the lines below)"
        ),
        f"  max concurrency at {b.context:,} tokens: {b.max_concurrency:.2f}x" + b.concurrency_note,
        f"  max context of one sequence: {mc}",
        f"  {b.concurrency} x {b.context:,} tokens needs {fmt_gib(b.needed_bytes)}: "
        + ("fits" if b.fits else f"does NOT fit, over by {fmt_gib(b.overflow_bytes)}"),
    ]
    text += b.engine_lines()
    if b.kv_pool_bytes <= 0:
        text.append(
            "  the weights and reserve alone exceed the requested memory: "
            "use more GPUs (--tp), a smaller weight format, or a larger GPU"
        )
    out["derivation"] = b.derivation()
    text += ["  how:"] + [f"    {line}" for line in out["derivation"].splitlines()]
    return out, text


def _step_time_arguments(p: argparse.ArgumentParser) -> None:
    model_args(p)
    deployment_args(p, "gpu|bandwidth_gbs!")
    deployment_args(p, "weights_gib|weight_dtype|weight_bits")
    p.add_argument("--context", type=positive_int, required=True)
    p.add_argument("--batch", type=positive_int, default=1)
    g = p.add_argument_group(
        "a real engine's step beside the ideal bound (kvcalc.perf.calibration): --calibrated for "
        "the fitted coefficients, or give your own measured share or overhead"
    )
    g.add_argument(
        "--calibrated", action="store_true", help="add the calibrated estimate and its error band"
    )
    add_engine_argument(g)
    g.add_argument(
        "--bw-share",
        type=float_arg(1.0, above=True, name="a share of the peak"),
        help="achieved share of peak bandwidth (your measurement)",
    )
    g.add_argument(
        "--step-overhead-ms",
        type=float_arg(10_000.0, unit=" ms"),
        help="fixed cost of each engine step, ms (your measurement)",
    )


@command("step-time", "decode step time, tokens/s and the crossover context", _step_time_arguments)
def cmd_step_time(args):
    spec, wd, ed, label = load_model(args)
    gpu = gpu_of(args)
    bw = gpu.bandwidth_gbs if gpu else args.bandwidth_gbs
    w, _ = weights_of(args, spec, wd, ed)
    peak = gpu.peak_tflops(w.dtype) if gpu else None
    # No speed past the model's limit (kvcalc.perf.sweeps.no_speed_reason, the pages' rule).
    past = no_speed_reason(spec, args.context, args.batch)
    if past:
        raise ValueError(f"no step time: {past}. Lower --context.")
    s = step_time(
        deployment_from(args, spec, w),
        context=args.context,
        batch=args.batch,
        bandwidth_gbs=bw,
        peak_tflops=peak,
        attention_tflops=gpu.attention_tflops(args.kv_dtype) if gpu else None,
    )
    out = s.to_dict()
    out.update(model=label, gpu=gpu.key if gpu else None, estimate="ideal bound")
    est = None
    profile, note = resolve_engine(args.engine) if args.engine else (None, None)
    if profile is not None or (
        args.calibrated or args.bw_share is not None or args.step_overhead_ms is not None
    ):
        sm = speed_from_args(args, profile)
        link = gpu.tp_link_gbs if gpu else None
        est = estimate_step(spec, s, sm, tp=args.tp, link_gbs=link, weight_dtype=w.dtype)
        band = error_band_text(band_for_batch(args.batch)) if sm.is_calibrated else None
        if profile is not None:
            band = engine_band_text(profile)
            out.update(engine=profile.key, engine_note=note)
        out.update(estimate=sm.name, estimated_step_time_s=est.time_s)
        out.update(estimated_tokens_per_s=est.tokens_per_s, step_model=sm.to_dict())
        out.update(estimate_parts=est.to_dict(), error_band=band)
    cross = (
        "never (the cache stops growing)"
        if s.crossover_context is None
        else f"{s.crossover_context:,} tokens"
    )
    text = [
        f"{label}: decode step at {args.context:,} tokens, batch {args.batch}, {bw:,.0f} GB/s",
        f"  weights read: {s.weight_read_bytes / GB:,.3f} GB",
        f"  KV read:      {s.kv_read_bytes / GB:,.3f} GB ({s.kv_share:.0%} of the step)",
        f"  step time:    {fmt_seconds(s.step_time_s)} -> {s.tokens_per_s:,.1f} tokens/s "
        "(the ideal bound)",
        f"  crossover:    {cross} (KV reads = weight reads at batch {args.batch})",
    ]
    if est is not None:
        parts = (
            f"max(reads {fmt_seconds(est.memory_s)}, compute at MFU {sm.mfu:g} "
            f"{fmt_seconds(est.compute_s)})"
            f" + overhead {fmt_seconds(est.overhead_s)}"
            + (f" + all-reduce {fmt_seconds(est.allreduce_s)}" if est.allreduce_s else "")
        )
        text.insert(
            4,
            f"  {out['estimate']}: {fmt_seconds(est.time_s)} -> "
            f"{est.tokens_per_s:,.1f} tokens/s = {parts}",
        )
        if out["error_band"]:
            text.append(f"  error band: {out['error_band']}")
        if note:
            text.append(f"  engine: {note}")
    if s.state_read_bytes:
        text.insert(3, f"  state read:   {s.state_read_bytes / GB:,.3f} GB")
    if s.compute_time_s is not None:
        text.append(
            f"  compute floor: {fmt_seconds(s.compute_time_s)} at the full dense peak "
            f"({s.bound} bound)"
        )
    return out, text


def _prefill_arguments(p: argparse.ArgumentParser) -> None:
    model_args(p, kv=False)
    deployment_args(p, "gpu!", gpu={"help": None})
    p.add_argument("--prompt-tokens", type=positive_int, required=True)
    _mfu_argument(p, ", a stated assumption; 1 is the ideal bound")
    p.add_argument("--dtype", choices=("bf16", "fp8"), default="bf16", help="compute format")
    add_engine_argument(p)
    p.add_argument(
        "--direct",
        action="store_true",
        help="with --engine: called in the engine's own process, no serving stack's time",
    )


@command("prefill", "time to first token from FLOPs", _prefill_arguments)
def cmd_prefill(args):
    spec, wd, ed, _ = load_model(args)
    gpu = registry().gpu(args.gpu)
    peak = _peak(gpu, args.dtype)
    past = no_speed_reason(spec, args.prompt_tokens)
    if past:
        raise ValueError(f"no prefill time: {past}. Lower --prompt-tokens.")
    # The floor: a forward pass reads every weight it uses at least once (as the Lab does).
    floor: dict = {}
    if spec.params is not None:
        w = weights_in(spec, "auto", wd, ed)
        floor = dict(
            weight_read_bytes=w.read_per_step(spec, args.prompt_tokens),
            bandwidth_gbs=gpu.bandwidth_gbs,
        )
    r = prefill(spec, args.prompt_tokens, peak, mfu=args.mfu, tp=args.tp, **floor)
    out = r.to_dict()
    out.update(gpu=gpu.key)
    text = [
        f"{spec.name}: prefill of {args.prompt_tokens:,} tokens on {gpu.name}",
        f"  FLOPs: {r.linear_flops:.3e} (2 x active params x tokens) + "
        f"{r.attention_flops:.3e} (attention) = {r.flops:.3e}",
        f"  compute: {fmt_seconds(r.compute_time_s)} at {args.mfu:g} x {peak:g} TFLOPS",
    ]
    if floor:
        text.append(
            f"  one read of the weights: {fmt_seconds(r.memory_time_s)} at "
            f"{gpu.bandwidth_gbs:,.0f} GB/s"
        )
    ideal = prefill(spec, args.prompt_tokens, peak, mfu=1.0, tp=args.tp, **floor)
    out.update(ideal_time_s=ideal.time_s)
    what = (
        "the ideal bound: every FLOP at the full dense peak"
        if args.mfu == 1.0
        else f"an estimate at MFU {args.mfu:g} (--mfu); the ideal bound, at the full dense "
        f"peak, is {fmt_seconds(ideal.time_s)}"
    )
    text.append(f"  time to first token: {fmt_seconds(r.time_s)} ({r.bound} bound), {what}")
    if args.engine:
        profile, note = resolve_engine(args.engine)
        sm = profile.step_model()
        # the engine serves the checkpoint's own format (FP8 where --dtype fp8 asks for it)
        w = weights_in(spec, "fp8" if args.dtype == "fp8" else "auto", wd, ed, half=gpu.half)
        dep = Deployment(spec=spec, gpu=gpu, weights=w, tp=args.tp)
        est = lone_prompt(dep, args.prompt_tokens, sm, served=not args.direct)
        band = engine_band_text(profile)
        out.update(engine=profile.key, engine_note=note, estimate=sm.name)
        out.update(estimated_ttft_s=est.time_s, estimate_parts=asdict(est))
        out.update(step_model=sm.to_dict(), error_band=band)
        steps = f"{est.steps} prefill step" + ("s" if est.steps > 1 else "")
        text.append(
            f"  {sm.name}: {fmt_seconds(est.time_s)} = {steps} of at most {est.chunk:,} tokens "
            f"on the simulator's clock ({w.dtype.upper()} weights), {fmt_seconds(est.engine_s)}"
            + (f" + serving stack {fmt_seconds(est.api_s)}" if est.api_s else "")
        )
        text.append(f"  error band: {band}")
        if note:
            text.append(f"  engine: {note}")
    text.append(
        "  one request on an idle GPU, called directly; a served request adds its serving "
        "stack's time (simulate gives the calibrated estimate with its error band)"
    )
    return out, text


def _mfu_argument(p: argparse.ArgumentParser, more: str = "") -> None:
    """--mfu of prefill and offload (``more``: what prefill's help adds)."""
    text = f"fraction of dense peak reached (default {DEFAULT_MFU}{more})"
    p.add_argument("--mfu", type=mfu_arg, default=DEFAULT_MFU, help=text)


def _peak(gpu, dtype: str) -> float:
    """The GPU's dense peak for ``dtype``, which prefill and offload time compute at."""
    peak = gpu.peak_tflops(dtype)
    if peak is None:
        raise ValueError(f"{gpu.name}: the registry gives no {dtype} dense peak")
    return peak


def _passes_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--new-tokens", type=positive_int, required=True)
    p.add_argument("--prompt-tokens", type=count0, default=0)
    p.add_argument("--json", action="store_true")


@command("passes", "token passes with and without a KV cache", _passes_arguments)
def cmd_passes(args):
    r = token_passes(args.new_tokens, args.prompt_tokens)
    text = [
        f"{args.new_tokens:,} new tokens after a {args.prompt_tokens:,}-token prompt:",
        f"  with a KV cache:    {r['with_cache']:,} token passes",
        f"  without a KV cache: {r['without_cache']:,} token passes ({r['ratio']:,.1f}x)",
    ]
    return r, text


def _offload_arguments(p: argparse.ArgumentParser) -> None:
    model_args(p, parallel=False)
    deployment_args(p, "gpu!", gpu={"help": None})
    p.add_argument("--link", type=key_arg, default="pcie5-x16", help="link key (see `gpus`)")
    p.add_argument("--prefix-tokens", type=positive_int, required=True)
    _mfu_argument(p)


@command("offload", "reload a cached prefix over a link, or recompute it?", _offload_arguments)
def cmd_offload(args):
    spec, *_ = load_model(args)
    gpu = registry().gpu(args.gpu)
    link = registry().link(args.link)
    r = offload_vs_recompute(
        spec,
        args.prefix_tokens,
        link_gbs=link.gbs,
        peak_tflops=_peak(gpu, "bf16"),
        kv_dtype=args.kv_dtype,
        mfu=args.mfu,
    )
    out = r.to_dict()
    out.update(link=link.key, gpu=gpu.key)
    if r.break_even_tokens is None:
        be = "reloading never wins at any prefix length"
    elif r.break_even_tokens == 1:
        be = "reloading wins at every prefix length"
    else:
        be = f"reloading wins from {r.break_even_tokens:,} tokens on"
    text = [
        f"{spec.name}: a {args.prefix_tokens:,}-token prefix ({fmt_bytes(r.kv_bytes)} of KV)",
        f"  reload over {link.name} ({link.gbs:g} GB/s): {fmt_seconds(r.reload_s)}",
        f"  recompute on {gpu.name}: {fmt_seconds(r.recompute_s)}",
        f"  here {'reloading' if r.offload_wins else 'recomputing'} wins; {be}",
    ]
    return out, text
