"""Speculative decoding's cache: the layers a drafter adds to the target model's pool.

A drafter's attention layers (MTP, an EAGLE head, a draft model) keep a cache of their own in
the target's pool (vLLM sizes one pool for all of them; tests/data/vllm-speculative-facts.md).
What an engine adds per drafted token: kvcalc.engines.vllm, docs/vllm.md#speculative-decoding.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .model import FullAttention, Layer, MLALatent, ModelSpec, interned
from .units import check_int

METHODS = {
    "mtp": "MTP",
    "eagle": "EAGLE head",
    "draft_model": "draft model",
    "ngram": "n-gram lookup",  # drafts from the prompt's own text: no layers, no cache
}
# vLLM's --speculative-config method names, as kvcalc's (vllm/config/speculative.py).
VLLM_METHODS = {
    "mtp": "mtp",
    "deepseek_mtp": "mtp",
    "qwen3_next_mtp": "mtp",
    "qwen3_5_mtp": "mtp",
    "glm4_moe_mtp": "mtp",
    "mimo_mtp": "mtp",
    "ernie_mtp": "mtp",
    "longcat_flash_mtp": "mtp",
    "eagle": "eagle",
    "eagle3": "eagle",
    "draft_model": "draft_model",
    "ngram": "ngram",
    "suffix": "ngram",
}
MAX_SPECULATIVE_TOKENS = 64


@dataclass(frozen=True, kw_only=True)
class Speculation:
    """A speculative decoding setup, as vLLM's --speculative-config names it: the method, the
    tokens drafted per step (num_speculative_tokens), and the drafter's own model (an EAGLE
    head's or a draft model's config read into a spec; None for MTP)."""

    method: str = "mtp"
    tokens: int = 1
    draft: ModelSpec | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(
                f"speculative method must be one of {', '.join(METHODS)}, "
                f"got {str(self.method)[:40]!r}"
            )
        check_int("num_speculative_tokens", self.tokens, 1, MAX_SPECULATIVE_TOKENS)
        if self.method == "draft_model" and self.draft is None:
            raise ValueError(
                "a draft model needs its config.json (the draft's layers keep a cache)"
            )
        if self.method == "mtp" and self.draft is not None:
            raise ValueError("MTP layers come from the model's own config: give no draft config")


def drafter_layers(spec: ModelSpec, s: Speculation) -> tuple[tuple[Layer, ...], str]:
    """The layers whose cache the drafter adds, and the drafter in words."""
    if spec.draft_layers:
        raise ValueError(f"{spec.name} already has a drafter ({spec.drafter})")
    tokens = f"{s.tokens} token{'s' if s.tokens > 1 else ''} a step"
    if s.method == "ngram":
        return (), f"n-gram lookup (no drafter layers), {tokens}"
    if s.method == "mtp":
        if spec.mtp_error:
            raise ValueError(
                f"{spec.name} declares MTP layers ({spec.mtp_field}) that kvcalc cannot "
                f"size: {spec.mtp_error}"
            )
        if not spec.mtp_layers:
            raise ValueError(
                f"{spec.name}'s config declares no MTP layers (num_nextn_predict_layers, "
                "mtp_num_hidden_layers, num_mtp_layers): choose an EAGLE head or a draft model"
            )
        n = len(spec.mtp_layers)
        if s.tokens > n and s.tokens % n:
            # vLLM reuses the n modules in turn (SpeculativeConfig: "Ensure divisibility for
            # MTP module reuse"), tests/data/vllm-speculative-facts.md Q1
            raise ValueError(
                f"num_speculative_tokens {s.tokens} must be at most {n} or a multiple of "
                f"{n}, the model's MTP layers (vLLM refuses it otherwise)"
            )
        return spec.mtp_layers, f"{n} MTP layer{'s' if n > 1 else ''} ({spec.mtp_field}), {tokens}"
    if s.draft is not None:
        if s.draft.draft_layers:
            raise ValueError("a draft model cannot itself have a drafter")
        n = s.draft.num_layers
        what = METHODS[s.method]
        return s.draft.layers, f"{what} {s.draft.name} ({n} layer{'s' if n > 1 else ''}), {tokens}"
    # An EAGLE head without its config: one decoder layer with the target's attention geometry.
    ref = next((lay for lay in spec.kv_layers if not isinstance(lay, MLALatent)), None)
    if ref is None:
        raise ValueError(
            f"{spec.name} has no attention layer whose geometry an EAGLE head could copy: "
            "give the head's config.json"
        )
    head = FullAttention(
        kv_heads=ref.kv_heads, head_dim=ref.head_dim, v_head_dim=ref.v_head_dim, q_heads=ref.q_heads
    )
    return (head,), f"EAGLE head (1 layer, the model's attention), {tokens}"


def with_speculation(spec: ModelSpec, s: Speculation | None) -> ModelSpec:
    """``spec`` with the drafter's layers after its own: every figure of the cache (per token,
    per sequence, the pool's blocks and concurrency) then counts both, as one pool holds both."""
    if s is None:
        return spec
    layers, words = drafter_layers(spec, s)
    return replace(
        spec,
        name=f"{spec.name} + {METHODS[s.method]}",
        layers=interned(spec.layers + tuple(layers)),
        draft_layers=len(layers),
        drafter=words,
        speculative_tokens=s.tokens,
        draft_method=s.method,
        drafter_params=drafter_params(spec, s),
    )


def drafter_params(spec: ModelSpec, s: Speculation) -> int | None:
    """The parameters the drafter loads beside the model, or None where they are not known:
    the MTP modules' (their decoder layers, projection and norms; the embedding and output head
    are the target's), a draft model's own, none for an n-gram lookup. An EAGLE head's vary
    (its fusion layer, often its own output head over a smaller vocabulary): not counted."""
    if s.method == "ngram":
        return 0
    if s.method == "mtp":
        return spec.mtp_params
    if s.method == "draft_model" and s.draft is not None and s.draft.params is not None:
        return s.draft.params.total
    return None


def drafter_weight_bytes(spec: ModelSpec, weight_bytes: int, params: int | None) -> int | None:
    """The drafter's weight bytes, or None when they are not known: MTP modules are part of the
    model's checkpoint, at its bytes per parameter (``weight_bytes`` over ``params``, the whole
    model's); vLLM loads a draft model without the target's quantisation
    (create_vllm_config_for_draft_model: quant_config=None), in 16 bits."""
    if spec.drafter_params is None:
        return None
    if spec.draft_method == "draft_model":
        return spec.drafter_params * 2
    if not params:
        return None
    return round(spec.drafter_params * weight_bytes / params)


def speculation_from(config: dict, draft: ModelSpec | None = None) -> Speculation:
    """A Speculation from vLLM's --speculative-config object ({"method": "mtp",
    "num_speculative_tokens": 2}); ``draft`` is the EAGLE head's or draft model's spec, read
    by the caller from the config.json its "model" names."""
    if not isinstance(config, dict):
        raise ValueError('the speculative config must be a JSON object, e.g. {"method": "mtp"}')
    known = {"method", "num_speculative_tokens", "model"}
    extra = sorted(set(config) - known - _NO_CACHE_KEYS)
    if extra:
        raise ValueError(
            f"speculative config key {str(extra[0])[:40]!r} is not read by kvcalc (it reads "
            "method, num_speculative_tokens and model)"
        )
    method = config.get("method")
    if method is None:
        method = "draft_model" if draft is not None else "mtp"
    if not isinstance(method, str) or method not in VLLM_METHODS:
        raise ValueError(
            f"speculative method {str(method)[:40]!r} is not one kvcalc sizes; it knows "
            + ", ".join(VLLM_METHODS)
        )
    tokens = config.get("num_speculative_tokens", 1)
    if isinstance(tokens, bool) or not isinstance(tokens, int):
        raise ValueError(f"num_speculative_tokens must be a whole number, got {str(tokens)[:40]!r}")
    return Speculation(method=VLLM_METHODS[method], tokens=tokens, draft=draft)


# vLLM --speculative-config keys that do not change the cache: where the drafter runs, its
# sampling, its acceptance rule and limits.
_NO_CACHE_KEYS = frozenset(
    {
        "draft_tensor_parallel_size",
        "disable_by_batch_size",
        "prompt_lookup_min",
        "prompt_lookup_max",
        "acceptance_method",
        "posterior_threshold",
        "posterior_alpha",
        "disable_padded_drafter_batch",
        "parallel_drafting",
        "rejection_sample_method",
        "enforce_eager",
        "quantization",
        "revision",
        "code_revision",
        "max_model_len",
        "disable_log_stats",
    }
)
