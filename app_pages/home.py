import streamlit as st

from kvcalc import budget
from kvcalc.core.units import fmt_bytes, fmt_gib
from kvcalc.engines.budget import pool_defaults_text
from webui import common, pages
from webui.figures import cache_picture
from webui.fit_fix import fitting_setup_button
from webui.prose import prose

T = prose("home")


@common.page_body
def page() -> None:
    st.title("KV Cache Lab")
    st.markdown(T("lead"))
    st.image(cache_picture(["The", "cache", "keeps", "every"], "key"))  # an SVG of ours
    st.caption(T("one_step"))

    try:
        sel = common.selection()
        conv = min(8192, sel.spec.max_context)  # never a conversation past the model's limit
        r = sel.deployment.kv_cache(conv)
    except ValueError as exc:  # e.g. a tensor-parallel size the model's KV heads cannot split
        common.show_error(exc)
        sel = None

    if sel is not None:
        st.subheader(f"{sel.label} at a glance")
        c1, c2, c3 = st.columns(3)
        c1.metric(
            "KV cache per token",
            fmt_bytes(r.kv_bytes_per_token_nominal),
            help="One token in every layer that keeps K/V",
        )
        c2.metric(
            f"One {conv:,}-token conversation" + (" per GPU" if sel.num_gpus > 1 else ""),
            fmt_bytes(r.total_bytes),
        )
        try:
            b = budget(common.pool_deployment(sel), conv, find_max_context=False)
            gpus = f"{sel.num_gpus} x {sel.gpu.name}" if sel.num_gpus > 1 else sel.gpu.name
            label = f"{conv:,}-token conversations on {gpus}"
            if b.kv_pool_bytes > 0:
                c3.metric(
                    label,
                    f"{b.max_concurrency:,.1f}",
                    help=f"vLLM's arithmetic at {pool_defaults_text()}, blocks of "
                    f"{b.effective_block_size} tokens: its start-up line",
                )
                st.caption(
                    T("pool", pool=fmt_gib(b.kv_pool_bytes), b=b, defaults=pool_defaults_text())
                )
            else:
                # No pool: say why, and offer the one move to a setup that fits (review 4, F22).
                c3.metric(
                    label, "does not fit", help=f"vLLM's arithmetic at {pool_defaults_text()}"
                )
                st.warning(
                    f"Does not fit: the weights alone take {fmt_gib(b.weights_bytes)} per GPU, "
                    f"and an engine may use {fmt_gib(b.requested_bytes)} of this one, "
                    f"{fmt_gib(b.reserve_bytes)} of it for activations and the runtime. The cache "
                    "figures beside do not depend on the GPU.",
                    icon=":material/block:",
                )
                fitting_setup_button(sel, key="home_fit", context=conv)
        except ValueError as exc:
            c3.metric(f"{conv:,}-token conversations", "n/a", help=common.plain(str(exc)))
        common.formula(r.per_token_formula())

    st.subheader("A suggested path")
    st.markdown(T("stops"))
    for name, label in (
        ("cache_fill", "1. Cache fill: watch the cache grow token by token"),
        ("budget", "2. Budget: how many conversations fit on one GPU"),
        ("step_time", "3. Decode step time: when the cache, not the weights, sets the speed"),
        ("engine", "4. Engine view: how an engine hands out cache blocks"),
        ("techniques", "5. Shrinking the cache: GQA, MQA, MLA, FP8, windows, offload"),
        ("interview", "6. Interview check: test yourself"),
        ("lab", "Then: the Inference Lab, every knob and every result together"),
        (
            "tour",
            "Or the guided tour: predict a number at each of seven stops before it is revealed",
        ),
    ):
        pages.link(name, label)
    st.caption(T("units"))


page()
