"""One layer's cache geometry from a config's fields: an attention layer (heads, dims, window,
the DeepSeek-sparse indexer keys) and a recurrent state (Mamba, Mamba-2, Gated DeltaNet, ...)."""

from __future__ import annotations

import dataclasses

from ..core.model import (
    ChunkedLocal,
    ExtraCache,
    FullAttention,
    RecurrentState,
    SlidingWindow,
)
from ..core.text import short as _short
from .families import NEVER_CACHE, OFF_VALUES
from .fields import CONV_KERNEL, EXPAND, STATE_SIZE, Fields, Geometry
from .limits import cap_of


def indexer_caches(f: Fields, n: int, notes: list, assumptions: list) -> list:
    """Per layer, the DeepSeek-sparse-attention indexer key cache (``index_topk``), or None.

    vLLM stores the indexer's keys as fp8 plus one fp32 scale per 128 values; transformers keeps
    them in the model dtype. ``indexer_types`` (GLM-5.2) marks layers that reuse another
    layer's top-k ("shared") and so compute and cache no indexer keys."""
    if not f.has("index_topk"):
        return [None] * n
    idx = f.int("index_head_dim")
    extra = ExtraCache(name="indexer keys", elements=idx, dtype="fp8", scale_bytes=idx // 128 * 4)
    types = f.raw("indexer_types")
    f.seen.add("index_topk_freq")  # read below, or superseded by indexer_types
    if types is None:
        for name in ("index_topk_pattern", "index_topk_freq"):
            value = f.raw(name)
            if value not in (None, 1):
                raise ValueError(
                    f"config field '{name}' sets a per-layer indexer pattern that "
                    "kvcalc does not derive; a config with 'indexer_types' works"
                )
        flags = [True] * n
    else:
        if (
            not isinstance(types, list)
            or len(types) != n
            or any(t not in ("full", "shared") for t in types)
        ):
            raise ValueError(
                f"config field 'indexer_types' must list 'full' or 'shared' for "
                f"each of the {n} layers"
            )
        flags = [t == "full" for t in types]
        assumptions.append(
            "layers whose indexer_types entry is 'shared' keep no indexer keys "
            "(transformers computes none there)"
        )
    notes.append(
        f"sparse attention indexer (index_topk): {sum(flags)} layers also cache {idx} "
        f"fp8 indexer-key values + {idx // 128 * 4} B of scales per token, as vLLM "
        "stores them"
    )
    return [extra if flag else None for flag in flags]


def attention_layer(f: Fields, kind: str, geo: Geometry, v_dim: int, extra):
    """One attention layer of ``kind`` with its own geometry: full layers may have their own
    head size and KV heads (Gemma 4's global_*), sliding ones theirs (MiMo-V2's swa_*)."""
    kv, k_dim, v, q = geo.kv_heads, geo.head_dim, v_dim, geo.q_heads
    if kind == "full" and f.has("global_head_dim") and not f.has("per_layer_config"):
        k_dim = v = f.int("global_head_dim")
        if f.bool("attention_k_eq_v", False) and f.has("num_global_key_value_heads"):
            # transformers' Gemma4TextConfig: the global KV-head override applies only to the
            # models that declare attention_k_eq_v (V is computed from the K projection, but
            # both K and V are cached).
            kv = f.int("num_global_key_value_heads")
        geo.per_layer_heads = True
    if kind == "sliding" and f.model_type == "mimo_v2_flash":
        # MiMoV2FlashAttention (transformers) gives sliding layers 2 x num_key_value_heads;
        # vLLM's mimo_v2_flash.py reads swa_num_key_value_heads. Published files agree.
        doubled = 2 * kv
        kv = f.int("swa_num_key_value_heads", default=doubled)
        if kv != doubled:
            raise ValueError(
                f"config field 'swa_num_key_value_heads' ({kv}) is not twice "
                f"'num_key_value_heads' ({doubled // 2}): vLLM would cache {kv} "
                f"heads and transformers {doubled}; kvcalc does not pick one"
            )
        q = f.int("swa_num_attention_heads", default=q)
        k_dim = f.int("swa_head_dim", default=k_dim)
        v = f.int("swa_v_head_dim", default=v)
        geo.per_layer_heads = True
    elif kind == "sliding" and f.has("swa_num_key_value_heads", "swa_head_dim"):
        kv = f.int("swa_num_key_value_heads", default=kv)
        q = f.int("swa_num_attention_heads", default=q)
        k_dim = f.int("swa_head_dim", default=k_dim)
        v = f.int("swa_v_head_dim", default=v)
        geo.per_layer_heads = True
    common = dict(kv_heads=kv, head_dim=k_dim, v_head_dim=v, q_heads=q, extra=extra)
    if kind == "sliding" and f.model_type == "mimo_v2_flash" and f.has("sliding_window_size"):
        # vLLM attends within sliding_window_size tokens (per_layer_sliding_window); transformers'
        # MiMoV2FlashConfig within sliding_window_size + 1.
        size = f.int("sliding_window_size")
        f.seen.add("sliding_window")
        return SlidingWindow(window=size, transformers_window=size + 1, **common)
    if kind == "sliding":
        return SlidingWindow(window=window_of(f), **common)
    if kind == "chunked":
        return ChunkedLocal(chunk=f.int("attention_chunk_size"), **common)
    return FullAttention(**common)


def window_of(f: Fields) -> int:
    if f.has("sliding_window_size") and not f.has("sliding_window"):
        # MiMo-V2: the reference implementation attends to sliding_window_size previous tokens
        # plus the query, so the window is one larger (transformers' MiMoV2FlashConfig).
        return f.int("sliding_window_size") + 1
    return f.int("sliding_window")


# MPT's attn_config: numerics, kernels and the bias; none changes what is cached
_MPT_ATTN_KEYS = frozenset(
    {
        "attn_type",
        "kv_n_heads",
        "attn_pdrop",
        "attn_impl",
        "qk_ln",
        "qk_gn",
        "clip_qkv",
        "softmax_scale",
        "prefix_lm",
        "attn_uses_sequence_id",
        "alibi",
        "alibi_bias_max",
        "rope",
        "rope_theta",
        "rope_impl",
        "rope_dail_config",
        "rope_hf_config",
        "fused_qkv",
        "sliding_window_size",
        "is_encoder_decoder",
    }
)


# Complex by design (C901): one branch per KV-head convention (MPT, GPTBigCode, ChatGLM, Falcon),
# each refusing its own bad values.
# DbrxAttentionConfig's fields: kv_n_heads (default 1) are DbrxAttention's K/V heads; clip_qkv
# clamps the projections, rope_theta is the rotary base, attn_pdrop the dropout (no cache shape).
# tie_word_embeddings: transformers 4.x wrote every base field into a saved sub-config (the
# published DBRX files carry it in attn_config); an attention sub-config has no embeddings.
_DBRX_ATTN_KEYS = frozenset(
    {"kv_n_heads", "clip_qkv", "rope_theta", "attn_pdrop", "tie_word_embeddings"}
)


def _dbrx_kv_heads(f: Fields, attn_cfg: dict | None) -> int:
    """DBRX: DbrxAttention caches attn_config.kv_n_heads heads (DbrxConfig copies it into
    num_key_value_heads, which a saved file may repeat; a disagreement is refused)."""
    attn_cfg = attn_cfg or {}
    off = {k for k, v in attn_cfg.items() if k in OFF_VALUES and v == OFF_VALUES[k]}
    unknown = sorted(set(attn_cfg) - _DBRX_ATTN_KEYS - NEVER_CACHE - off)
    if unknown:
        raise ValueError(
            "config field 'attn_config' has "
            + ", ".join(_short(u) for u in unknown)
            + ", which kvcalc does not understand"
        )
    value = attn_cfg.get("kv_n_heads", 1)
    if not (
        isinstance(value, int)
        and not isinstance(value, bool)
        and 1 <= value <= cap_of("kv_n_heads")
    ):
        raise ValueError(
            f"config field 'attn_config.kv_n_heads' must be a whole number up to "
            f"{cap_of('kv_n_heads'):,}"
        )
    given = f.int("num_key_value_heads", required=False)
    if given is not None and given != value:
        raise ValueError(
            f"config fields 'attn_config.kv_n_heads' ({value}) and 'num_key_value_heads' "
            f"({given}) disagree; DbrxAttention uses attn_config.kv_n_heads"
        )
    return value


def kv_heads_of(f: Fields, q_heads: int, attn_cfg: dict | None) -> int:  # noqa: C901
    if f.model_type == "dbrx":
        return _dbrx_kv_heads(f, attn_cfg)
    if attn_cfg is not None:  # MPT
        # (a config saved by transformers writes the sub-config whole, base fields included)
        unknown = sorted(set(attn_cfg) - _MPT_ATTN_KEYS - NEVER_CACHE)
        if unknown:
            raise ValueError(
                "config field 'attn_config' has "
                + ", ".join(_short(u) for u in unknown)
                + ", which kvcalc does not understand"
            )
        if attn_cfg.get("sliding_window_size", -1) not in (-1, None):
            raise ValueError(
                "config field 'attn_config.sliding_window_size' sets a window, "
                "which kvcalc does not read for MPT"
            )
        kind = attn_cfg.get("attn_type", "multihead_attention")
        if kind == "multiquery_attention":
            return 1
        if kind == "grouped_query_attention":
            value = attn_cfg.get("kv_n_heads")
            if (
                isinstance(value, int)
                and not isinstance(value, bool)
                and 1 <= value <= cap_of("kv_n_heads")
            ):
                return value
            raise ValueError(
                f"config field 'attn_config.kv_n_heads' must be a whole number up "
                f"to {cap_of('kv_n_heads'):,} for "
                "grouped-query attention"
            )
        if kind != "multihead_attention":
            raise ValueError(
                f"config field 'attn_config.attn_type' = {_short(kind)} is not understood; "
                "expected multihead_attention, multiquery_attention or "
                "grouped_query_attention"
            )
        return q_heads
    if f.model_type == "gpt_bigcode":
        # GPTBigCodeConfig derives num_key_value_heads from multi_query (default true) and
        # GPTBigCodeAttention uses multi_query alone: a file whose two disagree is refused.
        kv = 1 if f.bool("multi_query", True) else q_heads
        given = f.int("num_key_value_heads", required=False)
        if given is not None and given != kv:
            raise ValueError(
                f"config fields 'multi_query' and 'num_key_value_heads' ({given}) "
                f"disagree; transformers uses multi_query ({kv} KV heads)"
            )
        return kv
    if f.has("multi_query_group_num"):  # ChatGLM: groups used when multi_query_attention is on
        if f.raw("multi_query_attention", default=False) is True:
            return f.int("multi_query_group_num")
        f.seen.add("multi_query_group_num")
        return q_heads
    if f.has("num_key_value_heads"):
        return f.int("num_key_value_heads")
    if f.raw("new_decoder_architecture", default=False) is True:
        f.seen.add("multi_query")  # FalconAttention ignores it under the new architecture
        return f.int("num_kv_heads", "n_head_kv")
    mq = f.raw("multi_query", default=False)
    if mq is True:
        f.seen.update({"num_kv_heads", "n_head_kv"})  # multi_query rules (FalconAttention)
        return 1
    if mq not in (False, None):
        raise ValueError(f"config field 'multi_query' must be true or false, got {_short(mq)}")
    if f.has("num_kv_heads", "n_head_kv"):
        return f.int("num_kv_heads", "n_head_kv")
    return q_heads  # no KV-head field at all: multi-head attention


def state_flavor(f: Fields, model_type: str) -> str:
    if f.has("linear_num_value_heads"):
        return "gated_deltanet"
    if f.has("attn_type_list") or model_type == "minimax":
        return "lightning"
    if f.has("mamba_num_heads", "mamba_n_heads"):
        return "mamba2"
    if f.has(*STATE_SIZE):
        return "mamba"
    raise ValueError(
        "the config has non-attention layers but no state sizes: expected "
        "'linear_num_value_heads' (Gated DeltaNet), 'mamba_num_heads' (Mamba-2) or "
        "'mamba_d_state' / 'state_size' (Mamba)"
    )


# The SSM state's own format where a config declares it (issue 38, item 1): Qwen3.5's
# mamba_ssm_dtype (in its text config) and NemotronH's mamba_ssm_cache_dtype (transformers'
# NemotronHConfig: float32 by default). vLLM keeps the state in it while its
# --mamba-ssm-cache-dtype is 'auto' (MambaStateDtypeCalculator; kvcalc.engines.vllm.kv_cache,
# which also applies the flags and the version rules), so every figure counts it so.
_SSM_FORMATS = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


def declared_ssm_dtype(f: Fields) -> tuple[str | None, str | None]:
    """The recurrent state's format the config declares ('fp32', 'fp16', 'bf16') and the field
    that declares it, or (None, None) when it declares none ('auto': the state format chosen)."""
    for name in ("mamba_ssm_dtype", "mamba_ssm_cache_dtype"):
        asked = f.raw(name)
        if asked is None or asked == "auto":
            continue
        if not isinstance(asked, str) or asked.lower() not in _SSM_FORMATS:
            raise ValueError(
                f"config field '{name}' is {asked!r}: expected 'float32', 'float16', "
                "'bfloat16' or 'auto'"
            )
        return _SSM_FORMATS[asked.lower()], name
    return None, None


def state_layer(f: Fields, hidden: int | None, flavor: str) -> RecurrentState:
    """The fixed per-sequence state of one recurrent layer. The convolution keeps kernel - 1
    past inputs, as vLLM sizes it (transformers keeps the whole kernel); the SSM state is kept in
    the format the config declares, if it declares one."""
    if flavor == "lightning":  # one state, no SSM format of its own (vLLM: --mamba-cache-dtype)
        return _state_layer(f, hidden, flavor)
    fmt, field = declared_ssm_dtype(f)
    return dataclasses.replace(
        _state_layer(f, hidden, flavor), ssm_dtype=fmt, ssm_dtype_field=field
    )


def _state_layer(f: Fields, hidden: int | None, flavor: str) -> RecurrentState:
    if flavor == "gated_deltanet":
        kh, vh = f.int("linear_num_key_heads"), f.int("linear_num_value_heads")
        kd, vd = f.int("linear_key_head_dim"), f.int("linear_value_head_dim")
        kernel = f.int("linear_conv_kernel_dim")
        conv_dim = 2 * kh * kd + vh * vd  # q, k and v all pass the short convolution
        return RecurrentState(
            conv_elements=conv_dim * (kernel - 1),
            ssm_elements=vh * kd * vd,
            flavor=flavor,
            conv_kernel=kernel,
        )
    if flavor == "lightning":
        # MiniMax lightning attention: one head_dim x head_dim key-value state per head.
        heads = f.int("num_attention_heads")
        d = f.int("head_dim", default=None, required=False) or f.int("hidden_size") // heads
        return RecurrentState(
            conv_elements=0, ssm_elements=heads * d * d, flavor=flavor, conv_kernel=1
        )
    d_state = f.int(*STATE_SIZE)
    kernel = f.int(*CONV_KERNEL, default=4)
    if flavor == "mamba2":
        # Mamba-2: the convolution runs over x, B and C: intermediate + 2 x n_groups x d_state
        # channels; the SSM state is heads x head_dim x d_state.
        heads = f.int("mamba_num_heads", "mamba_n_heads", "num_heads")
        head = f.int("mamba_head_dim", "mamba_d_head", "head_dim")
        groups = f.int("n_groups", "mamba_n_groups", default=1)
        inner = heads * head
        conv = inner + 2 * groups * d_state
        return RecurrentState(
            conv_elements=conv * (kernel - 1),
            ssm_elements=inner * d_state,
            flavor=flavor,
            conv_kernel=kernel,
            groups=groups,
            group_conv_elements=2 * d_state * (kernel - 1),
        )
    if hidden is None:
        raise ValueError("config field 'hidden_size' is missing (the Mamba state needs it)")
    # MambaConfig / FalconMambaConfig / JambaConfig: the width is expand (default 2) x hidden;
    # MambaConfig writes it as intermediate_size too, which must then agree.
    d_inner = f.int(*EXPAND, default=2) * hidden
    if f.model_type in ("mamba", "falcon_mamba") and f.has("intermediate_size"):
        written = f.int("intermediate_size")
        if written != d_inner:
            raise ValueError(
                f"config field 'intermediate_size' ({written:,}) differs from "
                f"expand x hidden_size ({d_inner:,}), which transformers uses"
            )
    return RecurrentState(
        conv_elements=d_inner * (kernel - 1),
        ssm_elements=d_inner * d_state,
        flavor=flavor,
        conv_kernel=kernel,
    )


def full_layer(geo: Geometry) -> FullAttention:
    return FullAttention(
        kv_heads=geo.kv_heads, head_dim=geo.head_dim, v_head_dim=geo.head_dim, q_heads=geo.q_heads
    )


def index_list(f: Fields, name: str, n: int, base: int = 0) -> set[int]:
    values = f.raw(name)
    if not isinstance(values, list) or any(
        isinstance(v, bool) or not isinstance(v, int) or not base <= v < n + base for v in values
    ):
        raise ValueError(
            f"config field '{name}' must list layer numbers from {base} to {n - 1 + base}"
        )
    return {v - base for v in values}


def layer_count(f: Fields, maximum: int) -> int:
    return f.int("num_hidden_layers", maximum=maximum)
