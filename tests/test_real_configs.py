"""Real published config.json files (tests/data/configs, sources and hand derivations in the
NOTES-*.md files beside them), each with its cache worked out by hand from the published
fields and the engine's allocation rule, never by calling kvcalc.

Conventions of every expectation below (BF16 K/V, 2 B per element; one sequence):
- an attention layer stores kv_heads x (k_dim + v_dim) x 2 B per token; a sliding or chunked layer
  holds at most its window or chunk; an MLA layer stores one (kv_lora_rank + qk_rope_head_dim)
  latent; DeepSeek sparse attention adds vLLM's fp8 indexer key: index_head_dim + index_head_dim //
  128 x 4 = 132 B per token and layer;
- a recurrent layer holds a fixed state; its convolution keeps conv_kernel - 1 inputs (vLLM);
- with tensor parallelism a GPU holds max(1, kv_heads // tp) heads (an MLA latent is replicated)
  and 1/tp of a recurrent state.
"""

import json
from pathlib import Path

import pytest

from kvcalc import kv_cache, load_config_file, registry, spec_from_config

DATA = Path(__file__).parent / "data" / "configs"
N1, N2 = 4096, 131072


def full(count, per_token):
    return lambda n: count * per_token * n


def capped(count, per_token, cap):
    return lambda n: count * per_token * min(n, cap)


def state(count, per_layer):
    return lambda n: count * per_layer


# file -> (terms at TP 1, (tp, terms at that TP)), each term a function of the context n.
CASES = {
    # text_config: 48 layers; no_rope_layers [] -> transformers' default interval 4, so layers
    # 3, 7, ..., 47 are global (12) and the other 36 chunked at attention_chunk_size 8192.
    # 8 KV heads x (128 + 128) x 2 B = 4,096 B per layer; TP 8 leaves 1 head: 512 B.
    "llama-4-scout-17b-16e.json": (
        [full(12, 4096), capped(36, 4096, 8192)],
        (8, [full(12, 512), capped(36, 512, 8192)]),
    ),
    # Gemma 4 26B-A4B: layer_types 5 sliding (1,024) : 1 full, 30 layers -> 25 + 5. Sliding:
    # 8 KV heads x 256: 8 x 512 x 2 = 8,192 B. Full: global_head_dim 512 and, because
    # attention_k_eq_v is true, num_global_key_value_heads 2: 2 x 1,024 x 2 = 4,096 B.
    # TP 4: sliding 8 // 4 = 2 heads (2,048 B); full 2 < 4 heads -> replicated 1 head (2,048 B).
    "gemma-4-26b-a4b.json": (
        [capped(25, 8192, 1024), full(5, 4096)],
        (4, [capped(25, 2048, 1024), full(5, 2048)]),
    ),
    # Qwen2.5-VL-7B: 28 layers, 4 KV heads x 128: 2 x 4 x 128 x 2 = 2,048 B; its sliding_window
    # 32,768 is off (use_sliding_window false). TP 4: 1 head, 512 B.
    "qwen2.5-vl-7b-instruct.json": ([full(28, 2048)], (4, [full(28, 512)])),
    # MiniMax-M1: attn_type_list has 1 (softmax) at 7, 15, ..., 79: 10 layers of 8 KV heads x 128
    # = 4,096 B; 70 lightning-attention layers keep 64 heads x 128 x 128 = 1,048,576 elements
    # (2,097,152 B). TP 8: 1 KV head (512 B); 8 heads of state (262,144 B).
    "minimax-m1.json": (
        [full(10, 4096), state(70, 2_097_152)],
        (8, [full(10, 512), state(70, 262_144)]),
    ),
    # Nemotron-H 56B: hybrid_override_pattern has 10 '*' (attention), 54 'M' (Mamba-2), 54 '-'.
    # Attention: 8 KV heads x attention_head_dim 128: 4,096 B. Mamba-2: inner 256 x 64 = 16,384;
    # conv (16,384 + 2 x 8 x 256) x 3 = 61,440; SSM 256 x 64 x 256 = 4,194,304 -> 4,255,744
    # elements = 8,511,488 B. TP 8: 512 B; (7,680 + 524,288) x 2 = 1,063,936 B.
    "nemotron-h-56b.json": (
        [full(10, 4096), state(54, 8_511_488)],
        (8, [full(10, 512), state(54, 1_063_936)]),
    ),
    # Nemotron 3 Nano 30B-A3B: 6 '*', 23 'M', 23 'E'. Attention 2 KV heads x 128: 1,024 B.
    # Mamba-2: inner 64 x 64 = 4,096; conv (4,096 + 2 x 8 x 128) x 3 = 18,432 x 2 B = 36,864 B;
    # SSM 64 x 64 x 128 = 524,288 in FP32 (mamba_ssm_cache_dtype: float32, which vLLM and
    # transformers' NemotronHConfig keep it in) x 4 B = 2,097,152 B -> 2,134,016 B (expand x
    # hidden would be wrong). TP 2: 1 head (512 B); 9,216 x 2 + 262,144 x 4 = 1,067,008 B.
    "nemotron-3-nano-30b-a3b.json": (
        [full(6, 1024), state(23, 2_134_016)],
        (2, [full(6, 512), state(23, 1_067_008)]),
    ),
    # Nemotron 3 Super: 8 '*', 40 'M'. Attention 1,024 B. Mamba-2: inner 128 x 64 = 8,192; conv
    # (8,192 + 2,048) x 3 = 30,720 x 2 B = 61,440 B; SSM 128 x 64 x 128 = 1,048,576 in FP32
    # (mamba_ssm_cache_dtype) x 4 B = 4,194,304 B -> 4,255,744 B. TP 2: 15,360 x 2 + 524,288 x 4
    # = 2,127,872 B.
    "nemotron-3-super-120b-a12b-fp8.json": (
        [full(8, 1024), state(40, 4_255_744)],
        (2, [full(8, 512), state(40, 2_127_872)]),
    ),
    # Nemotron-NAS Super 49B: block_configs, 80 layers: 31 attention no-ops, 49 attention layers
    # with n_heads_in_group 8 -> 64 / 8 = 8 KV heads x 128: 4,096 B (num_key_value_heads is
    # null: 64 heads on 80 layers would be 13x too much). TP 8: 512 B.
    "nemotron-nas-super-49b.json": ([full(49, 4096)], (8, [full(49, 512)])),
    # Nemotron-NAS Ultra 253B: 162 layers, 64 attention (128 / 16 = 8 KV heads x 128), 98 no-op.
    "nemotron-nas-ultra-253b.json": ([full(64, 4096)], (8, [full(64, 512)])),
    # Mamba 2.8B: no attention. d_inner = intermediate_size 5,120; conv 5,120 x 3 = 15,360;
    # SSM 5,120 x state_size 16 = 81,920 -> 97,280 elements = 194,560 B per layer, 64 layers.
    "mamba-2.8b-hf.json": ([state(64, 194_560)], (2, [state(64, 97_280)])),
    # DeepSeek-V3.2: 61 MLA layers of (512 + 64) x 2 = 1,152 B plus the indexer key 132 B.
    # TP 8: the latent and the single indexer head are replicated.
    "deepseek-v3.2.json": ([full(61, 1284)], (8, [full(61, 1284)])),
    # GLM-5 (glm_moe_dsa): 78 MLA layers, all with an indexer: 78 x 1,284.
    "glm-5.json": ([full(78, 1284)], (8, [full(78, 1284)])),
    # GLM-5.2: indexer_types lists 21 'full' (own indexer) and 57 'shared' (no indexer cache).
    "glm-5.2.json": ([full(21, 1284), full(57, 1152)], (8, [full(21, 1284), full(57, 1152)])),
    # Kimi-K2: DeepSeek-V3 geometry, 61 MLA layers x 1,152 B (num_key_value_heads 64 is moot).
    "kimi-k2-instruct.json": ([full(61, 1152)], (8, [full(61, 1152)])),
    # ChatGLM3-6B: num_layers 28; multi_query_attention with multi_query_group_num 2 KV heads of
    # kv_channels 128: 2 x 2 x 128 x 2 = 1,024 B. TP 2: 512 B.
    "chatglm3-6b.json": ([full(28, 1024)], (2, [full(28, 512)])),
    # MPT-7B-Instruct: n_layers 32, n_heads 32, d_model 4,096 -> head 128, multihead attention:
    # 2 x 32 x 128 x 2 = 16,384 B. TP 4: 8 heads, 4,096 B.
    "mpt-7b-instruct.json": ([full(32, 16384)], (4, [full(32, 4096)])),
    # Mixtral 8x7B: 32 layers, 8 KV heads x 128 (sliding_window null): 4,096 B.
    "mixtral-8x7b-v0.1.json": ([full(32, 4096)], (8, [full(32, 512)])),
    # Llama 3.1 8B: the seed documents' 131,072 B per token.
    "llama-3.1-8b.json": ([full(32, 4096)], (2, [full(32, 2048)])),
    # gpt-oss-20b: layer_types alternate sliding (128) and full, 8 KV heads x 64: 2,048 B.
    "gpt-oss-20b.json": (
        [capped(12, 2048, 128), full(12, 2048)],
        (8, [capped(12, 256, 128), full(12, 256)]),
    ),
    # Gemma 4 E2B: 35 layers, num_kv_shared_layers 20 -> layers 15..34 store nothing (they read
    # layer 13, the last sliding, or 14, the last full, of the first 15). Stored: 12 sliding
    # (window 512) of 1 KV head x 256: 2 x 256 x 2 = 1,024 B; 3 full of 1 KV head x 512
    # (attention_k_eq_v false: global_head_dim only): 2,048 B. TP 2: 1 head stays 1 (replicated).
    "gemma-4-e2b-it.json": (
        [capped(12, 1024, 512), full(3, 2048)],
        (2, [capped(12, 1024, 512), full(3, 2048)]),
    ),
    # Mistral-7B-v0.1: 32 layers, all sliding at 4,096, 8 KV heads x 128: 4,096 B.
    "mistral-7b-v0.1.json": ([capped(32, 4096, 4096)], (8, [capped(32, 512, 4096)])),
    # Qwen3.5-35B-A3B (text_config): layer_types 10 full (2 KV heads x 256: 2,048 B) and 30 linear
    # attention (Gated DeltaNet: conv (2 x 16 x 128 + 32 x 128) x 3 = 24,576 x 2 B = 49,152 B;
    # state 32 x 128 x 128 = 524,288 in FP32, text_config.mamba_ssm_dtype, as vLLM keeps it
    # (v0.17.0 on) x 4 B = 2,097,152 B -> 2,146,304 B; issue 38: it was counted in BF16, half).
    # TP 2: 1,024 B; 12,288 x 2 + 262,144 x 4 = 1,073,152 B.
    "qwen3.5-35b-a3b.json": (
        [full(10, 2048), state(30, 2_146_304)],
        (2, [full(10, 1024), state(30, 1_073_152)]),
    ),
    # OPT-125m: 12 layers, 12 heads of 768 / 12 = 64, multi-head: 2 x 12 x 64 x 2 = 3,072 B
    # (ffn_dim instead of intermediate_size only matters to the weights). TP 4: 768 B.
    "opt-125m.json": ([full(12, 3072)], (4, [full(12, 768)])),
    # Mamba-2 (Codestral conversion): 64 layers, no attention. 128 heads x 64 = 8,192 inner;
    # conv (8,192 + 2 x 8 x 128) x 3 = 30,720; SSM 128 x 64 x 128 = 1,048,576 -> 2,158,592 B.
    "mamba2-codestral-7b-molbap-code2.json": ([state(64, 2_158_592)], (2, [state(64, 1_079_296)])),
    # Qwen3-Next-80B-A3B: full_attention_interval 4 -> 12 attention layers of 2 KV heads x 256
    # (2,048 B); 36 Gated DeltaNet layers: conv (2 x 16 x 128 + 32 x 128) x 3 = 24,576, state
    # 32 x 128 x 128 = 524,288 -> 1,097,728 B. TP 2: 1,024 B; 548,864 B.
    "qwen3-next-80b-a3b-thinking.json": (
        [full(12, 2048), state(36, 1_097_728)],
        (2, [full(12, 1024), state(36, 548_864)]),
    ),
    # -- families with structure in fields of their own (issue 21; vLLM's model files, worked in
    # NOTES-E.md) --
    # LFM2-350M, the older spelling: full_attn_idxs [2, 5, 8, 10, 12, 14] attend (head_dim
    # 1,024 / 16 = 64, 8 KV heads: 2 x 8 x 64 x 2 = 2,048 B); the other 10 layers are short
    # convolutions: vLLM's short_conv_state_shape keeps conv_L_cache - 1 = 2 inputs of
    # conv_dim 1,024 in BF16 = 4,096 B. TP 2: 4 KV heads (1,024 B); 512 channels (2,048 B).
    "lfm2-350m.json": ([full(6, 2048), state(10, 4096)], (2, [full(6, 1024), state(10, 2048)])),
    # Kimi-Linear-48B-A3B: linear_attn_config.kda_layers (1-based) name 20 KDA layers, the other
    # 7 (0-based 3, 7, 11, 15, 19, 23, 26) are MLA: (512 + 64) x 2 = 1,152 B. KDA
    # (kda_state_shape / kda_state_dtype): conv 3 x (32 x 128) channels x (4 - 1) in BF16 =
    # 73,728 B; recurrent 32 x 128 x 128 in float32 = 2,097,152 B -> 2,170,880 B. TP 2: the
    # latent is replicated; 16 heads: 36,864 + 1,048,576 = 1,085,440 B.
    "kimi-linear-48b-a3b-instruct.json": (
        [full(7, 1152), state(20, 2_170_880)],
        (2, [full(7, 1152), state(20, 1_085_440)]),
    ),
    # MiniCPM3-4B: MLA-style fields, but vLLM's minicpm3.py caches per head: 40 heads of K
    # 64 + 32 = 96 and V padded to 96: 2 x 40 x 96 x 2 = 15,360 B on each of 62 layers.
    # TP 2: 20 heads, 7,680 B.
    "minicpm3-4b.json": ([full(62, 15360)], (2, [full(62, 7680)])),
    # MiMo-V2-Flash (as published in a public repository, NOTES-E.md): hybrid_layer_pattern 0 =
    # full at 9 layers (4 KV heads x (K 192 + V 128) x 2 = 2,560 B), 1 = sliding at 39 (vLLM's
    # mimo_v2_flash.py: swa_num_key_value_heads 8 -> 5,120 B, window sliding_window_size 128).
    # TP 4: 1 and 2 heads: 640 B and 1,280 B.
    "mimo-v2-flash.json": (
        [full(9, 2560), capped(39, 5120, 128)],
        (4, [full(9, 640), capped(39, 1280, 128)]),
    ),
    # RWKV-4 430M: no attention; transformers' RwkvModel keeps 5 vectors of hidden_size 1,024 per
    # layer: 2 token-shift inputs in the model dtype (2 x 1,024 x 2 B) and 3 float32 WKV
    # accumulators (3 x 1,024 x 4 B) = 16,384 B, on 24 layers. Split over 2 GPUs: 8,192 B.
    "rwkv-4-430m-pile.json": ([state(24, 16384)], (2, [state(24, 8192)])),
}


def total(terms, n):
    return sum(t(n) for t in terms)


def measured(spec, n, tp=1):
    r = kv_cache(spec, n, tp=tp)
    return r.kv_bytes + r.state_bytes


def test_every_config_in_the_corpus_has_a_case_and_a_source():
    files = {p.name for p in DATA.glob("*.json")}
    assert files == set(CASES)
    notes = "".join(p.read_text() for p in DATA.glob("NOTES-*.md"))
    for name in files:
        assert name in notes, f"{name} has no source in the NOTES files"


@pytest.mark.parametrize("name", sorted(CASES))
def test_real_config_bytes_at_two_contexts_and_tp(name):
    spec = spec_from_config(load_config_file(DATA / name))
    terms, (tp, tp_terms) = CASES[name]
    for n in (N1, N2):
        assert measured(spec, n) == total(terms, n), n
    assert measured(spec, N2, tp) == total(tp_terms, N2)


def test_shared_kv_layers_store_nothing_but_are_read():
    # Gemma 4 E2B: the 20 shared layers add no bytes, but a decode step reads their source's
    # cache again: 16 more reads of layer 13 (sliding) and 4 of layer 14 (full).
    from kvcalc import step_time
    from kvcalc.cache.deployment import Deployment
    from kvcalc.cache.weight_bytes import weights_given

    spec = spec_from_config(load_config_file(DATA / "gemma-4-e2b-it.json"))
    assert sorted(lay.source for lay in spec.layers if lay.kind == "shared") == [13] * 16 + [14] * 4
    n = 4096
    s = step_time(
        Deployment(spec=spec, weights=weights_given(0)), context=n, batch=1, bandwidth_gbs=1000
    )
    assert s.kv_read_bytes == (12 + 16) * 1024 * 512 + (3 + 4) * 2048 * n


def test_mistral_7b_v01_from_the_registry():
    # models.yaml carries mistralai/Mistral-7B-v0.1's published fields: 32 layers, 8 KV heads x
    # 128, sliding_window 4,096 on every layer: 4,096 B per token, at most 4,096 tokens.
    spec = registry().model("mistral-7b-v0.1").spec
    assert measured(spec, N1) == 32 * 4096 * 4096
    assert measured(spec, N2) == 32 * 4096 * 4096


@pytest.mark.parametrize(
    "name,what",
    [
        ("nemotron-nas-super-49b.json", "none"),
        ("nemotron-h-56b.json", "none"),
        ("gemma-4-26b-a4b.json", "sliding"),
    ],
)
def test_no_config_is_read_as_all_full(name, what):
    spec = spec_from_config(load_config_file(DATA / name))
    assert what in spec.kind_counts()


def test_unknown_layout_field_is_refused_by_name():
    cfg = json.loads((DATA / "llama-3.1-8b.json").read_text())
    cfg["foo_pattern"] = "AABA"
    with pytest.raises(ValueError, match="not understood.*'foo_pattern'"):
        spec_from_config(cfg)
    cfg = json.loads((DATA / "nemotron-h-56b.json").read_text())
    cfg["hybrid_override_pattern"] = cfg["hybrid_override_pattern"].replace("*", "X", 1)
    with pytest.raises(ValueError, match="hybrid_override_pattern"):
        spec_from_config(cfg)


def test_glm_indexer_frequency_without_types_is_refused():
    cfg = json.loads((DATA / "glm-5.2.json").read_text())
    del cfg["indexer_types"]
    with pytest.raises(ValueError, match="index_topk_freq"):
        spec_from_config(cfg)


def test_cache_needs_no_parameter_fields():
    # Hunyuan-A13B (Tencent's remote code): the cache is still given, the weights are refused
    # with a reason. (Nemotron-NAS's, MPT-7B's and ChatGLM3's weights are now counted:
    # tests/test_params_nas.py; MPT equal to transformers' own model,
    # tests/test_params_zoo_real.py; ChatGLM3 by hand from vLLM's chatglm.py, which reads
    # padded_vocab_size, tests/test_params_families.py.)
    for name in ("round6/hunyuan-a13b.json",):
        spec = spec_from_config(load_config_file(DATA / name))
        assert spec.params is None and spec.params_error
        assert measured(spec, 16) > 0


def test_assumptions_are_reported():
    spec = spec_from_config(load_config_file(DATA / "nemotron-3-nano-30b-a3b.json"))
    text = " ".join(spec.assumptions)
    assert "conv_kernel - 1" in text and "(SSM) state in FP32" in text
    spec = spec_from_config(load_config_file(DATA / "mamba-2.8b-hf.json"))
    assert not any("do not change the cache" in a for a in spec.assumptions)


def test_mla_needs_no_head_dim_when_hidden_is_not_whole_heads():
    # Issue 38: Kimi K3-style configs give no head_dim and a hidden_size the heads do not divide;
    # MLA caches kv_lora_rank + qk_rope_head_dim per token and layer and needs neither. Kimi K2's
    # own file with hidden 7,000 (not a multiple of 64 heads): 61 x (512 + 64) x 2 B = 70,272 B,
    # as with its real hidden size; a plain decoder with the same hidden is still refused.
    cfg = load_config_file(DATA / "kimi-k2-instruct.json")
    assert 7000 % cfg["num_attention_heads"] and "head_dim" not in cfg
    for hidden in (cfg["hidden_size"], 7000):
        spec = spec_from_config({**cfg, "hidden_size": hidden})
        assert kv_cache(spec, 1).kv_bytes_per_token_nominal == 61 * (512 + 64) * 2
    llama = {
        k: v for k, v in load_config_file(DATA / "llama-3.1-8b.json").items() if k != "head_dim"
    }
    with pytest.raises(ValueError, match="the config must give 'head_dim'"):
        spec_from_config({**llama, "hidden_size": 4001})  # 4,001 / 32 heads is not whole
