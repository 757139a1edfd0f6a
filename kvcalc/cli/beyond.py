"""The cache beyond one GPU (issue 43): ``transfer``, the bytes a disaggregated deployment moves
from the prefill GPUs to the decode GPUs for one prompt, and how long that takes."""

from __future__ import annotations

import argparse

from ..cache.transfer import transfer
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
        "rate",
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
