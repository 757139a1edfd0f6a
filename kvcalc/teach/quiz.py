"""Interview questions, generated practice questions, and a grader, all computed by kvcalc.

The five questions follow the seed chapter's interview check; the answers are written for this
project and every number in them is computed here. Practice questions draw realistic parameters
from a seeded generator, so a class that shares the seed shares the same set.

This module is the quiz's public interface: the interview questions and the grader live here,
the ``Question`` every teaching module builds in ``question``, and the practice generator in
``practice``; both are re-exported.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..cache.kv import kv_cache
from ..cache.weight_bytes import Weights
from ..config.catalog import GPU, get_gpu, get_model, registry
from ..config.hfconfig import spec_from_config
from ..core.model import ModelSpec
from ..core.units import GiB, KiB, MiB, fmt_bytes, fmt_seconds
from ..engines.budget import Budget, budget
from ..perf.roofline import offload_vs_recompute, prefill, step_time
from .practice import llama_like, practice_questions
from .question import Question

__all__ = [
    "Question",
    "interview_questions",
    "practice_questions",
    "grade",
    "parse_answer",
    "answer_label",
    "Grade",
    "TOLERANCE",
]

TOLERANCE = 0.02  # relative: 2% covers rounding to three significant digits


def interview_questions() -> list[Question]:
    """The chapter's five questions, answered with numbers computed by kvcalc."""
    l8b = get_model("llama-3.1-8b")
    h100 = get_gpu("h100-sxm-80gb")
    spec, w = l8b.spec, l8b.weights()
    b16 = budget(
        spec,
        total_bytes=h100.memory_bytes,
        context=8192,
        weights_bytes=w.bytes,
        find_max_context=False,
    )
    return [
        _why_kv(spec),
        _per_token(),
        _why_concurrency(spec, w, b16),
        _fp8(spec, w, h100, b16),
        _offload(spec, w, h100),
    ]


def _why_kv(spec: ModelSpec) -> Question:
    """Why K and V are cached and Q is not, with what Q would cost Llama 3.1 8B per token."""
    layer = spec.kv_layers[0]
    q_bytes = spec.num_layers * layer.q_heads * layer.qk_dim * 2
    kv_tok = kv_cache(spec, 1).kv_bytes_per_token_nominal
    return Question(
        qid="why-kv",
        level="core",
        prompt="Why do we cache K and V but not Q?",
        answer=(
            "A token's query is used once: at the step that processes that token it is "
            "compared with the keys of every earlier token, and then it is never needed "
            "again. Keys and values are the opposite: every later token reads them. "
            "Caching them saves recomputing them at every step; caching queries would "
            "cost memory and save nothing. For Llama 3.1 8B, keeping Q as well would add "
            f"{fmt_bytes(q_bytes)} per token on top of the {fmt_bytes(kv_tok)} of K and V "
            "(32 layers x 32 query heads x 128 x 2 B), for no speed-up."
        ),
    )


def _per_token() -> Question:
    """The chapter's 40-layer model: KV bytes per token and per 8,192-token sequence."""
    forty = spec_from_config(llama_like(40, 8, 128, 32))
    per = kv_cache(forty, 1, kv_dtype="fp16").kv_bytes_per_token_nominal
    seq = kv_cache(forty, 8192, kv_dtype="fp16").kv_bytes
    return Question(
        qid="per-token",
        level="core",
        prompt=(
            "Compute the KV cache per token for a 40-layer model with 8 KV heads, "
            "head dimension 128, in FP16. How much does an 8,192-token sequence "
            "need?"
        ),
        answer=(
            f"2 (K and V) x 40 layers x 8 heads x 128 x 2 bytes = **{per:,} B = "
            f"{per // KiB} KiB per token**. An 8,192-token sequence needs 8,192 x "
            f"{per // KiB} KiB = {seq:,} B = **{seq / GiB:g} GiB**."
        ),
        value=per,
        unit="B",
        ask_unit="B",
        value2=seq,
        unit2="B",
        ask_unit2="GiB",
        solution=f"2 x 40 x 8 x 128 x 2 B = {per:,} B; x 8,192 tokens = {seq:,} B = "
        f"{seq / GiB:g} GiB",
    )


def _why_concurrency(spec: ModelSpec, w: Weights, b16: Budget) -> Question:
    """Why the cache, not the weights, limits concurrency: Llama 3.1 8B's pool on an H100."""
    return Question(
        qid="why-concurrency",
        level="mid",
        prompt="Why does the KV cache, rather than the weights, usually limit how many "
        "users a GPU serves at once?",
        answer=(
            "The weights are loaded once and every request shares them. The cache is per "
            "request and grows with every token. So after the weights are in, what is "
            "left divided by (KV per token x context) is the number of sequences in "
            f"flight. Llama 3.1 8B on an H100: {w.bytes / GiB:.1f} GiB of weights, a "
            f"{b16.kv_pool_bytes / GiB:.1f} GiB pool left (vLLM's arithmetic at "
            f"gpu_memory_utilization {b16.gpu_mem_util:g} and a "
            f"{b16.reserve_bytes / GiB:g} GiB reserve, as on the Budget page), and each "
            f"8,192-token conversation takes {kv_cache(spec, 8192).kv_bytes / GiB:g} "
            f"GiB: **{b16.max_concurrency:.1f} conversations** at most. Doubling the "
            "context halves that; the weights never change."
        ),
    )


def _fp8(spec: ModelSpec, w: Weights, h100: GPU, b16: Budget) -> Question:
    """What an FP8 cache gains (concurrency, the crossover) and what it risks."""
    b8 = budget(
        spec,
        total_bytes=h100.memory_bytes,
        context=8192,
        weights_bytes=w.bytes,
        kv_dtype="fp8",
        find_max_context=False,
    )
    s16 = step_time(spec, w, context=8192, batch=1, bandwidth_gbs=h100.bandwidth_gbs)
    s8 = step_time(spec, w, context=8192, batch=1, bandwidth_gbs=h100.bandwidth_gbs, kv_dtype="fp8")
    return Question(
        qid="fp8",
        level="mid",
        prompt="FP8 KV cache: what do you gain, and what can go wrong?",
        answer=(
            "Each cached number takes 1 byte instead of 2, so the cache halves. On an "
            "H100 with Llama 3.1 8B at 8,192 tokens, max concurrency goes from "
            f"{b16.max_concurrency:.1f} to **{b8.max_concurrency:.1f}**, and each "
            "decode step reads half the cache bytes: at batch 1 the crossover where "
            f"the cache outweighs the weights moves {_crossover_move(s16, s8, spec)}. "
            "The risk is accuracy: "
            "rounding keys and values can hurt long-context retrieval (finding one fact "
            "in a long document) more than short chats. Measure on your own evaluations "
            "before turning it on."
        ),
    )


def _offload(spec: ModelSpec, w: Weights, h100: GPU) -> Question:
    """When offloading to CPU memory beats recomputing: reload and prefill times compared."""
    link = registry().links["pcie5-x16"].gbs  # one direction
    peak = h100.bf16_tflops
    if peak is None:
        raise ValueError(
            "models.yaml: gpu 'h100-sxm-80gb' needs its bf16_tflops for the interview questions"
        )
    off = offload_vs_recompute(spec, 8192, link_gbs=link, peak_tflops=peak)
    off_fixed = offload_vs_recompute(spec, 8192, link_gbs=link, peak_tflops=peak, fixed_s=1e-3)
    short = prefill(spec, 32, peak)  # the marginal cost inside a running batch
    alone = prefill(
        spec,
        32,
        peak,
        weight_read_bytes=w.read_per_step(spec, 32),
        bandwidth_gbs=h100.bandwidth_gbs,
    )  # on an idle GPU: one weight read at least
    return Question(
        qid="offload",
        level="senior",
        prompt="When is offloading KV blocks to CPU memory a win?",
        answer=(
            "When bringing the blocks back over the link is faster than recomputing them "
            "with a prefill. For a long prefix that is reused (a multi-turn chat, a "
            "shared document) it usually is: for Llama 3.1 8B an 8,192-token prefix is "
            f"{fmt_bytes(off.kv_bytes)}, **{fmt_seconds(off.reload_s)}** over PCIe 5.0 "
            f"({link:g} GB/s) against **{fmt_seconds(off.recompute_s)}** to recompute on "
            "an H100 at half its peak. A reload also has a fixed cost (finding the "
            "blocks, issuing and waiting for the copy). Counted as extra work inside a "
            "batch that is running anyway (its weights are read for the other requests "
            "regardless), recomputing is only FLOPs: at 1 ms per reload, any prefix "
            f"shorter than **{off_fixed.break_even_tokens:,} tokens** is faster to "
            f"recompute (a 32-token prefix in {fmt_seconds(short.time_s)}). On an idle "
            "GPU a prefill reads every weight at least once, so the same 32 tokens "
            f"take at least {fmt_seconds(alone.time_s)}. Short prefixes in a busy "
            "server: recompute. Long, reused ones: offload."
        ),
    )


def _crossover_at(s, spec) -> str:
    """A crossover as a sentence may quote it: never past the model's limit."""
    if s.crossover_context is None or s.crossover_context > spec.max_context:
        return (
            f"beyond the model's limit of {spec.max_context:,} tokens (it does not occur "
            "within the limit)"
        )
    return f"**{s.crossover_context:,} tokens**"


def _crossover_move(before, after, spec) -> str:
    """'from 114,517 tokens to past the model's limit ...': where a crossover moves."""
    if before.crossover_context is None or before.crossover_context > spec.max_context:
        return (
            "nowhere within the model's limit of "
            f"{spec.max_context:,} tokens: it lay past it already"
        )
    return f"from {before.crossover_context:,} tokens to {_crossover_at(after, spec)}"


# -- grading -----------------------------------------------------------------------------------

_UNITS = {
    "b": 1,
    "byte": 1,
    "bytes": 1,
    "kb": 1e3,
    "mb": 1e6,
    "gb": 1e9,
    "tb": 1e12,
    "kib": KiB,
    "mib": MiB,
    "gib": GiB,
    "tib": 2**40,
}
_NUM = re.compile(r"^\s*([-+]?[0-9][0-9,_]*(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?)\s*([a-z/]*)\s*$", re.I)
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


def parse_answer(text: str, question: Question) -> float:
    """A number from ``text`` in the question's unit. Bytes may carry B, KB, KiB, MB, MiB, GB,
    GiB (a bare number is read in the unit the question asks for); tokens may carry K or M;
    ratios may end in x."""
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
    value = float(m.group(1).replace(",", "").replace("_", ""))
    unit = m.group(2)
    if not math.isfinite(value):
        raise ValueError("Give a finite number.")
    if question.unit == "B":
        if not unit:
            unit = question.ask_unit.lower() or "b"
        if unit not in _UNITS:
            raise ValueError(f"Unknown unit '{unit}': use B, KiB, MiB, GiB (or KB, MB, GB).")
        return value * _UNITS[unit]
    if question.unit == "tokens":
        scale = {"": 1, "k": 1e3, "m": 1e6, "tokens": 1, "token": 1}.get(unit)
        if scale is None:
            raise ValueError(f"Unknown unit '{unit}': give tokens, e.g. 122880 or 122.9K.")
        return value * scale
    if unit and unit not in _PLAIN_UNITS.get(question.unit.lower(), (question.unit.lower(),)):
        raise ValueError(
            f"Unknown unit '{unit}' here: give a plain number"
            + (f" of {question.unit}." if question.unit else ".")
        )
    return value


def answer_label(question: Question, part: int = 1) -> str:
    """The label of a question's answer box: the unit a bare number is read in, and the units
    it may carry, so that what the label says is how the box reads a number."""
    q = question.part(part)
    if q.unit == "B":
        bare = q.ask_unit or "B"
        return (
            f"in {bare}: a bare number is read in {bare}; or add a unit (B, KiB, MiB, GiB, "
            "KB, MB, GB)"
        )
    if q.unit == "tokens":
        return "in tokens (e.g. 122880 or 122.9K)"
    if q.unit == "x":
        return "times (a plain number, or with an x)"
    return f"in {q.unit}" if q.unit else "a plain number"


def grade(question: Question, text: str, tolerance: float = TOLERANCE, part: int = 1) -> Grade:
    """Right within ``tolerance`` (relative) of the value kvcalc computed, or equal to it at the
    precision the answer was typed with (0.08 for 0.078 GiB; at least two decimals or two
    significant digits)? For "how many fit" the whole
    number below is right too. A wrong answer gets the likeliest mistake named."""
    question = question.part(part)
    if question.value is None:
        raise ValueError("this question has no single number to grade")
    try:
        given = parse_answer(text, question)
    except ValueError as exc:
        return Grade(correct=False, given=None, message=str(exc))
    target = question.value
    whole = math.floor(target)
    if question.floor_ok and given.is_integer() and given != target:
        # A count of whole ones is exact: 54 fit when 54.72 do, and 55 do not (the 55th has no
        # blocks), however close 55 is.
        if given == whole:
            return Grade(
                correct=True,
                given=given,
                message=f"Correct: {whole:,} whole ones fit ({_fmt(target, question)}).",
            )
        why = (
            f" A count of whole ones rounds down: {_fmt(target, question)} means {whole:,} "
            f"fit and a {_ordinal(whole + 1)} does not."
            if given == whole + 1
            else _diagnose(text, given, target, question)
        )
        return Grade(
            correct=False,
            given=given,
            message=f"Not quite: you gave {_fmt(given, question)}; {whole:,} whole ones "
            f"fit ({_fmt(target, question)}).{why}",
            slip=why.strip(),
        )
    if abs(given - target) <= tolerance * abs(target) or _same_when_rounded(
        text, given, target, question
    ):
        return Grade(correct=True, given=given, message=f"Correct: {_fmt(target, question)}.")
    why = _diagnose(text, given, target, question)
    return Grade(
        correct=False,
        given=given,
        message=f"Not quite: you gave {_fmt(given, question)}; the answer is "
        f"{_fmt(target, question)}.{why}",
        slip=why.strip(),
    )


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n:,}{suffix}"


def _same_when_rounded(text: str, given: float, target: float, q: Question) -> bool:
    """True when ``target``, in the unit the answer was typed in, rounds to what was typed at
    the typed number of decimals, with at least two significant digits (1 for 1.4 is not)."""
    m = _NUM.match((text or "").strip().lower())
    if not m or "e" in m.group(1):
        return False
    digits = m.group(1).replace(",", "").replace("_", "").lstrip("+-")
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    if decimals < 2 and len(digits.replace(".", "").lstrip("0")) < 2:
        return False  # "1" for 1.4 or "0.1" for 0.078 is not the answer rounded
    scale = given / float(digits) if float(digits) else 1.0  # the typed unit, in the base unit
    return round(target / scale, decimals) == round(given / scale, decimals)


def _diagnose(text: str, given: float, target: float, q: Question) -> str:
    """The common mistake this answer looks like, if any."""
    if not target or not given:
        return ""
    ratio = given / target
    near = lambda r: abs(ratio / r - 1) < TOLERANCE  # noqa: E731
    for factor, why in q.mistakes:
        if factor != 1 and near(factor):
            return f" {why}"
    if q.unit == "B":
        for name, f, power in (
            ("KiB vs KB", KiB / 1e3, "1 KiB = 2^10 = 1,024 B"),
            ("MiB vs MB", MiB / 1e6, "1 MiB = 2^20 = 1,048,576 B"),
            ("GiB vs GB", GiB / 1e9, "1 GiB = 2^30 = 1,073,741,824 B"),
        ):
            if near(f) or near(1 / f):
                return f" Close: check {name} ({power}, not a power of 10)."
        m = _NUM.match((text or "").strip().lower())
        if m and not m.group(2) and q.ask_unit == "GiB" and abs(given / GiB / target - 1) < 0.02:
            return (
                " That looks like the answer in bytes: a bare number here is read in GiB; "
                "add the unit (e.g. '17179869184 B')."
            )
        if not q.kv_hints:
            return ""
        if near(0.5):
            return " Half the answer: did you forget the factor 2 for K and V?"
        if near(8) or near(1 / 8):
            return " Off by 8: bits vs bytes? A BF16 number is 2 bytes, FP8 1 byte."
    if near(2) and q.unit == "B" and q.kv_hints:
        return " Twice the answer: count K and V once each, and check the bytes per number."
    if q.unit == "x" and abs(given * target - 1) < TOLERANCE:
        return " That is the inverse: the question asks how many times smaller (old / new)."
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
