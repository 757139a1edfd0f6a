"""EAGLE draft heads read as what they are: one (or a few) Llama decoder layers whose fusion
layer and vocabulary fields size weights, not the cache (issue 38, item 2).

Files and sources: tests/data/configs/eagle/ (NOTES.md there). Every expectation is worked by
hand from the published fields: a head caches num_hidden_layers x 2 (K and V) x
num_key_value_heads x head_dim x 2 B (BF16) per token, as vLLM's llama_eagle3.py builds it (its
LlamaDecoderLayer: a LlamaAttention of num_kv_heads x head_dim in each of num_hidden_layers
layers; draft_vocab_size sizes the lm_head, target_hidden_size x 3 the fc). With tensor
parallelism a GPU holds max(1, kv_heads // tp) heads.
"""

from __future__ import annotations

import copy

import pytest
from conftest import ROOT

from kvcalc import kv_cache, load_config_file, spec_from_config

DATA = ROOT / "tests" / "data" / "configs" / "eagle"


def per_token(name, tp=1, n=2048):
    r = kv_cache(spec_from_config(load_config_file(DATA / name)), n, tp=tp)
    assert r.state_bytes == 0
    assert r.kv_bytes % n == 0
    return r.kv_bytes // n


def test_every_eagle_file_has_a_case_and_a_source():
    notes = (DATA / "NOTES.md").read_text()
    files = {p.name for p in DATA.glob("*.json")}
    assert files == set(CASES)
    for name in files:
        assert name in notes


CASES = {
    # AQ-MedAI/Kimi-K25-eagle3 (LlamaForCausalLMEagle3, eagle_config with the aux layer ids,
    # draft_vocab_size 32,000): 1 layer x 2 x 64 KV heads x head_dim 128 x 2 B = 32,768 B a token.
    # use_sliding_window false and sliding_window null: no window. TP 8: 8 heads, 4,096 B.
    "kimi-k2.5-eagle3.json": (32_768, (8, 4_096)),
    # nm-testing/EAGLE3-LLaMA3.1-Instruct-8B-converted (speculators format): the layer is
    # transformer_layer_config, 1 layer x 2 x 8 KV heads x head_dim 128 x 2 B = 4,096 B a token
    # (the same head as Llama 3.1 8B's own layers, one of them). TP 8: 1 head, 512 B.
    "eagle3-llama3.1-8b-speculators.json": (4_096, (8, 512)),
    # yuhuili/EAGLE-llama2-chat-7B (EAGLE-1, a one-layer LlamaForCausalLM config): 1 layer x 2 x
    # 32 KV heads x 4,096 / 32 = 128 x 2 B = 16,384 B a token. TP 4: 8 heads, 4,096 B.
    "eagle-llama2-chat-7b.json": (16_384, (4, 4_096)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_eagle_head_cache_by_hand(name):
    bytes_per_token, (tp, at_tp) = CASES[name]
    assert per_token(name) == bytes_per_token
    assert per_token(name, n=4096) == bytes_per_token
    assert per_token(name, tp=tp) == at_tp


def test_eagle3_heads_are_not_counted_as_llama_decoders():
    # The head's fc, its q/k/v over 2 x hidden_size and its draft-vocabulary lm_head are not a
    # Llama's: the parameter count is refused by name, the cache stays.
    for name in ("kimi-k2.5-eagle3.json", "eagle3-llama3.1-8b-speculators.json"):
        spec = spec_from_config(load_config_file(DATA / name))
        assert spec.params is None
        assert "EAGLE draft head" in spec.params_error


def test_eagle_config_keys_are_read_one_by_one():
    cfg = load_config_file(DATA / "kimi-k2.5-eagle3.json")
    cfg["eagle_config"]["num_hidden_layers"] = 2
    with pytest.raises(ValueError, match="eagle_config.*num_hidden_layers"):
        spec_from_config(cfg)


def test_eagle3_fields_in_a_flat_head_are_understood():
    # SpecForge's and ModelOpt's other EAGLE-3 fields, written at the top level (vLLM's
    # update_eagle3 passes them to the draft's config): weights and norms only.
    cfg = load_config_file(DATA / "kimi-k2.5-eagle3.json")
    cfg.update(
        target_hidden_size=7168,
        norm_before_fc=True,
        norm_before_residual=True,
        num_aux_hidden_states=3,
        eagle_aux_hidden_state_layer_ids=[2, 30, 58],
        use_aux_hidden_state=True,
        eagle_fc_bias=False,
        fc_norm=False,
        norm_output=True,
        use_input_layernorm_in_first_layer=True,
        use_last_layernorm=False,
        parallel_draft_step=1,
        has_lm_head=True,
    )
    r = kv_cache(spec_from_config(cfg), 2048)
    assert r.kv_bytes == 32_768 * 2048


def test_speculators_format_other_than_eagle_is_refused_by_name():
    cfg = load_config_file(DATA / "eagle3-llama3.1-8b-speculators.json")
    other = copy.deepcopy(cfg)
    other["speculators_model_type"] = "dspark"
    with pytest.raises(ValueError, match="'speculators_model_type' is 'dspark'"):
        spec_from_config(other)
    broken = copy.deepcopy(cfg)
    broken["transformer_layer_config"] = None
    with pytest.raises(ValueError, match="transformer_layer_config"):
        spec_from_config(broken)
