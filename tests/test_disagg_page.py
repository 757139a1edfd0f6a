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
