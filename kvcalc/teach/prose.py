"""The teaching prose as data: templates with named numbers, beside the code that fills them.

Each ``<name>.toml`` in this folder holds the sentences of one part of the teaching: ``tour``
(the guided tour's stops), ``interview``, ``practice``, ``choices`` (the live class's
statements) and ``techniques``. The code computes every number from a core result and fills the
templates with ``str.format`` (``{per:,} B``), so no computed number is written in the text;
docs/teaching.md explains the layout.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any


@lru_cache(maxsize=8)  # one entry a file: tour, interview, practice, choices, techniques
def prose(name: str) -> dict[str, Any]:
    """The templates of ``kvcalc/teach/<name>.toml``, read once."""
    return tomllib.loads(Path(__file__).with_name(f"{name}.toml").read_text(encoding="utf-8"))
