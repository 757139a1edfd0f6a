"""Quantised checkpoints (issue 38): a weight format kvcalc does not size is refused by name,
never counted as BF16. Before this, Kimi-K2.5 (INT4 experts, compressed-tensors), EXAONE 4.0
1.2B W4A16 and Qwen3.6-27B NVFP4 got 16-bit weight bytes (Kimi-K2.5 about 3x too large).

The formats are read from the real config.json files' quantization_config (tests/data/configs,
NOTES-F.md and NOTES-G.md for their sources)."""

import json
import subprocess
import sys

import pytest
from conftest import ROOT

from kvcalc.config.hfconfig import UNMODELLED, checkpoint_format, quantization_scheme
from kvcalc.core.units import GiB

CONFIGS = ROOT / "tests/data/configs"


def _cfg(rel):
    return json.loads((CONFIGS / rel).read_text())


@pytest.mark.parametrize(
    "rel, scheme",
    [
        ("readers6/kimi-k2.5.json", "compressed-tensors, 4-bit"),  # int4, group 32 experts
        ("round6/exaone-4.0-1.2b-w4a16.json", "compressed-tensors, 4-bit"),
        ("round6/qwen3.6-27b-nvfp4.json", "modelopt"),
        ("round6/gemma-4-31b-it-nvfp4.json", "modelopt"),
    ],
)
def test_unsized_formats_are_named_not_counted_as_bf16(rel, scheme):
    cfg = _cfg(rel)
    assert checkpoint_format(cfg) == (UNMODELLED, None)
    assert quantization_scheme(cfg).startswith(scheme)


def test_sized_formats_still_read():
    # FP8 block quantisation (DeepSeek-V3) and compressed-tensors with 8-bit float weights
    # (Devstral Small 2: config_groups weights num_bits 8, type float) are FP8; gpt-oss MXFP4.
    assert checkpoint_format(_cfg("round6/deepseek-v3.json")) == ("fp8", None)
    assert checkpoint_format(_cfg("round6/devstral-small-2-24b-instruct.json")) == ("fp8", None)
    assert checkpoint_format(_cfg("round6/gpt-oss-120b.json")) == ("bf16", "mxfp4")
    # AWQ, GPTQ and an MLX block, written as those tools write them
    for q in (
        {"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}},
        {"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128}},
        {"quantization": {"group_size": 64, "bits": 4}},
    ):
        assert checkpoint_format(q)[0] == UNMODELLED, q


def _budget(*extra):
    return subprocess.run(
        [sys.executable, "-m", "kvcalc", "budget", "--gpu", "h100-sxm-80gb", "--context", "8192"]
        + ["--config", str(CONFIGS / "round6/qwen3.6-27b-nvfp4.json"), "--json", *extra],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


def test_budget_asks_for_the_size_and_takes_it():
    refused = _budget()
    assert refused.returncode == 2
    assert "--weights-gib" in refused.stderr and "quantised" in refused.stderr
    given = _budget("--weights-gib", "19")
    assert given.returncode == 0, given.stderr
    assert json.loads(given.stdout)["weights_bytes"] == 19 * GiB
