"""Text for messages that may quote what a user typed or uploaded."""

from __future__ import annotations

import math
from typing import Any

SHORT = 200  # characters of a user's value that an error message echoes


def short(value: Any, limit: int = SHORT) -> str:
    """repr(value) for an error message, cut to about ``limit`` characters: a 190,000-character
    field value or a 5,000-digit number must not fill the screen."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 3 * limit:
        # repr() of an int past 4,300 digits raises; the length is what matters anyway
        digits = int(value.bit_length() * math.log10(2)) + 1
        return f"{'minus ' if value < 0 else ''}a number of about {digits:,} digits"
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # ints past Python's 4,300-digit limit, deep nesting
        return f"a {type(value).__name__} too large to show"
    return text if len(text) <= limit else text[:limit] + "..."
