"""Multiple-choice versions of the interview check's four open questions, for a live class.

The interview check (kvcalc/teach/quiz.py) has five questions; one asks for numbers and is graded by
``kvcalc.teach.quiz.grade``, the other four ask "why" and "when", answered in prose. A room of
phones cannot send prose that a projector can count, so a live class asks those four as a choice
among four statements: one right, three wrong, each wrong one naming the misconception it stands for
(the way the grader names a numeric slip: bits vs bytes, the missing factor 2). The revealed answer
is still the question's own prose from ``interview_questions()``.

No statement here gives a number: the numbers stay in the revealed answers, computed by kvcalc.
"""

from __future__ import annotations

from dataclasses import dataclass

from .quiz import Grade

__all__ = ["Choice", "CHOICES", "choices_for", "grade_choice", "LETTERS"]

LETTERS = "ABCD"


@dataclass(frozen=True, kw_only=True)
class Choice:
    text: str
    correct: bool = False
    slip: str = ""  # for a wrong statement: the misconception, named (shown after answering)


CHOICES: dict[str, tuple[Choice, ...]] = {
    "why-kv": (
        Choice(
            text="Queries take more memory than keys and values, so keeping them would not fit.",
            slip="Size is not the reason: a query is never read again after its own step, so "
            "keeping it would save nothing at any size.",
        ),
        Choice(
            text="A query is used once, at its own step; every later token reads the earlier "
            "keys and values.",
            correct=True,
        ),
        Choice(
            text="An earlier token's query changes at every new step, so a stored copy would go "
            "stale.",
            slip="Under causal attention nothing about an earlier token changes when later "
            "tokens arrive; its query is simply never used again.",
        ),
        Choice(
            text="Queries are cheap to recompute at each step, while keys and values are costly "
            "to compute again.",
            slip="Cost is not the reason (with GQA the query projection is the largest of the "
            "three): K and V are kept because every later token reads them.",
        ),
    ),
    "why-concurrency": (
        Choice(
            text="Each user gets their own copy of the weights, so every new user adds a whole "
            "model.",
            slip="The weights are loaded once and shared by every request in the batch; only "
            "the cache is per request.",
        ),
        Choice(
            text="The KV cache is kept in a more precise number format than the weights, so it "
            "is the larger.",
            slip="The format is not the reason (both are often BF16): the cache grows with "
            "every request and every token, the weights do not.",
        ),
        Choice(
            text="The cache is read at every decode step and the weights are not, so it needs "
            "the memory.",
            slip="Every decode step reads all the weights too; the limit here is memory held, "
            "and only the cache grows with users and context.",
        ),
        Choice(
            text="Weights are loaded once and shared; each request has its own cache, growing "
            "every token.",
            correct=True,
        ),
    ),
    "fp8": (
        Choice(
            text="The cache shrinks 8 times (FP8 is 8 bits), and the model's answers stay "
            "exactly the same.",
            slip="Bits vs bytes: a BF16 number is 2 bytes and an FP8 number 1 byte, so the "
            "cache halves; and rounding keys and values can cost accuracy.",
        ),
        Choice(
            text="The model's weights halve, so it loads faster; the cache keeps the size it "
            "had before.",
            slip="An FP8 KV cache changes the cache only; the weights stay in their own format.",
        ),
        Choice(
            text="The cache halves, so about twice the sequences fit; rounding can cost "
            "long-context accuracy.",
            correct=True,
        ),
        Choice(
            text="Only the speed changes: each step reads fewer bytes, but the same number of "
            "sequences fit.",
            slip="Half the bytes per token means about twice the tokens fit in the same pool: "
            "concurrency roughly doubles.",
        ),
    ),
    "offload": (
        Choice(
            text="Always: CPU memory is large, and copying the blocks back to the GPU costs "
            "nothing at all.",
            slip="The copy is not free: it crosses PCIe or NVLink-C2C and each reload has a "
            "fixed cost, so short prefixes are faster to recompute.",
        ),
        Choice(
            text="For short prefixes: they are small, so copying them back beats recomputing them.",
            slip="Each reload has a fixed cost; inside a busy batch a short prefix is cheaper "
            "to recompute than to fetch.",
        ),
        Choice(
            text="Never: recomputing a prefix on the GPU is always faster than copying it back.",
            slip="Recomputing a prefix costs prefill work that grows with its length; for a "
            "long prefix, reloading it over the link is usually faster.",
        ),
        Choice(
            text="When the copy back is faster than recomputing the prefix: long prefixes that "
            "are reused.",
            correct=True,
        ),
    ),
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
