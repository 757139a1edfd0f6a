"""One move out of "does not fit": a button that switches the sidebar to the smallest setup of
the registry that holds the model's weights with room for a cache (kvcalc.engines.fit); it sets
the sidebar's own keys (``gpu``, ``tp``, and ``pp`` 1), which are bound to the link."""

from __future__ import annotations

import streamlit as st

from kvcalc import registry
from kvcalc.engines.fit import NODE_TP, FitSetup, fitting_setup

from .hosted import plain
from .memo import cached
from .selection import Selection, pool_deployment


def _apply(gpu: str, tp: int) -> None:
    st.session_state["gpu"] = gpu
    st.session_state["tp"] = tp
    st.session_state["pp"] = 1
    # From the callback: the button is gone once the setup fits, so the page's own run would
    # never reach a rerun after it. A page run as a fragment would rerun only itself; the
    # whole app reruns, and the sidebar (and the link) show the new setup.
    st.rerun(scope="app")


def fitting_setup_button(
    sel: Selection,
    key: str,
    context: int = 8192,
    util: float | None = None,
    reserve_bytes: int | None = None,
) -> FitSetup | None:
    """A button "Switch to 8 x NVIDIA H200 SXM 141GB (tensor parallel 8)" that sets the sidebar
    to the smallest setup that holds ``sel`` (its model, weights and KV cache format) with room
    for one sequence of ``context`` tokens (at most the model's own limit); a caption instead
    when no GPU of the registry holds the model on one node. Returns the setup."""
    dep = pool_deployment(sel, util, reserve_bytes)
    gpus = tuple(registry().gpus.values())
    setup = cached(fitting_setup)(dep, gpus, max(1, min(context, sel.spec.max_context)))
    if setup is None:
        st.caption(
            f"No GPU of the registry holds {plain(sel.label)} on one node of up to "
            f"{max(NODE_TP)} GPUs: choose a smaller weight format in the sidebar."
        )
        return None
    same = setup.gpu.key == sel.gpu.key
    verb = "Split it over" if same else "Switch to"
    label = f"{verb} {setup.label}" + (f" (tensor parallel {setup.tp})" if setup.tp > 1 else "")
    st.button(
        label,
        key=key,
        type="primary",
        icon=":material/build:",
        on_click=_apply,
        args=(setup.gpu.key, setup.tp),
        help="The smallest setup that fits: the same GPU split over up to "
        f"{max(NODE_TP)} of them (tensor parallel), else the next larger GPU of the registry",
    )
    return setup
