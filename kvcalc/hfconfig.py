"""Build a ModelSpec from the fields of a Hugging Face config.json.

Only config fields decide anything. Where a field is absent, the default is the one of the
transformers config class named by ``model_type`` (the architecture, not the model's name): for
example Gemma 2 alternates sliding and full layers although its config.json has no pattern field,
because ``Gemma2Config`` builds ``layer_types`` that way.

Config traps handled here (see shared/facts.md section 2):
- ``head_dim`` explicit (Gemma 2: 256, not 3584/16 = 224; gpt-oss: 64, not 2880/64 = 45)
- ``num_key_value_heads`` missing -> multi-head attention
- Falcon: ``multi_query`` (one KV head) or ``num_kv_heads`` with ``new_decoder_architecture``
- GPT-2 names: ``n_embd``, ``n_head``, ``n_layer``, ``n_positions``, ``n_inner``
- multimodal configs: the language model under ``text_config``
- ``layer_types``; ``sliding_window`` with ``sliding_window_pattern``; ``use_sliding_window: false``
- MLA (``kv_lora_rank``, ``qk_rope_head_dim``); hybrids (``full_attention_interval``,
  ``attn_layer_period`` + ``attn_layer_offset``); MoE placement fields
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from .model import (ChunkedLocal, FullAttention, MLALatent, ModelSpec, MoE, ParamCounts,
                    RecurrentState, SlidingWindow)

__all__ = ["spec_from_config", "load_config_file", "MAX_CONFIG_BYTES"]

MAX_CONFIG_BYTES = 1_000_000  # a real config.json is a few KiB; refuse anything far larger
_MAX_LAYERS = 10_000
_MAX_DIM = 10_000_000

# Defaults of transformers config classes, by model_type, for fields a config.json may omit.
_CLASS_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma2": {"sliding_window_pattern": 2, "head_dim": 256, "vocab_size": 256000},
    "gemma3_text": {"sliding_window_pattern": 6, "head_dim": 256, "vocab_size": 262208,
                    "sliding_window": 4096, "num_attention_heads": 8, "num_key_value_heads": 4,
                    "max_position_embeddings": 131072},
    "cohere2": {"sliding_window_pattern": 4},
    "falcon": {"tie_word_embeddings": True},
    "gpt2": {"n_positions": 1024, "tie_word_embeddings": True},
}

# How each architecture builds the blocks that parameter counting needs. Unlisted model types
# are counted as Llama-style (gated MLP of three matrices, no biases), and the spec says so.
_FAMILY: dict[str, dict[str, Any]] = {
    "gpt2": {"mlp": "plain", "bias": True, "norm_bias": True, "learned_positions": True},
    "falcon": {"mlp": "plain", "norm_bias": True},
    "qwen2": {"qkv_bias": True},
    "qwen2_moe": {"qkv_bias": True},
    "gpt_oss": {"attn_bias": True, "sinks": True, "expert_bias": True},
    "qwen3_next": {"gated_q": True, "qk_norm": True},
    "qwen3": {"qk_norm": True},
    "qwen3_moe": {"qk_norm": True},
    "gemma2": {"norms_per_layer": 4},
    "gemma3_text": {"norms_per_layer": 4, "qk_norm": True},
    "jamba": {},
    "deepseek_v3": {},
    "deepseek_v2": {},
    "llama": {}, "mistral": {}, "mixtral": {}, "phi3": {},
}


class _Fields:
    """Reads config fields by their possible names and validates them with messages that name
    the field a user has to fix."""

    def __init__(self, cfg: dict, defaults: dict):
        self.cfg = cfg
        self.defaults = defaults

    def has(self, *names: str) -> bool:
        """True when any of ``names`` is set, by the config or by its class default."""
        return any(self.cfg.get(n) is not None or self.defaults.get(n) is not None
                   for n in names)

    def raw(self, *names: str, default: Any = None) -> Any:
        for n in names:
            if self.cfg.get(n) is not None:
                return self.cfg[n]
        for n in names:
            if self.defaults.get(n) is not None:
                return self.defaults[n]
        return default

    def int(self, *names: str, default: Any = None, minimum: int = 1, required: bool = True):
        value = self.raw(*names, default=default)
        label = " / ".join(names)
        if value is None:
            if required:
                raise ValueError(f"config field '{names[0]}' is missing (looked for {label})")
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"config field '{label}' must be a whole number, got {value!r}")
        if isinstance(value, float):
            if not math.isfinite(value) or value != int(value):
                raise ValueError(f"config field '{label}' must be a whole number, got {value!r}")
            value = int(value)
        if value < minimum:
            raise ValueError(f"config field '{label}' must be at least {minimum}, got {value}")
        if value > _MAX_DIM:
            raise ValueError(f"config field '{label}' = {value} is implausibly large")
        return value

    def bool(self, name: str, default: bool) -> bool:
        value = self.raw(name, default=default)
        if not isinstance(value, bool):
            raise ValueError(f"config field '{name}' must be true or false, got {value!r}")
        return value


def load_config_file(path: str | Path) -> dict:
    """Read a config.json file into a dict, with clear errors for the usual mistakes."""
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError as exc:
        raise ValueError(f"cannot read config file '{path}': {exc.strerror or exc}") from None
    if size > MAX_CONFIG_BYTES:
        raise ValueError(f"config file '{path}' is {size:,} bytes; a config.json is at most "
                         f"{MAX_CONFIG_BYTES:,} bytes")
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ValueError(f"cannot read config file '{path}': {exc.strerror or exc}") from None
    return parse_config_text(text, source=str(path))


def parse_config_text(text: str, source: str = "config") -> dict:
    if len(text.encode("utf-8", errors="replace")) > MAX_CONFIG_BYTES:
        raise ValueError(f"{source} is larger than {MAX_CONFIG_BYTES:,} bytes; paste a config.json")
    try:
        cfg = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError(f"{source} is nested too deeply to be a config.json") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{source} is not valid JSON: {exc.msg} at line {exc.lineno}, "
                         f"column {exc.colno}") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"{source} must be a JSON object ({{...}}), got {type(cfg).__name__}")
    return cfg


def _reject_constant(name: str):
    raise ValueError(f"config contains {name}, which is not a number a config may hold")


def spec_from_config(config: dict, *, name: str | None = None,
                     honor_sliding_window: bool = True) -> ModelSpec:
    """Turn a config.json dict into a ModelSpec.

    ``honor_sliding_window=False`` treats every sliding layer as full attention, as runtimes do
    that ignore a config's window (several do for Mistral-7B-v0.1 and Phi-3)."""
    if not isinstance(config, dict):
        raise ValueError(f"a config must be a JSON object, got {type(config).__name__}")
    top_type = config.get("model_type")
    cfg = config
    notes: list[str] = []
    if isinstance(config.get("text_config"), dict):
        cfg = dict(config["text_config"])
        notes.append("language model read from text_config; vision parameters are not counted")
    elif "text_config" in config and config["text_config"] is not None:
        raise ValueError("config field 'text_config' must be an object")
    model_type = cfg.get("model_type") or top_type or ""
    if not isinstance(model_type, str):
        raise ValueError(f"config field 'model_type' must be a string, got {model_type!r}")
    if model_type == "gemma3":  # a text_config without its own model_type
        model_type = "gemma3_text"
    f = _Fields(cfg, _CLASS_DEFAULTS.get(model_type, {}))
    family = _FAMILY.get(model_type)
    if family is None:
        family = {}
        notes.append(f"model_type {model_type or '(none)'!r} is not a known family: parameters "
                     "counted as a Llama-style decoder (gated MLP, no biases)")

    hidden = f.int("hidden_size", "n_embd", "d_model")
    num_layers = f.int("num_hidden_layers", "n_layer", "num_layers")
    if num_layers > _MAX_LAYERS:
        raise ValueError(f"config field 'num_hidden_layers' = {num_layers} is implausibly large")
    q_heads = f.int("num_attention_heads", "n_head", "num_heads")
    kv_heads = _kv_heads(f, q_heads)
    if q_heads % kv_heads:
        raise ValueError(f"config field 'num_key_value_heads' ({kv_heads}) must divide "
                         f"'num_attention_heads' ({q_heads})")
    if f.has("head_dim"):
        head_dim = f.int("head_dim")
    else:
        if hidden % q_heads:
            raise ValueError(f"'hidden_size' ({hidden}) is not divisible by 'num_attention_heads' "
                             f"({q_heads}); the config must give 'head_dim'")
        head_dim = hidden // q_heads
    vocab = f.int("vocab_size")
    max_ctx = f.int("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                    default=2048)

    kinds = _layer_kinds(f, num_layers, honor_sliding_window)
    layers = []
    mla = f.has("kv_lora_rank")
    for kind in kinds:
        if kind == "state":
            layers.append(_state_layer(f, hidden, model_type))
        elif mla:
            layers.append(MLALatent(
                kv_lora_rank=f.int("kv_lora_rank"), qk_rope_head_dim=f.int("qk_rope_head_dim"),
                q_heads=q_heads,
                qk_head_dim=f.int("qk_nope_head_dim") + f.int("qk_rope_head_dim"),
                v_head_dim=f.int("v_head_dim")))
        else:
            common = dict(kv_heads=kv_heads, head_dim=head_dim, v_head_dim=head_dim,
                          q_heads=q_heads)
            if kind == "full":
                layers.append(FullAttention(**common))
            elif kind == "sliding":
                layers.append(SlidingWindow(window=f.int("sliding_window"), **common))
            elif kind == "chunked":
                layers.append(ChunkedLocal(chunk=f.int("attention_chunk_size"), **common))
    if mla:
        notes.append("MLA: the cache holds one latent of kv_lora_rank + qk_rope_head_dim per "
                     "token and layer; num_key_value_heads does not apply")

    moe = _moe(f, hidden, num_layers, family)
    params = _count_params(f, family, layers, moe, hidden, vocab, head_dim, q_heads, kv_heads,
                           num_layers)
    label = name or cfg.get("_name_or_path") or config.get("_name_or_path") or model_type or "custom"
    return ModelSpec(name=str(label), layers=tuple(layers), params=params, moe=moe,
                     hidden_size=hidden, vocab_size=vocab, max_context=max_ctx,
                     notes=tuple(notes))


def _kv_heads(f: _Fields, q_heads: int) -> int:
    if f.has("num_key_value_heads"):
        return f.int("num_key_value_heads")
    if f.raw("new_decoder_architecture", default=False) is True:
        return f.int("num_kv_heads", "n_head_kv")
    mq = f.raw("multi_query", default=False)
    if mq is True:
        return 1
    if mq not in (False, None):
        raise ValueError(f"config field 'multi_query' must be true or false, got {mq!r}")
    if f.has("num_kv_heads", "n_head_kv"):
        return f.int("num_kv_heads", "n_head_kv")
    return q_heads  # no KV-head field at all: multi-head attention


def _layer_kinds(f: _Fields, n: int, honor_sliding: bool) -> list[str]:
    """One kind per layer: full, sliding, chunked or state (MLA is decided by kv_lora_rank)."""
    types = f.raw("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != n:
            raise ValueError(f"config field 'layer_types' must list one type for each of the "
                             f"{n} layers")
        mapping = {"full_attention": "full", "attention": "full", "sliding_attention": "sliding",
                   "chunked_attention": "chunked", "linear_attention": "state", "mamba": "state",
                   "mamba2": "state"}
        kinds = []
        for i, t in enumerate(types):
            if t not in mapping:
                raise ValueError(f"config field 'layer_types[{i}]' = {t!r} is not one of "
                                 f"{', '.join(sorted(mapping))}")
            kinds.append(mapping[t])
    elif f.has("full_attention_interval"):
        k = f.int("full_attention_interval")
        kinds = ["full" if (i + 1) % k == 0 else "state" for i in range(n)]
    elif f.has("attn_layer_period"):
        period = f.int("attn_layer_period")
        offset = f.int("attn_layer_offset", minimum=0)
        if offset >= period:
            raise ValueError(f"config field 'attn_layer_offset' ({offset}) must be smaller than "
                             f"'attn_layer_period' ({period})")
        kinds = ["full" if i % period == offset else "state" for i in range(n)]
    elif f.has("sliding_window") and f.raw("use_sliding_window", default=True) is not False:
        if f.has("sliding_window_pattern"):
            p = f.int("sliding_window_pattern")
            kinds = ["full" if (i + 1) % p == 0 else "sliding" for i in range(n)]
        elif f.has("max_window_layers") and f.has("use_sliding_window"):
            # Qwen2 with use_sliding_window true: layers from max_window_layers on use the window.
            m = f.int("max_window_layers", minimum=0)
            kinds = ["sliding" if i >= m else "full" for i in range(n)]
        else:
            kinds = ["sliding"] * n
    else:
        kinds = ["full"] * n
    if f.has("attention_chunk_size") and types is None:
        # Llama 4: RoPE layers attend within chunks; every no_rope_layer_interval-th layer is a
        # global NoPE layer. ``no_rope_layers[i]`` is 1 where layer i uses RoPE (is chunked).
        flags = f.raw("no_rope_layers")
        if isinstance(flags, list) and len(flags) == n:
            kinds = ["chunked" if flags[i] else kinds[i] for i in range(n)]
        else:
            every = f.int("no_rope_layer_interval", default=4)
            kinds = [kinds[i] if (i + 1) % every == 0 else "chunked" for i in range(n)]
    if any(k == "sliding" for k in kinds):
        f.int("sliding_window")  # validates presence and value
    if not honor_sliding:
        kinds = ["full" if k == "sliding" else k for k in kinds]
    return kinds


def _state_layer(f: _Fields, hidden: int, model_type: str) -> RecurrentState:
    # Convolution state keeps kernel-1 past inputs (as vLLM sizes it; transformers keeps kernel).
    if f.has("linear_num_value_heads"):
        kh, vh = f.int("linear_num_key_heads"), f.int("linear_num_value_heads")
        kd, vd = f.int("linear_key_head_dim"), f.int("linear_value_head_dim")
        kernel = f.int("linear_conv_kernel_dim")
        conv_dim = 2 * kh * kd + vh * vd  # q, k and v all pass the short convolution
        return RecurrentState(conv_elements=conv_dim * (kernel - 1), ssm_elements=vh * kd * vd,
                              flavor="gated_deltanet", conv_kernel=kernel)
    if f.has("mamba_d_state", "state_size", "ssm_state_size"):
        d_state = f.int("mamba_d_state", "state_size", "ssm_state_size")
        kernel = f.int("mamba_d_conv", "conv_kernel", default=4)
        expand = f.int("mamba_expand", "expand", default=2)
        d_inner = expand * hidden
        return RecurrentState(conv_elements=d_inner * (kernel - 1), ssm_elements=d_inner * d_state,
                              flavor="mamba", conv_kernel=kernel)
    raise ValueError("the config has non-attention layers but no state sizes: expected "
                     "'linear_num_value_heads' (Gated DeltaNet) or 'mamba_d_state' (Mamba)")


def _moe(f: _Fields, hidden: int, n: int, family: dict) -> MoE | None:
    e = f.raw("num_local_experts", "n_routed_experts", "num_experts")
    if e is None or e in (0, 1):
        return None
    e = f.int("num_local_experts", "n_routed_experts", "num_experts")
    k = f.int("num_experts_per_tok", "experts_per_token", "num_experts_per_token",
              "moe_top_k", "top_k")
    if k > e:
        raise ValueError(f"config field 'num_experts_per_tok' ({k}) exceeds the number of "
                         f"experts ({e})")
    inter = f.int("moe_intermediate_size", "intermediate_size")
    per_expert = 3 * hidden * inter
    if family.get("expert_bias"):
        per_expert += 2 * inter + hidden
    # Which layers are MoE.
    if f.has("first_k_dense_replace", "moe_layer_freq"):
        first = f.int("first_k_dense_replace", default=0, minimum=0)
        freq = f.int("moe_layer_freq", default=1)
        moe_layers = sum(1 for i in range(n) if i >= first and i % freq == 0)
    elif f.has("expert_layer_period"):
        period = f.int("expert_layer_period")
        offset = f.int("expert_layer_offset", default=0, minimum=0)
        moe_layers = sum(1 for i in range(n) if i % period == offset)
    elif f.has("decoder_sparse_step", "mlp_only_layers"):
        step = f.int("decoder_sparse_step", default=1)
        only = f.raw("mlp_only_layers", default=[]) or []
        if not isinstance(only, list):
            raise ValueError("config field 'mlp_only_layers' must be a list of layer indices")
        moe_layers = sum(1 for i in range(n) if i not in only and (i + 1) % step == 0)
    else:
        moe_layers = n
    shared = 0
    if f.has("n_shared_experts"):
        shared = f.int("n_shared_experts", minimum=0) * 3 * hidden * inter
    if f.has("shared_expert_intermediate_size"):
        shared += 3 * hidden * f.int("shared_expert_intermediate_size", minimum=0) + hidden
    return MoE(num_experts=e, top_k=k, expert_params=per_expert, layers=moe_layers,
               shared_params_per_layer=shared)


def _count_params(f: _Fields, family: dict, layers, moe: MoE | None, hidden: int, vocab: int,
                  head_dim: int, q_heads: int, kv_heads: int, n: int) -> ParamCounts:
    """Parameters from config fields, layer by layer. Norm weights are counted; rotary tables
    and buffers are not parameters."""
    tied = f.bool("tie_word_embeddings", True)
    embedding = vocab * hidden
    lm_head = 0 if tied else vocab * hidden
    other = 0
    if family.get("learned_positions"):
        other += f.int("n_positions", "max_position_embeddings") * hidden
    bias = family.get("bias", False) or f.raw("bias", default=False) is True
    norm_w = 2 * hidden if (family.get("norm_bias") or bias) else hidden

    attention = 0
    for layer in layers:
        if layer.kind == "mla":
            attention += _mla_params(f, hidden, q_heads)
        elif layer.kind == "state":
            attention += _state_params(f, hidden, layer)
        else:
            q_out = q_heads * head_dim * (2 if family.get("gated_q") else 1)
            kv_out = kv_heads * head_dim
            a = hidden * (q_out + 2 * kv_out) + q_heads * head_dim * hidden
            if bias or family.get("attn_bias") or f.raw("attention_bias", default=False) is True:
                a += q_out + 2 * kv_out + hidden
            elif family.get("qkv_bias"):
                a += q_out + 2 * kv_out
            if family.get("sinks"):
                a += q_heads
            if family.get("qk_norm"):
                a += 2 * head_dim
            attention += a

    # Feed-forward: dense layers are those that are not MoE.
    dense_layers = n - (moe.layers if moe else 0)
    if family.get("mlp") == "plain":
        inter = f.int("n_inner", "ffn_hidden_size", "intermediate_size", default=4 * hidden)
        per = 2 * hidden * inter + ((inter + hidden) if bias else 0)
    else:
        inter = f.int("intermediate_size", required=dense_layers > 0, default=None)
        per = 3 * hidden * inter if inter else 0
    mlp = dense_layers * per

    routed = shared = router = 0
    if moe is not None:
        routed = moe.layers * moe.num_experts * moe.expert_params
        shared = moe.layers * moe.shared_params_per_layer
        router = moe.layers * moe.num_experts * hidden
        if family.get("expert_bias"):
            router += moe.layers * moe.num_experts
        if f.has("n_group") and f.has("topk_method"):
            router += moe.layers * moe.num_experts  # DeepSeek-V3's e_score_correction_bias

    per_layer_norms = family.get("norms_per_layer", 2)
    if family.get("mlp") == "plain" and f.raw("parallel_attn", default=False) is True \
            and f.raw("new_decoder_architecture", default=False) is not True:
        per_layer_norms = 1  # Falcon-7B: attention and MLP read the same normed input
    norms = n * per_layer_norms * norm_w + norm_w
    return ParamCounts(embedding=embedding, lm_head=lm_head, attention=attention, mlp=mlp,
                       routed_experts=routed, shared_experts=shared, router=router, norms=norms,
                       other=other, tied=tied)


def _mla_params(f: _Fields, hidden: int, heads: int) -> int:
    nope, rope = f.int("qk_nope_head_dim"), f.int("qk_rope_head_dim")
    v, kv_rank = f.int("v_head_dim"), f.int("kv_lora_rank")
    q_dim = heads * (nope + rope)
    if f.has("q_lora_rank"):
        q_rank = f.int("q_lora_rank")
        q = hidden * q_rank + q_rank + q_rank * q_dim  # down, norm, up
    else:
        q = hidden * q_dim
    kv = hidden * (kv_rank + rope) + kv_rank + kv_rank * heads * (nope + v)
    return q + kv + heads * v * hidden


def _state_params(f: _Fields, hidden: int, layer: RecurrentState) -> int:
    if layer.flavor == "gated_deltanet":
        kh, vh = f.int("linear_num_key_heads"), f.int("linear_num_value_heads")
        kd, vd = f.int("linear_key_head_dim"), f.int("linear_value_head_dim")
        kernel = f.int("linear_conv_kernel_dim")
        key_dim, value_dim = kh * kd, vh * vd
        conv_dim = 2 * key_dim + value_dim
        return (hidden * (2 * key_dim + 2 * value_dim)  # in_proj_qkvz
                + hidden * 2 * vh  # in_proj_ba
                + conv_dim * kernel  # depthwise conv
                + 2 * vh + vd  # dt_bias, A_log, gated norm
                + value_dim * hidden)  # out_proj
    d_state = f.int("mamba_d_state", "state_size", "ssm_state_size")
    kernel = f.int("mamba_d_conv", "conv_kernel", default=4)
    d_inner = f.int("mamba_expand", "expand", default=2) * hidden
    dt_rank = f.raw("mamba_dt_rank", "time_step_rank", default="auto")
    dt_rank = math.ceil(hidden / 16) if dt_rank == "auto" else f.int("mamba_dt_rank", "time_step_rank")
    p = hidden * 2 * d_inner  # in_proj
    if f.raw("mamba_proj_bias", default=False) is True:
        p += 2 * d_inner + hidden
    p += d_inner * kernel + (d_inner if f.raw("mamba_conv_bias", default=True) is True else 0)
    p += d_inner * (dt_rank + 2 * d_state)  # x_proj
    p += dt_rank * d_inner + d_inner  # dt_proj with bias
    p += d_inner * d_state + d_inner  # A_log, D
    p += d_inner * hidden  # out_proj
    p += dt_rank + 2 * d_state  # Jamba's dt/B/C layer norms
    return p


_TORCH_DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


def checkpoint_format(config: dict) -> tuple[str, str | None]:
    """(weight dtype, expert dtype or None) of a checkpoint, read from its config:
    ``quantization_config.quant_method`` (fp8, mxfp4) first, then ``torch_dtype``/``dtype``;
    BF16 when the config says nothing."""
    cfg = config if isinstance(config, dict) else {}
    q = cfg.get("quantization_config")
    method = q.get("quant_method") if isinstance(q, dict) else None
    if method == "mxfp4":  # gpt-oss: only the MoE experts are MXFP4, the rest stays BF16
        return "bf16", "mxfp4"
    if method == "fp8":
        return "fp8", None
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    name = cfg.get("torch_dtype") or cfg.get("dtype") or text.get("torch_dtype")
    return _TORCH_DTYPES.get(name, "bf16") if isinstance(name, str) else "bf16", None
