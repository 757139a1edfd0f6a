"""Widgets bound to the page's link (every input lives in the URL, so a shared link opens the
same view), and the check that reports a link value no widget took."""

from __future__ import annotations

import math
import re

import streamlit as st

from .hosted import plain

# The session's table of this run's widgets bound to the URL, each with how to compare a URL
# value to what it accepted: "num", "str", "bool", "list", or the function giving the label a
# choice widget writes into the URL (Streamlit stores the formatted label, not the option).
_BOUND_KEY = "_url_bound"


def declare(key: str, kind) -> None:
    """Register ``key`` as bound to the URL, compared as ``kind`` by the link check."""
    st.session_state.setdefault(_BOUND_KEY, {})[key] = kind


def bound(key: str, kind: str) -> dict:
    """Keyword arguments that bind a widget to the URL under ``key``."""
    declare(key, kind)
    return {"key": key, "bind": "query-params"}


def select(widget, label: str, options: list, key: str, fmt=str, **kwargs):
    """A choice widget (selectbox, radio, segmented control) bound to the URL under ``key``; the
    link carries ``fmt(option)``, the label the user sees."""
    declare(key, fmt)
    return widget(label, options, format_func=fmt, key=key, bind="query-params", **kwargs)


def number(where, label: str, low, high, value, step, key: str, **kwargs):
    """A number input in ``where`` (st, a column) bound to the URL under ``key``."""
    return where.number_input(label, low, high, value, step, **bound(key, "num"), **kwargs)


def slider(where, label: str, low, high, value, step, key: str, **kwargs):
    """A slider in ``where`` (st, a column) bound to the URL under ``key``."""
    return where.slider(label, low, high, value, step, **bound(key, "num"), **kwargs)


def inputs_fold(label: str, key: str, inputs: dict, **kwargs):
    """An expander of inputs bound to the link, whose widgets are built only when they can
    matter (issue 42): while it is open, when the link carries one of ``inputs`` (input key:
    its default), or when one holds a value other than its default in this session. Otherwise
    the page takes the defaults, and the fold costs a first render and a rerun nothing (its
    widgets' code is not even fetched). Built inside a closed fold, the widgets keep their
    values in the link as before: a widget bound to the link that is not drawn leaves it.
    Returns (the expander, built)."""
    fold = st.expander(label, key=key, on_change="rerun", **kwargs)
    state = st.session_state
    built = bool(fold.open) or any(
        k in st.query_params or (k in state and state[k] != default)
        for k, default in inputs.items()
    )
    return fold, built


def url_guard_begin() -> None:
    """Remember the URL parameters a session opened with (first run only), and drop the ones
    no widget can take safely: a non-finite number such as 1e999 or nan makes Streamlit 1.67's
    integer inputs fail while reading the link (int(inf)), before any code of ours runs."""
    st.session_state[_BOUND_KEY] = {}  # this run's page declares its bindings afresh
    if "_url_initial" not in st.session_state:
        qp = st.query_params
        initial = {k: qp.get_all(k) for k in qp}
        st.session_state["_url_initial"] = initial
        st.session_state["_url_checked"] = False
        for key, values in initial.items():
            if any(_non_finite(v) for v in values):
                del st.query_params[key]


def _non_finite(text: str) -> bool:
    try:
        return not math.isfinite(float(text))
    except (TypeError, ValueError, OverflowError):
        return False


def url_guard_end(slot) -> None:
    """After every widget ran: say which of the opening URL parameters were not taken."""
    initial = st.session_state.get("_url_initial", {})
    if not st.session_state.get("_url_checked"):
        st.session_state["_url_checked"] = True
        st.session_state["_url_ignored"] = _ignored(initial)
    elif st.session_state.get("_url_ignored"):
        # A value no widget took at first can apply later (a page draws its input once the
        # setup fits): once it does, it leaves the note for good.
        left = {k: initial[k] for k, _ in st.session_state["_url_ignored"] if k in initial}
        st.session_state["_url_ignored"] = _ignored(left)
    ignored = st.session_state.get("_url_ignored") or []
    if ignored:
        # Names come from the link as much as values do: both are made inert.
        items = ", ".join(f"{plain(_short(k))}={plain(_short(v))}" for k, v in ignored[:8])
        slot.warning(
            f"Ignored in the link (not a valid value here): {items}. "
            "The defaults are shown instead.",
            icon=":material/link_off:",
        )


def _ignored(initial: dict) -> list[tuple[str, str]]:
    out = []
    for key, values in initial.items():
        raw = values[0] if len(values) == 1 else values
        kind = st.session_state.get(_BOUND_KEY, {}).get(key)
        if (
            kind is None
            or key not in st.session_state
            or not _same(kind, values, st.session_state[key])
        ):
            out.append((key, raw))
    return out


def _short(raw) -> str:
    """A URL value made safe to show: at most 40 characters, and no markup of any kind."""
    text = raw if isinstance(raw, str) else ",".join(raw)
    text = re.sub(r"[^A-Za-z0-9 .,:/_-]", "?", text)
    return text if len(text) <= 40 else text[:37] + "..."


def _same(kind, values: list[str], value) -> bool:
    try:
        if callable(kind):
            return len(values) == 1 and values[0] == str(kind(value))
        if kind == "num":
            return len(values) == 1 and float(values[0]) == float(value)
        if kind == "bool":
            return len(values) == 1 and values[0].lower() == str(bool(value)).lower()
        if kind == "list":
            return [str(v) for v in values if v != ""] == [str(v) for v in (value or [])]
        return len(values) == 1 and values[0] == str(value)
    except (TypeError, ValueError):
        return False
