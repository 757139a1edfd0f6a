"""What the commands share: the output's safety (one-line errors, inert printed lines, JSON
without NaN), and the model, weights and GPU of the flags read (their flags: flags.py)."""

from __future__ import annotations

import argparse
import json
import math
from typing import NamedTuple

from ..cache.weight_bytes import Weights, weights_at_bits, weights_given, weights_in
from ..config.catalog import registry
from ..config.hfconfig import UNMODELLED, checkpoint_format, load_config_file, spec_from_config
from ..core.model import ModelSpec
from ..core.speculative import speculation_from, with_speculation
from ..core.units import GiB
from .flags import MAX_PATH_CHARS

MAX_MESSAGE_CHARS = 600  # an error line, whatever it quotes


def one_line(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """An error message as one printable line of at most ``limit`` characters."""
    message = message[: 4 * limit]
    message = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
    if len(message) > limit:
        message = message[: limit - 165] + " ... " + message[-160:]
    return message


MAX_LINE_CHARS = 4000  # one printed line; a user's string can be far longer


def inert(line: str, limit: int = MAX_LINE_CHARS) -> str:
    """One output line with its control characters escaped, cut to ``limit`` characters."""
    line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in line[: 2 * limit])
    return line if len(line) <= limit else line[: limit - 4] + " ..."


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, status 2
        self.exit(2, one_line(f"kvcalc: error: {message}") + "\n")


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


class Model(NamedTuple):
    spec: ModelSpec
    weight_dtype: str
    expert_weight_dtype: str | None
    name: str  # the label the text gives it


def load_model(args) -> Model:
    """The model of --model or --config."""
    honor = not getattr(args, "ignore_sliding_window", False)
    if args.model:
        m = registry().model(args.model)
        spec = (
            m.spec if honor else spec_from_config(m.config, name=m.name, honor_sliding_window=False)
        )
        return Model(spec, m.weight_dtype, m.expert_weight_dtype, m.name)
    cfg = load_config_file(args.config)
    spec = spec_from_config(
        cfg,
        name=args.config,
        honor_sliding_window=honor,
        unverified=getattr(args, "unverified", False),
    )
    wd, ed = checkpoint_format(cfg)
    args._unverified_fields = spec.unverified
    return Model(spec, wd, ed, args.config)


def weights_of(args, spec, wd, ed) -> tuple[Weights, int]:
    """(weights in the chosen format, resident bytes: --weights-gib when given)."""
    given = getattr(args, "weights_gib", None)
    if given is not None and (spec.params is None or wd == UNMODELLED):
        # Parameters not counted: the size given is all kvcalc knows of the weights.
        w = weights_given(round(given * GiB), "bf16" if wd == UNMODELLED else wd)
        return w, w.bytes
    gpu = gpu_of(args)  # "auto": the checkpoint as vLLM loads it on this GPU (FP32 in 16 bits)
    half = gpu.half if gpu else "bf16"
    if getattr(args, "weight_bits", None) is not None:
        w = weights_at_bits(spec, args.weight_bits, half=half)
        return w, w.bytes
    w = weights_in(spec, getattr(args, "weight_dtype", "auto"), wd, ed, half=half)
    return w, w.bytes if given is None else round(given * GiB)


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


def jsonable(obj, limit: int = 10 * MAX_LINE_CHARS):
    """``obj`` for --json: non-finite numbers as null, "inf", "-inf"; strings cut to ``limit``."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, str):
        return obj if len(obj) <= limit else obj[:limit] + " ..."
    if isinstance(obj, dict):
        return {jsonable(k, limit): jsonable(v, limit) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v, limit) for v in obj]
    return obj
