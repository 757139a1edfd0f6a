"""Widget callbacks, label functions and cached computations, kept out of the page scripts: a
function defined in a page script (an on_click, a URL binding's label function, both held in
st.session_state) keeps that script's globals alive after the session closed."""

from __future__ import annotations

import streamlit as st

from kvcalc.config.catalog import registry
from kvcalc.engines.paging import SCENARIOS, parse_requests, simulate

ENGINE_MAX_STEP = 2000


def engine_scenario_label(key: str) -> str:
    return SCENARIOS[key]["title"] if key in SCENARIOS else "Custom requests"


def engine_advance(n: int) -> None:
    st.session_state["e_step"] = min(int(st.session_state.get("e_step", 0)) + n, ENGINE_MAX_STEP)


def engine_reset() -> None:
    st.session_state["e_step"] = 0


def engine_label(key: str) -> str:
    return {
        "vllm": "vLLM (blocks, as it allocates)",
        "ideal": "Ideal: bytes actually held",
        "trtllm": "TensorRT-LLM: share of free memory",
    }.get(key, str(key))


def chart_range_label(value: int) -> str:
    return "auto (past the crossover)" if value == 0 else f"{value:,}"


def link_label(key: str) -> str:
    links = registry().links
    return links[key].name if key in links else str(key)


def interview_go(delta: int, deck_size: int) -> None:
    st.session_state["i_q"] = min(max(1, int(st.session_state.get("i_q", 1)) + delta), deck_size)
    st.session_state["i_reveal"] = False


@st.cache_data(max_entries=64, show_spinner=False)
def engine_run(text: str, step: int, num_blocks: int, block_size: int, caching: bool):
    """The Engine view's simulation: the last step's snapshot and a light per-step log (never
    every snapshot), computed once per input. At the largest inputs the page allows (64 requests
    of 8,192 tokens, 512 blocks, 2,000 steps) it takes about 0.3 s on a 2-core machine
    (bench/pages.py --hostile)."""
    _, snap, log = simulate(
        parse_requests(text),
        step,
        num_blocks=num_blocks,
        block_size=block_size,
        prefix_caching=caching,
    )
    return snap, log


tour_label = str  # a stop's number as the link carries it


def tour_short(values: list[str]) -> str:
    """A stop number from a link, made short and inert for a message."""
    text = ",".join(values)
    text = "".join(ch if ch.isalnum() or ch in " .,-" else "?" for ch in text)
    return text if len(text) <= 20 else text[:17] + "..."


def tour_reset() -> None:
    """A new stop starts with its answer hidden and no guess."""
    st.session_state["_tour_moved"] = True
    st.session_state["shown"] = False
    st.session_state["guess"] = ""


def tour_go(delta: int, count: int) -> None:
    st.session_state["stop"] = min(max(int(st.session_state.get("stop", 1)) + delta, 1), count)
    tour_reset()
