"""Interview answers, the practice generator and the grader."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcalc.core.units import GiB
from kvcalc.teach.quiz import (
    Question,
    answer_label,
    grade,
    interview_questions,
    parse_answer,
    practice_questions,
)


def test_six_interview_questions_with_computed_numbers():
    qs = interview_questions()
    assert [q.level for q in qs] == ["core", "core", "mid", "mid", "senior", "senior"]
    per_token = next(q for q in qs if q.qid == "per-token")
    # Chapter: 2 x 40 x 8 x 128 x 2 = 163,840 B = 160 KiB; 8,192 tokens = 1.25 GiB.
    assert per_token.value == 163_840
    assert "160 KiB" in per_token.answer and "1.25 GiB" in per_token.answer
    fp8 = next(q for q in qs if q.qid == "fp8")
    # twice the BF16 concurrency of 56.3 on an H100 (gpu_memory_utilization 0.92, vLLM 0.33.0's
    # default): 28,834 blocks / 512 = 56.32; FP8 57,668 / 512 = 112.63
    assert "112.6" in fp8.answer
    assert all(len(q.answer) > 100 for q in qs)


def test_the_disaggregated_question_is_llama_70b_cache_over_400_gbps():
    # worked by hand: Llama 3.1 70B keeps 2 x 80 layers x 8 KV heads x 128 x 2 B = 327,680 B a
    # token; 8,192 tokens = 2,684,354,560 B = 2.50 GiB; 400 Gb/s = 50 GB/s: 53.69 ms
    q = next(q for q in interview_questions() if q.qid == "disagg")
    assert q.value == 8192 * 327_680 == 2_684_354_560
    assert q.value2 == pytest.approx(2_684_354_560 / 50e9 * 1e3)
    assert "**2.50 GiB**" in q.answer and "**53.7 ms**" in q.answer
    assert "13.4 ms" in q.answer  # a quarter each over 4 ports
    # as RDMA moves it (Mooncake's fit): 0.35 ms + 53.69 ms / 0.72 = 74.9 ms
    assert "72% of line rate: about 75 ms" in q.answer
    assert grade(q, "2.5 GiB").correct and grade(q, "2684354560").correct
    assert grade(q.part(2), "53.7").correct and grade(q.part(2), "54 ms").correct
    assert not grade(q.part(2), "5.4").correct  # bits for bytes, 10x off
    assert not grade(q, "1.25 GiB").correct  # K or V alone


def test_practice_is_seeded():
    a = practice_questions(7, 10)
    b = practice_questions(7, 10)
    c = practice_questions(8, 10)
    assert a == b and a != c
    assert {q.unit for q in a} >= {"B", "sequences", "tokens", "x"}
    for q in a:
        assert q.value is not None and q.value > 0 and q.solution


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6))
def test_every_generated_answer_grades_correct(seed):
    for q in practice_questions(seed, 10):
        scale = GiB if q.ask_unit == "GiB" else 1  # a bare number is read in the asked unit
        assert grade(q, f"{q.value / scale:.6g}").correct, q
        # The same value with its unit typed: bytes as "N B", tokens in thousands as "N.NK",
        # ratios with an x, counts with "sequences".
        typed = {
            "B": f"{q.value:.6g} B",
            "tokens": f"{q.value / 1000:.6g}K",
            "x": f"{q.value:.6g}x",
            "sequences": f"{q.value:.6g} sequences",
        }[q.unit]
        assert grade(q, typed).correct, (q, typed)
        assert not grade(q, f"{q.value * 1.5 / scale:.6g}").correct


def _bytes_q(value, ask="B"):
    return Question(
        qid="t", level="core", prompt="?", answer=f"{value} B", value=value, unit="B", ask_unit=ask
    )


@pytest.mark.parametrize(
    "text,expected",
    [
        ("163840", 163_840),
        ("163,840", 163_840),
        ("160 KiB", 163_840),
        ("160kib", 163_840),
        ("163.84 KB", 163_840),
        ("0.15625 MiB", 163_840),
        ("1.6384e5", 163_840),
    ],
)
def test_parse_bytes(text, expected):
    assert parse_answer(text, _bytes_q(163_840)) == pytest.approx(expected)


def test_bare_number_read_in_the_asked_unit():
    q = _bytes_q(1.25 * GiB, ask="GiB")
    assert grade(q, "1.25").correct
    assert grade(q, "1.25 GiB").correct
    assert not grade(q, "1.25 GB").correct


def test_grader_hints():
    q = _bytes_q(163_840)
    assert "factor 2" in grade(q, "81920").message
    assert "KiB vs KB" in grade(q, "160 KB").message  # a note on a right value (F7)
    assert "not a number" in grade(q, "lots").message
    assert "Type a number" in grade(q, "  ").message
    assert "Unknown unit" in grade(q, "5 parsecs").message


def test_tokens_and_ratios():
    tq = Question(
        qid="t",
        level="mid",
        prompt="?",
        answer="122,533 tokens",
        value=122_533,
        unit="tokens",
        ask_unit="tokens",
    )
    assert grade(tq, "122.5K").correct and grade(tq, "122533 tokens").correct
    xq = Question(qid="x", level="core", prompt="?", answer="4x", value=4, unit="x", ask_unit="x")
    assert grade(xq, "4x").correct and grade(xq, "4").correct and not grade(xq, "8x").correct


def test_answers_rounded_as_shown_and_the_floor_are_right():
    q = _bytes_q(0.078 * GiB, ask="GiB")
    assert grade(q, "0.08").correct and grade(q, "0.078 GiB").correct
    assert not grade(q, "0.1").correct  # one significant digit is not an answer
    fit = Question(
        qid="c",
        level="mid",
        prompt="?",
        answer="9.49 sequences",
        value=9.49,
        unit="sequences",
        ask_unit="sequences",
        floor_ok=True,
    )
    assert grade(fit, "9").correct and "9 whole ones fit" in grade(fit, "9").message
    assert grade(fit, "9.49").correct and not grade(fit, "10").correct


def test_each_common_mistake_is_named():
    q = _bytes_q(163_840)
    assert "2^10 = 1,024" in grade(q, "160 KB").message
    g = _bytes_q(16 * GiB, ask="GiB")
    assert "2^30" in grade(g, "16 GB").message and "1,024" not in grade(g, "16 GB").message
    # 17,179,869,184 B typed bare on a GiB question: read in bytes, right, and said so (F7)
    bytes_typed = grade(g, str(16 * GiB))
    assert bytes_typed.correct and "Read in bytes" in bytes_typed.message
    assert "bits vs bytes" in grade(q, str(163_840 * 8)).message
    xq = Question(qid="x", level="core", prompt="?", answer="4x", value=4, unit="x", ask_unit="x")
    assert "inverse" in grade(xq, "0.25").message
    assert "factor 2 for K and V" in grade(q, str(163_840 // 2)).message


def test_config_snippet_questions_are_read_by_hand_and_name_the_query_head_mistake():
    # Derived from the snippet alone, as a student would: head_dim = hidden / query heads, and
    # bytes per number from torch_dtype; K and V are stored per KV head.
    import json

    width = {"bfloat16": 2, "float16": 2, "float32": 4}
    seen = 0
    for seed in range(40):
        for q in practice_questions(seed, 12):
            if not q.config:
                continue
            seen += 1
            cfg = json.loads(q.config)
            assert "head_dim" not in cfg
            head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
            expected = (
                2
                * cfg["num_hidden_layers"]
                * cfg["num_key_value_heads"]
                * head_dim
                * width[cfg["torch_dtype"]]
            )
            assert q.value == expected
            assert cfg["num_attention_heads"] > cfg["num_key_value_heads"]
            assert grade(q, f"{expected} B").correct
            wrong = expected * cfg["num_attention_heads"] // cfg["num_key_value_heads"]
            msg = grade(q, f"{wrong} B").message
            assert "query heads" in msg and "num_key_value_heads" in msg, msg
    assert seen >= 40


def test_interview_q2_grades_both_numbers():
    # 2 x 40 x 8 x 128 x 2 B = 163,840 B per token; x 8,192 = 1.25 GiB.
    q = next(q for q in interview_questions() if q.qid == "per-token")
    assert grade(q, "160 KiB").correct and not grade(q, "1.25 GiB").correct
    assert grade(q, "1.25 GiB", part=2).correct and grade(q, "1.25", part=2).correct


def test_practice_has_no_false_premise_and_good_grammar():
    for seed in range(300):
        for q in practice_questions(seed, 10):
            if q.unit == "x":
                assert q.value > 1, q.prompt  # every "how many times smaller" really shrinks
            assert " 1 KV heads" not in q.prompt and " 1 sequences" not in q.prompt


def test_offload_answer_frames_the_short_recompute():
    # The 32-token recompute is a marginal cost inside a running batch; alone on an idle H100 it
    # takes at least one read of Llama 3.1 8B's weights: 16.06 GB less the untied input table
    # (1.05 GB; the 32 tokens gather 32 rows of 8,192 B) = 15.01 GB / 3,350 GB/s = 4.48 ms.
    q = next(q for q in interview_questions() if q.qid == "offload")
    assert "inside a batch that is running anyway" in q.answer
    assert "at least 4.48 ms" in q.answer


def test_a_whole_count_is_exact_and_rounding_up_is_named():
    # Issue 23 [6]: 54.72 conversations fit, so 54 whole ones; 55 is within 2% but does not fit.
    fit = Question(
        qid="c",
        level="mid",
        prompt="?",
        answer="54.72",
        value=54.72,
        unit="sequences",
        ask_unit="sequences",
        floor_ok=True,
    )
    assert grade(fit, "54").correct and grade(fit, "54.72").correct and grade(fit, "54.7").correct
    assert grade(fit, "54.72x").correct  # as vLLM logs it
    g = grade(fit, "55")
    assert not g.correct and "rounds down" in g.message and "55th does not" in g.message
    assert not grade(fit, "55.0").correct and not grade(fit, "53").correct


def test_answer_labels_say_how_a_bare_number_is_read():
    # Issue 23 [1]: the label names the unit a bare number is read in.
    q = _bytes_q(131_072)
    assert "a bare number is read in B" in answer_label(q) and grade(q, "131072").correct
    g = _bytes_q(GiB, ask="GiB")
    assert "a bare number is read in GiB" in answer_label(g) and grade(g, "1").correct
    assert grade(g, "1073741824 B").correct


def test_rates_and_intensities_take_their_unit():
    q = Question(
        qid="r",
        level="mid",
        prompt="?",
        answer="206 tokens/s",
        value=206.0,
        unit="tokens/s",
        ask_unit="tokens/s",
    )
    assert grade(q, "206 tokens/s").correct and grade(q, "206").correct
    f = Question(
        qid="f",
        level="mid",
        prompt="?",
        answer="295 FLOP/B",
        value=295.3,
        unit="FLOP/B",
        ask_unit="FLOP/B",
    )
    assert grade(f, "295 FLOP/B").correct and "Unknown unit" in grade(f, "295 GB").message


def test_interview_never_quotes_a_crossover_past_the_limit():
    # Issue 23 [27]: with an FP8 cache Llama 3.1 8B's crossover (2 x 114,517 tokens, about
    # 229,000) lies past its 131,072-token limit; the answer says it does not occur within it.
    fp8 = next(q for q in interview_questions() if q.qid == "fp8")
    assert "229," not in fp8.answer
    assert "from 114,517 tokens to beyond the model's limit of 131,072 tokens" in fp8.answer
    assert "does not occur within the limit" in fp8.answer


def test_practice_grammar_one_sequence_and_an_80():
    # Issue 23 [28]: "does 1 sequence", "an 80 GiB GPU".
    prompts = [q.prompt for seed in range(200) for q in practice_questions(seed, 12)]
    assert not any("do 1 sequence " in p for p in prompts)
    assert any("does 1 sequence " in p for p in prompts)
    assert not any(" a 80 GiB" in p or " a 8" in p for p in prompts)
    assert any(" an 80 GiB GPU" in p for p in prompts)


# -- one grading rule (issue 37 item 4, teaching review 4's F7) --------------------------------
# Interview Q2's model, by hand: 2 (K and V) x 40 layers x 8 KV heads x 128 x 2 B = 163,840 B a
# token; x 8,192 tokens = 1,342,177,280 B = 1.25 GiB (1 GiB = 2^30 B).
Q2_TOKEN = 2 * 40 * 8 * 128 * 2
Q2_SEQ = Q2_TOKEN * 8192


def _q2():
    q = next(q for q in interview_questions() if q.qid == "per-token")
    assert (q.value, q.value2) == (Q2_TOKEN, Q2_SEQ) == (163_840, 1_342_177_280)
    return q


def test_f7_the_value_is_graded_whatever_unit_it_is_typed_in():
    q = _q2()
    # "160 KB" and "0.16 MB" are both 160,000 B: one grade, by the value (2.3% off, inside 3%)
    kb, mb = grade(q, "160 KB"), grade(q, "0.16 MB")
    assert kb.given == mb.given == 160_000
    assert kb.correct and mb.correct
    # ... and the unit slip is named as a note though the value passes
    assert "KiB vs KB" in kb.message and kb.note and "1,024" in kb.note
    # every value typed in every unit grades as its bytes do
    units = {"B": 1, "KB": 1e3, "KiB": 2**10, "MB": 1e6, "MiB": 2**20}
    for k in range(-61, 62, 4):  # 0.939x to 1.061x the answer, in steps of 0.4% (never at 3%)
        value = Q2_TOKEN * (1 + k / 1000)
        expected = abs(k) <= 30  # the band: 3% of the value
        for name, size in units.items():
            assert grade(q, f"{value / size:.10g} {name}").correct == expected, (k, name)


def test_f7_the_gib_and_gb_slip_is_still_wrong_and_named():
    q = _q2()
    g = grade(q, "1.25 GB", part=2)  # 1.25 x 10^9 B, 6.9% under 1,342,177,280 B
    assert not g.correct and "GiB vs GB" in g.slip
    assert grade(q, "1.34 GB", part=2).correct  # 1,342,177,280 B = 1.342 GB
    assert "GiB vs GB" in grade(q, "1.342", part=2).slip  # the GB figure typed as GiB


def test_f7_a_large_bare_number_in_a_gib_box_is_bytes_and_the_reply_says_so():
    q = _q2()
    assert "a bare number is read in GiB" in answer_label(q, 2)
    for text in ("1342177280", "1,342,177,280", "1 342 177 280"):
        g = grade(q, text, part=2)
        assert g.correct and g.given == 1_342_177_280, (text, g.message)
        assert "Read in bytes" in g.message and "1.25 GiB" in g.message
    assert grade(q, "1.25", part=2).correct and grade(q, "1.25 GiB", part=2).correct
    # half the bytes typed bare: read in bytes too, and the factor 2 named
    half = grade(q, str(Q2_SEQ // 2), part=2)
    assert not half.correct and "factor 2" in half.slip and "Read in bytes" in half.message


def test_f7_the_bytes_hint_quotes_the_students_own_number():
    # 0.5 MiB = 524,288 B asked in GiB; its bytes typed bare are under 10^6, so read in GiB
    q = _bytes_q(0.5 * 2**20, ask="GiB")
    g = grade(q, "524288")
    assert not g.correct and "'524288 B'" in g.message and "17179869184" not in g.message
    assert grade(q, "524288 B").correct


@pytest.mark.parametrize(
    "text", ["163 840", "163,840", "163\u2009840", "163\u202f840", "163\u00a0840", "163_840"]
)
def test_f7_digit_groups_are_read(text):
    g = grade(_q2(), text)
    assert g.correct and g.given == 163_840, g.message


def test_f7_no_answer_is_read_from_a_bad_group():
    assert "not a number" in grade(_q2(), "16 3840").message


# -- one convention for a recompute on the Learn path (F17) ------------------------------------


def test_f17_q5_recompute_is_the_ideal_bound_at_the_full_peak():
    # Llama 3.1 8B's prefill of 8,192 tokens at MFU 1 on an H100 (989.4 TFLOPS dense BF16):
    # 2 x (8,030,261,248 parameters - 128,256 x 4,096 of the untied input table, which a token
    # gathers, not multiplies) x 8,192 tokens, plus causal attention 4 x 32 layers x 32 query
    # heads x 128 x (1 + ... + 8,192) = 1.4056 x 10^14 FLOPs / 989.4 x 10^12 FLOP/s = 142.06 ms
    n = 8192
    flops = 2 * (8_030_261_248 - 128_256 * 4096) * n + 4 * 32 * 32 * 128 * n * (n + 1) // 2
    ms = flops / 989.4e12 * 1e3
    assert f"{ms:.2f}" == "142.06"
    q = next(q for q in interview_questions() if q.qid == "offload")
    assert f"**{ms:.2f} ms** to recompute" in q.answer
    assert "ideal bound" in q.answer and "half its peak" not in q.answer
    # the 32-token recompute inside a running batch, also at the full peak:
    # (2 x 7,504,924,672 x 32 + 4 x 32 x 32 x 128 x 528) / 989.4e12 = 485.7 us
    short = (
        2 * (8_030_261_248 - 128_256 * 4096) * 32 + 4 * 32 * 32 * 128 * 32 * 33 // 2
    ) / 989.4e12
    assert f"{short * 1e6:.1f} µs" in q.answer


# -- choices of similar length (F18) -----------------------------------------------------------


def test_f18_the_right_choice_is_not_told_by_its_length():
    from kvcalc.teach.choices import CHOICES

    longest = 0
    for qid, options in CHOICES.items():
        right = [len(c.text) for c in options if c.correct]
        wrong = [len(c.text) for c in options if not c.correct]
        assert len(right) == 1 and len(wrong) == 3, qid
        # within 15% of the longest and of the shortest wrong statement
        assert right[0] <= 1.15 * max(wrong), (qid, right, wrong)
        assert right[0] >= 0.85 * min(wrong), (qid, right, wrong)
        longest += right[0] > max(wrong)
    # not always the longest: at most half the questions
    assert longest <= len(CHOICES) // 2, longest
