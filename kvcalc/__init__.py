"""kvcalc: exact KV-cache arithmetic for large language models.

Pure Python (standard library + PyYAML). Importing it never imports streamlit, plotly, pandas
or torch; the chart builders live in webui.figures, and the torch measurements (kvcalc.measure)
are imported only by the pages and commands that need them.

Where things are (imports point one way, down this list; tests/test_layers.py checks it):
    core      units, message text, number formats (dtypes), cdiv and bisection (arith), the
              layer kinds and ModelSpec (model)
    cache     KV bytes per layer, token, sequence, batch, TP/PP split (kv); weight bytes
    config    config.json fields -> ModelSpec (hfconfig, fields, families, family_readers,
              limits, params); the one safe file reader (files); the registry in models.yaml
              (catalog)
    engines   vLLM's own arithmetic (vllm); the GPU memory budget by convention (budget); a paged
              block pool and scheduler (paging)
    perf      roofline, intensity, calibration, sweeps, the serving simulator (sim), capacity
    teach     quiz, quiz_choices, tour, techniques, fill
    cli       python -m kvcalc: the command registry (commands) and its command groups
    measure   torch only, imported lazily; uses core, cache and config: the one torch runtime
              (runtime), twins, live, verify, zoo, param_check, quality, kv_variants, microscope,
              llama_forward

The names below are the public surface: ``from kvcalc import budget, kv_cache, ...``. The
subpackages export nothing under a module's name, so ``kvcalc.engines.budget`` is always the
module and ``kvcalc.budget`` the function.
"""

from .cache.kv import KVCache, kv_cache, layer_bytes_per_token, pp_partition
from .cache.weight_bytes import Weights, weights
from .config.catalog import GPU, RegistryModel, get_gpu, get_model, load_registry, registry
from .config.hfconfig import load_config_file, parse_config_text, spec_from_config
from .core.dtypes import KV_DTYPES, WEIGHT_DTYPES, get_dtype
from .core.model import ModelSpec
from .core.units import GB, GiB, KiB, MiB
from .engines.budget import DEFAULT_GPU_MEM_UTIL, DEFAULT_RESERVE_BYTES, Budget, budget
from .perf.roofline import crossover_context, offload_vs_recompute, prefill, step_time, token_passes

__all__ = [
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
