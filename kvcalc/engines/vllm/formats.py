"""Cache formats as vLLM lays them out: --kv-cache-dtype by release, the recurrent-state dtypes
and the Mamba cache mode as vLLM resolves them, and one token's bytes in one layer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ...core.dtypes import DType, get_dtype
from .facts import NEWEST, VERSION_FACTS, fact, resolve_version

# -- recurrent-state dtypes and the Mamba cache mode, as vLLM resolves them -----------------------

_NEMOTRON_H = ("NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "NemotronH_Nano_VL_V2")
_QWEN3_5 = (
    "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5ForCausalLM",
    "Qwen3_5MoeForCausalLM",
)
# v0.27.1: the model classes with SupportsMambaPrefixCaching, which get mamba_cache_mode 'all'
# when prefix caching is on (v0.15.0-v0.27.x).
MAMBA_ALL_MODE = (
    "FalconH1ForCausalLM",
    "GraniteMoeHybridForCausalLM",
    "JambaForCausalLM",
    "MambaForCausalLM",
    "Mamba2ForCausalLM",
    "NemotronHForCausalLM",
    "Zamba2ForCausalLM",
)
_MAMBA_DTYPES = {
    "auto": None,
    "float32": "fp32",
    "float16": "fp16",
    "bfloat16": "bf16",
    "fp32": "fp32",
    "fp16": "fp16",
    "bf16": "bf16",
}
MAMBA_DTYPE_CHOICES = ("auto", "float32", "float16", "bfloat16")  # vLLM's MambaDType


class StateDtypes(NamedTuple):
    conv: str  # kvcalc name of the convolution state's dtype
    ssm: str  # ... of the recurrent (SSM / delta-rule / linear-attention) state's
    why: str  # where each came from


def mamba_dtype(value, what: str) -> str | None:
    key = str(value).strip().lower() if value is not None else "auto"
    if key not in _MAMBA_DTYPES:
        raise ValueError(
            f"{what} must be one of {', '.join(MAMBA_DTYPE_CHOICES)}, got {str(value)[:20]!r}"
        )
    return _MAMBA_DTYPES[key]


def _config_parts(config) -> tuple[dict, dict, str]:
    cfg = config if isinstance(config, dict) else {}
    text = cfg.get("text_config")
    text = text if isinstance(text, dict) else {}
    archs = cfg.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else ""
    return cfg, text, arch


def model_dtype_of(config) -> str:
    """The dtype vLLM's --dtype auto gives the model (kvcalc name): the config's torch_dtype /
    dtype, float32 checkpoints downcast to bf16 (ModelConfig._resolve_auto_dtype); bf16 when
    the config says nothing."""
    cfg, text, _ = _config_parts(config)
    name = (
        cfg.get("torch_dtype") or cfg.get("dtype") or text.get("torch_dtype") or text.get("dtype")
    )
    return "fp16" if name == "float16" else "bf16"


def state_dtypes(
    config: dict | None,
    ssm_flag: str | None = None,
    conv_flag: str | None = None,
    model_dtype: str | None = None,
    vllm_version: str | None = None,
) -> StateDtypes:
    """The dtypes vLLM gives a recurrent layer's conv state and SSM state, from the raw
    config.json dict and the ``vllm serve`` flags (MambaStateDtypeCalculator, config/cache.py,
    model_executor/models/config.py; tests/data/vllm-facts.md, Q10):

    - conv state: --mamba-cache-dtype, 'auto' = the model's dtype;
    - SSM state: --mamba-ssm-cache-dtype; 'auto' = the conv state's dtype, except NemotronH
      (config.json's mamba_ssm_cache_dtype, else float16 / float32 from v0.20.0), Qwen3.5
      (text_config.mamba_ssm_dtype, v0.17.0 on) and Kimi-Linear's KDA (float32);
    - MiniMax's linear attention keeps one state, in --mamba-cache-dtype."""
    version = resolve_version(vllm_version)
    cfg, text, arch = _config_parts(config)
    base = mamba_dtype(model_dtype, "model dtype") or model_dtype_of(cfg)
    conv_set = mamba_dtype(conv_flag, "--mamba-cache-dtype")
    ssm_set = mamba_dtype(ssm_flag, "--mamba-ssm-cache-dtype")
    conv = conv_set or base
    why = [f"conv state {conv}: " + ("--mamba-cache-dtype" if conv_set else "the model's dtype")]
    model_type = str(cfg.get("model_type", ""))
    if model_type.startswith("minimax") or arch.startswith("MiniMax"):
        why.append("one linear-attention state, in --mamba-cache-dtype")
        return StateDtypes(conv, conv, "; ".join(why))
    if model_type == "kimi_linear" or arch.startswith("KimiLinear"):
        if ssm_set is None or version < (0, 30, 0):
            ssm, src = "fp32", "KDA's recurrent state is float32 (kda_state_dtype)"
        elif ssm_set in ("fp32", "bf16"):
            ssm, src = ssm_set, "--mamba-ssm-cache-dtype (KDA: float32 or bfloat16, v0.30.0)"
        else:
            raise ValueError("KDA's recurrent state takes only float32 or bfloat16")
    elif ssm_set is not None:
        ssm, src = ssm_set, "--mamba-ssm-cache-dtype"
    elif arch in _NEMOTRON_H:
        hf = text if arch == "NemotronH_Nano_VL_V2" else cfg
        asked = _MAMBA_DTYPES.get(str(hf.get("mamba_ssm_cache_dtype", "")).lower())
        ssm = asked or fact("nemotron_h_ssm_default", version)
        src = (
            "config.json mamba_ssm_cache_dtype"
            if asked
            else f"NemotronH's default in vLLM {'.'.join(map(str, version))}"
        )
    elif (
        arch in _QWEN3_5
        and fact("qwen3_5_ssm_from_config", version)
        and (qwen := _MAMBA_DTYPES.get(str((text or cfg).get("mamba_ssm_dtype", "")).lower()))
    ):
        ssm = qwen
        src = "config.json mamba_ssm_dtype (Qwen3.5: vLLM 0.17.0 on, main builds 0.16.1rc1.devN)"
    else:
        ssm, src = conv, "the conv state's dtype ('auto')"
    why.append(f"SSM state {ssm}: {src}")
    return StateDtypes(conv, ssm, "; ".join(why))


def mamba_cache_mode_of(
    vllm_version: str | tuple | None = None,
    enable_prefix_caching: bool | None = None,
    hybrid: bool = True,
    architecture: str | None = None,
) -> str:
    """vLLM's mamba_cache_mode: 'none' with prefix caching off; with it on 'all' for models
    with Mamba prefix-caching support (v0.15.0-v0.27.x), else 'align' (tests/data/
    vllm-facts.md, Q11). ``enable_prefix_caching`` None: the version's default, on for hybrid
    models from v0.28.0 (PR #50991) and never for attention-free ones."""
    version = vllm_version if isinstance(vllm_version, tuple) else resolve_version(vllm_version)
    if enable_prefix_caching is None:
        enable_prefix_caching = hybrid and fact("hybrid_prefix_caching", version)
    if not enable_prefix_caching:
        return "none"
    mode = fact("mamba_cache_mode", version)
    if mode is None:
        raise ValueError(
            "prefix caching with recurrent layers is not modelled before vLLM "
            "0.15.0 (no mamba_cache_mode); give --no-enable-prefix-caching or a "
            "newer version"
        )
    if mode == "all or align":
        return "all" if architecture in MAMBA_ALL_MODE else "align"
    return mode


# vLLM's --kv-cache-dtype, by kvcalc format (+ per-token-head scales): (vLLM's name, first
# release, source). Per-token-head modes add one fp32 scale for K and one for V per head and
# token (8 B per head; 8 B for an MLA latent too).
_CACHE_DTYPES = {
    ("bf16", False): ("auto", (0, 0, 0), "the model's dtype"),
    ("fp16", False): ("auto", (0, 0, 0), "the model's dtype"),
    ("fp32", False): ("auto", (0, 0, 0), "the model's dtype"),
    ("fp8", False): ("fp8", (0, 0, 0), "fp8 / fp8_e4m3 / fp8_e5m2, per-tensor scales"),
    ("fp8", True): ("fp8_per_token_head", (0, 20, 0), "PR #38378"),
    ("int8", True): ("int8_per_token_head", (0, 20, 0), "PR #38378"),
    ("int4", True): ("int4_per_token_head", (0, 25, 0), "PR #40835"),
}


@dataclass(frozen=True)
class CacheFormat:
    """How one vLLM cache format lays a token of one layer out (bytes from vLLM's specs)."""

    name: str  # vLLM's --kv-cache-dtype
    kind: str  # plain, per_head, nvfp4, ds_mla
    dtype: DType | None = None  # kvcalc DType of the values (plain, per_head)
    mla_bytes: int = 0  # ds_mla: bytes per token and layer of the latent


# Every choice of vLLM's CacheDType Literal (vllm/config/cache.py), with its first release and
# how kvcalc sizes it (tests/data/vllm-facts.md, Q4). None: in vLLM, not modelled by kvcalc.
_VLLM_FORMATS: dict[str, tuple[tuple[int, int, int], CacheFormat | None, str]] = {
    "auto": (
        (0, 0, 0),
        CacheFormat("auto", "plain", get_dtype("bf16")),
        "the model's dtype (kvcalc: 16-bit)",
    ),
    "bfloat16": ((0, 11, 0), CacheFormat("bfloat16", "plain", get_dtype("bf16")), "v0.11.0"),
    "float16": ((0, 18, 0), CacheFormat("float16", "plain", get_dtype("fp16")), "v0.18.0"),
    "fp8": ((0, 0, 0), CacheFormat("fp8", "plain", get_dtype("fp8")), "fp8 = fp8_e4m3"),
    "fp8_e4m3": ((0, 0, 0), CacheFormat("fp8_e4m3", "plain", get_dtype("fp8")), "1 B a value"),
    "fp8_e5m2": ((0, 0, 0), CacheFormat("fp8_e5m2", "plain", get_dtype("fp8")), "1 B a value"),
    "fp8_inc": (
        (0, 10, 0),
        CacheFormat("fp8_inc", "plain", get_dtype("fp8")),
        "Intel Gaudi fp8 (float8_e4m3fn), 1 B a value",
    ),
    "fp8_ds_mla": (
        (0, 11, 1),
        CacheFormat("fp8_ds_mla", "ds_mla", mla_bytes=656),
        "656 B a token and MLA layer (MLAAttentionSpec)",
    ),
    "nvfp4_ds_mla": (
        (0, 30, 0),
        CacheFormat("nvfp4_ds_mla", "ds_mla", mla_bytes=352),
        "352 B a token and MLA layer (flashmla_sparse.py)",
    ),
    "turboquant_k8v4": ((0, 20, 0), None, "packed K|V slots, boundary layers kept 16-bit"),
    "turboquant_4bit_nc": ((0, 20, 0), None, "packed K|V slots, boundary layers kept 16-bit"),
    "turboquant_k3v4_nc": ((0, 20, 0), None, "packed K|V slots, boundary layers kept 16-bit"),
    "turboquant_3bit_nc": ((0, 20, 0), None, "packed K|V slots, boundary layers kept 16-bit"),
    "octave_k3v4": ((0, 33, 0), None, "ROCm Octave backend slots"),
    "octave_k3v3": ((0, 33, 0), None, "ROCm Octave backend slots"),
    "octave_k3v3_compact": ((0, 33, 0), None, "ROCm Octave backend slots"),
    "ultraquant_4bit": ((0, 32, 0), None, "packed FP4 + UE8M0 slots, boundary layers 16-bit"),
    "int4_per_token_head": (
        (0, 25, 0),
        CacheFormat("int4_per_token_head", "per_head", get_dtype("int4")),
        "PR #40835",
    ),
    "int8_per_token_head": (
        (0, 20, 0),
        CacheFormat("int8_per_token_head", "per_head", get_dtype("int8")),
        "PR #38378",
    ),
    "fp8_per_token_head": (
        (0, 20, 0),
        CacheFormat("fp8_per_token_head", "per_head", get_dtype("fp8")),
        "PR #38378",
    ),
    "nvfp4": ((0, 20, 0), CacheFormat("nvfp4", "nvfp4"), "PR #37332 (FlashInfer path v0.21.0)"),
    "nvfp4_4over6": (
        (0, 28, 0),
        CacheFormat("nvfp4_4over6", "nvfp4"),
        "PR #45187: the nvfp4 layout",
    ),
}


def version_choices() -> list[str]:
    """NEWEST first, then the releases on both sides of every change in VERSION_FACTS."""
    seen = {NEWEST}
    out = [NEWEST]
    changes = {since for f in VERSION_FACTS.values() for since, _, _ in f.steps[1:]}
    changes |= {since for _, since, _ in _CACHE_DTYPES.values() if since > (0, 0, 0)}
    for since in sorted(changes, reverse=True):
        major, minor, patch = since
        before = f"{major}.{minor}.{patch - 1}" if patch else f"{major}.{minor - 1}.x"
        for text in (".".join(map(str, since)), before):
            if text not in seen:
                seen.add(text)
                out.append(text)
    return out


def kv_cache_dtypes(version: str | None = None, *, vllm_names: bool = False) -> list[str]:
    """KV formats that ``version`` of vLLM has: kvcalc's names (a trailing '+scales':
    per-token-head), or with ``vllm_names`` every --kv-cache-dtype choice of that version's
    CacheDType, those kvcalc does not model included (predict refuses them by name)."""
    v = resolve_version(version)
    if vllm_names:
        return [n for n, (since, _, _) in _VLLM_FORMATS.items() if v >= since]
    return [
        d + ("+scales" if sc else "")
        for (d, sc), (_, since, _) in _CACHE_DTYPES.items()
        if v >= since
    ]


def kv_cache_dtype_modelled(name: str) -> bool:
    """Whether kvcalc sizes vLLM's --kv-cache-dtype ``name`` (False: refused by name)."""
    entry = _VLLM_FORMATS.get(name)
    return entry is not None and entry[1] is not None


def cache_format(kv_dtype: str, scales: bool, version: tuple[int, ...]) -> CacheFormat:
    """The cache format for a kvcalc KV format or a vLLM --kv-cache-dtype name in ``version``,
    or a ValueError that names what this version has. INT8 and INT4 exist only per token and
    head; a format vLLM has but kvcalc does not model is refused by name."""
    shown = ".".join(map(str, version))
    if isinstance(kv_dtype, str) and kv_dtype.strip().lower() in _VLLM_FORMATS and not scales:
        name = kv_dtype.strip().lower()
        since, fmt, why = _VLLM_FORMATS[name]
        if version < since:
            raise ValueError(
                f"vLLM {shown} has no --kv-cache-dtype {name} (it came in "
                f"{'.'.join(map(str, since))}); its formats: "
                f"{', '.join(kv_cache_dtypes(shown, vllm_names=True))}"
            )
        if fmt is None:
            raise ValueError(
                f"--kv-cache-dtype {name} is not modelled by kvcalc ({why}: its "
                "page size depends on the attention backend); pick another format"
            )
        return fmt
    d = get_dtype("bf16" if kv_dtype == "auto" else kv_dtype)
    per_head = d.quantized and (bool(scales) or d.name in ("int8", "int4"))
    entry = _CACHE_DTYPES.get((d.name, per_head))
    if entry is None or version < entry[1]:
        have = ", ".join(kv_cache_dtypes(shown))
        raise ValueError(
            f"vLLM {shown} has no {d.name.upper()}"
            + (" per-token-head" if per_head else "")
            + f" KV cache (its formats: {have}); pick one of those or a newer "
            "vLLM version"
        )
    return CacheFormat(entry[0], "per_head" if per_head else "plain", d)


def vllm_bytes_per_token(layer, fmt: CacheFormat) -> int:
    """One token's bytes in one layer as vLLM lays the page out (vllm-facts.md, Q4):
    plain formats one value each; per-token-head modes 8 B more per KV head (an fp32 scale for
    K and one for V) and 8 B per MLA latent; NVFP4 head_dim/2 + head_dim/16 bytes for K and for
    V per head; the DeepSeek sparse layouts a fixed size per latent. Indexer keys on top."""
    if not layer.stores_tokens:
        return 0
    extra = layer.extra.bytes_per_token if layer.extra is not None else 0
    mla = layer.kind == "mla"
    if fmt.kind == "plain":
        return layer.bytes_per_token(fmt.dtype, False)
    if fmt.kind == "per_head":
        base = layer.bytes_per_token(fmt.dtype, False)
        return base + 8 * (1 if mla else layer.kv_heads)
    if fmt.kind == "nvfp4":
        if mla:
            raise ValueError(
                f"--kv-cache-dtype {fmt.name} has no MLA layout in vLLM; use "
                "nvfp4_ds_mla or fp8_ds_mla for an MLA model"
            )
        return (
            layer.kv_heads
            * (
                layer.head_dim // 2
                + layer.head_dim // 16
                + layer.v_head_dim // 2
                + layer.v_head_dim // 16
            )
            + extra
        )
    # ds_mla: the DeepSeek sparse layouts of a 512 latent + 64 RoPE
    if not mla or (layer.kv_lora_rank, layer.qk_rope_head_dim) != (512, 64):
        raise ValueError(
            f"--kv-cache-dtype {fmt.name} is the DeepSeek sparse MLA layout "
            "(512 latent + 64 RoPE values); this model's layers are not"
        )
    return fmt.mla_bytes + extra
