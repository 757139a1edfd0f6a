import streamlit as st

from kvcalc import budget, registry
from kvcalc.cache.kv import kv_cache
from kvcalc.core.speculative import Speculation, drafter_weight_bytes, with_speculation
from kvcalc.core.units import GiB, fmt_bytes, fmt_gib
from kvcalc.engines import budget as defaults
from kvcalc.engines.vllm import NEWEST
from webui import callbacks, common, compare, pages, serving
from webui.common import bound, number, plain, select, slider
from webui.figures import LIMIT_NAMES, budget_figure, concurrency_figure
from webui.fit_fix import fitting_setup_button
from webui.memo import cached
from webui.prose import prose

T = prose("budget")

# The chapter's "try it yourself" contexts, one move each (4K ... 128K tokens, K = 1,024).
PRESETS = [4096, 8192, 32768, 131072]
# The chapter's three models: MHA, GQA, MLA (registry keys; the page shows their names).
CHAPTER = ("llama-2-7b", "llama-3.1-8b", "deepseek-v3")
NAMES = {key: m.name for key, m in registry().models.items()}
KEYS = {name: key for key, name in NAMES.items()}


def _pick() -> None:
    """A preset context chosen: it becomes the exact input's value (and the link's b_ctx)."""
    picked = st.session_state.get("b_ctx_pick")
    if picked:
        st.session_state["b_ctx"] = picked


def _chapter_models(shown: str) -> None:
    st.session_state["b_cmp"] = [NAMES[k] for k in CHAPTER if NAMES[k] != shown][:3]


def _upgrade_cmp_link() -> None:
    """A link made when the compare box took registry keys (b_cmp=llama-2-7b) opens with the
    names it now carries, before the box reads the link."""
    initial = st.session_state.get("_url_initial") or {}
    values = initial.get("b_cmp")
    if st.session_state.get("_b_cmp_upgraded") or not values:
        return
    st.session_state["_b_cmp_upgraded"] = True
    if any(v in NAMES for v in values):
        names = [NAMES.get(v, v) for v in values]
        initial["b_cmp"] = names
        st.session_state["b_cmp"] = [n for n in names if n in KEYS]  # the box writes the link


@common.page_body
def page() -> None:
    sel = common.require_selection()
    top = common.page_header("Budget: weights vs KV cache", sel, T("lead"))
    # The first screen, in this order: the answer (a box, the fix when nothing fits), three
    # metrics, the inputs, the memory bar (the lesson seen without reading a number). On a phone,
    # where columns stack, the answer comes before the inputs.
    answer = top.container()
    headline = top.container()
    c1, c2, c3 = top.columns([1, 1.3, 1])
    context = number(c1, "Context per sequence (tokens)", 1, 10_000_000, 8192, 1024, "b_ctx")
    st.session_state["b_ctx_pick"] = context if context in PRESETS else None
    c2.segmented_control(
        "Or in one move",
        PRESETS,
        format_func=lambda n: f"{n // 1024}K",
        key="b_ctx_pick",
        on_change=_pick,
        help="4K, 8K, 32K, 128K tokens (K = 1,024): the exact number is in the box beside",
    )
    concurrency = number(c3, "Concurrent sequences", 1, 1_000_000, 16, 1, "b_conc")
    bar = top.container()

    # Built only when it can matter (issue 42, webui.urlstate.inputs_fold): while every setting
    # is at its default and the fold is closed, its slider's code and four keyed widgets cost
    # the first screen and every rerun nothing.
    settings = {
        "b_util": defaults.DEFAULT_GPU_MEM_UTIL,
        "b_reserve": defaults.DEFAULT_RESERVE_BYTES / GiB,
        "b_block": 16,
        "b_engine": "vllm",
    }
    fold, built = common.inputs_fold(
        "Engine settings: memory share, reserve, block size, convention", "b_settings", settings
    )
    util, reserve_gib, block, engine = settings.values()
    with fold:
        if built:
            e1, e2 = st.columns(2)
            util = slider(
                e1,
                "gpu_memory_utilization",
                0.05,
                1.0,
                settings["b_util"],
                0.01,
                "b_util",
                help=f"vLLM {NEWEST}'s default shown first ({defaults.PREVIOUS_GPU_MEM_UTIL:g} "
                f"before {defaults.GPU_MEM_UTIL_CHANGED_IN}); for the TensorRT-LLM convention, the "
                "share of memory free after the weights (its own default "
                f"{defaults.TRTLLM_FREE_FRACTION:g})",
            )
            reserve_gib = number(
                e2,
                "Reserve for activations and runtime (GiB)",
                0.0,
                1024.0,
                settings["b_reserve"],
                0.5,
                "b_reserve",
                help="activation peak + CUDA context and libraries + CUDA graphs: "
                f"{defaults.DEFAULT_ACTIVATION_BYTES / GiB:g} + "
                f"{defaults.DEFAULT_NON_TORCH_BYTES / GiB:g} + "
                f"{defaults.DEFAULT_CUDA_GRAPH_BYTES / GiB:g} GiB by default, the same figures as "
                "on the vLLM start-up page",
            )
            blocks = [1, 8, 16, 32, 64, 128, 256]
            block = select(
                e1.selectbox,
                "Block size (tokens)",
                blocks,
                "b_block",
                index=blocks.index(settings["b_block"]),
            )
            conventions = ["vllm", "ideal", "trtllm"]
            engine = select(
                e2.selectbox,
                "Engine convention",
                conventions,
                "b_engine",
                callbacks.engine_label,
                index=conventions.index(settings["b_engine"]),
            )
    reserve = round(reserve_gib * GiB)

    pool = common.pool_deployment(sel, util, reserve, block)
    try:
        b = cached(budget)(pool, context, concurrency, convention=engine)
        per = cached(kv_cache)(sel.spec, context, kv_dtype=sel.kv_dtype, tp=sel.tp, pp=sel.pp)
    except ValueError as exc:
        common.stop_on_error(exc)

    fits_gpu = b.kv_pool_bytes > 0
    # Some layers keep less than every token (windows, chunks, states): vLLM's start-up line and a
    # running server then disagree, and the fold "Logged vs running capacity" shows both.
    windowed = any(r.tokens_kept < context or r.state_bytes for r in per.rows)
    past_limit = context > sel.spec.max_context

    with answer:  # the answer first: on a phone it is on the first screen
        level, text = b.verdict(sel.label, windowed, quote=plain)
        {"success": st.success, "warning": st.warning, "error": st.error}[level](text)
        if not fits_gpu:
            fitting_setup_button(
                sel, key="b_fit", context=context, util=util, reserve_bytes=reserve
            )
        if past_limit:
            st.warning(T("past_limit", context=context, sel=sel))

    with headline:  # three metrics, each number once
        m = st.columns(3)
        m[0].metric(
            f"KV per token at {context:,}",
            fmt_bytes(per.kv_bytes_per_token),
            help=f"what one more token adds at {context:,} tokens, on any GPU. "
            + (
                T("window_growth", nominal=fmt_bytes(per.kv_bytes_per_token_nominal))
                if per.kv_bytes_per_token != per.kv_bytes_per_token_nominal
                else f"{per.kv_bytes_per_token_nominal:,} bytes, one token in every K/V layer"
            ),
        )
        m[1].metric(
            f"One sequence of {context:,} tokens" + (" per GPU" if sel.num_gpus > 1 else ""),
            fmt_bytes(per.total_bytes),
            help="the exact bytes it keeps in every layer, before any rounding to whole blocks",
        )
        if fits_gpu:
            whole = int(b.max_concurrency)
            m[2].metric(
                b.concurrency_label(context),
                f"{b.max_concurrency:,.2f}x",
                help=b.concurrency_help(windowed)
                + f": {whole:,} whole sequence{'' if whole == 1 else 's'} of {context:,} tokens",
            )

    with bar:
        st.plotly_chart(budget_figure(b), width="stretch", key="b_fig")

    if b.max_num_seqs is not None and fits_gpu and b.limited_by == "max_num_seqs":
        st.info(T("max_num_seqs", context=context, b=b))

    # --- side by side: the chapter's comparison ------------------------------------------------

    st.subheader("Side by side: sequences that fit against context")
    _upgrade_cmp_link()
    s1, s2 = st.columns([3, 1], vertical_alignment="bottom")
    compare_names = s1.multiselect(
        "Compare with (up to 3 models)", list(KEYS), max_selections=3, **bound("b_cmp", "list")
    )
    s2.button(
        "The chapter's three",
        key="b_chapter",
        on_click=_chapter_models,
        args=(sel.label,),
        help="Llama 2 7B (every head keeps K/V), Llama 3.1 8B (8 K/V heads), DeepSeek-V3 (one "
        "latent per token)",
    )
    me = compare.Compared(sel.label, sel.spec, sel.weights.bytes, b, per.kv_bytes_per_token_nominal)
    others, refused = compare.models(
        compare_names, KEYS, me, st.session_state.get("wdtype", "auto"), pool, engine
    )
    for text in refused:
        st.warning(text)
    series = compare.curves([me, *others], context, pool, engine)
    for c in others:
        st.markdown(compare.why(c, me, context))
    if others:  # the cache per token side by side, then the curves
        common.text_table([compare.row(c, context) for c in [me, *others]])
    if series:  # nothing to draw where no model has a pool: the caption below says why
        st.plotly_chart(
            concurrency_figure(
                series,
                marker=context,
                ceiling=b.max_num_seqs if fits_gpu else None,
                limits=tuple(c.spec.max_context for c in [me, *others] if c.fits),
            ),
            width="stretch",
            key="b_curve",
        )
    missing = [c.name for c in [me, *others] if not c.fits]
    no_curve = (
        f"No curve for {plain(', '.join(missing))}: the weights leave no room for a cache on "
        "this GPU."
        if missing
        else ""
    )
    st.caption(
        "Each curve stops at its own model's limit (max_position_embeddings); below one sequence "
        "(the dotted red line) not even one conversation of that length fits. " + no_curve
        if series
        else no_curve + " Compare it with a model that fits, or use the button above."
    )

    # --- folds: what the headline leaves out ---------------------------------------------------

    if fits_gpu and b.logs_startup_lines and not b.startup_error and context >= 2:
        # vLLM's logged worst case beside what a running server sustains (issue 23, item 3): the
        # one place the page explains the pair.
        with st.expander("Logged vs running capacity", icon=":material/compare_arrows:"):
            st.markdown(T("logged", label=b.concurrency_label(context)))
            out_in = number(
                st,
                "Of the context, output tokens (the rest is the prompt)",
                1,
                1_000_000,
                256,
                64,
                "b_out",
                help=T("out"),
            )
            out = min(int(out_in), context - 1)
            try:
                cap = serving.capacity(
                    sel.spec,
                    sel.weights,
                    sel.gpu,
                    sel.kv_dtype,
                    sel.tp,
                    sel.speed,
                    context - out,
                    out,
                    pool=(util, reserve, block),
                )
            except ValueError as exc:
                st.info(T("serving_simulator_cannot", why=plain(str(exc))))
            else:
                m = st.columns(2)
                if windowed:
                    m[0].metric(
                        f"Held decoding at {context:,}",
                        f"{b.held_concurrency:,.2f}",
                        help=T("held_help", context=context, b=b, held=fmt_gib(b.held_bytes)),
                    )
                m[1].metric(
                    "A running server sustains",
                    "-" if cap.sustained_batch is None else f"{cap.sustained_batch:,.1f}",
                    help="The simulated batch, averaged from the first finish to the last "
                    "admission, once the pool binds",
                )
                if cap.onset_users is None:
                    st.markdown(
                        f"With requests of {context - out:,} + {out:,} tokens the pool never "
                        f"binds up to {cap.users_cap:,} users: "
                        f"{LIMIT_NAMES[cap.top_limit]} holds the batch first (max_num_seqs "
                        f"{cap.max_num_seqs:,}, max_num_batched_tokens "
                        f"{cap.result(max(u for u, _ in cap.runs)).max_num_batched_tokens:,})."
                    )
                else:
                    st.markdown(
                        f"Simulated with {context - out:,} + {out:,} tokens per request, the pool "
                        f"binds from {cap.onset_users:,} users ({cap.last_free_users or 0:,} run "
                        f"with no preemption and no wait); with {cap.sustained_users:,} users the "
                        "server sustains the batch beside."
                    )
                for n in cap.notes:
                    st.caption(
                        n[0].upper()
                        + n[1:]
                        + ". The Serving frontier page offers log-normal lengths."
                    )
                pages.link(
                    "frontier",
                    "The Serving frontier: every user count simulated, with latency",
                    ":material/ssid_chart:",
                )

    if fits_gpu:
        with st.expander("Blocks, tokens and the longest sequence", icon=":material/grid_view:"):
            m = st.columns(3)
            m[0].metric(
                "Blocks", f"{b.num_blocks:,}" if b.has_blocks else "none", help=b.blocks_help()
            )
            m[1].metric("Capacity (tokens)", f"{b.kv_capacity_tokens:,}", help=b.capacity_help())
            mc = b.max_context_tokens
            # The longest sequence is the smaller of what memory holds and what the model allows.
            m[2].metric(
                "Longest sequence (tokens)",
                f"{b.usable_context:,}",
                help=(
                    f"limited by the model: max_position_embeddings = {b.model_max_context:,}"
                    + (
                        "; the memory would never fill (every layer keeps a bounded window)"
                        if mc is None
                        else f"; memory alone would allow {mc:,}"
                    )
                    if b.max_context_limited_by == "model"
                    else f"limited by memory: the whole pool given to one sequence (the model "
                    f"allows {b.model_max_context:,})"
                ),
            )
            if b.max_num_seqs is not None and b.limited_by == "memory":
                st.caption(T("memory_limits", b=b))
            if b.logs_startup_lines and (
                windowed
                or b.kv_capacity_tokens != b.num_blocks * (b.effective_block_size or b.block_size)
            ):
                # The three token figures, reconciled in words (issue 23, finding 20).
                longest = (
                    "memory alone would never fill"
                    if mc is None
                    else f"memory alone would let it reach {mc:,} tokens"
                )
                st.caption(T("three_figures", b=b, context=context, longest=longest))
            if windowed:
                kept = [
                    (
                        f"{r.layers} x {r.label}",
                        fmt_bytes(r.bytes_per_token_per_layer)
                        if r.stores_tokens
                        else "a fixed state",
                        f"{r.tokens_kept:,}" if r.stores_tokens else "",
                        fmt_bytes(r.bytes),
                    )
                    for r in per.rows
                    if r.stores_tokens or r.state_bytes
                ] + [("one sequence", "", "", fmt_bytes(per.kv_bytes))]
                cols = ("layers", "per token, per layer", f"tokens kept at {context:,}", "bytes")
                common.text_table([dict(zip(cols, row)) for row in kept])
                st.caption(
                    f"What one sequence of {context:,} tokens keeps, by layer kind (exact bytes, "
                    "no blocks). vLLM keeps them in blocks"
                    + (
                        f": {b.held_blocks_per_request:,} while decoding ({fmt_gib(b.held_bytes)},"
                        f" padding layers included), {b.blocks_per_request:,} in its start-up "
                        f"check ({fmt_gib(b.seq_bytes)})."
                        if b.logs_startup_lines
                        else "."
                    )
                )

        with st.expander(
            "Speculative decoding: the drafter's cache", icon=":material/fast_forward:"
        ):
            st.markdown(
                "A drafter guesses a few tokens ahead and the model checks them all in one step. "
                "Its attention layers keep a cache too, in the same pool: "
                + (
                    f"{plain(sel.label)}'s own multi-token-prediction (MTP) layers"
                    if sel.spec.mtp_layers
                    else "here an EAGLE head, one decoder layer shaped like the model's attention"
                )
                + "."
            )
            d1, d2 = st.columns([1, 1.4], vertical_alignment="bottom")
            drafting = d1.toggle("Serve with the drafter", **bound("b_spec", "bool"))
            ahead = d2.segmented_control(
                "Tokens drafted a step",
                [1, 2, 3, 4],
                default=2,
                **bound("b_spec_k", "num"),
                help="vLLM's num_speculative_tokens: it does not change the bytes per token",
            )
            if drafting:
                method = "mtp" if sel.spec.mtp_layers else "eagle"
                try:
                    drafter = Speculation(method=method, tokens=int(ahead or 2))
                    drafted = with_speculation(sel.spec, drafter)
                    dw = drafter_weight_bytes(drafted, sel.weights.bytes, sel.weights.total_params)
                    with_drafter = pool.but(
                        spec=drafted, weights_bytes=sel.weights.bytes + (dw or 0)
                    )
                    bd = cached(budget)(with_drafter, context, concurrency, convention=engine)
                    pd = cached(kv_cache)(
                        drafted, context, kv_dtype=sel.kv_dtype, tp=sel.tp, pp=sel.pp
                    )
                except ValueError as exc:
                    st.info(f"No drafter for this model: {plain(str(exc))}.")
                else:
                    extra = pd.drafter
                    st.markdown(
                        f"The drafter ({plain(drafted.drafter)}) adds "
                        f"**{fmt_bytes(extra['bytes_per_token'])} per token**"
                        + (" on each GPU" if sel.num_gpus > 1 else "")
                        + f", {extra['share_pct']:.1f}% of the cache. Sequences of {context:,} "
                        f"tokens that fit: **{b.max_concurrency:,.2f} without it, "
                        f"{bd.max_concurrency:,.2f} with it**."
                    )
                    if bd.max_concurrency > b.max_concurrency and bd.num_groups != b.num_groups:
                        st.markdown(T("more_not_fewer", b=b, bd=bd))
                    st.caption(
                        (
                            f"The drafter's own weights, {fmt_gib(dw / sel.num_gpus)}"
                            + (" per GPU" if sel.num_gpus > 1 else "")
                            + ", load before the engine measures its pool: they are subtracted."
                        )
                        if dw is not None
                        else T("drafter_weights_unknown")
                    )

    with st.expander("How these numbers are computed", icon=":material/function:"):
        common.formula(f"KV per token      = {per.per_token_formula()}\n" + b.derivation())
        st.caption(T("units"))


page()
