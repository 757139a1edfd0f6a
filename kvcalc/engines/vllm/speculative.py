"""Speculative decoding as vLLM sizes it beyond the drafter's own layers (already in the spec):
wider conv states, more state blocks per request, and which models it serves so at all, by
release (docs/vllm.md#speculative-decoding; tests/data/vllm-speculative-facts.md). The
lookahead slots never enter the start-up lines (Q5)."""

from __future__ import annotations

from dataclasses import fields, replace

from ...core.model import (
    ChunkedLocal,
    FullAttention,
    Layer,
    ModelSpec,
    RecurrentState,
    counted,
    interned,
)
from .facts import Facts, fact


def speculative_view(spec: ModelSpec, version: tuple[int, ...], notes: list[str]) -> ModelSpec:
    """``spec`` as vLLM ``version`` holds it with its speculative setup: refused (ValueError)
    where that release cannot serve it, the conv windows widened where it widens them."""
    k = spec.speculative_tokens
    if not k:
        return spec
    shown = ".".join(map(str, version))
    if spec.draft_method == "draft_model" and not fact(Facts.spec_draft_model, version):
        raise ValueError(
            f'vLLM {shown} cannot serve a separate draft model ("Speculative decoding with '
            'draft model is not supported yet"): from 0.15.0 on'
        )
    states = [lay for lay, _ in counted(spec.layers) if isinstance(lay, RecurrentState)]
    if not states:
        return spec
    allowed = fact(Facts.spec_hybrid, version)
    flavors = {lay.flavor for lay in states}
    if allowed == "none" or (allowed == "qwen3_next" and flavors != {"gated_deltanet"}):
        raise ValueError(
            f"vLLM {shown} serves no model with recurrent layers with speculative decoding"
            + (" but Qwen3-Next" if allowed == "qwen3_next" else "")
            + ": any such model from 0.17.0 on (PR #33726)"
        )
    widened = fact(Facts.spec_conv_rows, version)
    # Mamba-1 and lightning attention never widen; KDA before 0.27.0 took num_spec unused
    unknown = flavors - widened - {"mamba", "lightning", "kda"}
    if unknown and allowed == "any":
        raise ValueError(
            f"how vLLM {shown} sizes a {sorted(unknown)[0]} state with speculative decoding is "
            "not modelled"
        )
    if "mamba2" in flavors and fact(Facts.mamba2_spec_pages_unsized, version):
        notes.append(
            "speculative decoding widens the Mamba-2 conv state by "
            f"{k} rows; vLLM {shown} sizes the pages of FalconH1, GraniteMoeHybrid and Zamba2 "
            "without them and fails at start-up (fixed in 0.32.0, PR #47635)"
        )

    def view(lay: Layer) -> Layer:
        if not isinstance(lay, RecurrentState) or lay.flavor not in widened:
            return lay
        rows = lay.conv_kernel - 1
        if rows < 1:
            return lay
        return replace(
            lay,
            conv_elements=lay.conv_elements // rows * (rows + k),
            group_conv_elements=lay.group_conv_elements // rows * (rows + k),
        )

    if flavors & widened:
        notes.append(
            f"speculative decoding: each recurrent layer's conv state keeps {k} more rows "
            f"(conv_kernel - 1 + {k}), and each recurrent group {k} more state blocks per request"
        )
    return replace(spec, layers=interned(view(lay) for lay in spec.layers))


def speculative_state_blocks(spec: ModelSpec, version: tuple[int, ...]) -> int:
    """The state blocks per request a recurrent group keeps beyond the mode's own
    (num_speculative_blocks), as the start-up count charges them in ``version``."""
    return spec.speculative_tokens if fact(Facts.spec_state_blocks, version) else 0


def chunked_view(spec: ModelSpec, version: tuple[int, ...], notes: list[str]) -> ModelSpec:
    """``spec`` as vLLM ``version`` allocates it: chunked local attention layers (Llama 4)
    as full attention where that release keeps every token of them (no pages of their own
    before v0.10.0; v0.10.1-v0.13.0 disable the hybrid KV cache manager for them by default).
    Attention still reads only the chunk: this is the cache's layout, not the compute."""
    if fact(Facts.chunked_local_pages, version):
        return spec
    if not any(isinstance(lay, ChunkedLocal) for lay, _ in counted(spec.layers)):
        return spec
    shown = ".".join(map(str, version))
    notes.append(
        f"vLLM {shown} keeps every token of the chunked local attention layers, as full "
        "attention ("
        + (
            "no chunked pages before 0.10.0"
            if version < (0, 10, 0)
            else "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=0 by default until 0.14.0"
        )
        + ")"
    )

    def view(lay: Layer) -> Layer:
        if not isinstance(lay, ChunkedLocal):
            return lay
        return FullAttention(**{f.name: getattr(lay, f.name) for f in fields(FullAttention)})

    return replace(spec, layers=interned([view(lay) for lay in spec.layers]))
