"""python -m kvcalc <command> [...] [--json]: ``main``, the dispatch, and the commands'
registration in --help's order. --json prints one JSON object; bad arguments exit 2 with one
line on stderr, never a traceback (KVCALC_DEBUG=1 re-raises); a closed pipe ends quietly."""

from __future__ import annotations

import argparse
import json
import os
import sys

from . import simulate as _cli_sim
from . import tour as _cli_tour
from .common import inert, jsonable, one_line
from .registry import COMMANDS, build_parser, command

# Each group registers its commands as it is imported, in --help's order: sizing (kv ...
# offload), catalog (table, models, gpus), checks (measure, quality, vllm, verify).
from . import sizing, catalog, checks  # noqa: F401  # isort: skip
from . import beyond  # noqa: F401  # isort: skip

# The simulator's command lives in its own module; registered here, in --help's order.
command("simulate", _cli_sim.HELP, _cli_sim.add_arguments)(_cli_sim.cmd_simulate)
from . import disagg  # noqa: E402, F401  # isort: skip

command("tour", _cli_tour.HELP, _cli_tour.add_arguments)(_cli_tour.cmd_tour)
command("capacity", _cli_sim.CAPACITY_HELP, _cli_sim.add_capacity_arguments)(_cli_sim.cmd_capacity)


def main(argv: list[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, where a closed pipe can still be caught
    except BrokenPipeError:
        # The reader left (`| head -1`): stdout to devnull, as the signal module's docs' "Note on
        # SIGPIPE" says, so the interpreter's flush at exit fails no more.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return code


_PARSER: dict[tuple[str, ...], argparse.ArgumentParser] = {}


def _parser() -> argparse.ArgumentParser:
    """The command line's parser, built once for the commands registered (building it takes
    about 18 ms, which a sweep of thousands of runs in one process paid each time); a parse
    leaves it as it was, each returning a new namespace."""
    key = tuple(COMMANDS)
    if key not in _PARSER:
        _PARSER.clear()
        _PARSER[key] = build_parser()
    return _PARSER[key]


def _main(argv: list[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        out, text = COMMANDS[args.command].run(args)
    except Exception as exc:
        if os.environ.get("KVCALC_DEBUG") == "1":
            raise  # the traceback, for whoever debugs kvcalc
        if isinstance(exc, ValueError):
            print(one_line(f"kvcalc: error: {exc}"), file=sys.stderr)
            return 2
        # a bug of ours: still one line, never a traceback
        print(
            one_line(f"kvcalc: internal error ({type(exc).__name__}: {exc}); please report it"),
            file=sys.stderr,
        )
        return 1
    unverified = list(getattr(args, "_unverified_fields", ()))
    if getattr(args, "json", False):
        if unverified and isinstance(out, dict):
            out = {"unverified": unverified, **out}
        print(json.dumps(jsonable(out), allow_nan=False))
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
