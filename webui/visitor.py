"""Who is asking: the key of per-visitor limits (the device queue, the Hub fetch).

A visitor is a source address, not a browser tab: one person with seventeen tabs is one visitor.

* Behind the course's HAProxy (deploy/haproxy.cfg), the replica sees HAProxy's address; HAProxy
  drops any X-Forwarded-For the client sent and sets its own, so the header's last entry is the
  real source. It is trusted only when the deployment says so (``KVLAB_BEHIND_PROXY=1``): a
  server reached directly would otherwise let a client name itself anything.
* Otherwise Streamlit's own view of the websocket's peer (``st.context.ip_address``); Streamlit
  gives None for a loopback peer, and every loopback tab is then one visitor, "local". (Streamlit
  1.67 serves through uvicorn, which itself takes X-Forwarded-For from a loopback peer only,
  FORWARDED_ALLOW_IPS: HAProxy on the same machine is seen through without any setting.)
* Without a Streamlit request at all (plain Python), the session is its own visitor.
"""

from __future__ import annotations

import os

__all__ = ["visitor_id", "behind_proxy"]


def behind_proxy() -> bool:
    return os.environ.get("KVLAB_BEHIND_PROXY", "").strip().lower() in ("1", "true", "yes", "on")


def visitor_id(session: str | None = None) -> str:
    """The visitor of the Streamlit session whose script thread calls this (see the module
    docstring); ``session`` is the fallback key."""
    try:
        import streamlit as st

        if behind_proxy():
            forwarded = st.context.headers.get("X-Forwarded-For") or ""
            last = forwarded.split(",")[-1].strip()
            if last:
                return "ip:" + last[:64]
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        if get_script_run_ctx() is not None:
            ip = st.context.ip_address
            return "ip:" + (str(ip)[:64] if ip else "local")
    except Exception:  # noqa: BLE001 - no request context: fall back to the session
        pass
    if session is None:
        from .device_queue import session_id

        session = session_id()
    return "session:" + session
