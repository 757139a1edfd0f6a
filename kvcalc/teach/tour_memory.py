"""The tour's memory stops: 1 Home (the KV cache of one conversation), 2 Cache fill (how it
fills, token by token and layer by layer), 3 Budget (the pool and the conversations it holds)."""

from __future__ import annotations

import math
from typing import Any

from ..cache.kv import KVCache, kv_cache
from ..core.model import SlidingWindow
from ..core.units import GB, GiB, fmt_bytes, fmt_gib
from ..engines.budget import Budget
from .quiz import TOLERANCE, Question
from .tour_text import (
    CONVERSATION,
    KIND_WORDS,
    Lesson,
    Setup,
    as_full,
    format_given,
    geometry_givens,
    kinds_of,
    kv_parts,
    kv_pool,
    kv_slips,
    layers_phrase,
    none_fits,
    ratio_of,
    reserve_rule,
    slips_of,
    stores_sentence,
    where_text,
)


def stop1(s: Setup) -> Lesson:
    spec = s.spec
    r = kv_cache(spec, 1, kv_dtype=s.kv_dtype)
    per = r.kv_bytes_per_token_nominal
    home = kv_cache(spec, CONVERSATION, kv_dtype=s.kv_dtype, tp=s.tp, pp=s.pp)  # as Home shows
    slips = kv_slips(spec, s.kv_dtype, 1, per_token=True)
    slips.append(
        (
            1 / 1024,
            f"That looks like KiB: a bare number here is read in bytes (B). "
            f"Type the unit, e.g. '{per / 1024:g} KiB'.",
        )
    )
    q = Question(
        qid="tour-1",
        level="core",
        value=per,
        unit="B",
        ask_unit="B",
        kv_hints=False,
        prompt=(
            f"{s.name} has {layers_phrase(spec)}. {stores_sentence(spec)} With the cache "
            f"in {s.kvd}, how many bytes does one token add to the cache of the whole model? "
            "(1 KiB = 1,024 B)"
        ),
        answer=(
            f"**{per:,} B ({fmt_bytes(per)})** per token"
            f"{s.per_gpu_note(per, home.kv_bytes_per_token_nominal)}."
        ),
        solution=r.per_token_formula(),
        mistakes=slips_of(*slips),
    )
    tp_label = f" (per GPU at tensor parallel {s.tp})" if s.tp * s.pp > 1 else ""
    if "mla" in kinds_of(spec):
        p = kv_parts(spec, s.kv_dtype, 1)
        second = (
            f"MLA's latent is {p['mha'] / p['mla']:,.0f} times smaller than the K and V "
            "of every head it stands for; query heads never count."
        )
    elif "state" in kinds_of(spec):
        second = (
            f"Only the {len(spec.kv_layers):,} attention layers add bytes per token; the "
            "recurrent layers' state is fixed. Query heads never count."
        )
    else:
        second = (
            "Fewer KV heads (GQA), a latent (MLA), fewer bytes a number (FP8) or a window "
            "shrink it; query heads never count."
        )
    return Lesson(
        stop=s.stop,
        question=q,
        givens=(
            ("Layers (num_hidden_layers)", layers_phrase(spec)),
            *geometry_givens(spec),
            format_given(s.kv_dtype),
        ),
        figure=(f"Home: KV cache per token{tp_label}", fmt_bytes(home.kv_bytes_per_token_nominal)),
        recap=(
            f"One token costs {fmt_bytes(per)} in {s.name}'s cache, in every layer that "
            "stores it, for as long as the conversation lasts.",
            second,
        ),
        discuss=(
            "Why are the queries not cached? What would keeping them cost per token, and "
            "what would it save?"
        ),
    )


def _fill_givens(s: Setup, r: KVCache, per: int) -> list[tuple[str, str]]:
    """What stop 2 gives: the tokens, stop 1's bytes per token, what each kind of layer keeps,
    and any recurrent state."""
    n = s.n
    givens = [s.tokens_given(), ("KV cache per token (stop 1)", f"{per:,} B ({fmt_bytes(per)})")]
    rows = [row for row in r.rows if row.stores_tokens]
    if len(rows) > 1 or any(row.tokens_kept < n for row in rows):
        for row in rows:
            keep = (
                f"they keep only the last {row.tokens_kept:,} tokens"
                if row.tokens_kept < n
                else "they keep every token"
            )
            givens.append(
                (
                    f"{row.layers:,} {KIND_WORDS.get(row.kind, row.kind)} layers",
                    f"{row.bytes_per_token_per_layer:,} B per token each; {keep}",
                )
            )
    if r.state_bytes:
        givens.append(
            (
                "Recurrent state per conversation",
                f"{r.state_bytes:,} B ({fmt_bytes(r.state_bytes)}), whatever its length",
            )
        )
    return givens


def _fill_slips(s: Setup, r: KVCache, total: int) -> list[tuple[float | None, str]]:
    """The slips stop 2's grader names: a window ignored, the state left out."""
    spec, n = s.spec, s.n
    slips = kv_slips(spec, s.kv_dtype, n)
    full_total = kv_cache(as_full(spec), n, kv_dtype=s.kv_dtype).total_bytes
    if full_total != total:
        window = min(row.tokens_kept for row in r.rows if row.stores_tokens)
        slips.append(
            (
                full_total / total,
                f"That keeps all {n:,} tokens in every layer: a sliding-window layer keeps "
                f"only its last {window:,}.",
            )
        )
    if r.state_bytes:
        slips.append(
            (r.kv_bytes / total, "That is the K/V alone: add the recurrent layers' fixed state.")
        )
    return slips  # the byte count typed bare is read in bytes (quiz.BYTES_BARE), and right


def stop2(s: Setup) -> Lesson:
    spec, n = s.spec, s.n
    r = kv_cache(spec, n, kv_dtype=s.kv_dtype)
    per = kv_cache(spec, 1, kv_dtype=s.kv_dtype).kv_bytes_per_token_nominal
    total = r.total_bytes  # K/V and any recurrent state: what Home's figure counts
    kinds = kinds_of(spec)
    givens = _fill_givens(s, r, per)
    slips = _fill_slips(s, r, total)
    every = per * n
    note = (
        ""
        if r.kv_bytes == every
        else f" Less than {n:,} x {per:,} B = {fmt_bytes(every)}: some layers keep only a "
        "window of recent tokens, or no per-token cache at all."
    )
    state = (
        f" That is {fmt_bytes(r.kv_bytes)} of K/V and {fmt_bytes(r.state_bytes)} of "
        "recurrent state."
        if r.state_bytes
        else ""
    )
    q = Question(
        qid="tour-2",
        level="core",
        value=total,
        unit="B",
        ask_unit="GiB",
        kv_hints=False,
        prompt=(
            f"A conversation has reached {n:,} tokens. How much cache does {s.name} hold "
            f"for it, in GiB, for the whole model? (1 GiB = 2^30 B)"
        ),
        answer=(
            f"**{fmt_gib(total, 3)}** ({fmt_bytes(total)}, {total:,} B).{state}{note}"
            if total < GiB
            else f"**{fmt_gib(total)}** ({total:,} B).{state}{note}"
        ),
        solution=(
            " + ".join(
                f"{row.layers} x {row.bytes_per_token_per_layer:,} B x {row.tokens_kept:,} tokens"
                for row in r.rows
                if row.stores_tokens
            )
            + (f" + {r.state_bytes:,} B state" if r.state_bytes else "")
            + f" = {total:,} B"
        ),
        mistakes=slips_of(*slips),
    )
    home = kv_cache(spec, n, kv_dtype=s.kv_dtype, tp=s.tp, pp=s.pp)  # as Home shows it
    if "sliding" in kinds or "chunked" in kinds:
        second = (
            f"Past their windows the sliding layers stop growing: each further token adds "
            f"{fmt_bytes(r.kv_bytes_per_token)}, not {fmt_bytes(per)}."
        )
    elif r.state_bytes:
        second = (
            f"The recurrent state ({fmt_bytes(r.state_bytes)}) does not grow; only the "
            "attention layers' K/V does."
        )
    else:
        second = "Twice the tokens, twice the bytes: the cache grows in a straight line."
    return Lesson(
        stop=s.stop,
        question=q,
        givens=tuple(givens),
        figure=(
            f"Home: one {n:,}-token conversation" + (" per GPU" if s.tp * s.pp > 1 else ""),
            fmt_bytes(home.total_bytes),
        ),
        recap=(f"{n:,} tokens hold {fmt_bytes(total)} of cache in {s.name}.", second),
        discuss=(
            "When a conversation ends, its cache is freed. What could a server gain by "
            "keeping it, and when would two conversations share one?"
        ),
    )


def _pool_slips(s: Setup, b: Budget) -> list[tuple[float | None, str]]:
    """The slips stop 3's grader names: each a way to miscount the pool or one conversation,
    as its answer over the right one."""
    spec, n = s.spec, s.n
    conc = b.max_concurrency
    seq = b.seq_bytes

    def conc_with(**kw: Any) -> float:
        return kv_pool(spec, s.w, s.gpu, n, s.kv_dtype, s.tp, s.pp, **kw).max_concurrency

    slips = [
        (
            b.requested_bytes / seq / conc if seq else None,
            "That divides all the memory vLLM may use by one conversation: the weights "
            f"({fmt_gib(b.weights_bytes)}{' per GPU' if s.tp * s.pp > 1 else ''}) and the reserve "
            "come first, and only the pool "
            "left after them holds caches.",
        ),
        (
            ratio_of(lambda: conc_with(reserve_bytes=0), conc),
            f"That leaves out the reserve ({fmt_gib(b.reserve_bytes)} for activations, the CUDA "
            "context and graphs).",
        ),
        (
            ratio_of(lambda: conc_with(gpu_memory_utilization=1.0), conc),
            f"That uses all of the GPU's memory: vLLM takes gpu_memory_utilization "
            f"({b.gpu_mem_util:g}) of it.",
        ),
    ]
    if s.gpu.memory_mib_driver:
        slips.append(
            (
                ratio_of(lambda: conc_with(memory_bytes=int(s.gpu.memory_gb * GB)), conc),
                f"That starts from the spec sheet's {s.gpu.memory_gb:g} GB: an engine "
                f"sizes from what the driver reports ({s.gpu.memory_mib_driver:,} MiB).",
            )
        )
    if s.tp * s.pp > 1:
        slips.append(
            (
                ratio_of(lambda: conc_with(weights_bytes=s.w.bytes * s.tp * s.pp), conc),
                f"That puts all the weights on every GPU: each holds 1/{s.tp * s.pp} of them.",
            )
        )
        whole = kv_cache(spec, n, kv_dtype=s.kv_dtype).total_bytes
        mine = kv_cache(spec, n, kv_dtype=s.kv_dtype, tp=s.tp, pp=s.pp).total_bytes
        if "mla" in kinds_of(spec) and whole == mine * s.pp:
            slips.append(
                (
                    float(s.tp),
                    f"That splits the MLA latent over the {s.tp} GPUs: it is not split, "
                    "every GPU keeps all of it.",
                )
            )
        elif mine and whole != mine:
            slips.append(
                (
                    mine / whole,
                    "That charges each GPU the whole model's cache: each holds only its "
                    "share of the KV heads (and of the layers, with pipeline stages).",
                )
            )
    slips += kv_slips(spec, s.kv_dtype, n, s.tp, count=True)
    if as_full(spec) != spec:
        full = ratio_of(
            lambda: kv_pool(as_full(spec), s.w, s.gpu, n, s.kv_dtype, s.tp, s.pp).max_concurrency,
            conc,
        )
        if full is not None and full < 1:  # else the windows are charged the whole conversation
            slips.append(
                (
                    full,
                    "That charges the sliding-window layers the whole conversation: each "
                    "reserves only its window and the tokens in flight.",
                )
            )
    return slips


def _pool_givens(s: Setup, b: Budget) -> list[tuple[str, str]]:
    """What stop 3 gives: the GPU's memory, the engine's settings, the weights, the reserve
    and the blocks."""
    spec, n = s.spec, s.n
    uniform = b.num_groups <= 1
    givens = [
        s.tokens_given(),
        (
            "GPU memory the driver reports",
            (f"{s.gpu.memory_mib_driver:,} MiB = " if s.gpu.memory_mib_driver else "")
            + f"{b.total_bytes:,} B",
        ),
        ("gpu_memory_utilization", f"{b.gpu_mem_util:g}"),
        (
            "Weights on each GPU",
            f"{b.weights_bytes:,} B ({fmt_gib(b.weights_bytes)})"
            + (f", 1/{s.tp * s.pp} of {fmt_gib(s.w.bytes)}" if s.tp * s.pp > 1 else ""),
        ),
        ("Reserve (activations, CUDA context, graphs)", fmt_gib(b.reserve_bytes)),
        (
            "Block (vLLM)",
            f"{b.effective_block_size:,} tokens; one page (a block of one layer) = "
            f"{b.page_bytes:,} B on each GPU; a block holds one page in each of "
            f"{b.group_size:,} layers"
            + ("" if uniform else f" ({b.num_groups} groups of layers share the blocks)"),
        ),
        (
            f"Blocks one {n:,}-token conversation reserves",
            f"{b.blocks_per_request:,}" + ("" if uniform else f" ({reserve_rule(spec)})"),
        ),
    ]
    return givens


def _running(s: Setup, b: Budget) -> tuple[str, tuple[tuple[float, str], ...]]:
    """Why vLLM's logged figure is what it is (the end of stop 3's answer), and the running
    server's figures stop 3 accepts beside it, with the note that says what they are. They
    differ where vLLM's start-up line reserves a sliding window more than a conversation holds
    (its window plus the tokens in flight, up to the whole conversation)."""
    spec, n = s.spec, s.n
    conc, held = b.max_concurrency, b.held_concurrency
    if abs(held / conc - 1) <= TOLERANCE:
        return " every conversation at its full length.", ()
    one = kv_cache(spec, n, kv_dtype=s.kv_dtype, tp=s.tp, pp=s.pp).total_bytes
    by_bytes = b.kv_pool_bytes / one
    windows = sorted({lay.window for lay in spec.layers if isinstance(lay, SlidingWindow)})
    keep = f"the last {windows[0]:,} tokens" if len(windows) == 1 else "its window"
    charge = (
        f"the tokens in flight (max_num_batched_tokens), up to all {n:,} tokens: "
        f"{b.blocks_per_request:,} blocks a conversation"
    )
    why = (
        f" it charges each sliding-window layer its window plus {charge}. A running "
        f"conversation at {n:,} tokens holds only {b.held_blocks_per_request:,} blocks "
        f"({fmt_bytes(b.held_bytes)}), as each sliding-window layer keeps {keep}: a running "
        f"server holds {held:,.2f}."
    )
    note = (
        f"That is what a running server holds: at {n:,} tokens a conversation keeps "
        f"{fmt_bytes(one)} (stop 2), so the {fmt_gib(b.kv_pool_bytes)} pool holds about "
        f"{by_bytes:,.1f}, and {held:,.2f} in vLLM's blocks ({b.held_blocks_per_request:,} "
        "a conversation). vLLM's start-up line charges the sliding-window layers more, their "
        f"window plus {charge}, and logs {conc:,.2f}."
    )
    return why, ((held, note), (by_bytes, note))


def stop3(s: Setup) -> Lesson:
    spec, n = s.spec, s.n
    b = kv_pool(spec, s.w, s.gpu, n, s.kv_dtype, s.tp, s.pp)
    none_fits(b, n, s.gpu)
    conc = b.max_concurrency
    slips = _pool_slips(s, b)
    givens = _pool_givens(s, b)
    why, also = _running(s, b)
    q = Question(
        qid="tour-3",
        level="mid",
        value=conc,
        unit="sequences",
        ask_unit="sequences",
        floor_ok=True,
        kv_hints=False,
        prompt=(
            f"vLLM serves {s.name} on {where_text(s.gpu, s.tp, s.pp)} (gpu_memory_utilization "
            f"{b.gpu_mem_util:g}, a {fmt_gib(b.reserve_bytes)} reserve, KV cache in {s.kvd}). "
            + (
                "Each GPU holds its share of the weights and of every conversation's cache, "
                "so count one GPU. "
                if s.tp * s.pp > 1
                else ""
            )
            + f"How many {n:,}-token conversations fit in its KV pool at once?"
        ),
        answer=(
            f"**{conc:,.2f}**, so {math.floor(conc):,} whole ones: the pool is "
            f"{fmt_gib(b.kv_pool_bytes)} per GPU after the weights "
            f"({fmt_gib(b.weights_bytes)}) and the reserve. This is the figure vLLM logs at "
            f'start-up ("Maximum concurrency for {n:,} tokens per request"):{why}'
        ),
        also=also,
        solution=(
            f"pool = ceil({b.total_bytes:,} B x {b.gpu_mem_util:g}) - {b.weights_bytes:,} B "
            f"weights - {b.reserve_bytes:,} B reserve = {b.kv_pool_bytes:,} B -> "
            f"{b.kv_pool_bytes:,} // {b.page_bytes:,} // {b.group_size} = "
            f"{b.num_blocks:,} blocks; one conversation reserves "
            f"{b.blocks_per_request:,}: {b.num_blocks:,} / {b.blocks_per_request:,} = "
            f"{conc:,.2f}"
        ),
        mistakes=slips_of(*slips),
    )
    return Lesson(
        stop=s.stop,
        question=q,
        givens=tuple(givens),
        figure=(
            "Budget: KV pool per GPU",
            f"{fmt_gib(b.kv_pool_bytes)} = {b.num_blocks:,} blocks "
            f"of {b.effective_block_size:,} tokens",
        ),
        recap=(
            f"The KV pool is what is left of {b.gpu_mem_util:g} x the GPU's memory after the "
            f"weights and the reserve: {fmt_gib(b.kv_pool_bytes)} per GPU.",
            f"Conversations that fit = blocks in the pool / blocks one reserves: "
            f"{b.num_blocks:,} / {b.blocks_per_request:,} = {conc:,.2f}.",
        ),
        discuss=(
            "To serve twice as many conversations, would you buy a second GPU, halve the "
            "context, or switch the cache to FP8? What does each cost?"
        ),
    )
