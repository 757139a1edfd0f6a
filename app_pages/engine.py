import streamlit as st

from kvcalc.core.units import fmt_bytes
from kvcalc.engines.paging import SCENARIOS, contiguous_capacity, parse_requests
from webui import callbacks, common
from webui.common import bound, number, select
from webui.figures import blocks_figure, paged_figure
from webui.prose import prose

T = prose("engine")


@common.page_body
def page() -> None:
    common.page_header("Engine view: paged blocks", None, T("lead"))

    options = list(SCENARIOS) + ["custom"]
    c = st.columns([2, 1, 1, 1])
    key = select(c[0].selectbox, "Scenario", options, "e_scn", callbacks.engine_scenario_label)
    preset = SCENARIOS.get(key, SCENARIOS["shared-prompt"])
    block_size = select(
        c[1].selectbox,
        "Block size (tokens)",
        [4, 8, 16, 32],
        "e_bs",
        index=[4, 8, 16, 32].index(preset["block_size"]),
    )
    num_blocks = number(c[2], "Blocks in the pool", 4, 512, preset["num_blocks"], 1, "e_blocks")
    caching = c[3].toggle("Prefix caching", True, **bound("e_cache", "bool"))

    if key == "custom":
        text = st.text_area(
            "Requests, one per line: prompt tokens, output tokens, shared prefix "
            "tokens (optional), arrival step (optional)",
            "40 12 32\n40 12 32 1\n60 20 0 2",
            height=110,
            **bound("e_text", "str"),
        )
    else:
        text = preset["text"]
        with st.expander("The requests of this scenario"):
            common.formula(text)

    try:
        requests = parse_requests(text)
    except ValueError as exc:
        common.stop_on_error(exc)

    b = st.columns([1, 1, 1, 2])
    for where, label, click, args, icon in (
        (b[0], "Next step", callbacks.engine_advance, (1,), "skip_next"),
        (b[1], "Run 10 steps", callbacks.engine_advance, (10,), "fast_forward"),
        (b[2], "Reset", callbacks.engine_reset, (), "restart_alt"),
    ):
        where.button(label, on_click=click, args=args, icon=f":material/{icon}:", width="stretch")
    st.session_state.setdefault("e_step", 0)  # the buttons above change it through session state
    step = b[3].number_input(
        "Go to step",
        min_value=0,
        max_value=callbacks.ENGINE_MAX_STEP,
        step=1,
        **bound("e_step", "num"),
    )

    try:
        snap, history = callbacks.engine_run(text, step, num_blocks, block_size, caching)
    except ValueError as exc:
        common.stop_on_error(exc)
    if step > snap.step:
        st.info(f"Every request finished at step {snap.step}; showing that step.")

    # Three headline figures (one lesson: blocks are handed out and shared); the rest in one line.
    m = st.columns(3)
    m[0].metric("Blocks used", f"{snap.used_blocks} / {num_blocks}")
    m[1].metric(
        "Prefix hit rate",
        f"{snap.prefix_hit_rate:.0%}",
        help="Prompt tokens found in cached blocks / prompt tokens admitted",
    )
    m[2].metric("Preemptions", snap.preemptions)
    st.caption(T("free", snap=snap))

    st.plotly_chart(blocks_figure(snap.blocks, block_size), width="stretch", key="e_fig")
    try:
        sel = common.selection()
        per_block = block_size * sel.deployment.kv_cache(1).kv_bytes_per_token_nominal
        st.caption(
            f"For {sel.label} in {sel.kv_dtype.upper()}, one block of {block_size} tokens "
            f"across all layers is {fmt_bytes(per_block)}; this pool would be "
            f"{fmt_bytes(per_block * num_blocks)}."
        )
    except ValueError:
        pass
    st.caption(T("pool_legend"))

    st.subheader("PagedAttention: from a request's blocks to the pool")
    running = [t for t in snap.tables if t.blocks]
    if running:
        st.plotly_chart(
            paged_figure(list(snap.tables), block_size, num_blocks), width="stretch", key="e_paged"
        )
        st.caption(T("logical", block_size=block_size))
    else:
        st.caption(T("no_blocks"))

    left, right = st.columns([3, 2])
    with left:
        st.markdown("**Block tables**")
        common.text_table(
            [
                {
                    "request": t.rid,
                    "state": t.state,
                    "tokens": t.tokens,
                    "generated": t.generated,
                    "blocks": ", ".join(map(str, t.blocks)) or "none",
                }
                for t in snap.tables
            ]
        )
    with right:
        st.markdown("**Event log**")
        log = [f"step {h.step}: {e}" for h in history[max(1, len(history) - 6) :] for e in h.events]
        common.formula("\n".join(log[-24:]) or "press Next step to start", wrap=True)

    longest = max(len(r.prompt) + r.output_len for r in requests)
    max_len = number(
        st,
        "max_model_len of the engine without paging (tokens)",
        longest,
        65_536,
        max(256, longest),
        64,
        "e_maxlen",
        help=T("maxlen"),
    )
    contiguous = contiguous_capacity(num_blocks, block_size, max_len)
    peak = max(h.running for h in history)
    st.markdown(
        f"**Without paging**, an engine reserves max_model_len ({max_len:,} tokens) for each "
        f"request up front, in one contiguous piece: the same {num_blocks * block_size:,} slots "
        f"hold **{contiguous}** request{'s' if contiguous != 1 else ''} at a time. With blocks, up "
        f"to **{peak}** ran together so far, because a request only holds what it has written, "
        f"rounded up to a block of {block_size}. PagedAttention, the attention kernel of vLLM, "
        "reads each request's keys and values through its block table, so the blocks need not be "
        "contiguous."
    )


page()
