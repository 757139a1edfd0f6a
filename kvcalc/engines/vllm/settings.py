"""vLLM's engine settings: its defaults by release and GPU (the block size, an MLA model's block
size for its attention kernel, max_num_seqs, max_num_batched_tokens, the Mamba cache mode), and
what a Deployment's engine arguments and cache format resolve to (``engine_settings``)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from ...cache.deployment import Deployment, EngineArgs
from ...config.limits import MAX_CONTEXT
from ...core.model import Layer, MLALatent, counted
from ...core.units import GiB, check_int
from .facts import Facts, fact, resolve_version
from .kv_cache import GroupingRules, KVFormat, cache_format, config_parts, layer_state_formats
from .speculative import speculative_state_blocks

# Tokens per block when --block-size is not given: vLLM's CacheConfig.DEFAULT_BLOCK_SIZE.
DEFAULT_BLOCK_SIZE = 16
ASSUMED_GPU = (80 * GiB, "NVIDIA H100 80GB HBM3")  # for vLLM's batch defaults when none given


USAGE_CONTEXTS = ("serve", "llm")  # vllm serve (UsageContext.OPENAI_API_SERVER), the LLM class

# -- the MLA block size, by release and GPU generation ---------------------------------------------
# The rules by release and GPU generation: docs/engine-facts.md#mla-block-size (vllm-facts Q16).


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


def mla_block_size(
    layers: Iterable[Layer],
    block_size: int,
    version: tuple[int, ...],
    gpu_name: str | None,
    fmt: KVFormat,
) -> tuple[int, str]:
    """(block size, the line vLLM logs or "") for a model whose cache layers are MLA. A
    ``block_size`` of 16 is vLLM's default, read as --block-size not set."""
    mla = [lay for lay in layers if isinstance(lay, MLALatent)]
    if not mla:
        return block_size, ""
    gen = gpu_generation(gpu_name)
    sparse = any(lay.extra is not None for lay in mla)
    if gen == "rocm":
        return block_size, ""  # ROCm's MLA backends choose otherwise: not modelled
    qk_nope = mla[0].qk_head_dim - mla[0].qk_rope_head_dim
    if fact(Facts.mla_block_rule, version) == "forced":
        if sparse:
            line = "Forcing kv cache block size to 64 for FlashMLASparse backend."
            return (64, line) if block_size != 64 else (block_size, "")
        if gen == "hopper" and block_size % 64:
            return 64, "Forcing kv cache block size to 64 for FlashMLA backend."
        if gen == "blackwell":
            if fact(Facts.blackwell_flashinfer_mla, version) and qk_nope == 128:
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
        backend, size = (
            ("FLASHINFER_MLA", 32) if qk_nope in (64, 128, 192) else ("CUTLASS_MLA", 128)
        )
    else:
        backend, size = "TRITON_MLA", 16
    if size == block_size:
        return block_size, ""
    plural = fact(Facts.mla_block_line_plural, version)
    return size, f"Setting kv cache block size to {size} for {backend} backend{plural}."


def _batch_tier(version: tuple[int, ...], total_bytes: int, gpu_name: str | None) -> str:
    """Which row of vLLM's batch defaults a GPU falls in (EngineArgs.get_batch_defaults)."""
    name = (gpu_name or "").lower()
    if fact(Facts.batch_tier_by, version) == "name":
        return "big" if ("h100" in name or "h200" in name) else "small"
    if fact(Facts.huge_batch_tier, version) and total_bytes >= 160 * GiB:
        return "huge"
    big = total_bytes >= 70 * GiB and not (fact(Facts.a100_small_tier, version) and "a100" in name)
    if fact(Facts.gb10_small_tier, version) and "gb10" in name:
        big = False
    return "big" if big else "small"


def default_max_num_seqs(version: str | None, total_bytes: int, gpu_name: str | None = None) -> int:
    """vLLM's default max_num_seqs on one GPU of total_bytes (both usage contexts agree):
    1,024 on a GPU of 70 GiB or more (from v0.9.0 not an A100), else 256 (PRs #16158, #17073,
    #17885); 1,024 on every GPU up to v0.8.3."""
    v = resolve_version(version)
    if not fact(Facts.max_num_seqs_by_tier, v):
        return 1024
    return 256 if _batch_tier(v, total_bytes, gpu_name) == "small" else 1024


# max_num_batched_tokens by tier: (LLM class, vllm serve), EngineArgs.get_batch_defaults: huge
# 160 GiB or more (v0.28.0), big 70 GiB or more (not an A100 from v0.9.0), else small.
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
    if not isinstance(config, dict) or not fact(Facts.mm_prefix_lm_batch_floor, version):
        return None
    _, text, _ = config_parts(config)
    if not str(config.get("model_type", "")).startswith("gemma4"):
        return None
    if text.get("use_bidirectional_attention") != "vision" or "vision_config" not in config:
        return None
    vision = config.get("vision_config") or {}
    image = vision.get("default_output_length", 0) if isinstance(vision, dict) else 0
    tokens = {"video": _GEMMA4_VIDEO_TOKENS, "image": image if isinstance(image, int) else 0}
    modality = max(tokens, key=tokens.__getitem__)
    return tokens[modality], modality


def default_max_num_batched_tokens(
    version: str | None,
    total_bytes: int,
    gpu_name: str | None = None,
    *,
    usage_context: str = "serve",
    config: dict | None = None,
    max_model_len: int | None = None,
    max_num_seqs: int | None = None,
    mm_batch_tokens: int | None = None,
) -> int:
    """vLLM's default max_num_batched_tokens (EngineArgs._set_default_args /
    _set_default_max_num_seqs_and_batched_tokens_args; tests/data/vllm-facts.md, Q6): the GPU's
    row of _BATCH_TOKENS, raised for a multimodal prefix-LM model (Gemma 4, v0.22.0) to its
    costliest item (``config``'s, or ``mm_batch_tokens``), then at most max_num_seqs x
    max_model_len (when both are given)."""
    if usage_context not in USAGE_CONTEXTS:
        raise ValueError(
            f"usage context must be one of {', '.join(USAGE_CONTEXTS)}, got "
            f"{str(usage_context)[:20]!r}"
        )
    v = resolve_version(version)
    llm, serve = _BATCH_TOKENS[_batch_tier(v, total_bytes, gpu_name)]
    tokens = serve if usage_context == "serve" else llm
    floor = mm_batch_floor(config, version)
    if fact(Facts.mm_prefix_lm_batch_floor, v):
        tokens = max(tokens, floor[0] if floor else 0, mm_batch_tokens or 0)
    if max_model_len:
        seqs = max_num_seqs or default_max_num_seqs(version, total_bytes, gpu_name)
        tokens = min(tokens, seqs * max_model_len)
    return tokens


# -- the Mamba cache mode ------------------------------------------------------------------------

# v0.27.1: the model classes with SupportsMambaPrefixCaching, which get mamba_cache_mode 'all'
# when prefix caching is on (v0.15.0-v0.27.x).
MAMBA_ALL_MODE = (
    "FalconH1ForCausalLM",
    "GraniteMoeHybridForCausalLM",
    "JambaForCausalLM",
    "MambaForCausalLM",
    "Mamba2ForCausalLM",
    "NemotronHForCausalLM",
    "Zamba2ForCausalLM",
)


def mamba_cache_mode_of(
    vllm_version: str | tuple | None = None,
    enable_prefix_caching: bool | None = None,
    hybrid: bool = True,
    architecture: str | None = None,
) -> str:
    """vLLM's mamba_cache_mode: 'none' with prefix caching off; with it on 'all' for models
    with Mamba prefix-caching support (v0.15.0-v0.27.x), else 'align' (tests/data/
    vllm-facts.md, Q11). ``enable_prefix_caching`` None: the version's default, on for hybrid
    models from v0.28.0 (PR #50991) and never for attention-free ones."""
    version = vllm_version if isinstance(vllm_version, tuple) else resolve_version(vllm_version)
    if enable_prefix_caching is None:
        enable_prefix_caching = hybrid and fact(Facts.hybrid_prefix_caching, version)
    if not enable_prefix_caching:
        return "none"
    mode = fact(Facts.mamba_cache_mode, version)
    if mode is None:
        raise ValueError(
            "prefix caching with recurrent layers is not modelled before vLLM "
            "0.15.0 (no mamba_cache_mode); give --no-enable-prefix-caching or a "
            "newer version"
        )
    if mode == "all or align":
        return "all" if architecture in MAMBA_ALL_MODE else "align"
    return mode


# -- what a deployment's engine arguments resolve to ---------------------------------------------


@dataclass(frozen=True, kw_only=True)
class EngineSettings(GroupingRules):
    """What predict()'s arguments resolve to on one vLLM version and GPU: the rules of its
    grouping, and the rest."""

    max_num_batched_tokens: int
    requested_block_size: int
    block_size_line: str  # what vLLM logs when it sets an MLA model's block size
    mamba_cache_mode: str
    checkpoint: bool  # a Gated DeltaNet prefill checkpoint is kept
    state_blocks: int  # blocks a recurrent group keeps per request
    batches: int  # batches of max_num_batched_tokens a window reserves room for
    in_flight: int  # the tokens in flight
    architecture: str | None


def gpu_memory(dep: Deployment) -> tuple[int | None, str | None]:
    """(memory, name) of the deployment's GPU for vLLM's defaults; (None, None): none given."""
    if dep.memory_bytes is not None:
        return dep.memory_bytes, dep.gpu_name
    return (dep.gpu.memory_bytes, dep.gpu.name) if dep.gpu else (None, None)


def batched_tokens_default(
    dep: Deployment,
    version: tuple[int, ...],
    max_model_len: int | None,
    mm_batch_tokens: int | None,
) -> int:
    """vLLM's default max_num_batched_tokens for the usage context and GPU (an 80 GiB H100 when
    none is given), raised to the multimodal floor and capped at max_num_seqs x max_model_len,
    as EngineArgs does (no cap without a max_model_len)."""
    gpu_bytes, gname = gpu_memory(dep)
    if gpu_bytes is None:
        gpu_bytes, gname = ASSUMED_GPU
    return default_max_num_batched_tokens(
        ".".join(map(str, version)),
        gpu_bytes,
        gname,
        usage_context=dep.engine.usage_context,
        max_model_len=max_model_len,
        mm_batch_tokens=mm_batch_tokens,
    )


def engine_settings(
    dep: Deployment,
    max_model_len: int,
    notes: list[str],
    *,
    architecture: str | None = None,
    mm_batch_tokens: int | None = None,
    mla_block_rule: bool = True,
) -> EngineSettings:
    """What ``dep``'s engine arguments and cache format resolve to on its vLLM version and GPU,
    as predict's docstring says. The defaults taken are said in ``notes``."""
    spec, engine, cache = dep.spec, dep.engine, dep.cache
    kinds = [lay for lay, _ in counted(spec.layers)]
    version = resolve_version(engine.version)
    batched = engine.max_num_batched_tokens
    if batched is None:
        batched = batched_tokens_default(dep, version, max_model_len, mm_batch_tokens)
        if any(lay.token_bound() is not None for lay in kinds):
            notes.append(_batched_tokens_note(dep, version, batched))
    batched = check_int("max_num_batched_tokens", batched, 1, MAX_CONTEXT)
    fmt = cache_format(cache.kv_dtype, cache.scales, version)
    block_size, block_line = engine.block_size, ""
    if not any(lay.state_elements for lay in kinds) and mla_block_rule:
        block_size, block_line = _mla_block(dep, kinds, version, fmt, notes)
    mode, checkpoint, state_blocks, alignment = _state_mode(
        kinds, version, block_size, engine, architecture, notes
    )
    if state_blocks:
        state_blocks += speculative_state_blocks(spec, version)
    # A window (or chunk) reserves room for the tokens in flight: one batch, or two under the
    # asynchronous scheduling of newer releases (with pipeline stages: one per stage).
    batches = fact(Facts.in_flight_batches, version)
    in_flight = batched * (batches if dep.pp == 1 else max(dep.pp, 1) if batches > 1 else 1)
    return EngineSettings(
        version=version,
        max_num_batched_tokens=batched,
        fmt=fmt,
        state_dtypes=layer_state_formats(kinds, cache, version),
        threshold=fact(Facts.group_threshold, version),
        block_size=block_size,
        requested_block_size=engine.block_size,
        block_size_line=block_line,
        mamba_cache_mode=mode,
        checkpoint=checkpoint,
        state_blocks=state_blocks,
        alignment=alignment,
        batches=batches,
        in_flight=in_flight,
        architecture=architecture,
    )


def _batched_tokens_note(dep: Deployment, version: tuple[int, ...], tokens: int) -> str:
    """The default max_num_batched_tokens taken, said where a window or chunk depends on it."""
    gpu_bytes, gname = gpu_memory(dep)
    return (
        f"max_num_batched_tokens {tokens:,}: vLLM {'.'.join(map(str, version))}'s default for "
        f"{'vllm serve' if dep.engine.usage_context == 'serve' else 'the LLM class'}"
        + (
            " on an 80 GiB H100 (no GPU given)"
            if gpu_bytes is None
            else f" on {gname or f'a {gpu_bytes / GiB:.0f} GiB GPU'}"
        )
    )


def _mla_block(
    dep: Deployment, kinds: list, version: tuple[int, ...], fmt: KVFormat, notes: list[str]
) -> tuple[int, str]:
    """The block size vLLM picks for an MLA model's attention kernel (mla_block_size), and the
    line it logs; said in the notes."""
    gpu_name = dep.gpu_name
    block_size, block_line = mla_block_size(
        dep.spec.layers, dep.engine.block_size, version, gpu_name, fmt
    )
    on = gpu_name or ASSUMED_GPU[1] + " (no GPU given)"
    mla_gen = any(lay.kind == "mla" for lay in kinds) and gpu_generation(gpu_name)
    if block_line:
        notes.append(
            f"MLA block size {block_size} tokens on {on}, as vLLM "
            f"{'.'.join(map(str, version))} picks it for its attention kernel "
            f'(it logs "{block_line}")'
        )
    elif mla_gen == "rocm":
        notes.append(
            "the block size ROCm's MLA kernels take is not modelled: blocks of "
            f"{block_size} tokens as given"
        )
    elif (
        mla_gen == "hopper"
        and fact(Facts.mla_block_rule, version) == "preferred"
        and block_size == DEFAULT_BLOCK_SIZE
    ):
        notes.append(
            f"MLA on {on}: FlashAttention MLA takes blocks of 16 tokens for a "
            "16-bit cache (vLLM up to 0.17.x forced 64 for FlashMLA; an FP8 cache "
            "still gets 64)"
        )
    return block_size, block_line


def _state_mode(
    kinds: list,
    version: tuple[int, ...],
    block_size: int,
    engine: EngineArgs,
    architecture: str | None,
    notes: list[str],
) -> tuple[str, bool, int, int]:
    """The Mamba cache mode, whether a Gated DeltaNet prefill checkpoint is kept, the blocks a
    recurrent group keeps per request, and the alignment of a hybrid model's block size."""
    has_state = any(lay.state_elements for lay in kinds)
    hybrid = has_state and any(lay.stores_tokens for lay in kinds)
    mode = engine.mamba_cache_mode
    if mode is None and has_state:
        mode = mamba_cache_mode_of(version, engine.enable_prefix_caching, hybrid, architecture)
    elif mode is None:
        mode = "none"
    elif mode not in ("none", "align", "all"):
        raise ValueError(f"mamba_cache_mode must be none, align or all, got {str(mode)[:20]!r}")
    if mode == "all" and has_state:
        raise ValueError(
            "mamba_cache_mode 'all' (prefix caching on a model with Mamba "
            "prefix-caching support, vLLM 0.15.0-0.27.x) is not modelled: its "
            "block size follows the Mamba chunk size; give "
            "--no-enable-prefix-caching or vLLM 0.28.0 on"
        )
    checkpoint = (
        bool(engine.gdn_prefill_checkpoint)
        and mode == "align"
        and fact(Facts.gdn_prefill_checkpoint, version)
        and any(getattr(lay, "flavor", "") == "gated_deltanet" for lay in kinds)
    )
    state_blocks = 1 if mode == "none" else 2 + int(checkpoint)
    alignment = 16 if fact(Facts.hybrid_block_alignment, version) == "16" else max(16, block_size)
    if checkpoint:
        alignment = math.lcm(alignment, 64)
    if any(lay.kind == "mla" for lay in kinds) and has_state:
        # MLA beside recurrent layers (Kimi-Linear): the raised attention block must suit the
        # MLA kernel, which on Hopper (FlashMLA) takes blocks of 64 tokens (vLLM's CUDA platform
        # forces 64 for FlashMLA; CUTLASS MLA on Blackwell takes 128:
        # docs/engine-facts.md#mla-block-size)
        alignment = math.lcm(alignment, 64)
        notes.append(
            "MLA with recurrent layers: the attention block is a multiple of 64 tokens "
            "(FlashMLA on Hopper; CUTLASS MLA on Blackwell needs 128)"
        )
    return mode, checkpoint, state_blocks, alignment
