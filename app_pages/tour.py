import streamlit as st

from kvcalc.teach.quiz import answer_label, grade
from kvcalc.teach.tour import STOPS, answer_key, lesson
from webui import callbacks, common, pages
from webui.common import bound, select
from webui.prose import prose

T = prose("tour")


@common.page_body
def page() -> None:
    sel = common.require_selection()
    top = common.page_header("Start here: a guided tour", sel, T("lead"))

    numbers = [s.number for s in STOPS]
    n = select(
        st.radio,
        "Stop",
        numbers,
        "stop",
        callbacks.tour_label,
        horizontal=True,
        captions=[s.title for s in STOPS],
        on_change=callbacks.tour_reset,
    )
    stop = STOPS[numbers.index(n)]
    asked = (st.session_state.get("_url_initial") or {}).get("stop")
    if asked and not st.session_state.get("_tour_moved") and asked != [str(n)]:
        st.warning(
            f"The link asks for stop {common.plain(callbacks.tour_short(asked))}, which this "
            f"tour does not have (stops 1 to {len(STOPS)}): showing stop {n}.",
            icon=":material/link_off:",
        )
    st.progress(n / len(STOPS), text=f"Stop {n} of {len(STOPS)}: {stop.title}")
    setup = dict(bandwidth_gbs=sel.bandwidth_gbs, name=common.plain(sel.spec.name))  # a user's name
    try:
        les = lesson(n, sel.deployment, **setup)
    except ValueError as exc:
        les = None
        common.show_error(exc)

    with top:  # the question first: on a phone it is on the first screen
        st.markdown(f"**Stop {n} of {len(STOPS)}: {stop.title}.** {stop.teaches}")
        if les is not None:
            st.info(les.question.prompt, icon=":material/help:")

    if les is not None:
        q = les.question
        common.table(
            [{"Given": k, "Value": v} for k, v in les.givens], border="horizontal", hide_index=True
        )
        c1, c2 = st.columns([3, 1])
        guess = c1.text_input(
            f"Your prediction ({answer_label(q)})", placeholder="a number", **bound("guess", "str")
        )
        c2.button("Check", key="tour_check", width="stretch")  # Enter in the box does the same
        if guess:
            g = grade(q, guess)  # the message may quote what was typed: no markup
            (st.success if g.correct else st.warning)(common.plain(g.message))
        shown = st.toggle("Reveal the answer", **bound("shown", "bool"))
        if shown:
            st.markdown(q.answer)
            common.formula(q.solution)
            label, value = les.figure
            st.metric(label, value)
            st.markdown(f"**Recap.** {les.recap[0]}  \n{les.recap[1]}")
            st.caption(f"For discussion: {les.discuss}")
    pages.link(stop.page, f"Open the full page: {stop.title}", ":material/open_in_new:")
    for col, label, delta, icon in zip(
        st.columns(2),
        ("Previous stop", "Next stop"),
        (-1, 1),
        ("arrow_back", "arrow_forward"),
        strict=False,
    ):
        col.button(
            label,
            on_click=callbacks.tour_go,
            args=(delta, len(STOPS)),
            disabled=n == (1 if delta < 0 else len(STOPS)),
            icon=f":material/{icon}:",
            width="stretch",
        )
    with st.expander("For teachers", icon=":material/school:"):  # not beside a student's guess
        st.download_button(
            "Answer key for this model and GPU (Markdown)",
            data=answer_key(sel.deployment, **setup),
            file_name="kv-cache-lab-tour-answer-key.md",
            mime="text/markdown",
            on_click="ignore",
            icon=":material/download:",
            key="tour_key",
            help=T("all_stops"),
        )


page()
