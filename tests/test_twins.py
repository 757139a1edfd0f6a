"""Twin configs, the transformers view and the step-time fit: pure Python, no torch needed."""

import sys
from pathlib import Path

import pytest

from kvcalc import get_model, kv_cache, load_registry, registry, spec_from_config
from kvcalc.measure.twins import TWIN_KEYS, fit_line, twin_config


def test_twins_build_without_torch():
    # The module is torch-free (checked in a fresh interpreter: other tests may have loaded
    # torch in this one), so these tests run on a machine with the core alone.
    import subprocess

    code = (
        "import sys, kvcalc.measure.twins\n"
        "print(','.join(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "", r.stdout + r.stderr


def test_twin_keeps_the_real_per_layer_geometry():
    for key in ("llama-3.1-8b", "gemma-2-9b", "deepseek-v3", "falcon-7b", "gpt-oss-20b"):
        real = kv_cache(get_model(key).spec, 1).rows
        twin = kv_cache(spec_from_config(twin_config(key)), 1).rows
        per_layer = {(r.kind, r.bytes_per_token_per_layer) for r in real}
        assert {(r.kind, r.bytes_per_token_per_layer) for r in twin} <= per_layer, key


def test_every_twin_is_small_and_every_listed_key_is_a_model():
    assert len(TWIN_KEYS) == 15 and set(TWIN_KEYS) <= set(registry().models)
    for key in TWIN_KEYS:
        cfg = twin_config(key)
        assert cfg.get("vocab_size", 512) <= 512 or cfg.get("model_type") == "gpt2"


def test_fit_line():
    assert fit_line([(0, 1.0), (10, 3.0), (20, 5.0)]) == pytest.approx((1.0, 0.2))
    assert fit_line([]) == (0.0, 0.0)
    # One step slowed by something else on the machine does not tilt the line.
    pts = [(x, 1.0 + 0.1 * x) for x in range(20)]
    pts[7] = (7, 50.0)
    assert fit_line(pts) == pytest.approx((1.0, 0.1))


def test_catalog_lists_are_checked():
    r = registry()
    assert "openai-community/gpt2" in r.hub_run and set(r.hub_run) <= set(r.hub_fetch)
    base = Path(r.path).read_text()
    with pytest.raises(ValueError, match="twins names models that are not in the registry: nope"):
        load_registry(text=base.replace("twins: [llama-3.1-8b,", "twins: [nope,"))
    with pytest.raises(ValueError, match="hub.fetch must be a list of names"):
        load_registry(text=base.replace("  fetch: [HuggingFaceTB", "  fetch: 7\n  x: [a"))
