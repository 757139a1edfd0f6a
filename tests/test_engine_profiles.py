"""Engine profiles (issue 41): kvcalc.perf.engines, --engine on simulate, step-time and prefill,
and the parallel layouts the training rows state (attention data parallel, expert parallel,
INT4 experts). Expected numbers are worked by hand from config fields and datasheet figures."""

from __future__ import annotations

import json
import math

import pytest
from conftest import ROOT, bench_module

from kvcalc import get_gpu
from kvcalc.cache.deployment import Deployment
from kvcalc.cache.weight_bytes import weights
from kvcalc.cli import main
from kvcalc.config.hfconfig import load_config_file, spec_from_config
from kvcalc.perf import calibration as cal
from kvcalc.perf import engines
from kvcalc.perf.sim import Speed, setup

AIC = ROOT / "tests" / "data" / "benchmarks" / "aic"


def aic():
    return bench_module("aic")


def cfg(name: str):
    return spec_from_config(load_config_file(str(AIC / "configs" / name)), name=name)


# -- the profiles ------------------------------------------------------------------------------


def test_every_engine_of_the_training_rows_has_a_profile_with_sane_coefficients():
    fitted = {p.engine for p in engines.PROFILES.values()}
    assert fitted == {"vllm", "sglang", "trtllm"}
    for p in engines.PROFILES.values():
        for share in ("bw_share", "kv_bw_share", "mfu", "attn_mfu"):
            assert 0 < getattr(p, share) <= 1, (p.key, share)
        assert 0 <= p.step_overhead_s < 0.02 and 0 <= p.api_overhead_s < 0.5
        assert 0 <= p.allreduce_latency_s < 1e-3 and 0 <= p.ep_latency_s < 1e-3
        assert p.fitted_rows > 0
        assert p.engine in engines.SCHEDULER_SOURCES
        m = p.step_model()
        assert m.engine == p.key and not m.is_calibrated and not m.is_ideal


def test_each_training_row_belongs_to_a_fitted_profile():
    rows = aic().load_rows()
    assert len(rows) == 992
    for r in rows:
        p, note = engines.resolve(aic().family(r))
        assert note is None, r.id


@pytest.mark.parametrize(
    "asked, got, says",
    [
        ("vllm@0.18.0", "vllm@0.18.0", None),
        ("vllm@0.18", "vllm@0.18.0", None),
        # 0.17 is one minor release from 0.16 and from 0.18: the tie goes to the older
        ("vllm@0.17.1", "vllm@0.16.0", "nearest"),
        ("vllm@0.13.0", "vllm@0.12.0", "nearest"),
        ("vllm@0.30.0", "vllm@0.18.0", "nearest"),
        ("sglang@0.5.6.post2", "sglang@0.5.6", None),
        ("sglang@glm5-hopper", "sglang@0.5.9", None),  # the build's release line
        ("trtllm@1.0.0rc3", "trtllm@1.0.0", None),
        ("tensorrt-llm@1.1", "trtllm@1.0.0", "nearest"),
    ],
)
def test_a_version_takes_its_own_profile_or_the_nearest_and_says_so(asked, got, says):
    p, note = engines.resolve(asked)
    assert p.key == got
    assert (note is None) == (says is None)
    if says:
        assert says in note and p.version in note


def test_no_version_takes_the_newest_and_an_unknown_engine_is_refused():
    p, note = engines.resolve("vllm")
    assert p.key == "vllm@0.18.0" and "newest" in note
    with pytest.raises(ValueError, match="vllm@0.18.0"):
        engines.resolve("lmdeploy@0.4")
    with pytest.raises(ValueError, match="numbers"):
        engines.resolve("vllm@latest")


# -- physics: attention data parallel, expert parallel, INT4 experts ----------------------------


def _setup(spec, w, **kw):
    dep = Deployment(spec=spec, weights=w, memory_bytes=141 * 10**9, **kw)
    model = engines.resolve("vllm@0.12.0")[0].step_model()
    return setup(
        dep, 4096, Speed(bandwidth_gbs=4800, peak_tflops=1979, model=model, tp_link_gbs=450)
    )


def test_attention_data_parallel_splits_the_batch_and_not_the_attention_weights():
    spec = cfg("Qwen--Qwen3-235B-A22B-FP8.json")
    w = weights(spec, "fp8")
    one = _setup(spec, w, tp=2)
    two = _setup(spec, w, tp=2, attention_dp=2)
    # each GPU of a rank reads the KV of half the batch: half the bytes per batch token
    assert two.kv_read_bytes_per_token == pytest.approx(one.kv_read_bytes_per_token / 2)
    # the engine holds two ranks' requests: twice the caps
    assert two.max_num_seqs == 2 * one.max_num_seqs
    # a step of one token: the non-expert weights of a rank (split by tp = 2), the experts that
    # token touches (8 of 128 in each of 94 layers) over all 4 GPUs. Qwen3-235B's config:
    # 94 layers, hidden 4,096, moe_intermediate 1,536, 3 matrices an expert, FP8 = 1 byte.
    touched = 94 * 8 * 3 * 4096 * 1536
    non_expert_one_token = one.weights_read(1) * 2 - touched
    assert two.weights_read(1) == pytest.approx(non_expert_one_token / 2 + touched / 4, rel=1e-3)


def test_expert_parallel_exchanges_tokens_around_each_moe_layer():
    spec = cfg("Qwen--Qwen3-235B-A22B-FP8.json")
    s = _setup(spec, weights(spec, "fp8"), tp=4, ep=4)
    # 94 MoE layers (Qwen3-235B: every layer), a dispatch and a combine each; attention's one
    # all-reduce per layer at tp 4
    assert s.ep_exchanges == 2 * 94 and s.allreduces == 94
    with pytest.raises(ValueError, match="no experts"):
        dense = cfg("Qwen--Qwen3-32B.json")
        _setup(dense, weights(dense, "bf16"), tp=2, ep=2)
    with pytest.raises(ValueError, match="more GPUs"):
        _setup(spec, weights(spec, "fp8"), tp=2, ep=4)


def test_attention_data_parallel_ranks_meet_at_each_moe_layer_and_dense_replicas_never():
    """vLLM's data parallel deployment guide: the expert layers of all DP ranks synchronise in
    every forward pass (FusedMoE gathers every rank's tokens before the experts and scatters
    the results back), as expert parallel ranks do; a dense model's DP ranks are replicas."""
    spec = cfg("Qwen--Qwen3-235B-A22B-FP8.json")
    w = weights(spec, "fp8")
    # TP 1, DP 4: no tensor parallel all-reduce, a gather and a scatter at each of 94 MoE layers
    s = _setup(spec, w, tp=1, attention_dp=4)
    assert (s.allreduces, s.ep_exchanges) == (0, 2 * 94)
    # TP 2, DP 2: attention's all-reduce in each of the 94 layers as well
    s = _setup(spec, w, tp=2, attention_dp=2)
    assert (s.allreduces, s.ep_exchanges) == (94, 2 * 94)
    # the fixed time: 94 all-reduces and 188 exchanges, each a latency and its bytes on the link
    lat = engines.resolve("vllm@0.12.0")[0].ep_latency_s
    assert s.fixed_seconds(1) - s.step_overhead_s == pytest.approx(
        94 * (s.allreduce_latency_s + 1 * 4096 * 2 / (450 * 1e9))
        + 2 * 94 * (lat + 0.5 * 4096 * 2 / (450 * 1e9)),
        rel=1e-9,
    )
    dense = cfg("Qwen--Qwen3-32B.json")
    r = _setup(dense, weights(dense, "bf16"), tp=1, attention_dp=2)
    assert (r.allreduces, r.ep_exchanges) == (0, 0)


def test_a_prompt_prefills_whole_on_its_own_data_parallel_rank():
    """vLLM's data parallel ranks each schedule their own requests under their own
    max_num_batched_tokens (the DP coordinator sends a request to one engine): one prompt runs
    on one rank, in that rank's chunks, while the other ranks' attention and dense layers have
    nothing of it to do. A dense model's DP ranks are replicas: a prompt alone takes as long
    and as many steps at DP 2 or 4 as on one rank. Before, the simulator spread it over the
    ranks (half the time at DP 2) in chunks of their summed budget (one step at DP 4)."""
    from kvcalc import get_gpu, get_model
    from kvcalc.perf.sim.plan import lone_prompt

    m, g = get_model("llama-3.1-8b"), get_gpu("h100-sxm-80gb")
    model = engines.PROFILES["vllm@0.18.0"].step_model()
    for prompt, steps in ((2_000, 1), (20_000, 3)):  # 20,000 in 8,192 + 8,192 + 3,616
        alone = [
            lone_prompt(Deployment(spec=m.spec, gpu=g, weights=m.weights(), attention_dp=dp),
                        prompt, model)
            for dp in (1, 2, 4)
        ]  # fmt: skip
        assert [a.steps for a in alone] == [steps] * 3
        assert [a.chunk for a in alone] == [8192] * 3
        assert alone[1].engine_s == pytest.approx(alone[0].engine_s, rel=1e-12)
        assert alone[2].engine_s == pytest.approx(alone[0].engine_s, rel=1e-12)


def test_sglang_divides_its_prefill_chunk_among_the_attention_ranks():
    # SGLang's server_args.py (_handle_data_parallelism, 0.5.1-0.5.9): with DP attention,
    # chunked_prefill_size // dp_size. Its 8,192 on an H200 at DP 4: chunks of 2,048 tokens, an
    # 8,192-token prompt in 4 steps; vLLM's ranks each keep their 8,192: one step.
    from kvcalc.perf.sim.plan import lone_prompt

    spec = cfg("Qwen--Qwen3-235B-A22B-FP8.json")
    dep = Deployment(
        spec=spec, gpu=get_gpu("h200-141gb"), weights=weights(spec, "fp8"), attention_dp=4, ep=4
    )
    sglang = lone_prompt(dep, 8192, engines.PROFILES["sglang@0.5.6"].step_model())
    vllm = lone_prompt(dep, 8192, engines.PROFILES["vllm@0.18.0"].step_model())
    assert (sglang.chunk, sglang.steps, vllm.chunk, vllm.steps) == (2048, 4, 8192, 1)
    # one rank: its budget, by the GPU's memory (from 0.5.3: 16,384 above 160 GiB, 4,096 on an
    # A100 40 GB; 0.5.1 8,192 there); vLLM's defaults left to its release's own rules
    sg = engines.PROFILES["sglang@0.5.6"]
    assert sg.batching(get_gpu("h200-141gb").memory_bytes) == (4096, 8192, 0)
    assert sg.batching(get_gpu("b200").memory_bytes, 8) == (4096, 16384, 2048)
    assert sg.batching(get_gpu("a100-40gb").memory_bytes)[1] == 4096
    assert engines.PROFILES["sglang@0.5.1"].batching(get_gpu("a100-40gb").memory_bytes)[1] == 8192
    assert engines.PROFILES["vllm@0.18.0"].batching(10**11) == (None, None, 0)


def test_an_engine_profile_batches_as_its_engine_does_on_the_gpu(capsys):
    # vLLM's defaults depend on the GPU (EngineArgs.get_batch_defaults: max_num_seqs 256 and
    # max_num_batched_tokens 2,048 for vllm serve below 70 GiB): a vLLM profile on an L40S
    # (46,068 MiB) keeps its release's rule, not the 1,024 and 8,192 of the H100s it was fitted
    # on. SGLang's chunked_prefill_size there is 4,096 (35-60 GiB), TensorRT-LLM's 8,192.
    argv = ["simulate", "--model", "qwen3-8b", "--gpu", "l40s", "--users", "2", "--requests"]
    argv += ["2", "--prompt-tokens", "128", "--output-tokens", "4", "--engine"]
    said = {}
    for profile in ("vllm@0.18.0", "sglang@0.5.9", "trtllm@1.0"):
        assert main([*argv, profile]) == 0
        said[profile] = capsys.readouterr().out
    assert "max_num_seqs 256, max_num_batched_tokens 2,048" in said["vllm@0.18.0"]
    assert "max_num_seqs 4,096, max_num_batched_tokens 4,096" in said["sglang@0.5.9"]
    assert "max_num_seqs 2,048, max_num_batched_tokens 8,192" in said["trtllm@1.0"]


def test_the_busiest_data_parallel_rank_takes_the_largest_chunks_first():
    from kvcalc.perf.sim.scheduler import busiest_rank

    # (tokens, reads, pairs, sliding reads, sliding pairs, requests)
    one = (8192, 8192, 8192 * 8193 // 2, 0, 0, 1)
    assert busiest_rank([one], 4) == one[:5]  # a lone chunk: all on one rank
    # eight alike chunks on four ranks: two each
    assert busiest_rank([(1000, 1000, 7, 0, 0, 8)], 4) == (2000, 2000, 14, 0, 0)
    # 5,000 + 3,000 + 3,000 + 2,000 on two ranks: 5,000 | 3,000, then 3,000 to the second
    # (6,000), then 2,000 to the first (7,000): the busiest holds 7,000
    chunks = [(3000, 3000, 3, 0, 0, 2), (2000, 2000, 2, 0, 0, 1), (5000, 5000, 5, 0, 0, 1)]
    assert busiest_rank(chunks, 2) == (7000, 7000, 7, 0, 0)


def test_kimi_int4_experts_beside_16_bit_attention():
    spec = cfg("moonshotai--Kimi-K2.5.json")
    bf16 = weights(spec, "bf16")
    mixed = weights(spec, "bf16", "int4")
    # Kimi-K2.5 (text_config): 384 routed experts of 3 x 7,168 x 2,048 in 60 MoE layers
    # (61 layers, the first dense); INT4 is 0.5 B a weight against BF16's 2
    experts = 384 * 3 * 7168 * 2048 * 60
    assert bf16.bytes - mixed.bytes == experts * 2 - experts // 2


def test_int4_experts_and_the_layout_from_the_command_line(capsys):
    argv = [
        "simulate",
        "--config",
        str(AIC / "configs" / "moonshotai--Kimi-K2.5.json"),
        "--gpu",
        "h200-141gb",
        "--tp",
        "8",
        "--weight-dtype",
        "bf16",
        "--expert-weight-dtype",
        "int4",
        "--users",
        "4",
        "--requests",
        "8",
        "--prompt-tokens",
        "1024",
        "--output-tokens",
        "64",
        "--engine",
        "vllm@0.16.0",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "vLLM 0.16.0 profile" in out and "error band: vLLM 0.16.0 profile" in out
    assert main(argv[:2] + [str(AIC / "configs" / "Qwen--Qwen3-32B.json")] + argv[3:]) != 0
    assert "no routed experts" in capsys.readouterr().err


def _bare(spec, w, model, **kw):
    """A setup at a round GPU (1,000 GB/s, 1,000 TFLOPS, no link) for hand arithmetic."""
    dep = Deployment(spec=spec, weights=w, memory_bytes=141 * 10**9, **kw)
    return setup(dep, 4096, Speed(bandwidth_gbs=1000, peak_tflops=1000, model=model))


def _model(**coefs):
    base = dict(
        bw_share=1.0,
        kv_bw_share=1.0,
        step_overhead_s=0.0,
        mfu=1.0,
        attn_mfu=1.0,
        allreduce_latency_s=0.0,
        ep_latency_s=0.0,
        api_overhead_s=0.0,
        seq_overhead_s=0.0,
        request_overhead_s=0.0,
        layer_overhead_s=0.0,
        expert_bw_share=1.0,
        expert_mfu=1.0,
    )
    return cal.StepModel(name="test", allreduce=True, engine="vllm@0.18.0", **(base | coefs))


def test_host_time_per_request_and_per_new_prefill_add_to_a_step():
    spec = cfg("Qwen--Qwen3-32B.json")
    w = weights(spec, "bf16")
    s = _bare(spec, w, _model(seq_overhead_s=1e-4, request_overhead_s=1e-3))
    base = s.step_seconds(8, 8 * 1000, 0)  # 8 decodes, no host counts given
    # 8 requests in the step, 2 of them starting their prefill: 8 x 0.1 ms + 2 x 1 ms
    assert s.step_seconds(8, 8 * 1000, 0, host=(8, 2)) - base == pytest.approx(8e-4 + 2e-3)


def test_a_fixed_cost_per_layer_is_the_same_at_any_tensor_parallel_size():
    spec = cfg("Qwen--Qwen3-32B.json")  # 64 layers
    w = weights(spec, "bf16")
    m = _model(layer_overhead_s=5e-5, allreduce_latency_s=0.0)
    one, eight = _bare(spec, w, m), _bare(spec, w, m, tp=8)
    assert one.step_overhead_s == eight.step_overhead_s == pytest.approx(64 * 5e-5)


def test_the_routed_experts_are_read_at_their_own_share_of_the_bandwidth():
    spec = cfg("Qwen--Qwen3-235B-A22B-FP8.json")
    w = weights(spec, "fp8")
    full = _bare(spec, w, _model(), tp=4)
    half = _bare(spec, w, _model(expert_bw_share=0.5), tp=4)
    # one decode token touches 8 of 128 experts in each of 94 layers, 3 x 4,096 x 1,536 FP8
    # bytes each, split over 4 GPUs: read at half the bandwidth they take twice the time
    touched = 94 * 8 * 3 * 4096 * 1536 / 4
    extra = half.step_seconds(1, 0, 0) - full.step_seconds(1, 0, 0)
    assert extra == pytest.approx(touched / 1000e9, rel=1e-6)
    # a dense model has no experts: the share changes nothing
    dense = cfg("Qwen--Qwen3-32B.json")
    a = _bare(dense, weights(dense, "bf16"), _model())
    b = _bare(dense, weights(dense, "bf16"), _model(expert_bw_share=0.5))
    assert a.step_seconds(1, 0, 0) == b.step_seconds(1, 0, 0)


def test_the_routed_experts_gemms_run_at_their_own_mfu():
    """An 8,192-token prefill chunk of Qwen3-235B-A22B (FP8, TP 4, a GPU of 1,000 GB/s and
    1,000 TFLOPS): with the experts' GEMMs at half the MFU of the rest, the chunk takes their
    FLOPs once more. Each token uses 8 experts in each of 94 layers, 3 x 4,096 x 1,536
    parameters each (config.json), 2 FLOPs a parameter, split over 4 GPUs. A dense model has no
    experts: the coefficient changes nothing."""
    spec = cfg("Qwen--Qwen3-235B-A22B-FP8.json")
    w = weights(spec, "fp8")
    full = _bare(spec, w, _model(), tp=4)
    half = _bare(spec, w, _model(expert_mfu=0.5), tp=4)
    flops = 2 * 94 * 8 * 3 * 4096 * 1536 * 8192 / 4
    extra = half.step_seconds(8192, 0, 0) - full.step_seconds(8192, 0, 0)
    assert full.step_seconds(8192, 0, 0) > full.weights_read(8192) / 1e12  # compute bound
    assert extra == pytest.approx(flops / 1e15, rel=1e-9)
    dense = cfg("Qwen--Qwen3-32B.json")
    a = _bare(dense, weights(dense, "bf16"), _model())
    b = _bare(dense, weights(dense, "bf16"), _model(expert_mfu=0.5))
    assert a.step_seconds(8192, 0, 0) == b.step_seconds(8192, 0, 0)
    with pytest.raises(ValueError, match="experts' MFU"):
        _model(expert_mfu=1.5)


def test_the_gemms_of_fp8_weights_run_at_their_part_of_the_mfu():
    """A 8,192-token prefill chunk of Qwen3-32B in FP8 (one GPU of 1,000 GB/s and 1,000 TFLOPS at
    every format, compute bound): with FP8 GEMMs at half of the MFU the chunk takes its GEMM
    FLOPs once more, 2 x active parameters x 8,192 (config.json's), while its attention keeps
    its own MFU. A 16-bit model's step is unchanged."""
    spec = cfg("Qwen--Qwen3-32B.json")
    w = weights(spec, "fp8")
    full = _bare(spec, w, _model(fp8_gemm_share=1.0))
    half = _bare(spec, w, _model(fp8_gemm_share=0.5))
    gemm_flops = 2 * spec.active_params * 8192
    pairs = 8192 * 8193 // 2  # the chunk's causal (query, key) pairs
    extra = half.step_seconds(8192, 0, pairs) - full.step_seconds(8192, 0, pairs)
    assert full.step_seconds(8192, 0, 0) > full.weights_read(8192) / 1e12  # compute bound
    assert extra == pytest.approx(gemm_flops / 1e15, rel=1e-9)
    bf16 = weights(spec, "bf16")
    a = _bare(spec, bf16, _model(fp8_gemm_share=1.0))
    b = _bare(spec, bf16, _model(fp8_gemm_share=0.5))
    assert a.step_seconds(8192, 0, pairs) == b.step_seconds(8192, 0, pairs)
    with pytest.raises(ValueError, match="FP8 GEMMs' part of the MFU"):
        _model(fp8_gemm_share=1.5)


def test_a_profile_times_the_gemms_and_attention_one_after_the_other():
    """A mixed step of Qwen3-32B (16-bit, one GPU at 1,000 GB/s and 1,000 TFLOPS): a
    2,048-token prefill chunk beside decodes that read 262,144 cached tokens. The GEMMs are
    compute bound, the KV reads memory bound; they are different kernels, so an engine profile
    adds the two, where one roofline for the whole step hides the reads under the FLOPs."""
    spec = cfg("Qwen--Qwen3-32B.json")
    w = weights(spec, "bf16")
    s = _bare(spec, w, _model())
    # config.json: 64 layers x 8 KV heads x head_dim 128 x (K, V) x 2 bytes
    assert s.kv_read_bytes_per_token == 64 * 8 * 128 * 2 * 2 == 262_144
    tokens, cached = 2048, 262_144
    gemms = 2 * spec.active_params * tokens / 1e15  # about 0.134 s
    weights_s = s.weights_read(tokens) / 1e12  # about 0.066 s: under the FLOPs
    reads = cached * 262_144 / 1e12  # 0.0687 s
    assert gemms > weights_s  # the GEMMs are compute bound
    assert s.step_seconds(tokens, cached, 0) == pytest.approx(gemms + reads, rel=1e-9)
    pooled = _bare(spec, w, cal.CALIBRATED)  # one roofline: max(all FLOPs, all bytes)
    f, b = gemms / cal.MFU, (s.weights_read(tokens) + cached * 262_144) / (1e12 * cal.BW_SHARE)
    assert pooled.step_seconds(tokens, cached, 0) == pytest.approx(
        max(f, b) + pooled.step_overhead_s, rel=1e-9
    )


def test_step_time_under_a_profile_adds_the_gemms_and_attention_too(capsys):
    """``step-time --engine`` keeps the simulator's law: Llama 3.1 8B on an H100 SXM at batch
    256 and 8,192 tokens, the GEMMs then attention, each under its own roofline."""
    argv = ["step-time", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--context",
            "8192", "--batch", "256", "--engine", "vllm@0.18.0", "--json"]  # fmt: skip
    assert main(argv) == 0
    j = json.loads(capsys.readouterr().out)
    p = engines.PROFILES["vllm@0.18.0"]
    # config: 32 layers x 8 KV heads x head_dim 128 x (K, V) x 2 bytes per token
    assert j["kv_read_bytes"] == 256 * 8192 * 32 * 8 * 128 * 2 * 2
    bw = 3350e9
    weights_s = j["weight_read_bytes"] / (bw * p.bw_share)
    gemms = j["gemm_time_s"] / p.mfu
    reads = j["kv_read_bytes"] / (bw * p.kv_bw_share)
    attention = (j["compute_time_s"] - j["gemm_time_s"]) / p.attn_mfu
    host = p.seq_overhead_s * 256
    gpu = (
        max(weights_s, gemms) + max(reads, attention) + p.step_overhead_s + 32 * p.layer_overhead_s
    )
    want = gpu + host - p.host_overlap * min(gpu, host)
    assert j["estimated_step_time_s"] == pytest.approx(want, rel=1e-9)
    # the GEMMs: 8,030,261,248 parameters less the 128,256 x 4,096 input embedding (a gather,
    # not a GEMM), 2 FLOPs each per token, at the H100's 989.4 dense 16-bit TFLOPS
    assert j["gemm_time_s"] == pytest.approx(2 * (8_030_261_248 - 128_256 * 4096) * 256 / 989.4e12)


def test_step_time_under_a_profile_reads_the_routed_experts_at_their_own_share(capsys):
    """``step-time --engine`` on a MoE model: the experts a decode step touches are read at the
    profile's expert share, as the simulator the profile was fitted through reads them (before:
    at the dense share, 6-37% fast on Qwen3-235B, DeepSeek-V3 and gpt-oss). Qwen3-235B-A22B
    in FP8 on 4 H200s at batch 1 and 2,048 tokens."""
    argv = ["step-time", "--model", "qwen3-235b-a22b", "--gpu", "h200-141gb", "--tp", "4",
            "--weight-dtype", "fp8", "--context", "2048", "--batch", "1",
            "--engine", "vllm@0.18.0", "--json"]  # fmt: skip
    assert main(argv) == 0
    j = json.loads(capsys.readouterr().out)
    p = engines.PROFILES["vllm@0.18.0"]
    assert p.expert_bw_share < p.bw_share  # the case this test is about
    # config.json: one token routes to 8 of 128 experts in each of 94 layers; an expert is
    # gate, up and down, 3 x 4,096 x 1,536 FP8 bytes; 4 GPUs split them
    experts = math.ceil(94 * 8 * 3 * 4096 * 1536 / 4)
    assert j["expert_read_bytes"] == experts
    bw = 4800e9  # the H200's datasheet bandwidth
    weights_s = (j["weight_read_bytes"] - experts) / (bw * p.bw_share)
    weights_s += experts / (bw * p.expert_bw_share)
    reads = j["kv_read_bytes"] / (bw * p.kv_bw_share)
    gemms = j["gemm_time_s"] / p.mfu
    attention = (j["compute_time_s"] - j["gemm_time_s"]) / p.attn_mfu
    # two all-reduces a layer of one token's 4,096 BF16 activations over NVLink (ring: 2 x 3/4)
    wire = 2 * 3 / 4 * 4096 * 2 / (get_gpu("h200-141gb").tp_link_gbs * 1e9)
    allreduce = 2 * 94 * (p.allreduce_latency_s + wire)
    gpu = max(weights_s, gemms) + max(reads, attention) + p.step_overhead_s
    gpu += 94 * p.layer_overhead_s + allreduce
    host = p.seq_overhead_s
    want = gpu + host - p.host_overlap * min(gpu, host)
    assert j["estimated_step_time_s"] == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize(
    "model, gpu, tp, dtype",
    [
        ("llama-3.1-8b", "h100-sxm-80gb", 1, "bf16"),
        ("qwen3-235b-a22b", "h200-141gb", 4, "fp8"),
        ("deepseek-v3", "h200-141gb", 8, "fp8"),
        ("mixtral-8x7b", "h100-sxm-80gb", 2, "bf16"),
    ],
)
@pytest.mark.parametrize("profile", ["vllm@0.18.0", "sglang@0.5.6", "trtllm@1.0.0"])
def test_a_profiles_decode_step_is_the_simulators_on_every_page(model, gpu, tp, dtype, profile):
    """The step-time command and the engineer pages (``estimate_step``) time a decode step
    under a profile as the simulator's clock times the same step: batch 1, 8 and 64 at 2,048
    tokens, dense and MoE, MLA included."""
    from kvcalc import get_gpu, get_model, step_time

    spec, g = get_model(model).spec, get_gpu(gpu)
    w = weights(spec, dtype)
    dep = Deployment(spec=spec, gpu=g, weights=w, tp=tp)
    sm = engines.PROFILES[profile].step_model()
    att = g.attention_tflops("bf16")
    s = setup(dep, 4096, Speed.of(g, w.dtype, sm, attention_peak_tflops=att))
    for b in (1, 8, 64):
        ideal = step_time(dep, context=2048, batch=b, peak_tflops=g.peak_tflops(w.dtype),
                          attention_tflops=att)  # fmt: skip
        est = cal.estimate_step(spec, ideal, sm, tp=tp, link_gbs=g.tp_link_gbs,
                                weight_dtype=w.dtype)  # fmt: skip
        clock = s.step_seconds(b, b * 2048, 0, decode_pairs=b * 2048, scheduled=b, host=(b, 0))
        assert est.time_s == pytest.approx(clock, rel=1e-6), b


@pytest.mark.parametrize("context", [2048, 8192, 8193, 12000])
def test_a_chunked_models_decode_step_is_the_simulators_past_a_chunk(context):
    """Llama 4 Scout (36 of 48 layers attend within chunks of 8,192 tokens): step-time and
    the pages read each chunked layer's chunk so far, (context - 1) % 8,192 + 1 tokens, as the
    simulator's decode step does: 2,048 and 8,192 at 8,192 tokens, 1 at 8,193, 3,808 at
    12,000."""
    from kvcalc import get_gpu, step_time

    spec = spec_from_config(
        load_config_file(ROOT / "tests/data/configs/llama-4-scout-17b-16e.json")
    )
    g = get_gpu("h200-141gb")
    w = weights(spec, "bf16")
    dep = Deployment(spec=spec, gpu=g, weights=w, tp=4)
    sm = engines.PROFILES["vllm@0.18.0"].step_model()
    s = setup(dep, 16384, Speed.of(g, w.dtype, sm))
    chunk_read = {2048: 2048, 8192: 8192, 8193: 1, 12000: 3808}[context]
    for b in (1, 8):
        ideal = step_time(dep, context=context, batch=b, peak_tflops=g.peak_tflops(w.dtype))
        est = cal.estimate_step(spec, ideal, sm, tp=4, link_gbs=g.tp_link_gbs,
                                weight_dtype=w.dtype)  # fmt: skip
        clock = s.step_seconds(b, b * context, 0, b * chunk_read, b * chunk_read,
                               decode_pairs=b * context, scheduled=b, host=(b, 0))  # fmt: skip
        assert est.time_s == pytest.approx(clock, rel=1e-6), b
        # the cache read: 12 full layers' every token and 36 chunked layers' chunk so far, 2
        # KV heads of 128 a GPU, K and V in BF16: 1,024 B a token and layer
        assert ideal.kv_read_bytes == b * 1024 * (12 * context + 36 * chunk_read)


def test_the_crossover_of_a_chunked_model_finds_the_first_context_past_the_sawtooth():
    # Llama 4 Scout at TP 4, batch 1: a step reads 1,024 x (12 n + 36 x ((n - 1) % 8,192 + 1))
    # bytes a GPU. Against 1,024 x 48 x 9,000 B of weights a GPU, the first chunk never gets
    # there (at most 1,024 x 48 x 8,192); in the second, 48 n - 36 x 8,192 >= 432,000 first
    # holds at n = 15,144. (Reading the most the layers hold, min(n, 8,192) tokens, gave
    # 11,424.)
    from kvcalc.perf.roofline import crossover_context

    spec = spec_from_config(
        load_config_file(ROOT / "tests/data/configs/llama-4-scout-17b-16e.json")
    )
    target = 1024 * 48 * 9000
    assert crossover_context(spec, 4 * target, 1, tp=4) == 15_144
    assert crossover_context(spec, 4 * 1024 * 48 * 7000, 1, tp=4) == 7000  # in the first chunk


def test_a_calibrations_gpu_factor_scales_the_gpus_time_and_not_the_hosts():
    """Qwen3-32B (16-bit, one GPU at 1,000 GB/s and 1,000 TFLOPS), 8 decodes reading 8,000
    cached tokens: the GPU's time is the weights' bytes plus 8,000 x 262,144 KV bytes at
    1,000 GB/s (every share 1, memory bound at batch 8). A calibration's factor of 1.25
    stretches that and leaves the host's 8 x 0.1 ms as it is (none of it hidden)."""
    spec = cfg("Qwen--Qwen3-32B.json")
    w = weights(spec, "bf16")
    one = _bare(spec, w, _model(seq_overhead_s=1e-4))
    slow = _bare(spec, w, _model(seq_overhead_s=1e-4, gpu_time_factor=1.25))
    gpu = (one.weights_read(8) + 8000 * 262_144) / 1e12
    assert one.step_seconds(8, 8000, 0) == pytest.approx(gpu, rel=1e-9)
    assert slow.step_seconds(8, 8000, 0) == pytest.approx(1.25 * gpu, rel=1e-9)
    assert slow.step_seconds(8, 8000, 0, host=(8, 0)) == pytest.approx(1.25 * gpu + 8e-4)
    # ... and the pages' decode step (estimate_step) is the simulator's under it too
    from dataclasses import replace

    from kvcalc import get_gpu, step_time

    g = get_gpu("h100-sxm-80gb")
    dep = Deployment(spec=spec, gpu=g, weights=w)
    sm = replace(engines.PROFILES["vllm@0.18.0"], gpu_time_factor=1.25).step_model()
    att = g.attention_tflops("bf16")
    s = setup(dep, 4096, Speed.of(g, w.dtype, sm, attention_peak_tflops=att))
    for b in (1, 64):
        ideal = step_time(dep, context=2048, batch=b, peak_tflops=g.peak_tflops(w.dtype),
                          attention_tflops=att)  # fmt: skip
        est = cal.estimate_step(spec, ideal, sm, tp=1, link_gbs=g.tp_link_gbs)
        clock = s.step_seconds(b, b * 2048, 0, decode_pairs=b * 2048, scheduled=b, host=(b, 0))
        assert est.time_s == pytest.approx(clock, rel=1e-6), b
    with pytest.raises(ValueError, match="factor on the GPU's time"):
        _model(gpu_time_factor=0.0)


def test_a_share_is_bounded_to_what_kernels_reach():
    for share, (lo, hi) in engines.SHARE_BOUNDS.items():
        assert 0 < lo < hi <= 1, share
        for p in engines.PROFILES.values():
            assert lo - 1e-9 <= getattr(p, share) <= hi + 1e-9, (p.key, share)


def test_vllms_serving_stack_time_is_below_what_one_whole_request_took():
    """Mooncake's published single request through vLLM 0.11.2 (128 prompt tokens, 1P1D) took
    46.09 ms from the client's send to its first token, prefill and KV move included
    (kvcalc.perf.sim.published); the profile times the rest of it (prefill, move, first
    decode step) at about 11 ms, so the serving stack's share, the profiles' api_overhead_s, is
    at most 35 ms, and the fit keeps it there (FIT_BOUNDS)."""
    from kvcalc.perf.sim.published import MOONCAKE_VLLM_1P1D

    assert MOONCAKE_VLLM_1P1D[0][:2] == (128, 46.09)
    assert engines.FIT_BOUNDS[("vllm", "api_overhead_s")][1] == 0.035
    for p in engines.PROFILES.values():
        for (engine, c), (lo, hi) in engines.FIT_BOUNDS.items():
            if p.engine == engine:
                assert lo - 1e-12 <= getattr(p, c) <= hi + 1e-12, (p.key, c)


# -- the command line ---------------------------------------------------------------------------


def test_step_time_and_prefill_take_an_engine(capsys):
    base = ["--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb"]
    assert main(["step-time", *base, "--context", "2048", "--batch", "16", "--engine",
                 "trtllm@1.0", "--json"]) == 0  # fmt: skip
    j = json.loads(capsys.readouterr().out)
    p = engines.PROFILES["trtllm@1.0.0"]
    assert j["engine"] == "trtllm@1.0.0" and j["step_model"]["kv_bw_share"] == p.kv_bw_share
    # the reads at their own shares plus the step's overhead (tp 1: no all-reduce)
    w, kv = j["weight_read_bytes"], j["kv_read_bytes"]
    bw = 3350e9
    memory = w / (bw * p.bw_share) + kv / (bw * p.kv_bw_share)
    assert j["estimated_step_time_s"] >= memory + p.step_overhead_s - 1e-12
    assert main(["prefill", *base, "--prompt-tokens", "2048", "--engine", "sglang@0.5.6",
                 "--json"]) == 0  # fmt: skip
    j = json.loads(capsys.readouterr().out)
    q = engines.PROFILES["sglang@0.5.6"]
    # served: the API overhead and one step's overhead on top of the compute at the profile's MFU
    assert j["estimated_ttft_s"] >= q.api_overhead_s + q.step_overhead_s
    assert j["engine"] == "sglang@0.5.6"


def test_a_vllm_profile_sizes_the_pool_by_its_own_release(capsys):
    # vLLM's default gpu_memory_utilization is 0.9 until 0.20 and 0.92 from then (PR #38284):
    # under vllm@0.18.0 the pool is 0.02 of the H100's 81,559 MiB smaller than the newest
    # release's, in blocks of 16 tokens x 128 KiB (Llama 3.1 8B, BF16): 815.59 blocks of 2 MiB.
    base = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--users", "2"]
    base += ["--requests", "4", "--prompt-tokens", "128", "--output-tokens", "16", "--json"]

    def blocks(*extra: str) -> int:
        assert main([*base, *extra]) == 0
        return json.loads(capsys.readouterr().out)["kv_pool_blocks"]

    own = blocks("--engine", "vllm@0.18.0")
    at_092 = blocks("--engine", "vllm@0.18.0", "--gpu-memory-utilization", "0.92")
    assert at_092 - own in (815, 816)
    assert blocks() == at_092  # no profile: the newest release kvcalc knows
    assert main([*base[:-1], "--engine", "vllm@0.18.0"]) == 0
    assert "vLLM 0.18.0's arithmetic at gpu_memory_utilization 0.9," in capsys.readouterr().out


def test_a_tensorrt_llm_profile_sizes_the_pool_as_tensorrt_llm_does(capsys):
    # TensorRT-LLM takes kv_cache_free_gpu_mem_fraction (0.9 by default) of the memory the
    # weights and the runtime leave, not vLLM's share of the whole: the same pool as asking for
    # --kv-free-fraction 0.9, larger than vLLM 0.18.0's 0.9 of the total by 0.1 x (weights +
    # the 2 GiB reserve): for Qwen3-8B in BF16 (16.38 GB of weights), 0.1 x 18.5 GB in blocks
    # of 16 tokens x 36 layers x 8 KV heads x 128 x K and V x 2 B (2.25 MiB): 785 blocks.
    base = ["simulate", "--model", "qwen3-8b", "--gpu", "h100-sxm-80gb", "--users", "2"]
    base += ["--requests", "4", "--prompt-tokens", "128", "--output-tokens", "16"]

    def run(*extra: str) -> dict:
        assert main([*base, *extra, "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    trt = run("--engine", "trtllm@1.0")["usable_blocks"]
    assert trt == run("--engine", "trtllm@1.0", "--kv-free-fraction", "0.9")["usable_blocks"]
    vllm = run("--engine", "vllm@0.18.0")["usable_blocks"]
    block = 16 * 36 * 8 * 128 * 2 * 2
    w = 8_190_735_360 * 2  # Qwen3-8B: 8.19 B parameters (its model card: 8.2B), BF16
    assert trt - vllm == pytest.approx(0.1 * (w + 2 * 2**30) / block, abs=2)  # whole blocks
    assert main([*base, "--engine", "trtllm@1.0"]) == 0
    assert "TensorRT-LLM's 0.9 of the memory the weights and the reserve leave" in (
        capsys.readouterr().out
    )


@pytest.mark.parametrize(
    ("version", "mib", "tp", "dp", "want"),
    [
        # From 0.5.3 (sglang/srt/server_args.py, _handle_gpu_memory_settings): 512 MiB + 1.5
        # MiB x the 8,192-token chunk (12,288) + 2 MiB x the CUDA-graph slots (256 below TP 4,
        # 512 from it) + tp / 8 GiB, at least 10 GiB above 60 GiB of memory.
        ("0.5.8", 81559, 1, 1, 0.835),  # 13,440 MiB: 68,119 / 81,559 = 0.83521
        ("0.5.6", 81559, 4, 1, 0.824),  # 14,336 MiB: 0.82423
        ("0.5.9", 143771, 8, 1, 0.897),  # H200, 14,848 MiB: 0.89672
        ("0.5.3", 143771, 2, 1, 0.906),  # 13,568 MiB: 0.90563
        # data-parallel attention on 8 GPUs (tp_size 8): 3 MiB x 512 slots x 8 ranks (12,288)
        # and, above 300 slots, 1.5 MiB more (6,144): 33,280 MiB, 0.76852
        ("0.5.8", 143771, 1, 8, 0.769),
        # an A100 40 GB (35-60 GiB: a 4,096-token chunk, 32 slots): 512 + 6,144 + 64 + 128 =
        # 6,848 MiB, no 10 GiB floor: 34,112 / 40,960 = 0.83281
        ("0.5.6", 40960, 1, 1, 0.833),
        # 0.5.0-0.5.2: (9.5 + tp / 2) GiB on 35-90 GiB, (12 + tp / 2) GiB on 90-160 GiB
        ("0.5.1", 81559, 1, 1, 0.874),  # 10,240 MiB: 0.87445
        ("0.5.1", 81559, 8, 1, 0.831),  # 13,824 MiB: 0.83050
        ("0.5.2", 143771, 2, 1, 0.907),  # 13,312 MiB: 0.90741
        ("0.5.1", 143771, 1, 8, 0.858),  # 16 GiB at tp_size 8, 4 more with DP attention: 0.85755
    ],
)
def test_sglangs_default_memory_fraction_is_its_releases_rule(version, mib, tp, dp, want):
    got = engines.sglang_mem_fraction(version, mib, tp * dp, attention_dp=dp)
    assert got == pytest.approx(want, abs=1e-9)


def test_an_sglang_profile_sizes_the_pool_as_sglang_does(capsys):
    # SGLang's pool is mem_fraction_static of the memory free at start less the weights
    # (model_runner_kv_cache_mixin.py, profile_max_num_token), not vLLM's share of the total.
    # Llama 3.1 8B in BF16 (8,030,261,248 parameters, its model card's 8.03B) on an H100 SXM
    # (81,559 MiB, 0.5 GiB in use at start), SGLang 0.5.6 at TP 1: 0.835 (above) of 81,047 MiB
    # = 67,674.2 MiB, less 15,316.5 MiB of weights = 52,357.7 MiB, in blocks of 16 tokens x
    # 32 layers x 8 KV heads x 128 x K and V x 2 B (2 MiB): 26,178 whole blocks.
    base = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--users", "2"]
    base += ["--requests", "4", "--prompt-tokens", "128", "--output-tokens", "16"]

    def run(*extra: str) -> dict:
        assert main([*base, *extra, "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    free_mib = 81559 - 512
    pool_mib = free_mib * 0.835 - 8_030_261_248 * 2 / 2**20
    assert run("--engine", "sglang@0.5.6")["kv_pool_blocks"] == math.floor(pool_mib / 2)
    # a stated share is the user's: vLLM's arithmetic at it, as for any engine
    stated = run("--engine", "sglang@0.5.6", "--gpu-memory-utilization", "0.9")
    assert stated["kv_pool_blocks"] == run("--engine", "vllm@0.18.0")["kv_pool_blocks"]
    # an unfitted release takes the nearest profile's coefficients and its own pool rule:
    # 0.5.3 (nearest fitted: 0.5.1) has the new rule's 0.835, 0.5.2 the old rule's 0.874
    assert run("--engine", "sglang@0.5.3")["kv_pool_blocks"] == math.floor(pool_mib / 2)
    old_mib = free_mib * 0.874 - 8_030_261_248 * 2 / 2**20
    assert run("--engine", "sglang@0.5.2")["kv_pool_blocks"] == math.floor(old_mib / 2)
    assert main([*base, "--engine", "sglang@0.5.3"]) == 0
    assert "SGLang 0.5.3's default mem_fraction_static 0.835" in capsys.readouterr().out


def test_an_sglang_server_that_would_not_start_is_refused_with_the_flag_to_give(capsys):
    # DeepSeek-V3 in FP8 (671 B parameters, 1 byte each) on 4 B200s: 156 GiB of weights a GPU.
    # SGLang 0.5.9 there: 512 MiB + 1.5 x its 16,384-token chunk (24,576) + 2 x 512 CUDA-graph
    # slots + 4 / 8 GiB = 26,624 MiB of 183,359: mem_fraction_static 0.855 of the memory, less
    # than the weights take, and its server stops ("Not enough memory"). With the flag: a pool.
    argv = ["simulate", "--model", "deepseek-v3", "--gpu", "b200", "--tp", "4", "--users", "2"]
    argv += ["--requests", "2", "--prompt-tokens", "128", "--output-tokens", "4"]
    argv += ["--weight-dtype", "fp8", "--engine", "sglang@0.5.9"]
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert "default mem_fraction_static 0.855" in err and "--mem-fraction-static above 0.8" in err
    assert main([*argv, "--mem-fraction-static", "0.92"]) == 0


def test_mem_fraction_static_sizes_the_pool_as_sglang_does(capsys):
    # --mem-fraction-static 0.8 (SGLang's own flag): 0.8 of an H100's 81,559 MiB less the 0.5
    # GiB context = 64,837.6 MiB, less Llama 3.1 8B's 15,316.5 MiB of BF16 weights = 49,521.1
    # MiB, in blocks of 2 MiB (above): 24,760 whole blocks, under any engine profile or none.
    base = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--users", "2"]
    base += ["--requests", "4", "--prompt-tokens", "128", "--output-tokens", "16"]
    pool_mib = (81559 - 512) * 0.8 - 8_030_261_248 * 2 / 2**20
    for engine in ([], ["--engine", "sglang@0.5.9"]):
        assert main([*base, *engine, "--mem-fraction-static", "0.8", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["kv_pool_blocks"] == math.floor(pool_mib / 2)
    assert main([*base, "--mem-fraction-static", "0.8"]) == 0
    assert "SGLang's mem_fraction_static 0.8 of the memory free at start" in (
        capsys.readouterr().out
    )
    assert main([*base, "--mem-fraction-static", "0.15"]) != 0  # the weights alone take more
    assert "--mem-fraction-static 0.15" in capsys.readouterr().err
    assert main([*base, "--mem-fraction-static", "0.8", "--kv-pool-gib", "3"]) != 0
    assert "each size the pool" in capsys.readouterr().err


@pytest.mark.parametrize(("profile", "per_gpu"), [("trtllm@1.0", 24_496), ("sglang@0.5.6", 19_742)])
def test_an_engines_own_pool_holds_one_data_parallel_ranks_weights(capsys, profile, per_gpu):
    # Qwen3-235B-A22B-FP8 on 4 H200s at attention DP 4 x EP 4: each GPU holds the attention and
    # the other dense weights whole and a quarter of the routed experts. From its config: 94
    # MoE layers x 128 experts x 3 x 4,096 x 1,536 = 227,096,395,776 expert parameters, 1 byte
    # each in FP8; the rest 7,997,238,784 bytes; a quarter of the experts 56,774,098,944. Before,
    # each engine's own rule charged the whole model to one GPU and refused the layout.
    # A token's cache: 94 layers x 4 KV heads x 128 x K and V x 2 B = 192,512 B; blocks of 16.
    # - TensorRT-LLM: 0.9 x (150,754,820,096 - 64,771,337,728 - the 2 GiB reserve) = 75.45 GB:
    #   24,496.0 blocks a GPU;
    # - SGLang 0.5.6 (tp_size 4, 512 CUDA-graph slots, DP attention): a reserve of 512 + 12,288
    #   + 1,024 + 512 + 6,144 + 3,072 = 23,552 MiB, mem_fraction_static 0.836 of the memory less
    #   its 0.5 GiB context, less the weights: 60.81 GB, 19,742.5 blocks a GPU.
    argv = ["simulate", "--config", str(AIC / "configs" / "Qwen--Qwen3-235B-A22B-FP8.json")]
    argv += ["--weight-dtype", "fp8", "--gpu", "h200-141gb", "--tp", "1", "--attention-dp", "4"]
    argv += ["--ep", "4", "--users", "4", "--requests", "4", "--prompt-tokens", "128"]
    assert main([*argv, "--output-tokens", "4", "--engine", profile, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kv_pool_blocks"] == 4 * per_gpu
    if profile.startswith("trtllm"):  # the same share asked for by hand, under any engine
        assert main([*argv, "--output-tokens", "4", "--kv-free-fraction", "0.9", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["kv_pool_blocks"] == 4 * per_gpu


@pytest.mark.parametrize("profile", ["trtllm@1.0.0", "vllm@0.18.0", "sglang@0.5.6"])
def test_the_planner_sizes_an_engines_pool_as_simulate_does(capsys, profile):
    # The fleet planner and the pages (kvcalc.perf.sim.plan.engine_setup) and simulate give an
    # engine the same pool: its release's rule for vLLM, TensorRT-LLM's own share of the free
    # memory, SGLang's mem_fraction_static.
    from kvcalc import get_gpu, get_model
    from kvcalc.perf.sim import Workload, fixed
    from kvcalc.perf.sim.plan import engine_setup

    m, g = get_model("qwen3-8b"), get_gpu("h100-sxm-80gb")
    dep = Deployment(spec=m.spec, gpu=g, weights=m.weights())
    wl = Workload(requests=4, prompt=fixed(128), output=fixed(16), users=2)
    planned = engine_setup(dep, wl, engines.PROFILES[profile], 1)
    args = ["simulate", "--model", "qwen3-8b", "--gpu", "h100-sxm-80gb", "--users", "2"]
    args += ["--requests", "4", "--prompt-tokens", "128", "--output-tokens", "16"]
    assert main([*args, "--engine", profile, "--json"]) == 0
    assert planned.num_blocks == json.loads(capsys.readouterr().out)["usable_blocks"]


@pytest.mark.parametrize(
    "model, gpu, tp, prompt",
    [
        ("llama-3.1-8b", "h100-sxm-80gb", 1, 2048),
        ("llama-3.1-8b", "h100-sxm-80gb", 1, 32768),  # four chunks of 8,192 tokens
        ("qwen3-235b-a22b", "h200-141gb", 8, 8192),
        ("deepseek-v3", "h200-141gb", 8, 4096),  # MLA, FP8 experts and attention
    ],
)
def test_prefill_under_a_profile_is_simulates_lone_prompt(capsys, model, gpu, tp, prompt):
    """``prefill --engine`` gives the TTFT ``simulate`` gives one request alone on the same
    engine (before: its own formula, one step at one MFU, off by -10% to +33%); ``--direct``
    leaves out the serving stack's time."""
    base = ["--model", model, "--gpu", gpu, "--tp", str(tp), "--engine", "vllm@0.18.0"]
    argv = ["simulate", *base, "--prompt-tokens", str(prompt), "--output-tokens", "1",
            "--users", "1", "--requests", "1", "--json"]  # fmt: skip
    assert main(argv) == 0
    sim = json.loads(capsys.readouterr().out)["ttft_mean_s"]
    assert main(["prefill", *base, "--prompt-tokens", str(prompt), "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert j["estimated_ttft_s"] == pytest.approx(sim, rel=1e-12)
    assert j["estimate_parts"]["steps"] == math.ceil(prompt / 8192)  # vLLM's token budget
    assert main(["prefill", *base, "--prompt-tokens", str(prompt), "--direct", "--json"]) == 0
    direct = json.loads(capsys.readouterr().out)["estimated_ttft_s"]
    api = engines.PROFILES["vllm@0.18.0"].api_overhead_s
    assert direct == pytest.approx(sim - api, rel=1e-9)


def test_prefill_under_a_profile_refuses_a_model_that_does_not_fit(capsys):
    argv = ["prefill", "--model", "llama-3.1-405b", "--gpu", "h100-sxm-80gb",
            "--prompt-tokens", "1000", "--engine", "vllm@0.18.0"]  # fmt: skip
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert "does not fit" in err and "tensor parallel" in err and "Traceback" not in err


def test_engine_and_ideal_are_not_given_together(capsys):
    argv = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--users", "2"]
    argv += ["--requests", "4", "--prompt-tokens", "64", "--output-tokens", "8"]
    assert main(argv + ["--engine", "vllm@0.18.0", "--ideal"]) != 0
    assert "--ideal" in capsys.readouterr().err
    assert main(argv + ["--engine", "vllm@0.18.0", "--serving-stack", "vllm"]) != 0


def test_a_pooled_run_keeps_its_json_keys_and_numbers(capsys):
    # the pooled estimate is unchanged by the profiles: no new keys in its step model
    argv = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--users", "2"]
    argv += ["--requests", "4", "--prompt-tokens", "64", "--output-tokens", "8", "--json"]
    assert main(argv) == 0
    j = json.loads(capsys.readouterr().out)
    assert "engine" not in j["step_model"] and j["step_model"]["bw_share"] == cal.BW_SHARE


def test_training_rows_run_from_the_command_line_with_their_own_flags():
    """One row of each setup family (engine, version, model, GPU, layout) runs through
    ``simulate --engine``; the prediction is finite and positive."""
    a = aic()
    seen, rows = set(), []
    for r in a.load_rows():
        k = (r.engine, r.version, r.model, r.gpu, r.tp, r.attention_dp, r.moe_ep)
        if k not in seen and r.users <= 16:
            seen.add(k)
            rows.append(r)
    assert len(rows) >= 20
    for r in rows[::3]:
        p, _ = engines.resolve(a.family(r))
        out = a.predict_with(r, p.key, p.coefficients())
        assert not isinstance(out, str), (r.id, out)
        assert all(math.isfinite(x) and x > 0 for x in out)


def test_a_ttft_excess_read_as_a_queue_gives_the_users_running_at_once():
    """``bench/aic.py --parts queue``. SGLang 0.5.6's Llama 3.1 8B at TP 8 on H200, 512 users,
    1,000 + 2,000 tokens (the training CSV): 7,978.08 ms TTFT at 29.38 ms TPOT. If the model's
    TTFT were 547 ms, the 7,431.08 ms more is a queue of requests that each live 2,000 x 29.38
    = 58,760 ms: (N / C - 1) x 58,760 = 7,431.08, so C = 512 / 1.126465 = 454.5 users."""
    a = aic()
    r = next(
        r
        for r in a.load_rows()
        if r.id.endswith("h200_sxm_sglang_agg_1000x2000_c512_tp8_epnone_16")
    )
    assert (r.users, r.osl, r.ttft_ms, r.tpot_ms) == (512, 2000, 7978.08, 29.38)
    assert a.effective_users(r, 547.0) == pytest.approx(512 / (1 + 7431.08 / 58760), rel=1e-12)
    assert a.effective_users(r, 547.0) == pytest.approx(454.5, abs=0.1)
    assert a.effective_users(r, r.ttft_ms) == r.users  # no excess: every user runs


def test_a_training_row_runs_as_its_client_ran_it():
    """``bench/aic.py``'s loop: 10 x N requests, each length uniform on [int(0.8 L), L]
    (InferenceMAX's benchmark_serving, --num-prompts $((CONC * 10)) --random-range-ratio 0.8, as
    aiconfigurator replays its points); SGLang's rows in lockstep, every request the stated
    length; TensorRT-LLM's with one request more than the batch holds (kvcalc.perf.
    calibrate_from says why); TTFT the mean over every request."""
    a = aic()
    rows = {r.id: r for r in a.load_rows()}
    v = rows["minimaxm2_5_h200_vllm_fp8_agg_8192x1024_c8_cfg606"]
    argv = a.row_argv(v)
    assert argv[argv.index("--users") + 1] == "8"
    assert argv[argv.index("--requests") + 1] == "80"  # 10 x 8 users
    assert argv[argv.index("--prompt-dist") + 1] == "uniform:6553:8192"  # int(0.8 x 8,192)
    assert argv[argv.index("--output-dist") + 1] == "uniform:819:1024"
    assert a.ttft_of({"ttft_mean_s": 2.0, "ttft_mean_steady_s": 1.0}) == 2.0
    s = next(r for r in rows.values() if r.engine == "sglang")
    argv = a.row_argv(s)
    assert argv[argv.index("--requests") + 1] == str(10 * s.users)
    assert argv[argv.index("--prompt-tokens") + 1] == str(s.isl)
    assert "--prompt-dist" not in argv and "--output-dist" not in argv
    t = next(r for r in rows.values() if r.engine == "trtllm")
    argv = a.row_argv(t)
    assert argv[argv.index("--users") + 1] == str(t.users + 1)
    assert argv[argv.index("--max-num-seqs") + 1] == str(t.users)


AIC_COLUMNS = (
    "id,silicon_data_source,backend,backend_version,model_path,system,precision,mode,isl,osl,"
    "gemm_quant_mode,moe_quant_mode,batch_size,tp_size,pp_size,attention_dp_size,moe_tp_size,"
    "moe_ep_size,prefill_batch_size,prefill_num_workers,prefill_tp_size,prefill_pp_size,"
    "prefill_attention_dp_size,prefill_moe_tp_size,prefill_moe_ep_size,decode_batch_size,"
    "decode_num_workers,decode_tp_size,decode_pp_size,decode_attention_dp_size,"
    "decode_moe_tp_size,decode_moe_ep_size,silicon_ttft_ms,silicon_tpot_ms"
)


def test_a_disaggregated_row_runs_on_its_own_prefill_and_decode_engines(tmp_path):
    """A row in AIC's columns with mode disagg (made up here: the training rows are all
    aggregated) runs through ``disagg``: its prefill_* and decode_* engines and layouts, a
    closed loop of the client's users (batch_size; else the silicon_concurrency its source
    names; else every decode engine's batch), the caches moved over NVLink when every GPU is in
    one 8-GPU node and over InfiniBand otherwise. A pipeline on either side is refused."""
    a = aic()
    # Qwen3-32B: 1 prefill engine of TP 2, 2 decode engines of TP 2 (6 GPUs, one node), its
    # concurrency named in the source; Qwen3-235B: TP 4 prefill beside 2 decode engines of
    # attention DP 4 with EP 4 (12 GPUs), its concurrency only as 2 x 32 decode slots
    lines = [
        AIC_COLUMNS,
        "d1,made up; silicon_concurrency=48,vllm,0.18.0,Qwen/Qwen3-32B,h200_sxm,fp8,disagg,"
        "1024,256,fp8,,,,,,,,1,1,2,1,1,2,1,24,2,2,1,1,2,1,100,10",
        "d2,made up,sglang,0.5.6,Qwen/Qwen3-235B-A22B-FP8,h200_sxm,fp8,disagg,1024,256,"
        "fp8_block,fp8_block,,,,,,,1,1,4,1,1,4,1,32,2,1,1,4,1,4,100,10",
        "d3,made up,sglang,0.5.6,Qwen/Qwen3-32B,h200_sxm,fp8,disagg,1024,256,fp8,,16,,,,,,"
        "1,1,2,2,1,2,1,16,1,2,1,1,2,1,100,10",
    ]
    path = tmp_path / "rows.csv"
    path.write_text("\n".join(lines) + "\n")
    d1, d2, d3 = a.load_rows(path)
    assert (d1.users, d1.gpus, d2.users, d2.gpus, d3.users) == (48, 6, 64, 12, 16)
    argv = a.row_argv(d1)
    assert argv[0] == "disagg"

    def flag(name):
        return argv[argv.index(name) + 1]

    assert (flag("--prefill"), flag("--decode"), flag("--prefill-tp"), flag("--decode-tp")) == (
        "1", "2", "2", "2",
    )  # fmt: skip
    assert (flag("--users"), flag("--requests"), flag("--link")) == ("48", "480", "nvlink4")
    argv = a.row_argv(d2)
    assert (flag("--decode-attention-dp"), flag("--decode-ep"), flag("--prefill-ep")) == (
        "4", "4", "1",
    )  # fmt: skip
    assert flag("--link") == "ib-ndr-400" and flag("--prompt-tokens") == "1024"  # SGLang's loop
    for r in (d1, d2):
        ttft, tpot = a.predict(r, ["--engine", a.family(r)])
        assert 10 < ttft < 5_000 and 1 < tpot < 200, r.id
    assert "pipeline parallel 2" in str(pytest.raises(ValueError, a.row_argv, d3).value)


def test_a_row_that_gives_its_batch_per_attention_rank_runs_on_its_own_gpus():
    """AIC's 2026-04-06 dump gives MiniMax-M2.5's H100 runs "tp4_ep4" as tp 4, attention DP 4,
    EP 16 with batch_size per rank (its source's silicon_concurrency = batch x 4). The same runs
    in the 2026-03-25 dump read TP 4, EP 4 at the full concurrency with the same TPOT, and their
    20-32 s TTFT at 64 users is a 4-GPU KV pool's queue: read as 4 GPUs (attention DP 4 of one
    GPU each, EP 4) and the stated concurrency. A row whose batch is the concurrency (vLLM's
    Qwen3-235B runs at attention DP 2) is read as it states."""
    a = aic()
    rows = a.load_rows()
    mm = [r for r in rows if "MiniMax" in r.model and r.gpu == "h100_sxm"]
    ranked = [r for r in mm if r.attention_dp > 1]
    assert len(ranked) == 15
    assert {(r.tp, r.attention_dp, r.moe_tp, r.moe_ep, r.gpus) for r in ranked} == {(1, 4, 1, 4, 4)}
    twin = {(r.isl, r.osl, r.users) for r in mm if r.attention_dp == 1}
    assert {(r.isl, r.osl, r.users) for r in ranked} == twin  # each a twin of a plain row
    r = next(r for r in ranked if (r.isl, r.osl, r.users) == (1024, 1024, 64))
    argv = a.row_argv(r)
    assert argv[argv.index("--users") + 1] == "64" and argv[argv.index("--ep") + 1] == "4"
    import csv

    with open(AIC / "aic-silicon-train.csv", newline="") as f:
        stated = {c["id"]: c for c in csv.DictReader(f)}
    plain = [r for r in rows if "235B" in r.model and r.engine == "vllm" and r.attention_dp == 2]
    assert len(plain) == 15
    for r in plain:  # as the columns state them
        c = stated[r.id]
        assert r.users == int(c["batch_size"]) and r.tp == int(c["tp_size"]), r.id
        assert r.tp * r.attention_dp == r.moe_tp * r.moe_ep


def test_a_row_whose_model_has_no_config_here_runs_on_the_registrys_model_of_that_id():
    # openai/gpt-oss-120b has no config.json beside the training rows, but the registry holds
    # the model of that Hugging Face id (its own config and weights): the row runs on it, and
    # its MXFP4 experts take their own format as the row states them; an id the registry does
    # not hold is refused, saying where a config.json is looked for
    from dataclasses import replace

    a = aic()
    r = replace(
        a.load_rows()[0], model="openai/gpt-oss-120b", precision="mxfp4", gemm="bfloat16",
        moe="w4a16_mxfp4", tp=1, moe_tp=1, isl=1024, osl=128, users=4,
    )  # fmt: skip
    argv = a.row_argv(r)
    assert argv[1:3] == ["--model", "gpt-oss-120b"]
    assert argv[argv.index("--expert-weight-dtype") + 1] == "mxfp4"
    ttft, tpot = a.predict(r, ["--engine", "vllm@0.18.0"])
    assert 1 < tpot < 50 and ttft > tpot
    said = a.predict(replace(r, model="example/not-a-model"), [])
    assert isinstance(said, str) and "example--not-a-model.json" in said


def test_a_row_of_thousands_of_users_runs_its_clients_ten_waves():
    # InferenceMAX's largest sweeps reach 4,096 users: 10 x 4,096 = 40,960 requests, which the
    # simulator takes (it was refused above 20,000 until stop 54); its steps stay bounded
    from dataclasses import replace

    a = aic()
    r = replace(a.load_rows()[0], model="meta-llama/Llama-3.1-8B-Instruct", tp=8, moe_tp=8,
                gemm="", moe="", precision="bf16", isl=128, osl=16, users=4096)  # fmt: skip
    argv = a.row_argv(r)
    assert argv[argv.index("--requests") + 1] == "40960"
    ttft, tpot = a.predict(r, ["--engine", "vllm@0.18.0"])
    assert ttft > tpot > 0


@pytest.mark.slow
def test_the_committed_profiles_meet_their_training_rows():
    """Every 8th training row (124 runs of the three engines), simulated through the command line
    under its engine's committed profile, against what the run measured (the row's own
    silicon_ttft_ms and silicon_tpot_ms columns), in the loop the profiles were fitted with:
    TPOT within 13% and TTFT within 34% at the median (measured 11.5% and 30.2% on these rows,
    11.0% and 31.8% on all 992: docs/calibration.md#engine-profiles-issue-41), no row refused.
    A profile, harness or step-model change that loses the fit fails here."""
    a = aic()
    rows = a.load_rows()[::8]
    got = a.evaluate_rows(rows, a.committed_thetas(rows), workers=1)
    ok = [(r, got[r.id]) for r in rows if not isinstance(got[r.id], str)]
    assert len(ok) == len(rows), [got[r.id] for r in rows if isinstance(got[r.id], str)][:3]
    tpot = a.errors([(p[1], r.tpot_ms) for r, p in ok])
    ttft = a.errors([(p[0], r.ttft_ms) for r, p in ok])
    assert tpot["median"] < 0.13 and ttft["median"] < 0.34, (tpot, ttft)


def test_the_fits_objective_is_huber_loss_on_the_log_ratios_plus_its_priors():
    """``bench/aic.py``'s objective, by hand. Two rows of one engine and one version at the
    pooled start (so the prior and the versions' ridge cost nothing): residuals log(pred / meas)
    of (0.1, -0.1) and (-0.5, 0.2); TTFT weighs 0.5 and TPOT 1, each residual under Huber's loss
    with its corner at 0.25 (r^2 within, 2 x 0.25 x |r| - 0.25^2 beyond):
    0.25 x 0.01 + 0.01 + 0.25 x (0.25 - 0.0625) + 0.04 = 0.099375. Moving the version's
    coefficients adds the prior toward the start (weight 0.3) on the engine's mean: log(2) on
    one coefficient adds 0.09 x log(2)^2. A refused row costs infinity."""
    a = aic()
    rows = [r for r in a.load_rows() if r.engine == "trtllm" and a.family(r) == "trtllm@1.0.0"]
    two = rows[:2]
    start = a.initial_thetas(two)
    res = {two[0].id: [0.1, -0.1], two[1].id: [-0.5, 0.2]}
    assert (a.HUBER, a.QUANTITY_WEIGHT, a.PRIOR_WEIGHT) == (0.25, (0.5, 1.0), 0.3)
    assert a.objective(two, start, res) == {"trtllm": pytest.approx(0.099375, rel=1e-12)}
    moved = {k: v.copy() for k, v in start.items()}
    moved["trtllm@1.0.0"][0] += math.log(2)
    got = a.objective(two, moved, res)["trtllm"]
    assert got == pytest.approx(0.099375 + 0.09 * math.log(2) ** 2, rel=1e-12)
    assert a.objective(two, start, {two[0].id: None, two[1].id: [0, 0]}) == {"trtllm": math.inf}


def test_a_release_left_out_of_a_refit_takes_its_nearest_fitted_release():
    """``bench/aic.py``'s held-out refits. Every SGLang 0.5.1 row held out (all of them are
    Qwen3-32B on H100), with no refit step: the 0.5.1 profile becomes 0.5.6's, the nearest of
    the releases left (0.5.6, 0.5.8, 0.5.9 differ from 0.5.1 first in the third number by 5, 7
    and 8), as a user's unfitted release does; the other engines' profiles are not touched."""
    a = aic()
    rows = a.load_rows()
    thetas = a.committed_thetas(rows)
    held = {r.id for r in rows if a.family(r) == "sglang@0.5.1"}
    assert len(held) == 78 and {r.model for r in rows if r.id in held} == {"Qwen/Qwen3-32B"}
    out = a.refit_without(rows, thetas, held, steps=0)
    assert list(out["sglang@0.5.1"]) == list(thetas["sglang@0.5.6"])
    for key in ("sglang@0.5.6", "trtllm@1.0.0", "vllm@0.18.0"):
        assert list(out[key]) == list(thetas[key])


@pytest.mark.slow
def test_the_committed_profiles_are_the_fits_fixed_point():
    """The fit reproduces the committed profiles. ``bench/aic.py --fit`` runs Levenberg-Marquardt
    steps on the 992 training rows (each simulated through the command line with its own flags,
    against its measured silicon_ttft_ms and silicon_tpot_ms) until no step lowers an engine's
    objective by TOLERANCE (0.5%). One more step from the committed profiles, at every damping
    the fit tries, lowers no engine's objective by that much: they are where the fit stops.
    A change to the step model, the harness, the rows or the objective that moves the optimum
    fails here until the profiles are refitted (about 230 s on two cores)."""
    a = aic()
    rows = a.load_rows()
    objectives, _ = a.step_moves(rows, a.committed_thetas(rows))
    assert set(objectives) == {"vllm", "sglang", "trtllm"}
    for engine, (now, best) in objectives.items():
        assert math.isfinite(now) and now > 0, engine
        assert best >= now * (1 - a.TOLERANCE), (engine, now, best)


# -- the Engineer pages -------------------------------------------------------------------------


@pytest.mark.parametrize("page", ["app_pages/lab.py", "app_pages/roofline.py"])
def test_an_engineer_page_names_the_engine_profile_and_its_band(page):
    pytest.importorskip("streamlit")
    from conftest import open_page

    at = open_page(page, engine_profile="vLLM 0.18.0 profile")
    assert not at.exception and not at.error
    said = " ".join(
        x.value for x in [*at.markdown, *at.caption, *at.sidebar.caption, *at.sidebar.markdown]
    )
    assert at.sidebar.selectbox(key="engine_profile").value == "vllm@0.18.0"
    if page.endswith("lab.py"):
        assert "vLLM 0.18.0 profile" in said and "vLLM" in said


def test_under_a_profile_the_pooled_estimates_inputs_are_greyed_out_and_its_band_shown():
    """A profile's own coefficients time every step, so the sidebar's share and fixed cost (the
    pooled estimate's) are drawn disabled, their values kept (a link carrying one is not
    called ignored), and the caption gives the profile's rows and band, not the pooled one's.
    SGLang 0.5.9's profile: the training rows of its release (its glm5-hopper build) counted
    in the CSV here."""
    pytest.importorskip("streamlit")
    from conftest import open_page

    from kvcalc.perf.calibration import error_band_text

    rows = [r for r in aic().load_rows() if aic().family(r) == "sglang@0.5.9"]
    assert len(rows) == engines.PROFILES["sglang@0.5.9"].fitted_rows == 30
    at = open_page("app_pages/frontier.py", engine_profile="SGLang 0.5.9 profile",
                   fr_over="nothing", bw_share="0.8")  # fmt: skip
    assert not at.exception and not at.error and not at.warning
    share = at.sidebar.slider(key="bw_share")
    assert share.disabled and share.value == pytest.approx(0.8)
    assert at.sidebar.number_input(key="step_ms").disabled
    said = " ".join(c.value for c in at.sidebar.caption)
    assert "fitted on 30 measured runs of that engine" in said
    assert engines.engine_band_text(engines.PROFILES["sglang@0.5.9"]) in said
    assert error_band_text("tpot_itl") not in said
    at = open_page("app_pages/frontier.py", fr_over="nothing")  # the pooled estimate
    assert not at.sidebar.slider(key="bw_share").disabled
    assert error_band_text("tpot_itl") in " ".join(c.value for c in at.sidebar.caption)


def test_the_roofline_page_times_a_moe_step_as_the_simulator_and_names_the_experts_share():
    """Qwen3-235B-A22B (its checkpoint's BF16) on 8 H200s under the vLLM 0.18.0 profile: the
    page's real step at its default batch 32 and 8,192 tokens is the simulator's clock for that
    step, the caption names the experts' own share, and the error it states is the profile's."""
    pytest.importorskip("streamlit")
    from conftest import open_page

    from kvcalc import get_gpu, get_model
    from kvcalc.core.units import fmt_seconds

    at = open_page("app_pages/roofline.py", engine_profile="vLLM 0.18.0 profile",
                   model="qwen3-235b-a22b", tp="8", gpu="h200-141gb")  # fmt: skip
    assert not at.exception and not at.error
    said = next(m.value for m in at.markdown if "A real engine takes longer" in m.value)
    m, g = get_model("qwen3-235b-a22b"), get_gpu("h200-141gb")
    w = m.weights()
    dep = Deployment(spec=m.spec, gpu=g, weights=w, tp=8)
    p = engines.PROFILES["vllm@0.18.0"]
    att = g.attention_tflops("bf16")
    s = setup(dep, 8192 + 16, Speed.of(g, w.dtype, p.step_model(), attention_peak_tflops=att))
    clock = s.step_seconds(32, 32 * 8192, 0, decode_pairs=32 * 8192, scheduled=32, host=(32, 0))
    assert f"**{fmt_seconds(clock)}** in the vLLM 0.18.0 profile" in said
    assert f"the routed experts at {p.expert_bw_share:.0%}" in said
    assert engines.engine_band_text(p) in said


def test_the_lab_pages_ttft_under_a_profile_is_simulates_lone_prompt(capsys):
    """The Inference Lab under the vLLM 0.18.0 profile: its TTFT for the default 2,048-token
    prompt is what ``simulate`` gives one such request alone; a prompt the pool cannot hold gets
    no TTFT and the reason, and the rest of the page still stands."""
    pytest.importorskip("streamlit")
    from conftest import open_page

    from kvcalc.core.units import fmt_seconds

    at = open_page("app_pages/lab.py", engine_profile="vLLM 0.18.0 profile",
                   model="qwen3-235b-a22b", tp="8", gpu="h200-141gb")  # fmt: skip
    assert not at.exception and not at.error
    argv = ["simulate", "--model", "qwen3-235b-a22b", "--gpu", "h200-141gb", "--tp", "8",
            "--engine", "vllm@0.18.0", "--prompt-tokens", "2048", "--output-tokens", "1",
            "--users", "1", "--requests", "1", "--json"]  # fmt: skip
    assert main(argv) == 0
    sim = json.loads(capsys.readouterr().out)["ttft_mean_s"]
    ttft = next(m for m in at.metric if m.label.startswith("TTFT"))
    assert ttft.value == fmt_seconds(sim)
    # Llama 3.1 8B on an L4: 120,000 tokens are within the model's limit, not within the pool
    at = open_page("app_pages/lab.py", engine_profile="vLLM 0.18.0 profile",
                   model="llama-3.1-8b", gpu="l4", l_prompt="120000", l_ctx="1024",
                   l_batch="1")  # fmt: skip
    assert not at.exception and not at.error
    ttft = next(m for m in at.metric if m.label.startswith("TTFT"))
    assert ttft.value == "unknown" and "KV cache" in ttft.help
    assert next(m for m in at.metric if m.label.startswith("Step time")).value.endswith("ms")


def test_the_frontier_pages_fold_states_the_profiles_law():
    """Under an engine profile the simulation's fold gives the profile's law (the GEMMs, then
    attention, each under its own roofline; a MoE model's experts at their own share) with the
    profile's coefficients, not the pooled estimate's one roofline."""
    pytest.importorskip("streamlit")
    import html as h
    import re

    from conftest import open_page

    at = open_page("app_pages/frontier.py", engine_profile="vLLM 0.18.0 profile",
                   model="qwen3-235b-a22b", tp="8", gpu="h200-141gb")  # fmt: skip
    assert not at.exception and not at.error
    folds = [h.unescape(re.sub("<[^>]+>", "", x.proto.body)) for x in at.get("html")]
    law = next(f for f in folds if "step time = " in f)
    p = engines.PROFILES["vllm@0.18.0"]
    assert "attention FLOPs / (attention peak x its MFU)" in law
    assert f"experts {p.expert_bw_share:.3g}" in law and f"attention MFU {p.attn_mfu:.3g}" in law
    assert f"{p.layer_overhead_s * 1e6:.3g} µs a layer" in law


def test_the_frontier_page_states_the_fp8_gemms_share_for_fp8_weights_only():
    """TensorRT-LLM's profile times FP8 weights' GEMMs at a part of its MFU: the fold's law and
    the caption say how much for FP8 weights, and nothing of it for 16-bit ones."""
    pytest.importorskip("streamlit")
    import html as h
    import re

    from conftest import open_page

    p = engines.PROFILES["trtllm@1.0.0"]
    assert p.fp8_gemm_share < 1.0
    for wdtype, shown in (("fp8", True), ("bf16", False)):
        at = open_page("app_pages/frontier.py", engine_profile="TensorRT-LLM 1.0.0 profile",
                       model="qwen3-8b", gpu="h100-sxm-80gb", wdtype=wdtype)  # fmt: skip
        assert not at.exception and not at.error
        assert not [w.value for w in at.warning if "Ignored in the link" in w.value]
        folds = [h.unescape(re.sub("<[^>]+>", "", x.proto.body)) for x in at.get("html")]
        law = next(f for f in folds if "step time = " in f)
        said = " ".join(c.value for c in at.caption)
        assert (f"FP8 GEMMs x {p.fp8_gemm_share:.3g}" in law) is shown, law[-400:]
        assert (f"FP8 GEMMs at {p.fp8_gemm_share:.0%} of that" in said) is shown


def test_a_learn_page_has_no_engine_choice():
    pytest.importorskip("streamlit")
    from conftest import open_page

    at = open_page("app_pages/step_time.py")
    assert not at.exception
    assert all(s.key != "engine_profile" for s in at.sidebar.selectbox)
