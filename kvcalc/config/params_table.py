"""How each architecture builds the blocks the generic parameter counter (kvcalc.config.params)
adds up, by config.json's ``model_type``. A family missing here (and from the own counters of
kvcalc.config.params_own) gets no count, by name.

Each entry is checked against transformers 5.24's own model built on the meta device: at its
config class's defaults (the zoo, docs/zoo.md), with every boolean weight switch of the class
flipped and with every field left out that equals its class default
(tests/test_params_families.py), and on the real config files of tests/data/configs
(tests/test_params_zoo_real.py). The keys, all optional:

- ``tied_default``: the output head's tie when the config names none (the family's config
  class default; True unless said);
- ``learned_positions`` (with ``positions_offset``, OPT-style +2), ``head_bias`` (True or the
  field that turns the output head's bias on), ``embed_norm`` (a norm after the embedding);
- ``norm``: "rms" (a weight), "ln" (weight and bias) or "none" (no weights);
  ``norms_per_layer`` (2), ``final_norm`` (True), ``post_norms_field`` (two more per layer),
  ``parallel_norms_field`` (one per layer), ``moe_norm`` (one more in each MoE block);
- attention biases: ``qkv_bias`` (q, k, v always), ``attn_bias`` (q, k, v, o always),
  ``bias_field`` (the field turning on q, k, v, o biases: "attention_bias" unless said; None for
  none), ``qkv_bias_field`` and ``o_bias_field`` (q, k, v and o apart), ``bias`` (True or the
  field turning every projection's bias on, with LayerNorm biases);
- ``qk_norm``: True / "head" (RMSNorm of head_dim), "head_ln" (LayerNorm of head_dim), "full"
  (every head's channels), "head_l2" (weightless), switched by ``qk_norm_field``;
  ``qk_norm_full`` (MiniMax-M2's), ``sinks`` (True or the layer kind that has them),
  ``gated_q``, ``head_gate``, ``attn_out_gate``, ``attn_sub_norm``, ``diff_lambdas``, ``indexer``;
- the MLP: ``mlp`` "gated" (default) or "plain" (two matrices, ``mlp_width`` naming the width
  and ``mlp_default`` its multiple of hidden when absent), ``mlp_bias`` (True or the field),
  ``dense_width`` (a MoE model's dense layers' width), ``ffn_sub_norm``, ``xielu``;
- MoE: ``expert_width``, ``expert_bias``, ``shared_width`` (the shared MLP's width field),
  ``shared_count``, ``shared_expert_gate``, ``moe_layers`` ("ernie", "llama4"), ``score_bias``
  (True: DeepSeek-V3's rule on topk_method; "always"), ``no_score_bias``, ``routing_bias``;
- ``layers``: layer kinds beyond the generic ones; ``refuse``: why the family gets no count.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FAMILY_BLOCKS"]

_UNTIED = {"tied_default": False}
_SEQ2SEQ = (
    "an encoder-decoder family: a checkpoint holds the encoder and the decoder (with "
    "cross-attention in every decoder layer) or the decoder alone, which the config does not "
    "say; the parameter counter describes decoder-only models"
)

# DeepSeek-V3's config-class defaults of the fields only the count reads (DeepseekV3Config, and
# the DeepSeek-V3.2 / GLM-5 classes built on it)
_DEEPSEEK_V3 = {
    "n_routed_experts": 256,
    "moe_intermediate_size": 2048,
    "n_shared_experts": 1,
    "first_k_dense_replace": 3,
    "q_lora_rank": 1536,
}
_MOE_WIDTH = ("moe_intermediate_size",)

FAMILY_BLOCKS: dict[str, dict[str, Any]] = {
    "gpt2": {"mlp": "plain", "bias": True, "norm_bias": True, "learned_positions": True},
    # Falcon: parallel_attn true by default (FalconConfig): one norm a layer
    "falcon": {
        "mlp": "plain",
        "norm_bias": True,
        "bias": "bias",
        "falcon_norms": True,
        "defaults": {"parallel_attn": True},
    },
    "qwen2": {"qkv_bias": True, **_UNTIED},
    # Qwen2-MoE: q, k, v biases with qkv_bias (Qwen2MoeConfig's, true by default)
    "qwen2_moe": {
        "qkv_bias": ("qkv_bias", True),
        "shared_expert_gate": True,
        "expert_width": _MOE_WIDTH,
        "defaults": {
            "num_experts": 60,
            "moe_intermediate_size": 1408,
            "shared_expert_intermediate_size": 5632,
        },
        **_UNTIED,
    },
    # gpt-oss: q, k, v, o biases with attention_bias (GptOssConfig's, true by default)
    "gpt_oss": {
        "bias_field": ("attention_bias", True),
        "sinks": True,
        "expert_bias": True,
        "defaults": {"num_local_experts": 128},
        **_UNTIED,
    },
    "qwen3_next": {
        "gated_q": True,
        "qk_norm": True,
        "shared_expert_gate": True,
        "expert_width": _MOE_WIDTH,
        "defaults": {
            "num_experts": 512,
            "moe_intermediate_size": 512,
            "shared_expert_intermediate_size": 512,
        },
        **_UNTIED,
    },
    # Qwen3.5: Qwen3-Next's blocks (gated query, q/k norms, Gated DeltaNet, MoE with a shared
    # expert); checked against transformers 5.24 on the meta device (tests/test_params_qwen35.py)
    "qwen3_5_text": {"gated_q": True, "qk_norm": True, "shared_expert_gate": True, **_UNTIED},
    "qwen3_5_moe_text": {
        "gated_q": True,
        "qk_norm": True,
        "shared_expert_gate": True,
        "expert_width": _MOE_WIDTH,
        "defaults": {
            "num_experts": 256,
            "moe_intermediate_size": 512,
            "shared_expert_intermediate_size": 512,
        },
        **_UNTIED,
    },
    "qwen3": {"qk_norm": True, **_UNTIED},
    "qwen3_moe": {
        "qk_norm": True,
        "expert_width": _MOE_WIDTH,
        "defaults": {"num_experts": 128, "moe_intermediate_size": 768},
        **_UNTIED,
    },
    "gemma2": {"norms_per_layer": 4},
    "gemma3_text": {"norms_per_layer": 4, "qk_norm": True},
    "jamba": {
        "defaults": {"num_experts": 16, "expert_layer_period": 2, "expert_layer_offset": 1},
        **_UNTIED,
    },
    # score_bias: the router's e_score_correction_bias (params._score_bias says when)
    "deepseek_v3": {
        "score_bias": True,
        "expert_width": _MOE_WIDTH,
        "defaults": _DEEPSEEK_V3,
        **_UNTIED,
    },
    "deepseek_v2": {
        "no_score_bias": True,
        "expert_width": _MOE_WIDTH,
        "defaults": {
            "n_routed_experts": 64,
            "moe_intermediate_size": 1407,
            "n_shared_experts": 2,
            "q_lora_rank": 1536,
        },
        **_UNTIED,
    },
    # Kimi K2 / K2.5's language model is DeepSeek-V3's (vLLM serves kimi_k2 with
    # DeepseekV3ForCausalLM; transformers' kimi_k25 builds DeepseekV3 from the text config)
    "kimi_k2": {"score_bias": True, "expert_width": _MOE_WIDTH, **_UNTIED},
    # DeepSeek sparse attention: DeepSeek-V3's blocks plus the indexer's projections in every
    # layer (transformers' GlmMoeDsaIndexer and DeepseekV32Indexer: wq_b, wk, k_norm,
    # weights_proj)
    "deepseek_v32": {
        "indexer": True,
        "score_bias": True,
        "expert_width": _MOE_WIDTH,
        "defaults": _DEEPSEEK_V3,
        **_UNTIED,
    },
    "glm_moe_dsa": {
        "indexer": True,
        "score_bias": True,
        "expert_width": _MOE_WIDTH,
        "defaults": {**_DEEPSEEK_V3, "q_lora_rank": 2048},
        **_UNTIED,
    },
    # MiMo (7B): Qwen2's blocks (vLLM's mimo.py); its MTP layers are the drafter's, not counted
    "mimo": {"qkv_bias": True, **_UNTIED},
    # EXAONE 4 and EXAONE 4.5's language model: per-head q/k RMSNorms, and the two norms after
    # attention and after the MLP (Exaone4DecoderLayer)
    "exaone4": {"qk_norm": True, **_UNTIED},
    "exaone4_5_text": {"qk_norm": True, **_UNTIED},
    # MiniMax-M2: q/k RMSNorm over the whole projection (qk_norm_type "per_layer"), every layer
    # MoE, and the router's score-correction bias where use_routing_bias (vLLM's minimax_m2.py)
    "minimax_m2": {
        "qk_norm_full": True,
        "routing_bias": "use_routing_bias",
        "defaults": {"num_local_experts": 256},
        **_UNTIED,
    },
    # Llama: q, k, v, o biases with attention_bias, the MLP's with mlp_bias (LlamaAttention,
    # LlamaMLP)
    "llama": {"mlp_bias": "mlp_bias", **_UNTIED},
    "mistral": {**_UNTIED},
    "mixtral": {"defaults": {"num_local_experts": 8}, **_UNTIED},
    "phi3": {**_UNTIED},
}
