"""A model as the KV cache sees it: a list of layers, each of one kind, plus its parameter counts.

Every architecture is data in this form, built from config.json fields by
``kvcalc.config.hfconfig``; nothing here looks at a model's name. Each layer carries its own
geometry (KV heads, K dim, V dim, window or chunk), and each kind answers for itself, in the
manner of vLLM's ``vllm/v1/kv_cache_interface.py``: bytes per token for a dtype, tokens kept at
context n, state bytes, its tensor-parallel split, the blocks vLLM reserves for one request, and
its formula text. Callers never branch on the kind. The kinds and what each stores and keeps:
docs/formulas.md#tokens-a-layer-keeps. One file, past 600 lines, as vLLM keeps its cache specs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, ClassVar, Self, cast

from .arith import UNBOUNDED_CONTEXT, cdiv
from .dtypes import DType, bytes_for, get_dtype

SCALE_BYTES = 4  # one fp32 scale per vector (vLLM's per-token-head quantized KV modes)


def interned(layers: Iterable[Layer]) -> tuple[Layer, ...]:
    """``layers`` with equal layers made one object, so that ``counted`` finds them: a model
    of 1,024 layers has a handful of distinct ones."""
    canon: dict = {}
    try:
        return tuple(canon.setdefault(lay, lay) for lay in layers)
    except TypeError:  # a layer that cannot be hashed: kept as it is
        return tuple(layers)


def counted(layers: Iterable[Layer]) -> list[tuple[Layer, int]]:
    """Each layer object of ``layers`` (by identity; ``interned`` makes equal layers one) once,
    with how many times it appears, in order of first appearance."""
    layers = layers if isinstance(layers, (list, tuple)) else list(layers)
    by_id = dict(zip(map(id, layers), layers))  # C loops: a 1,024-layer list in microseconds
    return [(by_id[i], count) for i, count in Counter(map(id, layers)).items()]


@dataclass(frozen=True, kw_only=True)
class ExtraCache:
    """A second per-token cache beside a layer's K/V, kept in its own fixed format.

    DeepSeek sparse attention (V3.2, ``glm_moe_dsa``) adds an indexer: one key of
    ``index_head_dim`` per token, which vLLM stores as fp8 values plus one fp32 scale per 128
    values: index_head_dim + index_head_dim // 128 x 4 bytes (132 for 128)."""

    name: str
    elements: int
    dtype: str = "fp8"
    scale_bytes: int = 0

    @property
    def bytes_per_token(self) -> int:
        return bytes_for(self.elements, get_dtype(self.dtype)) + self.scale_bytes

    def formula(self) -> str:
        scale = f" + {self.scale_bytes} B scales" if self.scale_bytes else ""
        return f"{self.name} {self.elements} x {self.dtype.upper()}{scale}"


class _Layer:
    """What every kind answers. The defaults describe a layer that stores nothing."""

    kind: ClassVar[str]
    stores_tokens: ClassVar[bool] = False  # keeps a per-token cache of its own
    extra: ExtraCache | None = None

    def bytes_per_token(self, dtype: DType, scales: bool = False) -> int:
        """Bytes one token adds to this layer's own cache."""
        return 0

    def tokens_kept(self, n: int) -> int:
        """Tokens of a sequence at context n this layer holds (the most it ever holds)."""
        return 0

    def token_bound(self) -> int | None:
        """The most tokens this layer keeps however long the sequence (a window or a chunk), or
        None when it keeps every token, or no per-token cache at all."""
        if not self.stores_tokens:
            return None
        kept = self.tokens_kept(UNBOUNDED_CONTEXT)
        return kept if kept < UNBOUNDED_CONTEXT else None

    def kept_positions(self, n: int) -> range:
        """Which token positions 0..n-1 are in this layer's cache right after position n-1."""
        return range(0)

    def seq_bytes(self, n: int, dtype: DType, scales: bool = False) -> int:
        return self.bytes_per_token(dtype, scales) * self.tokens_kept(n) + (
            self.fixed_kv_bytes(dtype, scales) if n else 0
        )

    def fixed_kv_bytes(self, dtype: DType, scales: bool = False) -> int:
        """K/V a sequence holds whatever its length (a cross-attention layer's image K/V)."""
        return 0

    @property
    def state_elements(self) -> int:
        return 0

    def state_bytes(self, dtype: DType, ssm_dtype: DType | None = None) -> int:
        return bytes_for(self.state_elements, dtype) if self.state_elements else 0

    def read_bytes(self, n: int, dtype: DType, scales: bool = False) -> int:
        """Cache bytes one decode step reads for one sequence at context n (a shared layer reads
        its source's cache again)."""
        return self.seq_bytes(n, dtype, scales)

    def attended(self, n: int) -> int:
        """Tokens the query of the n-th token attends to (for attention FLOPs)."""
        return 0

    def attended_pairs(self, p: int) -> int:
        """Sum over a prompt's p tokens of the tokens each attends to (causal), in closed form."""
        return 0

    def pair_flops(self, decode: bool = False) -> float:
        """Attention FLOPs of one (query, cached token) pair in this layer, 2 per multiply-add:
        the score q . k over qk_dim and the weighted sum of values over av_dim, for each of the
        q_heads. ``decode``: the pair belongs to a decode step (MLA computes those differently)."""
        return 2.0 * self.q_heads * (self.qk_dim + self.av_dim)

    def attention_flops(self, start: int, end: int, decode: bool = False) -> float:
        """Attention FLOPs of the tokens at positions start + 1 .. end, each attending causally
        to ``attended`` tokens (its own included): pair_flops x the pairs between them."""
        return self.pair_flops(decode) * (self.attended_pairs(end) - self.attended_pairs(start))

    # Query heads, for attention FLOPs (0: attends to nothing); a subclass's field or property.
    if TYPE_CHECKING:

        @property
        def q_heads(self) -> int: ...
    else:
        q_heads = 0

    @property
    def qk_dim(self) -> int:
        """Width of the query-key dot product (0: attends to nothing)."""
        return 0

    @property
    def av_dim(self) -> int:
        """Width of the attention-weighted sum of values (0: attends to nothing)."""
        return 0

    kv_heads: int | None = None  # K/V heads it stores; None where it stores no heads (MLA, state)

    def split(self, tp: int) -> Self:
        return self

    def vllm_group_key(self) -> tuple | None:
        """What vLLM groups this layer's cache by (None: no cache of its own)."""
        return None

    def vllm_blocks_per_request(
        self, max_model_len: int, block_size: int, max_num_batched_tokens: int
    ) -> int:
        return 0

    def transformers_view(self) -> Layer:
        """This layer as transformers' cache lays it out (see the conventions named there)."""
        return cast("Layer", self)  # each concrete layer class is one of Layer's

    def transformers_note(self) -> str | None:
        """A difference from transformers' cache this layer's own kind names (None: none)."""
        return None

    # Why vLLM cannot serve a model with this layer (None: it can).
    vllm_unsupported: ClassVar[str | None] = None

    @property
    def label(self) -> str:
        return self.kind

    def formula(self) -> str:
        return "nothing stored"

    @property
    def cache_rows(self) -> tuple[str, ...]:
        """Names of what one token writes into this layer, for the cache-fill picture."""
        return ()


class _Unshaped:
    """The what-ifs (kvcalc.teach.techniques) leave a kind without attention heads as it is."""

    def as_mha(self) -> Self:
        return self

    def with_kv_heads(self, kv_heads: int) -> Self:
        return self

    def as_latent(self, rank: int, rope: int) -> Self:
        return self


@dataclass(frozen=True, kw_only=True)
class _Heads(_Layer):
    """What the kinds with K/V heads of their own share (per-token attention, cross-attention):
    the query-key width, the tensor-parallel split and the what-ifs that change the heads."""

    kv_heads: int
    head_dim: int  # K dim

    @property
    def qk_dim(self) -> int:
        return self.head_dim

    def split(self, tp: int) -> Self:
        """This layer as one of ``tp`` tensor-parallel GPUs holds it.

        Each GPU keeps max(1, kv_heads // tp) heads (vLLM): with more GPUs than KV heads the
        heads are replicated, never split below one."""
        kv = self.kv_heads
        if kv >= tp and kv % tp or kv < tp and tp % kv:
            raise ValueError(self._tp_refusal(tp))
        # q_heads is a field of each subclass (its place in their fields differs)
        heads = {"kv_heads": max(1, kv // tp), "q_heads": max(1, self.q_heads // tp)}
        return replace(self, **heads)

    def _tp_refusal(self, tp: int) -> str:
        raise NotImplementedError

    def as_mha(self) -> Self:
        """The same layer with one K/V head per query head."""
        return replace(self, kv_heads=self.q_heads)

    def with_kv_heads(self, kv_heads: int) -> Self:
        return replace(self, kv_heads=kv_heads)


class _PerTokenCache(_Layer):
    """What the kinds that write a cache entry for every token share (per-head K/V and MLA's
    latent alike); each says what one entry holds: ``elements_per_token``, ``scale_vectors``."""

    stores_tokens: ClassVar[bool] = True

    @property
    def elements_per_token(self) -> int:
        raise NotImplementedError

    @property
    def scale_vectors(self) -> int:
        """Vectors per token that a per-token-head quantized cache keeps one scale for."""
        raise NotImplementedError

    def bytes_per_token(self, dtype: DType, scales: bool = False) -> int:
        """With ``scales`` a quantized format (fp8, int8, int4) also stores one fp32 scale per
        vector: 2 per KV head (K and V), or 1 per MLA latent."""
        b = bytes_for(self.elements_per_token, dtype)
        if scales and dtype.quantized:
            b += self.scale_vectors * SCALE_BYTES
        if self.extra is not None:
            b += self.extra.bytes_per_token
        return b

    def tokens_kept(self, n: int) -> int:
        return n

    attended = tokens_kept  # every token kept is attended to

    def kept_positions(self, n: int) -> range:
        return range(n - self.tokens_kept(n), n)

    def attended_pairs(self, p: int) -> int:
        return p * (p + 1) // 2

    def vllm_blocks_per_request(
        self, max_model_len: int, block_size: int, max_num_batched_tokens: int
    ) -> int:
        return cdiv(max_model_len, block_size)

    def vllm_group_key(self) -> tuple | None:
        return (self.kind, self._span())

    def _span(self) -> int | None:
        return None


@dataclass(frozen=True, kw_only=True)
class _Attention(_Heads, _PerTokenCache):
    v_head_dim: int
    q_heads: int  # query heads, for attention FLOPs only
    extra: ExtraCache | None = None

    @property
    def elements_per_token(self) -> int:
        """K and V elements this layer stores for one token: kv_heads x (head_dim + v_head_dim)."""
        return self.kv_heads * (self.head_dim + self.v_head_dim)

    @property
    def av_dim(self) -> int:
        return self.v_head_dim

    @property
    def scale_vectors(self) -> int:
        return 2 * self.kv_heads

    def formula(self) -> str:
        if self.head_dim == self.v_head_dim:
            text = f"2 x {self.kv_heads} KV heads x {self.head_dim}"
        else:
            text = f"{self.kv_heads} KV heads x ({self.head_dim} K + {self.v_head_dim} V)"
        return text + (f" + {self.extra.formula()}" if self.extra else "")

    @property
    def cache_rows(self) -> tuple[str, ...]:
        return ("K", "V")

    def _tp_refusal(self, tp: int) -> str:
        if self.kv_heads < tp:
            return f"tensor parallel size {tp} is not a multiple of the {self.kv_heads} KV heads"
        return (
            f"tensor parallel size {tp} does not divide the {self.kv_heads} KV heads; "
            f"choose a TP that divides {self.kv_heads} or is a multiple of it"
        )

    @property
    def label(self) -> str:
        span = self._span()
        return self.kind if span is None else f"{self.kind} {span:,}"

    def as_latent(self, rank: int, rope: int) -> MLALatent:
        return MLALatent(
            kv_lora_rank=rank,
            qk_rope_head_dim=rope,
            q_heads=self.q_heads,
            qk_head_dim=self.qk_dim,
            v_head_dim=self.av_dim,
        )


@dataclass(frozen=True, kw_only=True)
class FullAttention(_Attention):
    kind: ClassVar[str] = "full"


@dataclass(frozen=True, kw_only=True)
class SlidingWindow(_Attention):
    window: int
    # transformers' window where its modeling code differs from vLLM's (MiMo-V2-Flash: one more)
    transformers_window: int | None = None
    kind: ClassVar[str] = "sliding"
    transformers_note_key: ClassVar[str] = "window: vLLM vs modeling code"

    def tokens_kept(self, n: int) -> int:
        # A token attends to itself and the window-1 before it, so at most `window` are needed.
        return min(n, self.window)

    attended = tokens_kept

    def attended_pairs(self, p: int) -> int:
        w = min(self.window, p)
        return w * (w + 1) // 2 + (p - w) * w  # grows to w, then stays at w

    def _span(self) -> int | None:
        return self.window

    def vllm_blocks_per_request(
        self, max_model_len: int, block_size: int, max_num_batched_tokens: int
    ) -> int:
        # vllm/v1/kv_cache_interface.py SlidingWindowSpec.max_memory_usage_bytes: a chunk of
        # max_num_batched_tokens new tokens plus the window-1 before it, and one block of slack
        # because the window's start need not align with a block.
        return cdiv(min(self.window - 1 + max_num_batched_tokens, max_model_len), block_size) + 1

    def transformers_view(self) -> Self:
        # transformers' DynamicSlidingWindowLayer keeps window-1 tokens between steps; the new
        # token makes the window.
        return replace(
            self, window=(self.transformers_window or self.window) - 1, transformers_window=None
        )

    def transformers_note(self) -> str | None:
        if self.transformers_window in (None, self.window):
            return None
        return (
            f"sliding window: vLLM attends within {self.window:,} tokens, transformers' "
            f"modeling code within {self.transformers_window:,}"
        )


@dataclass(frozen=True, kw_only=True)
class ChunkedLocal(_Attention):
    chunk: int
    kind: ClassVar[str] = "chunked"

    def tokens_kept(self, n: int) -> int:
        # Attention stays inside fixed chunks; the most a sequence ever holds is one full chunk.
        return min(n, self.chunk)

    def kept_positions(self, n: int) -> range:
        # Only the current chunk: from the last multiple of `chunk` below n.
        return range(((n - 1) // self.chunk) * self.chunk if n else 0, n)

    def attended(self, n: int) -> int:
        return (n - 1) % self.chunk + 1 if n else 0

    def read_bytes(self, n: int, dtype: DType, scales: bool = False) -> int:
        # a decode step reads its chunk so far, not the most the layer ever holds
        return self.bytes_per_token(dtype, scales) * self.attended(n)

    def attended_pairs(self, p: int) -> int:
        full, rest = divmod(p, self.chunk)  # a triangle per whole chunk, then the partial one
        return full * (self.chunk * (self.chunk + 1) // 2) + rest * (rest + 1) // 2

    def _span(self) -> int | None:
        return self.chunk

    def vllm_blocks_per_request(
        self, max_model_len: int, block_size: int, max_num_batched_tokens: int
    ) -> int:
        # ChunkedLocalAttentionSpec.max_memory_usage_bytes: the chunk plus one batch of tokens.
        return cdiv(min(self.chunk + max_num_batched_tokens, max_model_len), block_size)

    def transformers_view(self) -> Self:
        # transformers keeps a chunked layer in a DynamicSlidingWindowLayer of chunk tokens: a
        # rolling chunk - 1 between steps (the mask, not the cache, makes it chunked).
        return replace(self, chunk=self.chunk - 1)


@dataclass(frozen=True, kw_only=True)
class MLALatent(_PerTokenCache):
    """Multi-head latent attention (DeepSeek-V2/V3): the cache holds one compressed latent
    c_KV of kv_lora_rank plus the shared RoPE key of qk_rope_head_dim per token. The K and V of
    every head are re-expanded from it, so there is no factor 2 and no per-head count."""

    kv_lora_rank: int
    qk_rope_head_dim: int
    q_heads: int
    qk_head_dim: int  # qk_nope_head_dim + qk_rope_head_dim, for FLOPs
    v_head_dim: int
    extra: ExtraCache | None = None
    kind: ClassVar[str] = "mla"

    @property
    def elements_per_token(self) -> int:
        return self.kv_lora_rank + self.qk_rope_head_dim

    @property
    def qk_dim(self) -> int:
        return self.qk_head_dim

    @property
    def av_dim(self) -> int:
        return self.v_head_dim

    @property
    def scale_vectors(self) -> int:
        """One vector per token: the latent entry (its RoPE key included) takes one scale."""
        return 1

    def pair_flops(self, decode: bool = False) -> float:
        """Prefill up-projects the latent into per-head K and V (qk_head_dim, v_head_dim) and
        runs multi-head attention on them. Decode is absorbed: W_UK is folded into the query and
        W_UV applied after, so every head scores against the cached latent and RoPE key
        (kv_lora_rank + qk_rope_head_dim) and sums the kv_lora_rank-wide latent:
        2 x q_heads x (2 x kv_lora_rank + qk_rope_head_dim) per pair (DeepSeek-V2, section 2.1.2;
        vLLM's MLA backends, vllm/v1/attention/backends/mla/common.py: "MQA with QK headdim =
        Lkv + R, V headdim = Lkv" in _forward_decode). The two folded projections cost per query
        token, not per pair, and are counted with the weights (2 x params per token)."""
        if decode:
            return 2.0 * self.q_heads * (2 * self.kv_lora_rank + self.qk_rope_head_dim)
        return 2.0 * self.q_heads * (self.qk_head_dim + self.v_head_dim)

    def formula(self) -> str:
        text = f"({self.kv_lora_rank} latent + {self.qk_rope_head_dim} RoPE)"
        return text + (f" + {self.extra.formula()}" if self.extra else "")

    @property
    def cache_rows(self) -> tuple[str, ...]:
        return ("latent", "RoPE key")

    def split(self, tp: int) -> Self:
        # vLLM and SGLang keep the whole latent on every tensor-parallel GPU: it is replicated.
        return replace(self, q_heads=max(1, self.q_heads // tp))

    def as_mha(self) -> FullAttention:
        return FullAttention(
            kv_heads=self.q_heads,
            head_dim=self.qk_head_dim,
            v_head_dim=self.v_head_dim,
            q_heads=self.q_heads,
        )

    def with_kv_heads(self, kv_heads: int) -> FullAttention:
        return replace(self.as_mha(), kv_heads=kv_heads)

    def as_latent(self, rank: int, rope: int) -> Self:
        return replace(self, kv_lora_rank=rank, qk_rope_head_dim=rope)


@dataclass(frozen=True, kw_only=True)
class SharedKV(_Layer):
    """A layer that attends with the K/V another layer stored (Gemma 3n and Gemma 4's
    ``num_kv_shared_layers``): it writes nothing, but a decode step reads that cache again."""

    source: int  # index of the layer whose cache it reads
    reads: FullAttention | SlidingWindow | ChunkedLocal | MLALatent
    kind: ClassVar[str] = "shared"

    @property
    def q_heads(self) -> int:
        return self.reads.q_heads

    @property
    def qk_dim(self) -> int:
        return self.reads.qk_dim

    @property
    def av_dim(self) -> int:
        return self.reads.av_dim

    def read_bytes(self, n: int, dtype: DType, scales: bool = False) -> int:
        return self.reads.seq_bytes(n, dtype, scales)

    def attended(self, n: int) -> int:
        return self.reads.attended(n)

    def attended_pairs(self, p: int) -> int:
        return self.reads.attended_pairs(p)

    def pair_flops(self, decode: bool = False) -> float:
        return self.reads.pair_flops(decode)

    def split(self, tp: int) -> Self:
        return replace(self, reads=self.reads.split(tp))

    @property
    def label(self) -> str:
        return f"shared (reads layer {self.source})"

    def formula(self) -> str:
        return f"nothing stored: reads layer {self.source}'s {self.reads.label} cache"

    def as_mha(self) -> Self:
        return replace(self, reads=self.reads.as_mha())

    def with_kv_heads(self, kv_heads: int) -> Self:
        return replace(self, reads=self.reads.with_kv_heads(kv_heads))

    def as_latent(self, rank: int, rope: int) -> Self:
        return replace(self, reads=self.reads.as_latent(rank, rope))


@dataclass(frozen=True, kw_only=True)
class RecurrentState(_Unshaped, _Layer):
    """A linear-attention or state-space layer (Mamba, Mamba-2, Gated DeltaNet, lightning
    attention): no per-token K/V, a fixed per-sequence state = convolution window + recurrent
    (SSM) state."""

    conv_elements: int  # channels x (conv_kernel - 1): the past inputs the convolution needs
    ssm_elements: int
    flavor: str  # "mamba", "mamba2", "gated_deltanet", "linear_attention", for display
    conv_kernel: int = 4
    # A fixed format for the recurrent part, whatever state format is chosen (Kimi's KDA,
    # RG-LRU and RWKV keep it in float32), or the one the config declares; None: the state
    # format chosen.
    ssm_dtype: str | None = None
    # The config field that declared ssm_dtype ("mamba_ssm_dtype", "mamba_ssm_cache_dtype"), or
    # None for a format the model itself fixes: an engine honours a declared one by its own
    # rules and versions (vLLM reads Qwen3.5's mamba_ssm_dtype from v0.17.0 on).
    ssm_dtype_field: str | None = None
    # Mamba-2: the B and C groups inside conv_elements (groups x group_conv_elements), which
    # tensor parallelism replicates rather than splits when it does not divide them.
    groups: int = 0
    group_conv_elements: int = 0
    kind: ClassVar[str] = "state"

    @property
    def state_elements(self) -> int:
        return self.conv_elements + self.ssm_elements

    def state_bytes(self, dtype: DType, ssm_dtype: DType | None = None) -> int:
        """The convolution window in ``dtype`` plus the recurrent (SSM) state in ``ssm_dtype``
        (when not given: the layer's fixed format if it has one, else ``dtype``). vLLM sizes the
        two apart: its --mamba-cache-dtype sets the conv state, --mamba-ssm-cache-dtype the SSM
        state (MambaStateDtypeCalculator)."""
        ssm = ssm_dtype or (get_dtype(self.ssm_dtype) if self.ssm_dtype else dtype)
        return bytes_for(self.conv_elements, dtype) + bytes_for(self.ssm_elements, ssm)

    @property
    def label(self) -> str:
        return f"state ({self.flavor})"

    def formula(self) -> str:
        fixed = f" ({self.ssm_dtype.upper()})" if self.ssm_dtype else ""
        return (
            f"{self.flavor} state {self.conv_elements:,} conv + {self.ssm_elements:,} "
            f"recurrent{fixed} elements"
        )

    def split(self, tp: int) -> Self:
        # Heads (and with them both states) are split evenly over the tensor-parallel GPUs.
        # Mamba-2's B and C groups are replicated up to tp when tp does not divide them (vLLM's
        # extra_groups_for_head_shards): each GPU then holds whole groups.
        conv = self.conv_elements
        if self.groups and self.groups % tp:
            conv += (tp - self.groups) * self.group_conv_elements
        return replace(
            self,
            conv_elements=cdiv(conv, tp),
            ssm_elements=cdiv(self.ssm_elements, tp),
            groups=0,
            group_conv_elements=0,
        )

    def vllm_group_key(self) -> tuple | None:
        return ("state", None)

    def vllm_blocks_per_request(
        self, max_model_len: int, block_size: int, max_num_batched_tokens: int
    ) -> int:
        return 1  # one page holds the whole state

    def transformers_view(self) -> Self:
        # transformers keeps the whole convolution kernel; vLLM (and kvcalc) keep kernel - 1.
        if self.conv_kernel <= 1:
            return self
        channels = self.conv_elements // (self.conv_kernel - 1)
        return replace(self, conv_elements=channels * self.conv_kernel)


@dataclass(frozen=True, kw_only=True)
class AttentionWithState(FullAttention):
    """One layer with full attention and a recurrent mixer side by side (Falcon-H1: every layer
    runs attention and Mamba-2 in parallel): K/V per token plus a fixed state."""

    state: RecurrentState

    @property
    def state_elements(self) -> int:
        return self.state.state_elements

    def state_bytes(self, dtype: DType, ssm_dtype: DType | None = None) -> int:
        return self.state.state_bytes(dtype, ssm_dtype)

    @property
    def label(self) -> str:
        return f"full + {self.state.label}"

    def formula(self) -> str:
        return f"{super().formula()} (+ {self.state.formula()} per sequence)"

    def split(self, tp: int) -> Self:
        return replace(super().split(tp), state=self.state.split(tp))

    def transformers_view(self) -> Self:
        return replace(self, state=self.state.transformers_view())


@dataclass(frozen=True, kw_only=True)
class LatentInTransformers(FullAttention):
    """MLA-style projections whose cache vLLM keeps per head (MiniCPM3: K and V of
    qk_nope + qk_rope each, V padded to the QK head size), while transformers caches the
    compressed latent (kv_lora_rank) and the RoPE key."""

    latent_rank: int
    latent_rope: int
    transformers_note_key: ClassVar[str] = "per-head K/V vs latent"

    def transformers_view(self) -> MLALatent:
        return self.as_latent(self.latent_rank, self.latent_rope)

    def transformers_note(self) -> str | None:
        return (
            "per-head K/V (vLLM) against the compressed latent (transformers caches "
            f"{self.latent_rank} latent + {self.latent_rope} RoPE values per token)"
        )


@dataclass(frozen=True, kw_only=True)
class CrossAttention(_Heads, _Unshaped):
    """Cross-attention to an image encoder's states (Llama 3.2 Vision, ``mllama``): its K/V
    are computed once per image, ``image_tokens`` of them, and do not grow with the text."""

    q_heads: int
    image_tokens: int  # encoder states per image (tiles x patches per tile)
    kind: ClassVar[str] = "cross"
    transformers_note_key: ClassVar[str] = "cross-attention per image"
    vllm_unsupported: ClassVar[str | None] = (
        "cross-attention to image states (mllama) has no KV-cache spec in vLLM's V1 engine"
    )

    @property
    def av_dim(self) -> int:
        return self.head_dim

    def fixed_kv_bytes(self, dtype: DType, scales: bool = False) -> int:
        per = bytes_for(2 * self.kv_heads * self.head_dim, dtype)
        if scales and dtype.quantized:
            per += 2 * self.kv_heads * SCALE_BYTES
        return per * self.image_tokens

    def attended(self, n: int) -> int:
        return self.image_tokens

    def attended_pairs(self, p: int) -> int:
        return p * self.image_tokens

    def _tp_refusal(self, tp: int) -> str:
        return (
            f"tensor parallel size {tp} does not fit the {self.kv_heads} KV "
            "heads of the cross-attention layers"
        )

    def transformers_view(self) -> Self:
        # A text-only forward skips the cross-attention layers: they hold nothing then.
        return replace(self, image_tokens=0)

    def transformers_note(self) -> str | None:
        return (
            "cross-attention layers: the image's K/V, computed once per image; the check "
            "runs on text only, where transformers skips these layers"
        )

    @property
    def label(self) -> str:
        return "cross-attention (per image)"

    def formula(self) -> str:
        return (
            f"2 x {self.kv_heads} KV heads x {self.head_dim} x {self.image_tokens:,} image "
            "tokens, once per image"
        )


@dataclass(frozen=True, kw_only=True)
class NoCache(_Unshaped, _Layer):
    """A block with no attention of its own: an MLP- or MoE-only layer (Nemotron-H's ``-`` and
    ``E``), or an attention no-op / linear replacement (Nemotron-NAS ``block_configs``)."""

    why: str = "no attention"
    kind: ClassVar[str] = "none"

    @property
    def label(self) -> str:
        return f"none ({self.why})"

    def formula(self) -> str:
        return f"nothing stored ({self.why})"


Layer = (
    FullAttention
    | SlidingWindow
    | ChunkedLocal
    | MLALatent
    | SharedKV
    | RecurrentState
    | NoCache
    | AttentionWithState
    | LatentInTransformers
    | CrossAttention
)
# The kinds that keep a per-token cache of their own (``stores_tokens``): per-head K/V or a latent.
KVLayer = (
    FullAttention
    | SlidingWindow
    | ChunkedLocal
    | MLALatent
    | AttentionWithState
    | LatentInTransformers
)


@dataclass(frozen=True, kw_only=True)
class MoE:
    """Routed experts. ``layers`` MoE layers, each with ``num_experts`` experts of
    ``expert_params`` parameters, ``top_k`` of them used per token, plus shared experts that every
    token uses."""

    num_experts: int
    top_k: int
    expert_params: int
    layers: int
    shared_params_per_layer: int = 0

    def experts_touched(self, batch: int) -> float:
        """Expected distinct experts one MoE layer reads for a decode step of ``batch`` tokens,
        with uniform routing: E x (1 - (1 - k/E)^B)."""
        if batch <= 0:
            return 0.0
        e, k = self.num_experts, self.top_k
        return e * (1.0 - (1.0 - k / e) ** batch)


@dataclass(frozen=True, kw_only=True)
class ParamCounts:
    """Parameters by role. ``routed_experts`` is the total over all experts of all layers."""

    embedding: int
    lm_head: int  # 0 when tied to the embedding
    attention: int  # attention / MLA / linear-attention / Mamba mixers
    mlp: int  # dense feed-forward layers
    routed_experts: int
    shared_experts: int
    router: int
    norms: int
    other: int = 0  # learned positions, vision parts kept out etc.
    tied: bool = False

    @property
    def total(self) -> int:
        return sum(getattr(self, f.name) for f in fields(self) if f.name != "tied")


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A model's layers (what the cache needs) and, separately, its parameters (what the weight
    figures need). ``params`` is None when the config's parameters could not be counted;
    ``params_error`` then says why, and only weight figures are refused."""

    name: str
    layers: tuple[Layer, ...]
    params: ParamCounts | None
    moe: MoE | None
    hidden_size: int | None
    vocab_size: int | None
    max_context: int  # max_position_embeddings (or n_positions)
    notes: tuple[str, ...] = ()
    assumptions: tuple[str, ...] = ()
    params_error: str | None = None
    # Config fields kvcalc did not understand, read anyway on request: every figure from this
    # spec is an unverified estimate (empty for every verified reading).
    unverified: tuple[str, ...] = ()
    # False when no reader of the config's own family read it (the standard decoder fields
    # were read): the app then checks it against transformers by itself.
    family_reader: bool = True
    # Multi-token-prediction (MTP) layers the config declares (num_nextn_predict_layers and
    # the like): not in the model's own cache; they join the pool when they serve as the
    # speculative drafter (kvcalc.core.speculative). ``mtp_field`` names the declaring field.
    mtp_layers: tuple[Layer, ...] = ()
    mtp_field: str | None = None
    mtp_error: str | None = None  # why declared MTP layers could not be read
    mtp_params: int | None = None  # what the MTP modules' weights add (None: not known)
    # A speculative drafter's layers are the last ``draft_layers`` of ``layers``; its pipeline
    # stage is the last one, as in vLLM (with_speculation builds such a spec).
    draft_layers: int = 0
    drafter: str | None = None  # what the drafter is, in words ("1 MTP layer, 2 tokens")
    speculative_tokens: int = 0  # num_speculative_tokens: drafts proposed per step
    draft_method: str | None = None  # "mtp", "eagle", "draft_model", "ngram"
    drafter_params: int | None = None  # the drafter's own parameters (None: not known)

    def __post_init__(self) -> None:
        if not self.layers:
            raise ValueError("a model needs at least one layer")

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def target_layers(self) -> tuple[Layer, ...]:
        """The model's own layers, without a speculative drafter's."""
        return self.layers[: len(self.layers) - self.draft_layers]

    @property
    def kv_layers(self) -> tuple[KVLayer, ...]:
        """Layers that keep a per-token cache of their own (K/V or an MLA latent): the
        per-token kinds, the ones whose ``stores_tokens`` is True."""
        return tuple(lay for lay in self.layers if isinstance(lay, _PerTokenCache))

    @property
    def state_layers(self) -> tuple[Layer, ...]:
        """Layers that keep a fixed per-sequence state (recurrent layers, and Falcon-H1's
        attention layers with a Mamba-2 mixer beside them)."""
        return tuple(lay for lay in self.layers if lay.state_elements)

    def kind_counts(self) -> dict[str, int]:
        return dict(Counter(layer.kind for layer in self.layers))

    def require_params(self) -> ParamCounts:
        if self.params is None:
            raise ValueError(
                f"the weight figures of {self.name} are unknown: "
                f"{self.params_error}. The cache figures do not need them; for "
                "weights, give their size (e.g. --weights-gib)"
            )
        return self.params

    @property
    def total_params(self) -> int:
        return self.require_params().total

    @property
    def active_params(self) -> int:
        """Parameters one token computes with: all but the unused experts and, when the output
        head is a separate matrix, the input embedding (a table look-up, not a matmul). This is the
        convention of OpenAI's gpt-oss model card."""
        p = self.require_params()
        active = p.total
        if not p.tied:
            active -= p.embedding
        if self.moe is not None:
            active -= p.routed_experts
            active += self.moe.layers * self.moe.top_k * self.moe.expert_params
        return active

    def with_layers(self, layers: Iterable[Layer]) -> ModelSpec:
        return replace(self, layers=tuple(layers))
