"""Speculative decoding as vLLM sizes it (issue 38, item 3), rules by release from the wheels
(tests/data/vllm-speculative-facts.md), checked against real start-up logs.

Qwen3.6-27B + MTP (k = 3), TP 2, fp8_e5m2 cache, float16 model, max_model_len 262,144, prefix
caching ('align'), worked by hand per GPU (Q7):
- Gated DeltaNet state: conv (2 x 16 x 128 + 48 x 128) / 2 = 5,120 channels x (4 - 1 + 3) rows
  x 2 B = 61,440 B (30,720 B without speculative decoding) + SSM 24 x 128 x 128 x 4 B (float32,
  mamba_ssm_dtype) = 1,572,864 B: 1,634,304 B;
- attention: 2 (K, V) x 2 KV heads x 256 x 1 B = 1,024 B a token and layer; the block is raised
  to hold a state page: 16 x cdiv(1,634,304, 16 x 1,024) = 1,600 tokens, page 1,638,400 B;
- groups: 16 full + 1 MTP = 17 layers; 48 GDN layers < 17 x 1.5 is false, so 17 a group: one
  full group and 3 GDN groups (3 padding layers); a block costs 17 x 1,638,400 = 27,852,800 B;
- a request: cdiv(262,144, 1,600) = 164 blocks + 3 GDN groups x (2 + k) = 15: 179 blocks.
"""

import pytest
from conftest import ROOT

from kvcalc import GiB, get_model, load_config_file, spec_from_config
from kvcalc.cache.deployment import Deployment
from kvcalc.core.speculative import Speculation, with_speculation
from kvcalc.engines.vllm import explain_log, parse_log, predict

LOGS = ROOT / "tests/data/vllm-logs"
CFG = load_config_file(LOGS / "qwen3.6-27b.json")
Q27 = spec_from_config(CFG)
BLOCK_BYTES = 17 * 1_600 * 1_024
LEN = 262_144


AS_LOGGED = dict(kv_dtype="fp8_e5m2", state_dtype="fp16", mamba_ssm_cache_dtype="float32")


def logged(spec, version: str) -> Deployment:
    """``spec`` as the logs serve it: TP 2, the formats above, prefix caching on."""
    return Deployment(spec=spec, tp=2).but(**AS_LOGGED, enable_prefix_caching=True, version=version)


def _mtp(k=3):
    return with_speculation(Q27, Speculation(method="mtp", tokens=k))


@pytest.mark.parametrize(
    "version, blocks, tokens, conc",
    [
        ("0.24.0", 426, 623_873, "2.38"),  # club-3090 #642
        ("0.22.0", 425, 622_408, "2.37"),  # club-3090 #294
        ("0.22.0", 424, 620_944, "2.37"),  # club-3090 #295
    ],
)
def test_three_qwen36_mtp_logs(version, blocks, tokens, conc):
    p = predict(logged(_mtp(), version), blocks * BLOCK_BYTES, LEN)
    assert (p.block_size, p.group_size, p.num_blocks) == (1_600, 17, blocks)
    assert p.blocks_per_request == 164 + 3 * (2 + 3) == 179
    # v0.20.1 on: int(max_concurrency x max_model_len)
    assert p.kv_cache_tokens == int(blocks / 179 * 262_144) == tokens
    assert f"{p.max_concurrency:.2f}" == conc


def test_the_log_is_explained_with_its_own_speculative_config():
    log = parse_log((LOGS / "qwen3.6-27b-mtp-v0.24.0.log").read_text())
    assert (log["speculative_method"], log["speculative_tokens"]) == ("mtp", 3)
    p, lines = explain_log(
        Q27, log, state_dtype="fp16", mamba_ssm_cache_dtype="float32", enable_prefix_caching=True
    )
    assert all(line.agrees for line in lines), [(x.name, x.logged, x.predicted) for x in lines]
    # 11.05 GiB rounded: [11.045, 11.055) GiB // 27,852,800 B holds 425 or 426 blocks
    assert {425, 426} == {int(g * GiB) // BLOCK_BYTES for g in (11.045, 11.0549)}


def test_each_effect_is_needed():
    """Without any one of the three rules the logged 623,873 tokens are not reproduced (Q7)."""
    avail = 426 * BLOCK_BYTES
    full = predict(logged(_mtp(), "0.24.0"), avail, LEN).kv_cache_tokens
    no_mtp_layer = with_speculation(Q27, Speculation(method="ngram", tokens=3))
    without_layer = predict(logged(no_mtp_layer, "0.24.0"), avail, LEN)
    plain = predict(logged(Q27, "0.24.0"), avail, LEN)
    assert full == 623_873
    assert without_layer.group_size == 16 and without_layer.kv_cache_tokens != full
    assert plain.block_size == 16 * 98 == 1_568 and plain.kv_cache_tokens != full


def test_release_rules():
    nemo = spec_from_config(
        load_config_file(ROOT / "tests/data/configs/nemotron-3-nano-30b-a3b.json")
    )
    nemo_mtp = with_speculation(nemo, Speculation(method="eagle", tokens=2))

    def at(spec, version: str, **kw):
        return predict(Deployment(spec=spec).but(version=version, **kw), 20 * GiB, 8_192)

    # Mamba-2 hybrids with speculative decoding from 0.17.0 (PR #33726), not before
    with pytest.raises(ValueError, match="from 0.17.0 on"):
        at(nemo_mtp, "0.16.0")
    assert at(nemo_mtp, "0.17.0").num_blocks > 0
    # Qwen3-Next (Gated DeltaNet) from 0.10.2; before 0.15.0 the start-up count charges one
    # state block a request whatever k (PR #30877 added page x (1 + num_speculative_blocks))
    nxt = with_speculation(get_model("qwen3-next-80b-a3b").spec, Speculation(tokens=2))
    old, new = (at(nxt, v, enable_prefix_caching=False) for v in ("0.14.1", "0.15.0"))
    attn = [g for g in new.groups if g.kind != "state"]
    states = [g for g in new.groups if g.kind == "state"]
    assert all(g.blocks_per_request == 1 for g in old.groups if g.kind == "state")
    assert all(g.blocks_per_request == 1 + 2 for g in states) and attn
    with pytest.raises(ValueError, match="Mamba with speculative|serves no model"):
        at(nxt, "0.10.1", enable_prefix_caching=False)
    # a separate draft model from 0.15.0
    llama = get_model("llama-3.1-8b").spec
    drafted = with_speculation(llama, Speculation(method="draft_model", tokens=2, draft=llama))
    with pytest.raises(ValueError, match="draft model"):
        at(drafted, "0.14.1")
    assert at(drafted, "0.15.0").group_size == 64
