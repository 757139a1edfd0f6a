"""What stop 4 (Decode step time) reads and asks: the weights one decode step reads, the wrong
reads a student may count, and the stop's two questions, one per case. Where the cache read
overtakes the weight read within the model's limit the stop asks for the crossover context;
otherwise it asks for the tokens per second of one sequence. ``tour_speed.stop4`` picks the case
and assembles the lesson."""

from __future__ import annotations

from ..cache.weight_bytes import Weights
from ..core.model import ModelSpec
from ..core.units import GB, GiB, fmt_gb, fmt_seconds
from ..perf.roofline import StepTime, crossover_context, step_time
from .quiz import Question
from .tour_text import Setup, slips_of, where_text


def weights_read_text(spec: ModelSpec, w: Weights) -> str:
    """Which weights one decode step of one token reads."""
    if w.input_embedding_bytes:
        text = (
            f"every weight but the untied input embedding table "
            f"({fmt_gb(w.input_embedding_bytes)}), of which the token gathers one "
            f"{w.embedding_row_bytes:,} B row"
        )
    elif spec.params is not None and spec.params.tied:
        text = "every weight (the tied embedding is read whole, as the output head)"
    else:
        text = "every weight"
    if spec.moe is not None:
        m = spec.moe
        text += (
            f"; of the routed experts only the {m.top_k:,} of {m.num_experts:,} its token "
            f"is routed to, in each of the {m.layers:,} MoE layers"
        )
    return text


def _ideal_step(s: Setup, context: int, weight_read_bytes: int | None = None) -> StepTime:
    """One decode step at batch 1 on the stop's setup, the ideal bound, no crossover search:
    the probes stop 4 reads its givens and slips from."""
    dep = s.deployment.but(weights_bytes=weight_read_bytes)
    return step_time(dep, context=context, batch=1, bandwidth_gbs=s.bw, find_crossover=False)


def weight_readings(s: Setup, read: int) -> list[tuple[int, str]]:
    """The wrong weight reads a student may count for one decode step, each with what it means:
    the whole input embedding table, every expert, or both."""
    spec = s.spec
    table = s.w.input_embedding_bytes - s.w.embedding_row_bytes
    idle = s.w.bytes - read - table  # experts no token of this step is routed to
    readings = []
    if table > 0:
        readings.append(
            (
                read + table,
                "That reads the whole input embedding table: a token "
                f"gathers one {s.w.embedding_row_bytes:,} B row of it.",
            )
        )
    if idle > 0 and spec.moe is not None:
        readings.append(
            (
                read + idle,
                f"That reads all {spec.moe.num_experts:,} experts of each "
                f"MoE layer: one token is routed to {spec.moe.top_k:,} of "
                "them, and only those are read.",
            )
        )
    if table > 0 and idle > 0:
        readings.append(
            (
                s.w.bytes,
                "That reads every weight the GPU holds: the step skips the "
                "embedding table (one row is gathered) and the experts its "
                "token is not routed to.",
            )
        )
    return readings


# What stop 4 asks, for one setup: its question, its figure and its recap; the givens it adds.
_Asked = tuple[Question, tuple[str, str], tuple[str, str]]


def crossover_question(
    s: Setup,
    cross: int,
    readings: list[tuple[int, str]],
    givens: list[tuple[str, str]],
    st: StepTime,
) -> _Asked:
    """Stop 4 where the cache read overtakes the weight read within the model's limit: ask
    for the crossover context."""
    spec, n = s.spec, s.n
    w_gpu = st.weight_read_bytes
    probe = _ideal_step(s, cross)
    growth = _ideal_step(s, cross + 1).kv_read_bytes - probe.kv_read_bytes
    fixed = probe.kv_read_bytes - growth * cross
    givens.append(
        (
            "Cache one step reads, per token of context" + (" (each GPU)" if s.tp > 1 else ""),
            f"{growth:,} B"
            + (f", plus {fixed:,} B from the layers whose windows are full" if fixed else ""),
        )
    )
    slips = [
        ((crossover_context(spec, wrong, 1, s.kv_dtype, tp=s.tp) or 0) / cross, why)
        for wrong, why in readings
    ]
    q = Question(
        qid="tour-4",
        level="mid",
        value=cross,
        unit="tokens",
        ask_unit="tokens",
        kv_hints=False,
        prompt=(
            f"At batch 1, each decode step of {s.name} reads the weights that token "
            "uses once, and the sequence's whole cache. From what context length "
            "(tokens) does the cache read cost at least as much as the weight read: "
            "where is the crossover?"
        ),
        answer=(f"**{cross:,} tokens**, within the model's limit of {spec.max_context:,}."),
        solution=(
            f"smallest N with KV read(N) >= {w_gpu:,} B of weights read per step: "
            + (f"N = ceil({w_gpu:,} / {growth:,}) = {cross:,}" if not fixed else f"N = {cross:,}")
        ),
        mistakes=slips_of(*slips),
    )
    figure = (
        f"Decode step time: step time at {n:,} tokens, batch 1, ideal bound",
        f"{fmt_seconds(st.step_time_s)} ({st.tokens_per_s:,.1f} tokens/s)",
    )
    recap = (
        f"At batch 1 a step reads {fmt_gb(w_gpu)} of weights and {growth:,} B of cache "
        "per token of context" + (" on each GPU" if s.tp > 1 else "") + ".",
        f"Past {cross:,} tokens the cache is the larger read; a larger batch moves that "
        "point left, an FP8 cache moves it right.",
    )
    return q, figure, recap


def throughput_question(
    s: Setup,
    readings: list[tuple[int, str]],
    givens: list[tuple[str, str]],
    st: StepTime,
) -> _Asked:
    """Stop 4 where the weights stay the larger read within the model's limit (or the cache
    stops growing): ask for the tokens per second of one sequence."""
    spec, n = s.spec, s.n
    w_gpu = st.weight_read_bytes
    cross = st.crossover_context
    kv = st.kv_read_bytes + st.state_read_bytes
    givens.append(
        (
            f"Cache one step reads at {n:,} tokens" + (" (each GPU)" if s.tp > 1 else ""),
            f"{kv:,} B ({fmt_gb(kv)})"
            + (
                f", of which {st.state_read_bytes:,} B recurrent state"
                if st.state_read_bytes
                else ""
            ),
        )
    )
    tps = st.tokens_per_s
    slips = [
        (_ideal_step(s, n, weight_read_bytes=wrong).tokens_per_s / tps, why)
        for wrong, why in readings
    ]
    slips.append(
        (
            s.bw * GB / w_gpu / tps,
            "That leaves out the cache: every step reads the whole cache of the sequence too.",
        )
    )
    slips.append((GiB / GB, "That takes GB/s as GiB/s: bandwidth is decimal, 1 GB/s = 10^9 B/s."))
    why_not = (
        "This model's cache stops growing, so at batch 1 reading it never costs as "
        "much as reading the weights: there is no crossover."
        if cross is None
        else f"At batch 1 the cache read does not reach the weight read within the "
        f"model's limit of {spec.max_context:,} tokens: the weights stay the larger "
        "read."
    )
    q = Question(
        qid="tour-4",
        level="mid",
        value=tps,
        unit="tokens/s",
        ask_unit="tokens/s",
        kv_hints=False,
        prompt=(
            f"One sequence of {n:,} tokens decodes alone on {where_text(s.gpu, s.tp, 1)}. "
            f"Each step reads the weights its token uses once, and the sequence's whole "
            f"cache, at {s.bw:,.0f} GB/s. How many tokens per second is that?"
        ),
        answer=(
            f"**{tps:,.1f} tokens/s**, the ideal bound: every byte at the full "
            f"{s.bw:,.0f} GB/s and nothing else (bytes / bandwidth, the chapter's formula). "
            f"{why_not}"
        ),
        solution=(
            f"({w_gpu:,} + {kv:,}) B / {s.bw:,.0f} GB/s = "
            f"{st.memory_time_s * 1e3:,.3f} ms per token -> {tps:,.1f} tokens/s"
        ),
        mistakes=slips_of(*slips),
    )
    figure = (
        "Decode step time: share of the step reading KV, ideal bound",
        f"{st.kv_share:.0%}",
    )
    recap = (
        f"A step reads {fmt_gb(w_gpu)} of weights and {fmt_gb(kv)} of cache at "
        f"{n:,} tokens" + (" on each GPU" if s.tp > 1 else "") + ".",
        "A larger batch reads the same weights for more tokens, so tokens/s rise until "
        "the caches dominate.",
    )
    return q, figure, recap
