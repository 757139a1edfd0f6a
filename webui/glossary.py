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
    "TPOT": "Time per output token: one decode step, as each user sees it.",
    "MFU": "Model FLOPs utilization: the share of the GPU's peak arithmetic a prefill achieves.",
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
                                  "proposes several tokens; one step of the model checks them "
                                  "all against a single read of the cache.",
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


def markdown() -> str:
    return "\n".join(f"- **{term}**: {text}" for term, text in TERMS.items())
