"""The step model of the flags: an engine profile (--engine), the calibrated estimate or the
ideal bound, each coefficient a flag gives in place of its fitted value."""

from __future__ import annotations

from dataclasses import replace

from ..perf.calibration import API_OVERHEAD_BY_STACK, STACK_NAMES, StepModel, step_model
from ..perf.engines import resolve as resolve_engine
from .flags import number_arg, share_arg

_ms = number_arg("milliseconds", 0.0, 10_000.0, "ms")
_us = number_arg("microseconds", 0.0, 10_000_000.0, "µs")


def add_engine_argument(p) -> None:
    """--engine NAME@VERSION: an engine profile (kvcalc.perf.engines)."""
    p.add_argument(
        "--engine",
        metavar="NAME@VERSION",
        help="time steps with an engine profile fitted on that engine's measured runs "
        "(vllm@0.18.0, sglang@0.5.6, trtllm@1.0; an unfitted version takes the nearest "
        "fitted one and says so); the other step-model flags then replace its coefficients",
    )


def speed_arguments(p) -> None:
    speed = p.add_argument_group(
        "the step model (default: the calibrated estimate, kvcalc.perf.calibration; each flag "
        "replaces one fitted coefficient)"
    )
    speed.add_argument(
        "--ideal",
        action="store_true",
        help="the ideal bound instead: full bandwidth, the full dense peak (MFU 1), nothing added",
    )
    add_engine_argument(speed)
    speed.add_argument(
        "--calibrate-from",
        metavar="FILE",
        help="your own benchmark of this setup (rows in aiconfigurator's silicon-sample "
        "columns, the JSON of `vllm bench serve --save-result`, or `vllm bench latency` "
        "output): the engine profile's coefficients are fitted to it first, and the result "
        "says what changed and how far off the fit is on your rows",
    )
    for flag, kind, text in (
        ("--bw-share", share_arg, "achieved share of peak bandwidth (1.0 = ideal)"),
        ("--step-overhead-ms", _ms, "fixed cost of each engine step, ms"),
        ("--mfu", share_arg, "share of the dense peak the matrix multiplies reach"),
        (
            "--dequant-mfu",
            share_arg,
            "with --dequant-gemm: share of the 16-bit dense peak the "
            "dequantising matrix multiplies reach",
        ),
        (
            "--allreduce-latency-us",
            _us,
            "latency of one tensor-parallel all-reduce, us (0 to 10,000)",
        ),
        (
            "--api-overhead-ms",
            _ms,
            "a serving stack's time per request before the engine sees "
            "it (HTTP, tokenizer, template), ms; 0 for a benchmark that calls the engine directly",
        ),
    ):
        speed.add_argument(flag, type=kind, default=None, help=text)
    speed.add_argument(
        "--serving-stack",
        choices=sorted(API_OVERHEAD_BY_STACK),
        help="the API overhead fitted on that engine's own served runs, in place "
        "of the pooled one (kvcalc.perf.calibration.API_OVERHEAD_BY_STACK)",
    )
    speed.add_argument(
        "--direct",
        action="store_true",
        help="the client calls the engine in its own process (vLLM's LLM class, "
        "trtllm-bench, a static batch): no serving stack, no API overhead",
    )


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


def _coefficients(args) -> dict:
    """The coefficients the flags give, in the model's units (None: not given)."""

    def given(flag: str, scale: float = 1.0):
        v = getattr(args, flag, None)
        return None if v is None else v / scale

    return {
        "bw_share": given("bw_share"),
        "step_overhead_s": given("step_overhead_ms", 1e3),
        "mfu": given("mfu"),
        "allreduce_latency_s": given("allreduce_latency_us", 1e6),
        "api_overhead_s": given("api_overhead_ms", 1e3),
        "dequant_mfu": given("dequant_mfu"),
    }


def speed_from_args(args, profile=None) -> StepModel:
    """The calibrated, ideal or --engine's step model, with the flags' coefficients."""
    given = _coefficients(args)
    if profile is None:
        ideal, stack = getattr(args, "ideal", False), getattr(args, "serving_stack", None)
        return step_model(ideal=ideal, stack=stack, **given)
    m = profile.step_model()
    changed = {k: v for k, v in given.items() if v is not None}
    return replace(m, name=f"{m.name}, your coefficients", **changed) if changed else m


def speed_text(speed: StepModel, tp: int, s=None) -> str:
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
