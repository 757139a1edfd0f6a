"""Parameter counts for the families the readers know and the counter did not (issue 38, item 2:
"a known cache never comes without its weights"), one test per family.

The oracle is transformers 5.24's own causal LM, built on the meta device from the same real
config.json (no weights, no download): the sum of p.numel() over model.parameters(), a tied
weight once. Where transformers keeps a tensor as a buffer that the checkpoint and vLLM keep as
a weight (the router's e_score_correction_bias), the buffer is added, and the test says so.
Multimodal files count their language model (text_config), as kvcalc does.
"""

from __future__ import annotations

import json

import pytest
from conftest import ROOT

from kvcalc import spec_from_config

torch = pytest.importorskip("torch", reason="torch is not installed")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

DATA = ROOT / "tests" / "data" / "configs"
ROUND6 = DATA / "round6"


def load(path):
    return json.loads(path.read_text())


def transformers_count(cfg: dict, model_type: str | None = None) -> tuple[int, int]:
    """(parameters, e_score_correction_bias buffer elements) of transformers' causal LM built on
    the meta device from ``cfg``."""
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


def kvcalc_count(whole: dict) -> int:
    spec = spec_from_config(whole)
    assert spec.params is not None, spec.params_error
    return spec.params.total


# -- nemotron_h: Nemotron-H and Nemotron 3 Nano / Super / Ultra -------------------------------


def test_nemotron_3_nano_params_by_hand():
    # hybrid_override_pattern: 23 M (Mamba-2), 6 * (attention), 23 E (MoE), 52 blocks, each with
    # one RMSNorm (hidden 2,688) and one mixer (transformers' NemotronHBlock).
    # Mamba-2: inner = mamba_num_heads 64 x mamba_head_dim 64 = 4,096; conv channels 4,096 + 2 x
    # n_groups 8 x ssm_state_size 128 = 6,144; in_proj 2,688 x (4,096 + 6,144 + 64 heads);
    # conv1d 6,144 x 4 + bias 6,144 (use_conv_bias); dt_bias, A_log, D: 3 x 64; gated norm
    # 4,096; out_proj 4,096 x 2,688 = 38,742,208 a layer.
    # Attention: q 2,688 x 32 x 128, k and v 2,688 x 2 x 128, o 4,096 x 2,688, no biases =
    # 23,396,352.
    # MoE: router 128 x 2,688 + its score-correction bias 128; 128 experts x (up + down, no
    # gate: squared ReLU) 2 x 2,688 x 1,856; shared expert 2 x 2,688 x 3,712 = 1,297,465,472.
    # Embedding and untied lm_head 2 x 131,072 x 2,688; 53 norms of 2,688.
    mamba = 2688 * (4096 + 6144 + 64) + 6144 * 4 + 6144 + 3 * 64 + 4096 + 4096 * 2688
    attention = 2688 * (32 * 128 + 2 * 2 * 128) + 32 * 128 * 2688
    moe = 128 * 2688 + 128 + 128 * 2 * 2688 * 1856 + 2 * 2688 * 3712
    by_hand = 2 * 131072 * 2688 + 23 * mamba + 6 * attention + 23 * moe + 53 * 2688
    assert (mamba, attention, moe) == (38_742_208, 23_396_352, 1_297_465_472)
    assert by_hand == 31_577_940_288
    cfg = load(DATA / "nemotron-3-nano-30b-a3b.json")
    assert kvcalc_count(cfg) == by_hand


@pytest.mark.parametrize(
    ("path", "moe_layers", "experts", "total"),
    [
        # Nano: 23 MoE layers x 128 experts of e_score_correction_bias (a buffer in
        # transformers, a weight in vLLM's NemotronHMoE and in the checkpoint)
        (DATA / "nemotron-3-nano-30b-a3b.json", 23, 128, 31_577_940_288),
        # Super (latent MoE: experts over moe_latent_size 1,024, with fc1_latent_proj and
        # fc2_latent_proj): 40 x 512
        (DATA / "nemotron-3-super-120b-a12b-fp8.json", 40, 512, 120_668_707_840),
        # Ultra (layers_block_type spelling, latent 2,048): 48 x 512
        (ROUND6 / "nemotron-3-ultra-550b-a55b-fp8.json", 48, 512, 549_308_993_536),
        # Nemotron-H 56B: dense (- MLP blocks), no router
        (DATA / "nemotron-h-56b.json", 0, 0, 56_324_350_464),
    ],
    ids=["nano", "super", "ultra", "nemotron-h-56b"],
)
def test_nemotron_h_params_equal_transformers_on_the_meta_device(path, moe_layers, experts, total):
    cfg = load(path)
    params, bias = transformers_count(cfg)
    assert bias == moe_layers * experts
    assert kvcalc_count(cfg) == params + bias == total
    # the MoE layout the speed model uses: the active share is the non-expert weights plus
    # top_k experts in each MoE layer
    moe = spec_from_config(cfg).moe
    if experts:
        assert (moe.layers, moe.num_experts) == (moe_layers, experts)
        assert moe.top_k == cfg["num_experts_per_tok"]
    else:
        assert moe is None


def test_nemotron_h_shared_expert_count_that_engines_read_differently_is_refused():
    # vLLM builds n_shared_experts x moe_shared_expert_intermediate_size, transformers one
    # shared expert whatever the field says: the count is refused, the cache is not.
    cfg = load(DATA / "nemotron-3-nano-30b-a3b.json")
    cfg["n_shared_experts"] = 2
    spec = spec_from_config(cfg)
    assert spec.params is None and "n_shared_experts" in spec.params_error


# -- lfm2: LFM2 and LFM2.5-VL's language model --------------------------------------------------


def test_lfm2_350m_params_by_hand():
    # LFM2-350M: 16 layers, hidden 1,024, vocab 65,536 (tied: Lfm2Config's default, no
    # tie_word_embeddings in the file). MLP width: block_ff_dim 6,656 -> int(2 x 6,656 / 3) =
    # 4,437 -> x block_ffn_dim_multiplier 1.0 -> rounded up to block_multiple_of 256 = 4,608;
    # w1, w3, w2 = 3 x 1,024 x 4,608 in every layer. Attention layers (full_attn_idxs: 6): q and
    # out 1,024 x 1,024, k and v 1,024 x 8 x 64, q/k layernorms 2 x 64. Conv layers (10): in_proj
    # 1,024 x 3,072, conv 1,024 x conv_L_cache 3, out_proj 1,024 x 1,024 (conv_bias false). Two
    # RMSNorms a layer and the final embedding_norm.
    attention = 2 * 1024 * 1024 + 2 * 1024 * 512 + 2 * 64
    conv = 1024 * 3072 + 1024 * 3 + 1024 * 1024
    by_hand = 65536 * 1024 + 16 * 3 * 1024 * 4608 + 6 * attention + 10 * conv + 33 * 1024
    assert by_hand == 354_483_968
    assert kvcalc_count(load(DATA / "lfm2-350m.json")) == by_hand


@pytest.mark.parametrize(
    ("path", "text", "total"),
    [
        (DATA / "lfm2-350m.json", None, 354_483_968),
        # LFM2.5-VL-1.6B's language model (text_config lfm2; the wrapper's tie is unset, so
        # Lfm2Config's tied default holds, as transformers' Lfm2VlForConditionalGeneration
        # builds it: the same count with its vision tower and projector left out)
        (ROUND6 / "lfm2.5-vl-1.6b.json", "text_config", 1_170_340_608),
    ],
    ids=["lfm2-350m", "lfm2.5-vl-1.6b"],
)
def test_lfm2_params_equal_transformers_on_the_meta_device(path, text, total):
    whole = load(path)
    params, bias = transformers_count(whole[text] if text else whole)
    assert bias == 0
    assert kvcalc_count(whole) == params == total


def test_lfm2_width_the_engines_round_differently_is_refused():
    # block_ffn_dim_multiplier null: vLLM still rounds int(2/3 x 6,656) = 4,437 up to 4,608,
    # transformers keeps 4,437. The count is refused by name; the cache is not.
    cfg = load(DATA / "lfm2-350m.json")
    cfg["block_ffn_dim_multiplier"] = None
    spec = spec_from_config(cfg)
    assert spec.params is None and "block_ffn_dim_multiplier" in spec.params_error


# -- gemma4_text: Gemma 4's language model -----------------------------------------------------


def test_gemma_4_31b_params_by_hand():
    # Gemma 4 31B (text_config): 60 layers, hidden 5,376, vocab 262,144, tied. layer_types: 50
    # sliding of 32 heads x head_dim 256 (q and o 5,376 x 8,192, k and v 5,376 x 16 x 256 =
    # 4,096, q and k norms 256) and 10 full of 32 x global_head_dim 512 (q and o 5,376 x
    # 16,384, k 5,376 x num_global_key_value_heads 4 x 512 = 2,048, no v_proj: attention_k_eq_v,
    # q and k norms 512). Every layer: GeGLU MLP 3 x 5,376 x 21,504 and four RMSNorms; one final
    # norm.
    sliding = 2 * 5376 * 8192 + 2 * 5376 * 4096 + 2 * 256
    full = 2 * 5376 * 16384 + 5376 * 2048 + 2 * 512
    by_hand = 262144 * 5376 + 50 * sliding + 10 * full + 60 * 3 * 5376 * 21504 + (4 * 60 + 1) * 5376
    assert by_hand == 30_697_345_280
    assert kvcalc_count(load(ROUND6 / "gemma-4-31b-it-nvfp4.json")) == by_hand


@pytest.mark.parametrize(
    ("path", "total"),
    [
        (ROUND6 / "gemma-4-31b-it-nvfp4.json", 30_697_345_280),
        # 26B-A4B: enable_moe_block, 128 experts (top 8) of moe_intermediate_size 704 beside the
        # dense MLP in all 30 layers, the router's scale, per-expert scale and projection
        (DATA / "gemma-4-26b-a4b.json", 25_233_141_760),
        # E2B: 20 KV-shared layers without k/v projections and with a double-wide MLP
        # (use_double_wide_mlp), and the per-layer input embeddings (hidden_size_per_layer_input
        # 256 x 35 layers over vocab_size_per_layer_input 262,144) with their projections
        (DATA / "gemma-4-e2b-it.json", 4_628_569_344),
    ],
    ids=["31b", "26b-a4b", "e2b"],
)
def test_gemma4_params_equal_transformers_on_the_meta_device(path, total):
    whole = load(path)
    params, bias = transformers_count(whole["text_config"])
    assert bias == 0
    assert kvcalc_count(whole) == params == total


# -- falcon_h1: Falcon-H1 ------------------------------------------------------------------------
# No Falcon-H1 config.json could be copied whole (NOTES-F.md: searched, not found; the Hub pages
# the search tools hold are cut short), so the oracle is transformers' FalconH1Config itself, at
# its defaults and with every switch the counter reads turned the other way.


def falcon_h1(**changes) -> tuple[dict, int]:
    from transformers import AutoModelForCausalLM, FalconH1Config

    conf = FalconH1Config(**changes)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(conf)
    return conf.to_dict(), sum(p.numel() for p in model.parameters())


def test_falcon_h1_class_defaults_by_hand_and_by_transformers():
    # FalconH1Config(): 32 layers, hidden 4,096, vocab 128,000, untied. Every layer: attention
    # (32 heads x 128, 8 KV heads: q and o 4,096 x 4,096, k and v 4,096 x 1,024) =
    # 41,943,040; the Mamba-2 mixer beside it (mamba_d_ssm 1,024 = 128 heads x 8; conv channels
    # 1,024 + 2 x 1 group x d_state 256 = 1,536): in_proj 4,096 x (1,024 + 1,536 + 128), conv
    # 1,536 x 4 + bias 1,536, dt_bias, A_log, D 3 x 128, out_proj 1,024 x 4,096, no gated norm
    # (mamba_rms_norm false) = 15,212,416; SwiGLU MLP 3 x 4,096 x 14,336; two RMSNorms.
    attention = 4096 * (4096 + 2 * 1024) + 4096 * 4096
    mixer = 4096 * (1024 + 1536 + 128) + 1536 * 4 + 1536 + 3 * 128 + 1024 * 4096
    layer = attention + mixer + 3 * 4096 * 14336 + 2 * 4096
    by_hand = 2 * 128000 * 4096 + 32 * layer + 4096
    assert (attention, mixer) == (41_943_040, 15_212_416)
    cfg, total = falcon_h1()
    assert by_hand == total == 8_514_961_408
    assert kvcalc_count(cfg) == total


def test_falcon_h1_switches_equal_transformers_on_the_meta_device():
    # the gated norm, every bias, a tied head and mamba_d_ssm null (mamba_expand x hidden)
    cfg, total = falcon_h1(
        num_hidden_layers=4,
        mamba_d_ssm=None,
        mamba_rms_norm=True,
        mamba_proj_bias=True,
        projectors_bias=True,
        attention_bias=True,
        mlp_bias=True,
        tie_word_embeddings=True,
    )
    assert kvcalc_count(cfg) == total == 1_810_343_936


def test_falcon_h1_projection_biases_the_engines_read_differently_are_refused():
    cfg, _ = falcon_h1(num_hidden_layers=2, mamba_proj_bias=True, projectors_bias=False)
    spec = spec_from_config(cfg)
    assert spec.params is None and "projectors_bias" in spec.params_error


# -- families the counter already had, now checked against transformers ------------------------


def test_jamba_params_equal_transformers_on_the_meta_device():
    # Jamba v0.1 (the catalog's fields of ai21labs/Jamba-v0.1, kvcalc/config/models.yaml): 4
    # attention and 28 Mamba-1 layers (with Jamba's dt/B/C layer norms), 16 experts every
    # second layer; and JambaConfig's own defaults
    from transformers import JambaConfig

    from kvcalc.config.catalog import get_model

    cfg = dict(get_model("jamba-v0.1").config)
    params, _ = transformers_count(cfg)
    assert kvcalc_count(cfg) == params == 51_570_323_328
    defaults = JambaConfig().to_dict()
    params, _ = transformers_count(defaults)
    assert kvcalc_count(defaults) == params


@pytest.mark.parametrize(
    ("path", "total"),
    [
        (DATA / "qwen3-next-80b-a3b-thinking.json", 79_674_391_296),
        (DATA / "gpt-oss-20b.json", 20_914_757_184),
        (ROUND6 / "gpt-oss-120b.json", 116_829_156_672),
    ],
    ids=["qwen3-next-80b", "gpt-oss-20b", "gpt-oss-120b"],
)
def test_qwen3_next_and_gpt_oss_params_equal_transformers(path, total):
    cfg = load(path)
    params, bias = transformers_count(cfg)
    assert bias == 0
    assert kvcalc_count(cfg) == params == total


def test_gemma2_and_gemma3_params_equal_transformers_at_their_class_defaults():
    # No Gemma 2 / Gemma 3 config.json in tests/data: their config classes' defaults (Gemma 2
    # 9B's and Gemma 3 4B's text geometry), four norms a layer and Gemma 3's q/k norms
    from transformers import Gemma2Config, Gemma3TextConfig

    for conf, total in ((Gemma2Config(), 2_614_341_888), (Gemma3TextConfig(), 2_628_658_432)):
        cfg = conf.to_dict()
        params, _ = transformers_count(cfg)
        assert kvcalc_count(cfg) == params == total


# -- kimi_linear: Kimi-Linear (Kimi K3's extra weights are refused by name) ---------------------


def test_kimi_linear_params_equal_transformers_on_the_meta_device():
    # Kimi-Linear-48B-A3B-Instruct: 20 KDA and 7 MLA layers; the first layer dense, 26 MoE layers
    # of 256 experts with their e_score_correction_bias (a buffer in transformers, a weight in
    # vLLM's KimiMoE and the checkpoint)
    cfg = load(DATA / "kimi-linear-48b-a3b-instruct.json")
    params, bias = transformers_count(cfg)
    assert bias == 26 * 256
    assert kvcalc_count(cfg) == params + bias == 49_122_681_728


def test_kimi_linear_kda_layer_by_hand():
    # One KDA layer of Kimi-Linear-48B (hidden 2,304; 32 heads x head_dim 128 = 4,096; conv
    # kernel 4): q, k, v 3 x 2,304 x 4,096; conv 12,288 x 4; forget gate dt_bias 4,096, A_log
    # 32, f_a 2,304 x 128, f_b 128 x 4,096; b_proj 2,304 x 32; g_a 2,304 x 128, g_b 128 x 4,096;
    # o_norm 128; o_proj 4,096 x 2,304 (transformers' KimiDeltaAttention, as named there).
    kda = (
        3 * 2304 * 4096
        + 12288 * 4
        + 4096
        + 32
        + 2304 * 128
        + 128 * 4096
        + 2304 * 32
        + 2304 * 128
        + 128 * 4096
        + 128
        + 4096 * 2304
    )
    from transformers import CONFIG_MAPPING, AutoModelForCausalLM

    cfg = load(DATA / "kimi-linear-48b-a3b-instruct.json")
    conf = CONFIG_MAPPING["kimi_linear"](**{k: v for k, v in cfg.items() if k != "model_type"})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(conf)
    layer0 = sum(p.numel() for p in model.model.layers[0].self_attn.parameters())
    assert kda == layer0 == 39_514_272


def test_kimi_k3_gets_no_count_by_name():
    # Kimi K3 (kimi_k3 wrapper, text kimi_linear) adds an MLA output gate, latent MoE, Attention
    # Residuals and a full-rank KDA gate, none of which transformers' KimiLinear builds: its
    # cache is read (tests/test_real_configs_round6.py), its parameters are refused by name.
    spec = spec_from_config(load(ROUND6 / "kimi-k3.json"))
    assert spec.params is None
    for name in ("mla_use_output_gate", "routed_expert_hidden_size", "attn_res_block_size"):
        assert name in spec.params_error
