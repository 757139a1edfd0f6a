"""The slips the tour's grader names: a wrong answer's ratio to the right one, and its meaning."""

from __future__ import annotations

import math
from dataclasses import fields

from ...core.dtypes import KV_DTYPES, get_dtype
from ...core.model import FullAttention, ModelSpec
from ..prose import prose
from ..quiz import TOLERANCE
from .words import ATTENTION_KINDS

TEXT = prose("tour")["slips"]
Slip = tuple[float | None, str]  # (answer / right answer, what it means); None: not computable


def is_near(a: float, b: float, tol: float = TOLERANCE) -> bool:
    return abs(a / b - 1) < tol if b else a == 0


def slips_of(*pairs: Slip) -> tuple[tuple[float, str], ...]:
    """Named mistakes as (ratio, message), those graded right dropped, equal ones joined."""
    out: list[list] = []
    for ratio, why in pairs:
        if ratio is None or not math.isfinite(ratio) or ratio <= 0 or is_near(ratio, 1.0):
            continue
        for entry in out:
            if is_near(ratio, entry[0]):
                entry[1] += f" Or: {why[0].lower() + why[1:]}"
                break
        else:
            out.append([ratio, why])
    return tuple((r, w) for r, w in out)


ROUND_FACTORS = ((2, "Twice"), (0.5, "Half"), (8, "Eight times"), (1 / 8, "An eighth of"))


def lead_text(ratio: float, why: str) -> str:
    """A slip's message led by its factor when that is round: "Twice the answer: that ..."."""
    for r, text in ROUND_FACTORS:
        if is_near(ratio, r):
            return f"{text} the answer: {why}"
    return why[0].upper() + why[1:]


def as_full(spec: ModelSpec) -> ModelSpec:
    """The same model with every sliding or chunked layer keeping every token."""

    def full(layer):
        if layer.kind in ("sliding", "chunked"):
            return FullAttention(**{f.name: getattr(layer, f.name) for f in fields(FullAttention)})
        return layer

    return spec.with_layers(full(layer) for layer in spec.layers)


def kv_parts(spec: ModelSpec, kv_dtype: str, n: int, tp: int = 1) -> dict[str, int]:
    """One sequence's cache bytes at ``n`` tokens on one GPU by holder ("att", "mla", "extra",
    "state"), and two misreadings: "q" (a K/V head per query head), "mha" (MLA rebuilt)."""
    d = get_dtype(kv_dtype, KV_DTYPES)
    parts = dict.fromkeys(("att", "mla", "extra", "state", "q", "mha"), 0)
    for layer in spec.layers:
        lay = layer.split(tp) if tp > 1 else layer
        parts["state"] += lay.state_bytes(get_dtype("bf16"))
        if not lay.stores_tokens:
            continue
        kept = lay.tokens_kept(n)
        extra = lay.extra.bytes_per_token if lay.extra is not None else 0
        parts["extra"] += extra * kept
        own = (lay.bytes_per_token(d) - extra) * kept
        mha = lay.as_mha()
        rebuilt = (mha.bytes_per_token(d) - (mha.extra.bytes_per_token if mha.extra else 0)) * kept
        parts["mla" if lay.kind == "mla" else "att"] += own
        parts["mha" if lay.kind == "mla" else "q"] += rebuilt
    return parts


def kv_slips(
    spec: ModelSpec,
    kv_dtype: str,
    n: int,
    tp: int = 1,
    *,
    count: bool = False,
    per_token: bool = False,
) -> list[Slip]:
    """The slips of K/V arithmetic for one sequence's bytes at ``n`` tokens, or (``count``)
    how many fit, or (``per_token``) one token's bytes, with the slips of counting layers."""
    p = kv_parts(spec, kv_dtype, n, tp)
    if per_token:
        p["state"] = 0
    total = p["att"] + p["mla"] + p["extra"] + p["state"]
    if not total or not (p["att"] or p["mla"]):
        return []
    d = get_dtype(kv_dtype, KV_DTYPES)

    def r(wrong: float) -> float:
        return total / wrong if count else wrong / total

    def led(wrong: float, why: str) -> Slip:
        return r(wrong), lead_text(r(wrong), why)

    kv = total - p["state"]
    out: list[Slip] = []
    if p["att"]:
        out.append(led(total - p["att"] / 2, TEXT["half"]))
    if p["mla"]:
        out.append(led(total + p["mla"], TEXT["mla_factor_2"]))
        out.append((r(total - p["mla"] + p["mha"]), TEXT["mla_rebuilt"]))
    bpe = d.bytes_per_element
    article = "An" if d.name.upper()[0] in "AEFHILMNORSX" else "A"  # an FP8, an INT4, a BF16
    bits = TEXT["bits"].format(
        article=article, dtype=d.name.upper(), bpe=bpe, s="" if bpe == 1 else "s", bits=d.bits
    )
    out.append(led(total + 7 * kv, bits))
    if p["att"] and p["q"] != p["att"]:
        layer = next(lay for lay in spec.layers if lay.kind in ATTENTION_KINDS)
        why = TEXT["query_heads"].format(q=layer.q_heads, kv=layer.kv_heads)
        out.append((r(total - p["att"] + p["q"]), why))
    stores = spec.kv_layers
    alike = len({lay.bytes_per_token(d) for lay in stores}) == 1
    counts = dict(all=spec.num_layers, stores=len(stores))
    if per_token and alike and len(stores) < spec.num_layers:
        out.append((r(kv * spec.num_layers / len(stores)), TEXT["all_layers"].format(**counts)))
    if per_token and alike and len(stores) > 1:
        out.append((r(kv / len(stores)), TEXT["one_layer"].format(**counts)))
    return out
