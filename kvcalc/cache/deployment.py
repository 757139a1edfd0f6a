"""One deployment, validated once here and taken by every entry point above: ``Deployment`` (a
model and its weights on tp x pp GPUs), its ``CacheFormat`` (--kv-cache-dtype and the state
formats) and ``EngineArgs`` (the engine arguments that change capacity, under vLLM's names)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..core.arith import cdiv
from ..core.dtypes import KV_DTYPES, STATE_DTYPES, DType, get_dtype
from ..core.gpu import GPU
from ..core.model import ModelSpec
from ..core.units import GiB, check_float, check_int, check_parallel
from .kv import KVCache, kv_cache
from .weight_bytes import Weights

# Memory a running engine needs besides weights and KV: kvcalc.engines.budget's activation,
# non-torch and CUDA-graph defaults (1 + 0.5 + 0.5 GiB), summed.
DEFAULT_RESERVE_BYTES = 2 * GiB
MAX_BLOCK_SIZE = 4096
MAX_BATCHED_TOKENS = 10**8
MAX_SEQS = 10**6
# vLLM's own --kv-cache-dtype names (its CacheDType Literal, vllm/config/cache.py), taken as a
# KV format too: kvcalc.engines.vllm says which release has each, and refuses by name those it
# does not model.
VLLM_KV_CACHE_DTYPES = (
    *("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla"),
    *("nvfp4_ds_mla", "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc"),
    *("turboquant_3bit_nc", "octave_k3v4", "octave_k3v3", "octave_k3v3_compact"),
    *("ultraquant_4bit", "int4_per_token_head", "int8_per_token_head", "fp8_per_token_head"),
    *("nvfp4", "nvfp4_4over6"),
)


@dataclass(frozen=True, kw_only=True)
class CacheFormat:
    """How the cache is stored: the KV format (kvcalc's name or vLLM's --kv-cache-dtype),
    per-token-head scales, and the recurrent states' formats (--mamba-cache-dtype for the
    conv state, --mamba-ssm-cache-dtype for the SSM state; 'auto' follows the model)."""

    kv_dtype: str = "bf16"
    scales: bool = False
    state_dtype: str = "bf16"  # the model's own format, which 'auto' states take
    mamba_cache_dtype: str = "auto"
    mamba_ssm_cache_dtype: str = "auto"

    def __post_init__(self) -> None:
        get_dtype(self.state_dtype, STATE_DTYPES)  # a clear error names the allowed formats

    @property
    def state(self) -> DType:
        return get_dtype(self.state_dtype, STATE_DTYPES)


@dataclass(frozen=True, kw_only=True)
class EngineArgs:
    """The engine arguments that change capacity, under vLLM's names (vllm/engine/arg_utils.py
    ``EngineArgs``); None is the version's own default, resolved by kvcalc.engines.vllm."""

    version: str | None = None  # a vLLM release, "0.18.0"; None: the newest kvcalc knows
    gpu_memory_utilization: float | None = None
    block_size: int = 16
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    # the most tokens one request's prefill chunk may take in a step (0: what the budget
    # leaves; vLLM's SchedulerConfig default 0)
    long_prefill_token_threshold: int = 0
    enable_prefix_caching: bool | None = None
    enable_chunked_prefill: bool = True
    mamba_cache_mode: str | None = None
    usage_context: str = "serve"  # "serve" or "llm" (the LLM class): defaults differ
    num_draft_layers: int = 0
    gdn_prefill_checkpoint: bool = False

    def __post_init__(self) -> None:
        if self.gpu_memory_utilization is not None:
            check_float("gpu_memory_utilization", self.gpu_memory_utilization, 0, 1, lo_open=True)
        check_int("block_size", self.block_size, 1, MAX_BLOCK_SIZE)
        if self.max_num_batched_tokens is not None:
            check_int("max_num_batched_tokens", self.max_num_batched_tokens, 1, MAX_BATCHED_TOKENS)
        if self.max_num_seqs is not None:
            check_int("max_num_seqs", self.max_num_seqs, 1, MAX_SEQS)
        check_int("long_prefill_token_threshold", self.long_prefill_token_threshold, 0, 10**7)
        check_int("num_draft_layers", self.num_draft_layers, 0, 64)
        if self.usage_context not in ("serve", "llm"):
            raise ValueError(f"usage_context is 'serve' or 'llm', not {self.usage_context!r}")


@dataclass(frozen=True, kw_only=True)
class Deployment:
    """A model on tp x pp GPUs: its weights, the GPU (or a memory size given by hand), the cache
    format and the engine's arguments. ``memory_bytes`` overrides the GPU's memory (a card
    given by its size only); ``weights_bytes`` the weights' (given by hand)."""

    spec: ModelSpec
    gpu: GPU | None = None
    weights: Weights | None = None
    tp: int = 1
    pp: int = 1
    cache: CacheFormat = field(default_factory=CacheFormat)
    engine: EngineArgs = field(default_factory=EngineArgs)
    memory_bytes: int | None = None
    weights_bytes: int | None = None
    reserve_bytes: int = DEFAULT_RESERVE_BYTES
    # attention data parallel ranks (each tp GPUs, its own requests' caches) and expert
    # parallel (whole experts per GPU, over at most tp x attention_dp GPUs)
    attention_dp: int = 1
    ep: int = 1

    def __post_init__(self) -> None:
        tp, pp = check_parallel(self.tp, self.pp)  # whole numbers: 2.0 is taken as 2
        object.__setattr__(self, "tp", tp)
        object.__setattr__(self, "pp", pp)
        if str(self.cache.kv_dtype).strip().lower() not in VLLM_KV_CACHE_DTYPES:
            get_dtype(self.cache.kv_dtype, KV_DTYPES)
        if self.memory_bytes is not None:
            check_int("GPU memory (bytes)", self.memory_bytes, 1, 2**50)
        if self.weights_bytes is not None:
            check_int("weight bytes", self.weights_bytes, 0, 2**60)
        check_int("reserve (bytes)", self.reserve_bytes, 0, 2**50)
        dp = check_int("attention data parallel size", self.attention_dp, 1, 64)
        object.__setattr__(self, "attention_dp", dp)
        object.__setattr__(self, "ep", check_int("expert parallel size", self.ep, 1, 512))
        if self.ep > 1 and self.spec.moe is None:
            raise ValueError(f"{self.spec.name} has no experts: expert parallel needs a MoE model")
        if self.ep > self.tp * self.attention_dp:
            raise ValueError(
                f"expert parallel {self.ep} spans more GPUs than the layout's "
                f"{self.tp * self.attention_dp} (tensor parallel x attention data parallel)"
            )

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp

    @property
    def total_bytes(self) -> int:
        """The memory of one GPU an engine sees."""
        if self.memory_bytes is not None:
            return self.memory_bytes
        if self.gpu is None:
            raise ValueError("no GPU and no memory size: give a GPU or its memory")
        return self.gpu.memory_bytes

    @property
    def gpu_name(self) -> str | None:
        return self.gpu.name if self.gpu else None

    @property
    def all_weights_bytes(self) -> int:
        """The whole model's weight bytes (each of the tp x pp GPUs holds a share)."""
        if self.weights_bytes is not None:
            return self.weights_bytes
        if self.weights is None:
            raise ValueError(f"{self.spec.name}: weight bytes unknown; give them by hand")
        return self.weights.bytes

    @property
    def rank_weights_bytes(self) -> int:
        """The weight bytes of one attention data parallel rank (its tp x pp GPUs): every
        weight but the routed experts, which the ranks split (1 / attention_dp of them); the
        whole model without attention data parallel or when the weights are given by hand."""
        w, every = self.weights, self.all_weights_bytes
        if self.attention_dp == 1 or self.weights_bytes is not None or w is None:
            return every
        return every - w.expert_bytes + cdiv(w.expert_bytes, self.attention_dp)

    @property
    def gpu_weights_bytes(self) -> int:
        """The weight bytes one GPU holds: its rank's over the rank's tp x pp GPUs."""
        return cdiv(self.rank_weights_bytes, self.num_gpus)

    def kv_cache(self, context: int, batch: int = 1) -> KVCache:
        """KV bytes of ``batch`` sequences of ``context`` tokens on one GPU."""
        return kv_cache(
            self.spec,
            context,
            batch,
            self.cache.kv_dtype,
            scales=self.cache.scales,
            state_dtype=self.cache.state_dtype,
            tp=self.tp,
            pp=self.pp,
        )

    def but(self, **changes: Any) -> Deployment:
        """This deployment with some fields changed (``cache``/``engine`` fields by name too:
        ``dep.but(kv_dtype="fp8", block_size=32)``), validated again."""
        parts: tuple[tuple[str, Any], ...] = (("cache", self.cache), ("engine", self.engine))
        for name, part in parts:
            mine = {k: changes.pop(k) for k in list(changes) if k in part.__dataclass_fields__}
            if mine:
                changes[name] = replace(part, **mine)
        return replace(self, **changes)
