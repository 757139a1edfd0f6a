"""Which config fields a family's reader understands (``NEVER_CACHE``, ``GROUPS``, a record's
``irrelevant``, ``OFF_VALUES``: docs/families.md, Only fields decide), and ``Family``, the record
of one ``model_type`` (the records are in ``table``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


def _names(text: str) -> frozenset[str]:
    """Field names separated by white space; ``#`` starts a comment to the end of its line."""
    return frozenset(w for line in text.splitlines() for w in line.split("#", 1)[0].split())


@dataclass(frozen=True, kw_only=True)
class Family:
    """What kvcalc knows about one ``model_type`` (one record in ``table.FAMILIES``).

    - ``groups`` / ``irrelevant``: the shared field groups its reader understands, and its own
      fields that cannot change its cache; ``defaults``: its config class's defaults;
    - ``layout`` (without the attention geometry), ``reader`` or neither (the standard decoder);
      ``checks``: switches checked before it; ``kv_heads``: its own K/V-head rule;
      ``bidirectional``: the use_bidirectional_attention value that keeps a causal cache;
      ``layout_by_class_rule``: without ``layer_types`` its class places sliding layers by a rule
      of its own (refused by name); ``query_heads_per_layer``: ``num_attention_heads_per_layer``
      sets query heads only;
    - the parameter count: ``params`` (the generic counter's entry), ``counter`` (a function of
      its own) or ``uncountable`` (why there is none);
    - ``aliases``: text-config ``model_type`` names read as this family; ``wrapper``: a wrapper
      whose whole config (no text_config) is this family's.
    """

    groups: tuple[str, ...] = ("mlp", "moe")
    irrelevant: frozenset[str] = frozenset()
    defaults: Mapping[str, Any] = field(default_factory=dict)
    layout: Callable | None = None
    reader: Callable | None = None
    checks: Callable | None = None
    kv_heads: Callable | None = None
    bidirectional: object = None
    layout_by_class_rule: bool = False
    query_heads_per_layer: bool = False
    params: Mapping[str, Any] | None = None
    counter: Callable | None = None
    uncountable: str | None = None
    aliases: tuple[str, ...] = ()
    wrapper: str | None = None


# Every generation setting transformers defines (issue 38): the keys of transformers 5.24.0's
# GenerationConfig().to_dict() and GenerationConfig._get_default_generation_params(), less those
# listed below with the base config (token ids, use_cache, output flags, cache_implementation).
# Transformers 4 kept them on every model's base config, so many real config.json files still
# carry them, nested text configs included (Llama 3.2 Vision's do_sample). They steer
# transformers' generate(); a server's cache never depends on them: vLLM sizes its pool from the
# architecture and its own flags (speculative decoding included: --speculative-config, not
# use_mtp or num_assistant_tokens) and takes sampling settings per request.
# tests/test_config_base_fields.py reads the installed transformers and fails on one missing here.
GENERATION_SETTINGS = _names(
    """
    assistant_confidence_threshold assistant_early_exit assistant_ensemble_weight
    assistant_lookbehind bad_words_ids begin_suppress_tokens cache_config compile_config
    constraints continuous_batching_config disable_compile diversity_penalty do_sample
    dola_layers early_stopping encoder_no_repeat_ngram_size encoder_repetition_penalty
    epsilon_cutoff eta_cutoff exponential_decay_length_penalty force_words_ids
    guidance_scale is_assistant length_penalty low_memory max_cache_len max_length
    max_matching_ngram_size max_new_tokens max_time min_length min_new_tokens min_p
    no_repeat_ngram_size num_assistant_tokens num_assistant_tokens_schedule num_beam_groups
    num_beams num_return_sequences output_logits output_scores penalty_alpha
    prefill_chunk_size prompt_lookup_num_tokens remove_invalid_values renormalize_logits
    repetition_penalty return_dict_in_generate sequence_bias speculation_type stop_strings
    suppress_tokens target_lookbehind temperature token_healing top_h top_k top_p typical_p
    use_mtp watermarking_config
    """
)

NEVER_CACHE = (
    _names(
        """
        # the base PretrainedConfig and tooling
        architectures auto_map transformers_version model_type _name_or_path use_cache
        output_attentions output_hidden_states return_dict torchscript id2label label2id
        problem_type chunk_size_feed_forward tokenizer_class num_logits_to_keep verbose
        cache_implementation is_decoder pruned_heads tf_legacy_loss use_bfloat16
        finetuning_task prefix task_specific_params _attn_implementation _commit_hash
        _model_name_or_path unsloth_version unsloth_fixed
        quantization_config  # the weights' format; the KV format is chosen separately
        # mlx-lm's spelling of the same block (bits, group_size, mode and per-tensor
        # entries): how the weights are stored, never what a layer caches
        quantization
        # token ids
        bos_token_id eos_token_id pad_token_id decoder_start_token_id sep_token_id
        cls_token_id mask_token_id forced_eos_token_id forced_bos_token_id eod_token_id
        unk_token_id
        # dtypes
        torch_dtype dtype
        # initialisation
        initializer_range initializer_factor init_std initializer_cutoff_factor
        embedding_initializer_range
        # dropout and training-only losses
        attention_dropout hidden_dropout resid_pdrop embd_pdrop attn_pdrop dropout
        attention_probs_dropout_prob hidden_dropout_prob classifier_dropout emb_pdrop
        layerdrop activation_dropout embedding_dropout residual_dropout resid_dropout
        embed_dropout mlp_dropout router_aux_loss_coef output_router_logits
        router_jitter_noise router_z_loss_coef aux_loss_alpha seq_aux z_loss_coefficient
        aux_loss_coef input_jitter_noise mtp_loss_scaling_factor
        # rotary-embedding frequencies (which dims rotate, not how many are cached)
        rope_theta rope_scaling rope_parameters rope_interleave rope_type
        rotary_dim  # a partial rotary (GPT-J, CodeGen, phi): how many dims rotate
        # task heads: GPT-2's and XLNet's sequence-summary head for classification
        summary_type summary_use_proj summary_activation summary_proj_to_labels
        summary_first_dropout
        # scalar constants of the attention's forward pass (GPT-2, GPT-BigCode)
        scale_attn_weights scale_attn_by_inverse_layer_idx reorder_and_upcast_attn
        partial_rotary_factor rotary_pct rotary_emb_base original_rope mrope_section
        mrope_interleaved original_max_position_embeddings
        # normalisation epsilons and activation names
        rms_norm_eps layernorm_epsilon layer_norm_eps layer_norm_epsilon norm_epsilon
        norm_eps hidden_act hidden_activation activation_function mlp_hidden_act
        # scalar constants of the forward pass
        final_logit_softcapping attn_logit_softcapping query_pre_attn_scalar logits_scaling
        embedding_multiplier attention_multiplier residual_multiplier logit_scale
        attn_temperature_tuning floor_scale attn_scale attention_softmax_in_fp32
        scale_attention_softmax_in_fp32 routed_scaling_factor
        """
    )
    | GENERATION_SETTINGS
)

GROUPS: dict[str, frozenset[str]] = {
    # A standard decoder's MLP, embeddings, biases and norms: weights only.
    "mlp": _names(
        """
        intermediate_size ffn_dim n_inner mlp_bias attention_bias bias qkv_bias use_qkv_bias
        vocab_size padded_vocab_size tie_word_embeddings pretraining_tp use_qk_norm
        layer_norm_type norm_type qk_layernorm lm_head_bias scale_embedding
        mlp_type  # which MLP a layer runs (dense, MoE, gated): weights only
        """
    ),
    # Mixture of experts: which layers route, how many experts, their sizes and the router.
    "moe": _names(
        """
        num_experts_per_tok num_local_experts n_routed_experts num_experts
        moe_intermediate_size n_shared_experts shared_expert_intermediate_size scoring_func
        norm_topk_prob topk_group n_group topk_method ep_size decoder_sparse_step
        mlp_only_layers first_k_dense_replace moe_layer_freq interleave_moe_layer_step
        expert_layer_period expert_layer_offset mlp_layer_types num_shared_experts moe_topk
        num_experts_per_token
        """
    ),
    # The multimodal wrapper's own fields (the language model is read from text_config).
    "vision": _names(
        """
        text_config vision_config audio_config image_token_index image_token_id
        video_token_id vision_start_token_id vision_end_token_id vision_token_id
        boi_token_index eoi_token_index eoa_token_index boa_token_index audio_token_id
        image_size patch_size projector_hidden_act vision_feature_layer
        vision_feature_select_strategy multimodal_projector_bias spatial_merge_size
        mm_tokens_per_image boi_token_id eoi_token_id boa_token_id eoa_token_id
        """
    ),
    # Multi-token-prediction (MTP) layers: vLLM gives them a cache only when they serve as the
    # speculative draft; the main model's cache does not include them (the spec notes it).
    "mtp": _names(
        """
        num_nextn_predict_layers mtp_num_hidden_layers mtp_use_dedicated_embeddings
        mtp_hybrid_override_pattern mtp_layers_block_type layer_types_mtp num_mtp_layers
        mtp_layer_types mtp_mlp_layer_types
        # MiniMax-M2.5: num_mtp_modules modules of mtp_transformer_layers layers each
        num_mtp_modules mtp_transformer_layers
        # EXAONE 4.5's text config: its MTP layer count again (TensorRT-LLM reads it) and
        # whether the MTP layer reuses the model's weights (vLLM's exaone4_5_mtp.py)
        _num_mtp_layers mtp_share_layers
        """
    ),
    # An EAGLE-1 / EAGLE-3 draft head written as a Llama config (LlamaForCausalLMEagle3, ...):
    # vLLM's llama_eagle3.py caches num_hidden_layers LlamaAttention layers of
    # num_key_value_heads x head_dim whatever these say; they size the lm_head and
    # draft_id_to_target_id, the fc over the target's hidden states (fc_input_size), its bias and
    # RMSNorms, or say how many tokens one draft step proposes (each one K/V per token and layer).
    # eagle_config is read apart, key by key (kvcalc.config.families.decoder).
    "eagle": _names(
        """
        draft_vocab_size truncated_vocab_size target_hidden_size num_aux_hidden_states
        eagle_aux_hidden_state_layer_ids use_aux_hidden_state norm_before_fc
        norm_before_residual fc_norm norm_output eagle_fc_bias
        use_input_layernorm_in_first_layer use_last_layernorm use_mtp_layernorm
        parallel_draft_step has_lm_head
        """
    ),
    # MLA's query compression (q_lora_rank) sizes weights; the cache is the KV latent.
    "mla": frozenset({"q_lora_rank", "qk_head_dim"}),
    # Mamba kernels' numerics and training settings (the state shape is read by the reader).
    "mamba": _names(
        """
        time_step_limit time_step_min time_step_max time_step_floor time_step_scale
        time_step_init_scheme rescale_prenorm_residual residual_in_fp32 use_mamba_kernels
        chunk_size use_conv_bias use_bias mamba_chunk_size mamba_conv_bias mamba_proj_bias
        use_mambapy mamba_dt_rank time_step_rank conv_bias use_associative_scan
        mamba_rms_norm mamba_norm_before_gate mamba_hidden_act norm_before_gate
        fused_add_norm rms_norm pad_vocab_size_multiple
        """
    ),
}

# Understood only at the value that switches the feature off: any other value is refused.
OFF_VALUES: dict[str, object] = {
    "add_cross_attention": False,
    "is_encoder_decoder": False,
    "tie_encoder_decoder": False,
    "cross_attention_hidden_size": None,
    "pre_seq_len": None,  # ChatGLM P-tuning: a learned prefix that is cached like tokens
    "prefix_projection": False,
    "use_prompt": False,  # MVP's prompt tokens (prompt_length of them) would be cached too
    "attention_k_eq_v": False,
}


def understood(fam: Family | None, cfg: dict) -> frozenset[str]:
    """The fields of ``cfg`` that need no reading for this family: NEVER_CACHE, the family's
    groups and own fields, and OFF_VALUES fields at their off value."""
    names = set(NEVER_CACHE)
    if fam is not None:
        for g in fam.groups:
            names |= GROUPS[g]
        names |= fam.irrelevant
    names |= {k for k, off in OFF_VALUES.items() if k in cfg and cfg[k] == off}
    return frozenset(names)
