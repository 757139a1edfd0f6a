"""Units and input checks.

GPUs are sold in GB (10^9 bytes) and GB/s; memory tools and this project's cache figures use
GiB (2^30 bytes). Every formatted number says which.
"""

from __future__ import annotations

import math

KiB = 2**10
MiB = 2**20
GiB = 2**30
GB = 10**9


def check_int(name: str, value: object, lo: int, hi: int) -> int:
    """``value`` as an int in [lo, hi], or ValueError that names the input."""
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    if value < lo or value > hi:
        raise ValueError(f"{name} must be between {lo:,} and {hi:,}, got {value:,}")
    return value


def check_float(name: str, value: object, lo: float, hi: float, *, lo_open: bool = False) -> float:
    """``value`` as a finite float in [lo, hi] (or (lo, hi] with lo_open), else ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if value < lo or value > hi or (lo_open and value == lo):
        low = f"above {lo:g}" if lo_open else f"at least {lo:g}"
        raise ValueError(f"{name} must be {low} and at most {hi:g}, got {value:g}")
    return value


def fmt_bytes(n: float) -> str:
    """Bytes in the largest binary unit that keeps the number >= 1: B, KiB, MiB, GiB, TiB."""
    for unit, size in (("TiB", 2**40), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(n) >= size:
            return f"{n / size:,.2f} {unit}"
    return f"{n:,.0f} B"


def fmt_gib(n: float, digits: int = 2) -> str:
    return f"{n / GiB:,.{digits}f} GiB"


def fmt_gb(n: float, digits: int = 2) -> str:
    return f"{n / GB:,.{digits}f} GB"


def fmt_seconds(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:,.1f} µs"
    if s < 1:
        return f"{s * 1e3:,.2f} ms"
    return f"{s:,.2f} s"


MAX_GPUS = 4096  # tp or pp: past the largest cluster any engine runs one model on


def check_parallel(tp: object, pp: object = 1) -> tuple[int, int]:
    """Tensor and pipeline parallel sizes as whole numbers in [1, MAX_GPUS] (2.0 is taken as 2),
    or ValueError that names the input: the one rule for tp and pp, wherever they come in."""
    return (
        check_int("tensor parallel size", tp, 1, MAX_GPUS),
        check_int("pipeline parallel size", pp, 1, MAX_GPUS),
    )
