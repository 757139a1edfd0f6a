"""What the commands share: the bounds of their arguments and the argument types that enforce
them, the model / weights / GPU arguments and their reading, and the output's safety (one-line
errors, inert printed lines, JSON without NaN)."""

from __future__ import annotations

import argparse
import json
import math
import re

from ..cache.weight_bytes import (
    MAX_WEIGHT_BITS,
    MIN_WEIGHT_BITS,
    Weights,
    weights_at_bits,
    weights_given,
    weights_in,
)
from ..config.catalog import registry
from ..config.hfconfig import UNMODELLED, checkpoint_format, load_config_file, spec_from_config
from ..core.dtypes import KV_DTYPES, WEIGHT_DTYPES
from ..core.model import ModelSpec
from ..core.speculative import speculation_from, with_speculation
from ..core.text import short as _short
from ..core.units import GiB

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


def one_line(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """An error message as one printable line of at most ``limit`` characters: values a user
    typed may hold newlines, escape sequences or 100,000 characters."""
    message = message[: 4 * limit]
    message = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
    if len(message) > limit:
        message = message[: limit - 165] + " ... " + message[-160:]
    return message


MAX_LINE_CHARS = 4000  # one printed line; a user's string can be far longer


def inert(line: str, limit: int = MAX_LINE_CHARS) -> str:
    """One output line with every control character shown as an escape (``\x1b``), so that a
    config's field names or a log's lines cannot retitle, clear or recolour a terminal; cut to
    ``limit`` characters."""
    line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in line[: 2 * limit])
    return line if len(line) <= limit else line[: limit - 4] + " ..."


def cut_strings(obj, limit: int = 10 * MAX_LINE_CHARS):
    """JSON output with every string cut to ``limit`` characters (json.dumps escapes control
    characters itself)."""
    if isinstance(obj, str):
        return obj if len(obj) <= limit else obj[:limit] + " ..."
    if isinstance(obj, dict):
        return {cut_strings(k, limit): cut_strings(v, limit) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [cut_strings(v, limit) for v in obj]
    return obj


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, status 2
        self.exit(2, one_line(f"kvcalc: error: {message}") + "\n")


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


def float_arg(hi: float, *, lo: float = 0.0, above: bool = False, unit: str = "", name: str = ""):
    """An argparse type: a finite number in [lo, hi] (in (lo, hi] with ``above``)."""
    bound = f"{'above' if above else 'at least'} {fmt_num(lo)} and at most {fmt_num(hi)}{unit}"
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


def unverified_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--unverified",
        action="store_true",
        help="read a config with fields kvcalc does not understand as a standard "
        "decoder anyway; every figure is then labelled UNVERIFIED",
    )


def model_args(p: argparse.ArgumentParser, kv=True, parallel=True):
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", type=key_arg, help="registry key (see `python -m kvcalc models`)")
    src.add_argument(
        "--config", metavar="PATH", type=path_arg, help="a Hugging Face config.json file"
    )
    p.add_argument(
        "--ignore-sliding-window",
        action="store_true",
        help="treat sliding-window layers as full attention (as some runtimes do)",
    )
    unverified_arg(p)
    if kv:
        p.add_argument("--kv-dtype", default="bf16", choices=KV_DTYPES)
        p.add_argument(
            "--kv-scales",
            action="store_true",
            help="count one fp32 scale per K/V vector for quantized KV (fp8/int8/int4)",
        )
    if parallel:
        p.add_argument("--tp", type=positive_int, default=1, help="tensor parallel size")
        p.add_argument("--pp", type=positive_int, default=1, help="pipeline parallel size")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def speculative_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--speculative-config",
        metavar="JSON",
        type=text_arg(MAX_PATH_CHARS, "a speculative config"),
        default=None,
        help='speculative decoding, as vLLM takes it: {"method": "mtp", '
        '"num_speculative_tokens": 2} (the model\'s own MTP layers); an EAGLE head or a draft '
        'model: {"method": "eagle", "model": "head/config.json"} (a config.json path or a '
        "registry key). Its layers' cache joins the pool",
    )


def with_speculative(args, spec: ModelSpec) -> ModelSpec:
    """``spec`` with the drafter of --speculative-config, when one is given."""
    text = getattr(args, "speculative_config", None)
    if not text:
        return spec
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"--speculative-config is not JSON ({exc.msg}): write it as vLLM takes it, e.g. "
            '\'{"method": "mtp", "num_speculative_tokens": 2}\''
        ) from None
    draft = None
    model = config.get("model") if isinstance(config, dict) else None
    if model is not None:
        if not isinstance(model, str) or not model or len(model) > MAX_PATH_CHARS:
            raise ValueError(
                'the speculative config\'s "model" must be a config.json path or a key'
            )
        if model in registry().models:
            draft = registry().model(model).spec
        else:
            draft = spec_from_config(load_config_file(model), name=model)
    return with_speculation(spec, speculation_from(config, draft))


def weight_args(p):
    g = p.add_mutually_exclusive_group()
    g.add_argument("--weights-gib", type=gib_arg, help="weights of the whole model, GiB")
    g.add_argument(
        "--weight-dtype",
        choices=("auto",) + WEIGHT_DTYPES,
        default="auto",
        help="format of the weights (auto: the checkpoint's own)",
    )
    g.add_argument(
        "--weight-bits",
        type=weight_bits_arg,
        default=None,
        help="bits per weight of a quantised checkpoint, scales included (GGUF "
        "Q4_K_M: about 4.84); it computes in 16 bits",
    )


def gpu_args(p, memory=True):
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--gpu", type=key_arg, help="GPU key (see `python -m kvcalc gpus`)")
    if memory:
        g.add_argument("--vram-gib", type=gib_pos_arg, help="GPU memory in GiB")
    else:
        g.add_argument("--bandwidth-gbs", type=gbs_arg, help="memory bandwidth, GB/s (10^9 B/s)")


# ---------------------------------------------------------------------------------------------


def load_model(args) -> tuple[ModelSpec, str, str | None, str]:
    """(spec, weight dtype, expert dtype, label) from --model or --config."""
    honor = not getattr(args, "ignore_sliding_window", False)
    if args.model:
        m = registry().model(args.model)
        spec = (
            m.spec if honor else spec_from_config(m.config, name=m.name, honor_sliding_window=False)
        )
        return spec, m.weight_dtype, m.expert_weight_dtype, m.name
    cfg = load_config_file(args.config)
    spec = spec_from_config(
        cfg,
        name=args.config,
        honor_sliding_window=honor,
        unverified=getattr(args, "unverified", False),
    )
    wd, ed = checkpoint_format(cfg)
    args._unverified_fields = spec.unverified
    return spec, wd, ed, args.config


def weights_of(args, spec, wd, ed) -> tuple[Weights, int]:
    """(weights in the chosen format, resident bytes: --weights-gib when given)."""
    given = getattr(args, "weights_gib", None)
    if given is not None and (spec.params is None or wd == UNMODELLED):
        # Parameters not counted: the size given is all kvcalc knows of the weights.
        w = weights_given(round(given * GiB), "bf16" if wd == UNMODELLED else wd)
        return w, w.bytes
    gpu = gpu_of(args)  # "auto": the checkpoint as vLLM loads it on this GPU (FP32 in 16 bits)
    if getattr(args, "weight_bits", None) is not None:
        w = weights_at_bits(spec, args.weight_bits, half=gpu.half if gpu else "bf16")
        return w, w.bytes
    w = weights_in(
        spec, getattr(args, "weight_dtype", "auto"), wd, ed, half=gpu.half if gpu else "bf16"
    )
    if given is not None:
        return w, round(given * GiB)
    return w, w.bytes


def gpu_of(args):
    return registry().gpu(args.gpu) if getattr(args, "gpu", None) else None


def spec_said(spec: ModelSpec) -> tuple[dict, list[str]]:
    """The spec's notes and assumptions, for --json and for the text."""
    out = {
        "notes": list(spec.notes),
        "assumptions": list(spec.assumptions),
        "params_error": spec.params_error,
    }
    text = [f"  note: {n}" for n in spec.notes] + [f"  assumed: {a}" for a in spec.assumptions]
    return out, text


def jsonable(obj):
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    return obj
