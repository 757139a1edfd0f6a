"""The live class's screens: the teacher's (the projector) and each student's (a phone).

Every action goes through webui.classroom.store, which checks the teacher key or the student
token itself; nothing here decides who may do what. Callbacks live in this module, not in the
page script (see webui/callbacks.py on why). Text a student sent is never rendered as markup.
docs/live-class.md, "The page's link", gives the link's parameters.
"""

from __future__ import annotations

import html
import os
import re
import time
from urllib.parse import urlsplit

import streamlit as st

from kvcalc.teach.choices import LETTERS, Choice, choices_for

from .. import pages
from ..figures import answers_figure
from ..hosted import plain
from ..prose import prose
from ..urlstate import declare
from ..visitor import browser_id, visitor_id
from .deck import MAX_SEED, answer_label, deck, grade_answer, is_choice, parts, position_label
from .qr import qr_png
from .store import NotAllowed, Refused, Unavailable, clean_code, get_store

T = prose("live_class")
TEACHER_POLL_S = 1.5  # the projector's figures refresh this often
STUDENT_POLL_S = 3.0  # a phone checks this often whether the teacher moved or revealed
PAGE = "live_class"  # the page's url path (app.py: the file's name)
MESSAGE_S = 8.0  # a refusal stays this long on the teacher's self-refreshing screen
CHART_HEIGHT = 250  # px: the question, the buttons and a histogram on one 768 px projector screen

_MSG = "lc_msg"
_TEACHER = "lc_teacher"
_STUDENT = "lc_student"
_HOLD = "lc_hold"


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
    st.session_state[_MSG] = (kind, text, time.monotonic())


def show_message(keep_s: float = 0.0) -> None:
    """The message a callback left; shown for ``keep_s`` seconds of reruns (the teacher's
    screen refreshes every 1.5 s), else once."""
    msg = st.session_state.get(_MSG)
    if msg:
        kind, text, said = msg
        if time.monotonic() - said >= keep_s:
            st.session_state.pop(_MSG, None)
        {"error": st.error, "warning": st.warning, "success": st.success}.get(kind, st.info)(
            plain(text)
        )


def _guarded(fn, *args, where=None):
    """Run a store call: a refusal or an outage becomes the page's message (from a callback),
    or an error shown in ``where`` (st, or a container) now; None then."""
    try:
        return fn(*args)
    except (Unavailable, Refused, NotAllowed) as e:
        if where is None:
            _say("error", str(e))
        else:
            where.error(plain(str(e)))
    return None


# -- starting and joining -------------------------------------------------------------------


def start_class() -> None:
    seed = int(st.session_state.get("lc_seed", 1) or 0)
    new = _guarded(get_store().create_class, seed, visitor_id())
    if new is None:
        return
    st.session_state[_TEACHER] = {"code": new.code, "key": new.key}
    st.query_params.clear()
    st.query_params["class"] = new.code


def join_class(code: str | None = None) -> None:
    code = code or st.session_state.get("lc_code", "")
    nick = st.session_state.get("lc_nick", "")
    token = _guarded(get_store().join, code, nick, visitor_id(), browser_id())
    if token is None:
        return
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
        st.markdown(T("run_a_class"))
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
        view = _guarded(store.class_view, code, where=st)
        if view is None:
            return
        st.subheader(f"Class {view.code}")
        st.caption(f"{position_label(view.position, view.count)} is on the teacher's screen.")
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
    # The place this session holds now: a join from inside this fragment (below) replaces it.
    token = (st.session_state.get(_STUDENT) or {}).get("token") or token
    browser = browser_id()
    try:
        view = store.class_view(code)
        sv = st.session_state.get("lc_sv")
        if not sv or sv.get("version") != view.version or sv.get("token") != token:
            view, mine = store.student_view(token, browser)
            sv = {"version": view.version, "token": token, "mine": mine}
            st.session_state["lc_sv"] = sv
    except NotAllowed as e:
        st.error(plain(str(e)))
        st.query_params.pop("student", None)
        st.session_state.pop(_STUDENT, None)
        st.button(
            "Join the class from here",
            on_click=join_class,
            args=(code,),
            type="primary",
            key="lc_rejoin_btn",
        )
        return
    except (Refused, Unavailable) as e:
        st.error(plain(str(e)))
        return
    qi = view.position
    q = deck(view.seed)[qi]
    st.caption(f"Class {view.code} · {position_label(qi, view.count)} · {q.level}")
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
    # The grade goes above the form, so a phone shows it without scrolling (filled below).
    result = st.container()
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
            done = _guarded(store.answer, token, qi, p, text, browser, where=result)
            if done is None:
                continue
            graded, stored = done
            if stored:
                mine[(qi, p)] = {
                    "text": text.strip().upper() if is_choice(q) else text.strip(),
                    "correct": graded.correct,
                    "slip": graded.slip,
                    "attempts": 1,
                }
            else:
                result.warning(plain(graded.message))
    with result:
        _student_result(q, qi, mine, revealed=False)


def _student_result(q, qi: int, mine: dict, revealed: bool) -> None:
    """The student's own answers to this question, graded: before Reveal right or not and the
    named slip; after it, the grader's whole message (with the right answer)."""
    for p in parts(q):
        a = mine.get((qi, p))
        which = "" if len(parts(q)) == 1 else (" (per token)" if p == 1 else " (per sequence)")
        if a is None:
            if revealed:
                st.caption(f"No answer stored{which}. Answers are closed.")
            continue
        g = grade_answer(q, p, a["text"])
        text = g.message if revealed else g.short
        (st.success if g.correct else st.warning)(
            f"Your answer{which}: {plain(a['text'], 60)} · {plain(text)}"
        )


# -- the teacher's screen -----------------------------------------------------------------


def teacher_page(code: str, key: str | None) -> None:
    """The projector: code and QR, the question, live figures, Previous/Next/Reveal (all in
    one fragment that refreshes itself), then a fold with the teacher link, export and end."""
    t = {"code": code, "key": key} if key else st.session_state.get(_TEACHER)
    if not t or t.get("code") != code:
        st.title("Live class")
        st.error(T("screen_runs_class"))
        pages.link(PAGE, "Join or start a class")
        return
    try:
        get_store().check_teacher(code, t["key"])
    except (NotAllowed, Refused, Unavailable) as e:
        st.title("Live class")
        st.error(plain(str(e)))
        return
    if key:  # the key arrived in the link: keep it in the session, out of the address bar
        st.session_state[_TEACHER] = t
        st.query_params.pop("teacher", None)
    key = t["key"]
    teacher_panel(code)
    # Outside the fragment, so its dialog stays open while the figures refresh. The fold starts
    # closed and stays closed unless the teacher opens it: it is on the projector's screen.
    with st.expander("Your teacher link, the results, the students, ending the class"):
        _link_button(code, key)
        names = st.checkbox(T("show_export_nicknames"), key="lc_names")
        _students(code, key, names)
        d = st.columns(2)
        for where, kind, mime in ((d[0], "csv", "text/csv"), (d[1], "json", "application/json")):
            where.download_button(
                f"Results as {kind.upper()}",
                data=_Export(code, key, names, kind),
                file_name=f"live-class-{code}.{kind}",
                mime=mime,
                on_click="ignore",
                key=f"lc_{kind}",
                icon=":material/download:",
            )
        # Ending asks first: nothing can bring a class back.
        st.checkbox("I have what I need: delete this class and its answers", key="lc_sure")
        st.button(
            "End the class now",
            on_click=teacher_end,
            disabled=not st.session_state.get("lc_sure"),
            key="lc_end",
        )


def _students(code: str, key: str, names: bool) -> None:
    """Who may join, and the students: close the class to new students, remove some (issue 39
    B13: one visitor filled a class with made-up students). Nicknames only when asked for."""
    roster = _guarded(get_store().roster, code, key, where=st)
    if roster is None:
        return
    st.button(
        "Close the class to new students" if roster.joining else "Let new students join again",
        on_click=teacher_joining,
        args=(not roster.joining,),
        icon=":material/lock:" if roster.joining else ":material/lock_open:",
        key="lc_joining",
        help="Students who joined stay, and come back from the browser they joined with.",
    )
    if not roster.students:
        return
    label = {
        s.number: f"Student {s.number}"
        + (f" · {s.nickname}" if names and s.nickname else "")
        + f" · {s.answers} answer{'s' * (s.answers != 1)}"
        for s in roster.students
    }
    st.multiselect(
        "Remove students (their answers too; they cannot join this class again)",
        list(label),
        format_func=lambda n: label.get(n, str(n)),  # nicknames are letters and digits
        key="lc_remove",
    )
    st.button(
        "Remove the selected students",
        on_click=teacher_remove,
        disabled=not st.session_state.get("lc_remove"),
        key="lc_remove_btn",
    )


def _teacher_header(code: str, compact: bool) -> None:
    """The join code, link and QR: large until the first student joins, then one line (with the
    QR in a popover), so the question and its results fit the projector's screen."""
    link = join_link(code)
    where = html.escape(f"{base_url()}/{PAGE}")  # our own code and address, no user text
    if compact:
        row = st.container(horizontal=True, vertical_alignment="center", gap="medium")
        row.markdown(
            f"<p style='margin:0'><b>Live class</b> · join at <b>{where}</b> with the code "
            f"<b style='font-size:1.5rem;letter-spacing:0.15rem'>{code}</b></p>",
            unsafe_allow_html=True,
            width="content",
        )
        with row.popover("QR code", icon=":material/qr_code_2:"):
            _big_code(code, link)
            st.image(qr_png(link), caption="Scan to join", width=300)
        return
    top = st.columns([2, 1])
    with top[0]:
        _big_code(code, link)
        host = urlsplit(link).hostname or ""
        if host in ("localhost", "127.0.0.1", "::1"):
            st.caption(T("localhost"))
        st.caption(T("reopen_screen_later"))
    top[1].image(qr_png(link), caption="Scan to join", width=260)


def _big_code(code: str, link: str) -> None:
    where = html.escape(f"{base_url()}/{PAGE}")
    st.markdown(
        f"<p style='font-size:1.3rem;margin:0'>Join at <b>{where}</b> with the code</p>"
        f"<p style='font-size:4rem;font-weight:700;letter-spacing:0.4rem;margin:0'>{code}</p>",
        unsafe_allow_html=True,
    )  # our own code and address, no user text
    st.code(link, language=None)


def _link_button(code: str, key: str) -> None:
    """The teacher link is drawn only when asked for, in a dialog: never on the projector by
    itself, and never sent again by a later rerun."""
    if st.button(
        "Show my teacher link (not on the projector)",
        key="lc_link_btn",
        icon=":material/key:",
        type="tertiary",
        help="Not on the projector: the link that reopens this screen, and anyone with it "
        "runs the class.",
    ):
        _teacher_link_dialog(code, key)


@st.dialog("Your teacher link", width="large")
def _teacher_link_dialog(code: str, key: str) -> None:
    st.warning("Anyone with this link runs the class: keep it off the projector.")
    st.code(teacher_link(code, key), language=None)
    st.caption(T("reopen"))


def _teacher_controls(view) -> None:
    """Previous, Next, Reveal and the hold, under the join line, above the question."""
    c = st.columns([1, 1, 1, 2.4], vertical_alignment="center")
    for col, label, delta, icon, key in (
        (c[0], "Previous", -1, "arrow_back", "lc_prev"),
        (c[1], "Next", 1, "arrow_forward", "lc_next"),
    ):
        col.button(
            label,
            on_click=teacher_move,
            args=(delta,),
            icon=f":material/{icon}:",
            width="stretch",
            disabled=not 0 <= view.position + delta < view.count,
            key=key,
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
    # On by default: on a projector the share right and the named mistakes point at the answer
    # while students still answer.
    c[3].toggle(
        "Hold the share right and the mistakes until Reveal",
        value=True,
        key=_HOLD,
        help="The share right and the named mistakes hint at the answer while students "
        "still answer; the answers' bars are shown all the same.",
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


def _as_teacher(fn, *args, where=None):
    """A teacher's store call with this session's class and key (none: nothing), _guarded."""
    t = _teacher()
    return None if t is None else _guarded(fn, *t, *args, where=where)


def teacher_move(delta: int) -> None:
    store = get_store()
    view = _as_teacher(store.check_teacher)
    if view is not None:
        _as_teacher(store.move, view.position + delta)


def teacher_reveal(on: bool) -> None:
    _as_teacher(get_store().reveal, on)


def teacher_joining(open_: bool) -> None:
    _as_teacher(get_store().set_joining, open_)


def teacher_remove() -> None:
    numbers = st.session_state.get("lc_remove") or []
    n = _as_teacher(get_store().remove_students, numbers) if numbers else None
    if n is not None:
        st.session_state["lc_remove"] = []
        _say("success", f"{n} student{'s' * (n != 1)} removed, with their answers.")


def teacher_end() -> None:
    t = _teacher()
    if t is None:
        return
    st.session_state.pop(_MSG, None)  # an older message must not read as this one's refusal
    if _guarded(get_store().end, *t) is None and _MSG not in st.session_state:
        st.session_state.pop(_TEACHER, None)
        st.query_params.clear()
        _say("success", f"Class {t[0]} ended: its students and answers are deleted.")


def count_axis(top: int) -> dict:
    """A y-axis that counts whole students: ticks 0, 1, 2, ... (or every 2, 5, 10, ... for a
    large class, at most about six), from 0 to at least 1."""
    step = next((s for s in (1, 2, 5, 10, 20, 50, 100, 200, 500) if top <= 6 * s), 1000)
    high = max(1, -(-top // step) * step)
    return {
        "title": "students",
        "tick0": 0,
        "dtick": step,
        "tickformat": "d",
        "range": [0, high * 1.05],  # the top bar not clipped
        "fixedrange": True,
    }


def _head(pr, parts: int) -> str:
    return "" if parts == 1 else ("Per token: " if pr.part == 1 else "Per sequence: ")


def _part_chart(q, pr, parts: int, *, revealed: bool) -> None:
    """One part's answers as a histogram (a choice question: a bar for every letter)."""
    head = _head(pr, parts)
    bars = pr.bars
    if is_choice(q):
        have = {b[0]: b for b in bars}
        opts = choices_for(q.qid)
        bars = [have.get(L, (L, 0, opts[i].correct)) for i, L in enumerate(LETTERS[: len(opts)])]
    elif not pr.answered:
        st.caption(f"{head}no answers yet.")
        return
    fig = answers_figure(bars, head, revealed)
    fig["layout"]["yaxis"] = count_axis(max((b[1] for b in bars), default=0))
    fig["layout"]["height"] = CHART_HEIGHT
    fig["layout"]["margin"] = {"l": 40, "r": 10, "t": 30, "b": 40}
    st.plotly_chart(fig, key=f"lc_hist_{pr.part}", config={"displayModeBar": False})


def _part_mistakes(pr, parts: int, *, hold: bool) -> None:
    """One part's named mistakes, most first (none while held)."""
    head = _head(pr, parts)
    if hold:
        st.caption(f"{head}named mistakes held until Reveal.")
        return
    if not pr.slips:
        st.caption(f"{head}no mistakes named so far.")
        return
    st.markdown(f"**{head}named mistakes**")
    for slip, n in pr.slips[:6]:
        st.markdown(f"- **{n}** · {plain(slip)}")


def _metrics(r, hold: bool) -> None:
    """Joined, answered and the share right of each part (a dash while held)."""
    m = st.columns(2 + len(r.parts[:2]))
    m[0].metric("Joined", f"{r.joined}")
    m[1].metric("Answered", f"{r.answered}", help="students who answered every part")
    for i, pr in enumerate(r.parts[:2]):
        share = f"{pr.correct / pr.answered:.0%}" if pr.answered and not hold else "-"
        label = "Right" + (f" ({_head(pr, len(r.parts))[:-2].lower()})" if len(r.parts) > 1 else "")
        m[2 + i].metric(
            label, share, help="Held until Reveal." if hold else T("answers_right_their", pr=pr)
        )
    st.progress(min(1.0, r.answered / max(1, r.joined)))


@st.fragment(run_every=TEACHER_POLL_S)
def teacher_panel(code: str) -> None:
    r = _as_teacher(get_store().results, where=st)
    if r is None:
        return
    # Until a student joins, the title and the join code large; then one line, so the
    # question, the buttons and the results fit the projector's screen.
    # One container for both, so what follows keeps its place (and its widgets their state)
    # when the header shrinks.
    with st.container():
        if not r.joined:
            st.title("Live class")
        show_message(keep_s=MESSAGE_S)
        _teacher_header(r.view.code, compact=r.joined > 0)
    _teacher_controls(r.view)
    q = deck(r.view.seed)[r.question]
    st.caption(
        f"**{position_label(r.question, r.view.count)}** · {q.level} · practice set "
        f"{r.view.seed} · the figures refresh every {TEACHER_POLL_S:g} s"
        + ("" if r.joining else " · **closed to new students**")
    )
    st.markdown(
        f"<p style='font-size:1.75rem;line-height:1.25;margin:0'>{html.escape(q.prompt)}</p>",
        unsafe_allow_html=True,
    )  # our own question text, escaped all the same
    hold = bool(st.session_state.get(_HOLD, True)) and not r.view.revealed
    n = len(r.parts)
    if n == 2:  # two numbers: their histograms side by side
        if q.config:
            st.code(q.config, language="json")
        _metrics(r, hold)
        for col, pr in zip(st.columns(2, gap="medium"), r.parts):
            with col:
                _part_chart(q, pr, n, revealed=r.view.revealed)
                _part_mistakes(pr, n, hold=hold)
    else:  # the choices (or the config) beside the figures
        left, right = st.columns(2, gap="medium")
        with left:
            if q.config:
                st.code(q.config, language="json")
            if is_choice(q):
                for L, opt in zip(LETTERS, choices_for(q.qid)):
                    mark = " ✓" if r.view.revealed and opt.correct else ""
                    st.markdown(f"**{L}.** {opt.text}{mark}")
            for pr in r.parts:
                _part_mistakes(pr, n, hold=hold)
        with right:
            _metrics(r, hold)
            for pr in r.parts:
                _part_chart(q, pr, n, revealed=r.view.revealed)
    if r.view.revealed:
        with st.container(border=True):
            st.markdown(q.answer)
            if q.solution:
                st.code(q.solution, language=None)
    elif not is_choice(q):
        st.caption(T("right_answer_worked"))
