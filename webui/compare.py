"""The Budget page's side by side: the models compared with the one on the page, each budgeted on
the same GPU, pool and context, and the rows, sentences and curves that compare them."""

from __future__ import annotations

from dataclasses import dataclass

from kvcalc import budget, get_model, kv_cache
from kvcalc.cache.deployment import Deployment
from kvcalc.core.model import ModelSpec
from kvcalc.core.units import fmt_bytes, fmt_gib
from kvcalc.engines.budget import Budget
from kvcalc.perf.sweeps import concurrency_curve, context_grid

from .hosted import plain
from .memo import cached


@dataclass(frozen=True)
class Compared:
    """One model of the comparison: its budget at the page's context and its KV per token."""

    name: str
    spec: ModelSpec
    weights_bytes: int  # the whole model's (the budget holds one GPU's share)
    budget: Budget
    kv_per_token: int  # nominal: one token in every K/V layer

    @property
    def fits(self) -> bool:
        return self.budget.kv_pool_bytes > 0


def models(
    names: list[str],
    keys: dict[str, str],
    me: Compared,
    wdtype: str,
    pool: Deployment,
    convention: str,
) -> tuple[list[Compared], list[str]]:
    """The models called ``names`` (``keys``: name -> registry key), but the one on the page,
    budgeted at its context on ``pool`` (the page's deployment, the model swapped) in
    ``convention``; and a sentence for each model kvcalc refuses."""
    out, refused = [], []
    for name in names:
        if name == me.name or name not in keys:
            continue  # the model on the page is drawn already
        m = get_model(keys[name])
        w = m.weights(wdtype)
        try:
            dep = pool.but(spec=m.spec, weights=w)
            b = cached(budget)(dep, me.budget.context, convention=convention)
            kv = cached(kv_cache)(m.spec, 1, kv_dtype=pool.cache.kv_dtype, tp=pool.tp, pp=pool.pp)
        except ValueError as exc:
            refused.append(f"{m.name}: {exc}")
            continue
        out.append(Compared(m.name, m.spec, w.bytes, b, kv.kv_bytes_per_token_nominal))
    return out, refused


def curves(
    compared: list[Compared], context: int, pool: Deployment, convention: str
) -> list[tuple]:
    """(name, contexts, sequences that fit) for each model with a pool, on one grid of lengths
    around ``context``, each curve up to its own model's limit (F10)."""
    hi = max(context * 4, min(max(c.spec.max_context for c in compared), 1_048_576), 4096)
    grid = context_grid(256, hi, points=40, include=(context,))
    out = []
    for c in compared:
        if not c.fits:
            continue
        xs = [x for x in grid if x <= c.spec.max_context]
        if c.spec.max_context < hi and c.spec.max_context not in xs:
            xs.append(c.spec.max_context)
        dep = pool.but(spec=c.spec, weights_bytes=c.weights_bytes)
        out.append((c.name, xs, cached(concurrency_curve)(dep, xs, convention)))
    return out


def row(c: Compared, context: int) -> dict:
    """One model's row of the table: never a negative pool or a zero concurrency (F10)."""
    b, limit = c.budget, c.spec.max_context
    seqs = f"{b.max_concurrency:,.2f}" if c.fits else "none"
    if c.fits and context > limit:
        seqs += f" (past its limit, {limit:,})"
    return {
        "model": c.name,
        "KV per token": fmt_bytes(c.kv_per_token),
        "weights per GPU": fmt_gib(b.weights_bytes),
        "KV pool": fmt_gib(b.kv_pool_bytes)
        if c.fits
        else f"does not fit (weights {fmt_gib(b.weights_bytes)})",
        f"sequences of {context:,} tokens": seqs,
    }


def why(c: Compared, me: Compared, context: int) -> str:
    """One sentence: the cache ratio per token of ``c`` against the model on the page, and why
    the sequences that fit differ from it (the weights differ, so the pools do)."""
    a, s = c.kv_per_token, me.kv_per_token
    more = a > s
    r = a / s if more else s / a
    text = (
        f"Per token {plain(c.name)} keeps {fmt_bytes(a)} against {plain(me.name)}'s "
        f"{fmt_bytes(s)}: {r:.2f}x {'more' if more else 'less'}."
    )
    if not (me.fits and c.fits):
        return text
    mine, theirs = me.budget.max_concurrency, c.budget.max_concurrency
    rc = mine / theirs if more else theirs / mine
    if abs(rc / r - 1) < 0.005:
        return text[:-1] + f", and {rc:.2f}x {'fewer' if more else 'more'} sequences fit."
    cause = (
        f"the weights differ too ({fmt_gib(c.budget.weights_bytes)} against "
        f"{fmt_gib(me.budget.weights_bytes)} per GPU), so the pools do"
        if c.budget.weights_bytes != me.budget.weights_bytes
        else "whole blocks round the two pools differently"
    )
    return text + (
        f" Yet {rc:.2f}x {'fewer' if more else 'more'} sequences of {context:,} tokens fit, "
        f"not {r:.2f}x: {cause}."
    )
