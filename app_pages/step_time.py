"""Decode step time vs context length, on the Learn path: the chapter's formula only (the ideal
bound, docs/design.md principle 7). The x axis stays put while batch, KV format or model change,
and the crossover before the last change stays as a ghost, so "raise the batch and it moves
left; FP8 KV or MLA and it moves right" is seen. What a real engine adds is the Lab's."""

import streamlit as st

from kvcalc import step_time
from kvcalc.core.units import GB, fmt_bytes, fmt_seconds
from kvcalc.engines.budget import pool_defaults_text
from kvcalc.perf import sweeps
from webui import callbacks, common, pages
from webui.common import number, select
from webui.figures import batch_figure, step_time_figure
from webui.fit_fix import fitting_setup_button
from webui.memo import cached
from webui.prose import prose
from webui.urlstate import declare

T = prose("step_time")

# The chart's end, fixed whatever the batch, KV format or model (issue 37, F1): 131,072 tokens
# (128K) holds the chapter's crossovers on one linear axis (Llama 3.1 8B on an H100: 114,517 at
# batch 1, 7,158 at batch 16, 14,315 with FP8 KV; DeepSeek-V3: about 31K), and a linear axis
# keeps the chapter's picture (a flat band, a straight wedge). "auto" rescales to the crossover.
X_ENDS = [8192, 32768, 131072, 262144, 1048576, 0]
DEFAULT_END = X_ENDS.index(131072)


@common.page_body
def page() -> None:
    sel = common.require_selection()
    top = common.page_header(
        "Decode step time vs context length",
        sel,
        (
            "Each decode step reads the weights its batch needs (for this mixture-of-experts (MoE) "
            "model: the shared weights and the experts its tokens are routed to), the rose band, "
            if sel.spec.moe
            else "Each decode step reads every weight once (the rose band) "
        )
        + T("lead_tail"),
    )

    c1, c2, c3 = st.columns(3)
    batch = number(c1, "Batch (sequences decoded together)", 1, 4096, 1, 1, "s_batch")
    context = number(c2, "Context to read off (tokens)", 1, 10_000_000, 8192, 1024, "s_ctx")
    x_max = select(
        c3.selectbox,
        "Chart up to (tokens)",
        X_ENDS,
        "s_xmax",
        callbacks.chart_range_label,
        index=DEFAULT_END,
    )

    # A model that does not fit gets no speed, but its cache per token needs no GPU (issue 37, F2):
    # shown, with one move to a setup that fits.
    try:
        common.require_fit(sel)
    except common.PageStop:
        with top:
            st.metric(
                "KV cache per token",
                fmt_bytes(sel.deployment.kv_cache(1).kv_bytes_per_token_nominal),
                help="One token's keys and values in every layer: set by the model and the KV "
                "format alone, whatever the GPU",
            )
        fitting_setup_button(sel, key="s_fit", context=context)
        raise
    if st.session_state.get("s_fit"):
        # The button above was clicked in this page's own rerun (a fragment): the setup it chose
        # now fits, so the button is not drawn and its own full rerun never comes. Rerun the whole
        # app once, so the sidebar shows the GPU and TP the page now uses.
        st.rerun(scope="app")

    peaks = dict(
        peak_tflops=sel.gpu.peak_tflops(sel.weights.dtype),
        attention_tflops=sel.gpu.attention_tflops(sel.kv_dtype),
    )
    try:
        s = cached(step_time)(sel.deployment, context=context, batch=batch, **peaks)
    except ValueError as exc:
        common.stop_on_error(exc)

    # The crossover before the last change that moved it, and what that change was, kept for this
    # visitor only (the session, not the link). The crossover is a ratio of bytes: the bandwidth
    # cancels, so these are what can move it.
    cross = s.crossover_context
    setup = {
        "model": common.plain(sel.label),
        "weights": sel.weights.dtype.upper(),
        "KV cache": sel.kv_dtype.upper(),
        "batch": f"{batch:,}",
        "TP": f"{sel.tp}",
        "PP": f"{sel.pp}",
    }
    last = st.session_state.get("s_cross_now")
    if last is not None and last[0] != cross:
        st.session_state["s_cross_before"] = last
    st.session_state["s_cross_now"] = (cross, setup)
    before, changed = None, ""
    if "s_cross_before" in st.session_state:
        before, was = st.session_state["s_cross_before"]
        before = None if before == cross else before
        changed = ", ".join(f"{k} {was[k]} → {v}" for k, v in setup.items() if was.get(k) != v)

    if x_max == 0:
        x_max = min(max(2 * (cross or 0), 2 * context, 8192), 10_000_000)
    contexts = [round(x_max * i / 80) for i in range(81)]
    # The curves are kept per setup for every visitor (webui.memo): a class asks for the same ones.
    curve = cached(sweeps.step_curve)(sel.deployment, contexts, batch=batch)
    pool = common.pool_deployment(sel)  # what fits: vLLM's arithmetic at the lab's pool defaults
    fits_to = cached(sweeps.max_context_at)(pool, batch)
    st.plotly_chart(
        step_time_figure(
            curve, cross, batch, fits_to=fits_to, model_max=sel.spec.max_context, before=before
        ),
        width="stretch",
        key="s_fig",
    )

    seqs = f"{batch:,} sequence{'' if batch == 1 else 's'}"
    if fits_to >= sel.spec.max_context:
        fit = f"{seqs} {'fits' if batch == 1 else 'fit'} in the KV pool at every length"
    elif fits_to == 0:
        fit = f"{seqs} {'does' if batch == 1 else 'do'} not fit in the KV pool at any length"
    else:
        fit = (
            f"{seqs} {'fits' if batch == 1 else 'fit'} in the KV pool up to {fits_to:,} tokens"
            f"{'' if batch == 1 else ' each'} (red past it)"
        )
    st.caption(
        f"Ideal bound: every byte read once at the GPU's full {sel.bandwidth_gbs:,.0f} GB/s "
        "(gigabytes per second), nothing else. Dashed: the crossover"
        + ("" if before is None else "; dotted grey: where it was before your last change")
        + f". {fit}; the dash-dot line is the model's limit "
        f"({sel.spec.max_context:,} tokens) when the chart reaches it."
    )

    # No speed for a setup that cannot run: past the model's limit, or more than the pool holds.
    no_speed = sweeps.no_speed_reason(sel.spec, context, batch, pool)
    verdict = "past the limit" if context > sel.spec.max_context else "does not fit"
    with top:  # the answer first: on a phone it is on the first screen
        m = st.columns(3)
        m[0].metric(
            "Step time, ideal bound",
            verdict if no_speed else fmt_seconds(s.step_time_s),
            help=f"One decode step at {context:,} tokens: every byte read once at the GPU's full "
            "bandwidth (or, where it takes longer, every FLOP at its full dense peak), nothing "
            "else",
        )
        m[1].metric(
            "Tokens/s, ideal bound",
            verdict if no_speed else f"{s.tokens_per_s:,.1f}",
            help="Tokens per second of the whole batch: one per sequence each step",
        )
        m[2].metric(
            "Crossover context (tokens)",
            "never" if cross is None else f"{cross:,}",
            None if before is None or cross is None else f"{cross - before:+,} tokens",
            delta_color="off",
            help="The context at which reading the batch's KV cache costs as much as reading the "
            "weights",
        )

    if no_speed:
        st.warning(T("no_step_time", no_speed=no_speed), icon=":material/block:")
    if cross is None:
        st.info(T("no_crossover"))
    else:
        beyond = T("that_beyond_model", sel=sel) if cross > sel.spec.max_context else ""
        moved = (
            ""
            if before is None
            else f" Your last change{f' ({changed})' if changed else ''} moved it "
            f"{'left' if cross < before else 'right'}, from {before:,} tokens."
        )
        st.markdown(T("crossover", batch=batch, cross=cross, moved=moved, beyond=beyond))
    if s.bound == "compute":
        st.warning(
            f"At this batch the arithmetic ({fmt_seconds(s.compute_time_s)} at the GPU's dense "
            f"peak) takes longer than the memory reads ({fmt_seconds(s.memory_time_s)}): the step "
            "is compute bound, and the ideal bound above is the arithmetic's time."
        )

    with st.expander("How these numbers are computed", icon=":material/function:"):
        common.formula(
            f"weights read   = {s.weight_read_bytes:,} B"
            + (" (MoE: only the experts this batch touches)" if sel.spec.moe else "")
            + "\n"
            f"KV read        = {batch} x {s.kv_read_bytes // max(batch, 1):,} B = "
            f"{s.kv_read_bytes:,} B ({s.kv_share:.0%} of the bytes)\n"
            + (f"state read     = {s.state_read_bytes:,} B\n" if s.state_read_bytes else "")
            + f"reads          = {s.weight_read_bytes + s.kv_read_bytes + s.state_read_bytes:,} B "
            f"/ {sel.bandwidth_gbs:,.0f} GB/s = {fmt_seconds(s.memory_time_s)}\n"
            + (
                f"compute        = FLOPs / the dense peak = {fmt_seconds(s.compute_time_s)}\n"
                if s.compute_time_s is not None
                else ""
            )
            + "step time      = "
            + ("max(reads, compute) = " if s.compute_time_s is not None else "reads = ")
            + (
                f"{fmt_seconds(s.step_time_s)}\n"
                f"tokens/s       = {batch} / {s.step_time_s:.6f} s = {s.tokens_per_s:,.1f}\n"
                if not no_speed
                else f"(not shown: {verdict})\n"
            )
            + f"crossover      = smallest N with {batch} x KV(N) >= {s.weight_read_bytes:,} B"
        )
        st.caption(
            T("terms")
            + common.embedding_note(sel)
            + T("what_fits_vllm", defaults=pool_defaults_text())
        )

    # A fold built only when opened (issue 42; its state in the link): its chart costs a first
    # render and a rerun nothing while it is closed.
    declare("s_batch_open", "bool")
    fold = st.expander(
        f"Step time against batch at {context:,} tokens",
        icon=":material/bar_chart:",
        key="s_batch_open",
        bind="query-params",
    )
    with fold:
        if fold.open:
            _batch_fold(sel, context, peaks, pool)

    pages.link("lab", "What a real engine adds (Inference Lab)", ":material/arrow_forward:")


def _batch_fold(sel, context: int, peaks: dict, pool) -> None:
    """Step time and tokens/s against batch at ``context``, larger batches than the pool holds
    hatched."""
    batches = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    bc = cached(sweeps.batch_curve)(sel.deployment, batches, context=context, **peaks)
    past = context > sel.spec.max_context
    most = 0 if past else cached(sweeps.max_batch_at)(pool, context)
    st.plotly_chart(batch_figure(bc, max_batch=most), width="stretch", key="s_batch_fig")
    read = [x * sel.bandwidth_gbs * GB / 1e9 for x in bc["weight_s"]]
    if sel.spec.moe:
        shared = (
            f"Weights read per step: {read[0]:,.2f} GB at batch 1, {read[-1]:,.2f} GB at "
            f"batch {batches[-1]} of {sel.weights.bytes / GB:,.2f} GB in all: each extra "
            "sequence routes its token to experts the others may not use, so the weight "
            "read grows with batch until every expert is read; tokens/s still rises, more "
            "slowly than for a dense model."
        )
    else:
        shared = T("dense_reads", first=read[0])
    holds = (
        f"{context:,} tokens is past the model's limit, so no batch gets tokens/s"
        if past
        else f"At {context:,} tokens the KV pool holds {most:,} "
        f"sequence{'s' if most != 1 else ''}; larger batches are hatched and get no tokens/s"
    )
    st.caption(f"{shared} {holds}.")


page()
