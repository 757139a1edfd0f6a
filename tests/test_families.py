"""Families that carry their structure in fields of their own (issue 21), and the rule that a
field no reader understands is refused by name.

Where no verbatim published config.json could be found (tests/data/configs/NOTES-E.md says where
each value comes from), the config below is written from the published values, field by field;
the expected bytes are worked out by hand from vLLM's model file (or transformers' where vLLM
does not serve the family), never by calling kvcalc.
"""

import json
from pathlib import Path

import pytest
from conftest import llama_config

from kvcalc import kv_cache, load_config_file, spec_from_config
from kvcalc.cache.deployment import Deployment
from kvcalc.cli import main
from kvcalc.config.hfconfig import UnknownFields

DATA = Path(__file__).parent / "data" / "configs"


def total(spec, n, tp=1):
    r = kv_cache(spec, n, tp=tp)
    return r.kv_bytes + r.state_bytes


# -- LFM2: both spellings -----------------------------------------------------------------------


def test_lfm2_both_spellings_are_the_same_model():
    # LFM2-350M's full_attn_idxs [2, 5, 8, 10, 12, 14], and the same layout written the newer way
    # (layer_types, full_attn_idxs null, as LFM2.5 files do). 6 x 2,048 B per token; 10 conv
    # layers of (3 - 1) x 1,024 x 2 B = 4,096 B (vLLM's short_conv_state_shape).
    old = load_config_file(DATA / "lfm2-350m.json")
    new = {k: v for k, v in old.items() if k != "full_attn_idxs"}
    new["full_attn_idxs"] = None
    new["layer_types"] = [
        "full_attention" if i in (2, 5, 8, 10, 12, 14) else "conv" for i in range(16)
    ]
    for cfg in (old, new):
        spec = spec_from_config(cfg)
        assert total(spec, 4096) == 6 * 2048 * 4096 + 10 * 4096
        assert total(spec, 32768) == 6 * 2048 * 32768 + 10 * 4096
    # An entry that is neither spelling's word is refused by name.
    new["layer_types"][0] = "mamba"
    with pytest.raises(ValueError, match="layer_types"):
        spec_from_config(new)


def test_lfm2_conv_dim_must_agree_with_hidden_size():
    cfg = load_config_file(DATA / "lfm2-350m.json")
    cfg["conv_dim"] = 2048  # vLLM would size the state by conv_dim, transformers by hidden_size
    with pytest.raises(ValueError, match="conv_dim"):
        spec_from_config(cfg)


# -- Kimi-Linear: the published and the transformers-saved spelling ---------------------------


def test_kimi_linear_as_transformers_saves_it():
    # transformers' KimiLinearConfig turns linear_attn_config into layer_types and linear_*;
    # a file saved that way must give the published file's bytes (tests/test_real_configs.py:
    # 7 MLA x 1,152 B per token, 20 KDA x 2,170,880 B).
    pub = load_config_file(DATA / "kimi-linear-48b-a3b-instruct.json")
    lac = pub["linear_attn_config"]
    saved = {k: v for k, v in pub.items() if k != "linear_attn_config"}
    saved.update(
        layer_types=[
            "linear_attention" if i + 1 in lac["kda_layers"] else "full_attention"
            for i in range(27)
        ],
        linear_num_heads=32,
        linear_head_dim=128,
        linear_conv_kernel_dim=4,
    )
    for cfg in (pub, saved):
        assert total(spec_from_config(cfg), 4096) == 7 * 1152 * 4096 + 20 * 2_170_880
    # The recurrent state is float32 whatever state format is asked for; the conv state is not.
    spec = spec_from_config(pub)
    kda = next(lay for lay in spec.layers if lay.kind == "state")
    assert kv_cache(spec, 1, state_dtype="fp32").state_bytes == 20 * (36_864 * 4 + 524_288 * 4)
    assert kda.ssm_dtype == "fp32"


def test_kimi_linear_layers_must_be_named_once():
    cfg = load_config_file(DATA / "kimi-linear-48b-a3b-instruct.json")
    cfg["linear_attn_config"] = {
        **cfg["linear_attn_config"],
        "kda_layers": cfg["linear_attn_config"]["kda_layers"] + [4],
    }
    with pytest.raises(ValueError, match="every layer once"):
        spec_from_config(cfg)


# -- Falcon-H1: attention and Mamba-2 in every layer ---------------------------------------------

# Falcon-H1-0.5B's published geometry (transformers' FalconH1Config table; a 0.5B fine-tune's
# config.json on the Hub carries the same fields: NOTES-E.md).
FALCON_H1_05B = {
    "model_type": "falcon_h1",
    "hidden_size": 1024,
    "num_hidden_layers": 36,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "mamba_d_ssm": 1536,
    "mamba_n_heads": 24,
    "mamba_d_head": 64,
    "mamba_d_state": 128,
    "mamba_n_groups": 1,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
    "mamba_chunk_size": 128,
    "intermediate_size": 2048,
    "vocab_size": 32784,
    "max_position_embeddings": 16384,
}


def test_falcon_h1_keeps_kv_and_a_state_in_every_layer():
    spec = spec_from_config(FALCON_H1_05B)
    # vLLM's falcon_h1.py: attention 2 KV heads x 64: 2 x 2 x 64 x 2 = 512 B per token per layer;
    # MambaMixer2: conv (3, 1,536 + 2 x 1 x 128) = 5,376 elements, SSM (24, 64, 128) = 196,608:
    # (5,376 + 196,608) x 2 B = 403,968 B per layer.
    assert total(spec, 4096) == 36 * 512 * 4096 + 36 * 403_968 == 90_040_320
    assert total(spec, 32768) == 618_522_624
    # TP 2: 1 KV head (256 B); the single B/C group is replicated to 2 (extra_groups_for_head_
    # shards), so conv (1,536 + 2 x 2 x 128) / 2 = 1,024 channels x 3 and SSM 12 x 64 x 128:
    # (3,072 + 98,304) x 2 = 202,752 B.
    assert total(spec, 4096, tp=2) == 36 * 256 * 4096 + 36 * 202_752 == 45_047_808
    # transformers keeps the whole conv kernel: its view of a layer holds 4 columns, not 3.
    view = spec.layers[0].transformers_view()
    assert view.state_elements == 1792 * 4 + 196_608


# -- Llama 3.2 Vision (mllama): cross-attention per image -----------------------------------------

# Llama-3.2-11B-Vision's published geometry (derived repos' config.json on the Hub: NOTES-E.md).
MLLAMA_11B = {
    "model_type": "mllama",
    "text_config": {
        "model_type": "mllama_text_model",
        "hidden_size": 4096,
        "num_hidden_layers": 40,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38],
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
    },
    "vision_config": {
        "model_type": "mllama_vision_model",
        "image_size": 560,
        "patch_size": 14,
        "max_num_tiles": 4,
    },
}


def test_mllama_cross_attention_is_per_image_not_per_token():
    spec = spec_from_config(MLLAMA_11B)
    r = kv_cache(spec, 4096)
    # 32 self-attention layers x 2 x 8 x 128 x 2 B = 131,072 B per token; the 8 cross layers
    # hold one image: 4 tiles x ((560 // 14)^2 + 1) = 6,404 states x 2 x 8 x 128 x 2 B.
    per_image = 8 * 4096 * 6404
    assert r.kv_bytes_per_token_nominal == 131_072
    assert r.kv_bytes_per_token == 131_072
    assert r.kv_bytes == 131_072 * 4096 + per_image == 746_717_184
    assert kv_cache(spec, 32768).kv_bytes == 4_504_813_568
    assert kv_cache(spec, 4096, tp=2).kv_bytes == 373_358_592
    assert any("per image" in n for n in spec.notes)


def test_mllama_text_config_alone_is_refused():
    with pytest.raises(ValueError, match="vision_config"):
        spec_from_config(MLLAMA_11B["text_config"])


def test_vllm_refuses_mllama_by_name():
    from kvcalc.engines import vllm

    with pytest.raises(ValueError, match="mllama"):
        vllm.predict(Deployment(spec=spec_from_config(MLLAMA_11B)), 10 << 30, 4096)


# -- RecurrentGemma (transformers' modeling code: vLLM does not serve it) -------------------------

RECURRENTGEMMA_2B = {
    "model_type": "recurrent_gemma",
    "hidden_size": 2560,
    "lru_width": 2560,
    "conv1d_width": 4,
    "attention_window_size": 2048,
    "num_attention_heads": 10,
    "num_key_value_heads": 1,
    "head_dim": 256,
    "num_hidden_layers": 26,
    "partial_rotary_factor": 0.5,
    "_block_types": ["recurrent", "recurrent", "attention"],
    "intermediate_size": 15360,
    "vocab_size": 256000,
}


def test_recurrent_gemma_local_attention_and_rg_lru_state():
    spec = spec_from_config(RECURRENTGEMMA_2B)
    assert spec.kind_counts() == {"state": 18, "sliding": 8}
    # 8 local-attention layers: 1 KV head x 256: 2 x 256 x 2 = 1,024 B per token, at most 2,048
    # tokens; 18 RG-LRU layers: float32 state 2,560 x 4 = 10,240 B + conv (4 - 1) x 2,560 x 2 B
    # = 15,360 B -> 25,600 B.
    assert total(spec, 1000) == 8 * 1024 * 1000 + 18 * 25_600
    assert total(spec, 32768) == 8 * 1024 * 2048 + 18 * 25_600 == 17_238_016
    bad = {**RECURRENTGEMMA_2B, "_block_types": ["attention"]}
    with pytest.raises(ValueError, match="_block_types"):
        spec_from_config(bad)


# -- Gemma 3n: no name guess ---------------------------------------------------------------------


def test_gemma3n_activation_sparsity_does_not_refuse():
    # Gemma 3n E2B's text config (NOTES-E.md), with the field a name pattern used to refuse.
    text = {
        "model_type": "gemma3n_text",
        "hidden_size": 2048,
        "num_hidden_layers": 30,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "sliding_window": 512,
        "num_kv_shared_layers": 10,
        "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 6,
        "activation_sparsity_pattern": [0.95] * 10 + [0.0] * 20,
        "altup_num_inputs": 4,
        "laurel_rank": 64,
        "hidden_size_per_layer_input": 256,
        "intermediate_size": 8192,
        "vocab_size": 262400,
        "max_position_embeddings": 32768,
    }
    spec = spec_from_config({"model_type": "gemma3n", "text_config": text})
    # Layers 20..29 share: 20 store, 16 sliding + 4 full, 2 x 2 x 256 x 2 = 2,048 B each.
    assert spec.kind_counts() == {"sliding": 16, "full": 4, "shared": 10}
    assert total(spec, 4096) == 16 * 2048 * 512 + 4 * 2048 * 4096


# -- refused by name, or labelled unverified ----------------------------------------------------


def test_unknown_family_field_is_refused_by_name_and_never_called_harmless():
    cfg = llama_config(model_type="xlstm", qk_dim_factor=0.5)
    with pytest.raises(UnknownFields) as exc:
        spec_from_config(cfg)
    assert "qk_dim_factor" in str(exc.value) and "xlstm" in str(exc.value)
    assert "qk_dim_factor" in exc.value.fields
    spec = spec_from_config(cfg, unverified=True)
    assert "qk_dim_factor" in spec.unverified
    assert spec.assumptions[0].startswith("UNVERIFIED")
    assert not any("do not change the cache" in a for a in spec.assumptions)


def test_a_known_family_with_a_field_it_does_not_know_is_refused():
    # cpmant's prompt_length (learned prompt positions that are cached too) in a Llama config:
    cfg = llama_config(prompt_length=32)
    with pytest.raises(UnknownFields, match="prompt_length"):
        spec_from_config(cfg)


def test_off_value_fields_only_at_their_off_value():
    assert spec_from_config(llama_config(add_cross_attention=False)).num_layers == 4
    with pytest.raises(UnknownFields, match="add_cross_attention"):
        spec_from_config(llama_config(add_cross_attention=True))


def test_cli_unverified_labels_every_output(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(llama_config(model_type="xlstm", qk_dim_factor=0.5)))
    assert main(["kv", "--config", str(path), "--context", "10"]) == 2
    assert "qk_dim_factor" in capsys.readouterr().err
    assert main(["kv", "--config", str(path), "--context", "10", "--unverified"]) == 0
    assert capsys.readouterr().out.startswith("UNVERIFIED estimate")
    assert main(["kv", "--config", str(path), "--context", "10", "--unverified", "--json"]) == 0
    assert "qk_dim_factor" in json.loads(capsys.readouterr().out)["unverified"]


def test_vllm_lines_for_kimi_linear_by_hand():
    # vLLM's arithmetic (HybridAttentionMambaModelConfig, kv_cache_utils), worked by hand:
    # KDA page 73,728 + 2,097,152 = 2,170,880 B; MLA one token 576 x 2 = 1,152 B; the attention
    # block is raised to a multiple of 64 (FlashMLA): 64 x cdiv(2,170,880, 64 x 1,152) = 1,920
    # tokens, page 1,920 x 1,152 = 2,211,840 B. Groups of 7 (the 7 MLA layers): 1 MLA group
    # and 3 KDA groups (20 layers + 1 padding). 20 GiB // (2,211,840 x 7) = 1,387 blocks.
    # A 32,768-token request: cdiv(32,768, 1,920) = 18 MLA blocks + 3 x 2 (prefix caching on,
    # 'align') = 24 -> 1,387 / 24 = 57.79x; tokens int(57.7916 x 32,768) = 1,893,717.
    from kvcalc.engines import vllm

    spec = spec_from_config(load_config_file(DATA / "kimi-linear-48b-a3b-instruct.json"))
    # v0.33.0 on an H100 (none given)
    d = Deployment(spec=spec).but(enable_prefix_caching=True, version="0.33.0")
    p = vllm.predict(d, 20 * 2**30, 32768)
    assert 20 * 2**30 // (2_211_840 * 7) == 1387
    assert p.num_blocks == 1387 and p.block_size == 1920
    assert round(p.max_concurrency, 2) == 57.79
    assert p.blocks_per_request == 24 and p.kv_cache_tokens == 1_893_717


# -- fields whose meaning depends on the family (a review against transformers' code) ----------


def test_bidirectional_attention_is_read_per_family():
    # Gemma3TextConfig: true makes an encoder (EmbeddingGemma) and halves the window;
    # PaliGemma's gemma/gemma2 text model attends its image prefix both ways, same cache.
    enc = llama_config(model_type="gemma3_text", head_dim=64, use_bidirectional_attention=True)
    with pytest.raises(ValueError, match="use_bidirectional_attention"):
        spec_from_config(enc)
    pali = llama_config(
        model_type="gemma2", head_dim=64, use_bidirectional_attention=True, sliding_window=None
    )
    assert total(spec_from_config(pali), 100) == 4 * 2 * 2 * 64 * 2 * 100


def test_gpt_bigcode_heads_come_from_multi_query():
    # GPTBigCodeConfig: multi_query defaults to true, one KV head of n_embd / n_head = 64.
    cfg = {"model_type": "gpt_bigcode", "n_embd": 768, "n_head": 12, "n_layer": 2}
    assert total(spec_from_config(cfg), 10) == 2 * 2 * 1 * 64 * 2 * 10
    with pytest.raises(ValueError, match="multi_query"):
        spec_from_config({**cfg, "multi_query": False, "num_key_value_heads": 1})


def test_jamba_mamba_width_is_expand_times_hidden():
    # JambaConfig: mamba_expand defaults to 2, so the width is 2 x 4,096 = 8,192, not the MLP's
    # intermediate_size. Layer 4 attends (period 8, offset 4); conv 8,192 x 3, SSM 8,192 x 16.
    cfg = {
        "model_type": "jamba",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 8,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "attn_layer_period": 8,
        "attn_layer_offset": 4,
        "mamba_d_state": 16,
        "mamba_d_conv": 4,
        "vocab_size": 1000,
    }
    spec = spec_from_config(cfg)
    assert kv_cache(spec, 1).state_bytes == 7 * (8192 * 3 + 8192 * 16) * 2


def test_mamba_intermediate_size_must_agree_with_expand():
    cfg = load_config_file(DATA / "mamba-2.8b-hf.json")
    with pytest.raises(ValueError, match="intermediate_size"):
        spec_from_config({**cfg, "intermediate_size": 4096})


def test_use_sliding_window_false_turns_listed_windows_off():
    # Qwen2Config: sliding_window is None when use_sliding_window is false, so layers that
    # layer_types calls sliding attend to everything: 4 x 2 x 2 x 64 x 2 B per token.
    cfg = llama_config(
        model_type="qwen2",
        sliding_window=16,
        use_sliding_window=False,
        layer_types=["sliding_attention"] * 4,
    )
    assert total(spec_from_config(cfg), 100) == 4 * 512 * 100


def test_a_layout_only_the_config_class_knows_is_refused_without_layer_types():
    with pytest.raises(ValueError, match="layer_types"):
        spec_from_config(llama_config(model_type="olmo3", sliding_window=4096))


def test_falcon_h1_without_mamba_d_ssm_takes_the_class_default():
    cfg = {k: v for k, v in FALCON_H1_05B.items() if k != "mamba_d_ssm"}
    cfg["mamba_n_heads"] = 16  # 1,024 / 16 = 64 = mamba_d_head
    spec = spec_from_config(cfg)
    assert any("mamba_d_ssm" in a and "1024" in a for a in spec.assumptions)
    assert spec.layers[0].state.ssm_elements == 1024 * 128


def test_head_dim_these_families_derive_must_not_be_contradicted():
    bad = {**MLLAMA_11B, "text_config": {**MLLAMA_11B["text_config"], "head_dim": 64}}
    with pytest.raises(ValueError, match="head_dim"):
        spec_from_config(bad)
    with pytest.raises(ValueError, match="head_dim"):
        spec_from_config({**RECURRENTGEMMA_2B, "head_dim": 128})
    # mllama's default cross-attention layers when the file leaves them out
    text = {k: v for k, v in MLLAMA_11B["text_config"].items() if k != "cross_attention_layers"}
    spec = spec_from_config({**MLLAMA_11B, "text_config": text})
    assert spec.kind_counts() == {"full": 32, "cross": 8}


def test_mpt_attn_config_keys_are_checked():
    cfg = load_config_file(DATA / "mpt-7b-instruct.json")
    cfg["attn_config"] = {**cfg["attn_config"], "sliding_window_size": 2048}
    with pytest.raises(ValueError, match="sliding_window_size"):
        spec_from_config(cfg)
    cfg["attn_config"] = {**cfg["attn_config"], "sliding_window_size": -1, "my_new_key": 1}
    with pytest.raises(ValueError, match="my_new_key"):
        spec_from_config(cfg)


def test_a_class_default_a_family_reader_takes_is_said():
    # LFM2-350M without conv_L_cache: transformers' Lfm2Config takes 3, and the spec says so.
    cfg = {
        k: v for k, v in load_config_file(DATA / "lfm2-350m.json").items() if k != "conv_L_cache"
    }
    spec = spec_from_config(cfg)
    assert any("'conv_L_cache'" in a and "3" in a and "lfm2" in a for a in spec.assumptions)
    assert total(spec, 4096) == 6 * 2048 * 4096 + 10 * 4096
    spec = spec_from_config({k: v for k, v in FALCON_H1_05B.items() if k != "mamba_d_conv"})
    assert any("'mamba_d_conv'" in a for a in spec.assumptions)
