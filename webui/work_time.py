"""The live page's "work is not time" section: recompute n tokens against one cached step,
both timed on this server's device (kvcalc.measure.live), through the same device queue."""

from __future__ import annotations

import streamlit as st

from kvcalc.core.units import GB, fmt_bytes
from kvcalc.measure import live, runtime
from webui.figures import work_time_figure

from . import common, device_queue
from .hosted import hosted


def section(model: str, source: str, dtype: str, device: str) -> None:
    st.subheader("Work is not time")
    ns = (8, 32, 128, 512) if hosted() else (8, 32, 128, 512, 1024)
    st.markdown(
        "Without a cache, the next token after n tokens costs a forward pass over all n: n "
        "token passes of work. With a cache it costs one. Press the button to time both, at n = "
        + ", ".join(f"{n:,}" for n in ns)
        + ", with the model chosen above."
    )
    key = (model, source, dtype, device, ns)
    if st.button("Time recompute against a cached step", key="v_work_btn", icon=":material/timer:"):
        try:
            with st.spinner("Timing..."):
                got = device_queue.run_here(
                    lambda should_stop: live.measure_work_time(
                        runtime.RealModel(model, source, dtype, device, hosted()),
                        ns=ns,
                        should_stop=should_stop,
                    ),
                    checkpoint=lambda: st.session_state.get("v_work"),
                )
            st.session_state["v_work"] = (key, got)
        except ValueError as exc:
            common.show_error(exc)
            return
    done = st.session_state.get("v_work")
    if not done or done[0] != key:
        return
    w = done[1]
    floor: float | None = None
    gpu = common.selection().gpu if w.device == "cuda" else None
    if gpu:
        floor = w.weight_bytes / (gpu.bandwidth_gbs * GB)
    st.plotly_chart(work_time_figure(w.points, floor), width="stretch", key="v_work_fig")
    last = w.points[-1]
    st.markdown(
        f"At n = {last.tokens:,}, recomputing did **{last.work_ratio:,}x** the token passes of "
        f"one cached step but took **{last.time_ratio:,.1f}x** its time "
        f"({last.recompute_s * 1e3:,.1f} ms against {last.cached_step_s * 1e3:,.1f} ms, on "
        f"{w.device.upper()}). A pass over many tokens turns each weight's vector product into "
        "a matrix product, which the hardware runs far more efficiently per token."
    )
    if gpu and floor is not None:
        st.caption(
            f"Dotted: one read of the model's {fmt_bytes(w.weight_bytes)} of weights at "
            f"the nominal {gpu.bandwidth_gbs:,.0f} GB/s of {gpu.name} (the sidebar's GPU): "
            f"{floor * 1e3:.3f} ms, the floor of any forward pass."
        )
    else:
        st.caption(
            "Measured on this machine's CPU (central processing unit). On a GPU "
            "(graphics processing unit) the figure adds one read of the weights at the "
            "GPU's nominal bandwidth, the floor under both times."
        )
