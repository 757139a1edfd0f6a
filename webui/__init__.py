"""The Streamlit side of KV Cache Lab: what the pages share (see common.py)."""

import threading

_WARM_LOCK = threading.Lock()
_warmed = False


def warm_up() -> None:
    """Import the heavy libraries once, in one thread, before sessions run concurrently: Plotly
    imports pandas lazily, and twenty sessions of a fresh server doing that first import in
    parallel saw it half-initialized ("partially initialized module 'pandas' has no attribute
    'Series'")."""
    global _warmed
    from .shared import protect_caches

    protect_caches()  # hosted: a client's clear_cache empties only its own session state
    if _warmed:
        return
    with _WARM_LOCK:
        if _warmed:
            return
        import pandas  # noqa: F401
        import plotly.graph_objects as go
        import plotly.io as pio
        import pyarrow  # noqa: F401

        # Every st.plotly_chart serialises its figure on every rerun: orjson gives the same
        # JSON as the json engine in about a fifth of the time. Named, not left to "auto", so
        # that an install without it fails here (ValueError) instead of silently going slow.
        pio.json.config.default_engine = "orjson"

        go.Figure(go.Scatter(x=[0], y=[0])).to_dict()  # the lazy imports of validation
        _warmed = True
