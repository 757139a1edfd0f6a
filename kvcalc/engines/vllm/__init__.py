"""vLLM's start-up capacity lines, predicted exactly, and a reader for a pasted start-up log.

vLLM V1 turns the memory it found for the cache into blocks and prints "GPU KV cache size: T
tokens" and "Maximum concurrency for N tokens per request: C x". This package follows its
arithmetic (vllm/v1/core/kv_cache_utils.py) step by step: a page per layer, layers grouped and
padded, num_blocks = available // page // group_size, the blocks one request needs per group.
The modules, each importing only those before it: ``facts`` (the versioned release table),
``formats``, ``defaults``, ``grouping``, ``steps``, ``capacity`` (``predict``), ``startup``,
``log``. The steps in full: docs/vllm.md#the-start-up-lines.

This module names the package's public interface: callers import from ``kvcalc.engines.vllm``.
"""

from __future__ import annotations

from .capacity import Group, VllmPrediction, predict
from .defaults import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    USAGE_CONTEXTS,
    default_max_num_batched_tokens,
    default_max_num_seqs,
    mm_batch_floor,
)
from .facts import NEWEST, VERSION_FACTS, fact, resolve_version
from .formats import (
    MAMBA_DTYPE_CHOICES,
    StateDtypes,
    kv_cache_dtype_modelled,
    kv_cache_dtypes,
    mamba_cache_mode_of,
    model_dtype_of,
    state_dtypes,
    version_choices,
)
from .grouping import KVCacheGrouping, KVCacheGroupSpec
from .log import MAX_LOG_BYTES, LogLine, diagnose_log, explain_log, log_settings, parse_log
from .startup import available_bytes, estimate_max_model_len, startup_error

__all__ = [
    "VllmPrediction",
    "predict",
    "available_bytes",
    "parse_log",
    "explain_log",
    "LogLine",
    "DEFAULT_MAX_NUM_BATCHED_TOKENS",
    "VERSION_FACTS",
    "NEWEST",
    "fact",
    "default_max_num_seqs",
    "estimate_max_model_len",
    "startup_error",
    "kv_cache_dtypes",
    "default_max_num_batched_tokens",
    "state_dtypes",
    "StateDtypes",
    "mamba_cache_mode_of",
    "mm_batch_floor",
    "diagnose_log",
    "log_settings",
    "kv_cache_dtype_modelled",
    "model_dtype_of",
    "MAMBA_DTYPE_CHOICES",
    "USAGE_CONTEXTS",
    "DEFAULT_BLOCK_SIZE",
    "KVCacheGroupSpec",
    "KVCacheGrouping",
    "Group",
    "resolve_version",
    "version_choices",
    "MAX_LOG_BYTES",
]
