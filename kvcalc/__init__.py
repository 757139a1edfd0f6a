"""kvcalc: exact KV-cache arithmetic for large language models.

Pure Python (standard library + PyYAML): importing it never imports streamlit, plotly, pandas
or torch (webui.figures and kvcalc.measure hold those, imported only where needed).

The subpackages are layers, imports pointing down (tests/test_layers.py checks it):
core <- cache <- config <- engines <- perf <- teach <- cli; measure uses core, cache, config.
What each holds, and a first path through the code: docs/design.md#the-map.

The names below are the public surface: ``from kvcalc import budget, kv_cache, ...``. The
subpackages export nothing under a module's name, so ``kvcalc.engines.budget`` is always the
module and ``kvcalc.budget`` the function.
"""

from .cache.deployment import CacheFormat, Deployment, EngineArgs
from .cache.kv import KVCache, kv_cache, layer_bytes_per_token, pp_partition
from .cache.weight_bytes import Weights, weights
from .config.catalog import RegistryModel, get_gpu, get_model, load_registry, registry
from .config.hfconfig import load_config_file, parse_config_text, spec_from_config
from .core.dtypes import KV_DTYPES, WEIGHT_DTYPES, get_dtype
from .core.gpu import GPU
from .core.model import ModelSpec
from .core.units import GB, GiB, KiB, MiB
from .engines.budget import DEFAULT_GPU_MEM_UTIL, DEFAULT_RESERVE_BYTES, Budget, budget
from .perf.roofline import crossover_context, offload_vs_recompute, prefill, step_time, token_passes

# The public names: what a deployment is (Deployment and its parts), the model and GPU it runs,
# and the functions that size and time it.
__all__ = [
    "Deployment",
    "CacheFormat",
    "EngineArgs",
    "Budget",
    "budget",
    "DEFAULT_RESERVE_BYTES",
    "DEFAULT_GPU_MEM_UTIL",
    "KV_DTYPES",
    "WEIGHT_DTYPES",
    "get_dtype",
    "load_config_file",
    "parse_config_text",
    "spec_from_config",
    "KVCache",
    "kv_cache",
    "layer_bytes_per_token",
    "pp_partition",
    "ModelSpec",
    "GPU",
    "RegistryModel",
    "get_gpu",
    "get_model",
    "load_registry",
    "registry",
    "crossover_context",
    "offload_vs_recompute",
    "prefill",
    "step_time",
    "token_passes",
    "GB",
    "GiB",
    "KiB",
    "MiB",
    "Weights",
    "weights",
]
