"""The grader of every teaching question (``grade``: an answer in any unit, the likeliest slip
named), and the quiz's public interface (Question, the interview and practice questions)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..core.units import GiB, fmt_bytes
from .interview import interview_questions as interview_questions
from .practice import practice_questions as practice_questions
from .question import Question as Question

# One band on the value in any unit ("160 KB" and "0.16 MB" grade alike). 3%: three significant
# digits lie within about 1%, and KB typed for KiB (2.4%) passes, the unit named as a note;
# MB for MiB (4.9%), GB for GiB (7.4%), a 2 GiB reserve left out of 60 GiB (3.5%) are named slips.
TOLERANCE = 0.03
# A bare number at least this large in a box that reads GiB is bytes (no cache here is a million
# GiB): 1342177280 typed for 1.25 GiB is read as 1,342,177,280 B, and the reply says so.
BYTES_BARE = 10**6
# Within this of the answer, a number typed in the other kind of unit (KiB for KB, GB for GiB)
# is the answer exactly: the unit, not the arithmetic, differs (named as a note).
_EXACT = 0.005
# An answer this factor off the answer's scale is a typo or a joke ("1e308 GiB"), not graded
# (issue 39 B14) unless it is a named slip (bytes typed bare in a GiB box, 2^30 off).
MAX_SCALE = 1e6

# Byte units by name: B, the decimal KB to TB (10^3 steps) and the binary KiB to TiB (2^10 steps).
_UNITS: dict[str, float] = {"b": 1, "byte": 1, "bytes": 1}
_UNITS |= {f"{p}b": 10.0 ** (3 * i) for i, p in enumerate("kmgt", 1)}
_UNITS |= {f"{p}ib": 2 ** (10 * i) for i, p in enumerate("kmgt", 1)}
# Digits may be grouped by commas, underscores, or spaces (plain, no-break, thin) between groups
# of three: "163,840", "163 840".
_GROUP = "[ \u00a0\u2009\u202f]"
_NUM = re.compile(
    r"^\s*([-+]?[0-9][0-9,_]*(?:" + _GROUP + r"[0-9]{3})*(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?)"
    r"\s*([a-z/]*)\s*$",
    re.I,
)
# Units a plain number may carry, by the question's unit (the unit itself is always allowed).
_PLAIN_UNITS = {
    "x": ("x", "times"),
    "sequences": ("sequences", "seqs", "requests", "x"),
    "tokens/s": ("tokens/s", "tok/s", "t/s"),
    "flop/b": ("flop/b", "flops/b"),
}


@dataclass(frozen=True, kw_only=True)
class Grade:
    correct: bool
    given: float | None
    message: str
    slip: str = ""  # the named mistake a wrong answer looks like (in the message too), or ""
    # What a right answer's reply adds (in the message too): a unit slip, bytes read, ...
    note: str = ""


@dataclass(frozen=True)
class _Reading:
    value: float  # in the question's unit
    unit: str  # the unit typed, lower case ("" for a bare number)
    typed: str = ""  # the number as typed
    as_bytes: bool = False  # a large bare number in a GiB box, read in bytes


def parse_answer(text: str, question: Question) -> float:
    """A number from ``text`` in the question's unit (bytes with B to GiB, tokens with K or M,
    ratios with x; a bare one in the unit asked, or bytes when a million or more in GiB)."""
    return _read(text, question).value


def _read(text: str, question: Question) -> _Reading:
    raw = (text or "").strip().lower().replace("×", "x")
    if not raw:
        raise ValueError("Type a number first.")
    if len(raw) > 40:
        raise ValueError("That is too long to be a number.")
    m = _NUM.match(raw)
    if not m:
        raise ValueError(
            f"'{text[:40]}' is not a number I can read: write e.g. 163840, "
            "160 KiB, 1.25 GiB, 3.8K or 4x."
        )
    typed = m.group(1)
    value = float(re.sub("[,_]|" + _GROUP, "", typed))
    unit = m.group(2)
    if not math.isfinite(value):
        raise ValueError("Give a finite number.")
    if question.unit == "B":
        if not unit:
            ask = question.ask_unit.lower() or "b"
            if ask == "gib" and abs(value) >= BYTES_BARE:
                return _Reading(value, "", typed, as_bytes=True)
            return _Reading(value * _UNITS[ask], "", typed)
        if unit not in _UNITS:
            raise ValueError(f"Unknown unit '{unit}': use B, KiB, MiB, GiB (or KB, MB, GB).")
        return _Reading(value * _UNITS[unit], unit, typed)
    if question.unit == "tokens":
        scale = {"": 1, "k": 1e3, "m": 1e6, "tokens": 1, "token": 1}.get(unit)
        if scale is None:
            raise ValueError(f"Unknown unit '{unit}': give tokens, e.g. 122880 or 122.9K.")
        return _Reading(value * scale, unit)
    if unit and unit not in _PLAIN_UNITS.get(question.unit.lower(), (question.unit.lower(),)):
        raise ValueError(
            f"Unknown unit '{unit}' here: give a plain number"
            + (f" of {question.unit}." if question.unit else ".")
        )
    return _Reading(value, unit)


def answer_label(question: Question, part: int = 1) -> str:
    """The label of an answer box: how it reads a bare number, and the units it takes."""
    q = question.part(part)
    if q.unit == "B":
        bare = q.ask_unit or "B"
        big = " (one of a million or more, in B)" if bare == "GiB" else ""
        return (
            f"in {bare}: a bare number is read in {bare}{big}; or add a unit (B, KiB, MiB, "
            "GiB, KB, MB, GB)"
        )
    if q.unit == "tokens":
        return "in tokens (e.g. 122880 or 122.9K)"
    if q.unit == "x":
        return "times (a plain number, or with an x)"
    return f"in {q.unit}" if q.unit else "a plain number"


def grade(question: Question, text: str, tolerance: float = TOLERANCE, part: int = 1) -> Grade:
    """The one grading rule: right within ``tolerance`` (relative) of kvcalc's value in any
    unit (a unit slip named as a note), or of a ``Question.also`` figure; "how many fit" takes
    the whole number below; a wrong answer gets the likeliest mistake named."""
    question = question.part(part)
    if question.value is None:
        raise ValueError("this question has no single number to grade")
    try:
        reading = _read(text, question)
    except ValueError as exc:
        return Grade(correct=False, given=None, message=str(exc))
    given, target = reading.value, question.value
    refused = _out_of_scale(text, given, target, question)
    if refused:
        return Grade(correct=False, given=None, message=refused)
    note = _unit_note(reading, target, question, tolerance)
    whole = math.floor(target)
    if _matches(given, target, question, tolerance):
        right = (
            f"{whole:,} whole ones fit ({_fmt(target, question)})"
            if question.floor_ok and given != target and given.is_integer()
            else _fmt(target, question)
        )
        return Grade(correct=True, given=given, message=f"Correct: {right}.{note}", note=note)
    for value, why in question.also:
        if _matches(given, value, question, tolerance):
            note = f" {why}{note}"
            return Grade(correct=True, given=given, message=f"Correct.{note}", note=note.strip())
    if question.floor_ok and given == whole + 1:
        # A count of whole ones is exact: 54 fit when 54.72 do, and 55 do not, however close.
        why = (
            f" A count of whole ones rounds down: {_fmt(target, question)} means {whole:,} "
            f"fit and a {_ordinal(whole + 1)} does not."
        )
    else:
        why = _diagnose(text, given, target, question)
    fit = f"{whole:,} whole ones fit ({_fmt(target, question)})"
    answer = (
        fit
        if question.floor_ok and given.is_integer()
        else f"the answer is {_fmt(target, question)}"
    )
    return Grade(
        correct=False,
        given=given,
        message=f"Not quite: you gave {_fmt(given, question)}; {answer}.{why}{note}",
        slip=why.strip(),
    )


def _out_of_scale(text: str, given: float, target: float, q: Question) -> str:
    """Why ``given`` is not graded (not finite, or MAX_SCALE off the answer), or ""."""
    typed = " ".join((text or "").split())[:40]
    check = "the number and its unit (B, KiB, MiB, GiB)" if q.unit == "B" else "the number"
    if not math.isfinite(given):
        return f"'{typed}' is too large to be an answer here: check {check}."
    if given and target and not 1 / MAX_SCALE <= abs(given / target) <= MAX_SCALE:
        if given > 0 and _diagnose(text, given, target, q):  # a slip it names: graded
            return ""
        return f"'{typed}' is over a million times off the scale of this answer: check {check}."
    return ""


def _matches(given: float, value: float, q: Question, tolerance: float) -> bool:
    """``given`` is ``value`` within ``tolerance``, or (a count) the whole number below it."""
    if q.floor_ok and given.is_integer() and given != value:
        return given == math.floor(value)
    return abs(given - value) <= tolerance * abs(value)


_TWINS = {"kb": "kib", "mb": "mib", "gb": "gib", "tb": "tib"}
_TWINS.update({v: k for k, v in _TWINS.items()})
_NAMES = {u: u[0].upper() + u[1:-1] + "B" for u in _TWINS}  # "kib": "KiB", "kb": "KB"


def _unit_note(r: _Reading, target: float, q: Question, tolerance: float) -> str:
    """A large bare number read in bytes, or KB typed for an exact KiB answer (and so on)."""
    if r.as_bytes:
        return (
            f" Read in bytes: a bare number this large cannot be GiB here, so it is "
            f"{r.value:,.0f} B = {r.value / GiB:,.4g} GiB."
        )
    twin = _TWINS.get(r.unit)
    if q.unit != "B" or twin is None or not target:
        return ""
    off = abs(r.value / target - 1)
    typed = r.value / _UNITS[r.unit]
    if off <= _EXACT or off > tolerance or abs(typed * _UNITS[twin] / target - 1) > _EXACT:
        return ""
    a, b = sorted((_NAMES[r.unit], _NAMES[twin]), key=lambda u: "i" not in u)
    return (
        f" Note: {r.typed} {_NAMES[r.unit]} is {r.value:,.0f} B; the answer is exactly "
        f"{r.typed} {_NAMES[twin]}. Check {a} vs {b} ({_POWERS[a]})."
    )


_POWERS = {
    "KiB": "1 KiB = 2^10 = 1,024 B; 1 KB = 1,000 B",
    "MiB": "1 MiB = 2^20 = 1,048,576 B; 1 MB = 10^6 B",
    "GiB": "1 GiB = 2^30 = 1,073,741,824 B; 1 GB = 10^9 B",
    "TiB": "1 TiB = 2^40 B; 1 TB = 10^12 B",
}


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n:,}{suffix}"


def _diagnose(text: str, given: float, target: float, q: Question) -> str:
    """The slip nearest this answer within the grading band (so GB for GiB, 7.4%, is not taken
    for MB for MiB, 4.9%), or ""."""
    if not target or not given:
        return ""
    ratio = given / target
    slips = [(factor, f" {why}") for factor, why in q.mistakes if factor != 1]
    m = _NUM.match((text or "").strip().lower())
    if q.unit == "B":
        # A unit slip of the unit typed (KB or KiB: the kilo), or for a bare number the box's.
        typed = (m.group(2) if m else "") or (q.ask_unit.lower() if q.ask_unit != "B" else "")
        for unit in ("KiB", "MiB", "GiB"):
            if typed in ("", "b", "byte", "bytes") or typed[0] == unit[0].lower():
                f = _UNITS[unit.lower()] / _UNITS[unit[0].lower() + "b"]
                power = _POWERS[unit].split(";")[0]
                why = f" Close: check {unit} vs {unit[0]}B ({power}, not a power of 10)."
                slips += [(f, why), (1 / f, why)]
        if m and not m.group(2) and q.ask_unit == "GiB":
            why = " That looks like the answer in bytes: a bare number here is read in GiB; "
            slips.append((GiB, why + f"add the unit (e.g. '{(text or '').strip()} B')."))
        if q.kv_hints:
            bits = " Off by 8: bits vs bytes? A BF16 number is 2 bytes, FP8 1 byte."
            slips += [
                (0.5, " Half the answer: did you forget the factor 2 for K and V?"),
                *((8, bits), (1 / 8, bits)),
                (2, " Twice the answer: count K and V once each, and check the bytes per number."),
            ]
    if q.unit == "x":
        why = " That is the inverse: the question asks how many times smaller (old / new)."
        slips.append((1 / target**2, why))
    band = math.log1p(TOLERANCE)
    near = [(abs(math.log(ratio / f)), why) for f, why in slips if f > 0 and ratio > 0]
    best = min(near, key=lambda d: d[0], default=(math.inf, ""))
    if best[0] <= band:
        return best[1]
    if abs(ratio - 1) <= 2 * TOLERANCE:
        return (
            f" Close, but more than {TOLERANCE:.0%} off: keep three significant digits "
            "through the arithmetic."
        )
    return ""


def _fmt(value: float, q: Question) -> str:
    if q.unit == "B":
        return f"{value:,.0f} B ({fmt_bytes(value)})"
    if q.unit == "tokens":
        return f"{value:,.0f} tokens"
    if q.unit == "x":
        return f"{value:,.2f}x"
    if q.floor_ok and float(value).is_integer():
        return f"{value:,.0f} {q.unit}".strip()
    return f"{value:,.2f} {q.unit}".strip()
