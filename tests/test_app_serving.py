"""The roofline and serving-frontier pages under AppTest: the numbers they state are kvcalc's
(and, where possible, hand arithmetic), inputs change them, bad input gives a message."""

import json
import math
import re

import pytest

pytest.importorskip("streamlit")

from conftest import open_page  # noqa: E402

from kvcalc import get_gpu, get_model  # noqa: E402
from kvcalc.core.units import fmt_seconds  # noqa: E402
from kvcalc.perf.calibration import CALIBRATED, IDEAL  # noqa: E402
from webui import serving  # noqa: E402
from webui.pages import path  # noqa: E402


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
    at = open_page(path("roofline"))
    assert not at.exception and not at.error
    assert metric(at, "Ridge point") == "295 FLOP/B"  # 989.4 TFLOPS / 3,350 GB/s
    assert before_lead(at, "Ridge point", "A graphics processing unit")
    body = page_text(at)
    assert "compute bound" in body and "memory bound" in body
    # MHA 1.0, GQA 4 heads per KV head 4.0, MQA 32.0, MLA 2 x 32 x 1088 / 1152 = 60.4
    for s in ("1.0 FLOP/B", "4.0 FLOP/B", "32.0", "60.4 FLOP/B", "15.1 times GQA's"):
        assert s in body, s
    # TTFT of 512 tokens: (2 x 7,504,924,672 x 512 + 16,384 x 32 x 512 x 513 / 2 ... ) FLOPs at
    # the full dense peak: the ideal bound, as the Lab's (docs/design.md, principle 7)
    flops = 2 * 7_504_924_672 * 512 + 32 * 2 * 32 * 256 * 512 * 513 // 2
    assert fmt_seconds(flops / 989.4e12) in body
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    names = [t.get("name") for t in spec["data"]]
    assert "attention MLA (absorbed)" in names
    assert "decode steps, batch 1 to the largest that fits" in names
    # The head-sharing diagram: Llama 3.1 8B's 32 query heads on 8 K/V heads (config.json).
    heads = next(
        json.loads(c.proto.spec) for c in at.get("plotly_chart") if c.proto.id.endswith("-r_heads")
    )
    kv = next(t for t in heads["data"] if t["name"] == "GQA: K/V heads")
    assert len(kv["x"]) == 8
    assert len(next(t for t in heads["data"] if t["name"] == "GQA: query heads")["x"]) == 32


def test_roofline_batch_moves_decode_right():
    at = open_page(path("roofline"))
    before = float(metric(at, "Decode at batch").split()[0])
    at.number_input(key="r_batch").set_value(48)  # 54 sequences of 8,192 tokens fit
    at.run()
    assert not at.exception
    assert float(metric(at, "Decode at batch").split()[0]) > before


def chart(at):
    return json.loads(at.get("plotly_chart")[0].proto.spec)


def test_roofline_mla_decode_is_absorbed_under_two_roofs():
    # Issue 23 [7] [8]: DeepSeek-V3 on 8 x H200, batch 32, 8K. The step does
    # (293,004,947,456 + 556,735,135,744 absorbed attention) FLOPs per GPU over
    # (54,168,605,047 B weights + 18,421,383,168 B latent) = 11.7 FLOP/B (6.3 before); FP8
    # weights have the GEMM roof 1,978.9 TFLOPS / 4,800 GB/s = 412 FLOP/B, the BF16 attention
    # 989.4 / 4,800 = 206 FLOP/B (tests/test_roofline_precision.py works both by hand).
    at = open_page(path("roofline"), model="deepseek-v3", gpu="h200-141gb", tp="8")
    assert not at.exception and not at.error
    assert metric(at, "Ridge points: GEMMs / attention") == "412 / 206 FLOP/B"
    assert metric(at, "Decode at batch 32") == "11.7 FLOP/B"
    body = page_text(at)
    assert "The GEMMs compute in FP8: 1,978.9 TFLOPS" in body
    assert "Attention computes in BF16: 989.4 TFLOPS" in body
    names = [t["name"] for t in chart(at)["data"]]
    assert names[:2] == ["GEMM roof (FP8 weights)", "attention roof (BF16 math)"]


def test_roofline_fp32_weights_use_the_fp32_peak():
    # Issue 23 [9]: a T4 does 8.1 TFLOPS in FP32 and 65 in FP16 on its tensor cores, at
    # 320 GB/s: FP32 GEMMs have a ridge of 8.1e12 / 320e9 = 25, 16-bit attention 203.
    at = open_page(path("roofline"), model="gpt2", gpu="t4", wdtype="fp32")
    assert not at.exception and not at.error
    assert metric(at, "Ridge points: GEMMs / attention") == "25 / 203 FLOP/B"
    # With "auto" vLLM loads GPT-2's FP32 checkpoint in FP16 on a T4 (no BF16 there): half
    # the bytes, the 16-bit roof for both.
    at = open_page(path("roofline"), model="gpt2", gpu="t4")
    assert metric(at, "Ridge point") == "203 FLOP/B"
    assert "vLLM loads it in FP16 (dtype auto), so its weights take half" in page_text(at)
    assert any("has no BF16" in c.value for c in at.sidebar.caption)


def test_roofline_draws_only_batches_that_fit_and_prefill_at_its_mfu():
    # Issue 23 [10]. Llama 3.1 8B on an H100 at 8,192 tokens: the pool (vLLM's arithmetic at
    # 0.92, vLLM 0.33.0's default, and a 2 GiB reserve) holds kvcalc's max_batch_at sequences;
    # the trajectory stops there.
    from kvcalc.cache.deployment import Deployment
    from kvcalc.perf.sweeps import max_batch_at

    m, g = get_model("llama-3.1-8b"), get_gpu("h100-sxm-80gb")
    pool = Deployment(spec=m.spec, gpu=g, weights=m.weights(), reserve_bytes=2 * 2**30)
    most = max_batch_at(pool.but(gpu_memory_utilization=0.92, block_size=16), 8192)
    assert most == 56  # 56.32 GiB // (8,192 x 131,072 B) = 56
    at = open_page(path("roofline"), r_batch="1024")
    assert not at.exception and not at.error
    assert metric(at, "Decode at batch 1,024") == "does not fit"
    spec = chart(at)
    traj = next(t for t in spec["data"] if t["name"].startswith("decode steps"))
    assert traj["text"][0] == "decode, batch 1" and traj["text"][-1] == f"decode, batch {most:,}"
    assert f"at 8,192 tokens the KV pool holds {most:,} sequences" in page_text(at)
    # The prefill point sits at its FLOPs over the TTFT the text states (issue 23 [10]): the
    # ideal bound, (2 x 7,504,924,672 x 512 + 16,384 x 32 x 512 x 513 / 2) FLOPs at the full
    # dense peak in 7.84 ms, so on the roof: 989.4 TFLOP/s.
    flops = 2 * 7_504_924_672 * 512 + 32 * 2 * 32 * 256 * 512 * 513 // 2
    pf = next(t for t in spec["data"] if t["name"] == "prefill 512 tokens")
    assert pf["y"][0] == pytest.approx(flops / (flops / 989.4e12) / 1e12)  # 989.4
    assert fmt_seconds(flops / 989.4e12) == "7.84 ms" and "7.84 ms" in page_text(at)
    assert "989.4 TFLOP/s on the chart" in page_text(at)


def test_roofline_gqa_is_grouped_for_gpt2_and_axes_show_decades():
    # Issue 23 [11] [12]: GPT-2's 12 heads give GQA with 6 KV heads (2.0 FLOP/B), not MQA (12.0).
    at = open_page(path("roofline"), model="gpt2")
    assert not at.exception and not at.error
    body = page_text(at)
    assert "(GQA) with 6 KV heads lets 2 query heads share each cached key and value" in body
    assert "2.0 FLOP/B; multi-query attention (MQA), one KV head for all 12, 12.0" in body
    lay = chart(at)["layout"]
    for axis in ("xaxis", "yaxis"):  # only 0.1, 1, 10, 100 ... : no minor digits read as values
        vals = lay[axis]["tickvals"]
        assert all(v == pytest.approx(10 ** round(math.log10(v))) for v in vals)
    assert "1,000" in lay["xaxis"]["ticktext"]
    # The defaults stay within GPT-2's 1,024 tokens; past them the page refuses.
    assert metric(at, "Decode at batch 32")
    at = open_page(path("roofline"), model="gpt2", r_ctx="2048")
    assert any("at most 1,024 tokens" in text(e) for e in at.error)


def test_roofline_batch_one_states_each_metric_once():
    at = open_page(path("roofline"), r_batch="1")
    assert not at.exception
    labels = [m.label for m in at.metric]
    assert len(labels) == len(set(labels)) and "Decode at batch 1" in labels
    assert len(labels) <= 3  # three headline figures (issue 37)
    assert not any(
        lab.startswith("Decode at batch") and lab != "Decode at batch 1" for lab in labels
    )


def test_roofline_query_tokens_scale_attention():
    # 4 query tokens per step (speculative decoding, MTP) read Llama 3.1 8B's 8,195 cached
    # tokens once: 2 x 32 x 256 x (4 x 8,192 + 6) / (8 x 256 x 8,195 x 2 B) = 16.0 FLOP/B.
    at = open_page(path("roofline"), r_q="4")
    assert not at.exception and not at.error
    body = page_text(at)
    assert (
        "lets 4 query heads share each cached key and value, so the same bytes feed 4 times "
        "the work: 16.0 FLOP/B" in body
    )
    assert "With 4 query tokens per step, every cached byte feeds 4 queries" in body


def test_frontier_page_shows_the_overlay_and_the_binding_limit():
    at = open_page(path("frontier"))
    assert not at.exception and not at.error
    m, g = get_model("llama-3.1-8b"), get_gpu("h100-sxm-80gb")
    # A real server's curve (the calibrated estimate) and the overlay's, over the ideal bound.
    base = serving.frontier(m.spec, m.weights(), g, "bf16", 1, CALIBRATED, 512, 256, 0.0, None)
    fp8 = serving.frontier(m.spec, m.weights(), g, "fp8", 1, CALIBRATED, 512, 256, 0.0, None)
    ideal = serving.frontier(m.spec, m.weights(), g, "bf16", 1, IDEAL, 512, 256, 0.0, None)
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    names = [t["name"] for t in spec["data"]]
    assert names[:3] == [
        "calibrated estimate (BF16 KV)",
        "FP8 KV cache (calibrated estimate)",
        "ideal bound (full bandwidth, nothing added)",
    ]
    assert spec["data"][0]["y"] == pytest.approx(
        [r.output_tokens_per_s_per_gpu for r in base.results]
    )
    assert spec["data"][1]["y"] == pytest.approx(
        [r.output_tokens_per_s_per_gpu for r in fp8.results]
    )
    assert spec["data"][2]["y"] == pytest.approx(
        [r.output_tokens_per_s_per_gpu for r in ideal.results]
    )
    # The ideal bound overstates every run: a real step is slower.
    assert max(spec["data"][2]["y"]) > max(spec["data"][0]["y"])
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
    assert (
        f"at start-up vLLM logs room for {cap.logged_concurrency:,.2f} requests of 768 tokens"
    ) in body
    assert (
        f"In the simulation the pool starts to bind at {cap.onset_users:,} users "
        f"({cap.onset_users - 1:,} run with no preemption and no wait for blocks)"
    ) in body
    # The headline under the title: the most throughput under the service-level objective
    # (TPOT p99 <= 100 ms, TTFT p99 after the warm-up <= 2 s, the defaults), the curve's
    # highest point, vLLM's line and the onset.
    ok = [
        r
        for r in base.results
        if r.tpot_p99_s <= 0.1
        and (r.ttft_p99_steady_s if r.ttft_p99_steady_s is not None else r.ttft_p99_s) <= 2
    ]
    assert (
        metric(at, "Under the objective: tokens/s per GPU")
        == f"{max(r.output_tokens_per_s_per_gpu for r in ok):,.0f}"
    )
    # The curve's highest point is no fourth metric (issue 37, F12: the same number as the
    # first); here it also meets the objective, and the headline sentence says so.
    top = max(base.results, key=lambda r: r.output_tokens_per_s_per_gpu)
    assert top in ok
    u_top = base.users[base.results.index(top)]
    assert f"its highest point, {u_top:,} users" in body and "meets the objective" in body
    assert len(at.metric) == 6  # three headline metrics, three for the one run in detail
    assert metric(at, "vLLM's logged worst case") == f"{cap.logged_concurrency:,.2f}"
    assert metric(at, "The KV pool binds from") == f"{cap.onset_users:,} users"
    assert before_lead(at, "Under the objective: tokens/s per GPU", "A serving engine runs many")
    # One run in detail: 256 users, TTFT after the warm-up (each user's first request).
    r = serving.one_run(
        m.spec, m.weights(), g, "bf16", 1, CALIBRATED, 512, 256, 0.0, None, "fixed", 256
    )
    assert r.warmup_requests == 256
    assert metric(at, "Output tokens/s per GPU") == f"{r.output_tokens_per_s_per_gpu:,.0f}"
    lat = at.table[0].value  # the latencies' table: TTFT, TPOT, ITL by p50 and p99
    assert list(lat["p50"]) == [
        fmt_seconds(v) for v in (r.ttft_p50_steady_s, r.tpot_p50_s, r.itl_p50_s)
    ]
    assert list(lat["p99"]) == [
        fmt_seconds(v) for v in (r.ttft_p99_steady_s, r.tpot_p99_s, r.itl_p99_s)
    ]
    assert any("leaves out the warm-up: the 256 requests" in text(c) for c in at.caption)
    # The right axis counts whole requests, on no grid of its own.
    util = json.loads(at.get("plotly_chart")[1].proto.spec)["layout"]["yaxis2"]
    assert util["tickformat"] == ",d" and util["showgrid"] is False


def test_frontier_offers_log_normal_lengths():
    at = open_page(path("frontier"), fr_len="log-normal, sigma 0.5", fr_over="nothing")
    assert not at.exception and not at.error
    m, g = get_model("llama-3.1-8b"), get_gpu("h100-sxm-80gb")
    f = serving.frontier(
        m.spec, m.weights(), g, "bf16", 1, CALIBRATED, 512, 256, 0.0, None, "lognormal-0.5"
    )
    # Median 512 + 256, clipped at 4 x: max_model_len 2,048 + 1,024 = 3,072.
    assert f.capacity.max_model_len == 3072
    assert metric(at, "vLLM's logged worst case") == f"{f.capacity.logged_concurrency:,.2f}"


def test_frontier_overlay_from_the_link_and_bad_setups():
    at = open_page(path("frontier"), fr_over="MHA: one K/V head per query head")
    assert not at.exception
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["data"][1]["name"].startswith("MHA")
    # Sliding windows are simulated now (Gemma 2: window 4,096); a context past the model's
    # limit is refused with a message, not a traceback.
    at = open_page(path("frontier"), model="gemma-2-9b", fr_over="nothing")
    assert not at.exception and not at.error
    at = open_page(path("frontier"), model="gemma-2-9b", fr_prompt="8000")
    assert not at.exception and at.error and "beyond" in text(at.error[0])
    at = open_page(path("frontier"), pp="2")
    assert not at.exception and at.error and "pipeline parallel to 1" in text(at.error[0])


def test_frontier_slo_moves_the_best_run_under_it():
    # A tight objective (TPOT p99 at most 20 ms) leaves fewer runs than the default 100 ms; the
    # headline is the best of those, and no run at all meets 1 ms.
    m, g = get_model("llama-3.1-8b"), get_gpu("h100-sxm-80gb")
    base = serving.frontier(m.spec, m.weights(), g, "bf16", 1, CALIBRATED, 512, 256, 0.0, None)
    at = open_page(path("frontier"), fr_slo_tpot="20", fr_over="nothing")
    assert not at.exception
    ok = [
        r
        for r in base.results
        if r.tpot_p99_s <= 0.02
        and (r.ttft_p99_steady_s if r.ttft_p99_steady_s is not None else r.ttft_p99_s) <= 2
    ]
    assert ok and len(ok) < len(base.results)
    assert (
        metric(at, "Under the objective: tokens/s per GPU")
        == f"{max(r.output_tokens_per_s_per_gpu for r in ok):,.0f}"
    )
    at = open_page(path("frontier"), fr_slo_tpot="1", fr_over="nothing")
    assert metric(at, "Under the objective: tokens/s per GPU") == "no run meets it"
    assert any("No simulated run keeps TPOT p99 within 1 ms" in text(w) for w in at.warning)


def test_the_sidebars_step_cost_moves_the_frontier():
    at = open_page(path("frontier"), fr_over="nothing", step_ms="20")
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["data"][0]["name"] == "your step model (BF16 KV)"
    m, g = get_model("llama-3.1-8b"), get_gpu("h100-sxm-80gb")
    base = serving.frontier(m.spec, m.weights(), g, "bf16", 1, CALIBRATED, 512, 256, 0.0, None)
    assert max(spec["data"][0]["y"]) < max(r.output_tokens_per_s_per_gpu for r in base.results)


@pytest.mark.parametrize("profile", ["vllm@0.18.0", "sglang@0.5.9", "trtllm@1.0.0"])
def test_the_frontier_runs_an_engine_profile_on_its_own_engines_pool(capsys, profile):
    # Under an engine profile the frontier's simulator holds the pool that profile's engine
    # sizes (vLLM 0.18's 0.9 of the memory, SGLang's mem_fraction_static, TensorRT-LLM's 0.9 of
    # the free memory) and takes its batching defaults, as `simulate --engine` does: one figure
    # for one setup everywhere. Before, the page gave every profile the newest vLLM's 0.92.
    from kvcalc.cli import main
    from kvcalc.perf.engines import PROFILES

    m, g = get_model("qwen3-8b"), get_gpu("h100-sxm-80gb")
    speed = PROFILES[profile].step_model()
    s = serving._setup((m.spec, m.weights(), g, "bf16", 1, speed), 256, None, engine=profile)
    argv = ["simulate", "--model", "qwen3-8b", "--gpu", "h100-sxm-80gb", "--users", "2"]
    argv += ["--requests", "2", "--prompt-tokens", "128", "--output-tokens", "128"]
    assert main([*argv, "--engine", profile, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert s.num_blocks == got["usable_blocks"]
    assert main([*argv, "--json"]) == 0  # no profile: the newest vLLM's pool, another
    assert json.loads(capsys.readouterr().out)["usable_blocks"] != s.num_blocks
    # The Budget's capacity fold gives its own pool (vLLM's arithmetic): no engine's rule.
    pool = (0.9, 0, 16)
    budget = serving._setup((m.spec, m.weights(), g, "bf16", 1, speed), 256, None, pool, profile)
    plain = serving._setup((m.spec, m.weights(), g, "bf16", 1, speed), 256, None, pool)
    assert budget.num_blocks == plain.num_blocks


def test_the_frontier_page_names_the_pool_of_the_chosen_engine():
    # SGLang 0.5.9 on Llama 3.1 8B, one H100: its pool is 26,178 blocks of 16 tokens (worked by
    # hand in tests/test_engine_profiles.py from SGLang's mem_fraction_static 0.835); a request
    # of 512 + 256 tokens at full length takes 48 blocks: room for 26,178 / 48 = 545.38. The page
    # names it as SGLang's pool (SGLang logs tokens, not vLLM's concurrency line), its batch cap
    # by SGLang's flag, and draws the ideal bound on the same pool.
    at = open_page(path("frontier"), engine_profile="SGLang 0.5.9 profile", fr_over="nothing")
    assert not at.exception and not at.error
    assert metric(at, "SGLang's pool at full length") == "545.38"
    body = page_text(at)
    assert "the pool SGLang sizes has room for 545.38 requests of 768 tokens" in body
    assert "vLLM logs" not in body and "vLLM's logged worst case" not in body
    assert "the pool holds 26,177 blocks of 16 tokens" in body  # vLLM's null block aside
    assert "max_running_requests is" in body and "chunked_prefill_size 8,192" in body
    assert any(n.label == "max_running_requests (0 = SGLang's default)" for n in at.number_input)
    m, g = get_model("llama-3.1-8b"), get_gpu("h100-sxm-80gb")
    engine = "sglang@0.5.9"
    bound = serving.frontier(
        m.spec, m.weights(), g, "bf16", 1, IDEAL, 512, 256, 0.0, None, engine=engine
    )
    assert bound.capacity.pool_blocks == 26_178
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    drawn = {t["name"]: t for t in spec["data"]}
    assert drawn["ideal bound (full bandwidth, nothing added)"]["y"] == pytest.approx(
        [r.output_tokens_per_s_per_gpu for r in bound.results]
    )
    # vLLM's profile keeps vLLM's words
    at = open_page(path("frontier"), engine_profile="vLLM 0.18.0 profile", fr_over="nothing")
    assert "at start-up vLLM logs room for" in page_text(at)
    assert any(n.label == "max_num_seqs (0 = vLLM's default)" for n in at.number_input)
