"""``python -m kvcalc``: the command registry (``commands``) and the commands it holds.

``main`` is the console script's entry point (``kvcalc.cli:main`` in pyproject.toml).
"""

from .commands import main

__all__ = ["main"]
