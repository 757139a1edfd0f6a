import streamlit as st

from kvcalc import budget, get_model, kv_cache, registry
from kvcalc.core.units import GiB, fmt_bytes, fmt_gib
from kvcalc.engines.budget import (
    DEFAULT_ACTIVATION_BYTES,
    DEFAULT_CUDA_GRAPH_BYTES,
    DEFAULT_GPU_MEM_UTIL,
    DEFAULT_NON_TORCH_BYTES,
    DEFAULT_RESERVE_BYTES,
    GPU_MEM_UTIL_CHANGED_IN,
    PREVIOUS_GPU_MEM_UTIL,
    TRTLLM_FREE_FRACTION,
)
from kvcalc.engines.vllm import NEWEST
from kvcalc.perf.sweeps import concurrency_curve, context_grid
from webui import callbacks, common, serving
from webui.common import bound, select
from webui.figures import LIMIT_NAMES, budget_figure, concurrency_figure
from webui.hosted import plain
from webui.memo import cached

sel = common.require_selection()
top = common.page_header(
    "Budget: weights vs KV cache",
    sel,
    "An engine such as vLLM takes a fixed share of the GPU, loads the weights, keeps a reserve for "
    "activations and the runtime, and cuts everything left into cache blocks. The blocks decide "
    "how many conversations of a given length can run at once.",
)

c1, c2, c3 = st.columns(3)
context = c1.number_input(
    "Context per sequence (tokens)", 1, 10_000_000, 8192, 1024, **bound("b_ctx", "num")
)
concurrency = c2.number_input("Concurrent sequences", 1, 1_000_000, 16, 1, **bound("b_conc", "num"))
util = c3.slider(
    "gpu_memory_utilization",
    0.05,
    1.0,
    DEFAULT_GPU_MEM_UTIL,
    0.01,
    **bound("b_util", "num"),
    help=f"vLLM {NEWEST}'s default shown first ({PREVIOUS_GPU_MEM_UTIL:g} before "
    f"{GPU_MEM_UTIL_CHANGED_IN}); for the "
    "TensorRT-LLM convention, the share of memory free after the weights "
    f"(its own default {TRTLLM_FREE_FRACTION:g})",
)
c1, c2, c3 = st.columns(3)
reserve_gib = c1.number_input(
    "Reserve for activations and runtime (GiB)",
    0.0,
    1024.0,
    DEFAULT_RESERVE_BYTES / GiB,
    0.5,
    **bound("b_reserve", "num"),
    help="activation peak + CUDA context and libraries + CUDA graphs: "
    f"{DEFAULT_ACTIVATION_BYTES / GiB:g} + "
    f"{DEFAULT_NON_TORCH_BYTES / GiB:g} + "
    f"{DEFAULT_CUDA_GRAPH_BYTES / GiB:g} GiB by default, the "
    "same figures as on the vLLM start-up page",
)
block = select(
    c2.selectbox, "Block size (tokens)", [1, 8, 16, 32, 64, 128, 256], "b_block", index=2
)
engine = select(
    c3.selectbox,
    "Engine convention",
    ["vllm", "ideal", "trtllm"],
    "b_engine",
    callbacks.engine_label,
)

if context > sel.spec.max_context:
    st.warning(
        f"{context:,} tokens is beyond this model's max_position_embeddings of "
        f"{sel.spec.max_context:,}: the memory figures hold, but the model was not trained "
        "for such lengths."
    )

kw = dict(
    total_bytes=sel.gpu.memory_bytes,
    gpu_mem_util=util,
    reserve_bytes=round(reserve_gib * GiB),
    block_size=block,
    kv_dtype=sel.kv_dtype,
    tp=sel.tp,
    pp=sel.pp,
    engine=engine,
    gpu_name=sel.gpu.name,
)
try:
    b = cached(budget)(
        sel.spec, context=context, weights_bytes=sel.weights_bytes, concurrency=concurrency, **kw
    )
    per = cached(kv_cache)(sel.spec, context, kv_dtype=sel.kv_dtype, tp=sel.tp, pp=sel.pp)
except ValueError as exc:
    common.stop_on_error(exc)

st.plotly_chart(budget_figure(b), width="stretch", key="b_fig")
# What the pool can hold: whole blocks (vLLM, TensorRT-LLM), or every byte (the ideal convention).
usable = b.usable_bytes
# Some layers keep less than every token (windows, chunks, states): vLLM's start-up line and a
# running server then disagree, and the page shows both.
windowed = any(r.tokens_kept < context or r.state_bytes for r in per.rows)
with top:  # the answer first: on a phone it is on the first screen
    if b.kv_pool_bytes <= 0:
        st.error(
            f"The weights ({fmt_gib(b.weights_bytes)}) and the reserve "
            f"({fmt_gib(b.reserve_bytes)}) already exceed the {fmt_gib(b.requested_bytes)} "
            "the engine may use, by "
            f"{fmt_gib(-b.kv_pool_bytes)}: there is no room for a cache. Add GPUs (tensor "
            "parallel), pick a smaller weight format, or a larger GPU."
        )
        common.stop()  # no pool, so no blocks, capacity or concurrency to show
    elif b.startup_error:
        st.error(
            "vLLM would refuse to start with max_model_len = "
            f"{context:,}: one request of that length does not fit. Its own message: "
            + common.plain(b.startup_error)
        )
    elif b.fits:
        st.success(
            f"{concurrency:,} x {context:,} tokens need {fmt_gib(b.needed_bytes)} of cache "
            f"blocks; the pool holds {fmt_gib(usable)}: it fits, with "
            f"{fmt_gib(usable - b.needed_bytes)} to spare."
        )
    elif windowed and concurrency <= b.held_concurrency:
        st.warning(
            f"By vLLM's start-up arithmetic {concurrency:,} x {context:,} tokens need "
            f"{fmt_gib(b.needed_bytes)} of cache blocks, over the {fmt_gib(usable)} pool by "
            f"{fmt_gib(b.overflow_bytes)}: it charges every sequence at full length and each "
            "window its worst case, and logs "
            f"{b.max_concurrency:,.2f} (see below). Decoding, a sequence of {context:,} tokens "
            f"holds only {fmt_gib(b.held_bytes)}, so {b.held_concurrency:,.2f} fit while they "
            "run; a new prompt needs its whole window while its prefill runs."
        )
    else:
        st.error(
            f"{concurrency:,} x {context:,} tokens need {fmt_gib(b.needed_bytes)} of cache blocks "
            f"but the pool holds {fmt_gib(usable)}: over by "
            f"{fmt_gib(b.overflow_bytes)}. "
            + (
                f"vLLM's start-up line (its worst case) allows {b.max_concurrency:,.2f} such "
                f"sequences; decoding, each holds {fmt_gib(b.held_bytes)} and "
                f"{b.held_concurrency:,.2f} fit at once"
                if windowed
                else f"At most {int(b.max_concurrency):,} such sequences fit at once"
            )
            + "; the engine would queue or preempt the rest."
        )

    m = st.columns(3)
    m[0].metric(
        f"KV per token at {context:,}",
        fmt_bytes(per.kv_bytes_per_token),
        help=(
            f"what one more token adds at {context:,} tokens. "
            + (
                f"Up to a window every K/V layer grows: "
                f"{fmt_bytes(per.kv_bytes_per_token_nominal)} per token; past it only "
                "the layers that keep every token do"
                if per.kv_bytes_per_token != per.kv_bytes_per_token_nominal
                else f"{per.kv_bytes_per_token_nominal:,} bytes, one token in every K/V layer"
            )
        ),
    )
    m[1].metric(
        "Blocks",
        f"{b.num_blocks:,}" if b.has_blocks else "none",
        help=b.blocks_help(),
    )
    m[2].metric(
        "Capacity (tokens)",
        f"{b.kv_capacity_tokens:,}",
        help=b.capacity_help(),
    )
    m = st.columns(3)
    m[0].metric(
        b.concurrency_label(context),
        f"{b.max_concurrency:,.2f}x",
        help=b.concurrency_help(windowed),
    )
    if b.logs_startup_lines and windowed:
        m[1].metric(
            f"Held decoding at {context:,}",
            f"{b.held_concurrency:,.2f}",
            help=f"one sequence decoding at {context:,} tokens holds "
            f"{b.held_blocks_per_request:,} blocks ({fmt_gib(b.held_bytes)}): the "
            "layers that keep every token all of them, a sliding layer its last "
            "window (vLLM frees the blocks that leave it), a state its own",
        )
    mc = b.max_context_tokens
    # The longest sequence is the smaller of what memory holds and what the model was trained for.
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
            else f"limited by memory: the whole pool given to one sequence (the model allows "
            f"{b.model_max_context:,})"
        ),
    )
    if b.logs_startup_lines and (
        windowed or b.kv_capacity_tokens != b.num_blocks * (b.effective_block_size or b.block_size)
    ):
        # The three token figures, reconciled in words (issue 23, finding 20).
        longest = (
            "memory alone would never fill"
            if mc is None
            else f"memory alone would let it reach {mc:,} tokens"
        )
        st.caption(
            f"Three figures, three questions. Capacity ({b.kv_capacity_tokens:,} tokens) is what "
            f"vLLM prints as its cache size: {b.max_concurrency:,.2f} worst-case requests x "
            f"{context:,} tokens. One sequence alone can grow much longer, because its windows "
            f"stay short: {longest}, and the model allows {b.model_max_context:,}, so the "
            f"longest is {b.usable_context:,}. The table below splits one sequence's bytes by "
            "layer kind."
        )

if windowed:
    common.table(
        [
            {
                "layers": f"{r.layers} x {r.label}",
                "per token, per layer": (
                    fmt_bytes(r.bytes_per_token_per_layer) if r.stores_tokens else "a fixed state"
                ),
                f"tokens kept at {context:,}": f"{r.tokens_kept:,}" if r.stores_tokens else "",
                "bytes": fmt_bytes(r.bytes),
            }
            for r in per.rows
            if r.stores_tokens or r.state_bytes
        ]
        + [
            {
                "layers": "one sequence",
                "per token, per layer": "",
                f"tokens kept at {context:,}": "",
                "bytes": fmt_bytes(per.kv_bytes),
            }
        ],
        border="horizontal",
        hide_index=True,
    )
    st.caption(
        f"What one sequence of {context:,} tokens keeps, by layer kind (exact bytes, no "
        "blocks). vLLM keeps them in blocks"
        + (
            f": {b.held_blocks_per_request:,} while decoding ({fmt_gib(b.held_bytes)}, "
            "padding layers included), "
            f"{b.blocks_per_request:,} in its start-up check ({fmt_gib(b.seq_bytes)})."
            if b.logs_startup_lines
            else "."
        )
    )

if b.logs_startup_lines and not b.startup_error and context >= 2:
    # vLLM's logged worst case beside what a running server sustains (issue 23, item 3).
    st.subheader("Logged vs running capacity")
    out_in = st.number_input(
        "Of the context, output tokens (the rest is the prompt)",
        1,
        1_000_000,
        256,
        64,
        **bound("b_out", "num"),
        help="Simulated users each send a prompt and wait for this many "
        "output tokens, then send the next request",
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
            pool=(util, round(reserve_gib * GiB), block),
        )
    except ValueError as exc:
        st.info(
            "The serving simulator cannot run this setup, so only vLLM's line and the held "
            f"figure above are shown: {common.plain(str(exc))}."
        )
    else:
        m = st.columns(3)
        m[0].metric(
            "vLLM logs (start-up)",
            f"{cap.logged_concurrency:,.2f}",
            help="Every request at full length at once",
        )
        m[1].metric(
            "The pool binds from",
            "never" if cap.onset_users is None else f"{cap.onset_users:,} users",
            help="The fewest users (each sending its next request when the last ends) "
            "whose simulated run preempts or makes a request wait for blocks",
        )
        m[2].metric(
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
                f"vLLM's start-up line says {cap.logged_concurrency:,.2f} requests of "
                f"{context:,} tokens fit; decoding, each holds {cap.held_blocks:,} blocks, so "
                f"{cap.held_concurrency:,.2f} fit at their longest. Simulated with "
                f"{context - out:,} + {out:,} tokens per request, the pool starts to bind at "
                f"{cap.onset_users:,} users ({cap.last_free_users or 0:,} run with no "
                f"preemption and no wait) and with {cap.sustained_users:,} users a running "
                f"server sustains {cap.sustained_batch:,.1f} requests."
            )
        for n in cap.notes:
            st.caption(
                n[0].upper() + n[1:] + ". The Serving frontier page offers log-normal lengths."
            )
        st.page_link(
            "app_pages/frontier.py",
            label="The Serving frontier: every user count simulated, with latency",
            icon=":material/ssid_chart:",
        )

if b.max_num_seqs is not None:
    if b.limited_by == "max_num_seqs":
        st.info(
            f"Memory allows {b.max_concurrency:,.1f} sequences of {context:,} tokens "
            "(vLLM's start-up line), "
            f"but vLLM {b.vllm_version} runs at most max_num_seqs = {b.max_num_seqs:,} at "
            "once (its default on this GPU): the scheduler, not memory, is the limit here."
        )
    else:
        st.caption(
            f"Memory is the limit: {b.max_concurrency:,.1f} sequences by vLLM's start-up "
            f"line, below vLLM {b.vllm_version}'s max_num_seqs = {b.max_num_seqs:,}."
        )

with st.expander("How these numbers are computed", icon=":material/function:"):
    common.formula(f"KV per token      = {per.per_token_formula()}\n" + b.derivation())
    st.caption(
        "GiB = 2^30 bytes. With tensor parallelism each GPU keeps max(1, KV heads / TP) "
        "heads; an MLA latent is kept whole on every GPU. Weights are split evenly over "
        "all TP x PP GPUs."
    )

st.subheader("Max concurrent sequences against context length")
others = [k for k in registry().models]
compare = st.multiselect(
    "Compare with (up to 3 models from the registry)",
    others,
    max_selections=3,
    **bound("b_cmp", "list"),
)
hi = max(context * 4, min(sel.spec.max_context, 1_048_576), 4096)
grid = context_grid(256, hi, points=40, include=(context,))
series = [
    (
        sel.label,
        grid,
        cached(concurrency_curve)(sel.spec, grid, weights_bytes=sel.weights_bytes, **kw),
    )
]
rows = [
    {
        "model": sel.label,
        "KV per token": fmt_bytes(per.kv_bytes_per_token_nominal),
        "weights per GPU": fmt_gib(b.weights_bytes),
        "KV pool": fmt_gib(b.kv_pool_bytes),
        f"max concurrency at {context:,}": round(b.max_concurrency, 2),
        "longest sequence (tokens)": f"{b.usable_context:,} ({b.max_context_limited_by})",
    }
]
for key in compare:
    m_ = get_model(key)
    w = m_.weights(st.session_state.get("wdtype", "auto"))
    try:
        ob = budget(m_.spec, context=context, weights_bytes=w.bytes, **kw)
        series.append(
            (m_.name, grid, cached(concurrency_curve)(m_.spec, grid, weights_bytes=w.bytes, **kw))
        )
    except ValueError as exc:
        st.warning(f"{m_.name}: {exc}")
        continue
    op = kv_cache(m_.spec, 1, kv_dtype=sel.kv_dtype, tp=sel.tp, pp=sel.pp)
    rows.append(
        {
            "model": m_.name,
            "KV per token": fmt_bytes(op.kv_bytes_per_token_nominal),
            "weights per GPU": fmt_gib(ob.weights_bytes),
            "KV pool": fmt_gib(ob.kv_pool_bytes),
            f"max concurrency at {context:,}": round(ob.max_concurrency, 2),
            "longest sequence (tokens)": f"{ob.usable_context:,} ({ob.max_context_limited_by})",
        }
    )
st.plotly_chart(
    concurrency_figure(
        series, marker=context, ceiling=b.max_num_seqs, model_max=sel.spec.max_context
    ),
    width="stretch",
    key="b_curve",
)
common.table(rows, border="horizontal", hide_index=True)
st.caption(
    f"The dash-dot line is {plain(sel.label)}'s maximum context "
    f"({sel.spec.max_context:,} tokens); lengths past it are shaded. Below one sequence "
    "(the dotted red line) not even one conversation of that length fits. "
    "Zero concurrency means the weights leave no room for a cache on this GPU. Try Llama 2 "
    "7B (every head keeps K/V), Llama 3.1 8B (8 K/V heads) and DeepSeek-V3 (one latent "
    "per token) side by side."
)
