"""The remaining readers of issue 38, item 2: Granite 4.0-H, MiMo, EXAONE 4.5, MiniMax-M2.5's MTP
fields, mlp_type and mlx-lm's quantization block, and the parameter counts of GLM-5, Kimi-K2.5
and MiniMax-M2.5 (the benchmarks' configs).

Sources of the files: tests/data/configs/NOTES-G.md (readers6/) and NOTES-F.md (round6/).
Every cache expectation is worked by hand below from the published fields (BF16, 2 B an element;
one sequence; an attention layer keeps kv_heads x (K + V) x head_dim per token; a Mamba-2 layer
keeps conv_kernel - 1 inputs of its conv channels and heads x head_dim x d_state, as vLLM's
MambaStateShapeCalculator.mamba2_state_shape sizes them). Every parameter count is transformers
5.24's own, built on the meta device from the same file (no weights, no download), plus the
router's e_score_correction_bias where transformers keeps it as a buffer and the checkpoint
(and vLLM) as a weight; for MiMo, which transformers does not ship, the oracle is vLLM's
vllm/model_executor/models/mimo.py (MiMoForCausalLM is Qwen2ForCausalLM and skips the
model.mtp_layers.* weights), so transformers' Qwen2 built from the same fields counts it.
"""

from __future__ import annotations

import copy
import json

import pytest
from conftest import ROOT

from kvcalc import kv_cache, spec_from_config

DATA = ROOT / "tests" / "data" / "configs"
READERS6 = DATA / "readers6"
ROUND6 = DATA / "round6"


def load(path):
    return json.loads(path.read_text())


def cache_bytes(spec, n, tp=1):
    r = kv_cache(spec, n, tp=tp)
    return r.kv_bytes, r.state_bytes


# -- Granite 4.0-H (granitemoehybrid): Mamba-2 + NoPE attention ------------------------------


def test_granite_4_h_tiny_cache_by_hand():
    # granite-4.0-h-tiny: 40 layers, layer_types attention at 5, 15, 25, 35 (4), mamba elsewhere
    # (36). Attention: 4 KV heads x 1,536 / 12 = 128 x (K + V) x 2 B = 2,048 B per token and
    # layer, RoPE or not (position_embedding_type "nope" caches the same K and V).
    # Mamba-2: inner = mamba_expand 2 x 1,536 = 3,072 = mamba_n_heads 48 x mamba_d_head 64;
    # conv (3,072 + 2 x n_groups 1 x d_state 128) = 3,328 channels x (d_conv 4 - 1) = 9,984;
    # SSM 48 x 64 x 128 = 393,216; (9,984 + 393,216) x 2 B = 806,400 B a layer, 36 layers =
    # 29,030,400 B a sequence. At 4,096 tokens: 4 x 2,048 x 4,096 = 33,554,432 B of K/V.
    spec = spec_from_config(load(READERS6 / "granite-4.0-h-tiny-fields.json"))
    assert cache_bytes(spec, 4096) == (33_554_432, 29_030_400)
    assert cache_bytes(spec, 131072) == (4 * 2048 * 131072, 29_030_400)
    # TP 2: 2 KV heads (1,024 B); the single B/C group is replicated, as vLLM does when the
    # groups do not divide: conv (3,072 / 2 + 2 x 128) x 3 = 5,376, SSM 24 x 64 x 128 = 196,608,
    # (5,376 + 196,608) x 2 B = 403,968 B a layer x 36 = 14,542,848 B.
    assert cache_bytes(spec, 4096, tp=2) == (4 * 1024 * 4096, 14_542_848)


def test_granite_4_h_350m_cache_by_hand_and_its_mlx_block_only_costs_the_weights():
    # granite-4.0-h-350m (MLX 4-bit copy): 32 layers, attention at 10, 13, 17, 27: 4 KV heads x
    # 768 / 12 = 64 x 2 x 2 B = 1,024 B a token and layer. Mamba-2 (28 layers): inner 48 x 32 =
    # 1,536 (= 2 x 768); conv (1,536 + 2 x 128) x 3 = 5,376; SSM 48 x 32 x 128 = 196,608;
    # 201,984 x 2 B = 403,968 B a layer, 28 x = 11,311,104 B.
    cfg = load(READERS6 / "granite-4.0-h-350m-mlx-4bit.json")
    spec = spec_from_config(cfg)
    assert cache_bytes(spec, 4096) == (4 * 1024 * 4096, 11_311_104)
    # mlx-lm's "quantization" block is how the weights are stored: the cache is read, the weight
    # figures are refused by name (their bytes depend on which tensors mlx-lm quantized).
    assert spec.params is None and "MLX-quantized" in spec.params_error
    assert "4 bits in groups of 64" in spec.params_error
    # mlx-lm writes the same block again as quantization_config (no quant_method): the same.
    again = copy.deepcopy(cfg)
    again["quantization_config"] = again["quantization"]
    del again["quantization"]
    assert spec_from_config(again).params is None


def test_granite_class_default_layout_is_all_mamba_and_said():
    # GraniteMoeHybridConfig's default layer_types is every layer linear_attention (Mamba).
    cfg = load(READERS6 / "granite-4.0-h-tiny-fields.json")
    del cfg["layer_types"]
    spec = spec_from_config(cfg)
    assert {lay.kind for lay in spec.layers} == {"state"}
    assert any("every layer is Mamba" in a for a in spec.assumptions)
    assert cache_bytes(spec, 4096) == (0, 40 * 806_400)


def test_granite_refuses_what_transformers_refuses():
    cfg = load(READERS6 / "granite-4.0-h-tiny-fields.json")
    bad = copy.deepcopy(cfg)
    bad["mamba_d_head"] = 32  # 48 x 32 = 1,536, not mamba_expand x hidden = 3,072
    with pytest.raises(ValueError, match="mamba_d_head"):
        spec_from_config(bad)
    bad = copy.deepcopy(cfg)
    bad["layer_types"] = bad["layer_types"][:-1]
    with pytest.raises(ValueError, match="layer_types"):
        spec_from_config(bad)
    # "auto" (the class default) is mamba_expand x hidden // mamba_n_heads = 64: the same state
    auto = copy.deepcopy(cfg)
    auto["mamba_d_head"] = "auto"
    assert cache_bytes(spec_from_config(auto), 4096) == (33_554_432, 29_030_400)


# -- MTP fields are accepted, and not the main model's cache ----------------------------------


def test_minimax_m25_reads_with_its_mtp_fields():
    # MiniMax-M2.5: 62 layers of 8 KV heads x head_dim 128 x 2 x 2 B = 4,096 B; use_mtp,
    # num_mtp_modules 3, mtp_transformer_layers 1 are the drafter's (vLLM's minimax_m2 skips the
    # spec-decode layers for the main model): 62 x 4,096 = 253,952 B a token.
    spec = spec_from_config(load(READERS6 / "minimax-m2.5.json"))
    assert cache_bytes(spec, 1) == (253_952, 0)
    assert len(spec.layers) == 62


def test_mimo_reads_as_qwen2_without_its_mtp_layers():
    # MiMo-7B-Base: 36 layers, 8 KV heads x head_dim 128: 4,096 B; use_sliding_window false;
    # num_nextn_predict_layers 1 is the MTP head. 36 x 4,096 = 147,456 B a token.
    spec = spec_from_config(load(ROUND6 / "mimo-7b-base.json"))
    assert cache_bytes(spec, 1) == (147_456, 0)
    assert len(spec.layers) == 36


@pytest.mark.parametrize("text_type", ["exaone4_5_text", "exaone4"])
def test_exaone_45_reads_its_text_config_and_accepts_its_mtp_fields(text_type):
    # EXAONE 4.5 33B: text_config exaone4_5_text (transformers 5.24 renames it exaone4), 64
    # layers "LLLG": 48 sliding at 4,096 + 16 full, 8 KV heads x 5,120 / 40 = 128: 4,096 B.
    # _num_mtp_layers, num_nextn_predict_layers, mtp_share_layers, mtp_loss_scaling_factor are the
    # MTP layer's. At 131,072 tokens: 48 x 4,096 x 4,096 + 16 x 4,096 x 131,072.
    cfg = load(ROUND6 / "exaone-4.5-33b.json")
    cfg["text_config"]["model_type"] = text_type
    spec = spec_from_config(cfg)
    assert cache_bytes(spec, 131072) == (48 * 4096 * 4096 + 16 * 4096 * 131072, 0)


# -- mlp_type and the MLX block in any family that knows its MLP ------------------------------


def test_mlp_type_and_mlx_block_never_refuse_the_cache():
    # Llama 3.1 8B: 2 x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B a token, with or without
    # a field that picks the MLP or an mlx-lm quantization block (with per-tensor entries).
    cfg = load(DATA / "llama-3.1-8b.json")
    cfg["mlp_type"] = "dense"
    cfg["quantization"] = {
        "group_size": 64,
        "bits": 4,
        "mode": "affine",
        "lm_head": {"group_size": 64, "bits": 6},
    }
    spec = spec_from_config(cfg)
    assert cache_bytes(spec, 1) == (131_072, 0)
    assert spec.params is None and "MLX-quantized" in spec.params_error


# -- parameter counts, against transformers on the meta device --------------------------------

torch = pytest.importorskip("torch", reason="torch is not installed")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")


def transformers_count(cfg: dict, model_type: str | None = None) -> tuple[int, int]:
    """(parameters, e_score_correction_bias elements) of transformers' causal LM built on the
    meta device from ``cfg``."""
    from transformers import CONFIG_MAPPING, AutoModelForCausalLM

    kind = model_type or cfg["model_type"]
    conf = CONFIG_MAPPING[kind](**{k: v for k, v in cfg.items() if k != "model_type"})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(conf)
    params = sum(p.numel() for p in model.parameters())
    bias = sum(
        b.numel() for n, b in model.named_buffers() if n.endswith(".e_score_correction_bias")
    )
    return params, bias


def test_granite_4_h_tiny_params_by_hand_and_by_transformers():
    # Embedding 100,352 x 1,536 = 154,140,672 (tied: no lm_head). Attention (4 layers): q and o
    # 1,536 x 1,536 each, k and v 1,536 x 512 each = 6,291,456 a layer. Mamba (36 layers):
    # in_proj 1,536 x (3,072 + 3,328 + 48) = 9,904,128; conv 3,328 x 4 + bias 3,328 = 16,640;
    # dt_bias, A_log, D 3 x 48; gated norm 3,072; out_proj 3,072 x 1,536 = 4,718,592:
    # 14,642,576 a layer. Every layer: router 64 x 1,536 = 98,304, experts 64 x 3 x 1,536 x 512 =
    # 150,994,944, shared MLP 3 x 1,536 x 1,024 = 4,718,592, 2 norms 3,072; final norm 1,536.
    by_hand = (
        154_140_672
        + 4 * 6_291_456
        + 36 * 14_642_576
        + 40 * (98_304 + 150_994_944 + 4_718_592 + 3_072)
        + 1_536
    )
    assert by_hand == 6_939_037_248
    cfg = load(READERS6 / "granite-4.0-h-tiny-fields.json")
    assert spec_from_config(cfg).params.total == by_hand == sum(transformers_count(cfg))


def test_granite_4_h_350m_params_by_transformers_without_its_mlx_block():
    # The dense hybrid (num_local_experts 0: the shared MLP is the only MLP; intermediate_size
    # is read by nothing), with the MLX block taken out.
    cfg = load(READERS6 / "granite-4.0-h-350m-mlx-4bit.json")
    del cfg["quantization"]
    assert spec_from_config(cfg).params.total == sum(transformers_count(cfg)) == 340_332_224


@pytest.mark.parametrize(
    ("path", "text", "model_type", "buffers"),
    [
        # GLM-5 (glm_moe_dsa): MLA + the DSA indexer's wq_b, wk, k_norm, weights_proj in every
        # layer; 75 MoE layers x 256 experts of score-correction bias
        (DATA / "glm-5.json", None, None, 75 * 256),
        # Kimi-K2.5's language model (kimi_k2 = DeepSeek-V3; transformers' kimi_k25 builds
        # DeepseekV3 from it): 60 MoE layers x 384
        (READERS6 / "kimi-k2.5.json", "text_config", "deepseek_v3", 60 * 384),
        # MiniMax-M2.5 and M2.7: use_routing_bias, a vLLM parameter: 62 x 256
        (READERS6 / "minimax-m2.5.json", None, None, 62 * 256),
        (ROUND6 / "minimax-m2.7.json", None, None, 62 * 256),
        # MiMo-7B-Base: vLLM's MiMoForCausalLM is Qwen2ForCausalLM; attention_bias true in the
        # file is not an o_proj bias (Qwen2 never reads it)
        (ROUND6 / "mimo-7b-base.json", None, "qwen2", 0),
        # EXAONE 4.5's language model: EXAONE 4 (exaone4), untied (Exaone4_5_Config's default)
        (ROUND6 / "exaone-4.5-33b.json", "text_config", "exaone4", 0),
    ],
    ids=["glm-5", "kimi-k2.5", "minimax-m2.5", "minimax-m2.7", "mimo-7b-base", "exaone-4.5"],
)
def test_params_equal_transformers_on_the_meta_device(path, text, model_type, buffers):
    whole = load(path)
    cfg = copy.deepcopy(whole[text]) if text else whole
    params, bias = transformers_count(cfg, model_type)
    assert bias == buffers
    spec = spec_from_config(whole)
    assert spec.params is not None, spec.params_error
    assert spec.params.total == params + bias


def test_benchmark_configs_all_have_a_count():
    # The configs the speed model is fitted on (/work/shared/benchmarks/configs, the same files
    # as in tests/data/configs): none is refused, each has a parameter count.
    for path in (
        DATA / "glm-5.json",
        READERS6 / "kimi-k2.5.json",
        READERS6 / "minimax-m2.5.json",
        DATA / "llama-3.1-8b.json",
    ):
        spec = spec_from_config(load(path))
        assert spec.params is not None, (path.name, spec.params_error)
