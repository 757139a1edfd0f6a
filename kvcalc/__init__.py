"""kvcalc: exact KV-cache arithmetic for large language models.

Pure Python (standard library + PyYAML). Importing it never imports streamlit, plotly, pandas
or torch; the chart builders (kvcalc.charts) and the live measurement (kvcalc.live) are
imported only by the pages that need them.

Where things are:
    hfconfig   config.json fields -> ModelSpec (layers by kind, parameter counts)
    model      the layer kinds and ModelSpec
    dtypes     number formats (bits per element)
    kv         KV bytes per layer, per token, per sequence, per batch; TP/PP split
    weights    weight bytes, and what one decode step reads of them (MoE aware)
    budget     GPU memory budget, blocks, max concurrency (vLLM / TensorRT-LLM semantics)
    roofline   decode step time, crossover context, prefill time, cache vs recompute
    registry   models.yaml: models and GPUs
    cli        python -m kvcalc
"""

from .budget import DEFAULT_RESERVE_BYTES, Budget, budget
from .dtypes import KV_DTYPES, WEIGHT_DTYPES, get_dtype
from .hfconfig import load_config_file, parse_config_text, spec_from_config
from .kv import KVCache, kv_cache, layer_bytes_per_token, pp_partition
from .model import ModelSpec
from .registry import GPU, RegistryModel, get_gpu, get_model, load_registry, registry
from .roofline import (crossover_context, offload_vs_recompute, prefill, step_time,
                       token_passes)
from .units import GB, GiB, KiB, MiB
from .weights import Weights, weights

__all__ = [
    "Budget", "budget", "DEFAULT_RESERVE_BYTES", "KV_DTYPES", "WEIGHT_DTYPES", "get_dtype",
    "load_config_file", "parse_config_text", "spec_from_config", "KVCache", "kv_cache",
    "layer_bytes_per_token", "pp_partition", "ModelSpec", "GPU", "RegistryModel", "get_gpu",
    "get_model", "load_registry", "registry", "crossover_context", "offload_vs_recompute",
    "prefill", "step_time", "token_passes", "GB", "GiB", "KiB", "MiB", "Weights", "weights",
]
