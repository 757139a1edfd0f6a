"""The live class's safety in a real browser (issue 39, the app's side): Chromium, each person in
a browser context of their own (their own cookies: their own browser), one Streamlit server with
its own SQLite database.

B11  the teacher key never reaches the projector: every websocket message the server sends the
     teacher's browser (read off the wire as Chromium receives it) is searched for the key, over
     the first screens (start, a student joining, Next, Previous, the fold opened, the figures
     refreshing), and none holds it; only the run that answers "Show my teacher link" does, and
     none after it. Ending a class asks first.
B13  a second join from the same browser (another tab) is that student again, not a new one.
B15  a student's link opened in another browser does not answer for them: it says so, offers
     to join from there, and the student's answer stays.

The key is found by its hash: every 43-character URL-safe run in a message is hashed and
compared with the class's key_hash in the database, so the search does not depend on how a
message would show it. Skips, saying why, when Chromium or playwright is missing.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
from pathlib import Path

import pytest
from browser_support import app_server, sync_api, wait_ready  # browser: conftest.py

pytestmark = pytest.mark.browser

expect = sync_api.expect
PROJECTOR = {"width": 1366, "height": 768}
WAIT_MS = 40_000  # a shared 2-core machine: a rerun can take seconds
_KEYLIKE = re.compile(rb"[A-Za-z0-9_-]{43}")  # secrets.token_urlsafe(32)

from kvcalc.teach.choices import CHOICES, LETTERS  # noqa: E402

RIGHT = LETTERS[[c.correct for c in CHOICES["why-kv"]].index(True)]
WRONG = LETTERS[[c.correct for c in CHOICES["why-kv"]].index(False)]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("live-safety-data")


@pytest.fixture(scope="module")
def server(data_dir):
    env = dict(os.environ)
    env.pop("KVLAB_DATABASE_URL", None)
    env.pop("KVLAB_PUBLIC_URL", None)
    env["KVLAB_DATA_DIR"] = str(data_dir)
    yield from app_server(env)


def _db(data_dir: Path, sql: str, *args):
    with sqlite3.connect(data_dir / "classroom.db") as conn:
        return conn.execute(sql, args).fetchall()


class Wire:
    """Every websocket message a page receives, as bytes, in order."""

    def __init__(self, page):
        self.frames: list[bytes] = []
        page.on("websocket", self._socket)

    def _socket(self, ws) -> None:
        ws.on("framereceived", self._frame)

    def _frame(self, payload) -> None:
        self.frames.append(payload if isinstance(payload, bytes) else str(payload).encode())

    def holding(self, key_hash: str, since: int = 0) -> list[int]:
        """The indices of the messages (from ``since``) that hold the key of ``key_hash``."""
        hits = []
        for i, f in enumerate(self.frames[since:], start=since):
            if b"teacher=" in f or any(
                hashlib.sha256(m).hexdigest() == key_hash for m in _KEYLIKE.findall(f)
            ):
                hits.append(i)
        return hits


def _ready(page, selector="[data-testid=stMain] [data-testid=stMarkdownContainer]"):
    wait_ready(page, timeout_ms=WAIT_MS, selector=selector)


def _phone(browser):
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    return ctx, ctx.new_page()


def _join(ctx, page, server, code):
    page.goto(f"{server}/live_class?join={code}")
    _ready(page)
    page.get_by_role("button", name="Join the class").click()
    expect(page.get_by_role("button", name="Send my answer")).to_be_visible(timeout=WAIT_MS)


def _send(page, letter):
    page.locator("[data-testid=stRadio] label", has_text=re.compile(rf"^{letter}\. ")).click()
    page.get_by_role("button", name="Send my answer").click()
    expect(
        page.locator("[data-testid^=stAlertContent]", has_text="Your answer").first
    ).to_be_visible(timeout=WAIT_MS)


def _refreshes(page, n=3):
    """Let the teacher's figures refresh ``n`` times (every 1.5 s), then wait for quiet."""
    page.wait_for_timeout(int(n * 1500) + 200)
    _ready(page)


def test_no_message_to_the_projector_holds_the_teacher_key(server, browser, data_dir):
    tctx = browser.new_context(viewport=PROJECTOR)
    teacher = tctx.new_page()
    wire = Wire(teacher)
    teacher.goto(f"{server}/live_class")
    _ready(teacher)
    teacher.get_by_role("button", name="Start a live class").click()
    teacher.wait_for_url(re.compile(r".*[?&]class=[A-Z0-9]+"), timeout=WAIT_MS)
    code = re.search(r"class=([A-Z0-9]+)", teacher.url).group(1)
    _ready(teacher)
    (key_hash,) = _db(data_dir, "SELECT key_hash FROM classroom_classes WHERE code = ?", code)[0]
    _refreshes(teacher)
    assert len(wire.frames) > 5, len(wire.frames)  # the first screens were read off the wire
    assert wire.holding(key_hash) == []
    # A student joins (the header shrinks), the teacher moves on and back, opens the fold.
    sctx, phone = _phone(browser)
    _join(sctx, phone, server, code)
    joined = teacher.locator("[data-testid=stMetric]").filter(has_text="Joined")
    expect(joined.locator("[data-testid=stMetricValue]").first).to_have_text("1", timeout=WAIT_MS)
    for button in ("Next", "Previous"):
        teacher.get_by_role("button", name=button, exact=True).click()
        _ready(teacher)
    teacher.get_by_text("Your teacher link, the").click()
    _refreshes(teacher)
    assert len(wire.frames) > 10, len(wire.frames)  # the screens were read off the wire
    assert wire.holding(key_hash) == []
    # Ending the class asks first.
    end = teacher.get_by_role("button", name="End the class now")
    expect(end).to_be_disabled()

    # Asked for: the run that answers holds it (the search finds a key where there is one) ...
    asked = len(wire.frames)
    teacher.get_by_role("button", name="Show my teacher link").click()
    dialog = teacher.get_by_role("dialog")
    expect(dialog).to_contain_text("teacher=", timeout=WAIT_MS)
    _ready(teacher)
    assert wire.holding(key_hash, since=asked)
    teacher.keyboard.press("Escape")
    expect(dialog).to_have_count(0, timeout=WAIT_MS)
    _ready(teacher)
    # ... and nothing sent after it: not the next question, not the refreshes.
    after = len(wire.frames)
    teacher.get_by_role("button", name="Next", exact=True).click()
    _ready(teacher)
    _refreshes(teacher)
    assert len(wire.frames) > after
    assert wire.holding(key_hash, since=after) == []
    sctx.close()
    tctx.close()


def test_a_students_place_is_their_browsers(server, browser, data_dir):
    tctx = browser.new_context(viewport=PROJECTOR)
    teacher = tctx.new_page()
    teacher.goto(f"{server}/live_class")
    _ready(teacher)
    teacher.get_by_role("button", name="Start a live class").click()
    teacher.wait_for_url(re.compile(r".*[?&]class=[A-Z0-9]+"), timeout=WAIT_MS)
    code = re.search(r"class=([A-Z0-9]+)", teacher.url).group(1)
    (class_id,) = _db(data_dir, "SELECT id FROM classroom_classes WHERE code = ?", code)[0]

    def students() -> int:
        return _db(
            data_dir, "SELECT count(*) FROM classroom_students WHERE class_id = ?", class_id
        )[0][0]

    def answers() -> list[str]:
        rows = _db(data_dir, "SELECT text FROM classroom_answers WHERE class_id = ?", class_id)
        return [r[0] for r in rows]

    actx, ann = _phone(browser)
    _join(actx, ann, server, code)
    _send(ann, RIGHT)
    link = ann.url
    assert "student=" in link and students() == 1 and answers() == [RIGHT]

    # B13: the same browser, another tab, the join link again: Ann again, not a new student.
    again = actx.new_page()
    again.goto(f"{server}/live_class?join={code}")
    _ready(again)
    again.get_by_role("button", name="Join the class").click()
    expect(again.get_by_text(f"Your answer: {RIGHT}").first).to_be_visible(timeout=WAIT_MS)
    assert students() == 1
    link = again.url  # her place, under the token this join gave (the older one is spent)
    assert "student=" in link

    # B15: Ann's link in another browser: no answer for her from there.
    mctx, mallory = _phone(browser)
    mallory.goto(link)
    _ready(mallory)
    expect(mallory.get_by_text("held by another browser").first).to_be_visible(timeout=WAIT_MS)
    assert mallory.get_by_role("button", name="Send my answer").count() == 0
    # ... but a place of her own, when she asks for one.
    mallory.get_by_role("button", name="Join the class from here").click()
    expect(mallory.get_by_role("button", name="Send my answer")).to_be_visible(timeout=WAIT_MS)
    _send(mallory, WRONG)
    assert students() == 2 and sorted(answers()) == sorted([RIGHT, WRONG])
    for ctx in (mctx, actx, tctx):
        ctx.close()
