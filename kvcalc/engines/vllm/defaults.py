"""vLLM's defaults that depend on the release and the GPU: the block size, an MLA model's block
size for its attention kernel, max_num_seqs and max_num_batched_tokens."""

from __future__ import annotations

import re

from ...core.units import GiB
from .facts import resolve_version
from .formats import CacheFormat

DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
# Tokens per block when --block-size is not given: vLLM's CacheConfig.DEFAULT_BLOCK_SIZE.
DEFAULT_BLOCK_SIZE = 16
ASSUMED_GPU = (80 * GiB, "NVIDIA H100 80GB HBM3")  # for vLLM's batch defaults when none given


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


def mla_block_size(
    layers, block_size: int, version: tuple[int, ...], gpu_name: str | None, fmt: CacheFormat
) -> tuple[int, str]:
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
            return (
                (64, "Forcing kv cache block size to 64 for FlashMLASparse backend.")
                if block_size != 64
                else (block_size, "")
            )
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
        backend, size = (
            ("FLASHINFER_MLA", 32) if qk_nope in (64, 128, 192) else ("CUTLASS_MLA", 128)
        )
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


def default_max_num_seqs(version: str | None, total_bytes: int, gpu_name: str | None = None) -> int:
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


def default_max_num_batched_tokens(
    version: str | None,
    total_bytes: int,
    gpu_name: str | None = None,
    *,
    usage_context: str = "serve",
    config: dict | None = None,
    max_model_len: int | None = None,
    max_num_seqs: int | None = None,
) -> int:
    """vLLM's default max_num_batched_tokens (EngineArgs._set_default_args /
    _set_default_max_num_seqs_and_batched_tokens_args; tests/data/vllm-facts.md, Q6):

    - ``vllm serve``: 16,384 on a GPU of 160 GiB or more (v0.28.0), 8,192 on one of 70 GiB or
      more (not an A100 from v0.9.0), else 2,048; the ``LLM`` class: 16,384 / 16,384 / 8,192;
    - raised for a multimodal prefix-LM model (Gemma 4) to its costliest item (v0.22.0);
    - then at most max_num_seqs x max_model_len (when both are given)."""
    if usage_context not in USAGE_CONTEXTS:
        raise ValueError(
            f"usage context must be one of {', '.join(USAGE_CONTEXTS)}, got "
            f"{str(usage_context)[:20]!r}"
        )
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
