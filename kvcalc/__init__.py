"""kvcalc: exact KV-cache arithmetic for large language models.

Pure Python (standard library + PyYAML). Importing it never imports streamlit, plotly, pandas
or torch; the chart builders live in webui.charts, and the live measurement (kvcalc.live) is
imported only by the pages that need them.

Where things are:
    hfconfig   config.json fields -> ModelSpec (layers by kind, parameter counts)
    model      the layer kinds and ModelSpec
    dtypes     number formats (bits per element)
    kv         KV bytes per layer, per token, per sequence, per batch; TP/PP split
    weight_bytes  weight bytes, and what one decode step reads of them (MoE aware)
    memory     the GPU memory budget: blocks, max concurrency (vLLM / TensorRT-LLM rules)
    roofline   decode step time, crossover context, prefill time, cache vs recompute
    catalog    kvcalc/models.yaml: models and GPUs
    cli        python -m kvcalc

No module shares its name with a function exported here (budget, registry, weights), so
``import kvcalc.memory`` is always the module.
"""

from .catalog import GPU, RegistryModel, get_gpu, get_model, load_registry, registry
from .dtypes import KV_DTYPES, WEIGHT_DTYPES, get_dtype
from .hfconfig import load_config_file, parse_config_text, spec_from_config
from .kv import KVCache, kv_cache, layer_bytes_per_token, pp_partition
from .memory import DEFAULT_GPU_MEM_UTIL, DEFAULT_RESERVE_BYTES, Budget, budget
from .model import ModelSpec
from .roofline import crossover_context, offload_vs_recompute, prefill, step_time, token_passes
from .units import GB, GiB, KiB, MiB
from .weight_bytes import Weights, weights

__all__ = [
    "Budget", "budget", "DEFAULT_RESERVE_BYTES", "DEFAULT_GPU_MEM_UTIL", "KV_DTYPES",
    "WEIGHT_DTYPES", "get_dtype",
    "load_config_file", "parse_config_text", "spec_from_config", "KVCache", "kv_cache",
    "layer_bytes_per_token", "pp_partition", "ModelSpec", "GPU", "RegistryModel", "get_gpu",
    "get_model", "load_registry", "registry", "crossover_context", "offload_vs_recompute",
    "prefill", "step_time", "token_passes", "GB", "GiB", "KiB", "MiB", "Weights", "weights",
]
