import streamlit as st

from webui import common
from webui.classroom import get_store, ui
from webui.prose import prose

T = prose("live_class")

# Who opened the page: the intro speaks to them. A running class's screens (the projector, a
# student's phone once joined) have none, so the question fits the first screen; the projector
# draws its own title (none once students have joined: the join line heads it).
STUDENT_INTRO = T("your_teacher_shows")
teacher = "class" in st.query_params
if teacher or "student" in st.query_params:
    lead = ""
elif "join" in st.query_params:
    lead = STUDENT_INTRO
else:
    lead = T("joining_class_type", intro=STUDENT_INTRO)
if not teacher:
    common.page_header("Live class", None, lead)

try:
    store = get_store()
except ValueError as exc:  # a KVLAB_DATABASE_URL this app cannot use: say so, nothing else
    if teacher:
        st.title("Live class")
    common.stop_on_error(exc)

code = ui.take_param("class")
key = ui.take_param("teacher")
join = ui.take_param("join")
token = ui.take_param("student")
if code:
    ui.teacher_page(code, key)
elif join:
    ui.student_page(join, token)
else:
    ui.landing()
kind = "PostgreSQL" if store.engine.dialect.name == "postgresql" else "SQLite"
st.caption(T("storage", kind=kind))
