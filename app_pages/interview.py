import streamlit as st

from kvcalc.teach.quiz import answer_label, grade, interview_questions, practice_questions
from webui import callbacks, common, pages
from webui.common import bound, number, select
from webui.prose import prose

T = prose("interview")
MODES = ["interview", "practice", "classroom"]


@common.page_body
def page() -> None:
    common.page_header("Interview check", None, T("lead"))

    mode = (
        select(st.segmented_control, "Mode", MODES, "i_mode", str.capitalize, default="interview")
        or "interview"
    )
    seed = (
        number(st, "Practice set (share this number with the class)", 0, 999_999, 1, 1, "i_seed")
        if mode != "interview"
        else 1
    )
    questions = interview_questions()
    practice = practice_questions(int(seed), 10)

    def answer_box(q, key: str) -> None:
        """A number box graded by kvcalc (two when the question asks for two numbers), and the
        worked solution."""
        parts = [1, 2] if q.value2 is not None else [1]
        for part in parts:
            c1, c2 = st.columns([3, 1])
            which = "" if len(parts) == 1 else "per token, " if part == 1 else "per sequence, "
            how = answer_label(q, part)  # the unit first; how a bare number is read in the help
            suffix = "" if part == 1 else f"_{part}"
            given = c1.text_input(
                f"Your answer ({which}{how.split(':')[0]})",
                help=how[0].upper() + how[1:] + ".",
                key=f"ans_{key}{suffix}",
                placeholder="a number, with its unit if it has one",
            )
            c2.button("Check", key=f"chk_{key}{suffix}", width="stretch")  # Enter does the same
            if given:
                g = grade(q, given, part=part)  # the message may quote what was typed: no markup
                (st.success if g.correct else st.warning)(common.plain(g.message))
        if q.solution:
            with st.expander("Worked solution"):
                common.formula(q.solution)

    if mode == "interview":
        for q in questions:
            with st.container(border=True):
                st.markdown(f"**{q.level}** · {q.prompt}")
                if q.value is not None:
                    answer_box(q, q.qid)
                with st.expander("Try first, then reveal the answer"):
                    st.markdown(q.answer)
    elif mode == "practice":
        for q in practice:
            with st.container(border=True):
                st.markdown(f"**{q.qid}** · *{q.level}* · {q.prompt}")
                if q.config:
                    st.code(q.config, language="json")
                answer_box(q, f"{seed}_{q.qid}")
    else:
        deck = questions + practice
        pages.link("live_class", T("run_live_class"))

        c = st.columns([1, 1, 4, 2])
        for where, label, step, icon in (
            (c[0], "Previous", -1, "back"),
            (c[1], "Next", 1, "forward"),
        ):
            where.button(
                label,
                on_click=callbacks.interview_go,
                args=(step, len(deck)),
                icon=f":material/arrow_{icon}:",
                width="stretch",
            )
        st.session_state.setdefault("i_q", 1)  # Previous/Next change these through session state
        st.session_state.setdefault("i_reveal", False)
        at = c[2].number_input(
            "Question", min_value=1, max_value=len(deck), step=1, **bound("i_q", "num")
        )
        reveal = c[3].toggle("Reveal the answer", **bound("i_reveal", "bool"))
        q = deck[at - 1]
        st.markdown(
            f"<p style='font-size:2.1rem;line-height:1.3;margin:1.5rem 0'>{q.prompt}</p>",
            unsafe_allow_html=True,
        )  # our own question text, never user input
        if q.config:
            st.code(q.config, language="json")
        st.caption(T("question_practice_set", at=at, count=len(deck), q=q, seed=seed))
        if reveal:
            st.markdown(
                f"<div style='font-size:1.5rem;line-height:1.45'>\n\n{q.answer}\n\n</div>",
                unsafe_allow_html=True,
            )
            if q.solution:
                common.formula(q.solution)


page()
