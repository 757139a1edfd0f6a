"""The one safe reader of a user's file (a config.json, a saved vLLM log).

Only a regular file is read, and at most ``limit`` + 1 bytes of it (so the caller can say it
was too large): a FIFO or /dev/stdin would block the read, /dev/zero would never end. The path
is stat'ed before it is opened (opening a FIFO for reading blocks), opened with O_NONBLOCK
should it have become a FIFO since, and what was opened is checked again. Every failure is a
ValueError that names the file and says what to give instead.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from ..core.text import short as _short

_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_regular_file(
    path: str | Path,
    *,
    limit: int,
    what: str,
    give: str,
    too_large: Callable[[str, int], str] | None = None,
) -> bytes:
    """The first ``limit`` + 1 bytes of the regular file at ``path``.

    ``what`` names the file in messages ("config file", "log"), ``give`` says what to give
    instead of something that is not a file ("give the path of a config.json");
    ``too_large(shown, size)``, when given, is the refusal of a file whose size already says it
    is over ``limit`` bytes (``shown``: the path as messages show it)."""
    shown = _short(str(path))
    try:
        st = os.stat(path)  # before any open(): opening a FIFO for reading blocks
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        why = getattr(exc, "strerror", None) or str(exc)
        raise ValueError(f"cannot read {what} {shown}: {why}") from None
    _require_regular(st, what, shown, give)
    if too_large is not None and st.st_size > limit:
        raise ValueError(too_large(shown, st.st_size))
    try:
        # O_NONBLOCK: should the path have become a FIFO since the stat, open() still returns
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        raise ValueError(f"cannot read {what} {shown}: {exc.strerror or exc}") from None
    try:
        _require_regular(os.fstat(fd), what, shown, give)
        with os.fdopen(fd, "rb") as fh:
            fd = -1  # the file object closes it now
            return fh.read(limit + 1)
    except OSError as exc:
        raise ValueError(f"cannot read {what} {shown}: {exc.strerror or exc}") from None
    finally:
        if fd >= 0:
            os.close(fd)


def _require_regular(st: os.stat_result, what: str, shown: str, give: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _FILE_KINDS if test(st.st_mode)), "not a file")
        raise ValueError(f"cannot read {what} {shown}: it is {kind}, not a regular file; {give}")
