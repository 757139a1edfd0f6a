"""Weight bytes: what the parameters occupy (every expert resident), and what one decode step
reads of them (only the experts its batch routes to: docs/formulas.md); ``expert_dtype`` where a
checkpoint stores its experts in another format (gpt-oss: MXFP4 experts, BF16 elsewhere)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from ..core.dtypes import WEIGHT_DTYPES, bytes_for, get_dtype
from ..core.model import ModelSpec
from ..core.units import check_int


@dataclass(frozen=True, kw_only=True)
class Weights:
    dtype: str
    expert_dtype: str
    total_params: int | None = None  # None when only the byte size is known (given by hand)
    active_params: int | None = None
    expert_params: int = 0  # routed experts, all layers
    bytes: int  # everything resident
    expert_bytes: int = 0
    dense_bytes: int  # everything but the routed experts
    bytes_per_expert: int = 0  # one expert of one layer
    # An untied input embedding: a forward pass gathers one row per token instead of reading the
    # table (a tied one is read whole by the output head). 0 when tied or unknown.
    input_embedding_bytes: int = 0
    embedding_row_bytes: int = 0
    # The checkpoint's own format when it is served in another ("auto": vLLM loads an FP32
    # checkpoint in 16 bits); None when served as stored.
    checkpoint_dtype: str | None = None

    def read_per_step(self, spec: ModelSpec, batch: int) -> int:
        """Weight bytes one pass over ``batch`` tokens reads (a decode step's batch, a prefill's
        prompt): every non-expert weight, in each MoE layer the experts the batch touches under
        uniform routing, and of an untied input embedding only the ``batch`` rows looked up."""
        batch = check_int("batch", batch, 1, 10**9)
        gathered = min(self.input_embedding_bytes, batch * self.embedding_row_bytes)
        dense = self.dense_bytes - self.input_embedding_bytes + gathered
        return dense + self.experts_read_per_step(spec, batch)

    def experts_read_per_step(self, spec: ModelSpec, batch: int) -> int:
        """The routed experts' part of ``read_per_step``: in each MoE layer the experts
        ``batch`` tokens touch under uniform routing (0 for a dense model)."""
        batch = check_int("batch", batch, 1, 10**9)
        if spec.moe is None:
            return 0
        touched = spec.moe.experts_touched(batch)
        return round(spec.moe.layers * touched * self.bytes_per_expert)


def weights(spec: ModelSpec, dtype: str = "bf16", expert_dtype: str | None = None) -> Weights:
    d = get_dtype(dtype, WEIGHT_DTYPES)
    e = get_dtype(expert_dtype, WEIGHT_DTYPES) if expert_dtype else d
    params = spec.require_params()  # ValueError naming what is missing when they are unknown
    experts = params.routed_experts
    per_expert = bytes_for(spec.moe.expert_params, e) if spec.moe else 0
    expert_bytes = per_expert * spec.moe.num_experts * spec.moe.layers if spec.moe else 0
    dense_bytes = bytes_for(params.total - experts, d)
    untied = params.embedding if params.lm_head and not params.tied else 0
    rows = spec.vocab_size if spec.vocab_size else 0
    return Weights(
        dtype=d.name,
        expert_dtype=e.name,
        total_params=params.total,
        active_params=spec.active_params,
        expert_params=experts,
        bytes=dense_bytes + expert_bytes,
        expert_bytes=expert_bytes,
        dense_bytes=dense_bytes,
        bytes_per_expert=per_expert,
        input_embedding_bytes=bytes_for(untied, d) if rows else 0,
        embedding_row_bytes=bytes_for(untied // rows, d) if untied and rows else 0,
    )


def weights_given(total_bytes: int, dtype: str = "bf16") -> Weights:
    """Weights known only by their size, for a model whose parameters kvcalc cannot count: all
    of them resident and all of them read by every decode step (no expert routing assumed)."""
    total_bytes = check_int("weights (bytes)", total_bytes, 0, 2**60)
    d = get_dtype(dtype, WEIGHT_DTYPES)
    return Weights(dtype=d.name, expert_dtype=d.name, bytes=total_bytes, dense_bytes=total_bytes)


def served_format(checkpoint: str, half: str = "bf16") -> str:
    """The format vLLM loads a checkpoint stored in ``checkpoint`` in with ``--dtype auto`` on a
    GPU whose 16-bit format is ``half`` ("bf16", or "fp16" where the GPU has no BF16): an FP32
    checkpoint is downcast to it, a BF16 one falls back to FP16 on a GPU without BF16, other
    formats load as stored (vllm/config/model.py, _resolve_auto_dtype: "Downcast for float32
    models", then "Falling back to ... for compatibility")."""
    if checkpoint == "fp32" or (checkpoint == "bf16" and half == "fp16"):
        return half
    return checkpoint


def weights_in(
    spec: ModelSpec,
    choice: str | None,
    checkpoint: str = "bf16",
    checkpoint_experts: str | None = None,
    *,
    half: str = "bf16",
) -> Weights:
    """The one place a weight-format choice is resolved: "auto" (or None) is the checkpoint as
    vLLM loads it on a GPU whose 16-bit format is ``half`` (``served_format``), with its expert
    format (gpt-oss: MXFP4 experts); anything else is that format for every weight."""
    if choice in (None, "auto"):
        if checkpoint == "unmodelled":
            raise ValueError(
                f"{spec.name}'s checkpoint is quantised in a format whose weight bytes kvcalc "
                "does not derive (they depend on which tensors were quantised and their "
                "scales): choose a weight format or give the weights' size (--weight-dtype, "
                "--weight-bits or --weights-gib; in the app, the sidebar's weight inputs)"
            )
        served = served_format(checkpoint, half)
        w = weights(spec, served, checkpoint_experts)
        return replace(w, checkpoint_dtype=checkpoint) if served != checkpoint else w
    return weights(spec, choice)


MIN_WEIGHT_BITS, MAX_WEIGHT_BITS = 1.0, 32.0


def weights_at_bits(spec: ModelSpec, bits: float, *, half: str = "bf16") -> Weights:
    """Every weight stored in ``bits`` bits on average, scales included: a quantised checkpoint
    of a mixed format such as llama.cpp's GGUF (Q4_0 4.5, Q8_0 8.5, Q4_K_M about 4.84 bits per
    weight). Its matrix multiplies dequantise to the GPU's 16-bit format ``half`` (as W4A16
    kernels do), and a mixture-of-experts step still reads only the experts it touches."""
    if (
        isinstance(bits, bool)
        or not isinstance(bits, (int, float))
        or not (MIN_WEIGHT_BITS <= bits <= MAX_WEIGHT_BITS)
    ):
        raise ValueError(
            f"bits per weight must be between {MIN_WEIGHT_BITS:g} and "
            f"{MAX_WEIGHT_BITS:g}, got {bits!r}"
        )
    w = weights(spec, half)  # 16 bits a weight: scale every byte count by bits / 16
    f = bits / 16
    scaled = {k.name: round(getattr(w, k.name) * f) for k in fields(w) if "bytes" in k.name}
    return replace(w, **scaled | {"bytes": scaled["dense_bytes"] + scaled["expert_bytes"]})
