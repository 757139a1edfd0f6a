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
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any, NamedTuple

from ..cache.kv import pp_partition
from ..config.limits import MAX_CONTEXT
from ..core.arith import cdiv, last_true
from ..core.dtypes import DType, get_dtype
from ..core.model import FullAttention, Layer, MLALatent, ModelSpec, RecurrentState, counted
from ..core.units import GiB, check_int

__all__ = ["VllmPrediction", "predict", "available_bytes", "parse_log", "explain_log", "LogLine",
           "DEFAULT_MAX_NUM_BATCHED_TOKENS", "VERSION_FACTS", "NEWEST", "fact",
           "default_max_num_seqs", "estimate_max_model_len", "startup_error", "kv_cache_dtypes",
           "default_max_num_batched_tokens", "state_dtypes", "StateDtypes", "mamba_cache_mode_of",
           "mm_batch_floor", "diagnose_log", "log_settings", "kv_cache_dtype_modelled",
           "model_dtype_of", "MAMBA_DTYPE_CHOICES", "USAGE_CONTEXTS", "DEFAULT_BLOCK_SIZE",
           "KVCacheGroupSpec", "KVCacheGrouping"]

DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
# Tokens per block when --block-size is not given: vLLM's CacheConfig.DEFAULT_BLOCK_SIZE.
DEFAULT_BLOCK_SIZE = 16
ASSUMED_GPU = (80 * GiB, "NVIDIA H100 80GB HBM3")  # for vLLM's batch defaults when none given


@dataclass(frozen=True, kw_only=True)
class Group:
    kind: str  # full, sliding, chunked, mla, state
    layers: int  # real layers in this group
    padding: int  # padding layers added to reach the group size
    blocks_per_request: int  # what vLLM's start-up check reserves: its worst case
    span: int = 0  # a sliding window or an attention chunk, in tokens
    block_size: int = 0  # tokens per block in this group

    def held_blocks(self, n: int) -> int:
        """Blocks one running request holds in this group while it computes its n-th token:
        the blocks of its n tokens, less those vLLM has freed (the v1 KV-cache manager's
        remove_skipped_blocks with n - 1 tokens computed: a sliding window frees the blocks
        wholly before computed - window + 1, a chunk those before the current chunk); a state
        its blocks whatever n."""
        if self.kind == "state":
            return self.blocks_per_request
        bs = self.block_size
        alloc = cdiv(n, bs)
        if self.kind == "sliding" and self.span:
            return alloc - max(0, n - self.span) // bs
        if self.kind == "chunked" and self.span:
            return alloc - (n - 1) // self.span * self.span // bs
        return alloc

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class VllmPrediction:
    available_bytes: int
    max_model_len: int
    block_size: int  # the effective one (raised for hybrid recurrent models)
    requested_block_size: int
    page_bytes: int  # one block of one layer
    group_size: int
    groups: tuple[Group, ...]
    padding_layers: int
    padding_waste_pct: float  # vLLM's "may waste at most X%" of the padded type
    state_page_padding_pct: float  # recurrent page padded to the attention page
    num_blocks: int
    blocks_per_request: int
    max_concurrency: float
    kv_cache_tokens: int
    tokens_formula: str
    stage: int = 0  # the pipeline stage whose numbers bind
    block_size_line: str = ""  # what vLLM logs when it sets an MLA model's block size
    vllm_version: str = ""  # the version whose rules were applied
    kv_cache_dtype: str = "auto"  # vLLM's name for the cache format used
    stage_blocks: tuple[int, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["groups"] = [g.to_dict() for g in self.groups]
        d["num_groups"] = len(self.groups)
        d["capacity_lines"] = self.capacity_lines()
        return d

    def held_blocks(self, n: int | None = None) -> int:
        """Blocks one running request holds at n tokens (default max_model_len), every group
        summed (Group.held_blocks): what a decoding request really keeps, against the worst
        case blocks_per_request that the start-up line divides by."""
        n = self.max_model_len if n is None else n
        return sum(g.held_blocks(n) for g in self.groups)

    def capacity_lines(self) -> list[str]:
        """The capacity lines as this vLLM version prints them (one line from v0.28.0, two
        before; a CUDA GPU named "GPU")."""
        tokens = f"GPU KV cache size: {self.kv_cache_tokens:,} tokens"
        conc = (f"Maximum concurrency for {self.max_model_len:,} tokens per request: "
                f"{self.max_concurrency:.2f}x")
        if fact("log_format", self.vllm_version or None) == "one line":
            return [f"{tokens}, {conc}"]
        return [tokens, conc]


def resolve_version(v: str | None) -> tuple[int, ...]:
    """A version string ("0.11.0", "v0.10.1rc2") as numbers; None means NEWEST."""
    if not v:
        v = NEWEST
    text = str(v)[:40].strip().lower().lstrip("v")
    nums = re.findall(r"\d+", text.replace(".x", ".99"))  # "0.11.x": the last 0.11 release
    if not nums or not text[:1].isdigit():
        raise ValueError(f"vllm_version must look like 0.10.1, got {str(v)[:40]!r}")
    return tuple(int(n) for n in nums[:3]) + (0,) * (3 - min(3, len(nums)))


# -- facts that changed between vLLM releases ----------------------------------------------------
# Every rule of vLLM's capacity arithmetic that changed between releases, with the first release
# that has each value and the change that made it. The releases were read off the Python sources
# of every vLLM wheel on PyPI from v0.7.0 to v0.33.0, compared release by release (release
# candidates and dev builds not checked); PR numbers from vLLM's pull-request threads. Details and
# quotes: tests/data/vllm-facts.md. `predict(..., vllm_version=...)` applies one release's rules;
# the default is NEWEST.
#
# Not pinned down: the PR behind the v0.20.1 tokens line (#41069 or #40694's idea), and the PRs
# of the >= 160 GiB batch tier (v0.28.0) and of the in-flight tokens (v0.26.0).


@dataclass(frozen=True, kw_only=True)
class Fact:
    what: str
    steps: tuple[tuple[tuple[int, int, int], object, str], ...]  # (first release, value, source)

    def at(self, version: tuple[int, ...]):
        value = self.steps[0][1]
        for since, v, _ in self.steps:
            if version >= since:
                value = v
        return value


VERSION_FACTS: dict[str, Fact] = {
    "group_threshold": Fact(
        what="hybrid grouping: all types get the largest count as group size when max < min x this "
             "(None: always the smallest count)",
        steps=(((0, 9, 1), None, "hybrid grouping first appears"),
               ((0, 12, 0), 1.25, "PR #29303 (gpt-oss-20b + EAGLE: 12 sliding + 13 full)"),
               ((0, 18, 0), 1.5, "PR #36684 (speculative drafters add layers to one type)"))),
    "tokens_line": Fact(
        what='"GPU KV cache size: N tokens"',
        steps=(((0, 8, 0), "blocks", "PR #13596: num_blocks // groups x block_size"),
               ((0, 20, 1), "concurrency", "int(max_concurrency x max_model_len); PR not pinned "
                                           "(#41069 or #40694)"))),
    "pp_grouping": Fact(
        what="pipeline parallelism: layers grouped per stage, or over the whole model",
        steps=(((0, 0, 0), "per stage", "each worker grouped its own layers"),
               ((0, 11, 0), "whole model", "PR #23974: global groups, then the smallest "
                                           "num_blocks of all workers"))),
    "gpu_memory_utilization": Fact(
        what="default gpu_memory_utilization",
        steps=(((0, 0, 0), 0.9, "long-standing default"),
               ((0, 20, 0), 0.92, "PR #38284 (with CUDA-graph memory profiled first)"))),
    "in_flight_batches": Fact(
        what="batches of max_num_batched_tokens a window or chunk reserves room for (async "
             "scheduling, one pipeline stage)",
        steps=(((0, 0, 0), 1, "max_num_batched_tokens"),
               ((0, 26, 0), 2, "max_in_flight_tokens = 2 x max_num_batched_tokens; PR not "
                               "pinned"))),
    "null_block": Fact(
        what="blocks reserved before checking that one max_model_len request fits",
        steps=(((0, 0, 0), 0, "none"),
               ((0, 29, 0), 1, "PR #47272: the null block"))),
    "log_format": Fact(
        what="how the capacity is logged",
        steps=(((0, 8, 0), "two lines", 'PR #13596: "GPU KV cache size: N tokens", then '
                                        '"Maximum concurrency for ..."'),
               ((0, 28, 0), "one line", '"GPU KV cache size: N tokens, Maximum concurrency for '
                                        '... per request: X.XXx"; PR not pinned'))),
    "error_wording": Fact(
        what="start-up error wording",
        steps=(((0, 0, 0), "models's", "v0.8.x-v0.21.0"),
               ((0, 22, 0), "model's", "v0.22.0"))),
    "hybrid_prefix_caching": Fact(
        what="prefix caching on by default for hybrid (attention + Mamba) models",
        steps=(((0, 0, 0), False, "ModelConfig.is_prefix_caching_supported: hybrid models "
                                  "not (v0.15.0-v0.20.0); v0.27.1 arg_utils: 'and not "
                                  "model_config.is_hybrid'"),
               ((0, 28, 0), True, "PR #50991 '[Mamba] enable prefix cache by default'"))),
    "mamba_cache_mode": Fact(
        what="mamba_cache_mode chosen when prefix caching is on (MambaModelConfig)",
        steps=(((0, 0, 0), None, "before v0.15.0: no mamba_cache_mode (not modelled)"),
               ((0, 15, 0), "all or align", "'all' for models with SupportsMambaPrefixCaching, "
                                            "else 'align'"),
               ((0, 28, 0), "align", "PR #50991: 'align' whenever prefix caching is on"))),
    "hybrid_block_alignment": Fact(
        what="attention block size for a hybrid model: a multiple of this many tokens",
        steps=(((0, 0, 0), "16", "HybridAttentionMambaModelConfig: kernel block 16"),
               ((0, 20, 0), "max(16, block_size)", "Platform._align_hybrid_block_size: "
                                                   "max(smallest kernel block, block_size)"))),
    "gdn_prefill_checkpoint": Fact(
        what="Qwen Gated DeltaNet with FlashInfer prefill in 'align' mode: one more block per "
             "request and blocks a multiple of 64 tokens",
        steps=(((0, 0, 0), False, "absent up to v0.32.0"),
               ((0, 33, 0), True, "qwen_gdn_linear_attn.py: num_prefill_checkpoint_blocks=1, "
                                  "FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64"))),
    "nemotron_h_ssm_default": Fact(
        what="NemotronH SSM state dtype when neither the flag nor config.json sets one",
        steps=(((0, 0, 0), "fp16", "NemotronHForCausalLMConfig: getattr(hf_config, "
                                   "'mamba_ssm_cache_dtype', 'float16') (seen in v0.14.0)"),
               ((0, 20, 0), "fp32", "DEFAULT_MAMBA_SSM_CACHE_DTYPE = 'float32'"))),
    "qwen3_5_ssm_from_config": Fact(
        what="Qwen3.5 SSM state dtype read from config.json's mamba_ssm_dtype",
        steps=(((0, 0, 0), False, "no Qwen3_5ForConditionalGenerationConfig (v0.16.0)"),
               ((0, 17, 0), True, "Qwen3_5ForConditionalGenerationConfig.verify_and_update_"
                                  "config"))),
    "mm_prefix_lm_batch_floor": Fact(
        what="default max_num_batched_tokens raised to one multimodal item (Gemma 4)",
        steps=(((0, 0, 0), False, "absent in v0.21.0"),
               ((0, 22, 0), True, "EngineArgs._get_min_mm_batched_tokens"))),
}
NEWEST = "0.33.0"


def fact(name: str, version: tuple[int, ...] | str | None = None):
    """The value of VERSION_FACTS[name] in ``version`` (a tuple, a string, or None: NEWEST)."""
    v = version if isinstance(version, tuple) else resolve_version(version)
    return VERSION_FACTS[name].at(v)

# -- recurrent-state dtypes and the Mamba cache mode, as vLLM resolves them -----------------------

_NEMOTRON_H = ("NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "NemotronH_Nano_VL_V2")
_QWEN3_5 = ("Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
            "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM")
# v0.27.1: the model classes with SupportsMambaPrefixCaching, which get mamba_cache_mode 'all'
# when prefix caching is on (v0.15.0-v0.27.x).
_MAMBA_ALL_MODE = ("FalconH1ForCausalLM", "GraniteMoeHybridForCausalLM", "JambaForCausalLM",
                   "MambaForCausalLM", "Mamba2ForCausalLM", "NemotronHForCausalLM",
                   "Zamba2ForCausalLM")
_MAMBA_DTYPES = {"auto": None, "float32": "fp32", "float16": "fp16", "bfloat16": "bf16",
                 "fp32": "fp32", "fp16": "fp16", "bf16": "bf16"}
MAMBA_DTYPE_CHOICES = ("auto", "float32", "float16", "bfloat16")  # vLLM's MambaDType


class StateDtypes(NamedTuple):
    conv: str  # kvcalc name of the convolution state's dtype
    ssm: str  # ... of the recurrent (SSM / delta-rule / linear-attention) state's
    why: str  # where each came from


def _mamba_dtype(value, what: str) -> str | None:
    key = str(value).strip().lower() if value is not None else "auto"
    if key not in _MAMBA_DTYPES:
        raise ValueError(f"{what} must be one of {', '.join(MAMBA_DTYPE_CHOICES)}, got "
                         f"{str(value)[:20]!r}")
    return _MAMBA_DTYPES[key]


def _config_parts(config) -> tuple[dict, dict, str]:
    cfg = config if isinstance(config, dict) else {}
    text = cfg.get("text_config")
    text = text if isinstance(text, dict) else {}
    archs = cfg.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else ""
    return cfg, text, arch


def model_dtype_of(config) -> str:
    """The dtype vLLM's --dtype auto gives the model (kvcalc name): the config's torch_dtype /
    dtype, float32 checkpoints downcast to bf16 (ModelConfig._resolve_auto_dtype); bf16 when
    the config says nothing."""
    cfg, text, _ = _config_parts(config)
    name = (cfg.get("torch_dtype") or cfg.get("dtype") or text.get("torch_dtype")
            or text.get("dtype"))
    return "fp16" if name == "float16" else "bf16"


def state_dtypes(config: dict | None, ssm_flag: str | None = None, conv_flag: str | None = None,
                 model_dtype: str | None = None, vllm_version: str | None = None
                 ) -> StateDtypes:
    """The dtypes vLLM gives a recurrent layer's conv state and SSM state, from the raw
    config.json dict and the ``vllm serve`` flags (MambaStateDtypeCalculator, config/cache.py,
    model_executor/models/config.py; tests/data/vllm-facts.md, Q10):

    - conv state: --mamba-cache-dtype, 'auto' = the model's dtype;
    - SSM state: --mamba-ssm-cache-dtype; 'auto' = the conv state's dtype, except NemotronH
      (config.json's mamba_ssm_cache_dtype, else float16 / float32 from v0.20.0), Qwen3.5
      (text_config.mamba_ssm_dtype, v0.17.0 on) and Kimi-Linear's KDA (float32);
    - MiniMax's linear attention keeps one state, in --mamba-cache-dtype."""
    version = resolve_version(vllm_version)
    cfg, text, arch = _config_parts(config)
    base = _mamba_dtype(model_dtype, "model dtype") or model_dtype_of(cfg)
    conv_set = _mamba_dtype(conv_flag, "--mamba-cache-dtype")
    ssm_set = _mamba_dtype(ssm_flag, "--mamba-ssm-cache-dtype")
    conv = conv_set or base
    why = [f"conv state {conv}: " + ("--mamba-cache-dtype" if conv_set else "the model's dtype")]
    model_type = str(cfg.get("model_type", ""))
    if model_type.startswith("minimax") or arch.startswith("MiniMax"):
        why.append("one linear-attention state, in --mamba-cache-dtype")
        return StateDtypes(conv, conv, "; ".join(why))
    if model_type == "kimi_linear" or arch.startswith("KimiLinear"):
        if ssm_set is None or version < (0, 30, 0):
            ssm, src = "fp32", "KDA's recurrent state is float32 (kda_state_dtype)"
        elif ssm_set in ("fp32", "bf16"):
            ssm, src = ssm_set, "--mamba-ssm-cache-dtype (KDA: float32 or bfloat16, v0.30.0)"
        else:
            raise ValueError("KDA's recurrent state takes only float32 or bfloat16")
    elif ssm_set is not None:
        ssm, src = ssm_set, "--mamba-ssm-cache-dtype"
    elif arch in _NEMOTRON_H:
        hf = text if arch == "NemotronH_Nano_VL_V2" else cfg
        asked = _MAMBA_DTYPES.get(str(hf.get("mamba_ssm_cache_dtype", "")).lower())
        ssm = asked or fact("nemotron_h_ssm_default", version)
        src = ("config.json mamba_ssm_cache_dtype" if asked else
               f"NemotronH's default in vLLM {'.'.join(map(str, version))}")
    elif arch in _QWEN3_5 and fact("qwen3_5_ssm_from_config", version) and \
            (qwen := _MAMBA_DTYPES.get(str((text or cfg).get("mamba_ssm_dtype", "")).lower())):
        ssm = qwen
        src = "config.json mamba_ssm_dtype (Qwen3.5, vLLM 0.17.0 on)"
    else:
        ssm, src = conv, "the conv state's dtype ('auto')"
    why.append(f"SSM state {ssm}: {src}")
    return StateDtypes(conv, ssm, "; ".join(why))


def mamba_cache_mode_of(vllm_version: str | tuple | None = None,
                        enable_prefix_caching: bool | None = None, hybrid: bool = True,
                        architecture: str | None = None) -> str:
    """vLLM's mamba_cache_mode: 'none' with prefix caching off; with it on 'all' for models
    with Mamba prefix-caching support (v0.15.0-v0.27.x), else 'align' (tests/data/
    vllm-facts.md, Q11). ``enable_prefix_caching`` None: the version's default, on for hybrid
    models from v0.28.0 (PR #50991) and never for attention-free ones."""
    version = vllm_version if isinstance(vllm_version, tuple) else resolve_version(vllm_version)
    if enable_prefix_caching is None:
        enable_prefix_caching = hybrid and fact("hybrid_prefix_caching", version)
    if not enable_prefix_caching:
        return "none"
    mode = fact("mamba_cache_mode", version)
    if mode is None:
        raise ValueError("prefix caching with recurrent layers is not modelled before vLLM "
                         "0.15.0 (no mamba_cache_mode); give --no-enable-prefix-caching or a "
                         "newer version")
    if mode == "all or align":
        return "all" if architecture in _MAMBA_ALL_MODE else "align"
    return mode



# vLLM's --kv-cache-dtype, by kvcalc format (+ per-token-head scales): (vLLM's name, first
# release, source). Per-token-head modes add one fp32 scale for K and one for V per head and
# token (8 B per head; 8 B for an MLA latent too).
_CACHE_DTYPES = {
    ("bf16", False): ("auto", (0, 0, 0), "the model's dtype"),
    ("fp16", False): ("auto", (0, 0, 0), "the model's dtype"),
    ("fp32", False): ("auto", (0, 0, 0), "the model's dtype"),
    ("fp8", False): ("fp8", (0, 0, 0), "fp8 / fp8_e4m3 / fp8_e5m2, per-tensor scales"),
    ("fp8", True): ("fp8_per_token_head", (0, 20, 0), "PR #38378"),
    ("int8", True): ("int8_per_token_head", (0, 20, 0), "PR #38378"),
    ("int4", True): ("int4_per_token_head", (0, 25, 0), "PR #40835"),
}


@dataclass(frozen=True)
class _Format:
    """How one vLLM cache format lays a token of one layer out (bytes from vLLM's specs)."""
    name: str  # vLLM's --kv-cache-dtype
    kind: str  # plain, per_head, nvfp4, ds_mla
    dtype: DType | None = None  # kvcalc DType of the values (plain, per_head)
    mla_bytes: int = 0  # ds_mla: bytes per token and layer of the latent


# Every choice of vLLM's CacheDType Literal (vllm/config/cache.py), with its first release and
# how kvcalc sizes it (tests/data/vllm-facts.md, Q4). None: in vLLM, not modelled by kvcalc.
_VLLM_FORMATS: dict[str, tuple[tuple[int, int, int], _Format | None, str]] = {
    "auto": ((0, 0, 0), _Format("auto", "plain", get_dtype("bf16")),
             "the model's dtype (kvcalc: 16-bit)"),
    "bfloat16": ((0, 11, 0), _Format("bfloat16", "plain", get_dtype("bf16")), "v0.11.0"),
    "float16": ((0, 18, 0), _Format("float16", "plain", get_dtype("fp16")), "v0.18.0"),
    "fp8": ((0, 0, 0), _Format("fp8", "plain", get_dtype("fp8")), "fp8 = fp8_e4m3"),
    "fp8_e4m3": ((0, 0, 0), _Format("fp8_e4m3", "plain", get_dtype("fp8")), "1 B a value"),
    "fp8_e5m2": ((0, 0, 0), _Format("fp8_e5m2", "plain", get_dtype("fp8")), "1 B a value"),
    "fp8_inc": ((0, 10, 0), _Format("fp8_inc", "plain", get_dtype("fp8")),
                "Intel Gaudi fp8 (float8_e4m3fn), 1 B a value"),
    "fp8_ds_mla": ((0, 11, 1), _Format("fp8_ds_mla", "ds_mla", mla_bytes=656),
                   "656 B a token and MLA layer (MLAAttentionSpec)"),
    "nvfp4_ds_mla": ((0, 30, 0), _Format("nvfp4_ds_mla", "ds_mla", mla_bytes=352),
                     "352 B a token and MLA layer (flashmla_sparse.py)"),
    "turboquant_k8v4": ((0, 20, 0), None, "packed K|V slots, boundary layers kept 16-bit"),
    "turboquant_4bit_nc": ((0, 20, 0), None, "packed K|V slots, boundary layers kept 16-bit"),
    "turboquant_k3v4_nc": ((0, 20, 0), None, "packed K|V slots, boundary layers kept 16-bit"),
    "turboquant_3bit_nc": ((0, 20, 0), None, "packed K|V slots, boundary layers kept 16-bit"),
    "octave_k3v4": ((0, 33, 0), None, "ROCm Octave backend slots"),
    "octave_k3v3": ((0, 33, 0), None, "ROCm Octave backend slots"),
    "octave_k3v3_compact": ((0, 33, 0), None, "ROCm Octave backend slots"),
    "ultraquant_4bit": ((0, 32, 0), None, "packed FP4 + UE8M0 slots, boundary layers 16-bit"),
    "int4_per_token_head": ((0, 25, 0), _Format("int4_per_token_head", "per_head",
                                                get_dtype("int4")), "PR #40835"),
    "int8_per_token_head": ((0, 20, 0), _Format("int8_per_token_head", "per_head",
                                                get_dtype("int8")), "PR #38378"),
    "fp8_per_token_head": ((0, 20, 0), _Format("fp8_per_token_head", "per_head",
                                               get_dtype("fp8")), "PR #38378"),
    "nvfp4": ((0, 20, 0), _Format("nvfp4", "nvfp4"), "PR #37332 (FlashInfer path v0.21.0)"),
    "nvfp4_4over6": ((0, 28, 0), _Format("nvfp4_4over6", "nvfp4"),
                     "PR #45187: the nvfp4 layout"),
}


def version_choices() -> list[str]:
    """NEWEST first, then the releases on both sides of every change in VERSION_FACTS."""
    seen = {NEWEST}
    out = [NEWEST]
    changes = {since for f in VERSION_FACTS.values() for since, _, _ in f.steps[1:]}
    changes |= {since for _, since, _ in _CACHE_DTYPES.values() if since > (0, 0, 0)}
    for since in sorted(changes, reverse=True):
        major, minor, patch = since
        before = f"{major}.{minor}.{patch - 1}" if patch else f"{major}.{minor - 1}.x"
        for text in (".".join(map(str, since)), before):
            if text not in seen:
                seen.add(text)
                out.append(text)
    return out


def kv_cache_dtypes(version: str | None = None, *, vllm_names: bool = False) -> list[str]:
    """KV formats that ``version`` of vLLM has: kvcalc's names (a trailing '+scales':
    per-token-head), or with ``vllm_names`` every --kv-cache-dtype choice of that version's
    CacheDType, those kvcalc does not model included (predict refuses them by name)."""
    v = resolve_version(version)
    if vllm_names:
        return [n for n, (since, _, _) in _VLLM_FORMATS.items() if v >= since]
    return [d + ("+scales" if sc else "") for (d, sc), (_, since, _) in _CACHE_DTYPES.items()
            if v >= since]


def kv_cache_dtype_modelled(name: str) -> bool:
    """Whether kvcalc sizes vLLM's --kv-cache-dtype ``name`` (False: refused by name)."""
    entry = _VLLM_FORMATS.get(name)
    return entry is not None and entry[1] is not None


def _cache_dtype(kv_dtype: str, scales: bool, version: tuple[int, ...]) -> _Format:
    """The cache format for a kvcalc KV format or a vLLM --kv-cache-dtype name in ``version``,
    or a ValueError that names what this version has. INT8 and INT4 exist only per token and
    head; a format vLLM has but kvcalc does not model is refused by name."""
    shown = ".".join(map(str, version))
    if isinstance(kv_dtype, str) and kv_dtype.strip().lower() in _VLLM_FORMATS and not scales:
        name = kv_dtype.strip().lower()
        since, fmt, why = _VLLM_FORMATS[name]
        if version < since:
            raise ValueError(f"vLLM {shown} has no --kv-cache-dtype {name} (it came in "
                             f"{'.'.join(map(str, since))}); its formats: "
                             f"{', '.join(kv_cache_dtypes(shown, vllm_names=True))}")
        if fmt is None:
            raise ValueError(f"--kv-cache-dtype {name} is not modelled by kvcalc ({why}: its "
                             "page size depends on the attention backend); pick another format")
        return fmt
    d = get_dtype("bf16" if kv_dtype == "auto" else kv_dtype)
    per_head = d.quantized and (bool(scales) or d.name in ("int8", "int4"))
    entry = _CACHE_DTYPES.get((d.name, per_head))
    if entry is None or version < entry[1]:
        have = ", ".join(kv_cache_dtypes(shown))
        raise ValueError(f"vLLM {shown} has no {d.name.upper()}"
                         + (" per-token-head" if per_head else "")
                         + f" KV cache (its formats: {have}); pick one of those or a newer "
                         "vLLM version")
    return _Format(entry[0], "per_head" if per_head else "plain", d)


USAGE_CONTEXTS = ("serve", "llm")  # vllm serve (UsageContext.OPENAI_API_SERVER), the LLM class

# -- the MLA block size, by release and GPU generation ---------------------------------------------
# vLLM picks an MLA model's block size for its attention kernel (tests/data/vllm-facts.md, Q16):
# - up to v0.17.x, CudaPlatformBase.check_and_update_config forces it ("Forcing kv cache block
#   size to 64 for FlashMLA backend." on Hopper; "... to 128 for CUTLASS_MLA backend." on
#   Blackwell; from v0.15.0 Blackwell takes FlashInfer MLA when qk_nope_head_dim is 128: 64);
# - from v0.18.0 (PR #35122) Platform.update_block_size_for_backend asks the chosen backend's
#   get_preferred_block_size(16): 16 when the kernel takes it, else its smallest size. The
#   default backends: Hopper FLASH_ATTN_MLA (16-bit caches, any multiple of 16) or FLASHMLA
#   (fp8, blocks of 64); Blackwell FLASHINFER_MLA (32 or 64: 32) or CUTLASS_MLA (128); other
#   NVIDIA GPUs TRITON_MLA (multiples of 16). A block size the user sets is kept from v0.18.0.
# - DeepSeek sparse attention (an indexer on the MLA layers) takes blocks of 64 everywhere.
GPU_GENERATIONS = ("hopper", "blackwell", "other", "rocm")


def gpu_generation(gpu_name: str | None) -> str:
    """The GPU family vLLM's MLA kernels key on, from the GPU's name: "hopper" (compute
    capability 9.x), "blackwell" (10.x: B100/B200/B300, GB200/GB300), "rocm" (AMD) or "other"
    (Ampere, Ada, Turing, consumer Blackwell 12.x)."""
    name = (gpu_name or ASSUMED_GPU[1]).upper()
    if "AMD" in name or "INSTINCT" in name or re.search(r"\bMI\d{3}", name):
        return "rocm"
    if re.search(r"\bG?H(100|200|800|20)\b", name):
        return "hopper"
    if re.search(r"\bG?B(100|200|300)\b", name):
        return "blackwell"
    return "other"


def mla_block_size(layers, block_size: int, version: tuple[int, ...], gpu_name: str | None,
                   fmt: _Format) -> tuple[int, str]:
    """(block size, the line vLLM logs or "") for a model whose cache layers are MLA. A
    ``block_size`` of 16 is vLLM's default, read as --block-size not set."""
    mla = [lay for lay in layers if lay.kind == "mla"]
    if not mla:
        return block_size, ""
    gen = gpu_generation(gpu_name)
    sparse = any(lay.extra is not None for lay in mla)
    if gen == "rocm":
        return block_size, ""  # ROCm's MLA backends choose otherwise: not modelled
    qk_nope = mla[0].qk_head_dim - mla[0].qk_rope_head_dim
    if version < (0, 18, 0):
        if sparse:
            return (64, "Forcing kv cache block size to 64 for FlashMLASparse backend.") \
                if block_size != 64 else (block_size, "")
        if gen == "hopper" and block_size % 64:
            return 64, "Forcing kv cache block size to 64 for FlashMLA backend."
        if gen == "blackwell":
            if version >= (0, 15, 0) and qk_nope == 128:
                if block_size != 32 and block_size % 64:
                    return 64, "Forcing kv cache block size to 64 for FlashInferMLA backend."
            elif block_size % 128:
                return 128, "Forcing kv cache block size to 128 for CUTLASS_MLA backend."
        return block_size, ""
    if block_size != DEFAULT_BLOCK_SIZE:
        return block_size, ""  # --block-size given: kept, the backend is chosen to suit it
    if sparse:
        backend, size = "FLASHMLA_SPARSE", 64
    elif gen == "hopper":
        sixteen = fmt.kind == "plain" and fmt.dtype is not None and fmt.dtype.bits == 16
        backend, size = ("FLASH_ATTN_MLA", 16) if sixteen else ("FLASHMLA", 64)
    elif gen == "blackwell":
        backend, size = (("FLASHINFER_MLA", 32) if qk_nope in (64, 128, 192) else
                         ("CUTLASS_MLA", 128))
    else:
        backend, size = "TRITON_MLA", 16
    if size == block_size:
        return block_size, ""
    plural = "(s)" if version >= (0, 32, 0) else ""  # v0.32.0 on asks every backend at once
    return size, f"Setting kv cache block size to {size} for {backend} backend{plural}."


def _batch_tier(version: tuple[int, ...], total_bytes: int, gpu_name: str | None) -> str:
    """Which row of vLLM's batch defaults a GPU falls in (EngineArgs.get_batch_defaults)."""
    name = (gpu_name or "").lower()
    if version < (0, 8, 5):
        # v0.7.x-v0.8.4: the large row by name only (PR #12369); max_num_seqs 1,024 on every
        # GPU up to v0.8.3 is handled in default_max_num_seqs.
        return "big" if ("h100" in name or "h200" in name) else "small"
    if version >= (0, 28, 0) and total_bytes >= 160 * GiB:
        return "huge"
    big = total_bytes >= 70 * GiB and not (version >= (0, 9, 0) and "a100" in name)
    if version >= (0, 33, 0) and "gb10" in name:  # DGX Spark (cc 12.1) stays small
        big = False
    return "big" if big else "small"


def default_max_num_seqs(version: str | None, total_bytes: int,
                         gpu_name: str | None = None) -> int:
    """vLLM's default max_num_seqs on one GPU of total_bytes (both usage contexts agree):
    1,024 on a GPU of 70 GiB or more (from v0.9.0 not an A100), else 256 (PRs #16158, #17073,
    #17885); 1,024 on every GPU up to v0.8.3."""
    v = resolve_version(version)
    if v < (0, 8, 4):
        return 1024
    return 256 if _batch_tier(v, total_bytes, gpu_name) == "small" else 1024


# max_num_batched_tokens by tier: (LLM class, vllm serve), EngineArgs.get_batch_defaults.
_BATCH_TOKENS = {"huge": (16384, 16384), "big": (16384, 8192), "small": (8192, 2048)}
# Gemma 4 (v0.22.0 on): with use_bidirectional_attention "vision" it is a multimodal prefix-LM,
# and one item of its costliest modality must fit one batch: a video of 32 frames x (70 soft
# tokens + boi + eoi + 6 timestamp tokens) = 2,496 tokens (gemma4_mm.get_mm_max_tokens_per_item).
_GEMMA4_VIDEO_TOKENS = 32 * (70 + 2 + 6)


def mm_batch_floor(config: dict | None, version: str | None = None) -> tuple[int, str] | None:
    """(tokens, modality) that a default max_num_batched_tokens is raised to for a multimodal
    prefix-LM model, read from its config.json (EngineArgs._get_min_mm_batched_tokens, v0.22.0
    on); None for every other model. Only Gemma 4 is known to kvcalc: image
    vision_config.default_output_length, audio (not sized here), video 2,496."""
    if not isinstance(config, dict) or resolve_version(version) < (0, 22, 0):
        return None
    text = config.get("text_config")
    text = text if isinstance(text, dict) else {}
    if not str(config.get("model_type", "")).startswith("gemma4"):
        return None
    if text.get("use_bidirectional_attention") != "vision" or "vision_config" not in config:
        return None
    vision = config.get("vision_config") or {}
    image = vision.get("default_output_length", 0) if isinstance(vision, dict) else 0
    tokens = {"video": _GEMMA4_VIDEO_TOKENS, "image": image if isinstance(image, int) else 0}
    modality = max(tokens, key=tokens.__getitem__)
    return tokens[modality], modality


def default_max_num_batched_tokens(version: str | None, total_bytes: int,
                                   gpu_name: str | None = None, *,
                                   usage_context: str = "serve", config: dict | None = None,
                                   max_model_len: int | None = None,
                                   max_num_seqs: int | None = None) -> int:
    """vLLM's default max_num_batched_tokens (EngineArgs._set_default_args /
    _set_default_max_num_seqs_and_batched_tokens_args; tests/data/vllm-facts.md, Q6):

    - ``vllm serve``: 16,384 on a GPU of 160 GiB or more (v0.28.0), 8,192 on one of 70 GiB or
      more (not an A100 from v0.9.0), else 2,048; the ``LLM`` class: 16,384 / 16,384 / 8,192;
    - raised for a multimodal prefix-LM model (Gemma 4) to its costliest item (v0.22.0);
    - then at most max_num_seqs x max_model_len (when both are given)."""
    if usage_context not in USAGE_CONTEXTS:
        raise ValueError(f"usage context must be one of {', '.join(USAGE_CONTEXTS)}, got "
                         f"{str(usage_context)[:20]!r}")
    v = resolve_version(version)
    llm, serve = _BATCH_TOKENS[_batch_tier(v, total_bytes, gpu_name)]
    tokens = serve if usage_context == "serve" else llm
    floor = mm_batch_floor(config, version)
    if floor and floor[0] > tokens:
        tokens = floor[0]
    if max_model_len:
        seqs = max_num_seqs or default_max_num_seqs(version, total_bytes, gpu_name)
        tokens = min(tokens, seqs * max_model_len)
    return tokens


def _vllm_bytes_per_token(layer, fmt: _Format) -> int:
    """One token's bytes in one layer as vLLM lays the page out (vllm-facts.md, Q4):
    plain formats one value each; per-token-head modes 8 B more per KV head (an fp32 scale for
    K and one for V) and 8 B per MLA latent; NVFP4 head_dim/2 + head_dim/16 bytes for K and for
    V per head; the DeepSeek sparse layouts a fixed size per latent. Indexer keys on top."""
    if not layer.stores_tokens:
        return 0
    extra = layer.extra.bytes_per_token if layer.extra is not None else 0
    mla = layer.kind == "mla"
    if fmt.kind == "plain":
        return layer.bytes_per_token(fmt.dtype, False)
    if fmt.kind == "per_head":
        base = layer.bytes_per_token(fmt.dtype, False)
        return base + 8 * (1 if mla else layer.kv_heads)
    if fmt.kind == "nvfp4":
        if mla:
            raise ValueError(f"--kv-cache-dtype {fmt.name} has no MLA layout in vLLM; use "
                             "nvfp4_ds_mla or fp8_ds_mla for an MLA model")
        return layer.kv_heads * (layer.head_dim // 2 + layer.head_dim // 16
                                 + layer.v_head_dim // 2 + layer.v_head_dim // 16) + extra
    # ds_mla: the DeepSeek sparse layouts of a 512 latent + 64 RoPE
    if not mla or (layer.kv_lora_rank, layer.qk_rope_head_dim) != (512, 64):
        raise ValueError(f"--kv-cache-dtype {fmt.name} is the DeepSeek sparse MLA layout "
                         "(512 latent + 64 RoPE values); this model's layers are not")
    return fmt.mla_bytes + extra


@dataclass(frozen=True, kw_only=True)
class KVCacheGroupSpec:
    """One of vLLM's KV-cache groups (its KVCacheGroupSpec): layers that share one block table,
    each block holding one page of every member."""

    kind: str  # full, sliding, chunked, mla, state
    members: tuple[int, ...]  # the layers' positions (on this GPU or pipeline stage)
    padding: int  # padding layers added to reach the group size
    spec: Layer  # one member, for the kind's rules (vLLM's kv_cache_spec)
    block_size: int  # tokens per block: a page smaller than the largest holds more


@dataclass(frozen=True, kw_only=True)
class KVCacheGrouping:
    """The groups of a model's layers and the block they share (vLLM's KVCacheConfig, before
    the pool is divided into blocks)."""

    block_size: int  # the effective block size (raised for hybrid recurrent models)
    page_bytes: int  # one block of one layer (uniform: of every layer)
    group_size: int  # layers per group (padding included)
    groups: tuple[KVCacheGroupSpec, ...]
    padding_layers: int
    padding_waste_pct: float  # vLLM's "may waste at most X%" of the padded type
    state_page_padding_pct: float  # recurrent page padded to the attention page
    notes: tuple[str, ...]
    # One type whose pages differ (UniformTypeKVCacheSpecs): one group, a block holds one page
    # of every layer.
    uniform: bool = False

    @property
    def block_bytes(self) -> int:
        """Bytes of one block across the layers of a group (the pool's unit)."""
        return self.page_bytes if self.uniform else self.page_bytes * self.group_size


def _grouping(layers, **kw) -> KVCacheGrouping:
    """``_grouping_of`` for a list of layers, memoised: the groups do not depend on
    max_model_len, and estimate_max_model_len and the Budget's sweeps ask for the same
    grouping dozens of times."""
    return _grouping_of(tuple(layers), **kw)


# Complex by design (C901): vLLM's grouping rules (hybrid groups, padding, threshold) in one place;
# issue 25 item 2 types it.
@functools.lru_cache(maxsize=512)
def _grouping_of(  # noqa: C901
        layers: tuple, *, block_size: int, fmt: _Format, state_dtypes: tuple,
        alignment: int, threshold: float | None,
        version: tuple[int, ...]) -> KVCacheGrouping:
    """vLLM's KV-cache groups for ``layers`` (already split for tensor parallelism):
    the effective block size, the page, the group size and each group's member positions.

    Equal page sizes (after raising a recurrent model's block size) form vLLM's hybrid groups;
    layers of one type whose pages differ (an indexer cache on some MLA layers only) form one
    group whose block holds a page of every layer (UniformTypeKVCacheSpecs, v0.11.0)."""
    attn = [(i, lay) for i, lay in enumerate(layers) if lay.stores_tokens]
    states = [(i, lay) for i, lay in enumerate(layers) if lay.state_elements]
    notes = []
    bs = block_size
    state_pad_pct = 0.0
    state_page = 0
    if states:
        # State page per layer on this GPU (heads split over tp, as vLLM shards them).
        state_page = max(lay.state_bytes(*state_dtypes) for _, lay in states)
        if attn:
            # The smallest multiple of ``alignment`` tokens whose attention page holds a state
            # page (Platform._align_hybrid_block_size); a larger block asked for is kept.
            one_token = _vllm_bytes_per_token(attn[0][1], fmt)
            bs = max(alignment * cdiv(state_page, alignment * one_token), block_size)
            attn_page = bs * one_token
            state_pad_pct = (attn_page - state_page) / state_page * 100
            if bs != block_size:
                notes.append(f"attention block size raised to {bs} tokens so that an attention "
                             f"page ({attn_page:,} B) is at least a state page ({state_page:,} "
                             f"B); the state page is padded by {state_pad_pct:.2f}%")
            state_page = attn_page
    buckets: dict[tuple, list] = {}
    pages = {}
    for i, lay in attn:
        page = bs * _vllm_bytes_per_token(lay, fmt)
        key = (*lay.vllm_group_key(), page)
        buckets.setdefault(key, []).append(i)
        pages[key] = page
    if states:
        key = (*states[0][1].vllm_group_key(), state_page)
        buckets[key] = [i for i, _ in states]
        pages[key] = state_page
    if not buckets:
        raise ValueError("this model has no layer that keeps a KV cache")
    types = {k[:2] for k in buckets}
    if len(set(pages.values())) > 1 and len(types) == 1 and not states:
        if version < (0, 11, 0):
            raise ValueError("layers of one type with different page sizes: vLLM before 0.11.0 "
                             "cannot allocate them")
        # One group; a block holds one page of every layer (their sizes summed).
        members = sorted(i for ms in buckets.values() for i in ms)
        rep = layers[members[0]]
        notes.append("layers of one type but different page sizes form one group: a block holds "
                     "a page of every layer (vLLM's UniformTypeKVCacheSpecs)")
        return KVCacheGrouping(
            block_size=bs, page_bytes=sum(bs * _vllm_bytes_per_token(layers[i], fmt)
                                          for i in members),
            group_size=1, groups=(KVCacheGroupSpec(kind=rep.kind, members=tuple(members),
                                                   padding=0, spec=rep, block_size=bs),),
            padding_layers=0, padding_waste_pct=0.0, state_page_padding_pct=state_pad_pct,
            notes=tuple(notes), uniform=True)
    if len(set(pages.values())) > 1:
        # vLLM raises smaller pages' block size to the largest page when they divide it.
        biggest = max(pages.values())
        if any(biggest % p for p in pages.values()):
            shown = ", ".join(f"{p:,}" for p in sorted(set(pages.values())))
            raise ValueError(f"in this KV cache format the layers' pages ({shown} B) do not "
                             "divide each other, so vLLM cannot unify them and refuses to "
                             "start (unify_kv_cache_spec_page_size); choose another KV cache "
                             "format")
        notes.append("layers of different page sizes: smaller pages get larger blocks")
    page = max(pages.values())
    counts = [len(ms) for ms in buckets.values()]
    group_size = min(counts)
    if len(buckets) == 1:
        group_size = counts[0]
    elif threshold is not None and max(counts) < min(counts) * threshold:
        group_size = max(counts)
    groups = []
    padding_total = 0
    waste = 0.0
    for key, members in buckets.items():
        count = len(members)
        n_groups = cdiv(count, group_size)
        padding = n_groups * group_size - count
        if padding:
            padding_total += padding
            waste = max(waste, padding / count * 100)
            notes.append(f"{padding} padding layer(s) added to the {key[0]} layers: vLLM warns "
                         f"this may waste at most {padding / count * 100:.2f}% of the cache")
        layer_bs = bs * (page // pages[key])  # a smaller page holds more tokens per block
        for g in range(n_groups):  # vLLM deals the layers out: layers[g::n_groups]
            share = members[g::n_groups]
            groups.append(KVCacheGroupSpec(kind=key[0], members=tuple(share),
                                           padding=group_size - len(share),
                                           spec=layers[share[0]], block_size=layer_bs))
    return KVCacheGrouping(block_size=bs, page_bytes=page, group_size=group_size,
                           groups=tuple(groups), padding_layers=padding_total,
                           padding_waste_pct=waste, state_page_padding_pct=state_pad_pct,
                           notes=tuple(notes))


def _per_request(grouping: KVCacheGrouping, max_model_len: int, in_flight: int,
                 state_blocks: int = 1) -> list[int]:
    """Blocks one request of max_model_len takes in each group; a recurrent group takes
    ``state_blocks`` (MambaSpec.max_memory_usage_bytes: 1, or 2 + checkpoints in 'align')."""
    return [state_blocks if g.spec.state_elements else
            g.spec.vllm_blocks_per_request(max_model_len, g.block_size, in_flight)
            for g in grouping.groups]


# Complex by design (C901): vLLM's start-up arithmetic in vLLM's order (defaults, format, block
# size, Mamba mode, drafts, stages).
def predict(  # noqa: C901
        spec: ModelSpec, *, available_bytes: int, max_model_len: int,
        block_size: int = DEFAULT_BLOCK_SIZE,
        tp: int = 1, pp: int = 1, kv_dtype: str = "bf16", state_dtype: str = "bf16",
        max_num_batched_tokens: int | None = None,
        num_draft_layers: int = 0, vllm_version: str | None = None,
        scales: bool = False, mamba_cache_dtype: str = "auto",
        mamba_ssm_cache_dtype: str = "auto", enable_prefix_caching: bool | None = None,
        mamba_cache_mode: str | None = None, architecture: str | None = None,
        gdn_prefill_checkpoint: bool = False, usage_context: str = "serve",
        gpu_memory_bytes: int | None = None, gpu_name: str | None = None,
        mm_batch_tokens: int | None = None, mla_block_rule: bool = True) -> VllmPrediction:
    """The capacity lines vLLM prints for ``spec`` given the memory it found for the cache.

    ``kv_dtype`` is kvcalc's name (bf16, fp8, int8, ...) or vLLM's --kv-cache-dtype; with
    ``scales`` a quantized kvcalc format is vLLM's per-token-head variant. A format the chosen
    version does not have, or one kvcalc does not model, is refused by name, never replaced by
    another one's numbers.

    Recurrent states: ``state_dtype`` is what vLLM's 'auto' means for them (the model's dtype);
    ``mamba_cache_dtype`` sets the conv state (and the SSM state while that is 'auto'),
    ``mamba_ssm_cache_dtype`` the SSM state alone, as vLLM's flags do (resolve a config's own
    choice with state_dtypes()). ``enable_prefix_caching`` None is the version's default;
    with it on a recurrent group keeps 2 blocks a request ('align'), 3 with
    ``gdn_prefill_checkpoint`` (v0.33.0 Gated DeltaNet on FlashInfer prefill: Hopper, or
    Blackwell with CUDA 13). ``architecture`` (config.json's) picks 'all' mode in
    v0.15.0-v0.27.x, which kvcalc does not model.

    ``max_num_batched_tokens`` None is the version's default for ``usage_context`` ('serve':
    ``vllm serve``, 'llm': the LLM class) on the GPU given (an 80 GiB H100 when none is, said
    in the notes), raised to ``mm_batch_tokens`` (mm_batch_floor(config)) and capped at
    max_num_seqs x max_model_len, as EngineArgs does.

    MLA models: the block size is the one vLLM picks for its MLA kernel on ``gpu_name``'s
    generation (an H100 when none is given), see mla_block_size; ``mla_block_rule=False``
    keeps ``block_size`` as given (a block size read from a log)."""
    kinds = [lay for lay, _ in counted(spec.layers)]  # each distinct layer once, for the scans
    unsupported = next((lay.vllm_unsupported for lay in kinds if lay.vllm_unsupported),
                       None)
    if unsupported:
        raise ValueError(f"vLLM cannot serve {spec.name}: {unsupported} (the encoder-decoder "
                         "models, mllama among them, were removed after v0.10.2, PR #24907)")
    available_bytes = check_int("available KV cache memory (bytes)", available_bytes, 0, 2**50)
    max_model_len = check_int("max_model_len", max_model_len, 1, MAX_CONTEXT)
    block_size = check_int("block size", block_size, 1, 4096)
    tp = check_int("tensor parallel size", tp, 1, 4096)
    pp = check_int("pipeline parallel size", pp, 1, 4096)
    num_draft_layers = check_int("draft layers", num_draft_layers, 0, 64)
    version = resolve_version(vllm_version)
    notes = []
    if max_num_batched_tokens is None:
        assumed = gpu_memory_bytes is None
        gpu_bytes, gname = (ASSUMED_GPU if gpu_memory_bytes is None
                            else (gpu_memory_bytes, gpu_name))
        shown = ".".join(map(str, version))
        max_num_batched_tokens = default_max_num_batched_tokens(
            shown, gpu_bytes, gname, usage_context=usage_context, max_model_len=max_model_len)
        if mm_batch_tokens and mm_batch_tokens > max_num_batched_tokens and \
                fact("mm_prefix_lm_batch_floor", version):
            max_num_batched_tokens = min(mm_batch_tokens, default_max_num_seqs(
                shown, gpu_bytes, gname) * max_model_len)
        if any(lay.token_bound() is not None for lay in kinds):
            # Only windows and chunks depend on it: say which default was taken.
            notes.append(f"max_num_batched_tokens {max_num_batched_tokens:,}: vLLM {shown}'s "
                         f"default for "
                         f"{'vllm serve' if usage_context == 'serve' else 'the LLM class'}"
                         + (" on an 80 GiB H100 (no GPU given)" if assumed else
                            f" on {gname or f'a {gpu_bytes / GiB:.0f} GiB GPU'}"))
    mnbt = check_int("max_num_batched_tokens", max_num_batched_tokens, 1, MAX_CONTEXT)
    fmt = _cache_dtype(kv_dtype, scales, version)
    name = fmt.name
    sdtype = get_dtype(state_dtype, ("fp32", "fp16", "bf16"))
    conv = get_dtype(_mamba_dtype(mamba_cache_dtype, "--mamba-cache-dtype") or sdtype.name)
    asked_ssm = _mamba_dtype(mamba_ssm_cache_dtype, "--mamba-ssm-cache-dtype")
    # 'auto' for a state whose model fixes its format (Kimi's KDA: float32) is that format
    fixed = sorted({lay.ssm_dtype for lay in kinds
                    if isinstance(lay, RecurrentState) and lay.ssm_dtype})
    ssm = get_dtype(asked_ssm or (fixed[0] if len(fixed) == 1 else conv.name))
    has_state = any(lay.state_elements for lay in kinds)
    hybrid = has_state and any(lay.stores_tokens for lay in kinds)
    asked_block = block_size
    block_line = ""
    if not has_state and mla_block_rule:
        block_size, block_line = mla_block_size(spec.layers, block_size, version, gpu_name, fmt)
        on = gpu_name or ASSUMED_GPU[1] + " (no GPU given)"
        mla = any(lay.kind == "mla" for lay in kinds)
        if block_line:
            notes.append(f"MLA block size {block_size} tokens on {on}, as vLLM "
                         f"{'.'.join(map(str, version))} picks it for its attention kernel "
                         f"(it logs \"{block_line}\")")
        elif mla and gpu_generation(gpu_name) == "rocm":
            notes.append("the block size ROCm's MLA kernels take is not modelled: blocks of "
                         f"{block_size} tokens as given")
        elif mla and gpu_generation(gpu_name) == "hopper" and version >= (0, 18, 0) \
                and block_size == DEFAULT_BLOCK_SIZE:
            notes.append(f"MLA on {on}: FlashAttention MLA takes blocks of 16 tokens for a "
                         "16-bit cache (vLLM up to 0.17.x forced 64 for FlashMLA; an FP8 cache "
                         "still gets 64)")
    if mamba_cache_mode is None:
        mode = mamba_cache_mode_of(version, enable_prefix_caching, hybrid, architecture) \
            if has_state else "none"
    elif mamba_cache_mode in ("none", "align", "all"):
        mode = mamba_cache_mode
    else:
        raise ValueError(f"mamba_cache_mode must be none, align or all, got "
                         f"{str(mamba_cache_mode)[:20]!r}")
    if mode == "all" and has_state:
        raise ValueError("mamba_cache_mode 'all' (prefix caching on a model with Mamba "
                         "prefix-caching support, vLLM 0.15.0-0.27.x) is not modelled: its "
                         "block size follows the Mamba chunk size; give "
                         "--no-enable-prefix-caching or vLLM 0.28.0 on")
    checkpoint = bool(gdn_prefill_checkpoint) and mode == "align" and \
        fact("gdn_prefill_checkpoint", version) and \
        any(getattr(lay, "flavor", "") == "gated_deltanet" for lay in kinds)
    state_blocks = 1 if mode == "none" else 2 + int(checkpoint)
    alignment = 16 if fact("hybrid_block_alignment", version) == "16" else max(16, block_size)
    if checkpoint:
        alignment = math.lcm(alignment, 64)
    if any(lay.kind == "mla" for lay in kinds) and \
            any(lay.state_elements for lay in kinds):
        # MLA beside recurrent layers (Kimi-Linear): the raised attention block must suit the
        # MLA kernel, which on Hopper (FlashMLA) takes blocks of 64 tokens (vLLM's CUDA platform
        # forces 64 for FlashMLA; CUTLASS MLA on Blackwell takes 128:
        # docs/engine-facts.md#mla-block-size)
        alignment = math.lcm(alignment, 64)
        notes.append("MLA with recurrent layers: the attention block is a multiple of 64 tokens "
                     "(FlashMLA on Hopper; CUTLASS MLA on Blackwell needs 128)")
    layers = list(spec.layers)
    if num_draft_layers:
        # A draft model (EAGLE adds one decoder layer) keeps its cache in the same pool, with
        # the target's geometry and full attention.
        ref = next((lay for lay in spec.kv_layers if not isinstance(lay, MLALatent)), None)
        if ref is None:
            raise ValueError("draft layers need an attention layer to copy the geometry from")
        draft = FullAttention(kv_heads=ref.kv_heads, head_dim=ref.head_dim,
                              v_head_dim=ref.v_head_dim, q_heads=ref.q_heads)
        layers += [draft] * num_draft_layers
    if tp > 1:  # validates tp against the KV heads; once per distinct layer
        split: dict = {}
        layers = [split.get(id(lay)) or split.setdefault(id(lay), lay.split(tp))
                  for lay in layers]
    parts = pp_partition(len(spec.layers), pp)
    stages, start = [], 0
    for i, count in enumerate(parts):
        positions = list(range(start, start + count))
        if i == pp - 1:
            positions += list(range(len(spec.layers), len(layers)))  # drafts: the last stage
        stages.append(positions)
        start += count
    # A window (or chunk) reserves room for the tokens in flight: one batch, or two under the
    # asynchronous scheduling of newer releases (with pipeline stages: one per stage).
    batches = fact("in_flight_batches", version)
    in_flight = mnbt * (batches if pp == 1 else max(pp, 1) if batches > 1 else 1)
    gkw = dict(block_size=block_size, fmt=fmt, state_dtypes=(conv, ssm), alignment=alignment,
               threshold=fact("group_threshold", version), version=version)
    if pp > 1 and fact("pp_grouping", version) == "whole model":
        # v0.11.0 on: groups from the whole model; each stage's block holds only its own layers
        # of each group; every stage takes the smallest num_blocks of all.
        g = _grouping(layers, **gkw)
        per_req = _per_request(g, max_model_len, in_flight, state_blocks)
        stage_blocks = []
        for positions in stages:
            mine = set(positions)
            slots = max(len(mine.intersection(group.members)) for group in g.groups)
            per_block = g.page_bytes * max(1, slots) if not g.uniform else sum(
                g.block_size * _vllm_bytes_per_token(layers[i], fmt)
                for i in positions if layers[i].stores_tokens)
            stage_blocks.append(available_bytes // max(1, per_block))
        index = min(range(pp), key=lambda i: stage_blocks[i])
        num_blocks = stage_blocks[index]
        notes.append("pipeline stages share one grouping of the whole model (vLLM 0.11.0 on); "
                     "the stage with the fewest blocks sets the numbers")
        bind = g
    else:
        configs = []
        for positions in stages:
            g = _grouping([layers[i] for i in positions], **gkw)
            configs.append((g, available_bytes // g.block_bytes,
                            _per_request(g, max_model_len, in_flight, state_blocks)))
        stage_blocks = [c[1] for c in configs]
        index = min(range(len(configs)),
                    key=lambda i: configs[i][1] / max(1, sum(configs[i][2])))
        bind, num_blocks, per_req = configs[index]
    per_request = sum(per_req)
    conc = num_blocks / per_request if per_request else 0.0
    if fact("tokens_line", version) == "concurrency":
        tokens = int(conc * max_model_len)
        formula = "int(max_concurrency x max_model_len)"
    else:
        tokens = num_blocks // len(bind.groups) * bind.block_size
        formula = "num_blocks // groups x block_size"
    notes = list(bind.notes) + notes
    # Say the engine conventions these numbers rest on.
    if batches > 1 and any(r > 0 and g.spec.token_bound() is not None
                           for g, r in zip(bind.groups, per_req, strict=True)):
        notes.append(f"each window or chunk reserves room for {batches} x max_num_batched_tokens "
                     f"({in_flight:,} tokens in flight): asynchronous scheduling, vLLM 0.26.0 on")
    if any(g.spec.state_elements for g in bind.groups):
        notes.append(f"recurrent state: conv in {conv.name.upper()}, SSM in {ssm.name.upper()}")
        if mode == "none":
            notes.append("a recurrent state takes one block per request: prefix caching off "
                         "(mamba_cache_mode 'none')")
        else:
            notes.append(f"prefix caching on (mamba_cache_mode 'align'): each recurrent group "
                         f"keeps {state_blocks} blocks per request"
                         + (" (2 + one prefill checkpoint of FlashInfer's Gated DeltaNet)"
                            if checkpoint else ""))
            if fact("gdn_prefill_checkpoint", version) and not checkpoint and any(
                    getattr(lay, "flavor", "") == "gated_deltanet" for lay in kinds):
                notes.append("on Hopper (or Blackwell with CUDA 13) vLLM 0.33.0's FlashInfer "
                             "Gated DeltaNet prefill keeps a third block and aligns blocks to "
                             "64 tokens: set gdn_prefill_checkpoint (--gdn-prefill-checkpoint)")
            if fact("mamba_cache_mode", version) == "all or align" and architecture is None:
                notes.append("vLLM 0.15.0-0.27.x uses mamba_cache_mode 'all' instead for "
                             + ", ".join(_MAMBA_ALL_MODE) + " (not modelled)")
    if pp > 1:
        notes.append(f"pipeline stages hold {', '.join(map(str, parts))} layers")
    groups = tuple(Group(kind=g.kind, layers=len(g.members), padding=g.padding,
                         blocks_per_request=r,
                         span=(g.spec.vllm_group_key() or (None, None))[1] or 0,
                         block_size=g.block_size)
                   for g, r in zip(bind.groups, per_req, strict=True))
    return VllmPrediction(
        available_bytes=available_bytes, max_model_len=max_model_len,
        block_size=bind.block_size, requested_block_size=asked_block,
        block_size_line=block_line,
        page_bytes=bind.page_bytes, group_size=bind.group_size, groups=groups,
        padding_layers=bind.padding_layers, padding_waste_pct=bind.padding_waste_pct,
        state_page_padding_pct=bind.state_page_padding_pct, num_blocks=num_blocks,
        blocks_per_request=per_request, max_concurrency=conc,
        kv_cache_tokens=tokens, tokens_formula=formula, stage=index,
        vllm_version=".".join(map(str, version)), kv_cache_dtype=name,
        stage_blocks=tuple(stage_blocks), notes=tuple(notes))


def _default_mnbt(kw: dict, max_model_len: int | None) -> int:
    """predict()'s default max_num_batched_tokens for these keywords (before the
    multimodal floor is applied by predict itself)."""
    assumed = kw.get("gpu_memory_bytes") is None
    gpu_bytes, gname = ASSUMED_GPU if assumed else (kw["gpu_memory_bytes"], kw.get("gpu_name"))
    tokens = default_max_num_batched_tokens(
        kw.get("vllm_version"), gpu_bytes, gname,
        usage_context=kw.get("usage_context", "serve"), max_model_len=max_model_len)
    floor = kw.get("mm_batch_tokens")
    if floor and floor > tokens and fact("mm_prefix_lm_batch_floor", kw.get("vllm_version")):
        tokens = floor
        if max_model_len:
            tokens = min(tokens, default_max_num_seqs(kw.get("vllm_version"), gpu_bytes,
                                                      gname) * max_model_len)
    return tokens


def estimate_max_model_len(spec: ModelSpec, *, available_bytes: int, **kw) -> int | None:
    """The longest max_model_len one request of which fits in the pool, as vLLM's
    estimate_max_model_len finds it by bisection (at most 10^8 tokens); None when a request's
    blocks stop growing (every layer keeps a bounded number of tokens), 0 when not even one
    token fits."""
    if kw.get("max_num_batched_tokens") is None:
        # vLLM searches with its scheduler's one max_num_batched_tokens: fix the default once.
        kw = {**kw, "max_num_batched_tokens": _default_mnbt(kw, None)}
    try:
        key = tuple(sorted(kw.items()))
        hash((spec, key))
    except TypeError:  # an unhashable argument: no memo
        return _estimate_max_model_len(spec, available_bytes, **kw)
    return _estimate_memo(spec, available_bytes, key)


@functools.lru_cache(maxsize=16)
def _estimate_memo(spec: ModelSpec, available_bytes: int, key: tuple) -> int | None:
    """The bisection, once per model, pool and engine settings: it takes about 28 predictions,
    and a Budget page whose context does not fit asks for it again at every point of its
    concurrency curve (42 x 28 predictions of a 1,024-layer model took 8 s)."""
    return _estimate_max_model_len(spec, available_bytes, **dict(key))


def _estimate_max_model_len(spec: ModelSpec, available_bytes: int, **kw) -> int | None:
    def blocks(n: int) -> tuple[int, int]:
        p = predict(spec, available_bytes=available_bytes, max_model_len=n, **kw)
        return p.blocks_per_request, p.num_blocks

    null = fact("null_block", kw.get("vllm_version"))  # v0.29.0 on: the null block first

    def fits(n: int) -> bool:
        need, have = blocks(n)
        return need <= have - null

    hi = MAX_CONTEXT
    if fits(hi):
        # Bounded layers only (windows, states): a request never needs more, so nothing ever
        # fills the pool. Otherwise the answer is at least 10^8 tokens, as far as vLLM goes.
        return None if blocks(hi)[0] == blocks(hi // 2)[0] else hi
    if not fits(1):
        return 0
    return last_true(fits, 1, hi)


def startup_error(spec: ModelSpec, *, available_bytes: int, max_model_len: int,
                  prediction: VllmPrediction | None = None, **kw) -> str | None:
    """vLLM's own refusal to start when one request of max_model_len does not fit (None when it
    fits), in the wording of the chosen version, with its estimate of the longest max_model_len
    that would (tests/data/vllm-facts.md, Q7). ``prediction``: predict()'s result for these
    same arguments, when the caller has it already."""
    version = kw.get("vllm_version")
    if kw.get("max_num_batched_tokens") is None:
        kw = {**kw, "max_num_batched_tokens": _default_mnbt(kw, max_model_len)}
    p = prediction or predict(spec, available_bytes=available_bytes,
                              max_model_len=max_model_len, **kw)
    if p.blocks_per_request <= p.num_blocks - fact("null_block", version):
        return None
    need = p.blocks_per_request * (p.page_bytes * p.group_size if len(p.groups) else p.page_bytes)
    est = estimate_max_model_len(spec, available_bytes=available_bytes, **kw)
    v = resolve_version(version)
    who = fact("error_wording", version)
    text = (f"To serve at least one request with the {who} max seq len ({max_model_len}), "
            f"({need / GiB:.2f} GiB KV cache is needed, which is larger than the available KV "
            f"cache memory ({available_bytes / GiB:.2f} GiB). ")
    if est:
        text += f"Based on the available memory, the estimated maximum model length is {est}. "
    text += ("Try increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU "
             "backend) or decreasing `max_model_len` when initializing the engine."
             if v >= (0, 22, 0) else
             "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
             "initializing the engine.")
    if v >= (0, 20, 0):
        text += (" See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more "
                 "details.")
    return text


def available_bytes(*, total_bytes: int, gpu_mem_util: float, weights_bytes: int,
                    activation_bytes: int, non_torch_bytes: int,
                    cuda_graph_bytes: int = 0) -> int:
    """vLLM's "Available KV cache memory" on one GPU: ceil(total x util) minus the weights, the
    peak activation of its profiling run, memory outside torch (CUDA context, NCCL, cuBLAS
    workspaces) and, in versions that profile it before sizing the cache, CUDA-graph memory."""
    total_bytes = check_int("GPU memory (bytes)", total_bytes, 1, 2**50)
    for name, v in (("weights", weights_bytes), ("activation peak", activation_bytes),
                    ("non-torch memory", non_torch_bytes), ("CUDA-graph memory", cuda_graph_bytes)):
        check_int(f"{name} (bytes)", v, 0, 2**50)
    if not 0 < gpu_mem_util <= 1 or gpu_mem_util != gpu_mem_util:
        raise ValueError(
            f"gpu_memory_utilization must be above 0 and at most 1, got {gpu_mem_util}"
        )
    requested = math.ceil(total_bytes * gpu_mem_util)
    return requested - weights_bytes - activation_bytes - non_torch_bytes - cuda_graph_bytes


# -- reading a start-up log ---------------------------------------------------------------------

_PATTERNS = {
    "version": re.compile(r"LLM engine \(v([0-9][0-9a-z.+-]*)\)"),
    "model": re.compile(r"model='([^']+)'"),
    "max_model_len": re.compile(r"max_(?:seq|model)_len(?:=|': )([0-9_,]+)"),
    "tp": re.compile(r"tensor_parallel_size(?:=|': )([0-9]+)"),
    "pp": re.compile(r"pipeline_parallel_size(?:=|': )([0-9]+)"),
    "kv_cache_dtype": re.compile(r"kv_cache_dtype(?:=|': ')([a-z0-9_]+)"),
    "block_size": re.compile(r"\bblock_size(?:=|': )([0-9]+)"),
    "max_num_batched_tokens": re.compile(r"max_num_batched_tokens(?:=|': )([0-9]+)"),
    "enable_prefix_caching": re.compile(r"enable_prefix_caching(?:=|': )(True|False)"),
    "mamba_cache_dtype": re.compile(r"'mamba_cache_dtype': '([a-z0-9]+)'"),
    "mamba_ssm_cache_dtype": re.compile(r"mamba_ssm_cache_dtype(?:': '| to ')([a-z0-9]+)'"),
    "mamba_cache_mode": re.compile(r"Mamba cache mode is set to '([a-z]+)'"),
    "available_gib": re.compile(r"Available KV cache memory:\s*([0-9.]+)\s*GiB"),
    # vllm-ascend (worker.py / worker_v1.py, up to early 2026): exact bytes.
    "available_bytes": re.compile(r"Available memory:\s*([0-9]+),\s*total memory:\s*[0-9]+"),
    # "GPU" on CUDA; from v0.30.0 the device type ("NPU", "XPU", ...), "+ host" with HiSparse.
    "tokens": re.compile(r"\b[A-Z]{2,6}(?: \+ host)?\s+KV cache size:\s*([0-9,]+)\s*tokens"),
    "concurrency": re.compile(
        r"Maximum concurrency for\s+([0-9,]+)\s+tokens per request:\s*([0-9.]+)\s*x"),
    "raised_block": re.compile(r"Setting attention block size to\s+([0-9]+)\s+tokens"),
    # an MLA model's kernel block: "Forcing kv cache block size to 64 for FlashMLA backend."
    # (to v0.17.x), "Setting kv cache block size to 64 for FLASHMLA backend(s)." (v0.18.0 on)
    "mla_block": re.compile(r"(?:Forcing|Setting) kv cache block size to\s+([0-9]+)\s+for"),
}
MAX_LOG_BYTES = 5_000_000
# Bounds of the numbers a real start-up log prints; past them a pasted log is refused by line.
_LOG_MAX_GIB = 2**20  # 1 PiB: predict() takes at most 2**50 bytes
_LOG_MAX_INT = 10**12  # tokens, lengths, sizes: far above any real engine's
_LOG_MAX_CONCURRENCY = 1e12
_LOG_LINES = {"available_gib": "Available KV cache memory", "tokens": "GPU KV cache size",
              "concurrency": "Maximum concurrency", "concurrency_len": "Maximum concurrency",
              "raised_block": "Setting attention block size",
              "available_bytes": "Available memory"}
_LOG_TEXT = ("version", "model", "kv_cache_dtype", "mamba_cache_dtype", "mamba_ssm_cache_dtype",
             "mamba_cache_mode")


def _log_number(key: str, text: str, *, whole: bool, maximum: float) -> int | float:
    """One number of the log, or ValueError naming the line: a pasted log may hold '1.2.3', a
    400-digit value (float() gives inf) or more digits than int() converts."""
    name = _LOG_LINES.get(key, key)
    shown = text if len(text) <= 40 else text[:40] + "..."
    try:
        value = int(text.replace(",", "").replace("_", "")) if whole else float(text)
    except ValueError:
        value = None
    if value is None or (isinstance(value, float) and not math.isfinite(value)) or \
            not 0 <= value <= maximum:  # an int is compared as an int: float(10**400) raises
        what = "a finite size" if key == "available_gib" else "a plausible number"
        unit = " GiB" if key == "available_gib" else ""
        raise ValueError(f"the log's '{name}' value {shown!r} is not {what} of at most "
                         f"{maximum:,.0f}{unit}; paste the line as vLLM printed it")
    return value


def parse_log(text: str) -> dict:
    """Settings and capacity lines found in a vLLM start-up log (the last of each). The
    memory line is vLLM's "Available KV cache memory: X GiB" (rounded) or vllm-ascend's
    "Available memory: N, total memory: M" (exact bytes, then ``available_bytes``)."""
    if len(text) > MAX_LOG_BYTES:
        raise ValueError(f"the log is larger than {MAX_LOG_BYTES:,} bytes; paste the start-up "
                         "part only")
    out: dict = {}
    for key, pat in _PATTERNS.items():
        found = pat.findall(text)
        if not found:
            continue
        val = found[-1]
        if key == "concurrency":
            out["concurrency_len"] = _log_number("concurrency_len", val[0], whole=True,
                                                 maximum=_LOG_MAX_INT)
            out["concurrency"] = _log_number(key, val[1], whole=False,
                                             maximum=_LOG_MAX_CONCURRENCY)
        elif key in _LOG_TEXT:
            out[key] = val
        elif key == "enable_prefix_caching":
            out[key] = val == "True"
        elif key == "available_gib":
            # one line per rank with TP/PP
            out["available_gib_all"] = [_log_number(key, v, whole=False, maximum=_LOG_MAX_GIB)
                                        for v in found]
            out[key] = out["available_gib_all"][-1]
        elif key == "available_bytes":
            out["available_bytes_all"] = [_log_number(key, v, whole=True, maximum=2**50)
                                          for v in found]
            out[key] = out["available_bytes_all"][-1]
        else:
            out[key] = _log_number(key, val, whole=True, maximum=_LOG_MAX_INT)
    if "available_gib" not in out and "available_bytes" not in out:
        raise ValueError("no 'Available KV cache memory: X GiB' line (nor vllm-ascend's "
                         "'Available memory: N, total memory: M') in this log; paste the lines "
                         "vLLM prints while it starts")
    return out


@dataclass(frozen=True, kw_only=True)
class LogLine:
    name: str
    logged: float
    predicted: float
    low: float  # the range of predictions the rounded GiB line allows
    high: float
    agrees: bool
    why: str

    def to_dict(self) -> dict:
        return asdict(self)


_KV_FROM_LOG = {"auto": "bf16", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}


def log_settings(log: dict) -> dict:
    """predict() keywords for the settings a parsed log states (vLLM's defaults otherwise;
    block size 128 on Ascend, vllm-ascend's refresh_block_size)."""
    ascend = "available_bytes" in log and "available_gib" not in log
    kw = dict(max_model_len=log.get("max_model_len") or log.get("concurrency_len"),
              tp=log.get("tp", 1), pp=log.get("pp", 1),
              block_size=log.get("block_size", 128 if ascend else 16),
              kv_dtype=_KV_FROM_LOG.get(log.get("kv_cache_dtype", "auto"),
                                        log.get("kv_cache_dtype", "auto")),
              max_num_batched_tokens=log.get("max_num_batched_tokens"),
              vllm_version=log.get("version"))
    if "mla_block" in log:  # the block vLLM chose for its MLA kernel, as logged
        kw["block_size"] = log["mla_block"]
        kw["mla_block_rule"] = False
    for key in ("enable_prefix_caching", "mamba_cache_dtype", "mamba_ssm_cache_dtype"):
        if key in log:
            kw[key] = log[key]
    if log.get("mamba_cache_mode") in ("none", "align", "all"):
        kw["mamba_cache_mode"] = log["mamba_cache_mode"]
    return kw


def _log_bounds(log: dict) -> tuple[int, int, int]:
    """(middle, lowest, highest) available bytes the log's memory line allows: exact on Ascend,
    otherwise the 0.01 GiB the line is rounded to; the smallest rank binds."""
    if "available_bytes" in log and "available_gib" not in log:
        b = min(log.get("available_bytes_all") or [log["available_bytes"]])
        return b, b, b
    gib = min(log.get("available_gib_all") or [log["available_gib"]])
    return (round(gib * GiB), max(0, math.ceil((gib - 0.005) * GiB)),
            min(2**50, math.floor((gib + 0.005) * GiB) - 1))


def _check_log(spec: ModelSpec, log: dict, kw: dict):
    """(middle prediction, lines) for one set of predict() keywords."""
    mid_b, lo_b, hi_b = _log_bounds(log)
    mid = predict(spec, available_bytes=mid_b, **kw)
    lo = predict(spec, available_bytes=lo_b, **kw)
    hi = predict(spec, available_bytes=hi_b, **kw)
    exact = lo_b == hi_b
    rounding = ("vllm-ascend prints the exact bytes" if exact else
                "the GiB line is rounded to 0.01 GiB, so the prediction is a range")
    lines = []
    if "tokens" in log:
        ok = lo.kv_cache_tokens <= log["tokens"] <= hi.kv_cache_tokens
        lines.append(LogLine(name="GPU KV cache size (tokens)", logged=log["tokens"],
                             predicted=mid.kv_cache_tokens, low=lo.kv_cache_tokens,
                             high=hi.kv_cache_tokens, agrees=ok, why=rounding))
    if "concurrency" in log:
        ok = round(lo.max_concurrency, 2) - 0.005 <= log["concurrency"] <= \
            round(hi.max_concurrency, 2) + 0.005
        lines.append(LogLine(name=f"Maximum concurrency for {kw['max_model_len']:,} tokens",
                             logged=log["concurrency"], predicted=round(mid.max_concurrency, 2),
                             low=round(lo.max_concurrency, 2),
                             high=round(hi.max_concurrency, 2), agrees=ok, why=rounding))
    if "raised_block" in log:
        ok = log["raised_block"] == mid.block_size
        lines.append(LogLine(name="attention block size", logged=log["raised_block"],
                             predicted=mid.block_size, low=mid.block_size, high=mid.block_size,
                             agrees=ok, why="raised so an attention page holds a state page"))
    return mid, lines


def _alternatives(spec: ModelSpec, log: dict, kw: dict):
    """(description, predict() keywords) for the settings a log most often hides: prefix
    caching ('align' mode), the state dtypes, max_num_batched_tokens, the GDN checkpoint, the
    block size."""
    has_state = any(lay.state_elements for lay in spec.layers)
    windowed = any(lay.token_bound() is not None for lay in spec.layers)
    out: list[tuple[str, dict[str, Any]]] = []
    if has_state:
        version = resolve_version(kw.get("vllm_version"))
        pc = kw.get("enable_prefix_caching")
        if pc is None:
            try:
                pc = mamba_cache_mode_of(version, None) != "none"
            except ValueError:
                pc = False
        out.append((f"prefix caching {'off' if pc else 'on'} (recurrent groups keep "
                    f"{'1 block' if pc else '2 blocks'} a request)",
                    {"enable_prefix_caching": not pc, "mamba_cache_mode": None}))
        for conv, ssm, text in (("auto", "float32", "SSM state float32, conv state in the "
                                 "model's dtype (--mamba-ssm-cache-dtype float32)"),
                                ("float32", "auto", "both states float32 "
                                 "(--mamba-cache-dtype float32)"),
                                ("auto", "bfloat16", "SSM state in the model's dtype "
                                 "(--mamba-ssm-cache-dtype bfloat16)")):
            if (kw.get("mamba_cache_dtype", "auto"), kw.get("mamba_ssm_cache_dtype", "auto")) \
                    != (conv, ssm):
                out.append((text, {"mamba_cache_dtype": conv, "mamba_ssm_cache_dtype": ssm}))
        if fact("gdn_prefill_checkpoint", version) and not kw.get("gdn_prefill_checkpoint"):
            out.append(("the FlashInfer Gated DeltaNet prefill checkpoint (Hopper/Blackwell, "
                        "--gdn-prefill-checkpoint)", {"gdn_prefill_checkpoint": True}))
    if windowed:
        for mnbt in (2048, 2496, 8192, 16384):
            if mnbt != kw.get("max_num_batched_tokens"):
                out.append((f"max_num_batched_tokens {mnbt:,} (--max-num-batched-tokens)",
                            {"max_num_batched_tokens": mnbt}))
    for bs in (16, 128):
        if bs != kw.get("block_size") and not has_state:
            out.append((f"block size {bs} (--block-size)", {"block_size": bs}))
    return out


def diagnose_log(spec: ModelSpec, log: dict, **kw) -> list[str]:
    """The single settings, one at a time, under which every capacity line of the log is
    reproduced: the likely real cause of a log that does not agree."""
    found = []
    for text, change in _alternatives(spec, log, kw):
        try:
            _, lines = _check_log(spec, log, {**kw, **change})
        except ValueError:
            continue
        if lines and all(line.agrees for line in lines):
            found.append(text)
    return found


def explain_log(spec: ModelSpec, log: dict, **overrides) -> tuple[VllmPrediction, list[LogLine]]:
    """Predict from the settings a log states and compare with its capacity lines.

    vLLM prints the available memory rounded to 0.01 GiB, so a prediction is made for both ends
    of that interval: a logged value inside the range agrees (vllm-ascend prints exact bytes).
    A line that does not agree names the setting that would reproduce the log, found by trying
    prefix caching on/off, the state dtypes, max_num_batched_tokens and the block size."""
    kw = log_settings(log)
    kw.update({k: v for k, v in overrides.items() if v is not None})
    if not kw["max_model_len"]:
        raise ValueError("the log does not state max_model_len; give --max-model-len")
    mid, lines = _check_log(spec, log, kw)
    if all(line.agrees for line in lines):
        return mid, lines
    causes = diagnose_log(spec, log, **kw)
    out = []
    for line in lines:
        if line.agrees:
            out.append(line)
            continue
        why = (("reproduced with " + " or ".join(causes) + ": the likely real setting")
               if causes else _why(mid, log, "tokens" if "tokens" in line.name else "other"))
        out.append(replace(line, why=why))
    return mid, out


def _why(p: VllmPrediction, log: dict, what: str) -> str:
    reasons = []
    if len(log.get("available_gib_all", [])) > 1:
        reasons.append("each rank prints its own memory line before the smallest is taken")
    if len(p.groups) > 1:
        reasons.append(f"hybrid grouping ({len(p.groups)} groups of {p.group_size} layers)")
    if what == "tokens":
        reasons.append(f"this vLLM version may print the tokens line another way (predicted "
                       f"with {p.tokens_formula}); set --vllm-version")
    reasons.append("a draft model's layers (speculative decoding) share the pool; set "
                   "--num-draft-layers")
    return "; ".join(reasons)
