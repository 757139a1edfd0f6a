"""The live page under AppTest, with a twin (no download)."""

import re

import pytest

pytest.importorskip("torch", reason="torch is not installed (requirements.txt)")
from streamlit.testing.v1 import AppTest  # noqa: E402

from conftest import ROOT  # noqa: E402

APP = str(ROOT / "app.py")


def text(element) -> str:
    """An element's text as the user reads it (markdown escapes removed)."""
    return re.sub(r"\\(.)", r"\1", element.value)


def open_live(**query):
    at = AppTest.from_file(APP, default_timeout=180)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    at.switch_page("app_pages/live.py")
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
