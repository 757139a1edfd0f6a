"""Stops 3 (Budget) and 6 (Serving frontier): the KV pool vLLM sizes, and how many
conversations or requests it holds."""

from __future__ import annotations

import math
from typing import Any

from ...cache.kv import kv_cache
from ...core.model import SlidingWindow
from ...core.units import GB, fmt_bytes, fmt_gib
from ...engines.budget import Budget
from ..quiz import TOLERANCE
from .lesson import (
    TEXT,
    Lesson,
    Setup,
    fill,
    none_fits,
    pool_numbers,
    ratio_of,
    request_tokens,
)
from .slips import Slip, as_full, kv_slips
from .words import kinds_of, reserve_rule, where_text


def _pool_slips(s: Setup, b: Budget, t: dict[str, Any], nums: dict[str, Any]) -> list[Slip]:
    """Stop 3's slips: ways to miscount the pool or a conversation, as wrong / right."""
    spec, n, conc, g = s.spec, s.n, b.max_concurrency, s.gpus

    def wrong(**kw: Any) -> float | None:  # the count with the setup miscounted, over conc
        return ratio_of(lambda: s.pool(n, **kw).max_concurrency, conc)

    slips: list[Slip] = [
        (b.requested_bytes / b.seq_bytes / conc if b.seq_bytes else None, t["slip_all"]),
        (wrong(reserve_bytes=0), t["slip_reserve"]),
        (wrong(gpu_memory_utilization=1.0), t["slip_util"]),
    ]
    if s.gpu.memory_mib_driver:
        slips.append((wrong(memory_bytes=int(s.gpu.memory_gb * GB)), t["slip_sheet"]))
    if g > 1:
        slips.append((wrong(weights_bytes=s.w.bytes * g), t["slip_tp"]))
        whole = kv_cache(spec, n, kv_dtype=s.kv_dtype).total_bytes
        mine = kv_cache(spec, n, kv_dtype=s.kv_dtype, tp=s.tp, pp=s.pp).total_bytes
        if "mla" in kinds_of(spec) and whole == mine * s.pp:
            slips.append((float(s.tp), t["slip_latent"]))
        elif mine and whole != mine:
            slips.append((mine / whole, t["slip_share"]))
    slips = [(r, why.format(**nums)) for r, why in slips]
    slips += kv_slips(spec, s.kv_dtype, n, s.tp, count=True)
    if as_full(spec) != spec:
        full = wrong(spec=as_full(spec))
        if full is not None and full < 1:  # else the windows are charged the whole conversation
            slips.append((full, t["slip_window"]))
    return slips


def _running(s: Setup, b: Budget, t: dict[str, Any]) -> tuple[str, tuple[tuple[float, str], ...]]:
    """Why vLLM's logged figure is what it is (the end of stop 3's answer), and the running
    server's figures stop 3 accepts beside it, with the note that says what they are. They
    differ where vLLM's start-up line reserves a sliding window more than a conversation holds
    (its window plus the tokens in flight, up to the whole conversation)."""
    spec, n = s.spec, s.n
    conc, held = b.max_concurrency, b.held_concurrency
    if abs(held / conc - 1) <= TOLERANCE:
        return t["full_length"], ()
    one = kv_cache(spec, n, kv_dtype=s.kv_dtype, tp=s.tp, pp=s.pp).total_bytes
    windows = sorted({lay.window for lay in spec.layers if isinstance(lay, SlidingWindow)})
    nums = dict(
        n=n,
        held=held,
        conc=conc,
        held_blocks=b.held_blocks_per_request,
        held_b=fmt_bytes(b.held_bytes),
        one_b=fmt_bytes(one),
        pool_gib=fmt_gib(b.kv_pool_bytes),
        by_bytes=b.kv_pool_bytes / one,
        keep=t["keep_last"].format(windows[0]) if len(windows) == 1 else t["keep_window"],
        charge=t["charge"].format(n=n, per_req=b.blocks_per_request),
    )
    note = t["running_note"].format(**nums)
    return t["running_why"].format(**nums), ((held, note), (nums["by_bytes"], note))


def stop3(s: Setup) -> Lesson:
    spec, n, g, t = s.spec, s.n, s.gpus, TEXT["stop3"]
    b = s.pool(n)
    none_fits(b, n, s.gpu)
    uniform = b.num_groups <= 1
    mib = s.gpu.memory_mib_driver
    why, also = _running(s, b, t)
    nums = dict(
        pool_numbers(b),
        n=n,
        g=g,
        tp=s.tp,
        kvd=s.kvd,
        whole=math.floor(b.max_concurrency),
        where=where_text(s.gpu, s.tp, s.pp),
        each_gpu=t["each_gpu"] if g > 1 else "",
        per_gpu=" per GPU" if g > 1 else "",
        of_all=f", 1/{g} of {fmt_gib(s.w.bytes)}" if g > 1 else "",
        driver=f"{mib:,} MiB = " if mib else "",
        sheet_gb=s.gpu.memory_gb,
        mib=mib,
        share=t["share"].format(groups=b.num_groups) if not uniform else "",
        rule=f" ({reserve_rule(spec)})" if not uniform else "",
        why=why,
    )
    givens = [s.tokens_given(), *fill(t["givens"], nums)]
    slips = _pool_slips(s, b, t, nums)
    return s.lesson(
        t,
        nums,
        givens=givens,
        slips=slips,
        value=b.max_concurrency,
        unit="sequences",
        floor_ok=True,
        also=also,
    )


def stop6(s: Setup) -> Lesson:
    spec, t = s.spec, TEXT["stop6"]
    prompt, output = request_tokens(spec)
    ctx = prompt + output
    b = s.pool(ctx)
    none_fits(b, ctx, s.gpu)
    conc = b.max_concurrency

    def conc_at(tokens: int) -> float:
        return s.pool(tokens).max_concurrency

    nums = dict(pool_numbers(b), prompt=prompt, output=output, ctx=ctx, tokens=b.kv_capacity_tokens)
    slips = [
        (ratio_of(lambda: conc_at(prompt), conc), t["slip_prompt"].format(**nums)),
        (ratio_of(lambda: conc_at(output), conc), t["slip_output"].format(**nums)),
    ]
    if s.n != ctx:
        slips.append((ratio_of(lambda: conc_at(s.n), conc), t["slip_stop3"].format(n=s.n, **nums)))
    slips += kv_slips(spec, s.kv_dtype, ctx, s.tp, count=True)
    givens = list(fill(t["givens"], nums))
    if b.num_groups > 1:
        givens += fill(t["givens_groups"], nums)
    # no floor_ok: it asks what vLLM logs (600.71x), and 601 rounds that
    return s.lesson(t, nums, givens=givens, slips=slips, value=conc, unit="sequences")
