import streamlit as st

from kvcalc import get_dtype, kv_cache, registry
from kvcalc.core.units import fmt_bytes
from kvcalc.teach.techniques import techniques
from webui import callbacks, common, pages
from webui.common import number, plain, select
from webui.figures import head_sharing_figure, mla_figure, techniques_figure, window_figure
from webui.memo import cached
from webui.prose import prose
from webui.urlstate import declare

T = prose("techniques")


@common.page_body
def page() -> None:
    sel = common.require_selection()
    top = common.page_header("Shrinking the cache", sel, T("lead"))

    links = registry().links
    context = number(st, "Context per sequence (tokens)", 1, 10_000_000, 32768, 1024, "t_ctx")
    # Built only when it can matter (issue 42, webui.urlstate.inputs_fold): five keyed widgets
    # that cost the first screen and every rerun nothing while they hold their defaults.
    settings = {
        "t_window": 4096,
        "t_gpu_tokens": 4096,
        "t_link": "pcie5-x16" if "pcie5-x16" in links else next(iter(links)),
        "t_rank": 512,
        "t_rope": 64,
    }
    fold, built = common.inputs_fold(
        "The techniques' settings: window, offload, MLA",
        "t_settings",
        settings,
        icon=":material/tune:",
    )
    window, gpu_tokens, link, rank, rope = settings.values()
    with fold:
        if built:
            c1, c2, c3 = st.columns(3)
            window = number(
                c1, "Sliding window (tokens)", 1, 10_000_000, settings["t_window"], 256, "t_window"
            )
            gpu_tokens = number(
                c2,
                "Offload: tokens kept on the GPU",
                1,
                10_000_000,
                settings["t_gpu_tokens"],
                256,
                "t_gpu_tokens",
            )
            link = select(
                c3.selectbox,
                "Offload link",
                list(links),
                "t_link",
                callbacks.link_label,
                index=list(links).index(settings["t_link"]),
            )
            c1, c2, _ = st.columns(3)
            rank = number(c1, "MLA latent rank", 1, 65536, settings["t_rank"], 64, "t_rank")
            rope = number(c2, "MLA RoPE part", 0, 4096, settings["t_rope"], 16, "t_rope")

    try:
        kw = dict(window=window, latent=(rank, rope), gpu_tokens=gpu_tokens, link=link)
        kw["peak_tflops"] = sel.gpu.peak_tflops("bf16")
        rows = cached(techniques)(sel.deployment, context, **kw)
        # The same rows at a 16-bit cache: the reference the measured page's "vs 16-bit" uses.
        rows16 = (
            rows
            if sel.kv_dtype in ("bf16", "fp16")
            else cached(techniques)(sel.deployment.but(kv_dtype="bf16"), context, **kw)
        )
    except ValueError as exc:
        common.stop_on_error(exc)
    ref16 = next(r for r in rows16 if r.key == "own").seq_bytes
    per_gpu = f" on each of {sel.tp} GPUs" if sel.tp > 1 else ""

    own = next(r for r in rows if r.key == "own")
    with top:  # the answer first: on a phone it is on the first screen
        best = max(
            (r for r in rows if r.key != "own" and r.applies), key=lambda r: r.saving, default=None
        )
        m = st.columns(2)
        m[0].metric(
            f"One sequence of {context:,} tokens, as configured{per_gpu}", fmt_bytes(own.seq_bytes)
        )
        if best is not None and best.saving > 1:
            m[1].metric(
                "Largest saving on this page",
                f"{best.saving:,.2f}x smaller",
                help=f"{best.name}: {fmt_bytes(best.seq_bytes)} for the same sequence",
            )
            st.caption(f"Largest saving: {best.name}. Every row below says what it trades for it.")
    unit = "GiB" if own.seq_bytes >= 2**30 else "MiB" if own.seq_bytes >= 2**20 else "KiB"
    st.plotly_chart(techniques_figure(rows, unit), width="stretch", key="t_fig")

    def factor(ratio: float) -> str:
        """A size ratio in words; exactly 1 is "same", not "1.00x smaller" (issue 37, F23)."""
        if ratio == 1:
            return "same"
        return f"{ratio:,.2f}x smaller" if ratio > 1 else f"{1 / ratio:,.2f}x larger"

    table = [
        {
            "technique": r.name,
            "shrinks": r.term,
            "per token": fmt_bytes(r.bytes_per_token),
            f"one sequence of {context:,}{per_gpu}": fmt_bytes(r.seq_bytes),
            "saving": "reference" if r.key == "own" else factor(r.saving),
            "vs a 16-bit cache": factor(ref16 / r.seq_bytes),
            "trade-off": r.tradeoff
            + ("" if r.applies else " (this model already does this, or it changes nothing here)"),
        }
        for r in rows
    ]
    common.text_table(table)
    st.caption(T("combine"))
    with st.expander("How these numbers are computed", icon=":material/function:"):
        r = kv_cache(sel.spec, context, kv_dtype=sel.kv_dtype)
        common.formula(
            f"as configured, per token = {r.per_token_formula()}\n"
            f"one sequence             = sum over layers of bytes/token x tokens kept = "
            f"{own.seq_bytes:,} B\n"
            f"MHA / MQA                = the same with every layer's K/V heads set to the query "
            f"heads / to 1\n"
            f"MLA-style                = ({rank} + {rope}) x bytes per element per layer and "
            "token\n"
            f"FP8, INT8 / INT4         = 1 / 0.5 byte per element instead of "
            f"{get_dtype(sel.kv_dtype).bytes_per_element:g}\n"
            f"sliding window, offload  = each layer keeps at most {window:,} / {gpu_tokens:,} "
            "tokens on the GPU\n"
            f"saving                   = bytes as configured / bytes with the technique"
        )
        st.markdown(T("columns") + (T("tp_note", sel=sel) if sel.tp > 1 else ""))
    pages.link(
        "kv_quality",
        "What FP8, INT8, INT4, KIVI and a sliding window cost in quality, measured on a real model",
    )

    def drawings() -> None:
        """The three drawings of how a technique works, with this model's own numbers."""
        attn = next((lay for lay in sel.spec.kv_layers if lay.kv_heads is not None), None)
        latent = next((lay for lay in sel.spec.kv_layers if lay.kind == "mla"), None)
        elem = get_dtype(sel.kv_dtype).bytes_per_element
        if attn is not None and attn.q_heads % attn.kv_heads == 0:
            st.markdown(T("sharing"))
            st.plotly_chart(
                head_sharing_figure(
                    attn.q_heads, attn.kv_heads, attn.head_dim, attn.v_head_dim, elem
                ),
                width="stretch",
                key="t_fig_heads",
            )
            st.caption(
                f"Squares on top: the {attn.q_heads:,} query heads of one layer of "
                f"{plain(sel.label)}; below: the K/V heads they read. Bytes at "
                f"{sel.kv_dtype.upper()}, {elem:g} B per number."
            )
        st.markdown(T("mla"))
        if latent is not None:
            st.plotly_chart(
                mla_figure(
                    hidden=sel.spec.hidden_size,
                    q_heads=latent.q_heads,
                    rank=latent.kv_lora_rank,
                    rope=latent.qk_rope_head_dim,
                    qk_nope=latent.qk_head_dim - latent.qk_rope_head_dim,
                    v_head_dim=latent.v_head_dim,
                    own=True,
                ),
                width="stretch",
                key="t_fig_mla",
            )
            st.caption(T("own_mla", label=plain(sel.label)))
        elif attn is not None:
            # The RoPE part must leave some of the key without it: for keys of 64 or less (GPT-2,
            # SmolLM2) the drawing takes half the key as the RoPE part, and says so.
            drawn_rope = rope if attn.head_dim > rope else attn.head_dim // 2
            st.plotly_chart(
                mla_figure(
                    hidden=sel.spec.hidden_size,
                    q_heads=attn.q_heads,
                    rank=rank,
                    rope=drawn_rope,
                    qk_nope=attn.head_dim - drawn_rope,
                    v_head_dim=attn.v_head_dim,
                    own=False,
                ),
                width="stretch",
                key="t_fig_mla",
            )
            rope_said = (
                f"RoPE part ({drawn_rope:,} of each {attn.head_dim}-wide key)"
                if drawn_rope == rope
                else f"RoPE part drawn as {drawn_rope:,} of each {attn.head_dim}-wide key (this "
                f"page's {rope:,} would leave nothing without it)"
            )
            st.caption(T("no_mla", label=plain(sel.label), rank=rank, rope_said=rope_said))
        slid = next((lay for lay in sel.spec.layers if lay.kind == "sliding"), None)
        own_window = slid.window if slid is not None else window
        kinds = [lay.kind for lay in sel.spec.layers]
        st.markdown(T("sliding"))
        st.plotly_chart(
            window_figure(own_window, context, kinds if slid is not None else []),
            width="stretch",
            key="t_fig_window",
        )
        n_slid, n_full = kinds.count("sliding"), kinds.count("full")
        if slid is None:
            st.caption(T("has_no_sliding", label=plain(sel.label), window=window, context=context))
        else:
            st.caption(
                f"{plain(sel.label)}'s own window of {own_window:,} tokens at {context:,} tokens "
                + (
                    f"of context. Its layers interleave: {n_slid:,} of {len(kinds):,} keep a window"
                    + (T("full_attention_layers", n_full=n_full) if n_full else ".")
                    if n_slid < len(kinds)
                    else f"of context, in all {len(kinds):,} layers."
                )
            )

    # A fold built only when opened (its state in the link, so a shared link opens it too): three
    # drawings and their captions cost a rerun nothing while it is closed.
    declare("t_how", "bool")
    how = st.expander(
        "How they work, drawn with this model's numbers",
        icon=":material/draw:",
        key="t_how",
        bind="query-params",
    )
    with how:
        if how.open:
            drawings()


page()
