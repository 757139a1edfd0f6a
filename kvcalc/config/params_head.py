"""The output head's tie, as every parameter counter reads it."""

from __future__ import annotations

from ..core.text import short as _short
from .fields import Fields

__all__ = ["never_tied", "tied_head"]


def tied_head(f: Fields, default: bool = True) -> bool:
    """Whether the output head shares the input embedding. A wrapper's (vision-language) model
    follows its own top-level tie_word_embeddings when it has one, whatever its text config
    says: checked with transformers 5.24 on the meta device (Qwen3.5's and Qwen3.6's composite
    models are tied with the top-level field true, with the text config's false or absent)."""
    if f.top is not f.cfg:
        top = f.top.get("tie_word_embeddings")
        if top is not None:
            f.seen.add("tie_word_embeddings")
            if not isinstance(top, bool):
                raise ValueError(
                    f"config field 'tie_word_embeddings' must be true or false, got {_short(top)}"
                )
            return top
    return f.bool("tie_word_embeddings", default)


def never_tied(f: Fields, model_class: str) -> bool:
    """False, for a family whose transformers class never ties its output head (no tied
    weights, whatever tie_word_embeddings says); true is refused, as vLLM ties the head then."""
    if tied_head(f, False):
        raise ValueError(
            f"config field 'tie_word_embeddings' is true: transformers' {model_class} never ties "
            "the output head, vLLM ties it, and the parameter counter does not pick"
        )
    return False
