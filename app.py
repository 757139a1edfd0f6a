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
url_note = st.empty()  # filled at the end of the run if the link carried values we ignored

# The pages by section, from the one registry (webui/pages.py); every page listed: no "View
# more" fold.
nav = st.navigation(pages.navigation(), expanded=True)
common.sidebar(uses_selection=not pages.own_model(nav.url_path))
try:
    nav.run()
except common.PageStop:
    pass  # the page said what it needed and ended early
except ValueError as exc:
    # kvcalc refuses what it cannot compute with a ValueError that says what to change (a TP
    # that does not fit the heads, page sizes vLLM cannot unify, a context past a cap): the
    # page shows that sentence, never a generic error box or a traceback.
    common.show_error(f"This page cannot show this setup: {exc}")
finally:
    common.url_guard_end(url_note)
