"""The family table (kvcalc/config/families/table.py): one record per model_type, each with a
parameter count or the reason it has none, and class defaults equal to transformers' own.

A config.json that leaves a field out is read by transformers with its config class's default:
Mistral's class says 8 KV heads, so a Mistral file without num_key_value_heads has 8, not 32
(num_attention_heads, kvcalc's fallback when no default is known). The checks against the
installed transformers skip cleanly without it.
"""

from __future__ import annotations

import dataclasses

import pytest

from kvcalc import kv_cache, spec_from_config
from kvcalc.config.families.table import FAMILIES

# kvcalc's own defaults that are no field of the transformers class: the class's layout rule,
# which transformers builds in __post_init__ (layer_types) and kvcalc reproduces from them.
NOT_CLASS_FIELDS = {
    ("cohere2", "sliding_window_pattern"),
    ("gemma2", "sliding_window_pattern"),
    ("gemma3_text", "sliding_window_pattern"),
    ("gemma4_text", "sliding_window_pattern"),
    ("gemma4_text", "last_layer_full"),
    ("gemma4_text", "global_head_dim"),
}
# Omitted fields kvcalc deliberately does not default to transformers' class value, with why.
NOT_DEFAULTED = {
    # vLLM builds Nemotron-H's config with its own class (no mamba_ssm_cache_dtype), so an
    # omitted one keeps the SSM state in the state format chosen; transformers' says float32
    ("nemotron_h", "mamba_ssm_cache_dtype"),
}


def test_every_family_counts_its_parameters_or_says_why():
    missing, both = [], []
    for name, fam in FAMILIES.items():
        ways = [fam.params is not None, fam.counter is not None, bool(fam.uncountable)]
        if sum(ways) == 0:
            missing.append(name)
        elif sum(ways) > 1:
            both.append(name)
    assert missing == [], "give these a parameter entry, a counter or an uncountable reason"
    assert both == []


def test_an_uncountable_family_says_why_in_the_spec():
    cfg = {"model_type": "hunyuan", "num_hidden_layers": 2, "hidden_size": 1024}
    cfg |= {"num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000}
    spec = spec_from_config(cfg)
    assert spec.params is None
    assert spec.params_error == FAMILIES["hunyuan"].uncountable
    assert "remote code" in spec.params_error


def test_a_family_without_a_count_would_fail_the_check():
    from kvcalc.config.families.understood import Family

    assert not any([Family().params is not None, Family().counter, Family().uncountable])


def test_mistral_without_num_key_value_heads_has_mistral_configs_8():
    """MistralConfig's documented defaults: 32 layers, 32 query heads, 8 KV heads, hidden
    4096, so head_dim 4096 / 32 = 128. Per token: K and V x 32 layers x 8 heads x 128 x 2 B
    (BF16) = 131,072 B. Read as multi-head attention (32 KV heads) it would be 524,288 B."""
    cfg = {
        "model_type": "mistral",
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "vocab_size": 32000,
        "sliding_window": None,
    }
    spec = spec_from_config(cfg)
    assert kv_cache(spec, 1).kv_bytes_per_token_nominal == 2 * 32 * 8 * 128 * 2 == 131_072
    assert any("'num_key_value_heads' is not in the config: took 8" in a for a in spec.assumptions)


def test_a_field_written_as_null_takes_no_class_default():
    """Mistral-7B-v0.2's config writes "sliding_window": null: no window, although the
    class default (for a file that leaves it out) is 4096."""
    base = {
        "model_type": "mistral",
        "num_hidden_layers": 2,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_size": 4096,
    }
    assert {lay.kind for lay in spec_from_config({**base, "sliding_window": None}).layers} == {
        "full"
    }
    windowed = spec_from_config(base).layers
    assert {lay.kind for lay in windowed} == {"sliding"} and windowed[0].window == 4096


def _declared(cls) -> dict:
    out = {}
    for fl in dataclasses.fields(cls):
        if fl.default is not dataclasses.MISSING:
            out[fl.name] = fl.default
        elif fl.default_factory is not dataclasses.MISSING:
            out[fl.name] = fl.default_factory()
    return out


def _transformers_families() -> list[str]:
    try:
        from transformers import CONFIG_MAPPING
    except ImportError:
        return []
    return sorted(t for t in FAMILIES if t in CONFIG_MAPPING)


def _class(model_type: str):
    pytest.importorskip("transformers", reason="transformers is not installed")
    from transformers import CONFIG_MAPPING

    return CONFIG_MAPPING[model_type]


@pytest.mark.parametrize("model_type", _transformers_families() or ["(transformers absent)"])
def test_kvcalc_defaults_are_the_config_class_defaults(model_type):
    cls = _class(model_type)
    declared = _declared(cls)
    built = cls().to_dict()
    for name, value in FAMILIES[model_type].defaults.items():
        if (model_type, name) in NOT_CLASS_FIELDS:
            assert name not in declared, f"{name} is now a field of {cls.__name__}"
            continue
        assert name in declared, f"{cls.__name__} has no field {name}"
        expected = declared[name] if declared[name] is not None else built.get(name)
        assert value == expected, (
            f"{model_type}.{name}: kvcalc {value!r}, {cls.__name__} {expected!r}"
        )


def _reading(cfg: dict):
    try:
        spec = spec_from_config(cfg)
    except ValueError:
        return None  # refused: exact or refused is the rule
    counts = (spec.params.total, spec.active_params) if spec.params else None
    return (
        kv_cache(spec, 1).kv_bytes_per_token_nominal,
        [kv_cache(spec, n).total_bytes for n in (1000, 100_000)],
        tuple(lay.kind for lay in spec.layers),
        spec.max_context,
        counts,
    )


@pytest.mark.parametrize("model_type", _transformers_families() or ["(transformers absent)"])
def test_an_omitted_field_is_read_as_transformers_reads_it(model_type):
    """The class's full config at its defaults, then the same config with one field left out
    (transformers then takes the class default, the same value): kvcalc reads the same, or
    refuses. Fields declared with a None default are derived by the class and skipped."""
    cls = _class(model_type)
    try:
        base = cls().to_dict()
    except Exception:  # noqa: BLE001 - a class transformers cannot build at its defaults
        pytest.skip(f"transformers cannot build {cls.__name__} at its defaults")
    reference = _reading(base)
    if reference is None:
        pytest.skip(f"kvcalc refuses {model_type} at its class defaults")
    wrong = []
    for name, default in _declared(cls).items():
        if default is None or isinstance(default, dict) or name not in base:
            continue
        if (model_type, name) in NOT_DEFAULTED:
            continue
        got = _reading({k: v for k, v in base.items() if k != name})
        if got is None:
            continue
        if got[4] is None:  # a count refused without the field is not a wrong count
            got = (*got[:4], reference[4])
        if got != reference:
            wrong.append(name)
    assert wrong == [], f"{model_type}: read differently when these fields are left out"
