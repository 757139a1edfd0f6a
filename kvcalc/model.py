"""A model as the KV cache sees it: a list of layers, each of one kind, plus its parameter counts.

Every architecture is data in this form. ``kvcalc.hfconfig`` builds it from Hugging Face
config.json fields; nothing here looks at a model's name.

Layer kinds and what one sequence of n tokens keeps in each:

==============  ==========================================  =====================================
kind            stored per token                            tokens kept at context n
==============  ==========================================  =====================================
full            K and V: kv_heads x (head_dim + v_head_dim)  n
sliding         same as full                                min(n, window)
chunked         same as full                                min(n, chunk)  (most held at once)
mla             one latent: kv_lora_rank + qk_rope_head_dim  n  (DeepSeek-V2/V3, no factor 2)
state           nothing per token; a fixed per-sequence      0  (Mamba, Gated DeltaNet)
                recurrent state of ``state_elements``
==============  ==========================================  =====================================
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Union

__all__ = [
    "FullAttention", "SlidingWindow", "ChunkedLocal", "MLALatent", "RecurrentState",
    "Layer", "MoE", "ParamCounts", "ModelSpec", "KV_KINDS",
]

KV_KINDS = ("full", "sliding", "chunked", "mla")


@dataclass(frozen=True, kw_only=True)
class _Attention:
    kv_heads: int
    head_dim: int
    v_head_dim: int
    q_heads: int  # query heads, for attention FLOPs only

    @property
    def elements_per_token(self) -> int:
        """K and V elements this layer stores for one token: kv_heads x (head_dim + v_head_dim)."""
        return self.kv_heads * (self.head_dim + self.v_head_dim)

    @property
    def qk_dim(self) -> int:
        return self.head_dim

    @property
    def av_dim(self) -> int:
        return self.v_head_dim

    @property
    def scale_vectors(self) -> int:
        """Vectors per token that a per-token-head quantized cache keeps one scale for (K and V)."""
        return 2 * self.kv_heads

    def formula(self) -> str:
        if self.head_dim == self.v_head_dim:
            return f"2 x {self.kv_heads} KV heads x {self.head_dim}"
        return f"{self.kv_heads} KV heads x ({self.head_dim} + {self.v_head_dim})"

    def split(self, tp: int):
        """This layer as one of ``tp`` tensor-parallel GPUs holds it.

        Each GPU keeps max(1, kv_heads // tp) heads (vLLM): with more GPUs than KV heads the
        heads are replicated, never split below one."""
        if self.kv_heads >= tp and self.kv_heads % tp:
            raise ValueError(
                f"tensor parallel size {tp} does not divide the {self.kv_heads} KV heads; "
                f"choose a TP that divides {self.kv_heads} or is a multiple of it")
        if self.kv_heads < tp and tp % self.kv_heads:
            raise ValueError(
                f"tensor parallel size {tp} is not a multiple of the {self.kv_heads} KV heads")
        return replace(self, kv_heads=max(1, self.kv_heads // tp), q_heads=max(1, self.q_heads // tp))


@dataclass(frozen=True, kw_only=True)
class FullAttention(_Attention):
    kind: str = field(default="full", init=False)

    def tokens_kept(self, n: int) -> int:
        return n


@dataclass(frozen=True, kw_only=True)
class SlidingWindow(_Attention):
    window: int
    kind: str = field(default="sliding", init=False)

    def tokens_kept(self, n: int) -> int:
        # A token attends to itself and the window-1 before it, so at most `window` are needed.
        return min(n, self.window)


@dataclass(frozen=True, kw_only=True)
class ChunkedLocal(_Attention):
    chunk: int
    kind: str = field(default="chunked", init=False)

    def tokens_kept(self, n: int) -> int:
        # Attention stays inside fixed chunks; the most a sequence ever holds is one full chunk.
        return min(n, self.chunk)


@dataclass(frozen=True, kw_only=True)
class MLALatent:
    """Multi-head latent attention (DeepSeek-V2/V3): the cache holds one compressed latent
    c_KV of kv_lora_rank plus the shared RoPE key of qk_rope_head_dim per token. The K and V of
    every head are re-expanded from it, so there is no factor 2 and no per-head count."""

    kv_lora_rank: int
    qk_rope_head_dim: int
    q_heads: int
    qk_head_dim: int  # qk_nope_head_dim + qk_rope_head_dim, for FLOPs
    v_head_dim: int
    kind: str = field(default="mla", init=False)

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
        return 1

    def tokens_kept(self, n: int) -> int:
        return n

    def formula(self) -> str:
        return f"({self.kv_lora_rank} latent + {self.qk_rope_head_dim} RoPE)"

    def split(self, tp: int):
        # vLLM and SGLang keep the whole latent on every tensor-parallel GPU: it is replicated.
        return replace(self, q_heads=max(1, self.q_heads // tp))


@dataclass(frozen=True, kw_only=True)
class RecurrentState:
    """A linear-attention or state-space layer (Mamba, Gated DeltaNet): no per-token K/V, a fixed
    per-sequence state = convolution window + recurrent (SSM) state."""

    conv_elements: int  # channels x (conv_kernel - 1): the past inputs the convolution needs
    ssm_elements: int
    flavor: str  # "mamba" or "gated_deltanet", for display
    conv_kernel: int = 4
    kind: str = field(default="state", init=False)

    elements_per_token = 0
    scale_vectors = 0

    @property
    def state_elements(self) -> int:
        return self.conv_elements + self.ssm_elements

    def tokens_kept(self, n: int) -> int:
        return 0

    def formula(self) -> str:
        return f"{self.flavor} state {self.conv_elements:,} conv + {self.ssm_elements:,} recurrent elements"

    def split(self, tp: int):
        # Heads (and with them both states) are split evenly over the tensor-parallel GPUs.
        return replace(self, conv_elements=-(-self.conv_elements // tp),
                       ssm_elements=-(-self.ssm_elements // tp))


Layer = Union[FullAttention, SlidingWindow, ChunkedLocal, MLALatent, RecurrentState]


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
        return (self.embedding + self.lm_head + self.attention + self.mlp + self.routed_experts
                + self.shared_experts + self.router + self.norms + self.other)


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    name: str
    layers: tuple[Layer, ...]
    params: ParamCounts
    moe: MoE | None
    hidden_size: int
    vocab_size: int
    max_context: int  # max_position_embeddings (or n_positions)
    notes: tuple[str, ...] = ()

    def __post_init__(self):
        if not self.layers:
            raise ValueError("a model needs at least one layer")

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def kv_layers(self) -> tuple[Layer, ...]:
        """Layers that keep per-token K/V (or an MLA latent)."""
        return tuple(l for l in self.layers if l.kind in KV_KINDS)

    @property
    def state_layers(self) -> tuple[RecurrentState, ...]:
        return tuple(l for l in self.layers if l.kind == "state")

    def kind_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for layer in self.layers:
            counts[layer.kind] = counts.get(layer.kind, 0) + 1
        return counts

    @property
    def total_params(self) -> int:
        return self.params.total

    @property
    def active_params(self) -> int:
        """Parameters one token computes with: all but the unused experts and, when the output
        head is a separate matrix, the input embedding (a table look-up, not a matmul). This is the
        convention of OpenAI's gpt-oss model card."""
        p = self.params
        active = p.total
        if not p.tied:
            active -= p.embedding
        if self.moe is not None:
            active -= p.routed_experts
            active += self.moe.layers * self.moe.top_k * self.moe.expert_params
        return active

    def with_layers(self, layers) -> "ModelSpec":
        return replace(self, layers=tuple(layers))
