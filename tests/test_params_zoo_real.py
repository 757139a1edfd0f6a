"""Every real config.json in tests/data/configs (and its folders) whose parameters kvcalc counts,
against transformers 5.24's own model built on the meta device from that same file (issue 38,
item 2: "a known cache never comes without its weights").

The oracle: the sum of p.numel() over the model's parameters (a tied weight once) plus the
router's e_score_correction_bias buffers, which the checkpoints and vLLM keep as weights. A
multimodal file counts its language model (the ``language_model`` or ``text_model``
submodule) and the output head, as kvcalc counts it. The weights' quantisation block is dropped
before building (it changes bytes, not parameter counts; transformers cannot build quantised
kernels on the meta device). A file transformers does not ship a class for (remote code) is
left out; so is one kvcalc refuses to count, which must say why.
"""

from __future__ import annotations

import json

import pytest
from conftest import ROOT

from kvcalc import spec_from_config

torch = pytest.importorskip("torch", reason="torch is not installed")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

DATA = ROOT / "tests" / "data" / "configs"
FILES = sorted(DATA.rglob("*.json"))
# Files whose count transformers itself cannot give, each with the reason.
NOT_BUILDABLE: dict[str, str] = {}


def _transformers_config(cfg: dict):
    from transformers import AutoConfig

    rest = {k: v for k, v in cfg.items() if k not in ("model_type", "quantization_config")}
    if isinstance(rest.get("text_config"), dict):
        rest["text_config"] = {
            k: v for k, v in rest["text_config"].items() if k != "quantization_config"
        }
    return AutoConfig.for_model(cfg["model_type"], **rest)


def transformers_count(cfg: dict) -> int:
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    conf = _transformers_config(cfg)
    model = None
    errors = []
    for auto in (AutoModelForCausalLM, AutoModelForImageTextToText):
        try:
            with torch.device("meta"):
                model = auto.from_config(conf)
            break
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {str(exc)[:120]}")
    assert model is not None, errors
    head = model.get_output_embeddings()
    language = next(
        (
            m
            for n, m in model.named_modules()
            if n.rsplit(".", 1)[-1] in ("language_model", "text_model")
        ),
        None,
    )
    parts = [model] if language is None else [language, head]
    seen: set[int] = set()
    total = 0
    for part in parts:
        for p in part.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                total += p.numel()
        for name, b in part.named_buffers():
            if name.endswith("e_score_correction_bias") and id(b) not in seen:
                seen.add(id(b))
                total += b.numel()
    return total


def _ships(cfg: dict) -> bool:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    return isinstance(cfg.get("model_type"), str) and cfg["model_type"] in CONFIG_MAPPING


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(DATA)) for p in FILES])
def test_a_counted_real_config_equals_transformers_own_model(path):
    cfg = json.loads(path.read_text())
    try:
        spec = spec_from_config(cfg)
    except ValueError as exc:
        pytest.skip(f"kvcalc refuses the config: {str(exc)[:100]}")
    if spec.params is None:
        assert spec.params_error and len(spec.params_error) > 10
        pytest.skip(f"kvcalc refuses the count by name: {spec.params_error[:100]}")
    if not _ships(cfg):
        pytest.skip(f"transformers ships no {cfg.get('model_type')!r} (remote code)")
    rel = str(path.relative_to(DATA))
    if rel in NOT_BUILDABLE:
        pytest.skip(NOT_BUILDABLE[rel])
    assert spec.params.total == transformers_count(cfg)


def test_most_real_configs_are_counted():
    """The count is refused only by name, and most real files are counted."""
    counted = 0
    for path in FILES:
        try:
            spec = spec_from_config(json.loads(path.read_text()))
        except ValueError:
            continue
        counted += spec.params is not None
    assert counted >= 30, counted
