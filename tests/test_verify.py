"""kvcalc's layers against the cache transformers itself allocates, on the meta device (no
weights, no memory): every registry model and every real config in tests/data/configs.

The oracle is transformers' own cache object (its tensors' shapes), not kvcalc."""

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="verify needs torch (pip install -r requirements.txt)")
pytest.importorskip("transformers", reason="verify needs transformers")

from kvcalc import load_config_file, registry  # noqa: E402
from kvcalc.measure import verify as verify_module  # noqa: E402
from kvcalc.measure.verify import verify  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "configs"

# model_type values transformers 5.24 does not ship: these need remote code, never run here.
REMOTE_CODE_ONLY = {
    "chatglm3-6b.json": "chatglm",
    "kimi-k2-instruct.json": "kimi_k2",
    "minimax-m1.json": "minimax_m1",
    "nemotron-nas-super-49b.json": "nemotron-nas",
    "nemotron-nas-ultra-253b.json": "nemotron-nas",
}
STATE_OUTSIDE_A_CACHE = {"rwkv-4-430m-pile.json"}


@pytest.mark.parametrize("key", sorted(registry().models))
def test_every_registry_model_agrees_with_transformers(key):
    r = verify(registry().model(key).config)
    assert r.checkable, r.verdict
    assert r.agrees, r.verdict
    assert len(r.rows) == registry().model(key).spec.num_layers


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.json")))
def test_every_real_config_agrees_or_says_why_not(name):
    r = verify(load_config_file(DATA / name))
    if name in REMOTE_CODE_ONLY:
        assert not r.checkable and REMOTE_CODE_ONLY[name] in r.verdict
        assert "remote code" in r.verdict
        return
    if name in STATE_OUTSIDE_A_CACHE:
        # transformers' RwkvModel returns its state as a list of tensors, not a Cache object:
        # the check says so (tests/test_real_configs.py pins the bytes from its modeling code).
        assert not r.checkable and "no cache" in r.verdict
        return
    assert r.checkable, r.verdict
    assert r.agrees, r.verdict


def test_named_differences_are_not_mismatches():
    # Gemma 3 27B: transformers keeps window - 1 = 1,023 tokens in a sliding layer; kvcalc's
    # figure (like vLLM's) is the window. The check names the difference.
    r = verify(registry().model("gemma-3-27b").config, context=2000)
    sliding = [row for row in r.rows if row.kvcalc.startswith("sliding")]
    assert sliding and all(row.verdict == "agrees (named difference)" for row in sliding)
    # 16 KV heads x (128 + 128) x 1,023 tokens, read off transformers' own tensors.
    assert sliding[0].found["kv"] == 16 * 256 * 1023
    assert any("window - 1" in d for d in r.differences)
    # Jamba's Mamba layers: transformers keeps the whole kernel (4), vLLM kernel - 1.
    r = verify(registry().model("jamba-v0.1").config)
    assert any("kernel - 1" in d for d in r.differences)


def test_a_wrong_layer_is_reported(monkeypatch):
    # The check must be able to fail: give kvcalc's spec one layer with twice the KV heads.
    real = verify_module.spec_from_config

    def wrong(config, **kw):
        spec = real(config, **kw)
        layers = list(spec.layers)
        layers[3] = replace(layers[3], kv_heads=2 * layers[3].kv_heads)
        return spec.with_layers(layers)

    monkeypatch.setattr(verify_module, "spec_from_config", wrong)
    r = verify(registry().model("llama-3.1-8b").config)
    assert not r.agrees and "layer 3" in r.verdict
    assert [row.layer for row in r.rows if row.verdict == "differs"] == [3]


def test_cli_verify_json():
    p = subprocess.run(
        [sys.executable, "-m", "kvcalc", "verify", "--model", "deepseek-v3", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["agrees"] is True and out["checkable"] is True
    # MLA: transformers caches the 512 latent as keys and the 64 RoPE key as values.
    assert out["rows"][0]["found"]["kv"] == (512 + 64) * out["context"]


def test_a_refused_config_can_still_be_checked_and_says_it_is_unverified():
    # The refusal advises this check, so it must run on a config kvcalc refuses: it compares
    # the standard-decoder reading and names the fields it left out.
    from conftest import llama_config

    r = verify(llama_config(my_flag=True))
    assert r.checkable and r.agrees
    assert r.unverified == ("my_flag",) and "standard-decoder reading" in r.verdict
