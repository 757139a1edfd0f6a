"""Techniques applied to real models: savings from first principles."""

import pytest
from conftest import llama_config

from kvcalc import get_model, spec_from_config
from kvcalc.techniques import techniques


def by_key(spec, n, **kw):
    return {r.key: r for r in techniques(spec, n, **kw)}


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
        techniques(spec, 100)


def test_bad_technique_inputs():
    spec = get_model("llama-3.1-8b").spec
    for kw in (dict(window=0), dict(gpu_tokens=-1), dict(latent=(0, 64)), dict(kv_dtype="x")):
        with pytest.raises(ValueError):
            techniques(spec, 100, **kw)


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
    with pytest.raises(ValueError, match="unknown link"):
        by_key(get_model("llama-3.1-8b").spec, 100, link="carrier-pigeon")
