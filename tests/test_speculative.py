"""Speculative decoding's cache (issue 38, item 3): the layers a drafter adds to the pool.

Every expected number is worked by hand from the config files' fields (tests/data/configs, the
registry's copies of the published config.json files), never from kvcalc's output:
- an MTP module is one more decoder layer with the model's attention (vLLM's deepseek_mtp.py,
  qwen3_5_mtp.py, nemotron_h_mtp.py build it from the target's config: MLA with the indexer
  for DeepSeek sparse attention, full attention for Qwen3.5, one attention block per '*' of
  NemotronH's mtp_hybrid_override_pattern);
- an EAGLE head given no config is one decoder layer with the target's attention geometry (the
  EAGLE-1 and EAGLE-3 heads of Llama 3.1 8B: num_hidden_layers 1, 8 KV heads of 128);
- BF16 K/V: 2 x kv_heads x head_dim x 2 B per token and layer; an MLA latent (kv_lora_rank +
  qk_rope_head_dim) x 2 B; DeepSeek sparse attention's FP8 indexer key adds 128 + 128 // 128 x 4
  = 132 B per token and layer.
"""

import json

import pytest
from conftest import ROOT

from kvcalc import get_model, kv_cache, load_config_file, spec_from_config
from kvcalc.cli import main
from kvcalc.core.speculative import Speculation, speculation_from, with_speculation

CONFIGS = ROOT / "tests/data/configs"


def _spec(name):
    return spec_from_config(load_config_file(CONFIGS / name))


def _per_token(spec, **kw):
    return kv_cache(spec, 1, **kw).kv_bytes_per_token_nominal


MLA = (512 + 64) * 2  # 1,152 B: one DeepSeek latent per token and layer
INDEXER = 128 + 128 // 128 * 4  # 132 B: DeepSeek sparse attention's fp8 indexer key

# (case, spec loader, hand-derived bytes per token without and with one MTP module)
MTP_CASES = {
    # DeepSeek-V3: 61 MLA layers; num_nextn_predict_layers 1 adds one more.
    "deepseek-v3": (lambda: get_model("deepseek-v3").spec, 61 * MLA, 62 * MLA),
    # DeepSeek-V3.2: 61 MLA layers, each with the indexer key; the MTP layer too.
    "deepseek-v3.2": (
        lambda: _spec("deepseek-v3.2.json"),
        61 * (MLA + INDEXER),
        62 * (MLA + INDEXER),
    ),
    # GLM-5 (glm_moe_dsa): 78 MLA + indexer layers and one MTP layer.
    "glm-5": (lambda: _spec("glm-5.json"), 78 * (MLA + INDEXER), 79 * (MLA + INDEXER)),
    # Qwen3.5-35B-A3B: 40 layers, every 4th full attention (10), 2 KV heads x 256;
    # mtp_num_hidden_layers 1 is one more full-attention layer: 2 x 2 x 256 x 2 = 2,048 B.
    "qwen3.5-35b-a3b": (lambda: _spec("qwen3.5-35b-a3b.json"), 10 * 2048, 11 * 2048),
    # Nemotron 3 Super: 8 '*' (attention) blocks in hybrid_override_pattern, 2 KV heads x 128:
    # 1,024 B each; mtp_hybrid_override_pattern '*E' x num_nextn_predict_layers 1 adds one.
    "nemotron-3-super": (
        lambda: _spec("nemotron-3-super-120b-a12b-fp8.json"),
        8 * 1024,
        9 * 1024,
    ),
}


@pytest.mark.parametrize("case", list(MTP_CASES))
def test_mtp_adds_one_layer_of_the_models_attention(case):
    load, without, with_mtp = MTP_CASES[case]
    spec = load()
    assert _per_token(spec) == without  # the model's own cache leaves its MTP layers out
    drafted = with_speculation(spec, Speculation(method="mtp", tokens=2))
    assert _per_token(drafted) == with_mtp
    r = kv_cache(drafted, 4096, 3)
    assert r.drafter["bytes_per_token"] == with_mtp - without
    assert r.drafter["bytes"] == (with_mtp - without) * 4096 * 3
    # the tokens drafted a step do not change the bytes per token
    more = with_speculation(spec, Speculation(method="mtp", tokens=5))
    assert _per_token(more) == with_mtp


def test_eagle_head_and_draft_model():
    llama = get_model("llama-3.1-8b").spec  # 32 layers x 2 x 8 x 128 x 2 = 131,072 B
    head = with_speculation(llama, Speculation(method="eagle", tokens=3))
    assert _per_token(head) == 33 * 4096
    # a draft model: every one of its layers keeps a cache (here Llama 3.2-style 1B geometry
    # written by hand: 16 layers, 8 KV heads of 64: 16 x 2 x 8 x 64 x 2 = 32,768 B)
    draft_cfg = {
        "model_type": "llama",
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
    }
    draft = spec_from_config(draft_cfg, name="draft 1B")
    both = with_speculation(llama, Speculation(method="draft_model", tokens=4, draft=draft))
    assert _per_token(both) == 131_072 + 32_768
    # at TP 8 each GPU holds 1 of the target's 8 heads and 1 of the draft's 8
    assert _per_token(both, tp=8) == 32 * 2 * 128 * 2 + 16 * 2 * 64 * 2


def test_pipeline_stages_put_the_drafter_last():
    # DeepSeek-V3 at PP 2: 61 layers split [31, 30] (vLLM's get_pp_indices); the MTP layer
    # joins the last stage: 31 on both. Per GPU the binding stage holds 31 latents.
    spec = with_speculation(get_model("deepseek-v3").spec, Speculation())
    assert _per_token(spec, pp=2) == 31 * MLA
    r = kv_cache(spec, 100, pp=2)
    assert r.drafter["bytes_per_token"] in (0, MLA)  # 0 when the first stage binds


def test_refusals_name_what_to_fix():
    llama = get_model("llama-3.1-8b").spec
    with pytest.raises(ValueError, match="declares no MTP layers"):
        with_speculation(llama, Speculation(method="mtp"))
    with pytest.raises(ValueError, match="num_speculative_tokens"):
        Speculation(method="mtp", tokens=0)
    with pytest.raises(ValueError, match="needs its config"):
        Speculation(method="draft_model")
    # a window + full model whose MTP layers' attention the config does not say
    cfg = json.loads((CONFIGS / "gpt-oss-20b.json").read_text())
    cfg["num_nextn_predict_layers"] = 1
    spec = spec_from_config(cfg)
    assert spec.mtp_field == "num_nextn_predict_layers"  # read, not refused
    with pytest.raises(ValueError, match="mixes windowed and full attention"):
        with_speculation(spec, Speculation(method="mtp"))
    # an n-gram drafter has no layers: nothing is added
    ngram = with_speculation(llama, Speculation(method="ngram", tokens=4))
    assert _per_token(ngram) == 131_072 and ngram.speculative_tokens == 4


def test_vllm_speculative_config_is_read_as_vllm_names_it():
    s = speculation_from({"method": "qwen3_next_mtp", "num_speculative_tokens": 2})
    assert (s.method, s.tokens) == ("mtp", 2)
    assert speculation_from({"method": "eagle3", "num_speculative_tokens": 3}).method == "eagle"
    assert speculation_from({"method": "ngram", "prompt_lookup_max": 4}).method == "ngram"
    with pytest.raises(ValueError, match="not read by kvcalc"):
        speculation_from({"method": "mtp", "draft_kv_cache_dtype": "fp8"})
    with pytest.raises(ValueError, match="not one kvcalc sizes"):
        speculation_from({"method": "medusa2"})
    with pytest.raises(ValueError, match="whole number"):
        speculation_from({"method": "mtp", "num_speculative_tokens": "2"})


def test_kv_command_prints_the_drafters_bytes(capsys):
    assert (
        main(
            [
                "kv",
                "--model",
                "deepseek-v3",
                "--context",
                "4096",
                "--speculative-config",
                '{"method": "deepseek_mtp", "num_speculative_tokens": 2}',
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["kv_bytes_per_token_nominal"] == 62 * MLA
    assert out["drafter"]["bytes_per_token"] == MLA
    assert out["drafter"]["bytes"] == MLA * 4096
    assert (
        main(["kv", "--model", "llama-3.1-8b", "--context", "8", "--speculative-config", "{x"]) == 2
    )
    assert "is not JSON" in capsys.readouterr().err


def test_family_rules_of_vllms_mtp_builders():
    """vLLM's MTP builders, tests/data/vllm-speculative-facts.md Q1: Qwen3-Next builds
    getattr(config, "num_nextn_predict_layers", 1) full-attention layers (its config.json names
    none); MiMo-V2 always one sliding-window layer with the swa_* geometry; MiniMax-M2 none."""
    # Qwen3-Next-80B: 12 full layers x 2 x 2 KV heads x 256 x 2 B = 24,576 B; + 1 MTP layer
    nxt = _spec("qwen3-next-80b-a3b-thinking.json")
    assert _per_token(nxt) == 12 * 2048
    assert _per_token(with_speculation(nxt, Speculation())) == 13 * 2048
    # MiMo-V2-Flash: the MTP layer is a sliding one: 8 KV heads x (192 + 128) x 2 B = 5,120 B a
    # token, at most the window (128 tokens) of them
    mimo = _spec("mimo-v2-flash.json")
    drafted = with_speculation(mimo, Speculation())
    r = kv_cache(drafted, 4096)
    assert r.drafter["bytes_per_token"] == 8 * (192 + 128) * 2
    assert r.drafter["bytes"] == 8 * (192 + 128) * 2 * 128
    # MiniMax-M2.7 declares num_mtp_modules 3, which vLLM does not build
    mm = _spec("round6/minimax-m2.7.json")
    with pytest.raises(ValueError, match="builds no MTP drafter for MiniMax-M2"):
        with_speculation(mm, Speculation())
    # k above n must be a multiple of n (one module: any k)
    ds = get_model("deepseek-v3").spec
    assert with_speculation(ds, Speculation(tokens=3)).speculative_tokens == 3
    nemo = _spec("nemotron-3-super-120b-a12b-fp8.json")
    assert len(nemo.mtp_layers) == 1


def test_mtp_weights_by_hand():
    """The MTP module's parameters, from vLLM's module lists (deepseek_mtp.py, qwen3_5_mtp.py):
    one decoder layer, a 2 x hidden -> hidden projection and three norms; the embedding and the
    output head are the target's (shared from v0.16.0, vllm-speculative-facts.md Q6)."""
    h = 7168  # DeepSeek-V3
    mla = h * 1536 + 1536 + 1536 * 128 * 192 + h * 576 + 512 + 512 * 128 * 256 + 128 * 128 * h
    moe = (256 + 1) * 3 * h * 2048 + 256 * h + 256
    ds = mla + moe + 2 * h + 2 * h * h + 3 * h
    assert ds == 11_610_068_224
    assert get_model("deepseek-v3").spec.mtp_params == ds
    h = 2048  # Qwen3.5-35B-A3B: gated query (x 2), q/k norms of 256, 256 experts of 512
    attn = h * 16 * 256 * 2 + 2 * h * 2 * 256 + 16 * 256 * h + 2 * 256
    moe = 256 * 3 * h * 512 + 3 * h * 512 + h + 256 * h
    q35 = attn + moe + 2 * h + 2 * h * h + 3 * h
    assert _spec("qwen3.5-35b-a3b.json").mtp_params == q35 == 844_640_768
    drafted = with_speculation(_spec("qwen3.5-35b-a3b.json"), Speculation())
    assert drafted.drafter_params == q35
    # an EAGLE head's own weights are not known without its config
    assert (
        with_speculation(get_model("llama-3.1-8b").spec, Speculation(method="eagle")).drafter_params
        is None
    )
