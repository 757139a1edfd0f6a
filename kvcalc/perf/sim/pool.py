"""What the serving simulator's ``setup`` checks and sizes before it derives the clock, in order,
each check a ValueError naming what to change: the inputs, the layers it serves, and the pool
(vLLM's budget or a given size, its batching limits, vLLM's KV-cache groups as the blocks a
request holds, the notes a result reports)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ...cache.deployment import Deployment
from ...config.limits import MAX_CONTEXT
from ...core.dtypes import DType
from ...core.model import ChunkedLocal, Layer, ModelSpec, SlidingWindow
from ...core.units import check_int
from ...engines import vllm as _vllm
from ...engines.budget import Budget, budget, default_gpu_mem_util
from ..roofline import per_gpu_layers

# vLLM V0 without chunked prefill (vllm/config.py, SchedulerConfig.__init__): "If max_model_len
# is too short, use 2048 as the default value for higher throughput", max_num_batched_tokens =
# max(max_model_len, 2048); its block manager (vllm/core/block_manager_v1.py, BlockSpaceManagerV1)
# admits a prompt only while watermark_blocks = int(watermark * num_gpu_blocks) stay free,
# watermark 0.01 by default (CacheConfig / EngineArgs).
V0_MIN_BATCHED_TOKENS = 2048
V0_WATERMARK = 0.01


def checked_inputs(dep: Deployment, max_model_len: int) -> int:
    """The deployment and the longest request checked against what the simulator serves
    (ValueError naming the one to change); the longest request, checked."""
    spec = dep.spec
    if dep.pp != 1:
        raise ValueError(
            "the serving simulator models tensor parallelism only: set pipeline parallel to 1"
        )
    max_model_len = check_int("longest request (tokens)", max_model_len, 2, MAX_CONTEXT)
    if spec.params is None:
        raise ValueError(
            f"{spec.name}: kvcalc cannot count this model's parameters "
            f"({spec.params_error or 'unknown family'}), and prefill's compute "
            "needs them; pick a registry model"
        )
    if max_model_len > spec.max_context:
        raise ValueError(
            f"the longest request ({max_model_len:,} tokens: longest prompt + "
            f"longest output) is beyond {spec.name}'s limit of "
            f"{spec.max_context:,} tokens; shorten the prompt or the output"
        )
    return max_model_len


def served_layers(
    spec: ModelSpec, tp: int, dtype: DType, scales: bool
) -> tuple[list[Layer], list[int], str]:
    """The layers of one GPU (the TP split validated) and the window sizes, or ValueError naming
    the layers the simulator does not serve: kinds other than full attention, MLA, sliding
    windows, chunked local attention and recurrent states, more than one window or chunk size,
    windows and chunks together. (Layers whose pages differ get blocks of different sizes:
    ``_groups``.) The third value: the windowed layers' kind ("sliding", "chunked"; "": none)."""
    layers = per_gpu_layers(spec, tp)
    big = 1_000_003
    odd = sorted(
        {
            lay.label
            for lay in layers
            if not (
                lay.kind in ("full", "mla", "sliding", "chunked", "state")
                or not (
                    lay.stores_tokens or lay.state_elements or lay.read_bytes(big, dtype, scales)
                )
            )
            or lay.fixed_kv_bytes(dtype, scales)
            or (
                lay.kind in ("full", "mla")
                and lay.read_bytes(big, dtype, scales) != big * lay.read_bytes(1, dtype, scales)
            )
        }
    )
    if odd:
        raise ValueError(
            f"{spec.name} has {', '.join(odd)} layers; the serving simulator "
            "handles full attention, MLA, sliding windows, chunked local attention and "
            "recurrent states. Pick another model"
        )
    windows = sorted({lay.window for lay in layers if isinstance(lay, SlidingWindow)})
    chunks = sorted({lay.chunk for lay in layers if isinstance(lay, ChunkedLocal)})
    if windows and chunks:
        raise ValueError(
            f"{spec.name} has sliding windows and attention chunks; the serving simulator "
            "handles one or the other. Pick another model"
        )
    if len(windows) > 1 or len(chunks) > 1:
        what = "sliding windows" if windows else "attention chunks"
        raise ValueError(
            f"{spec.name} has {what} of {', '.join(map(str, windows or chunks))} tokens; the "
            "serving simulator handles one size. Pick another model"
        )
    return layers, windows or chunks, "sliding" if windows else "chunked" if chunks else ""


def _reserve_beside(dep: Deployment, wbytes: int, kv_pool_bytes: int) -> int:
    """A pool of a given size: the reserve is what vLLM's requested memory leaves beside the
    weights (per GPU) and the pool; ValueError when nothing is left."""
    util = dep.engine.gpu_memory_utilization
    if util is None:
        util = default_gpu_mem_util("vllm", dep.engine.version)
    total_bytes, tp = dep.total_bytes, dep.tp
    reserve_bytes = math.ceil(total_bytes * util) - math.ceil(wbytes / tp) - kv_pool_bytes
    if reserve_bytes < 0:
        raise ValueError(
            f"a KV pool of {kv_pool_bytes / 2**30:,.2f} GiB does not fit beside "
            f"the weights ({wbytes / tp / 2**30:,.2f} GiB per GPU) in "
            f"{util:g} of the GPU's {total_bytes / 2**30:,.2f} GiB; give a "
            "smaller pool or a larger gpu_memory_utilization"
        )
    return reserve_bytes


def _budget(dep: Deployment, max_model_len: int) -> Budget:
    """vLLM's budget for the pool (``dep`` with the simulator's weights and reserve), or
    ValueError when the weights leave no pool or vLLM would refuse to start."""
    spec = dep.spec
    b = budget(dep.but(pp=1), max_model_len, find_max_context=False)  # one stage
    if b.kv_pool_bytes <= 0:
        raise ValueError(
            f"{spec.name} does not fit: its weights and the reserve take more than "
            "the memory the engine may use; use tensor parallel, smaller weights "
            "or a larger GPU"
        )
    if b.startup_error:
        raise ValueError(
            "vLLM would refuse to start: "
            + b.startup_error.split(". ")[0]
            + ". Lower the longest prompt + output, or give the cache more memory"
        )
    return b


@dataclass(frozen=True)
class Groups:
    """vLLM's KV-cache groups as the blocks a request holds: token groups of full attention
    (``full``, blocks of ``full_block`` tokens), sliding-window groups (``slide``, blocks of
    ``slide_block`` tokens) and the state blocks of a recurrent model. Every block is one page
    of the pool; where the layers' pages differ vLLM gives the smaller pages proportionally more
    tokens a block (unify_kv_cache_spec_page_size), so the two block sizes differ."""

    full: int
    slide: int
    state_blocks: int
    full_block: int
    slide_block: int


def _groups(dep: Deployment, b: Budget, max_model_len: int, mnbt: int) -> Groups:
    """vLLM's KV-cache groups (kvcalc.engines.vllm.predict) as the blocks a request holds.
    ValueError without a token group, or where groups of one kind get blocks of different
    sizes (the simulator keeps one block size for each kind)."""
    spec = dep.spec
    one_stage = dep.but(pp=1, version=b.vllm_version, max_num_batched_tokens=mnbt)
    p = _vllm.predict(one_stage, b.kv_pool_bytes, max_model_len)
    full = [g.block_size for g in p.groups if g.kind in ("full", "mla")]
    slide = [g.block_size for g in p.groups if g.kind in ("sliding", "chunked")]
    state_blocks = sum(g.blocks_per_request for g in p.groups if g.kind == "state")
    if not full + slide:
        raise ValueError(
            f"{spec.name} keeps no per-token cache; the serving simulator needs "
            "an attention layer. Pick another model"
        )
    if len(set(full)) > 1 or len(set(slide)) > 1:
        raise ValueError(
            f"{spec.name}'s layers of one kind get blocks of different sizes from vLLM "
            f"(full attention: {sorted(set(full))}, sliding: {sorted(set(slide))} tokens); the "
            "serving simulator keeps one block size for each kind. Pick another model"
        )
    full_block = full[0] if full else slide[0]
    slide_block = slide[0] if slide else full_block
    if max(full_block, slide_block) % min(full_block, slide_block):
        raise RuntimeError(f"vLLM's block sizes {full_block} and {slide_block} do not divide")
    return Groups(len(full), len(slide), state_blocks, full_block, slide_block)


def _batching(dep: Deployment, b: Budget, max_model_len: int) -> tuple[str, int, int]:
    """(vLLM version, max_num_seqs, max_num_batched_tokens) of budget ``b`` (vLLM's default for
    the GPU unless given; without chunked prefill V0's); ValueError when they contradict."""
    version, mns = b.vllm_version, b.max_num_seqs
    if version is None or mns is None:  # a vLLM budget states both
        raise RuntimeError(f"the vLLM budget of {dep.spec.name} has no version or max_num_seqs")
    chunked_prefill = dep.engine.enable_chunked_prefill
    if dep.engine.max_num_batched_tokens is not None:
        mnbt = dep.engine.max_num_batched_tokens
    elif chunked_prefill:
        mnbt = _vllm.default_max_num_batched_tokens(version, dep.total_bytes, dep.gpu_name)
    else:
        mnbt = max(max_model_len, V0_MIN_BATCHED_TOKENS)
    mnbt = check_int("max_num_batched_tokens", mnbt, 1, 10**7)
    if not chunked_prefill and mnbt < max_model_len:
        raise ValueError(
            f"max_num_batched_tokens ({mnbt:,}) is smaller than the longest request "
            f"({max_model_len:,} tokens: prompt + output); vLLM V0's scheduler without "
            'chunked prefill runs a prompt whole in one step and refuses this ("is smaller '
            'than max_model_len"). Raise --max-num-batched-tokens or shorten the requests'
        )
    if mnbt < mns:
        raise ValueError(
            f"max_num_batched_tokens ({mnbt:,}) must be at least max_num_seqs "
            f"({mns:,}), as vLLM requires"
        )
    return version, mns, mnbt


@dataclass(frozen=True, kw_only=True)
class PoolSize:
    """The pool as the simulator holds it: vLLM's blocks (its null block taken out), the
    batching limits, the groups, what vLLM logs at start-up, the notes a result reports."""

    num_blocks: int
    block_size: int  # tokens a block of a full-attention group holds (a sliding one's: below)
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_pool_bytes: int
    block_bytes: int
    vllm_version: str
    notes: tuple[str, ...]
    # vLLM's KV-cache groups, as blocks a request holds (every group draws on one pool):
    # full_groups keep every token; slide_groups a window of `window` tokens (vLLM frees the
    # blocks that leave it); state_blocks are a recurrent state's, taken at admission.
    full_groups: int
    slide_groups: int
    window: int
    state_blocks: int
    # tokens a block of a sliding group holds: block_size, or a multiple or a fraction of it
    # where the sliding layers' pages are smaller or larger per token (vLLM makes every page
    # the same size: unify_kv_cache_spec_page_size)
    slide_block_size: int
    # the windowed layers' kind: "sliding" (each token attends the `window` before it) or
    # "chunked" (chunked local attention: the tokens of its own chunk of `window`; vLLM frees a
    # chunk's blocks once the next starts, or keeps every token where its release does:
    # slide_groups 0); "": none
    window_kind: str
    # vLLM's start-up line for max_model_len: every request at its full length, windows charged
    # window - 1 + the tokens in flight ("Maximum concurrency for N tokens per request")
    logged_concurrency: float
    logged_blocks_per_request: int
    pool_blocks: int  # the pool's blocks as vLLM counts them (num_blocks: the null block in)
    # blocks V0's block manager keeps free when it admits a prompt (1% of the pool; 0 with
    # chunked prefill)
    watermark_blocks: int

    def over_ranks(self, dp: int) -> PoolSize:
        """The whole engine's: dp attention data parallel ranks' pools, caps and budgets."""
        if dp == 1:
            return self
        caps = ("num_blocks", "pool_blocks", "max_num_seqs", "max_num_batched_tokens")
        return replace(self, **{k: getattr(self, k) * dp for k in caps})


def size_pool(
    dep: Deployment,
    max_model_len: int,
    windows: list[int],
    kv_pool_bytes: int | None,
    window_kind: str = "",
) -> PoolSize:
    """The ``PoolSize`` of ``dep`` (its weights the simulator's: ``all_weights_bytes`` one
    rank's): vLLM's budget, or a pool of ``kv_pool_bytes`` (the reserve then what is left)."""
    if kv_pool_bytes is not None:
        kv_pool_bytes = check_int("KV pool (bytes)", kv_pool_bytes, 1, 2**50)
        reserve = _reserve_beside(dep, dep.all_weights_bytes, kv_pool_bytes)
        dep = dep.but(reserve_bytes=reserve)
    b = _budget(dep, max_model_len)
    version, mns, mnbt = _batching(dep, b, max_model_len)
    g = _groups(dep, b, max_model_len, mnbt)
    if window_kind == "chunked" and g.slide and windows[0] % g.slide_block:
        raise ValueError(
            f"{dep.spec.name}'s attention chunk ({windows[0]:,} tokens) is not a whole number of "
            f"blocks ({g.slide_block} tokens); the serving simulator frees whole chunks. Pick "
            "another block size"
        )
    notes = _notes(b, dep.reserve_bytes, kv_pool_bytes, g, windows, window_kind)
    return PoolSize(
        num_blocks=b.num_blocks - _vllm.fact(_vllm.Facts.null_block, version),
        block_size=g.full_block,
        slide_block_size=g.slide_block,
        window_kind=window_kind,
        max_num_seqs=mns,
        max_num_batched_tokens=mnbt,
        kv_pool_bytes=b.kv_pool_bytes,
        block_bytes=b.block_bytes,
        vllm_version=version,
        notes=tuple(notes),
        full_groups=g.full,
        slide_groups=g.slide,
        window=windows[0] if windows else 0,
        state_blocks=g.state_blocks,
        logged_concurrency=b.max_concurrency,
        logged_blocks_per_request=b.blocks_per_request,
        pool_blocks=b.num_blocks,
        watermark_blocks=0
        if dep.engine.enable_chunked_prefill
        else int(V0_WATERMARK * b.num_blocks),
    )


def _notes(
    b: Budget,
    reserve_bytes: int,
    kv_pool_bytes: int | None,
    g: Groups,
    windows: list[int],
    window_kind: str,
) -> list[str]:
    """The assumptions a result reports: where the pool came from, the null block, the
    windows' and states' blocks."""
    version, bs = b.vllm_version, g.full_block
    slide_groups, state_blocks = g.slide, g.state_blocks
    notes = [
        f"pool: vLLM {version}'s arithmetic at gpu_memory_utilization {b.gpu_mem_util:g}, "
        f"reserve {reserve_bytes / 2**30:g} GiB, blocks of {bs} tokens"
        if kv_pool_bytes is None
        else f"pool: {kv_pool_bytes / 2**30:,.2f} GiB as given, blocks of {bs} tokens"
    ]
    if _vllm.fact(_vllm.Facts.null_block, version):
        notes.append("one block is vLLM's null block and holds no tokens")
    if g.slide_block != g.full_block and g.full and g.slide:
        notes.append(
            f"the sliding layers' blocks hold {g.slide_block} tokens, the full-attention "
            f"layers' {g.full_block}: vLLM makes every page the same size "
            "(unify_kv_cache_spec_page_size)"
        )
    if window_kind == "chunked":
        notes.append(
            f"{slide_groups} chunked-attention group(s) of {windows[0]:,}-token chunks: a "
            "request's blocks of a chunk go back to the pool once its next chunk starts"
            if slide_groups
            else f"chunked local attention ({windows[0]:,}-token chunks) reads and attends its "
            f"chunk, but vLLM {version} keeps every token of those layers, as full attention"
        )
    elif slide_groups:
        notes.append(
            f"{slide_groups} sliding-window group(s) of {windows[0]:,} tokens: a "
            "request's blocks that leave the window go back to the pool as it "
            "decodes (vLLM's remove_skipped_blocks); when a prefill ends, up to one "
            "step before vLLM frees them"
        )
    if state_blocks:
        notes.append(
            f"recurrent states: {state_blocks} block(s) per request, taken at "
            "admission, read once a step"
        )
    return notes
