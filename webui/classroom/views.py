"""What the live class's store hands out: a class as the projector sees it, the teacher's
results and roster; never a key or a token but the new class's own key, once."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .deck import deck, parts, value_label


@dataclass(frozen=True)
class NewClass:
    code: str
    key: str  # the teacher key: shown once, to the teacher only


@dataclass(frozen=True)
class ClassView:
    """What the projector and every student may see: no results, no key."""

    code: str
    seed: int
    position: int  # the question on screen, from 0
    revealed: bool
    version: int
    expires_at: float
    count: int  # questions in the deck


@dataclass
class PartResult:
    part: int
    answered: int = 0
    correct: int = 0
    first_correct: int = 0
    bars: list[tuple[str, int, bool]] = field(default_factory=list)  # (label, count, correct)
    slips: list[tuple[str, int]] = field(default_factory=list)  # named mistakes, most first


@dataclass
class Results:
    view: ClassView
    joined: int
    question: int
    answered: int  # students with an answer to every part of the question
    parts: list[PartResult]
    joining: bool = True  # new students may join


@dataclass(frozen=True)
class Student:
    """A student as the teacher's roster lists them (never on the projector)."""

    number: int  # in the order they joined, from 1, as the export numbers them
    nickname: str
    answers: int


@dataclass(frozen=True)
class Roster:
    joining: bool  # new students may join
    students: list[Student]


def view_of(row) -> ClassView:
    """The class row as everyone may see it."""
    return ClassView(
        code=row.code,
        seed=row.seed,
        position=row.position,
        revealed=bool(row.revealed),
        version=row.version,
        expires_at=row.expires_at,
        count=len(deck(row.seed)),
    )


def summarize(view: ClassView, joined: int, qi: int, rows) -> Results:
    """The figures of question ``qi`` from its answer rows: per part, the answers, the right
    ones, the bars by value and the named mistakes, most first."""
    q = deck(view.seed)[qi]
    out = []
    by_student: dict[int, set[int]] = {}
    for p in parts(q):
        got = [r for r in rows if r.part == p]
        bars: dict[str, list] = {}
        for r in got:
            by_student.setdefault(r.student_id, set()).add(p)
            bar = bars.setdefault(value_label(q, p, r.value), [0, False, r.value or 0.0])
            bar[0] += 1
            bar[1] = bar[1] or bool(r.correct)
        slips = Counter(r.slip for r in got if not r.correct and r.slip)
        pr = PartResult(part=p, answered=len(got), correct=sum(bool(r.correct) for r in got))
        pr.first_correct = sum(bool(r.first_correct) for r in got)
        pr.bars = [
            (label, b[0], b[1]) for label, b in sorted(bars.items(), key=lambda kv: kv[1][2])
        ]
        pr.slips = sorted(slips.items(), key=lambda kv: (-kv[1], kv[0]))
        out.append(pr)
    need = set(parts(q))
    answered = sum(1 for have in by_student.values() if have >= need)
    return Results(view=view, joined=joined, question=qi, answered=answered, parts=out)
