"""Stops 1 (Home) and 2 (Cache fill): the KV cache of one conversation, per token and whole."""

from __future__ import annotations

from ...cache.kv import kv_cache
from ...core.units import GiB, fmt_bytes, fmt_gib
from .lesson import CONVERSATION, TEXT, Lesson, Setup
from .slips import Slip, as_full, kv_parts, kv_slips
from .words import (
    KIND_WORDS,
    format_given,
    geometry_givens,
    kinds_of,
    layers_phrase,
    stores_sentence,
)


def stop1(s: Setup) -> Lesson:
    spec, t = s.spec, TEXT["stop1"]
    r = kv_cache(spec, 1, kv_dtype=s.kv_dtype)
    per = r.kv_bytes_per_token_nominal
    home = kv_cache(spec, CONVERSATION, kv_dtype=s.kv_dtype, tp=s.tp, pp=s.pp)  # as Home shows
    home_per = home.kv_bytes_per_token_nominal
    slips = kv_slips(spec, s.kv_dtype, 1, per_token=True)
    slips.append((1 / 1024, t["kib"].format(per_kib=per / 1024)))
    if "mla" in kinds_of(spec):
        p = kv_parts(spec, s.kv_dtype, 1)
        second = t["second_mla"].format(times=p["mha"] / p["mla"])
    elif "state" in kinds_of(spec):
        second = t["second_state"].format(layers=len(spec.kv_layers))
    else:
        second = t["second"]
    nums = dict(
        layers=layers_phrase(spec),
        stores=stores_sentence(spec),
        kvd=s.kvd,
        per=per,
        per_b=fmt_bytes(per),
        per_gpu=s.per_gpu_note(per, home_per),
        formula=r.per_token_formula(),
        tp_label=t["tp_label"].format(tp=s.tp) if s.gpus > 1 else "",
        home_b=fmt_bytes(home_per),
        second=second,
    )
    givens = [
        ("Layers (num_hidden_layers)", layers_phrase(spec)),
        *geometry_givens(spec),
        format_given(s.kv_dtype),
    ]
    return s.lesson(t, nums, givens=givens, slips=slips, level="core", value=per, unit="B")


def stop2(s: Setup) -> Lesson:
    spec, n, t = s.spec, s.n, TEXT["stop2"]
    r = kv_cache(spec, n, kv_dtype=s.kv_dtype)
    per = kv_cache(spec, 1, kv_dtype=s.kv_dtype).kv_bytes_per_token_nominal
    total = r.total_bytes  # K/V and any recurrent state: what Home's figure counts
    rows = [row for row in r.rows if row.stores_tokens]
    givens = [s.tokens_given(), ("KV cache per token (stop 1)", f"{per:,} B ({fmt_bytes(per)})")]
    if len(rows) > 1 or any(row.tokens_kept < n for row in rows):
        for row in rows:
            keep = t["keeps_last" if row.tokens_kept < n else "keeps_all"]
            each = t["each"].format(
                b=row.bytes_per_token_per_layer, keep=keep.format(kept=row.tokens_kept)
            )
            givens.append((f"{row.layers:,} {KIND_WORDS.get(row.kind, row.kind)} layers", each))
    state_b = fmt_bytes(r.state_bytes)
    if r.state_bytes:
        state = t["state_given"].format(state=r.state_bytes, state_b=state_b)
        givens.append(("Recurrent state per conversation", state))
    # The slips: the generic ones, a window ignored, the state left out.
    slips: list[Slip] = kv_slips(spec, s.kv_dtype, n)
    full_total = kv_cache(as_full(spec), n, kv_dtype=s.kv_dtype).total_bytes
    if full_total != total:
        window = min(row.tokens_kept for row in rows)
        slips.append((full_total / total, t["slip_window"].format(n=n, window=window)))
    if r.state_bytes:
        slips.append((r.kv_bytes / total, t["slip_state"]))
    # (the byte count typed bare is read in bytes (quiz.BYTES_BARE), and right)
    kinds = kinds_of(spec)
    if "sliding" in kinds or "chunked" in kinds:
        second = "second_window"
    else:
        second = "second_state" if r.state_bytes else "second"
    home = kv_cache(spec, n, kv_dtype=s.kv_dtype, tp=s.tp, pp=s.pp)  # as Home shows it
    terms = " + ".join(
        f"{row.layers} x {row.bytes_per_token_per_layer:,} B x {row.tokens_kept:,} tokens"
        for row in rows
    )
    nums = dict(
        total=total,
        total_gib=fmt_gib(total, 3) if total < GiB else fmt_gib(total),
        total_b=f"{fmt_bytes(total)}, " if total < GiB else "",
        total_h=fmt_bytes(total),
        kv_b=fmt_bytes(r.kv_bytes),
        state_b=state_b,
        every_b=fmt_bytes(per * n),
        per=per,
        per_b=fmt_bytes(per),
        grow_b=fmt_bytes(r.kv_bytes_per_token),
        terms=terms + (f" + {r.state_bytes:,} B state" if r.state_bytes else ""),
        per_gpu=" per GPU" if s.gpus > 1 else "",
        home_b=fmt_bytes(home.total_bytes),
    )
    nums["state"] = t["state"].format(**nums) if r.state_bytes else ""
    nums["less"] = "" if r.kv_bytes == per * n else t["less"].format(n=n, **nums)
    nums["second"] = t[second].format(**nums)
    return s.lesson(
        t, nums, givens=givens, slips=slips, level="core", value=total, unit="B", ask_unit="GiB"
    )
