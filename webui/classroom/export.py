"""The teacher's export of a class: every answer, one row each, as CSV or strict JSON."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence

from .deck import deck, is_choice, parts, value_label
from .views import ClassView


def answer_rows(qs: Sequence, students, answers, names: bool) -> list[dict]:
    """One row per answer: question, part, student (anonymous: a number in join order), the
    answer, correct or not, the named slip; ``names`` adds the nicknames students chose to
    give. ``qs``: the class's deck; ``students`` in join order."""
    number = {s.id: i + 1 for i, s in enumerate(students)}
    nick = {s.id: s.nickname or "" for s in students}
    out = []
    for a in answers:
        q = qs[a.question]
        out.append(
            {
                "question": a.question + 1,
                "qid": q.qid,
                "part": a.part,
                "student": number.get(a.student_id, 0),
                **({"nickname": nick.get(a.student_id, "")} if names else {}),
                "answer": a.text,
                "value": _finite(a.value),
                "value_label": value_label(q, a.part, a.value),
                "correct": bool(a.correct),
                "first_correct": bool(a.first_correct),
                "attempts": a.attempts,
                "slip": a.slip,
                "answered_at": round(a.answered_at, 3),
            }
        )
    return out


def to_csv(rows: list[dict], names: bool) -> str:
    cols = ["question", "qid", "part", "student", *(["nickname"] if names else [])]
    cols += ["answer", "value", "value_label", "correct", "first_correct", "attempts", "slip"]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=[*cols, "answered_at"], lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: _cell(v) for k, v in r.items()})
    return buf.getvalue()


def to_json(view: ClassView, rows: list[dict], exported_at: float, names: bool) -> str:
    questions = []
    for i, q in enumerate(deck(view.seed), 1):
        ps = [
            {
                "part": p,
                "right_value": None if is_choice(q) else _finite(q.part(p).value),
                "answers": [r for r in rows if r["question"] == i and r["part"] == p],
            }
            for p in parts(q)
        ]
        questions.append(
            {"number": i, "qid": q.qid, "level": q.level, "prompt": q.prompt, "parts": ps}
        )
    doc = {
        "class": view.code,
        "practice_set": view.seed,
        "exported_at": round(exported_at, 3),
        "nicknames": bool(names),
        "questions": questions,
    }
    # Strict JSON (issue 39 B14: an infinity was written as Infinity, which strict parsers
    # refuse): every number is finite (_finite), and allow_nan=False makes sure of it.
    return json.dumps(doc, indent=1, allow_nan=False)


def _finite(value: float | None) -> float | None:
    """A stored number for an export: None where it is not a finite number (a row stored before
    the grader refused such answers), so the export stays strict JSON."""
    if value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _cell(value):
    """A CSV cell that a spreadsheet will not run: text starting with = + - @ (not a number)
    gets a leading apostrophe."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        try:
            float(value.replace(",", ""))
        except ValueError:
            return "'" + value
    return value
