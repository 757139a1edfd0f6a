"""The command registry: a command is its name, its one-line help, a function that adds its
arguments and (decorated) the function that runs it; ``build_parser`` makes the parser from it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from .common import Parser


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], tuple[dict, list[str]]]


COMMANDS: dict[str, Command] = {}  # in the order of `python -m kvcalc --help`


def command(name: str, help: str, arguments: Callable[[argparse.ArgumentParser], None]):
    def register(run):
        COMMANDS[name] = Command(name=name, help=help, arguments=arguments, run=run)
        return run

    return register


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="python -m kvcalc",
        description="Exact KV-cache sizes, GPU budgets and decode step times.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for c in COMMANDS.values():
        c.arguments(sub.add_parser(c.name, help=c.help))
    return parser
