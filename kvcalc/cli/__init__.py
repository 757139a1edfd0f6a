"""``python -m kvcalc``; ``main`` is the console script's entry point (pyproject.toml)."""

from .commands import main

__all__ = ["main"]
