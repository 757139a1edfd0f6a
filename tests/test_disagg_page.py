"""The Engineer page that follows one request's cache from the prefill GPUs to the decode GPUs
(issue 43, item 6: app_pages/disagg.py). Expected figures worked by hand:

- Llama 3.1 8B (the sidebar's default): 32 layers x 2 x 8 KV heads x 128 x 2 B = 131,072 B a
  token, so 8,192 tokens = 1,073,741,824 B = 1.00 GiB; at 400 Gb/s = 50 GB/s: 21.47 ms.
- Llama 3.1 70B: 327,680 B a token; 8,192 tokens over 4 decode GPUs = 640.00 MiB each, 2.50 GiB
  in all, 13.42 ms at 50 GB/s.
- The prefill (the ideal bound): at least the linear layers' 2 x active parameters x tokens at
  the H100's 989.4 TFLOPS.
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("streamlit")


def _headline(at) -> str:
    return next(m.value for m in at.markdown if "The cache of a prompt" in m.value)


def test_the_default_request_its_bytes_its_time_and_its_share_of_the_prefill():
    from conftest import open_page

    from kvcalc import registry

    at = open_page("app_pages/disagg.py")
    assert not at.exception and not at.error
    h = _headline(at)
    assert "**8,192 tokens**" in h and "**1.00 GiB** for the decode GPU" in h
    assert "**21.47 ms**" in h and "50 GB/s a GPU" in h
    prefill_ms = float(re.search(r"prefill's own ([\d.,]+) ms", h).group(1).replace(",", ""))
    linear_ms = 2 * registry().model("llama-3.1-8b").spec.active_params * 8192 / 989.4e12 * 1e3
    assert linear_ms <= prefill_ms <= 1.2 * linear_ms
    share = int(re.search(r"\*\*(\d+)%\*\*", h).group(1))
    assert share == round(100 * 21.474836 / prefill_ms)
    # one figure: the three lanes, the move's bar from the prefill's end for 21.47 ms
    fig = at.get("plotly_chart")[0].proto.spec
    assert '"the link"' in fig and "21.47" in fig


def test_four_decode_gpus_of_llama_70b_each_receive_a_quarter():
    from conftest import open_page

    at = open_page("app_pages/disagg.py", model="Llama 3.1 70B", dg_ptp="4", dg_dtp="4")
    assert not at.exception and not at.error
    h = _headline(at)
    assert "**640.00 MiB** for each of the 4 decode GPUs (2.50 GiB in all)" in h
    assert "**13.42 ms**" in h


def test_a_prompt_past_the_model_limit_is_refused_in_a_sentence():
    from conftest import open_page

    at = open_page("app_pages/disagg.py", dg_prompt="1000000")
    assert not at.exception
    assert any("at most" in e.value and "shorten the prompt" in e.value for e in at.error)


def test_the_next_turn_reloads_from_cpu_memory_faster_than_the_prefill():
    # Llama 3.1 8B, 8,192 tokens: 1 GiB over PCIe 5.0 x16 (63 GB/s one way, models.yaml) =
    # 1,073,741,824 / 63e9 = 17.04 ms, against the prefill's ideal 142.06 ms: 8x
    from conftest import open_page

    at = open_page("app_pages/disagg.py")
    text = next(m.value for m in at.markdown if m.value.startswith("**Next turn.**"))
    assert "**17.04 ms**" in text and "142.06 ms" in text and "8x faster" in text
    fig = at.get("plotly_chart")[0].proto.spec
    assert "next turn: from CPU" in fig and "17.04" in fig


def test_a_fleet_plan_runs_on_submit_and_says_how_well_it_matches_mooncake():
    from conftest import open_page

    from kvcalc.perf.sim.published import MOONCAKE_VLLM_1P1D, mooncake_check

    at = open_page("app_pages/disagg.py")
    assert not any(m.label == "Aggregated" for m in at.metric)  # nothing simulated yet
    assert any("Press the button" in c.value for c in at.caption)
    next(b for b in at.button if "fewest GPUs" in b.label).click().run(timeout=120)
    assert not at.exception and not at.error
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Aggregated"].endswith("GPUs") and metrics["Disaggregated"].endswith("GPUs")
    verdict = next(m.value for m in at.markdown if "need" in m.value and "GPUs" in m.value)
    assert "p90 TTFT" in verdict and "p90 TPOT" in verdict
    # the published check: Mooncake's nine TTFTs, the median and the worst error rendered from
    # the simulated rows against the published values
    how = next(m.value for m in at.markdown if "Against Mooncake" in m.value)
    rows = mooncake_check()
    errs = sorted(
        abs(r.simulated_ttft_s * 1e3 / t - 1) for r, (_, t, _) in zip(rows, MOONCAKE_VLLM_1P1D)
    )
    assert f"{len(MOONCAKE_VLLM_1P1D)} published prompt lengths" in how
    # the plan's profile and the check's own, each named (the check is always vLLM's)
    assert "under the vLLM 0.18.0 profile" in how and "under the vLLM 0.12.0 profile" in how
    assert f"within {errs[4]:.0%} on half" in how
    worst = min(r.error for r in rows)  # the simulator runs low on long prompts
    assert f"{worst:+.0%} at worst" in how and worst < 0


def test_a_plan_too_heavy_for_the_page_is_refused_in_a_sentence():
    from conftest import open_page

    # 200 requests of 120,000 prompt tokens and 8,000 output tokens: the pool holds a few at a
    # time, so a layout would run hundreds of thousands of steps
    at = open_page("app_pages/disagg.py", dg_prompt="120000")
    next(n for n in at.number_input if n.label == "Output tokens").set_value(8_000)
    next(b for b in at.button if "fewest GPUs" in b.label).click().run(timeout=120)
    assert not at.exception
    assert any("engine steps" in e.value and "shorten" in e.value for e in at.error)


def test_a_plan_that_runs_past_its_step_budget_stops_in_a_sentence():
    # 32,000-token prompts, 2,000-token answers at 2 requests/s: one layout is cheap enough to
    # start, but the search's layouts together pass the page's budget of engine steps
    from conftest import open_page

    at = open_page("app_pages/disagg.py", dg_prompt="32000")
    next(n for n in at.number_input if n.label == "Output tokens").set_value(2000)
    next(n for n in at.number_input if n.label == "Requests per second").set_value(2.0)
    next(b for b in at.button if "fewest GPUs" in b.label).click().run(timeout=120)
    assert not at.exception
    assert any("400,000 engine steps" in e.value and "lower the rate" in e.value for e in at.error)
