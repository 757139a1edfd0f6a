"""Techniques applied to real models: savings from first principles."""

import pytest
from conftest import llama_config

from kvcalc import get_model, spec_from_config
from kvcalc.cache.deployment import Deployment
from kvcalc.teach.techniques import techniques


def tech(spec, n, kv_dtype="bf16", tp=1, **kw):
    """techniques() on ``spec`` alone (no GPU), its cache in ``kv_dtype`` over ``tp`` GPUs."""
    return techniques(Deployment(spec=spec, tp=tp).but(kv_dtype=kv_dtype), n, **kw)


def by_key(spec, n, **kw):
    return {r.key: r for r in tech(spec, n, **kw)}


def test_llama31_8b_savings():
    t = by_key(get_model("llama-3.1-8b").spec, 32768)
    # 32 query heads, 8 K/V heads: MHA is 4x the cache, MQA 1/8 of it.
    assert t["mha"].saving == 0.25 and t["mqa"].saving == 8
    # MLA latent 512 + 64 against 2 x 8 x 128 = 2048 elements per layer.
    assert t["mla"].saving == pytest.approx(2048 / 576)
    assert t["fp8"].saving == 2 and t["int4"].saving == 4
    # A 4,096-token window at 32,768 tokens keeps 1/8.
    assert t["window"].saving == 8
    assert t["offload"].seq_bytes == 4096 * 131_072
    # ...and only for an idle sequence: a running one reads its whole cache every step.
    assert "idle" in t["offload"].name and "reads its whole cache" in t["offload"].tradeoff


def test_window_and_offload_do_nothing_below_their_size():
    t = by_key(get_model("llama-3.1-8b").spec, 1000)
    assert t["window"].saving == 1 and not t["window"].applies
    assert t["offload"].saving == 1 and not t["offload"].applies
    assert "nothing to offload" in t["offload"].tradeoff


def test_deepseek_is_already_mla():
    t = by_key(get_model("deepseek-v3").spec, 8192)
    assert not t["mla"].applies and t["mla"].saving == 1
    # As plain MHA its 128 heads x (192 + 128) would take 40,960 elements per layer, not 576.
    assert t["mha"].saving == pytest.approx(576 / 40960)


def test_falcon_is_already_mqa_and_fp8_over_fp8_does_nothing():
    t = by_key(get_model("falcon-7b").spec, 2048, kv_dtype="fp8")
    assert not t["mqa"].applies
    assert not t["fp8"].applies and t["fp8"].saving == 1


def test_hybrid_only_counts_attention_layers():
    spec = get_model("jamba-v0.1").spec
    t = by_key(spec, 16384)
    assert t["own"].bytes_per_token == 4 * 2 * 8 * 128 * 2


def test_pure_recurrent_model_is_explained():
    spec = spec_from_config(llama_config(layer_types=["mamba"] * 4, mamba_d_state=16))
    with pytest.raises(ValueError, match="no K/V"):
        tech(spec, 100)


def test_bad_technique_inputs():
    spec = get_model("llama-3.1-8b").spec
    for kw in (dict(window=0), dict(gpu_tokens=-1), dict(latent=(0, 64)), dict(kv_dtype="x")):
        with pytest.raises(ValueError):
            tech(spec, 100, **kw)


def test_mha_models_get_a_gqa_row():
    # Llama 2 7B: 32 query heads, 32 K/V heads (MHA). GQA with 8 K/V heads keeps a quarter:
    # 2 x 32 layers x 8 x 128 x 2 B = 131,072 B per token against 524,288.
    t = by_key(get_model("llama-2-7b").spec, 4096)
    assert t["gqa"].bytes_per_token == 131_072 and t["gqa"].saving == 4
    assert "grouped-query attention" in t["gqa"].name
    assert "gqa" not in by_key(get_model("llama-3.1-8b").spec, 4096)  # already GQA


def test_offload_needs_a_stated_peak_and_a_known_link():
    # No silent TFLOPS fallback: without the GPU's peak the recompute time is not given.
    t = by_key(get_model("llama-3.1-8b").spec, 32768, gpu_tokens=4096)
    assert "peak TFLOPS, which is not stated" in t["offload"].tradeoff
    # With it, the reload goes over the catalog's PCIe 5.0 x16 (63 GB/s): 28,672 tokens x
    # 131,072 B = 3.758 GB / 63 GB/s = 59.65 ms.
    t = by_key(get_model("llama-3.1-8b").spec, 32768, gpu_tokens=4096, peak_tflops=989.4)
    assert "takes 59.65 ms" in t["offload"].tradeoff and "PCIe 5.0 x16" in t["offload"].tradeoff
    # Recomputing them is the ideal bound, the Learn path's one convention (issue 37, F17): the
    # prefill's FLOPs at the full dense peak, MFU 1. Every weight but the untied input embedding
    # (8,030,261,248 - 128,256 x 4,096 = 7,504,924,672) in 2 FLOPs per token, plus causal
    # attention, 4 x 32 layers x 32 heads x 128 x n(n + 1) / 2 for n = 28,672:
    # (4.3036e14 + 2.1551e14) / 989.4e12 = 652.79 ms (at MFU 0.5 it would be 1.31 s).
    flops = 2 * 7_504_924_672 * 28_672 + 4 * 32 * 32 * 128 * 28_672 * 28_673 // 2
    assert f"at least {flops / 989.4e12 * 1e3:.2f} ms (the ideal bound" in t["offload"].tradeoff
    with pytest.raises(ValueError, match="unknown link"):
        by_key(get_model("llama-3.1-8b").spec, 100, link="carrier-pigeon")


def test_per_gpu_under_tensor_parallelism():
    """Issue 23 [23]: the page ignored TP while its header said "per GPU". Llama 3.1 70B at TP 8
    (80 layers, 8 K/V heads of 128, BF16): each GPU keeps 1 head, 80 x 1 x 128 x 2 (K, V) x 2 B
    = 40,960 B per token, 1.25 GiB at 32,768 tokens. MQA's single head is replicated on every
    GPU: per GPU it saves nothing. MHA's 64 heads are 8 per GPU: 8x larger."""
    spec = get_model("llama-3.1-70b").spec
    rows = by_key(spec, 32768, tp=8)
    assert rows["own"].bytes_per_token == 40_960
    assert rows["own"].seq_bytes == 40_960 * 32768 == 1.25 * 2**30
    assert rows["mqa"].seq_bytes == rows["own"].seq_bytes and rows["mqa"].saving == 1.0
    assert rows["mha"].bytes_per_token == 80 * 8 * 128 * 2 * 2
    assert rows["mha"].saving == pytest.approx(1 / 8)
    one = by_key(spec, 32768)
    assert one["own"].seq_bytes == 8 * rows["own"].seq_bytes and one["mqa"].saving == 8.0


def test_mla_latent_is_replicated_under_tp():
    """DeepSeek-V3 at TP 8: the latent (512 + 64) x 2 B per layer stays whole on each GPU (61
    layers: 70,272 B per token); its MHA equivalent has 128 / 8 = 16 heads per GPU of K 192 and
    V 128: 61 x 16 x (192 + 128) x 2 B = 624,640 B."""
    spec = get_model("deepseek-v3").spec
    rows = by_key(spec, 4096, tp=8)
    assert rows["own"].bytes_per_token == 61 * (512 + 64) * 2 == 70_272
    assert rows["mha"].bytes_per_token == 61 * 16 * (192 + 128) * 2 == 624_640


def test_offload_reload_counts_only_what_left_the_gpu():
    """Issue 23 [24]: Gemma 3 27B at 32,768 tokens with the newest 4,096 on the GPU: its 52
    sliding layers (window 1,024) need nothing back; its 10 full layers reload 28,672 tokens of
    16 K/V heads x 128 x 2 x 2 B = 8,192 B: 2,348,810,240 B over PCIe 5.0 x16 (63.0 GB/s) =
    37.28 ms. It was 44.21 ms, the sliding layers counted twice."""
    spec = get_model("gemma-3-27b").spec
    row = by_key(spec, 32768, gpu_tokens=4096, link="pcie5-x16", peak_tflops=989.4)["offload"]
    moved = 10 * 28_672 * 8_192
    assert f"({moved:,} B)" in row.tradeoff
    assert "37.28 ms" in row.tradeoff
    assert row.name == "CPU offload while idle (the newest 4,096 tokens stay on the GPU)"


def test_a_variant_that_cannot_split_is_left_out():
    # SmolLM2-135M: 9 query heads, 3 K/V heads. TP 3 splits both; the GQA-8 variant is only
    # offered to MHA models, and MHA's 9 heads split over 3 GPUs (3 each).
    spec = get_model("smollm2-135m").spec
    rows = by_key(spec, 1024, tp=3)
    assert rows["own"].bytes_per_token == 30 * 1 * 64 * 2 * 2
    assert rows["mha"].bytes_per_token == 30 * 3 * 64 * 2 * 2
