"""A precision-aware roofline (issue 23, findings 7-11 and "what to build" 4), by hand.

Sources for the figures used here:
- DeepSeek-V3's config.json (kvcalc/config/models.yaml): 61 layers, 128 heads, kv_lora_rank 512,
  qk_rope_head_dim 64, qk_nope_head_dim 128, v_head_dim 128, 256 routed experts of
  3 x 7,168 x 2,048 parameters in 58 MoE layers, 8 per token, FP8 weights.
- MLA's absorbed decode: vllm/v1/attention/backends/mla/common.py ("MQA with QK headdim =
  Lkv + R, V headdim = Lkv" in the data-movement friendly _forward_decode; prefill is "MHA with
  QK headdim = P + R, V headdim = V").
- GPU peaks: the datasheets in kvcalc/config/models.yaml (sources.specs). T4: "Single-Precision
  Performance (FP32) 8.1 TFLOPS", "Mixed-Precision (FP16/FP32) 65 TFLOPS", 320 GB/s. H200 SXM:
  FP8 1,979 / BF16 989 TFLOPS dense (the sheet's 3,958 / 1,979 are with sparsity), 4.8 TB/s.
- vLLM's dtype "auto": vllm/config/model.py _resolve_auto_dtype ("Downcast for float32
  models" to the platform's first dtype) and vllm/platforms/cuda.py supported_dtypes (BF16 from
  compute capability 8.0; Turing gets FP16).
- FP8 attention on Hopper: vLLM's quantized KV cache docs ("When using the Flash Attention 3
  backend with FP8 KV cache, attention operations are also performed in the quantized (FP8)
  domain") and fa_utils.flash_attn_supports_fp8 (FA3 and compute capability 9.x).
"""

import math

import pytest

from kvcalc import get_gpu, get_model, step_time
from kvcalc.cache.deployment import Deployment
from kvcalc.perf.intensity import (
    attention_points,
    decode_point,
    decode_step,
    gqa_heads,
    prefill_point,
    roofs,
)
from kvcalc.perf.roofline import attention_flops
from kvcalc.perf.sim import Speed, setup

# DeepSeek-V3, from its config fields
LAYERS, HEADS, RANK, ROPE, NOPE, V = 61, 128, 512, 64, 128, 128
EXPERT = 3 * 7168 * 2048  # gate, up and down projections of one routed expert: 44,040,192
TOTAL = 671_026_419_200  # kvcalc's count (published: 671B)
EMBED = 129_280 * 7168  # the untied input embedding, gathered one row per token


def test_mla_pair_costs_by_phase():
    spec = get_model("deepseek-v3").spec
    mla = spec.layers[0]
    # Decode, absorbed: scores over the latent + RoPE key (512 + 64), values over the latent
    # (512): 2 x 128 x (2 x 512 + 64) = 278,528 FLOPs per (query, cached token) pair.
    assert mla.pair_flops(decode=True) == 2 * HEADS * (2 * RANK + ROPE) == 278_528
    # Prefill expands the latent into per-head K (128 + 64) and V (128): 2 x 128 x 320 = 81,920.
    assert mla.pair_flops(decode=False) == 2 * HEADS * (NOPE + ROPE + V) == 81_920
    # A standard layer costs the same in both phases (Llama 3.1 8B: 2 x 32 x (128 + 128)).
    llama = get_model("llama-3.1-8b").spec.layers[0]
    assert llama.pair_flops(decode=True) == llama.pair_flops(decode=False) == 2 * 32 * 256


def test_deepseek_decode_intensity_is_11_7_by_hand():
    # DeepSeek-V3 on 8 x H200, batch 32, 8,192 tokens (the review's case; 6.3 before the fix).
    m = get_model("deepseek-v3")
    w = m.weights()
    assert w.dtype == "fp8" and m.spec.params.total == TOTAL
    # Active parameters: all but the 248 unused experts of each MoE layer and the embedding.
    active = TOTAL - 58 * (256 - 8) * EXPERT - EMBED
    assert active == m.spec.active_params == 36_625_618_432  # published: 36.7B
    gemm = 2 * active * 32 / 8  # 293,004,947,456 FLOPs per GPU
    # Attention per GPU: 32 sequences x 61 layers x 2 x (128 / 8 heads) x 1,088 x 8,192 pairs.
    attn = 32 * LAYERS * 2 * (HEADS // 8) * (2 * RANK + ROPE) * 8192
    assert attn == 556_735_135_744
    # Weights read at batch 32: every dense weight (FP8, 1 B each) but the embedding table,
    # 32 of its rows, and in each of 58 layers the experts 32 tokens touch, uniform routing:
    # 256 x (1 - (1 - 8/256)^32) = 163.3.
    dense = TOTAL - 58 * 256 * EXPERT
    touched = 256 * (1 - (1 - 8 / 256) ** 32)
    read = dense - EMBED + 32 * 7168 + round(58 * touched * EXPERT)
    assert read == w.read_per_step(m.spec, 32) == 433_348_840_371
    # The latent (512 + 64, BF16) is replicated on every GPU: 32 x 8,192 x 61 x 576 x 2 B.
    kv = 32 * 8192 * LAYERS * (RANK + ROPE) * 2
    expected = (gemm + attn) / (math.ceil(read / 8) + kv)
    assert expected == pytest.approx(11.706, abs=1e-3)
    d = decode_point(m.spec, w, batch=32, context=8192, tp=8)
    assert d.intensity == pytest.approx(expected, rel=1e-12)
    assert d.formula.endswith("= 11.7 FLOP/B")


def test_step_time_and_prefill_count_absorbed_attention_under_its_own_roof():
    m = get_model("deepseek-v3")
    w = m.weights()
    g = get_gpu("h200-141gb")
    gemm = 2 * m.spec.active_params * 32 / 8
    attn = 32 * LAYERS * 2 * (HEADS // 8) * (2 * RANK + ROPE) * 8192
    s = step_time(
        Deployment(spec=m.spec, weights=w, tp=8),
        context=8192,
        batch=32,
        bandwidth_gbs=g.bandwidth_gbs,
        peak_tflops=1978.9,
        attention_tflops=989.4,
        find_crossover=False,
    )
    assert s.compute_time_s == pytest.approx(gemm / 1978.9e12 + attn / 989.4e12, rel=1e-12)
    # Prefill of 512 tokens expands the latent: 61 x 81,920 FLOPs per pair, 512 x 513 / 2 pairs.
    spec = m.spec
    assert attention_flops(spec, 0, 512, decode=False) == LAYERS * 81_920 * 512 * 513 // 2
    p = prefill_point(spec, w, 512, tp=8)
    assert p.flops == pytest.approx(
        (2 * spec.active_params * 512 + LAYERS * 81_920 * 512 * 513 / 2) / 8
    )


def test_simulator_decode_pairs_are_absorbed():
    m = get_model("deepseek-v3")
    g = get_gpu("h200-141gb")
    dep = Deployment(spec=m.spec, weights=m.weights(), gpu=g, tp=8)
    s = setup(dep, 1024 + 64, Speed(bandwidth_gbs=g.bandwidth_gbs, peak_tflops=1978.9))
    assert s.decode_flops_per_pair == LAYERS * 278_528 / 8  # 2,123,776 per GPU
    assert s.attention_flops_per_pair == LAYERS * 81_920 / 8  # prefill chunks: 624,640
    # A decode-only step of 32 tokens at 8,192 each: compute counts the absorbed pairs.
    fps = 1978.9e12 * s.mfu
    compute = (s.linear_flops_per_token * 32 + LAYERS * 278_528 / 8 * 32 * 8192) / fps
    memory = (s.weights_read(32) + s.kv_read_bytes_per_token * 32 * 8192) / s.bytes_per_s
    assert s.step_seconds(32, 32 * 8192, 0, 32 * 8192) == pytest.approx(max(compute, memory))


def test_fp32_peak_is_the_datasheet_figure():
    t4 = get_gpu("t4")
    assert t4.fp32_tflops == 8.1 and t4.fp16_tflops == 65 and t4.bandwidth_gbs == 320
    assert t4.peak_tflops("fp32") == 8.1  # was 65, the FP16 tensor figure
    r = roofs(t4, "fp32", "fp32", t4.bandwidth_gbs)
    assert r.gemm_ridge == pytest.approx(8.1e12 / 320e9) == pytest.approx(25.3, abs=0.05)
    assert roofs(t4, "fp16", "fp16", 320).gemm_ridge == pytest.approx(65e12 / 320e9)  # 203.1
    # Every registry GPU states its FP32 peak, and it is below its 16-bit tensor peak.
    from kvcalc import registry

    for g in registry().gpus.values():
        assert g.fp32_tflops and g.fp32_tflops < g.tflops(g.half), g.key


def test_gemms_and_attention_get_their_own_roofs():
    h200 = get_gpu("h200-141gb")
    # FP8 weights, BF16 cache: the GEMMs' ridge is 1,978.9 / 4.8 = 412 FLOP/B, attention's
    # 989.4 / 4.8 = 206 (the review saw 412 applied to both).
    r = roofs(h200, "fp8", "bf16", 4800)
    assert (r.gemm_format, r.attention_format) == ("fp8", "bf16")
    assert r.gemm_ridge == pytest.approx(1978.9e12 / 4800e9)  # 412.3
    assert r.attention_ridge == pytest.approx(989.4e12 / 4800e9)  # 206.1
    # An FP8 cache on Hopper: vLLM's FlashAttention 3 / FlashMLA compute attention in FP8.
    assert roofs(h200, "bf16", "fp8", 4800).attention_format == "fp8"
    # On Ada (L40S: FP8 tensor cores, FlashAttention 2) an FP8 cache is dequantised to BF16.
    l40s = get_gpu("l40s")
    r = roofs(l40s, "fp8", "fp8", l40s.bandwidth_gbs)
    assert (r.gemm_format, r.attention_format) == ("fp8", "bf16")
    assert r.attention_tflops == 362.05 and r.gemm_tflops == 733
    # INT4 weights are dequantised to 16 bits for the multiply (W4A16), INT8/INT4 caches too;
    # FP8 weights on an A100 (no FP8 tensor cores) run in BF16.
    assert roofs(h200, "int4", "int8", 4800).gemm_format == "bf16"
    assert roofs(h200, "int4", "int8", 4800).attention_format == "bf16"
    assert roofs(get_gpu("a100-80gb"), "fp8", "bf16", 2039).gemm_tflops == 312
    # A custom GPU with no FP32 figure cannot time FP32 work: refused by name.
    from dataclasses import replace

    with pytest.raises(ValueError, match="FP32 peak"):
        roofs(replace(h200, fp32_tflops=None), "fp32", "bf16", 4800)


def test_decode_step_is_the_sum_of_its_parts_each_under_its_roof():
    m = get_model("deepseek-v3")
    h200 = get_gpu("h200-141gb")
    r = roofs(h200, "fp8", "bf16", 4800)
    d = decode_step(Deployment(spec=m.spec, weights=m.weights(), tp=8), r, batch=32, context=8192)
    assert d.gemm.roof == "gemm" and d.attention.roof == "attention"
    # Both parts wait for memory here: the step is the bytes over the bandwidth, exactly the
    # Decode step time page's figure.
    assert d.gemm_bound == d.attention_bound == "memory"
    s = step_time(
        Deployment(spec=m.spec, weights=m.weights(), tp=8),
        context=8192,
        batch=32,
        bandwidth_gbs=4800,
        find_crossover=False,
    )
    assert d.time_s == pytest.approx(s.step_time_s, rel=1e-12)
    assert d.whole.achieved_tflops == pytest.approx(d.whole.flops / d.time_s / 1e12)


def test_vllm_serves_an_fp32_checkpoint_in_16_bits():
    m = get_model("gpt2")
    assert m.weight_dtype == "fp32"
    n = m.spec.params.total
    auto = m.weights()  # vLLM on a GPU with BF16
    assert (auto.dtype, auto.checkpoint_dtype, auto.bytes) == ("bf16", "fp32", 2 * n)
    assert m.weights("fp32").bytes == 4 * n  # asked for FP32 explicitly: 4 B each
    t4 = get_gpu("t4")
    assert not t4.has_bf16 and t4.half == "fp16"
    on_t4 = m.weights(half=t4.half)  # no BF16 on Turing: FP16
    assert (on_t4.dtype, on_t4.bytes) == ("fp16", 2 * n)
    # A BF16 checkpoint on a T4 falls back to FP16 (same bytes); as stored elsewhere.
    llama = get_model("llama-3.1-8b")
    assert llama.weights(half="fp16").dtype == "fp16"
    assert llama.weights().dtype == "bf16" and llama.weights().checkpoint_dtype is None


def test_gqa_variant_is_what_its_name_says():
    # GPT-2 has 12 heads, not a multiple of 8: the grouped variant is 6 KV heads of 2 query
    # heads each, not MQA (the review saw GQA = MQA).
    assert gqa_heads(12, 12) == 6
    pts = {p.label: p for p in attention_points(get_model("gpt2").spec, context=1024)}
    assert set(pts) == {
        "attention MHA",
        "attention GQA, 6 KV heads",
        "attention MQA",
        "attention MLA (absorbed)",
    }
    # 2 x (query heads per KV head) / 2 B: MHA 1, GQA 2, MQA 12.
    assert pts["attention MHA"].intensity == pytest.approx(1.0)
    assert pts["attention GQA, 6 KV heads"].intensity == pytest.approx(2.0)
    assert pts["attention MQA"].intensity == pytest.approx(12.0)
    assert gqa_heads(32, 8) == 8 and gqa_heads(128, None) == 8 and gqa_heads(16, 16) == 8
    # Falcon-7B: 71 query heads (prime) on 1 KV head: no equal groups exist, no GQA variant.
    assert gqa_heads(71, 1) is None
    falcon = [p.label for p in attention_points(get_model("falcon-7b").spec)]
    assert falcon == ["attention MHA", "attention MQA", "attention MLA (absorbed)"]


def test_query_tokens_per_step_scale_attention_and_gemm_tokens():
    m = get_model("llama-3.1-8b")
    c, q = 8192, 4
    gqa = next(
        p
        for p in attention_points(m.spec, context=c, queries=q)
        if p.label.startswith("attention GQA")
    )
    # 4 new tokens at positions 8,192..8,195 attend to 8,192 + 8,193 + 8,194 + 8,195 tokens;
    # they read the 8,195 cached tokens once: 8 KV heads x 256 x 2 B each.
    flops = 2 * 32 * 256 * (4 * c + 6)
    nbytes = 8 * 256 * (c + 3) * 2
    assert gqa.intensity == pytest.approx(flops / nbytes)  # about 4 x 4.0
    assert gqa.intensity == pytest.approx(16.0, rel=1e-3)
    # The GEMMs compute batch x q tokens: 2 x 7,504,924,672 x 32 x 4.
    r = roofs(get_gpu("h100-sxm-80gb"), "bf16", "bf16", 3350)
    dep = Deployment(spec=m.spec, weights=m.weights())
    d = decode_step(dep, r, batch=32, context=c, queries=q)
    assert d.gemm.flops == 2 * 7_504_924_672 * 32 * 4
    one = decode_step(dep, r, batch=32, context=c)
    assert d.attention.intensity == pytest.approx(4 * one.attention.intensity, rel=1e-3)
