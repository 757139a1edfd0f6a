"""Calibrate the chosen engine profile from the user's own benchmark, on the Engineer pages
(issue 41, item 3): a fold where the user uploads or pastes their measured runs (the formats
``kvcalc.perf.calibrate_from.read_benchmark`` reads), the fitted profile in place of the
engine's for the page's estimates, and what changed, with the residual on their rows."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from kvcalc.perf.calibrate_from import (
    BenchRow,
    Calibration,
    bench_row_loop,
    calibrate,
    predict_row,
    read_benchmark,
)
from kvcalc.perf.engines import PROFILES

from .hosted import MAX_PASTE_CHARS
from .memo import memo
from .render import show_error

# A page's calibration is bounded as a request must be (a few seconds of server work at most):
# rows, and the engine steps their simulations take together (the fit runs each row about 45
# times; a silicon row runs as its client did, 10 waves of its users' requests).
MAX_PAGE_ROWS = 4
MAX_PAGE_STEPS = 24_000
MAX_ROW_STEPS = MAX_PAGE_STEPS  # one row's simulation, while the fit runs it
STATE = "own_benchmark"  # session key: {"engine": key, "text": the benchmark as given}


def _fits_page(rows: list[BenchRow], dep, profile) -> None:
    """ValueError when the rows would keep the server busy too long (the CLI has no such cap)."""
    from kvcalc.perf.sim import Speed, estimated_steps, setup

    if len(rows) > MAX_PAGE_ROWS:
        raise ValueError(
            f"the page calibrates from at most {MAX_PAGE_ROWS} rows and this benchmark has "
            f"{len(rows)}: keep the rows nearest your deployment, or run "
            "`kvcalc simulate --calibrate-from FILE` for all of them"
        )
    speed = Speed.of(dep.gpu, dep.weights.dtype, profile.step_model())
    total = 0
    for r in rows:
        loop = bench_row_loop(r, profile.engine)
        wl, (d, pool) = loop.workload, profile.serve(dep.but(max_num_seqs=loop.max_num_seqs))
        total += estimated_steps(setup(d, wl.longest, speed, kv_pool_bytes=pool), wl)
    if total > MAX_PAGE_STEPS:
        which = f"{rows[0].describe()} is" if len(rows) == 1 else f"these {len(rows)} runs are"
        raise ValueError(
            f"{which} about {total:,} engine steps to simulate, more than the "
            f"{MAX_PAGE_STEPS:,} a page may take: keep fewer or shorter runs, or use "
            "`kvcalc simulate --calibrate-from FILE` for long runs"
        )


@memo(8, spinner="Fitting the profile to your benchmark...")
def calibrated(dep, engine: str, text: str) -> Calibration:
    """The engine profile ``engine`` fitted to the benchmark ``text`` on ``dep``."""
    profile = PROFILES[engine]
    rows = read_benchmark(text)
    _fits_page(rows, dep, profile)
    return calibrate(
        profile, rows, lambda p, row: predict_row(dep, p, row, max_steps=MAX_ROW_STEPS)
    )


def panel(sel):
    """The fold on an Engineer page, and the selection with the profile calibrated where the
    user gave a benchmark for the engine they chose (unchanged otherwise)."""
    if not sel.engine:
        return sel
    label = PROFILES[sel.engine].label
    given = st.session_state.get(STATE)
    mine = isinstance(given, dict) and given.get("engine") == sel.engine
    with st.expander(
        f"Calibrate the {label} profile from your own benchmark", icon=":material/tune:"
    ):
        st.caption(
            "Rows in aiconfigurator's columns (isl, osl, batch_size, silicon_ttft_ms, "
            "silicon_tpot_ms), the JSON that `vllm bench serve --save-result` writes, or the "
            f"output of `vllm bench latency`; at most {MAX_PAGE_ROWS} runs here. Each is "
            "simulated on the model and GPU chosen in the sidebar."
        )
        with st.form("own_benchmark_form", border=False):
            up = st.file_uploader("Upload results", type=["csv", "json", "txt"])
            pasted = st.text_area("or paste them", height=100, max_chars=MAX_PASTE_CHARS)
            c = st.columns(2)
            go = c[0].form_submit_button("Calibrate")
            forget = c[1].form_submit_button("Back to the fitted profile")
        if forget:
            st.session_state.pop(STATE, None)
            mine = False
        elif go:
            text = pasted
            if up is not None:
                if up.size > MAX_PASTE_CHARS:
                    show_error(
                        f"The file is {up.size:,} bytes; results here are at most "
                        f"{MAX_PASTE_CHARS:,}. Keep the benchmark's result rows."
                    )
                    return sel
                text = up.getvalue().decode("utf-8", "replace")
            st.session_state[STATE] = {"engine": sel.engine, "text": text}
            mine = True
        if not mine:
            return sel
        try:
            cal = calibrated(sel.deployment, sel.engine, st.session_state[STATE]["text"])
        except ValueError as exc:
            show_error(f"Your benchmark was not used: {exc}")
            return sel
        st.markdown("\n".join(f"- {line.strip()}" for line in cal.report()[1:]))
    st.caption(
        f"The estimates below use the {label} profile calibrated on your "
        f"{len(cal.rows)} run{'' if len(cal.rows) == 1 else 's'}."
    )
    return replace(sel, calibrated=cal.profile)
