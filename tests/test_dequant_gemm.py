"""Dequantising GEMMs (``simulate --dequant-gemm``, kvcalc.perf.calibration.DEQUANT_GEMM_MFU):
4-bit group-quantised weights whose matrix multiplies dequantise them on the fly.

Hand facts used below (none produced by kvcalc):
- Llama 3.1 8B in BF16 is 16,060,522,496 B, of which 1,050,673,152 B are its untied input
  embedding (tests/test_sim.py counts them by hand): every other weight, (16,060,522,496 -
  1,050,673,152) / 2 = 7,504,924,672 parameters, is in a linear layer a prompt token multiplies,
  2 FLOPs each.
- A100 SXM4: 312 TFLOPS dense FP16/BF16 (NVIDIA's datasheet).
- vLLM PR #2566's table (tests/data/benchmarks/vllm-pr2566-awq-a100.yaml): "Main" is main
  before the PR, every AWQ matrix multiply through awq_gemm.
"""

import json

import pytest
from test_calibration import bench, fails, run

from kvcalc.cli import main
from kvcalc.perf import calibration as cal

LINEAR_PARAMS_8B = (16_060_522_496 - 1_050_673_152) // 2
A100_PEAK = 312e12

ONE_PROMPT = [
    "simulate",
    "--model",
    "llama-3.1-8b",
    "--gpu",
    "a100-80gb",
    "--weight-bits",
    "4.125",
    "--prompt-tokens",
    "4096",
    "--output-tokens",
    "1",
    "--requests",
    "1",
    "--rate",
    "inf",
    "--direct",
]


def test_a_compute_bound_prompt_runs_its_linear_layers_at_the_dequantising_share(capsys):
    # One 4,096-token prompt is compute-bound (2 x 7.5e9 x 4,096 = 6.1e13 FLOPs, ~0.4 s at half
    # the peak, against ~2 ms to read 4 GB of weights): at a share d of the peak in place of the
    # MFU m, its linear layers take 2 P N (1 / d - 1 / m) / peak longer; attention is unchanged.
    m, d = 0.5, 0.2
    plain = run(ONE_PROMPT + ["--mfu", str(m)], capsys)
    slow = run(ONE_PROMPT + ["--mfu", str(m), "--dequant-gemm", "--dequant-mfu", str(d)], capsys)
    extra = 2 * LINEAR_PARAMS_8B * 4096 * (1 / d - 1 / m) / A100_PEAK
    assert slow["ttft_p50_s"] - plain["ttft_p50_s"] == pytest.approx(extra, rel=1e-6)
    assert slow["step_model"]["dequant_mfu"] == d and "dequant_mfu" not in plain["step_model"]


def test_with_a_threshold_only_the_smaller_steps_dequantise_in_the_gemm(capsys):
    # The 4,096-token prompt runs in two steps of 2,048 (the A100's default step, vLLM's): at
    # --dequant-gemm 256 both are large enough for the 16-bit GEMM (vLLM's AWQ from 0.3:
    # "FP16_MATMUL_HEURISTIC_CONDITION = x.shape[:-1].numel() >= 256"), at 4,096 neither is.
    m, d = 0.5, 0.2
    flags = ["--mfu", str(m), "--dequant-mfu", str(d), "--dequant-gemm"]
    plain = run(ONE_PROMPT + ["--mfu", str(m)], capsys)["ttft_p50_s"]
    assert run(ONE_PROMPT + flags + ["256"], capsys)["ttft_p50_s"] == plain
    below = run(ONE_PROMPT + flags + ["4096"], capsys)["ttft_p50_s"]
    extra = 2 * LINEAR_PARAMS_8B * 4096 * (1 / d - 1 / m) / A100_PEAK
    assert below - plain == pytest.approx(extra, rel=1e-6)


def test_the_ideal_bound_and_a_share_equal_to_the_mfu_change_nothing(capsys):
    ideal = run(ONE_PROMPT + ["--ideal"], capsys)
    assert (
        run(ONE_PROMPT + ["--ideal", "--dequant-gemm"], capsys)["ttft_p50_s"]
        == (ideal["ttft_p50_s"])
    )
    same = run(ONE_PROMPT + ["--mfu", "0.4", "--dequant-gemm", "--dequant-mfu", "0.4"], capsys)
    assert same["ttft_p50_s"] == pytest.approx(
        run(ONE_PROMPT + ["--mfu", "0.4"], capsys)["ttft_p50_s"], rel=1e-12
    )


def test_the_calibrated_estimate_uses_the_fitted_share_and_names_it(capsys):
    j = run(ONE_PROMPT + ["--dequant-gemm"], capsys)
    assert j["step_model"]["dequant_mfu"] == cal.DEQUANT_GEMM_MFU
    assert j["step_model"]["name"] == "calibrated estimate"
    assert main(ONE_PROMPT + ["--dequant-gemm"]) == 0
    assert f"dequantising GEMMs {cal.DEQUANT_GEMM_MFU:g} of the 16-bit peak" in (
        capsys.readouterr().out
    )


def test_without_the_flag_the_json_keys_are_those_of_before(capsys):
    j = run(ONE_PROMPT, capsys)
    assert set(j["step_model"]) == {
        "name",
        "bw_share",
        "step_overhead_s",
        "mfu",
        "allreduce_latency_s",
        "api_overhead_s",
        "allreduce",
        "stack",
    }


def test_the_flag_needs_4_bit_weights_and_the_share_needs_the_flag(capsys):
    bf16 = [a for a in ONE_PROMPT if a not in ("--weight-bits", "4.125")]
    err = fails(bf16 + ["--dequant-gemm"], capsys)
    assert "--weight-bits" in err and "--weight-dtype int4" in err
    err = fails(ONE_PROMPT + ["--dequant-mfu", "0.2"], capsys)
    assert "add --dequant-gemm" in err
    err = fails(ONE_PROMPT + ["--weight-bits", "8.5", "--dequant-gemm"], capsys)
    assert "4-bit" in err
    assert run(
        bf16 + ["--weight-dtype", "int4", "--dequant-gemm"], capsys
    )  # INT4 computes in 16 bits too


def _entry(point_id):
    return next(pt for pt in bench().all_points() if pt.id == point_id)


def test_group_quantised_formats_run_with_dequantising_gemms_and_others_do_not():
    awq = _entry("vllm-pr2566-main-a100-mistral-7b-v02-int4-awq-in1024-out64").runs[0].argv
    assert "--dequant-gemm" in awq and awq[awq.index("--weight-bits") + 1] == "4.125"
    # benchmark_throughput in January 2024: in-process, max_num_batched_tokens =
    # max(max_model_len 1070, 2048), max_num_seqs 256, gpu_memory_utilization 0.9
    assert awq[awq.index("--max-num-batched-tokens") + 1] == "2048" and "--direct" in awq
    assert awq[awq.index("--max-num-seqs") + 1] == "256"
    # vLLM 0.4.1's AWQ layer: "FP16_MATMUL_HEURISTIC_CONDITION = x.shape[:-1].numel() >= 256"
    v041 = _entry("vllm041-rtx3090-llama3-8b-int4-awq-tp1-sharegpt-rps5").runs[0].argv
    assert v041[v041.index("--dequant-gemm") + 1] == "256"
    # MLC LLM's q4f16_1 kernels are not awq_gemm, and the training part has none of them
    mlc = _entry("mlcllm01-rtx3090-llama3-8b-q4f16-1-tp1-sharegpt-rps2").runs[0].argv
    assert "--dequant-gemm" not in mlc
    jan = _entry("trtllm071-jan-rtx3090-mistral-7b-v02-int4-awq-bs1-2048-512").runs[0].argv
    assert jan[0] == "step-time" and "--dequant-gemm" not in jan  # batch 1: reads, no GEMM
    for pt in bench().all_points():  # GGUF and 16-bit formats never
        if pt.entry["weight_format"] != "int4-awq":
            assert all("--dequant-gemm" not in r.argv for r in pt.runs), pt.id


def test_stage_5_reproduces_the_constant_from_the_training_source_alone():
    b = bench()
    points = b.all_points()
    rows = b._sim_rows(
        points,
        ("offline_max_throughput",),
        ("request_throughput",),
        b._coef_flags(cal.BW_SHARE, cal.STEP_OVERHEAD_S, cal.ALLREDUCE_LATENCY_S, cal.MFU),
        dequant=True,
    )
    assert {r[2] for r in rows} == {"vllm-pr2566-awq-a100.yaml"} and len(rows) == 3
    d = b.fit_dequant_mfu(
        points, cal.BW_SHARE, cal.STEP_OVERHEAD_S, cal.ALLREDUCE_LATENCY_S, cal.MFU
    )
    assert round(d, 3) == cal.DEQUANT_GEMM_MFU
    # stage 3 (the MFU) never sees a dequantising run
    mfu_rows = b._sim_rows(
        points,
        ("offline_max_throughput",),
        ("output_tokens_per_s", "request_throughput"),
        b._coef_flags(cal.BW_SHARE, cal.STEP_OVERHEAD_S, cal.ALLREDUCE_LATENCY_S, cal.MFU),
    )
    assert "vllm-pr2566-awq-a100.yaml" not in {r[2] for r in mfu_rows}
    assert json.dumps(rows)  # plain numbers
