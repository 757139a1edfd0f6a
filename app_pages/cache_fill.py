from collections import Counter

import streamlit as st

from kvcalc.core.units import fmt_bytes
from kvcalc.teach.fill import MAX_TOKENS, fill_timeline, shown_layers
from webui import common
from webui.common import number, select
from webui.figures import FILL_COLORS, fill_chart
from webui.memo import cached
from webui.prose import prose

T = prose("cache_fill")
MODES = {"cache": "KV cache", "no-cache": "No cache"}


@common.page_body
def page() -> None:
    sel = common.require_selection()
    common.page_header("Cache fill: prefill writes, decode appends", sel, T("lead"))

    c = st.columns(4)
    prompt = number(c[0], "Prompt length (tokens)", 1, MAX_TOKENS, 12, 1, "f_prompt")
    new = number(c[1], "Decode steps", 0, MAX_TOKENS, 20, 1, "f_new", help=T("new"))
    layers = number(c[2], "Layers shown", 1, 16, 4, 1, "f_layers")
    mode = select(c[3].radio, "Mode", list(MODES), "f_mode", MODES.get, horizontal=True)

    idx = shown_layers(sel.spec, layers)
    labels = []
    for i in idx:
        layer = sel.spec.layers[i]
        named = [f"layer {i + 1} ({layer.label}) {r}" for r in layer.cache_rows]
        labels += named or [f"layer {i + 1}: {layer.formula()}"]  # no cache: a row says why
    if len(idx) < sel.spec.num_layers:
        st.caption(T("showing_layers_every", n_layers=len(idx), sel=sel))

    # Work budget: the animation ships every frame to the browser. At the largest inputs (160
    # tokens, 16 layers, 160 steps) that was about 2 MB per rerun; past MAX_CELLS grid cells in
    # all frames, only every k-th step (and the last) becomes a frame, and the page says so.
    MAX_CELLS = 50_000
    stride = -(-len(labels) * (prompt + new) * (new + 1) // MAX_CELLS)
    try:
        steps = cached(fill_timeline, 16)(
            sel.spec,
            prompt,
            new,
            layers=layers,
            kv_dtype=sel.kv_dtype,
            use_cache=mode == "cache",
            grid_every=stride,
        )
    except ValueError as exc:
        common.stop_on_error(exc)
    shown = [s for s in steps if s.grid]
    if stride > 1:
        st.caption(T("showing_every_th", stride=stride, n_shown=len(shown), n_steps=len(steps)))
    st.plotly_chart(fill_chart(tuple(shown), tuple(labels)), width="stretch", key="f_fig")
    legend = " · ".join(
        f"<span style='color:{c}'>■</span> {name}"
        for c, name in zip(
            FILL_COLORS,
            ["empty", "kept in the cache", "written this step", "recomputed this step"],
            strict=True,
        )
    )
    st.markdown(legend, unsafe_allow_html=True)  # fixed text of ours; nothing a user typed

    last = steps[-1]
    m = st.columns(3)
    m[0].metric("Token passes with a cache", f"{last.passes_with_cache:,}")
    m[1].metric("Token passes without one", f"{last.passes_without_cache:,}")
    m[2].metric(
        "Extra work without a cache", f"{last.passes_without_cache / last.passes_with_cache:,.1f}x"
    )
    st.markdown(T("with_cache", prompt=prompt, new=new, last=last, reads=new + 1))
    st.caption(T("passes"))

    st.subheader(f"What the cache holds for {sel.label}")
    rows = [
        {
            "step": "prefill" if s.step == 0 else str(s.step),
            "tokens": f"{s.tokens:,}",
            "K/V bytes (all layers)": fmt_bytes(s.cache_bytes),
            **({"fixed state": fmt_bytes(s.state_bytes)} if s.state_bytes else {}),
        }
        for s in steps
    ]
    show = rows if len(rows) <= 12 else rows[:6] + [{k: "..." for k in rows[0]}] + rows[-5:]
    common.text_table(show)
    kinds = sel.spec.kind_counts()
    # (label, most tokens kept) -> layers
    bounded = Counter((lay.label, lay.token_bound()) for lay in sel.spec.layers)
    notes = [
        f"{count} {label} layers stop growing at {most:,} tokens: past that, old tokens leave "
        "the cache."
        for (label, most), count in bounded.items()
        if most is not None
    ]
    if "state" in kinds:
        notes.append(T("recurrent_layers_keep", kinds=kinds["state"]))
    if "shared" in kinds:
        notes.append(
            f"{kinds['shared']} layers store nothing: they read the cache an earlier layer wrote."
        )
    for n in notes:
        st.info(n)
    st.caption(T("bytes_note"))


page()
