"""The cache beyond one GPU (issue 43): ``transfer``, the bytes a disaggregated deployment moves
from the prefill GPUs to the decode GPUs for one prompt, and how long that takes."""

from __future__ import annotations

import argparse

from ..cache.transfer import LINK_SHARE, MOVE_LATENCY_S, transfer
from ..config.catalog import registry
from ..core.units import fmt_bytes, fmt_seconds
from ..perf.roofline import DEFAULT_MFU, prefill
from .common import load_model
from .flags import deployment_args, key_arg, model_args, positive_int
from .registry import command


def _transfer_arguments(p: argparse.ArgumentParser) -> None:
    model_args(p, parallel=False)
    p.add_argument("--prompt-tokens", type=positive_int, required=True)
    p.add_argument(
        "--link", type=key_arg, default="ib-ndr-400", help="each GPU's port (see `gpus`)"
    )
    p.add_argument("--prefill-tp", type=positive_int, default=1, help="GPUs that prefill")
    p.add_argument("--decode-tp", type=positive_int, default=1, help="GPUs that decode")
    deployment_args(p, "gpu", gpu={"help": "compare with the prefill's time on this GPU"})


@command(
    "transfer",
    "disaggregated serving: the cache a prompt ships from prefill to decode GPUs",
    _transfer_arguments,
)
def cmd_transfer(args):
    spec, *_ = load_model(args)
    link = registry().link(args.link)
    t = transfer(
        spec,
        args.prompt_tokens,
        kv_dtype=args.kv_dtype,
        prefill_tp=args.prefill_tp,
        decode_tp=args.decode_tp,
        link_gbs=link.gbs,
        scales=args.kv_scales,
    )
    out = t.to_dict() | {"link": link.key}
    text = [
        f"{spec.name}: the cache of a prompt of {t.prompt_tokens:,} tokens ({t.kv_dtype}), "
        f"prefilled on {t.prefill_tp} GPU{'s' if t.prefill_tp > 1 else ''}, "
        f"decoded on {t.decode_tp}",
    ]
    for r in t.rows:
        kept = f"{r.tokens:,} tokens" if r.tokens else "a fixed state"
        text.append(f"  {r.layers} {r.label} layers, {kept}: {fmt_bytes(r.bytes)} per decode GPU")
    text += [
        f"  each decode GPU receives {fmt_bytes(t.bytes_per_decode_gpu)}; "
        f"{fmt_bytes(t.bytes_moved)} cross the network in all",
        f"  over {link.name} ({link.gbs:g} GB/s a GPU): {fmt_seconds(t.seconds or 0.0)} at line "
        f"rate; about {fmt_seconds(t.estimate_s or 0.0)} as RDMA moves it in practice "
        f"({MOVE_LATENCY_S * 1e3:g} ms to start, then {LINK_SHARE:.0%} of line rate: Mooncake's "
        "measured moves)",
    ]
    if args.gpu:
        gpu = registry().gpu(args.gpu)
        peak = gpu.peak_tflops("bf16")
        if peak is None:
            raise ValueError(f"{gpu.name}: the registry gives no 16-bit dense peak")
        pf = prefill(spec, t.prompt_tokens, peak, mfu=DEFAULT_MFU, tp=t.prefill_tp)
        out.update(
            gpu=gpu.key, prefill_s=pf.time_s, transfer_over_prefill=(t.seconds or 0.0) / pf.time_s
        )
        text.append(
            f"  the prefill itself on {gpu.name} (MFU {DEFAULT_MFU:g}): {fmt_seconds(pf.time_s)}; "
            f"the move adds {(t.seconds or 0.0) / pf.time_s:.0%} of it unless it overlaps "
            "layer by layer"
        )
    return out, text


# A PCIe 4.0 NVMe drive's sequential read (7 GB/s: Samsung 990 Pro, Micron 7450 datasheets);
# the user gives theirs with --nvme-gbs.
NVME_GBS = 7.0


def _tiers_arguments(p: argparse.ArgumentParser) -> None:
    model_args(p)
    deployment_args(p, "gpu!", "weight_dtype")
    p.add_argument("--prefix-tokens", type=positive_int, required=True, help="one prefix")
    p.add_argument(
        "--active", type=positive_int, required=True, help="conversations whose prompts return"
    )
    p.add_argument("--cpu-gib", type=float, default=0.0, help="CPU memory for the cache, per GPU")
    p.add_argument("--cpu-link", type=key_arg, default="pcie5-x16")
    p.add_argument("--nvme-gib", type=float, default=0.0, help="local NVMe for the cache, per GPU")
    p.add_argument("--nvme-gbs", type=float, default=NVME_GBS, help="its read rate, GB/s")
    p.add_argument("--remote-gib", type=float, default=0.0, help="a remote store, per GPU")
    p.add_argument("--remote-link", type=key_arg, default="ib-ndr-400")


@command(
    "tiers",
    "offload tiers: how many returning prefixes GPU, CPU, NVMe and a remote store hold, "
    "and the time to first token a hit saves",
    _tiers_arguments,
)
def cmd_tiers(args):
    from ..cache.tiers import TierSpec, tiers
    from ..core.units import GiB
    from ..engines.budget import budget
    from .common import weights_of

    spec, wd, ed, _ = load_model(args)
    gpu = registry().gpu(args.gpu)
    for flag in ("cpu_gib", "nvme_gib", "remote_gib"):
        v = getattr(args, flag)
        if not 0 <= v <= 1e6:
            raise ValueError(f"--{flag.replace('_', '-')}: give 0 to 1,000,000 GiB, got {v:g}")
    if not 0 < args.nvme_gbs <= 1e4:
        raise ValueError(f"--nvme-gbs: give a read rate above 0 GB/s, got {args.nvme_gbs:g}")
    from ..cache.deployment import Deployment
    from ..cache.kv import kv_cache

    w, _ = weights_of(args, spec, wd, ed)
    dep = Deployment(spec=spec, gpu=gpu, weights=w, tp=args.tp).but(kv_dtype=args.kv_dtype)
    pool = max(0, budget(dep, args.prefix_tokens, find_max_context=False).kv_pool_bytes)
    size = kv_cache(spec, args.prefix_tokens, 1, args.kv_dtype, tp=args.tp).total_bytes
    peak = gpu.peak_tflops(w.dtype)
    if peak is None:
        raise ValueError(f"{gpu.name}: the registry gives no dense peak to time the recompute")
    redo = prefill(spec, args.prefix_tokens, peak, mfu=DEFAULT_MFU, tp=args.tp).time_s
    cpu, remote = registry().link(args.cpu_link), registry().link(args.remote_link)
    specs = [
        TierSpec(name="GPU memory", capacity_bytes=pool, link_gbs=None),
        TierSpec(
            name=f"CPU memory ({cpu.name})",
            capacity_bytes=int(args.cpu_gib * GiB),
            link_gbs=cpu.gbs,
        ),
        TierSpec(
            name=f"local NVMe ({args.nvme_gbs:g} GB/s)",
            capacity_bytes=int(args.nvme_gib * GiB),
            link_gbs=args.nvme_gbs,
        ),
        TierSpec(
            name=f"remote store ({remote.name})",
            capacity_bytes=int(args.remote_gib * GiB),
            link_gbs=remote.gbs,
        ),
    ]
    r = tiers(args.prefix_tokens, size, args.active, redo, specs)
    out = r.to_dict() | {"gpu": gpu.key, "tp": args.tp}
    text = [
        f"{spec.name} on {gpu.name}: {args.active:,} conversations return with a prefix of "
        f"{args.prefix_tokens:,} tokens ({fmt_bytes(size)} of cache per GPU); recomputing one "
        f"takes {fmt_seconds(redo)} (MFU {DEFAULT_MFU:g})"
    ]
    for t in r.tiers:
        if not t.capacity_bytes:
            continue
        how = "already on the GPU" if not t.reload_s else f"reload {fmt_seconds(t.reload_s)}"
        text.append(
            f"  {t.name}: {fmt_bytes(t.capacity_bytes)} holds {t.prefixes:,} prefixes; "
            f"{t.hit_share:.0%} of returning prompts find theirs here ({how}, saves "
            f"{fmt_seconds(t.saved_s)} each)"
        )
    text.append(
        f"  hit rate {r.hit_rate:.0%}; time to first token saved {fmt_seconds(r.mean_saved_s)} "
        "on average over returning prompts (the GPU's pool counted whole: no request running)"
    )
    return out, text


def _routing_arguments(p: argparse.ArgumentParser) -> None:
    model_args(p)
    deployment_args(p, "gpu!", "weight_dtype")
    p.add_argument("--prefix-tokens", type=positive_int, required=True, help="one prefix")
    p.add_argument("--prefixes", type=positive_int, required=True, help="distinct prefixes")
    p.add_argument("--replicas", type=positive_int, required=True)
    p.add_argument("--zipf", type=float, default=0.0, help="popularity ~ 1 / rank^s (0: all alike)")
    p.add_argument("--target", type=float, default=0.9, help="hit rate to size the pool for")
    p.add_argument(
        "--requests",
        type=positive_int,
        default=None,
        help="a run of this many requests: count each replica's first miss of each prefix",
    )


@command(
    "routing",
    "prefix reuse across replicas: random vs prefix-aware routing, hit rate and pool",
    _routing_arguments,
)
def cmd_routing(args):
    from ..cache.deployment import Deployment
    from ..cache.kv import kv_cache
    from ..cache.routing import routing
    from ..engines.budget import budget
    from .common import weights_of

    spec, wd, ed, _ = load_model(args)
    gpu = registry().gpu(args.gpu)
    w, _ = weights_of(args, spec, wd, ed)
    dep = Deployment(spec=spec, gpu=gpu, weights=w, tp=args.tp).but(kv_dtype=args.kv_dtype)
    pool = max(0, budget(dep, args.prefix_tokens, find_max_context=False).kv_pool_bytes)
    size = kv_cache(spec, args.prefix_tokens, 1, args.kv_dtype, tp=args.tp).total_bytes
    r = routing(args.prefixes, args.replicas, pool // size, args.zipf, args.target, args.requests)
    out = r.to_dict() | {"prefix_bytes": size, "pool_bytes": pool}

    def need(n: int | None) -> str:
        if n is None:
            return "never (more than every prefix)"
        return f"{n:,} prefixes ({fmt_bytes(n * size)} per GPU)"

    text = [
        f"{spec.name} on {gpu.name} x {args.replicas} replicas: {args.prefixes:,} prefixes of "
        f"{args.prefix_tokens:,} tokens ({fmt_bytes(size)} each per GPU), popularity "
        + ("all alike" if not args.zipf else f"Zipf {args.zipf:g}"),
        f"  each replica's pool ({fmt_bytes(pool)}) keeps {r.kept_per_replica:,} of them",
        f"  random routing: hit rate {r.random_hit_rate:.1%} (every replica keeps the same ones)",
        f"  prefix-aware routing: hit rate {r.aware_hit_rate:.1%} (the replicas split them)",
        f"  for {r.target:.0%}: a replica keeps {need(r.random_needs)} under random routing, "
        f"{need(r.aware_needs)} under prefix-aware routing",
    ]
    if r.requests is not None:
        text.append(
            f"  over a run of {r.requests:,} requests, with each replica's first miss of each "
            f"prefix: random {r.random_hit_rate_run:.1%}, prefix-aware {r.aware_hit_rate_run:.1%} "
            "(requests that arrive together miss together: a burst does worse)"
        )
    return out, text
