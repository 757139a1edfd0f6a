"""The question every teaching module asks and ``quiz.grade`` grades."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True, kw_only=True)
class Question:
    qid: str
    level: str  # core, mid, senior
    prompt: str
    answer: str  # the revealed answer (markdown)
    value: float | None = None  # the number to give, for graded questions
    unit: str = ""  # what value is in: "B", "tokens", "x", "sequences"
    ask_unit: str = ""  # the unit a bare number is read in ("GiB" when the question asks GiB)
    solution: str = ""  # worked solution, numbers substituted
    # A second number the question asks for (Q2: per token, then per sequence), graded apart.
    value2: float | None = None
    unit2: str = ""
    ask_unit2: str = ""
    floor_ok: bool = False  # "how many fit": the whole number below the answer is right too
    # Other figures right too, each with the note the reply gives (what a running server holds).
    also: tuple[tuple[float, str], ...] = ()
    config: str = ""  # a config.json snippet the question reads from (JSON text)
    # Mistakes particular to this question: (answer / right answer, what it means).
    mistakes: tuple[tuple[float, str], ...] = ()
    # The generic K/V hints (the factor 2, bits vs bytes); off for a question naming its own
    # (an MLA latent has no factor 2). The unit hints (KiB vs KB) always apply.
    kv_hints: bool = True

    def part(self, n: int) -> Question:
        """The question as graded for its part ``n`` (1 or 2)."""
        if n == 1:
            return self
        if self.value2 is None:
            raise ValueError("this question has no second part")
        return replace(
            self, value=self.value2, unit=self.unit2, ask_unit=self.ask_unit2, value2=None, also=()
        )
