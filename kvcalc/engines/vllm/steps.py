"""predict()'s steps (kvcalc.engines.vllm.capacity): the engine settings its arguments resolve
to on a vLLM version and GPU (max_num_batched_tokens, the cache and state formats, an MLA
model's block size, the Mamba cache mode), the layers one GPU holds and the pipeline stages,
the stage whose grouping binds, and the engine conventions said in the notes."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...cache.kv import pp_partition
from ...config.limits import MAX_CONTEXT
from ...core.dtypes import DType, get_dtype
from ...core.model import FullAttention, Layer, MLALatent, ModelSpec, RecurrentState
from ...core.units import GiB, check_int
from .defaults import (
    ASSUMED_GPU,
    DEFAULT_BLOCK_SIZE,
    default_max_num_batched_tokens,
    default_max_num_seqs,
    gpu_generation,
    mla_block_size,
)
from .facts import fact, resolve_version
from .formats import (
    MAMBA_ALL_MODE,
    CacheFormat,
    cache_format,
    mamba_cache_mode_of,
    mamba_dtype,
    vllm_bytes_per_token,
)
from .grouping import KVCacheGrouping, layer_grouping, per_request_blocks
from .speculative import speculative_state_blocks


@dataclass(frozen=True, kw_only=True)
class EngineSettings:
    """What predict()'s arguments resolve to on one vLLM version and GPU."""

    version: tuple[int, ...]
    max_num_batched_tokens: int
    fmt: CacheFormat  # the KV cache format (--kv-cache-dtype)
    conv: DType  # the conv state's format
    ssm: DType  # the SSM state's format
    block_size: int  # after an MLA kernel's choice, before a hybrid model's raise
    requested_block_size: int
    block_size_line: str  # what vLLM logs when it sets an MLA model's block size
    mamba_cache_mode: str
    checkpoint: bool  # a Gated DeltaNet prefill checkpoint is kept
    state_blocks: int  # blocks a recurrent group keeps per request
    alignment: int  # a hybrid model's attention block is a multiple of it
    batches: int  # batches of max_num_batched_tokens a window reserves room for
    in_flight: int  # the tokens in flight
    architecture: str | None

    def grouping_kw(self) -> dict:
        """The keywords layer_grouping takes from these settings."""
        return dict(
            block_size=self.block_size,
            fmt=self.fmt,
            state_dtypes=(self.conv, self.ssm),
            alignment=self.alignment,
            threshold=fact("group_threshold", self.version),
            version=self.version,
        )


def engine_settings(
    spec: ModelSpec,
    kinds: list,
    notes: list[str],
    *,
    max_model_len: int,
    pp: int,
    block_size: int,
    vllm_version: str | None,
    max_num_batched_tokens: int | None,
    kv_dtype: str,
    scales: bool,
    state_dtype: str,
    mamba_cache_dtype: str,
    mamba_ssm_cache_dtype: str,
    enable_prefix_caching: bool | None,
    mamba_cache_mode: str | None,
    architecture: str | None,
    gdn_prefill_checkpoint: bool,
    usage_context: str,
    gpu_memory_bytes: int | None,
    gpu_name: str | None,
    mm_batch_tokens: int | None,
    mla_block_rule: bool,
) -> EngineSettings:
    """The settings predict()'s arguments (checked already) resolve to, as predict's docstring
    says; ``kinds`` is each distinct layer of ``spec`` once. The defaults taken are said in
    ``notes``."""
    version = resolve_version(vllm_version)
    if max_num_batched_tokens is None:
        max_num_batched_tokens = _batched_tokens(
            kinds,
            version,
            max_model_len,
            usage_context,
            gpu_memory_bytes,
            gpu_name,
            mm_batch_tokens,
            notes,
        )
    mnbt = check_int("max_num_batched_tokens", max_num_batched_tokens, 1, MAX_CONTEXT)
    fmt = cache_format(kv_dtype, scales, version)
    conv, ssm = _state_formats(
        kinds, state_dtype, mamba_cache_dtype, mamba_ssm_cache_dtype, version
    )
    asked_block = block_size
    block_line = ""
    if not any(lay.state_elements for lay in kinds) and mla_block_rule:
        block_size, block_line = _mla_block(spec, kinds, block_size, version, gpu_name, fmt, notes)
    mode, checkpoint, state_blocks, alignment = _state_mode(
        kinds,
        version,
        block_size,
        mamba_cache_mode,
        enable_prefix_caching,
        architecture,
        gdn_prefill_checkpoint,
        notes,
    )
    if state_blocks:
        state_blocks += speculative_state_blocks(spec, version)
    # A window (or chunk) reserves room for the tokens in flight: one batch, or two under the
    # asynchronous scheduling of newer releases (with pipeline stages: one per stage).
    batches = fact("in_flight_batches", version)
    in_flight = mnbt * (batches if pp == 1 else max(pp, 1) if batches > 1 else 1)
    return EngineSettings(
        version=version,
        max_num_batched_tokens=mnbt,
        fmt=fmt,
        conv=conv,
        ssm=ssm,
        block_size=block_size,
        requested_block_size=asked_block,
        block_size_line=block_line,
        mamba_cache_mode=mode,
        checkpoint=checkpoint,
        state_blocks=state_blocks,
        alignment=alignment,
        batches=batches,
        in_flight=in_flight,
        architecture=architecture,
    )


def _batched_tokens(
    kinds: list,
    version: tuple[int, ...],
    max_model_len: int,
    usage_context: str,
    gpu_memory_bytes: int | None,
    gpu_name: str | None,
    mm_batch_tokens: int | None,
    notes: list[str],
) -> int:
    """max_num_batched_tokens when none is given: the version's default for the usage context
    and GPU (an 80 GiB H100 when none is given), raised to the multimodal floor and capped at
    max_num_seqs x max_model_len, as EngineArgs does; the default taken is noted when a window
    or chunk depends on it."""
    assumed = gpu_memory_bytes is None
    gpu_bytes, gname = ASSUMED_GPU if gpu_memory_bytes is None else (gpu_memory_bytes, gpu_name)
    shown = ".".join(map(str, version))
    tokens = default_max_num_batched_tokens(
        shown, gpu_bytes, gname, usage_context=usage_context, max_model_len=max_model_len
    )
    if mm_batch_tokens and mm_batch_tokens > tokens and fact("mm_prefix_lm_batch_floor", version):
        tokens = min(mm_batch_tokens, default_max_num_seqs(shown, gpu_bytes, gname) * max_model_len)
    if any(lay.token_bound() is not None for lay in kinds):
        # Only windows and chunks depend on it: say which default was taken.
        notes.append(
            f"max_num_batched_tokens {tokens:,}: vLLM {shown}'s "
            f"default for "
            f"{'vllm serve' if usage_context == 'serve' else 'the LLM class'}"
            + (
                " on an 80 GiB H100 (no GPU given)"
                if assumed
                else f" on {gname or f'a {gpu_bytes / GiB:.0f} GiB GPU'}"
            )
        )
    return tokens


def _state_formats(
    kinds: list,
    state_dtype: str,
    mamba_cache_dtype: str,
    mamba_ssm_cache_dtype: str,
    version: tuple[int, ...],
) -> tuple[DType, DType]:
    """The conv and SSM state formats as vLLM's flags set them ('auto': the model's dtype, or
    the format a state's model fixes, as Kimi's KDA does float32, or the one its config
    declares where this version reads it: NemotronH's mamba_ssm_cache_dtype, Qwen3.5's
    mamba_ssm_dtype from v0.17.0)."""
    sdtype = get_dtype(state_dtype, ("fp32", "fp16", "bf16"))
    conv = get_dtype(mamba_dtype(mamba_cache_dtype, "--mamba-cache-dtype") or sdtype.name)
    asked_ssm = mamba_dtype(mamba_ssm_cache_dtype, "--mamba-ssm-cache-dtype")
    honoured = {None, "mamba_ssm_cache_dtype"}
    if fact("qwen3_5_ssm_from_config", version):
        honoured.add("mamba_ssm_dtype")
    # 'auto' for a state whose model fixes its format (Kimi's KDA: float32) is that format
    fixed = sorted(
        {
            lay.ssm_dtype
            for lay in kinds
            if isinstance(lay, RecurrentState) and lay.ssm_dtype and lay.ssm_dtype_field in honoured
        }
    )
    ssm = get_dtype(asked_ssm or (fixed[0] if len(fixed) == 1 else conv.name))
    return conv, ssm


def _mla_block(
    spec: ModelSpec,
    kinds: list,
    block_size: int,
    version: tuple[int, ...],
    gpu_name: str | None,
    fmt: CacheFormat,
    notes: list[str],
) -> tuple[int, str]:
    """The block size vLLM picks for an MLA model's attention kernel (mla_block_size), and the
    line it logs; said in the notes."""
    block_size, block_line = mla_block_size(spec.layers, block_size, version, gpu_name, fmt)
    on = gpu_name or ASSUMED_GPU[1] + " (no GPU given)"
    mla = any(lay.kind == "mla" for lay in kinds)
    if block_line:
        notes.append(
            f"MLA block size {block_size} tokens on {on}, as vLLM "
            f"{'.'.join(map(str, version))} picks it for its attention kernel "
            f'(it logs "{block_line}")'
        )
    elif mla and gpu_generation(gpu_name) == "rocm":
        notes.append(
            "the block size ROCm's MLA kernels take is not modelled: blocks of "
            f"{block_size} tokens as given"
        )
    elif (
        mla
        and gpu_generation(gpu_name) == "hopper"
        and version >= (0, 18, 0)
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
    mamba_cache_mode: str | None,
    enable_prefix_caching: bool | None,
    architecture: str | None,
    gdn_prefill_checkpoint: bool,
    notes: list[str],
) -> tuple[str, bool, int, int]:
    """The Mamba cache mode, whether a Gated DeltaNet prefill checkpoint is kept, the blocks a
    recurrent group keeps per request, and the alignment of a hybrid model's block size."""
    has_state = any(lay.state_elements for lay in kinds)
    hybrid = has_state and any(lay.stores_tokens for lay in kinds)
    if mamba_cache_mode is None:
        mode = (
            mamba_cache_mode_of(version, enable_prefix_caching, hybrid, architecture)
            if has_state
            else "none"
        )
    elif mamba_cache_mode in ("none", "align", "all"):
        mode = mamba_cache_mode
    else:
        raise ValueError(
            f"mamba_cache_mode must be none, align or all, got {str(mamba_cache_mode)[:20]!r}"
        )
    if mode == "all" and has_state:
        raise ValueError(
            "mamba_cache_mode 'all' (prefix caching on a model with Mamba "
            "prefix-caching support, vLLM 0.15.0-0.27.x) is not modelled: its "
            "block size follows the Mamba chunk size; give "
            "--no-enable-prefix-caching or vLLM 0.28.0 on"
        )
    checkpoint = (
        bool(gdn_prefill_checkpoint)
        and mode == "align"
        and fact("gdn_prefill_checkpoint", version)
        and any(getattr(lay, "flavor", "") == "gated_deltanet" for lay in kinds)
    )
    state_blocks = 1 if mode == "none" else 2 + int(checkpoint)
    alignment = 16 if fact("hybrid_block_alignment", version) == "16" else max(16, block_size)
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


def layers_on_gpu(spec: ModelSpec, num_draft_layers: int, tp: int) -> list[Layer]:
    """The model's layers (and a draft model's, in the same pool) as one GPU holds them."""
    layers = list(spec.layers)
    if num_draft_layers:
        # A draft model (EAGLE adds one decoder layer) keeps its cache in the same pool, with
        # the target's geometry and full attention.
        ref = next((lay for lay in spec.kv_layers if not isinstance(lay, MLALatent)), None)
        if ref is None:
            raise ValueError("draft layers need an attention layer to copy the geometry from")
        draft = FullAttention(
            kv_heads=ref.kv_heads,
            head_dim=ref.head_dim,
            v_head_dim=ref.v_head_dim,
            q_heads=ref.q_heads,
        )
        layers += [draft] * num_draft_layers
    if tp > 1:  # validates tp against the KV heads; once per distinct layer
        split: dict = {}
        layers = [split.get(id(lay)) or split.setdefault(id(lay), lay.split(tp)) for lay in layers]
    return layers


def pipeline_stages(
    spec: ModelSpec, layers: list[Layer], pp: int
) -> tuple[list[int], list[list[int]]]:
    """The layers per pipeline stage, and each stage's layer positions (drafts: the last)."""
    own = len(spec.target_layers)
    parts = pp_partition(own, pp)
    stages, start = [], 0
    for i, count in enumerate(parts):
        positions = list(range(start, start + count))
        if i == pp - 1:
            positions += list(range(own, len(layers)))  # drafts: the last stage
        stages.append(positions)
        start += count
    return parts, stages


@dataclass(frozen=True)
class Binding:
    """The stage whose numbers bind: its grouping, its pool's blocks, the blocks one request
    takes in each of its groups; and every stage's blocks, and the binding stage's index."""

    grouping: KVCacheGrouping
    num_blocks: int
    per_request: list[int]
    stage_blocks: list[int]
    index: int


def binding_stage(
    layers: list[Layer],
    stages: list[list[int]],
    s: EngineSettings,
    *,
    available_bytes: int,
    max_model_len: int,
    notes: list[str],
) -> Binding:
    """The grouping whose numbers bind, its pool's blocks, the blocks a request takes in each
    of its groups, every stage's blocks, and the binding stage's index."""
    pp = len(stages)
    version, in_flight, state_blocks, fmt = s.version, s.in_flight, s.state_blocks, s.fmt
    gkw = s.grouping_kw()
    if pp > 1 and fact("pp_grouping", version) == "whole model":
        # v0.11.0 on: groups from the whole model; each stage's block holds only its own layers
        # of each group; every stage takes the smallest num_blocks of all.
        g = layer_grouping(layers, **gkw)
        per_req = per_request_blocks(g, max_model_len, in_flight, state_blocks)
        stage_blocks = []
        for positions in stages:
            mine = set(positions)
            slots = max(len(mine.intersection(group.members)) for group in g.groups)
            per_block = (
                g.page_bytes * max(1, slots)
                if not g.uniform
                else sum(
                    g.block_size * vllm_bytes_per_token(layers[i], fmt)
                    for i in positions
                    if layers[i].stores_tokens
                )
            )
            stage_blocks.append(available_bytes // max(1, per_block))
        index = min(range(pp), key=lambda i: stage_blocks[i])
        notes.append(
            "pipeline stages share one grouping of the whole model (vLLM 0.11.0 on); "
            "the stage with the fewest blocks sets the numbers"
        )
        return Binding(g, stage_blocks[index], per_req, stage_blocks, index)
    configs = []
    for positions in stages:
        g = layer_grouping([layers[i] for i in positions], **gkw)
        configs.append(
            (
                g,
                available_bytes // g.block_bytes,
                per_request_blocks(g, max_model_len, in_flight, state_blocks),
            )
        )
    stage_blocks = [c[1] for c in configs]
    index = min(range(len(configs)), key=lambda i: configs[i][1] / max(1, sum(configs[i][2])))
    bind, num_blocks, per_req = configs[index]
    return Binding(bind, num_blocks, per_req, stage_blocks, index)


def convention_notes(
    binding: Binding, *, kinds: list, settings: EngineSettings, parts: list[int]
) -> list[str]:
    """The engine conventions the numbers rest on: tokens in flight, the state formats and
    blocks, the pipeline stages."""
    bind, per_req, s = binding.grouping, binding.per_request, settings
    version, batches, in_flight, architecture = s.version, s.batches, s.in_flight, s.architecture
    conv, ssm, mode = s.conv, s.ssm, s.mamba_cache_mode
    state_blocks, checkpoint = s.state_blocks, s.checkpoint
    notes = []
    if batches > 1 and any(
        r > 0 and g.spec.token_bound() is not None
        for g, r in zip(bind.groups, per_req, strict=True)
    ):
        notes.append(
            f"each window or chunk reserves room for {batches} x max_num_batched_tokens "
            f"({in_flight:,} tokens in flight): asynchronous scheduling, vLLM 0.26.0 on"
        )
    if any(g.spec.state_elements for g in bind.groups):
        notes.append(f"recurrent state: conv in {conv.name.upper()}, SSM in {ssm.name.upper()}")
        if mode == "none":
            notes.append(
                "a recurrent state takes one block per request: prefix caching off "
                "(mamba_cache_mode 'none')"
            )
        else:
            notes.append(
                f"prefix caching on (mamba_cache_mode 'align'): each recurrent group "
                f"keeps {state_blocks} blocks per request"
                + (
                    " (2 + one prefill checkpoint of FlashInfer's Gated DeltaNet)"
                    if checkpoint
                    else ""
                )
            )
            if (
                fact("gdn_prefill_checkpoint", version)
                and not checkpoint
                and any(getattr(lay, "flavor", "") == "gated_deltanet" for lay in kinds)
            ):
                notes.append(
                    "on Hopper (or Blackwell with CUDA 13) vLLM 0.33.0's FlashInfer "
                    "Gated DeltaNet prefill keeps a third block and aligns blocks to "
                    "64 tokens: set gdn_prefill_checkpoint (--gdn-prefill-checkpoint)"
                )
            if fact("mamba_cache_mode", version) == "all or align" and architecture is None:
                notes.append(
                    "vLLM 0.15.0-0.27.x uses mamba_cache_mode 'all' instead for "
                    + ", ".join(MAMBA_ALL_MODE)
                    + " (not modelled)"
                )
    if len(parts) > 1:
        notes.append(f"pipeline stages hold {', '.join(map(str, parts))} layers")
    return notes
