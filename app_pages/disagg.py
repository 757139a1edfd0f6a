import statistics

import streamlit as st

from kvcalc import prefill, registry, step_time
from kvcalc.cache.transfer import transfer
from kvcalc.core.units import fmt_bytes, fmt_seconds
from kvcalc.perf.engines import resolve
from kvcalc.perf.sim import Workload, fixed
from kvcalc.perf.sim.fleet import FleetResult, Targets, fleet_steps
from kvcalc.perf.sim.plan import Plan, engine_setup, plan
from kvcalc.perf.sim.published import MOONCAKE_ENGINE, SOURCE, mooncake_check
from webui import common
from webui.common import number, select
from webui.figures import transfer_figure
from webui.prose import prose

T = prose("disagg")
LINKS = ("ib-ndr-400", "ib-xdr-800", "ib-hdr-200", "roce-400", "eth-100", "nvlink4", "nvlink5")
TP_CHOICES = [1, 2, 4, 8, 16]
HOST_LINK = "pcie5-x16"  # the next turn's reload from CPU memory
PLAN_REQUESTS = 200  # requests a fleet plan serves
# Engine steps a plan may simulate over all the layouts it tries (about 2.5 us a step: about a
# second of work); beyond it the page asks for a shorter prompt or output instead.
PLAN_STEPS = 400_000


def _link_label(key: str) -> str:
    link = registry().link(key)
    return f"{link.name}: {link.gbs:g} GB/s"


@common.page_body
def page() -> None:
    sel = common.require_selection()
    top = common.page_header("Disaggregated serving: the cache on the move", sel, T("lead"))
    spec, limit = sel.spec, sel.spec.max_context
    c = st.columns(4)
    n = number(c[0], "Prompt (tokens)", 1, 1_000_000, min(8192, limit), 1024, "dg_prompt")
    link_key = select(c[1].selectbox, "Link between the GPUs", list(LINKS), "dg_link", _link_label)
    ptp = select(c[2].selectbox, "Prefill GPUs (tensor parallel)", TP_CHOICES, "dg_ptp")
    dtp = select(c[3].selectbox, "Decode GPUs (tensor parallel)", TP_CHOICES, "dg_dtp")
    if n > limit:
        common.stop_on_error(f"{spec.name} takes at most {limit:,} tokens; shorten the prompt.")
    link = registry().link(link_key)
    gpu = sel.gpu
    try:
        t = transfer(
            spec, n, kv_dtype=sel.kv_dtype, prefill_tp=ptp, decode_tp=dtp, link_gbs=link.gbs
        )
        peak = gpu.peak_tflops(sel.weights.dtype)
        if peak is None:
            raise ValueError(f"{gpu.name}: the registry gives no dense peak to time the prefill")
        pf = prefill(spec, n, peak, mfu=1.0, tp=ptp)
        step = step_time(sel.deployment.but(tp=dtp), context=n + 1, batch=1, find_crossover=False)
    except ValueError as exc:
        common.stop_on_error(exc)
    move = t.seconds or 0.0
    share = move / pf.time_s
    host = registry().link(HOST_LINK)
    reload_s = t.bytes_per_decode_gpu / (host.gbs * 1e9)
    m = top.columns(3)
    m[0].metric("Cache per decode GPU", fmt_bytes(t.bytes_per_decode_gpu))
    m[1].metric("The move", fmt_seconds(move), help=f"over {link.name} at {link.gbs:g} GB/s")
    m[2].metric("Beside the prefill", f"{share:.0%}", help="the move's time / the prefill's")
    top.markdown(
        T(
            "headline",
            n=n,
            per_gpu=fmt_bytes(t.bytes_per_decode_gpu),
            whom=f"each of the {dtp} decode GPUs" if dtp > 1 else "the decode GPU",
            moved=fmt_bytes(t.bytes_moved),
            link=link.name,
            gbs=link.gbs,
            move=fmt_seconds(move),
            share=share,
            prefill=fmt_seconds(pf.time_s),
            gpu=gpu.name,
        )
    )
    st.plotly_chart(
        transfer_figure(
            pf.time_s,
            move,
            step.step_time_s,
            fmt_bytes(t.bytes_per_decode_gpu),
            link.name,
            (reload_s, host.name),
        ),
        config={"displayModeBar": False},
    )
    st.markdown(T("verdict_small") if share < 0.25 else T("verdict_large"))
    st.markdown(
        T(
            "reload",
            host=host.name,
            gbs=host.gbs,
            reload=fmt_seconds(reload_s),
            prefill=fmt_seconds(pf.time_s),
            faster=pf.time_s / reload_s,
        )
    )
    common.table(
        [
            {
                "layers": f"{r.layers} {r.label}",
                "tokens kept": f"{r.tokens:,}" if r.tokens else "fixed state",
                "per decode GPU": fmt_bytes(r.bytes),
            }
            for r in t.rows
        ]
    )
    with st.expander("How these figures are computed"):
        st.markdown(T("how"))
    _fleet(sel, n, link, ptp, dtp)


def _fleet(sel, n: int, link, ptp: int, dtp: int) -> None:
    """The fewest GPUs for a workload of these prompts, aggregated or disaggregated: simulated
    on submit only (a plan runs a dozen layouts)."""
    st.subheader("A fleet for a workload: aggregated or disaggregated?")
    profile = sel.profile or resolve("vllm")[0]
    with st.form("dg_plan", border=False):
        c = st.columns(4)
        rate = c[0].number_input("Requests per second", 0.1, 1000.0, 4.0, 0.5)
        out = c[1].number_input("Output tokens", 1, 16_384, 256, 64)
        ttft = c[2].number_input("TTFT target (ms)", 10, 600_000, 2000, 100)
        tpot = c[3].number_input("TPOT target (ms)", 1, 10_000, 40, 5)
        go = st.form_submit_button(f"Find the fewest GPUs ({profile.label} profile)")
    key = (n, rate, out, ttft, tpot, ptp, dtp, link.key, profile.key, sel.deployment)
    if go:
        st.session_state["dg_plan_key"] = key
    if st.session_state.get("dg_plan_key") != key:
        st.caption(T("plan_hint", requests=PLAN_REQUESTS, n=n))
        return
    wl = Workload(requests=PLAN_REQUESTS, prompt=fixed(n), output=fixed(int(out)), rate=rate)
    targets = Targets(ttft_s=ttft / 1e3, tpot_s=tpot / 1e3)
    try:
        if n + out > sel.spec.max_context:
            raise ValueError(
                f"{sel.spec.name} takes at most {sel.spec.max_context:,} tokens: shorten the "
                "prompt or the output"
            )
        steps = max(
            fleet_steps(engine_setup(sel.deployment, wl, profile, tp), wl, 1)
            for tp in {sel.deployment.tp, dtp}
        )
        if steps > PLAN_STEPS:
            raise ValueError(
                f"this plan would simulate about {steps:,} engine steps a layout, more than "
                f"the {PLAN_STEPS:,} the page takes: shorten the prompt or the output"
            )
        p = _plan(sel.deployment, wl, targets, profile.key, link.gbs, (sel.deployment.tp, ptp, dtp))
    except ValueError as exc:
        st.error(str(exc))
        return
    _show_plan(p, link.name)


@st.cache_data(max_entries=16, show_spinner="Simulating the layouts...")
def _plan(dep, wl: Workload, targets: Targets, engine: str, gbs: float, tps) -> Plan:
    return plan(dep, wl, targets, resolve(engine)[0], gbs, tps, max_steps=PLAN_STEPS)


def _show_plan(p: Plan, link: str) -> None:
    a, d = p.aggregated.best, p.disaggregated.best
    m = st.columns(2)
    m[0].metric("Aggregated", f"{a.gpus} GPUs" if a else "none fits", help=a.layout if a else None)
    m[1].metric(
        "Disaggregated", f"{d.gpus} GPUs" if d else "none fits", help=d.layout if d else None
    )
    verdict = {
        "aggregated": T("plan_aggregated", a=_layout(a), d=_layout(d)),
        "disaggregated": T("plan_disaggregated", a=_layout(a), d=_layout(d)),
        "tie": T("plan_tie", a=_layout(a), d=_layout(d)),
    }
    st.markdown(verdict.get(p.winner or "", T("plan_none")))
    with st.expander("What one engine fewer misses, and how well this matches a real deployment"):
        for name, c in (("Aggregated", p.aggregated), ("Disaggregated", p.disaggregated)):
            for s in c.short:
                st.markdown(f"- {name}, {_layout(s)}: misses {p.targets.missed(s)}.")
        rows = _check()
        errors = [abs(r.error) for r in rows]
        st.markdown(
            T(
                "how_well",
                source=SOURCE,
                rows=len(rows),
                half=statistics.median(errors),
                worst=max((r.error for r in rows), key=abs),
                worst_at=max(rows, key=lambda r: abs(r.error)).prompt_tokens,
                link=link,
                profile=p.profile,
                check=resolve(MOONCAKE_ENGINE)[0].label,
            )
        )


@st.cache_data(max_entries=1, show_spinner=False)
def _check():
    return mooncake_check(MOONCAKE_ENGINE)


def _layout(r: FleetResult | None) -> str:
    if r is None:
        return "no layout within the search"
    ttft, tpot = r.ttft_p90_s, r.tpot_p90_s
    return (
        f"{r.layout} on {r.gpus} GPU{'s' if r.gpus > 1 else ''} (p90 TTFT {fmt_seconds(ttft)}, "
        f"p90 TPOT {fmt_seconds(tpot)})"
    )


page()
