"""The live class in a real browser, laid out for a projector: a teacher at 1366 x 768 and two
students on phones (390 x 844), each in its own browser context, on one Streamlit server with
its own database (SQLite in a temporary folder).

What a class sees on the projector: never the teacher key; once students have joined, the
question, Previous / Next / Reveal and the results on the first screen; the share right and the
named mistakes held until Reveal by default; a y-axis that counts whole students; the chapter's
questions counted as a set of five. What a student sees: an intro for students, and the grade on
the first screen of the phone. Screenshots are saved in a temporary folder (printed).

Skips, saying why, when Chromium or playwright is missing; .ci/run installs both.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest
from browser_support import app_server, sync_api, wait_ready  # browser: conftest.py

pytestmark = pytest.mark.browser

expect = sync_api.expect

SHOTS = Path(tempfile.mkdtemp(prefix="kvlab-live-class-shots-"))
PROJECTOR = {"width": 1366, "height": 768}  # a classroom projector's common resolution
PHONE = {"width": 390, "height": 844}  # an iPhone 12-14, in CSS pixels
WAIT_MS = 40_000  # a shared 2-core machine: a rerun can take seconds

# The first question of the deck is the chapter's "why do we cache K and V but not Q?", asked as
# a choice. Which letter is right is read from the question's own data (another letter order
# must not break this test); what the screen makes of it is what is under test.
from kvcalc.teach.choices import CHOICES, LETTERS  # noqa: E402

WHY_KV = CHOICES["why-kv"]
RIGHT = LETTERS[[c.correct for c in WHY_KV].index(True)]
WRONG = LETTERS[[c.correct for c in WHY_KV].index(False)]
WRONG_SLIP = next(c.slip for c in WHY_KV if not c.correct)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    env = dict(os.environ)
    env.pop("KVLAB_DATABASE_URL", None)
    env.pop("KVLAB_PUBLIC_URL", None)
    env["KVLAB_DATA_DIR"] = str(tmp_path_factory.mktemp("live-class-data"))
    yield from app_server(env)


def _projector(browser):
    ctx = browser.new_context(viewport=PROJECTOR)
    return ctx, ctx.new_page()


def _phone(browser):
    ctx = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True, device_scale_factor=2)
    return ctx, ctx.new_page()


def _ready(page):
    # A phone's join page has no title: its first text stands for it.
    wait_ready(
        page, timeout_ms=WAIT_MS, selector="[data-testid=stMain] [data-testid=stMarkdownContainer]"
    )


def _to_top(page):
    page.evaluate(
        "() => { window.scrollTo(0, 0); for (const e of document.querySelectorAll("
        "'[data-testid=stMain], [data-testid=stAppViewContainer], "
        "[data-testid=stMainBlockContainer]')) e.scrollTop = 0; }"
    )


def _bottom(locator) -> float:
    box = locator.bounding_box()
    assert box is not None, locator
    return box["y"] + box["height"]


def _metric(page, label: str):
    """The value element of the metric whose label is exactly ``label``."""
    box = page.locator("[data-testid=stMetric]").filter(
        has=page.locator("[data-testid=stMetricLabel]", has_text=re.compile(rf"^{label}$"))
    )
    return box.locator("[data-testid=stMetricValue]").first


def _no_exception(page):
    assert page.locator("[data-testid=stException]").count() == 0
    assert "Traceback" not in page.inner_text("body")


def _join(browser, server, code: str):
    ctx, page = _phone(browser)
    page.goto(f"{server}/live_class?join={code}")
    _ready(page)
    body = page.inner_text("[data-testid=stMain]")
    # The join page speaks to the student, not to the teacher.
    assert "Answer it here, on your phone" in body, body
    assert "projector" not in body.lower(), body
    page.screenshot(path=str(SHOTS / "phone-join.png"))
    page.get_by_role("button", name="Join the class").click()
    expect(page.get_by_role("button", name="Send my answer")).to_be_visible(timeout=WAIT_MS)
    return ctx, page


def _send_choice(page, letter: str):
    page.locator("[data-testid=stRadio] label", has_text=re.compile(rf"^{letter}\. ")).click()
    page.get_by_role("button", name="Send my answer").click()


def _send_numbers(page, *answers: str):
    boxes = page.locator("[data-testid=stForm] input[type=text]")
    expect(boxes).to_have_count(len(answers), timeout=WAIT_MS)
    for i, text in enumerate(answers):
        boxes.nth(i).fill(text)
    page.get_by_role("button", name="Send my answer").click()


def _y_ticks(page) -> list[str]:
    return [t.strip() for t in page.locator(".js-plotly-plot .ytick text").all_text_contents()]


def _phone_grade(page, kind: str, shot: str):
    """The phone's grade: shown, and on the first screen (no scrolling)."""
    alert = page.locator(f"[data-testid=stAlertContent{kind}]", has_text="Your answer").first
    expect(alert).to_be_visible(timeout=WAIT_MS)
    _to_top(page)
    page.screenshot(path=str(SHOTS / shot))
    assert alert.bounding_box()["y"] + 20 <= PHONE["height"], alert.bounding_box()
    return alert.inner_text()


def test_the_landing_page_speaks_to_students_first(server, browser):
    ctx, page = _phone(browser)
    page.goto(f"{server}/live_class")
    _ready(page)
    lead = page.locator("[data-testid=stMain] [data-testid=stMarkdownContainer]").filter(
        has_text="Joining a class?"
    )
    expect(lead).to_contain_text("Answer it here, on your phone")
    assert _bottom(lead) <= PHONE["height"]  # on the first screen, above "Join a class"
    # The old teacher-facing intro is gone from where a student lands.
    assert "your screen, on the projector, shows" not in page.inner_text("body")
    page.screenshot(path=str(SHOTS / "phone-landing.png"))
    ctx.close()


def test_a_class_on_a_projector_and_two_phones(server, browser):  # noqa: C901 - one class, in order
    tctx, teacher = _projector(browser)
    teacher.goto(f"{server}/live_class")
    _ready(teacher)
    teacher.get_by_role("button", name="Start a live class").click()
    teacher.wait_for_url(re.compile(r".*[?&]class=[A-Z0-9]+"), timeout=WAIT_MS)
    _ready(teacher)
    _no_exception(teacher)
    code = re.search(r"class=([A-Z0-9]+)", teacher.url).group(1)
    assert "teacher=" not in teacher.url  # the key is not in the address bar
    # The teacher link (with its key) is neither on the screen nor anywhere in the page.
    expect(teacher.get_by_text(code, exact=True).first).to_be_visible(timeout=WAIT_MS)
    assert "teacher=" not in teacher.content()
    assert "keep it private" not in teacher.inner_text("body")
    # ... only behind a button, in a fold that starts closed.
    expect(teacher.get_by_role("button", name="Show my teacher link")).to_be_hidden()
    teacher.screenshot(path=str(SHOTS / "projector-started.png"))

    sctx = [_join(browser, server, code) for _ in range(2)]
    ann, ben = (p for _, p in sctx)
    for phone in (ann, ben):
        assert "Interview question 1 of 6" in phone.inner_text("[data-testid=stMain]")
    _send_choice(ann, RIGHT)
    _send_choice(ben, WRONG)
    assert "Correct." in _phone_grade(ann, "Success", "phone-ann-q1.png")
    assert "Not quite." in _phone_grade(ben, "Warning", "phone-ben-q1.png")

    # The projector: both joined and answered; the join code is now one line.
    expect(_metric(teacher, "Joined")).to_have_text("2", timeout=WAIT_MS)
    expect(_metric(teacher, "Answered")).to_have_text("2", timeout=WAIT_MS)
    expect(teacher.get_by_text("Scan to join").first).to_be_hidden(timeout=WAIT_MS)
    expect(teacher.locator(".js-plotly-plot")).to_have_count(1, timeout=WAIT_MS)
    _ready(teacher)
    _to_top(teacher)
    teacher.screenshot(path=str(SHOTS / "projector-q1.png"))
    body = teacher.inner_text("body")
    assert "Interview question 1 of 6" in body, body
    assert "teacher=" not in teacher.content()
    # Held by default: no share right, no named mistake before Reveal.
    hold = teacher.get_by_label(re.compile("^Hold the share right"))
    assert hold.is_checked()
    assert _metric(teacher, "Right").inner_text() == "-"
    assert not re.search(r"\d+\s*%", body), body
    assert WRONG_SLIP[:30] not in body
    # One screen: the question, the buttons and the histogram within the first 768 px.
    question = teacher.get_by_text("Why do we cache K and V but not Q?").first
    for what in (
        question,
        teacher.get_by_role("button", name="Next", exact=True),
        teacher.get_by_role("button", name="Reveal", exact=True),
        teacher.get_by_role("button", name="Previous", exact=True),
        teacher.locator(".js-plotly-plot").first,
    ):
        assert _bottom(what) <= PROJECTOR["height"], (what, what.bounding_box())
    # Whole students on the y-axis: 0, 1 (one student per choice), never 0.2.
    ticks = _y_ticks(teacher)
    assert ticks and all(re.fullmatch(r"\d+", t) for t in ticks), ticks
    assert ticks[:2] == ["0", "1"], ticks

    # Reveal: the share right and the named mistake show; the phones get the solution.
    teacher.get_by_role("button", name="Reveal", exact=True).click()
    expect(_metric(teacher, "Right")).to_have_text("50%", timeout=WAIT_MS)
    expect(teacher.get_by_text(WRONG_SLIP[:30]).first).to_be_visible(timeout=WAIT_MS)
    _ready(teacher)
    _to_top(teacher)
    teacher.screenshot(path=str(SHOTS / "projector-q1-revealed.png"))
    expect(ben.locator("[data-testid=stAlertContentWarning]").first).to_contain_text(
        f"the answer is {RIGHT}", timeout=WAIT_MS
    )
    _phone_grade(ben, "Warning", "phone-ben-q1-revealed.png")

    # Question 2 asks two numbers: 2 (K and V) x 40 layers x 8 heads x 128 x 2 B (FP16)
    # = 163,840 B per token; x 8,192 tokens = 1,342,177,280 B = 1.25 GiB per sequence.
    teacher.get_by_role("button", name="Next", exact=True).click()
    expect(teacher.get_by_text("Interview question 2 of 6").first).to_be_visible(timeout=WAIT_MS)
    for phone in (ann, ben):
        expect(phone.get_by_text("Interview question 2 of 6").first).to_be_visible(timeout=WAIT_MS)
    _send_numbers(ann, "163840", "1.25 GiB")
    _send_numbers(ben, "81920", "0.625 GiB")  # the factor 2 for K and V forgotten
    _phone_grade(ann, "Success", "phone-ann-q2.png")
    _phone_grade(ben, "Warning", "phone-ben-q2.png")
    expect(_metric(teacher, "Answered")).to_have_text("2", timeout=WAIT_MS)
    charts = teacher.locator(".js-plotly-plot")
    expect(charts).to_have_count(2, timeout=WAIT_MS)
    _ready(teacher)
    _to_top(teacher)
    teacher.screenshot(path=str(SHOTS / "projector-q2.png"))
    body = teacher.inner_text("body")
    assert not re.search(r"\d+\s*%", body), body  # still held
    left, right = (charts.nth(i).bounding_box() for i in range(2))
    assert abs(left["y"] - right["y"]) < 5 and right["x"] >= left["x"] + left["width"] - 1
    for what in (
        teacher.get_by_role("button", name="Next", exact=True),
        teacher.get_by_role("button", name="Reveal", exact=True),
        charts.nth(0),
        charts.nth(1),
    ):
        assert _bottom(what) <= PROJECTOR["height"], (what, what.bounding_box())
    ticks = _y_ticks(teacher)
    assert ticks and all(re.fullmatch(r"\d+", t) for t in ticks), ticks
    # Latecomers: the QR code and the large code, one press away, and they stay open while
    # the figures refresh.
    teacher.get_by_role("button", name="QR code").click()
    qr = teacher.get_by_text("Scan to join").last
    expect(qr).to_be_visible(timeout=WAIT_MS)
    teacher.wait_for_timeout(2_000)
    expect(qr).to_be_visible()
    teacher.screenshot(path=str(SHOTS / "projector-q2-qr.png"))
    teacher.keyboard.press("Escape")
    expect(qr).to_be_hidden(timeout=WAIT_MS)

    # The teacher link: only when asked for, and gone again from the next screen.
    teacher.get_by_text("Your teacher link, the results").click()  # open the fold
    teacher.get_by_role("button", name="Show my teacher link").click()
    dialog = teacher.get_by_role("dialog")
    expect(dialog).to_contain_text("teacher=", timeout=WAIT_MS)
    teacher.wait_for_timeout(2_000)  # the figures refresh every 1.5 s: the dialog stays
    expect(dialog).to_contain_text("teacher=")
    teacher.screenshot(path=str(SHOTS / "projector-teacher-link-asked.png"))
    key = re.search(r"teacher=([A-Za-z0-9_\-]+)", dialog.inner_text()).group(1)
    assert len(key) >= 20
    teacher.keyboard.press("Escape")
    expect(dialog).to_have_count(0, timeout=WAIT_MS)
    teacher.get_by_role("button", name="Next", exact=True).click()
    expect(teacher.get_by_text("Interview question 3 of 6").first).to_be_visible(timeout=WAIT_MS)
    _ready(teacher)
    assert key not in teacher.content() and "teacher=" not in teacher.content()
    _no_exception(teacher)
    for phone in (ann, ben):
        _no_exception(phone)
    for ctx, _ in sctx:
        ctx.close()
    tctx.close()
    print(f"screenshots in {SHOTS}")
