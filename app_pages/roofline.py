import streamlit as st

from kvcalc import get_dtype, prefill, step_time
from kvcalc.intensity import attention_points, decode_point, prefill_point, ridge_point
from kvcalc.units import fmt_seconds
from webui import common, figures
from webui.common import bound

sel = common.require_selection()
top = common.page_header(
    "Roofline: why prefill computes and decode waits for memory", sel,
    "A graphics processing unit (GPU) can do a fixed number of floating-point operations "
    "(FLOPs) per second and move a fixed number of bytes per second. Work that does few FLOPs "
    "per byte it reads waits for memory; work that does many waits for the arithmetic units. "
    "The ridge point, peak FLOPs / bandwidth, separates the two.")
common.require_fit(sel)
peak = sel.gpu.peak_tflops(sel.weights.dtype)
if peak is None or sel.spec.params is None:
    common.stop_on_error(ValueError("The roofline needs the GPU's dense peak and the model's "
                                    "parameter count; pick a registry model and GPU."))

c = st.columns(3)
prompt = c[0].number_input("Prompt (tokens)", 1, 1_000_000, 512, 64, **bound("r_prompt", "num"))
batch = c[1].number_input("Decode batch (sequences)", 1, 4096, 32, 1, **bound("r_batch", "num"))
context = c[2].number_input("Decode context (tokens)", 1, 1_000_000, 8192, 1024,
                            **bound("r_ctx", "num"))
kw = dict(kv_dtype=sel.kv_dtype, tp=sel.tp)
try:
    ridge = ridge_point(peak, sel.bandwidth_gbs)
    pf = prefill_point(sel.spec, sel.weights, prompt, **kw)
    d1 = decode_point(sel.spec, sel.weights, batch=1, context=context, **kw)
    db = decode_point(sel.spec, sel.weights, batch=batch, context=context, **kw)
    attn = attention_points(sel.spec, kv_dtype=sel.kv_dtype, context=context)
    traj = [decode_point(sel.spec, sel.weights, batch=b, context=context, **kw)
            for b in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)]
    ttft = prefill(sel.spec, prompt, peak, tp=sel.tp,
                   weight_read_bytes=sel.weights.read_per_step(sel.spec, prompt),
                   bandwidth_gbs=sel.bandwidth_gbs)
    st_b = step_time(sel.spec, sel.weights, context=context, batch=batch,
                     bandwidth_gbs=sel.bandwidth_gbs, peak_tflops=peak, pp=sel.pp,
                     find_crossover=False, **kw)
except ValueError as exc:
    common.stop_on_error(exc)

points = [pf, d1] + ([db] if batch > 1 else []) + attn
st.plotly_chart(figures.roofline_figure(peak, sel.bandwidth_gbs, points, traj), width="stretch",
                key="r_fig")
st.caption(f"Peak {peak:,.1f} TFLOPS (dense, {sel.weights.dtype.upper()} weights) and "
           f"{sel.bandwidth_gbs:,.0f} GB/s (GB = 10^9 bytes; the sidebar's achieved share of "
           "the peak bandwidth applies). The dotted line is decode at batch 1 to 1,024 at this "
           "context.")

with top:  # the answer first: on a phone it is on the first screen
    m = st.columns(4)
    m[0].metric("Ridge point", f"{ridge:,.0f} FLOP/B")
    m[1].metric(f"Prefill of {prompt:,} tokens", f"{pf.intensity:,.1f} FLOP/B")
    m[2].metric(f"Decode at batch {batch:,}", f"{db.intensity:,.1f} FLOP/B")
    m[3].metric("Decode at batch 1", f"{d1.intensity:,.2f} FLOP/B")

side = "above" if pf.intensity > ridge else "below"
st.markdown(
    f"**Prefill** of {prompt:,} tokens does {pf.intensity:,.1f} FLOPs per byte, {side} the "
    f"ridge of {ridge:,.0f}: it is {ttft.bound} bound. Its time to first token (TTFT) is "
    f"max(compute {fmt_seconds(ttft.compute_time_s)}, memory "
    f"{fmt_seconds(ttft.memory_time_s)}) = **{fmt_seconds(ttft.time_s)}**, at "
    f"{ttft.mfu:g} of the peak (MFU, model FLOPs utilization).")
bound_word = "compute" if db.intensity > ridge else "memory"
st.markdown(
    f"**Decode** at batch {batch:,} and {context:,} tokens does {db.intensity:,.1f} FLOPs per "
    f"byte, {ridge / db.intensity:,.1f} times below the ridge: it is {bound_word} bound, and a "
    f"step takes the bytes over the bandwidth, **{fmt_seconds(st_b.step_time_s)}** (the Decode "
    f"step time page's figure). A larger batch shares one weight read among more tokens and "
    f"moves decode right, but each sequence still reads its own cache: at 1,024 sequences "
    f"decode reaches only {traj[-1].intensity:,.1f} FLOP/B.")
mha, gqa, mqa, mla = attn
group = round(gqa.intensity / mha.intensity)
st.markdown(
    f"**Attention alone** does the same FLOPs per cached byte at any batch and any length. "
    f"Multi-head attention (MHA) reads one key and one value per query head: "
    f"{mha.intensity:,.1f} FLOP/B. Grouped-query attention (GQA) lets {group} query heads "
    f"share each cached key and value, so the same bytes feed {group} times the work: "
    f"{gqa.intensity:,.1f} FLOP/B; multi-query attention (MQA), one KV head for all, "
    f"{mqa.intensity:,.1f}. Multi-head latent attention (MLA) with its up-projections "
    f"absorbed scores every query head against the whole cached latent: "
    f"{mla.intensity:,.1f} FLOP/B, {mla.intensity / gqa.intensity:,.1f} times GQA's, which "
    "is why MLA decode is compute-heavier than GQA.")
layer = next((lay for lay in sel.spec.kv_layers if lay.kv_heads is not None), None)
if layer is not None and layer.q_heads % layer.kv_heads == 0:
    with st.expander("Which query heads share a cached key and value, in this model",
                     icon=":material/hub:"):
        st.plotly_chart(figures.head_sharing_figure(
            layer.q_heads, layer.kv_heads, layer.head_dim, layer.v_head_dim,
            get_dtype(sel.kv_dtype).bytes_per_element), width="stretch", key="r_heads")
        st.caption("Each line is one query head reading one K/V head: the more lines meet at a "
                   "K/V head, the more FLOPs each cached byte feeds.")
with st.expander("The formulas, with this model's numbers", icon=":material/function:"):
    common.formula("\n".join([f"ridge = {peak:,.1f} x 10^12 FLOP/s / {sel.bandwidth_gbs:,.0f} x "
                              f"10^9 B/s = {ridge:,.1f} FLOP/B", pf.formula, d1.formula,
                              db.formula] + [p.formula for p in attn]))
    st.caption("Attention FLOPs count 2 per multiply-add: scores (q . k) and the weighted sum "
               "of values. MLA uses DeepSeek-V3's latent of 512 plus a 64-wide RoPE key and "
               "this model's query heads. KV: key-value.")
