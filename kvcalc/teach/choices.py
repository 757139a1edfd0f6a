"""The interview check's four prose questions as multiple choice, for a live class: four
statements each (choices.toml), one right, each wrong one naming its misconception."""

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
    text, letters = (letter or "").strip().upper(), LETTERS[: len(options)]
    if len(text) != 1 or text not in letters:
        return Grade(correct=False, given=None, message=f"Choose one of {', '.join(letters)}.")
    index = LETTERS.index(text)
    choice = options[index]
    if choice.correct:
        return Grade(correct=True, given=float(index), message=f"Correct: {text}.")
    right = next(LETTERS[i] for i, c in enumerate(options) if c.correct)
    why = f"Not quite: you chose {text}; the answer is {right}. {choice.slip}"
    return Grade(correct=False, given=float(index), message=why)
