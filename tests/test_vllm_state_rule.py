"""One rule for the recurrent states' formats (issue 40): predict() on a model's layers and
state_dtypes() on its config.json answer alike, flags included. Two cases where predict() used
to apply a flag that vLLM does not read (tests/data/vllm-facts.md, Q10):

- Kimi-Linear's KDA state is float32 whatever --mamba-ssm-cache-dtype says before v0.30.0
  (kda_state_dtype), and from v0.30.0 it takes float32 or bfloat16 only;
- MiniMax's lightning attention keeps one state, in --mamba-cache-dtype: the SSM flag is not
  read (MambaStateDtypeCalculator.linear_attention_state_dtype).
"""

from __future__ import annotations

import pytest
from conftest import ROOT

from kvcalc import GiB, load_config_file, spec_from_config
from kvcalc.cache.deployment import Deployment
from kvcalc.engines.vllm import predict, state_dtypes

CONFIGS = ROOT / "tests/data/configs"


def _predict(name: str, version: str, **flags: str):
    spec = spec_from_config(load_config_file(CONFIGS / name))
    dep = Deployment(spec=spec).but(version=version, enable_prefix_caching=False, **flags)
    return predict(dep, 20 * GiB, 8192)


def _sized_alike(a, b) -> bool:
    return (a.block_size, a.page_bytes, a.num_blocks) == (b.block_size, b.page_bytes, b.num_blocks)


def test_kda_state_ignores_the_ssm_flag_before_0_30():
    name = "kimi-linear-48b-a3b-instruct.json"
    cfg = load_config_file(CONFIGS / name)
    assert state_dtypes(cfg, ssm_flag="bfloat16", vllm_version="0.29.0")[:2] == ("bf16", "fp32")
    auto = _predict(name, "0.29.0")
    flagged = _predict(name, "0.29.0", mamba_ssm_cache_dtype="bfloat16")
    assert _sized_alike(flagged, auto)


def test_kda_state_takes_bfloat16_from_0_30_and_refuses_float16():
    name = "kimi-linear-48b-a3b-instruct.json"
    cfg = load_config_file(CONFIGS / name)
    assert state_dtypes(cfg, ssm_flag="bfloat16", vllm_version="0.30.0")[:2] == ("bf16", "bf16")
    auto = _predict(name, "0.30.0")
    half = _predict(name, "0.30.0", mamba_ssm_cache_dtype="bfloat16")
    # a bf16 state is smaller: the attention block that must hold it shrinks
    assert half.block_size < auto.block_size
    with pytest.raises(ValueError, match="KDA"):
        _predict(name, "0.30.0", mamba_ssm_cache_dtype="float16")


def test_lightning_state_follows_the_conv_flag_only():
    name = "minimax-m1.json"
    cfg = load_config_file(CONFIGS / name)
    assert state_dtypes(cfg, ssm_flag="float32")[:2] == ("bf16", "bf16")
    auto = _predict(name, "0.33.0")
    assert _sized_alike(_predict(name, "0.33.0", mamba_ssm_cache_dtype="float32"), auto)
    wide = _predict(name, "0.33.0", mamba_cache_dtype="float32")
    assert wide.block_size > auto.block_size
