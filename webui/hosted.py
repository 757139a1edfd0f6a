"""Hosted mode: one environment variable (KVLAB_HOSTED=1) makes the app safe to share: Hub ids
allow-listed, the live page and pasted configs capped, and nothing a user types rendered as HTML
or markdown (``plain``); docs/deploy.md lists it all, with .streamlit/config.toml's part."""

from __future__ import annotations

import os
import re


def hosted() -> bool:
    return os.environ.get("KVLAB_HOSTED", "").strip().lower() in ("1", "true", "yes", "on")


def hub_allowlist() -> tuple[str, ...] | None:
    """The Hub ids allowed here: None means any well-formed id (local use)."""
    env = os.environ.get("KVLAB_HUB_ALLOWLIST")
    if env is not None:
        return tuple(a.strip() for a in env.split(",") if a.strip())
    if not hosted():
        return None
    from kvcalc import registry

    return registry().hub_fetch  # kvcalc/config/models.yaml's hub.fetch


def verify_caps() -> dict:
    """Limits of the transformers check (kvcalc.measure.verify): hosted, tighter."""
    if hosted():
        return {"timeout_s": 30.0, "memory_gib": 2.0}
    return {"timeout_s": 120.0, "memory_gib": 8.0}


def live_caps() -> dict:
    """Upper bounds for the live page's inputs."""
    if hosted():
        return {"prompt_tokens": 512, "new_tokens": 128, "batch": 4, "no_cache": 16}
    return {"prompt_tokens": 2048, "new_tokens": 256, "batch": 16, "no_cache": 64}


MAX_PASTE_CHARS = 200_000 if hosted() else 1_000_000

_MD = re.compile(r"([\\`*_{}\[\]()<>#|~$!])")
# GitHub-flavoured markdown turns bare addresses into links: "https://x", "www.x", "a@b.c".
_AUTOLINK = re.compile(r"(?i)(:)(//)|(www)(\.)|(@)")
MAX_ECHO = 1000  # characters of any one message that quotes user input


def plain(text: str, limit: int = MAX_ECHO) -> str:
    """``text`` made inert for markdown: markup and HTML escaped, bare addresses broken with a
    zero-width space so they are not auto-linked (no link to, and no image from, a foreign
    host), and at most ``limit`` characters. Every string a user can influence passes here
    before it reaches st.markdown, st.error, st.caption and their kin."""
    text = str(text)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    text = _AUTOLINK.sub(
        lambda m: "\u200b".join(g for g in m.groups() if g) + ("\u200b" if m.group(5) else ""), text
    )
    return _MD.sub(r"\\\1", text)
