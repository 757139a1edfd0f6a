import math

import streamlit as st

from kvcalc.core.speculative import MAX_SPECULATIVE_TOKENS, Speculation, with_speculation
from kvcalc.core.units import GiB
from kvcalc.engines import budget as defaults
from kvcalc.engines import vllm
from webui import common
from webui.common import number, select, slider
from webui.prose import prose

T = prose("vllm_startup")
MODES = {"predict": "Predict the lines", "explain": "Explain a pasted log"}


def _said(value) -> str:
    """A fact's value in words: a set sorted (its printed order changes from run to run)."""
    if isinstance(value, frozenset):
        return "{" + ", ".join(sorted(value)) + "}"
    return str(value)


@common.page_body
def page() -> None:
    sel = common.require_selection()
    top = common.page_header("vLLM start-up: the capacity lines", sel, T("lead"))

    mode = (
        select(st.segmented_control, "Mode", list(MODES), "u_mode", MODES.get, default="predict")
        or "predict"
    )

    version = select(
        st.selectbox,
        "vLLM version",
        vllm.version_choices(),
        "u_ver",
        help="The rules that changed between releases, on both sides of each change: "
        + "; ".join(
            f"{f.what}: "
            + ", ".join(f"{_said(v)} from {'.'.join(map(str, since))}" for since, v, _ in f.steps)
            for f in vllm.VERSION_FACTS.values()
        ),
    )
    c = st.columns(4)
    max_len = number(
        c[0],
        "max_model_len (tokens)",
        1,
        10_000_000,
        min(sel.spec.max_context, 32768),
        1024,
        "u_len",
    )
    block = select(c[1].selectbox, "block_size", [8, 16, 32, 64, 128], "u_block", index=1)
    mnbt = number(
        c[2],
        "max_num_batched_tokens",
        1,
        1_000_000,
        vllm.default_max_num_batched_tokens(version, sel.gpu.memory_bytes, sel.gpu.name),
        1024,
        "u_mnbt",
        help=T("mnbt"),
    )
    DRAFTERS = {
        "none": "None",
        "mtp": "MTP (the model's own layers)",
        "eagle": "EAGLE head (1 layer)",
    }
    drafter = (
        select(
            c[3].selectbox,
            "Speculative decoding",
            list(DRAFTERS),
            "u_spec",
            DRAFTERS.get,
            help=T("spec_help"),
        )
        or "none"
    )
    spec = sel.spec
    if drafter != "none":
        ahead = number(c[3], "num_speculative_tokens", 1, MAX_SPECULATIVE_TOKENS, 2, 1, "u_spec_k")
        try:
            spec = with_speculation(sel.spec, Speculation(method=drafter, tokens=int(ahead)))
        except ValueError as exc:
            common.stop_on_error(exc)
    dep = sel.deployment.but(
        spec=spec, block_size=block, max_num_batched_tokens=mnbt, version=version
    )

    if mode == "predict":
        c = st.columns(4)
        util = slider(
            c[0],
            "gpu_memory_utilization",
            0.05,
            1.0,
            float(vllm.fact(vllm.Facts.gpu_memory_utilization, version)),
            0.01,
            "u_util",
            help=f"vLLM {version}'s default shown first",
        )
        act = number(
            c[1],
            "Activation peak (GiB)",
            0.0,
            512.0,
            defaults.DEFAULT_ACTIVATION_BYTES / GiB,
            0.25,
            "u_act",
            help="peak of vLLM's profiling run",
        )
        non_torch = number(
            c[2],
            "Non-torch memory (GiB)",
            0.0,
            64.0,
            defaults.DEFAULT_NON_TORCH_BYTES / GiB,
            0.25,
            "u_nontorch",
            help="CUDA context, NCCL, cuBLAS workspaces",
        )
        graphs = number(
            c[3],
            "CUDA-graph memory (GiB)",
            0.0,
            64.0,
            defaults.DEFAULT_CUDA_GRAPH_BYTES / GiB,
            0.25,
            "u_graphs",
            help="subtracted by versions that profile it before sizing",
        )
        try:
            est = vllm.available_bytes(
                total_bytes=sel.gpu.memory_bytes,
                gpu_mem_util=util,
                weights_bytes=math.ceil(sel.weights.bytes / sel.num_gpus),
                activation_bytes=round(act * GiB),
                non_torch_bytes=round(non_torch * GiB),
                cuda_graph_bytes=round(graphs * GiB),
            )
        except ValueError as exc:
            common.stop_on_error(exc)
        st.caption(
            f"Estimate: ceil({sel.gpu.memory_bytes / GiB:.2f} GiB x {util:g}) - weights "
            f"{sel.weights.bytes / sel.num_gpus / GiB:.2f} GiB - activations {act:g} - "
            f"non-torch {non_torch:g} - graphs {graphs:g} = {est / GiB:.2f} GiB. Type the "
            "figure from your own log below to use it instead."
        )
        gib = number(
            st,
            "Available KV cache memory per GPU (GiB; 0 = the estimate above)",
            0.0,
            4096.0,
            0.0,
            0.5,
            "u_gib",
            help=T("gib"),
        )
        avail = max(0, est) if gib == 0 else round(gib * GiB)
        try:
            p = vllm.predict(dep, avail, max_len)
        except ValueError as exc:
            common.stop_on_error(exc)
        with top:  # the answer first: on a phone it is on the first screen
            st.markdown("**vLLM will print**")
            # vLLM prints the memory rounded to 0.01 GiB; every figure below uses the exact bytes.
            common.formula(
                f"Available KV cache memory: {avail / GiB:.2f} GiB\n"
                + (
                    p.block_size_line + "\n"
                    if p.block_size_line
                    else f"Setting attention block size to {p.block_size} tokens ...\n"
                    if p.block_size != p.requested_block_size
                    else ""
                )
                + "\n".join(p.capacity_lines())
            )
        m = st.columns(4)
        m[0].metric("Blocks", f"{p.num_blocks:,}", help=f"{p.block_size} tokens each")
        m[1].metric("Groups x layers", f"{len(p.groups)} x {p.group_size}")
        m[2].metric("Blocks per request", f"{p.blocks_per_request:,}")
        m[3].metric("Padding layers", p.padding_layers)
        for note in p.notes:
            st.info(note)
        with st.expander("How vLLM gets there", icon=":material/function:"):
            common.formula(
                f"page (one block, one layer) = {p.page_bytes:,} B\n"
                f"num_blocks = {p.available_bytes:,} // {p.page_bytes:,} // {p.group_size} = "
                f"{p.num_blocks:,}\n"
                f"blocks per request = "
                + " + ".join(f"{g.blocks_per_request:,} ({g.kind})" for g in p.groups)
                + f" = {p.blocks_per_request:,}\n"
                f"max concurrency = {p.num_blocks:,} / {p.blocks_per_request:,} = "
                f"{p.max_concurrency:.4f}\n"
                f"GPU KV cache size = {p.tokens_formula} = {p.kv_cache_tokens:,}"
            )
            common.table(
                [
                    {
                        "group": i + 1,
                        "kind": g.kind,
                        "layers": g.layers,
                        "padding": g.padding,
                        "blocks per request": f"{g.blocks_per_request:,}",
                    }
                    for i, g in enumerate(p.groups)
                ],
                border="horizontal",
                hide_index=True,
            )
    else:
        text = st.text_area(T("paste_vllm_s"), height=180, max_chars=200_000, key="u_log")
        if not text.strip():
            st.info("Paste a log to check it against the prediction for the model in the sidebar.")
            common.stop()
        try:
            log = vllm.parse_log(text)
            p, lines = vllm.explain_log(spec, log)
        except ValueError as exc:
            common.stop_on_error(exc)
        if log.get("model"):
            st.caption(
                f"The log's model: {common.plain(log['model'])}. Predicted for the sidebar's "
                f"model, {common.plain(sel.label)}: pick the matching one there."
            )
        for line in lines:
            (st.success if line.agrees else st.error)(T("logged_predicted_range", line=line))


page()
