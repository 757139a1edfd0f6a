"""The tour's speed stops: 4 Decode step time, 5 Roofline, 6 Serving frontier, 7 Interview.

Stop 4's two questions (the crossover, or one sequence's tokens per second) are built in
tour_decode; this module picks the one that fits the setup and assembles the lesson."""

from __future__ import annotations

from ..cache.kv import KVCache, kv_cache
from ..core.units import fmt_bytes, fmt_gb
from ..engines.budget import Budget
from ..perf.intensity import decode_point, ridge_point
from ..perf.roofline import step_time
from .quiz import Question
from .techniques import techniques
from .tour_decode import crossover_question, throughput_question, weight_readings, weights_read_text
from .tour_text import (
    Lesson,
    Setup,
    bytes_a_number,
    is_near,
    kinds_of,
    kv_pool,
    kv_slips,
    logged_capacity,
    none_fits,
    ratio_of,
    request_tokens,
    slips_of,
)


def stop4(s: Setup) -> Lesson:
    spec, n = s.spec, s.n
    kv_pool(spec, s.w, s.gpu, n, s.kv_dtype, s.tp, s.pp)  # no speed for what does not fit
    st = step_time(
        s.deployment,
        context=n,
        batch=1,
        bandwidth_gbs=s.bw,
        peak_tflops=s.gpu.peak_tflops(s.w.dtype),
        attention_tflops=s.gpu.attention_tflops(s.kv_dtype),
    )
    # The tour is on the Learn path: its speed is the chapter's formula, the ideal bound (bytes /
    # bandwidth, FLOPs / peak), alone; the calibrated estimate is the Engineer pages' (issue 37).
    read = s.w.read_per_step(spec, 1)  # the Decode step time page's weights read, whole model
    w_gpu = st.weight_read_bytes  # one GPU's share
    readings = weight_readings(s, read)
    tp_note = f" on each GPU at tensor parallel {s.tp} (1/{s.tp} of {read:,} B)" if s.tp > 1 else ""
    givens = [
        (
            "Weights one decode step reads",
            f"{w_gpu:,} B ({fmt_gb(w_gpu)}){tp_note}: {weights_read_text(spec, s.w)}",
        ),
        ("Memory bandwidth", f"{s.bw:,.0f} GB/s (1 GB = 10^9 B)"),
    ]
    cross = st.crossover_context
    if cross is not None and cross <= spec.max_context:
        q, figure, recap = crossover_question(s, cross, readings, givens, st)
    else:
        q, figure, recap = throughput_question(s, readings, givens, st)
    return Lesson(
        stop=s.stop,
        question=q,
        givens=tuple(givens),
        figure=figure,
        recap=recap,
        discuss=(
            "Why does a larger batch make each step a little longer but the GPU's "
            "throughput much higher? Where does that stop?"
        ),
    )


def _fits(s: Setup) -> bool:
    try:
        kv_pool(s.spec, s.w, s.gpu, s.n, s.kv_dtype, s.tp, s.pp)
    except ValueError:
        return False
    return True


def stop5(s: Setup) -> Lesson:
    spec, n = s.spec, s.n
    peak = s.gpu.peak_tflops(s.w.dtype)
    if peak is None:
        raise ValueError(
            f"{s.gpu.name} has no dense peak for {s.w.dtype.upper()} weights in "
            "the registry: pick another GPU for this stop"
        )
    ridge = ridge_point(peak, s.bw)
    fits = _fits(s)
    d1 = decode_point(spec, s.w, batch=1, context=n, kv_dtype=s.kv_dtype, tp=s.tp) if fits else None
    decode = (
        f" Decode of one {n:,}-token sequence does {d1.intensity:,.2f} FLOP/B, "
        f"{ridge / d1.intensity:,.0f} times less: it waits for memory."
        if d1
        else ""
    )
    q = Question(
        qid="tour-5",
        level="mid",
        value=ridge,
        unit="FLOP/B",
        ask_unit="FLOP/B",
        prompt=(
            f"{s.gpu.name} does {peak:,.1f} TFLOPS (dense, {s.w.dtype.upper()}) and moves "
            f"{s.bw:,.0f} GB/s. How many floating-point operations (FLOPs) per byte must "
            "work do before the arithmetic, not memory, limits it: where is its ridge "
            "point?"
        ),
        answer=f"**{ridge:,.0f} FLOP/B**.{decode}",
        solution=(f"{peak:,.1f} x 10^12 FLOP/s / ({s.bw:,.0f} x 10^9 B/s) = {ridge:,.1f} FLOP/B"),
        mistakes=slips_of(
            (1000.0, "A thousand times too many: TFLOPS are 10^12 and GB/s 10^9."),
            (0.001, "A thousand times too few: TFLOPS are 10^12 and GB/s 10^9."),
        ),
    )
    figure = (
        (f"Roofline: decode at batch 1, {n:,} tokens", f"{d1.intensity:,.2f} FLOP/B")
        if d1
        else ("Roofline: decode", f"not placed: {s.name} does not fit this setup")
    )
    return Lesson(
        stop=s.stop,
        question=q,
        givens=(
            (f"Dense peak ({s.w.dtype.upper()} weights)", f"{peak:,.1f} TFLOPS (10^12 FLOP/s)"),
            ("Memory bandwidth", f"{s.bw:,.0f} GB/s (10^9 B/s)"),
        ),
        figure=figure,
        recap=(
            f"{s.gpu.name} needs {ridge:,.0f} FLOPs per byte read to keep its arithmetic busy.",
            (
                f"Decode of one sequence does {d1.intensity:,.2f}, so it waits for memory; a "
                "larger batch raises the weights' intensity, not the cache's."
                if d1
                else "Decode does a few FLOPs per byte, so it waits for memory; a larger batch "
                "raises the weights' intensity, not the cache's."
            ),
        ),
        discuss=(
            "Prefill runs thousands of tokens per weight read, decode one per sequence. "
            "What does that say about running them on the same GPU at once?"
        ),
    )


def stop6(s: Setup) -> Lesson:
    spec = s.spec
    prompt, output = request_tokens(spec)
    ctx = prompt + output
    b = logged_capacity(spec, s.w, s.gpu, ctx, s.kv_dtype, s.tp, s.pp)
    none_fits(b, ctx, s.gpu)
    conc = b.max_concurrency

    def conc_at(tokens: int) -> float:
        return logged_capacity(spec, s.w, s.gpu, tokens, s.kv_dtype, s.tp, s.pp).max_concurrency

    slips = [
        (
            ratio_of(lambda: conc_at(prompt), conc),
            f"That counts the prompt only: a request's cache also holds its output, up to {ctx:,} "
            "tokens in all.",
        ),
        (
            ratio_of(lambda: conc_at(output), conc),
            f"That counts the output only: a request's cache holds its {prompt:,}-token prompt "
            "too.",
        ),
    ]
    if s.n != ctx:
        slips.append(
            (
                ratio_of(lambda: conc_at(s.n), conc),
                f"That is stop 3's {s.n:,}-token conversations: these requests hold at "
                f"most {ctx:,} tokens.",
            )
        )
    slips += kv_slips(spec, s.kv_dtype, ctx, s.tp, count=True)
    uniform = b.num_groups <= 1
    givens = [
        (
            "Request",
            f"{prompt:,} prompt + {output:,} output tokens = {ctx:,} tokens of cache at most",
        ),
        (
            "Blocks in the KV pool (stop 3)",
            f"{b.num_blocks:,}, of {b.effective_block_size:,} tokens each",
        ),
    ]
    if not uniform:
        givens.append(
            (
                f"Blocks one {ctx:,}-token request reserves",
                f"{b.blocks_per_request:,} (over {b.num_groups} groups of layers)",
            )
        )
    q = Question(
        qid="tour-6",
        level="mid",
        value=conc,
        unit="sequences",
        ask_unit="sequences",
        kv_hints=False,  # no floor_ok: it asks what vLLM logs (600.71x), and 601 rounds that
        prompt=(
            f"Requests of {prompt:,} prompt tokens and {output:,} output tokens each hold up "
            f"to {ctx:,} tokens of cache. At start-up vLLM logs how many such requests its "
            'pool holds if every one is at its full length ("Maximum concurrency for '
            f'{ctx:,} tokens per request"). What does it log?'
        ),
        answer=(
            f"**{conc:,.2f}** ({b.num_blocks:,} blocks / {b.blocks_per_request:,} blocks per "
            "request): vLLM's logged worst case, every request at its full length. A running "
            "server usually holds more at once: a request holds its prompt and only the "
            "output so far, and a finished one frees its blocks. Where the pool really "
            "starts to bind (requests wait for blocks or are preempted) is what the Serving "
            "frontier measures."
        ),
        solution=(
            f"{b.num_blocks:,} blocks / {b.blocks_per_request:,} blocks per request of "
            f"{ctx:,} tokens = {conc:,.2f}"
        ),
        mistakes=slips_of(*slips),
    )
    return Lesson(
        stop=s.stop,
        question=q,
        givens=tuple(givens),
        figure=("vLLM start-up lines: GPU KV cache size", f"{b.kv_capacity_tokens:,} tokens"),
        recap=(
            f"vLLM's start-up line counts every request at its full {ctx:,} tokens: "
            f"{conc:,.2f} of them.",
            "A running server holds more, as requests are partway through their output; the "
            "Serving frontier shows where the pool really binds.",
        ),
        discuss=(
            "What happens when every running request grows at once and the pool runs out? "
            "Who waits, who is preempted, and what does it cost them?"
        ),
    )


def _fp8_givens(
    s: Setup, b16: Budget, b8: Budget, k16: KVCache, k8: KVCache
) -> tuple[list[tuple[str, str]], str]:
    """Stop 7's givens, and the sentence its prompt adds for a recurrent state (or "")."""
    what = "latent" if kinds_of(s.spec) == {"mla"} else "K/V"
    givens = [
        s.tokens_given(),
        (
            f"{what} per token on each GPU",
            f"{k16.kv_bytes_per_token_nominal:,} B in BF16, "
            f"{k8.kv_bytes_per_token_nominal:,} B in FP8",
        ),
        (
            "Conversations that fit in BF16" + (" (stop 3)" if s.kv_dtype == "bf16" else ""),
            f"{b16.max_concurrency:,.2f}",
        ),
    ]
    state = ""
    if k16.state_bytes:
        givens.append(
            (
                "Recurrent state per conversation on each GPU",
                f"{k16.state_bytes:,} B ({fmt_bytes(k16.state_bytes)}), in BF16 whatever "
                "the KV format",
            )
        )
        state = (
            f" The {len(s.spec.state_layers):,} recurrent layers' state stays in BF16 "
            "whatever the KV format."
        )
    if b16.effective_block_size != b8.effective_block_size:
        givens.append(
            (
                "Block (vLLM)",
                f"{b16.effective_block_size:,} tokens in BF16, "
                f"{b8.effective_block_size:,} in FP8: {_block_reason(s, k16)}",
            )
        )
    return givens, state


def _block_reason(s: Setup, k16: KVCache) -> str:
    """Why vLLM's block size changes with the KV format, for this model (stop 7's givens)."""
    if k16.state_bytes:
        return "a hybrid's page must hold one whole recurrent state"
    if "mla" in kinds_of(s.spec):
        return (
            f"on {s.gpu.name} vLLM picks its MLA attention kernel by the cache format, and "
            "each kernel takes its own block size"
        )
    return "vLLM's attention kernel for this format takes its own block size"


def _not_twice(b16: Budget, b8: Budget, k16: KVCache) -> str:
    """Why an FP8 cache fits other than exactly 2x the BF16 conversations, as a sentence's end."""
    reasons = []
    if k16.state_bytes:
        reasons.append(
            f"the recurrent state ({fmt_bytes(k16.state_bytes)} per conversation) does not shrink"
        )
    if b16.effective_block_size != b8.effective_block_size:
        reasons.append(
            "vLLM sizes a hybrid's pages to hold a whole state, so the blocks "
            "change size with the format"
            if k16.state_bytes
            else "vLLM's blocks change size with the format (its attention kernel's), and "
            "a conversation's last block is rounded up to a whole one"
        )
    if not reasons:
        reasons.append("the blocks are rounded to whole pages")
    return " and ".join(reasons) + "."


def _fp8_figure(s: Setup) -> tuple[str, str]:
    """Stop 7's figure: the FP8 row of the Shrinking the cache page, one conversation's K/V."""
    rows = techniques(s.spec, s.n, kv_dtype="bf16", tp=s.tp)
    fp8 = next(r for r in rows if r.key == "fp8")
    return (
        f"Shrinking the cache: FP8 KV, the K/V of one {s.n:,}-token conversation"
        + (" on each GPU" if s.tp > 1 else ""),
        f"{fmt_bytes(fp8.seq_bytes)}, {fp8.saving:,.2f}x smaller than BF16",
    )


def stop7(s: Setup) -> Lesson:
    spec, n = s.spec, s.n
    b16 = kv_pool(spec, s.w, s.gpu, n, "bf16", s.tp, s.pp)
    b8 = kv_pool(spec, s.w, s.gpu, n, "fp8", s.tp, s.pp)
    none_fits(b16, n, s.gpu)
    ratio = b8.max_concurrency / b16.max_concurrency
    k16 = kv_cache(spec, n, kv_dtype="bf16", tp=s.tp, pp=s.pp)
    k8 = kv_cache(spec, n, kv_dtype="fp8", tp=s.tp, pp=s.pp)
    givens, state = _fp8_givens(s, b16, b8, k16, k8)
    exact = is_near(ratio, 2.0, 0.005)
    reason = "" if exact else _not_twice(b16, b8, k16)
    why = (
        "The pool stays the same; each conversation's cache takes half the bytes."
        if exact
        else "Not exactly 2: " + reason
    )
    slips = [
        (1 / ratio, "That is the inverse: FP8 fits more conversations, so the answer is above 1.")
    ]
    if not exact:
        slips.append(
            (
                2.0 / ratio,
                f"Exactly 2 would hold if every byte of a conversation halved: {reason}",
            )
        )
    q = Question(
        qid="tour-7",
        level="mid",
        value=ratio,
        unit="x",
        ask_unit="x",
        kv_hints=False,
        prompt=(
            f"Switch {s.name}'s KV cache from BF16 ({bytes_a_number('bf16')}) to FP8 "
            f"({bytes_a_number('fp8')}), on the same GPU with the same settings.{state} "
            "How many times more "
            f"{n:,}-token conversations fit?"
        ),
        answer=(
            f"**{ratio:,.2f}x**: from {b16.max_concurrency:,.2f} to {b8.max_concurrency:,.2f}. "
            f"{why} The price is accuracy, which you measure."
        ),
        solution=(
            f"{b8.max_concurrency:,.4f} / {b16.max_concurrency:,.4f} = {ratio:,.3f} "
            f"({b8.num_blocks:,} FP8 blocks / {b8.blocks_per_request:,} per conversation; "
            f"{b16.num_blocks:,} BF16 blocks / {b16.blocks_per_request:,})"
        ),
        mistakes=slips_of(*slips),
    )
    return Lesson(
        stop=s.stop,
        question=q,
        givens=tuple(givens),
        figure=_fp8_figure(s),
        recap=(
            f"An FP8 cache fits {ratio:,.2f}x as many {n:,}-token conversations"
            + (" and halves every K/V byte a step reads." if exact else ", not 2x: " + reason),
            "It costs accuracy, which the Measured cost of shrinking page measures: check it "
            "on your own evaluations before turning it on.",
        ),
        discuss=(
            "Which would you expect FP8 to hurt more: a short chat, or finding one fact in "
            "a long document? How would you measure it?"
        ),
    )
