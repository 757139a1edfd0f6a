"""Results kept per input, for every visitor: the same figure or sweep is computed once.

A class works through the same pages with the same few inputs (the defaults, the values the
teacher names), so a rerun usually asks for a curve or a figure that some session has already
built. ``memo(n)`` keeps the last ``n`` results of a pure function (kvcalc's sweeps, webui's
figure builders), keyed by its arguments, in a module global:

* bounded: at most ``n`` entries per function, the least recently used goes first (each
  caller states its ``n`` from the size of one result);
* out of reach of Streamlit's ``clear_cache`` message, as webui/shared.py explains;
* shared, so never mutated: a cached result is the same object for every caller. Figures go
  to ``st.plotly_chart``, which only reads them; pages build their own lists from the curves.

Arguments become the key by value: lists, tuples and dicts by their items, dataclasses by their
fields, anything else as it hashes. A function whose arguments cannot be keyed (an object with
neither) is simply run.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import weakref
from collections import OrderedDict
from typing import Any, Callable

__all__ = ["memo", "cached", "key_of", "clear_all"]

_ALL: list["_Memo"] = []


def key_of(x: Any) -> Any:
    """A hashable value that is equal for equal arguments (TypeError when there is none)."""
    if isinstance(x, (str, int, float, bool, type(None), bytes)):
        return (type(x), x)  # 1, 1.0 and True hash alike but may be shown differently
    if isinstance(x, (list, tuple)):
        return (type(x), *map(key_of, x))
    if isinstance(x, dict):
        return (dict, *((k, key_of(v)) for k, v in x.items()))
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        try:
            return _Value(x)  # a frozen dataclass hashes (and compares) by value
        except TypeError:
            return (type(x), *(key_of(getattr(x, f.name)) for f in dataclasses.fields(x)))
    return _Value(x)  # raises TypeError for what cannot be keyed


class _Value:
    """An argument in a key: equal to another holding an equal value. Its hash is taken once per
    object: a frozen dataclass computes its hash from every field at each call, and a model's
    spec or a simulation's result (the same object at every rerun: they come from caches) would
    otherwise be hashed in full on every lookup."""

    __slots__ = ("x", "h")

    def __init__(self, x: Any):
        self.x, self.h = x, _hash_of(x)

    def __hash__(self) -> int:
        return self.h

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Value)
            and self.h == other.h
            and (self.x is other.x or (type(self.x) is type(other.x) and self.x == other.x))
        )


_HASHES: dict[int, tuple[Any, int]] = {}  # id -> (weak reference, hash), while the object lives
_HASHES_LOCK = threading.Lock()


def _hash_of(x: Any) -> int:
    i = id(x)
    got = _HASHES.get(i)
    if got is not None and got[0]() is x:
        return got[1]
    h = hash(x)

    def forget(_ref: weakref.ref, i: int = i) -> None:
        _HASHES.pop(i, None)

    try:
        ref = weakref.ref(x, forget)
    except TypeError:  # no weak references to it (ints, tuples, slotted classes): hash again
        return h
    with _HASHES_LOCK:
        _HASHES[i] = (ref, h)
    return h


class _Memo:
    def __init__(self, fn: Callable, max_items: int, spinner: str | None = None):
        self.fn, self.max_items, self.spinner = fn, max_items, spinner
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        try:
            key = (key_of(args), key_of(kwargs))
        except TypeError:
            return self.fn(*args, **kwargs)
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                self.hits += 1
                return self._items[key]
        # Outside the lock: other sessions are not held up.
        if self.spinner and _in_script():
            import streamlit as st

            # The spinner st.cache_resource shows on a miss: after half a second, styled as
            # a cache's (Streamlit's own private flag, as its caches pass it).
            with st.spinner(self.spinner, _cache=True):
                value = self.fn(*args, **kwargs)
        else:
            value = self.fn(*args, **kwargs)
        with self._lock:
            self.misses += 1
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.max_items:
                self._items.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


def _in_script() -> bool:
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    return get_script_run_ctx(suppress_warning=True) is not None


def memo(max_items: int, spinner: str | None = None) -> Callable[[Callable], _Memo]:
    """Decorator: keep the last ``max_items`` results of a pure function (see the module).
    ``spinner``: what a page shows while a result is computed (a long simulation)."""
    if max_items < 1:
        raise ValueError("a memo keeps at least one result")

    def wrap(fn: Callable) -> _Memo:
        m = _Memo(fn, max_items, spinner)
        _ALL.append(m)
        return m

    return wrap


_WRAPPED: dict[Callable, _Memo] = {}
_WRAPPED_LOCK = threading.Lock()


def cached(fn: Callable, max_items: int = 64) -> _Memo:
    """``fn`` (a pure function of another module, e.g. a kvcalc sweep) with a memo of its own,
    the same one wherever it is asked for."""
    with _WRAPPED_LOCK:
        m = _WRAPPED.get(fn)
        if m is None:
            m = _WRAPPED[fn] = memo(max_items)(fn)
        return m


def clear_all() -> None:
    """Empty every memo (tests that count calls)."""
    for m in _ALL:
        m.clear()
