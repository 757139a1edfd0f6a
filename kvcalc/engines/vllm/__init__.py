"""vLLM's start-up capacity lines, predicted exactly, and a reader for a pasted start-up log.

vLLM V1 turns the memory it found for the cache ("Available KV cache memory: X GiB") into
blocks and prints two lines:

    GPU KV cache size: T tokens
    Maximum concurrency for N tokens per request: C x

This module follows vLLM's own arithmetic (vllm/v1/core/kv_cache_utils.py and the hybrid
model config), step by step:

1. One spec per attention layer on this GPU: page = block_size x per-layer bytes/token, with
   max(1, kv_heads // tp) heads; an MLA layer holds one latent (kv_lora_rank + rope) whole on
   every rank. A recurrent (Mamba / Gated DeltaNet) layer's page is its whole state, the conv
   part in --mamba-cache-dtype and the SSM part in --mamba-ssm-cache-dtype (state_dtypes()
   reads a config's own choice), and the attention block size is raised to the smallest
   multiple of 16 tokens whose page is at least the state page, which is then padded to it.
2. Layers of one type and size form groups of equal size: the group size is the fewest layers
   of any type (or the most, when the counts differ by less than 25%); a type whose count does
   not divide gets padding layers.
3. num_blocks = available // page // group_size; every group draws from that one pool.
4. Blocks one request of max_model_len needs, per group: full attention cdiv(N, block);
   sliding window cdiv(min(W - 1 + max_num_batched_tokens, N), block) + 1; recurrent 1, or
   2 with prefix caching on (mamba_cache_mode 'align', the default for hybrids from 0.28.0).
   Concurrency = num_blocks / their sum.
5. Tokens line: num_blocks // groups x block_size (older versions) or int(concurrency x N)
   (newer ones, which count what windows and states really hold).
With pipeline parallelism each stage does this for its layers and the smallest pool binds.

The package, one module a job (each imports only those before it):

- ``facts``: the versioned table of release facts and ``fact(name, version)``;
- ``formats``: --kv-cache-dtype by release, recurrent-state dtypes, the Mamba cache mode, one
  token's bytes in one layer;
- ``defaults``: block size, an MLA model's block size, max_num_seqs and max_num_batched_tokens;
- ``grouping``: the KV-cache groups (typed: KVCacheGroupSpec, KVCacheGrouping);
- ``steps``: predict()'s steps: the engine settings, the layers per GPU and stage, the binding
  stage, the conventions said in the notes;
- ``capacity``: predict() (steps 1-5 above) and its result;
- ``startup``: estimate_max_model_len, startup_error, available_bytes;
- ``log``: a pasted start-up log, read and checked line by line.

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
