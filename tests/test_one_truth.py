"""Issue 23: one truth per quantity. What the pages may state about a setup comes from one core
rule, checked on the pages that state it.

Oracles: the model's config (max_position_embeddings), first-principles byte counts written
out in each test, and gpt-oss-20b's published shape (32 experts, 4 routed per token)."""

import json
import re

import pytest
from conftest import metric, open_page, tables

from kvcalc import registry
from kvcalc.cache.deployment import Deployment
from kvcalc.perf.sweeps import no_speed_reason


def text(element) -> str:
    return re.sub(r"\\(.)", r"\1", element.value)


def figure(at, key: str) -> dict:
    for chart in at.get("plotly_chart"):
        if chart.proto.id.endswith(key) or key in chart.proto.id:
            return json.loads(chart.proto.spec)
    raise AssertionError(f"no chart {key}")


def test_the_rule_past_the_limit_and_past_the_pool():
    spec = registry().model("llama-3.1-8b").spec  # max_position_embeddings 131,072
    assert spec.max_context == 131_072
    assert no_speed_reason(spec, 131_072) is None
    assert "limit of 131,072 tokens" in no_speed_reason(spec, 131_073)
    # A pool of exactly 2 sequences of 1,024 tokens: 2 x 1,024 x 131,072 B (32 layers x 8 KV
    # heads x 128 x 2 (K and V) x 2 B), in blocks of 16 tokens; weights 0, no reserve.
    pool = Deployment(spec=spec, memory_bytes=2 * 1024 * 131_072, weights_bytes=0, reserve_bytes=0)
    pool = pool.but(gpu_memory_utilization=1.0, block_size=16, kv_dtype="bf16")
    assert no_speed_reason(spec, 1024, 2, pool) is None
    assert "3 sequences of 1,024 tokens do not fit" in no_speed_reason(spec, 1024, 3, pool)


@pytest.mark.parametrize("page", ["app_pages/step_time.py", "app_pages/lab.py"])
def test_no_speed_past_the_models_limit(page):
    """[16] Context 1,000,000 on Llama 8B showed "43.61 ms, 22.9 tokens/s"."""
    ctx = {"app_pages/step_time.py": "s_ctx", "app_pages/lab.py": "l_ctx"}[page]
    fold = {"s_batch_open": "true"} if page.endswith("step_time.py") else {}  # the batch fold
    at = open_page(page, model="llama-3.1-8b", **{ctx: "1000000"}, **fold)
    assert not at.exception
    values = [m.value for m in at.metric]
    assert not any(re.search(r"\d ms$|µs$", v) for v in values if "Step" in v or "step" in v)
    label = "Step time"
    assert metric(at, label) in ("past the limit", "does not fit")
    assert metric(at, "Tokens/s") in ("past the limit", "does not fit")
    if page.endswith("step_time.py"):
        shown = " ".join(text(w) for w in at.warning)
        assert "past this model's limit of 131,072 tokens" in shown
        batch = figure(at, "s_batch_fig")
        assert all(v is None for v in batch["data"][2]["y"])  # no tokens/s at any batch
        assert batch["layout"]["yaxis2"]["visible"] is False  # so no negative ticks either


def test_a_batch_that_does_not_fit_gets_no_speed_on_the_step_time_page():
    # 4,096 sequences of 8,192 tokens of Llama 8B need 4,096 GiB of KV: no H100 holds it.
    at = open_page("app_pages/step_time.py", model="llama-3.1-8b", s_batch="4096")
    assert not at.exception
    assert metric(at, "Step time, ideal bound") == "does not fit"
    assert "4,096 sequences of 8,192 tokens do not fit" in " ".join(text(w) for w in at.warning)


def test_moe_weight_read_grows_with_batch_and_the_page_says_so():
    """[17] gpt-oss-20b reads 3.71 of 13.75 GB at batch 1; the page said every weight is read
    once per step. With 32 experts and 4 routed per token, a batch of 256 touches all of them
    (the chance that one expert is missed by 256 tokens is (1 - 4/32)^256, about 1e-15)."""
    at = open_page("app_pages/step_time.py", model="gpt-oss-20b", s_batch_open="true")
    assert not at.exception
    said = " ".join(text(c) for c in at.caption) + " ".join(text(m) for m in at.markdown)
    assert "Every weight is read once per step" not in said
    m = re.search(
        r"Weights read per step: ([\d.,]+) GB at batch 1, ([\d.,]+) GB at batch 256 "
        r"of ([\d.,]+) GB in all",
        said,
    )
    assert m, said
    one, full, total = (float(g.replace(",", "")) for g in m.groups())
    assert one < full < total  # less than all: the untied input embedding is gathered
    assert full == pytest.approx(total - 1.158, abs=0.01)  # 201,088 x 2,880 x 2 B


def test_shrinking_is_per_gpu_under_tp_and_keeps_its_three_drawings():
    """[23] Llama 3.1 70B at TP 8: 1.25 GiB per GPU for 32,768 tokens (80 layers x 1 K/V head
    per GPU x 128 x 2 x 2 B x 32,768), and MQA saves nothing per GPU. [25] GPT-2's 64-wide
    keys kept the MLA drawing off the page under a heading promising three."""
    at = open_page("app_pages/techniques.py", model="llama-3.1-70b", tp="8")
    assert not at.exception
    assert (
        metric(at, "One sequence of 32,768 tokens, as configured on each of 8 GPUs") == "1.25 GiB"
    )
    table = tables(at)[0]
    mqa = table[table["technique"].str.startswith("MQA")].iloc[0]
    assert mqa["saving"] == "same"  # a factor of exactly 1 in words (issue 37, F23)
    at = open_page("app_pages/techniques.py", model="gpt2", t_how="true")
    assert not at.exception
    keys = [c.proto.id for c in at.get("plotly_chart")]
    assert any("t_fig_mla" in k for k in keys) and any("t_fig_heads" in k for k in keys)
    assert any("drawn as 32 of each 64-wide key" in text(c) for c in at.caption)


def test_home_names_the_gpus_and_stays_within_the_limit():
    """[38] Home said "8K conversations on h100-sxm-80gb" (a registry key; at TP 8 it is 8
    GPUs). GPT-2's limit is 1,024 tokens (n_positions): its conversation is 1,024 tokens, 12
    layers x 12 heads x 64 x 2 (K, V) x 2 B x 1,024 = 36 MiB."""
    at = open_page("app_pages/home.py", model="llama-3.1-70b", tp="8")
    assert not at.exception
    labels = [m.label for m in at.metric]
    assert "8,192-token conversations on 8 x NVIDIA H100 SXM5 80GB" in labels
    assert "One 8,192-token conversation per GPU" in labels
    at = open_page("app_pages/home.py", model="gpt2")
    assert metric(at, "One 1,024-token conversation") == "36.00 MiB"


@pytest.mark.parametrize("page, own", [("app_pages/live.py", True), ("app_pages/budget.py", False)])
def test_pages_with_their_own_model_say_the_sidebar_does_not_apply(page, own):
    pytest.importorskip("torch")
    at = open_page(page)
    said = " ".join(text(i) for i in at.sidebar.info)
    assert ("ignores the choices below" in said) is own
