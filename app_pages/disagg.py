import streamlit as st

from kvcalc import prefill, registry, step_time
from kvcalc.cache.transfer import transfer
from kvcalc.core.units import fmt_bytes, fmt_seconds
from webui import common
from webui.common import number, select
from webui.figures import transfer_figure
from webui.prose import prose

T = prose("disagg")
LINKS = ("ib-ndr-400", "ib-xdr-800", "ib-hdr-200", "roce-400", "eth-100", "nvlink4", "nvlink5")
TP_CHOICES = [1, 2, 4, 8, 16]


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
            pf.time_s, move, step.step_time_s, fmt_bytes(t.bytes_per_decode_gpu), link.name
        ),
        config={"displayModeBar": False},
    )
    st.markdown(T("verdict_small") if share < 0.25 else T("verdict_large"))
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


page()
