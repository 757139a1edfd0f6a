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
  ``gated_q``, ``head_gate``, ``attn_out_gate`` (Beam's, with a per-head bias), ``out_gate``
  (AFMoE's, without), ``attn_sub_norm``, ``diff_lambdas``, ``indexer``;
- the MLP: ``mlp`` "gated" (default) or "plain" (two matrices, ``mlp_width`` naming the width
  and ``mlp_default`` its multiple of hidden when absent), ``mlp_bias`` (True or the field),
  ``dense_width`` (a MoE model's dense layers' width), ``ffn_sub_norm``, ``xielu``;
- MoE: ``expert_width``, ``expert_bias``, ``shared_width`` (the shared MLP's width field),
  ``shared_count``, ``shared_expert_gate``, ``shared_bias`` (True or the field),
  ``moe_layers`` ("ernie", "llama4"), ``first_dense_field`` (a field naming how many leading
  layers are dense), ``score_bias`` (True: DeepSeek-V3's rule on topk_method; "always"),
  ``no_score_bias``, ``routing_bias``;
- ``layers``: layer kinds beyond the generic ones ("cross": Mllama's), ``states``: recurrent
  flavours beyond Mamba-1 and Gated DeltaNet ("lightning": MiniMax's), ``extra_vocab``:
  embedding rows beyond the head's, ``must_be_zero``: fields the count refuses unless 0 (with
  why), ``refuse``: why the family gets no count;
- ``defaults``: the config-class defaults of fields only the count reads, used where a file
  leaves them out (a switch given as ("field", True) defaults to true likewise).

Longer than the 600 lines of CONTRIBUTING.md's limit on purpose: it is one table of data, an
entry and the comment naming its source for each family, read in one place.
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

# -- families added with the zoo's parameter check: each against transformers 5.24's modeling
# file of the same name on the meta device (class defaults, switches, defaults left out) -------
_LLAMA_LIKE = {"mlp_bias": "mlp_bias", **_UNTIED}

FAMILY_BLOCKS.update(
    {
        # Llama's blocks (LlamaForCausalLM or a copy of it): q, k, v, o biases with
        # attention_bias, the MLP's with mlp_bias
        "granite": dict(_LLAMA_LIKE),  # muP multipliers are scalars, no weights
        # Helium: q, k, v biases with attention_bias (no o bias)
        "helium": {
            "bias_field": None,
            "qkv_bias_field": "attention_bias",
            "mlp_bias": "mlp_bias",
            **_UNTIED,
        },
        "internlm3": dict(_LLAMA_LIKE),
        "iquestcoder": dict(_LLAMA_LIKE),
        "exaone": dict(_LLAMA_LIKE),
        "cwm": dict(_LLAMA_LIKE),
        "smollm3": {"mlp_bias": "mlp_bias"},  # NoPE layers rotate nothing: no weights
        "emu3_text_model": {**_UNTIED},
        "ministral3": {**_UNTIED},
        "gemma": {},  # tied by default (GemmaConfig)
        # VaultGemma: two RMSNorms a layer (input, pre-feed-forward)
        "vaultgemma": {},
        # Granite SWA: Llama's blocks with attention sinks in every layer, tied by default
        "granite_swa": {"mlp_bias": "mlp_bias", "sinks": True},
        # Seed-OSS: q, k, v biases with attention_bias, the o bias with attention_out_bias
        "seed_oss": {
            "bias_field": None,
            "qkv_bias_field": ("attention_bias", True),
            "o_bias_field": "attention_out_bias",
            "mlp_bias": "mlp_bias",
            **_UNTIED,
        },
        # HyperCLOVA X: Granite's blocks with two more RMSNorms a layer with use_post_norm
        "hyperclovax": {
            "mlp_bias": "mlp_bias",
            "post_norms_field": "use_post_norm",
            "defaults": {"use_post_norm": True},
            **_UNTIED,
        },
        # GLM and GLM-4: q, k, v biases with attention_bias (no o bias), gate and up fused;
        # GLM-4 adds post_self_attn_layernorm and post_mlp_layernorm
        "glm": {"bias_field": None, "qkv_bias_field": ("attention_bias", True), **_UNTIED},
        "glm4": {
            "bias_field": None,
            "qkv_bias_field": ("attention_bias", True),
            "norms_per_layer": 4,
            **_UNTIED,
        },
        # ERNIE 4.5: every projection's bias with use_bias, tied by default
        "ernie4_5": {"bias_field": "use_bias", "mlp_bias": "use_bias"},
        # OLMo: LayerNorms without weights (OlmoLayerNorm), none at the end either
        "olmo": {"norm": "none", "final_norm": False, **_UNTIED},
        # OLMo 2 / 3: q and k RMSNorms over the whole projections, norms after attention and
        # after the MLP
        "olmo2": {"qk_norm": "full", **_UNTIED},
        "olmo3": {"qk_norm": "full", **_UNTIED},
        # nanochat: weightless RMSNorms, a plain ReLU^2 MLP (fc1, fc2)
        "nanochat": {
            "norm": "none",
            "final_norm": False,
            "mlp": "plain",
            "mlp_width": ("intermediate_size",),
            "mlp_default": None,
            **_UNTIED,
        },
        # Arcee: a plain ReLU^2 MLP (up, down) with mlp_bias
        "arcee": {
            "mlp": "plain",
            "mlp_width": ("intermediate_size",),
            "mlp_default": None,
            "mlp_bias": "mlp_bias",
            **_UNTIED,
        },
        # Jais 2: LayerNorms with biases, a plain ReLU^2 MLP with mlp_bias
        "jais2": {
            "norm": "ln",
            "mlp": "plain",
            "mlp_width": ("intermediate_size",),
            "mlp_default": None,
            "mlp_bias": ("mlp_bias", True),
            "bias_field": ("attention_bias", True),
            **_UNTIED,
        },
        # Apertus: q/k RMSNorms, a plain xIELU MLP (two scalars of its own a layer)
        "apertus": {
            "qk_norm": True,
            "mlp": "plain",
            "mlp_width": ("intermediate_size",),
            "mlp_default": None,
            "xielu": True,
            **_UNTIED,
        },
        "apertus1p5_text": {
            "qk_norm": True,
            "mlp": "plain",
            "mlp_width": ("intermediate_size",),
            "mlp_default": None,
            "xielu": True,
            **_UNTIED,
        },
        # BitNet: RMSNorms before o_proj and before down_proj
        "bitnet": {"attn_sub_norm": True, "ffn_sub_norm": True, **_UNTIED},
        # DiffLlama: four lambda vectors of head_dim a layer
        "diffllama": {"diff_lambdas": True, **_UNTIED},
        # Cohere (Command R): one LayerNorm a layer (weight only), q/k norms over every head's
        # channels with use_qk_norm, tied by default; Cohere 2 the same without q/k norms
        "cohere": {"norms_per_layer": 1, "qk_norm": "full", "qk_norm_field": "use_qk_norm"},
        "cohere2": {"norms_per_layer": 1},
        # Starcoder2: LayerNorms with biases, a plain MLP, every projection's bias with use_bias
        "starcoder2": {
            "norm": "ln",
            "mlp": "plain",
            "mlp_width": ("intermediate_size",),
            "mlp_default": None,
            "bias_field": ("use_bias", True),
            "mlp_bias": ("use_bias", True),
        },
        # StableLM: LayerNorms with biases, q, k, v biases with use_qkv_bias, per-head q/k
        # LayerNorms (no bias) with qk_layernorm, one norm a layer with use_parallel_residual
        "stablelm": {
            "norm": "ln",
            "bias_field": None,
            "qkv_bias_field": "use_qkv_bias",
            "qk_norm": "full",
            "qk_norm_field": "qk_layernorm",
            "parallel_norms_field": "use_parallel_residual",
            **_UNTIED,
        },
        # Phi (1, 1.5, 2): one LayerNorm a layer, biased projections and MLP, the output head's
        # bias, q/k LayerNorms of head_dim with qk_layernorm
        "phi": {
            "norm": "ln",
            "norms_per_layer": 1,
            "attn_bias": True,
            "mlp": "plain",
            "mlp_width": ("intermediate_size",),
            "mlp_default": None,
            "mlp_bias": True,
            "head_bias": True,
            "qk_norm": "head_ln",
            "qk_norm_field": "qk_layernorm",
            **_UNTIED,
        },
        # Persimmon (and Fuyu's language model): as Phi with two LayerNorms a layer, q/k
        # LayerNorms with qk_layernorm (true by default), no head bias
        "persimmon": {
            "norm": "ln",
            "attn_bias": True,
            "mlp": "plain",
            "mlp_width": ("intermediate_size",),
            "mlp_default": None,
            "mlp_bias": True,
            "qk_norm": "head_ln",
            "qk_norm_field": "qk_layernorm",
            "defaults": {"qk_layernorm": True},
            **_UNTIED,
        },
        # GPT-NeoX (Pythia): LayerNorms with biases, q, k, v, o biases with attention_bias
        # (true by default), a plain biased MLP
        "gpt_neox": {
            "norm": "ln",
            "bias_field": ("attention_bias", True),
            "mlp": "plain",
            "mlp_width": ("intermediate_size",),
            "mlp_default": None,
            "mlp_bias": True,
            **_UNTIED,
        },
        # GPT-J and CodeGen: one LayerNorm a layer, unbiased attention, a plain biased MLP of
        # n_inner (4 x hidden when null), the output head's bias
        "gptj": {
            "norm": "ln",
            "norms_per_layer": 1,
            "bias_field": None,
            "mlp": "plain",
            "mlp_width": ("n_inner",),
            "mlp_bias": True,
            "head_bias": True,
            **_UNTIED,
        },
        "codegen": {
            "norm": "ln",
            "norms_per_layer": 1,
            "bias_field": None,
            "mlp": "plain",
            "mlp_width": ("n_inner",),
            "mlp_bias": True,
            "head_bias": True,
            **_UNTIED,
        },
        # CTRL: biased attention and MLP (dff wide), LayerNorms with biases, a tied head with
        # its own bias; sinusoidal positions (a buffer)
        "ctrl": {
            "norm": "ln",
            "attn_bias": True,
            "mlp": "plain",
            "mlp_width": ("dff",),
            "defaults": {"dff": 8192},
            "mlp_bias": True,
            "head_bias": True,
        },
        # BLOOM: a LayerNorm after the embedding, biased attention and MLP (4 x hidden)
        "bloom": {
            "norm": "ln",
            "embed_norm": True,
            "attn_bias": True,
            "mlp": "plain",
            "mlp_width": ("n_inner",),
            "mlp_bias": True,
        },
        # GPT-BigCode (StarCoder 1): GPT-2's blocks with multi-query attention
        "gpt_bigcode": {
            "mlp": "plain",
            "mlp_width": ("n_inner",),
            "bias": True,
            "norm_bias": True,
            "learned_positions": True,
        },
        # BioGPT: learned positions with OPT's offset of 2, biased attention and MLP
        "biogpt": {
            "norm": "ln",
            "attn_bias": True,
            "mlp": "plain",
            "mlp_width": ("intermediate_size",),
            "mlp_default": None,
            "mlp_bias": True,
            "learned_positions": True,
            "positions_offset": 2,
        },
        # XGLM: sinusoidal positions (a buffer), biased attention and MLP of ffn_dim
        "xglm": {
            "norm": "ln",
            "attn_bias": True,
            "mlp": "plain",
            "mlp_width": ("ffn_dim",),
            "mlp_default": None,
            "mlp_bias": True,
        },
        # Phi-3.5-MoE: LayerNorms with biases, experts of intermediate_size, the output head's
        # bias with lm_head_bias
        "phimoe": {
            "norm": "ln",
            "head_bias": "lm_head_bias",
            "defaults": {"num_local_experts": 16},
            **_UNTIED,
        },
        # OLMoE and FlexOlmo: OLMo 2's q/k norms, experts of intermediate_size
        "olmoe": {"qk_norm": "full", "defaults": {"num_experts": 64}, **_UNTIED},
        "flex_olmo": {"qk_norm": "full", "defaults": {"num_experts": 7}, **_UNTIED},
        # Granite MoE: experts of intermediate_size; GraniteMoeShared and Granite MoE SWA add a
        # shared MLP of shared_intermediate_size (none at 0), SWA attention sinks
        "granitemoe": {"defaults": {"num_local_experts": 8}, **_UNTIED},
        "granitemoeshared": {
            "shared_width": "shared_intermediate_size",
            "defaults": {"num_local_experts": 8},
            **_UNTIED,
        },
        "granitemoe_swa": {
            "sinks": True,
            "shared_width": "shared_intermediate_size",
            "defaults": {"num_local_experts": 8},
            **_UNTIED,
        },
        # Aria's language model: experts of intermediate_size, moe_num_shared_experts of it
        # (biased with mlp_bias, the experts not)
        "aria_text": {
            "shared_bias": "mlp_bias",
            "defaults": {"moe_num_experts": 8, "moe_num_shared_experts": 2},
            **_UNTIED,
        },
        # ERNIE 4.5 MoE: MoE layers from moe_layer_start_index to moe_layer_end_index every
        # moe_layer_interval, the router's score-correction bias (a parameter, moe_statics);
        # use_bias also biases the shared experts and the output head
        "ernie4_5_moe": {
            "bias_field": "use_bias",
            "mlp_bias": "use_bias",
            "moe_layers": "ernie",
            "expert_width": _MOE_WIDTH,
            "score_bias": "always",
            "shared_bias": "use_bias",
            "head_bias": "use_bias",
            "defaults": {
                "moe_num_experts": 64,
                "moe_intermediate_size": 1536,
                "moe_num_shared_experts": 2,
                "moe_layer_start_index": 1,
            },
        },
    }
)

FAMILY_BLOCKS.update(
    {
        # Kolibri: q/k RMSNorms, four norms a layer, experts (with the score-correction bias)
        # and a shared MLP of shared_expert_intermediate_size (no gate) in every layer
        "kolibri1": {
            "qk_norm": True,
            "norms_per_layer": 4,
            "expert_width": _MOE_WIDTH,
            "score_bias": "always",
            "defaults": {
                "num_local_experts": 384,
                "moe_intermediate_size": 512,
                "shared_expert_intermediate_size": 512,
            },
            **_UNTIED,
        },
        # Mellum: q/k RMSNorms, MoE by mlp_layer_types
        "mellum": {
            "qk_norm": True,
            "expert_width": _MOE_WIDTH,
            "defaults": {"num_local_experts": 64, "moe_intermediate_size": 896},
            **_UNTIED,
        },
        # Flint: sinks, q/k RMSNorms, experts and an ungated shared MLP, dense mlp_only_layers
        "flint": {
            "sinks": True,
            "qk_norm": True,
            "expert_width": _MOE_WIDTH,
            "defaults": {
                "num_experts": 256,
                "moe_intermediate_size": 512,
                "shared_expert_intermediate_size": 1024,
                "mlp_only_layers": [0, 1],
            },
            **_UNTIED,
        },
        # Solar Open: every layer MoE with n_shared_experts and the score-correction bias
        "solar_open": {
            "expert_width": _MOE_WIDTH,
            "score_bias": "always",
            "bias_field": None,
            "qkv_bias_field": "attention_bias",
            "defaults": {
                "n_routed_experts": 128,
                "moe_intermediate_size": 1280,
                "n_shared_experts": 1,
            },
            **_UNTIED,
        },
        # Hunyuan 3 (hy_v3): q/k RMSNorms, MoE by mlp_layer_types with num_shared_experts and
        # the score-correction bias
        "hy_v3": {
            "qk_norm": True,
            "mlp_bias": "mlp_bias",
            "shared_bias": "mlp_bias",
            "expert_width": _MOE_WIDTH,
            "score_bias": "always",
            "defaults": {
                "num_experts": 192,
                "moe_intermediate_size": 1536,
                "num_shared_experts": 1,
                "first_k_dense_replace": 1,
            },
            **_UNTIED,
        },
        # EXAONE MoE: q/k RMSNorms, MoE by mlp_layer_types (first_k_dense_replace agreeing)
        "exaone_moe": {
            "qk_norm": True,
            "expert_width": _MOE_WIDTH,
            "score_bias": "always",
            "defaults": {
                "num_experts": 64,
                "moe_intermediate_size": 1024,
                "num_shared_experts": 1,
                "first_k_dense_replace": 1,
            },
            **_UNTIED,
        },
        # Sarvam-M (MLA): DeepSeek-V3's blocks (transformers builds DeepseekV3ForCausalLM)
        "sarvam_mla": {
            "score_bias": True,
            "expert_width": _MOE_WIDTH,
            "defaults": {
                "n_routed_experts": 128,
                "moe_intermediate_size": 2048,
                "n_shared_experts": 1,
                "first_k_dense_replace": 1,
            },
            **_UNTIED,
        },
        # Sarvam MoE: GLM-4-MoE's blocks (Glm4MoeForCausalLM): q, k, v biases with
        # attention_bias, q/k RMSNorms with use_qk_norm, the score-correction bias
        "sarvam_moe": {
            "bias_field": None,
            "qkv_bias_field": "attention_bias",
            "qk_norm": True,
            "qk_norm_field": "use_qk_norm",
            "expert_width": _MOE_WIDTH,
            "score_bias": "always",
            "defaults": {
                "n_routed_experts": 128,
                "moe_intermediate_size": 1024,
                "n_shared_experts": 1,
                "first_k_dense_replace": 1,
                "use_qk_norm": True,
            },
            **_UNTIED,
        },
        # Youtu and MiniCPM3: MLA with a dense MLP, tied by default
        "youtu": {"defaults": {"q_lora_rank": 1536}},
        "minicpm3": {"mlp_bias": "mlp_bias", "defaults": {"q_lora_rank": 768}},
        # A.X K1: DeepSeek-V3's blocks with one more RMSNorm in each MoE block
        "axk1": {
            "score_bias": True,
            "moe_norm": True,
            "expert_width": _MOE_WIDTH,
            "defaults": {
                "n_routed_experts": 192,
                "moe_intermediate_size": 2048,
                "n_shared_experts": 1,
                "first_k_dense_replace": 1,
                "q_lora_rank": 1536,
            },
            **_UNTIED,
        },
        # Beam: an output gate of q width with a per-head bias, q/k RMSNorms, four norms a
        # layer, MoE by mlp_layer_types with the score-correction bias
        "beam": {
            "attn_out_gate": True,
            "qk_norm": True,
            "norms_per_layer": 4,
            "expert_width": _MOE_WIDTH,
            "score_bias": "always",
            "defaults": {
                "num_experts": 256,
                "moe_intermediate_size": 2560,
                "first_k_dense_replace": 3,
            },
            **_UNTIED,
        },
        # MiMo-V2-Flash: sinks on the sliding layers, per-layer K/V heads, V narrower than K,
        # MoE by mlp_layer_types with the score-correction bias
        "mimo_v2_flash": {
            "sinks": "sliding",
            "bias_field": None,
            "qkv_bias_field": "attention_bias",
            "expert_width": _MOE_WIDTH,
            "score_bias": True,
            "defaults": {
                "n_routed_experts": 256,
                "moe_intermediate_size": 2048,
                "first_k_dense_replace": 1,
            },
            **_UNTIED,
        },
        # Laguna: a gate per query head with gating (true by default), q/k RMSNorms, per-layer
        # query heads, MoE by mlp_layer_types with an ungated shared MLP and the
        # score-correction bias (a parameter)
        "laguna": {
            "head_gate": "gating",
            "qk_norm": True,
            "expert_width": _MOE_WIDTH,
            "score_bias": "always",
            "defaults": {
                "num_experts": 256,
                "moe_intermediate_size": 512,
                "shared_expert_intermediate_size": 512,
                "first_k_dense_replace": 1,
            },
            **_UNTIED,
        },
        # Lara Mini: Gated DeltaNet and attention layers with q/k RMSNorms, experts and an
        # ungated shared MLP in every layer, tied by default
        "lara_mini": {
            "qk_norm": True,
            "expert_width": _MOE_WIDTH,
            "defaults": {
                "num_experts": 128,
                "moe_intermediate_size": 512,
                "shared_expert_intermediate_size": 512,
            },
        },
        # OLMo Hybrid: OLMo 3's attention layers and Gated DeltaNet layers (q, k, v, a, b, g
        # projections apart: Qwen3-Next's counts)
        "olmo_hybrid": {"qk_norm": "full", **_UNTIED},
        # Llama 4's language model: MoE layers by moe_layers (or interleave_moe_layer_step),
        # experts of intermediate_size with one shared expert, dense layers of
        # intermediate_size_mlp, weightless L2 q/k norms
        "llama4_text": {
            "moe_layers": "llama4",
            "expert_width": ("intermediate_size",),
            "dense_width": ("intermediate_size_mlp",),
            "shared_count": 1,
            "qk_norm": "head_l2",
            "defaults": {"num_local_experts": 16},
            **_UNTIED,
        },
    }
)

FAMILY_BLOCKS.update(
    {
        # Language models of vision wrappers, read from text_config (the wrapper's
        # tie_word_embeddings decides the head: kvcalc.config.params_head)
        "qwen2_vl_text": {"qkv_bias": True, **_UNTIED},
        "qwen2_5_vl_text": {"qkv_bias": True, **_UNTIED},
        "qwen3_vl_text": {"qk_norm": True, **_UNTIED},
        # Qwen3-VL-MoE: experts of moe_intermediate_size in every layer (decoder_sparse_step),
        # tied in its text config class, untied by its wrapper's default
        "qwen3_vl_moe_text": {
            "qk_norm": True,
            "expert_width": _MOE_WIDTH,
            "defaults": {"num_local_experts": 60, "moe_intermediate_size": 1408},
        },
        # Cosmos 3 Edge: a plain ReLU^2 MLP (fc1, fc2) with mlp_bias
        "cosmos3_edge_text": {
            "mlp": "plain",
            "mlp_width": ("intermediate_size",),
            "mlp_default": None,
            "mlp_bias": "mlp_bias",
            **_UNTIED,
        },
        # GLM-OCR: GLM-4's four norms a layer, no attention biases (GlmOcrTextAttention)
        "glm_ocr_text": {"bias_field": None, "norms_per_layer": 4, **_UNTIED},
        # Granite Docling: Granite's blocks, tied by default
        "granite_docling_text": {"mlp_bias": "mlp_bias"},
    }
)

# Encoder-decoder families whose decoder the cache reader reads: a checkpoint's weights are the
# encoder's and the decoder's (cross-attention in every decoder layer), or a decoder-only
# XForCausalLM's, which the config does not say (transformers' BartForCausalLM keeps the
# cross-attention weights it never runs): refused by name.
FAMILY_BLOCKS.update(
    {
        t: {"refuse": _SEQ2SEQ}
        for t in (
            "bart",
            "mbart",
            "blenderbot",
            "blenderbot-small",
            "marian",
            "pegasus",
            "plbart",
            "mvp",
            "trocr",
        )
    }
)

FAMILY_BLOCKS.update(
    {
        # MiniMax-Text-01 / MiniMax-M1: lightning-attention and softmax-attention layers, every
        # layer MoE (experts of intermediate_size); transformers' MiniMax builds no shared
        # expert, vLLM's minimax_text_01.py one of shared_intermediate_size: refused unless 0
        "minimax": {
            "states": ("lightning",),
            "must_be_zero": {
                "shared_intermediate_size": "vLLM's minimax_text_01.py builds a shared expert of "
                "that width, transformers' MiniMax none"
            },
            "defaults": {"num_local_experts": 8},
            **_UNTIED,
        },
        "minimax_m1": {
            "states": ("lightning",),
            "must_be_zero": {
                "shared_intermediate_size": "vLLM's minimax_text_01.py builds a shared expert of "
                "that width, transformers' MiniMax none"
            },
            **_UNTIED,
        },
        # Llama 3.2 Vision's language model: Llama's layers and, at cross_attention_layers,
        # cross-attention over the image (q/k norms, two gates); 8 more embedding rows
        "mllama_text_model": {"layers": ("cross",), "extra_vocab": 8, **_UNTIED},
        # Phi-4-multimodal's language model: Phi-3's blocks (its vision and audio embedders,
        # kept inside its model, are not counted)
        "phi4_multimodal": {**_UNTIED},
    }
)

# Families whose readers came with the zoo's families round (kvcalc.config.family_table)
_GLM4_MOE = {
    "bias_field": None,
    "qkv_bias_field": "attention_bias",
    "qk_norm": True,
    "qk_norm_field": "use_qk_norm",
    "expert_width": _MOE_WIDTH,
    "score_bias": "always",
    "defaults": {
        "n_routed_experts": 128,
        "moe_intermediate_size": 1408,
        "n_shared_experts": 1,
        "first_k_dense_replace": 1,
    },
    **_UNTIED,
}
FAMILY_BLOCKS.update(
    {
        # GLM-4.5 / 4.6 / 4.7 (Glm4MoeForCausalLM): q, k, v biases with attention_bias, q/k
        # RMSNorms with use_qk_norm, experts with n_shared_experts and the score-correction
        # bias after first_k_dense_replace dense layers (its MTP layer is the drafter's)
        "glm4_moe": dict(_GLM4_MOE),
        # GLM-4.5V's language model: GLM-4.5's blocks without q/k norms, q/k/v biased with
        # attention_bias (true by default)
        "glm4v_moe_text": {
            **_GLM4_MOE,
            "qkv_bias_field": ("attention_bias", True),
            "qk_norm": None,
        },
        # GLM-4.1V's language model: GLM-4's blocks (q, k, v biases always, four norms)
        "glm4v_text": {"qkv_bias": True, "norms_per_layer": 4, **_UNTIED},
        # GLM-4.7-Flash (Glm4MoeLiteForCausalLM): DeepSeek-V3's MLA and MoE by mlp_layer_types
        # with the score-correction bias
        "glm4_moe_lite": {
            "expert_width": _MOE_WIDTH,
            "score_bias": "always",
            "defaults": {
                "n_routed_experts": 64,
                "moe_intermediate_size": 1536,
                "n_shared_experts": 1,
                "first_k_dense_replace": 1,
                "q_lora_rank": 768,
            },
            **_UNTIED,
        },
        # dots.llm1 (Dots1ForCausalLM): Qwen3's attention, DeepSeek-V3's MoE with the
        # score-correction bias
        "dots1": {"qk_norm": True, "expert_width": _MOE_WIDTH, "score_bias": "always", **_UNTIED},
        # Command A MoE (Cohere2MoeForCausalLM): one LayerNorm a layer (weight only), experts
        # and num_shared_experts shared ones of intermediate_size, dense layers (mlp_layer_types,
        # else the first first_k_dense_replace) of prefix_dense_intermediate_size; tied
        "cohere2_moe": {
            "norms_per_layer": 1,
            "expert_width": ("intermediate_size",),
            "dense_width": ("prefix_dense_intermediate_size",),
            "defaults": {"num_experts": 8, "first_k_dense_replace": 0},
        },
        # AFMoE (Arcee Trinity): an unbiased output gate of q width, q/k RMSNorms, four norms a
        # layer, experts with num_shared_experts and the expert_bias (a parameter) after the
        # first num_dense_layers dense layers
        "afmoe": {
            "out_gate": True,
            "qk_norm": True,
            "norms_per_layer": 4,
            "expert_width": _MOE_WIDTH,
            "score_bias": "always",
            "first_dense_field": "num_dense_layers",
            "defaults": {
                "num_experts": 64,
                "moe_intermediate_size": 1408,
                "num_shared_experts": 2,
                "num_dense_layers": 1,
            },
            **_UNTIED,
        },
        # GPT-Neo: learned positions, LayerNorms with biases, unbiased q, k, v with a biased
        # out_proj, a plain biased MLP (intermediate_size, 4 x hidden when null); tied
        "gpt_neo": {
            "norm": "ln",
            "bias_field": None,
            "o_bias_field": True,
            "mlp": "plain",
            "mlp_width": ("intermediate_size",),
            "mlp_bias": True,
            "learned_positions": True,
        },
    }
)

# MiMo-V2 files name model_type "mimo_v2" for the architecture transformers ships as
# mimo_v2_flash (one reader reads both, kvcalc.config.family_table): counted as it is.
FAMILY_BLOCKS["mimo_v2"] = FAMILY_BLOCKS["mimo_v2_flash"]
