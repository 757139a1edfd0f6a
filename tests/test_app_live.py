"""The live page under AppTest, with a twin (no download)."""

import re

import pytest

pytest.importorskip("torch", reason="torch is not installed (requirements.txt)")
from conftest import ROOT  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from webui.pages import path  # noqa: E402

APP = str(ROOT / "app.py")


def text(element) -> str:
    """An element's text as the user reads it (markdown escapes removed)."""
    return re.sub(r"\\(.)", r"\1", element.value)


def open_live(**query):
    at = AppTest.from_file(APP, default_timeout=180)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    at.switch_page(path("live"))
    at.run()
    assert not at.exception
    return at


def test_run_a_twin_and_see_the_match():
    at = open_live(v_model="gemma-2-9b", v_new="8", v_nocache="4", v_batch="2")
    assert "press Run" in at.info[0].value
    at.button[0].click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert "byte for byte" in at.success[0].value
    labels = [m.label for m in at.metric]
    assert "Decode tokens/s" in labels and "Effective bandwidth" in labels
    assert len(at.get("plotly_chart")) == 2
    # Issue 23 [35]: what the twin is. Gemma 2 9B: 42 layers, 8 K/V heads of 256; its twin is
    # one period of its sliding/full pattern, 2 layers. Per token the real model keeps
    # 42 x 8 x 256 x 2 (K, V) x 4 B = 688,128 B in FP32 and 344,064 B in BF16.
    said = " ".join(text(c) for c in at.caption)
    assert "2 layers (one period of Gemma 2 9B's 42-layer pattern) in FP32" in said
    assert "688,128 B per token in FP32, 344,064 B in BF16" in said
    # [36] On a CPU the slope is not a bandwidth: none is shown.
    bw = next(m for m in at.metric if m.label == "Effective bandwidth")
    assert bw.value == "not on a CPU"


def test_missing_hub_model_is_explained(monkeypatch):
    import transformers

    def offline(*a, **k):
        raise OSError("offline")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", offline)
    at = open_live(v_src="Hub model (local cache)")
    at.button[0].click()
    at.run()
    assert not at.exception
    assert "not in the local Hugging Face cache" in text(at.error[0])


def test_hosted_page_states_the_cap_and_never_downloads_hub_weights(monkeypatch):
    import transformers

    monkeypatch.setenv("KVLAB_HOSTED", "1")
    asked = []

    def offline(*a, **k):
        asked.append(k.get("local_files_only"))
        raise OSError("offline")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", offline)
    at = open_live(v_src="Hub model (local cache)")
    captions = " ".join(text(c) for c in at.caption)
    assert "at most 60 s per run here" in captions
    assert "never downloads weights" in captions and "hf download <id>" in captions
    at.button[0].click()
    at.run()
    assert not at.exception
    assert asked == [True]  # local files only: no network call for weights
    message = text(at.error[0])
    assert "not in the local Hugging Face cache" in message and "hf download" in message


def test_a_cleared_cache_does_not_free_a_busy_device(monkeypatch):
    """Issue 11: clearing Streamlit's caches (any client can ask) made a second lock. The page
    now uses the module-level queue: with another session's run on the device, a cache clear
    changes nothing and this run waits in line, then gives up after the wait timeout."""
    import threading

    from streamlit.runtime import caching

    from webui import device_queue

    at = open_live(v_model="llama-3.1-8b", v_new="2", v_nocache="0")
    started, release = threading.Event(), threading.Event()
    other = device_queue.QUEUE.submit(
        "another-session", lambda stop: (started.set(), release.wait(10))
    )
    try:
        assert started.wait(5)
        caching.cache_data.clear()
        caching.cache_resource.clear()
        monkeypatch.setattr(device_queue.QUEUE, "wait_timeout_s", 0.5)
        at.button[0].click()
        at.run()
        assert not at.exception
        assert "busy" in text(at.error[0])
        assert not at.success  # it did not run beside the other session's run
    finally:
        release.set()
        other.wait(5)
