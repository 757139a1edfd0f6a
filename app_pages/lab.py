from dataclasses import replace

import streamlit as st

from kvcalc import DEFAULT_GPU_MEM_UTIL, DEFAULT_RESERVE_BYTES, budget, prefill, step_time
from kvcalc.core.units import GiB, fmt_gib, fmt_seconds
from kvcalc.engines.vllm import NEWEST
from kvcalc.perf import calibration
from kvcalc.perf.sim.plan import lone_prompt
from kvcalc.perf.sweeps import max_context_at, no_speed_reason, step_curve
from webui import common, own_benchmark
from webui.common import number, select, slider
from webui.figures import budget_figure, step_time_figure
from webui.memo import cached
from webui.prose import prose

T = prose("lab")


@common.page_body
def page() -> None:
    sel = common.require_selection()
    top = common.page_header("Inference Lab", sel, T("lead"))
    sel = own_benchmark.panel(sel)

    c = st.columns(4)
    context = number(c[0], "Context per sequence (tokens)", 1, 10_000_000, 8192, 1024, "l_ctx")
    batch = number(c[1], "Batch / concurrent sequences", 1, 100_000, 16, 1, "l_batch")
    prompt = number(c[2], "Prompt length (tokens)", 1, 10_000_000, 2048, 256, "l_prompt")
    util = slider(
        c[3],
        "gpu_memory_utilization",
        0.05,
        1.0,
        DEFAULT_GPU_MEM_UTIL,
        0.01,
        "l_util",
        help=f"vLLM {NEWEST}'s default shown first",
    )
    c = st.columns(4)
    reserve = number(
        c[0], "Reserve (GiB)", 0.0, 1024.0, DEFAULT_RESERVE_BYTES / GiB, 0.5, "l_reserve"
    )
    block = select(c[1].selectbox, "Block size (tokens)", [8, 16, 32, 64, 128], "l_block", index=1)
    mfu = slider(
        c[2],
        "A real engine's MFU (matrix multiplies)",
        0.05,
        1.0,
        calibration.MFU,
        0.001,
        "l_mfu",
        format="%.3f",
        help=T("mfu", MFU=calibration.MFU),
    )
    # The real-engine estimate: the sidebar's share and step cost, this page's MFU.
    speed = calibration.step_model(
        bw_share=sel.bw_share, step_overhead_s=sel.step_overhead_s, mfu=mfu
    )
    if sel.engine:  # an engine profile: its own coefficients, this page's MFU where moved
        speed = sel.speed if mfu == calibration.MFU else replace(sel.speed, mfu=mfu)

    reserve_bytes = round(reserve * GiB)
    common.require_fit(sel, util, reserve_bytes)  # no speed for a model that does not fit
    if prompt > context:
        st.warning("The prompt is longer than the context; the context is what the cache holds.")
    pool = common.pool_deployment(sel, util, reserve_bytes, block)
    peak = sel.gpu.peak_tflops(sel.weights.dtype)
    peaks = dict(peak_tflops=peak, attention_tflops=sel.gpu.attention_tflops(sel.kv_dtype))
    try:
        b = cached(budget)(pool, context, batch)
        s = step_time(sel.deployment, context=context, batch=batch, **peaks)
        # Prefill FLOPs need the parameter count; a config kvcalc cannot count goes without them.
        # A forward pass reads every weight it uses at least once: TTFT has that floor.
        p = (
            None
            if sel.spec.params is None or not peak
            else prefill(
                sel.spec,
                prompt,
                mfu=calibration.IDEAL.mfu,  # the bound: every FLOP at the full dense peak
                tp=sel.tp,
                weight_read_bytes=sel.weights.read_per_step(sel.spec, prompt),
                bandwidth_gbs=sel.bandwidth_gbs,
                **peaks,
            )
        )
        link = dict(tp=sel.tp, link_gbs=sel.gpu.tp_link_gbs)
        # a real engine's step
        es = calibration.estimate_step(sel.spec, s, speed, weight_dtype=sel.weights.dtype, **link)
        ep = None
        if p is not None and not speed.engine:
            ep = calibration.estimate_ttft(sel.spec, p, speed, **link)
    except ValueError as exc:
        common.stop_on_error(exc)

    past_prompt = prompt > sel.spec.max_context
    no_engine_ttft = ""  # why an engine profile gives no TTFT for this prompt
    if p is not None and speed.engine and not past_prompt:
        try:  # an engine profile: the simulator's own steps for this one prompt
            ep = cached(lone_prompt)(pool, prompt, speed)
        except ValueError as exc:
            no_engine_ttft = str(exc)
    ttft_shown = ep is not None and not past_prompt
    now = {
        "pool": b.kv_pool_bytes / GiB,
        "conc": b.max_concurrency,
        "step": es.time_s * 1e3,
        "tps": es.tokens_per_s,
        "ttft": ep.time_s * 1e3 if ep else 0.0,
        "cross": float(s.crossover_context or 0),
    }
    before = st.session_state.get("_lab_prev", now)
    st.session_state["_lab_prev"] = now

    def delta(key: str, fmt: str):
        d = now[key] - before[key]
        return None if abs(d) < 1e-9 else fmt.format(d)

    with top:  # the answer first: on a phone it is on the first screen
        m = st.columns(3)
        m[0].metric("KV pool", fmt_gib(b.kv_pool_bytes), delta("pool", "{:+,.2f} GiB"))
        m[1].metric(
            f"Max concurrency at {context:,} tokens",
            f"{b.max_concurrency:,.2f}x",
            delta("conc", "{:+,.2f}"),
        )
        m[2].metric(
            f"{batch:,} x {context:,} tokens",
            "fits" if b.fits else f"over by {fmt_gib(b.overflow_bytes)}",
        )
        m = st.columns(4)
        # One rule with the other pages (kvcalc.perf.sweeps.no_speed_reason): past the model's limit
        # or more than this pool holds, no speed.
        past = no_speed_reason(sel.spec, context, batch)
        real = f", {speed.name}"
        if b.fits and not past:
            m[0].metric(
                f"Step time{real}",
                fmt_seconds(es.time_s),
                delta("step", "{:+,.2f} ms"),
                delta_color="inverse",
                help=f"The ideal bound (every byte at the full bandwidth, nothing else): "
                f"{fmt_seconds(s.step_time_s)}",
            )
            m[1].metric(
                f"Tokens/s{real}",
                f"{es.tokens_per_s:,.0f}",
                delta("tps", "{:+,.0f}"),
                help=f"The ideal bound: {s.tokens_per_s:,.0f} tokens/s",
            )
        else:  # no speed past the model's limit or for a batch that cannot run
            for where, what in zip(m, ("Step time", "Tokens/s")):
                where.metric(f"{what}{real}", "past the limit" if past else "does not fit")
            st.warning(
                f"No step time or tokens/s: {past}. Lower the context."
                if past
                else T("no_fit", batch=batch, context=context, most=max(int(b.max_concurrency), 0))
            )
        if not ttft_shown:
            m[2].metric(
                f"TTFT{real}",
                "past the limit" if past_prompt else "unknown",
                help=f"Time to first token (TTFT) of one {prompt:,}-token prompt: "
                + (
                    no_speed_reason(sel.spec, prompt)
                    if past_prompt
                    else no_engine_ttft
                    if no_engine_ttft
                    else "prefill FLOPs need the parameter count, which kvcalc could not take "
                    "from this config (see the sidebar)."
                    if sel.spec.params is None
                    else "the prefill time needs the GPU's peak TFLOPS, which is not stated."
                ),
            )
        else:
            m[2].metric(
                f"TTFT{real}",
                fmt_seconds(ep.time_s),
                delta("ttft", "{:+,.1f} ms"),
                delta_color="inverse",
                help=T("ttft_help", prompt=prompt, ideal=fmt_seconds(p.time_s)),
            )
        if b.fits and not past:
            st.caption(
                f"Ideal bound: a step of {fmt_seconds(s.step_time_s)} "
                f"({s.tokens_per_s:,.0f} tokens/s)"
                + (f", time to first token {fmt_seconds(p.time_s)}" if ttft_shown else "")
                + ". "
                + common.speed_caption(
                    sel, speed, bands=(calibration.band_for_batch(batch), "ttft")
                )
            )
        m[3].metric(
            "Crossover context (tokens)",
            "never" if s.crossover_context is None else f"{s.crossover_context:,}",
            delta("cross", "{:+,.0f} tokens"),
        )

    left, right = st.columns(2)
    with left:
        st.plotly_chart(budget_figure(b), width="stretch", key="l_budget")
    with right:
        x_max = min(max(2 * (s.crossover_context or 0), 2 * context, 8192), 10_000_000)
        xs = [round(x_max * i / 40) for i in range(41)]
        curve = cached(step_curve)(sel.deployment, xs, batch=batch)
        real_curve = [
            e.time_s for e in common.real_steps(sel, [(c, batch) for c in xs], speed, **peaks)
        ]
        fits_to = cached(max_context_at)(pool, batch)
        st.plotly_chart(
            step_time_figure(
                curve,
                s.crossover_context,
                batch,
                fits_to=fits_to,
                model_max=sel.spec.max_context,
                estimate=real_curve,
                estimate_name=speed.name,
            ),
            width="stretch",
            key="l_step",
        )
        st.caption(T("chart_caption", sel=sel, batch=batch))

    with st.expander("How these numbers are computed", icon=":material/function:"):
        common.formula(
            f"KV pool     = ceil({b.total_bytes:,} x {util:g}) - {b.weights_bytes:,} - "
            f"{b.reserve_bytes:,} = {b.kv_pool_bytes:,} B\n"
            f"concurrency = {b.num_blocks:,} blocks x {b.block_bytes:,} B / {b.seq_bytes:,} B per "
            f"sequence = {b.max_concurrency:,.2f}\n"
            f"decode step = ({s.weight_read_bytes:,} + {s.kv_read_bytes + s.state_read_bytes:,}) "
            f"B / {sel.bandwidth_gbs:,.0f} GB/s = "
            + (
                fmt_seconds(s.memory_time_s)
                + (
                    f"; its FLOPs at the full peak take {fmt_seconds(s.compute_time_s)}, so "
                    f"{fmt_seconds(s.step_time_s)}"
                    if s.bound == "compute"
                    else ""
                )
                + " (ideal bound)\n"
                + (
                    f"  {speed.name}: max(weight reads at {speed.bw_share:.3g}"
                    + (f", routed experts at {speed.expert_share:.3g}" if sel.spec.moe else "")
                    + f", GEMMs at MFU {speed.mfu:.3g}"
                    + (f", the experts' at {speed.expert_gemm_mfu:.3g}" if sel.spec.moe else "")
                    + f") + max(KV reads at {speed.kv_share:.3g}, "
                    f"attention at MFU {speed.attention_mfu:.3g}) + "
                    if speed.engine
                    else f"  {speed.name}: max(that / {speed.bw_share:g}, compute / MFU {mfu:g}) + "
                )
                + f"{fmt_seconds(es.overhead_s)} a step"
                + (f" + {fmt_seconds(es.allreduce_s)} all-reduce" if es.allreduce_s else "")
                + f" = {fmt_seconds(es.time_s)}"
                if b.fits and not past
                else "(not shown: it cannot run)"
            )
            + (
                ""
                if not ttft_shown
                else f"\nTTFT        = max({p.flops:.3e} FLOPs / "
                f"({p.peak_tflops:g} TFLOPS x {p.mfu:g}"
                + (f" x {sel.tp} GPUs" if sel.tp > 1 else "")
                + f") = {fmt_seconds(p.compute_time_s)}, weights read once = "
                f"{fmt_seconds(p.memory_time_s)}) = {fmt_seconds(p.time_s)} ({p.bound} bound, the "
                f"ideal; one request on an idle GPU)\n"
                + (
                    f"  {speed.name}: the simulator's {ep.steps} prefill step"
                    + ("s" if ep.steps > 1 else "")
                    + f" of at most {ep.chunk:,} tokens, {fmt_seconds(ep.engine_s)}, + "
                    f"{fmt_seconds(ep.api_s)} of API = {fmt_seconds(ep.time_s)}"
                    if speed.engine
                    else f"  {speed.name}: the FLOPs at MFU {mfu:g} + a step's fixed cost"
                    + (" + all-reduces" if ep.allreduce_s else "")
                    + f" + {fmt_seconds(ep.api_s)} of API = {fmt_seconds(ep.time_s)}"
                )
            )
        )
        st.caption(T("prefill_terms"))


page()
