import threading

import streamlit as st

from kvcalc.core.units import fmt_bytes
from kvcalc.measure import kv_variants, quality
from webui import common, device_queue, shared
from webui.common import bound, number
from webui.figures import quality_figure
from webui.hosted import hosted
from webui.prose import prose

T = prose("kv_quality")

common.page_header("Measured: what shrinking the cache costs", None, T("lead"))

# Without torch or the weights the page can still show a committed measurement; it says what
# measuring here needs instead of stopping.
live_missing = common.live_missing() or common.smollm2_missing()

CAPS = {"tokens": 1024, "default": 512} if hosted() else {"tokens": 4096, "default": 2048}
c = st.columns(3)
tokens = number(
    c[0],
    "Tokens of text",
    quality.MIN_TOKENS,
    CAPS["tokens"],
    CAPS["default"],
    256,
    "q_tokens",
    help="Python's own documentation (pydoc_data.topics), tokenized by SmolLM2's tokenizer",
)
window = number(
    c[1], "Window W (tokens)", 1, CAPS["tokens"], min(256, CAPS["default"] // 2), 64, "q_window"
)
extra = c[2].multiselect(
    "Also measure",
    list(kv_variants.EXTRA_VARIANTS),
    [],
    help="fp16 / bf16: 16-bit round trips; h2o-W: heavy-hitter eviction with the same budget W",
    **bound("q_extra", "list"),
)
names = list(quality.VARIANTS) + list(extra)
try:
    tokens, window, chunk, variants = quality.check_inputs(
        quality.MODEL_KEY, tokens, window, quality.CHUNK, names
    )
except ValueError as exc:
    common.stop_on_error(exc)


# Measured rows, per (tokens, window, variant), shared by every session of this server: a
# module global, so a client's clear_cache cannot empty it (webui/shared.py).
store = shared.QUALITY_ROWS
key = lambda v: (tokens, window, v.name)  # noqa: E731
missing = [v for v in variants if key(v) not in store]
queue = device_queue.QUEUE
# A committed run of `python -m kvcalc quality` for these settings (kvcalc/results/): shown
# while this server has not measured them, so the first table needs no model work.
committed = quality.committed_result(tokens, window)
if live_missing is not None:
    st.error(live_missing)
    if committed is None:
        common.stop()
else:
    st.caption(T("jobs", cap_s=queue.run_cap_s()))
if (
    live_missing is None
    and missing
    and st.button(
        f"Measure {len(missing)} variant{'s' if len(missing) > 1 else ''}",
        type="primary",
        icon=":material/play_arrow:",
    )
):
    bar = st.progress(0.0, "Starting...")
    state = {"done": 0, "total": 1, "what": ""}
    lock = threading.Lock()

    def progress(done, total, what):
        with lock:
            state.update(done=done, total=total, what=what)

    def show():
        with lock:
            f = state["done"] / max(1, state["total"])
            name, what = missing[i].name, state["what"]
            now = (
                ""
                if what in ("", name)
                else " (first the exact cache it is compared with)"
                if what == "exact"
                else f" ({what})"
            )
            bar.progress(
                min(1.0, (i + f) / len(missing)), f"Variant {i + 1} of {len(missing)}: {name}{now}"
            )
        st.session_state.get("q_extra")  # where Streamlit raises Stop or Rerun

    try:
        for i, v in enumerate(missing):  # noqa: B007 (i is read by the progress callback above)
            state.update(done=0, total=1, what=v.name)

            def job(should_stop, v=v):
                return quality.evaluate(
                    tokens=tokens,
                    window=window,
                    variants=[v.name],
                    should_stop=should_stop,
                    progress=progress,
                )

            table = device_queue.run_here(job, checkpoint=show)
            for r in table.rows:
                store[(tokens, window, r.variant)] = r
            store[("source", tokens)] = table.text_source
    except ValueError as exc:
        common.stop_on_error(exc)
    bar.empty()
    missing = [v for v in variants if key(v) not in store]

rows = [store[key(v)] for v in variants if key(v) in store]
source = store.get(("source", tokens), "pydoc_data.topics")
n_here = len(rows)
if missing and committed is not None:
    by_name = {r.variant: r for r in committed["table"].rows}
    rows = [by_name[v.name] for v in variants if v.name in by_name]
    source = committed["table"].text_source
    m = committed["machine"]
    absent = [v.name for v in variants if v.name not in by_name]
    st.info(
        f"**Measured earlier, not on this server**: `{committed['command']}` at commit "
        f"`{(committed['commit'] or 'unknown')[:12]}`"
        + (" (with uncommitted changes)" if committed["uncommitted_changes"] else "")
        + f", {committed['date']}, on {m['cpu']} ({m['cores']} cores, {m['cpu_capability']}, "
        f"{m['threads']} thread{'s' if m['threads'] != 1 else ''}, torch {m['torch']}, "
        f"transformers {m['transformers']}, Python {m['python']}), in {committed['seconds']:.0f} s."
        + (f" Not in it: {', '.join(absent)}." if absent else "")
        + (
            f" Press Measure to run the {len(missing)} variant{'s' if len(missing) > 1 else ''}"
            f" on {tokens:,} tokens here."
            if live_missing is None
            else ""
        ),
        icon=":material/history:",
    )
    if n_here:
        st.caption(T("measured_server_so", n_here=n_here, n_variants=len(variants)))
elif not rows or "exact" not in [r.variant for r in rows]:
    st.info(f"Press Measure to run the {len(variants)} variants on {tokens:,} tokens.")
    rows = []
if rows:
    exact = next(r for r in rows if r.variant == "exact")
    st.caption(f"Text: {source}.")
    table = [
        {
            "variant": r.variant,
            "what it stores": r.label,
            "cache at the end": fmt_bytes(r.kv_bytes),
            "smaller than exact (FP32)": f"{exact.kv_bytes / r.kv_bytes:.2f}x",
            "vs a 16-bit cache": (
                f"{exact.kv_bytes / 2 / r.kv_bytes:.2f}x smaller"
                if 2 * r.kv_bytes <= exact.kv_bytes
                else f"{2 * r.kv_bytes / exact.kv_bytes:.2f}x larger"
            ),
            "perplexity": f"{r.perplexity:.3f}",
            "vs exact": f"{100 * (r.perplexity / exact.perplexity - 1):+.2f}%",
            "next token as exact": f"{r.next_token_agreement:.1%}",
            "attention error": f"{r.attention_error:.4f}",
        }
        for r in rows
    ]
    st.table(table, border="horizontal", hide_index=True)
    if len(rows) > 1:
        st.plotly_chart(quality_figure(rows, exact.kv_bytes), width="stretch", key="q_fig")
    by = {r.variant: r for r in rows}
    findings = []
    t4, k4 = by.get("int4-token"), by.get("int4-kivi")
    if t4 and k4:
        better = "lower" if k4.perplexity < t4.perplexity else "higher"
        findings.append(
            f"At 4 bits, KIVI's layout (keys per channel, values per token, the newest 128 "
            f"tokens exact) gives perplexity {k4.perplexity:.3f}, {better} than one scale per "
            f"token ({t4.perplexity:.3f}), in {fmt_bytes(k4.kv_bytes)} against "
            f"{fmt_bytes(t4.kv_bytes)}. The two differ in more than the key grouping "
            "(KIVI is asymmetric and keeps a residual), so this compares the recipes."
        )
    w, s = by.get(f"window-{window}"), by.get(f"sink4-window-{window}")
    if w and s:
        verb = "rescue" if s.perplexity < w.perplexity else "do not rescue"
        findings.append(
            f"Past the window, the four sink tokens {verb} window attention here: perplexity "
            f"{s.perplexity:.3f} with them against {w.perplexity:.3f} without (exact: "
            f"{exact.perplexity:.3f}), for {(s.kv_bytes - w.kv_bytes):,} more bytes."
        )
    i8, i2 = by.get("int8-token"), by.get("int2-kivi")
    if i8:
        findings.append(T("int_one_scale", disagree=1 - i8.next_token_agreement))
        if i2:
            findings[-1] += (
                f"INT2 (KIVI) in {1 - i2.next_token_agreement:.1%}, with "
                f"{exact.kv_bytes / i2.kv_bytes:.2f}x fewer bytes than exact."
            )
    if findings:
        st.subheader("What we measured")
        for f in findings:
            st.markdown(f"- {f}")
    notes = [f"{r.variant}: {n}" for r in rows for n in r.notes]
    with st.expander("How it is measured", icon=":material/function:"):
        st.markdown(T("measures", chunk=chunk))
        for r in rows:
            st.caption(f"{r.variant}: {r.kv_bytes_derivation}")
        for n in notes:
            st.caption(n)

st.subheader("Beside the papers (larger models)")
st.markdown(T("literature"))
st.subheader("Where a 135M model differs from a 7B one")
st.markdown(T("small_model"))
