"""What this server keeps for every visitor, out of reach of Streamlit's ``clear_cache``, which
any client may send, unauthenticated, to empty every st.cache_* of the process (issue 22 B6: one
message wiped the measured quality table): shared results live in module globals here
(``QUALITY_ROWS``), and in hosted mode ``protect_caches()`` makes the message clear only the
sender's own session state."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from .hosted import hosted


class SharedStore:
    """A thread-safe mapping with at most ``max_items`` entries (the oldest written goes)."""

    def __init__(self, max_items: int):
        self.max_items = max_items
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def __contains__(self, key: Any) -> bool:
        with self._lock:
            return key in self._items

    def __getitem__(self, key: Any) -> Any:
        with self._lock:
            return self._items[key]

    def get(self, key: Any, default: Any = None) -> Any:
        with self._lock:
            return self._items.get(key, default)

    def __setitem__(self, key: Any, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.max_items:
                self._items.popitem(last=False)


# The measured quality rows, per (tokens, window, variant), and the text each was measured on.
QUALITY_ROWS = SharedStore(max_items=512)

_protected = False
_protect_lock = threading.Lock()


def protect_caches() -> bool:
    """In hosted mode, make ``clear_cache`` from a client clear only that client's own session
    state. Idempotent; True when the protection is in place."""
    global _protected
    if not hosted():
        return False
    with _protect_lock:
        if _protected:
            return True
        from streamlit.runtime.app_session import AppSession

        if not hasattr(AppSession, "_handle_clear_cache_request"):
            return False  # a Streamlit without this handler: nothing to replace

        def own_state_only(self) -> None:
            self._session_state.clear()

        # Replacing a method of Streamlit's own class is the point here (its handler clears
        # every session's caches); the checker flags any assignment to a method.
        AppSession._handle_clear_cache_request = own_state_only  # type: ignore[method-assign]
        _protected = True
        return True
