import streamlit as st

from kvcalc import budget, get_model, kv_cache, registry
from kvcalc.memory import (
    DEFAULT_ACTIVATION_BYTES,
    DEFAULT_CUDA_GRAPH_BYTES,
    DEFAULT_GPU_MEM_UTIL,
    DEFAULT_NON_TORCH_BYTES,
    DEFAULT_RESERVE_BYTES,
    TRTLLM_FREE_FRACTION,
)
from kvcalc.sweeps import concurrency_curve, context_grid
from kvcalc.units import GiB, fmt_bytes, fmt_gib
from kvcalc.vllm import NEWEST
from webui import callbacks, common
from webui.charts import budget_figure, concurrency_figure
from webui.common import bound, select
from webui.hosted import plain

sel = common.require_selection()
top = common.page_header(
    "Budget: weights vs KV cache", sel,
    "An engine such as vLLM takes a fixed share of the GPU, loads the weights, keeps a reserve for "
    "activations and the runtime, and cuts everything left into cache blocks. The blocks decide "
    "how many conversations of a given length can run at once.")

c1, c2, c3 = st.columns(3)
context = c1.number_input("Context per sequence (tokens)", 1, 10_000_000, 8192, 1024,
                          **bound("b_ctx", "num"))
concurrency = c2.number_input("Concurrent sequences", 1, 1_000_000, 16, 1, **bound("b_conc", "num"))
util = c3.slider("gpu_memory_utilization", 0.05, 1.0, DEFAULT_GPU_MEM_UTIL, 0.01,
                 **bound("b_util", "num"),
                 help=f"vLLM {NEWEST}'s default shown first (0.9 before 0.20.0); for the "
                      "TensorRT-LLM convention, the share of memory free after the weights "
                      f"(its own default {TRTLLM_FREE_FRACTION:g})")
c1, c2, c3 = st.columns(3)
reserve_gib = c1.number_input("Reserve for activations and runtime (GiB)", 0.0, 1024.0,
                              DEFAULT_RESERVE_BYTES / GiB, 0.5, **bound("b_reserve", "num"),
                              help="activation peak + CUDA context and libraries + CUDA graphs: "
                                   f"{DEFAULT_ACTIVATION_BYTES / GiB:g} + "
                                   f"{DEFAULT_NON_TORCH_BYTES / GiB:g} + "
                                   f"{DEFAULT_CUDA_GRAPH_BYTES / GiB:g} GiB by default, the "
                                   "same figures as on the vLLM start-up page")
block = select(c2.selectbox, "Block size (tokens)", [1, 8, 16, 32, 64, 128, 256], "b_block",
               index=2)
engine = select(c3.selectbox, "Engine convention", ["vllm", "ideal", "trtllm"], "b_engine",
                callbacks.engine_label)

if context > sel.spec.max_context:
    st.warning(f"{context:,} tokens is beyond this model's max_position_embeddings of "
               f"{sel.spec.max_context:,}: the memory figures hold, but the model was not trained "
               "for such lengths.")

kw = dict(total_bytes=sel.gpu.memory_bytes, gpu_mem_util=util,
          reserve_bytes=round(reserve_gib * GiB), block_size=block, kv_dtype=sel.kv_dtype,
          tp=sel.tp, pp=sel.pp, engine=engine, gpu_name=sel.gpu.name)
try:
    b = budget(sel.spec, context=context, weights_bytes=sel.weights_bytes, concurrency=concurrency,
               **kw)
    per = kv_cache(sel.spec, context, kv_dtype=sel.kv_dtype, tp=sel.tp, pp=sel.pp)
except ValueError as exc:
    common.stop_on_error(exc)

st.plotly_chart(budget_figure(b), width="stretch", key="b_fig")
# What the pool can hold: whole blocks (vLLM, TensorRT-LLM), or every byte (the ideal convention).
usable = max(b.kv_pool_bytes, 0) if b.engine == "ideal" else b.num_blocks * b.block_bytes
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
        st.error("vLLM would refuse to start with max_model_len = "
                 f"{context:,}: one request of that length does not fit. Its own message: "
                 + common.plain(b.startup_error))
    elif b.fits:
        st.success(f"{concurrency:,} x {context:,} tokens need {fmt_gib(b.needed_bytes)} of cache "
                   f"blocks; the pool holds {fmt_gib(usable)}: it fits, with "
                   f"{fmt_gib(usable - b.needed_bytes)} to spare.")
    else:
        st.error(
            f"{concurrency:,} x {context:,} tokens need {fmt_gib(b.needed_bytes)} of cache blocks "
            f"but the pool holds {fmt_gib(usable)}: over by "
            f"{fmt_gib(b.overflow_bytes)}. At most {int(b.max_concurrency):,} such sequences "
            "fit at once; the engine would queue or preempt the rest."
        )

    m = st.columns(5)
    m[0].metric("KV per token", fmt_bytes(per.kv_bytes_per_token_nominal),
                help=f"{per.kv_bytes_per_token_nominal:,} bytes, one token in every K/V layer")
    m[1].metric("Blocks", f"{b.num_blocks:,}" if b.engine != "ideal" else "none",
                help=(f"{b.effective_block_size or b.block_size} tokens each, one page in each of "
                      f"{b.group_size} layers" if b.engine == "vllm" else
                      f"{b.block_size} tokens each" if b.engine == "trtllm" else
                      "the ideal convention counts bytes, not blocks"))
    m[2].metric("Capacity (tokens)", f"{b.kv_capacity_tokens:,}",
                help="blocks x block size: tokens the pool holds if every layer keeps every token")
    m[3].metric(f"Max concurrency at {context:,}", f"{b.max_concurrency:,.2f}x",
                help="vLLM's 'Maximum concurrency for N tokens per request': what memory allows"
                if b.engine == "vllm" else "pool / bytes of one sequence")
    mc = b.max_context_tokens
    # The longest sequence is the smaller of what memory holds and what the model was trained for.
    m[4].metric("Longest sequence (tokens)", f"{b.usable_context:,}",
                help=(f"limited by the model: max_position_embeddings = {b.model_max_context:,}"
                      + ("; the memory would never fill (every layer keeps a bounded window)"
                         if mc is None else f"; memory alone would allow {mc:,}")
                      if b.max_context_limited_by == "model" else
                      f"limited by memory: the whole pool given to one sequence (the model allows "
                      f"{b.model_max_context:,})"))

if b.max_num_seqs is not None:
    if b.limited_by == "max_num_seqs":
        st.info(f"Memory allows {b.max_concurrency:,.1f} sequences of {context:,} tokens, "
                f"but vLLM {b.vllm_version} runs at most max_num_seqs = {b.max_num_seqs:,} at "
                "once (its default on this GPU): the scheduler, not memory, is the limit here.")
    else:
        st.caption(f"Memory is the limit: {b.max_concurrency:,.1f} sequences, below vLLM "
                   f"{b.vllm_version}'s max_num_seqs = {b.max_num_seqs:,}.")

with st.expander("How these numbers are computed", icon=":material/function:"):
    common.formula(f"KV per token      = {per.per_token_formula()}\n" + b.derivation())
    st.caption("GiB = 2^30 bytes. With tensor parallelism each GPU keeps max(1, KV heads / TP) "
               "heads; an MLA latent is kept whole on every GPU. Weights are split evenly over "
               "all TP x PP GPUs.")

st.subheader("Max concurrent sequences against context length")
others = [k for k in registry().models]
compare = st.multiselect("Compare with (up to 3 models from the registry)", others,
                         max_selections=3, **bound("b_cmp", "list"))
hi = max(context * 4, min(sel.spec.max_context, 1_048_576), 4096)
grid = context_grid(256, hi, points=40, include=(context,))
series = [(sel.label, grid, concurrency_curve(sel.spec, grid, weights_bytes=sel.weights_bytes,
                                               **kw))]
rows = [{"model": sel.label, "KV per token": fmt_bytes(per.kv_bytes_per_token_nominal),
         "weights per GPU": fmt_gib(b.weights_bytes), "KV pool": fmt_gib(b.kv_pool_bytes),
         f"max concurrency at {context:,}": round(b.max_concurrency, 2),
         "longest sequence (tokens)": f"{b.usable_context:,} ({b.max_context_limited_by})"}]
for key in compare:
    m_ = get_model(key)
    w = m_.weights(st.session_state.get("wdtype", "auto"))
    try:
        ob = budget(m_.spec, context=context, weights_bytes=w.bytes, **kw)
        series.append((m_.name, grid, concurrency_curve(m_.spec, grid, weights_bytes=w.bytes,
                                                         **kw)))
    except ValueError as exc:
        st.warning(f"{m_.name}: {exc}")
        continue
    op = kv_cache(m_.spec, 1, kv_dtype=sel.kv_dtype, tp=sel.tp, pp=sel.pp)
    rows.append({"model": m_.name, "KV per token": fmt_bytes(op.kv_bytes_per_token_nominal),
                 "weights per GPU": fmt_gib(ob.weights_bytes), "KV pool": fmt_gib(ob.kv_pool_bytes),
                 f"max concurrency at {context:,}": round(ob.max_concurrency, 2),
                 "longest sequence (tokens)": f"{ob.usable_context:,} "
                                              f"({ob.max_context_limited_by})"})
st.plotly_chart(concurrency_figure(series, marker=context, ceiling=b.max_num_seqs,
                                   model_max=sel.spec.max_context),
                width="stretch", key="b_curve")
st.table(rows, border="horizontal", hide_index=True)
st.caption(f"The dash-dot line is {plain(sel.label)}'s maximum context "
           f"({sel.spec.max_context:,} tokens); lengths past it are shaded. Below one sequence "
           "(the dotted red line) not even one conversation of that length fits. "
           "Zero concurrency means the weights leave no room for a cache on this GPU. Try Llama 2 "
           "7B (every head keeps K/V), Llama 3.1 8B (8 K/V heads) and DeepSeek-V3 (one latent "
           "per token) side by side.")
