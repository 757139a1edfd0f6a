"""The command-line contract: names other tools rely on, --json output, exit status 2."""

import json
import subprocess
import sys

import pytest
from conftest import ROOT, llama_config

from kvcalc.cli import main
from kvcalc.core.units import GiB


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
    d = run_json(
        capsys,
        "budget",
        "--model",
        "llama-3.1-8b",
        "--vram-gib",
        "80",
        "--weights-gib",
        "15",
        "--reserve-gib",
        "2",
        "--context",
        "8192",
        "--gpu-mem-util",
        "0.9",
    )
    assert d["requested_bytes"] == 72 * GiB
    assert d["weights_bytes"] == 15 * GiB and d["reserve_bytes"] == 2 * GiB
    assert d["kv_pool_bytes"] == 55 * GiB
    assert d["num_blocks"] == 28_160
    assert d["kv_capacity_tokens"] == 450_560
    assert d["max_concurrency"] == 55.0
    # vLLM 0.29.0 on sets aside its null block before fitting one request (PR #47272).
    assert d["max_context_tokens"] == 450_560 - 16
    # 80 GiB: vLLM's default max_num_seqs for a GPU of 70 GiB or more is 1,024; memory binds.
    assert d["max_num_seqs"] == 1024 and d["limited_by"] == "memory"
    old = run_json(
        capsys,
        "budget",
        "--model",
        "llama-3.1-8b",
        "--vram-gib",
        "80",
        "--weights-gib",
        "15",
        "--reserve-gib",
        "2",
        "--context",
        "8192",
        "--vllm-version",
        "0.28.0",
        "--max-num-seqs",
        "32",
        "--gpu-mem-util",
        "0.9",
    )
    assert old["max_context_tokens"] == 450_560
    assert old["max_running_seqs"] == 32 and old["limited_by"] == "max_num_seqs"


def test_budget_with_gpu_and_config_file(capsys, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(llama_config(torch_dtype="float32")))
    d = run_json(capsys, "budget", "--config", str(cfg), "--gpu", "l4", "--context", "4096")
    assert d["total_bytes"] == 23034 * 2**20
    # The checkpoint is FP32 (the config's torch_dtype); vLLM's dtype "auto" serves it in BF16
    # on an L4 (vllm/config/model.py _resolve_auto_dtype: "Downcast for float32 models").
    assert d["checkpoint_dtype"] == "fp32" and d["weight_dtype"] == "bf16"
    assert d["max_concurrency"] > 0


def test_budget_tp_pp_per_gpu(capsys):
    d = run_json(
        capsys,
        "budget",
        "--model",
        "deepseek-v3",
        "--gpu",
        "h200-141gb",
        "--context",
        "32768",
        "--tp",
        "8",
    )
    assert d["weights_bytes"] < 141e9  # 671 GB of FP8 weights over 8 GPUs
    assert d["page_bytes"] == 16 * 576 * 2  # the latent is replicated on every GPU
    assert d["tp"] == 8 and d["fits"]


def test_step_time_json(capsys):
    d = run_json(
        capsys,
        "step-time",
        "--model",
        "llama-3.1-8b",
        "--bandwidth-gbs",
        "3350",
        "--context",
        "8192",
        "--batch",
        "1",
        "--weights-gib",
        "15",
    )
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
    d = run_json(
        capsys,
        "prefill",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-sxm-80gb",
        "--prompt-tokens",
        "1000",
    )
    assert d["time_s"] > 0
    d = run_json(
        capsys,
        "offload",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-sxm-80gb",
        "--prefix-tokens",
        "4096",
    )
    assert d["offload_wins"] is True


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["kv", "--model", "nope", "--context", "10"], "unknown model"),
        (["kv", "--model", "llama-3.1-8b", "--context", "-3"], "--context"),
        (["kv", "--model", "llama-3.1-8b", "--context", "abc"], "--context"),
        (["kv", "--model", "llama-3.1-8b"], "--context"),
        (["kv", "--context", "10"], "--model"),
        (["kv", "--model", "llama-3.1-8b", "--config", "x.json", "--context", "1"], "not allowed"),
        (["kv", "--model", "llama-3.1-8b", "--context", "10", "--kv-dtype", "fp7"], "--kv-dtype"),
        (["kv", "--model", "llama-3.1-8b", "--context", "10", "--tp", "3"], "divide"),
        (["kv", "--config", "/nonexistent/config.json", "--context", "10"], "cannot read"),
        (
            ["budget", "--model", "llama-3.1-8b", "--vram-gib", "nan", "--context", "10"],
            "--vram-gib",
        ),
        (["budget", "--model", "llama-3.1-8b", "--gpu", "h100", "--context", "10"], "unknown GPU"),
        (
            [
                "budget",
                "--model",
                "llama-3.1-8b",
                "--vram-gib",
                "80",
                "--context",
                "10",
                "--gpu-mem-util",
                "1.5",
            ],
            "gpu_memory_utilization",
        ),
        (["step-time", "--model", "llama-3.1-8b", "--context", "10"], "--gpu"),
        (["bogus"], "invalid choice"),
        ([], "required"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(capsys, argv, needle):
    with pytest.raises(SystemExit) as exc:
        code = main(argv)
        raise SystemExit(code)
    assert exc.value.code == 2
    _, err = capsys.readouterr()
    lines = [lay for lay in err.splitlines() if lay.strip()]
    assert len(lines) == 1 and needle in lines[0], err
    assert "Traceback" not in err


def test_malformed_config_file(capsys, tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text(
        '{"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 5,'
        ' "num_hidden_layers": 2, "vocab_size": 10}'
    )
    code, _, err = run(capsys, "kv", "--config", str(bad), "--context", "10")
    assert code == 2 and "num_key_value_heads" in err


def test_python_dash_m_end_to_end():
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "kvcalc",
            "kv",
            "--model",
            "deepseek-v3",
            "--context",
            "1",
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0 and json.loads(ok.stdout)["kv_bytes"] == 70_272
    bad = subprocess.run(
        [sys.executable, "-m", "kvcalc", "budget", "--model", "gpt2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_import_kvcalc_is_pure():
    code = (
        "import sys, kvcalc, kvcalc.cli\n"
        "heavy = [m for m in ('streamlit', 'plotly', 'pandas', 'torch', 'transformers', 'numpy')"
        " if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "", r.stdout + r.stderr


def test_every_kvcalc_module_but_the_torch_ones_is_light():
    # Each module of the core, imported on its own in a fresh interpreter: none may load a
    # heavy package. The torch modules (live measurement, quality, microscope) import torch
    # only inside their functions, so importing them is light too.
    import pkgutil

    import kvcalc

    names = sorted(
        m.name
        for m in pkgutil.walk_packages(kvcalc.__path__, "kvcalc.")
        if m.name != "kvcalc.__main__"
    )
    assert {
        "kvcalc.engines.budget",
        "kvcalc.config.catalog",
        "kvcalc.cache.weight_bytes",
        "kvcalc.cache.kv",
        "kvcalc.engines.vllm",
        "kvcalc.cli",
    } <= set(names)
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "heavy = [m for m in ('streamlit', 'plotly', 'pandas', 'torch', 'transformers',"
        " 'numpy') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "", r.stdout + r.stderr
    assert not any(n.endswith(".charts") for n in names)  # Plotly builders: webui.figures


DATA = ROOT / "tests" / "data" / "configs"


def test_kv_json_carries_notes_and_assumptions(capsys):
    d = run_json(capsys, "kv", "--config", str(DATA / "nemotron-h-56b.json"), "--context", "8192")
    # 10 attention layers x 4,096 B x 8,192 tokens (tests/test_real_configs.py).
    assert d["kv_bytes"] == 10 * 4096 * 8192
    assert any("conv_kernel - 1" in a for a in d["assumptions"])
    # No field is ever claimed not to change the cache: each one is read or known (issue 21).
    assert not any("do not change the cache" in a for a in d["assumptions"])
    # Its parameters are counted (transformers' NemotronH, tests/test_params_round6b.py)...
    assert d["params_error"] is None
    assert not any("parameters not counted" in n for n in d["notes"])
    labels = {row["label"] for row in d["breakdown"]}
    assert labels == {"full", "state (mamba2)", "none (MLP or MoE block only)"}
    # ... Hunyuan-A13B's are not (Tencent's remote code), and the note says so.
    d = run_json(
        capsys,
        "kv",
        "--config",
        str(DATA / "round6" / "hunyuan-a13b.json"),
        "--context",
        "8192",
    )
    assert d["params_error"] and any("parameters not counted" in n for n in d["notes"])


def test_weights_unknown_needs_weights_gib(capsys):
    # Hunyuan-A13B: its parameters are not counted (Nemotron-NAS's and MiniMax-M1's, the
    # examples before, now are)
    code, out, err = run(
        capsys,
        "budget",
        "--config",
        str(DATA / "round6" / "hunyuan-a13b.json"),
        "--gpu",
        "h100-sxm-80gb",
        "--context",
        "8192",
    )
    assert code == 2 and "--weights-gib" in err and "\n" not in err.strip()
    d = run_json(
        capsys,
        "budget",
        "--config",
        str(DATA / "round6" / "hunyuan-a13b.json"),
        "--gpu",
        "h100-sxm-80gb",
        "--context",
        "8192",
        "--weights-gib",
        "110",
        "--tp",
        "2",
    )
    assert d["weights_bytes"] == 55 * GiB  # 110 GiB over two GPUs


def test_verify_refuses_remote_code_models(capsys):
    pytest.importorskip("transformers")
    d = run_json(capsys, "verify", "--config", str(DATA / "chatglm3-6b.json"))
    assert d["checkable"] is False and "remote code" in d["verdict"]


# -- issue 11: hostile input. Every refusal exits 2 with one short line on stderr ------------

import os  # noqa: E402

from kvcalc.config.hfconfig import MAX_CONFIG_BYTES, load_config_file  # noqa: E402


def _exit_code(argv):
    try:
        return main(list(argv))
    except SystemExit as exc:  # argparse refusals
        return exc.code


def one_error_line(capsys, argv, limit=600):
    """The single stderr line of a refusal with status 2 (never 'internal error')."""
    code = _exit_code(argv)
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert code == 2, (code, err[:500])
    assert len(lines) == 1 and lines[0].startswith("kvcalc: error: "), err[:500]
    assert "internal error" not in err and "Traceback" not in err
    assert len(lines[0]) <= limit, f"{len(lines[0])} characters: {lines[0][:300]}"
    return lines[0]


def _cli(*argv, timeout=60, **kw):
    """python -m kvcalc in a child with a timeout, so that a read that blocks fails the test
    instead of hanging the suite."""
    return subprocess.run(
        [sys.executable, "-m", "kvcalc", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kw,
    )


def _refused_by_child(r, needle):
    lines = r.stderr.splitlines()
    assert r.returncode == 2 and len(lines) == 1 and needle in lines[0], r.stderr[:500]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_config_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    # Nobody writes to it: an open() for reading would block, so every call runs in a child.
    code = (
        "from kvcalc.config.hfconfig import load_config_file\n"
        f"try:\n    load_config_file({str(fifo)!r})\nexcept ValueError as exc:\n    print(exc)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and "not a regular file" in r.stdout, r.stdout + r.stderr
    _refused_by_child(_cli("kv", "--config", str(fifo), "--context", "10"), "not a regular file")
    _refused_by_child(
        _cli("vllm", "--model", "llama-3.1-8b", "--log", str(fifo)), "not a regular file"
    )


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero here")
def test_config_character_device_is_refused():
    # /dev/zero's stat size is 0, so a size check alone lets an endless read through.
    r = _cli("kv", "--config", "/dev/zero", "--context", "10")
    _refused_by_child(r, "not a regular file")
    assert "config.json" in r.stderr
    # /dev/stdin fed by a pipe that nobody closes would block a read.
    if os.path.exists("/dev/stdin"):
        _refused_by_child(
            _cli("kv", "--config", "/dev/stdin", "--context", "10", stdin=subprocess.PIPE),
            "not a regular file",
        )


def test_config_directory_is_refused(capsys, tmp_path):
    line = one_error_line(capsys, ["kv", "--config", str(tmp_path), "--context", "10"])
    assert "not a regular file" in line and "config.json" in line


def test_config_read_is_bounded(tmp_path, monkeypatch):
    # A regular file whose stat size is small (a /proc file, a file still growing) but that
    # holds far more is read only up to the limit, not whole.
    import tracemalloc

    big = tmp_path / "config.json"
    big.write_text('{"x": "' + "a" * (20 * MAX_CONFIG_BYTES) + '"}')
    real_stat, real_fstat = os.stat, os.fstat

    def small(st):
        fields = list(st)
        fields[6] = 0  # st_size
        return os.stat_result(fields)

    monkeypatch.setattr(os, "stat", lambda *a, **k: small(real_stat(*a, **k)))
    monkeypatch.setattr(os, "fstat", lambda *a, **k: small(real_fstat(*a, **k)))
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="at most|larger than"):
            load_config_file(big)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * MAX_CONFIG_BYTES, f"peak {peak:,} B: the whole file was read"


_GIB_MAX = "1,048,576"


@pytest.mark.parametrize(
    "argv,flag,bound",
    [
        (
            ["budget", "--model", "llama-3.1-8b", "--vram-gib", "1e308", "--context", "10"],
            "--vram-gib",
            _GIB_MAX,
        ),
        (
            ["budget", "--model", "llama-3.1-8b", "--vram-gib", "2000000", "--context", "10"],
            "--vram-gib",
            _GIB_MAX,
        ),
        (
            ["budget", "--model", "llama-3.1-8b", "--vram-gib", "inf", "--context", "10"],
            "--vram-gib",
            _GIB_MAX,
        ),
        (
            ["budget", "--model", "llama-3.1-8b", "--vram-gib", "0", "--context", "10"],
            "--vram-gib",
            "above 0",
        ),
        (
            [
                "budget",
                "--model",
                "llama-3.1-8b",
                "--gpu",
                "l4",
                "--weights-gib",
                "1e308",
                "--context",
                "10",
            ],
            "--weights-gib",
            _GIB_MAX,
        ),
        (
            [
                "budget",
                "--model",
                "llama-3.1-8b",
                "--gpu",
                "l4",
                "--weights-gib",
                "-1",
                "--context",
                "10",
            ],
            "--weights-gib",
            "at least 0",
        ),
        (
            [
                "budget",
                "--model",
                "llama-3.1-8b",
                "--gpu",
                "l4",
                "--reserve-gib",
                "1e308",
                "--context",
                "10",
            ],
            "--reserve-gib",
            _GIB_MAX,
        ),
        (
            [
                "budget",
                "--model",
                "llama-3.1-8b",
                "--gpu",
                "l4",
                "--gpu-mem-util",
                "1e308",
                "--context",
                "10",
            ],
            "--gpu-mem-util",
            "at most 1",
        ),
        (
            ["step-time", "--model", "llama-3.1-8b", "--bandwidth-gbs", "1e308", "--context", "10"],
            "--bandwidth-gbs",
            "10,000,000",
        ),
        (
            [
                "step-time",
                "--model",
                "llama-3.1-8b",
                "--gpu",
                "l4",
                "--weights-gib",
                "1e308",
                "--context",
                "10",
            ],
            "--weights-gib",
            _GIB_MAX,
        ),
        (
            [
                "prefill",
                "--model",
                "llama-3.1-8b",
                "--gpu",
                "l4",
                "--prompt-tokens",
                "10",
                "--mfu",
                "1e308",
            ],
            "--mfu",
            "at most 1",
        ),
        (
            [
                "offload",
                "--model",
                "llama-3.1-8b",
                "--gpu",
                "l4",
                "--prefix-tokens",
                "10",
                "--mfu",
                "1e308",
            ],
            "--mfu",
            "at most 1",
        ),
        (
            [
                "vllm",
                "--model",
                "llama-3.1-8b",
                "--available-kv-gib",
                "1e308",
                "--max-model-len",
                "10",
            ],
            "--available-kv-gib",
            _GIB_MAX,
        ),
        (
            [
                "vllm",
                "--model",
                "llama-3.1-8b",
                "--available-kv-gib",
                "nan",
                "--max-model-len",
                "10",
            ],
            "--available-kv-gib",
            _GIB_MAX,
        ),
    ],
)
def test_float_arguments_are_bounded(capsys, argv, flag, bound):
    line = one_error_line(capsys, argv)
    assert flag in line and bound in line, line


def test_float_arguments_at_their_bound_still_work(capsys):
    d = run_json(
        capsys,
        "budget",
        "--model",
        "llama-3.1-8b",
        "--vram-gib",
        "1048576",
        "--weights-gib",
        "1048576",
        "--reserve-gib",
        "0",
        "--context",
        "10",
    )
    assert d["kv_pool_bytes"] < 0 and not d["fits"]
    d = run_json(
        capsys, "step-time", "--model", "llama-3.1-8b", "--bandwidth-gbs", "1e7", "--context", "10"
    )
    assert d["step_time_s"] > 0
    d = run_json(
        capsys,
        "vllm",
        "--model",
        "llama-3.1-8b",
        "--available-kv-gib",
        "1048576",
        "--max-model-len",
        "1024",
    )
    assert d["available_bytes"] == 2**50


@pytest.mark.parametrize(
    "field,value",
    [
        ("layer_types", [["x"], ["y"], ["x"], ["y"]]),
        ("layer_types", [{"a": 1}] * 4),
        ("attn_type_list", [[1], [0], [1], [0]]),
        ("attn_type_list", [{"a": 1}] * 4),
        ("hybrid_layer_pattern", [[0], [1], [0], [1]]),
    ],
)
def test_nested_layout_values_name_the_field(capsys, tmp_path, field, value):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(llama_config(**{field: value})))
    line = one_error_line(capsys, ["kv", "--config", str(cfg), "--context", "10"])
    assert f"'{field}[0]'" in line, line


def _log(tmp_path, gib="55.00", extra=""):
    f = tmp_path / "vllm.log"
    f.write_text(
        "INFO Initializing a V1 LLM engine (v0.10.1) with config: "
        "model='meta-llama/Llama-3.1-8B', max_seq_len=8192\n"
        f"INFO Available KV cache memory: {gib} GiB\n" + extra
    )
    return f


@pytest.mark.parametrize("gib", ["1" * 400 + ".00", "9" * 20 + ".00", "1.2.3", "."])
def test_vllm_log_absurd_memory_line(capsys, tmp_path, gib):
    from kvcalc.engines.vllm import parse_log

    with pytest.raises(ValueError, match="Available KV cache memory"):
        parse_log(_log(tmp_path, gib).read_text())
    line = one_error_line(capsys, ["vllm", "--log", str(_log(tmp_path, gib))])
    assert "Available KV cache memory" in line and "not a finite size" in line, line


@pytest.mark.parametrize(
    "extra,name",
    [
        ("INFO GPU KV cache size: " + "9" * 5000 + " tokens\n", "GPU KV cache size"),
        ("INFO GPU KV cache size: " + "9" * 40 + " tokens\n", "GPU KV cache size"),
        (
            "INFO Maximum concurrency for 8,192 tokens per request: " + "9" * 400 + ".0x\n",
            "Maximum concurrency",
        ),
        (
            "INFO Maximum concurrency for " + "9" * 400 + " tokens per request: 1.0x\n",
            "Maximum concurrency",
        ),
        ("INFO Maximum concurrency for , tokens per request: 1.0x\n", "Maximum concurrency"),
        ("INFO config: max_model_len=" + "9" * 300 + "\n", "max_model_len"),
        ("INFO config: block_size=" + "9" * 300 + "\n", "block_size"),
    ],
)
def test_vllm_log_absurd_numbers(capsys, tmp_path, extra, name):
    line = one_error_line(capsys, ["vllm", "--log", str(_log(tmp_path, extra=extra))])
    assert name in line, line


def test_vllm_log_largest_memory_line_is_read(capsys, tmp_path):
    d = run_json(
        capsys, "vllm", "--model", "llama-3.1-8b", "--log", str(_log(tmp_path, "1048576.00"))
    )
    assert d["prediction"]["available_bytes"] == 2**50


def test_huge_values_are_not_echoed(capsys, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(llama_config(num_key_value_heads="9" * 190_000)))
    line = one_error_line(capsys, ["kv", "--config", str(cfg), "--context", "10"], limit=400)
    assert "num_key_value_heads" in line and "..." in line
    cfg.write_text(json.dumps(llama_config(num_key_value_heads=-int("9" * 4000))))
    line = one_error_line(capsys, ["kv", "--config", str(cfg), "--context", "10"], limit=400)
    assert "num_key_value_heads" in line
    cfg.write_text(json.dumps(llama_config(num_hidden_layers=int("9" * 4000))))
    line = one_error_line(capsys, ["kv", "--config", str(cfg), "--context", "10"], limit=400)
    assert "num_hidden_layers" in line
    cfg.write_text(json.dumps(llama_config(global_head_dim=64, attention_k_eq_v="x" * 190_000)))
    line = one_error_line(capsys, ["kv", "--config", str(cfg), "--context", "10"], limit=400)
    assert "attention_k_eq_v" in line and "true or false" in line
    cfg.write_text(json.dumps(llama_config(layer_types=["x" * 190_000] * 4)))
    line = one_error_line(capsys, ["kv", "--config", str(cfg), "--context", "10"])
    assert "layer_types[0]" in line
    cfg.write_text('{"hidden_size": ' + "9" * 5000 + "}")
    line = one_error_line(capsys, ["kv", "--config", str(cfg), "--context", "10"], limit=400)
    assert "digits" in line
    line = one_error_line(
        capsys, ["kv", "--model", "llama-3.1-8b", "--context", "9" * 5000], limit=400
    )
    assert "--context" in line


_HUGE = "9" * 5000
_HOSTILE = [
    ["kv", "--model", "llama-3.1-8b", "--context", _HUGE],
    ["kv", "--model", "llama-3.1-8b", "--context", "1" + "0" * 30],
    ["kv", "--model", "llama-3.1-8b", "--context", "10", "--batch", "1" + "0" * 30],
    ["kv", "--model", "llama-3.1-8b", "--context", "10", "--tp", "1" + "0" * 30],
    ["kv", "--model", "x" * 100_000, "--context", "10"],
    ["kv", "--model", "bad\nkey", "--context", "10"],
    ["kv", "--model", "llama-3.1-8b", "--context", "10", "--kv-dtype", "x" * 100_000],
    ["kv", "--model", "llama-3.1-8b", "--context", "10", "extra\nargument", "y" * 100_000],
    ["kv", "--config", "/nonexistent/" + "x" * 100_000, "--context", "10"],
    ["kv", "--config", "/nonexistent/a\nb.json", "--context", "10"],
    ["kv", "--config", "", "--context", "10"],
    ["kv", "--config", "bad\x00path", "--context", "10"],
    ["budget", "--model", "llama-3.1-8b", "--vram-gib", _HUGE, "--context", "10"],
    ["budget", "--model", "llama-3.1-8b", "--vram-gib", "1e308", "--context", "10"],
    ["budget", "--model", "llama-3.1-8b", "--vram-gib", "-inf", "--context", "10"],
    [
        "budget",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "l4",
        "--weights-gib",
        "1e308",
        "--context",
        "10",
    ],
    [
        "budget",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "l4",
        "--reserve-gib",
        "1e308",
        "--context",
        "10",
    ],
    ["budget", "--model", "llama-3.1-8b", "--gpu", "l4", "--context", "10", "--concurrency", _HUGE],
    [
        "budget",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "l4",
        "--context",
        "10",
        "--block-size",
        "1" + "0" * 30,
    ],
    ["budget", "--model", "llama-3.1-8b", "--gpu", "x" * 100_000, "--context", "10"],
    ["step-time", "--model", "llama-3.1-8b", "--bandwidth-gbs", "1e308", "--context", "10"],
    ["step-time", "--model", "llama-3.1-8b", "--bandwidth-gbs", "1e-300", "--context", "10"],
    ["step-time", "--model", "llama-3.1-8b", "--bandwidth-gbs", "0", "--context", "10"],
    [
        "step-time",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "l4",
        "--context",
        "10",
        "--batch",
        "1" + "0" * 30,
    ],
    ["prefill", "--model", "llama-3.1-8b", "--gpu", "l4", "--prompt-tokens", _HUGE],
    [
        "prefill",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "l4",
        "--prompt-tokens",
        "10",
        "--mfu",
        "1e-320",
    ],
    ["passes", "--new-tokens", _HUGE],
    ["passes", "--new-tokens", "10", "--prompt-tokens", _HUGE],
    ["passes", "--new-tokens", "10", "--prompt-tokens", "-5"],
    ["passes", "--new-tokens", "10", "--prompt-tokens", "1" + "0" * 30],
    [
        "offload",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "l4",
        "--prefix-tokens",
        "10",
        "--link",
        "x" * 100_000,
    ],
    ["offload", "--model", "llama-3.1-8b", "--gpu", "l4", "--prefix-tokens", _HUGE],
    ["vllm", "--model", "llama-3.1-8b", "--available-kv-gib", "1e308", "--max-model-len", "10"],
    ["vllm", "--model", "llama-3.1-8b", "--available-kv-bytes", _HUGE, "--max-model-len", "10"],
    ["vllm", "--model", "llama-3.1-8b", "--available-kv-bytes", "-1", "--max-model-len", "10"],
    ["vllm", "--model", "llama-3.1-8b", "--available-kv-gib", "10", "--max-model-len", _HUGE],
    [
        "vllm",
        "--model",
        "llama-3.1-8b",
        "--available-kv-gib",
        "10",
        "--max-model-len",
        "10",
        "--num-draft-layers",
        _HUGE,
    ],
    [
        "vllm",
        "--model",
        "llama-3.1-8b",
        "--available-kv-gib",
        "10",
        "--max-model-len",
        "10",
        "--vllm-version",
        "x" * 100_000,
    ],
    ["vllm", "--model", "llama-3.1-8b", "--log", "/nonexistent/" + "x" * 100_000],
    ["verify", "--config", "/nonexistent/x.json", "--context", _HUGE],
    ["measure", "--model", "llama-3.1-8b", "--no-cache-tokens", _HUGE],
    ["measure", "--model", "llama-3.1-8b", "--no-cache-tokens", "-1"],
]


@pytest.mark.parametrize("argv", _HOSTILE, ids=range(len(_HOSTILE)))
def test_hostile_arguments_exit_2_with_one_short_line(capsys, argv):
    one_error_line(capsys, argv)


def test_hostile_files_exit_2_with_one_short_line(capsys, tmp_path):
    cases = {
        "nested.json": json.dumps(llama_config(layer_types=[["x"]] * 4)),
        "deep.json": "[" * 100_000 + "]" * 100_000,
        "huge_int.json": '{"num_hidden_layers": ' + _HUGE + "}",
        "huge_str.json": json.dumps(llama_config(model_type=["m" * 190_000])),
        "inf.json": json.dumps(llama_config()).replace(
            '"hidden_size": 512', '"hidden_size": 1e400'
        ),
        "newline_key.json": json.dumps(llama_config(num_key_value_heads="a\nb\u2028c")),
        "binary.json": "\x00\xff" * 1000,
        "empty.json": "",
    }
    for name, text in cases.items():
        f = tmp_path / name
        f.write_text(text, encoding="utf-8", errors="surrogateescape")
        one_error_line(capsys, ["kv", "--config", str(f), "--context", "10"])
        one_error_line(
            capsys, ["vllm", "--config", str(f), "--available-kv-gib", "1", "--max-model-len", "10"]
        )
    bad_log = tmp_path / "bad.log"
    bad_log.write_text("Available KV cache memory: 1." + "1" * 400 + " GiB\n" + "\n" * 10)
    one_error_line(capsys, ["vllm", "--model", "llama-3.1-8b", "--log", str(bad_log)])
    long_model = tmp_path / "model.log"
    long_model.write_text(
        "model='" + "m" * 100_000 + "'\nAvailable KV cache memory: 5.00 GiB\nmax_seq_len=1024\n"
    )
    one_error_line(capsys, ["vllm", "--log", str(long_model)])


def test_a_command_is_written_in_one_place(capsys):
    # Issue 14: registering the arguments and the handler together is all a command needs;
    # the parser, the dispatch and --json come from the registry.
    from kvcalc.cli import commands as cli

    def arguments(p):
        p.add_argument("--n", type=int, required=True)
        p.add_argument("--json", action="store_true")

    try:
        cli.command("echo-test", "a test command", arguments)(
            lambda args: ({"twice": 2 * args.n}, [f"twice: {2 * args.n}"])
        )
        assert cli.main(["echo-test", "--n", "21", "--json"]) == 0
        assert json.loads(capsys.readouterr().out) == {"twice": 42}
    finally:
        cli.COMMANDS.pop("echo-test", None)
    parser = cli.build_parser()
    names = set(parser._subparsers._group_actions[0].choices)
    assert names == set(cli.COMMANDS) and "echo-test" not in names
    assert {"kv", "budget", "simulate", "quality", "verify"} <= names


def test_terminal_escape_sequences_print_as_visible_text(tmp_path, capsys):
    # issue 22 B8: a field name that retitles the terminal, clears it and prints a fake line in
    # red must come out as visible text, in the refusal and in normal output alike.
    evil = "\u001b]0;pwned\u0007\u001b[2J\u001b[31mFAKE: kvcalc says this model is safe\u001b[0m"
    cfg = {
        "model_type": "llama",
        "hidden_size": 512,
        "num_hidden_layers": 2,
        "num_attention_heads": 8,
        evil: 1,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert main(["kv", "--config", str(path), "--context", "10"]) == 2
    err = capsys.readouterr().err
    assert "\u001b" not in err and "\\x1b" in err
    assert main(["kv", "--config", str(path), "--context", "10", "--unverified"]) == 0
    out = capsys.readouterr().out
    assert "\u001b" not in out and "\u0007" not in out and "\\x1b[31mFAKE" in out
    assert main(["kv", "--config", str(path), "--context", "10", "--unverified", "--json"]) == 0
    raw = capsys.readouterr().out
    assert "\u001b" not in raw and json.loads(raw)["unverified"]


def test_simulate_refuses_a_run_of_billions_of_steps(capsys, monkeypatch):
    # issue 22 B9: 20,000 requests of 100,000 output tokens on one H100: about 5 x 10^8 steps
    # (the pool holds 4 such requests at once: 20,000 x 100,000 / 4). Refused from the estimate,
    # before the simulator takes a step (the time it takes is bench/refusals.py's figure).
    from kvcalc.cli import simulate as cli_simulate

    ran = []
    monkeypatch.setattr(cli_simulate, "simulate", lambda *a, **k: ran.append(a))
    code = main(
        [
            "simulate",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100-sxm-80gb",
            "--requests",
            "20000",
            "--rate",
            "inf",
            "--prompt-tokens",
            "16",
            "--output-tokens",
            "100000",
        ]
    )
    assert code == 2 and ran == []
    assert "engine steps, more than the 5,000,000" in capsys.readouterr().err


def test_no_speed_past_the_models_limit(capsys):
    """Issue 23 [16]: 1,000,000 tokens on Llama 3.1 8B (max_position_embeddings 131,072) gave
    "43.61 ms -> 22.9 tokens/s". The CLI now refuses, as the pages do; 131,072 is still a
    speed."""
    assert (
        main(
            [
                "step-time",
                "--model",
                "llama-3.1-8b",
                "--gpu",
                "h100-sxm-80gb",
                "--context",
                "1000000",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "past this model's limit of 131,072 tokens" in err
    assert (
        main(
            [
                "prefill",
                "--model",
                "llama-3.1-8b",
                "--gpu",
                "h100-sxm-80gb",
                "--prompt-tokens",
                "131073",
            ]
        )
        == 2
    )
    assert "past this model's limit" in capsys.readouterr().err
    d = run_json(
        capsys,
        "step-time",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-sxm-80gb",
        "--context",
        "131072",
    )
    assert d["tokens_per_s"] > 0


def test_prefill_is_never_faster_than_one_read_of_the_weights(capsys):
    """A 16-token prompt's FLOPs take 0.49 ms at half of an H100's peak, but the pass reads
    the weights once: Llama 3.1 8B in BF16 is 8,030,261,248 parameters x 2 B, less its untied
    input embedding (128,256 x 4,096 x 2 B), plus the 16 rows it gathers (16 x 4,096 x 2 B) =
    15,009,980,416 B, over 3,350 GB/s (the H100 SXM's datasheet bandwidth)."""
    d = run_json(
        capsys,
        "prefill",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-sxm-80gb",
        "--prompt-tokens",
        "16",
    )
    read = 8_030_261_248 * 2 - 128_256 * 4096 * 2 + 16 * 4096 * 2
    assert read == 15_009_980_416
    assert d["time_s"] == pytest.approx(read / 3350e9, rel=1e-9)


def test_budget_engine_ideal_is_labelled_ideal(capsys):
    """Issue 23 [39]: `budget --engine ideal` printed the TensorRT-LLM label. Its pool is
    ceil(79.65 GiB x 0.92, vLLM 0.33.0's default) - weights - reserve: 73.28 - 14.96 - 2.00 =
    56.32 GiB (rounded)."""
    code, out, _ = run(
        capsys,
        "budget",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-sxm-80gb",
        "--context",
        "8192",
        "--engine",
        "ideal",
    )
    assert code == 0
    assert "TensorRT" not in out and "engine:       ideal" in out
    assert "KV pool:      56.32 GiB" in out and "blocks:       none" in out
    code, out, _ = run(
        capsys,
        "budget",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-sxm-80gb",
        "--context",
        "8192",
        "--engine",
        "trtllm",
    )
    assert "TensorRT-LLM" in out


def test_simulate_takes_a_config_file(tmp_path, capsys):
    # simulate reads --config like every other command; a config whose parameters kvcalc
    # cannot count (prefill needs them) is refused with the reason.
    import worst_inputs as W

    path = tmp_path / "moe.json"
    path.write_text(json.dumps(W.moe_fits()))
    (tmp_path / "hybrid.json").write_text(json.dumps(W.hybrid_fits()))
    assert (
        main(
            [
                "simulate",
                "--config",
                str(path),
                "--gpu",
                "h100-sxm-80gb",
                "--requests",
                "50",
                "--rate",
                "inf",
                "--prompt-tokens",
                "512",
                "--output-tokens",
                "64",
                "--json",
            ]
        )
        == 0
    )
    got = json.loads(capsys.readouterr().out)
    assert got["output_tokens_per_s"] > 0
    assert (
        main(
            [
                "simulate",
                "--config",
                str(tmp_path / "hybrid.json"),
                "--gpu",
                "h100-sxm-80gb",
                "--requests",
                "5",
                "--rate",
                "inf",
                "--prompt-tokens",
                "8",
                "--output-tokens",
                "8",
            ]
        )
        == 2
    )
    assert "cannot count this model's parameters" in capsys.readouterr().err


def test_simulate_number_flags_say_their_unit(capsys):
    # One parser per unit: the all-reduce latency is in microseconds (it was read and refused
    # as milliseconds), the step overhead in milliseconds, a share above 0 and at most 1.
    base = [
        "simulate",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-sxm-80gb",
        "--requests",
        "4",
        "--rate",
        "inf",
        "--prompt-tokens",
        "64",
        "--output-tokens",
        "8",
    ]
    for flag, value, said in (
        ("--allreduce-latency-us", "2e7", "at most 10,000,000 µs"),
        ("--step-overhead-ms", "-1", "at least 0 and at most 10,000 ms"),
        ("--bw-share", "0", "above 0 and at most 1"),
        ("--weights-gib", "abc", "expected a number of GiB"),
    ):
        with pytest.raises(SystemExit) as exc:  # an argparse refusal: status 2, one line
            main(base + [flag, value])
        assert exc.value.code == 2 and said in capsys.readouterr().err
    assert main(base + ["--allreduce-latency-us", "20000", "--json"]) == 0


def test_a_closed_pipe_ends_the_command_quietly():
    # `python -m kvcalc models | head -1`: the reader is gone before the output is written (its
    # end of the pipe closed first, so the write fails every time): no BrokenPipeError
    # traceback, the exit status Python's "Note on SIGPIPE" gives (1).
    read, write = os.pipe()
    os.close(read)
    try:
        r = subprocess.run(
            [sys.executable, "-m", "kvcalc", "models"],
            cwd=ROOT,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        os.close(write)
    assert r.returncode == 1 and r.stderr == ""


def test_kvcalc_debug_re_raises(capsys, monkeypatch):
    # One line without it (status 2 for a refusal, 1 for a bug of ours), the exception itself
    # with KVCALC_DEBUG=1.
    from kvcalc.cli import commands as cli

    argv = ["kv", "--model", "no-such-model", "--context", "8"]
    monkeypatch.delenv("KVCALC_DEBUG", raising=False)
    assert main(argv) == 2 and "no-such-model" in capsys.readouterr().err
    monkeypatch.setenv("KVCALC_DEBUG", "1")
    with pytest.raises(ValueError, match="no-such-model"):
        main(argv)

    def arguments(p):
        p.add_argument("--json", action="store_true")

    def broken(args):
        raise ZeroDivisionError("a bug")

    try:
        cli.command("broken-test", "a test command", arguments)(broken)
        with pytest.raises(ZeroDivisionError):
            main(["broken-test"])
        monkeypatch.setenv("KVCALC_DEBUG", "0")
        assert main(["broken-test"]) == 1
        assert "internal error (ZeroDivisionError: a bug)" in capsys.readouterr().err
    finally:
        cli.COMMANDS.pop("broken-test", None)
