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


def test_five_interview_questions_with_computed_numbers():
    qs = interview_questions()
    assert [q.level for q in qs] == ["core", "core", "mid", "mid", "senior"]
    per_token = next(q for q in qs if q.qid == "per-token")
    # Chapter: 2 x 40 x 8 x 128 x 2 = 163,840 B = 160 KiB; 8,192 tokens = 1.25 GiB.
    assert per_token.value == 163_840
    assert "160 KiB" in per_token.answer and "1.25 GiB" in per_token.answer
    fp8 = next(q for q in qs if q.qid == "fp8")
    # twice the BF16 concurrency of 56.3 on an H100 (gpu_memory_utilization 0.92, vLLM 0.33.0's
    # default): 28,834 blocks / 512 = 56.32; FP8 57,668 / 512 = 112.63
    assert "112.6" in fp8.answer
    assert all(len(q.answer) > 100 for q in qs)


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
    assert "KiB vs KB" in grade(q, "160 KB").message
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
    assert "in bytes" in grade(g, str(16 * GiB)).message  # 17179869184 typed on a GiB question
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
