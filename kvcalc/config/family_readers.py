"""Readers for families that carry their structure in fields of their own.

Each reader takes the field reader ``f`` of ``kvcalc.config.hfconfig`` (every field it looks at
counts as understood) and the base attention geometry, and returns the model's layers. The sources
are the families' modeling files in vLLM (``vllm/model_executor/models/<family>.py`` and
``layers/mamba/mamba_utils.py`` for state shapes) and transformers 5.24; where the two keep
different things, the layer names the difference (``transformers_note``) and kvcalc follows
vLLM.

==================  =========================================  ================================
family              structure field                            what each layer keeps
==================  =========================================  ================================
lfm2, lfm2_moe      ``layer_types`` ("conv") or the older      attention: K/V; short conv:
                    ``full_attn_idxs``                         (conv_L_cache - 1) x hidden
falcon_h1           every layer                                K/V and a Mamba-2 state
granitemoehybrid    ``layer_types`` / ``layers_block_type``    attention: K/V (RoPE or NoPE);
                    ("mamba" / "attention")                    mamba: a Mamba-2 state
bamba               ``attn_layer_indices`` (0-based)           attention: K/V; others Mamba-2
gpt_neo             ``attention_types`` (global / local)       K/V of every token (local too:
                                                               transformers keeps them all)
kimi_linear         ``linear_attn_config`` (1-based            KDA: conv 3 x H x D x (k - 1) +
                    ``kda_layers``)                            float32 H x D x D; MLA: latent
mllama (text)       ``cross_attention_layers``                 cross: the image's K/V, per image
minicpm3            MLA-style projections                      per-head K and V of qk_head_dim
recurrent_gemma     ``block_types``                            local attention (window) or
                                                               RG-LRU: float32 lru_width +
                                                               conv (conv1d_width - 1) x width
rwkv                none (attention-free)                      5 x hidden: 2 shift vectors +
                                                               3 float32 WKV accumulators
==================  =========================================  ================================
"""

from __future__ import annotations

from ..core.model import (
    AttentionWithState,
    CrossAttention,
    FullAttention,
    LatentInTransformers,
    RecurrentState,
    SlidingWindow,
)
from .fields import Fields, Geometry
from .kimi_readers import kimi_linear_layers
from .layer_readers import full_layer as _full
from .layer_readers import index_list as _index_list
from .layer_readers import layer_count as _layer_count
from .mamba2_readers import bamba_layers, granite_hybrid_layers

__all__ = ["FAMILY_READERS", "rwkv_layers"]


def _equal_to_hidden(f: Fields, hidden: int | None, name: str, needs: str, why: str) -> int:
    """A width field that must equal hidden_size (defaulting to it), or a ValueError saying why
    the two readings it would allow differ."""
    if hidden is None:
        raise ValueError(f"config field 'hidden_size' is missing ({needs} needs it)")
    width = f.int(name, default=hidden)
    if width != hidden:
        raise ValueError(
            f"config field '{name}' ({width:,}) differs from 'hidden_size' ({hidden:,}): {why}"
        )
    return width


def _head_dim_is_derived(f: Fields, geo: Geometry, who: str) -> None:
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


# -- LFM2 -------------------------------------------------------------------------------------


def _lfm2(f: Fields, geo: Geometry, max_layers: int) -> list:
    """LFM2: attention layers and short-convolution layers. vLLM keeps conv_L_cache - 1 past
    inputs of conv_dim channels per conv layer, in the model dtype (short_conv_state_shape);
    transformers derives ``layer_types`` from ``full_attn_idxs`` when it is absent (and makes
    every layer attention when both are)."""
    types = f.raw("layer_types")
    if types is not None:
        if (
            not isinstance(types, list)
            or not types
            or any(t not in ("conv", "full_attention") for t in types)
        ):
            raise ValueError(
                "config field 'layer_types' must list 'conv' or 'full_attention' for each layer"
            )
        declared = f.int("num_hidden_layers", required=False, maximum=max_layers)
        if declared is not None and declared != len(types):
            raise ValueError(
                f"config field 'layer_types' must list one entry for each of the "
                f"{declared} layers, got {len(types)}"
            )
        if len(types) > max_layers:
            raise ValueError(
                f"config field 'layer_types' lists {len(types):,} layers (at most {max_layers:,})"
            )
        f.seen.add("full_attn_idxs")  # superseded by layer_types, as in transformers
        attn = {i for i, t in enumerate(types) if t == "full_attention"}
        n = len(types)
    else:
        n = _layer_count(f, max_layers)
        attn = _index_list(f, "full_attn_idxs", n) if f.has("full_attn_idxs") else set(range(n))
    width = _equal_to_hidden(
        f,
        geo.hidden,
        "conv_dim",
        "LFM2's conv state",
        "vLLM sizes the conv state by conv_dim, transformers by "
        "hidden_size, and kvcalc does not pick one",
    )
    kernel = f.int("conv_L_cache", default=3, minimum=2)
    conv = RecurrentState(
        conv_elements=width * (kernel - 1), ssm_elements=0, flavor="short conv", conv_kernel=kernel
    )
    return [_full(geo) if i in attn else conv for i in range(n)]


# -- Falcon-H1 --------------------------------------------------------------------------------


def _falcon_h1(f: Fields, geo: Geometry, max_layers: int) -> list:
    """Falcon-H1: every layer runs attention and a Mamba-2 mixer in parallel, so each keeps
    K/V per token and a Mamba-2 state (transformers' FalconH1Mixer, vLLM's falcon_h1.py):
    inner width mamba_d_ssm (or mamba_expand x hidden), conv over inner + 2 x groups x d_state
    channels, SSM heads x d_head x d_state."""
    n = _layer_count(f, max_layers)
    hidden = geo.hidden
    if "mamba_d_ssm" in f.cfg and f.cfg["mamba_d_ssm"] is None:
        # FalconH1Config: an explicit null means mamba_expand x hidden_size
        if hidden is None:
            raise ValueError("config field 'hidden_size' is missing (the Mamba width needs it)")
        inner = f.int("mamba_expand", default=2) * hidden
    elif f.has("mamba_d_ssm"):
        inner = f.int("mamba_d_ssm")
    else:
        inner = 1024  # FalconH1Config's default when the field is absent
        geo.assumptions.append(
            "'mamba_d_ssm' is not in the config: took 1024, the default of "
            "transformers' falcon_h1 config class"
        )
    f.seen.add("mamba_expand")
    heads = f.int("mamba_n_heads")
    head = f.raw("mamba_d_head", default="auto")
    if head == "auto":
        if inner % heads:
            raise ValueError(
                f"config field 'mamba_n_heads' ({heads}) must divide the Mamba width ({inner:,})"
            )
        head = inner // heads
    else:
        head = f.int("mamba_d_head")
    if head * heads != inner:
        raise ValueError(
            f"config fields 'mamba_n_heads' x 'mamba_d_head' ({heads * head:,}) "
            f"must equal the Mamba width ({inner:,})"
        )
    groups = f.int("mamba_n_groups", default=1)
    d_state = f.int("mamba_d_state")
    kernel = f.int("mamba_d_conv", default=4, minimum=2)
    state = RecurrentState(
        conv_elements=(inner + 2 * groups * d_state) * (kernel - 1),
        ssm_elements=heads * head * d_state,
        flavor="mamba2",
        conv_kernel=kernel,
        groups=groups,
        group_conv_elements=2 * d_state * (kernel - 1),
    )
    base = _full(geo)
    layer = AttentionWithState(
        kv_heads=base.kv_heads,
        head_dim=base.head_dim,
        v_head_dim=base.v_head_dim,
        q_heads=base.q_heads,
        state=state,
    )
    return [layer] * n


def _gpt_neo(f: Fields, geo: Geometry, max_layers: int) -> list:
    """GPT-Neo: attention_types ([[["global", "local"], 12]], GPTNeoConfig's default) expands to
    one type per layer. A local layer masks all but the last window_size tokens
    (GPTNeoSelfAttention's bias), yet its cache is no window: GPTNeoModel makes
    DynamicCache(config), and with neither layer_types nor sliding_window every layer is a full
    DynamicLayer keeping every token. vLLM has no GPT-Neo model, so transformers (and servers
    that run its modeling code) is the engine: every layer keeps the whole context, said in a
    note. attention_layers is what transformers derives from attention_types (it overwrites a
    file's own copy)."""
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
    return [_full(geo) for _ in types]


# -- Llama 3.2 Vision (mllama) ----------------------------------------------------------------

# Far above Llama 3.2 Vision's 448-pixel tiles of 14-pixel patches, 4 tiles an image
_VISION_CAPS = {"image_size": 65_536, "patch_size": 65_536, "max_num_tiles": 1024}


def _mllama(f: Fields, geo: Geometry, max_layers: int) -> list:
    """mllama's text model: ``cross_attention_layers`` attend to the vision encoder's states.
    Their K/V are computed once per image: max_num_tiles x ((image_size // patch_size)^2 + 1)
    states (transformers' MllamaVisionModel), not one per text token."""
    n = _layer_count(f, max_layers)
    _head_dim_is_derived(f, geo, "MllamaTextSelfAttention")
    cross = (
        _index_list(f, "cross_attention_layers", n) if f.has("cross_attention_layers") else set()
    )
    vision = f.top.get("vision_config") if isinstance(f.top, dict) else None
    layers: list = []
    tokens = 0
    if cross:
        if not isinstance(vision, dict):
            raise ValueError(
                "config field 'vision_config' is missing: the cross-attention "
                "layers' K/V per image need its image_size, patch_size and "
                "max_num_tiles (paste the whole config.json, not only text_config)"
            )
        vision_config = vision

        def vint(name: str, default: int) -> int:
            v = vision_config.get(name, default)
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= _VISION_CAPS[name]:
                raise ValueError(
                    f"config field 'vision_config.{name}' must be a whole number "
                    f"from 1 to {_VISION_CAPS[name]:,}"
                )
            return v

        size, patch = vint("image_size", 448), vint("patch_size", 14)
        tokens = vint("max_num_tiles", 4) * ((size // patch) ** 2 + 1)
    for i in range(n):
        if i in cross:
            layers.append(
                CrossAttention(
                    kv_heads=geo.kv_heads,
                    head_dim=geo.head_dim,
                    q_heads=geo.q_heads,
                    image_tokens=tokens,
                )
            )
        else:
            layers.append(_full(geo))
    if cross:
        geo.notes.append(
            f"{len(cross)} cross-attention layers keep the image's K/V, {tokens:,} "
            "encoder states per image, once per image and not per token; the "
            "figures count one image per sequence"
        )
    return layers


# -- MiniCPM3 ---------------------------------------------------------------------------------


def _minicpm3(f: Fields, geo: Geometry, max_layers: int) -> list:
    """MiniCPM3: MLA-style projections, but vLLM's minicpm3.py caches per-head K and V of
    qk_nope_head_dim + qk_rope_head_dim each (V padded to the QK head size), one per query
    head; transformers caches the compressed latent instead (named on each layer)."""
    n = _layer_count(f, max_layers)
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


# -- RecurrentGemma ---------------------------------------------------------------------------


def _recurrent_gemma(f: Fields, geo: Geometry, max_layers: int) -> list:
    """RecurrentGemma (Griffin): ``block_types`` repeats over the layers; attention blocks use
    local attention over attention_window_size tokens, recurrent blocks keep an RG-LRU state
    of lru_width in float32 and a conv state of conv1d_width - 1 inputs (transformers'
    RecurrentGemmaRecurrentBlock; vLLM does not serve this family)."""
    n = _layer_count(f, max_layers)
    # transformers reads block_types (default recurrent, recurrent, attention) and keeps a
    # published file's _block_types as an unused extra: where the two differ, refuse.
    blocks = f.raw("block_types", default=["recurrent", "recurrent", "attention"])
    if (
        not isinstance(blocks, list)
        or not blocks
        or any(b not in ("recurrent", "attention") for b in blocks)
    ):
        raise ValueError("config field 'block_types' must list 'recurrent' or 'attention'")
    legacy = f.raw("_block_types")
    if legacy is not None and list(legacy) != list(blocks):
        raise ValueError(
            "config field '_block_types' differs from 'block_types': transformers "
            "uses block_types and ignores _block_types, so the file's own layout "
            "would not be the one that runs; kvcalc does not pick one"
        )
    _head_dim_is_derived(f, geo, "RecurrentGemmaConfig")
    if f.cfg.get("sliding_window") not in (None, f.cfg.get("attention_window_size")):
        raise ValueError(
            "config fields 'sliding_window' and 'attention_window_size' differ; "
            "transformers reads attention_window_size"
        )
    width = f.int("lru_width", default=geo.hidden)
    kernel = f.int("conv1d_width", default=4, minimum=2)
    window = f.int("attention_window_size")
    f.seen.add("sliding_window")  # transformers' alias of attention_window_size
    state = RecurrentState(
        conv_elements=width * (kernel - 1),
        ssm_elements=width,
        flavor="rg-lru",
        conv_kernel=kernel,
        ssm_dtype="fp32",
    )
    base = _full(geo)
    local = SlidingWindow(
        kv_heads=base.kv_heads,
        head_dim=base.head_dim,
        v_head_dim=base.v_head_dim,
        q_heads=base.q_heads,
        window=window,
    )
    # transformers keeps the whole window and conv1d_width - 1 inputs (its own cache, not a
    # Cache object): the meta-device check cannot read it, so the source is its modeling code.
    return [local if blocks[i % len(blocks)] == "attention" else state for i in range(n)]


# -- RWKV -------------------------------------------------------------------------------------


def rwkv_layers(f: Fields, hidden: int | None, max_layers: int) -> list:
    """RWKV-4 (attention-free): per layer five vectors of hidden_size, the two token-shift
    inputs in the model dtype and the three WKV accumulators (numerator, denominator, maximum)
    in float32 (transformers' RwkvModel state; vLLM does not serve RWKV)."""
    n = f.int("num_hidden_layers", maximum=max_layers)
    hidden = _equal_to_hidden(
        f,
        hidden,
        "attention_hidden_size",
        "RWKV's state",
        "transformers' RWKV state is sized by hidden_size and would not run",
    )
    # the feed-forward width, the fp16 rescaling schedule and the embeddings: weights only
    f.seen.update(
        {
            "intermediate_size",
            "rescale_every",
            "vocab_size",
            "tie_word_embeddings",
            "layer_norm_epsilon",
        }
    )
    state = RecurrentState(
        conv_elements=2 * hidden,
        ssm_elements=3 * hidden,
        flavor="rwkv",
        conv_kernel=1,
        ssm_dtype="fp32",
    )
    return [state] * n


# -- the decoder of an encoder-decoder, as a causal LM --------------------------------------------

SEQ2SEQ_DECODERS = (
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


def seq2seq_decoder_layers(f: Fields, max_layers: int, notes: list) -> tuple[list, int, int]:
    """BART-style decoders run as causal LMs (BartForCausalLM, XGLM): decoder_layers layers of
    multi-head self-attention, decoder_attention_heads heads of d_model / heads. In
    encoder-decoder generation each layer also caches the encoder's K/V, per source sequence:
    said in a note, not counted (the source length is not a config field)."""
    n = f.int("decoder_layers", "num_layers", maximum=max_layers)
    heads = f.int("decoder_attention_heads", "attention_heads")
    d_model = f.int("d_model")
    if d_model % heads:
        raise ValueError(
            f"config field 'd_model' ({d_model}) is not divisible by "
            f"'decoder_attention_heads' ({heads})"
        )
    head = d_model // heads
    if f.raw("use_prompt", default=False) is True:
        raise ValueError(
            "config field 'use_prompt' is true: MVP's learned prompt tokens are "
            "cached in every layer too, which kvcalc does not model"
        )
    f.seen.add("prompt_length")  # only used with use_prompt
    if f.raw("is_encoder_decoder", default=False) is True:
        notes.append(
            "the decoder as a causal LM: self-attention only. In encoder-decoder "
            f"generation each of the {n} layers also caches the encoder's K/V, 2 x "
            f"{heads} heads x {head} per source token, which is not counted here"
        )
    layer = FullAttention(kv_heads=heads, head_dim=head, v_head_dim=head, q_heads=heads)
    return [layer] * n, heads, head


FAMILY_READERS = {
    "lfm2": _lfm2,
    "lfm2_moe": _lfm2,
    "falcon_h1": _falcon_h1,
    "granitemoehybrid": granite_hybrid_layers,
    "bamba": bamba_layers,
    "gpt_neo": _gpt_neo,
    "kimi_linear": kimi_linear_layers,
    "mllama_text_model": _mllama,
    "minicpm3": _minicpm3,
    "recurrent_gemma": _recurrent_gemma,
}
