"""Results kept per input, for every visitor: ``memo(n)`` keeps the last ``n`` results of a pure
function, keyed by its arguments by value, bounded in entries and bytes (docs/server-memory.md)."""

from __future__ import annotations

import dataclasses
import functools
import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

_ALL: list[_Memo] = []

# All the memos together keep at most this many bytes (as size_of counts them). 24 MiB holds
# every default page's figures and curves many times over (a figure is 10-200 KiB, a sweep a
# few KiB to a MiB); bench/memory.py measures what 36 heavy sessions leave behind with it.
MEMO_BYTES = 24 * 2**20
# ... and no single result larger than this: a result that big comes from an extreme input (a
# worst-case link, a pasted 1,024-layer config) that nobody else will ask for, and a long-lived
# large object pins the allocator's pages after the room has left (bench/memory.py: 36 heavy
# sessions left 117 MiB behind with the 24 MiB bound alone, -14 MiB with nothing kept).
MEMO_ENTRY_BYTES = 2**20
# The frontier's simulations (3.5 MiB at the page's defaults, as size_of counts them: every
# request's times) and its figures (4.9 MiB) are kept up to this, each memo saying so, and
# each such memo keeps at most LARGE_MEMO_BYTES of its own (apart from MEMO_BYTES, which a
# handful of them would fill: bench/load.py, 100 sessions, ran 0.77x as many interactions
# a second with them in the shared bound).
LARGE_ENTRY_BYTES = 8 * 2**20
LARGE_MEMO_BYTES = 32 * 2**20

# Every stored entry in one least-recently-used order across the memos: (memo, key) -> bytes.
_ORDER: OrderedDict = OrderedDict()
_ORDER_LOCK = threading.RLock()
_KEPT = [0]  # bytes held by all the memos' entries


_SCALARS = frozenset({str, bytes, int, float, complex, bool, type(None)})
_NUMBERS = frozenset({int, float})
_NUMBER_BYTES = sys.getsizeof(0.5)  # a float's object; an int up to 2^30 is 28 bytes or less


def size_of(x: Any) -> int:
    """Bytes an object graph holds: sys.getsizeof of each container, instance dict or slot
    (counted once however often it is reached), and of each string and number at every place it
    stands (a list of plain numbers, a figure's coordinates, at a float's size each, without a
    loop in Python); numpy arrays by their buffers. An estimate that errs high: what is shared
    with another entry, or interned, counts here too."""
    seen: set[int] = set()
    stack = [x]
    total = 0
    getsizeof = sys.getsizeof
    while stack:
        o = stack.pop()
        t = type(o)
        if t in _SCALARS:
            total += 0 if o is None or t is bool else getsizeof(o)
            continue
        i = id(o)
        if i in seen or isinstance(o, type):
            continue
        seen.add(i)
        total += getsizeof(o, 64)
        if t is list or t is tuple:
            kinds = set(map(type, o))
            if kinds <= _NUMBERS:  # coordinates: a float or a machine-size int each
                total += len(o) * _NUMBER_BYTES
            elif kinds <= _SCALARS:
                total += sum(map(getsizeof, o))
            else:
                stack.extend(o)
            continue
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
            continue
        if isinstance(o, (list, tuple, set, frozenset)):
            stack.extend(o)
            continue
        nbytes = getattr(o, "nbytes", None)
        if isinstance(nbytes, int) and hasattr(o, "dtype"):  # a numpy array's buffer
            total += nbytes
            continue
        d = getattr(o, "__dict__", None)
        if d is not None:
            stack.append(d)
        for cls in t.__mro__:
            for slot in getattr(cls, "__slots__", ()):
                if hasattr(o, slot):
                    stack.append(getattr(o, slot))
    return total


def kept_bytes() -> int:
    """What all the memos hold now, in bytes (as size_of counted each entry when it was kept)."""
    return _KEPT[0] + sum(m._bytes for m in _ALL)


def _forget(m: _Memo, key: Any) -> None:
    """Drop one entry from its memo and from the shared order (the lock held)."""
    m._items.pop(key, None)
    if m.own_bytes is None:
        _KEPT[0] -= _ORDER.pop((m, key), 0)
    else:
        m._bytes -= m._sizes.pop(key, 0)


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
    def __init__(
        self,
        fn: Callable,
        max_items: int,
        spinner: str | None = None,
        entry_bytes: int | None = None,
        own_bytes: int | None = None,
    ):
        self.fn, self.max_items, self.spinner = fn, max_items, spinner
        self.entry_bytes = entry_bytes  # None: MEMO_ENTRY_BYTES
        # A memo of large results keeps its own byte bound instead of drawing on MEMO_BYTES:
        # a few of them would otherwise push every small figure out of the shared bound.
        self.own_bytes = own_bytes
        self._sizes: dict = {}  # key -> bytes, for a memo with its own bound
        self._bytes = 0
        self._items: OrderedDict = OrderedDict()
        functools.update_wrapper(self, fn)
        _ALL.append(self)

    def __call__(self, *args, **kwargs):
        try:
            key = (key_of(args), key_of(kwargs))
        except TypeError:
            return self.fn(*args, **kwargs)
        with _ORDER_LOCK:
            if key in self._items:
                self._items.move_to_end(key)
                if self.own_bytes is None:
                    _ORDER.move_to_end((self, key))
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
        size = size_of(key) + size_of(value)
        with _ORDER_LOCK:
            entry = MEMO_ENTRY_BYTES if self.entry_bytes is None else self.entry_bytes
            bound = MEMO_BYTES if self.own_bytes is None else self.own_bytes
            if size > min(entry, bound):  # too large to keep: given only
                return value
            if key in self._items:  # another session stored it meanwhile
                _forget(self, key)
            self._items[key] = value
            if self.own_bytes is None:
                _ORDER[(self, key)] = size
                _KEPT[0] += size
            else:
                self._sizes[key] = size
                self._bytes += size
            while len(self._items) > self.max_items:
                _forget(self, next(iter(self._items)))
            while self.own_bytes is not None and self._bytes > self.own_bytes:
                _forget(self, next(iter(self._items)))
            while _KEPT[0] > MEMO_BYTES:
                m, k = next(iter(_ORDER))
                _forget(m, k)
        return value

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        with _ORDER_LOCK:
            for key in list(self._items):
                _forget(self, key)
            self._bytes = 0


def _in_script() -> bool:
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    return get_script_run_ctx(suppress_warning=True) is not None


def memo(
    max_items: int,
    spinner: str | None = None,
    entry_bytes: int | None = None,
    own_bytes: int | None = None,
) -> Callable[[Callable], _Memo]:
    """Decorator: keep the last ``max_items`` results of a pure function (see the module).
    ``spinner``: what a page shows while a result is computed (a long simulation).
    ``entry_bytes``: the largest result kept, where the function's result at the defaults is
    larger than MEMO_ENTRY_BYTES (the serving frontier's simulations and figures).
    ``own_bytes``: a byte bound of its own, apart from MEMO_BYTES (for such large results)."""
    if max_items < 1:
        raise ValueError("a memo keeps at least one result")
    return lambda fn: _Memo(fn, max_items, spinner, entry_bytes, own_bytes)


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
