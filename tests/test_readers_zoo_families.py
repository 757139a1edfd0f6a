"""Readers for served families the zoo refused only for want of a reader: GLM-4.5/4.6/4.7
(glm4_moe), GLM-4.7-Flash (glm4_moe_lite), the GLM-4.1V / 4.5V language models (glm4v_text,
glm4v_moe_text), dots.llm1 (dots1), DBRX (dbrx), Command A MoE (cohere2_moe) and AFMoE (afmoe).

Each expectation is worked by hand from the transformers 5.24 config class's defaults (the
fields the zoo builds the model from, ``XConfig().to_dict()``): BF16, 2 B an element, one
sequence; an attention layer keeps 2 (K and V) x kv_heads x head_dim x 2 B per token, a sliding
layer at most its window; an MLA layer keeps one (kv_lora_rank + qk_rope_head_dim) x 2 B latent.
"""

from __future__ import annotations

import pytest

from kvcalc import kv_cache, spec_from_config

transformers = pytest.importorskip("transformers")

N = 8192


def defaults(model_type, **changes):
    cfg = transformers.CONFIG_MAPPING[model_type]().to_dict()
    cfg.update(changes)
    return cfg


def kv_bytes(cfg, n=N):
    r = kv_cache(spec_from_config(cfg), n)
    assert r.state_bytes == 0
    return r.kv_bytes


def test_glm4_moe_defaults_refused_by_head_dim_then_exact_with_it():
    # Glm4MoeConfig: hidden 4096 / 96 heads is not whole (transformers floors it); the class gives
    # no head_dim, so the refusal names it. GLM-4.5's published head_dim 128: 46 layers x
    # 2 x 8 KV heads x 128 x 2 B = 46 x 4,096 = 188,416 B per token.
    with pytest.raises(ValueError, match="head_dim"):
        kv_bytes(defaults("glm4_moe"))
    assert kv_bytes(defaults("glm4_moe", head_dim=128)) == 46 * 2 * 8 * 128 * 2 * N == 188_416 * N


def test_glm4v_moe_text_as_glm4_moe():
    # Glm4vMoeTextConfig has Glm4MoeConfig's 4096 / 96 (no head_dim): refused by name; with
    # GLM-4.5V's head_dim 128: 46 x 2 x 8 x 128 x 2 = 188,416 B per token.
    with pytest.raises(ValueError, match="head_dim"):
        kv_bytes(defaults("glm4v_moe_text"))
    assert kv_bytes(defaults("glm4v_moe_text", head_dim=128)) == 188_416 * N


def test_glm4_moe_lite_mla_latent():
    # Glm4MoeLiteConfig: 47 MLA layers, kv_lora_rank 512 + qk_rope_head_dim 64 = 576 x 2 B =
    # 1,152 B per layer; 47 x 1,152 = 54,144 B per token.
    assert kv_bytes(defaults("glm4_moe_lite")) == 47 * (512 + 64) * 2 * N == 54_144 * N


def test_glm4v_text():
    # Glm4vTextConfig: 40 layers, 2 KV heads, head_dim 4096 / 32 = 128:
    # 40 x 2 x 2 x 128 x 2 = 40,960 B per token.
    assert kv_bytes(defaults("glm4v_text")) == 40 * 2 * 2 * 128 * 2 * N == 40_960 * N


def test_dots1_all_full():
    # Dots1Config: 62 layers, 32 KV heads, head_dim 4608 / 32 = 144; layer_types derived with
    # max_window_layers 62: no layer index >= 62, so all full: 62 x 2 x 32 x 144 x 2 = 1,142,784.
    assert kv_bytes(defaults("dots1")) == 62 * 2 * 32 * 144 * 2 * N == 1_142_784 * N


def test_dots1_without_layer_types_refused_by_name():
    cfg = defaults("dots1")
    del cfg["layer_types"]
    with pytest.raises(ValueError, match="layer_types"):
        kv_bytes(cfg)


def test_dbrx_reads_attn_config_kv_heads():
    # DbrxConfig: d_model 2048 / n_heads 16 = 128, attn_config.kv_n_heads 1, 24 layers:
    # 24 x 2 x 1 x 128 x 2 = 12,288 B per token.
    assert kv_bytes(defaults("dbrx")) == 24 * 2 * 1 * 128 * 2 * N == 12_288 * N
    # DBRX 132B's attn_config: kv_n_heads 8, d_model 6144 / 48 heads = 128, 40 layers:
    # 40 x 2 x 8 x 128 x 2 = 163,840 B per token
    cfg = defaults("dbrx", d_model=6144, n_heads=48, n_layers=40, num_key_value_heads=8)
    cfg["attn_config"] = {"kv_n_heads": 8, "clip_qkv": 8, "rope_theta": 500000}
    assert kv_bytes(cfg) == 163_840 * N
    cfg["num_key_value_heads"] = 4  # disagrees with attn_config.kv_n_heads
    with pytest.raises(ValueError, match="kv_n_heads"):
        kv_bytes(cfg)
    cfg["num_key_value_heads"] = 8
    cfg["attn_config"]["sliding_window"] = 4096  # no such DBRX field: refused by name
    with pytest.raises(ValueError, match="sliding_window"):
        kv_bytes(cfg)


def test_cohere2_moe_windows():
    # Cohere2MoeConfig: 40 layers, 64 KV heads (None -> heads), head_dim 128: 32,768 B per layer;
    # sliding_window_pattern 4: layers 3, 7, ..., 39 full (10), 30 sliding at 4,096.
    # At 8,192 tokens: 10 x 32,768 x 8,192 + 30 x 32,768 x 4,096.
    per = 2 * 64 * 128 * 2
    assert kv_bytes(defaults("cohere2_moe")) == 10 * per * N + 30 * per * 4096


def test_afmoe_windows():
    # AfmoeConfig: 32 layers, 16 KV heads, head_dim 128: 8,192 B per layer;
    # global_attn_every_n_layers 4: 8 full, 24 sliding at 1,024.
    per = 2 * 16 * 128 * 2
    assert kv_bytes(defaults("afmoe")) == 8 * per * N + 24 * per * 1024


@pytest.mark.parametrize("model_type", ["afmoe", "cohere2_moe", "dots1"])
@pytest.mark.parametrize("drop_window", [False, True])
def test_class_rule_layouts_without_layer_types_refused_by_name(model_type, drop_window):
    # Without layer_types the class places its windows by its own rule; without sliding_window
    # too, the class's default window (4,096, 4,096, 1,024) still applies: never read as
    # windowless
    cfg = defaults(model_type)
    del cfg["layer_types"]
    if drop_window:
        del cfg["sliding_window"]
    with pytest.raises(ValueError, match="layer_types"):
        kv_bytes(cfg)


def test_bamba_defaults_every_layer_mamba():
    # BambaConfig: 32 layers, attn_layer_indices None -> every layer a Mamba-2 mixer. hidden 4096,
    # mamba_expand 2 -> 8,192 wide, 128 heads of 8,192 / 128 = 64, d_state 256, 1 group, conv 4:
    # conv (8,192 + 2 x 1 x 256) x (4 - 1) = 26,112 and SSM 128 x 64 x 256 = 2,097,152 elements,
    # x 2 B = 4,246,528 B a layer; x 32 = 135,888,896 B whatever the context, no K/V.
    r = kv_cache(spec_from_config(defaults("bamba")), N)
    assert (r.kv_bytes, r.state_bytes) == (0, 32 * (26_112 + 2_097_152) * 2) == (0, 135_888_896)


def test_bamba_9b_layout():
    # Bamba-9B's layout (ibm-ai-platform/Bamba-9B: attn_layer_indices [9, 18, 27], mamba_d_state
    # 128): 3 attention layers of 8 KV heads x 4096 / 32 = 128: 2 x 8 x 128 x 2 = 4,096 B per token
    # each; 29 Mamba layers of conv (8,192 + 2 x 128) x 3 = 25,344 and SSM 128 x 64 x 128 =
    # 1,048,576 elements: 29 x 1,073,920 x 2 B = 62,287,360 B.
    cfg = defaults("bamba", attn_layer_indices=[9, 18, 27], mamba_d_state=128)
    r = kv_cache(spec_from_config(cfg), N)
    assert (r.kv_bytes, r.state_bytes) == (3 * 4096 * N, 62_287_360)
    cfg["attn_layer_indices"] = [9, 32]  # no layer 32 of 32: refused by name
    with pytest.raises(ValueError, match="attn_layer_indices"):
        kv_cache(spec_from_config(cfg), N)


def test_gpt_neo_defaults_local_layers_keep_every_token():
    # GPTNeoConfig: 24 layers, attention_types [[["global", "local"], 12]], 16 heads (no KV-head
    # field: multi-head), head_dim 2048 / 16 = 128: 2 x 16 x 128 x 2 = 8,192 B per layer. The 12
    # local layers mask all but window_size 256 tokens, but GPTNeoModel's DynamicCache has no
    # sliding layer (no layer_types, no sliding_window) and keeps every token, and vLLM has no
    # GPT-Neo: 24 x 8,192 = 196,608 B per token, uncapped (the zoo: exact).
    spec = spec_from_config(defaults("gpt_neo"))
    assert kv_cache(spec, N).kv_bytes == 24 * 2 * 16 * 128 * 2 * N == 196_608 * N
    assert any("12 local layers attend to the last 256 tokens" in n for n in spec.notes)


# roneneldan/TinyStories-8M's config.json as a training script copies it (tiny_stories_8m_config,
# found through the code search; torch_dtype as published, bfloat16)
TINYSTORIES_8M = {
    "activation_function": "gelu_new",
    "architectures": ["GPTNeoForCausalLM"],
    "attention_dropout": 0,
    "attention_layers": ["global", "local"] * 4,
    "attention_types": [[["global", "local"], 4]],
    "bos_token_id": 50256,
    "embed_dropout": 0,
    "eos_token_id": 50256,
    "gradient_checkpointing": False,
    "hidden_size": 256,
    "initializer_range": 0.02,
    "intermediate_size": None,
    "layer_norm_epsilon": 1e-05,
    "max_position_embeddings": 2048,
    "model_type": "gpt_neo",
    "num_heads": 16,
    "num_layers": 8,
    "resid_dropout": 0,
    "summary_activation": None,
    "summary_first_dropout": 0.1,
    "summary_proj_to_labels": True,
    "summary_type": "cls_index",
    "summary_use_proj": True,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.28.1",
    "use_cache": True,
    "vocab_size": 50257,
    "window_size": 256,
}


def test_gpt_neo_tinystories_8m():
    # 8 layers, 16 heads of 256 / 16 = 16: 2 x 16 x 16 x 2 = 1,024 B per layer, 8,192 B per token
    assert kv_bytes(dict(TINYSTORIES_8M)) == 8 * 2 * 16 * 16 * 2 * N == 8_192 * N


@pytest.mark.parametrize(
    "types",
    [
        [[["global", "local"], 3]],  # 6 layers, not 8
        [[["global", "sparse"], 4]],  # no such layer type
        [["global", 8]],  # the names not in a list
    ],
)
def test_gpt_neo_attention_types_refused_by_name(types):
    cfg = dict(TINYSTORIES_8M, attention_types=types)
    with pytest.raises(ValueError, match="attention_types"):
        kv_bytes(cfg)


def _small(model_type, **fields):
    cfg = transformers.CONFIG_MAPPING[model_type](**fields).to_dict()
    cfg["model_type"] = model_type
    return cfg


# Layouts the class defaults leave unchecked (the zoo: refused by head_dim, transformers cannot
# build or run, or every layer alike), checked layer by layer against transformers' own cache on the
# meta device: head_dim given, the MoE filled in, windows and attention layers placed.
ORACLE = {
    "glm4_moe": dict(head_dim=128, num_hidden_layers=3),
    "glm4v_moe_text": dict(head_dim=128, num_hidden_layers=3),
    "glm4_moe_lite": dict(num_hidden_layers=3),
    "dots1": dict(
        n_routed_experts=8,
        num_experts_per_tok=2,
        n_shared_experts=1,
        num_hidden_layers=4,
        first_k_dense_replace=1,
        max_window_layers=2,
        sliding_window=16,
    ),
    "cohere2_moe": dict(
        num_hidden_layers=6,
        sliding_window=16,
        first_k_dense_replace=2,
        prefix_dense_sliding_window_pattern=2,
        sliding_window_pattern=3,
    ),
    "afmoe": dict(num_hidden_layers=6, sliding_window=16, global_attn_every_n_layers=3),
    "bamba": dict(attn_layer_indices=[1], num_hidden_layers=3),
    # the class's rotary leaves the M-RoPE sections out, and the meta forward pass needs them
    # (16 + 24 + 24 = 64 = half of head_dim 128): a rotary setting, the cache is the same
    "glm4v_text": dict(
        num_hidden_layers=3,
        rope_parameters={
            "rope_theta": 10000.0,
            "rope_type": "default",
            "mrope_section": [16, 24, 24],
        },
    ),
}


@pytest.mark.parametrize("model_type", sorted(ORACLE))
def test_layouts_agree_with_transformers(model_type):
    from kvcalc.measure.verify import verify

    r = verify(_small(model_type, **ORACLE[model_type]), context=64)
    assert r.checkable, r.reason
    assert r.agrees, r.table()


# mlx-community/dbrx-instruct-4bit's config.json as a public DBRX test reproduces it (the
# PretrainedConfig clutter transformers 4.39 wrote into attn_config and ffn_config, abridged
# there; found through the code search): kv_n_heads 8 under attn_config, d_model 6144, 48 heads
DBRX_INSTRUCT_4BIT = {
    "architectures": ["DbrxForCausalLM"],
    "attn_config": {
        "return_dict": True,
        "output_hidden_states": False,
        "torch_dtype": None,
        "tie_word_embeddings": True,
        "max_length": 20,
        "temperature": 1.0,
        "top_k": 50,
        "top_p": 1.0,
        "id2label": {"0": "LABEL_0", "1": "LABEL_1"},
        "model_type": "",
        "attn_pdrop": 0,
        "clip_qkv": 8,
        "kv_n_heads": 8,
        "rope_theta": 500000,
    },
    "d_model": 6144,
    "emb_pdrop": 0.0,
    "ffn_config": {
        "return_dict": True,
        "tie_word_embeddings": True,
        "temperature": 1.0,
        "model_type": "",
        "ffn_act_fn": {"name": "silu"},
        "ffn_hidden_size": 10752,
        "moe_num_experts": 16,
        "moe_top_k": 4,
        "moe_jitter_eps": 0,
        "moe_loss_weight": 0.05,
        "moe_normalize_expert_weights": 1,
        "uniform_expert_assignment": False,
    },
    "initializer_range": 0.02,
    "max_seq_len": 32768,
    "model_type": "dbrx",
    "n_heads": 48,
    "n_layers": 40,
    "output_router_logits": False,
    "quantization": {"group_size": 64, "bits": 4},
    "resid_pdrop": 0.0,
    "router_aux_loss_coef": 0.05,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.39.2",
    "use_cache": True,
    "vocab_size": 100352,
}


def test_dbrx_instruct_published_fields():
    # 40 layers x 2 x 8 KV heads x 6144 / 48 = 128 x 2 B = 40 x 4,096 = 163,840 B per token;
    # the sub-configs' base fields (tie_word_embeddings, generation settings) change nothing
    import copy

    assert kv_bytes(copy.deepcopy(DBRX_INSTRUCT_4BIT)) == 40 * 2 * 8 * 128 * 2 * N == 163_840 * N
