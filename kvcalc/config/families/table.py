"""The family table: one ``Family`` record per config.json ``model_type`` (kvcalc.config.families
.understood says what a record holds). Adding a family is one record here: its own fields that
cannot change the cache (space-separated, the reason in the comment above), its reader or layout
if the standard decoder does not read it, its config-class defaults, and its parameter count.

Each record is checked against transformers 5.24: the cache at the class defaults (the zoo,
docs/zoo.md), the parameter entry against transformers' own model built on the meta device
(tests/test_params_families.py, tests/test_params_zoo_real.py, tests/test_params_switches.py)
and the class defaults against the installed config classes (tests/test_family_table.py).
The parameter entry's keys are described in docs/families.md.

Longer than the 600 lines of CONTRIBUTING.md's limit on purpose: it is one table of data, a
record and the comment naming its sources for each family, read in one place.
"""

from __future__ import annotations

from typing import Any

from ..params.decoders import (
    chatglm_params,
    dbrx_params,
    gemma3n_params,
    gemma4_params,
    gpt_neox_japanese_params,
    mpt_params,
    nemotron_nas_params,
    opt_params,
)
from ..params.mamba import (
    bamba_params,
    falcon_h1_params,
    granite_hybrid_params,
    mamba2_params,
    mamba_params,
    nemotron_h_params,
)
from ..params.recurrent import (
    kimi_linear_params,
    lfm2_moe_params,
    lfm2_params,
    recurrent_gemma_params,
    rwkv_params,
)
from .attention import (
    bigcode_kv_heads,
    dbrx_kv_heads,
    gpt_neo_layers,
    minicpm3_layers,
    mllama_layers,
    seq2seq_layout,
)
from .decoder import eagle_head, hunyuan_switches
from .recurrent import (
    bamba_layers,
    falcon_h1_layers,
    granite_hybrid_layers,
    kimi_linear_layers,
    lfm2_layers,
    recurrent_gemma_layers,
    rwkv_layout,
    state_layout,
)
from .understood import Family


def F(
    own: str = "",
    *,
    groups: str = "mlp moe",
    kv: int | None = None,
    context: int | None = None,
    **record: Any,
) -> Family:
    """A record: ``own`` and ``groups`` as space-separated names; ``kv`` and ``context``: the
    class defaults of num_key_value_heads and max_position_embeddings, beside ``defaults``."""
    named = dict(num_key_value_heads=kv, max_position_embeddings=context)
    defaults = {k: v for k, v in named.items() if v is not None}
    record["defaults"] = defaults | record.get("defaults", {})
    record["aliases"] = tuple(record.get("aliases", "").split())
    return Family(groups=tuple(groups.split()), irrelevant=frozenset(own.split()), **record)


def _encoder_decoder(positions: int) -> Family:
    """An encoder-decoder's decoder run as a causal LM; ``positions``: its class's default."""
    return F(_SEQ2SEQ_OWN, layout=seq2seq_layout, uncountable=_ENCODER_DECODER, context=positions)


def U(**entry: Any) -> dict[str, Any]:
    """A parameter entry whose output head is untied by default (its config class's)."""
    return {**entry, "tied_default": False}


_MOE_WIDTH = ("moe_intermediate_size",)
# Experts of moe_intermediate_size and the router's score-correction bias: in every MoE layer
# ("always") or DeepSeek-V3's (True; params._score_bias says when)
_SCORED_EXPERTS = dict(expert_width=_MOE_WIDTH, score_bias="always")
_V3_EXPERTS = dict(score_bias=True, expert_width=_MOE_WIDTH)


def _routed(
    experts: int, width: int, shared: int | None = 1, dense: int | None = 1, **more: Any
) -> dict[str, Any]:
    """Config-class defaults of DeepSeek's MoE fields: ``experts`` n_routed_experts of
    moe_intermediate_size ``width``, n_shared_experts, first_k_dense_replace (None: no default),
    then ``more``."""
    named = dict(
        n_routed_experts=experts,
        moe_intermediate_size=width,
        n_shared_experts=shared,
        first_k_dense_replace=dense,
    )
    return {k: v for k, v in {**named, **more}.items() if v is not None}


def _shared_expert(experts: int, width: int, shared: int) -> dict[str, Any]:
    """Config-class defaults of Qwen2-MoE's fields: ``experts`` num_experts of
    moe_intermediate_size ``width``, a shared expert of shared_expert_intermediate_size."""
    return dict(
        num_experts=experts, moe_intermediate_size=width, shared_expert_intermediate_size=shared
    )


# Qwen3-Next's blocks (Qwen3.5's too): a gated query, q/k norms, a gated shared expert
_QWEN3_NEXT = dict(gated_q=True, qk_norm=True, shared_expert_gate=True)
_PLAIN_MLP = {"mlp": "plain", "mlp_width": ("intermediate_size",), "mlp_default": None}
# DeepSeek-V3's config-class defaults of the fields only the count reads (DeepseekV3Config, and
# the DeepSeek-V3.2 / GLM-5 classes built on it)
_DEEPSEEK_V3 = _routed(256, 2048, dense=3, q_lora_rank=1536)
# GLM-4.5's MoE blocks (Glm4MoeForCausalLM): q, k, v biases with attention_bias, q/k RMSNorms with
# use_qk_norm, experts with n_shared_experts and the score-correction bias after
# first_k_dense_replace dense layers
_GLM4_MOE = dict(
    bias_field=None,
    qkv_bias_field="attention_bias",
    qk_norm=True,
    qk_norm_field="use_qk_norm",
    **_SCORED_EXPERTS,
    defaults=_routed(128, 1408),
)
_ENCODER_DECODER = (
    "an encoder-decoder family: a checkpoint holds the encoder and the decoder (with "
    "cross-attention in every decoder layer) or the decoder alone, which the config does not "
    "say; the parameter counter describes decoder-only models"
)
_REMOTE_CODE = (
    "parameter counting is not implemented for model_type 'hunyuan': Tencent's remote code, whose "
    "MoE (num_shared_expert, use_mixed_mlp_moe) has no transformers model to check a count against"
)

# vLLM's minimax_text_01.py builds a shared expert of shared_intermediate_size, transformers' none
_MINIMAX_SHARED = {
    "shared_intermediate_size": "vLLM's minimax_text_01.py builds a shared expert of that width, "
    "transformers' MiniMax none"
}
_DSA_OWN = """
    index_n_heads index_share_for_mtp_iteration index_skip_topk_offset index_topk
    indexer_rope_interleave moe_router_dtype
"""
_MINIMAX = dict(states=("lightning",), must_be_zero=_MINIMAX_SHARED)
_MINIMAX_OWN = """
    block_size full_attn_alpha_factor full_attn_beta_factor layernorm_eps
    layernorm_full_attention_alpha layernorm_full_attention_beta layernorm_linear_attention_alpha
    layernorm_linear_attention_beta layernorm_mlp_alpha layernorm_mlp_beta linear_attn_alpha_factor
    linear_attn_beta_factor mlp_alpha_factor mlp_beta_factor postnorm rotary_dim
    shared_intermediate_size shared_moe_mode
"""
_GEMMA4_OWN = """
    enable_moe_block hidden_size_per_layer_input top_k_experts use_double_wide_mlp
    vocab_size_per_layer_input
"""
_MIMO_V2_OWN = """
    add_full_attention_sink_bias add_swa_attention_sink_bias attention_chunk_size
    attention_value_scale swa_attention_sink_bias swa_rope_theta
"""
# MiMo-V2's blocks (MiMo-V2-Flash's too): sinks on the sliding layers, q, k, v biases with
# attention_bias, MoE with the score-correction bias after one dense layer
_MIMO_V2 = U(
    sinks="sliding",
    bias_field=None,
    qkv_bias_field="attention_bias",
    expert_width=_MOE_WIDTH,
    score_bias=True,
    defaults=_routed(256, 2048, shared=None),
)
# GPT-J and CodeGen: one LayerNorm a layer, unbiased attention, a plain biased MLP of n_inner
# (4 x hidden when null), the output head's bias
_GPTJ = U(
    norm="ln",
    norms_per_layer=1,
    bias_field=None,
    mlp="plain",
    mlp_width=("n_inner",),
    mlp_bias=True,
    head_bias=True,
)
_LFM2_OWN = """
    block_auto_adjust_ff_dim block_dim block_ff_dim block_ffn_dim_multiplier block_mlp_init_scale
    block_multiple_of block_norm_eps block_out_init_scale block_use_swiglu block_use_xavier_init
    conv_bias conv_dim_out conv_use_xavier_init num_dense_layers use_expert_bias use_pos_enc
"""
_SEQ2SEQ_OWN = """
    add_bias_logits add_final_layer_norm cross_attention_hidden_size decoder_ffn_dim
    decoder_layerdrop decoder_vocab_size encoder_attention_heads encoder_ffn_dim encoder_layerdrop
    encoder_layers encoder_no_repeat_ngram_size extra_pos_embeddings is_encoder_decoder
    layernorm_embedding normalize_before normalize_embedding num_hidden_layers prompt_mid_dim
    share_encoder_decoder_embeddings static_position_embeddings use_learned_position_embeddings
"""

# Apertus (and Apertus 1.5): q/k RMSNorms, a plain xIELU MLP (two scalars of its own a layer)
_APERTUS = F(params=U(**_PLAIN_MLP, qk_norm=True, xielu=True), context=65536)
# EXAONE 4 and EXAONE 4.5's language model (the record's comment in FAMILIES)
_EXAONE4 = F(
    "reorder_qk_norm",
    groups="mlp moe vision mtp",
    params=U(qk_norm=True),
    layout_by_class_rule=True,
)

FAMILIES: dict[str, Family] = {
    # Llama (and EAGLE draft heads written as Llama configs): q, k, v, o biases with
    # attention_bias, the MLP's with mlp_bias (LlamaAttention, LlamaMLP)
    "llama": F(groups="mlp moe eagle", checks=eagle_head, params=U(mlp_bias="mlp_bias")),
    "mistral": F(params=U(), kv=8, context=131072, defaults=dict(sliding_window=4096)),
    "mixtral": F(params=U(defaults=dict(num_local_experts=8)), kv=8, context=131072),
    "qwen2": F(params=U(qkv_bias=True), defaults=dict(max_position_embeddings=32768)),
    "qwen2_moe": F(
        params=U(
            qkv_bias=("qkv_bias", True),
            shared_expert_gate=True,
            expert_width=_MOE_WIDTH,
            defaults=_shared_expert(60, 1408, 5632),
        ),
        layout_by_class_rule=True,
        context=32768,
    ),
    "qwen3": F(params=U(qk_norm=True), defaults=dict(max_position_embeddings=32768)),
    "qwen3_moe": F(
        params=U(
            qk_norm=True,
            expert_width=_MOE_WIDTH,
            defaults=dict(num_experts=128, moe_intermediate_size=768),
        ),
        defaults=dict(num_key_value_heads=4, max_position_embeddings=32768),
    ),
    "phi3": F(params=U(), defaults=dict(max_position_embeddings=4096)),
    # PaliGemma's image tokens are prompt tokens
    # tied by default (GemmaConfig)
    "gemma": F(
        "num_image_tokens",
        params=dict(),
        defaults=dict(head_dim=256, max_position_embeddings=8192),
        bidirectional=True,
    ),
    # OLMo: LayerNorms without weights (OlmoLayerNorm), none at the end either
    "olmo": F(params=U(norm="none", final_norm=False)),
    # OLMo 2 / 3: q and k RMSNorms over the whole projections, norms after attention and
    # after the MLP
    "olmo2": F(params=U(qk_norm="full")),
    "olmo3": F(params=U(qk_norm="full"), layout_by_class_rule=True),
    "olmoe": F(params=U(qk_norm="full", defaults=dict(num_experts=64)), context=4096),
    "flex_olmo": F(params=U(qk_norm="full", defaults=dict(num_experts=7)), context=4096),
    # Llama's blocks (LlamaForCausalLM or a copy): q, k, v, o biases with attention_bias, the
    # MLP's with mlp_bias; muP multipliers are scalars, no weights
    "granite": F(params=U(mlp_bias="mlp_bias")),
    # Granite MoE: experts of intermediate_size; GraniteMoeShared and Granite MoE SWA add a
    # shared MLP of shared_intermediate_size (none at 0), SWA attention sinks
    "granitemoe": F(params=U(defaults=dict(num_local_experts=8))),
    # Cohere (Command R): one LayerNorm a layer (weight only), q/k norms over every head's
    # channels with use_qk_norm, tied by default; Cohere 2 the same without q/k norms
    "cohere": F(
        params=dict(norms_per_layer=1, qk_norm="full", qk_norm_field="use_qk_norm"), context=8192
    ),
    "starcoder2": F(
        "use_bias",
        params=dict(
            **_PLAIN_MLP, norm="ln", bias_field=("use_bias", True), mlp_bias=("use_bias", True)
        ),
        defaults=dict(num_key_value_heads=2, max_position_embeddings=4096),
    ),
    # StableLM (use_parallel_residual: residual wiring): LayerNorms with biases, q, k, v biases
    # with use_qkv_bias, per-head q/k LayerNorms with qk_layernorm, one norm a layer with
    # use_parallel_residual
    "stablelm": F(
        "use_parallel_residual",
        params=U(
            norm="ln",
            bias_field=None,
            qkv_bias_field="use_qkv_bias",
            qk_norm="full",
            qk_norm_field="qk_layernorm",
            parallel_norms_field="use_parallel_residual",
        ),
        context=4096,
    ),
    "apertus": _APERTUS,
    "apertus1p5_text": _APERTUS,
    # Arcee: a plain ReLU^2 MLP (up, down) with mlp_bias
    "arcee": F(params=U(**_PLAIN_MLP, mlp_bias="mlp_bias"), context=4096),
    "bitnet": F(params=U(attn_sub_norm=True, ffn_sub_norm=True), kv=5),
    "cwm": F(params=U(mlp_bias="mlp_bias"), layout_by_class_rule=True, kv=8, context=131072),
    "emu3_text_model": F(params=U(), kv=8, context=9216),
    # GLM and GLM-4: q, k, v biases with attention_bias (no o bias), gate and up fused;
    # GLM-4 adds post_self_attn_layernorm and post_mlp_layernorm
    "glm": F(
        params=U(bias_field=None, qkv_bias_field=("attention_bias", True)), kv=2, context=131072
    ),
    "glm4": F(
        params=U(bias_field=None, qkv_bias_field=("attention_bias", True), norms_per_layer=4),
        defaults=dict(num_key_value_heads=2, max_position_embeddings=131072),
    ),
    "helium": F(
        params=U(bias_field=None, qkv_bias_field="attention_bias", mlp_bias="mlp_bias"),
        context=4096,
    ),
    "internlm3": F(params=U(mlp_bias="mlp_bias"), kv=2, context=32768),
    "iquestcoder": F(params=U(mlp_bias="mlp_bias"), kv=8, context=131072),
    # Jais 2: LayerNorms with biases, a plain ReLU^2 MLP with mlp_bias
    "jais2": F(
        params=U(
            **_PLAIN_MLP,
            norm="ln",
            mlp_bias=("mlp_bias", True),
            bias_field=("attention_bias", True),
        ),
        context=8192,
    ),
    "ministral3": F(params=U(), kv=8, context=262144),
    # nanochat: weightless RMSNorms, a plain ReLU^2 MLP (fc1, fc2)
    "nanochat": F(params=U(**_PLAIN_MLP, norm="none", final_norm=False)),
    # VaultGemma: two RMSNorms a layer (input, pre-feed-forward)
    "vaultgemma": F(
        params=dict(), layout_by_class_rule=True, kv=4, context=8192, defaults=dict(head_dim=256)
    ),
    "kolibri1": F(
        params=U(
            qk_norm=True,
            norms_per_layer=4,
            **_SCORED_EXPERTS,
            defaults=dict(
                num_local_experts=384,
                moe_intermediate_size=512,
                shared_expert_intermediate_size=512,
            ),
        ),
        defaults=dict(num_key_value_heads=4, max_position_embeddings=262144),
    ),
    # Lara Mini: Gated DeltaNet and attention layers with q/k RMSNorms, experts and an
    # ungated shared MLP in every layer, tied by default
    "lara_mini": F(
        params=dict(qk_norm=True, expert_width=_MOE_WIDTH, defaults=_shared_expert(128, 512, 512)),
        defaults=dict(num_key_value_heads=4, max_position_embeddings=131072, head_dim=128),
    ),
    "solar_open": F(
        params=U(
            **_SCORED_EXPERTS,
            bias_field=None,
            qkv_bias_field="attention_bias",
            defaults=_routed(128, 1280, dense=None),
        ),
        defaults=dict(num_key_value_heads=8, max_position_embeddings=131072, head_dim=128),
    ),
    "exaone": F(params=U(mlp_bias="mlp_bias"), kv=8, context=4096),
    # EXAONE MoE: q/k RMSNorms, MoE by mlp_layer_types (first_k_dense_replace agreeing)
    "exaone_moe": F(
        params=U(
            qk_norm=True,
            **_SCORED_EXPERTS,
            defaults=dict(
                num_experts=64,
                moe_intermediate_size=1024,
                num_shared_experts=1,
                first_k_dense_replace=1,
            ),
        ),
        layout_by_class_rule=True,
    ),
    "phimoe": F(
        params=U(norm="ln", head_bias="lm_head_bias", defaults=dict(num_local_experts=16)),
        defaults=dict(num_key_value_heads=8, max_position_embeddings=131072),
    ),
    "beam": F(
        params=U(
            attn_out_gate=True,
            qk_norm=True,
            norms_per_layer=4,
            **_SCORED_EXPERTS,
            defaults=dict(num_experts=256, moe_intermediate_size=2560, first_k_dense_replace=3),
        ),
        defaults=dict(num_key_value_heads=8, max_position_embeddings=8192),
    ),
    "flint": F(
        params=U(
            sinks=True,
            qk_norm=True,
            expert_width=_MOE_WIDTH,
            defaults=dict(
                num_experts=256,
                moe_intermediate_size=512,
                shared_expert_intermediate_size=1024,
                mlp_only_layers=[0, 1],
            ),
        ),
        defaults=dict(num_key_value_heads=4, max_position_embeddings=262144, head_dim=128),
    ),
    "mellum": F(
        params=U(
            qk_norm=True,
            expert_width=_MOE_WIDTH,
            defaults=dict(num_local_experts=64, moe_intermediate_size=896),
        ),
        layout_by_class_rule=True,
        defaults=dict(num_key_value_heads=4, max_position_embeddings=131072, head_dim=128),
    ),
    "biogpt": F(
        params=dict(
            **_PLAIN_MLP,
            norm="ln",
            attn_bias=True,
            mlp_bias=True,
            learned_positions=True,
            positions_offset=2,
        ),
        context=1024,
    ),
    # Persimmon (and Fuyu's language model): as Phi with two LayerNorms a layer, q/k
    # LayerNorms with qk_layernorm (true by default), no head bias
    "persimmon": F(
        params=U(
            **_PLAIN_MLP,
            norm="ln",
            attn_bias=True,
            mlp_bias=True,
            qk_norm="head_ln",
            qk_norm_field="qk_layernorm",
            defaults=dict(qk_layernorm=True),
        ),
        context=16384,
    ),
    # Phi (1, 1.5, 2): one LayerNorm a layer, biased projections and MLP, the output head's
    # bias, q/k LayerNorms of head_dim with qk_layernorm
    "phi": F(
        params=U(
            **_PLAIN_MLP,
            norm="ln",
            norms_per_layer=1,
            attn_bias=True,
            mlp_bias=True,
            head_bias=True,
            qk_norm="head_ln",
            qk_norm_field="qk_layernorm",
        )
    ),
    # GPT-NeoX (Pythia)
    "gpt_neox": F(
        "use_parallel_residual",
        params=U(**_PLAIN_MLP, norm="ln", bias_field=("attention_bias", True), mlp_bias=True),
    ),
    "hy_v3": F(
        "enable_moe_fp32_combine router_scaling_factor",
        params=U(
            qk_norm=True,
            mlp_bias="mlp_bias",
            shared_bias="mlp_bias",
            **_SCORED_EXPERTS,
            defaults=dict(
                num_experts=192,
                moe_intermediate_size=1536,
                num_shared_experts=1,
                first_k_dense_replace=1,
            ),
        ),
        defaults=dict(num_key_value_heads=8, head_dim=128, max_position_embeddings=131072),
    ),
    # per-layer rotary bases
    "granite_swa": F(
        "layer_rope_theta",
        params=dict(mlp_bias="mlp_bias", sinks=True),
        layout_by_class_rule=True,
        defaults=dict(num_key_value_heads=4, max_position_embeddings=8192),
    ),
    "granitemoe_swa": F(
        "layer_rope_theta shared_intermediate_size",
        params=U(
            sinks=True, shared_width="shared_intermediate_size", defaults=dict(num_local_experts=8)
        ),
        layout_by_class_rule=True,
    ),
    "granitemoeshared": F(
        "shared_intermediate_size",
        params=U(shared_width="shared_intermediate_size", defaults=dict(num_local_experts=8)),
    ),
    # norm placement
    "hyperclovax": F(
        "use_post_norm",
        params=U(
            mlp_bias="mlp_bias", post_norms_field="use_post_norm", defaults=dict(use_post_norm=True)
        ),
    ),
    "seed_oss": F(
        "attention_out_bias",
        params=U(
            bias_field=None,
            qkv_bias_field=("attention_bias", True),
            o_bias_field="attention_out_bias",
            mlp_bias="mlp_bias",
        ),
        defaults=dict(num_key_value_heads=8, max_position_embeddings=524288),
    ),
    "ernie4_5": F(
        "use_bias",
        params=dict(bias_field="use_bias", mlp_bias="use_bias"),
        defaults=dict(num_key_value_heads=2, max_position_embeddings=131072, head_dim=128),
    ),
    # ERNIE 4.5 MoE (the moe_* fields: which layers route, to how many experts): MoE layers
    # from moe_layer_start_index to moe_layer_end_index every moe_layer_interval, the router's
    # score-correction bias (moe_statics); use_bias also biases the shared experts and head
    "ernie4_5_moe": F(
        """
            moe_k moe_layer_end_index moe_layer_interval moe_layer_start_index moe_norm_min
            moe_num_experts moe_num_shared_experts use_bias
        """,
        params=dict(
            bias_field="use_bias",
            mlp_bias="use_bias",
            moe_layers="ernie",
            **_SCORED_EXPERTS,
            shared_bias="use_bias",
            head_bias="use_bias",
            defaults=dict(
                moe_num_experts=64,
                moe_intermediate_size=1536,
                moe_num_shared_experts=2,
                moe_layer_start_index=1,
            ),
        ),
        defaults=dict(num_key_value_heads=4, max_position_embeddings=131072),
    ),
    "aria_text": F(
        "moe_num_experts moe_num_shared_experts moe_topk",
        params=U(
            shared_bias="mlp_bias", defaults=dict(moe_num_experts=8, moe_num_shared_experts=2)
        ),
    ),
    "gptj": F("rotary_dim", params=_GPTJ),
    # rotary part of each head
    "codegen": F("n_ctx rotary_dim", params=_GPTJ),
    # CTRL (dff: the MLP width): biased attention and MLP, LayerNorms with biases, a tied head
    # with its own bias; sinusoidal positions (a buffer)
    "ctrl": F(
        "dff",
        params=dict(
            norm="ln",
            attn_bias=True,
            mlp="plain",
            mlp_width=("dff",),
            defaults=dict(dff=8192),
            mlp_bias=True,
            head_bias=True,
        ),
        defaults=dict(n_positions=256),
    ),
    # ALiBi numerics
    # BLOOM: a LayerNorm after the embedding, biased attention and MLP (4 x hidden)
    "bloom": F(
        "apply_residual_connection_post_layernorm slow_but_exact",
        params=dict(
            norm="ln",
            embed_norm=True,
            attn_bias=True,
            mlp="plain",
            mlp_width=("n_inner",),
            mlp_bias=True,
        ),
    ),
    # GPT-BigCode (StarCoder 1): GPT-2's blocks with multi-query attention
    # GPTBigCodeConfig: multi_query defaults to true (one KV head)
    "gpt_bigcode": F(
        "scale_attn_weights",
        defaults=dict(multi_query=True, n_positions=1024),
        params=dict(
            mlp="plain", mlp_width=("n_inner",), bias=True, norm_bias=True, learned_positions=True
        ),
        kv_heads=bigcode_kv_heads,
    ),
    "gpt_neox_japanese": F("intermediate_multiple_size", counter=gpt_neox_japanese_params),
    # initialisation of the differential weights
    # DiffLlama: four lambda vectors of head_dim a layer
    "diffllama": F("lambda_std_dev", params=U(diff_lambdas=True)),
    # NoPE layers skip the rotation, keys cached all the same (given layer_types, which decides)
    # NoPE layers rotate nothing: no weights
    "smollm3": F(
        "no_rope_layers",
        params=dict(mlp_bias="mlp_bias"),
        layout_by_class_rule=True,
        defaults=dict(num_key_value_heads=4, max_position_embeddings=32768),
    ),
    # Cosmos 3 Edge: a plain ReLU^2 MLP (fc1, fc2) with mlp_bias
    "cosmos3_edge_text": F(params=U(**_PLAIN_MLP, mlp_bias="mlp_bias"), kv=8, context=131072),
    # GLM-OCR: GLM-4's four norms a layer, no attention biases (GlmOcrTextAttention)
    "glm_ocr_text": F(params=U(bias_field=None, norms_per_layer=4), kv=8, context=131072),
    "granite_docling_text": F(params=dict(mlp_bias="mlp_bias"), kv=4, context=32768),
    "qwen3_vl_text": F(params=U(qk_norm=True), defaults=dict(max_position_embeddings=128000)),
    # Qwen3-VL-MoE: experts of moe_intermediate_size in every layer (decoder_sparse_step),
    # tied in its text config class, untied by its wrapper's default
    "qwen3_vl_moe_text": F(
        params=dict(
            qk_norm=True,
            expert_width=_MOE_WIDTH,
            defaults=dict(num_local_experts=60, moe_intermediate_size=1408),
        ),
        context=128000,
    ),
    "qwen2_5_vl_text": F(
        groups="mlp moe vision", params=U(qkv_bias=True), wrapper="qwen2_5_vl", kv=8, context=32768
    ),
    # Language models of vision wrappers, read from text_config (the wrapper's
    # tie_word_embeddings decides the head: kvcalc.config.params.blocks.tied_head)
    "qwen2_vl_text": F(
        groups="mlp moe vision", params=U(qkv_bias=True), wrapper="qwen2_vl", kv=8, context=32768
    ),
    "gemma2": F(
        kv=4,
        context=8192,
        defaults=dict(sliding_window_pattern=2, head_dim=256, vocab_size=256000),
        params=dict(norms_per_layer=4),
        bidirectional=True,
    ),
    "gemma3_text": F(
        "_sliding_window_pattern sliding_window_pattern",
        kv=4,
        context=131072,
        defaults=dict(
            sliding_window_pattern=6,
            head_dim=256,
            vocab_size=262208,
            sliding_window=4096,
            num_attention_heads=8,
        ),
        params=dict(norms_per_layer=4, qk_norm=True),
        aliases="gemma3",
    ),
    "cohere2": F(
        context=8192, defaults=dict(sliding_window_pattern=4), params=dict(norms_per_layer=1)
    ),
    "gpt2": F(
        """
            n_ctx reorder_and_upcast_attn scale_attn_by_inverse_layer_idx scale_attn_weights
            summary_activation summary_first_dropout summary_proj_to_labels summary_type
            summary_use_proj
        """,
        defaults=dict(n_positions=1024, tie_word_embeddings=True),
        params=dict(mlp="plain", bias=True, norm_bias=True, learned_positions=True),
    ),
    "falcon": F(
        "activation alibi bias num_ln_in_parallel_attn parallel_attn",
        defaults=dict(tie_word_embeddings=True, multi_query=True),
        params=dict(
            mlp="plain",
            norm_bias=True,
            bias="bias",
            falcon_norms=True,
            defaults=dict(parallel_attn=True),
        ),
    ),
    "mpt": F(
        """
            embedding_fraction expansion_ratio ffn_config init_config init_device learned_pos_emb
            logit_scale no_bias norm_config tokenizer_name
        """,
        counter=mpt_params,
    ),
    "chatglm": F(
        """
            add_bias_linear add_qkv_bias apply_query_key_layer_scaling
            apply_residual_connection_post_layernorm bias_dropout_fusion ffn_hidden_size
            fp32_residual_connection layernorm_epsilon original_rope post_layer_norm
            quantization_bit rmsnorm
        """,
        counter=chatglm_params,
    ),
    "opt": F(
        """
            _remove_final_layer_norm do_layer_norm_before enable_bias layer_norm_elementwise_affine
            word_embed_proj_dim
        """,
        counter=opt_params,
    ),
    # initial_context_length: the context before YaRN scaling (a rotary setting)
    "gpt_oss": F(
        "experts_per_token initial_context_length swiglu_alpha swiglu_limit",
        params=U(
            bias_field=("attention_bias", True),
            sinks=True,
            expert_bias=True,
            defaults=dict(num_local_experts=128),
        ),
        defaults=dict(head_dim=64, num_key_value_heads=8, max_position_embeddings=131072),
    ),
    "deepseek_v2": F(
        groups="mlp moe mla mtp",
        params=U(
            no_score_bias=True,
            expert_width=_MOE_WIDTH,
            defaults=_routed(64, 1407, shared=2, dense=None, q_lora_rank=1536),
        ),
    ),
    # score_bias: the router's e_score_correction_bias (params._score_bias says when)
    "deepseek_v3": F(
        groups="mlp moe mla mtp", params=U(**_V3_EXPERTS, defaults=_DEEPSEEK_V3), context=4096
    ),
    # Kimi K2 / K2.5's language model is DeepSeek-V3's (vLLM serves kimi_k2 with
    # DeepseekV3ForCausalLM; transformers' kimi_k25 builds DeepseekV3 from the text config)
    "kimi_k2": F(groups="mlp moe mla mtp", params=U(score_bias=True, expert_width=_MOE_WIDTH)),
    # Sarvam-M (MLA): DeepSeek-V3's blocks (transformers builds DeepseekV3ForCausalLM)
    "sarvam_mla": F(
        groups="mlp moe mla mtp", params=U(**_V3_EXPERTS, defaults=_routed(128, 2048)), context=4096
    ),
    # Youtu and MiniCPM3: MLA with a dense MLP, tied by default
    "youtu": F(
        groups="mlp moe mla mtp", params=dict(defaults=dict(q_lora_rank=1536)), context=131072
    ),
    # A.X K1: DeepSeek-V3's blocks with one more RMSNorm in each MoE block
    "axk1": F(
        groups="mlp moe mla mtp",
        params=U(
            score_bias=True,
            moe_norm=True,
            expert_width=_MOE_WIDTH,
            defaults=_routed(192, 2048, q_lora_rank=1536),
        ),
        context=32768,
    ),
    # Sarvam MoE: GLM-4-MoE's blocks (Glm4MoeForCausalLM)
    "sarvam_moe": F(
        groups="mlp moe mtp",
        params=U(**{**_GLM4_MOE, "defaults": _routed(128, 1024, use_qk_norm=True)}),
        defaults=dict(num_key_value_heads=4, max_position_embeddings=131072),
    ),
    # DBRX (DbrxAttention): d_model / n_heads per head, attn_config.kv_n_heads K/V heads (read
    # by kvcalc.config.families.attention); ffn_config sizes the experts (DbrxFFNConfig: weights)
    "dbrx": F("ffn_config", counter=dbrx_params, kv_heads=dbrx_kv_heads),
    # GLM-4.7-Flash (Glm4MoeLiteAttention, Glm4MoeLiteForCausalLM): DeepSeek-V3's MLA (one
    # kv_lora_rank + qk_rope_head_dim latent per token and layer; rope_interleave orders the
    # rotary pairs) and MoE by mlp_layer_types with the score-correction bias
    "glm4_moe_lite": F(
        "rope_interleave",
        groups="mlp moe mla mtp",
        params=U(**_SCORED_EXPERTS, defaults=_routed(64, 1536, q_lora_rank=768)),
        context=202752,
    ),
    # GLM-4.1V's language model (Glm4vTextAttention): GQA of num_key_value_heads x head_dim
    # (mrope places the rotary sections); GLM-4's blocks (q, k, v biases always, four norms)
    "glm4v_text": F(params=U(qkv_bias=True, norms_per_layer=4), kv=2, context=32768),
    # GLM-4.5V's language model: GLM-4.5's blocks
    "glm4v_moe_text": F(
        groups="mlp moe mtp",
        params=U(**{**_GLM4_MOE, "qkv_bias_field": ("attention_bias", True), "qk_norm": None}),
    ),
    # dots.llm1 (Dots1Attention, Dots1ForCausalLM): Qwen3's attention, DeepSeek-V3's MoE with
    # the score-correction bias. Its class gives a window by default and places it by a rule of
    # its own (max_window_layers) without layer_types, refused by name (layout_by_class_rule):
    # a file without sliding_window is not read as windowless
    "dots1": F(
        defaults=dict(sliding_window=4096),
        params=U(qk_norm=True, expert_width=_MOE_WIDTH, score_bias="always"),
        layout_by_class_rule=True,
    ),
    # Command A MoE (Cohere2MoeAttention, Cohere2MoeForCausalLM): Cohere 2's attention, sliding
    # layers by layer_types (absent: the class's rule, refused by name); one LayerNorm a layer
    # (weight only), experts and num_shared_experts shared ones of intermediate_size, dense
    # layers (mlp_layer_types, else the first first_k_dense_replace) of
    # prefix_dense_intermediate_size; tied. logit_scale scales the logits, the expert_* and
    # shared_expert_* settings route and combine the experts
    "cohere2_moe": F(
        """
            expert_selection_fn logit_scale prefix_dense_intermediate_size
            prefix_dense_sliding_window_pattern shared_expert_combination_strategy
        """,
        defaults=dict(sliding_window=4096, max_position_embeddings=8192),
        params=dict(
            norms_per_layer=1,
            expert_width=("intermediate_size",),
            dense_width=("prefix_dense_intermediate_size",),
            defaults=dict(num_experts=8, first_k_dense_replace=0),
        ),
        layout_by_class_rule=True,
    ),
    # AFMoE (Arcee Trinity, AfmoeAttention): GQA with an unbiased sigmoid output gate of q
    # width, q/k RMSNorms, four norms a layer, sliding layers by layer_types (absent:
    # global_attn_every_n_layers' rule, refused by name where a window is given), experts with
    # num_shared_experts and the expert_bias (a parameter) after the first num_dense_layers
    # dense layers; route_scale scales the router's weights, mup_enabled the embeddings
    "afmoe": F(
        "global_attn_every_n_layers mup_enabled num_dense_layers route_scale",
        defaults=dict(sliding_window=1024, max_position_embeddings=16384),
        params=U(
            out_gate=True,
            qk_norm=True,
            norms_per_layer=4,
            **_SCORED_EXPERTS,
            first_dense_field="num_dense_layers",
            defaults=dict(
                num_experts=64, moe_intermediate_size=1408, num_shared_experts=2, num_dense_layers=1
            ),
        ),
        layout_by_class_rule=True,
    ),
    # GLM-4.5 / 4.6 / 4.7 (Glm4MoeAttention, Glm4MoeForCausalLM): GQA of num_key_value_heads x
    # head_dim, q, k, v biases with attention_bias, q/k RMSNorms with use_qk_norm,
    # partial_rotary_factor rotating part of each head (the whole head is cached), experts
    # with n_shared_experts and the score-correction bias after first_k_dense_replace dense
    # layers; num_nextn_predict_layers MTP layers are the drafter's (not in the cache)
    "glm4_moe": F(groups="mlp moe mtp", params=U(**_GLM4_MOE)),
    # DeepSeek sparse attention: DeepSeek-V3's blocks plus the indexer's projections in every
    # layer (transformers' GlmMoeDsaIndexer and DeepseekV32Indexer: wq_b, wk, k_norm,
    # weights_proj); index_n_heads, index_topk and the indexer's rotary and top-k settings
    # change which tokens are attended, not the one index_head_dim key cached per token
    "deepseek_v32": F(
        _DSA_OWN,
        groups="mlp moe mla mtp",
        params=U(indexer=True, **_V3_EXPERTS, defaults=_DEEPSEEK_V3),
        context=163840,
    ),
    "glm_moe_dsa": F(
        _DSA_OWN,
        groups="mlp moe mla mtp",
        params=U(indexer=True, **_V3_EXPERTS, defaults={**_DEEPSEEK_V3, "q_lora_rank": 2048}),
        context=202752,
    ),
    # Llama 4's language model: MoE layers by moe_layers (or interleave_moe_layer_step), experts
    # of intermediate_size with one shared expert, dense layers of intermediate_size_mlp,
    # weightless L2 q/k norms; no_rope_layers superseded by layer_types (as in transformers)
    "llama4_text": F(
        "for_llm_compressor intermediate_size_mlp moe_layers no_rope_layer_interval use_qk_norm",
        params=U(
            moe_layers="llama4",
            expert_width=("intermediate_size",),
            dense_width=("intermediate_size_mlp",),
            shared_count=1,
            qk_norm="head_l2",
            defaults=dict(num_local_experts=16),
        ),
        aliases="llama4",
        defaults=dict(num_key_value_heads=8, max_position_embeddings=131072),
    ),
    "qwen3_next": F(
        groups="mlp moe mtp",
        params=U(**_QWEN3_NEXT, expert_width=_MOE_WIDTH, defaults=_shared_expert(512, 512, 512)),
        defaults=dict(num_key_value_heads=2, max_position_embeddings=32768, head_dim=256),
    ),
    # EXAONE 4 and EXAONE 4.5's language model (text_config "exaone4_5_text", which transformers
    # 5.24 renames exaone4: Exaone4_5_Config.__post_init__): EXAONE 4's layers (per-head q/k
    # RMSNorms, two norms after attention and the MLP: Exaone4DecoderLayer; reorder_qk_norm
    # places them) plus the MTP layer vLLM's exaone4_5_mtp.py runs as the drafter, and the
    # wrapper's image and video token ids where a text config repeats them
    "exaone4": _EXAONE4,
    "exaone4_5_text": _EXAONE4,
    # MiMo (XiaomiMiMo/MiMo-7B): Qwen2's blocks (vLLM's mimo.py builds MiMoModel on Qwen2Model)
    # with num_nextn_predict_layers MTP layers the main model neither runs, caches nor counts
    # (vLLM's mimo_mtp.py runs them as the drafter); use_mrope false is plain RoPE
    "mimo": F("use_mrope", groups="mlp moe mtp", params=U(qkv_bias=True)),
    # MiniMax-M2 / M2.5 (vLLM's minimax_m2.py): GQA, every layer MoE; rotary_dim is the rotary
    # part of each head; qk_norm_type "per_layer" puts q/k RMSNorms over the whole projection;
    # use_routing_bias adds the router's score-correction bias; shared_intermediate_size 0 is
    # no shared expert; the MTP modules (num_mtp_modules x mtp_transformer_layers) are the
    # drafter's
    "minimax_m2": F(
        "qk_norm_type rotary_dim shared_intermediate_size use_routing_bias",
        groups="mlp moe mtp",
        params=U(
            qk_norm_full=True, routing_bias="use_routing_bias", defaults=dict(num_local_experts=256)
        ),
        defaults=dict(num_key_value_heads=8, head_dim=128, max_position_embeddings=196608),
    ),
    # Granite 4.0-H: the muP multipliers scale activations (NEVER_CACHE); the shared MLP sizes
    # weights; normalization_function names the norm and init_method the initialisation;
    # position_embedding_type (RoPE or NoPE) is read by the reader and changes no cache
    "granitemoehybrid": F(
        "init_method normalization_function shared_intermediate_size",
        groups="mlp moe mamba",
        reader=granite_hybrid_layers,
        counter=granite_hybrid_params,
    ),
    # attn_output_gate: a sigmoid gate on the attention output (weights only)
    "qwen3_5_moe_text": F(
        "attn_output_gate output_gate_type",
        groups="mlp moe mtp",
        params=U(**_QWEN3_NEXT, expert_width=_MOE_WIDTH, defaults=_shared_expert(256, 512, 512)),
        aliases="qwen3_5_moe",
        defaults=dict(num_key_value_heads=2, max_position_embeddings=32768, head_dim=256),
    ),
    # Qwen3.5: Qwen3-Next's blocks (gated query, q/k norms, Gated DeltaNet, MoE with a shared
    # expert); checked against transformers 5.24 on the meta device (tests/test_params_qwen35.py)
    "qwen3_5_text": F(
        "attn_output_gate output_gate_type",
        groups="mlp moe mtp",
        params=U(**_QWEN3_NEXT),
        aliases="qwen3_5",
        defaults=dict(num_key_value_heads=4, max_position_embeddings=32768),
    ),
    # MiniMax-Text-01 / MiniMax-M1: lightning-attention and softmax-attention layers, every
    # layer MoE (experts of intermediate_size); transformers' MiniMax builds no shared expert,
    # vLLM's minimax_text_01.py one of shared_intermediate_size: refused unless 0. The
    # post-norm alphas and betas scale the residual stream, block_size is lightning
    # attention's compute block, rotary_dim the rotary part of each head
    "minimax": F(
        _MINIMAX_OWN, params=U(**_MINIMAX, defaults=dict(num_local_experts=8)), kv=8, context=131072
    ),
    "minimax_m1": F(_MINIMAX_OWN, params=U(**_MINIMAX)),
    # OLMo Hybrid: OLMo 3's attention layers and Gated DeltaNet layers (q, k, v, a, b, g
    # projections apart: Qwen3-Next's counts); linear_*: the gate and step-size ranges
    "olmo_hybrid": F(
        """
            linear_a_log_max linear_a_log_min linear_allow_neg_eigval linear_dt_init_floor
            linear_dt_max linear_dt_min
        """,
        params=U(qk_norm="full"),
        context=65536,
    ),
    # Phi-4-multimodal's language model: Phi-3's blocks (its vision and audio embedders,
    # kept inside its model, are not counted)
    "phi4_multimodal": F("audio_config", groups="mlp moe vision", params=U(), kv=8, context=131072),
    # Laguna (poolside; transformers' LagunaConfig, vLLM's laguna.py): layer_types full or
    # sliding; a gate per query head with gating (true by default; per element: weights),
    # q/k RMSNorms, MoE by mlp_layer_types with an ungated shared MLP and the score-correction
    # bias. num_attention_heads_per_layer sets each layer's query heads only (LagunaAttention:
    # k_proj and v_proj are num_key_value_heads x head_dim on every layer, as vLLM's
    # Attention): they size only the attention FLOPs (Layer.q_heads). The moe_* settings are
    # numbers of the router; swa_rope_parameters is the sliding layers' older rotary spelling
    "laguna": F(
        """
            gating moe_apply_router_weight_on_input moe_routed_scaling_factor
            moe_router_logit_softcapping moe_router_score_func swa_rope_parameters
        """,
        params=U(
            head_gate="gating",
            qk_norm=True,
            **_SCORED_EXPERTS,
            defaults=dict(
                num_experts=256,
                moe_intermediate_size=512,
                shared_expert_intermediate_size=512,
                first_k_dense_replace=1,
            ),
        ),
        query_heads_per_layer=True,
        defaults=dict(num_key_value_heads=8, max_position_embeddings=131072),
    ),
    # Hunyuan (Tencent's remote code: configuration_hunyuan.py and modeling_hunyuan.py of
    # Tencent-Hunyuan/Hunyuan-A13B; vLLM's hunyuan_v1.py): use_cla and use_mla are read by
    # hunyuan_switches; its own MoE names (num_shared_expert, use_mixed_mlp_moe, the training
    # capacity and routing settings), the vision tower and its tokens (image tokens are prompt
    # tokens), special token ids, org_vocab_size, the classification head and the rotary
    # settings change no cache. No transformers class to check a parameter count against
    "hunyuan": F(
        """
            add_classification_head anyres_pooling_size anyres_vit_max_image_size
            anyres_vit_two_views class_num dense_list group_limited_greedy im_end_id im_newline_id
            im_start_id image_token_id mask_init_id moe_drop_tokens moe_layer_num_skipped
            moe_random_routing_dropped_token num_media_embeds num_shared_expert org_vocab_size
            pad_id pool_type position_embedding_xdrope skip_cls_token text_end_id text_start_id
            use_mixed_mlp_moe use_rotary_pos_emb video_end_id video_start_id vit_add_patchemb_bias
            vit_input_resolution vit_mapping_type vit_norm_type vit_patch vit_path
            vit_remove_prenorm vit_token vit_type vit_used_rms_norm xdrope_section
        """,
        checks=hunyuan_switches,
        uncountable=_REMOTE_CODE,
    ),
    # JambaConfig: the Mamba width is mamba_expand (2) x hidden_size, not intermediate_size
    "jamba": F(
        groups="mlp moe mamba",
        defaults=dict(mamba_expand=2, num_key_value_heads=8, max_position_embeddings=262144),
        params=U(defaults=dict(num_experts=16, expert_layer_period=2, expert_layer_offset=1)),
    ),
    # GPT-Neo (kvcalc.config.families.attention): learned positions, LayerNorms with biases,
    # unbiased q, k, v with a biased out_proj, a plain biased MLP (intermediate_size, 4 x
    # hidden when null); tied. summary_* (GPT-2's sequence-summary head, in older files such
    # as TinyStories') and gradient_checkpointing: no cache
    "gpt_neo": F(
        """
            gradient_checkpointing summary_activation summary_first_dropout summary_proj_to_labels
            summary_type summary_use_proj
        """,
        reader=gpt_neo_layers,
        params=dict(
            norm="ln",
            bias_field=None,
            o_bias_field=True,
            mlp="plain",
            mlp_width=("intermediate_size",),
            mlp_bias=True,
            learned_positions=True,
        ),
    ),
    # Bamba (kvcalc.config.families.recurrent): z_loss_coefficient is a training loss weight
    "bamba": F(
        "z_loss_coefficient",
        groups="mlp moe mamba",
        reader=bamba_layers,
        counter=bamba_params,
        context=262144,
    ),
    # expand: NemotronHMixer sizes its inner width as mamba_num_heads x mamba_head_dim.
    # mamba_ssm_cache_dtype is no default here: transformers' NemotronHConfig says float32, but
    # vLLM builds the config with its own class (vllm/transformers_utils/configs/nemotron_h.py),
    # which has no such field, so an omitted one keeps the state in --mamba-ssm-cache-dtype
    # 'auto'; kvcalc follows vLLM where the two differ
    "nemotron_h": F(
        """
            expand moe_latent_size moe_shared_expert_intermediate_size moe_shared_expert_overlap
            n_routed_experts
        """,
        groups="mlp moe mamba mtp",
        counter=nemotron_h_params,
        kv=8,
        context=4096,
        defaults=dict(mamba_head_dim=64, n_groups=8),
    ),
    "nemotron-nas": F(counter=nemotron_nas_params),
    "gemma4_unified_text": F(
        _GEMMA4_OWN,
        counter=gemma4_params,
        defaults=dict(num_key_value_heads=4, head_dim=256, max_position_embeddings=262144),
        bidirectional="vision",
    ),
    "gemma4_text": F(
        _GEMMA4_OWN,
        kv=4,
        context=131072,
        defaults=dict(
            sliding_window_pattern=6,
            last_layer_full=True,
            sliding_window=512,
            global_head_dim=512,
            head_dim=256,
        ),
        counter=gemma4_params,
        aliases="gemma4",
        bidirectional="vision",
    ),
    # AltUp, LAuReL, per-layer inputs and activation sparsity change the MLP and the
    # residual stream (Gemma3nTextDecoderLayer), never the attention K/V it caches.
    "gemma3n_text": F(
        """
            activation_sparsity_pattern altup_active_idx altup_coef_clip altup_correct_scale
            altup_num_inputs hidden_size_per_layer_input laurel_rank vocab_size_per_layer_input
        """,
        counter=gemma3n_params,
        aliases="gemma3n",
        kv=2,
        context=32768,
        defaults=dict(num_kv_shared_layers=15),
    ),
    # MiMo-V2 (mimo_v2 files, transformers' mimo_v2_flash: one reader): the sink biases are
    # learned logits, attention_value_scale scales V; vLLM ignores attention_chunk_size
    "mimo_v2": F(_MIMO_V2_OWN, params=_MIMO_V2),
    "mimo_v2_flash": F(
        _MIMO_V2_OWN,
        params=_MIMO_V2,
        layout_by_class_rule=True,
        kv=4,
        context=131072,
        defaults=dict(head_dim=192, v_head_dim=128),
    ),
    # LFM2 (transformers 5.24's config-class defaults): block_* size the gated MLP, conv_bias
    # and conv_dim_out are the short convolution's weights, use_pos_enc turns RoPE on or off
    # (the K/V cached are the same size either way)
    "lfm2": F(
        _LFM2_OWN,
        defaults=dict(conv_L_cache=3, num_key_value_heads=8, max_position_embeddings=128000),
        reader=lfm2_layers,
        counter=lfm2_params,
    ),
    "lfm2_moe": F(
        _LFM2_OWN,
        defaults=dict(conv_L_cache=3, max_position_embeddings=128000, num_key_value_heads=8),
        reader=lfm2_layers,
        counter=lfm2_moe_params,
    ),
    # Falcon-H1: the muP multipliers scale activations; the mamba_* kernel settings and biases
    # are weights or numerics (the state shape is read from the other mamba_* fields)
    "falcon_h1": F(
        """
            attention_in_multiplier attention_out_multiplier key_multiplier lm_head_multiplier
            mamba_use_mlp mlp_multipliers projectors_bias ssm_in_multiplier ssm_multipliers
            ssm_out_multiplier
        """,
        groups="mlp moe mamba",
        kv=8,
        context=8192,
        defaults=dict(mamba_d_conv=4, mamba_n_groups=1, mamba_expand=2),
        reader=falcon_h1_layers,
        counter=falcon_h1_params,
    ),
    # Kimi-Linear and Kimi K3 (vLLM's kimi_linear.py): its own MoE grouping and routing names;
    # mla_use_nope MLA layers skip RoPE yet cache the kv_lora_rank latent and the rope key;
    # mla_use_output_gate adds a sigmoid g_proj on the MLA output and
    # routed_expert_hidden_size / latent_moe_use_norm a latent MoE (weights only);
    # activation_situ_* are SiTU's constants; attn_res_block_size (Attention Residuals) mixes
    # block summaries in a per-forward-pass buffer no request keeps (KimiLinearModel.forward)
    "kimi_linear": F(
        """
            activation_situ_beta activation_situ_linear_beta attn_res_block_size kda_lower_bound
            kda_safe_gate latent_moe_use_norm mla_use_nope mla_use_output_gate mlp_layer_types
            moe_renormalize moe_router_activation_func num_expert_group routed_expert_hidden_size
            use_grouped_topk
        """,
        groups="mlp moe mla mtp",
        defaults=dict(linear_num_heads=32, linear_head_dim=128, linear_conv_kernel_dim=4),
        reader=kimi_linear_layers,
        counter=kimi_linear_params,
    ),
    # Llama 3.2 Vision's language model: Llama's layers and, at cross_attention_layers
    # (MllamaTextConfig's default), cross-attention over the image (q/k norms, two gates);
    # 8 more embedding rows
    "mllama_text_model": F(
        groups="mlp vision",
        defaults=dict(cross_attention_layers=[3, 8, 13, 18, 23, 28, 33, 38]),
        reader=mllama_layers,
        params=U(layers=("cross",), extra_vocab=8),
    ),
    # MiniCPM3: muP scales of the embeddings and the residual stream
    "minicpm3": F(
        "dim_model_base scale_depth scale_emb",
        groups="mlp mla",
        reader=minicpm3_layers,
        params=dict(mlp_bias="mlp_bias", defaults=dict(q_lora_rank=768)),
        context=32768,
    ),
    # RecurrentGemma: initialisation variances and the logits' soft cap
    "recurrent_gemma": F(
        """
            embeddings_scale_by_sqrt_dim final_w_init_variance_scale logits_soft_cap
            w_init_variance_scale
        """,
        defaults=dict(conv1d_width=4),
        reader=recurrent_gemma_layers,
        counter=recurrent_gemma_params,
    ),
    "rwkv": F(
        groups="", layout=rwkv_layout, counter=rwkv_params, defaults=dict(context_length=1024)
    ),
    # The decoder of an encoder-decoder run as a causal LM: the encoder's fields size the
    # encoder, which a causal LM does not run; the rest are the decoder's MLP, positions and
    # generation settings
    "bart": _encoder_decoder(1024),
    "mbart": _encoder_decoder(1024),
    "blenderbot": _encoder_decoder(128),
    "blenderbot-small": _encoder_decoder(512),
    "marian": _encoder_decoder(1024),
    "pegasus": _encoder_decoder(1024),
    "plbart": _encoder_decoder(1024),
    "mvp": _encoder_decoder(1024),
    "trocr": _encoder_decoder(512),
    # XGLM: sinusoidal positions (a buffer), biased attention and MLP of ffn_dim
    "xglm": F(
        _SEQ2SEQ_OWN,
        layout=seq2seq_layout,
        params=dict(
            norm="ln",
            attn_bias=True,
            mlp="plain",
            mlp_width=("ffn_dim",),
            mlp_default=None,
            mlp_bias=True,
        ),
    ),
    "mamba": F(groups="mlp mamba", layout=state_layout("mamba"), counter=mamba_params),
    "falcon_mamba": F(
        "mixer_rms_eps", groups="mlp mamba", layout=state_layout("mamba"), counter=mamba_params
    ),
    "mamba2": F(
        groups="mlp mamba",
        layout=state_layout("mamba2"),
        counter=mamba2_params,
        defaults=dict(n_groups=8),
    ),
}

# The model_type a text config or a wrapper names, read as the family it names.
TEXT_FAMILIES = {a: name for name, fam in FAMILIES.items() for a in fam.aliases}
WRAPPERS = {fam.wrapper: name for name, fam in FAMILIES.items() if fam.wrapper}
