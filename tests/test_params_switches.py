"""Every family the parameter counter knows, against transformers 5.24's own model on the meta
device, beyond its config class's defaults (which the zoo checks, tests/test_zoo.py):

- every boolean field of the config class flipped, one at a time (attention_bias, mlp_bias,
  tie_word_embeddings, use_qk_norm, ...): kvcalc's count must equal the model transformers
  builds from the flipped config, or be refused by name;
- every field left out whose absence leaves transformers' config unchanged (the class default
  applies): kvcalc, which then takes its own default, must still count the same or refuse. A
  field whose absence changes kvcalc's cache reading (num_key_value_heads, head_dim, n_groups
  for a few families) is the cache reader's matter, not the counter's, and is left out here.

The oracle is the sum of p.numel() over the causal LM's parameters (a tied weight once) plus the
router's e_score_correction_bias buffers (weights in the checkpoint and in vLLM). Families whose
text model has no causal-LM class of its own (they are checked through their wrappers in the zoo)
and families transformers does not ship are left out here.
"""

from __future__ import annotations

import pytest

from kvcalc import spec_from_config
from kvcalc.config.families.table import FAMILIES

torch = pytest.importorskip("torch", reason="torch is not installed")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

pytestmark = pytest.mark.slow  # about two models built per family and switch

# Fields that are not weights: they change no tensor transformers builds.
_NOT_WEIGHTS = {
    "use_cache",
    "return_dict",
    "output_hidden_states",
    "output_attentions",
    "is_encoder_decoder",
    "tie_encoder_decoder",
    "torchscript",
    "add_cross_attention",
    "is_decoder",
    "output_router_logits",
    "_output_attentions",
}


def _families() -> list[str]:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES as LM

    known = {
        t for t, fam in FAMILIES.items() if fam.params is not None or fam.counter or fam.uncountable
    }
    return sorted(t for t in known if t in CONFIG_MAPPING and t in LM)


def _oracle(conf) -> int | str:
    from transformers import AutoModelForCausalLM

    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(conf)
    except Exception as exc:
        return f"transformers cannot build it ({type(exc).__name__})"
    # Phi-4-multimodal keeps its image and audio embedders inside its model: left out, as
    # kvcalc counts the language model
    encoders = {
        id(p)
        for n, m in model.named_modules()
        if n.endswith("embed_tokens_extend")
        for p in m.parameters()
    }
    params = sum(p.numel() for p in model.parameters() if id(p) not in encoders)
    bias = sum(
        b.numel() for n, b in model.named_buffers() if n.endswith(".e_score_correction_bias")
    )
    return params + bias


def _kvcalc(cfg: dict) -> int | str:
    try:
        spec = spec_from_config(cfg)
    except ValueError as exc:
        return f"cache refused: {exc}"
    if spec.params is None:
        return f"refused: {spec.params_error}"
    return spec.params.total


def _layers(cfg: dict):
    try:
        return spec_from_config(cfg).layers
    except ValueError:
        return None


def _dict(conf, model_type: str) -> dict:
    cfg = conf.to_dict()
    cfg["model_type"] = model_type
    return cfg


def _config(model_type: str, **fields):
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    return CONFIG_MAPPING[model_type](**fields)


@pytest.mark.parametrize("model_type", _families())
def test_every_weight_switch_flipped_counts_as_transformers_builds_it(model_type):
    base = _dict(_config(model_type), model_type)
    switches = sorted(k for k, v in base.items() if isinstance(v, bool) and k not in _NOT_WEIGHTS)
    wrong = []
    for name in switches:
        fields = {k: v for k, v in base.items() if k != "model_type"}
        fields[name] = not base[name]
        try:
            conf = _config(model_type, **fields)
        except Exception:  # the class refuses the flipped value
            continue
        expected = _oracle(conf)
        if isinstance(expected, str):
            continue
        found = _kvcalc(_dict(conf, model_type))
        if isinstance(found, int) and found != expected:
            wrong.append(f"{name}={fields[name]}: kvcalc {found:,}, transformers {expected:,}")
    assert not wrong, f"{model_type}: " + "; ".join(wrong)


@pytest.mark.parametrize("model_type", _families())
def test_a_field_left_at_its_class_default_counts_the_same(model_type):
    conf = _config(model_type)
    base = _dict(conf, model_type)
    expected = _oracle(conf)
    if isinstance(expected, str):
        pytest.skip(expected)
    layers = _layers(base)
    wrong = []
    for name in sorted(base):
        if name in ("model_type", "transformers_version") or name in _NOT_WEIGHTS:
            continue
        fields = {k: v for k, v in base.items() if k not in ("model_type", name)}
        try:
            again = _dict(_config(model_type, **fields), model_type)
        except Exception:
            continue
        if again != base:  # leaving it out changes transformers' config: not a default
            continue
        rest = {k: v for k, v in base.items() if k != name}
        if _layers(rest) != layers:  # the cache reading changes: the cache reader's matter
            continue
        found = _kvcalc(rest)
        if isinstance(found, int) and found != expected:
            wrong.append(f"without {name}: kvcalc {found:,}, transformers {expected:,}")
    assert not wrong, f"{model_type}: " + "; ".join(wrong)
