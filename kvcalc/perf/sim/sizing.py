"""What the serving simulator's ``setup`` checks and sizes before it derives the clock: the
inputs checked, the layers it serves (others refused by name), and the pool: vLLM's budget
(``kvcalc.engines.budget``) or a pool of a given size, its batching limits, vLLM's KV-cache groups
as the blocks a request holds (``kvcalc.engines.vllm.predict``) and the notes a result reports.

Each check raises ValueError naming what to change; ``kvcalc.perf.sim.engine.setup`` calls them in
order."""

from __future__ import annotations

import math
from typing import Any

from ...cache.kv import stage_layers
from ...config.limits import MAX_CONTEXT
from ...core.dtypes import DType
from ...core.model import Layer, ModelSpec, SlidingWindow
from ...core.units import check_float, check_int
from ...engines import vllm as _vllm
from ...engines.budget import Budget, budget, default_gpu_mem_util
from ..calibration import StepModel

__all__ = [
    "checked_inputs",
    "served_layers",
    "pool_fields",
    "V0_MIN_BATCHED_TOKENS",
    "V0_WATERMARK",
]

# vLLM V0 without chunked prefill (vllm/config.py, SchedulerConfig.__init__): "If max_model_len
# is too short, use 2048 as the default value for higher throughput", max_num_batched_tokens =
# max(max_model_len, 2048); its block manager (vllm/core/block_manager_v1.py, BlockSpaceManagerV1)
# admits a prompt only while watermark_blocks = int(watermark * num_gpu_blocks) stay free,
# watermark 0.01 by default (CacheConfig / EngineArgs).
V0_MIN_BATCHED_TOKENS = 2048
V0_WATERMARK = 0.01


def checked_inputs(
    spec: ModelSpec,
    *,
    tp: int,
    pp: int,
    peak_tflops: float | None,
    bandwidth_gbs: float,
    speed: StepModel | None,
    bw_share: float,
    mfu: float,
    max_model_len: int,
) -> tuple[int, float, float, float, float, int]:
    """The numeric inputs checked (ValueError naming the one to change), in setup's order."""
    tp = check_int("tensor parallel size", tp, 1, 64)
    pp = check_int("pipeline parallel size", pp, 1, 64)
    if pp != 1:
        raise ValueError(
            "the serving simulator models tensor parallelism only: set pipeline parallel to 1"
        )
    if peak_tflops is None:
        raise ValueError("the GPU's dense peak (TFLOPS) is needed to time prefill")
    peak_tflops = check_float("peak TFLOPS", peak_tflops, 0.0, 1e6, lo_open=True)
    bandwidth_gbs = check_float("bandwidth (GB/s)", bandwidth_gbs, 0.0, 1e7, lo_open=True)
    if speed is not None:
        bw_share, mfu = speed.bw_share, speed.mfu
    bw_share = check_float("achieved share of peak bandwidth", bw_share, 0.0, 1.0, lo_open=True)
    mfu = check_float("MFU", mfu, 0.0, 1.0, lo_open=True)
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
    return tp, peak_tflops, bandwidth_gbs, bw_share, mfu, max_model_len


def served_layers(
    spec: ModelSpec, tp: int, dtype: DType, scales: bool
) -> tuple[list[Layer], list[int]]:
    """The layers of one GPU (the TP split validated) and the window sizes, or ValueError naming
    the layers the simulator does not serve: kinds other than full attention, MLA, sliding
    windows and recurrent states, more than one window size, pages of more than one size."""
    layers = [lay for stage in stage_layers(spec, tp, 1) for lay in stage]
    big = 1_000_003
    odd = sorted(
        {
            lay.label
            for lay in layers
            if not (
                lay.kind in ("full", "mla", "sliding", "state")
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
            "handles full attention, MLA, sliding windows and recurrent states. "
            "Pick another model"
        )
    windows = sorted({lay.window for lay in layers if isinstance(lay, SlidingWindow)})
    if len(windows) > 1:
        raise ValueError(
            f"{spec.name} has sliding windows of {', '.join(map(str, windows))} "
            "tokens; the serving simulator handles one window size. Pick another "
            "model"
        )
    pages = {lay.bytes_per_token(dtype, scales) for lay in layers if lay.stores_tokens}
    if len(pages) > 1:
        raise ValueError(
            f"{spec.name}'s layers cache different bytes per token "
            f"({', '.join(f'{b:,}' for b in sorted(pages))} B), so vLLM gives "
            "its groups blocks of different sizes; the serving simulator handles "
            "one block size. Pick another model"
        )
    return layers, windows


def _reserve_beside(
    kv_pool_bytes: int,
    *,
    total_bytes: int,
    wbytes: int,
    tp: int,
    gpu_mem_util: float | None,
    vllm_version: str | None,
) -> int:
    """A pool of a given size: the reserve is what vLLM's requested memory leaves beside the
    weights (per GPU) and the pool; ValueError when nothing is left."""
    util = default_gpu_mem_util("vllm", vllm_version) if gpu_mem_util is None else gpu_mem_util
    reserve_bytes = math.ceil(total_bytes * util) - math.ceil(wbytes / tp) - kv_pool_bytes
    if reserve_bytes < 0:
        raise ValueError(
            f"a KV pool of {kv_pool_bytes / 2**30:,.2f} GiB does not fit beside "
            f"the weights ({wbytes / tp / 2**30:,.2f} GiB per GPU) in "
            f"{util:g} of the GPU's {total_bytes / 2**30:,.2f} GiB; give a "
            "smaller pool or a larger gpu_memory_utilization"
        )
    return reserve_bytes


def _pool(
    spec: ModelSpec,
    *,
    total_bytes: int,
    max_model_len: int,
    wbytes: int,
    gpu_mem_util: float | None,
    reserve_bytes: int,
    block_size: int,
    dtype: DType,
    scales: bool,
    tp: int,
    vllm_version: str | None,
    max_num_batched_tokens: int | None,
    max_num_seqs: int | None,
    gpu_name: str | None,
) -> Budget:
    """vLLM's budget for the pool, or ValueError when the weights leave no pool or vLLM would
    refuse to start."""
    b = budget(
        spec,
        total_bytes=total_bytes,
        context=max_model_len,
        weights_bytes=wbytes,
        gpu_mem_util=gpu_mem_util,
        reserve_bytes=reserve_bytes,
        block_size=block_size,
        kv_dtype=dtype.name,
        scales=scales,
        tp=tp,
        engine="vllm",
        find_max_context=False,
        vllm_version=vllm_version,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
        gpu_name=gpu_name,
    )
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


def _groups(
    spec: ModelSpec,
    b: Budget,
    *,
    max_model_len: int,
    block_size: int,
    tp: int,
    dtype: DType,
    scales: bool,
    version: str,
    mnbt: int,
    gpu_name: str | None,
) -> dict[str, Any]:
    """vLLM's KV-cache groups (kvcalc.engines.vllm.predict) as the blocks a request holds: token
    groups of full attention, sliding groups, state blocks. ValueError without a token group."""
    p = _vllm.predict(
        spec,
        available_bytes=b.kv_pool_bytes,
        max_model_len=max_model_len,
        block_size=block_size,
        tp=tp,
        kv_dtype=dtype.name,
        scales=scales,
        vllm_version=version,
        max_num_batched_tokens=mnbt,
        gpu_name=gpu_name,
    )
    kinds = [g.kind for g in p.groups]
    full_groups = sum(k in ("full", "mla") for k in kinds)
    slide_groups = kinds.count("sliding")
    state_blocks = sum(g.blocks_per_request for g in p.groups if g.kind == "state")
    if not full_groups + slide_groups:
        raise ValueError(
            f"{spec.name} keeps no per-token cache; the serving simulator needs "
            "an attention layer. Pick another model"
        )
    return dict(full_groups=full_groups, slide_groups=slide_groups, state_blocks=state_blocks)


def _batching(
    spec: ModelSpec,
    b: Budget,
    *,
    max_model_len: int,
    block_size: int,
    tp: int,
    dtype: DType,
    scales: bool,
    max_num_batched_tokens: int | None,
    total_bytes: int,
    gpu_name: str | None,
    chunked_prefill: bool = True,
) -> tuple[str, int, int, dict[str, Any]]:
    """(vLLM version, max_num_seqs, max_num_batched_tokens, groups) of budget ``b``: the
    batching limits (vLLM's default for the GPU unless given; without chunked prefill V0's,
    max(max_model_len, 2,048)) and vLLM's groups read at them. ValueError when the limits
    contradict each other."""
    version, mns = b.vllm_version, b.max_num_seqs
    if version is None or mns is None:  # a vLLM budget states both
        raise RuntimeError(f"the vLLM budget of {spec.name} has no version or max_num_seqs")
    if max_num_batched_tokens is not None:
        mnbt = max_num_batched_tokens
    elif chunked_prefill:
        mnbt = _vllm.default_max_num_batched_tokens(version, total_bytes, gpu_name)
    else:
        mnbt = max(max_model_len, V0_MIN_BATCHED_TOKENS)
    groups = _groups(
        spec,
        b,
        max_model_len=max_model_len,
        block_size=block_size,
        tp=tp,
        dtype=dtype,
        scales=scales,
        version=version,
        mnbt=mnbt,
        gpu_name=gpu_name,
    )
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
    return version, mns, mnbt, groups


def pool_fields(
    spec: ModelSpec,
    windows: list[int],
    *,
    total_bytes: int,
    max_model_len: int,
    wbytes: int,
    gpu_mem_util: float | None,
    reserve_bytes: int,
    kv_pool_bytes: int | None,
    block_size: int,
    dtype: DType,
    scales: bool,
    tp: int,
    vllm_version: str | None,
    max_num_batched_tokens: int | None,
    max_num_seqs: int | None,
    gpu_name: str | None,
    chunked_prefill: bool = True,
) -> dict[str, Any]:
    """Setup's fields of the pool: vLLM's budget (or a pool of ``kv_pool_bytes``, the reserve
    then what is left), its batching limits, vLLM's groups as the blocks a request holds,
    what vLLM logs at start-up for ``max_model_len`` and the notes. ValueError naming what to
    change when vLLM would not start or the limits contradict each other."""
    if kv_pool_bytes is not None:
        kv_pool_bytes = check_int("KV pool (bytes)", kv_pool_bytes, 1, 2**50)
        reserve_bytes = _reserve_beside(
            kv_pool_bytes,
            total_bytes=total_bytes,
            wbytes=wbytes,
            tp=tp,
            gpu_mem_util=gpu_mem_util,
            vllm_version=vllm_version,
        )
    b = _pool(
        spec,
        total_bytes=total_bytes,
        max_model_len=max_model_len,
        wbytes=wbytes,
        gpu_mem_util=gpu_mem_util,
        reserve_bytes=reserve_bytes,
        block_size=block_size,
        dtype=dtype,
        scales=scales,
        tp=tp,
        vllm_version=vllm_version,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
        gpu_name=gpu_name,
    )
    bs = b.effective_block_size or b.block_size
    version, mns, mnbt, groups = _batching(
        spec,
        b,
        max_model_len=max_model_len,
        block_size=block_size,
        tp=tp,
        dtype=dtype,
        scales=scales,
        max_num_batched_tokens=max_num_batched_tokens,
        total_bytes=total_bytes,
        gpu_name=gpu_name,
        chunked_prefill=chunked_prefill,
    )
    notes = _notes(
        b,
        version=version,
        bs=bs,
        reserve_bytes=reserve_bytes,
        kv_pool_bytes=kv_pool_bytes,
        slide_groups=groups["slide_groups"],
        windows=windows,
        state_blocks=groups["state_blocks"],
    )
    return dict(
        num_blocks=b.num_blocks - _vllm.fact("null_block", version),
        block_size=bs,
        max_num_seqs=mns,
        max_num_batched_tokens=mnbt,
        kv_pool_bytes=b.kv_pool_bytes,
        block_bytes=b.block_bytes,
        vllm_version=version,
        notes=tuple(notes),
        window=windows[0] if windows else 0,
        logged_concurrency=b.max_concurrency,
        pool_blocks=b.num_blocks,
        logged_blocks_per_request=b.blocks_per_request,
        watermark_blocks=0 if chunked_prefill else int(V0_WATERMARK * b.num_blocks),
        **groups,
    )


def _notes(
    b: Budget,
    *,
    version: str,
    bs: int,
    reserve_bytes: int,
    kv_pool_bytes: int | None,
    slide_groups: int,
    windows: list[int],
    state_blocks: int,
) -> list[str]:
    """The assumptions a result reports: where the pool came from, the null block, the
    windows' and states' blocks."""
    notes = [
        f"pool: vLLM {version}'s arithmetic at gpu_memory_utilization {b.gpu_mem_util:g}, "
        f"reserve {reserve_bytes / 2**30:g} GiB, blocks of {bs} tokens"
        if kv_pool_bytes is None
        else f"pool: {kv_pool_bytes / 2**30:,.2f} GiB as given, blocks of {bs} tokens"
    ]
    if _vllm.fact("null_block", version):
        notes.append("one block is vLLM's null block and holds no tokens")
    if slide_groups:
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
