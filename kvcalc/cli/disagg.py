"""``disagg``: a workload served by a disaggregated deployment (P prefill engines, D decode
engines, each request's cache moved over a link) beside aggregated replicas on as many GPUs;
with --ttft-ms and --tpot-ms, the fewest GPUs each layout needs (kvcalc.perf.sim.fleet)."""

from __future__ import annotations

import argparse

from ..cache.transfer import transfer
from ..config.catalog import registry
from ..core.units import fmt_seconds
from ..perf.cost import cost_per_million
from ..perf.engines import engine_band_text
from ..perf.sim.fleet import (
    MAX_ENGINES,
    Choice,
    FleetResult,
    StepBudget,
    Targets,
    fewest_disagg,
    fewest_replicas,
    fleet_steps,
    simulate_disagg,
    simulate_replicas,
)
from .common import load_model
from .flags import float_arg, int_arg, key_arg
from .registry import command
from .simulate import MAX_STEPS, add_arguments, engine_setup
from .step_model import engine_from_args
from .workload import load_text, workload_from

HELP = (
    "disaggregated serving: P prefill and D decode engines with the cache moved between them, "
    "against aggregated replicas; the fewest GPUs for a TTFT/TPOT target"
)
# A search runs the layouts many times over: each run is held to this share of one command's
# steps (the searches make about 30 runs between them).
SEARCH_SHARE = 30


def _arguments(p: argparse.ArgumentParser) -> None:
    add_arguments(p)  # simulate's: the model, GPU, workload, engine (--tp: the aggregated one)
    d = p.add_argument_group("the disaggregated layout")
    engines = int_arg(1, MAX_ENGINES)
    d.add_argument("--prefill", type=engines, default=1, help="prefill engines (x in xPyD)")
    d.add_argument("--decode", type=engines, default=1, help="decode engines (y in xPyD)")
    d.add_argument("--prefill-tp", type=int_arg(1, 64), default=None, help="default: --tp")
    d.add_argument("--decode-tp", type=int_arg(1, 64), default=None, help="default: --tp")
    for side in ("prefill", "decode"):
        d.add_argument(
            f"--{side}-attention-dp",
            type=int_arg(1, 64),
            default=None,
            help="each engine's attention data parallel ranks; default: --attention-dp",
        )
        d.add_argument(
            f"--{side}-ep",
            type=int_arg(1, 512),
            default=None,
            help="each engine's expert parallel size; default: --ep",
        )
    d.add_argument(
        "--link", type=key_arg, default="ib-ndr-400", help="each GPU's port for the move"
    )
    d.add_argument(
        "--no-aggregated",
        action="store_true",
        help="the disaggregated layout alone, without aggregated replicas on as many GPUs",
    )
    t = p.add_argument_group("a latency target: the fewest GPUs for each layout")
    t.add_argument("--ttft-ms", type=float_arg(1e6, unit=" ms"), default=None)
    t.add_argument("--tpot-ms", type=float_arg(1e5, unit=" ms"), default=None)
    t.add_argument("--percentile", type=int, choices=(50, 90, 99), default=90)


def _side(args, tp: int, side: str | None = None) -> argparse.Namespace:
    """``args`` for one side's engines: its TP, and its attention DP and EP where given."""
    a = argparse.Namespace(**vars(args))
    a.tp = tp
    if side is not None:
        for field in ("attention_dp", "ep"):
            own = getattr(args, f"{side}_{field}", None)
            if own is not None:
                setattr(a, field, own)
    return a


def _row(r: FleetResult, pct: int) -> str:
    line = (
        f"  {r.layout} on {r.gpus} GPU{'s' if r.gpus > 1 else ''}: p{pct} TTFT "
        f"{fmt_seconds(r.ttft(pct))}, p{pct} TPOT {fmt_seconds(r.tpot(pct))}, "
        f"{r.output_tokens_per_s_per_gpu:,.0f} output tokens/s a GPU"
    )
    if r.transfer_mean_s:
        line += (
            f"; the cache's move {fmt_seconds(r.transfer_mean_s)} on average "
            f"({fmt_seconds(r.handoff_p99_s)} at p99 with its wait for the link)"
        )
    return line


def _verdict(agg: Choice, dis: Choice, targets: Targets) -> list[str]:
    """Which layout needs fewer GPUs, and why: what each misses with one engine fewer."""
    text = []
    for name, c in (("aggregated", agg), ("disaggregated", dis)):
        if c.best is None:
            text.append(
                f"  {name}: no layout within the search meets the target "
                f"({c.short[0].layout}: {targets.missed(c.short[0])})"
            )
            continue
        text.append(f"  {name}, fewest GPUs:" + _row(c.best, targets.pct)[1:])
        for s in c.short:
            text.append(f"    with {s.layout} instead it misses: {targets.missed(s)}")
    a, d = agg.best, dis.best
    if a is not None and d is not None:
        if a.gpus == d.gpus:
            text.append(f"  both layouts need {a.gpus} GPUs for this target")
        else:
            win, lose = (a, d) if a.gpus < d.gpus else (d, a)
            kind = "aggregated" if win is a else "disaggregated"
            text.append(
                f"  {kind} needs fewer GPUs: {win.gpus} against {lose.gpus}"
                + (
                    " (its decode engines never wait behind a prompt, so TPOT holds with "
                    "fewer GPUs)"
                    if win is d
                    else " (every GPU both prefills and decodes, so none sits idle on one side)"
                )
            )
    return text


def _costs(out: dict, price: float, power_w: float | None) -> list[str]:
    """--price-per-gpu-hour: each layout's dollars (and energy) per million output tokens at
    the workload's throughput, side by side."""
    parts = []
    for name in ("aggregated", "disaggregated"):
        r = out.get(name)
        if not r:
            continue
        c = cost_per_million(r["output_tokens_per_s"], r["gpus"], price, power_w)
        r["cost"] = c.to_dict()
        energy = f", {c.kwh_per_million:.3g} kWh" if c.kwh_per_million is not None else ""
        parts.append(f"{name} ${c.dollars_per_million:,.2f}{energy} ({c.gpus} GPUs)")
    if not parts:
        return []
    return [
        f"  cost per million output tokens at ${price:g} a GPU-hour, serving this load: "
        + "; ".join(parts)
        + (" (energy at each GPU's maximum board power)" if power_w else "")
    ]


@command("disagg", HELP, _arguments)
def cmd_disagg(args):
    m = load_model(args)
    gpu = registry().gpu(args.gpu)
    link = registry().link(args.link)
    wl = workload_from(args)
    search = args.ttft_ms is not None or args.tpot_ms is not None
    if search and wl.rate is None:
        raise ValueError(
            "a latency target's search sizes the GPUs for an offered load: give --rate "
            "(requests/s, or inf) instead of --users, whose load follows the GPUs"
        )
    if args.calibrate_from:
        raise ValueError("disagg takes an engine profile (--engine), not --calibrate-from")
    profile, engine_note = engine_from_args(args)
    p_tp = args.prefill_tp or args.tp or 1
    d_tp = args.decode_tp or args.tp or 1
    agg_tp = args.tp or 1
    speed, _, _, s_pre = engine_setup(_side(args, p_tp, "prefill"), m, gpu, wl, profile)
    _, _, _, s_dec = engine_setup(_side(args, d_tp, "decode"), m, gpu, wl, profile)
    if search and args.no_aggregated:
        raise ValueError("a latency target's search compares both layouts: drop --no-aggregated")
    s_agg = None
    if not args.no_aggregated:
        s_agg = engine_setup(_side(args, agg_tp), m, gpu, wl, profile)[3]
    if search and (args.ttft_ms is None or args.tpot_ms is None):
        raise ValueError("a latency target needs both --ttft-ms and --tpot-ms")
    limit = MAX_STEPS // SEARCH_SHARE if search else MAX_STEPS
    steps = max(
        fleet_steps(s_pre, wl, 1) // max(1, wl.output.lo) + fleet_steps(s_dec, wl, 1),
        fleet_steps(s_agg, wl, 1) if s_agg is not None else 0,
    )
    if steps > limit:
        raise ValueError(
            f"this {'search' if search else 'run'} would simulate about {steps:,} engine "
            f"steps a layout, more than the {limit:,} it may take; send fewer requests or "
            "shorter outputs"
        )
    memo: dict[int, float] = {}

    def move_s(n: int) -> float:
        if n not in memo:
            t = transfer(
                m.spec,
                n,
                kv_dtype=args.kv_dtype,
                prefill_tp=p_tp,
                decode_tp=d_tp,
                link_gbs=link.gbs,
                scales=getattr(args, "kv_scales", False),
            )
            memo[n] = t.estimate_s or 0.0
        return memo[n]

    out: dict = {"model": m.name, "gpu": gpu.key, "link": link.key, "estimate": speed.name}
    head = (
        f"{m.name} on {gpu.name}, {wl.requests:,} requests "
        f"({load_text(wl)}), prompts "
        f"{wl.prompt.describe()}, outputs {wl.output.describe()} tokens; the cache moves over "
        f"{link.name} ({link.gbs:g} GB/s a GPU)"
    )
    text = [head, f"  speed: the {speed.name} on every engine"]
    if profile is not None:
        out.update(engine=profile.key, error_band=engine_band_text(profile))
    if search:
        targets = Targets(ttft_s=args.ttft_ms / 1e3, tpot_s=args.tpot_ms / 1e3, pct=args.percentile)
        budget = StepBudget(MAX_STEPS)
        assert s_agg is not None  # a search keeps the aggregated layout
        agg = fewest_replicas(s_agg, wl, targets, budget=budget)
        dis = fewest_disagg(s_pre, s_dec, wl, targets, move_s, budget=budget)
        out["aggregated"] = agg.best.to_dict() if agg.best else None
        out["disaggregated"] = dis.best.to_dict() if dis.best else None
        out["target"] = {"ttft_s": targets.ttft_s, "tpot_s": targets.tpot_s, "pct": targets.pct}
        text.append(
            f"  target: p{targets.pct} TTFT at most {args.ttft_ms:g} ms and p{targets.pct} "
            f"TPOT at most {args.tpot_ms:g} ms"
        )
        text += _verdict(agg, dis, targets)
    else:
        d = simulate_disagg(
            s_pre,
            s_dec,
            wl,
            prefill_engines=args.prefill,
            decode_engines=args.decode,
            transfer_seconds=move_s,
        )
        out["disaggregated"] = d.to_dict()
        text.append(_row(d, args.percentile))
        if s_agg is not None and d.gpus // (agg_tp * s_agg.dp) >= 1:
            replicas = d.gpus // (agg_tp * s_agg.dp)
            a = simulate_replicas(s_agg, wl, replicas)
            out["aggregated"] = a.to_dict()
            text.append(_row(a, args.percentile))
    if args.price_per_gpu_hour is not None:
        text += _costs(out, args.price_per_gpu_hour, gpu.power_w)
    if engine_note:
        text.append(f"  engine: {engine_note}")
    if out.get("error_band"):
        text.append(f"  error band: {out['error_band']}")
    text.append(
        "  model: requests dealt to the engines in turn; a prompt's cache moves after its "
        "prefill ends, one move at a time per prefill engine; the first token comes from the "
        "decode engine"
        + ("; each user sends the next request when the last one ends" if wl.users else "")
        + " (docs/simulator.md#disaggregated-serving)"
    )
    return out, text
