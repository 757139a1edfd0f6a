import streamlit as st

from kvcalc import get_dtype, prefill, step_time
from kvcalc.core.units import GiB, fmt_seconds
from kvcalc.perf.calibration import IDEAL, band_for_batch, error_band_text
from kvcalc.perf.intensity import attention_points, decode_step, prefill_point, roofs
from kvcalc.perf.sweeps import max_batch_at
from webui import common, own_benchmark
from webui.common import number
from webui.figures import head_sharing_figure, roofline_figure
from webui.prose import prose

T = prose("roofline")


@common.page_body
def page() -> None:
    sel = common.require_selection()
    top = common.page_header(
        "Roofline: why prefill computes and decode waits for memory", sel, T("lead")
    )
    common.require_fit(sel)
    sel = own_benchmark.panel(sel)
    if sel.spec.params is None:
        common.stop_on_error(T("roofline_needs_model"))

    spec, limit = sel.spec, sel.spec.max_context
    c = st.columns(4)
    # Defaults within the model's limit (GPT-2 is trained for 1,024 tokens).
    prompt = number(c[0], "Prompt (tokens)", 1, 1_000_000, min(512, limit), 64, "r_prompt")
    batch = number(c[1], "Decode batch (sequences)", 1, 4096, 32, 1, "r_batch")
    context = number(c[2], "Decode context (tokens)", 1, 1_000_000, min(8192, limit), 1024, "r_ctx")
    queries = number(c[3], "Query tokens per step", 1, 16, 1, 1, "r_q", help=T("queries_help"))
    longest = context + queries - 1  # the cache the step reads, its new tokens included
    if prompt > limit or longest > limit:
        what = (
            f"a prompt of {prompt:,} tokens"
            if prompt > limit
            else f"a decode step at {longest:,} tokens"
        )
        common.stop_on_error(T("past_limit", spec=spec, limit=limit, what=what))
    pool = common.pool_deployment(sel)  # what fits: the Decode step time page's check
    util = pool.engine.gpu_memory_utilization
    pool_text = T("vllm_s_arithmetic", util=util, reserve=pool.reserve_bytes / GiB)
    most = max_batch_at(pool, longest)
    if most == 0:
        common.stop_on_error(T("not_even_one", longest=longest, pool_text=pool_text))
    fits = batch <= most
    kw = dict(kv_dtype=sel.kv_dtype, tp=sel.tp)
    try:
        r = roofs(sel.gpu, sel.weights.dtype, sel.kv_dtype, sel.bandwidth_gbs)
        peaks = dict(peak_tflops=r.gemm_tflops, attention_tflops=r.attention_tflops)
        ttft = prefill(
            spec,
            prompt,
            mfu=IDEAL.mfu,  # the ideal bound, as every figure on this page
            **peaks,
            tp=sel.tp,
            weight_read_bytes=sel.weights.read_per_step(spec, prompt),
            bandwidth_gbs=sel.bandwidth_gbs,
        )
        pf = prefill_point(spec, sel.weights, prompt, time_s=ttft.time_s, **kw)
        steps = {
            b: decode_step(sel.deployment, r, batch=b, context=context, queries=queries)
            for b in sorted(
                {2**k for k in range(13) if 2**k <= most} | {most} | ({batch} if fits else set())
            )
        }
        attn = attention_points(spec, kv_dtype=sel.kv_dtype, context=context, queries=queries)
        st_b = (
            step_time(sel.deployment, context=context, batch=batch, find_crossover=False, **peaks)
            if fits
            else None
        )
    except ValueError as exc:
        common.stop_on_error(exc)

    d1, dm = steps[1], steps[most]
    db = steps.get(batch)
    traj = [s.whole for s in steps.values()]
    points = [pf] + ([db.gemm, db.attention, db.whole] if db else []) + attn
    st.plotly_chart(roofline_figure(r, points, traj), width="stretch", key="r_fig")
    st.caption(T("chart_caption", sel=sel, most=most, longest=longest))

    def fi(x: float) -> str:
        """An intensity, with two decimals below 10 FLOP/B (decode at batch 1 is about 1)."""
        return f"{x:,.2f}" if x < 10 else f"{x:,.1f}"

    with top:  # the answer first: on a phone it is on the first screen
        m = st.columns(3)
        m[0].metric(
            "Ridge point" if r.one_roof else "Ridge points: GEMMs / attention",
            f"{r.gemm_ridge:,.0f}{'' if r.one_roof else f' / {r.attention_ridge:,.0f}'} FLOP/B",
        )
        m[1].metric(f"Prefill of {prompt:,} tokens", f"{pf.intensity:,.1f} FLOP/B")
        m[2].metric(
            f"Decode at batch {batch:,}",
            f"{fi(db.whole.intensity)} FLOP/B" if db else "does not fit",
        )
        # Three headline figures (issue 37): decode at batch 1 is in the decode sentence below.

    g_name, a_name = r.name("gemm"), r.name("attention")
    served = ""
    if sel.weights.checkpoint_dtype:
        share = get_dtype(sel.weights.dtype).bits / get_dtype(sel.weights.checkpoint_dtype).bits
        served = (
            f" The checkpoint is stored in {sel.weights.checkpoint_dtype.upper()}; vLLM loads "
            f"it in {sel.weights.dtype.upper()} (dtype auto), so its weights take "
            + ("half" if share == 0.5 else f"{share:g} x")
            + " the checkpoint's bytes and run on the 16-bit tensor cores."
        )
    roof_text = (
        T("one_roof", g_name=g_name, r=r, sel=sel)
        if r.one_roof
        else T("two_roofs", g_name=g_name, r=r, a_name=a_name)
    )
    roofs_text = f"**Two kinds of work.** {roof_text}{served} Assumed: {'; '.join(r.assumptions)}."

    side = "above" if pf.intensity > r.gemm_ridge else "below"
    st.markdown(
        f"**Prefill** of {prompt:,} tokens does {pf.intensity:,.1f} FLOPs per byte, {side} the "
        f"GEMM ridge of {r.gemm_ridge:,.0f}: it is {ttft.bound} bound. Its time to first token "
        f"(TTFT) is max(compute {fmt_seconds(ttft.compute_time_s)}, memory "
        f"{fmt_seconds(ttft.memory_time_s)}) = **{fmt_seconds(ttft.time_s)}** at the ideal bound "
        f"(the full dense peak), which puts it at {pf.achieved_tflops:,.1f} TFLOP/s on the chart; "
        "a real engine's matrix multiplies reach about half of the peak (MFU, model FLOPs "
        "utilization: see the Inference Lab)."
    )

    q_text = f", {queries} query tokens each" if queries > 1 else ""
    if db is None:
        st.markdown(
            f"**Decode** at batch {batch:,} does not fit: at {longest:,} tokens the KV pool holds "
            f"{most:,} sequence{'s' if most != 1 else ''} ({pool_text}), so no figure "
            f"is shown for it. Decode at {most:,} sequences, the most that fit, does "
            f"{fi(dm.whole.intensity)} FLOPs per byte."
        )
    else:
        same = queries == 1 and abs(db.time_s - st_b.step_time_s) <= 1e-9 * st_b.step_time_s
        when = (
            " (the Decode step time page's figure)"
            if same
            else T("other_page", step=fmt_seconds(st_b.step_time_s))
        )
        st.markdown(
            f"**Decode** at batch {batch:,} and {context:,} tokens{q_text} does "
            f"{fi(db.whole.intensity)} FLOPs per byte in all. Its GEMMs do "
            f"{db.gemm.intensity:,.1f} FLOP/B against the GEMM ridge of {r.gemm_ridge:,.0f} and "
            f"are {db.gemm_bound} bound; its attention does {db.attention.intensity:,.1f} FLOP/B "
            f"against the attention ridge of {r.attention_ridge:,.0f} and "
            f"is {db.attention_bound} bound. A step takes the sum of the two parts' times, "
            f"**{fmt_seconds(db.time_s)}**{when}. A larger batch shares one weight read among more "
            f"tokens and moves decode right (at batch 1 it does {fi(d1.whole.intensity)} FLOP/B), "
            f"but each sequence still reads its own cache: at "
            f"{most:,} sequences, the most that fit at {longest:,} tokens, decode reaches only "
            f"{fi(dm.whole.intensity)} FLOP/B."
        )
        real = common.estimate_step(sel, st_b)
        costs = f"{fmt_seconds(real.overhead_s)} of fixed cost" + (
            f" and {fmt_seconds(real.allreduce_s)} of all-reduces" if real.allreduce_s else ""
        )
        how = (  # an engine profile says its own shares and its own band
            f"(with {costs}), against {fmt_seconds(st_b.memory_time_s)} for the bytes alone. "
            + common.speed_caption(sel)
            if sel.speed.engine
            else f"(its reads at {sel.speed.bw_share:g} of the bandwidth, its GEMMs at MFU "
            f"{sel.speed.mfu:g}, plus {costs}), against {fmt_seconds(st_b.memory_time_s)} for "
            "the bytes alone. Its error: " + error_band_text(band_for_batch(batch)) + "."
        )
        st.markdown(
            f"These are ideal bounds: the roofs teach where the time goes. A real engine takes "
            f"longer for the same step, **{fmt_seconds(real.time_s)}** in the {sel.speed.name} "
            + how
        )

    by = {p.label.removeprefix("attention "): p for p in attn}
    mha, mqa, mla = by["MHA"], by["MQA"], by["MLA (absorbed)"]
    gqa_key = next((k for k in by if k.startswith("GQA")), None)
    layer = next(lay for lay in spec.layers if lay.q_heads and lay.stores_tokens)
    h = layer.q_heads
    if gqa_key:
        kvh = int(gqa_key.split()[1])
        ref, ref_name = by[gqa_key], "GQA's"
        gqa_text = T("gqa", kvh=kvh, group=h // kvh, gqa=ref)
    else:
        gqa_text = T("grouped_query_attention", h=h)
        ref, ref_name = mqa, "MQA's"
    q_note = T("query_tokens_per", queries=queries) if queries > 1 else ""
    mla_side = "above" if mla.intensity > r.attention_ridge else "below"
    attention_fold = st.expander(
        "Attention alone: why MLA computes more per cached byte than GQA", icon=":material/hub:"
    )
    attention_fold.markdown(
        f"**Attention alone** does the same FLOPs per cached byte at any batch and any length. "
        f"Multi-head attention (MHA) reads one key and one value per query head: "
        f"{mha.intensity:,.1f} FLOP/B. {gqa_text}; multi-query attention (MQA), one KV head for "
        f"all {h}, {mqa.intensity:,.1f}. Multi-head latent attention (MLA) with its up-projections "
        f"absorbed scores every query head against the whole cached latent: "
        f"{mla.intensity:,.1f} FLOP/B, {mla.intensity / ref.intensity:,.1f} times {ref_name}, "
        f"{mla_side} the attention ridge of {r.attention_ridge:,.0f}: this is why MLA decode is "
        f"compute-heavier than GQA.{q_note}"
    )
    kv_layer = next((lay for lay in spec.kv_layers if lay.kv_heads is not None), None)
    if kv_layer is not None and kv_layer.q_heads % kv_layer.kv_heads == 0:
        with attention_fold:
            st.markdown("**Which query heads share a cached key and value, in this model**")
            st.plotly_chart(
                head_sharing_figure(
                    kv_layer.q_heads,
                    kv_layer.kv_heads,
                    kv_layer.head_dim,
                    kv_layer.v_head_dim,
                    get_dtype(sel.kv_dtype).bytes_per_element,
                ),
                width="stretch",
                key="r_heads",
            )
            st.caption(T("head_lines"))
    with st.expander("The formulas, with this model's numbers", icon=":material/function:"):
        st.markdown(roofs_text)
        ridges = [("GEMM", r.gemm_tflops, r.gemm_ridge, g_name)]
        if not r.one_roof:
            ridges.append(("attention", r.attention_tflops, r.attention_ridge, a_name))
        lines = [
            f"{what + ' ridge':<15} = {tflops:,.1f} x 10^12 FLOP/s / {sel.bandwidth_gbs:,.0f} x "
            f"10^9 B/s = {ridge:,.1f} FLOP/B ({name})"
            for what, tflops, ridge, name in ridges
        ] + [pf.formula]
        if db:
            lines += [
                db.gemm.formula,
                db.attention.formula,
                db.whole.formula,
                f"step time = max(GEMM FLOPs / GEMM peak, weight bytes / bandwidth) + "
                f"max(attention FLOPs / attention peak, KV bytes / bandwidth) = "
                f"{fmt_seconds(db.gemm_time_s)} + {fmt_seconds(db.attention_time_s)}",
            ]
        common.formula("\n".join(lines + [p.formula for p in attn]))
        st.caption(T("attention_terms"))


page()
