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
    assert spec["data"][0]["y"] == pytest.approx([r.output_tokens_per_s_per_gpu for r in base])
    assert spec["data"][1]["y"] == pytest.approx([r.output_tokens_per_s_per_gpu for r in fp8])
    # The KV pool binds BF16 at 1,024 users (1,024 x 48 blocks > the pool's 28,018), not FP8
    # (56,037 blocks hold 1,024 x 48 = 49,152).
    assert base[-1].binding_limit == "kv_pool" and fp8[-1].binding_limit != "kv_pool"
    assert spec["data"][0]["marker"]["symbol"][-1] == "x"
    body = page_text(at)
    assert (f"From 1,024 users on, the KV pool, not max_num_seqs (1,024), stops the batch at "
            f"{base[-1].max_batch:,} requests") in body
    assert "The KV pool never stops the batch from growing up to 1,024 users" in body
    # The headline under the title: the curve's highest point, and where the pool first binds
    # (512 users x 48 blocks = 24,576 fit in 28,018 blocks; 1,024 x 48 = 49,152 do not).
    assert metric(at, "Most output tokens/s per GPU") == \
        f"{max(r.output_tokens_per_s_per_gpu for r in base):,.0f}"
    assert metric(at, "The KV pool stops the batch from") == "1,024 users"
    assert before_lead(at, "Most output tokens/s per GPU", "A serving engine runs many")
    r = base[serving.USERS.index(256)]
    assert metric(at, "Output tokens/s per GPU") == f"{r.output_tokens_per_s_per_gpu:,.0f}"
    assert metric(at, "TTFT p50") == f"{fmt_seconds(r.ttft_p50_s)} / {fmt_seconds(r.ttft_p99_s)}"


def test_frontier_overlay_from_the_link_and_bad_setups():
    at = open_page("app_pages/frontier.py", fr_over="MHA: one K/V head per query head")
    assert not at.exception
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["data"][1]["name"].startswith("MHA")
    # A model whose layers the simulator cannot run is refused with a message, not a traceback.
    at = open_page("app_pages/frontier.py", model="gemma-2-9b")
    assert not at.exception and at.error and "sliding" in text(at.error[0])
    at = open_page("app_pages/frontier.py", pp="2")
    assert not at.exception and at.error and "pipeline parallel to 1" in text(at.error[0])
