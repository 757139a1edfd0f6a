"""One state format everywhere (issue 38, item 1): a recurrent state's SSM part is kept in the
format its config declares (Qwen3.5's text_config.mamba_ssm_dtype, NemotronH's
mamba_ssm_cache_dtype: float32 in both files below), and `kv`, the Budget and vLLM's model all
count it so. It used to be counted in the KV format, half the bytes.

Expected bytes are worked by hand from the two real config.json files (tests/data/configs):

- Qwen3.5-35B-A3B, a Gated DeltaNet hybrid: 30 linear-attention layers, 16 key heads and 32 value
  heads of 128, conv kernel 4. Conv state (2 x 16 x 128 + 32 x 128) x (4 - 1) = 24,576 values in
  BF16 = 49,152 B; recurrent state 32 x 128 x 128 = 524,288 values in FP32 = 2,097,152 B:
  2,146,304 B a layer, 64,389,120 B for the 30.
- Nemotron 3 Nano 30B-A3B, a Mamba-2 hybrid: 23 'M' layers, 64 heads of 64, d_state 128, 8
  groups, conv kernel 4. Conv (64 x 64 + 2 x 8 x 128) x 3 = 18,432 values in BF16 = 36,864 B;
  SSM 64 x 64 x 128 = 524,288 values in FP32 = 2,097,152 B: 2,134,016 B a layer, 49,082,368 B.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT

from kvcalc import kv_cache, load_config_file, spec_from_config
from kvcalc.cache.deployment import Deployment
from kvcalc.engines.vllm import predict, state_dtypes

CONFIGS = ROOT / "tests/data/configs"
# file -> (state layers, state bytes a layer, attention bytes a token and layer: 2 (K, V) x
# 2 KV heads x head_dim x 2 B)
CASES = {
    "qwen3.5-35b-a3b.json": (30, 24_576 * 2 + 32 * 128 * 128 * 4, 2 * 2 * 256 * 2),
    "nemotron-3-nano-30b-a3b.json": (23, 18_432 * 2 + 64 * 64 * 128 * 4, 2 * 2 * 128 * 2),
}
assert CASES["qwen3.5-35b-a3b.json"][1] == 2_146_304
assert CASES["nemotron-3-nano-30b-a3b.json"][1] == 2_134_016


def cli(*args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "kvcalc", *args, "--json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return json.loads(out.stdout)


@pytest.mark.parametrize("name", sorted(CASES))
def test_kv_budget_and_vllm_count_the_declared_fp32_state(name):
    layers, per_layer, attn_token = CASES[name]
    path = CONFIGS / name
    spec = spec_from_config(load_config_file(path))
    # the core, and the layer says its format beside its bytes
    assert kv_cache(spec, 8192).state_bytes == layers * per_layer
    state = next(lay for lay in spec.layers if lay.state_elements)
    assert "(FP32)" in state.formula()
    # the command line: kv and budget
    assert (
        cli("kv", "--config", str(path), "--context", "8192")["state_bytes"] == layers * per_layer
    )
    b = cli(
        "budget", "--config", str(path), "--vram-gib", "80", "--weights-gib", "20",
        "--context", "8192",
    )  # fmt: skip
    assert b["state_bytes_per_seq"] == layers * per_layer
    # vLLM's own rule for these files resolves to the same FP32 (MambaStateDtypeCalculator)...
    conv, ssm, _ = state_dtypes(load_config_file(path), vllm_version="0.29.0")
    assert (conv, ssm) == ("bf16", "fp32")
    # ...and predict() with vLLM's 'auto' flags sizes its pages with it: the attention block
    # grows until one layer's page holds a whole state, in steps of 16 tokens (Qwen3.5: 16 x
    # cdiv(2,146,304, 16 x 2,048) = 1,056 tokens; Nemotron: 16 x cdiv(2,134,016, 16 x 1,024) =
    # 2,096), and the state page is padded up to it.
    p = predict(Deployment(spec=spec).but(version="0.29.0"), 40 * 2**30, 8192)
    block = 16 * -(-per_layer // (16 * attn_token))
    assert p.block_size == block and p.page_bytes == block * attn_token
    assert p.state_page_padding_pct == pytest.approx(
        (block * attn_token - per_layer) / per_layer * 100
    )


def test_a_flag_still_overrides_the_declared_format():
    # --mamba-ssm-cache-dtype bfloat16: the recurrent state at 2 B, the same page as a BF16 one.
    spec = spec_from_config(load_config_file(CONFIGS / "qwen3.5-35b-a3b.json"))
    v29 = Deployment(spec=spec).but(version="0.29.0")
    fp32 = predict(v29, 40 * 2**30, 8192)
    bf16 = predict(v29.but(mamba_ssm_cache_dtype="bfloat16"), 40 * 2**30, 8192)
    # The same page rule at 49,152 + 524,288 x 2 = 1,097,728 B: 16 x cdiv(1,097,728, 32,768) = 544.
    assert (fp32.block_size, bf16.block_size) == (1056, 544)


def test_an_unknown_declared_format_is_refused_by_name():
    cfg = load_config_file(CONFIGS / "nemotron-3-nano-30b-a3b.json")
    with pytest.raises(ValueError, match="mamba_ssm_cache_dtype"):
        spec_from_config({**cfg, "mamba_ssm_cache_dtype": "float8"})
