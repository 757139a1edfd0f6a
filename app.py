"""KV Cache Lab: the Streamlit entry point.

Shared sidebar controls (model, GPU, parallelism, formats) and the navigation over the page
registry (webui/pages.py); each page is a short script in app_pages/ that reads inputs, calls
kvcalc, and renders its figures.

The folder is deliberately not called pages/: Streamlit still treats a pages/ folder as a legacy
multipage app until some session has run st.navigation, so the first visitor after a restart who
opened a shared link to a page would get that page without this frame (no sidebar, no link checks).
"""

from pathlib import Path

import streamlit as st

import webui
from webui import common, memtrim, pages

webui.warm_up()  # heavy imports once, under a lock, before sessions race to do them
memtrim.start()  # once per process: memory given back to the system when sessions leave
# A local icon: a :material/...: page icon makes the browser fetch it from Google's font CDN.
ICON = str(Path(__file__).parent / "static" / "favicon.png")
st.set_page_config(page_title="KV Cache Lab", page_icon=ICON, layout="wide")

common.url_guard_begin()
common.upgrade_link()  # old links' registry keys become the names the sidebar shows
url_note = st.empty()  # filled at the end of the run if the link carried values we ignored


def page_list() -> dict:
    """The st.Page objects of the registry (webui/pages.py), made once per session: st.Page
    resolves its file on the disk (16 paths, a few system calls each, on every full run
    otherwise). One session's runs come one at a time: st.navigation marks the page to run and
    its run unmarks it."""
    made = st.session_state.get("_pages")
    if made is None:
        made = st.session_state["_pages"] = pages.navigation()
    return made


# Pages (by url_path; "" is Home) whose own inputs rerun only the page (a fragment), not the
# frame and the sidebar around it: nothing outside the page depends on them. Not the live class
# (its buttons rewrite the link) nor the pages that run a model (they wait on the device queue).
PAGE_ONLY_RERUNS = {
    "",
    "tour",
    "budget",
    "step_time",
    "techniques",
    "lab",
    "roofline",
    "frontier",
    "vllm_startup",
    "cache_fill",
    "engine",
    "interview",
}


def run_page(page) -> None:
    try:
        page.run()
    except common.PageStop:
        pass  # the page said what it needed and ended early
    except ValueError as exc:
        # kvcalc refuses what it cannot compute with a ValueError that says what to change (a
        # TP that does not fit the heads, page sizes vLLM cannot unify, a context past a cap):
        # the page shows that sentence, never a generic error box or a traceback.
        common.show_error(f"This page cannot show this setup: {exc}")


@st.fragment
def run_page_only(page) -> None:
    """The page as a fragment: a change of one of its own inputs reruns this function alone
    (about a third of a full run's server time: no frame, no sidebar, no page list). The
    sidebar's inputs are outside it, so changing one reruns everything as before."""
    # st.Page.run may be called once per full run; a fragment rerun runs the same page again.
    page._can_be_called = True
    run_page(page)


# The two paths (Learn, Engineer) and Measure, from the one registry, in the header: the
# sidebar then opens with the model and the GPU (on a phone Streamlit moves the menu into the
# sidebar's drawer).
nav = st.navigation(page_list(), position="top")
if nav.url_path == "live_class":  # the projector's page uses no model: its sidebar starts closed
    st.set_page_config(initial_sidebar_state="collapsed")
common.sidebar(
    uses_selection=not pages.own_model(nav.url_path),
    engine_controls=pages.section_of(nav.url_path) == pages.ENGINEER,
)
try:
    (run_page_only if nav.url_path in PAGE_ONLY_RERUNS else run_page)(nav)
finally:
    common.url_guard_end(url_note)
# The Learn path is the chapter, read in order: each of its pages ends with the next one.
here = pages.page(nav.url_path or "home") if pages.on_learn_path(nav.url_path) else None
after = pages.next_page(here.name) if here is not None else None
if after is not None:
    st.page_link(after.path, label=f"Next: {after.title}", icon=":material/arrow_forward:")
