"""The table of model families (``FAMILIES``, by config.json's ``model_type``): the field groups
each family's reader uses, and its own fields that do not change its cache, each with the reason
in the comment where it is declared. How a field is judged understood, and the fields shared by
every family, are in ``kvcalc.config.families``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    """A reader's knowledge of one family: the field groups it uses, and its own fields that do
    not change its cache (each with the reason in the comment where it is declared)."""

    groups: tuple[str, ...] = ("mlp", "moe")
    irrelevant: frozenset[str] = frozenset()


def _f(*fields: str, groups: tuple[str, ...] = ("mlp", "moe")) -> Family:
    return Family(groups=groups, irrelevant=frozenset(fields))


_DECODER = _f()

# Decoders whose attention is the standard one, read from the common fields, each checked
# against transformers' own cache at its class defaults (docs/zoo.md); their remaining fields are
# MLP, MoE, bias and norm settings (the "mlp" and "moe" groups).
_STANDARD = (
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "phi3",
    "gemma",
    "olmo",
    "olmo2",
    "olmo3",
    "olmoe",
    "flex_olmo",
    "granite",
    "granitemoe",
    "cohere",
    "starcoder2",
    "stablelm",
    "apertus",
    "apertus1p5_text",
    "arcee",
    "bitnet",
    "cwm",
    "emu3_text_model",
    "glm",
    "glm4",
    "helium",
    "internlm3",
    "iquestcoder",
    "jais2",
    "ministral3",
    "nanochat",
    "vaultgemma",
    "kolibri1",
    "lara_mini",
    "solar_open",
    "exaone",
    "exaone_moe",
    "phimoe",
    "beam",
    "flint",
    "mellum",
    "biogpt",
    "persimmon",
    "phi",
    "gpt_neox",
    "hy_v3",
    "granite_swa",
    "granitemoe_swa",
    "granitemoeshared",
    "hyperclovax",
    "seed_oss",
    "ernie4_5",
    "ernie4_5_moe",
    "aria_text",
    "gptj",
    "codegen",
    "ctrl",
    "bloom",
    "gpt_bigcode",
    "gpt_neox_japanese",
    "diffllama",
    "smollm3",
    # language models inside vision or audio wrappers, read from text_config
    "cosmos3_edge_text",
    "glm_ocr_text",
    "granite_docling_text",
    "qwen3_vl_text",
    "qwen3_vl_moe_text",
)

# Their own fields, each a weight, norm placement, rotary or router setting (the comment says
# which) that changes no cache.
_OWN = {
    "stablelm": ("use_parallel_residual",),  # residual wiring
    "gpt_neox": ("use_parallel_residual",),
    "starcoder2": ("use_bias",),
    "ernie4_5": ("use_bias",),
    "ernie4_5_moe": (
        "use_bias",
        "moe_k",
        "moe_layer_end_index",
        "moe_layer_interval",
        "moe_layer_start_index",
        "moe_norm_min",
        "moe_num_experts",
        "moe_num_shared_experts",
    ),  # which layers route and to how many experts
    "aria_text": ("moe_num_experts", "moe_num_shared_experts", "moe_topk"),
    "granitemoeshared": ("shared_intermediate_size",),
    "granitemoe_swa": ("shared_intermediate_size", "layer_rope_theta"),
    "granite_swa": ("layer_rope_theta",),  # per-layer rotary bases
    "hyperclovax": ("use_post_norm",),  # norm placement
    "seed_oss": ("attention_out_bias",),
    "hy_v3": ("enable_moe_fp32_combine", "router_scaling_factor"),
    "gptj": ("rotary_dim",),
    "codegen": ("rotary_dim", "n_ctx"),  # rotary part of each head
    "ctrl": ("dff",),  # the MLP width
    "bloom": ("apply_residual_connection_post_layernorm", "slow_but_exact"),  # ALiBi numerics
    "gpt_bigcode": ("scale_attn_weights",),
    "gpt_neox_japanese": ("intermediate_multiple_size",),
    "diffllama": ("lambda_std_dev",),  # initialisation of the differential weights
    # NoPE layers skip the rotation, keys cached all the same (given layer_types, which decides)
    "smollm3": ("no_rope_layers",),
    "gemma": ("num_image_tokens",),  # PaliGemma's image tokens are prompt tokens
}

FAMILIES: dict[str, Family] = {
    **{t: _f(*_OWN.get(t, ())) for t in _STANDARD},
    # Llama, and the EAGLE draft heads written as Llama configs (the "eagle" group)
    "llama": _f(groups=("mlp", "moe", "eagle")),
    **{t: _f(groups=("mlp", "moe", "vision")) for t in ("qwen2_5_vl_text", "qwen2_vl_text")},
    "gemma2": _f(),
    "gemma3_text": _f("sliding_window_pattern", "_sliding_window_pattern"),
    "cohere2": _f(),
    "gpt2": _f(
        "scale_attn_weights",
        "scale_attn_by_inverse_layer_idx",
        "reorder_and_upcast_attn",
        "summary_type",
        "summary_use_proj",
        "summary_activation",
        "summary_proj_to_labels",
        "summary_first_dropout",
        "n_ctx",
    ),
    "falcon": _f("alibi", "parallel_attn", "bias", "num_ln_in_parallel_attn", "activation"),
    "mpt": _f(
        "tokenizer_name",
        "learned_pos_emb",
        "no_bias",
        "norm_config",
        "init_config",
        "expansion_ratio",
        "ffn_config",
        "embedding_fraction",
        "init_device",
        "logit_scale",
    ),
    "chatglm": _f(
        "apply_residual_connection_post_layernorm",
        "post_layer_norm",
        "add_bias_linear",
        "add_qkv_bias",
        "bias_dropout_fusion",
        "fp32_residual_connection",
        "rmsnorm",
        "quantization_bit",
        "ffn_hidden_size",
        "original_rope",
        "apply_query_key_layer_scaling",
        "layernorm_epsilon",
    ),
    "opt": _f(
        "do_layer_norm_before",
        "word_embed_proj_dim",
        "enable_bias",
        "_remove_final_layer_norm",
        "layer_norm_elementwise_affine",
    ),
    # initial_context_length: the context before YaRN scaling (a rotary setting)
    "gpt_oss": _f("swiglu_limit", "swiglu_alpha", "experts_per_token", "initial_context_length"),
    **{
        t: _f(groups=("mlp", "moe", "mla", "mtp"))
        for t in ("deepseek_v2", "deepseek_v3", "kimi_k2", "sarvam_mla", "youtu", "axk1")
    },
    "sarvam_moe": _f(groups=("mlp", "moe", "mtp")),
    # DBRX (DbrxAttention): d_model / n_heads per head, attn_config.kv_n_heads K/V heads (read
    # by kvcalc.config.layer_readers); ffn_config sizes the experts (DbrxFFNConfig: weights)
    "dbrx": _f("ffn_config"),
    # GLM-4.7-Flash (Glm4MoeLiteAttention): DeepSeek-V3's MLA, one kv_lora_rank +
    # qk_rope_head_dim latent per token and layer; rope_interleave orders the rotary pairs
    "glm4_moe_lite": _f("rope_interleave", groups=("mlp", "moe", "mla", "mtp")),
    # GLM-4.1V / GLM-4.5V language models (Glm4vTextAttention, Glm4vMoeTextAttention): GQA of
    # num_key_value_heads x head_dim; mrope places the rotary sections (the K cached is the same)
    "glm4v_text": _f(),
    "glm4v_moe_text": _f(groups=("mlp", "moe", "mtp")),
    # dots.llm1 (Dots1Attention): Qwen3's attention; sliding layers from layer_types (absent,
    # the class's own rule by max_window_layers: refused by name, kvcalc.config.layouts)
    "dots1": _f(),
    # Command A MoE (Cohere2MoeAttention): Cohere 2's attention, sliding layers by layer_types
    # (absent: the class's own rule, refused by name); logit_scale scales the logits, the
    # expert_* and shared_expert_* settings route and combine the experts,
    # prefix_dense_intermediate_size sizes the dense layers' MLP
    "cohere2_moe": _f(
        "logit_scale",
        "expert_selection_fn",
        "shared_expert_combination_strategy",
        "prefix_dense_intermediate_size",
        "prefix_dense_sliding_window_pattern",
    ),
    # AFMoE (Arcee Trinity, AfmoeAttention): GQA with a sigmoid output gate (weights), sliding
    # layers by layer_types (absent: global_attn_every_n_layers' rule, refused by name where a
    # window is given); num_dense_layers picks the dense MLP layers, route_scale scales the
    # router's weights, mup_enabled scales the embeddings
    "afmoe": _f("num_dense_layers", "route_scale", "mup_enabled", "global_attn_every_n_layers"),
    # GLM-4.5 / 4.6 / 4.7 (Glm4MoeAttention): standard GQA attention of num_key_value_heads x
    # head_dim; use_qk_norm places RMSNorm weights on q and k, partial_rotary_factor rotates part
    # of each head (the whole head is cached), first_k_dense_replace picks the dense MLP layers,
    # num_nextn_predict_layers the MTP drafter's layers (not in the main model's cache)
    "glm4_moe": _f(groups=("mlp", "moe", "mtp")),
    # index_n_heads, index_topk and the indexer's rotary and top-k settings change which
    # tokens are attended, not the indexer keys cached (one index_head_dim key per token)
    **{
        t: _f(
            "index_n_heads",
            "index_topk",
            "indexer_rope_interleave",
            "index_skip_topk_offset",
            "index_share_for_mtp_iteration",
            "moe_router_dtype",
            groups=("mlp", "moe", "mla", "mtp"),
        )
        for t in ("deepseek_v32", "glm_moe_dsa")
    },
    # no_rope_layers: superseded by layer_types when the config has it (as transformers does)
    "llama4_text": _f(
        "no_rope_layer_interval",
        "intermediate_size_mlp",
        "moe_layers",
        "use_qk_norm",
        "for_llm_compressor",
    ),
    "qwen3_next": _f(groups=("mlp", "moe", "mtp")),
    # EXAONE 4 and EXAONE 4.5's language model (text_config "exaone4_5_text", which transformers
    # 5.24 renames exaone4: Exaone4_5_Config.__post_init__, so both spellings read alike):
    # EXAONE 4's layers plus the MTP layer vLLM's exaone4_5_mtp.py runs as the drafter, and the
    # wrapper's image and video token ids where a text config repeats them; reorder_qk_norm
    # places the norms (weights)
    **{
        t: _f("reorder_qk_norm", groups=("mlp", "moe", "vision", "mtp"))
        for t in ("exaone4", "exaone4_5_text")
    },
    # MiMo (XiaomiMiMo/MiMo-7B): Qwen2's decoder (vLLM's mimo.py builds MiMoModel on Qwen2Model)
    # with num_nextn_predict_layers MTP layers that the main model neither runs nor caches
    # (vLLM's mimo_mtp.py runs them as the drafter); use_mrope false is plain RoPE
    "mimo": _f("use_mrope", groups=("mlp", "moe", "mtp")),
    # MiniMax-M2 / M2.5: standard GQA attention and MoE (vLLM's minimax_m2.py). rotary_dim is the
    # rotary part of each head; qk_norm_type places the q/k RMSNorm (weights); use_routing_bias
    # adds the router's score-correction bias; shared_intermediate_size 0 is no shared expert;
    # the MTP modules (num_mtp_modules of mtp_transformer_layers layers) are the drafter's
    "minimax_m2": _f(
        "rotary_dim",
        "qk_norm_type",
        "use_routing_bias",
        "shared_intermediate_size",
        groups=("mlp", "moe", "mtp"),
    ),
    # Granite 4.0-H: the muP multipliers scale activations (NEVER_CACHE); the shared MLP sizes
    # weights; normalization_function names the norm and init_method the initialisation;
    # position_embedding_type (RoPE or NoPE) is read by the reader and changes no cache
    "granitemoehybrid": _f(
        "shared_intermediate_size",
        "normalization_function",
        "init_method",
        groups=("mlp", "moe", "mamba"),
    ),
    # attn_output_gate: a sigmoid gate on the attention output (weights only)
    **{
        t: _f("attn_output_gate", "output_gate_type", groups=("mlp", "moe", "mtp"))
        for t in ("qwen3_5_moe_text", "qwen3_5_text")
    },
    # MiniMax: the post-norm alphas and betas scale the residual stream; rotary_dim is the
    # rotary part of each head (the whole head is cached)
    **{
        t: _f(
            "layernorm_full_attention_alpha",
            "layernorm_full_attention_beta",
            "layernorm_linear_attention_alpha",
            "layernorm_linear_attention_beta",
            "layernorm_mlp_alpha",
            "layernorm_mlp_beta",
            "postnorm",
            "rotary_dim",
            "shared_intermediate_size",
            "shared_moe_mode",
            "layernorm_eps",
            # lightning attention's compute block and the residual scalings
            "block_size",
            "full_attn_alpha_factor",
            "full_attn_beta_factor",
            "linear_attn_alpha_factor",
            "linear_attn_beta_factor",
            "mlp_alpha_factor",
            "mlp_beta_factor",
        )
        for t in ("minimax", "minimax_m1")
    },
    # OLMo hybrid: Gated DeltaNet's gate and step-size ranges (numerics of the recurrence)
    "olmo_hybrid": _f(
        "linear_a_log_max",
        "linear_a_log_min",
        "linear_allow_neg_eigval",
        "linear_dt_init_floor",
        "linear_dt_max",
        "linear_dt_min",
    ),
    "phi4_multimodal": _f("audio_config", groups=("mlp", "moe", "vision")),
    # Laguna (poolside; transformers' LagunaConfig, vLLM's laguna.py): layer_types full or
    # sliding, num_attention_heads_per_layer read by the reader (query heads only). gating sizes
    # the softplus output gate g_proj (per head or per element: weights); the moe_* settings
    # scale, soft-cap and score the router, or move its weights onto the input (numbers of the
    # forward pass); swa_rope_parameters is the older spelling of the sliding layers' rotary
    "laguna": _f(
        "gating",
        "moe_routed_scaling_factor",
        "moe_apply_router_weight_on_input",
        "moe_router_logit_softcapping",
        "moe_router_score_func",
        "swa_rope_parameters",
    ),
    # Hunyuan (Tencent's remote code, model_type "hunyuan": configuration_hunyuan.py and
    # modeling_hunyuan.py of Tencent-Hunyuan/Hunyuan-A13B; vLLM's hunyuan_v1.py). The switches
    # use_cla and use_mla are read by the reader (kvcalc.config.model_layers). The rest:
    # - MoE in its own names, per-layer lists or numbers: num_shared_expert, use_mixed_mlp_moe
    #   (a shared MLP beside the experts), moe_drop_tokens, moe_random_routing_dropped_token
    #   (training-time capacity), moe_layer_num_skipped, group_limited_greedy (routing)
    # - the vision tower and its tokens (vit_*, anyres_*, num_media_embeds: image tokens are
    #   prompt tokens, cached as any other), the special token ids, org_vocab_size (the
    #   vocabulary before padding)
    # - the sequence-classification head (add_classification_head, class_num, pool_type,
    #   dense_list) that a causal LM does not run
    # - rotary settings: use_rotary_pos_emb, position_embedding_xdrope, xdrope_section (which
    #   dimensions rotate; the K cached is the same size)
    "hunyuan": _f(
        "num_shared_expert",
        "use_mixed_mlp_moe",
        "moe_drop_tokens",
        "moe_random_routing_dropped_token",
        "moe_layer_num_skipped",
        "group_limited_greedy",
        "vit_path",
        "vit_type",
        "vit_input_resolution",
        "vit_token",
        "vit_patch",
        "vit_mapping_type",
        "vit_norm_type",
        "vit_used_rms_norm",
        "vit_remove_prenorm",
        "vit_add_patchemb_bias",
        "anyres_vit_max_image_size",
        "anyres_pooling_size",
        "anyres_vit_two_views",
        "skip_cls_token",
        "num_media_embeds",
        "im_start_id",
        "im_end_id",
        "im_newline_id",
        "image_token_id",
        "video_start_id",
        "video_end_id",
        "text_start_id",
        "text_end_id",
        "mask_init_id",
        "pad_id",
        "org_vocab_size",
        "add_classification_head",
        "class_num",
        "pool_type",
        "dense_list",
        "use_rotary_pos_emb",
        "position_embedding_xdrope",
        "xdrope_section",
    ),
    "jamba": _f(groups=("mlp", "moe", "mamba")),
    # GPT-Neo (kvcalc.config.family_readers): the MLP and the tied embeddings; the summary_*
    # settings (GPT-2's sequence-summary head, still written by older GPT-Neo files such as
    # TinyStories') size a classification head a causal LM does not run; gradient_checkpointing
    # recomputes activations in training
    "gpt_neo": _f(
        "gradient_checkpointing",
        "summary_type",
        "summary_use_proj",
        "summary_activation",
        "summary_proj_to_labels",
        "summary_first_dropout",
    ),
    # Bamba (kvcalc.config.family_readers): z_loss_coefficient is a training loss weight
    "bamba": _f("z_loss_coefficient", groups=("mlp", "moe", "mamba")),
    # expand: NemotronHMixer sizes its inner width as mamba_num_heads x mamba_head_dim
    "nemotron_h": _f(
        "expand",
        "moe_shared_expert_intermediate_size",
        "moe_latent_size",
        "moe_shared_expert_overlap",
        "n_routed_experts",
        groups=("mlp", "moe", "mamba", "mtp"),
    ),
    "nemotron-nas": _f(),
    **{
        t: _f(
            "hidden_size_per_layer_input",
            "vocab_size_per_layer_input",
            "use_double_wide_mlp",
            "enable_moe_block",
            "top_k_experts",
        )
        for t in ("gemma4_unified_text",)
    },
    "gemma4_text": _f(
        "hidden_size_per_layer_input",
        "vocab_size_per_layer_input",
        "use_double_wide_mlp",
        "enable_moe_block",
        "top_k_experts",
    ),
    "gemma3n_text": _f(
        # AltUp, LAuReL, per-layer inputs and activation sparsity change the MLP and the
        # residual stream (Gemma3nTextDecoderLayer), never the attention K/V it caches.
        "altup_active_idx",
        "altup_coef_clip",
        "altup_correct_scale",
        "altup_num_inputs",
        "laurel_rank",
        "activation_sparsity_pattern",
        "hidden_size_per_layer_input",
        "vocab_size_per_layer_input",
    ),
    # MiMo-V2: the sink biases are learned logits and attention_value_scale scales V (no cache
    # shape); vLLM's mimo_v2_flash.py does not use attention_chunk_size
    **{
        t: _f(
            "attention_value_scale",
            "add_swa_attention_sink_bias",
            "swa_attention_sink_bias",
            "add_full_attention_sink_bias",
            "swa_rope_theta",
            "attention_chunk_size",
        )
        for t in ("mimo_v2", "mimo_v2_flash")
    },
    # LFM2: block_* size the gated MLP; conv_bias is the short convolution's bias
    **{
        t: _f(
            "block_auto_adjust_ff_dim",
            "block_ffn_dim_multiplier",
            "block_multiple_of",
            "conv_bias",
            "num_dense_layers",
            "use_expert_bias",
            "block_dim",
            "block_ff_dim",
            "block_mlp_init_scale",
            "block_norm_eps",
            "block_out_init_scale",
            "block_use_swiglu",
            "block_use_xavier_init",
            # conv_dim_out: the conv block's output projection (weights); use_pos_enc: RoPE
            # on or off (the K/V cached are the same size either way)
            "conv_dim_out",
            "conv_use_xavier_init",
            "use_pos_enc",
        )
        for t in ("lfm2", "lfm2_moe")
    },
    # Falcon-H1: the muP multipliers scale activations; the mamba_* kernel settings and biases
    # are weights or numerics (the state shape is read from the other mamba_* fields)
    "falcon_h1": _f(
        "attention_in_multiplier",
        "attention_out_multiplier",
        "key_multiplier",
        "lm_head_multiplier",
        "mlp_multipliers",
        "ssm_multipliers",
        "ssm_in_multiplier",
        "ssm_out_multiplier",
        "projectors_bias",
        "mamba_use_mlp",
        groups=("mlp", "moe", "mamba"),
    ),
    # Kimi-Linear: expert grouping and routing (MoE), its own names for them
    # mla_use_nope: the MLA layers skip RoPE, yet vLLM (kimi_linear.py) and transformers still
    # cache the kv_lora_rank latent and the qk_rope_head_dim key part
    # Kimi K3 (its text config is kimi_linear; vLLM's kimi_linear.py as served for K3):
    # mla_use_output_gate adds a sigmoid g_proj (hidden -> heads x v_head_dim) on the MLA
    # output, weights only (MLAModules g_proj); routed_expert_hidden_size and
    # latent_moe_use_norm are the latent MoE (routed experts run in a down-projected width,
    # routed_expert_down_proj / routed_expert_norm / routed_expert_up_proj); activation_situ_*
    # are the SiTU activation's constants (SituAndMul); attn_res_block_size is Attention
    # Residuals: each layer mixes the block summaries of earlier layers of the same token, a
    # buffer of tokens x blocks x hidden allocated per forward pass (KimiLinearModel.forward's
    # block_residual) that no request keeps between steps, so no cache
    "kimi_linear": _f(
        "moe_renormalize",
        "num_expert_group",
        "mlp_layer_types",
        "kda_safe_gate",
        "kda_lower_bound",
        "mla_use_nope",
        "moe_router_activation_func",
        "use_grouped_topk",
        "mla_use_output_gate",
        "routed_expert_hidden_size",
        "latent_moe_use_norm",
        "activation_situ_beta",
        "activation_situ_linear_beta",
        "attn_res_block_size",
        groups=("mlp", "moe", "mla", "mtp"),
    ),
    "mllama_text_model": _f(groups=("mlp", "vision")),
    # MiniCPM3: muP scales of the embeddings and the residual stream
    "minicpm3": _f("dim_model_base", "scale_depth", "scale_emb", groups=("mlp", "mla")),
    # RecurrentGemma: initialisation variances and the logits' soft cap
    "recurrent_gemma": _f(
        "final_w_init_variance_scale",
        "w_init_variance_scale",
        "logits_soft_cap",
        "embeddings_scale_by_sqrt_dim",
    ),
    "rwkv": _f(groups=()),
    # The decoder of an encoder-decoder run as a causal LM: the encoder's fields size the
    # encoder, which a causal LM does not run; the rest are the decoder's MLP, positions and
    # generation settings
    **{
        t: _f(
            "encoder_layers",
            "encoder_attention_heads",
            "encoder_ffn_dim",
            "encoder_layerdrop",
            "decoder_ffn_dim",
            "decoder_layerdrop",
            "is_encoder_decoder",
            "encoder_no_repeat_ngram_size",
            "decoder_vocab_size",
            "share_encoder_decoder_embeddings",
            "cross_attention_hidden_size",
            "layernorm_embedding",
            "use_learned_position_embeddings",
            "prompt_mid_dim",
            "normalize_before",
            "add_final_layer_norm",
            "static_position_embeddings",
            "add_bias_logits",
            "extra_pos_embeddings",
            "normalize_embedding",
            "num_hidden_layers",
        )
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
            "xglm",
        )
    },
    "mamba": _f(groups=("mlp", "mamba")),
    "falcon_mamba": _f("mixer_rms_eps", groups=("mlp", "mamba")),
    "mamba2": _f(groups=("mlp", "mamba")),
}
