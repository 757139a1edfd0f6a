"""Arithmetic intensity against hand arithmetic (Llama 3.1 8B, H100 SXM: 989.4 TFLOPS dense
BF16, 3,350 GB/s; 32 query heads of 128, 8 KV heads; 8,030,261,248 parameters, of which
7,504,924,672 compute per token: the input embedding is a look-up)."""

import pytest

from kvcalc import get_model
from kvcalc.perf.intensity import attention_points, decode_point, prefill_point, ridge_point

W = 2 * 8_030_261_248
NA = 7_504_924_672
KV = 131_072
EMB, ROW = 128_256 * 4096 * 2, 4096 * 2  # untied input embedding: t tokens gather t rows


def wread(tokens):
    return W - EMB + min(EMB, tokens * ROW)


PAIR = 32 * 2 * 32 * 256


def test_ridge_point_of_an_h100():
    assert ridge_point(989.4, 3350) == pytest.approx(295.34, abs=0.01)  # 989.4e12 / 3.35e12


def test_prefill_and_decode_intensity_by_hand():
    m = get_model("llama-3.1-8b")
    w = m.weights()
    p = prefill_point(m.spec, w, 512)
    assert p.intensity == pytest.approx(
        (2 * NA * 512 + PAIR * 512 * 513 / 2) / (wread(512) + 512 * KV)
    )
    assert p.intensity > 295  # prefill of 512 tokens is compute bound on an H100
    for b in (1, 32, 1024):
        d = decode_point(m.spec, w, batch=b, context=8192)
        assert d.intensity == pytest.approx(b * (2 * NA + PAIR * 8192) / (wread(b) + b * 8192 * KV))
        assert d.intensity < 295  # decode stays memory bound at any batch here
    # Batch moves decode right, toward attention's own intensity (4 FLOP/B for GQA-4 at
    # 8K: the weights' share fades).
    assert (
        decode_point(m.spec, w, batch=1, context=8192).intensity
        < decode_point(m.spec, w, batch=64, context=8192).intensity
    )


def test_attention_intensity_is_the_group_size_and_mla_is_heavier():
    mha, gqa, mqa, mla = attention_points(get_model("llama-3.1-8b").spec, context=4096)
    assert mha.intensity == pytest.approx(1.0)  # 2 x 32 x 256 / (32 x 256 x 2 B)
    assert gqa.intensity == pytest.approx(4.0)  # 32 query heads on 8 KV heads
    assert mqa.intensity == pytest.approx(32.0)
    assert mla.intensity == pytest.approx(2 * 32 * (2 * 512 + 64) / ((512 + 64) * 2))  # 60.4
    # DeepSeek-V3: 128 heads on its own latent: 2 x 128 x 1088 / 1152 = 241.8, near the ridge
    ds = attention_points(get_model("deepseek-v3").spec)[-1]
    assert ds.intensity == pytest.approx(2 * 128 * 1088 / 1152)
    # FP8 halves the bytes: twice the intensity
    assert attention_points(get_model("llama-3.1-8b").spec, kv_dtype="fp8")[
        1
    ].intensity == pytest.approx(8.0)
