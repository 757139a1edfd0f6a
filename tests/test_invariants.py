"""Issue 23 item 2: invariants over a matrix of models x pages, so no fix can come undone.

The matrix covers dense (Llama 3.1 8B, 70B), MoE (gpt-oss-20b), MLA (DeepSeek-V3), sliding
(Gemma 3 27B), hybrid (Qwen3-Next), tiny (SmolLM2-135M) and FP32 (GPT-2) models, at TP 1 and
at the TP each splits over (8, or 4 for GPT-2's 12 heads; SmolLM2's 3 K/V heads split over
no TP the sidebar offers).

Expected bytes are worked by hand from each config's fields (layers x K/V heads per GPU x
head_dim x 2 for K and V x 2 B in BF16), never by calling the code under test."""

import re

import pytest
from conftest import open_page

from webui import pages

pytestmark = pytest.mark.slow

# (model, tp): hand-derived BF16 KV bytes per token, per GPU (one token in every K/V layer).
PER_TOKEN = {
    ("llama-3.1-8b", 1): 32 * 8 * 128 * 2 * 2,  # 131,072
    ("llama-3.1-8b", 8): 32 * 1 * 128 * 2 * 2,  # 8 K/V heads / 8 GPUs
    ("llama-3.1-70b", 1): 80 * 8 * 128 * 2 * 2,
    ("llama-3.1-70b", 8): 80 * 1 * 128 * 2 * 2,  # 40,960
    ("deepseek-v3", 1): 61 * (512 + 64) * 2,  # MLA: one latent + RoPE key per layer, 70,272
    ("deepseek-v3", 8): 61 * (512 + 64) * 2,  # the latent is replicated on every GPU
    ("gemma-3-27b", 1): 62 * 16 * 128 * 2 * 2,  # nominal: every layer at its first token
    ("gemma-3-27b", 8): 62 * 2 * 128 * 2 * 2,
    ("gpt-oss-20b", 1): 24 * 8 * 64 * 2 * 2,
    ("gpt-oss-20b", 8): 24 * 1 * 64 * 2 * 2,
    ("qwen3-next-80b-a3b", 1): 12 * 2 * 256 * 2 * 2,  # 12 of 48 layers attend, 2 K/V heads
    ("qwen3-next-80b-a3b", 8): 12 * 1 * 256 * 2 * 2,  # 2 heads < 8 GPUs: 1 replicated each
    ("gpt2", 1): 12 * 12 * 64 * 2 * 2,  # served in 16 bits: the KV cache is BF16
    ("gpt2", 4): 12 * 3 * 64 * 2 * 2,
    ("smollm2-135m", 1): 30 * 3 * 64 * 2 * 2,
}
LIMIT = {
    "llama-3.1-8b": 131_072,
    "llama-3.1-70b": 131_072,
    "deepseek-v3": 163_840,
    "gemma-3-27b": 131_072,
    "gpt-oss-20b": 131_072,
    "qwen3-next-80b-a3b": 262_144,
    "gpt2": 1024,
    "smollm2-135m": 8192,
}  # max_position_embeddings / n_positions
# Every page that draws the sidebar's model (the registry's, so a new page joins the matrix):
# not the pages that run their own model, nor the live class, which draws none.
PAGES = [p.name for p in pages.PAGES if not p.own_model and p.name != "live_class"]
# A DeepSeek-V3 in FP8 needs 8 GPUs of 80 GB: at TP 1 its pages say it does not fit.
GPU = {"deepseek-v3": "h200-141gb"}


def text(element) -> str:
    return re.sub(r"\\(.)", r"\1", element.value)


def kib(value: str) -> float:
    m = re.fullmatch(r"([\d.,]+) (B|KiB|MiB)", value)
    assert m, value
    return float(m.group(1).replace(",", "")) * {"B": 1, "KiB": 1024, "MiB": 2**20}[m.group(2)]


def link(model, tp, **more):
    q = dict(model=model, tp=str(tp), **more)
    if model in GPU:
        q["gpu"] = GPU[model]
    return q


@pytest.mark.parametrize("model, tp", list(PER_TOKEN))
@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_every_model(page, model, tp):
    """No exception and no generic error box, for any model of the matrix, at either TP."""
    at = open_page(pages.path(page), **link(model, tp))
    assert not at.exception, [e.value for e in at.exception]
    for e in at.error:
        assert "Traceback" not in e.value and not re.search(r"\w+Error:", e.value), e.value


@pytest.mark.parametrize("model, tp", list(PER_TOKEN))
def test_kv_per_token_is_one_value_and_per_gpu(model, tp):
    """Home and Budget state the same per-token bytes, and it is per GPU under TP."""
    want = PER_TOKEN[(model, tp)]
    home = open_page(pages.path("home"), **link(model, tp))
    budget = open_page(pages.path("budget"), **link(model, tp))
    shown = {}
    for name, at in (("home", home), ("budget", budget)):
        for m in at.metric:
            if m.label in ("KV cache per token", "KV per token"):
                shown[name] = kib(m.value)
    # Budget states it whenever the weights fit (a model that does not fit stops the page
    # before its figures); Home always.
    assert "home" in shown, shown
    assert all(v == pytest.approx(want, rel=0.005) for v in shown.values()), (shown, want)
    assert len(set(shown.values())) == 1, shown


SPEED_PAGES = {
    "step_time": ("s_ctx", ["Step time, ideal bound", "Tokens/s"]),
    "lab": ("l_ctx", ["Step time", "Tokens/s"]),
}


@pytest.mark.parametrize("model", sorted(LIMIT))
@pytest.mark.parametrize("page", sorted(SPEED_PAGES))
def test_no_speed_past_the_models_limit(page, model):
    key, labels = SPEED_PAGES[page]
    tp = max(t for m, t in PER_TOKEN if m == model)
    at = open_page(pages.path(page), **link(model, tp, **{key: str(LIMIT[model] + 1)}))
    assert not at.exception
    for m in at.metric:
        if any(m.label.startswith(lab) for lab in labels):
            assert m.value in ("past the limit", "does not fit"), (m.label, m.value)
