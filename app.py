"""KV Cache Lab: the Streamlit entry point.

Shared sidebar controls (model, GPU, parallelism, formats) and the page list; each page is a
short script in app_pages/ that reads inputs, calls kvcalc, and renders its figures.

The folder is deliberately not called pages/: Streamlit still treats a pages/ folder as a legacy
multipage app until some session has run st.navigation, so the first visitor after a restart who
opened a shared link to a page would get that page without this frame (no sidebar, no link checks).
"""

from pathlib import Path

import streamlit as st

import webui
from webui import common, memtrim

webui.warm_up()  # heavy imports once, under a lock, before sessions race to do them
memtrim.start()  # once per process: memory given back to the system when sessions leave
# A local icon: a :material/...: page icon makes the browser fetch it from Google's font CDN.
ICON = str(Path(__file__).parent / "static" / "favicon.png")
st.set_page_config(page_title="KV Cache Lab", page_icon=ICON, layout="wide")

common.url_guard_begin()
url_note = st.empty()  # filled at the end of the run if the link carried values we ignored

pages = {
    "Start": [st.Page("app_pages/home.py", title="Home", icon=":material/home:", default=True),
              st.Page("app_pages/tour.py", title="Start here: a tour", icon=":material/flag:")],
    "Calculators": [
        st.Page("app_pages/budget.py", title="Budget", icon=":material/memory:"),
        st.Page("app_pages/step_time.py", title="Decode step time", icon=":material/speed:"),
        st.Page("app_pages/techniques.py", title="Shrinking the cache",
                icon=":material/compress:"),
        st.Page("app_pages/lab.py", title="Inference Lab", icon=":material/tune:"),
        st.Page("app_pages/roofline.py", title="Roofline", icon=":material/roofing:"),
        st.Page("app_pages/frontier.py", title="Serving frontier", icon=":material/show_chart:"),
        st.Page("app_pages/vllm_startup.py", title="vLLM start-up lines",
                icon=":material/terminal:"),
    ],
    "Teaching": [
        st.Page("app_pages/cache_fill.py", title="Cache fill", icon=":material/grid_on:"),
        st.Page("app_pages/engine.py", title="Engine view: blocks", icon=":material/view_module:"),
        st.Page("app_pages/interview.py", title="Interview check", icon=":material/school:"),
        st.Page("app_pages/live_class.py", title="Live class", icon=":material/co_present:"),
    ],
    "Measure": [
        st.Page("app_pages/live.py", title="Live: a real model", icon=":material/science:"),
        st.Page("app_pages/microscope.py", title="Attention microscope",
                icon=":material/biotech:"),
        st.Page("app_pages/kv_quality.py", title="Measured cost of shrinking",
                icon=":material/query_stats:"),
    ],
}
# Pages that run their own model (SmolLM2 or a twin) or need no model at all: the sidebar says
# that its choices do not apply there (issue 23 [38]).
OWN_MODEL = {"live", "microscope", "kv_quality"}  # their url_path: the file's name
# Pages (by url_path; "" is Home) whose own inputs rerun only the page (a fragment), not the
# frame and the sidebar around it: nothing outside the page depends on them. Not the live class
# (its buttons rewrite the link) nor the pages that run a model (they wait on the device queue).
PAGE_ONLY_RERUNS = {"", "tour", "budget", "step_time", "techniques", "lab", "roofline",
                    "frontier", "vllm_startup", "cache_fill", "engine", "interview"}


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


nav = st.navigation(pages, expanded=True)  # every page listed: no "View more" fold
common.sidebar(uses_selection=nav.url_path not in OWN_MODEL)
try:
    (run_page_only if nav.url_path in PAGE_ONLY_RERUNS else run_page)(nav)
finally:
    common.url_guard_end(url_note)
