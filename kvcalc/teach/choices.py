"""Multiple-choice versions of the interview check's four open questions, for a live class.

The interview check (kvcalc/teach/quiz.py) has five questions; one asks for numbers and is graded
by ``kvcalc.teach.quiz.grade``, the other four ask "why" and "when", answered in prose. A room of
phones cannot send prose that a projector can count, so a live class asks those four as a choice
among four statements (kvcalc/teach/choices.toml): one right, three wrong, each wrong one naming
the misconception it stands for (the way the grader names a numeric slip). The revealed answer is
still the question's own prose from ``interview_questions()``. No statement gives a number.
"""

from __future__ import annotations

from dataclasses import dataclass

from .prose import prose
from .quiz import Grade

LETTERS = "ABCD"


@dataclass(frozen=True, kw_only=True)
class Choice:
    text: str
    correct: bool = False
    slip: str = ""  # for a wrong statement: the misconception, named (shown after answering)


CHOICES: dict[str, tuple[Choice, ...]] = {
    qid: tuple(Choice(text=c["text"], slip=c.get("slip", ""), correct="slip" not in c) for c in cs)
    for qid, cs in prose("choices").items()
}


def choices_for(qid: str) -> tuple[Choice, ...]:
    """The statements a live class chooses among for question ``qid`` (empty: none)."""
    return CHOICES.get(qid, ())


def grade_choice(qid: str, letter: str) -> Grade:
    """Grade a choice, given as its letter (A to D); a wrong one names its misconception."""
    options = choices_for(qid)
    if not options:
        raise ValueError(f"question {qid!r} has no choices")
    text = (letter or "").strip().upper()
    if len(text) != 1 or text not in LETTERS[: len(options)]:
        return Grade(
            correct=False,
            given=None,
            message=f"Choose one of {', '.join(LETTERS[: len(options)])}.",
        )
    index = LETTERS.index(text)
    choice = options[index]
    if choice.correct:
        return Grade(correct=True, given=float(index), message=f"Correct: {text}.")
    right = next(LETTERS[i] for i, c in enumerate(options) if c.correct)
    return Grade(
        correct=False,
        given=float(index),
        message=f"Not quite: you chose {text}; the answer is {right}. {choice.slip}",
    )
