"""The command-line contract: names other tools rely on, --json output, exit status 2."""

import json
import subprocess
import sys

import pytest

from conftest import ROOT, llama_config
from kvcalc.cli import main
from kvcalc.units import GiB


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv):
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)  # exactly one JSON object and nothing else


def test_kv_json_keys(capsys):
    d = run_json(capsys, "kv", "--model", "llama-3.1-8b", "--context", "8192", "--batch", "2")
    assert d["kv_bytes"] == 2 * GiB
    assert d["kv_bytes_per_token"] == 131_072
    assert d["state_bytes"] == 0
    assert d["breakdown"][0]["kind"] == "full" and d["breakdown"][0]["layers"] == 32


def test_kv_hybrid_and_dtype(capsys):
    d = run_json(capsys, "kv", "--model", "jamba-v0.1", "--context", "1000", "--kv-dtype", "fp8")
    assert d["kv_bytes"] == 4 * 2 * 8 * 128 * 1 * 1000
    # 28 Mamba layers x (8192 x 3 conv + 8192 x 16 ssm) elements x 2 B (BF16 state).
    assert d["state_bytes"] == 28 * (8192 * 3 + 8192 * 16) * 2
    kinds = {row["kind"] for row in d["breakdown"]}
    assert kinds == {"full", "state"}


def test_kv_sliding_growth_rate_at_context(capsys):
    # gpt-oss-20b: 12 full + 12 sliding (window 128) layers, 2 x 8 x 64 x 2 = 2,048 B per layer.
    early = run_json(capsys, "kv", "--model", "gpt-oss-20b", "--context", "10")
    late = run_json(capsys, "kv", "--model", "gpt-oss-20b", "--context", "10000")
    assert early["kv_bytes_per_token"] == 24 * 2048
    assert late["kv_bytes_per_token"] == 12 * 2048
    assert late["kv_bytes"] == 12 * 2048 * 10000 + 12 * 2048 * 128


def test_budget_json_hand_example(capsys):
    d = run_json(capsys, "budget", "--model", "llama-3.1-8b", "--vram-gib", "80", "--weights-gib",
                 "15", "--reserve-gib", "2", "--context", "8192")
    assert d["requested_bytes"] == 72 * GiB
    assert d["weights_bytes"] == 15 * GiB and d["reserve_bytes"] == 2 * GiB
    assert d["kv_pool_bytes"] == 55 * GiB
    assert d["num_blocks"] == 28_160
    assert d["kv_capacity_tokens"] == 450_560
    assert d["max_concurrent_seqs"] == 55.0
    assert d["max_context_tokens"] == 450_560


def test_budget_with_gpu_and_config_file(capsys, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(llama_config(torch_dtype="float32")))
    d = run_json(capsys, "budget", "--config", str(cfg), "--gpu", "l4", "--context", "4096")
    assert d["total_bytes"] == 23034 * 2**20
    assert d["weight_dtype"] == "fp32"  # read from the config's torch_dtype
    assert d["max_concurrent_seqs"] > 0


def test_budget_tp_pp_per_gpu(capsys):
    d = run_json(capsys, "budget", "--model", "deepseek-v3", "--gpu", "h200-141gb", "--context",
                 "32768", "--tp", "8")
    assert d["weights_bytes"] < 141e9  # 671 GB of FP8 weights over 8 GPUs
    assert d["page_bytes"] == 16 * 576 * 2  # the latent is replicated on every GPU
    assert d["tp"] == 8 and d["fits"]


def test_step_time_json(capsys):
    d = run_json(capsys, "step-time", "--model", "llama-3.1-8b", "--bandwidth-gbs", "3350",
                 "--context", "8192", "--batch", "1", "--weights-gib", "15")
    assert d["weight_read_bytes"] == 15 * GiB
    assert d["kv_read_bytes"] == GiB
    assert d["step_time_s"] == pytest.approx(16 * GiB / 3350e9)
    assert d["crossover_context"] == 15 * GiB // 131_072
    assert d["tokens_per_s"] == pytest.approx(1 / d["step_time_s"])


def test_table(capsys):
    code, out, _ = run(capsys, "table")
    assert code == 0 and "GiB" in out and "256.000" in out and "0.250" in out
    d = run_json(capsys, "table")
    assert [r["kv_gib"] for r in d["rows"]] == [1, 64, 256, 0.25, 16, 64]


def test_models_and_gpus(capsys):
    d = run_json(capsys, "models")
    assert len(d["models"]) >= 18
    d = run_json(capsys, "gpus")
    assert {g["key"] for g in d["gpus"]} >= {"h100-sxm-80gb", "b200", "t4"}


def test_extra_commands(capsys):
    assert run_json(capsys, "passes", "--new-tokens", "100")["without_cache"] == 5050
    d = run_json(capsys, "prefill", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb",
                 "--prompt-tokens", "1000")
    assert d["time_s"] > 0
    d = run_json(capsys, "offload", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb",
                 "--prefix-tokens", "4096")
    assert d["offload_wins"] is True


@pytest.mark.parametrize("argv,needle", [
    (["kv", "--model", "nope", "--context", "10"], "unknown model"),
    (["kv", "--model", "llama-3.1-8b", "--context", "-3"], "--context"),
    (["kv", "--model", "llama-3.1-8b", "--context", "abc"], "--context"),
    (["kv", "--model", "llama-3.1-8b"], "--context"),
    (["kv", "--context", "10"], "--model"),
    (["kv", "--model", "llama-3.1-8b", "--config", "x.json", "--context", "1"], "not allowed"),
    (["kv", "--model", "llama-3.1-8b", "--context", "10", "--kv-dtype", "fp7"], "--kv-dtype"),
    (["kv", "--model", "llama-3.1-8b", "--context", "10", "--tp", "3"], "divide"),
    (["kv", "--config", "/nonexistent/config.json", "--context", "10"], "cannot read"),
    (["budget", "--model", "llama-3.1-8b", "--vram-gib", "nan", "--context", "10"], "--vram-gib"),
    (["budget", "--model", "llama-3.1-8b", "--gpu", "h100", "--context", "10"], "unknown GPU"),
    (["budget", "--model", "llama-3.1-8b", "--vram-gib", "80", "--context", "10",
      "--gpu-mem-util", "1.5"], "gpu_memory_utilization"),
    (["step-time", "--model", "llama-3.1-8b", "--context", "10"], "--gpu"),
    (["bogus"], "invalid choice"),
    ([], "required"),
])
def test_bad_arguments_exit_2_with_one_line(capsys, argv, needle):
    with pytest.raises(SystemExit) as exc:
        code = main(argv)
        raise SystemExit(code)
    assert exc.value.code == 2
    _, err = capsys.readouterr()
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1 and needle in lines[0], err
    assert "Traceback" not in err


def test_malformed_config_file(capsys, tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 5,'
                   ' "num_hidden_layers": 2, "vocab_size": 10}')
    code, _, err = run(capsys, "kv", "--config", str(bad), "--context", "10")
    assert code == 2 and "num_key_value_heads" in err


def test_python_dash_m_end_to_end():
    ok = subprocess.run([sys.executable, "-m", "kvcalc", "kv", "--model", "deepseek-v3",
                         "--context", "1", "--json"], cwd=ROOT, capture_output=True, text=True)
    assert ok.returncode == 0 and json.loads(ok.stdout)["kv_bytes"] == 70_272
    bad = subprocess.run([sys.executable, "-m", "kvcalc", "budget", "--model", "gpt2"],
                         cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_import_kvcalc_is_pure():
    code = ("import sys, kvcalc, kvcalc.cli\n"
            "heavy = [m for m in ('streamlit', 'plotly', 'pandas', 'torch', 'transformers', 'numpy')"
            " if m in sys.modules]\n"
            "print(','.join(heavy))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "", r.stdout + r.stderr


DATA = ROOT / "tests" / "data" / "configs"


def test_kv_json_carries_notes_and_assumptions(capsys):
    d = run_json(capsys, "kv", "--config", str(DATA / "nemotron-h-56b.json"), "--context", "8192")
    # 10 attention layers x 4,096 B x 8,192 tokens (tests/test_real_configs.py).
    assert d["kv_bytes"] == 10 * 4096 * 8192
    assert any("conv_kernel - 1" in a for a in d["assumptions"])
    assert any("not read" in a and "time_step_rank" in a for a in d["assumptions"])
    assert d["params_error"] and any("parameters not counted" in n for n in d["notes"])
    labels = {row["label"] for row in d["breakdown"]}
    assert labels == {"full", "state (mamba2)", "none (MLP or MoE block only)"}


def test_weights_unknown_needs_weights_gib(capsys):
    code, out, err = run(capsys, "budget", "--config", str(DATA / "nemotron-h-56b.json"),
                         "--gpu", "h100-sxm-80gb", "--context", "8192")
    assert code == 2 and "--weights-gib" in err and "\n" not in err.strip()
    d = run_json(capsys, "budget", "--config", str(DATA / "nemotron-h-56b.json"),
                 "--gpu", "h100-sxm-80gb", "--context", "8192", "--weights-gib", "110",
                 "--tp", "2")
    assert d["weights_bytes"] == 55 * GiB  # 110 GiB over two GPUs


def test_verify_refuses_remote_code_models(capsys):
    pytest.importorskip("transformers")
    d = run_json(capsys, "verify", "--config", str(DATA / "chatglm3-6b.json"))
    assert d["checkable"] is False and "remote code" in d["verdict"]
