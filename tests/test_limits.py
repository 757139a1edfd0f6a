"""One bound on model size, wherever it comes from (issue 22): every size field has a cap far
above every published model (kvcalc.config.limits), refused by name with the cap in the message,
before any per-layer work (the tests spy on the reading; the milliseconds it takes are
bench/refusals.py's figures)."""

import json
import subprocess
import sys

import pytest
from conftest import ROOT, llama_config

from kvcalc import spec_from_config
from kvcalc.config.hfconfig import load_config_file
from kvcalc.config.limits import FIELD_CAPS, MAX_CONTEXT, MAX_HIDDEN, UPFRONT

DATA = ROOT / "tests" / "data" / "configs"


def refused(cfg, *needles, upfront=True):
    """The refusal of ``cfg``, which must name each of ``needles``. Before any per-layer work:
    a size field checked up front (``upfront``) is refused before the layers are read; one
    checked where it is read stops that reading, and nothing after it (the parameters) runs.
    How long a refusal takes is bench/refusals.py's figure, not a bound here."""
    from kvcalc.config import hfconfig

    ran = []
    read, count = hfconfig._read_cache, hfconfig.count_parameters
    hfconfig._read_cache = lambda *a, **k: ran.append("read") or read(*a, **k)
    hfconfig.count_parameters = lambda *a, **k: ran.append("count") or count(*a, **k)
    try:
        with pytest.raises(ValueError) as exc:
            spec_from_config(cfg)
    finally:
        hfconfig._read_cache, hfconfig.count_parameters = read, count
    assert ran == ([] if upfront else ["read"])
    for needle in needles:
        assert needle in str(exc.value), str(exc.value)
    return str(exc.value)


def test_the_message_names_the_field_and_the_cap():
    msg = refused(
        llama_config(hidden_size=10_000_000), "'hidden_size'", "10,000,000", f"{MAX_HIDDEN:,}"
    )
    assert "hidden size" in msg and "20,480" in msg  # what it sizes, and the largest published


@pytest.mark.parametrize("name", sorted(UPFRONT))
def test_every_size_field_is_capped_before_anything_is_read(name):
    cap = FIELD_CAPS[name][0]
    refused(llama_config(**{name: cap + 1}), f"'{name}'", f"{cap + 1:,}", f"over the {cap:,}")


@pytest.mark.parametrize("value", [1e308, 10**4000])
def test_an_absurd_number_is_refused_and_shown_short(value):
    msg = refused(llama_config(vocab_size=value), "'vocab_size'", "16,777,216")
    assert len(msg) < 400


def test_a_size_field_under_an_alias_is_named_as_written():
    cfg = llama_config(hidden_size=..., n_embd=2**21)
    refused(cfg, "'n_embd'", "1,048,576")


@pytest.mark.parametrize(
    "field,extra",
    [
        ("max_position_embeddings", {}),
        ("sliding_window", {}),
        ("attention_chunk_size", {"model_type": "llama4_text"}),
    ],
)
def test_context_fields_are_capped_where_they_are_read(field, extra):
    refused(
        llama_config(**{field: MAX_CONTEXT + 1, **extra}),
        f"'{field}'",
        f"{MAX_CONTEXT:,}",
        upfront=False,
    )


def test_an_unused_context_alias_is_not_refused():
    # A tokenizer's VERY_LARGE_INTEGER saved as model_max_length changes nothing when
    # max_position_embeddings is there; a window that use_sliding_window turns off neither.
    spec = spec_from_config(llama_config(model_max_length=10**30))
    assert spec.max_context == 4096
    cfg = {**load_config_file(DATA / "qwen2.5-vl-7b-instruct.json"), "sliding_window": 10**12}
    assert spec_from_config(cfg).num_layers == 28


def test_nested_size_fields_are_capped():
    kimi = load_config_file(DATA / "kimi-linear-48b-a3b-instruct.json")
    kimi["linear_attn_config"] = {**kimi["linear_attn_config"], "num_heads": 2**20}
    refused(kimi, "'linear_attn_config.num_heads'", "16,384", upfront=False)
    mpt = load_config_file(DATA / "mpt-7b-instruct.json")
    mpt["attn_config"] = {
        **mpt["attn_config"],
        "attn_type": "grouped_query_attention",
        "kv_n_heads": 10**9,
    }
    refused(mpt, "attn_config.kv_n_heads", "16,384", upfront=False)
    gemma = load_config_file(DATA / "gemma-4-26b-a4b.json")
    text = gemma.get("text_config", gemma)
    text["per_layer_config"] = {"5": {"head_dim": 10**9}}
    refused(gemma, "per_layer_config[5].head_dim", "65,536", upfront=False)


def test_mllama_image_fields_are_capped():
    cfg = llama_config(model_type="mllama_text_model", cross_attention_layers=[1])
    cfg = {
        "model_type": "mllama",
        "text_config": cfg,
        "vision_config": {"image_size": 10**9, "patch_size": 14, "max_num_tiles": 4},
    }
    refused(cfg, "vision_config.image_size", "65,536", upfront=False)


def test_every_real_config_is_under_every_cap():
    for path in sorted(DATA.glob("*.json")):
        spec_from_config(load_config_file(path), unverified=True)  # no cap refuses it


# --- the layer cap, in the CLI and in the app ----------------------------------------------------


def _huge_pattern(tmp_path):
    cfg = load_config_file(DATA / "nemotron-h-56b.json")
    cfg["hybrid_override_pattern"] = "M*" * 99_500  # 199,000 layers in a 199 KB paste
    cfg.pop("num_hidden_layers")
    return cfg


def _long_layer_types():
    cfg = load_config_file(DATA / "llama-3.1-8b.json")
    cfg["layer_types"] = ["full_attention"] * 1500
    cfg.pop("num_hidden_layers")
    return cfg


def _layers_read(monkeypatch, field: str) -> list:
    """Spy on the cache reading: the reads of a config that has ``field`` (the pasted one, not
    the registry's models) land in the list returned."""
    from kvcalc.config import hfconfig

    read, real = [], hfconfig._read_cache

    def spy(f, *a, **k):
        if field in f.cfg:
            read.append(field)
        return real(f, *a, **k)

    monkeypatch.setattr(hfconfig, "_read_cache", spy)
    return read


@pytest.mark.parametrize("which", ["pattern", "layer_types"])
@pytest.mark.parametrize("command", ["kv", "budget", "vllm"])
def test_the_cli_refuses_too_many_layers_with_the_cap(tmp_path, which, command, monkeypatch):
    cfg = _huge_pattern(tmp_path) if which == "pattern" else _long_layer_types()
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    args = {
        "kv": ["--context", "4096"],
        "budget": ["--gpu", "h100-sxm-80gb", "--context", "4096"],
        "vllm": ["--available-kv-gib", "40", "--max-model-len", "4096"],
    }[command]
    r = subprocess.run(
        [sys.executable, "-m", "kvcalc", command, "--config", str(path), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert r.returncode != 0
    field = "hybrid_override_pattern" if which == "pattern" else "layer_types"
    assert field in r.stderr and "at most 1,024 layers" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    # The same command in this process: refused before any per-layer work, the layers never
    # read (how long it takes is bench/refusals.py's figure, not a bound here).
    from kvcalc.cli import main

    read = _layers_read(monkeypatch, field)
    assert main([command, "--config", str(path), *args]) == 2
    assert read == []


@pytest.mark.parametrize("which", ["pattern", "layer_types"])
def test_the_app_refuses_too_many_layers_with_the_cap(which, monkeypatch):
    pytest.importorskip("streamlit")
    from conftest import open_page

    cfg = _huge_pattern(None) if which == "pattern" else _long_layer_types()
    at = open_page("app_pages/budget.py")
    at.sidebar.selectbox(key="model").set_value("my-config")
    at.run()
    at.sidebar.text_area(key="cfg_text").set_value(json.dumps(cfg))
    field = "hybrid_override_pattern" if which == "pattern" else "layer_types"
    read = _layers_read(monkeypatch, field)
    at.run()
    assert read == []  # refused before any per-layer work (its time: bench/refusals.py)
    assert not at.exception
    errors = " ".join(e.value.replace("\\", "") for e in at.error)
    assert field in errors and "at most 1,024 layers" in errors, errors


def test_parameters_past_the_cap_are_not_counted_and_the_weights_are_asked_for():
    # Every field at its cap describes about 4.6 x 10^18 parameters (16 EiB of FP32 weights,
    # past the budget's 2^60 B): not a number a figure can hold, so they are not counted and
    # the weights must be given, as for any config whose parameters kvcalc cannot count.
    import worst_inputs as W

    from kvcalc.config.limits import MAX_PARAMS

    spec = spec_from_config(W.dense_at_caps())
    assert spec.params is None and "over the 7.21e+16 kvcalc counts" in spec.params_error
    assert spec.num_layers == 1024  # the cache figures are all there
    ok = spec_from_config(W.dense_fits())
    assert 0 < ok.params.total <= MAX_PARAMS
