"""vLLM's start-up capacity lines ("GPU KV cache size: T tokens", "Maximum concurrency for N
tokens per request: C x"), predicted exactly as vLLM V1 computes them, and a reader for a pasted
start-up log. The steps and the package's modules, in import order: docs/vllm.md#the-start-up-lines.
Callers import from ``kvcalc.engines.vllm``: this module names the public interface."""

from __future__ import annotations

from .capacity import available_bytes, estimate_max_model_len, predict, startup_error
from .facts import NEWEST, VERSION_FACTS, Facts, fact, version_choices
from .kv_cache import MAMBA_DTYPE_CHOICES, kv_cache_dtype_modelled, kv_cache_dtypes, state_dtypes
from .log import MAX_LOG_BYTES, diagnose_log, explain_log, log_settings, parse_log
from .settings import (
    DEFAULT_BLOCK_SIZE,
    USAGE_CONTEXTS,
    default_max_num_batched_tokens,
    default_max_num_seqs,
    mamba_cache_mode_of,
    mm_batch_floor,
)

__all__ = [
    "predict",
    "available_bytes",
    "parse_log",
    "explain_log",
    "VERSION_FACTS",
    "NEWEST",
    "fact",
    "Facts",
    "default_max_num_seqs",
    "estimate_max_model_len",
    "startup_error",
    "kv_cache_dtypes",
    "default_max_num_batched_tokens",
    "state_dtypes",
    "mamba_cache_mode_of",
    "mm_batch_floor",
    "diagnose_log",
    "log_settings",
    "kv_cache_dtype_modelled",
    "MAMBA_DTYPE_CHOICES",
    "USAGE_CONTEXTS",
    "DEFAULT_BLOCK_SIZE",
    "version_choices",
    "MAX_LOG_BYTES",
]
