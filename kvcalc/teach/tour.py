"""The guided tour: seven stops, each a short lesson computed for the chosen model and GPU.

Stops follow the path Home -> Cache fill -> Budget -> Decode step time -> Roofline -> Serving
frontier -> Shrinking the cache. Each stop is a ``Lesson``:

- ``givens``: the config fields and figures its prediction needs, so nothing has to be looked up;
- ``question``: one ``kvcalc.teach.quiz.Question`` that ``quiz.grade`` grades, its box reading
  a bare number in the unit its label names, with the likely slips named (the factor 2, bits vs
  bytes, query heads for KV heads, the input embedding, all experts for the routed ones...);
- ``figure``: one figure its page shows, from the same core call that page makes;
- ``recap`` (two lines) and ``discuss`` (a question for the class).

Questions ask about min(8,192, the model's limit) tokens and are worded by the kinds of the
model's layers (full, sliding-window, MLA, recurrent, shared), so that no prompt says something
false of the model. ``answer_key`` writes the seven lessons as Markdown, for a teacher to print.
A stop that cannot be asked for a setup (a model that does not fit, a GPU without a known peak)
raises ValueError saying why.

The stops live in four modules: tour_text (the Stop, the Lesson, the words for the layers,
the slips and the setup every stop uses), tour_memory (stops 1-3), tour_speed (stops 4-7) and
tour_decode (stop 4's two questions and the weights a step reads);
this module lists the stops and assembles them, and is the tour's public interface.
"""

from __future__ import annotations

from ..cache.weight_bytes import Weights
from ..config.catalog import GPU
from ..core.model import ModelSpec
from ..core.units import check_int
from .quiz import TOLERANCE, Question
from .tour_memory import stop1, stop2, stop3
from .tour_speed import stop4, stop5, stop6, stop7
from .tour_text import (
    CONVERSATION,
    OUTPUT,
    PROMPT,
    Lesson,
    Setup,
    Stop,
    conversation_tokens,
    request_tokens,
    where_text,
)

__all__ = [
    "STOPS",
    "Stop",
    "Lesson",
    "lesson",
    "stop_question",
    "answer_key",
    "conversation_tokens",
    "request_tokens",
    "CONVERSATION",
    "PROMPT",
    "OUTPUT",
]

STOPS = (
    Stop(1, "Home", "home", "Why a model keeps K and V for every token it has seen."),
    Stop(2, "Cache fill", "cache_fill", "How the cache fills, token by token and layer by layer."),
    Stop(
        3,
        "Budget",
        "budget",
        "How the GPU's memory splits into weights, a reserve and the KV pool.",
    ),
    Stop(
        4,
        "Decode step time",
        "step_time",
        "Why each decode step reads the weights it uses once and every cached token.",
    ),
    Stop(5, "Roofline", "roofline", "Why prefill is compute bound and decode waits for memory."),
    Stop(
        6,
        "Serving frontier",
        "frontier",
        "How a larger batch trades each user's speed for the GPU's throughput.",
    ),
    Stop(
        7,
        "Shrinking the cache",
        "techniques",
        "How a smaller number format (FP8) fits more conversations in the same pool, and at "
        "what cost.",
    ),
)


def lesson(
    number: int,
    spec: ModelSpec,
    w: Weights,
    gpu: GPU,
    *,
    kv_dtype: str = "bf16",
    bandwidth_gbs: float | None = None,
    tp: int = 1,
    pp: int = 1,
    name: str | None = None,
) -> Lesson:
    """The lesson at stop ``number`` (1 to 7) for this setup. ``name`` is how the model is
    called in the text (its spec's name when not given)."""
    n = check_int("tour stop", number, 1, len(STOPS))
    bw = gpu.bandwidth_gbs if bandwidth_gbs is None else bandwidth_gbs
    name = spec.name if name is None else name
    build = (stop1, stop2, stop3, stop4, stop5, stop6, stop7)[n - 1]
    if n in (1, 2) and not spec.kv_layers:
        raise ValueError(
            f"{name} keeps no per-token cache (no attention layer stores keys and "
            "values), so there is nothing to predict at this stop: pick a model "
            "with attention in the sidebar"
        )
    return build(
        Setup(
            spec=spec,
            w=w,
            gpu=gpu,
            kv_dtype=kv_dtype,
            bw=bw,
            tp=tp,
            pp=pp,
            name=name,
            stop=STOPS[n - 1],
        )
    )


def stop_question(
    number: int,
    spec: ModelSpec,
    w: Weights,
    gpu: GPU,
    *,
    kv_dtype: str = "bf16",
    bandwidth_gbs: float | None = None,
    tp: int = 1,
    pp: int = 1,
) -> Question:
    """The prediction asked at stop ``number`` (1 to 7) for this setup."""
    return lesson(
        number, spec, w, gpu, kv_dtype=kv_dtype, bandwidth_gbs=bandwidth_gbs, tp=tp, pp=pp
    ).question


# -- the answer key ---------------------------------------------------------------------------


def answer_key(
    spec: ModelSpec,
    w: Weights,
    gpu: GPU,
    *,
    kv_dtype: str = "bf16",
    bandwidth_gbs: float | None = None,
    tp: int = 1,
    pp: int = 1,
    name: str | None = None,
) -> str:
    """The seven lessons for this setup as one Markdown document: for each stop the givens, the
    question, the answer and its working, the slips the grader names, the page's figure, the
    recap and the discussion question. A stop that cannot be asked says why."""
    name = spec.name if name is None else name
    bw = gpu.bandwidth_gbs if bandwidth_gbs is None else bandwidth_gbs
    lines = [
        f"# KV Cache Lab tour: answer key for {name}",
        "",
        f"- GPU: {where_text(gpu, tp, pp)}, {bw:,.0f} GB/s",
        f"- KV cache: {kv_dtype.upper()}; weights: {w.dtype.upper()}"
        + (f" (experts {w.expert_dtype.upper()})" if w.expert_dtype != w.dtype else ""),
        f"- Conversation: {conversation_tokens(spec):,} tokens (the model's limit is "
        f"{spec.max_context:,})",
        "- Units: KiB, MiB, GiB are 2^10, 2^20, 2^30 bytes; GB and GB/s are 10^9.",
        f"- Answers are graded on their value, within {TOLERANCE:.0%} of it in whatever unit "
        "they are typed (a unit slip is named as a note); a count of whole conversations must "
        "be the whole number below.",
        "",
    ]
    for stop in STOPS:
        lines += [f"## Stop {stop.number}: {stop.title}", "", f"*{stop.teaches}*", ""]
        try:
            les = lesson(
                stop.number,
                spec,
                w,
                gpu,
                kv_dtype=kv_dtype,
                bandwidth_gbs=bw,
                tp=tp,
                pp=pp,
                name=name,
            )
        except ValueError as exc:
            lines += [f"Not asked for this setup: {exc}.", ""]
            continue
        q = les.question
        lines += ["| Given | Value |", "|---|---|"]
        lines += [f"| {_cell(k)} | {_cell(v)} |" for k, v in les.givens]
        lines += [
            "",
            f"**Predict (in {q.ask_unit or q.unit}).** {q.prompt}",
            "",
            f"**Answer.** {q.answer}",
            "",
            "```",
            q.solution,
            "```",
            "",
        ]
        if q.mistakes:
            lines.append("**Slips the grader names:**")
            lines += [f"- {why}" for _, why in q.mistakes]
            lines.append("")
        label, value = les.figure
        lines += [
            f"**On the page.** {label}: {value}.",
            "",
            f"**Recap.** {les.recap[0]}  ",
            les.recap[1],
            "",
            f"**Discuss.** {les.discuss}",
            "",
        ]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
