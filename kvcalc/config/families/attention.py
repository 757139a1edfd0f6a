"""One attention layer's cache geometry from a config's fields (heads, dims, window, the
DeepSeek-sparse indexer keys, the KV-head conventions), and the readers of attention families
with a structure of their own (GPT-Neo, Llama 3.2 Vision's text model, MiniCPM3, seq2seq)."""

from __future__ import annotations

from typing import Any

from ...core.model import (
    ChunkedLocal,
    CrossAttention,
    ExtraCache,
    FullAttention,
    LatentInTransformers,
    MLALatent,
    SlidingWindow,
)
from ...core.text import short as _short
from ..fields import Fields, Geometry, per_layer, refuse_unknown, whole
from ..limits import MAX_LAYERS, cap_of
from .understood import NEVER_CACHE, OFF_VALUES


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
        allowed = ("full", "shared")
        types = per_layer("indexer_types", types, n, allowed, "'full' or 'shared'")
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
    mimo = kind == "sliding" and f.model_type == "mimo_v2_flash"
    if mimo or kind == "sliding" and f.has("swa_num_key_value_heads", "swa_head_dim"):
        # MiMoV2FlashAttention (transformers) gives sliding layers 2 x num_key_value_heads;
        # vLLM's mimo_v2_flash.py reads swa_num_key_value_heads. Published files agree.
        doubled = 2 * kv if mimo else kv
        kv = f.int("swa_num_key_value_heads", default=doubled)
        if mimo and kv != doubled:
            raise ValueError(
                f"config field 'swa_num_key_value_heads' ({kv}) is not twice "
                f"'num_key_value_heads' ({doubled // 2}): vLLM would cache {kv} "
                f"heads and transformers {doubled}; kvcalc does not pick one"
            )
        q = f.int("swa_num_attention_heads", default=q)
        k_dim = f.int("swa_head_dim", default=k_dim)
        v = f.int("swa_v_head_dim", default=v)
    common = dict(kv_heads=kv, head_dim=k_dim, v_head_dim=v, q_heads=q, extra=extra)
    if mimo and f.has("sliding_window_size"):
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
    """
    attn_type kv_n_heads attn_pdrop attn_impl qk_ln qk_gn clip_qkv softmax_scale prefix_lm
    attn_uses_sequence_id alibi alibi_bias_max rope rope_theta rope_impl rope_dail_config
    rope_hf_config fused_qkv sliding_window_size is_encoder_decoder
    """.split()
)


# DbrxAttentionConfig's fields: kv_n_heads (default 1) are DbrxAttention's K/V heads; clip_qkv
# clamps the projections, rope_theta is the rotary base, attn_pdrop the dropout (no cache shape).
# tie_word_embeddings: transformers 4.x wrote every base field into a saved sub-config (the
# published DBRX files carry it in attn_config); an attention sub-config has no embeddings.
_DBRX_ATTN_KEYS = frozenset(
    {"kv_n_heads", "clip_qkv", "rope_theta", "attn_pdrop", "tie_word_embeddings"}
)


def bigcode_kv_heads(f: Fields, q_heads: int, attn_cfg: dict | None) -> int:
    """GPTBigCodeConfig derives num_key_value_heads from multi_query (default true) and
    GPTBigCodeAttention uses multi_query alone: a file whose two disagree is refused."""
    kv = 1 if f.bool("multi_query", True) else q_heads
    given = f.int("num_key_value_heads", required=False)
    if given is not None and given != kv:
        raise ValueError(
            f"config fields 'multi_query' and 'num_key_value_heads' ({given}) "
            f"disagree; transformers uses multi_query ({kv} KV heads)"
        )
    return kv


def dbrx_kv_heads(f: Fields, q_heads: int, attn_cfg: dict | None) -> int:
    """DBRX: DbrxAttention caches attn_config.kv_n_heads heads (DbrxConfig copies it into
    num_key_value_heads, which a saved file may repeat; a disagreement is refused)."""
    attn_cfg = attn_cfg or {}
    off = {k for k, v in attn_cfg.items() if k in OFF_VALUES and v == OFF_VALUES[k]}
    refuse_unknown("attn_config", sorted(set(attn_cfg) - _DBRX_ATTN_KEYS - NEVER_CACHE - off))
    value = _kv_n_heads(attn_cfg.get("kv_n_heads", 1))
    given = f.int("num_key_value_heads", required=False)
    if given is not None and given != value:
        raise ValueError(
            f"config fields 'attn_config.kv_n_heads' ({value}) and 'num_key_value_heads' "
            f"({given}) disagree; DbrxAttention uses attn_config.kv_n_heads"
        )
    return value


def _kv_n_heads(value: Any, why: str = "") -> int:
    """attn_config.kv_n_heads (MPT's, DBRX's) when it is a whole number up to its cap."""
    cap = cap_of("kv_n_heads")
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= cap:
        raise ValueError(
            f"config field 'attn_config.kv_n_heads' must be a whole number up to {cap:,}{why}"
        )
    return value


def kv_heads_of(f: Fields, q_heads: int, attn_cfg: dict | None) -> int:  # noqa: C901
    """The K/V heads: the family's own rule (its record's ``kv_heads``), else by the convention
    the config uses (MPT's attn_config, ChatGLM's groups, Falcon's multi_query, the standard
    num_key_value_heads; one branch each, C901), else multi-head attention."""
    if f.family is not None and f.family.kv_heads is not None:
        return f.family.kv_heads(f, q_heads, attn_cfg)
    if attn_cfg is not None:  # MPT
        # (a config saved by transformers writes the sub-config whole, base fields included)
        refuse_unknown("attn_config", sorted(set(attn_cfg) - _MPT_ATTN_KEYS - NEVER_CACHE))
        if attn_cfg.get("sliding_window_size", -1) not in (-1, None):
            raise ValueError(
                "config field 'attn_config.sliding_window_size' sets a window, "
                "which kvcalc does not read for MPT"
            )
        kind = attn_cfg.get("attn_type", "multihead_attention")
        if kind == "multiquery_attention":
            return 1
        if kind == "grouped_query_attention":
            return _kv_n_heads(attn_cfg.get("kv_n_heads"), " for grouped-query attention")
        if kind != "multihead_attention":
            raise ValueError(
                f"config field 'attn_config.attn_type' = {_short(kind)} is not understood; "
                "expected multihead_attention, multiquery_attention or "
                "grouped_query_attention"
            )
        return q_heads
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


def heads_of(geo: Geometry) -> dict[str, Any]:
    """The base geometry as a layer's fields: K/V heads, K and V dims, query heads."""
    return dict(
        kv_heads=geo.kv_heads, head_dim=geo.head_dim, v_head_dim=geo.head_dim, q_heads=geo.q_heads
    )


def mla_latent(f: Fields, q_heads: int, extra: ExtraCache | None = None) -> MLALatent:
    """An MLA layer's cache: one latent of kv_lora_rank + qk_rope_head_dim per token."""
    rope = f.int("qk_rope_head_dim")
    return MLALatent(
        kv_lora_rank=f.int("kv_lora_rank"),
        qk_rope_head_dim=rope,
        q_heads=q_heads,
        qk_head_dim=f.int("qk_nope_head_dim") + rope,
        v_head_dim=f.int("v_head_dim"),
        extra=extra,
    )


def full_layer(geo: Geometry) -> FullAttention:
    return FullAttention(**heads_of(geo))


def index_list(name: str, values: Any, n: int, base: int = 0) -> set[int]:
    """Config field ``name``'s layer numbers (counted from ``base``), from 0."""
    if not isinstance(values, list) or any(
        isinstance(v, bool) or not isinstance(v, int) or not base <= v < n + base for v in values
    ):
        raise ValueError(
            f"config field '{name}' must list layer numbers from {base} to {n - 1 + base}"
        )
    return {v - base for v in values}


def head_dim_is_derived(f: Fields, geo: Geometry, who: str) -> None:
    """Families whose modeling code takes head_dim as hidden_size // num_attention_heads: a
    different head_dim in the file would not be the one that runs."""
    if geo.hidden is None or not geo.q_heads:
        return
    derived = geo.hidden // geo.q_heads
    if geo.head_dim != derived:
        raise ValueError(
            f"config field 'head_dim' ({geo.head_dim}) differs from hidden_size // "
            f"num_attention_heads ({derived}), which {who} uses"
        )


def gpt_neo_layers(f: Fields, geo: Geometry, max_layers: int) -> list:
    """GPT-Neo: attention_types expands to one type per layer; every layer keeps every token in
    transformers (vLLM has no GPT-Neo)."""
    n = f.int("num_hidden_layers", "num_layers", maximum=max_layers)
    spec = f.raw("attention_types", default=None)
    f.seen.update({"attention_types", "attention_layers"})
    if spec is None:
        spec = [[["global", "local"], 12]]
        geo.assumptions.append(
            "attention_types is not in the config: took [[['global', 'local'], 12]], the "
            "default of transformers' gpt_neo config class"
        )
    types: list = []
    ok = isinstance(spec, list) and bool(spec)
    for item in spec if ok else ():
        if not (
            isinstance(item, (list, tuple))
            and len(item) == 2
            and isinstance(item[0], (list, tuple))
            and item[0]
            and all(t in ("global", "local") for t in item[0])
            and isinstance(item[1], int)
            and not isinstance(item[1], bool)
            and 0 < item[1] * len(item[0]) <= max_layers - len(types)
        ):
            ok = False
            break
        types.extend(list(item[0]) * item[1])
    if not ok:
        raise ValueError(
            "config field 'attention_types' must be a list of [['global' or 'local', ...], "
            "repeats] pairs, as GPTNeoConfig takes it"
        )
    if len(types) != n:
        raise ValueError(
            f"config field 'attention_types' expands to {len(types)} layers, but "
            f"'num_layers' is {n} (transformers refuses the same)"
        )
    if "local" in types:
        window = f.int("window_size", default=256)
        geo.notes.append(
            f"{types.count('local')} local layers attend to the last {window:,} tokens, but "
            "transformers' GPT-Neo (vLLM has no GPT-Neo) keeps every token in their cache, "
            "as in the global layers"
        )
    else:
        f.seen.add("window_size")  # no local layer: the window is used nowhere
    return [full_layer(geo) for _ in types]


# Far above Llama 3.2 Vision's 448-pixel tiles of 14-pixel patches, 4 tiles an image
_VISION_CAPS = {"image_size": 65_536, "patch_size": 65_536, "max_num_tiles": 1024}


def mllama_layers(f: Fields, geo: Geometry, max_layers: int) -> list:
    """mllama's text model: ``cross_attention_layers`` attend to the vision encoder's states.
    Their K/V are computed once per image: max_num_tiles x ((image_size // patch_size)^2 + 1)
    states (transformers' MllamaVisionModel), not one per text token."""
    n = f.int("num_hidden_layers", maximum=max_layers)
    head_dim_is_derived(f, geo, "MllamaTextSelfAttention")
    cross = set()
    if f.has("cross_attention_layers"):
        cross = index_list("cross_attention_layers", f.raw("cross_attention_layers"), n)
    vision = f.top.get("vision_config") if isinstance(f.top, dict) else None
    tokens = 0
    if cross:
        if not isinstance(vision, dict):
            raise ValueError(
                "config field 'vision_config' is missing: the cross-attention "
                "layers' K/V per image need its image_size, patch_size and "
                "max_num_tiles (paste the whole config.json, not only text_config)"
            )
        size, patch, tiles = (
            whole(vision.get(name, default), f"vision_config.{name}", _VISION_CAPS[name])
            for name, default in (("image_size", 448), ("patch_size", 14), ("max_num_tiles", 4))
        )
        tokens = tiles * ((size // patch) ** 2 + 1)
    heads = dict(kv_heads=geo.kv_heads, head_dim=geo.head_dim, q_heads=geo.q_heads)
    layers = [
        CrossAttention(**heads, image_tokens=tokens) if i in cross else full_layer(geo)
        for i in range(n)
    ]
    if cross:
        geo.notes.append(
            f"{len(cross)} cross-attention layers keep the image's K/V, {tokens:,} "
            "encoder states per image, once per image and not per token; the "
            "figures count one image per sequence"
        )
    return layers


def minicpm3_layers(f: Fields, geo: Geometry, max_layers: int) -> list:
    """MiniCPM3: MLA-style projections, but vLLM's minicpm3.py caches per-head K and V of
    qk_nope_head_dim + qk_rope_head_dim each (V padded to the QK head size), one per query
    head; transformers caches the compressed latent instead (named on each layer)."""
    n = f.int("num_hidden_layers", maximum=max_layers)
    rope, nope = f.int("qk_rope_head_dim"), f.int("qk_nope_head_dim")
    rank = f.int("kv_lora_rank")
    f.seen.update({"num_key_value_heads", "q_lora_rank", "v_head_dim", "head_dim"})
    layer = LatentInTransformers(
        kv_heads=geo.q_heads,
        head_dim=nope + rope,
        v_head_dim=nope + rope,
        q_heads=geo.q_heads,
        latent_rank=rank,
        latent_rope=rope,
    )
    geo.notes.append(
        "MiniCPM3: vLLM caches K and V per query head (V padded to the QK head "
        f"size {nope + rope}); transformers caches the {rank} + {rope} latent"
    )
    return [layer] * n


def seq2seq_layout(f: Fields, hidden: int | None) -> tuple[list, Geometry]:
    """BART-style decoders run as causal LMs (BartForCausalLM, XGLM): decoder_layers layers of
    multi-head self-attention, decoder_attention_heads heads of d_model / heads. In
    encoder-decoder generation each layer also caches the encoder's K/V, per source sequence:
    said in a note, not counted (the source length is not a config field)."""
    n = f.int("decoder_layers", "num_layers", maximum=MAX_LAYERS)
    heads = f.int("decoder_attention_heads", "attention_heads")
    d_model = f.int("d_model")
    if d_model % heads:
        raise ValueError(
            f"config field 'd_model' ({d_model}) is not divisible by "
            f"'decoder_attention_heads' ({heads})"
        )
    head = d_model // heads
    geo = Geometry(hidden=hidden, q_heads=heads, kv_heads=heads, head_dim=head)
    if f.raw("use_prompt", default=False) is True:
        raise ValueError(
            "config field 'use_prompt' is true: MVP's learned prompt tokens are "
            "cached in every layer too, which kvcalc does not model"
        )
    f.seen.add("prompt_length")  # only used with use_prompt
    if f.raw("is_encoder_decoder", default=False) is True:
        geo.notes.append(
            "the decoder as a causal LM: self-attention only. In encoder-decoder "
            f"generation each of the {n} layers also caches the encoder's K/V, 2 x "
            f"{heads} heads x {head} per source token, which is not counted here"
        )
    return [full_layer(geo)] * n, geo
