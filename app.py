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


# The st.Page objects of the registry (webui/pages.py), made once per session: st.Page resolves
# its file on the disk (16 paths, a few system calls each, on every full run otherwise). One
# session's runs come one at a time: st.navigation marks the page to run and its run unmarks it.
if "_pages" not in st.session_state:
    st.session_state["_pages"] = pages.navigation()
# The two paths (Learn, Engineer) and Measure, from the one registry, in the header: the
# sidebar then opens with the model and the GPU (on a phone Streamlit moves the menu into the
# sidebar's drawer).
nav = st.navigation(st.session_state["_pages"], position="top")
here = pages.by_url(nav.url_path)
if here.name == "live_class":  # the projector's page uses no model: its sidebar starts closed
    st.set_page_config(initial_sidebar_state="collapsed")
common.sidebar(uses_selection=not here.own_model, engine_controls=here.section == pages.ENGINEER)
try:
    # A page whose own inputs rerun it alone wraps its body in common.page_body (a fragment).
    common.guarded(nav.run)
finally:
    common.url_guard_end(url_note)
# The Learn path is the chapter, read in order: each of its pages ends with the next one.
after = pages.next_page(here.name) if here.section == pages.LEARN else None
if after is not None:
    st.page_link(after.path, label=f"Next: {after.title}", icon=":material/arrow_forward:")
