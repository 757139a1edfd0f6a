"""What a live class asks and how an answer is graded: kvcalc's own questions and grader.

A class runs the Interview check's deck: the six interview questions (the chapter's five, then one
on disaggregated serving), then the practice set of
the class's seed (10 questions). A question that asks for two numbers (per token, then per
sequence) has two parts, each graded alone. The four open interview questions are asked as a
choice of four statements (kvcalc.teach.choices): a phone cannot send prose a projector can
count. The named slip is the grader's own diagnosis (``kvcalc.teach.quiz.grade``,
``kvcalc.teach.choices.grade_choice``: bits vs bytes, the factor 2, GiB vs GB, query heads
counted as KV heads, an inverted ratio), never a second grader's guess.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from kvcalc.teach import quiz
from kvcalc.teach.choices import LETTERS, choices_for, grade_choice
from kvcalc.teach.quiz import Question, interview_questions, practice_questions

PRACTICE_COUNT = 10  # as the Interview check's Classroom mode
MAX_SEED = 999_999  # the Interview check's practice-set box
MAX_ANSWER_CHARS = 40  # the grader reads at most 40 characters (kvcalc.teach.quiz.parse_answer)
NO_SLIP = "another mistake"  # a wrong answer the grader names no slip for
# A histogram bar's label: "1,023.99 GiB" or "122,880 tokens" is 14; beyond 24 characters a
# label is no number a class can read off a projector.
LABEL_MAX = 24


@functools.lru_cache(maxsize=64)
def deck(seed: int) -> tuple[Question, ...]:
    """The class's questions: the six interview questions, then practice set ``seed``."""
    return tuple(interview_questions()) + tuple(practice_questions(int(seed), PRACTICE_COUNT))


@functools.lru_cache(maxsize=1)
def chapter_count() -> int:
    """How many of a deck's questions are interview questions (first)."""
    return len(interview_questions())


def position_label(position: int, count: int) -> str:
    """Where question ``position`` (from 0) of a ``count``-question deck sits, counted in its own
    set: "Interview question 2 of 6", or "Practice question 1 of 10" after the interview's."""
    n = min(chapter_count(), count)
    if position < n:
        return f"Interview question {position + 1} of {n}"
    return f"Practice question {position - n + 1} of {count - n}"


def parts(q: Question) -> tuple[int, ...]:
    """The parts a student answers: (1,) or (1, 2); a choice question has one."""
    if choices_for(q.qid):
        return (1,)
    if q.value is None:
        return ()
    return (1, 2) if q.value2 is not None else (1,)


def is_choice(q: Question) -> bool:
    return bool(choices_for(q.qid))


@dataclass(frozen=True, kw_only=True)
class Graded:
    message: str  # the grader's full message (quotes the right answer: after Reveal only)
    readable: bool = True  # False: not an answer (a typo, an unknown unit): nothing is stored
    correct: bool = False
    value: float | None = None  # the number read (a choice: its index)
    slip: str = ""  # the named mistake ("" when correct)
    note: str = ""  # what the grader adds to a right answer (a unit slip named, bytes read)

    @property
    def short(self) -> str:
        """What a student sees before Reveal: right or not and the named slip (or, on a right
        answer, the grader's note), not the answer itself."""
        if not self.readable:
            return self.message
        if self.correct:
            return "Correct." + (f" {self.note}" if self.note else "")
        return "Not quite." + ("" if self.slip == NO_SLIP else f" {self.slip}")


def grade_answer(q: Question, part: int, text: str) -> Graded:
    """Grade ``text`` as the answer to part ``part`` of ``q`` with kvcalc's grader."""
    text = (text or "").strip()
    if is_choice(q):
        c = grade_choice(q.qid, text.upper())
        if c.given is None:
            return Graded(readable=False, message=c.message)
        slip = "" if c.correct else choices_for(q.qid)[int(c.given)].slip
        return Graded(correct=c.correct, value=c.given, message=c.message, slip=slip)
    if part not in parts(q):
        raise ValueError(f"question {q.qid!r} has no part {part}")
    if len(text) > MAX_ANSWER_CHARS:
        too_long = f"That is too long to be a number (at most {MAX_ANSWER_CHARS} characters)."
        return Graded(readable=False, message=too_long)
    g = quiz.grade(q, text, part=part)
    if g.given is None:
        return Graded(readable=False, message=g.message)
    if g.correct:
        return Graded(correct=True, value=g.given, message=g.message, note=g.note)
    # The grader's own diagnosis, the sentence it appended to its message.
    return Graded(value=g.given, message=g.message, slip=g.slip or NO_SLIP)


def answer_label(q: Question, part: int) -> str:
    """The answer box's label: which number, and how a bare number is read."""
    if is_choice(q):
        return "Your answer"
    p = q.part(part)
    which = "" if len(parts(q)) == 1 else ("Per token: " if part == 1 else "Per sequence: ")
    unit = {
        "B": f"(a bare number is read in {p.ask_unit or 'B'}; or add a unit: B, KiB, "
        "MiB, GiB, KB, MB, GB)",
        "tokens": "in tokens (e.g. 122880 or 122.9K)",
        "x": "in times smaller",
        "sequences": "in sequences",
    }.get(p.unit, f"in {p.unit}")
    return f"{which}your answer {unit}" if which else f"Your answer {unit}"


def value_label(q: Question, part: int, value: float | None) -> str:
    """A stored answer as a histogram bar's label: a choice's letter, or the number at three
    significant digits in the question's unit (answers that round alike share a bar), at most
    LABEL_MAX characters (issue 39 B14: a label of 1e300 B ran to 401)."""
    text = _value_text(q, part, value)
    return text if len(text) <= LABEL_MAX else text[: LABEL_MAX - 1] + "…"


def _value_text(q: Question, part: int, value: float | None) -> str:
    if value is None or not math.isfinite(value):  # not a number any grade was given for
        return "?"
    if is_choice(q):
        i = int(value)
        return LETTERS[i] if 0 <= i < len(LETTERS) else "?"
    p = q.part(part)
    if p.unit == "B":
        from kvcalc.core.units import fmt_bytes

        return fmt_bytes(value)
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    digits = 3 - int(math.floor(math.log10(abs(value)))) - 1
    rounded = round(value, digits)
    text = f"{rounded:,.{max(0, digits)}f}" if abs(rounded) < 1e15 else f"{rounded:.3g}"
    return text + {"x": "x", "tokens": " tokens"}.get(p.unit, "")
