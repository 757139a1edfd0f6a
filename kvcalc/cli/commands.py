"""Command line: python -m kvcalc <command> [...] [--json].

With --json every command prints exactly one JSON object. Bad arguments exit with status 2 and
a one-line message on stderr, never a traceback.

The commands live in one module per group (sizing, catalog, checks; simulate and tour); this
module registers them in the order of ``python -m kvcalc --help`` and holds ``main``, the
dispatch. The registry itself (``command``, ``COMMANDS``, ``build_parser``) is in registry.py.
"""

from __future__ import annotations

import json
import sys

from . import simulate as _cli_sim
from . import tour as _cli_tour
from .common import (
    cut_strings,
    gpu_of,
    inert,
    int_arg,
    jsonable,
    key_arg,
    load_model,
    model_args,
    one_line,
    path_arg,
    weight_args,
    weights_of,
)
from .registry import COMMANDS, build_parser, command

# Each group registers its commands as it is imported, so these imports keep --help's order.
from . import sizing  # isort: skip  (kv, budget, step-time, prefill, passes, offload)
from . import catalog  # isort: skip  (table, models, gpus)
from . import checks  # isort: skip  (measure, quality, vllm, verify)

GROUPS = (sizing, catalog, checks)

__all__ = ["main", "command", "COMMANDS", "build_parser", "GROUPS"]


# The simulator's command lives in its own module; registered here, in --help's order.
command(
    "simulate",
    _cli_sim.HELP,
    lambda p: _cli_sim.add_arguments(p, key=key_arg, int_arg=int_arg, path=path_arg),
)(_cli_sim.cmd_simulate)
command(
    "tour",
    _cli_tour.HELP,
    lambda p: _cli_tour.add_arguments(
        p, model_args=model_args, weight_args=weight_args, key=key_arg
    ),
)(lambda args: _cli_tour.cmd_tour(args, load_model=load_model, weights=weights_of, gpu=gpu_of))
command(
    "capacity",
    _cli_sim.CAPACITY_HELP,
    lambda p: _cli_sim.add_capacity_arguments(p, key=key_arg, int_arg=int_arg),
)(_cli_sim.cmd_capacity)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        out, text = COMMANDS[args.command].run(args)
    except ValueError as exc:
        print(one_line(f"kvcalc: error: {exc}"), file=sys.stderr)
        return 2
    except Exception as exc:  # a bug of ours: still one line, never a traceback
        print(
            one_line(f"kvcalc: internal error ({type(exc).__name__}: {exc}); please report it"),
            file=sys.stderr,
        )
        return 1
    unverified = list(getattr(args, "_unverified_fields", ()))
    if getattr(args, "json", False):
        if unverified and isinstance(out, dict):
            out = {"unverified": unverified, **out}
        print(json.dumps(cut_strings(jsonable(out)), allow_nan=False))
    else:
        if unverified:
            text = [
                f"UNVERIFIED estimate: config fields not understood "
                f"({', '.join(unverified[:8])}{' ...' if len(unverified) > 8 else ''}) "
                "were left out of the reading",
                *text,
            ]
        print("\n".join(inert(line) for piece in text for line in str(piece).split("\n")))
    return 0
