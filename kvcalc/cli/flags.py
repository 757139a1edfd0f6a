"""The flags: argument types that bound them (each refusal says what to type), and the
deployment flags, declared once (``FLAGS``) and read once into a Deployment."""

from __future__ import annotations

import argparse
import math
import re
from typing import Any

from ..cache.deployment import Deployment
from ..cache.weight_bytes import MAX_WEIGHT_BITS, MIN_WEIGHT_BITS, Weights
from ..config.catalog import registry
from ..core.dtypes import KV_DTYPES, WEIGHT_DTYPES
from ..core.model import ModelSpec
from ..core.text import short as _short
from ..core.units import GiB
from ..engines import vllm
from ..engines.budget import DEFAULT_RESERVE_BYTES

# Bounds of the arguments, stated in their errors. Each is far above any real value and keeps
# the arithmetic finite: budget() and vllm.predict() take at most 2**50 bytes of memory.
MAX_GIB = 2**20  # 1,048,576 GiB = 1 PiB
MAX_GBS = 1e7  # GB/s: 10 PB/s, 1,000 x an HBM3e GPU
MIN_GBS = 1e-3  # GB/s: 1 MB/s; far less makes step times overflow to infinity
MIN_MFU = 1e-3  # 0.1% of the peak; far less makes the prefill time overflow
MAX_COUNT = 10**12  # tokens, sequences, sizes; each calculation then names its own limit
MAX_KEY_CHARS = 200  # a registry key, a Hub id, a version
MAX_PATH_CHARS = 4096  # PATH_MAX on Linux


def fmt_num(x: float) -> str:
    return f"{x:,.0f}" if x == int(x) and abs(x) >= 1 else f"{x:g}"


def int_arg(lo: int = 1, hi: int = MAX_COUNT):
    """An argparse type: a whole number in [lo, hi]; 1,000 and 1_000 are read as 1000."""

    def parse(text: str) -> int:
        t = text.strip().replace(",", "").replace("_", "")
        if not re.fullmatch(r"[+-]?[0-9]+", t):
            raise argparse.ArgumentTypeError(f"expected a whole number, got {_short(text)}")
        digits = t.lstrip("+-").lstrip("0")
        if len(digits) > len(str(max(abs(lo), abs(hi)))):  # before int(): 5,000 digits raise
            side = f"at least {lo:,}" if t.startswith("-") else f"at most {hi:,}"
            raise argparse.ArgumentTypeError(
                f"must be {side}, got a number of {len(digits):,} digits"
            )
        v = int(t)
        if v < lo:
            raise argparse.ArgumentTypeError(f"must be at least {lo:,}, got {v:,}")
        if v > hi:
            raise argparse.ArgumentTypeError(f"must be at most {hi:,}, got {v:,}")
        return v

    return parse


def _number(lo: float, hi: float, above: bool, expected: str, shown, lead="", tail=""):
    """An argparse type: a finite number in [lo, hi] (in (lo, hi] with ``above``); a refusal
    says what to type, and the text typed as ``shown`` gives it."""
    side = "above" if above else "at least"
    bound = f"{lead}{side} {fmt_num(lo)} and at most {fmt_num(hi)}{tail}"

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {shown(text)}") from None
        if not math.isfinite(v) or v < lo or v > hi or (above and v == lo):
            raise argparse.ArgumentTypeError(f"must be {bound}, got {shown(text)}")
        return v

    return parse


def float_arg(hi: float, *, lo: float = 0.0, above: bool = False, unit: str = "", name: str = ""):
    """A finite number in [lo, hi] (in (lo, hi] with ``above``)."""
    tail = unit + (f" ({name})" if name else "")
    return _number(lo, hi, above, "a number", _short, "a number ", tail)


def number_arg(what: str, lo: float, hi: float, unit: str = "", *, lo_open: bool = False):
    """A finite number in [lo, hi] (above lo with ``lo_open``) in ``unit``: simulate's wording."""
    expected = "a number" + (f" of {what}" if what else "")
    tail = f" {unit}" if unit else ""
    return _number(lo, hi, lo_open, expected, lambda text: repr(text[:40]), tail=tail)


def text_arg(limit: int, what: str):
    """An argparse type: a string of at most ``limit`` characters, without NUL bytes."""

    def parse(text: str) -> str:
        if len(text) > limit:
            raise argparse.ArgumentTypeError(
                f"{what} is at most {limit:,} characters, got {len(text):,}"
            )
        if "\0" in text:
            raise argparse.ArgumentTypeError(f"{what} cannot hold a NUL character")
        return text

    return parse


positive_int = int_arg(1)
count0 = int_arg(0)
gib_arg = float_arg(MAX_GIB, unit=" GiB")
gib_pos_arg = float_arg(MAX_GIB, above=True, unit=" GiB")
gbs_arg = float_arg(MAX_GBS, lo=MIN_GBS, unit=" GB/s")
mfu_arg = float_arg(1.0, lo=MIN_MFU, name="a fraction of the dense peak")
mem_util_arg = float_arg(1.0, above=True, name="vLLM's gpu_memory_utilization")
weight_bits_arg = float_arg(MAX_WEIGHT_BITS, lo=MIN_WEIGHT_BITS, name="bits per weight")
key_arg = text_arg(MAX_KEY_CHARS, "a key")
path_arg = text_arg(MAX_PATH_CHARS, "a path")
share_arg = number_arg("", 0.0, 1.0, lo_open=True)

# Each deployment flag once: its argparse keywords, under its Namespace name (--kv-dtype: kv_dtype).
FLAGS: dict[str, dict[str, Any]] = {
    # the model, as its config says or as told
    "model": dict(type=key_arg, help="registry key (see `python -m kvcalc models`)"),
    "config": dict(metavar="PATH", type=path_arg, help="a Hugging Face config.json file"),
    "ignore_sliding_window": dict(
        action="store_true",
        help="treat sliding-window layers as full attention (as some runtimes do)",
    ),
    "unverified": dict(
        action="store_true",
        help="read a config with fields kvcalc does not understand as a standard "
        "decoder anyway; every figure is then labelled UNVERIFIED",
    ),
    "speculative_config": dict(
        metavar="JSON",
        type=text_arg(MAX_PATH_CHARS, "a speculative config"),
        help='speculative decoding, as vLLM takes it: {"method": "mtp", '
        '"num_speculative_tokens": 2} (the model\'s own MTP layers); an EAGLE head or a '
        'draft model: {"method": "eagle", "model": "head/config.json"} (a config.json path '
        "or a registry key). Its layers' cache joins the pool",
    ),
    # its weights
    "weights_gib": dict(type=gib_arg, help="weights of the whole model, GiB"),
    "weight_dtype": dict(
        choices=("auto",) + WEIGHT_DTYPES,
        default="auto",
        help="format of the weights (auto: the checkpoint's own)",
    ),
    "weight_bits": dict(
        type=weight_bits_arg,
        help="bits per weight of a quantised checkpoint, scales included (GGUF "
        "Q4_K_M: about 4.84); it computes in 16 bits",
    ),
    "expert_weight_dtype": dict(
        choices=WEIGHT_DTYPES,
        help="format of the routed experts when it is not the other weights' (Kimi-K2.5's "
        "INT4 weight-only experts beside 16-bit attention: --weight-dtype bf16 "
        "--expert-weight-dtype int4)",
    ),
    "expert_gemm_dtype": dict(
        choices=("bf16", "fp8", "fp4"),
        help="format the routed experts' GEMMs compute in where it is not their weights' "
        "(W4A8: 4-bit experts times 8-bit activations on FP8 tensor cores, as TensorRT-LLM runs "
        "MXFP4 experts with MXFP8 activations: --expert-weight-dtype mxfp4 --expert-gemm-dtype "
        "fp8)",
    ),
    # the GPU: a registry key, or its memory or bandwidth alone
    "gpu": dict(type=key_arg, help="GPU key (see `python -m kvcalc gpus`)"),
    "vram_gib": dict(type=gib_pos_arg, help="GPU memory in GiB"),
    "bandwidth_gbs": dict(type=gbs_arg, help="memory bandwidth, GB/s (10^9 B/s)"),
    # how it is split over GPUs
    "tp": dict(type=positive_int, default=1, help="tensor parallel size"),
    "pp": dict(type=positive_int, default=1, help="pipeline parallel size"),
    "attention_dp": dict(
        type=int_arg(1, 64),
        default=1,
        help="attention data parallel ranks, each of --tp GPUs with its own requests and "
        "caches; the experts split over every GPU (tp x attention-dp)",
    ),
    "ep": dict(
        type=int_arg(1, 512),
        default=1,
        help="expert parallel size: whole experts per GPU, tokens exchanged by all-to-all "
        "before and after each MoE layer",
    ),
    # the cache's format (CacheFormat)
    "kv_dtype": dict(default="bf16", choices=KV_DTYPES),
    "kv_scales": dict(
        action="store_true",
        help="count one fp32 scale per K/V vector for quantized KV (fp8/int8/int4)",
    ),
    "mamba_ssm_cache_dtype": dict(
        choices=vllm.MAMBA_DTYPE_CHOICES,
        help="SSM state dtype (default: as vLLM reads the config: auto = the conv "
        "state's, NemotronH/Qwen3.5 from config.json)",
    ),
    "mamba_cache_dtype": dict(
        choices=vllm.MAMBA_DTYPE_CHOICES,
        help="conv state dtype, and the SSM state's while that is auto (default "
        "auto: the model's dtype)",
    ),
    # the engine's arguments (EngineArgs; vLLM's defaults where not given)
    "gpu_mem_util": dict(type=mem_util_arg, default=None),
    "reserve_gib": dict(
        type=gib_arg,
        default=DEFAULT_RESERVE_BYTES / GiB,
        help="activations, CUDA context and graphs, per GPU (default 2 GiB)",
    ),
    "block_size": dict(type=positive_int, default=None),
    "max_num_seqs": dict(type=positive_int, default=None),
    "max_num_batched_tokens": dict(type=positive_int, default=None),
    "vllm_version": dict(type=key_arg, default=None),
    "enable_prefix_caching": dict(
        action=argparse.BooleanOptionalAction,
        help="default: the version's (on for hybrid models from "
        "0.28.0): recurrent groups keep 2 blocks a request",
    ),
    "gdn_prefill_checkpoint": dict(
        action="store_true",
        default=None,
        help="vLLM 0.33.0 on Hopper/Blackwell (FlashInfer Gated DeltaNet prefill): a "
        "third block per recurrent group, blocks a multiple of 64",
    ),
    "usage_context": dict(
        choices=vllm.USAGE_CONTEXTS,
        default="serve",
        help="serve: vllm serve (OpenAI server); llm: the LLM class (larger batch defaults)",
    ),
    "num_draft_layers": dict(
        type=count0,
        default=0,
        help="layers of the target's attention a drafter adds (--speculative-config says more)",
    ),
    "json": dict(action="store_true", help="print one JSON object"),
}


def deployment_args(p, *names: str, **changes: dict) -> None:
    """Declare ``FLAGS[name]`` on ``p`` for each name, in --help's order: "a|b" a mutually
    exclusive group, a trailing "!" required; ``changes`` replace a flag's keywords here."""
    for name in names:
        required, keys = name.endswith("!"), name.rstrip("!").split("|")
        into = p.add_mutually_exclusive_group(required=required) if len(keys) > 1 else p
        for key in keys:
            kw = {"flags": ("--" + key.replace("_", "-"),), **FLAGS[key], **changes.get(key, {})}
            if required and len(keys) == 1:
                kw["required"] = True
            into.add_argument(*kw.pop("flags"), **kw)


def model_args(p: argparse.ArgumentParser, kv: bool = True, parallel: bool = True) -> None:
    kv_flags = ("kv_dtype", "kv_scales") if kv else ()
    split = ("tp", "pp") if parallel else ()
    model = ("model|config!", "ignore_sliding_window", "unverified")
    deployment_args(p, *model, *kv_flags, *split, "json")


# The Deployment fields a flag gives as it is (in GiB: memory, weights and reserve, below), and
# the flags named otherwise than their field.
_FIELDS = (
    "tp pp attention_dp ep kv_dtype scales mamba_cache_dtype mamba_ssm_cache_dtype version "
    "gpu_memory_utilization block_size max_num_seqs max_num_batched_tokens enable_prefix_caching "
    "gdn_prefill_checkpoint usage_context num_draft_layers"
).split()
_FLAG_OF = dict(scales="kv_scales", version="vllm_version", gpu_memory_utilization="gpu_mem_util")


def deployment_from(
    args: argparse.Namespace,
    spec: ModelSpec,
    weights: Weights | None = None,
    **changes: Any,
) -> Deployment:
    """The Deployment of the flags in ``args`` for ``spec`` with ``weights``; a flag missing or
    None takes the default; ``changes`` are the command's own (``Deployment.but``)."""
    a = vars(args)
    gpu = registry().gpu(a["gpu"]) if a.get("gpu") else None
    given = {field: a.get(_FLAG_OF.get(field, field)) for field in _FIELDS}
    given |= {
        "memory_bytes": _bytes(a.get("vram_gib")) if gpu is None else None,
        "weights_bytes": _bytes(a.get("weights_gib")),
        "reserve_bytes": _bytes(a.get("reserve_gib")),
    }
    dep = Deployment(spec=spec, gpu=gpu, weights=weights)
    return dep.but(**{k: v for k, v in (given | changes).items() if v is not None})


def _bytes(gib: float | None) -> int | None:
    return None if gib is None else round(gib * GiB)
