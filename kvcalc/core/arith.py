"""Small integer arithmetic every layer uses: ceiling division and bisection.

Written once here, so that a block count or a search reads the same everywhere:

* ``cdiv(a, b)``: ceil(a / b) for ints, exactly (vLLM's own ``cdiv``: blocks for ``a`` tokens
  of ``b`` per block), with no float in between;
* ``last_true(ok, lo, hi)`` / ``first_true(ok, lo, hi)``: the edge of a predicate that holds up
  to some n and fails after it (or the reverse), by bisection: about log2(hi - lo) calls, for
  "the longest context that fits", "the fewest users that fill the pool", "the shortest prefix
  that reloading wins";
* ``UNBOUNDED_CONTEXT``: a context longer than any window or chunk, to tell a layer that keeps
  a bounded number of tokens from one that keeps them all (``Layer.token_bound``).
"""

from __future__ import annotations

from collections.abc import Callable

# Tokens past every window or chunk a config can give (config fields are capped at 10^8 tokens,
# kvcalc.config.limits.MAX_CONTEXT) and past the longest context any search here goes to: at
# this context a layer that still keeps fewer tokens than that keeps a bounded number of them.
UNBOUNDED_CONTEXT = 10**12


def cdiv(a: int, b: int) -> int:
    """ceil(a / b) for ints (b > 0), without rounding through a float."""
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
