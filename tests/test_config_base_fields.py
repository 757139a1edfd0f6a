"""Refuse only what can change the cache (issue 38, item 2): the fields transformers itself defines
for every model, read from the installed transformers so the list cannot drift.

- ``PretrainedConfig``'s own dataclass fields (transformers 5): at their default value no one of
  them changes a cache (``is_encoder_decoder: true`` would: it stays refused, see below).
- every generation setting (``GenerationConfig``: sampling, beams, penalties, assistant and
  speculation settings, stop strings, ...): many real config.json files still carry them from
  transformers 4, where the base config defined them (Llama 3.2 Vision's and Kimi K2.5's nested
  text configs carry ``do_sample``). A server's cache never depends on them: vLLM sizes its
  pool from the architecture and its own flags, and reads sampling settings per request.

The expected bytes are Llama 3.1 8B's, worked by hand: 2 (K, V) x 32 layers x 8 KV heads x 128
x 2 B = 131,072 B per token, with or without any of these fields.
"""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest
from conftest import ROOT

from kvcalc import kv_cache, spec_from_config
from kvcalc.config.hfconfig import UnknownFields

transformers = pytest.importorskip("transformers", reason="transformers is not installed")

LLAMA = json.loads((ROOT / "tests/data/configs/llama-3.1-8b.json").read_text())
PER_TOKEN = 2 * 32 * 8 * 128 * 2


def generation_settings() -> dict[str, object]:
    """Every generation setting transformers knows, with a value that is not its off value (a
    config that carries one carries it set)."""
    from transformers import GenerationConfig

    names = set(GenerationConfig().to_dict()) | set(
        GenerationConfig._get_default_generation_params()
    )
    out: dict[str, object] = {}
    for name in sorted(names):
        if name.startswith("_") or name == "transformers_version":
            continue
        default = GenerationConfig._get_default_generation_params().get(name)
        out[name] = True if default is None else default
    return out


def base_fields() -> dict[str, object]:
    """PretrainedConfig's own fields at their defaults."""
    from transformers import PretrainedConfig

    out = {}
    for f in dataclasses.fields(PretrainedConfig):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
        else:
            out[f.name] = None
    return out


def per_token(cfg: dict) -> int:
    return kv_cache(spec_from_config(cfg), 1).kv_bytes_per_token_nominal


def test_the_oracle_is_the_one_this_list_was_read_from():
    # Both lists come from the installed transformers (pyproject pins it); a new release that adds
    # settings makes the two tests below name them.
    assert len(generation_settings()) >= 60 and "do_sample" in generation_settings()
    assert {"architectures", "dtype", "is_encoder_decoder"} <= set(base_fields())


@pytest.mark.parametrize("name, value", sorted(generation_settings().items()))
def test_a_generation_setting_is_never_refused(name, value):
    cfg = {**LLAMA, name: value}
    assert per_token(cfg) == PER_TOKEN


@pytest.mark.parametrize("name", ["llama-4-scout-17b-16e", "qwen3.5-35b-a3b", "gemma-4-e2b-it"])
def test_all_generation_settings_at_once_in_a_nested_text_config(name):
    # A wrapper's nested text config (these real files) with every setting inside it and beside
    # it, as in Llama 3.2 Vision's and Kimi K2.5's: the same bytes as without them.
    cfg = json.loads((ROOT / f"tests/data/configs/{name}.json").read_text())
    plain = per_token(cfg)
    nested = copy.deepcopy(cfg)
    nested["text_config"].update(generation_settings())
    nested.update(generation_settings())
    assert per_token(nested) == plain


@pytest.mark.parametrize("name, value", sorted(base_fields().items()))
def test_a_base_field_at_its_default_is_never_refused(name, value):
    cfg = {**LLAMA, name: value}
    assert per_token(cfg) == PER_TOKEN


def test_a_base_field_that_adds_a_cache_is_still_refused():
    # An encoder-decoder keeps a cross-attention cache beside the self-attention one: refused by
    # name, not read as a decoder.
    with pytest.raises(UnknownFields, match="is_encoder_decoder"):
        spec_from_config({**LLAMA, "is_encoder_decoder": True})


# Fields some families define and others' files carry (issue 38): a partial rotary's width, GPT-2's
# sequence-summary head for classification, the attention's scalar constants. None changes what
# a layer keeps.
ELSEWHERE = {
    "rotary_dim": 64,
    "summary_type": "cls_index",
    "summary_use_proj": True,
    "summary_activation": None,
    "summary_proj_to_labels": True,
    "summary_first_dropout": 0.1,
    "scale_attn_weights": True,
    "scale_attn_by_inverse_layer_idx": False,
    "reorder_and_upcast_attn": False,
}


@pytest.mark.parametrize("name, value", sorted(ELSEWHERE.items()))
def test_a_head_or_forward_constant_is_never_refused(name, value):
    assert per_token({**LLAMA, name: value}) == PER_TOKEN
