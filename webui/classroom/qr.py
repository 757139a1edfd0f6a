"""The join link as a QR code for the projector (segno: pure Python, no image library)."""

from __future__ import annotations

import io

import segno


def _make(link: str):
    if not link or len(link) > 400:
        raise ValueError("a join link is 1 to 400 characters")
    # Error correction M (15 % of the code may be unreadable): a projector's glare and a
    # phone's angle; a longer link still fits a code a phone reads across a room.
    return segno.make(link, error="m", micro=False)


def qr_png(link: str, scale: int = 10) -> bytes:
    """A PNG of the QR code of ``link``, with the standard quiet zone (4 modules)."""
    buf = io.BytesIO()
    _make(link).save(buf, kind="png", scale=scale, border=4, dark="#000000", light="#ffffff")
    return buf.getvalue()


def qr_matrix(link: str) -> list[list[bool]]:
    """The code's modules (True: dark), without the quiet zone."""
    return [[bool(v) for v in row] for row in _make(link).matrix]
