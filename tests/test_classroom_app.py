"""The live class under AppTest: a teacher session and several student sessions sharing one
database (SQLite in a temporary data folder, and a real PostgreSQL), the roles as each screen
sees them, the whole deck end to end, and a database that is down."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from classroom_support import fresh_database  # noqa: E402
from conftest import ROOT  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from kvcalc.teach.choices import CHOICES, LETTERS  # noqa: E402
from webui.classroom import deck as deckmod  # noqa: E402

pytestmark = pytest.mark.slow
APP = str(ROOT / "app.py")
PAGE = "app_pages/live_class.py"


@pytest.fixture(autouse=True)
def _own_database(monkeypatch, tmp_path):
    monkeypatch.delenv("KVLAB_DATABASE_URL", raising=False)
    monkeypatch.setenv("KVLAB_DATA_DIR", str(tmp_path / "data"))


def open_live(**query) -> AppTest:
    """A browser opening the live class's link directly (the page runs first, as it does)."""
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in query.items():
        at.query_params[k] = v
    at.switch_page(PAGE)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def screen(at: AppTest) -> str:
    """Everything a person can read on the screen (main and sidebar)."""
    parts = []
    for kind in (
        "markdown",
        "code",
        "caption",
        "success",
        "warning",
        "error",
        "info",
        "metric",
        "button",
        "text_input",
        "radio",
        "toggle",
        "checkbox",
        "expander",
    ):
        for el in getattr(at, kind):
            for attr in ("value", "label", "options"):
                v = getattr(el, attr, None)
                if v is not None:
                    parts.append(str(v))
    return "\n".join(parts)


def start_class(seed: int = 1) -> tuple[AppTest, str, str]:
    t = open_live()
    t.number_input(key="lc_seed").set_value(seed)
    t.button(key="lc_start").click()
    t.run()
    assert not t.exception and not t.error, [e.value for e in t.error]
    info = t.session_state["lc_teacher"]
    return t, info["code"], info["key"]


def join(code: str, nickname: str = "") -> AppTest:
    s = open_live(join=code)
    assert "Join the class" in screen(s)
    if nickname:
        s.text_input(key="lc_nick").set_value(nickname)
    s.button(key="lc_join_btn").click()
    s.run()
    assert not s.exception and not s.error, [e.value for e in s.error]
    assert s.query_params.get("student")  # a reload or a reconnect keeps the place
    return s


def send(s: AppTest, *answers: str) -> None:
    """Fill the question's box(es) (or pick a letter) and press Send."""
    if s.radio:
        s.radio[0].set_value(answers[0])
    else:
        for box, text in zip(s.text_input, answers):
            box.set_value(text)
    next(b for b in s.button if b.label == "Send my answer").click()
    s.run()
    assert not s.exception


def hold(t: AppTest, on: bool) -> None:
    """Set the teacher's "hold until Reveal" toggle."""
    t.toggle(key="lc_hold").set_value(on)
    t.run()
    assert not t.exception


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def right_answers(q) -> list[str]:
    if q.qid in CHOICES:
        return [LETTERS[[c.correct for c in CHOICES[q.qid]].index(True)]]
    out = []
    for p in deckmod.parts(q):
        v = q.part(p).value
        out.append(f"{v:.6g} B" if q.part(p).unit == "B" else f"{v:.6g}")
    return out


def test_a_teacher_and_three_students_share_one_question():
    t, code, key = start_class()
    assert dict(t.query_params) == {"class": code}  # the key is not in the address bar
    assert f"?join={code}" in screen(t) and len(t.get("image")) == 1  # the QR code
    students = [join(code) for _ in range(3)]
    for s, letter in zip(students, ["B", "A", "B"]):  # why-kv: B is right
        send(s, letter)
    assert "Correct." in screen(students[0])
    assert "Not quite. Size is not the reason" in screen(students[1])
    assert "the answer is B" not in screen(students[1])  # not before Reveal
    t.run()
    # Held by default (a projector): no share right, no named mistake before Reveal.
    assert t.toggle(key="lc_hold").value is True
    m = metrics(t)
    assert (m["Joined"], m["Answered"], m["Right"]) == ("3", "3", "-")
    assert "Size is not the reason" not in screen(t) and "%" not in str(m)
    hold(t, False)
    m = metrics(t)
    assert (m["Joined"], m["Answered"], m["Right"]) == ("3", "3", "67%")
    assert "**1** · Size is not the reason" in screen(t)
    t.button(key="lc_reveal").click()
    t.run()
    for s in students:
        s.run()
    assert "the answer is B" in screen(students[1])  # the grader's whole message
    assert "compared with the keys of every earlier token" in screen(students[0])  # Q1's answer
    assert not any(b.label == "Send my answer" for b in students[0].button)  # closed
    t.button(key="lc_next").click()
    t.run()
    students[0].run()
    assert "40-layer model" in screen(students[0]) and len(students[0].text_input) == 2


def test_the_teacher_link_opens_the_teacher_screen_on_another_device():
    _, code, key = start_class()
    again = open_live(**{"class": code, "teacher": key})
    assert "Joined" in metrics(again) and dict(again.query_params) == {"class": code}
    assert not again.warning  # the link's parameters were all taken


def test_the_teacher_link_is_drawn_only_when_asked_for():
    # The teacher's screen goes on the projector: the link with the key is never drawn by
    # itself, neither at the start nor once students joined nor on a later question.
    t, code, key = start_class()
    assert key not in screen(t) and "teacher=" not in screen(t)
    join(code)
    t.run()
    assert key not in screen(t) and "teacher=" not in screen(t)
    t.button(key="lc_link_btn").click()  # "Show my teacher link"
    t.run()
    assert not t.exception
    assert f"?class={code}&teacher={key}" in screen(t)
    t.button(key="lc_next").click()
    t.run()
    assert key not in screen(t) and "teacher=" not in screen(t)
    t.run()  # and not on a plain rerun either
    assert key not in screen(t)


@pytest.mark.parametrize("which", ["none", "wrong", "other class", "student token", "short"])
def test_without_this_class_key_there_is_no_teacher_screen(which):
    t, code, key = start_class()
    _, _, other_key = start_class()
    s = join(code)
    token = s.query_params["student"]
    link = {"class": code}
    if which != "none":
        link["teacher"] = {
            "wrong": key[:-2] + "xx",
            "other class": other_key,
            "student token": token,
            "short": "abc",
        }[which]
    at = open_live(**link)
    text = screen(at)
    assert at.error and not metrics(at)
    assert not any(
        b.label in ("Next", "Previous", "Reveal", "Results as CSV", "End the class now")
        for b in at.button
    )
    assert not at.get("download_button")
    assert key not in text
    # ... and nothing moved.
    s.run()
    assert "Interview question 1 of 6" in screen(s)


def test_a_student_screen_never_shows_the_key_or_anyone_elses_answer():
    t, code, key = start_class()
    ann, bob = join(code, "Ann"), join(code, "Bob")
    send(ann, "A")
    send(bob, "B")
    for s in (ann, bob):
        text = screen(s) + str(dict(s.query_params))
        assert key not in text
        assert not metrics(s)  # no class figures on a phone
    assert "Your answer: A" in screen(ann) and "Your answer: B" not in screen(ann)
    assert "Ann" not in screen(t) and "Bob" not in screen(t)  # nicknames stay off the projector


def test_students_follow_previous_next_and_see_the_solution_on_reveal():
    t, code, key = start_class(seed=42)
    s = join(code)
    for _ in range(6):
        t.button(key="lc_next").click()
        t.run()
    q = deckmod.deck(42)[6]
    s.run()
    assert q.prompt in screen(s)
    t.button(key="lc_prev").click()
    t.run()
    s.run()
    assert deckmod.deck(42)[5].prompt in screen(s)
    t.button(key="lc_reveal").click()
    t.run()
    s.run()
    assert deckmod.deck(42)[5].solution in screen(s)


def test_the_five_interview_questions_and_a_practice_set_end_to_end():
    seed = 7
    t, code, key = start_class(seed)
    hold(t, False)
    good, off = join(code), join(code)
    qs = deckmod.deck(seed)
    for i, q in enumerate(qs):
        good.run()
        off.run()
        assert q.prompt in screen(good)
        send(good, *right_answers(q))
        assert screen(good).count("Correct.") == len(deckmod.parts(q)), (i, q.qid)
        if q.qid in CHOICES:
            wrong = [L for L, c in zip(LETTERS, CHOICES[q.qid]) if not c.correct][0]
            send(off, wrong)
        else:  # twice each right number: a named slip or "another mistake"
            send(
                off,
                *[
                    f"{q.part(p).value * 2:.6g} B"
                    if q.part(p).unit == "B"
                    else f"{q.part(p).value * 2:.6g}"
                    for p in deckmod.parts(q)
                ],
            )
        t.run()
        m = metrics(t)
        assert m["Joined"] == "2" and m["Answered"] == "2", (i, m)
        right = [v for k, v in m.items() if k.startswith("Right")]
        assert right and all(v == "50%" for v in right), (i, q.qid, m)
        if i < len(qs) - 1:
            t.button(key="lc_next").click()
            t.run()
    export = t.session_state["lc_teacher"]
    from webui.classroom import get_store

    rows = get_store().export(export["code"], export["key"])
    assert len(rows) == 2 * sum(len(deckmod.parts(q)) for q in qs)
    assert {r["student"] for r in rows} == {1, 2}


def test_on_postgres_a_class_runs_the_same(monkeypatch):
    monkeypatch.setenv("KVLAB_DATABASE_URL", fresh_database("kvlab_apptest"))
    t, code, key = start_class()
    students = [join(code) for _ in range(3)]
    for s in students:
        send(s, "B")
    hold(t, False)
    assert metrics(t)["Answered"] == "3" and metrics(t)["Right"] == "100%"
    assert "PostgreSQL" in screen(t)


def test_a_database_that_is_down_gives_a_message_and_the_app_works(monkeypatch):
    monkeypatch.setenv("KVLAB_DATABASE_URL", "postgresql://kvlab@127.0.0.1:1/kvlab")
    at = open_live()
    at.button(key="lc_start").click()
    at.run()
    assert not at.exception
    (err,) = at.error
    assert "not answering" in err.value and "Everything else in the app works" in err.value
    joined = open_live(join="AB3K7M")
    assert not joined.exception and "not answering" in joined.error[0].value
    other = AppTest.from_file(APP, default_timeout=60)
    other.switch_page("app_pages/budget.py")
    other.run()
    assert not other.exception and other.metric


def test_the_interview_checks_classroom_mode_links_to_the_live_class():
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["i_mode"] = "Classroom"
    at.switch_page("app_pages/interview.py")
    at.run()
    assert not at.exception
    assert "live_class" in [p.proto.page for p in at.get("page_link")]
