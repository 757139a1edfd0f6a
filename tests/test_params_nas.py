"""Nemotron-NAS parameter counts (``block_configs``: each layer its own attention and FFN).
Expected values by hand from vLLM's nemotron_nas.py (DeciLMDecoderLayer: grouped-query attention
of num_attention_heads // n_heads_in_group K/V heads, LlamaMLP of
_ffn_mult_to_intermediate_size(ffn_mult, hidden) = int(2 x ffn_mult x hidden / 3) rounded up to a
multiple of 256, an input norm with the attention and a post-attention norm with the FFN) and
NVIDIA's published sizes."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvcalc import spec_from_config
from kvcalc.config.hfconfig import load_config_file

DATA = Path(__file__).resolve().parent / "data" / "configs"


def _nas(blocks: list[dict]) -> dict:
    return {
        "model_type": "nemotron-nas",
        "hidden_size": 1024,
        "num_attention_heads": 8,
        "num_hidden_layers": len(blocks),
        "vocab_size": 1000,
        "intermediate_size": None,
        "num_key_value_heads": None,
        "tie_word_embeddings": False,
        "block_configs": blocks,
    }


def _attn(**kw) -> dict:
    return {"n_heads_in_group": None, "no_op": False, "replace_with_linear": False, **kw}


def _ffn(**kw) -> dict:
    return {"ffn_mult": None, "no_op": False, "replace_with_linear": False, **kw}


def test_each_kind_of_block_by_hand():
    blocks = [
        {"attention": _attn(n_heads_in_group=4), "ffn": _ffn(ffn_mult=2.625)},
        {"attention": _attn(no_op=True), "ffn": _ffn(ffn_mult=1.3)},
        {"attention": _attn(replace_with_linear=True), "ffn": _ffn(no_op=True)},
        {"attention": _attn(no_op=True), "ffn": _ffn(replace_with_linear=True)},
    ]
    p = spec_from_config(_nas(blocks)).require_params()
    h = 1024
    # layer 0: q 8 x 128 and k, v 2 x 128 each, o; FFN int(2 x 2.625 x 1024 / 3) = 1,792 wide
    # layer 1: FFN int(2 x 1.3 x 1024 / 3) = 887, rounded up to 1,024; layer 2: a linear
    # attention; layer 3: a linear FFN
    assert p.attention == h * (1024 + 2 * 256) + 1024 * h + h * h
    assert p.mlp == 3 * h * 1792 + 3 * h * 1024 + h * h
    # input norms on layers 0 and 2, post-attention norms on 0, 1 and 3, the final norm
    assert p.norms == 6 * h
    assert p.total == p.attention + p.mlp + p.norms + 2 * 1000 * h == 15_423_488


@pytest.mark.parametrize(
    "name, published",
    [
        # nvidia/Llama-3_3-Nemotron-Super-49B-v1: "reduced the parameter count from 70B to 49B"
        ("nemotron-nas-super-49b.json", 49e9),
        # nvidia/Llama-3_1-Nemotron-Ultra-253B-v1: 253B
        ("nemotron-nas-ultra-253b.json", 253e9),
    ],
)
def test_the_published_sizes(name, published):
    spec = spec_from_config(load_config_file(DATA / name))
    assert spec.require_params().total == pytest.approx(published, rel=0.02)


@pytest.mark.parametrize(
    "ffn, match",
    [
        (_ffn(ffn_mult=None), "ffn_mult' must be a number"),
        (_ffn(ffn_mult=2.0, sparsify=["x"]), "sparsify"),
        ({**_ffn(ffn_mult=2.0), "moe": {}}, "moe"),
    ],
)
def test_an_ffn_the_counter_cannot_read_is_refused_by_name(ffn, match):
    spec = spec_from_config(_nas([{"attention": _attn(n_heads_in_group=2), "ffn": ffn}]))
    assert spec.params is None and match in (spec.params_error or "")
