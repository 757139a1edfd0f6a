import streamlit as st

from kvcalc.core.units import GB, fmt_bytes, fmt_seconds
from kvcalc.measure import live, runtime
from kvcalc.measure.twins import TWIN_KEYS
from webui import common, device_queue, work_time
from webui.common import bound, number, select
from webui.figures import live_bytes_figure, live_time_figure
from webui.hosted import hosted, live_caps
from webui.prose import prose

T = prose("live")

common.page_header("Live: measure a real model", None, T("lead"))

common.require_live()


SOURCES = {
    "twin": "Architecture twin (random weights)",
    "gguf": "SmolLM2-135M, real weights (offline)",
    "hub": "Hub model (local cache)",
}
source = select(st.radio, "Model", list(SOURCES), "v_src", SOURCES.get, horizontal=True)
default = st.session_state.get("model")
if source == "twin":
    keys = list(TWIN_KEYS)
    model = select(
        st.selectbox,
        "Twin of",
        keys,
        "v_model",
        index=keys.index(default) if default in keys else 0,
    )
    st.caption(T("twin"))
elif source == "gguf":
    model = "smollm2-135m"
    if (missing := common.smollm2_missing()) is not None:
        st.warning(f"{missing} Twins work without it.")
    else:
        st.caption(T("smollm2"))
else:
    model = select(st.selectbox, "Hub model", list(runtime.HUB_ALLOWLIST), "v_hub")
    st.caption(T("cache_only") if hosted() else T("local_cache"))

caps = live_caps()
c = st.columns(4)
if source == "twin":
    prompt_tokens = number(
        c[0], "Prompt length (tokens)", 1, caps["prompt_tokens"], 32, 8, "v_prompt_n"
    )
    prompt_text = None
else:
    prompt_text = st.text_input(
        "Prompt",
        "The key and value cache of a transformer is",
        max_chars=500,
        **bound("v_prompt", "str"),
    )
    prompt_tokens = 1
new_tokens = number(c[1], "New tokens", 1, caps["new_tokens"], 48, 8, "v_new")
batch = number(c[2], "Batch", 1, caps["batch"], 1, 1, "v_batch")
no_cache = number(
    c[3],
    "Steps without a cache",
    0,
    caps["no_cache"],
    16,
    4,
    "v_nocache",
    help="Also time this many steps that recompute the whole sequence",
)
c = st.columns(4)
dtype = select(
    c[0].selectbox,
    "Precision",
    ["fp32", "bf16", "fp16"],
    "v_dtype",
    help="fp32 is fastest on a CPU; bf16 or fp16 on a GPU",
)
device = select(c[1].selectbox, "Device", ["auto", "cpu", "cuda"], "v_device")
queue = device_queue.QUEUE  # a module global: clearing Streamlit's caches cannot replace it
cap_s = queue.run_cap_s()
st.caption(T("one_run_uses", cap_s=cap_s))

if c[3].button("Run", type="primary", icon=":material/play_arrow:", width="stretch"):
    wait_note = st.empty()

    def job(should_stop):
        return live.measure_cache(
            runtime.RealModel(model, source, dtype, device, local_files_only=hosted()),
            prompt_tokens=prompt_tokens,
            new_tokens=new_tokens,
            batch=batch,
            no_cache_tokens=no_cache,
            prompt_text=prompt_text,
            should_stop=should_stop,
        )

    def on_wait(pos: int) -> None:
        if pos > 1:
            ahead = f"{pos - 1} run{'s' if pos > 2 else ''}"
            wait_note.info(T("another_run_using", pos=pos, ahead=ahead))
        else:
            wait_note.empty()

    try:
        with st.spinner(f"Running the model (at most {cap_s:.0f} s)..."):
            # The checkpoint reads session state: that is where Streamlit raises StopException or
            # RerunException in this thread (Stop, a changed input, a closed tab); the queue's
            # finally then cancels the job, and the run ends at its next step.
            result = device_queue.run_here(
                job, on_wait=on_wait, checkpoint=lambda: st.session_state.get("v_result")
            )
        st.session_state["v_result"] = result
    except ValueError as exc:
        st.session_state.pop("v_result", None)
        common.stop_on_error(exc)
    finally:
        wait_note.empty()

result = st.session_state.get("v_result")
if result is None:
    st.info("Choose a model and press Run.")
    work_time.section(model, source, dtype, device)
    common.stop()

steps = result.steps
first, last = steps[0], steps[-1]
grow = (last.measured_bytes - first.measured_bytes) / max(1, last.tokens - first.tokens)
if result.all_match:
    st.success(
        f"Measured equals predicted, byte for byte, at all {len(steps)} steps: "
        f"{fmt_bytes(last.measured_bytes)} for {last.tokens:,} tokens x batch "
        f"{result.batch} ({grow:,.0f} B per token added)."
    )
else:
    bad = next(s for s in steps if s.measured_bytes != s.predicted_bytes)
    st.warning(T("differ", bad=bad, gap=bad.measured_bytes - bad.predicted_bytes))
if source == "twin":
    # What the bytes above are: the twin's few layers at the run's precision, not the model's.
    from kvcalc import get_model, kv_cache
    from kvcalc.measure.twins import twin_config

    tc = twin_config(model)
    n_twin = tc.get("num_hidden_layers") or tc.get("n_layer")
    real = get_model(model)
    at = {d: kv_cache(real.spec, 1, kv_dtype=d).kv_bytes_per_token_nominal for d in (dtype, "bf16")}
    st.caption(
        T("these_are_twin", n_twin=n_twin, real=real, dtype_name=dtype.upper(), per_token=at[dtype])
        + (f", {at['bf16']:,} B in BF16, as it is usually served" if dtype != "bf16" else "")
        + "."
    )
for note in result.notes:
    st.caption(note)

left, right = st.columns(2)
with left:
    st.plotly_chart(live_bytes_figure(steps), width="stretch", key="v_bytes")
with right:
    a, b = result.fit()
    st.plotly_chart(
        live_time_figure(steps, result.no_cache_steps, (a, b)), width="stretch", key="v_time"
    )

decode = steps[1:]
m = st.columns(4)
if decode:
    mean = sum(s.step_time_s for s in decode) / len(decode)
    m[0].metric("Decode tokens/s", f"{result.batch / mean:,.1f}", help="batch / mean step time")
m[1].metric("Time per cached token", f"{b * 1e6:,.2f} µs", help="slope of the fitted line")
on_gpu = result.device == "cuda"
if not on_gpu:
    bandwidth, why = "not on a CPU", T("cpu_slope_mixes")
elif b > 0 and grow > 0:
    bandwidth = f"{grow / b / GB:,.2f} GB/s"
    why = "extra bytes read per cached token / extra time per cached token"
else:
    bandwidth, why = "not measurable", T("step_time_did")
m[2].metric("Effective bandwidth", bandwidth, help=why)
ran_on = runtime.device_name() if on_gpu else "this machine's CPU"
nominal = common.selection().gpu if on_gpu else None
if nominal is not None and not runtime.same_gpu(ran_on, nominal.name):
    nominal = None  # the sidebar's GPU is not the one that ran: its datasheet does not apply
m[3].metric("Device", result.device.upper(), help=ran_on)
if on_gpu:
    st.caption(
        f"Ran on {ran_on}"
        + (
            f", nominal bandwidth {nominal.bandwidth_gbs:,.0f} GB/s ({nominal.name})"
            if nominal
            else ", whose nominal bandwidth this page does not know (pick it "
            "in the sidebar to compare)"
        )
        + ". A tiny model cannot saturate it: per-step overheads dominate."
    )
else:
    st.caption(T("cpu_note"))
if result.no_cache_steps:
    same = "the same" if result.tokens_match_no_cache else "different"
    st.markdown(T("no_cache_note", same=same))
if result.text:
    st.markdown("**Generated text**")
    st.code(result.text, language=None, wrap_lines=True)
with st.expander("Every step"):
    st.table(
        [
            {
                "tokens": f"{s.tokens:,}",
                "measured (B)": f"{s.measured_bytes:,}",
                "predicted (B)": f"{s.predicted_bytes:,}",
                "step": fmt_seconds(s.step_time_s),
                "memory": fmt_bytes(s.memory_bytes),
            }
            for s in steps
        ],
        border="horizontal",
        hide_index=True,
    )
work_time.section(model, source, dtype, device)
