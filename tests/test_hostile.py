"""Hostile input end to end: every URL parameter of every page set to garbage, out-of-range or
markup values; the page renders, names what it ignored, and renders none of it as markup."""

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from conftest import ROOT  # noqa: E402

APP = str(ROOT / "app.py")
PAGES = ["app_pages/home.py", "app_pages/budget.py", "app_pages/step_time.py",
         "app_pages/techniques.py", "app_pages/lab.py", "app_pages/cache_fill.py",
         "app_pages/engine.py", "app_pages/interview.py", "app_pages/live.py",
         "app_pages/vllm_startup.py"]
GARBAGE = ["abc", "-1", "1e999", "nan", "<script>alert(1)</script>", "9" * 40,
           "[x](javascript:alert(1))", "%00", ""]


def bound_keys(page: str) -> list[str]:
    """The URL parameters that ``page`` (and the shared sidebar) bind."""
    from webui import common

    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page(page)
    at.run()
    return sorted(common._BOUND)


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
    for k in ("b_ctx", "b_conc", "b_util", "b_reserve", "b_block", "b_engine", "b_cmp", "model",
              "gpu", "tp", "kvdtype"):
        at.query_params[k] = garbage
    at.run()
    at.switch_page("app_pages/budget.py")
    at.run()
    assert not at.exception
