"""Real config.json files of checkpoints served in 2025-2026, round 6 (issue 38, item 5).

The files are in tests/data/configs/round6 (a folder of their own: tests/test_real_configs.py,
tests/test_verify.py and tests/test_layer_kinds.py glob tests/data/configs/*.json and require
every file there to load and to have a case of theirs); sources, byte checks and dates are in
tests/data/configs/NOTES-F.md. Every expectation is worked by hand from the published fields and
the architecture's code (transformers 5.24 in .venv, cited per case; vLLM where it allocates
differently), never by calling kvcalc.

Conventions, as in tests/test_real_configs.py (BF16 K/V, 2 B per element; one sequence):
- an attention layer stores kv_heads x (k_dim + v_dim) x 2 B per token; a sliding layer holds
  at most its window; an MLA layer stores one (kv_lora_rank + qk_rope_head_dim) latent;
- a recurrent layer holds a fixed state; its convolution keeps conv_kernel - 1 inputs (vLLM);
  an SSM state declared float32 (mamba_ssm_dtype, mamba_ssm_cache_dtype) is 4 B an element;
- with tensor parallelism a GPU holds max(1, kv_heads // tp) heads (an MLA latent is replicated)
  and 1/tp of a recurrent state;
- MTP / next-n-predict modules add nothing unless speculative decoding is asked for
  (tests/test_speculative.py); quantization_config blocks of weights change no cache byte.
"""

import pytest
from conftest import ROOT

from kvcalc import kv_cache, load_config_file, spec_from_config

DATA = ROOT / "tests" / "data" / "configs" / "round6"
N1, N2 = 4096, 131072


def full(count, per_token):
    return lambda n: count * per_token * n


def capped(count, per_token, cap):
    return lambda n: count * per_token * min(n, cap)


def state(count, per_layer):
    return lambda n: count * per_layer


# file -> (terms at TP 1, (tp, terms at that TP)), each term a function of the context n.
CASES = {
    # -- sliding windows --
    # gpt-oss-120b (gpt_oss; mxfp4 weights): layer_types alternate sliding (sliding_window 128)
    # and full over 36 layers: 18 + 18; 8 KV heads x head_dim 64: 2 x 8 x 64 x 2 = 2,048 B
    # (transformers/models/gpt_oss/modeling_gpt_oss.py: k_proj, v_proj num_key_value_heads x
    # head_dim). TP 8: 1 head, 256 B.
    "gpt-oss-120b.json": (
        [capped(18, 2048, 128), full(18, 2048)],
        (8, [capped(18, 256, 128), full(18, 256)]),
    ),
    # EXAONE 4.0 32B (exaone4): layer_types / sliding_window_pattern "LLLG" over 64 layers: 48
    # sliding (sliding_window 4,096) and 16 full; 8 KV heads x head_dim 128: 4,096 B
    # (modeling_exaone4.py: Exaone4Attention, sliding_window only on "sliding_attention").
    # TP 8: 1 head, 512 B.
    "exaone-4.0-32b.json": (
        [capped(48, 4096, 4096), full(16, 4096)],
        (8, [capped(48, 512, 4096), full(16, 512)]),
    ),
    # EXAONE 4.5 33B (exaone4_5 wrapper, text_config exaone4_5_text): the 4.0 32B text geometry
    # (48 sliding at 4,096 + 16 full, 8 KV x 128 = 4,096 B). num_nextn_predict_layers 1,
    # _num_mtp_layers 1, mtp_share_layers, mtp_loss_scaling_factor are the MTP head: no cache
    # without speculation. TP 8: 512 B.
    "exaone-4.5-33b.json": (
        [capped(48, 4096, 4096), full(16, 4096)],
        (8, [capped(48, 512, 4096), full(16, 512)]),
    ),
    # Olmo 3.1 32B Instruct (olmo3): layer_types 48 sliding (4,096) + 16 full; no head_dim, so
    # 5,120 / 40 = 128; 8 KV heads: 4,096 B (modeling_olmo3.py). TP 8: 512 B.
    "olmo-3.1-32b-instruct.json": (
        [capped(48, 4096, 4096), full(16, 4096)],
        (8, [capped(48, 512, 4096), full(16, 512)]),
    ),
    # Laguna XS.2 FP8 (laguna; compressed-tensors FP8 weights): 10 full + 30 sliding (512);
    # num_attention_heads_per_layer (48 / 64) changes only the query heads, k_proj / v_proj are
    # num_key_value_heads 8 x head_dim 128 everywhere (transformers 5.24 modeling_laguna.py,
    # LagunaAttention; vLLM laguna.py gives every layer's Attention the same num_kv_heads):
    # 2 x 8 x 128 x 2 B = 4,096 B. At 4,096: 10 x 4,096 x 4,096 + 30 x 4,096 x 512 =
    # 230,686,720 B. TP 8: 1 head, 512 B.
    "laguna-xs.2-fp8.json": (
        [full(10, 4096), capped(30, 4096, 512)],
        (8, [full(10, 512), capped(30, 512, 512)]),
    ),
    # Gemma 4 31B IT NVFP4 (gemma4 wrapper; modelopt NVFP4 weights): text_config layer_types 50
    # sliding (sliding_window 1,024) of 16 KV heads x head_dim 256: 2 x 16 x 256 x 2 = 16,384 B;
    # 10 full of global_head_dim 512 with, as attention_k_eq_v is true,
    # num_global_key_value_heads 4: 2 x 4 x 512 x 2 = 8,192 B (as Gemma 4 26B in
    # test_real_configs.py). TP 4: sliding 4 heads (4,096 B), full 1 head (2,048 B).
    "gemma-4-31b-it-nvfp4.json": (
        [capped(50, 16384, 1024), full(10, 8192)],
        (4, [capped(50, 4096, 1024), full(10, 2048)]),
    ),
    # -- plain full attention, new families and wrappers --
    # Qwen3-VL-30B-A3B-Instruct (qwen3_vl_moe wrapper): text_config 48 layers, 4 KV heads x 128:
    # 2,048 B; no sliding field. TP 4: 1 head, 512 B.
    "qwen3-vl-30b-a3b-instruct.json": ([full(48, 2048)], (4, [full(48, 512)])),
    # Devstral Small 2 24B (mistral3 wrapper, text_config ministral3; FP8 weights): 40 layers,
    # 8 KV heads x head_dim 128 = 4,096 B, sliding_window null. TP 4: 2 heads, 1,024 B.
    "devstral-small-2-24b-instruct.json": ([full(40, 4096)], (4, [full(40, 1024)])),
    # Phi-4 (phi3): 40 layers, 10 KV heads x 5,120 / 40 = 128: 2 x 10 x 128 x 2 = 5,120 B;
    # sliding_window null. TP 2: 5 heads, 2,560 B.
    "phi-4.json": ([full(40, 5120)], (2, [full(40, 2560)])),
    # SmolLM3-3B (smollm3): 36 layers, 4 KV heads x 2,048 / 16 = 128: 2,048 B; no_rope_layers
    # only drops RoPE on every 4th layer; use_sliding_window false. TP 4: 1 head, 512 B.
    "smollm3-3b.json": ([full(36, 2048)], (4, [full(36, 512)])),
    # MiMo-7B-Base (mimo): 36 layers, 8 KV heads x head_dim 128 = 4,096 B; use_sliding_window
    # false; num_nextn_predict_layers 1 is the MTP head (vLLM mimo_mtp.py, drafter only).
    # TP 4: 2 heads, 1,024 B.
    "mimo-7b-base.json": ([full(36, 4096)], (4, [full(36, 1024)])),
    # MiniMax-M2.7 (minimax_m2; FP8 weights): attn_type_list all 1 (softmax) on 62 layers,
    # 8 KV heads x head_dim 128 = 4,096 B. use_mtp, num_mtp_modules 3, mtp_transformer_layers 1
    # are the MTP drafter (no cache without speculation). TP 8: 1 head, 512 B.
    "minimax-m2.7.json": ([full(62, 4096)], (8, [full(62, 512)])),
    # EXAONE 4.0 1.2B W4A16 (exaone4; compressed-tensors INT4 weights, kv_cache_scheme null):
    # 30 full layers, 8 KV heads x head_dim 64: 2 x 8 x 64 x 2 = 2,048 B. TP 2: 1,024 B.
    "exaone-4.0-1.2b-w4a16.json": ([full(30, 2048)], (2, [full(30, 1024)])),
    # Hunyuan-A13B (hunyuan, Tencent's remote code): use_cla false, so every layer computes
    # and caches its own K/V (modeling_hunyuan.py: attention_type 'self' on every layer when
    # use_cla is off). 32 layers, 8 KV heads x attention_head_dim 128 (= 4,096 / 32, as the
    # remote code derives it): 2 x 8 x 128 x 2 B = 4,096 B a token and layer; 536,870,912 B at
    # 4,096. TP 8: 1 head, 512 B.
    "hunyuan-a13b.json": ([full(32, 4096)], (8, [full(32, 512)])),
    # -- MLA --
    # DeepSeek-V3 (deepseek_v3; FP8 block weights): 61 MLA layers, (512 + 64) x 2 = 1,152 B;
    # num_nextn_predict_layers 1 is the MTP drafter. TP 8: the latent is replicated.
    "deepseek-v3.json": ([full(61, 1152)], (8, [full(61, 1152)])),
    # -- hybrids with a fixed state --
    # Kimi K3 (kimi_k3 wrapper, text_config kimi_linear; MXFP4 experts): linear_attn_config
    # (1-based) full_attn_layers 4, 8, ..., 92 and 93: 24 MLA layers of (512 + 64) x 2 =
    # 1,152 B; kda_layers: the other 69. KDA (vLLM kimi_linear kda_state_shape, as Kimi-Linear
    # in test_real_configs.py): num_heads 96 x head_dim 128 = 12,288 channels for each of q, k, v
    # convolutions x (short_conv_kernel_size 4 - 1) in BF16 = 3 x 12,288 x 3 x 2 = 221,184 B;
    # recurrent 96 x 128 x 128 in float32 = 6,291,456 B -> 6,512,640 B. TP 8: latent
    # replicated; 12 heads: 27,648 + 786,432 = 814,080 B. At 4,096 tokens: 24 x 1,152 x 4,096
    # = 113,246,208 B of latents + 69 x 6,512,640 = 449,372,160 B of state. The K3 fields
    # change no cache (vLLM's K3 kimi_linear.py sizes the KDA state from num_heads, head_dim and
    # short_conv_kernel_size only): gate_lower_bound clamps the forget gate, use_full_rank_gate
    # picks g_proj over g_a_proj / g_b_proj, mla_use_output_gate adds a g_proj, the latent MoE
    # (routed_expert_hidden_size, latent_moe_use_norm) and SiTU (activation_situ_*) are weights
    # and constants, and attn_res_block_size's block residuals live for one forward pass.
    "kimi-k3.json": (
        [full(24, 1152), state(69, 6_512_640)],
        (8, [full(24, 1152), state(69, 814_080)]),
    ),
    # Qwen3.6-27B NVFP4 (qwen3_5 wrapper; modelopt weights): text_config layer_types 16 full
    # (4 KV heads x head_dim 256: 2 x 4 x 256 x 2 = 4,096 B) and 48 Gated DeltaNet: conv
    # (2 x linear_num_key_heads 16 x 128 + linear_num_value_heads 48 x 128) x (4 - 1) = 30,720 x
    # 2 B = 61,440 B; state 48 x 128 x 128 = 786,432 in float32 (mamba_ssm_dtype) = 3,145,728 B
    # -> 3,207,168 B. TP 2: 2 KV heads (2,048 B); 15,360 x 2 + 393,216 x 4 = 1,603,584 B.
    "qwen3.6-27b-nvfp4.json": (
        [full(16, 4096), state(48, 3_207_168)],
        (2, [full(16, 2048), state(48, 1_603_584)]),
    ),
    # Nemotron 3 Ultra 550B-A55B FP8 (nemotron_h): layers_block_type (the list spelling, no
    # hybrid_override_pattern, no num_hidden_layers) has 12 'attention', 48 'mamba', 48 'moe'.
    # Attention 2 KV heads x head_dim 128: 1,024 B. Mamba-2: mamba_num_heads 256 x
    # mamba_head_dim 64 = 16,384 inner; conv (16,384 + 2 x n_groups 8 x ssm_state_size 128) x
    # (conv_kernel 4 - 1) = 55,296 x 2 B = 110,592 B; SSM 256 x 64 x 128 = 2,097,152 in float32
    # (mamba_ssm_cache_dtype) = 8,388,608 B -> 8,499,200 B. TP 2: 1 KV head (512 B);
    # 27,648 x 2 + 1,048,576 x 4 = 4,249,600 B.
    "nemotron-3-ultra-550b-a55b-fp8.json": (
        [full(12, 1024), state(48, 8_499_200)],
        (2, [full(12, 512), state(48, 4_249_600)]),
    ),
    # LFM2.5-VL-1.6B (lfm2_vl wrapper, text_config lfm2 with the layer_types spelling): 6
    # full_attention (2, 5, 8, 10, 12, 14) of 8 KV heads x 2,048 / 32 = 64: 2,048 B; 10 conv
    # layers keep conv_L_cache - 1 = 2 inputs of conv_dim 2,048 in BF16 = 8,192 B (vLLM
    # short_conv_state_shape, as LFM2-350M in test_real_configs.py). TP 2: 1,024 B; 4,096 B.
    "lfm2.5-vl-1.6b.json": (
        [full(6, 2048), state(10, 8192)],
        (2, [full(6, 1024), state(10, 4096)]),
    ),
}


def total(terms, n):
    return sum(t(n) for t in terms)


def measured(spec, n, tp=1):
    r = kv_cache(spec, n, tp=tp)
    return r.kv_bytes + r.state_bytes


def test_every_round6_file_has_a_case_or_a_refusal_and_a_source():
    files = {p.name for p in DATA.glob("*.json")}
    assert files == set(CASES) | set(REFUSED)
    notes = (ROOT / "tests" / "data" / "configs" / "NOTES-F.md").read_text()
    for name in files:
        assert name in notes, f"{name} has no source in NOTES-F.md"


@pytest.mark.parametrize("name", sorted(CASES))
def test_round6_config_bytes_at_two_contexts_and_tp(name):
    spec = spec_from_config(load_config_file(DATA / name))
    terms, (tp, tp_terms) = CASES[name]
    for n in (N1, N2):
        assert measured(spec, n) == total(terms, n), n
    assert measured(spec, N2, tp) == total(tp_terms, N2)


# Files whose cache depends on a field kvcalc cannot read: the refusal must name that field
# (in the error's field list: its message shows only the first twelve).
REFUSED = {
    # DeepSeek-V4-Flash (deepseek_v4): compress_ratios gives every layer a sliding K=V branch
    # (1 shared head x head_dim 512, window 128) and, at ratio 4 (21 layers, CSA) one 512-wide
    # compressed entry plus one index_head_dim 128 indexer key per 4 tokens, at ratio 128 (20
    # layers, HCA) one 512-wide entry per 128 tokens; the last of its 44 entries is the MTP layer
    # (transformers/models/deepseek_v4: DeepseekV4HCACache, DeepseekV4CSACache). In BF16:
    # 43 x min(n, 128) x 1,024 + 21 x n // 4 x 1,280 + 20 x n // 128 x 1,024 = 33,816,576 B at
    # 4,096 and 907,411,456 B at 131,072. kvcalc has no reader: correct to refuse.
    "deepseek-v4-flash.json": ["compress_ratios", "index_n_heads"],
    # MiniMax-M3 (minimax_m3): sparse_attention_config.sparse_attention_freq makes layers 3-59
    # sparse, and each keeps its lightning indexer's key (one head of sparse_index_dim 128,
    # transformers/models/minimax_m3_vl: MiniMaxM3VLSparseCacheLayer.update_index) beside 4 KV
    # heads x 128: 3 x 2,048 + 57 x (2,048 + 256) = 137,472 B per token in BF16
    # (563,085,312 B at 4,096; 18,018,729,984 B at 131,072). kvcalc has no reader: correct.
    "minimax-m3.json": ["sparse_attention_config"],
    # Step-3.7-Flash as aiconfigurator stores it (model_type step3p7 with the language model's
    # fields at the top level, no text_config; aiconfigurator's own parser says "the
    # authoritative HF config nests the decoder under text_config"). transformers 5.24's
    # Step3p7Config reads the language model from text_config only: without one it builds
    # Step3p7TextConfig's defaults, 45 full_attention layers and sliding_window None, and keeps
    # the top-level layer_types / sliding_window unused (checked on the installed class). Read
    # that way every layer is full: 45 x 8 x 128 x 2 x 2 B = 184,320 B a token, against 12 x
    # 4,096 B + 33 x 4,096 B capped at 512 tokens as the file's own fields say. The two readings
    # differ, so the refusal names the missing text_config.
    "step-3.7-flash.json": ["text_config"],
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_round6_refusal_names_the_field_that_changes_the_cache(name):
    with pytest.raises(ValueError) as refused:
        spec_from_config(load_config_file(DATA / name))
    named = set(getattr(refused.value, "fields", ())) | {
        f for f in REFUSED[name] if f"'{f}'" in str(refused.value)
    }
    for field in REFUSED[name]:
        assert field in named, (field, str(refused.value))


def _hunyuan():
    return load_config_file(DATA / "hunyuan-a13b.json")


def test_hunyuan_cross_layer_attention_is_refused_by_its_switch():
    # use_cla true: layer i reuses the K/V of the last layer whose index is a multiple of
    # cla_share_factor (modeling_hunyuan.py, HunYuanModel.forward's prev_kv_states), yet the
    # remote code still writes every layer into its cache and vLLM's hunyuan_v1.py gives the
    # sharing layers an Attention of their own: the refusal names use_cla.
    cfg = _hunyuan()
    cfg["use_cla"] = True
    with pytest.raises(ValueError, match="'use_cla' is true"):
        spec_from_config(cfg)
    cfg = _hunyuan()
    cfg["use_mla"] = True
    with pytest.raises(ValueError, match="'use_mla' is true"):
        spec_from_config(cfg)


def test_hunyuan_unused_mla_fields_do_not_make_it_mla():
    # HunYuanConfig's defaults keep kv_lora_rank 512, v_head_dim 128 ... with use_mla false, and
    # nothing reads them: the cache is still 32 x 8 x 128 x 2 x 2 B = 131,072 B a token.
    cfg = _hunyuan()
    cfg.update(kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64, qk_nope_head_dim=128)
    cfg["v_head_dim"] = 64
    spec = spec_from_config(cfg)
    assert measured(spec, 4096) == 32 * 4096 * 4096
    # A head size that the remote code (hidden_size // heads = 128) and vLLM
    # (attention_head_dim) would read differently is refused.
    cfg = _hunyuan()
    cfg["attention_head_dim"] = 64
    with pytest.raises(ValueError, match="attention_head_dim"):
        spec_from_config(cfg)


def test_laguna_query_heads_per_layer_are_the_layers_flops_not_their_cache():
    spec = spec_from_config(load_config_file(DATA / "laguna-xs.2-fp8.json"))
    # num_attention_heads_per_layer: 48 on the full layers, 64 on the sliding ones
    assert [lay.q_heads for lay in spec.layers[:4]] == [48, 64, 64, 64]
    assert {lay.kv_heads for lay in spec.layers} == {8}
    cfg = load_config_file(DATA / "laguna-xs.2-fp8.json")
    cfg["num_attention_heads_per_layer"] = cfg["num_attention_heads_per_layer"][:-1]
    with pytest.raises(ValueError, match="num_attention_heads_per_layer"):
        spec_from_config(cfg)
