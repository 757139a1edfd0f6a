"""Qwen3.5's parameter count (issue 38, item 2: "a known cache never comes without its weights"):
kvcalc's count of the language model against transformers' own, built on the meta device from
the same real config.json (no weights, no download), for the MoE and the dense family.

The output head follows the wrapper's top-level tie_word_embeddings where the text config says
nothing, as transformers' composite model does (checked below with the flag flipped).
"""

from __future__ import annotations

import copy
import json

import pytest
from conftest import ROOT

from kvcalc import spec_from_config

torch = pytest.importorskip("torch", reason="torch is not installed")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

FILES = {
    "qwen3.5-35b-a3b": ROOT / "tests/data/configs/qwen3.5-35b-a3b.json",
    "qwen3.6-27b": ROOT / "tests/data/vllm-logs/qwen3.6-27b.json",
}


def transformers_count(cfg: dict) -> int:
    """Parameters of the language model inside the composite model transformers builds for the
    whole file (its vision tower left out: kvcalc counts the language model), the output head
    tied or not as transformers itself decides."""
    from transformers import CONFIG_MAPPING, AutoModelForImageTextToText

    conf = CONFIG_MAPPING[cfg["model_type"]](**{k: v for k, v in cfg.items() if k != "model_type"})
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(conf)
    # named_parameters() lists a tied weight once, as a count of distinct weights should
    return sum(p.numel() for n, p in model.named_parameters() if ".visual." not in f".{n}")


@pytest.mark.parametrize("name", sorted(FILES))
@pytest.mark.parametrize("tie", [None, True])
def test_qwen35_counts_as_transformers_builds_it(name, tie):
    cfg = json.loads(FILES[name].read_text())
    if tie is not None:
        cfg = copy.deepcopy(cfg)
        cfg["tie_word_embeddings"] = tie
    spec = spec_from_config(cfg)
    assert spec.params is not None, spec.params_error
    assert spec.params.total == transformers_count(cfg)
