"""Decode step time, crossover, MoE expert reads, prefill and cache-vs-recompute."""

import pytest
from conftest import llama_config

from kvcalc import (
    GB,
    get_gpu,
    get_model,
    offload_vs_recompute,
    prefill,
    spec_from_config,
    step_time,
    token_passes,
    weights,
)
from kvcalc.cache.deployment import Deployment


def test_step_time_is_bytes_over_bandwidth():
    m = get_model("llama-3.1-8b")
    w = m.weights("bf16")
    s = step_time(Deployment(spec=m.spec, weights=w), context=8192, batch=4, bandwidth_gbs=3350)
    # Every weight but the untied input embedding (128,256 x 4,096 BF16), of which the 4 tokens
    # gather one 4,096-wide row each.
    table, row = 128_256 * 4096 * 2, 4096 * 2
    assert s.weight_read_bytes == w.bytes - table + 4 * row
    assert s.kv_read_bytes == 4 * 8192 * 131_072
    assert s.step_time_s == pytest.approx(
        (w.bytes - table + 4 * row + 4 * 8192 * 131_072) / (3350 * GB)
    )
    assert s.tokens_per_s == pytest.approx(4 / s.step_time_s)


def test_crossover_moves_left_with_batch_and_right_with_fp8_and_mla():
    m = get_model("llama-3.1-8b")
    dep = Deployment(spec=m.spec, weights=m.weights("bf16"))
    c1 = step_time(dep, context=1, batch=1, bandwidth_gbs=1000).crossover_context
    c8 = step_time(dep, context=1, batch=8, bandwidth_gbs=1000).crossover_context
    fp8 = dep.but(kv_dtype="fp8")
    c_fp8 = step_time(fp8, context=1, batch=1, bandwidth_gbs=1000).crossover_context
    assert c8 == pytest.approx(c1 / 8, abs=1)
    assert c_fp8 == pytest.approx(2 * c1, abs=1)
    # At the crossover the two reads are equal (to within one token).
    s = step_time(dep, context=c1, batch=1, bandwidth_gbs=1000)
    assert s.kv_read_bytes >= s.weight_read_bytes > s.kv_read_bytes - 131_072


def test_sliding_only_model_never_crosses_over():
    spec = spec_from_config(llama_config(sliding_window=64))
    s = step_time(
        Deployment(spec=spec, weights=weights(spec)), context=10, batch=1, bandwidth_gbs=100
    )
    assert s.crossover_context is None


def test_moe_reads_only_touched_experts():
    m = get_model("mixtral-8x7b")
    w = m.weights("bf16")
    moe = m.spec.moe
    # Batch 1 reads top-2 of 8 experts per layer: E x (1 - (1 - k/E)^1) = k.
    assert moe.experts_touched(1) == pytest.approx(2)
    s1 = step_time(Deployment(spec=m.spec, weights=w), context=0, batch=1, bandwidth_gbs=1000)
    # The untied input embedding (32,000 x 4,096 BF16) is gathered, one row per token.
    table, row = 32_000 * 4096 * 2, 4096 * 2
    assert s1.weight_read_bytes == (
        w.dense_bytes - table + row + round(32 * 2 * w.bytes_per_expert)
    )
    # A large batch touches every expert: the read approaches all resident weights.
    s256 = step_time(Deployment(spec=m.spec, weights=w), context=0, batch=256, bandwidth_gbs=1000)
    assert s256.weight_read_bytes == pytest.approx(w.bytes - table + 256 * row, rel=1e-6)
    # Expected distinct experts at batch 4: 8 x (1 - (6/8)^4) = 5.46875.
    assert moe.experts_touched(4) == pytest.approx(8 * (1 - 0.75**4))


def test_tensor_parallel_step_is_per_gpu():
    m = get_model("llama-3.1-70b")
    dep = Deployment(spec=m.spec, weights=m.weights("bf16"))
    one = step_time(dep, context=4096, batch=8, bandwidth_gbs=3350)
    four = step_time(dep.but(tp=4), context=4096, batch=8, bandwidth_gbs=3350)
    assert four.step_time_s == pytest.approx(one.step_time_s / 4, rel=1e-6)
    assert four.crossover_context == pytest.approx(one.crossover_context, abs=1)


def test_compute_bound_at_huge_batch():
    m = get_model("llama-3.1-8b")
    gpu = get_gpu("h100-sxm-80gb")
    s = step_time(
        Deployment(spec=m.spec, weights=m.weights()),
        context=1,
        batch=4096,
        bandwidth_gbs=gpu.bandwidth_gbs,
        peak_tflops=gpu.bf16_tflops,
    )
    # 2 x 4096 x 7.5e9 FLOPs / 989.4e12 ~ 62 ms against ~5 ms of reads: compute bound.
    assert s.bound == "compute"


def test_prefill_flops():
    spec = spec_from_config(llama_config())  # 4 layers, 8 heads of 64
    p = prefill(spec, 100, peak_tflops=100, mfu=0.5)
    assert p.linear_flops == 2 * spec.active_params * 100
    # Causal attention: every layer does QK^T and AV, 2 FLOPs per multiply-add, over the
    # 100 x 101 / 2 attended pairs: 4 layers x 2 x 8 heads x (64 + 64) x 5050.
    assert p.attention_flops == 4 * 2 * 8 * 128 * 5050
    assert p.time_s == pytest.approx(p.flops / (100e12 * 0.5))


def test_prefill_sliding_window_caps_attention():
    full = spec_from_config(llama_config())
    slid = spec_from_config(llama_config(sliding_window=10))
    assert prefill(slid, 1000, 100).attention_flops < prefill(full, 1000, 100).attention_flops / 40


def test_token_passes():
    assert token_passes(1000) == {"with_cache": 1000, "without_cache": 500_500, "ratio": 500.5}
    # Prefill of 100, then steps running 101, 102, ..., 110 tokens without a cache.
    r = token_passes(10, prompt_tokens=100)
    assert r["with_cache"] == 110 and r["without_cache"] == 100 + sum(100 + i for i in range(1, 11))


def test_offload_break_even():
    m = get_model("llama-3.1-8b")
    slow = offload_vs_recompute(m.spec, 64, link_gbs=0.001, peak_tflops=989)
    assert not slow.offload_wins  # a 1 MB/s link never beats recompute at 64 tokens
    fast = offload_vs_recompute(m.spec, 8192, link_gbs=63, peak_tflops=989)
    assert fast.offload_wins and fast.reload_s == pytest.approx(8192 * 131_072 / 63e9)
    # At 2 GB/s reloading a token (131,072 B -> 65.5 us) costs more than the linear part of
    # recomputing it (2 x 7.5e9 FLOPs at 0.5 x 989 TFLOPS -> 30 us), so reloading only wins once
    # attention's quadratic term has grown: around 66K tokens.
    mid = offload_vs_recompute(m.spec, 1000, link_gbs=2, peak_tflops=989)
    be = mid.break_even_tokens
    assert be is not None and 50_000 < be < 90_000
    at = offload_vs_recompute(m.spec, be, link_gbs=2, peak_tflops=989)
    before = offload_vs_recompute(m.spec, be - 1, link_gbs=2, peak_tflops=989)
    assert at.offload_wins and not before.offload_wins


@pytest.mark.parametrize(
    "kw",
    [
        dict(context=-1),
        dict(batch=0),
        dict(bandwidth_gbs=0),
        dict(bandwidth_gbs=float("inf")),
        dict(kv_dtype="fp9"),
        dict(peak_tflops=-3),
    ],
)
def test_bad_step_inputs(kw):
    m = get_model("llama-3.1-8b")
    args = dict(context=10, batch=1, bandwidth_gbs=100, kv_dtype="bf16")
    args.update(kw)
    with pytest.raises(ValueError):
        dep = Deployment(spec=m.spec, weights=m.weights()).but(kv_dtype=args.pop("kv_dtype"))
        step_time(dep, **args)


def test_prefill_never_beats_one_read_of_the_weights():
    # Llama 3.1 8B on an H100 (989.4 TFLOPS, 3,350 GB/s), 16 tokens: compute is
    # 2 x 8.03e9 x 16 / (989.4e12 x 0.5) = 0.52 ms, but the weights (16.06 GB in BF16) take
    # 16.06e9 / 3,350e9 = 4.79 ms to read once: TTFT is that, memory bound.
    from kvcalc import get_gpu, get_model, prefill

    m, gpu = get_model("llama-3.1-8b"), get_gpu("h100-sxm-80gb")
    w = m.weights()
    p = prefill(
        m.spec, 16, gpu.bf16_tflops, weight_read_bytes=w.bytes, bandwidth_gbs=gpu.bandwidth_gbs
    )
    assert p.memory_time_s == w.bytes / (gpu.bandwidth_gbs * 1e9)
    assert p.time_s == p.memory_time_s > p.compute_time_s and p.bound == "memory"
    long = prefill(
        m.spec, 8192, gpu.bf16_tflops, weight_read_bytes=w.bytes, bandwidth_gbs=gpu.bandwidth_gbs
    )
    assert long.bound == "compute" and long.time_s == long.compute_time_s
