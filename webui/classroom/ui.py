"""The live class's screens: the teacher's (the projector) and each student's (a phone).

Every action goes through webui.classroom.store, which checks the teacher key or the student
token itself; nothing here decides who may do what. Callbacks live in this module, not in the
page script (see webui/callbacks.py on why). Text a student sent (an answer, a nickname) is
never rendered as markup: answers go through ``plain``; nicknames are not shown at all, except
to the student who chose one and in an export that asks for them.

The link's parameters:
  join=CODE               a student's join link (what the QR code holds)
  student=TOKEN           set after joining: the student's place, so a reload or a reconnect
                          to another replica keeps it (it opens only that student's answers)
  class=CODE&teacher=KEY  the teacher link; the key is taken into the session and removed
                          from the address bar at once, so a projected address bar shows only
                          the class code
"""

from __future__ import annotations

import html
import os
import re
from urllib.parse import urlsplit

import streamlit as st

from kvcalc.teach.quiz_choices import LETTERS, Choice, choices_for

from ..figures import answers_figure
from ..hosted import plain
from ..urlstate import declare
from ..visitor import visitor_id
from .deck import MAX_SEED, answer_label, deck, is_choice, parts, value_label
from .qr import qr_png
from .store import NotAllowed, Refused, Unavailable, get_store

TEACHER_POLL_S = 1.5  # the projector's figures refresh this often
STUDENT_POLL_S = 3.0  # a phone checks this often whether the teacher moved or revealed
PAGE = "live_class"  # the page's url path (app.py: the file's name)

_MSG = "lc_msg"
_TEACHER = "lc_teacher"
_STUDENT = "lc_student"


# -- the link -----------------------------------------------------------------------------


def take_param(name: str) -> str | None:
    """A link parameter this page reads (declared, so the link check does not report it)."""
    value = st.query_params.get(name)
    if value is None:
        return None
    value = str(value)[:200]
    declare(name, "str")
    st.session_state[name] = value  # what the link check compares the link's value with
    return value


def base_url() -> str:
    """Where phones reach this app: KVLAB_PUBLIC_URL, else the address the teacher's browser
    used (scheme, host and the app's path prefix; no query)."""
    env = os.environ.get("KVLAB_PUBLIC_URL", "").strip().rstrip("/")
    if env:
        return env
    try:
        url = st.context.url or ""
    except Exception:  # noqa: BLE001 - no browser context (tests)
        url = ""
    u = urlsplit(url)
    if u.scheme in ("http", "https") and re.fullmatch(r"[A-Za-z0-9.\-\[\]:]{1,120}", u.netloc):
        # The app's own prefix (server.baseUrlPath, e.g. /gpu), without this page's name.
        prefix = u.path.rstrip("/")
        if prefix.endswith("/" + PAGE):
            prefix = prefix[: -len(PAGE) - 1]
        if not re.fullmatch(r"(/[A-Za-z0-9._-]{1,40}){0,3}", prefix):
            prefix = ""
        return f"{u.scheme}://{u.netloc}{prefix}"
    return "http://localhost:8501"


def join_link(code: str) -> str:
    return f"{base_url()}/{PAGE}?join={code}"


def teacher_link(code: str, key: str) -> str:
    return f"{base_url()}/{PAGE}?class={code}&teacher={key}"


def _say(kind: str, text: str) -> None:
    st.session_state[_MSG] = (kind, text)


def show_message() -> None:
    msg = st.session_state.pop(_MSG, None)
    if msg:
        kind, text = msg
        {"error": st.error, "warning": st.warning, "success": st.success}.get(kind, st.info)(
            plain(text)
        )


def _guarded(fn, *args):
    """Run a store call from a callback: a refusal or an outage becomes the page's message."""
    try:
        return fn(*args)
    except (Unavailable, Refused, NotAllowed) as e:
        _say("error", str(e))
    return None


# -- starting and joining -------------------------------------------------------------------


def start_class() -> None:
    seed = int(st.session_state.get("lc_seed", 1) or 0)
    new = _guarded(get_store().create_class, seed, visitor_id())
    if new is None:
        return
    st.session_state[_TEACHER] = {"code": new.code, "key": new.key}
    st.session_state["lc_new"] = True  # show the teacher link open, once
    st.query_params.clear()
    st.query_params["class"] = new.code


def join_class(code: str | None = None) -> None:
    code = code or st.session_state.get("lc_code", "")
    nick = st.session_state.get("lc_nick", "")
    token = _guarded(get_store().join, code, nick, visitor_id())
    if token is None:
        return
    from .store import clean_code

    code = clean_code(code)
    st.session_state[_STUDENT] = {"token": token, "code": code}
    st.session_state["lc_sv"] = None
    st.query_params.clear()
    st.query_params["join"] = code
    st.query_params["student"] = token


def landing() -> None:
    """No class in the link: start one (teacher) or type a code (student)."""
    show_message()
    left, right = st.columns(2, gap="large")
    with left.container(border=True):
        st.subheader("Join a class")
        st.text_input(
            "Join code (on the teacher's screen)",
            key="lc_code",
            max_chars=12,
            placeholder="e.g. AB3K7M",
        )
        st.text_input("Nickname (optional; the class never sees it)", key="lc_nick", max_chars=24)
        st.button("Join", on_click=join_class, type="primary", key="lc_join_btn")
    with right.container(border=True):
        st.subheader("Run a class")
        st.markdown(
            "The five interview questions, then a practice set of ten, one at a time on "
            "every student's phone. Your screen (the projector) shows how many answered, "
            "the share right, every answer and the mistakes named."
        )
        st.number_input(
            "Practice set (the same number gives the same questions)",
            0,
            MAX_SEED,
            1,
            1,
            key="lc_seed",
        )
        st.button(
            "Start a live class", on_click=start_class, key="lc_start", icon=":material/co_present:"
        )


# -- the student's screen -----------------------------------------------------------------


def student_page(code: str, token: str | None) -> None:
    """A student's phone: join with the code, then follow the teacher."""
    store = get_store()
    show_message()
    if not token:
        try:
            view = store.class_view(code)
        except (Refused, Unavailable) as e:
            st.error(plain(str(e)))
            return
        st.subheader(f"Class {view.code}")
        st.caption(f"Question {view.position + 1} of {view.count} is on the teacher's screen.")
        st.text_input("Nickname (optional; the class never sees it)", key="lc_nick", max_chars=24)
        st.button(
            "Join the class", on_click=join_class, args=(code,), type="primary", key="lc_join_btn"
        )
        return
    st.session_state[_STUDENT] = {"token": token, "code": code}
    student_panel(code, token)


@st.fragment(run_every=STUDENT_POLL_S)
def student_panel(code: str, token: str) -> None:
    store = get_store()
    try:
        view = store.class_view(code)
        sv = st.session_state.get("lc_sv")
        if not sv or sv.get("version") != view.version or sv.get("token") != token:
            view, mine = store.student_view(token)
            sv = {"version": view.version, "token": token, "mine": mine}
            st.session_state["lc_sv"] = sv
    except NotAllowed as e:
        st.error(plain(str(e)))
        st.query_params.pop("student", None)
        return
    except (Refused, Unavailable) as e:
        st.error(plain(str(e)))
        return
    qi = view.position
    q = deck(view.seed)[qi]
    st.caption(f"Class {view.code} · question {qi + 1} of {view.count} · {q.level}")
    st.markdown(f"#### {q.prompt}")  # our own question text
    if q.config:
        st.code(q.config, language="json")
    mine = sv["mine"]
    if view.revealed:
        _student_result(q, qi, mine, revealed=True)
        st.markdown(q.answer)
        if q.solution:
            st.code(q.solution, language=None)
        return
    with st.form(key=f"lc_form_{view.code}_{qi}", border=True):
        given = {}
        for p in parts(q):
            if is_choice(q):
                opts = choices_for(q.qid)

                def lettered(letter: str, o: tuple[Choice, ...] = opts) -> str:
                    return f"{letter}. {o[LETTERS.index(letter)].text}"

                pick = st.radio(
                    answer_label(q, p),
                    list(LETTERS[: len(opts)]),
                    index=None,
                    format_func=lettered,
                    key=f"lc_a_{view.code}_{qi}_{p}",
                )
                given[p] = pick or ""
            else:
                given[p] = st.text_input(
                    answer_label(q, p),
                    key=f"lc_a_{view.code}_{qi}_{p}",
                    max_chars=40,
                    placeholder="a number, with its unit if it has one",
                )
        sent = st.form_submit_button("Send my answer", type="primary")
    if sent:
        for p, text in given.items():
            if not text:
                continue
            try:
                graded, stored = store.answer(token, qi, p, text)
            except (Refused, Unavailable, NotAllowed) as e:
                st.error(plain(str(e)))
                continue
            if stored:
                mine[(qi, p)] = {
                    "text": text.strip().upper() if is_choice(q) else text.strip(),
                    "correct": graded.correct,
                    "slip": graded.slip,
                    "attempts": 1,
                }
            else:
                st.warning(plain(graded.message))
    _student_result(q, qi, mine, revealed=False)


def _student_result(q, qi: int, mine: dict, revealed: bool) -> None:
    """The student's own answers to this question, graded: before Reveal right or not and the
    named slip; after it, the grader's whole message (with the right answer)."""
    from .deck import grade_answer

    for p in parts(q):
        a = mine.get((qi, p))
        which = "" if len(parts(q)) == 1 else (" (per token)" if p == 1 else " (per sequence)")
        if a is None:
            st.caption(f"No answer stored{which}." + (" Answers are closed." if revealed else ""))
            continue
        g = grade_answer(q, p, a["text"])
        text = g.message if revealed else g.short
        (st.success if g.correct else st.warning)(
            f"Your answer{which}: {plain(a['text'], 60)} · {plain(text)}"
        )


# -- the teacher's screen -----------------------------------------------------------------


def teacher_page(code: str, key: str | None) -> None:
    """The projector: code and QR, the question, live figures, Previous/Next/Reveal, export."""
    store = get_store()
    t = st.session_state.get(_TEACHER)
    if key:  # the key arrived in the link: keep it in the session, out of the address bar
        try:
            store.check_teacher(code, key)
        except (NotAllowed, Refused, Unavailable) as e:
            st.error(plain(str(e)))
            return
        t = {"code": code, "key": key}
        st.session_state[_TEACHER] = t
        st.query_params.pop("teacher", None)
    if not t or t.get("code") != code:
        st.error(
            "This screen runs a class only with its teacher link (the one shown when the "
            "class started). Students join with the join code instead."
        )
        st.page_link(f"app_pages/{PAGE}.py", label="Join or start a class")
        return
    key = t["key"]
    try:
        view = store.check_teacher(code, key)
    except (NotAllowed, Refused, Unavailable) as e:
        st.error(plain(str(e)))
        return
    show_message()
    link = join_link(view.code)
    top = st.columns([2, 1])
    with top[0]:
        st.markdown(
            f"<p style='font-size:1.3rem;margin:0'>Join at <b>{html.escape(base_url())}/"
            f"{PAGE}</b> with the code</p><p style='font-size:4rem;font-weight:700;"
            f"letter-spacing:0.4rem;margin:0'>{view.code}</p>",
            unsafe_allow_html=True,
        )  # our own code and address, no user text
        st.code(link, language=None)
        host = urlsplit(link).hostname or ""
        if host in ("localhost", "127.0.0.1", "::1"):
            st.caption(
                "Phones cannot open localhost: run the app with --server.address "
                "0.0.0.0 and open this page by this machine's address, or set "
                "KVLAB_PUBLIC_URL to the address students reach."
            )
        with st.expander(
            "Your teacher link: keep it private (it runs this class)",
            expanded=bool(st.session_state.pop("lc_new", False)),
        ):
            st.code(teacher_link(view.code, key), language=None)
            st.caption(
                "Open it again to come back to this screen (another tab, another "
                "device, after a reload). It is never in the students' link, and it "
                "is not in this page's address bar. The class ends by itself 12 hours "
                "after it started."
            )
    top[1].image(qr_png(link), caption="Scan to join", width=260)

    deck_size = view.count
    c = st.columns([1, 1, 1, 2])
    c[0].button(
        "Previous",
        on_click=teacher_move,
        args=(-1,),
        icon=":material/arrow_back:",
        width="stretch",
        disabled=view.position == 0,
        key="lc_prev",
    )
    c[1].button(
        "Next",
        on_click=teacher_move,
        args=(1,),
        icon=":material/arrow_forward:",
        width="stretch",
        disabled=view.position >= deck_size - 1,
        key="lc_next",
    )
    c[2].button(
        "Hide the answer" if view.revealed else "Reveal",
        on_click=teacher_reveal,
        args=(not view.revealed,),
        icon=":material/visibility:",
        width="stretch",
        type="secondary" if view.revealed else "primary",
        key="lc_reveal",
    )
    c[3].toggle(
        "Hold the share right and the mistakes until Reveal",
        key="lc_hold",
        help="For a projector: the named mistakes and the share right hint at the "
        "answer while students still answer.",
    )
    teacher_panel(code)
    with st.expander("After class: results and ending the class"):
        names = st.checkbox(
            "Include the nicknames students chose to give (default: "
            "anonymous, students numbered in the order they joined)",
            key="lc_names",
        )
        d = st.columns(2)
        d[0].download_button(
            "Results as CSV",
            data=_Export(code, key, names, "csv"),
            file_name=f"live-class-{code}.csv",
            mime="text/csv",
            on_click="ignore",
            key="lc_csv",
            icon=":material/download:",
        )
        d[1].download_button(
            "Results as JSON",
            data=_Export(code, key, names, "json"),
            file_name=f"live-class-{code}.json",
            mime="application/json",
            on_click="ignore",
            key="lc_json",
            icon=":material/download:",
        )
        st.checkbox("I have what I need: delete this class and its answers", key="lc_sure")
        st.button(
            "End the class now",
            on_click=teacher_end,
            disabled=not st.session_state.get("lc_sure"),
            key="lc_end",
        )


class _Export:
    """The export, made when the button is pressed (Streamlit calls it; the key is checked by
    the store then, like every other teacher action)."""

    def __init__(self, code: str, key: str, names: bool, kind: str):
        self.args, self.kind = (code, key, bool(names)), kind

    def __call__(self) -> bytes:
        store = get_store()
        try:
            fn = store.export_csv if self.kind == "csv" else store.export_json
            return fn(*self.args).encode()
        except (Unavailable, Refused, NotAllowed) as e:
            return f"The results could not be exported: {e}\n".encode()


def _teacher() -> tuple[str, str] | None:
    t = st.session_state.get(_TEACHER)
    return (t["code"], t["key"]) if t else None


def teacher_move(delta: int) -> None:
    t = _teacher()
    if t is None:
        return
    store = get_store()
    view = _guarded(store.check_teacher, *t)
    if view is not None:
        _guarded(store.move, *t, view.position + delta)


def teacher_reveal(on: bool) -> None:
    t = _teacher()
    if t is not None:
        _guarded(get_store().reveal, *t, on)


def teacher_end() -> None:
    t = _teacher()
    if t is None:
        return
    if _guarded(get_store().end, *t) is None and _MSG not in st.session_state:
        st.session_state.pop(_TEACHER, None)
        st.query_params.clear()
        _say("success", f"Class {t[0]} ended: its students and answers are deleted.")


def _part_results(q, pr, parts: int, *, revealed: bool, hold: bool) -> None:
    """One part's answers on the teacher's screen: their histogram and the named mistakes."""
    head = "" if parts == 1 else ("Per token: " if pr.part == 1 else "Per sequence: ")
    cols = st.columns([3, 2])
    bars = pr.bars
    if is_choice(q):
        have = {b[0]: b for b in bars}
        opts = choices_for(q.qid)
        bars = [have.get(L, (L, 0, opts[i].correct)) for i, L in enumerate(LETTERS[: len(opts)])]
    fig = answers_figure(bars, head, revealed)
    cols[0].plotly_chart(fig, key=f"lc_hist_{pr.part}", config={"displayModeBar": False})
    with cols[1]:
        st.markdown(f"**{head}named mistakes**")
        if hold:
            st.caption("Held until Reveal.")
        elif not pr.slips:
            st.caption("None named so far.")
        for slip, n in [] if hold else pr.slips[:6]:
            st.markdown(f"- **{n}** · {plain(slip)}")


@st.fragment(run_every=TEACHER_POLL_S)
def teacher_panel(code: str) -> None:
    t = _teacher()
    if t is None:
        return
    try:
        r = get_store().results(*t)
    except (NotAllowed, Refused, Unavailable) as e:
        st.error(plain(str(e)))
        return
    q = deck(r.view.seed)[r.question]
    st.markdown(
        f"<p style='font-size:2rem;line-height:1.3;margin:1rem 0'>{html.escape(q.prompt)}</p>",
        unsafe_allow_html=True,
    )  # our own question text, escaped all the same
    if q.config:
        st.code(q.config, language="json")
    if is_choice(q):
        for L, opt in zip(LETTERS, choices_for(q.qid)):
            mark = " ✓" if r.view.revealed and opt.correct else ""
            st.markdown(f"**{L}.** {opt.text}{mark}")
    st.caption(
        f"Question {r.question + 1} of {r.view.count} · {q.level} · practice set "
        f"{r.view.seed} · the figures refresh every {TEACHER_POLL_S:g} s"
    )
    # On a projector the share right and the named mistakes point at the answer: a teacher may
    # hold them back until Reveal.
    hold = bool(st.session_state.get("lc_hold")) and not r.view.revealed
    total = max(1, r.joined)
    m = st.columns(4)
    m[0].metric("Joined", f"{r.joined}")
    m[1].metric("Answered", f"{r.answered}", help="students who answered every part")
    for i, pr in enumerate(r.parts[:2]):
        share = f"{pr.correct / pr.answered:.0%}" if pr.answered and not hold else "-"
        label = (
            "Right"
            if len(r.parts) == 1
            else ("Right (per token)" if pr.part == 1 else "Right (per sequence)")
        )
        m[2 + i].metric(
            label,
            share,
            help=f"{pr.correct} of {pr.answered} answers; "
            f"{pr.first_correct} right at their first answer",
        )
    st.progress(min(1.0, r.answered / total), text=f"{r.answered} of {r.joined} answered")
    for pr in r.parts:
        if pr.answered:
            _part_results(q, pr, len(r.parts), revealed=r.view.revealed, hold=hold)
    if r.view.revealed:
        with st.container(border=True):
            st.markdown(q.answer)
            if q.solution:
                st.code(q.solution, language=None)
    elif not is_choice(q):
        st.caption(
            "The right answer, its worked solution and the bar that holds it show when "
            "you press Reveal."
        )


__all__ = [
    "landing",
    "student_page",
    "teacher_page",
    "take_param",
    "join_link",
    "teacher_link",
    "value_label",
]
