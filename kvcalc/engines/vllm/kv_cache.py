"""vLLM's KV cache laid out (vllm/v1/kv_cache_interface.py, vllm/v1/core/kv_cache_utils.py):
the formats a token and a recurrent state are kept in, one token's bytes in one layer, and the
KV-cache groups a model's layers form on one GPU or pipeline stage."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from ...cache.deployment import CacheFormat
from ...core.arith import cdiv
from ...core.dtypes import DType, get_dtype
from ...core.model import (
    ChunkedLocal,
    FullAttention,
    Layer,
    MLALatent,
    RecurrentState,
    SlidingWindow,
)
from .facts import Facts, fact, resolve_version

# -- the KV cache's formats, by release -----------------------------------------------------------

# vLLM's --kv-cache-dtype for a kvcalc format (+ per-token-head scales); the releases that have
# each: Facts.kv_cache_dtypes. Per-token-head modes add one fp32 scale for K and one for V per
# head and token (8 B per head; 8 B for an MLA latent too).
_CACHE_DTYPES = {
    ("bf16", False): "auto",  # the model's dtype
    ("fp16", False): "auto",
    ("fp32", False): "auto",
    ("fp8", False): "fp8",  # fp8 / fp8_e4m3 / fp8_e5m2, per-tensor scales
    ("fp8", True): "fp8_per_token_head",
    ("int8", True): "int8_per_token_head",
    ("int4", True): "int4_per_token_head",
}


@dataclass(frozen=True)
class KVFormat:
    """How one vLLM --kv-cache-dtype lays a token of one layer out (bytes from vLLM's specs)."""

    name: str  # vLLM's --kv-cache-dtype
    kind: str  # plain, per_head, nvfp4, ds_mla
    dtype: DType | None = None  # kvcalc DType of the values (plain, per_head)
    mla_bytes: int = 0  # ds_mla: bytes per token and layer of the latent


_TURBO = "packed K|V slots, boundary layers kept 16-bit"
_OCTAVE = "ROCm Octave backend slots"
# Every choice of vLLM's CacheDType Literal (vllm/config/cache.py) and how kvcalc sizes it
# (tests/data/vllm-facts.md, Q4). None: in vLLM, not modelled by kvcalc.
_VLLM_FORMATS: dict[str, tuple[KVFormat | None, str]] = {
    "auto": (KVFormat("auto", "plain", get_dtype("bf16")), "the model's dtype (kvcalc: 16-bit)"),
    "bfloat16": (KVFormat("bfloat16", "plain", get_dtype("bf16")), "2 B a value"),
    "float16": (KVFormat("float16", "plain", get_dtype("fp16")), "2 B a value"),
    "fp8": (KVFormat("fp8", "plain", get_dtype("fp8")), "fp8 = fp8_e4m3"),
    "fp8_e4m3": (KVFormat("fp8_e4m3", "plain", get_dtype("fp8")), "1 B a value"),
    "fp8_e5m2": (KVFormat("fp8_e5m2", "plain", get_dtype("fp8")), "1 B a value"),
    "fp8_inc": (KVFormat("fp8_inc", "plain", get_dtype("fp8")), "Intel Gaudi fp8, 1 B a value"),
    "fp8_ds_mla": (
        KVFormat("fp8_ds_mla", "ds_mla", mla_bytes=656),
        "656 B a token and MLA layer (MLAAttentionSpec)",
    ),
    "nvfp4_ds_mla": (
        KVFormat("nvfp4_ds_mla", "ds_mla", mla_bytes=352),
        "352 B a token and MLA layer (flashmla_sparse.py)",
    ),
    "turboquant_k8v4": (None, _TURBO),
    "turboquant_4bit_nc": (None, _TURBO),
    "turboquant_k3v4_nc": (None, _TURBO),
    "turboquant_3bit_nc": (None, _TURBO),
    "octave_k3v4": (None, _OCTAVE),
    "octave_k3v3": (None, _OCTAVE),
    "octave_k3v3_compact": (None, _OCTAVE),
    "ultraquant_4bit": (None, "packed FP4 + UE8M0 slots, boundary layers 16-bit"),
    "int4_per_token_head": (KVFormat("int4_per_token_head", "per_head", get_dtype("int4")), ""),
    "int8_per_token_head": (KVFormat("int8_per_token_head", "per_head", get_dtype("int8")), ""),
    "fp8_per_token_head": (KVFormat("fp8_per_token_head", "per_head", get_dtype("fp8")), ""),
    "nvfp4": (KVFormat("nvfp4", "nvfp4"), "FlashInfer path v0.21.0"),
    "nvfp4_4over6": (KVFormat("nvfp4_4over6", "nvfp4"), "the nvfp4 layout"),
}


def kv_cache_dtypes(version: str | None = None, *, vllm_names: bool = False) -> list[str]:
    """KV formats that ``version`` of vLLM has: kvcalc's names (a trailing '+scales':
    per-token-head), or with ``vllm_names`` every --kv-cache-dtype choice of that version's
    CacheDType, those kvcalc does not model included (predict refuses them by name)."""
    have = fact(Facts.kv_cache_dtypes, version)
    if vllm_names:
        return [n for n in _VLLM_FORMATS if n in have]
    return [d + ("+scales" if sc else "") for (d, sc), n in _CACHE_DTYPES.items() if n in have]


def kv_cache_dtype_modelled(name: str) -> bool:
    """Whether kvcalc sizes vLLM's --kv-cache-dtype ``name`` (False: refused by name)."""
    return _VLLM_FORMATS.get(name, (None, ""))[0] is not None


def cache_format(kv_dtype: str, scales: bool, version: tuple[int, ...]) -> KVFormat:
    """The cache format for a kvcalc KV format or a vLLM --kv-cache-dtype name in ``version``,
    or a ValueError that names what this version has. INT8 and INT4 exist only per token and
    head; a format vLLM has but kvcalc does not model is refused by name."""
    shown = ".".join(map(str, version))
    if isinstance(kv_dtype, str) and kv_dtype.strip().lower() in _VLLM_FORMATS and not scales:
        name = kv_dtype.strip().lower()
        fmt, why = _VLLM_FORMATS[name]
        if name not in fact(Facts.kv_cache_dtypes, version):
            since = next(v for v, have, _ in Facts.kv_cache_dtypes.steps if name in have)
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
    vllm_name = _CACHE_DTYPES.get((d.name, per_head))
    if vllm_name is None or vllm_name not in fact(Facts.kv_cache_dtypes, version):
        have = ", ".join(kv_cache_dtypes(shown))
        raise ValueError(
            f"vLLM {shown} has no {d.name.upper()}"
            + (" per-token-head" if per_head else "")
            + f" KV cache (its formats: {have}); pick one of those or a newer "
            "vLLM version"
        )
    return KVFormat(vllm_name, "per_head" if per_head else "plain", d)


def vllm_bytes_per_token(layer: Layer, fmt: KVFormat) -> int:
    """One token's bytes in one layer as vLLM lays the page out (vllm-facts.md, Q4), each
    format's rule below; an indexer's keys on top."""
    if not layer.stores_tokens:
        return 0
    extra = layer.extra.bytes_per_token if layer.extra is not None else 0
    if fmt.dtype is not None:  # plain and per_head: one value each, in fmt.dtype
        base = layer.bytes_per_token(fmt.dtype, False)
        # per_head: a pair of scales per KV head (an MLA latent, kv_heads None: one pair)
        return base + (8 * (layer.kv_heads or 1) if fmt.kind == "per_head" else 0)
    if fmt.kind == "nvfp4":
        if not isinstance(layer, (FullAttention, SlidingWindow, ChunkedLocal)):  # MLA
            raise ValueError(
                f"--kv-cache-dtype {fmt.name} has no MLA layout in vLLM; use "
                "nvfp4_ds_mla or fp8_ds_mla for an MLA model"
            )
        k, v = layer.head_dim, layer.v_head_dim  # d/2 bytes of values, d/16 of scales, each
        return layer.kv_heads * (k // 2 + k // 16 + v // 2 + v // 16) + extra
    # ds_mla: the DeepSeek sparse layouts of a 512 latent + 64 RoPE
    latent = (layer.kv_lora_rank, layer.qk_rope_head_dim) if isinstance(layer, MLALatent) else None
    if latent != (512, 64):
        raise ValueError(
            f"--kv-cache-dtype {fmt.name} is the DeepSeek sparse MLA layout "
            "(512 latent + 64 RoPE values); this model's layers are not"
        )
    return fmt.mla_bytes + extra


# -- recurrent-state formats, as vLLM resolves them ------------------------------------------------

_NEMOTRON_H = ("NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "NemotronH_Nano_VL_V2")
_QWEN3_5 = (
    "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5ForCausalLM",
    "Qwen3_5MoeForCausalLM",
)
MAMBA_DTYPE_CHOICES = ("auto", "float32", "float16", "bfloat16")  # vLLM's MambaDType
# each by kvcalc's name ('auto': None), and kvcalc's names as themselves
_MAMBA_DTYPES = dict(zip(MAMBA_DTYPE_CHOICES, (None, "fp32", "fp16", "bf16"), strict=True))
_MAMBA_DTYPES |= {n: n for n in ("fp32", "fp16", "bf16")}


class StateDtypes(NamedTuple):
    conv: str  # kvcalc name of the convolution state's dtype
    ssm: str  # ... of the recurrent (SSM / delta-rule / linear-attention) state's
    why: str  # where each came from


def mamba_dtype(value: object, what: str) -> str | None:
    key = str(value).strip().lower() if value is not None else "auto"
    if key not in _MAMBA_DTYPES:
        raise ValueError(
            f"{what} must be one of {', '.join(MAMBA_DTYPE_CHOICES)}, got {str(value)[:20]!r}"
        )
    return _MAMBA_DTYPES[key]


def config_parts(config: object) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(config.json, its text_config, its first architecture); {} or "" where absent."""
    cfg = config if isinstance(config, dict) else {}
    text = cfg.get("text_config")
    text = text if isinstance(text, dict) else {}
    archs = cfg.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else ""
    return cfg, text, arch


def model_dtype_of(config: object) -> str:
    """The dtype vLLM's --dtype auto gives the model (kvcalc name): the config's torch_dtype /
    dtype, float32 checkpoints downcast to bf16 (ModelConfig._resolve_auto_dtype); bf16 when
    the config says nothing."""
    cfg, text, _ = config_parts(config)
    name = (
        cfg.get("torch_dtype") or cfg.get("dtype") or text.get("torch_dtype") or text.get("dtype")
    )
    return "fp16" if name == "float16" else "bf16"


# Why a declared SSM format is taken, by the config field that declares it (None: the model
# fixes it, as Kimi's KDA does float32).
_DECLARED_BY = {
    None: "the model's own format",
    "mamba_ssm_cache_dtype": "config.json mamba_ssm_cache_dtype",
    "mamba_ssm_dtype": "config.json mamba_ssm_dtype (Qwen3.5: vLLM 0.17.0 on, main builds "
    "0.16.1rc1.devN)",
}


def state_formats(
    version: tuple[int, ...],
    conv_flag: str | None,
    ssm_flag: str | None,
    model_dtype: str,
    *,
    declared: Iterable[tuple[str, str | None]] = (),
    family: str = "",
) -> StateDtypes:
    """The formats vLLM gives a recurrent layer's conv state and SSM state (kvcalc names), the
    one rule behind state_dtypes (a config.json) and layer_state_formats (a model's layers);
    ``declared``: (format, config field) pairs, a field None where the model fixes it. The rule
    and its sources: docs/engine-facts.md#state-dtypes-and-mamba-modes."""
    conv_set = mamba_dtype(conv_flag, "--mamba-cache-dtype")
    ssm_set = mamba_dtype(ssm_flag, "--mamba-ssm-cache-dtype")
    conv = conv_set or model_dtype
    why = [f"conv state {conv}: " + ("--mamba-cache-dtype" if conv_set else "the model's dtype")]
    if family == "lightning":
        why.append("one linear-attention state, in --mamba-cache-dtype")
        return StateDtypes(conv, conv, "; ".join(why))
    honoured: set[str | None] = {None, "mamba_ssm_cache_dtype"}
    if fact(Facts.qwen3_5_ssm_from_config, version):
        honoured.add("mamba_ssm_dtype")
    fixed = {fmt: by for fmt, by in declared if by in honoured}
    if family == "kda":
        if ssm_set is None or not fact(Facts.kda_ssm_flag, version):
            ssm, src = "fp32", "KDA's recurrent state is float32 (kda_state_dtype)"
        elif ssm_set in ("fp32", "bf16"):
            ssm, src = ssm_set, "--mamba-ssm-cache-dtype (KDA: float32 or bfloat16, v0.30.0)"
        else:
            raise ValueError("KDA's recurrent state takes only float32 or bfloat16")
    elif ssm_set is not None:
        ssm, src = ssm_set, "--mamba-ssm-cache-dtype"
    elif len(fixed) == 1:
        ((ssm, by),) = fixed.items()
        src = _DECLARED_BY[by]
    elif family == "nemotron_h":
        ssm = fact(Facts.nemotron_h_ssm_default, version)
        src = f"NemotronH's default in vLLM {'.'.join(map(str, version))}"
    else:
        ssm, src = conv, "the conv state's dtype ('auto')"
    why.append(f"SSM state {ssm}: {src}")
    return StateDtypes(conv, ssm, "; ".join(why))


def state_dtypes(
    config: dict[str, Any] | None,
    ssm_flag: str | None = None,
    conv_flag: str | None = None,
    model_dtype: str | None = None,
    vllm_version: str | None = None,
) -> StateDtypes:
    """``state_formats`` for a raw config.json dict and the ``vllm serve`` flags: the model's
    dtype from the config (or ``model_dtype``), the SSM format NemotronH's
    mamba_ssm_cache_dtype or Qwen3.5's text_config.mamba_ssm_dtype declares, the family by
    its architecture or model_type."""
    cfg, text, arch = config_parts(config)
    base = mamba_dtype(model_dtype, "model dtype") or model_dtype_of(cfg)
    model_type = str(cfg.get("model_type", ""))
    declared: list[tuple[str, str | None]] = []
    family = ""
    if model_type.startswith("minimax") or arch.startswith("MiniMax"):
        family = "lightning"
    elif model_type == "kimi_linear" or arch.startswith("KimiLinear"):
        family = "kda"
    elif arch in _NEMOTRON_H:
        family, field = "nemotron_h", "mamba_ssm_cache_dtype"
        hf = text if arch == "NemotronH_Nano_VL_V2" else cfg
        asked = _MAMBA_DTYPES.get(str(hf.get(field, "")).lower())
        declared += [(asked, field)] if asked else []
    elif arch in _QWEN3_5:
        qwen = _MAMBA_DTYPES.get(str((text or cfg).get("mamba_ssm_dtype", "")).lower())
        declared += [(qwen, "mamba_ssm_dtype")] if qwen else []
    version = resolve_version(vllm_version)
    return state_formats(version, conv_flag, ssm_flag, base, declared=declared, family=family)


def layer_state_formats(
    layers: Iterable[Layer], cache: CacheFormat, version: tuple[int, ...]
) -> tuple[DType, DType]:
    """``state_formats`` for a model's layers and ``cache``'s flags: 'auto' is cache.state (the
    model's dtype), the SSM formats the layers declare (or fix, as KDA's float32), the family
    by their flavour."""
    states = [lay for lay in layers if isinstance(lay, RecurrentState)]
    flavors = {lay.flavor for lay in states}
    sd = state_formats(
        version,
        cache.mamba_cache_dtype,
        cache.mamba_ssm_cache_dtype,
        cache.state.name,
        declared=[(lay.ssm_dtype, lay.ssm_dtype_field) for lay in states if lay.ssm_dtype],
        family=next((f for f in ("lightning", "kda") if f in flavors), ""),
    )
    return get_dtype(sd.conv), get_dtype(sd.ssm)


# -- the KV-cache groups ------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class KVCacheGroupSpec:
    """One of vLLM's KV-cache groups (its KVCacheGroupSpec): layers that share one block table,
    each block holding one page of every member."""

    kind: str  # full, sliding, chunked, mla, state
    members: tuple[int, ...]  # the layers' positions (on this GPU or pipeline stage)
    padding: int  # padding layers added to reach the group size
    spec: Layer  # one member, for the kind's rules (vLLM's kv_cache_spec)
    block_size: int  # tokens per block: a page smaller than the largest holds more


@dataclass(frozen=True, kw_only=True)
class KVCacheGrouping:
    """The groups of a model's layers and the block they share (vLLM's KVCacheConfig, before
    the pool is divided into blocks)."""

    block_size: int  # the effective block size (raised for hybrid recurrent models)
    page_bytes: int  # one block of one layer (uniform: of every layer)
    group_size: int  # layers per group (padding included)
    groups: tuple[KVCacheGroupSpec, ...]
    padding_layers: int
    padding_waste_pct: float  # vLLM's "may waste at most X%" of the padded type
    state_page_padding_pct: float  # recurrent page padded to the attention page
    notes: tuple[str, ...]
    # One type whose pages differ (UniformTypeKVCacheSpecs): one group, a block holds one page
    # of every layer.
    uniform: bool = False

    @property
    def block_bytes(self) -> int:
        """Bytes of one block across the layers of a group (the pool's unit)."""
        return self.page_bytes if self.uniform else self.page_bytes * self.group_size


@dataclass(frozen=True, kw_only=True)
class GroupingRules:
    """What the groups depend on besides the layers: the engine settings' part of them."""

    block_size: int  # after an MLA kernel's choice, before a hybrid model's raise
    fmt: KVFormat
    state_dtypes: tuple[DType, DType]  # the conv state's and the SSM state's
    alignment: int  # a hybrid model's attention block is a multiple of it
    threshold: float | None  # Facts.group_threshold
    version: tuple[int, ...]


@functools.lru_cache(maxsize=512)
def layer_grouping(layers: tuple[Layer, ...], rules: GroupingRules) -> KVCacheGrouping:
    """vLLM's KV-cache groups for ``layers`` (already split for tensor parallelism): equal page
    sizes (after raising a recurrent model's block size) form vLLM's hybrid groups; layers of
    one type whose pages differ (an indexer cache on some MLA layers only) one group whose block
    holds a page of every layer (UniformTypeKVCacheSpecs, v0.11.0). Memoised: the groups do not
    depend on max_model_len, and estimate_max_model_len and the Budget's sweeps ask for the same
    grouping dozens of times."""
    attn = [(i, lay) for i, lay in enumerate(layers) if lay.stores_tokens]
    states = [(i, lay) for i, lay in enumerate(layers) if lay.state_elements]
    notes: list[str] = []
    bs, state_page, state_pad_pct = _hybrid_block(attn, states, rules, notes)
    buckets: dict[tuple, list] = {}
    pages = {}
    for i, lay in attn:
        page = bs * vllm_bytes_per_token(lay, rules.fmt)
        key = (*(lay.vllm_group_key() or ()), page)
        buckets.setdefault(key, []).append(i)
        pages[key] = page
    if states:
        key = (*(states[0][1].vllm_group_key() or ()), state_page)
        buckets[key] = [i for i, _ in states]
        pages[key] = state_page
    if not buckets:
        raise ValueError("this model has no layer that keeps a KV cache")
    types = {k[:2] for k in buckets}
    if len(set(pages.values())) > 1 and len(types) == 1 and not states:
        return _uniform_type(layers, buckets, bs, rules, state_pad_pct, notes)
    if len(set(pages.values())) > 1:
        # vLLM raises smaller pages' block size to the largest page when they divide it.
        biggest = max(pages.values())
        if any(biggest % p for p in pages.values()):
            shown = ", ".join(f"{p:,}" for p in sorted(set(pages.values())))
            raise ValueError(
                f"in this KV cache format the layers' pages ({shown} B) do not "
                "divide each other, so vLLM cannot unify them and refuses to "
                "start (unify_kv_cache_spec_page_size); choose another KV cache "
                "format"
            )
        notes.append("layers of different page sizes: smaller pages get larger blocks")
    page = max(pages.values())
    counts = [len(ms) for ms in buckets.values()]
    group_size = min(counts)
    if len(buckets) == 1:
        group_size = counts[0]
    elif rules.threshold is not None and max(counts) < min(counts) * rules.threshold:
        group_size = max(counts)
    groups, padding_total, waste = _dealt_groups(
        layers, buckets, pages, bs, page, group_size, notes
    )
    return KVCacheGrouping(
        block_size=bs,
        page_bytes=page,
        group_size=group_size,
        groups=tuple(groups),
        padding_layers=padding_total,
        padding_waste_pct=waste,
        state_page_padding_pct=state_pad_pct,
        notes=tuple(notes),
    )


def _hybrid_block(
    attn: list[tuple[int, Layer]],
    states: list[tuple[int, Layer]],
    rules: GroupingRules,
    notes: list[str],
) -> tuple[int, int, float]:
    """The block size, the state page and its padding (in %) of a model with recurrent
    states: beside attention layers the block is raised until an attention page holds a state
    page, which is padded to it. Without states: the block size as given."""
    bs = block_size = rules.block_size
    state_pad_pct = 0.0
    state_page = 0
    if states:
        # State page per layer on this GPU (heads split over tp, as vLLM shards them).
        state_page = max(lay.state_bytes(*rules.state_dtypes) for _, lay in states)
        if attn:
            # The smallest multiple of ``alignment`` tokens whose attention page holds a state
            # page (Platform._align_hybrid_block_size); a larger block asked for is kept.
            one_token = vllm_bytes_per_token(attn[0][1], rules.fmt)
            bs = max(rules.alignment * cdiv(state_page, rules.alignment * one_token), block_size)
            attn_page = bs * one_token
            state_pad_pct = (attn_page - state_page) / state_page * 100
            if bs != block_size:
                notes.append(
                    f"attention block size raised to {bs} tokens so that an attention "
                    f"page ({attn_page:,} B) is at least a state page ({state_page:,} "
                    f"B); the state page is padded by {state_pad_pct:.2f}%"
                )
            state_page = attn_page
    return bs, state_page, state_pad_pct


def _uniform_type(
    layers: tuple[Layer, ...],
    buckets: dict[tuple, list],
    bs: int,
    rules: GroupingRules,
    state_pad_pct: float,
    notes: list[str],
) -> KVCacheGrouping:
    """Layers of one type whose pages differ: one group whose block holds a page of every
    layer (vLLM's UniformTypeKVCacheSpecs, v0.11.0 on; refused before)."""
    if not fact(Facts.uniform_type_specs, rules.version):
        raise ValueError(
            "layers of one type with different page sizes: vLLM before 0.11.0 cannot allocate them"
        )
    members = sorted(i for ms in buckets.values() for i in ms)
    rep = layers[members[0]]
    notes.append(
        "layers of one type but different page sizes form one group: a block holds "
        "a page of every layer (vLLM's UniformTypeKVCacheSpecs)"
    )
    return KVCacheGrouping(
        block_size=bs,
        page_bytes=sum(bs * vllm_bytes_per_token(layers[i], rules.fmt) for i in members),
        group_size=1,
        groups=(
            KVCacheGroupSpec(
                kind=rep.kind, members=tuple(members), padding=0, spec=rep, block_size=bs
            ),
        ),
        padding_layers=0,
        padding_waste_pct=0.0,
        state_page_padding_pct=state_pad_pct,
        notes=tuple(notes),
        uniform=True,
    )


def _dealt_groups(
    layers: tuple,
    buckets: dict[tuple, list],
    pages: dict,
    bs: int,
    page: int,
    group_size: int,
    notes: list[str],
) -> tuple[list[KVCacheGroupSpec], int, float]:
    """Each bucket's layers dealt into groups of ``group_size`` (padding the last), the
    padding layers added, and vLLM's "may waste at most X%" of the most padded type."""
    groups = []
    padding_total = 0
    waste = 0.0
    for key, members in buckets.items():
        count = len(members)
        n_groups = cdiv(count, group_size)
        padding = n_groups * group_size - count
        if padding:
            padding_total += padding
            waste = max(waste, padding / count * 100)
            notes.append(
                f"{padding} padding layer(s) added to the {key[0]} layers: vLLM warns "
                f"this may waste at most {padding / count * 100:.2f}% of the cache"
            )
        layer_bs = bs * (page // pages[key])  # a smaller page holds more tokens per block
        for g in range(n_groups):  # vLLM deals the layers out: layers[g::n_groups]
            share = members[g::n_groups]
            groups.append(
                KVCacheGroupSpec(
                    kind=key[0],
                    members=tuple(share),
                    padding=group_size - len(share),
                    spec=layers[share[0]],
                    block_size=layer_bs,
                )
            )
    return groups, padding_total, waste


def per_request_blocks(
    grouping: KVCacheGrouping, max_model_len: int, in_flight: int, state_blocks: int = 1
) -> list[int]:
    """Blocks one request of max_model_len takes in each group; a recurrent group takes
    ``state_blocks`` (MambaSpec.max_memory_usage_bytes: 1, or 2 + checkpoints in 'align')."""
    return [
        state_blocks
        if g.spec.state_elements
        else g.spec.vllm_blocks_per_request(max_model_len, g.block_size, in_flight)
        for g in grouping.groups
    ]
