"""The calibrated step model (kvcalc.perf.calibration), its command-line flags and its fit.

Hand facts used below (none produced by kvcalc.perf.calibration):
- Llama 3.1 8B in BF16 reads 16,060,522,496 - 1,050,673,152 (its untied input embedding,
  gathered) + 8,192 (one row) = 15,009,857,536 B in a decode step of one token (tests/test_sim.py
  counts its parameters by hand); at 3,350 GB/s that is 4.4806 ms.
- Llama 3.1 70B: 80 layers, hidden 8,192. A ring all-reduce moves 2 (tp - 1) / tp of the
  message through each GPU's link; one token's activations are 8,192 x 2 B. NVLink 4 (H100
  SXM): 900 GB/s two-way, 450 one way (NVIDIA's datasheet).
- The calibration corpus's own totals (sglang-h200-datacrunch.yaml): ShareGPT requests average
  269,081 / 1,200 = 224.2 prompt and 226,901 / 1,200 = 189.1 output tokens.
"""

import json
import math
import random

import pytest
from conftest import ROOT, bench_module

from kvcalc import get_gpu, get_model, prefill, step_time
from kvcalc.cache.deployment import Deployment
from kvcalc.cache.weight_bytes import weights_at_bits
from kvcalc.cli import main
from kvcalc.perf import calibration as cal
from kvcalc.perf.sim import Speed, Workload, fixed, setup, simulate

READ_8B = 16_060_522_496 - 1_050_673_152 + 8_192  # one decode step of Llama 3.1 8B, BF16
BW = 3350e9


def bench():
    """bench/calibration.py, imported once (the fit and the command lines live there)."""
    return bench_module("calibration")


def run(argv, capsys):
    code = main(argv + ["--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def fails(argv, capsys) -> str:
    """The one-line message of a refused command (status 2, nothing on stdout)."""
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2 and not out, (code, out)
    return err


# -- the coefficients -------------------------------------------------------------------------


def test_every_coefficient_is_named_sourced_and_physical():
    # Each fitted value is a share in (0, 1] or a non-negative time, and the fixed ones come from
    # the architecture: two all-reduces per layer (Megatron-LM), 16-bit activations.
    assert 0 < cal.BW_SHARE <= 1 and 0 < cal.MFU <= 1
    assert 0 <= cal.STEP_OVERHEAD_S < 0.05 and 0 <= cal.ALLREDUCE_LATENCY_S < 1e-3
    assert 0 <= cal.API_OVERHEAD_S < 1
    assert cal.ALLREDUCES_PER_LAYER == 2 and cal.ACTIVATION_BYTES == 2
    assert cal.CALIBRATED.name == "calibrated estimate" and cal.IDEAL.name == "ideal bound"
    doc = cal.__doc__
    for name in ("BW_SHARE", "STEP_OVERHEAD_S", "MFU", "ALLREDUCE_LATENCY_S", "API_OVERHEAD_S"):
        assert name in doc


def test_the_split_holds_back_whole_sources_that_exist():
    files = {p.name for p in (ROOT / "tests" / "data" / "benchmarks").glob("*.yaml")}
    assert set(cal.HELD_BACK) <= files and 0 < len(cal.HELD_BACK) < len(files)
    # the second held-back set (sources added after the fit): real files, none in both sets
    assert set(cal.HELD_BACK_LATER) <= files and not set(cal.HELD_BACK) & set(cal.HELD_BACK_LATER)
    # the third, fresh set: real files, in neither earlier set
    assert set(cal.HELD_BACK_FRESH) <= files
    assert not set(cal.HELD_BACK_FRESH) & (set(cal.HELD_BACK) | set(cal.HELD_BACK_LATER))


def test_each_fresh_source_states_its_selection_rule_and_set():
    # The rule is what makes a held-back set a test: each file says how its runs were chosen.
    for name in cal.HELD_BACK_FRESH:
        head = (ROOT / "tests" / "data" / "benchmarks" / name).read_text().split("\nsource")[0]
        assert "HELD_BACK_FRESH" in head and "Selection rule" in head, name


@pytest.mark.parametrize("which", ["held_back_later", "held_back_fresh"])
def test_no_later_held_back_point_enters_the_fit(which):
    """The sources added after the fit are compared, never fitted: no decode step of stage 1 or
    2 (with or without closed loops) and no row of stages 3 and 4 comes from them."""
    b = bench()
    points = b.all_points()
    later = {pt.id for pt in points if getattr(pt, which)}
    assert later and all(not pt.training for pt in points if pt.id in later)
    for closed in (False, True):
        assert not later & {s.id for s in b.decode_steps(points, closed_loop=closed)}
    flags = b._coef_flags(cal.BW_SHARE, cal.STEP_OVERHEAD_S, cal.ALLREDUCE_LATENCY_S, cal.MFU)
    rows = b._sim_rows(points, ("offline_max_throughput",), ("output_tokens_per_s",), flags)
    files = cal.HELD_BACK_LATER if which == "held_back_later" else cal.HELD_BACK_FRESH
    assert not {r[2] for r in rows} & set(files)


def test_every_run_compares_its_metrics_in_the_entry_s_own_order():
    """bench/calibration.py --json lists a point's rows in the order its corpus entry gives its
    metrics, whatever PYTHONHASHSEED is (a set of names once made the order vary per run)."""
    compared = 0
    for pt in bench().all_points():
        order = list(pt.entry["metrics"])
        for run in pt.runs:
            names = list(run.metrics)
            assert names == sorted(names, key=order.index), (pt.id, names)
            compared += len(names) > 2
    assert compared > 50  # enough runs of three or more metrics for an order to show


def test_your_own_coefficients_are_named_yours():
    assert cal.step_model() == cal.CALIBRATED
    assert cal.step_model(ideal=True) == cal.IDEAL
    mine = cal.step_model(step_overhead_s=0.004)
    assert mine.name == "your step model" and mine.step_overhead_s == 0.004
    assert mine.bw_share == cal.BW_SHARE  # the rest stays fitted
    with pytest.raises(ValueError, match="share"):
        cal.step_model(bw_share=1.5)
    with pytest.raises(ValueError, match="overhead"):
        cal.step_model(step_overhead_s=-1)


def test_allreduce_time_by_hand():
    spec = get_model("llama-3.1-70b").spec
    wire = 2 * 3 / 4 * 8192 * 2 / 450e9  # one token's activations, ring at TP 4, NVLink 4
    assert cal.allreduce_seconds(spec, 1, 4, 450, 20e-6) == pytest.approx(2 * 80 * (20e-6 + wire))
    assert cal.allreduce_seconds(spec, 1, 1, 450, 20e-6) == 0.0  # no tensor parallelism
    assert cal.allreduce_seconds(spec, 64, 4, None, 20e-6) == pytest.approx(160 * 20e-6)


# -- physical floors --------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "qwen3-8b"])
@pytest.mark.parametrize("batch", [1, 64, 512])
def test_no_calibrated_step_is_faster_than_the_ideal_byte_time(key, batch):
    m, g = get_model(key), get_gpu("h100-sxm-80gb")
    for tp in (1, 4):
        ideal = step_time(
            Deployment(spec=m.spec, weights=m.weights(), tp=tp),
            context=2048,
            batch=batch,
            bandwidth_gbs=g.bandwidth_gbs,
            peak_tflops=g.bf16_tflops,
        )
        est = cal.estimate_step(m.spec, ideal, cal.CALIBRATED, tp=tp, link_gbs=g.tp_link_gbs)
        assert est.time_s >= ideal.step_time_s
        assert est.time_s >= ideal.step_time_s / cal.BW_SHARE + cal.STEP_OVERHEAD_S


def test_calibrated_step_by_hand():
    m, g = get_model("llama-3.1-8b"), get_gpu("h100-sxm-80gb")
    ideal = step_time(
        Deployment(spec=m.spec, weights=m.weights()),
        context=1,
        batch=1,
        bandwidth_gbs=3350,
        peak_tflops=g.bf16_tflops,
    )
    assert ideal.step_time_s == pytest.approx((READ_8B + 131_072) / BW)
    est = cal.estimate_step(m.spec, ideal, cal.CALIBRATED)
    assert est.time_s == pytest.approx(
        (READ_8B + 131_072) / BW / cal.BW_SHARE + cal.STEP_OVERHEAD_S
    )


def test_no_calibrated_prefill_is_faster_than_one_read_of_the_weights():
    m, g = get_model("llama-3.1-8b"), get_gpu("h100-sxm-80gb")
    for prompt in (1, 16, 2048):
        ideal = prefill(
            m.spec,
            prompt,
            g.bf16_tflops,
            mfu=1.0,
            weight_read_bytes=m.weights().read_per_step(m.spec, prompt),
            bandwidth_gbs=g.bandwidth_gbs,
        )
        est = cal.estimate_ttft(m.spec, ideal, cal.CALIBRATED)
        assert est.time_s >= READ_8B / BW
        assert est.time_s >= ideal.time_s


# -- the simulator's clock under the calibrated model ----------------------------------------


def _setup(speed, **kw):
    m, g = get_model("llama-3.1-8b"), get_gpu("h100-sxm-80gb")
    dep = Deployment(spec=m.spec, weights=m.weights(), gpu=g, **kw)
    return setup(dep, 4096, Speed.of(g, "bf16", speed))


def test_a_decode_step_costs_the_ideal_over_the_share_plus_the_overhead():
    ideal, calib = _setup(cal.IDEAL), _setup(cal.CALIBRATED)
    # one decode token at context 1: weights (one embedding row) and one token of cache
    t0 = ideal.step_seconds(1, 1, 0, decode_pairs=1)
    assert t0 == pytest.approx((READ_8B + 131_072) / BW)
    assert calib.step_seconds(1, 1, 0, decode_pairs=1) == pytest.approx(
        t0 / cal.BW_SHARE + cal.STEP_OVERHEAD_S
    )


def test_a_served_request_waits_the_api_overhead_before_its_first_token():
    wl = Workload(requests=1, prompt=fixed(512), output=fixed(4), rate=math.inf)
    direct = cal.step_model(api_overhead_s=0.0)
    served = cal.step_model(api_overhead_s=0.050)
    a = simulate(_setup(direct), wl)
    b = simulate(_setup(served), wl)
    assert b.ttft_p50_s == pytest.approx(a.ttft_p50_s + 0.050)
    assert b.tpot_p50_s == pytest.approx(a.tpot_p50_s)  # the engine's steps are the same
    assert b.e2el_p50_s == pytest.approx(a.e2el_p50_s + 0.050)


def test_tensor_parallel_steps_pay_their_allreduces():
    m, g = get_model("llama-3.1-70b"), get_gpu("h100-sxm-80gb")
    dep = Deployment(spec=m.spec, weights=m.weights(), gpu=g, tp=4)
    no_ar = setup(dep, 4096, Speed.of(g, "bf16", cal.step_model(allreduce_latency_s=0.0)))
    s = setup(dep, 4096, Speed.of(g, "bf16", cal.CALIBRATED))
    extra = s.step_seconds(1, 100, 0, decode_pairs=100) - no_ar.step_seconds(
        1, 100, 0, decode_pairs=100
    )
    assert extra == pytest.approx(2 * 80 * cal.ALLREDUCE_LATENCY_S)


# -- the command line -------------------------------------------------------------------------

SIM = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--requests", "50"]


def test_simulate_json_has_vllms_names_and_says_which_estimate(capsys):
    j = run(SIM + ["--rate", "4", "--prompt-tokens", "256", "--output-tokens", "64"], capsys)
    for k in (
        "ttft_p50_s",
        "ttft_mean_s",
        "ttft_p99_s",
        "tpot_p50_s",
        "tpot_mean_s",
        "itl_p50_s",
        "itl_p99_s",
        "e2el_p50_s",
        "duration_s",
        "request_throughput",
        "output_tokens_per_s",
        "preemptions",
        "binding_limit",
    ):
        assert k in j, k
    assert j["estimate"] == "calibrated estimate" and "held-back" in j["error_band"]
    ideal = run(
        SIM + ["--rate", "4", "--prompt-tokens", "256", "--output-tokens", "64", "--ideal"], capsys
    )
    assert ideal["estimate"] == "ideal bound" and ideal["error_band"] is None
    assert ideal["tpot_p50_s"] < j["tpot_p50_s"]  # the bound is faster than a real engine
    mine = run(
        SIM
        + [
            "--rate",
            "4",
            "--prompt-tokens",
            "256",
            "--output-tokens",
            "64",
            "--step-overhead-ms",
            "10",
        ],
        capsys,
    )
    assert mine["estimate"] == "your step model" and mine["tpot_p50_s"] > j["tpot_p50_s"]


def test_simulate_takes_length_distributions(capsys):
    base = SIM + ["--rate", "inf"]
    u = run(base + ["--prompt-dist", "uniform:1:1024", "--output-dist", "fixed:8"], capsys)
    g = run(base + ["--lengths", "sharegpt"], capsys)
    ln = run(base + ["--prompt-dist", "lognormal:200:0.5:800", "--output-tokens", "16"], capsys)
    assert u["output_tokens_per_s"] > 0 and g["output_tokens_per_s"] > 0 and ln["max_batch"] > 0
    err = fails(base + ["--prompt-dist", "normal:5", "--output-tokens", "4"], capsys)
    assert "fixed:N, uniform:LO:HI or lognormal" in err
    err = fails(base + ["--prompt-tokens", "4"], capsys)
    assert "output lengths once" in err
    err = fails(base + ["--lengths", "sharegpt", "--prompt-tokens", "4"], capsys)
    assert "--lengths sets both" in err


def test_the_sharegpt_preset_has_the_corpus_means():
    from kvcalc.cli.workload import SHAREGPT, dist_arg

    rng = random.Random(1)
    p, o = dist_arg(SHAREGPT["prompt"]), dist_arg(SHAREGPT["output"])
    n = 20_000
    mp = sum(p.sample(rng) for _ in range(n)) / n
    mo = sum(o.sample(rng) for _ in range(n)) / n
    assert mp == pytest.approx(269_081 / 1_200, rel=0.04)
    assert mo == pytest.approx(226_901 / 1_200, rel=0.04)
    assert p.hi == 1024 and p.lo == 4 and o.lo == 4  # vLLM's benchmark's ShareGPT filter


def test_simulate_pool_flags(capsys):
    base = SIM + ["--rate", "inf", "--prompt-tokens", "512", "--output-tokens", "64"]
    small = run(base + ["--kv-pool-gib", "2"], capsys)
    big = run(base + ["--gpu-memory-utilization", "0.95"], capsys)
    assert small["max_batch"] < big["max_batch"]
    err = fails(base + ["--kv-pool-gib", "2", "--gpu-memory-utilization", "0.9"], capsys)
    assert "give one of them" in err
    err = fails(base + ["--kv-pool-gib", "500"], capsys)
    assert "does not fit beside the weights" in err
    trt = run(base + ["--kv-free-fraction", "0.9"], capsys)
    assert trt["max_batch"] > 0


def test_simulate_weight_formats(capsys):
    base = SIM + [
        "--rate",
        "inf",
        "--prompt-tokens",
        "128",
        "--output-tokens",
        "64",
        "--requests",
        "1",
    ]
    bf16 = run(base, capsys)
    fp8 = run(base + ["--weight-dtype", "fp8"], capsys)
    q4 = run(base + ["--weight-bits", "4.84"], capsys)
    gib = run(base + ["--weights-gib", "4"], capsys)
    assert bf16["tpot_p50_s"] > fp8["tpot_p50_s"] > q4["tpot_p50_s"]
    assert gib["tpot_p50_s"] < bf16["tpot_p50_s"]
    err = fails(base + ["--weight-bits", "0.5"], capsys)
    assert "bits per weight" in err


def test_weight_bits_reproduce_llama_bench_sizes():
    # llama-bench printed 12.55 GiB (F16) and 6.67 GiB (Q8_0: 34 bytes per 32 weights) for
    # CodeLlama 7B's 6.74 B parameters (llamacpp-pr4766-rtx4090.yaml).
    spec = get_model("llama-2-7b").spec
    assert weights_at_bits(spec, 16).bytes / 2**30 == pytest.approx(12.55, abs=0.01)
    assert weights_at_bits(spec, 8.5).bytes / 2**30 == pytest.approx(6.67, abs=0.01)
    moe = get_model("mixtral-8x7b").spec
    w = weights_at_bits(moe, 5.68)
    assert w.read_per_step(moe, 1) < w.bytes / 2  # one token reads 2 of 8 experts


def test_step_time_calibrated_and_your_own(capsys):
    base = ["step-time", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--context", "1"]
    ideal = run(base, capsys)
    assert ideal["estimate"] == "ideal bound" and "estimated_step_time_s" not in ideal
    c = run(base + ["--calibrated"], capsys)
    assert c["step_time_s"] == pytest.approx((READ_8B + 131_072) / BW)  # the bound, as before
    assert c["estimated_step_time_s"] == pytest.approx(
        c["step_time_s"] / cal.BW_SHARE + cal.STEP_OVERHEAD_S
    )
    assert c["estimate"] == "calibrated estimate" and "held-back" in c["error_band"]
    mine = run(base + ["--bw-share", "0.8", "--step-overhead-ms", "1"], capsys)
    assert mine["estimate"] == "your step model"
    assert mine["estimated_step_time_s"] == pytest.approx(c["step_time_s"] / 0.8 + 0.001)
    err = fails(base + ["--bw-share", "1.2"], capsys)
    assert "share" in err


# -- the fit and the error band ---------------------------------------------------------------


def test_stages_1_and_2_of_the_fit_reproduce_the_constants():
    b = bench()
    points = b.all_points()
    steps = b.decode_steps(points)
    share, overhead, _ = b.fit_share_overhead(steps)
    assert round(share, 3) == cal.BW_SHARE and round(overhead, 4) == cal.STEP_OVERHEAD_S
    latency = b.fit_allreduce_latency(steps, cal.BW_SHARE, cal.STEP_OVERHEAD_S)
    assert round(latency, 6) == cal.ALLREDUCE_LATENCY_S
    assert all(
        not s.id.startswith(("sglang-h200", "vllm-rocm", "llamacpp-pr4766")) for s in steps
    )  # nothing held back is fitted


@pytest.mark.slow
def test_the_whole_fit_reproduces_the_constants():
    f = bench().fit(bench().all_points())
    for k in (
        "BW_SHARE",
        "STEP_OVERHEAD_S",
        "ALLREDUCE_LATENCY_S",
        "MFU",
        "DEQUANT_GEMM_MFU",
        "API_OVERHEAD_S",
        "API_OVERHEAD_BY_STACK",
    ):
        assert f[k] == getattr(cal, k), k


def test_every_corpus_point_runs_from_the_command_line_and_the_band_is_measured():
    b = bench()
    points = b.all_points()
    for pt in points:  # every entry is run or left out with a reason
        assert pt.runs or pt.excluded.get("*"), pt.id
    held = [pt for pt in points if pt.never_fitted]
    rows = b.evaluate(held)
    assert b.error_band(rows) == cal.ERROR_BAND
    for r in rows:  # the calibrated estimate beats the ideal bound on the held-back median
        assert r["after"] > 0 and r["before"] > 0


def _entry(point_id):
    return next(pt for pt in bench().all_points() if pt.id == point_id)


def test_a_fixed_max_concurrency_runs_as_a_closed_loop_of_that_many_users():
    # GPUStack's Qwen3-8B page: "Maximum request concurrency: 8", "Successful requests: 100";
    # vllm bench serve at --max-concurrency C and rate inf keeps C requests in flight.
    argv = _entry("vllm0110-h100-qwen3-8b-bf16-tp1-sharegpt-c8").runs[0].argv
    i = argv.index("--users")
    assert argv[i + 1] == "8" and argv[argv.index("--requests") + 1] == "100"
    assert "--rate" not in argv and "--lengths" not in argv  # its own lengths: see below


def _sampled_mean(argv, flag, n=100_000):
    """The mean length the simulator's own sampler draws from ``flag``'s distribution."""
    from kvcalc.cli.workload import dist_arg

    d, rng = dist_arg(argv[argv.index(flag) + 1]), random.Random(7)
    return sum(d.sample(rng) for _ in range(n)) / n


def test_a_sharegpt_run_that_publishes_its_token_totals_is_simulated_at_its_own_means():
    # GPUStack's page: "Successful requests: 100", "Total input tokens: 23260", "Total generated
    # tokens: 22061": 232.6 and 220.61 tokens a request, not the preset's 224 / 190.
    argv = _entry("vllm0110-h100-qwen3-8b-bf16-tp1-sharegpt-c8").runs[0].argv
    assert _sampled_mean(argv, "--prompt-dist") == pytest.approx(232.6, rel=0.01)
    assert _sampled_mean(argv, "--output-dist") == pytest.approx(220.61, rel=0.01)
    # zhjunqin's vLLM 0.4.1 table, 1 req/s: "| 1 | 100 | 105.08 | 22925 | 21789 |"
    argv = _entry("vllm041-rtx3090-llama3-8b-bf16-tp1-sharegpt-rps1").runs[0].argv
    assert _sampled_mean(argv, "--prompt-dist") == pytest.approx(229.25, rel=0.01)
    assert _sampled_mean(argv, "--output-dist") == pytest.approx(217.89, rel=0.01)
    # the preset's shape kept: sigma 1, clipped to 4-1,024 tokens
    assert argv[argv.index("--output-dist") + 1].endswith(":1:1024:4")
    # a run that publishes no totals keeps the preset (SGLang's vLLM 0.6.0 page)
    argv = _entry("vllm060-a100-llama31-8b-sharegpt-offline").runs[0].argv
    assert argv[argv.index("--lengths") + 1] == "sharegpt" and "--output-dist" not in argv


def test_the_clipped_log_normal_mean_is_the_sampled_one():
    # bench/calibration.py solves for the median in closed form; the sampler is the judge.
    b = bench()
    for median, sigma, lo, hi in ((120, 1, 4, 1024), (145, 1, 4, 1024), (900, 1.5, 4, 1024)):
        argv = ["--output-dist", f"lognormal:{median}:{sigma}:{hi}:{lo}"]
        got = b.clipped_lognormal_mean(median, sigma, lo, hi)
        assert got == pytest.approx(_sampled_mean(argv, "--output-dist", 200_000), rel=0.005)
    # unclipped in effect, it is the log-normal's own mean, median x exp(sigma^2 / 2)
    assert b.clipped_lognormal_mean(100, 0.5, 1, 10**6) == pytest.approx(100 * math.exp(0.125))
    # and the preset's medians give the means its help states (224 prompt, 190 output tokens)
    assert b.median_for_mean(224, 1, 4, 1024) == pytest.approx(145, abs=1)
    assert b.median_for_mean(190, 1, 4, 1024) == pytest.approx(120, abs=1)
    with pytest.raises(ValueError, match="cannot be clipped"):
        b.median_for_mean(2000, 1, 4, 1024)


def test_a_server_flag_kvcalc_shares_with_vllm_is_passed_on_and_others_are_not():
    # The page's serving script: "vllm serve openai/gpt-oss-120b --max-model-len 32768
    # --async-scheduling --max-num-batched-tokens 4096".
    argv = _entry("vllm0110-a100-gpt-oss-120b-mxfp4-tp1-sharegpt-c4-async-mnbt4096").runs[0].argv
    assert argv[argv.index("--max-num-batched-tokens") + 1] == "4096"
    assert "--async-scheduling" not in argv and "--max-model-len" not in argv
    # gpt-oss's own checkpoint (MXFP4 experts, BF16 rest) is kvcalc's "auto", not all-MXFP4
    assert argv[argv.index("--weight-dtype") + 1] == "auto"


def test_each_harness_gets_its_own_flags():
    # SGLang 0.5.3.post3 started with no flags must not inherit the late-2024 datacrunch
    # defaults ("--gpu-memory-utilization 0.85"); trtllm-serve gets TensorRT-LLM's default KV
    # share of free memory, 0.9.
    sgl = _entry("sglang053-h100-qwen3-8b-bf16-tp1-sharegpt-c4").runs[0].argv
    assert "--gpu-memory-utilization" not in sgl
    trt = _entry("trtllm120rc1-h100-qwen3-8b-bf16-tp1-sharegpt-c4").runs[0].argv
    assert trt[trt.index("--kv-free-fraction") + 1] == "0.9"


def test_the_later_sources_run_with_the_settings_their_own_logs_print():
    # trtllm-bench's result files: "Max Runtime Batch Size: 2048", "Max Runtime Tokens: 8192",
    # "KV Cache Dtype: FP8", "Scheduling Policy: Guaranteed No Evict", and the executor's "Number
    # of blocks in KV cache primary pool: 42668", "Number of tokens per block: 64.", "Allocated
    # 52.08 GiB for max tokens in paged KV cache (2730752)". Guaranteed No Evict holds a
    # request's blocks to completion: 128 + 2,048 tokens are 34 blocks of 64, and 42,668 / 34 =
    # 1,254.9, so 1,254 run at once; 128 + 128 tokens are 4 blocks (10,667 fit), so 2,048 binds.
    trt = _entry("trtllm016-h100x8-llama31-70b-fp8-tp8-128-2048").runs[0].argv
    assert trt[trt.index("--max-num-seqs") + 1] == "1254"
    assert trt[trt.index("--max-num-batched-tokens") + 1] == "8192"
    assert trt[trt.index("--kv-dtype") + 1] == "fp8" and "--direct" in trt
    assert trt[trt.index("--kv-pool-gib") + 1] == "52.08" and "--kv-free-fraction" not in trt
    short = _entry("trtllm016-h100x8-llama31-70b-fp8-tp8-128-128").runs[0].argv
    assert short[short.index("--max-num-seqs") + 1] == "2048"
    # the logged pool is the logged tokens at Llama 3.1 70B's FP8 bytes per token per GPU:
    # 80 layers x 8 KV heads x 128 x 2 (K and V) x 1 B / 8 GPUs = 20,480 B
    assert pytest.approx(52.08, abs=0.005) == 2730752 * (80 * 8 * 128 * 2 // 8) / 2**30
    # MLC LLM: "max batch size is 48"; q4f16_1 is 4 bits in groups of 32 with a 16-bit scale,
    # 4 + 16 / 32 = 4.5 bits ("Parameters: 4308.13 MB" for 8.03 B weights); its own
    # "--gpu-memory-utilization 0.90" is passed on from the server command line.
    mlc = _entry("mlcllm01-rtx3090-llama3-8b-q4f16-1-tp1-sharegpt-rps2").runs[0].argv
    assert mlc[mlc.index("--weight-bits") + 1] == "4.5"
    assert mlc[mlc.index("--max-num-seqs") + 1] == "48"
    assert mlc[mlc.index("--gpu-memory-utilization") + 1] == "0.90"
    assert pytest.approx(4308.13, rel=0.002) == 8.03e9 * 4.5 / 8 / 2**20
    # AWQ: 4 bits in groups of 128 with a 16-bit scale, 4 + 16 / 128 = 4.125 bits.
    jan = _entry("trtllm071-jan-rtx3090-mistral-7b-v02-int4-awq-bs1-2048-512").runs[0].argv
    assert jan[0] == "step-time" and jan[jan.index("--weight-bits") + 1] == "4.125"
    # LMDeploy's --quant-policy 8 is an int8 KV cache; the Triton engine's maxNumSequences 40.
    kv8 = _entry("lmdeploy040-rtx3090-llama3-8b-bf16-tp1-sharegpt-rps8-kvint8").runs[0].argv
    assert kv8[kv8.index("--kv-dtype") + 1] == "int8"
    # and LMDeploy 0.4.0's defaults: its pool, cache_max_entry_count 0.8 of the free memory;
    # max_batch_size 128; max_prefill_token_num 8192.
    assert kv8[kv8.index("--cache-max-entry-count") + 1] == "0.8"
    assert kv8[kv8.index("--max-num-seqs") + 1] == "128"
    assert kv8[kv8.index("--max-num-batched-tokens") + 1] == "8192"
    assert kv8[kv8.index("--block-size") + 1] == "64"
    assert "--gpu-memory-utilization" not in kv8
    tr = _entry("trtllm090-rtx3090-llama3-8b-fp16-tp1-sharegpt-rps5").runs[0]
    assert tr.argv[tr.argv.index("--max-num-seqs") + 1] == "40"
    assert tr.calibrated == ["--serving-stack", "tensorrt-llm"]


def test_runs_without_chunked_prefill_take_vllm_v0s_default_scheduler():
    # Each source's own words say chunked prefill was off (bench/calibration.py PREFILL_FIRST):
    # found in that corpus file, and its vLLM runs, and no other, on --scheduler prefill-first.
    b = bench()
    for (file, _eng), words in b.PREFILL_FIRST.items():
        text = " ".join((b.CORPUS / file).read_text(encoding="utf-8").split())
        assert words in text, (file, words)
    for pt in b.all_points():
        for run in pt.runs:
            v0 = (pt.file, pt.entry["engine"]["name"]) in b.PREFILL_FIRST
            assert ("prefill-first" in run.argv) == (v0 and run.command == "simulate"), pt.id
    v041 = _entry("vllm041-rtx3090-llama3-8b-bf16-tp1-sharegpt-rps5").runs[0].argv
    assert v041[v041.index("--scheduler") + 1] == "prefill-first"
    for point in (
        "vllm060-a100-llama31-8b-sharegpt-rps4",
        "vllm-pr2542-h100x8-mixtral-8x7b-tp8-bs1-in1000-out50-fusedmoe",
    ):
        assert "prefill-first" in _entry(point).runs[0].argv
    assert "--scheduler" not in _entry("vllm0110-h100-qwen3-8b-bf16-tp1-sharegpt-c8").runs[0].argv


def test_closed_loops_enter_the_fit_only_when_asked_at_the_batch_their_users_decode():
    # Qwen3-8B on vLLM 0.11.0, 8 users: "Request throughput (req/s): 4.16", "Mean TTFT (ms):
    # 74.57", "Mean ITL (ms): 8.57". Waiting for a first token: 4.16 x 0.07457 = 0.31 requests
    # (Little's law), so 8 - 0.31 = 7.69, i.e. 8 decode together; 1 user: 1.
    b = bench()
    points = b.all_points()
    c8, c1 = (f"vllm0110-h100-qwen3-8b-bf16-tp1-sharegpt-c{n}" for n in (8, 1))
    assert not {c8, c1} & {s.id for s in b.decode_steps(points)}
    steps = {s.id: s for s in b.decode_steps(points, closed_loop=True)}
    assert steps[c8].batch == 8 and steps[c8].measured_s == pytest.approx(0.00857)
    assert steps[c1].batch == 1 and steps[c1].measured_s == pytest.approx(0.00726)
    assert all(
        not s.id.startswith(("sglang-h200", "vllm-rocm", "llamacpp-pr4766")) for s in steps.values()
    )  # still nothing held back


# -- one serving stack's API overhead ---------------------------------------------------------

SERVED = [
    "simulate",
    "--model",
    "llama-3.1-8b",
    "--gpu",
    "h100-sxm-80gb",
    "--requests",
    "1",
    "--rate",
    "1",
    "--prompt-tokens",
    "467",
    "--output-tokens",
    "16",
]


def test_a_serving_stack_adds_its_own_api_overhead_to_the_first_token(capsys):
    """One request on an idle engine: its TTFT is the engine's prefill plus the API overhead
    (the step model's definition), so choosing vLLM's stack moves the TTFT by exactly the
    difference of the two fitted overheads, and nothing the engine does changes."""
    pooled = run(SERVED, capsys)
    vllm = run(SERVED + ["--serving-stack", "vllm"], capsys)
    assert vllm["ttft_mean_s"] - pooled["ttft_mean_s"] == pytest.approx(
        cal.API_OVERHEAD_BY_STACK["vllm"] - cal.API_OVERHEAD_S, abs=1e-12
    )
    assert vllm["tpot_mean_s"] == pytest.approx(pooled["tpot_mean_s"], rel=1e-12)
    assert vllm["estimate"] == "calibrated estimate" and vllm["step_model"]["stack"] == "vllm"
    assert vllm["step_model"]["api_overhead_s"] == cal.API_OVERHEAD_BY_STACK["vllm"]
    main(SERVED + ["--serving-stack", "sglang"])
    assert "API overhead 16.6 ms (SGLang's serving stack)" in capsys.readouterr().out


def test_a_serving_stack_is_one_of_those_fitted_and_not_given_twice(capsys):
    assert "invalid choice" in fails(SERVED + ["--serving-stack", "lmdeploy"], capsys)
    assert "give one of them" in fails(SERVED + ["--serving-stack", "vllm", "--direct"], capsys)
    err = fails(SERVED + ["--serving-stack", "vllm", "--api-overhead-ms", "5"], capsys)
    assert "--api-overhead-ms" in err and "give one of them" in err
    assert "ideal bound has no serving stack" in fails(
        SERVED + ["--serving-stack", "vllm", "--ideal"], capsys
    )
    with pytest.raises(ValueError, match="fitted API overhead for"):
        cal.step_model(stack="ollama")


def test_a_stack_model_is_still_the_calibrated_estimate_until_a_coefficient_is_changed():
    m = cal.step_model(stack="tensorrt-llm")
    assert m.is_calibrated and m.api_overhead_s == cal.API_OVERHEAD_BY_STACK["tensorrt-llm"]
    assert not cal.step_model(stack="tensorrt-llm", mfu=0.6).is_calibrated
    assert cal.step_model(stack="tensorrt-llm", mfu=0.6).name == "your step model"
    assert not cal.step_model(api_overhead_s=cal.API_OVERHEAD_BY_STACK["vllm"]).is_calibrated


def test_served_corpus_runs_take_their_engines_stack_and_direct_ones_none():
    """The command lines: an HTTP benchmark of vLLM, SGLang or TensorRT-LLM gets its engine's
    stack in the calibrated run (never in the ideal one); a direct run (LLM class, static
    batches) and an engine with no fitted stack get none."""
    b = bench()
    seen = set()
    for pt in b.all_points():
        for r in pt.runs:
            kind = pt.entry["workload"]["kind"]
            fam = b.engine_family(pt)
            assert "--serving-stack" not in r.argv
            if r.calibrated:
                assert kind == "serving" and "--direct" not in r.argv
                assert r.calibrated == ["--serving-stack", fam]
                seen.add(fam)
            elif r.command == "simulate" and kind == "serving":
                assert fam not in cal.API_OVERHEAD_BY_STACK or "--direct" in r.argv
    assert seen == set(cal.API_OVERHEAD_BY_STACK)


def test_guaranteed_no_evict_holds_each_request_s_blocks_to_completion():
    # TensorRT-LLM's GuaranteedNoEvictScheduler admits a request only when its prompt + max
    # new tokens fit: the tuning guide's 2,048 + 2,048 tokens are 4,096 / 64 = 64 blocks, so
    # trtllm-bench's logged pool of 42,668 blocks holds 42,668 // 64 = 666 at once; a build cap
    # of 64 binds below that; a pool smaller than one request still runs one.
    b = bench()
    w = {"input_len": 2048, "output_len": 2048}
    assert b._no_evict_seqs(42668, w, 2048) == 666
    assert b._no_evict_seqs(42668, w, 64) == 64
    assert b._no_evict_seqs(10, w, 2048) == 1


def test_simulate_json_names_the_pool_it_ran_with(capsys):
    # trtllm-bench's log for Llama 3.1 70B (FP8 cache) at TP 8: "Allocated 52.08 GiB for max
    # tokens in paged KV cache", "Number of blocks in KV cache primary pool: 42668", "Number of
    # tokens per block: 64." By hand: 80 layers x 8 KV heads x 128 x 2 (K and V) x 1 byte / 8
    # GPUs = 20,480 B a token per GPU, 1,310,720 B a block of 64; round(52.08 GiB) // that.
    j = run(
        [
            "simulate",
            "--model",
            "llama-3.1-70b",
            "--gpu",
            "h100-sxm-80gb",
            "--weight-dtype",
            "fp8",
            "--kv-dtype",
            "fp8",
            "--tp",
            "8",
            "--requests",
            "1",
            "--rate",
            "inf",
            "--prompt-tokens",
            "128",
            "--output-tokens",
            "8",
            "--kv-pool-gib",
            "52.08",
            "--block-size",
            "64",
            "--direct",
        ],
        capsys,
    )
    assert j["block_size"] == 64
    assert j["kv_pool_blocks"] == round(52.08 * 2**30) // (64 * 20_480) == 42_663
    assert j["kv_pool_blocks"] == pytest.approx(42_668, rel=2e-4)  # the log's, 52.08 rounded
    assert j["usable_blocks"] == 42_663 - 1  # vLLM's null block (PR #47272) is no request's


def test_a_tuning_guide_engine_runs_with_its_build_config_and_the_default_pool():
    # The guide's max-batch-size page: "Max Batch Size 64" is the engine's build cap; its
    # throughput run gets TensorRT-LLM's default free fraction 0.9 in blocks of 64, and its
    # latency run (batch 1, 100 requests) is a closed loop of one user with no HTTP stack.
    off = _entry("trtllm016-h100x4-llama33-70b-bf16-mbs64-tp4-2048-2048-offline").runs[0].argv
    assert off[off.index("--kv-free-fraction") + 1] == "0.9"
    assert off[off.index("--block-size") + 1] == "64"
    assert off[off.index("--max-num-seqs") + 1] == "64"
    assert off[off.index("--max-num-batched-tokens") + 1] == "8192" and "--direct" in off
    lat = _entry("trtllm016-h100x4-llama33-70b-bf16-mbs64-tp4-2048-2048-bs1").runs
    assert [r.command for r in lat] == ["simulate"]
    argv = lat[0].argv
    assert argv[argv.index("--users") + 1] == "1" and argv[argv.index("--requests") + 1] == "100"
    assert argv[argv.index("--tp") + 1] == "4" and "--direct" in argv
    assert set(lat[0].metrics) == {"ttft_mean_s", "itl_mean_s"}


def test_a_single_stream_at_tensor_parallel_runs_at_its_tp():
    # MLC's llm-perf-bench: Llama 2 70B on 8 x A100 PCIe, "--tensor-parallel-size $GPU_NUM"
    run_ = _entry("vllm-a100pciex8-llama-2-70b-fp16-tp8-bs1-in7-out256").runs[0]
    assert run_.command == "step-time" and run_.argv[run_.argv.index("--tp") + 1] == "8"


def test_the_band_reads_as_what_it_measures():
    # ERROR_BAND holds (median |pred / meas - 1|, worst max(ratio, 1 / ratio), n): half of the
    # n runs were within the median; the worst was that many times off.
    med, worst, n = cal.ERROR_BAND["ttft"]
    got = cal.error_band_text("ttft")
    assert got == (
        f"time to first token: within ±{med:.0%} of the measured value on half of {n} "
        f"held-back published measurements, {worst:.3g}x off at worst"
    )
    both = cal.error_band_text(("single_stream", "ttft"))
    assert both.startswith("single-stream decode: ") and both.endswith(got)
    assert cal.band_for_batch(1) == "single_stream" and cal.band_for_batch(2) == "tpot_itl"


def test_the_ideal_bound_computes_at_the_full_dense_peak(capsys):
    # docs/design.md, principle 7: the ideal bound is bytes / bandwidth and FLOPs / peak. By
    # hand: one 8,192-token prompt of Llama 3.1 8B (7,504,924,672 parameters multiplied: all but
    # its input table) is at least 2 x that x 8,192 = 1.23e14 FLOPs, 124 ms at 989.4 TFLOPS;
    # --ideal must not take twice that (MFU 0.5) and the calibrated estimate (MFU 0.511, its
    # overheads) must take longer.
    assert cal.IDEAL.mfu == 1.0
    argv = [
        "simulate",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-sxm-80gb",
        "--requests",
        "1",
        "--rate",
        "inf",
        "--prompt-tokens",
        "8192",
        "--output-tokens",
        "1",
        "--direct",
    ]
    ideal = run(argv + ["--ideal"], capsys)["ttft_p50_s"]
    real = run(argv, capsys)["ttft_p50_s"]
    floor = 2 * 7_504_924_672 * 8192 / 989.4e12
    assert floor <= ideal < 1.5 * floor and real > ideal


def test_the_ideal_step_is_never_faster_than_its_arithmetic():
    # A teacher's second review: at batch 2,048 the step-time CLI printed "step time: 14.74 ms
    # (the ideal bound)" beside "compute floor: 31.21 ms". By hand, Llama 3.1 8B at batch
    # 2,048 multiplies 7,504,924,672 weights per token: 2 x 2,048 x that / 989.4e12 = 31.07 ms
    # of GEMMs at the H100's dense BF16 peak, more than its reads (15.01 GB of weights and
    # 2,048 x 128 x 131,072 B of cache, 14.5 ms at 3,350 GB/s): the bound is the arithmetic.
    m, gpu = get_model("llama-3.1-8b"), get_gpu("h100-sxm-80gb")
    s = step_time(
        Deployment(spec=m.spec, weights=m.weights()),
        context=128,
        batch=2048,
        bandwidth_gbs=BW / 1e9,
        peak_tflops=gpu.peak_tflops("bf16"),
    )
    gemm = 2 * 2048 * 7_504_924_672 / 989.4e12
    assert s.memory_time_s < gemm <= s.compute_time_s == s.step_time_s
    assert s.tokens_per_s == pytest.approx(2048 / s.step_time_s)
    one = step_time(
        Deployment(spec=m.spec, weights=m.weights()),
        context=128,
        batch=1,
        bandwidth_gbs=BW / 1e9,
        peak_tflops=gpu.peak_tflops("bf16"),
    )
    assert one.step_time_s == one.memory_time_s > one.compute_time_s  # batch 1: the reads
