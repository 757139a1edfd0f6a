"""The guided tour: each stop's prediction against hand arithmetic, and the page under AppTest
(a link opens a stop, guesses are graded with hints, bad links get a note).

Hand facts (Llama 3.1 8B config.json and models.yaml, as in tests/test_sim.py):
- 2 x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B per token in BF16.
- 8,030,261,248 parameters = 16,060,522,496 B in BF16; the untied input embedding is
  128,256 x 4096 x 2 B = 1,050,673,152 B, of which a decode step of one token gathers one row of
  8,192 B.
- H100 SXM: nvidia-smi's 81,559 MiB; 3,350 GB/s; 989.4 dense BF16 TFLOPS.
- vLLM: requested = ceil(memory x 0.92), vLLM 0.33.0's default; pool = requested - weights
  - 2 GiB; blocks = pool //
  (16 tokens x 131,072 B); a request of n tokens takes ceil(n / 16) blocks.
"""

import math

import pytest

from kvcalc import get_gpu, get_model
from kvcalc.quiz import grade
from kvcalc.tour import STOPS, stop_question

W = 16_060_522_496
EMB, ROW = 1_050_673_152, 8192
KV = 131_072
POOL = math.ceil(81_559 * 2**20 * 0.92) - W - 2 * 2**30
BLOCKS = POOL // (16 * KV)
BLOCKS_FP8 = POOL // (16 * KV // 2)
HAND = {
    1: KV,
    2: 8192 * KV,  # exactly 1 GiB
    3: BLOCKS / (8192 // 16),
    4: math.ceil((W - EMB + ROW) / KV),  # the smallest N whose cache read >= the weight read
    5: 989.4e12 / 3350e9,
    6: BLOCKS / math.ceil(768 / 16),
    7: (BLOCKS_FP8 / 512) / (BLOCKS / 512),
}


@pytest.fixture(scope="module")
def llama():
    m = get_model("llama-3.1-8b")
    return m.spec, m.weights(), get_gpu("h100-sxm-80gb")


@pytest.mark.parametrize("n", range(1, 8))
def test_each_stop_asks_a_number_derived_by_hand(llama, n):
    q = stop_question(n, *llama)
    assert q.value == pytest.approx(HAND[n], rel=1e-12)


def test_stops_follow_the_issues_path():
    assert [s.title for s in STOPS] == ["Home", "Cache fill", "Budget", "Decode step time",
                                       "Roofline", "Serving frontier", "Interview check"]
    assert BLOCKS == 28_834 and HAND[3] == pytest.approx(56.32, abs=0.01)


def test_how_many_fit_takes_the_whole_number_below_and_names_slips(llama):
    q = stop_question(3, *llama)
    assert grade(q, "56").correct and grade(q, "56.32").correct
    # Dividing everything vLLM may use by 1 GiB forgets the weights: 78,679,145,186 B / 2^30.
    no_weights = math.ceil(81_559 * 2**20 * 0.92) / 2**30
    g = grade(q, f"{no_weights:.1f}")
    assert not g.correct and "the weights (14.96 GiB) and the reserve come first" in g.message
    g = grade(q, f"{HAND[3] / 2:.1f}")
    assert not g.correct and "Half the answer" in g.message
    assert not grade(q, "55").correct  # only the whole number just below counts


def test_a_stop_that_cannot_be_asked_says_why(llama):
    spec, w, _ = llama
    with pytest.raises(ValueError, match="does not fit on NVIDIA T4"):
        stop_question(3, spec, w, get_gpu("t4"))  # 14.96 GiB of weights on a 15 GiB GPU
    with pytest.raises(ValueError, match="does not fit"):
        stop_question(4, spec, w, get_gpu("t4"))  # and no speed for it either
    with pytest.raises(ValueError, match="tour stop"):
        stop_question(8, *llama)


# -- the page ----------------------------------------------------------------------------------

st_ = pytest.importorskip("streamlit")
from conftest import open_page  # noqa: E402


def tour(**query):
    return open_page("app_pages/tour.py", **query)


def test_a_link_opens_stop_3_with_its_number(llama):
    at = tour(stop="3", shown="true")
    assert not at.exception and not at.error
    assert at.radio(key="stop").value == 3
    assert "How many 8,192-token conversations fit" in at.info[0].value
    body = " ".join(m.value for m in at.markdown)
    assert f"**{HAND[3]:,.2f}**, so 56 whole ones" in body
    assert at.get("page_link")[-1].proto.page.endswith("budget")
    hidden = tour(stop="3")  # the answer stays hidden until revealed
    assert f"{HAND[3]:,.2f}" not in " ".join(m.value for m in hidden.markdown)


def test_guesses_are_graded_with_the_hint():
    at = tour(stop="3")
    at.text_input(key="guess").input("56").run()
    assert at.success and "Correct" in at.success[0].value
    at.text_input(key="guess").input("73.3").run()
    assert not at.success
    assert any("Not quite" in w.value and "come first" in w.value for w in at.warning)


def test_next_stop_hides_the_answer_again():
    at = tour(stop="4", shown="true")
    assert f"{HAND[4]:,} tokens" in " ".join(m.value for m in at.markdown)
    next(b for b in at.button if b.label == "Next stop").click().run()
    assert at.radio(key="stop").value == 5
    assert at.toggle(key="shown").value is False
    assert "ridge point" in at.info[0].value


@pytest.mark.parametrize("bad", ["99", "0", "abc", "<script>x</script>", "3.5"])
def test_a_bad_stop_in_the_link_gets_a_note(bad):
    at = tour(stop=bad, shown="banana")
    assert not at.exception
    assert at.radio(key="stop").value == 1
    notes = " ".join(w.value for w in at.warning)
    assert "which this tour does not have (stops 1 to 7): showing stop 1" in notes
    assert "<script>" not in notes


def test_a_model_that_does_not_fit_gets_a_message_not_a_number():
    at = tour(stop="3", gpu="t4")
    assert not at.exception
    assert any("does not fit on NVIDIA T4" in e.value for e in at.error)
    assert not at.info


@pytest.mark.parametrize("config", ["nemotron-h-56b.json", "gemma-4-e2b-it.json",
                                    "mamba-2.8b-hf.json"])
def test_every_stop_of_a_hard_real_config_asks_or_says_why(config):
    # A hybrid whose parameters kvcalc cannot count, KV-sharing layers, no attention at all:
    # each stop is a question with a finite number, or a ValueError that says what to change.
    import json

    from conftest import ROOT

    from kvcalc import spec_from_config, weights
    from kvcalc.units import GiB
    from kvcalc.weight_bytes import weights_given

    spec = spec_from_config(json.loads((ROOT / "tests" / "data" / "configs" / config).read_text()))
    w = weights_given(16 * GiB) if spec.params is None else weights(spec)
    for n in range(1, 8):
        try:
            q = stop_question(n, spec, w, get_gpu("h100-sxm-80gb"))
        except ValueError as exc:
            assert str(exc)
            continue
        assert q.value is not None and math.isfinite(q.value), (n, q.value)
