import streamlit as st

from kvcalc import step_time
from kvcalc.core.units import GB, fmt_seconds
from kvcalc.engines.budget import pool_defaults_text
from kvcalc.perf.calibration import band_for_batch
from kvcalc.perf.sweeps import (
    batch_curve,
    max_batch_at,
    max_context_at,
    no_speed_reason,
    step_curve,
)
from webui import callbacks, common
from webui.common import bound, select
from webui.figures import batch_figure, step_time_figure
from webui.memo import cached

sel = common.require_selection()
top = common.page_header(
    "Decode step time vs context length",
    sel,
    (
        "Each decode step reads the weights the batch needs, whatever the context: for this "
        "mixture-of-experts (MoE) model the shared weights and the experts its tokens are routed "
        "to, so more at a larger batch. "
        if sel.spec.moe
        else "Each decode step reads every weight once, whatever the context. "
    )
    + "It also reads the whole cache of every sequence in the batch. The first read is a fixed "
    "band; the second is a wedge that grows with context. Where the wedge overtakes the band, "
    "the cache sets the speed.",
)
common.require_fit(sel)  # no speed for a model that does not fit

c1, c2, c3 = st.columns(3)
batch = c1.number_input(
    "Batch (sequences decoded together)", 1, 4096, 1, 1, **bound("s_batch", "num")
)
context = c2.number_input(
    "Context to read off (tokens)", 1, 10_000_000, 8192, 1024, **bound("s_ctx", "num")
)
x_max = select(
    c3.selectbox,
    "Chart up to (tokens)",
    [0, 8192, 32768, 131072, 262144, 1048576],
    "s_xmax",
    callbacks.chart_range_label,
)

peak = sel.gpu.peak_tflops(sel.weights.dtype)
kw = dict(bandwidth_gbs=sel.bandwidth_gbs, kv_dtype=sel.kv_dtype, tp=sel.tp, pp=sel.pp)
try:
    s = cached(step_time)(
        sel.spec,
        sel.weights,
        context=context,
        batch=batch,
        peak_tflops=peak,
        attention_tflops=sel.gpu.attention_tflops(sel.kv_dtype),
        **kw,
    )
    est = common.estimate_step(sel, s)  # what a real engine takes for the same step
except ValueError as exc:
    common.stop_on_error(exc)
speed = sel.speed.name

if x_max == 0:
    x_max = min(max(2 * (s.crossover_context or 0), 2 * context, 8192), 10_000_000)
contexts = [round(x_max * i / 80) for i in range(81)]
# The curves are kept per setup for every visitor (webui.memo): a class asks for the same ones.
curve = cached(step_curve)(sel.spec, sel.weights, contexts, batch=batch, **kw)
# The real engine's step at each context (kvcalc.perf.calibration: the reads at the achieved
# share or the GEMMs at the MFU, plus the fixed cost and the all-reduces).
real = [
    e.time_s
    for e in common.real_steps(
        sel,
        [(c, batch) for c in contexts],
        peak_tflops=peak,
        attention_tflops=sel.gpu.attention_tflops(sel.kv_dtype),
        **kw,
    )
]
pool = common.pool_kwargs(sel)  # what fits: vLLM's arithmetic at the lab's pool defaults
fits_to = cached(max_context_at)(sel.spec, batch, **pool)
st.plotly_chart(
    step_time_figure(
        curve,
        s.crossover_context,
        batch,
        fits_to=fits_to,
        model_max=sel.spec.max_context,
        estimate=real,
        estimate_name=speed,
    ),
    width="stretch",
    key="s_fig",
)
common.fit_caption(sel, batch, fits_to)

# No speed for a setup that cannot run: past the model's limit, or more than the pool holds.
no_speed = no_speed_reason(sel.spec, context, batch, **pool)
with top:  # the answer first: on a phone it is on the first screen
    m = st.columns(4)
    verdict = "past the limit" if context > sel.spec.max_context else "does not fit"
    m[0].metric(
        "Step time, ideal bound",
        verdict if no_speed else fmt_seconds(s.step_time_s),
        help=f"One decode step at {context:,} tokens: every byte read once at the GPU's full "
        "peak bandwidth, nothing else",
    )
    m[1].metric(
        "Tokens/s, ideal bound",
        verdict if no_speed else f"{s.tokens_per_s:,.1f}",
        help="Tokens per second of the whole batch: one per sequence each step",
    )
    m[2].metric(
        f"Step time, {speed}",
        verdict if no_speed else fmt_seconds(est.time_s),
        help=common.speed_caption(sel, bands=(band_for_batch(batch),)),
    )
    m[3].metric(f"Tokens/s, {speed}", verdict if no_speed else f"{est.tokens_per_s:,.1f}")
    m = st.columns(4)
    m[0].metric(
        "Crossover context (tokens)",
        "never" if s.crossover_context is None else f"{s.crossover_context:,}",
    )
    m[1].metric(
        "Share of the step reading KV", f"{s.kv_share:.0%}", help="Of the ideal bound's bytes"
    )

if no_speed:
    st.warning(
        f"No step time or tokens/s here: {no_speed}. Lower the context or the batch "
        "(the chart shows where they fit).",
        icon=":material/block:",
    )
if s.crossover_context is None:
    st.info(
        "This model's cache stops growing (every layer keeps a bounded window or a fixed "
        "state), so reading it never costs as much as reading the weights."
    )
else:
    beyond = (
        f" That is beyond this model's max_position_embeddings "
        f"({sel.spec.max_context:,}): at the lengths it was trained for, reading the "
        "weights stays the larger part."
        if s.crossover_context > sel.spec.max_context
        else ""
    )
    st.markdown(
        f"At batch {batch}, reading the cache costs as much as reading the weights once each "
        f"sequence holds **{s.crossover_context:,} tokens**.{beyond} Step time grows in a straight "
        "line with context: every extra token of every sequence adds the same bytes to read, at "
        "any length. Below the crossover the fixed weight read is the larger part of a step; "
        "above it, the cache is. A larger batch moves the crossover left (more caches to read "
        "per weight read); FP8 KV or an MLA model such as DeepSeek-V3 moves it right (fewer "
        "bytes per token)."
    )
st.caption(
    "Two numbers. The ideal bound, the least a step can take: every byte read once at the "
    f"GPU's full {sel.gpu.bandwidth_gbs:,.0f} GB/s (the chart's band and wedge) or, where it "
    "takes longer, the arithmetic at the full dense peak; nothing else. The dashed line, "
    f"the {speed}: what a real engine takes for the same step. "
    + common.speed_caption(sel, bands=(band_for_batch(batch),))
    + " "
    + common.embedding_note(sel)
)
if not no_speed and est.overhead_s + est.allreduce_s > 0.25 * est.time_s:
    st.info(
        f"At this size the fixed costs of a real engine's step ({fmt_seconds(est.overhead_s)}"
        " of launches, sampling and scheduling"
        + (
            f", {fmt_seconds(est.allreduce_s)} of tensor-parallel all-reduces"
            if est.allreduce_s
            else ""
        )
        + f") are {(est.overhead_s + est.allreduce_s) / est.time_s:.0%} of its "
        f"{fmt_seconds(est.time_s)}: the ideal bound's tokens/s is "
        f"{s.tokens_per_s / est.tokens_per_s:.1f}x the calibrated estimate's, and a real "
        f"server's own step can differ from that estimate as much as its error band says.",
        icon=":material/schedule:",
    )
if s.bound == "compute":
    st.warning(
        f"At this batch the arithmetic ({fmt_seconds(s.compute_time_s)} at the GPU's dense "
        f"peak) takes longer than the memory reads ({fmt_seconds(s.memory_time_s)}): the "
        "step is compute bound, and the ideal bound above is the arithmetic's time."
    )

with st.expander("How these numbers are computed", icon=":material/function:"):
    common.formula(
        f"weights read   = {s.weight_read_bytes:,} B"
        + (" (MoE: only the experts this batch touches)" if sel.spec.moe else "")
        + "\n"
        f"KV read        = {batch} x {s.kv_read_bytes // max(batch, 1):,} B = "
        f"{s.kv_read_bytes:,} B\n"
        + (f"state read     = {s.state_read_bytes:,} B\n" if s.state_read_bytes else "")
        + f"reads          = {s.weight_read_bytes + s.kv_read_bytes + s.state_read_bytes:,} B / "
        f"{sel.bandwidth_gbs:,.0f} GB/s = {fmt_seconds(s.memory_time_s)}\n"
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
        + f"crossover      = smallest N with {batch} x KV(N) >= {s.weight_read_bytes:,} B\n"
        + (
            f"{speed:<14} = max(reads / {sel.speed.bw_share:g}, compute / MFU "
            f"{sel.speed.mfu:g}) + {fmt_seconds(est.overhead_s)} a step"
            + (f" + {fmt_seconds(est.allreduce_s)} all-reduce" if est.allreduce_s else "")
            + f" = {fmt_seconds(est.time_s)}"
            if not no_speed
            else f"{speed}: not shown"
        )
    )
    st.caption(
        "GB/s = 10^9 bytes per second. At small batches a decode step is bound by memory "
        "bandwidth: the GPU spends it streaming weights and cache, not computing; at large "
        "batches the arithmetic can take longer."
    )

st.subheader(f"Step time against batch at {context:,} tokens")
batches = [1, 2, 4, 8, 16, 32, 64, 128, 256]
bc = cached(batch_curve)(
    sel.spec,
    sel.weights,
    batches,
    context=context,
    peak_tflops=peak,
    attention_tflops=sel.gpu.attention_tflops(sel.kv_dtype),
    **kw,
)
real_tps = [
    e.tokens_per_s
    for e in common.real_steps(
        sel,
        [(context, b) for b in batches],
        peak_tflops=peak,
        attention_tflops=sel.gpu.attention_tflops(sel.kv_dtype),
        **kw,
    )
]
past = context > sel.spec.max_context
most = 0 if past else cached(max_batch_at)(sel.spec, context, **pool)
st.plotly_chart(
    batch_figure(bc, max_batch=most, estimate_tps=real_tps, estimate_name=speed),
    width="stretch",
    key="s_batch_fig",
)
read = [x * sel.bandwidth_gbs * GB / 1e9 for x in bc["weight_s"]]
if sel.spec.moe:
    shared = (
        f"Weights read per step: {read[0]:,.2f} GB at batch 1, {read[-1]:,.2f} GB at batch "
        f"{batches[-1]} of {sel.weights.bytes / GB:,.2f} GB in all: each extra sequence "
        "routes its token to experts the others may not use, so the weight read grows with "
        "batch until every expert is read; tokens/s still rises, more slowly than for a "
        "dense model."
    )
else:
    shared = (
        f"Weights are read once per step however many sequences share it, so tokens/s "
        f"rises with batch until the caches dominate. Weights read per step: "
        f"{read[0]:,.2f} GB at any batch."
    )
holds = (
    f"{context:,} tokens is past the model's limit, so no batch gets tokens/s"
    if past
    else f"At {context:,} tokens the KV pool holds {most:,} sequence{'s' if most != 1 else ''} "
    f"(vLLM's arithmetic at {pool_defaults_text()}, as on the Budget page); larger batches "
    "are hatched and get no tokens/s"
)
st.caption(f"{shared} {holds}.")
