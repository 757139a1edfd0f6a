import streamlit as st

from kvcalc.core.units import fmt_seconds
from kvcalc.perf.calibration import IDEAL
from kvcalc.perf.engines import BATCH_FLAGS, ENGINE_NAMES, parse_engine
from webui import common, own_benchmark, pages, serving
from webui.common import number, select
from webui.figures import frontier_figure, limit_name, utilization_figure
from webui.prose import prose

T = prose("frontier")


@common.page_body
def page() -> None:
    sel = common.require_selection()
    top = common.page_header("Throughput and latency: the serving frontier", sel, T("lead"))
    common.require_fit(sel)
    sel = own_benchmark.panel(sel)
    speed = sel.speed  # a real server: the calibrated estimate, or the sidebar's own coefficients
    # whose pool and batching defaults the runs take: an engine profile's own engine's (the
    # ideal bound beside it too), else vLLM's
    engine = speed.engine
    key = parse_engine(engine)[0] if engine else "vllm"
    who, (seqs_flag, tokens_flag) = ENGINE_NAMES[key], BATCH_FLAGS[key]

    c = st.columns(4)
    prompt = number(c[0], "Prompt (tokens)", 1, 32_768, 512, 64, "fr_prompt")
    output = number(c[1], "Output (tokens)", 2, 8192, 256, 32, "fr_output")
    slo_tpot = number(
        c[2], "Objective: TPOT p99 at most (ms)", 1, 10_000, 100, 10, "fr_slo_tpot", help=T("tpot")
    )
    slo_ttft = number(
        c[3], "...and TTFT p99 at most (ms)", 1, 600_000, 2000, 100, "fr_slo_ttft", help=T("ttft")
    )
    c = st.columns(3)
    kind = select(
        c[0].selectbox,
        "Request lengths",
        list(serving.LENGTHS),
        "fr_len",
        serving.lengths_label,
        help=T("lengths_help", serving=serving),
    )
    overlay = select(
        c[1].selectbox,
        "Overlay: change one thing",
        list(serving.OVERLAYS),
        "fr_over",
        serving.overlay_label,
        index=1,
    )
    mns = number(c[2], f"{seqs_flag} (0 = {who}'s default)", 0, 4096, 0, 64, "fr_mns")

    base = dict(
        spec=sel.spec,
        w=sel.weights,
        gpu=sel.gpu,
        kv_dtype=sel.kv_dtype,
        tp=sel.tp,
        speed=speed,
        prompt=prompt,
        output=output,
        share=0.0,
        max_num_seqs=mns or None,
        kind=kind,
        engine=engine,
    )
    if sel.pp != 1:
        common.stop_on_error(T("serving_simulator_models"))
    changed, note = None, ""
    if overlay == "fp8":
        if sel.kv_dtype == "fp8":
            note = "The KV cache is already FP8 (8-bit floating point); pick another overlay."
        else:
            changed = {**base, "kv_dtype": "fp8"}
    elif overlay == "mha":
        spec = sel.spec.with_layers([lay.as_mha() for lay in sel.spec.layers])
        if spec.layers == sel.spec.layers:
            note = "This model already has one K/V head per query head."
        else:
            changed = {**base, "spec": spec}
            note = T("mha_multi_head")
    elif overlay == "prefix":
        changed = {**base, "share": 0.5}
    elif overlay == "tp2":
        changed = {**base, "tp": sel.tp * 2}
        note = (
            "Tensor parallel (TP): figures per GPU; each step pays its all-reduces over "
            f"{sel.gpu.tp_link or 'the link'} ({sel.gpu.tp_link_gbs or 0:,g} GB/s one way)."
        )
    elif overlay == "gpu":
        big = serving.larger_gpu(sel.gpu)
        if big.key == sel.gpu.key:
            note = "This is the largest GPU in the registry."
        else:
            changed = {**base, "gpu": big}
            note = f"The larger GPU: {big.name}."
    try:
        curve = serving.frontier(**base)
        bound_curve = serving.frontier(**{**base, "speed": IDEAL})  # the ideal bound, for contrast
    except ValueError as exc:
        common.stop_on_error(exc)
    other = None
    if changed:
        try:
            other = serving.frontier(**changed)
        except ValueError as exc:  # e.g. prefix sharing on a model with windows or states
            note = f"The overlay cannot be simulated: {exc}."

    curves = [(f"{speed.name} ({sel.kv_dtype.upper()} KV)", curve)]
    if other is not None:
        curves.append((f"{serving.overlay_label(overlay)} ({speed.name})", other))

    def meets(r) -> bool:
        """Within the service-level objective: TPOT p99 and TTFT p99 (after the warm-up)."""
        ttft = r.ttft_p99_steady_s if r.ttft_p99_steady_s is not None else r.ttft_p99_s
        return r.tpot_p99_s <= slo_tpot / 1e3 and ttft <= slo_ttft / 1e3

    ok = [(u, r) for u, r in zip(curve.users, curve.results) if meets(r)]
    slo_best = max(ok, key=lambda ur: ur[1].output_tokens_per_s_per_gpu, default=None)
    slo = dict(
        tpot_s=slo_tpot / 1e3,
        meets=[(r.output_tokens_per_s_per_user, r.output_tokens_per_s_per_gpu) for _, r in ok],
        best=None
        if slo_best is None
        else (
            slo_best[1].output_tokens_per_s_per_user,
            slo_best[1].output_tokens_per_s_per_gpu,
            f"most under the objective: {slo_best[1].output_tokens_per_s_per_gpu:,.0f} "
            f"tokens/s per GPU ({slo_best[0]:,} users)",
        ),
    )
    drawn = [  # the ideal bound dotted
        (n, f.users, f.results, f.capacity.onset_users, "dot" if f is bound_curve else None)
        for n, f in [*curves, ("ideal bound (full bandwidth, nothing added)", bound_curve)]
    ]
    st.plotly_chart(frontier_figure(drawn, slo=slo, engine=engine), width="stretch", key="fr_fig")
    st.caption(
        f"Each point is one simulated run with that many users. Solid: the {speed.name}; "
        "dotted: the ideal bound, which no server reaches; rings: runs within the objective. "
        + common.speed_caption(sel, bands=("output_tokens_per_s", "tpot_itl", "ttft"))
    )
    if note:
        st.info(note)
    with st.expander("Reading the chart", icon=":material/help:"):
        st.markdown(T("reading", seqs=seqs_flag, tok=tokens_flag))

    def best(f):
        return max(zip(f.users, f.results), key=lambda ur: ur[1].output_tokens_per_s_per_gpu)

    def headline(name, f) -> str:
        u, b = best(f)
        return T("most_output_tokens", name=name, b=b, u=u)

    def limits(name, f) -> str:
        cap = f.capacity
        text = (
            T("start_up_vllm", name=name, cap=cap)
            if key == "vllm"
            else T("start_up_pool", name=name, cap=cap, who=who)
        )
        if cap.onset_users is None:
            text += (
                f"The KV pool never binds up to {cap.users_cap:,} users: "
                f"{limit_name(cap.top_limit, engine)} holds the batch; the largest is "
                f"{max(r.max_batch for r in f.results):,}."
            )
        else:
            r = cap.result(cap.sustained_users)
            text += T("binds", cap=cap, free_users=cap.last_free_users or 0, r=r)
        return text

    with top:  # the answer first: on a phone it is on the first screen
        cap = curve.capacity
        m = st.columns(3)
        m[0].metric(
            "Under the objective: tokens/s per GPU",
            "no run meets it"
            if slo_best is None
            else f"{slo_best[1].output_tokens_per_s_per_gpu:,.0f}",
            help=f"The {speed.name}: the highest point whose TPOT p99 is at most "
            f"{slo_tpot:,} ms and TTFT p99 at most {slo_ttft:,} ms"
            + ("" if slo_best is None else f" ({slo_best[0]:,} users)"),
        )
        m[1].metric(
            "vLLM's logged worst case" if key == "vllm" else f"{who}'s pool at full length",
            f"{cap.logged_concurrency:,.2f}",
            help=f"'Maximum concurrency for {cap.max_model_len:,} tokens per request' at "
            "start-up: every request at its full length at once"
            if key == "vllm"
            else f"Requests of {cap.max_model_len:,} tokens the pool {who} sizes holds at once: "
            f"every request at its full length ({who} logs its pool in tokens, not requests)",
        )
        m[2].metric(
            "The KV pool binds from",
            f"never (up to {cap.users_cap:,} users)"
            if cap.onset_users is None
            else f"{cap.onset_users:,} users",
            help="The fewest users whose run preempts a request or makes one wait for blocks",
        )
        u_top, top_run = best(curve)
        said = [headline(name, f) for name, f in curves]
        if slo_best is not None and slo_best[0] == u_top:  # the same figure as the first metric
            said[0] = T("highest_point_users", curves=curves[0][0], u_top=u_top, top_run=top_run)
        st.markdown(" ".join(said))
        if slo_best is None:
            st.warning(T("no_run", slo_tpot=slo_tpot, slo_ttft=slo_ttft), icon=":material/timer:")
        with st.expander(
            "What limits the batch: vLLM's line and the simulated pool"
            if key == "vllm"
            else f"What limits the batch: {who}'s pool, simulated"
        ):
            for name, f in curves:
                st.markdown(limits(name, f))
            for n in cap.notes:
                st.caption(n[0].upper() + n[1:] + ".")

    st.subheader("One run in detail")
    users = number(st, "Users", 1, 5000, 256, 1, "fr_users")
    try:
        r = serving.one_run(**base, users=int(users))
    except ValueError as exc:
        common.stop_on_error(exc)
    warm = r.ttft_p50_steady_s is not None
    ttft50 = r.ttft_p50_steady_s if warm else r.ttft_p50_s
    ttft99 = r.ttft_p99_steady_s if warm else r.ttft_p99_s
    m = st.columns(3)
    m[0].metric("Output tokens/s per GPU", f"{r.output_tokens_per_s_per_gpu:,.0f}")
    m[1].metric("Largest batch", f"{r.max_batch:,}")
    m[2].metric("Preemptions", f"{r.preemptions:,}")
    # The latencies, p50 and p99, in one small table rather than nine more metrics.
    latencies = (
        ("TTFT: time to first token" + (", after the warm-up" if warm else ""), ttft50, ttft99),
        ("TPOT: time per output token, (last - first) / (tokens - 1)", r.tpot_p50_s, r.tpot_p99_s),
        ("ITL: every gap between two tokens of a request", r.itl_p50_s, r.itl_p99_s),
    )
    common.table(
        [{"latency": n, "p50": fmt_seconds(a), "p99": fmt_seconds(b)} for n, a, b in latencies],
        hide_index=True,
    )
    if warm:
        st.caption(
            T("warmup", r=r, ttft_p50=fmt_seconds(r.ttft_p50_s), ttft_p99=fmt_seconds(r.ttft_p99_s))
        )
    steady = (
        ""
        if r.steady_batch is None
        else f" (on average {r.steady_batch:,.1f} between the first finish and the last admission)"
    )
    limit = limit_name(r.binding_limit, engine)
    st.markdown(
        T("one_run", users=users, steady=steady, limit=limit, r=r, seqs=seqs_flag, tok=tokens_flag)
    )
    st.plotly_chart(
        utilization_figure(r.utilization_series, r.batch_series, r.num_blocks),
        width="stretch",
        key="fr_util",
    )
    with st.expander("How the simulation works", icon=":material/function:"):
        st.markdown(T("how"))
        lc = st.columns(3)
        for where, name, label in zip(
            lc, ("budget", "step_time", "engine"), ("Budget", None, "Engine view"), strict=False
        ):
            pages.link(name, label, where=where)
        st.markdown(T("how_step", seqs=seqs_flag, tok=tokens_flag))
        common.formula(
            (
                "step time = max(GEMM FLOPs / (peak x MFU), weight bytes / (bandwidth x share)"
                + (" (the routed experts' at their own MFU and share)" if sel.spec.moe else "")
                + ")\n"
                "          + max(attention FLOPs / (attention peak x its MFU), KV bytes read / "
                "(bandwidth x the cache's share))\n"
                "          + fixed cost per step and per layer + all-reduces (tensor parallel)\n"
                + (
                    f"          (all of the above x {speed.gpu_time_factor:.3g}, the GPU's time "
                    "as your benchmark measured it)\n"
                    if speed.gpu_time_factor != 1.0
                    else ""
                )
                + "          + host time per request in the step, partly hidden behind the GPU's\n"
                f"{speed.name}: weights {speed.bw_share:.3g}"
                + (f", experts {speed.expert_share:.3g}" if sel.spec.moe else "")
                + f", cache {speed.kv_share:.3g} of the bandwidth, MFU {speed.mfu:.3g}"
                + (f" (experts {speed.expert_gemm_mfu:.3g})" if sel.spec.moe else "")
                + (
                    f", FP8 GEMMs x {share:.3g}"
                    if (share := speed.gemm_share(sel.weights.dtype)) != 1.0
                    else ""
                )
                + ", "
                f"attention MFU {speed.attention_mfu:.3g}, "
                f"{speed.step_overhead_s * 1e3:.3g} ms a step + {speed.layer_overhead_s * 1e6:.3g}"
                f" µs a layer, all-reduce {speed.allreduce_latency_s * 1e6:.3g} µs + bytes over "
                f"the link, {speed.seq_overhead_s * 1e6:.3g} µs a request "
                f"({speed.host_overlap:.0%} hidden), {speed.api_overhead_s * 1e3:.3g} ms of API "
                "per request\n"
                if speed.engine
                else "step time = max( (2 x active params x tokens + attention FLOPs) / "
                "(peak x MFU),\n"
                "                 (weight bytes + KV bytes per token x tokens read) / "
                "(bandwidth x achieved share) )\n"
                "            + fixed cost per step + 2 x layers x all-reduce (tensor parallel)\n"
                f"{speed.name}: share {speed.bw_share:g}, MFU {speed.mfu:g}, "
                f"{speed.step_overhead_s * 1e3:g} ms a step, all-reduce "
                f"{speed.allreduce_latency_s * 1e6:g} µs + bytes over the link, "
                f"{speed.api_overhead_s * 1e3:g} ms of API per request\n"
            )
            + "ideal bound: share 1, MFU 1 (the full dense peak), nothing added"
        )
        common.formula(cap.derivation(who))
        st.caption(T("how_terms"))


page()
