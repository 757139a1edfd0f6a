"""Small integer arithmetic every layer uses, written once so that a block count or a search
reads the same everywhere: ceiling division (vLLM's ``cdiv``: blocks for a tokens of b per
block) and bisection ("the longest context that fits", "the fewest users that fill the pool").
"""

from __future__ import annotations

from collections.abc import Callable

# Tokens past every window or chunk a config can give (config fields are capped at 10^8 tokens,
# kvcalc.config.limits.MAX_CONTEXT) and past the longest context any search here goes to: at
# this context a layer that still keeps fewer tokens than that keeps a bounded number of them.
UNBOUNDED_CONTEXT = 10**12


def cdiv(a: int, b: int) -> int:
    """ceil(a / b) for ints (b > 0), exactly, without rounding through a float."""
    return -(-a // b)


def last_true(ok: Callable[[int], bool], lo: int, hi: int) -> int:
    """The largest n in [lo, hi) with ``ok(n)``, given ``ok(lo)`` and not ``ok(hi)`` and ``ok``
    true up to some n and false after it. ``ok`` is called about log2(hi - lo) times."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def first_true(ok: Callable[[int], bool], lo: int, hi: int) -> int:
    """The smallest n in (lo, hi] with ``ok(n)``, given not ``ok(lo)`` and ``ok(hi)`` and ``ok``
    false up to some n and true after it: the same bisection as ``last_true``."""
    return last_true(lambda n: not ok(n), lo, hi) + 1
