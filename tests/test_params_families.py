"""Parameter counts of the families the zoo's parameter check (kvcalc.measure.param_check) found
wrong or uncounted (issue 38, item 2: "a known cache never comes without its weights").

The oracle is transformers 5.24's own model built on the meta device (no weights, no download):
the sum of p.numel() over model.parameters() (a tied weight once), plus the router's
e_score_correction_bias where transformers keeps it as a buffer that the checkpoint and vLLM
keep as a weight (said where it is added). Hand derivations are written out where a family is
new; refusals are checked by the field they name. Real config files are in
tests/test_params_zoo_real.py; every architecture's class defaults in tests/test_zoo.py.
"""

from __future__ import annotations

import pytest

from kvcalc import spec_from_config

torch = pytest.importorskip("torch", reason="torch is not installed")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")


def build(model_type: str, **changes):
    """(config dict, transformers' parameters, e_score_correction_bias elements) of the causal
    LM of ``model_type``'s config class with ``changes``, on the meta device."""
    from transformers import AutoModelForCausalLM
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    conf = CONFIG_MAPPING[model_type](**changes)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(conf)
    params = sum(p.numel() for p in model.parameters())
    bias = sum(
        b.numel() for n, b in model.named_buffers() if n.endswith(".e_score_correction_bias")
    )
    cfg = conf.to_dict()
    cfg["model_type"] = model_type
    return cfg, params, bias


def kvcalc_count(cfg: dict) -> int:
    spec = spec_from_config(cfg)
    assert spec.params is not None, spec.params_error
    return spec.params.total


def refusal(cfg: dict) -> str:
    spec = spec_from_config(cfg)
    assert spec.params is None
    return spec.params_error or ""


# -- the router's score-correction bias --------------------------------------------------------


def test_deepseek_v3_class_defaults_count_the_score_bias_transformers_always_builds():
    # DeepseekV3Config() names no topk_method; DeepseekV3TopkRouter has the bias whatever it
    # says: 58 MoE layers (61 - first_k_dense_replace 3) x 256 experts
    cfg, params, bias = build("deepseek_v3")
    assert "topk_method" not in cfg and bias == 58 * 256
    assert kvcalc_count(cfg) == params + bias


def test_a_topk_method_the_engines_read_differently_is_refused():
    # vLLM's deepseek_v2.py makes the bias for "noaux_tc" only; transformers' DeepseekV3 always
    cfg, _, _ = build("deepseek_v3", num_hidden_layers=4)
    cfg["topk_method"] = "greedy"
    assert "topk_method" in refusal(cfg)


def test_deepseek_v2_never_counts_a_score_bias():
    # DeepSeek-V2's files name n_group and topk_method "group_limited_greedy"; transformers'
    # DeepseekV2Moe has no score-correction bias (before: counted for any topk_method)
    cfg, params, bias = build(
        "deepseek_v2",
        num_hidden_layers=3,
        num_experts_per_tok=6,
        n_group=8,
        topk_group=3,
        topk_method="group_limited_greedy",
    )
    assert bias == 0
    assert kvcalc_count(cfg) == params
    cfg["topk_method"] = "noaux_tc"  # vLLM would add one, transformers not
    assert "topk_method" in refusal(cfg)


def test_minimax_m2_without_use_routing_bias_counts_the_bias_transformers_builds():
    cfg, params, bias = build("minimax_m2", num_hidden_layers=3)
    assert "use_routing_bias" not in cfg and bias == 3 * cfg["num_local_experts"]
    assert kvcalc_count(cfg) == params + bias


# -- Kimi-Linear's MoE layers and Nemotron-H's block names at their class defaults -------------


def test_kimi_linear_reads_mlp_layer_types():
    # KimiLinearConfig() writes mlp_layer_types (layer 0 dense, 26 sparse) and no
    # first_k_dense_replace; before, every layer was counted MoE (+1,755,906,304)
    cfg, params, bias = build("kimi_linear")
    assert cfg["mlp_layer_types"].count("sparse") == 26 and bias == 26 * 256
    assert kvcalc_count(cfg) == params + bias


def test_kimi_linear_dense_layers_the_engines_read_differently_are_refused():
    cfg, _, _ = build("kimi_linear", num_hidden_layers=4)
    cfg["first_k_dense_replace"] = 2  # vLLM: 2 dense layers; mlp_layer_types says 1
    assert "mlp_layer_types" in refusal(cfg)
    del cfg["mlp_layer_types"]
    del cfg["first_k_dense_replace"]  # transformers takes 1 dense layer, vLLM 0
    assert "first_k_dense_replace" in refusal(cfg)


def test_nemotron_h_reads_transformers_block_names():
    # NemotronHConfig() writes layers_block_type as linear_attention / moe / full_attention /
    # mlp (before: refused, only mamba / attention were known)
    cfg, params, bias = build("nemotron_h")
    assert cfg["layers_block_type"] == ["linear_attention", "moe", "full_attention", "mlp"]
    assert kvcalc_count(cfg) == params + bias


# -- MiniMax-M1: transformers ships MiniMax-Text-01's class, not minimax_m1 ----------------------


def test_minimax_m1_equals_transformers_minimax_built_from_its_file():
    # transformers has no minimax_m1 model_type; its MiniMaxForCausalLM is MiniMax-Text-01's
    # architecture, which M1 shares (vLLM serves both with MiniMaxText01ForCausalLM): the same
    # file built as model_type "minimax" on the meta device is the oracle. 80 layers: lightning
    # attention (qkv_proj, out_proj, output_gate, norm) and every 8th softmax attention, 32
    # experts of 9,216 in every layer, untied.
    import json

    from conftest import ROOT
    from transformers import AutoModelForCausalLM, MiniMaxConfig

    cfg = json.loads((ROOT / "tests/data/configs/minimax-m1.json").read_text())
    assert cfg["model_type"] == "minimax_m1" and cfg["shared_intermediate_size"] == 0
    # MiniMaxConfig reads layer_types, not the file's attn_type_list (0 lightning, 1 softmax);
    # without the translation it would build its default alternation instead of every 8th
    kinds = ["full_attention" if t else "linear_attention" for t in cfg["attn_type_list"]]
    assert kinds.count("full_attention") == 10
    fields = {k: v for k, v in cfg.items() if k not in ("model_type", "attn_type_list")}
    conf = MiniMaxConfig(**fields, layer_types=kinds)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(conf)
    params = sum(p.numel() for p in model.parameters())
    assert kvcalc_count(cfg) == params
    shared = dict(cfg, shared_intermediate_size=1024)  # vLLM builds it, transformers not
    assert "shared_intermediate_size" in refusal(shared)


def test_minimax_lightning_layer_by_hand():
    # one lightning layer of MiniMax-M1 (hidden 6,144, 64 heads x 128 = 8,192): qkv_proj
    # 6,144 x 24,576, out_proj 8,192 x 6,144, output_gate 6,144 x 8,192, norm 8,192
    from kvcalc.config.fields import Fields
    from kvcalc.config.params.blocks import state_params

    class Lightning:
        flavor = "lightning"

    f = Fields({"num_attention_heads": 64, "head_dim": 128}, {})
    by_hand = 6144 * 24576 + 8192 * 6144 + 6144 * 8192 + 8192
    assert state_params(f, 6144, Lightning()) == by_hand == 251_666_432


# -- LFM2-MoE: its class defaults name no layer_types, so transformers cannot build them --------


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"use_expert_bias": False, "conv_bias": True, "num_dense_layers": 0},
        {"tie_word_embeddings": False, "num_dense_layers": 5},
    ],
    ids=["lfm2-8b-a1b-like", "no-expert-bias", "untied"],
)
def test_lfm2_moe_equals_transformers_with_its_layers_named(changes):
    # Lfm2MoeConfig() has layer_types None and cannot build (the zoo: cannot build); with 24
    # layers of which 6 attention (LFM2-8B-A1B's size) it can. Oracle: its parameters plus the
    # expert_bias buffers (vLLM's lfm2_moe.py loads them as the router's bias).
    from transformers import AutoModelForCausalLM, Lfm2MoeConfig

    kinds = ["full_attention" if i in (2, 6, 10, 14, 18, 21) else "conv" for i in range(24)]
    conf = Lfm2MoeConfig(num_hidden_layers=24, layer_types=kinds, **changes)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(conf)
    params = sum(p.numel() for p in model.parameters())
    bias = sum(b.numel() for n, b in model.named_buffers() if n.endswith(".expert_bias"))
    cfg = conf.to_dict()
    cfg["model_type"] = "lfm2_moe"
    assert kvcalc_count(cfg) == params + bias
    assert bias == (
        0 if changes.get("use_expert_bias") is False else 32 * (24 - conf.num_dense_layers)
    )


# -- ChatGLM: transformers ships no chatglm (remote code); the oracle is vLLM's chatglm.py -------


def test_chatglm3_6b_params_by_hand():
    # THUDM/chatglm3-6b (tests/data/configs/chatglm3-6b.json), as vLLM's chatglm.py builds it:
    # embedding and output_layer of padded_vocab_size 65,024 x 4,096 (untied); every one of 28
    # GLMBlocks: query_key_value 4,096 x (32 heads + 2 x 2 multi-query groups) x 128 with its
    # bias (add_qkv_bias), dense 4,096 x 4,096 (add_bias_linear false: no bias), dense_h_to_4h
    # 4,096 x 2 x 13,696 and dense_4h_to_h 13,696 x 4,096, two RMSNorms; the final RMSNorm
    # (post_layer_norm). 6,243,584,000: the "6.24B" THUDM publishes.
    import json

    from conftest import ROOT

    qkv = 4096 * (32 + 2 * 2) * 128 + (32 + 2 * 2) * 128
    layer = qkv + 4096 * 4096 + 4096 * 2 * 13696 + 13696 * 4096 + 2 * 4096
    by_hand = 2 * 65024 * 4096 + 28 * layer + 4096
    assert by_hand == 6_243_584_000
    cfg = json.loads((ROOT / "tests/data/configs/chatglm3-6b.json").read_text())
    assert kvcalc_count(cfg) == by_hand


# -- families whose class defaults the cache reader or transformers cannot take ----------------


def _count_of(conf, model_type: str) -> tuple[dict, int]:
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(conf)
    params = sum(p.numel() for p in model.parameters())
    params += sum(
        b.numel() for n, b in model.named_buffers() if n.endswith(".e_score_correction_bias")
    )
    cfg = conf.to_dict()
    cfg["model_type"] = model_type
    return cfg, params


@pytest.mark.parametrize("qk_norm", [False, True])
def test_glm4_moe_with_its_head_dim_given(qk_norm):
    # Glm4MoeConfig() has 96 heads over hidden 4,096 and no head_dim, which kvcalc's cache
    # reader refuses; GLM-4.5-Air's geometry (head_dim 128, q/k/v biases, 46 layers, the first
    # dense, 128 experts + 1 shared of 1,408) reads, and counts as transformers builds it
    from transformers import Glm4MoeConfig

    conf = Glm4MoeConfig(head_dim=128, attention_bias=True, use_qk_norm=qk_norm)
    cfg, params = _count_of(conf, "glm4_moe")
    assert kvcalc_count(cfg) == params


def test_dots1_with_its_experts_given():
    # Dots1Config() names no experts and cannot build; dots.llm1's (128 routed of 1,408, 2
    # shared, top 6, the first layer dense) can
    from transformers import Dots1Config

    conf = Dots1Config(
        n_routed_experts=128, n_shared_experts=2, num_experts_per_tok=6, first_k_dense_replace=1
    )
    cfg, params = _count_of(conf, "dots1")
    assert kvcalc_count(cfg) == params


def test_dbrx_with_its_rope_base_given():
    # DbrxConfig()'s attn_config lacks rope_theta and transformers 5.24 cannot build it; DBRX's
    # own geometry (6,144 wide, 48 heads, 8 K/V heads, 16 experts of 10,752, top 4) builds
    from transformers import DbrxConfig

    conf = DbrxConfig(
        d_model=6144,
        n_heads=48,
        n_layers=4,
        vocab_size=100352,
        max_seq_len=32768,
        attn_config={"kv_n_heads": 8, "rope_theta": 500000, "clip_qkv": 8},
        ffn_config={"ffn_hidden_size": 10752, "moe_num_experts": 16, "moe_top_k": 4},
    )
    cfg, params = _count_of(conf, "dbrx")
    assert kvcalc_count(cfg) == params
    # DbrxConfig refuses tie_word_embeddings true ("not supported for DBRX models"): so does
    # the count
    assert "tie_word_embeddings" in refusal({**cfg, "tie_word_embeddings": True})
