"""The figures of each budget convention (kvcalc.engines.budget): what a pool of KV-cache memory
holds of one model, computed three ways.

- ``vllm_figures``: vLLM's own arithmetic, kvcalc.engines.vllm.predict (blocks shared by groups of
  layers, its start-up check, max_num_seqs);
- ``ideal_figures``: the bytes one sequence really holds (kvcalc.cache.kv), no block rounding and
  no window slack;
- ``trtllm_figures``: blocks per layer, each layer whole blocks of the tokens it keeps.

Each returns the fields of a Budget that its convention computes, for budget() to complete."""

from __future__ import annotations

import math
from typing import Any

from ..cache.kv import kv_cache
from ..core.arith import UNBOUNDED_CONTEXT, cdiv, last_true
from ..core.model import ModelSpec, counted
from ..core.units import check_int
from . import vllm as _vllm


def vllm_figures(
    spec: ModelSpec,
    stages,
    pool: int,
    *,
    context: int,
    concurrency: int,
    block_size: int,
    dtype,
    scales: bool,
    sdtype,
    tp: int,
    pp: int,
    find_max_context: bool,
    vllm_version: str | None,
    max_num_batched_tokens: int | None,
    max_num_seqs: int | None,
    total_bytes: int,
    gpu_name: str | None,
) -> dict:
    """vLLM's figures (kvcalc.engines.vllm.predict) for a pool, with the layer count and the
    state of the binding stage."""
    best = _binding_stage(
        stages,
        pool,
        block_size,
        context,
        concurrency,
        dtype,
        scales,
        sdtype,
        find_max_context=False,
    )
    best.update(
        _vllm_fields(
            spec,
            pool,
            context,
            concurrency,
            block_size=block_size,
            kv_dtype=dtype.name,
            scales=scales,
            state_dtype=sdtype.name,
            tp=tp,
            pp=pp,
            version=vllm_version,
            mnbt=max_num_batched_tokens,
            max_num_seqs=max_num_seqs,
            total_bytes=total_bytes,
            gpu_name=gpu_name,
            find_max_context=find_max_context,
        )
    )
    return best


def ideal_figures(
    spec: ModelSpec,
    stages,
    pool: int,
    *,
    context: int,
    concurrency: int,
    block_size: int,
    dtype,
    scales: bool,
    sdtype,
    tp: int,
    pp: int,
    find_max_context: bool,
    **_: Any,
) -> dict:
    """The ideal convention's figures: the bytes one sequence really holds, against the pool."""
    best = _binding_stage(
        stages,
        pool,
        block_size,
        context,
        concurrency,
        dtype,
        scales,
        sdtype,
        find_max_context=False,
    )
    best.update(
        _ideal_fields(
            spec,
            pool,
            context,
            concurrency,
            dtype.name,
            scales,
            sdtype.name,
            tp,
            pp,
            find_max_context,
        )
    )
    return best


def trtllm_figures(
    spec: ModelSpec,
    stages,
    pool: int,
    *,
    context: int,
    concurrency: int,
    block_size: int,
    dtype,
    scales: bool,
    sdtype,
    find_max_context: bool,
    **_: Any,
) -> dict:
    """TensorRT-LLM's figures: the stage that holds the fewest sequences, by blocks per layer."""
    return _binding_stage(
        stages,
        pool,
        block_size,
        context,
        concurrency,
        dtype,
        scales,
        sdtype,
        find_max_context=find_max_context,
    )


def _binding_stage(
    stages, pool, bs, context, concurrency, dtype, scales, sdtype, *, find_max_context: bool
) -> dict:
    """The figures of the stage that holds the fewest sequences (the first of equals), by
    blocks per layer."""
    return min(
        (
            _stage(
                layers,
                index,
                pool,
                bs,
                context,
                concurrency,
                dtype,
                scales,
                sdtype,
                find_max_context,
            )
            for index, layers in enumerate(stages)
        ),
        key=lambda cand: cand["max_concurrency"],
    )


def _stage(
    layers, index, pool, bs, context, concurrency, dtype, scales, sdtype, find_max_context=True
) -> dict:
    # Each distinct layer once, with its count (a 1,024-layer model has a handful)
    distinct = counted(layers)
    kv_layers = [
        (lay, count, lay.bytes_per_token(dtype, scales))
        for lay, count in distinct
        if lay.stores_tokens
    ]
    n_kv = sum(count for _, count, _ in kv_layers)
    block_bytes = bs * sum(count * b for _, count, b in kv_layers)
    state = sum(count * lay.state_bytes(sdtype) for lay, count in distinct)
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
    max_conc = usable / need_one if need_one else math.inf
    needed = concurrency * need_one
    return {
        "kv_layers": n_kv,
        "page_bytes": bs * max((b for _, _, b in kv_layers), default=0),
        "block_bytes": block_bytes,
        "num_blocks": num_blocks,
        "kv_capacity_tokens": num_blocks * bs,
        "seq_bytes": need_one,
        "max_concurrency": max_conc,
        "max_context_tokens": _max_context(seq_bytes, usable) if find_max_context else None,
        "needed_bytes": needed,
        "fits": pool > 0 and needed <= usable,
        "overflow_bytes": max(0, needed - usable),
        "state_bytes_per_seq": state,
        "stage": index,
    }


def _max_context(seq_bytes, usable: int) -> int | None:
    """Largest n with seq_bytes(n) <= usable (seq_bytes is non-decreasing); None when even
    UNBOUNDED_CONTEXT tokens fit (every layer keeps a bounded number of tokens)."""
    if seq_bytes(1) > usable:
        return 0
    if seq_bytes(UNBOUNDED_CONTEXT) <= usable:
        return None
    return last_true(lambda n: seq_bytes(n) <= usable, 1, UNBOUNDED_CONTEXT)


def _vllm_fields(
    spec: ModelSpec,
    pool: int,
    context: int,
    concurrency: int,
    *,
    block_size: int,
    kv_dtype: str,
    scales: bool,
    state_dtype: str,
    tp: int,
    pp: int,
    version: str | None,
    mnbt: int | None,
    max_num_seqs: int | None,
    total_bytes: int,
    gpu_name: str | None,
    find_max_context: bool,
) -> dict:
    """Budget figures from kvcalc.engines.vllm.predict: blocks, per-request blocks, concurrency, the
    start-up check and max_num_seqs, exactly as vLLM computes them."""
    kw: dict[str, Any] = dict(
        block_size=block_size,
        tp=tp,
        pp=pp,
        kv_dtype=kv_dtype,
        scales=scales,
        state_dtype=state_dtype,
        vllm_version=version,
        gpu_name=gpu_name,
        max_num_batched_tokens=mnbt
        or _vllm.default_max_num_batched_tokens(version, total_bytes, gpu_name),
    )
    available = max(pool, 0)
    p = _vllm.predict(spec, available_bytes=available, max_model_len=context, **kw)
    block_bytes = p.page_bytes * p.group_size
    usable = p.num_blocks * block_bytes
    seq = p.blocks_per_request * block_bytes
    if max_num_seqs is None:
        max_num_seqs = _vllm.default_max_num_seqs(version, total_bytes, gpu_name)
    max_num_seqs = check_int("max_num_seqs", max_num_seqs, 1, 10**7)
    error = None
    if p.blocks_per_request > p.num_blocks - _vllm.fact("null_block", version):
        error = _vllm.startup_error(
            spec, available_bytes=available, max_model_len=context, prediction=p, **kw
        )
    needed = concurrency * seq
    return {
        "page_bytes": p.page_bytes,
        "block_bytes": block_bytes,
        "num_blocks": p.num_blocks,
        "kv_capacity_tokens": p.kv_cache_tokens,
        "seq_bytes": seq,
        "max_concurrency": p.max_concurrency,
        "max_context_tokens": (
            _vllm.estimate_max_model_len(spec, available_bytes=available, **kw)
            if find_max_context
            else None
        ),
        "needed_bytes": needed,
        "fits": pool > 0 and needed <= usable and error is None,
        "overflow_bytes": max(0, needed - usable),
        "stage": p.stage,
        "blocks_per_request": p.blocks_per_request,
        "group_size": p.group_size,
        "held_blocks_per_request": p.held_blocks(context),
        "num_groups": len(p.groups),
        "effective_block_size": p.block_size,
        "vllm_version": p.vllm_version,
        "max_num_seqs": max_num_seqs,
        "startup_error": error,
        "notes": p.notes,
    }


def _ideal_fields(
    spec: ModelSpec,
    pool: int,
    context: int,
    concurrency: int,
    kv_dtype: str,
    scales: bool,
    state_dtype: str,
    tp: int,
    pp: int,
    find_max_context: bool,
) -> dict:
    """The bytes one sequence really holds, with no block rounding and no window slack."""

    def seq_bytes(n: int) -> int:
        r = kv_cache(
            spec, n, kv_dtype=kv_dtype, scales=scales, state_dtype=state_dtype, tp=tp, pp=pp
        )
        return r.kv_bytes + r.state_bytes

    usable = max(pool, 0)
    one = seq_bytes(context)
    needed = concurrency * one
    return {
        "num_blocks": 0,
        "kv_capacity_tokens": 0,
        "seq_bytes": one,
        "max_concurrency": usable / one if one else math.inf,
        "max_context_tokens": _max_context(seq_bytes, usable) if find_max_context else None,
        "needed_bytes": needed,
        "fits": pool > 0 and needed <= usable,
        "overflow_bytes": max(0, needed - usable),
        "block_bytes": 0,
        "page_bytes": 0,
    }
