"""Who is asking, the keys of the per-visitor limits (the live class, the device queue, the Hub
fetch): ``network_of`` (an IPv4 /24, an IPv6 /48), ``visitor_id`` (the source address: IPv4, or
an IPv6 /64), ``browser_id`` (one browser however many tabs), ``session_id``. docs/visitors.md
tells where each comes from and why."""

from __future__ import annotations

import hashlib
import ipaddress
import os
import secrets

XSRF_COOKIE = "_streamlit_xsrf"
_BROWSER_STATE = "_kvlab_browser"  # the fallback browser id, in the session's state


def behind_proxy() -> bool:
    return os.environ.get("KVLAB_BEHIND_PROXY", "").strip().lower() in ("1", "true", "yes", "on")


def address_key(raw: str) -> str:
    """The visitor key of an address as a proxy or Streamlit gives it: ``ip:203.0.113.7`` for
    IPv4 (an IPv4-mapped IPv6 address too), ``ip6:2001:db8:1:2::/64`` for IPv6 (its /64), and
    ``ip:`` + the text for anything that is not an address ("local", a test's name)."""
    text = str(raw).strip()
    host = text[1:].split("]", 1)[0] if text.startswith("[") else text
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])  # without an IPv6 zone (fe80::1%eth0)
    except ValueError:
        return "ip:" + text[:64]
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if isinstance(ip, ipaddress.IPv4Address):
        return f"ip:{ip}"
    return "ip6:" + str(ipaddress.IPv6Network(f"{ip}/64", strict=False))


def network_of(visitor: str) -> str:
    """The network of a visitor key: ``net:203.0.113.0/24`` for IPv4, ``net6:2001:db8:1::/48``
    for an IPv6 /64; any other key (a session, "ip:local") is its own network."""
    kind, _, rest = str(visitor).partition(":")
    try:
        if kind == "ip":
            net4 = ipaddress.IPv4Network(f"{ipaddress.IPv4Address(rest)}/24", strict=False)
            return f"net:{net4}"
        if kind == "ip6":
            first = ipaddress.IPv6Network(rest, strict=False).network_address
            return "net6:" + str(ipaddress.IPv6Network(f"{first}/48", strict=False))
    except ValueError:
        pass
    return str(visitor)[:80]


def session_id() -> str:
    """The id of the Streamlit session whose script thread calls this."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else "no-session"


def visitor_id(session: str | None = None) -> str:
    """The visitor of the Streamlit session whose script thread calls this (see the module
    docstring); ``session`` is the fallback key."""
    try:
        import streamlit as st

        if behind_proxy():
            forwarded = st.context.headers.get("X-Forwarded-For") or ""
            last = forwarded.split(",")[-1].strip()
            if last:
                return address_key(last[:64])
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        if get_script_run_ctx() is not None:
            ip = st.context.ip_address
            return address_key(str(ip)[:64]) if ip else "ip:local"
    except Exception:  # noqa: BLE001 - no request context: fall back to the session
        pass
    if session is None:
        session = session_id()
    return "session:" + session


def browser_key(xsrf_cookie: str | None) -> str | None:
    """``b:`` + a hash of the XSRF cookie's token bytes (the same for every page load of one
    browser, though the cookie's text changes), or None without a cookie."""
    value = str(xsrf_cookie or "").strip()[:200]
    if not value:
        return None
    token = value.encode()
    parts = value.split("|")
    if parts[0] == "2" and len(parts) == 4:  # 2|mask|masked token|time, Streamlit's version 2
        try:
            mask, masked = bytes.fromhex(parts[1]), bytes.fromhex(parts[2])
            if mask:
                token = bytes(b ^ mask[i % len(mask)] for i, b in enumerate(masked))
        except ValueError:
            pass
    return "b:" + hashlib.sha256(b"kvlab-browser:" + token).hexdigest()[:40]


def browser_id() -> str:
    """The browser of the Streamlit session whose script thread calls this (see the module
    docstring): its XSRF cookie, else an id kept in the session (``s:``)."""
    try:
        import streamlit as st
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        if get_script_run_ctx() is None:
            raise LookupError
        cookie = st.context.cookies.get(XSRF_COOKIE)
        key = browser_key(cookie) if isinstance(cookie, str) else None
        if key:
            return key
        state = st.session_state
        if _BROWSER_STATE not in state:
            state[_BROWSER_STATE] = "s:" + secrets.token_hex(16)
        return str(state[_BROWSER_STATE])
    except Exception:  # noqa: BLE001 - no Streamlit session (plain Python): the session's id
        return "s:" + session_id()
