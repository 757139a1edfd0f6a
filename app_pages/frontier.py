import streamlit as st

from kvcalc.units import fmt_seconds
from webui import common, figures, serving
from webui.common import bound, select

sel = common.require_selection()
top = common.page_header(
    "Throughput and latency: the serving frontier", sel,
    "A serving engine runs many requests in one batch. A larger batch gives more tokens per "
    "second per graphics processing unit (GPU) but makes each user wait longer for each token. "
    "Each point below is one simulated run of continuous batching with a given number of "
    "users; the curve is the frontier of what this setup can trade.")
common.require_fit(sel)
st.markdown(
    "This page is where the Budget, the Decode step time and the Engine view meet: the Budget's "
    "key-value (KV) pool caps how many requests fit, the step time says how long each step of "
    "that batch takes, and the Engine's blocks decide who waits and who is preempted.")
lc = st.columns(3)
lc[0].page_link("app_pages/budget.py", label="Budget", icon=":material/memory:")
lc[1].page_link("app_pages/step_time.py", label="Decode step time", icon=":material/speed:")
lc[2].page_link("app_pages/engine.py", label="Engine view", icon=":material/view_module:")

c = st.columns(4)
prompt = c[0].number_input("Prompt (tokens)", 1, 32_768, 512, 64, **bound("fr_prompt", "num"))
output = c[1].number_input("Output (tokens)", 2, 8192, 256, 32, **bound("fr_output", "num"))
mns = c[2].number_input("max_num_seqs (0 = vLLM's default)", 0, 4096, 0, 64,
                        **bound("fr_mns", "num"))
overlay = select(c[3].selectbox, "Overlay: change one thing", list(serving.OVERLAYS), "fr_over",
                 serving.overlay_label, index=1)

base = dict(spec=sel.spec, w=sel.weights, gpu=sel.gpu, kv_dtype=sel.kv_dtype, tp=sel.tp,
            bw_share=sel.bw_share, prompt=prompt, output=output, share=0.0,
            max_num_seqs=mns or None)
if sel.pp != 1:
    common.stop_on_error(ValueError("The serving simulator models tensor parallelism only: set "
                                    "pipeline parallel to 1 in the sidebar."))
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
        note = ("MHA (multi-head attention) keeps the same weights here and stores one K/V head "
                "per query head, instead of the model's grouped-query attention (GQA).")
elif overlay == "prefix":
    changed = {**base, "share": 0.5}
elif overlay == "tp2":
    changed = {**base, "tp": sel.tp * 2}
    note = "Tensor parallel (TP): figures per GPU; all-reduce time is left out."
elif overlay == "gpu":
    big = serving.larger_gpu(sel.gpu)
    if big.key == sel.gpu.key:
        note = "This is the largest GPU in the registry."
    else:
        changed = {**base, "gpu": big}
        note = f"The larger GPU: {big.name}."
try:
    curve = serving.frontier(**base)
    other = serving.frontier(**changed) if changed else None
except ValueError as exc:
    common.stop_on_error(exc)

curves = [(f"as chosen ({sel.kv_dtype.upper()} KV)", list(serving.USERS), curve)]
if other is not None:
    curves.append((serving.overlay_label(overlay), list(serving.USERS), other))
st.plotly_chart(figures.frontier_figure(curves), width="stretch", key="fr_fig")
st.caption("Numbers on the points: users, each sending its next request as soon as the last one "
           "ends (a closed loop). Markers: circle, every request runs (the users limit the "
           "batch); square, max_num_seqs; large x, the KV pool (requests wait for blocks or are "
           "preempted); diamond, max_num_batched_tokens. Each point simulates "
           f"{serving.requests_for(1):,} to {serving.requests_for(1024):,} requests (about four "
           "per user). TPOT: time per output token.")
if note:
    st.info(note)


def first_pool_limit(results):
    for u, r in zip(serving.USERS, results):
        if r.binding_limit == "kv_pool":
            return u, r
    return None, None


def best_point(results):
    return max(results, key=lambda x: x.output_tokens_per_s_per_gpu)


def say(name, results):
    u, r = first_pool_limit(results)
    best = best_point(results)
    best_u = serving.USERS[results.index(best)]
    text = (f"**{name}**: at most {best.output_tokens_per_s_per_gpu:,.0f} output tokens/s per "
            f"GPU (at {best_u:,} users, {best.output_tokens_per_s_per_user:,.1f} tokens/s per "
            "user). ")
    if u is None:
        text += (f"The KV pool never stops the batch from growing up to {serving.USERS[-1]:,} "
                 f"users; the largest batch is {max(x.max_batch for x in results):,}.")
    else:
        text += (f"From {u:,} users on, the KV pool, not max_num_seqs ({r.max_num_seqs:,}), "
                 f"stops the batch at {r.max_batch:,} requests ({r.preemptions:,} preemptions "
                 "in that run).")
    return text


with top:  # the answer first: on a phone it is on the first screen
    m = st.columns(2)
    m[0].metric("Most output tokens/s per GPU",
                f"{best_point(curve).output_tokens_per_s_per_gpu:,.0f}",
                help="The highest point of the curve as chosen")
    u_pool, _ = first_pool_limit(curve)
    m[1].metric("The KV pool stops the batch from", "never (up to "
                f"{serving.USERS[-1]:,} users)" if u_pool is None else f"{u_pool:,} users")
    st.markdown(say(curves[0][0], curve))
    if other is not None:
        st.markdown(say(curves[1][0], other))

st.subheader("One run in detail")
users = select(st.select_slider, "Users", list(serving.USERS), "fr_users", value=256)
r = curve[serving.USERS.index(users)]
m = st.columns(4)
m[0].metric("TTFT p50 / p99", f"{fmt_seconds(r.ttft_p50_s)} / {fmt_seconds(r.ttft_p99_s)}",
            help="Time to first token: from arrival to the first output token")
m[1].metric("TPOT p50 / p99", f"{fmt_seconds(r.tpot_p50_s)} / {fmt_seconds(r.tpot_p99_s)}",
            help="Time per output token after the first: (last - first) / (tokens - 1)")
m[2].metric("ITL p50 / p99", f"{fmt_seconds(r.itl_p50_s)} / {fmt_seconds(r.itl_p99_s)}",
            help="Inter-token latency: every gap between two tokens of a request")
m[3].metric("Output tokens/s per GPU", f"{r.output_tokens_per_s_per_gpu:,.0f}")
m = st.columns(4)
m[0].metric("Tokens/s per user", f"{r.output_tokens_per_s_per_user:,.1f}",
            help="1 / median TPOT")
m[1].metric("Largest batch", f"{r.max_batch:,}")
m[2].metric("Preemptions", f"{r.preemptions:,}")
m[3].metric("KV blocks in use (mean)", f"{r.kv_utilization_mean:.0%}")
st.markdown(f"With {users:,} users the batch reached {r.max_batch:,} requests, limited by "
            f"{figures.LIMIT_NAMES[r.binding_limit]}; the pool holds {r.num_blocks:,} blocks of "
            f"{r.block_size} tokens, max_num_seqs is {r.max_num_seqs:,} and "
            f"max_num_batched_tokens {r.max_num_batched_tokens:,}.")
st.plotly_chart(figures.utilization_figure(r.utilization_series, r.batch_series, r.num_blocks),
                width="stretch", key="fr_util")
with st.expander("How the simulation works", icon=":material/function:"):
    st.markdown(
        "Each engine step decodes one token for every running request, gives prompt chunks "
        "the rest of max_num_batched_tokens, and admits waiting requests while blocks are free "
        "and fewer than max_num_seqs run. A request that needs a block when none is free "
        "preempts the newest running request, which recomputes later. A step costs "
        "max(compute time, memory time), the same law as the Decode step time page:")
    common.formula("step time = max( (2 x active params x tokens + attention FLOPs) / "
                   "(peak x MFU),\n"
                   "                 (weight bytes + KV bytes per token x tokens read) / "
                   "(bandwidth x achieved share) )")
    st.caption("FLOPs: floating-point operations. MFU: the share of the GPU's dense peak a real "
               "kernel reaches (0.5 here). Metrics follow vLLM's benchmark definitions. An "
               "ideal engine: no scheduling overhead, no all-reduce time.")
