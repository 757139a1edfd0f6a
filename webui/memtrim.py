"""Memory given back when sessions leave (issue 22: 36 heavy sessions kept +394 MiB): the server
runs with ``SERVER_ENV`` (glibc's malloc, two arenas), and ``start()`` runs a thread that, when
the number of sessions drops, drops the expired ones, collects garbage and trims the heaps.
docs/server-memory.md has why and the measurements (bench/memory.py)."""

from __future__ import annotations

import ctypes
import gc
import threading
import time

# The allocator settings the server process starts with (read at interpreter start-up, so they
# are environment variables of the process, not something app.py can set).
SERVER_ENV = {"PYTHONMALLOC": "malloc", "MALLOC_ARENA_MAX": "2"}

POLL_S = 5.0  # how often the session count is read
MIN_GAP_S = 30.0  # at most one trim per this many seconds (a full collection holds the GIL)

_started = False
_start_lock = threading.Lock()


def _libc_trim():
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):  # not glibc (macOS, musl): nothing to trim
        return None


_MALLOC_TRIM = _libc_trim()


def trim() -> None:
    """Collect garbage, then hand glibc's free pages back to the system."""
    gc.collect()
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)  # ctypes releases the interpreter lock for the call


def _session_manager():
    from streamlit import runtime

    if not runtime.exists():
        return None
    return getattr(runtime.get_instance(), "_session_mgr", None)


def reap_expired(mgr) -> None:
    """Drop the disconnected sessions whose TTL has passed. Streamlit 1.67's session store (a
    TTLCache) removes expired entries only on a write or on ``len()``; without this the last
    sessions to leave a quiet server stay in memory until someone else leaves."""
    storage = getattr(mgr, "_session_storage", None)
    cache = getattr(storage, "_cache", None)
    lock = getattr(mgr, "_storage_lock", None)
    if cache is None or lock is None:
        return
    with lock:  # the lock Streamlit holds around every change of its session store
        len(cache)


class Trigger:
    """When to trim: after the number of connected sessions, or of all kept sessions, drops
    (a tab closed; a disconnected session's TTL passed), at most once per ``min_gap_s``; a drop
    inside the gap is trimmed for when the gap ends."""

    def __init__(self, min_gap_s: float = MIN_GAP_S):
        self.min_gap_s = min_gap_s
        self.last: tuple[int, int] | None = None
        self.last_trim = -float("inf")
        self.pending = False

    def due(self, counts: tuple[int, int], now: float) -> bool:
        if self.last is not None and (counts[0] < self.last[0] or counts[1] < self.last[1]):
            self.pending = True
        self.last = counts
        if self.pending and now - self.last_trim >= self.min_gap_s:
            self.pending = False
            self.last_trim = now
            return True
        return False


def _loop() -> None:
    trigger = Trigger()
    while True:
        time.sleep(POLL_S)
        try:
            mgr = _session_manager()
            if mgr is None:
                continue
            # sessions with a websocket, and all kept (connected or waiting to reconnect)
            counts = (mgr.num_active_sessions(), mgr.num_sessions())
            if trigger.due(counts, time.monotonic()):
                reap_expired(mgr)
                trim()
        except Exception:  # never take the server down over housekeeping
            continue


def start() -> bool:
    """Start the trimming thread once per process; True if this call started it."""
    global _started
    with _start_lock:
        if _started:
            return False
        threading.Thread(target=_loop, name="kvlab-memtrim", daemon=True).start()
        _started = True
        return True
