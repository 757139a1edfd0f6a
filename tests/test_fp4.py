"""4-bit floating-point weights and Blackwell's FP4 tensor cores (issue 41, item 4). Expected
figures from the formats' definitions and NVIDIA's datasheet, worked by hand:

- NVFP4: 16 E2M1 values share one E4M3 scale: 4 + 8 / 16 = 4.5 bits a weight (NVIDIA's
  "Introducing NVFP4" blog, 2025; the per-tensor FP32 scale is left out).
- MXFP4 (OCP Microscaling 1.0): 32 values share one E8M0 scale: 4 + 8 / 32 = 4.25 bits.
- HGX B200 datasheet, 8 GPUs: FP4 tensor core 144 PFLOPS and FP8 72 PFLOPS with sparsity, so
  dense per GPU 144 / 8 / 2 = 9 PFLOPS FP4 and 4.5 PFLOPS FP8; 8 TB/s HBM3e; 180 GB.
- Hopper has no FP4 tensor cores: vLLM runs NVFP4 weights there through its Marlin W4A16 path
  (dequantised to 16 bits).
"""

from __future__ import annotations

import json

import pytest
from conftest import bench_module

from kvcalc import registry
from kvcalc.cache.weight_bytes import weights
from kvcalc.cli import main
from kvcalc.core.dtypes import get_dtype


def test_nvfp4_and_mxfp4_carry_their_block_scales():
    assert get_dtype("nvfp4").bits == 4 + 8 / 16
    assert get_dtype("mxfp4").bits == 4 + 8 / 32


def test_b200_has_fp4_tensor_cores_and_hopper_does_not():
    b200, h100 = registry().gpu("b200"), registry().gpu("h100-sxm-80gb")
    assert b200.fp4_tflops == 144_000 / 8 / 2
    assert b200.fp8_tflops == 72_000 / 8 / 2
    assert b200.bandwidth_gbs == 8000 and b200.memory_gb == 180
    assert b200.gemm_format("nvfp4") == "fp4"
    assert b200.peak_tflops("nvfp4") == 9000
    assert h100.fp4_tflops is None
    assert h100.gemm_format("nvfp4") == "bf16"  # dequantised (Marlin W4A16)
    assert h100.peak_tflops("nvfp4") == h100.bf16_tflops
    # MXFP4 weights run as vLLM's default MXFP4 x BF16 MoE, on either
    assert b200.gemm_format("mxfp4") == "bf16" and h100.gemm_format("mxfp4") == "bf16"


def test_blackwell_ultra_has_the_datasheet_figures_and_runs_an_aic_row():
    # NVIDIA's Blackwell Ultra datasheet as aiconfigurator's system files quote it (b300_sxm.yaml,
    # gb300.yaml at 095f58a5): HGX B300 62 TB/s over 8 GPUs, BF16 4.5 and FP8 9 PFLOPS sparse
    # (halved), FP4 14 PFLOPS dense, 275,040 MiB in nvidia-smi; GB300 8 TB/s, 2.5 / 5 / 15 PFLOPS
    # dense, 284,208 MiB. kvcalc times NVFP4 at the FP4 peak on both.
    b300, gb300 = registry().gpu("b300"), registry().gpu("gb300")
    assert b300.bandwidth_gbs == 62_000 / 8 and b300.memory_mib_driver == 275_040
    assert (b300.bf16_tflops, b300.fp8_tflops, b300.fp4_tflops) == (4500 / 2, 9000 / 2, 14_000)
    assert gb300.bandwidth_gbs == 8000 and gb300.memory_mib_driver == 284_208
    assert (gb300.bf16_tflops, gb300.fp8_tflops, gb300.fp4_tflops) == (2500, 5000, 15_000)
    assert b300.peak_tflops("nvfp4") == 14_000 and gb300.gemm_format("nvfp4") == "fp4"
    a = _aic()
    assert a.gpu_key("b300_sxm") == "b300" and a.gpu_key("gb300") == "gb300"
    # a GB300 NVL72 rack is one NVLink domain of 72 GPUs, as a GB200's
    assert a.NVLINK_DOMAIN["gb300"] == 72


def test_w4a8_experts_compute_at_the_fp8_peak():
    # gpt-oss-120b on a B200, its MXFP4 experts times MXFP8 activations (TensorRT-LLM's W4A8):
    # a compute-bound prefill step of 8,192 tokens takes the experts' FLOPs at 4,500 TFLOPS
    # instead of 2,250 (the BF16 peak of its attention and dense layers). The experts' FLOPs a
    # token, by hand: 2 x 36 layers x top 4 x (2,880 x 5,760 + 5,760 + 2,880 x 2,880 + 2,880)
    # (gate_up and down projections with biases: 24,891,840 parameters an expert).
    from kvcalc.cache.deployment import Deployment
    from kvcalc.perf.sim import Speed, setup

    m, g = registry().model("gpt-oss-120b"), registry().gpu("b200")
    dep = Deployment(spec=m.spec, weights=m.weights(), gpu=g)
    expert_flops = 2 * 36 * 4 * (2880 * 5760 + 5760 + 2880 * 2880 + 2880)
    base = setup(dep, 8192, Speed.of(g, "bf16"))
    w4a8 = setup(dep, 8192, Speed.of(g, "bf16", expert_peak_tflops=g.fp8_tflops))
    assert base.expert_flops_per_token == w4a8.expert_flops_per_token == expert_flops
    t0, t1 = (s.step_seconds(8192, 8192, 8192 * 8193 // 2) for s in (base, w4a8))
    saved = expert_flops * 8192 * (1 / 2250e12 - 1 / 4500e12) / base.mfu
    assert t0 - t1 == pytest.approx(saved, rel=1e-9)
    # and from the command line, refused where it cannot hold
    args = ["simulate", "--model", "gpt-oss-120b", "--gpu", "b200", "--users", "1",
            "--requests", "1", "--prompt-tokens", "4096", "--output-tokens", "2"]  # fmt: skip
    assert main([*args, "--expert-gemm-dtype", "fp8"]) == 0
    assert main([*args[:2], "llama-3.1-8b", *args[3:], "--expert-gemm-dtype", "fp8"]) == 2
    assert main([*args[:4], "a100-80gb", *args[5:], "--expert-gemm-dtype", "fp8"]) == 2


def test_nvfp4_weights_of_llama_3_1_8b_are_4_5_bits_a_parameter():
    spec = registry().model("llama-3.1-8b").spec
    w = weights(spec, "nvfp4")
    params = spec.require_params().total
    # bytes_for rounds up to whole bytes per tensor group: within a few bytes of params x 4.5 / 8
    assert w.bytes == pytest.approx(params * 4.5 / 8, abs=1024)


def test_simulate_runs_nvfp4_on_a_b200_with_an_engine_profile(capsys):
    code = main(
        [
            "simulate",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "b200",
            "--weight-dtype",
            "nvfp4",
            "--users",
            "4",
            "--requests",
            "8",
            "--prompt-tokens",
            "512",
            "--output-tokens",
            "32",
            "--engine",
            "trtllm@1.0",
            "--json",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    j = json.loads(out)
    assert j["tpot_mean_s"] > 0 and j["ttft_mean_s"] > 0
    # no faster than reading the 4.5-bit weights once per step at the full 8 TB/s
    spec = registry().model("llama-3.1-8b").spec
    assert j["tpot_mean_s"] > spec.require_params().total * 4.5 / 8 / 8e12


def _aic():
    return bench_module("aic")


@pytest.mark.parametrize(
    "precision, gemm, moe, model, flags",
    [
        ("fp8", "fp8_block", "fp8_block", "Qwen/Qwen3-32B", ["--weight-dtype", "fp8"]),
        ("nvfp4", "nvfp4", "nvfp4", "Qwen/Qwen3-32B", ["--weight-dtype", "nvfp4"]),
        ("bf16", "", "", "meta-llama/Llama-3.1-8B-Instruct", ["--weight-dtype", "bf16"]),
        (
            "fp8",
            "fp8",
            "nvfp4",
            "MiniMaxAI/MiniMax-M2.5",
            ["--weight-dtype", "fp8", "--expert-weight-dtype", "nvfp4"],
        ),
        (
            "bf16",
            "float16",
            "w4a16_mxfp4",
            "Qwen/Qwen3-235B-A22B-FP8",
            ["--weight-dtype", "bf16", "--expert-weight-dtype", "mxfp4"],
        ),
        (
            "int4",
            "int4_wo",
            "int4_wo",
            "moonshotai/Kimi-K2.5",
            ["--weight-dtype", "bf16", "--expert-weight-dtype", "int4"],
        ),
        # a dense model has no experts to give a format of their own
        ("fp8", "fp8", "nvfp4", "Qwen/Qwen3-32B", ["--weight-dtype", "fp8"]),
        # the rest of AIC's modes (aic-core sdk/common.py GEMMQuantMode, MoEQuantMode):
        # SmoothQuant's W8A8 INT8, NVFP4 weight-only on Hopper, the other MXFP4 MoE kernels,
        # and a precision column's "fp4" where no mode is given
        ("int8", "sq", "", "Qwen/Qwen3-32B", ["--weight-dtype", "int8"]),
        ("nvfp4", "nvfp4_wo", "", "Qwen/Qwen3-32B", ["--weight-dtype", "nvfp4"]),
        (
            "fp8",
            "fp8",
            "w4a16_mxfp4_cutlass",
            "MiniMaxAI/MiniMax-M2.5",
            ["--weight-dtype", "fp8", "--expert-weight-dtype", "mxfp4"],
        ),
        ("fp4", "", "", "Qwen/Qwen3-32B", ["--weight-dtype", "nvfp4"]),
        # W4A8: 4-bit experts times 8-bit activations, on FP8 tensor cores
        (
            "fp8",
            "fp8",
            "w4a8_mxfp4_mxfp8",
            "MiniMaxAI/MiniMax-M2.5",
            [
                "--weight-dtype",
                "fp8",
                "--expert-weight-dtype",
                "mxfp4",
                "--expert-gemm-dtype",
                "fp8",
            ],
        ),  # fmt: skip
        (
            "int4",
            "",
            "w4afp8",
            "moonshotai/Kimi-K2.5",
            ["--weight-dtype", "int4", "--expert-gemm-dtype", "fp8"],
        ),
        ("fp8", "fp8", "w4a8_mxfp4_fp8", "Qwen/Qwen3-32B", ["--weight-dtype", "fp8"]),  # dense
    ],
)
def test_an_aic_row_states_its_dense_and_expert_formats(precision, gemm, moe, model, flags):
    a = _aic()
    r = a.load_rows()[0]
    from dataclasses import replace

    row = replace(r, precision=precision, gemm=gemm, moe=moe, model=model)
    assert a.weight_flags(row) == flags


def test_weight_only_nvfp4_is_refused_where_kvcalc_would_time_it_at_the_fp4_peak():
    # on a B200 kvcalc's NVFP4 weights run W4A4 at the FP4 peak, which a weight-only mode's
    # 16-bit GEMM does not reach: refused by name there, timed on Hopper (no FP4 tensor cores)
    from dataclasses import replace

    a = _aic()
    r = replace(a.load_rows()[0], model="Qwen/Qwen3-32B", gemm="w4a16_nvfp4", moe="")
    assert a.weight_flags(r) == ["--weight-dtype", "nvfp4"]
    with pytest.raises(ValueError, match="'w4a16_nvfp4' on b200_sxm"):
        a.weight_flags(replace(r, gpu="b200_sxm"))


def test_an_unknown_aic_quant_mode_is_refused_by_name():
    a = _aic()
    with pytest.raises(ValueError, match="quant mode 'int3_magic'"):
        a.quant_format("int3_magic")


def test_a_pipeline_parallel_aic_row_is_refused_by_name_not_timed_as_one_stage():
    from dataclasses import replace

    a = _aic()
    r = a.load_rows()[0]
    assert all(row.pp == 1 for row in a.load_rows())  # the training rows: one stage each
    said = a.predict(replace(r, pp=2), [])
    assert isinstance(said, str) and "pipeline parallel 2" in said
