"""The glossary every page reaches from the sidebar: each acronym the app uses, spelled out once
and explained in a sentence. Plain text of our own; no numbers, so nothing here can go stale."""

from __future__ import annotations

TERMS: dict[str, str] = {
    "KV cache": "The keys (K) and values (V) of every earlier token, kept in GPU memory so each "
    "new token reads them instead of recomputing them.",
    "MHA": "Multi-head attention: every query head has its own K and V head. The largest cache.",
    "GQA": "Grouped-query attention: several query heads share one K/V head, so the cache shrinks "
    "by the group size.",
    "MQA": "Multi-query attention: all query heads share a single K/V head.",
    "MLA": "Multi-head latent attention (DeepSeek): one compressed latent vector per token and "
    "layer is cached instead of K and V.",
    "RoPE": "Rotary position embedding: positions enter by rotating queries and keys; MLA keeps a "
    "small RoPE key beside its latent.",
    "TTFT": "Time to first token: the prefill of the prompt, until the first new token appears.",
    "TPOT": "Time per output token, as benchmarks report it: (time of the last token - time "
    "of the first) / (output tokens - 1) for one request. It counts every step that "
    "request waited through, other users' prefill chunks included, so it is at least "
    "one decode step and often more.",
    "ITL": "Inter-token latency: the gap between two consecutive tokens of one request. Its "
    "mean equals TPOT; its p99 shows the stalls a user feels.",
    "p50 / p99": "The median and the 99th percentile of a latency over all requests: half of "
    "them are faster than p50, and 1 in 100 is slower than p99.",
    "Continuous batching": "The engine adds and removes requests between decode steps, so a "
    "finished request's place goes at once to a waiting one.",
    "Chunked prefill": "A long prompt is prefilled a chunk at a time, mixed into decode steps, "
    "so running users keep getting tokens while it is read.",
    "Preemption": "When the cache pool runs out mid-run, the engine evicts a running request's "
    "blocks and later recomputes them: the request starts over from its prompt.",
    "max_num_seqs": "vLLM's cap on how many requests run in one step, whatever the pool holds.",
    "max_num_batched_tokens": "vLLM's cap on the tokens one step processes (prefill chunks "
    "plus one per decoding request).",
    "Closed loop": "A load test where each user sends the next request only after the last one "
    "has finished: the number of users, not an arrival rate, sets the load.",
    "MFU": "Model FLOPs utilization: the share of the GPU's peak arithmetic a prefill achieves.",
    "Ideal bound": "The chapter's speed: every byte read at the GPU's full bandwidth and every "
    "FLOP done at its full dense peak, nothing else. No real engine is faster.",
    "Calibrated estimate": "The Engineer pages' second speed. It adds what published benchmarks "
    "of real engines show: a share of the bandwidth, a fixed cost per step, the matrix multiplies' "
    "MFU, tensor-parallel all-reduces and the serving stack's time per request.",
    "SLO": "Service-level objective: the latency a deployment promises, here a p99 TTFT and a "
    "p99 TPOT that every run must stay within.",
    "All-reduce": "Under tensor parallelism every GPU holds part of each layer's result; an "
    "all-reduce sums them across the GPUs, twice per layer.",
    "FLOPS": "Floating-point operations per second (TFLOPS: 10^12 of them).",
    "GEMM": "General matrix multiply: the weights' matrix multiplications, most of a model's "
    "FLOPs. They run in the weights' number format.",
    "Ridge point": "Peak FLOPS / memory bandwidth: work doing fewer FLOPs per byte than this "
    "waits for memory, work doing more waits for arithmetic.",
    "TP": "Tensor parallelism: each layer's heads and matrices split over several GPUs.",
    "PP": "Pipeline parallelism: the layers split into stages, one stage per GPU.",
    "MoE": "Mixture of experts: each token runs through a few of many expert MLPs.",
    "BF16 / FP16": "16-bit floating-point formats: 2 bytes per number.",
    "FP32": "32-bit floating point: 4 bytes per number. GPUs compute it on their general units, "
    "many times slower than 16-bit on their tensor cores.",
    "Speculative decoding / MTP": "A draft (a small model, or multi-token prediction heads) "
    "proposes several tokens; one step of the model checks them all against a single read of the "
    "cache.",
    "FP8": "8-bit floating point: 1 byte per number, half of BF16.",
    "INT8 / INT4": "8- and 4-bit integer codes, decoded with scales that are stored beside them.",
    "GiB vs GB": "GiB = 2^30 bytes (memory and cache sizes); GB = 10^9 bytes (bandwidth in GB/s, "
    "spec-sheet sizes).",
    "Block / page": "The fixed number of tokens (16 by default in vLLM) the engine allocates cache "
    "in; PagedAttention reads a sequence's blocks through its block table.",
    "Prefill / decode": "Prefill processes the whole prompt in one pass; decode then adds one "
    "token per step, reading all weights and the whole cache each time.",
    "HBM": "High-bandwidth memory: the GPU's own memory, where weights and cache live.",
}


# Terms of the engine-aware estimate: the Learn pages teach the chapter's formula alone and
# their glossary leaves these out (issue 37).
ENGINEER_ONLY = ("Calibrated estimate",)


def markdown(learn: bool = False) -> str:
    """The glossary as a Markdown list; ``learn``: without the Engineer pages' own terms."""
    return "\n".join(
        f"- **{term}**: {text}"
        for term, text in TERMS.items()
        if not (learn and term in ENGINEER_ONLY)
    )
