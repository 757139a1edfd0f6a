"""Hostile input end to end: every URL parameter of every page set to garbage, out-of-range or
markup values; the page renders, names what it ignored, and renders none of it as markup."""

import pytest

pytest.importorskip("streamlit")
from conftest import ROOT, open_page  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

APP = str(ROOT / "app.py")
PAGES = [
    "app_pages/home.py",
    "app_pages/budget.py",
    "app_pages/step_time.py",
    "app_pages/techniques.py",
    "app_pages/lab.py",
    "app_pages/cache_fill.py",
    "app_pages/engine.py",
    "app_pages/interview.py",
    "app_pages/live.py",
    "app_pages/vllm_startup.py",
    "app_pages/roofline.py",
    "app_pages/frontier.py",
    "app_pages/tour.py",
    "app_pages/disagg.py",
]
GARBAGE = [
    "abc",
    "-1",
    "1e999",
    "nan",
    "<script>alert(1)</script>",
    "9" * 40,
    "[x](javascript:alert(1))",
    "%00",
    "",
]


def bound_keys(page: str) -> list[str]:
    """The URL parameters that ``page`` (and the shared sidebar) bind."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page(page)
    at.run()
    keys = sorted(at.session_state["_url_bound"])  # declared by this run: sidebar + page
    assert "model" in keys and len(keys) > 5
    return keys


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("garbage", GARBAGE[:5])
def test_every_parameter_garbage(page, garbage):
    keys = bound_keys(page)
    at = AppTest.from_file(APP, default_timeout=60)
    for k in keys:
        at.query_params[k] = garbage
    at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    notes = " ".join(w.value for w in at.warning)
    if garbage:
        assert "Ignored in the link" in notes
    assert "<script>" not in notes and "](javascript" not in notes


@pytest.mark.parametrize("garbage", GARBAGE[5:])
def test_more_garbage_on_the_budget_page(garbage):
    at = AppTest.from_file(APP, default_timeout=60)
    for k in (
        "b_ctx",
        "b_conc",
        "b_util",
        "b_reserve",
        "b_block",
        "b_engine",
        "b_cmp",
        "model",
        "gpu",
        "tp",
        "kvdtype",
    ):
        at.query_params[k] = garbage
    at.run()
    at.switch_page("app_pages/budget.py")
    at.run()
    assert not at.exception


@pytest.mark.parametrize("query", [dict(model="gpt2", tp="8"), dict(model="smollm2-135m", tp="2")])
def test_home_explains_a_tp_the_model_cannot_split(query):
    # gpt2 has 12 KV heads and SmolLM2 3: TP 8 and TP 2 divide neither. Home used to end in
    # Streamlit's generic error box; now it says what to change, like every other page.
    at = open_page("app_pages/home.py", **query)
    assert not at.exception
    assert any("tensor parallel size" in e.value for e in at.error)


def test_link_parameter_names_are_inert():
    at = open_page(
        "app_pages/home.py",
        **{
            "[Click here to log in again](https://evil.example/login)": "1",
            "![p](http://pixel.example/p.png)": "1",
        },
    )
    notes = " ".join(w.value for w in at.warning)
    assert "Ignored in the link" in notes
    assert "](" not in notes.replace("\\](", "") and "https://" not in notes
    assert "![" not in notes.replace("\\!\\[", "")


def test_plain_breaks_markup_autolinks_and_length():
    from webui.hosted import plain

    assert plain("[a](https://x.example)") == "\\[a\\]\\(https:\u200b//x.example\\)"
    assert "www\u200b.evil" in plain("www.evil.com") and "@\u200bx" in plain("me@x.org")
    assert len(plain("9" * 190_000)) <= 1000


def test_nested_layer_types_are_a_clear_message():
    import json

    from conftest import llama_config

    at = open_page("app_pages/home.py")
    at.sidebar.selectbox(key="model").set_value("my-config")
    at.run()
    at.sidebar.text_area(key="cfg_text").set_value(
        json.dumps(llama_config(layer_types=[["x"], ["y"], ["z"], ["w"]]))
    )
    at.run()
    assert not at.exception
    import re

    assert any("layer_types[0]" in re.sub(r"\\(.)", r"\1", e.value) for e in at.error)


def test_cache_fill_at_its_maximums_ships_a_bounded_animation():
    import json

    at = open_page(
        "app_pages/cache_fill.py", f_prompt="1", f_new="159", f_layers="16", f_mode="No cache"
    )
    assert not at.exception
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert len(json.dumps(spec)) < 400_000  # was about 2 MB: 160 frames of 32 x 160 cells
    assert any("Showing every" in c.value for c in at.caption)


def test_too_many_layers_or_list_entries_are_refused():
    from conftest import llama_config

    from kvcalc import spec_from_config

    with pytest.raises(ValueError, match="num_hidden_layers"):
        spec_from_config(llama_config(num_hidden_layers=5000))
    big = llama_config(
        num_hidden_layers=8,
        num_experts=4,
        num_experts_per_tok=2,
        decoder_sparse_step=1,
        mlp_only_layers=list(range(99_000)),
    )
    # One bound on model size, whichever field carries the layers (issue 22): a per-layer list
    # of 99,000 entries is refused before any per-layer work, naming the field and the cap.
    with pytest.raises(ValueError, match="mlp_only_layers.*at most 1,024 layers"):
        spec_from_config(big)
