import numpy as np
import streamlit as st

from kvcalc.measure import microscope
from webui import common, device_queue, pages
from webui.common import bound, number, plain, select
from webui.figures import attention_row_figure, causal_figure, gqa_figure, kv_figure
from webui.hosted import hosted
from webui.prose import prose

T = prose("microscope")

common.page_header("Attention microscope: inside a real cache", None, T("lead"))

common.require_live()
if (missing := common.smollm2_missing()) is not None:
    st.error(missing)
    common.stop()

EXAMPLES = {
    "cache": "The key and value cache of a transformer stores, for every token it has read,",
    "paris": "The capital of France is Paris. The capital of Italy is",
    "count": "one two three four five six seven",
    "code": "def add(a, b):\n    return",
}
cap = microscope.caps(hosted())
c = st.columns([2, 1])
example = select(
    c[0].selectbox,
    "Example prompt",
    list(EXAMPLES),
    "m_example",
    lambda k: EXAMPLES[k].replace("\n", " "),
)
steps = number(
    c[1], "Tokens to generate (decode steps)", 1, cap["steps"], min(8, cap["steps"]), 1, "m_steps"
)
prompt = st.text_area(
    "...or type your own prompt (it replaces the example)",
    "",
    max_chars=cap["chars"],
    height=68,
    help=f"At most {cap['prompt_tokens']} tokens here.",
    **bound("m_prompt", "str"),
)
text = prompt if prompt.strip() else EXAMPLES[example]


@st.cache_data(max_entries=32, show_spinner=False)
def _look(text: str, model: str, steps: int, is_hosted: bool) -> microscope.Microscope:
    """The whole run for one prompt and model, computed once (through the device queue) and
    then only read: moving through steps, layers and heads never reruns the model."""
    return device_queue.run_here(
        lambda should_stop: microscope.run(
            text, int(steps), hosted=is_hosted, should_stop=should_stop
        )
    )


# A run starts only on a press (a link alone never puts a job on the device); the result is then
# kept in this tab, so moving through steps, layers and heads never asks for another run.
asked = (text, int(steps))
if st.button(
    "Run SmolLM2 on this prompt", type="primary", icon=":material/play_arrow:", key="m_run"
):
    try:
        with st.spinner(
            "Running SmolLM2 on your prompt (a few seconds; the first run loads it)..."
        ):
            st.session_state["_m_result"] = (
                asked,
                _look(text, "smollm2-135m", int(steps), hosted()),
            )
    except ValueError as exc:
        st.session_state.pop("_m_result", None)
        common.stop_on_error(exc)
done = st.session_state.get("_m_result")
if not done or done[0] != asked:
    st.info(T("press", n_steps=int(steps), s="s" if int(steps) > 1 else ""))
    common.stop()
m = done[1]

c = st.columns(3)
step = c[0].slider(
    "Step (0 = reading the prompt)", 0, m.steps, min(1, m.steps), **bound("m_step", "num")
)
layer = c[1].slider("Layer", 0, m.n_layers - 1, 0, **bound("m_layer", "num"))
head = select(
    c[2].selectbox,
    "Query head",
    list(range(m.n_heads)),
    "m_head",
    lambda h: f"{h} (reads KV head {h // m.group})",
)
kv_head = m.kv_head_of(head)
n = m.positions(step)
labels = m.labels[:n]
written = m.written(step)
qpos = m.query_position(step)

st.markdown(T("prompt_tokens_generated", m=m, generated_text=plain(m.generated_text)))

st.subheader("What this step writes, and what it reads")
if step == 0:
    st.markdown(T("prefill", m=m, last=m.prompt_tokens - 1))
else:
    fed = plain(repr(m.labels[qpos]))
    st.markdown(T("decode_step_feeds", step=step, qpos=qpos, labels=fed, n=n, earlier=n - 1))
row = m.row(step, layer, head)
st.plotly_chart(
    attention_row_figure(
        row,
        labels,
        written,
        f"Step {step}, layer {layer}, query head {head}: how "
        f"token {qpos} weighs every cached position",
    ),
    width="stretch",
    key="m_row",
)
top = sorted(range(n), key=lambda j: -float(row[j]))[:3]
sink = float(row[0])
st.caption(
    "Orange: K/V written this step; green: only read. The three largest weights: "
    + ", ".join(f"position {j} {plain(repr(m.labels[j]))} ({float(row[j]):.3f})" for j in top)
    + "."
)
if n > 2 and sink >= 0.3:
    st.markdown(T("sink", sink=sink, first=plain(repr(m.labels[0]))))
    pages.link("kv_quality", "Measured: a window with and without 4 sink tokens")

st.subheader("The query is used once, then dropped")
qn = m.query_numbers_per_token()
st.markdown(T("query", qpos=qpos, m=m, qn=qn, per_token=m.kv_bytes_per_token()))

st.subheader("Grouped-query attention (GQA): three query heads, one cached KV head")
heads = m.heads_of(kv_head)
rows = [m.row(step, layer, h) for h in heads]
st.plotly_chart(gqa_figure(rows, heads, labels, kv_head), width="stretch", key="m_gqa")
peaks = [max(range(n), key=lambda j, r=r: float(r[j])) for r in rows]
st.markdown(
    f"SmolLM2 has {m.n_heads} query heads but stores only {m.n_kv} KV heads per layer: query "
    f"heads {', '.join(map(str, heads))} share KV head {kv_head}, so they read **the same cached "
    f"keys and values** (stored once, not {m.group} times). Each has its own query, so each "
    "weighs them differently: their largest weights fall on positions "
    f"{', '.join(map(str, peaks))}."
)

st.subheader("The causal mask")
P = m.prompt_tokens
mat = m.attn[0][layer, head]
upper = float(np.triu(mat, 1).max())
everywhere = m.causal_upper_max
st.plotly_chart(causal_figure(mat, m.labels[:P], head), width="stretch", key="m_causal")
st.markdown(T("prompt_reading", P=P, upper=upper, m=m, everywhere=everywhere))

st.subheader("Earlier tokens' keys and values never change")
worst = max(m.unchanged_max_diff) if m.unchanged_max_diff else 0.0
st.markdown(T("test", positions=m.positions(m.steps), m=m, worst=worst))

for where, name, kv in zip(st.columns(2), ("Keys", "Values"), (m.keys, m.values), strict=True):
    fig = kv_figure(kv[layer, kv_head, :n], labels, name, written)
    where.plotly_chart(fig, width="stretch", key=f"m_{name.lower()}")
st.caption(T("head_rows", layer=layer, kv_head=kv_head, m=m))
