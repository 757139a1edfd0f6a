"""The KV pool of one GPU (``Pool``; the conventions and their defaults: kvcalc.engines.budget)
cut into blocks per layer, stage by stage: TensorRT-LLM's allocator."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..cache.deployment import Deployment
from ..cache.kv import stage_layers
from ..core.arith import UNBOUNDED_CONTEXT, cdiv, last_true
from ..core.dtypes import KV_DTYPES, DType, get_dtype
from ..core.model import Layer, counted


@dataclass(frozen=True)
class Pool:
    """The memory one GPU gives the cache under a convention."""

    total_bytes: int  # one GPU's memory as the driver reports it
    gpu_mem_util: float  # vLLM's gpu_memory_utilization, or the free fraction
    requested_bytes: int
    weights_bytes: int  # on this GPU
    reserve_bytes: int
    kv_pool_bytes: int  # may be negative: the weights and reserve do not fit


def stage_kv_layers(layers: Iterable[Layer], dep: Deployment) -> tuple[int, int]:
    """(K/V layers, state bytes of one sequence) of one stage's layers."""
    distinct = counted(layers)
    kv_layers = sum(count for lay, count in distinct if lay.stores_tokens)
    return kv_layers, sum(count * lay.state_bytes(dep.cache.state) for lay, count in distinct)


def binding_stage_blocks(
    dep: Deployment, pool: int, context: int, find_max_context: bool
) -> dict[str, Any]:
    """The figures (by Budget's field names) of the stage that holds the fewest sequences (the
    first of equals), by blocks per layer (TensorRT-LLM's convention)."""
    dtype = get_dtype(dep.cache.kv_dtype, KV_DTYPES)
    stages = enumerate(stage_layers(dep.spec, dep.tp, dep.pp))
    figures = [
        _stage(layers, i, pool, dep, dtype, context, find_max_context) for i, layers in stages
    ]
    return min(figures, key=lambda st: st["max_concurrency"])


def _stage(
    layers: tuple[Layer, ...],
    index: int,
    pool: int,
    dep: Deployment,
    dtype: DType,
    context: int,
    find_max_context: bool,
) -> dict[str, Any]:
    bs, scales = dep.engine.block_size, dep.cache.scales
    # Each distinct layer once, with its count (a 1,024-layer model has a handful)
    kv_layers = [
        (lay, count, lay.bytes_per_token(dtype, scales))
        for lay, count in counted(layers)
        if lay.stores_tokens
    ]
    n_kv, state = stage_kv_layers(layers, dep)
    block_bytes = bs * sum(count * b for _, count, b in kv_layers)
    usable = max(pool, 0)
    if block_bytes:
        sizes = {b for _, _, b in kv_layers}
        if len(sizes) == 1:
            num_blocks = usable // (bs * sizes.pop()) // n_kv  # vLLM's order of floors
        else:
            num_blocks = usable // block_bytes
        usable = num_blocks * block_bytes
    else:
        num_blocks = 0

    def seq_bytes(n: int) -> int:
        # Each layer holds whole blocks: cdiv(tokens kept, block_size) of them.
        return state + sum(
            count * cdiv(lay.tokens_kept(n), bs) * bs * b for lay, count, b in kv_layers
        )

    need_one = seq_bytes(context)
    return dict(
        stage=index,
        kv_layers=n_kv,
        page_bytes=bs * max((b for _, _, b in kv_layers), default=0),
        block_bytes=block_bytes,
        num_blocks=num_blocks,
        kv_capacity_tokens=num_blocks * bs,
        seq_bytes=need_one,
        max_concurrency=usable / need_one if need_one else math.inf,
        max_context_tokens=max_context(seq_bytes, usable) if find_max_context else None,
        state_bytes_per_seq=state,
    )


def max_context(seq_bytes: Callable[[int], int], usable: int) -> int | None:
    """Largest n with seq_bytes(n) <= usable (seq_bytes is non-decreasing); None when even
    UNBOUNDED_CONTEXT tokens fit (every layer keeps a bounded number of tokens)."""
    if seq_bytes(1) > usable:
        return 0
    if seq_bytes(UNBOUNDED_CONTEXT) <= usable:
        return None
    return last_true(lambda n: seq_bytes(n) <= usable, 1, UNBOUNDED_CONTEXT)
