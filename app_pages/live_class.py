import streamlit as st

from webui import common
from webui.classroom import get_store, ui

student = "join" in st.query_params and "class" not in st.query_params
common.page_header(
    "Live class",
    None,
    "Answer the question on the teacher's screen: your grade comes at once, the worked solution "
    "when the teacher reveals it."
    if student
    else "Students answer on their phones; your screen, on the projector, shows how many answered, "
    "the share right, every answer and the mistakes the grader names. The questions are the "
    "Interview check's: its five questions, then a practice set.",
)

try:
    store = get_store()
except ValueError as exc:  # a KVLAB_DATABASE_URL this app cannot use: say so, nothing else
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
st.caption(
    f"Answers are kept in this server's database ({kind}); a class and its answers are "
    "deleted 12 hours after it starts, or when its teacher ends it."
)
