"""One move out of "does not fit" (teaching review 4, F2 and F22): kvcalc.engines.fit finds the
smallest setup of the registry that holds a model with room for one sequence, and the button of
webui/fit_fix.py switches the sidebar to it.

The expected setups are worked by hand from the GPUs' memory as the driver reports it, vLLM's
pool rule (requested = ceil(total x 0.92); pool = requested - weights per GPU - 2 GiB reserve)
and the weight bytes of the registry (an input here, counted in tests/test_registry.py)."""

import math

import pytest

from kvcalc import GiB, get_gpu, get_model, registry
from kvcalc.cache.deployment import Deployment
from kvcalc.engines.fit import fitting_setup

H100, A100, H200 = (get_gpu(k) for k in ("h100-sxm-80gb", "a100-80gb", "h200-141gb"))
RESERVE = 2 * GiB


def _dep(m, weights_bytes: int) -> Deployment:
    """The model's weights (by hand) on one H100, the pool settings' defaults."""
    return Deployment(spec=m.spec, gpu=H100, weights_bytes=weights_bytes)


def _pool(total: int, weights: int, tp: int) -> int:
    return math.ceil(total * 0.92) - math.ceil(weights / tp) - RESERVE


def test_deepseek_v3_moves_from_one_h100_to_eight_h200():
    m = get_model("deepseek-v3")
    w = m.weights().bytes
    assert w == 671_026_419_200  # 624.94 GiB of FP8 weights
    # By hand: 8 x H100 leaves 78,679,145,186 - 83,878,302,400 - 2 GiB < 0, and so does the
    # A100 80GB (80 GiB, the next larger GPU); 4 x H200 holds a quarter, 167.76 GB, too much.
    assert _pool(H100.memory_bytes, w, 8) < 0 and _pool(A100.memory_bytes, w, 8) < 0
    assert _pool(H200.memory_bytes, w, 4) < 0
    pool = _pool(H200.memory_bytes, w, 8)
    assert pool == 138_694_434_489 - 83_878_302_400 - 2_147_483_648 == 52_668_648_441
    s = fitting_setup(_dep(m, w), registry().gpus.values(), 8192)
    assert s is not None and (s.gpu.key, s.tp) == ("h200-141gb", 8)
    assert s.budget.kv_pool_bytes == pool
    assert s.label == "8 x NVIDIA H200 SXM 141GB"


def test_a_model_that_needs_two_of_the_same_gpu_keeps_the_gpu():
    # Llama 3.1 70B (141,107,412,992 B of BF16 weights): one H100 is short, two hold half each
    # and leave 5,977,955,042 B, room for one 8,192-token sequence of 4 of its 8 KV heads:
    # 2 x 80 layers x 4 x 128 x 2 B x 8,192 = 1,342,177,280 B.
    m = get_model("llama-3.1-70b")
    w = m.weights().bytes
    assert _pool(H100.memory_bytes, w, 1) < 0
    assert _pool(H100.memory_bytes, w, 2) == 5_977_955_042 > 2 * 80 * 4 * 128 * 2 * 8192
    s = fitting_setup(_dep(m, w), registry().gpus.values(), 8192)
    assert s is not None and (s.gpu.key, s.tp) == ("h100-sxm-80gb", 2)


def test_a_model_that_fits_is_left_where_it_is_and_none_when_nothing_fits():
    m = get_model("llama-3.1-8b")
    s = fitting_setup(_dep(m, m.weights().bytes), registry().gpus.values(), 8192)
    assert s is not None and (s.gpu.key, s.tp) == ("h100-sxm-80gb", 1)
    # 100 TB of weights: no GPU of the registry holds an eighth of it.
    assert fitting_setup(_dep(m, 10**14), registry().gpus.values(), 8192) is None


def test_the_button_switches_the_sidebar_to_the_fitting_setup():
    pytest.importorskip("streamlit")
    from conftest import open_page

    at = open_page("app_pages/home.py")
    at.sidebar.selectbox(key="model").set_value("deepseek-v3").run()
    values = {m.label: m.value for m in at.metric}
    assert values["KV cache per token"] == "68.62 KiB"  # 61 x 576 x 2 B = 70,272 B
    assert values["8,192-token conversations on NVIDIA H100 SXM5 80GB"] == "does not fit"
    assert any("weights alone take 624.94 GiB per GPU" in w.value for w in at.warning)
    [button] = [b for b in at.button if b.key == "home_fit"]
    assert button.label == "Switch to 8 x NVIDIA H200 SXM 141GB (tensor parallel 8)"
    button.click().run()
    assert not at.exception
    assert (at.sidebar.selectbox(key="gpu").value, at.sidebar.selectbox(key="tp").value) == (
        "h200-141gb",
        8,
    )
    assert at.sidebar.selectbox(key="pp").value == 1
    # 52,668,648,441 B // (16 tokens x 576 x 2 B) // 61 layers = 46,843 blocks; 8,192 tokens
    # take 512 blocks: 46,843 / 512 = 91.49 conversations.
    assert 52_668_648_441 // (16 * 576 * 2) // 61 == 46_843
    values = {m.label: m.value for m in at.metric}
    assert values["8,192-token conversations on 8 x NVIDIA H200 SXM 141GB"] == "91.5"
    assert not [w for w in at.warning if "does not fit" in w.value.lower()]
