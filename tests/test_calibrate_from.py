"""Calibrating an engine profile from the user's own benchmark (issue 41, item 3):
kvcalc.perf.calibrate_from and ``simulate --calibrate-from``.

The readers are checked on files written here by hand in each format; the fit on a made-up step
whose true coefficients are known; the command on one real row of aiconfigurator's training
split (tests/data/benchmarks/aic/)."""

from __future__ import annotations

import json
import math
import re

import pytest
from conftest import ROOT

from kvcalc.cli import main
from kvcalc.perf import engines
from kvcalc.perf.calibrate_from import (
    BenchRow,
    bench_row_loop,
    calibrate,
    loop_notes,
    read_benchmark,
)

AIC = ROOT / "tests" / "data" / "benchmarks" / "aic"


def test_silicon_sample_rows_are_read_from_their_own_columns():
    text = (
        "backend,isl,osl,batch_size,tp_size,silicon_ttft_ms,silicon_tpot_ms\n"
        "vllm,1024,1024,4,4,89.85,12.38\n"
        "vllm,8192,1024,8,4,415.89,15.61\n"
    )
    rows = read_benchmark(text)
    assert [(r.isl, r.osl, r.users) for r in rows] == [(1024, 1024, 4), (8192, 1024, 8)]
    assert rows[0].measured() == {"TTFT": pytest.approx(0.08985), "TPOT": pytest.approx(0.01238)}
    # a row that gives its batch per attention-DP rank: the source's concurrency is the users
    # (MiniMax-M2.5 on H100 in aiconfigurator's 2026-04-06 dump: batch 16 x attention DP 4)
    text = (
        "silicon_data_source,isl,osl,batch_size,attention_dp_size,silicon_ttft_ms,silicon_tpot_ms\n"
        '"db; silicon_concurrency=64; measured=2026-03-28",1024,1024,16,4,192.03,25.69\n'
    )
    assert [r.users for r in read_benchmark(text)] == [64]


def test_vllm_bench_serve_save_result_json_is_read():
    # the keys vllm bench serve --save-result writes (benchmarks/benchmark_serving.py result)
    result = {
        "completed": 40,
        "total_input_tokens": 40 * 2000,
        "total_output_tokens": 40 * 500,
        "max_concurrency": 8,
        "request_rate": "inf",
        "mean_ttft_ms": 250.0,
        "mean_tpot_ms": 20.0,
    }
    (r,) = read_benchmark(json.dumps(result))
    assert (r.isl, r.osl, r.users, r.rate, r.requests) == (2000, 500, 8, None, 40)
    assert r.measured() == {"TTFT": 0.25, "TPOT": 0.02}
    two = read_benchmark(json.dumps(result) + "\n" + json.dumps({**result, "max_concurrency": 16}))
    assert [x.users for x in two] == [8, 16]


def test_each_format_runs_in_the_loop_its_client_ran():
    """A silicon-sample row runs as InferenceMAX's client ran it (10 x N requests, lengths
    uniform on [int(0.8 L), L]; SGLang's rows at the stated lengths; TensorRT-LLM's with one
    request more than a batch of N); a ``vllm bench serve`` result as its own closed loop over
    its completed requests, every one of the stated lengths (the random dataset's default range
    ratio, 0)."""
    silicon = read_benchmark(
        "isl,osl,batch_size,silicon_ttft_ms,silicon_tpot_ms\n1000,500,8,90,12\n"
    )
    (row,) = silicon
    loop = bench_row_loop(row, "vllm")
    wl = loop.workload
    assert (wl.users, wl.requests, loop.max_num_seqs) == (8, 80, None)
    assert (wl.prompt.kind, wl.prompt.lo, wl.prompt.hi) == ("uniform", 800, 1000)
    assert (wl.output.kind, wl.output.lo, wl.output.hi) == ("uniform", 400, 500)
    wl = bench_row_loop(row, "sglang").workload
    assert (wl.prompt.kind, wl.prompt.lo, wl.output.kind, wl.output.lo) == (
        "fixed",
        1000,
        "fixed",
        500,
    )
    loop = bench_row_loop(row, "trtllm")
    assert (loop.workload.users, loop.workload.requests, loop.max_num_seqs) == (9, 80, 8)
    result = {
        "completed": 40,
        "total_input_tokens": 40 * 2000,
        "total_output_tokens": 40 * 500,
        "max_concurrency": 8,
        "mean_ttft_ms": 250.0,
        "mean_tpot_ms": 20.0,
    }
    # ... and a calibration says so
    assert (
        "10 x the users' requests, lengths uniform from 80% to 100%"
        in loop_notes(silicon, "vllm")[0]
    )
    assert "one request more in flight" in loop_notes(silicon, "trtllm")[0]
    (served,) = read_benchmark(json.dumps(result))
    assert "completed requests" in loop_notes([served], "vllm")[0]
    for engine in ("vllm", "sglang", "trtllm"):
        loop = bench_row_loop(served, engine)
        wl = loop.workload
        assert (wl.users, wl.requests, loop.max_num_seqs) == (8, 40, None)
        assert (wl.prompt.kind, wl.prompt.lo, wl.output.lo) == ("fixed", 2000, 500)


def test_vllm_bench_latency_output_is_read_with_its_arguments():
    text = (
        "Namespace(model='meta-llama/Llama-3.1-8B', input_len=512, output_len=128, "
        "batch_size=8, n=1)\n...\nAvg latency: 1.8432 seconds\n"
    )
    (r,) = read_benchmark(text)
    assert (r.isl, r.osl, r.batch, r.latency_s) == (512, 128, 8, 1.8432)
    j = {"avg_latency": 2.5, "input_len": 1024, "output_len": 256, "batch_size": 4}
    (r,) = read_benchmark(json.dumps(j))
    assert (r.isl, r.osl, r.batch, r.latency_s) == (1024, 256, 4, 2.5)
    # several runs' JSON, as a list or one per line: every one of them (the first alone, before)
    two = [j, {**j, "batch_size": 8, "avg_latency": 3.1}]
    for text in (json.dumps(two), "\n".join(map(json.dumps, two))):
        assert [(r.batch, r.latency_s) for r in read_benchmark(text)] == [(4, 2.5), (8, 3.1)]


@pytest.mark.parametrize(
    "text, says",
    [
        ("", "empty"),
        ("hello world", "not a benchmark"),
        ("Avg latency: 1.2 seconds", "input_len"),
        ("isl,osl,batch_size,silicon_tpot_ms\n1024,128,0,10\n", "at least 1"),
        ("isl,osl,batch_size,silicon_tpot_ms\n1024,128,4,-1\n", "above 0"),
        ("mode,isl,osl,batch_size,silicon_tpot_ms\ndisagg,1024,128,4,10\n", "aggregated runs"),
    ],
)
def test_a_file_it_cannot_read_is_refused_by_what_is_missing(text, says):
    with pytest.raises(ValueError, match=says):
        read_benchmark(text)


def test_one_row_fits_a_step_whose_true_coefficients_are_known():
    # A made-up engine whose step takes 13 ms of GPU time: TPOT = f x 13 ms and TTFT = f x 50 ms
    # + the API's time, f the GPU's time factor (1 for the profile). The "measured" row is the
    # same law with the GPU's time 1.2x the profile's and 10 ms of API: 15.6 ms and 70 ms
    # (worked by hand). The fit lowers (log TPOT's residual)^2 + (ridge 1 x log f)^2: one row
    # moves log f half of the way, f = 1.2 ** (1 / 2); two rows that agree, 2 / 3 of it. The
    # API's small ridge lets it meet the TTFT.
    def law(p: engines.EngineProfile, row: BenchRow) -> dict[str, float]:
        f = p.gpu_time_factor
        return {"TPOT": f * 0.013, "TTFT": f * 0.050 + p.api_overhead_s}

    base = engines.EngineProfile(
        engine="vllm",
        version="0.18.0",
        bw_share=0.9,
        kv_bw_share=0.9,
        step_overhead_s=0.003,
        mfu=0.5,
        attn_mfu=0.5,
        allreduce_latency_s=5e-5,
        ep_latency_s=5e-5,
        api_overhead_s=0.030,
        seq_overhead_s=2e-5,
        request_overhead_s=2e-4,
        layer_overhead_s=1e-5,
        expert_bw_share=0.9,
        host_overlap=0.5,
        expert_mfu=0.5,
        fp8_gemm_share=1.0,
        max_num_batched_tokens=8192,
        max_num_seqs=1024,
        fitted_rows=0,
    )
    row = BenchRow(isl=1000, osl=100, users=1, ttft_ms=70.0, tpot_ms=15.6)
    c = calibrate(base, [row], law)
    (f,) = c.fit
    assert f["TPOT"][1] == pytest.approx(0.013)  # before: 13 ms
    assert f["TTFT"][1] == pytest.approx(0.080)  # before: 50 ms + 30 ms
    assert set(c.changed()) == {"gpu_time_factor", "api_overhead_s"}
    assert c.profile.gpu_time_factor == pytest.approx(1.2**0.5, rel=0.005)
    assert f["TPOT"][2] == pytest.approx(0.013 * 1.2**0.5, rel=0.005)
    assert f["TTFT"][2] == pytest.approx(0.070, rel=0.01)
    said = "\n".join(c.report())
    assert "gpu_time_factor: 1 -> 1.095 (the GPU's time: your run's steps 9.5% slower" in said
    assert "why not all the way" in said
    two = calibrate(base, [row, row], law)
    assert two.profile.gpu_time_factor == pytest.approx(1.2 ** (2 / 3), rel=0.005)
    assert "calibrated on your 1 row" in c.band_text()


def _one_row_file(tmp_path, row_id: str):
    lines = (AIC / "aic-silicon-train.csv").read_text().splitlines()
    (line,) = [x for x in lines if x.startswith(row_id + ",")]
    p = tmp_path / "mine.csv"
    p.write_text(lines[0] + "\n" + line + "\n")
    return p


def test_the_command_calibrates_from_one_row_and_says_what_changed(tmp_path, capsys):
    # MiniMax-M2.5 on 4 x H200, vLLM 0.16.0, 1,024 + 1,024 tokens at 4 users: measured TTFT
    # 89.85 ms, TPOT 12.38 ms (the row's own columns)
    p = _one_row_file(tmp_path, "minimaxm2_5_h200_vllm_fp8_agg_1024x1024_c4_cfg606")
    argv = [
        "simulate",
        "--config",
        str(AIC / "configs" / "MiniMaxAI--MiniMax-M2.5.json"),
        "--gpu",
        "h200-141gb",
        "--tp",
        "4",
        "--weight-dtype",
        "fp8",
        "--users",
        "16",
        "--requests",
        "48",
        "--prompt-tokens",
        "1024",
        "--output-tokens",
        "1024",
        "--engine",
        "vllm@0.16.0",
        "--calibrate-from",
        str(p),
        "--json",
    ]
    assert main(argv) == 0
    j = json.loads(capsys.readouterr().out)
    cal = j["calibration"]
    assert cal["rows"] == 1 and cal["residual_max"] < 0.1
    assert cal["changed"]["gpu_time_factor"][1] > 1  # the profile was fast on this row
    assert "vLLM 0.16.0" in j["error_band"] and "calibrated on your 1 row" in j["error_band"]
    assert main(argv[:-1]) == 0
    out = capsys.readouterr().out
    assert "calibrated from 1 measured row" in out
    # the profile predicted 0.83x of the measured TPOT (0.84x before stop 58's refit); one row
    # moves it part of the way (about half of it in log, the step's other coefficients sharing
    # the move with the GPU's factor)
    m = re.search(r"TPOT measured 12\.4 ms, before (0\.8[0-9])x, after ([\d.]+)x", out)
    assert m, out
    before, after = math.log(float(m.group(1))), math.log(float(m.group(2)))
    assert before < after < 0.3 * before, out


def test_calibrate_from_needs_an_engine(tmp_path, capsys):
    p = _one_row_file(tmp_path, "minimaxm2_5_h200_vllm_fp8_agg_1024x1024_c4_cfg606")
    argv = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--users", "4"]
    argv += ["--requests", "8", "--prompt-tokens", "128", "--output-tokens", "16"]
    assert main(argv + ["--calibrate-from", str(p)]) != 0
    assert "--engine" in capsys.readouterr().err


def _latency_file(tmp_path, rows: list[tuple[int, int, int, float]]):
    p = tmp_path / "latency.json"
    p.write_text(
        json.dumps(
            [
                {"avg_latency": s, "input_len": i, "output_len": o, "batch_size": b}
                for i, o, b, s in rows
            ]
        )
    )
    return p


def test_a_run_faster_than_the_hardware_allows_is_refused_or_left_out(tmp_path, capsys):
    # Llama 3.1 8B in BF16 on one H100 (3,350 GB/s): every decode step reads at least its
    # 8,030,261,248 parameters x 2 bytes but the input embedding's 128,256 x 4,096 (one row a
    # token), 15.01 GB in 4.48 ms, so 128 output tokens of one request take at least 127 x
    # 4.48 ms = 0.569 s after the prefill (first principles). A `vllm bench latency` run of
    # 0.3 s cannot be met by any coefficient: refused, saying what to check.
    argv = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--users", "2"]
    argv += ["--requests", "4", "--prompt-tokens", "128", "--output-tokens", "128"]
    argv += ["--engine", "vllm@0.18.0", "--calibrate-from"]
    too_fast = _latency_file(tmp_path, [(128, 128, 1, 0.3)])
    assert main([*argv, str(too_fast)]) != 0
    err = capsys.readouterr().err
    assert "nothing to calibrate from" in err and "0.3 s, is below the" in err
    floor = float(re.search(r"below the ([\d.]+) s", err).group(1))
    reads = (8_030_261_248 - 128_256 * 4_096) * 2 / 3350e9 * 127
    assert reads < floor < 1.05 * reads  # the weights' reads, the prefill and the KV reads
    assert "prefix cache" in err
    # Beside a run it can meet, the impossible one is left out and said so.
    both = _latency_file(tmp_path, [(128, 128, 1, 0.3), (128, 128, 1, 1.2)])
    assert main([*argv, str(both), "--json"]) == 0
    cal = json.loads(capsys.readouterr().out)["calibration"]
    assert cal["rows"] == 1
    assert main([*argv, str(both)]) == 0
    out = capsys.readouterr().out
    assert "note: left out, 128 + 128 tokens, batch 1: its measured latency, 0.3 s" in out
