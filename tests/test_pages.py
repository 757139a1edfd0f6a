"""The page registry (webui/pages.py): the one list of pages that app.py's navigation, the
tour's links and the page tests read."""

import pytest
from conftest import ROOT

from kvcalc.teach.tour import STOPS
from webui import pages
from webui.pages import path


def test_the_registry_holds_every_page_once():
    # app.py's navigation, the tour's links and these tests all read webui/pages.py: every
    # script in app_pages/ is registered once, under its file name, in a section app.py shows.
    scripts = sorted(f.stem for f in (ROOT / "app_pages").glob("*.py"))
    assert sorted(p.name for p in pages.PAGES) == scripts
    assert {p.section for p in pages.PAGES} == set(pages.SECTIONS)
    assert [p.name for p in pages.PAGES if p.default] == ["home"]
    assert all((ROOT / p.path).is_file() for p in pages.PAGES)
    with pytest.raises(KeyError, match="no page 'nope'"):
        path("nope")


def test_every_tour_stop_links_a_registered_page():
    assert [s.page for s in STOPS] == [
        "home",
        "cache_fill",
        "budget",
        "step_time",
        "roofline",
        "frontier",
        "techniques",  # stop 7 is FP8: the page that shows it (issue 37, F25)
    ]
    assert {pages.page(s.page).title for s in STOPS} == {s.title for s in STOPS}


def test_the_pages_that_run_their_own_model():
    # The sidebar says its model choices do not apply on these three (issue 23 [38]).
    assert [p.name for p in pages.PAGES if p.own_model] == ["live", "microscope", "kv_quality"]
    assert pages.by_url("live").own_model and not pages.by_url("budget").own_model
    assert pages.by_url("").name == "home"  # the default page's url path


def test_the_pages_that_rerun_whole():
    # Every page's own inputs rerun it alone (its body a fragment: common.page_body), except the
    # live class (its buttons rewrite the link) and the pages that run a model (they wait on the
    # device queue). The wrapper is public Streamlit (st.fragment), called by the page's script.
    def alone(p):
        text = (ROOT / p.path).read_text()
        return "\n@common.page_body\ndef page() -> None:\n" in text and text.endswith("\npage()\n")

    whole = [p.name for p in pages.PAGES if not alone(p)]
    assert whole == ["live_class", "live", "microscope", "kv_quality"]


def test_streamlit_private_names_only_where_no_public_way_exists():
    """Issue 40: the app uses Streamlit through its public API. A private name (one with a leading
    underscore) that our own code never defines belongs to a library; these are the only ones
    the app and webui/ touch, each read through getattr/hasattr so another Streamlit release
    degrades to doing nothing:
    - memtrim: the session manager's store and its lock (Streamlit 1.67 has no public session
      count or TTL reaping; Runtime.close_session must run on the event loop, runtime.py:571);
    - shared: hosted mode's clear-cache guard (no public way to refuse a client's request)."""
    import ast

    files = [ROOT / "app.py", *(ROOT / "app_pages").glob("*.py"), *(ROOT / "webui").rglob("*.py")]
    trees = {f: ast.parse(f.read_text()) for f in files}
    ours = set()
    for tree in trees.values():
        for n in ast.walk(tree):
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
                ours.add(n.name)
            elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
                if getattr(n.value, "id", "") in ("self", "cls"):  # not a library's class
                    ours.add(n.attr)
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                ours.add(n.id)
    foreign = set()
    for f, tree in trees.items():
        for n in ast.walk(tree):
            name = None
            if isinstance(n, ast.Attribute):
                name = n.attr
            elif isinstance(n, ast.Call) and getattr(n.func, "id", "") in ("getattr", "hasattr"):
                arg = n.args[1] if len(n.args) > 1 else None
                name = arg.value if isinstance(arg, ast.Constant) else None
            private = isinstance(name, str) and name[:1] == "_" and name[:2] != "__"
            if private and name not in ours:
                foreign.add((f.relative_to(ROOT).as_posix(), name))
    assert foreign == {
        ("webui/memtrim.py", "_session_mgr"),
        ("webui/memtrim.py", "_session_storage"),
        ("webui/memtrim.py", "_cache"),
        ("webui/memtrim.py", "_storage_lock"),
        ("webui/shared.py", "_handle_clear_cache_request"),
        ("webui/shared.py", "_session_state"),
    }
