"""Stop 7 (Shrinking the cache): how many times more conversations an FP8 cache fits, and why
not always exactly twice (a recurrent state that does not shrink, blocks that change size)."""

from __future__ import annotations

from ...cache.kv import kv_cache
from ...core.units import fmt_bytes
from ..techniques import techniques
from .lesson import TEXT, Lesson, Setup, fill, none_fits
from .slips import Slip, is_near
from .words import bytes_a_number, kinds_of


def stop7(s: Setup) -> Lesson:
    spec, n, t = s.spec, s.n, TEXT["stop7"]
    b16, b8 = s.pool(n, kv_dtype="bf16"), s.pool(n, kv_dtype="fp8")
    none_fits(b16, n, s.gpu)
    ratio = b8.max_concurrency / b16.max_concurrency
    k16 = kv_cache(spec, n, kv_dtype="bf16", tp=s.tp, pp=s.pp)
    k8 = kv_cache(spec, n, kv_dtype="fp8", tp=s.tp, pp=s.pp)
    state = k16.state_bytes
    blocks_differ = b16.effective_block_size != b8.effective_block_size
    # The FP8 row of the Shrinking the cache page, one conversation's K/V: the stop's figure.
    fp8 = next(r for r in techniques(s.deployment.but(kv_dtype="bf16"), n) if r.key == "fp8")
    nums = dict(
        what="latent" if kinds_of(spec) == {"mla"} else "K/V",
        k16=k16.kv_bytes_per_token_nominal,
        k8=k8.kv_bytes_per_token_nominal,
        stop3=" (stop 3)" if s.kv_dtype == "bf16" else "",
        c16=b16.max_concurrency,
        c8=b8.max_concurrency,
        state_bytes=state,
        state_b=fmt_bytes(state),
        layers=len(spec.state_layers),
        block16=b16.effective_block_size,
        block8=b8.effective_block_size,
        gpu=s.gpu.name,
        bf16_bytes=bytes_a_number("bf16"),
        fp8_bytes=bytes_a_number("fp8"),
        ratio=ratio,
        blocks16=b16.num_blocks,
        per16=b16.blocks_per_request,
        blocks8=b8.num_blocks,
        per8=b8.blocks_per_request,
        on_each=" on each GPU" if s.tp > 1 else "",
        fp8_b=fmt_bytes(fp8.seq_bytes),
        saving=fp8.saving,
    )
    nums["state"] = t["state"].format(**nums) if state else ""
    reason = "state" if state else "mla" if "mla" in kinds_of(spec) else "kernel"
    nums["block_reason"] = t["block_reason"][reason].format(**nums)
    givens = [s.tokens_given(), *fill(t["givens"], nums)]
    if state:
        givens.append(fill(t["givens_state"], nums))
    if blocks_differ:
        givens.append(fill(t["givens_block"], nums))
    slips: list[Slip] = [(1 / ratio, t["slip_inverse"])]
    if is_near(ratio, 2.0, 0.005):
        nums.update(why=t["twice"], halves=t["halves"])
    else:
        # Why an FP8 cache fits other than exactly 2x the BF16 conversations.
        reasons = [t["not_twice"]["state"].format(**nums)] if state else []
        if blocks_differ:
            reasons.append(t["not_twice"]["hybrid_blocks" if state else "blocks"])
        reason = " and ".join(reasons or [t["not_twice"]["pages"]]) + "."
        nums.update(why="Not exactly 2: " + reason, halves=", not 2x: " + reason)
        slips.append((2.0 / ratio, t["slip_two"].format(reason=reason)))
    return s.lesson(t, nums, givens=givens, slips=slips, value=ratio, unit="x")
