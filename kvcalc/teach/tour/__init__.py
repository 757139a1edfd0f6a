"""The guided tour: seven stops (Home to Shrinking the cache), each a ``Lesson`` computed for
the model and GPU (lesson.py), or a ValueError saying why it cannot be asked; ``answer_key``
prints them. Stops: cache.py 1-2, pool.py 3 and 6, decode.py 4-5, fp8.py 7; prose: tour.toml."""

from __future__ import annotations

from ...cache.deployment import Deployment
from ...core.units import check_int
from ..quiz import TOLERANCE, Question
from .cache import stop1, stop2
from .decode import stop4, stop5
from .fp8 import stop7
from .lesson import TEXT, Lesson, Setup, Stop, conversation_tokens
from .pool import stop3, stop6
from .words import where_text

__all__ = ["STOPS", "lesson", "stop_question", "answer_key", "conversation_tokens"]

STOPS = tuple(Stop(**row) for row in TEXT["stops"])
_BUILD = (stop1, stop2, stop3, stop4, stop5, stop6, stop7)


def lesson(
    number: int, dep: Deployment, *, bandwidth_gbs: float | None = None, name: str | None = None
) -> Lesson:
    """The lesson at stop ``number`` (1 to 7) for ``dep`` (with weights and GPU); ``name``:
    the model's in the text (default its spec's)."""
    n = check_int("tour stop", number, 1, len(STOPS))
    spec, w, gpu = dep.spec, dep.weights, dep.gpu
    if w is None or gpu is None:
        raise ValueError("the tour needs the model's weights and a GPU")
    bw = gpu.bandwidth_gbs if bandwidth_gbs is None else bandwidth_gbs
    name = spec.name if name is None else name
    if n in (1, 2) and not spec.kv_layers:
        raise ValueError(TEXT["errors"]["no_kv"].format(name=name))
    setup = Setup(
        spec=spec,
        w=w,
        gpu=gpu,
        kv_dtype=dep.cache.kv_dtype,
        bw=bw,
        tp=dep.tp,
        pp=dep.pp,
        name=name,
        stop=STOPS[n - 1],
    )
    return _BUILD[n - 1](setup)


def stop_question(number: int, dep: Deployment, bandwidth_gbs: float | None = None) -> Question:
    """The prediction asked at stop ``number`` (1 to 7) for this deployment."""
    return lesson(number, dep, bandwidth_gbs=bandwidth_gbs).question


def answer_key(
    dep: Deployment, *, bandwidth_gbs: float | None = None, name: str | None = None
) -> str:
    """The seven lessons as one Markdown document, for a teacher to print."""
    spec, w, gpu, tp, pp = dep.spec, dep.weights, dep.gpu, dep.tp, dep.pp
    kv_dtype = dep.cache.kv_dtype
    if w is None or gpu is None:
        raise ValueError("the tour needs the model's weights and a GPU")
    name = spec.name if name is None else name
    bw = gpu.bandwidth_gbs if bandwidth_gbs is None else bandwidth_gbs
    experts = f" (experts {w.expert_dtype.upper()})" if w.expert_dtype != w.dtype else ""
    key = TEXT["answer_key"]
    head = dict(
        name=name,
        where=where_text(gpu, tp, pp),
        bw=bw,
        kvd=kv_dtype.upper(),
        wd=w.dtype.upper() + experts,
        n=conversation_tokens(spec),
        limit=spec.max_context,
        tolerance=TOLERANCE,
    )
    lines = key["head"].format(**head).split("\n")
    for stop in STOPS:
        lines += [f"## Stop {stop.number}: {stop.title}", "", f"*{stop.teaches}*", ""]
        try:
            les = lesson(stop.number, dep, bandwidth_gbs=bw, name=name)
        except ValueError as exc:
            lines += [f"Not asked for this setup: {exc}.", ""]
            continue
        q = les.question
        lines += ["| Given | Value |", "|---|---|"]
        lines += [f"| {_cell(k)} | {_cell(v)} |" for k, v in les.givens]
        lines += ["", f"**Predict (in {q.ask_unit or q.unit}).** {q.prompt}", ""]
        lines += [f"**Answer.** {q.answer}", "", "```", q.solution, "```", ""]
        if q.mistakes:
            lines += ["**Slips the grader names:**", *(f"- {why}" for _, why in q.mistakes), ""]
        label, value = les.figure
        lines += [f"**On the page.** {label}: {value}.", ""]
        lines += [
            f"**Recap.** {les.recap[0]}  ",
            les.recap[1],
            "",
            f"**Discuss.** {les.discuss}",
            "",
        ]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
