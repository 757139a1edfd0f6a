"""The roofline and serving-frontier pages under AppTest: the numbers they state are kvcalc's
(and, where possible, hand arithmetic), inputs change them, bad input gives a message."""

import json
import re

import pytest

pytest.importorskip("streamlit")

from conftest import open_page  # noqa: E402

from kvcalc import get_gpu, get_model  # noqa: E402
from kvcalc.units import fmt_seconds  # noqa: E402
from webui import serving  # noqa: E402


def text(element) -> str:
    return re.sub(r"\\(.)", r"\1", element.value)


def metric(at, label):
    return next(m.value for m in at.metric if m.label.startswith(label))


def before_lead(at, label: str, lead: str) -> bool:
    """The metric ``label`` is drawn above the lead paragraph (a phone's first screen)."""
    order = []

    def walk(node):
        kind = getattr(node, "type", None)
        if kind == "metric":
            order.append(("metric", node.label))
        elif kind == "markdown":
            order.append(("markdown", node.value))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at.main)
    m = next(i for i, (k, v) in enumerate(order) if k == "metric" and v.startswith(label))
    p = next(i for i, (k, v) in enumerate(order) if k == "markdown" and v.startswith(lead))
    return m < p


def page_text(at) -> str:
    return " ".join(text(m) for m in at.markdown)


def test_roofline_page_states_hand_numbers():
    at = open_page("app_pages/roofline.py")
    assert not at.exception and not at.error
    assert metric(at, "Ridge point") == "295 FLOP/B"  # 989.4 TFLOPS / 3,350 GB/s
    assert before_lead(at, "Ridge point", "A graphics processing unit")
    body = page_text(at)
    assert "compute bound" in body and "memory bound" in body
    # MHA 1.0, GQA 4 heads per KV head 4.0, MQA 32.0, MLA 2 x 32 x 1088 / 1152 = 60.4
    for s in ("1.0 FLOP/B", "4.0 FLOP/B", "32.0", "60.4 FLOP/B", "15.1 times GQA's"):
        assert s in body, s
    # TTFT of 512 tokens: (2 x 7,504,924,672 x 512 + 16,384 x 32 x 512 x 513 / 2 ... ) FLOPs
    flops = 2 * 7_504_924_672 * 512 + 32 * 2 * 32 * 256 * 512 * 513 // 2
    assert fmt_seconds(flops / (989.4e12 * 0.5)) in body
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    names = [t.get("name") for t in spec["data"]]
    assert "attention MLA (absorbed)" in names and "decode as the batch grows" in names
    # The head-sharing diagram: Llama 3.1 8B's 32 query heads on 8 K/V heads (config.json).
    heads = next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
                 if c.proto.id.endswith("-r_heads"))
    kv = next(t for t in heads["data"] if t["name"] == "GQA: K/V heads")
    assert len(kv["x"]) == 8
    assert len(next(t for t in heads["data"] if t["name"] == "GQA: query heads")["x"]) == 32


def test_roofline_batch_moves_decode_right():
    at = open_page("app_pages/roofline.py")
    before = float(metric(at, "Decode at batch").split()[0])
    at.number_input(key="r_batch").set_value(256)
    at.run()
    assert not at.exception
    assert float(metric(at, "Decode at batch").split()[0]) > before


def test_frontier_page_shows_the_overlay_and_the_binding_limit():
    at = open_page("app_pages/frontier.py")
    assert not at.exception and not at.error
    m, g = get_model("llama-3.1-8b"), get_gpu("h100-sxm-80gb")
    base = serving.frontier(m.spec, m.weights(), g, "bf16", 1, 1.0, 512, 256, 0.0, None)
    fp8 = serving.frontier(m.spec, m.weights(), g, "fp8", 1, 1.0, 512, 256, 0.0, None)
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert [t["name"] for t in spec["data"]] == ["as chosen (BF16 KV)", "FP8 KV cache"]
    assert spec["data"][0]["y"] == pytest.approx([r.output_tokens_per_s_per_gpu
                                                  for r in base.results])
    assert spec["data"][1]["y"] == pytest.approx([r.output_tokens_per_s_per_gpu
                                                  for r in fp8.results])
    # BF16: 768 tokens take 48 blocks, 28,833 usable blocks hold 600 at their longest; the pool
    # binds from just above (the onset), and every run from there on is labelled by it (x).
    cap = base.capacity
    assert 600 < cap.onset_users <= 640
    i = base.users.index(cap.onset_users)
    assert all(r.binding_limit == "kv_pool" for r in base.results[i:])
    assert all(r.binding_limit != "kv_pool" for r in base.results[:i])
    assert set(spec["data"][0]["marker"]["symbol"][i:]) == {"x"}
    # Dense near the onset, labelled only at powers of two and the onset itself.
    assert cap.onset_users - 1 in base.users and round(1.05 * cap.onset_users) in base.users
    labels = dict(zip(base.users, spec["data"][0]["text"]))
    assert labels[cap.onset_users] == f"{cap.onset_users:,}" and labels[512] == "512"
    assert labels[cap.onset_users - 1] == ""
    # FP8 halves the blocks: 57,668 hold 1,024 (max_num_seqs) at full length; never binds.
    assert fp8.capacity.onset_users is None
    body = page_text(at)
    assert (f"At start-up vLLM logs room for {cap.logged_concurrency:,.2f} requests of 768 "
            "tokens") in body
    assert (f"In the simulation the pool starts to bind at {cap.onset_users:,} users "
            f"({cap.onset_users - 1:,} run with no preemption and no wait for blocks)") in body
    # The headline under the title: the curve's highest point, vLLM's line and the onset.
    assert metric(at, "Most output tokens/s per GPU") == \
        f"{max(r.output_tokens_per_s_per_gpu for r in base.results):,.0f}"
    assert metric(at, "vLLM's logged worst case") == f"{cap.logged_concurrency:,.2f}"
    assert metric(at, "The KV pool binds from") == f"{cap.onset_users:,} users"
    assert before_lead(at, "Most output tokens/s per GPU", "A serving engine runs many")
    # One run in detail: 256 users, TTFT after the warm-up (each user's first request).
    r = serving.one_run(m.spec, m.weights(), g, "bf16", 1, 1.0, 512, 256, 0.0, None, "fixed",
                        256)
    assert r.warmup_requests == 256
    assert metric(at, "Output tokens/s per GPU") == f"{r.output_tokens_per_s_per_gpu:,.0f}"
    assert metric(at, "TTFT p50") == fmt_seconds(r.ttft_p50_steady_s)
    assert metric(at, "TTFT p99") == fmt_seconds(r.ttft_p99_steady_s)
    assert metric(at, "TPOT p99") == fmt_seconds(r.tpot_p99_s)
    assert any("leaves out the warm-up: the 256 requests" in text(c) for c in at.caption)
    # The right axis counts whole requests, on no grid of its own.
    util = json.loads(at.get("plotly_chart")[1].proto.spec)["layout"]["yaxis2"]
    assert util["tickformat"] == ",d" and util["showgrid"] is False


def test_frontier_offers_log_normal_lengths():
    at = open_page("app_pages/frontier.py", fr_len="log-normal, sigma 0.5", fr_over="nothing")
    assert not at.exception and not at.error
    m, g = get_model("llama-3.1-8b"), get_gpu("h100-sxm-80gb")
    f = serving.frontier(m.spec, m.weights(), g, "bf16", 1, 1.0, 512, 256, 0.0, None,
                         "lognormal-0.5")
    # Median 512 + 256, clipped at 4 x: max_model_len 2,048 + 1,024 = 3,072.
    assert f.capacity.max_model_len == 3072
    assert metric(at, "vLLM's logged worst case") == f"{f.capacity.logged_concurrency:,.2f}"


def test_frontier_overlay_from_the_link_and_bad_setups():
    at = open_page("app_pages/frontier.py", fr_over="MHA: one K/V head per query head")
    assert not at.exception
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["data"][1]["name"].startswith("MHA")
    # Sliding windows are simulated now (Gemma 2: window 4,096); a context past the model's
    # limit is refused with a message, not a traceback.
    at = open_page("app_pages/frontier.py", model="gemma-2-9b", fr_over="nothing")
    assert not at.exception and not at.error
    at = open_page("app_pages/frontier.py", model="gemma-2-9b", fr_prompt="8000")
    assert not at.exception and at.error and "beyond" in text(at.error[0])
    at = open_page("app_pages/frontier.py", pp="2")
    assert not at.exception and at.error and "pipeline parallel to 1" in text(at.error[0])
