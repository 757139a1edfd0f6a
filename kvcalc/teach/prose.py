"""The teaching prose as data: ``<name>.toml`` templates with named numbers (``{per:,} B``),
filled by the code that computes them (docs/teaching.md)."""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any


@lru_cache(maxsize=8)  # one entry a file: tour, interview, practice, choices, techniques
def prose(name: str) -> dict[str, Any]:
    """The templates of ``kvcalc/teach/<name>.toml``, read once."""
    return tomllib.loads(Path(__file__).with_name(f"{name}.toml").read_text(encoding="utf-8"))
