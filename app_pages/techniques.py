import streamlit as st

from kvcalc import get_dtype, kv_cache, registry
from kvcalc.charts import techniques_figure
from kvcalc.techniques import techniques
from kvcalc.units import fmt_bytes
from webui import callbacks, common
from webui.common import bound, select

sel = common.require_selection()
top = common.page_header(
    "Shrinking the cache", sel,
    "Every way to shrink the cache attacks one term of the same product: layers x K/V heads x "
    "head size x bytes per number x tokens kept. Here each technique is applied to the chosen "
    "model and its saving is computed, not quoted.")

links = registry().links
c1, c2, c3 = st.columns(3)
context = c1.number_input("Context per sequence (tokens)", 1, 10_000_000, 32768, 1024,
                          **bound("t_ctx", "num"))
window = c2.number_input("Sliding window (tokens)", 1, 10_000_000, 4096, 256,
                         **bound("t_window", "num"))
gpu_tokens = c3.number_input("Offload: tokens kept on the GPU", 1, 10_000_000, 4096, 256,
                             **bound("t_gpu_tokens", "num"))
c1, c2, c3 = st.columns(3)
rank = c1.number_input("MLA latent rank", 1, 65536, 512, 64, **bound("t_rank", "num"))
rope = c2.number_input("MLA RoPE part", 0, 4096, 64, 16, **bound("t_rope", "num"))
link = select(c3.selectbox, "Offload link", list(links), "t_link", callbacks.link_label,
              index=list(links).index("pcie5-x16") if "pcie5-x16" in links else 0)

try:
    rows = techniques(sel.spec, context, kv_dtype=sel.kv_dtype, window=window,
                      latent=(rank, rope), gpu_tokens=gpu_tokens, link_gbs=links[link].gbs,
                      link_name=links[link].name,
                      peak_tflops=sel.gpu.peak_tflops("bf16") or 100.0)
except ValueError as exc:
    common.stop_on_error(exc)

own = next(r for r in rows if r.key == "own")
with top:  # the answer first: on a phone it is on the first screen
    best = max((r for r in rows if r.key != "own" and r.applies), key=lambda r: r.saving,
               default=None)
    m = st.columns(2)
    m[0].metric(f"One sequence of {context:,} tokens, as configured", fmt_bytes(own.seq_bytes))
    if best is not None and best.saving > 1:
        m[1].metric("Largest saving on this page", f"{best.saving:,.2f}x smaller",
                    help=f"{best.name}: {fmt_bytes(best.seq_bytes)} for the same sequence")
        st.caption(f"Largest saving: {best.name}, {fmt_bytes(best.seq_bytes)} instead of "
                   f"{fmt_bytes(own.seq_bytes)}. Every row below says what it trades for it.")
unit = "GiB" if own.seq_bytes >= 2**30 else "MiB" if own.seq_bytes >= 2**20 else "KiB"
st.plotly_chart(techniques_figure(rows, unit), width="stretch", key="t_fig")

table = []
for r in rows:
    if r.key == "own":
        saving = "reference"
    elif r.saving >= 1:
        saving = f"{r.saving:,.2f}x smaller"
    else:
        saving = f"{1 / r.saving:,.2f}x larger"
    table.append({"technique": r.name, "shrinks": r.term,
                  "per token": fmt_bytes(r.bytes_per_token),
                  f"one sequence of {context:,}": fmt_bytes(r.seq_bytes), "saving": saving,
                  "trade-off": r.tradeoff + ("" if r.applies else " (this model already does "
                                             "this, or it changes nothing here)")})
st.table(table, border="horizontal", hide_index=True)
with st.expander("How these numbers are computed", icon=":material/function:"):
    r = kv_cache(sel.spec, context, kv_dtype=sel.kv_dtype)
    common.formula(
        f"as configured, per token = {r.per_token_formula()}\n"
        f"one sequence             = sum over layers of bytes/token x tokens kept = "
        f"{own.seq_bytes:,} B\n"
        f"MHA / MQA                = the same with every layer's K/V heads set to the query "
        f"heads / to 1\n"
        f"MLA-style                = ({rank} + {rope}) x bytes per element per layer and token\n"
        f"FP8, INT8 / INT4         = 1 / 0.5 byte per element instead of "
        f"{get_dtype(sel.kv_dtype).bytes_per_element:g}\n"
        f"sliding window, offload  = each layer keeps at most {window:,} / {gpu_tokens:,} tokens "
        f"on the GPU\n"
        f"saving                   = bytes as configured / bytes with the technique")
st.caption(f"Per token: one token in every K/V layer. One sequence: what the GPU holds at "
           f"{context:,} tokens ({own.seq_bytes:,} bytes as configured). KiB/MiB/GiB are "
           "powers of 2. Techniques combine: FP8 on top of GQA halves the GQA figure again.")
