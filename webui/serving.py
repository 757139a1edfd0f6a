"""The serving simulator for the pages: setups built from the sidebar's selection, one change
applied for an overlay, and frontier sweeps cached per input (kvcalc.sim does the work)."""

from __future__ import annotations

import streamlit as st

from kvcalc.catalog import GPU, registry
from kvcalc.sim import SimResult, Workload, estimated_steps, fixed, setup, simulate

MAX_STEPS = 100_000  # per curve: about half a second of simulation on one core
USERS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
OVERLAYS = {
    "none": "nothing",
    "fp8": "FP8 KV cache",
    "mha": "MHA: one K/V head per query head",
    "prefix": "a shared system prompt (half of each prompt) with prefix caching",
    "tp2": "tensor parallel 2",
    "gpu": "a larger GPU",
}


def overlay_label(key: str) -> str:
    return OVERLAYS.get(key, str(key))


def larger_gpu(gpu: GPU) -> GPU:
    """The registry GPU with the next larger memory (the largest one stays itself)."""
    bigger = sorted((g for g in registry().gpus.values() if g.memory_bytes > gpu.memory_bytes
                     and g.bf16_tflops), key=lambda g: g.memory_bytes)
    return bigger[0] if bigger else gpu


def requests_for(users: int) -> int:
    """Requests simulated for one point: every user sends about four (at least 8 in all; with
    fixed lengths a single user's requests are all alike)."""
    return min(4096, max(8, 4 * users))


# Results are frozen dataclasses: shared between sessions without a copy (cache_data would
# unpickle eleven runs with their series on every rerun).
@st.cache_resource(max_entries=24, show_spinner="Simulating the serving engine...")
def frontier(spec, w, gpu: GPU, kv_dtype: str, tp: int, bw_share: float, prompt: int,
             output: int, share: float, max_num_seqs: int | None,
             users: tuple[int, ...] = USERS) -> list[SimResult]:
    """One simulation per concurrency (closed loop of ``users``)."""
    s = setup(spec, w, total_bytes=gpu.memory_bytes, bandwidth_gbs=gpu.bandwidth_gbs,
              peak_tflops=gpu.peak_tflops(w.dtype), max_model_len=prompt + output,
              kv_dtype=kv_dtype, tp=tp, bw_share=bw_share, max_num_seqs=max_num_seqs,
              gpu_name=gpu.name)
    loads = [Workload(requests=requests_for(u), prompt=fixed(prompt, "prompt tokens"),
                      output=fixed(output, "output tokens"), users=u, prefix_share=share,
                      seed=0) for u in users]
    steps = sum(estimated_steps(s, wl) for wl in loads)
    if steps > MAX_STEPS:
        raise ValueError(f"This sweep would simulate about {steps:,} engine steps, more than the "
                         f"{MAX_STEPS:,} a page may ask for (several seconds of work). Shorten "
                         "the output or the prompt, or pick a setup whose pool holds more "
                         "requests.")
    return [simulate(s, wl) for wl in loads]
