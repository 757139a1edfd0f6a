"""The live class's store: every class, student and answer in one database that every replica
shares (SQLAlchemy 2.x). Who may do what is checked here on every call, never by the page: the
teacher key opens the results, moves, reveals, exports and ends the class; a student token
answers the question on screen from the browser that joined; the join code gives what the
projector shows. A database that is down or slow raises ``Unavailable``, never a driver's
traceback. docs/live-class.md tells the whole design.

Longer than the 600 lines of tests/test_layers.py: one class holds every permission check and
every transaction of a class, so that who may do what is read in one place.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
import threading
import time
import unicodedata
from functools import partial
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from ..visitor import network_of
from . import export
from .database import database_url, describe_url, make_engine, upgrade
from .deck import deck, grade_answer, is_choice, parts
from .limits import Limits
from .models import (
    ANSWER_TEXT_MAX,
    NICKNAME_MAX,
    SLIP_MAX,
    VISITOR_MAX,
    AnswerRow,
    ClassRow,
    EventRow,
    StudentRow,
)
from .views import ClassView, NewClass, Results, Roster, Student, summarize, view_of

log = logging.getLogger(__name__)

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no I, O, 0, 1: read off a projector
CODE_LENGTH = 6  # 32^6 = 1.07e9 codes; guesses are limited by the joins per visitor
PURGE_EVERY_S = 60.0
DOWN_FOR_S = 3.0  # after a failure, calls fail at once for this long
VIEW_TTL_S = 1.0  # what the projector shows is cached this long per process
_TOKEN = re.compile(r"[A-Za-z0-9_-]{20,64}")


class Unavailable(RuntimeError):
    """The class database cannot be reached (down, slow, or not set up); str() says so."""


class Refused(ValueError):
    """A bound or a limit, a wrong code, a class that ended: str() says what to do."""


class NotAllowed(Exception):
    """The key or token does not open this class (or none was given)."""


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def clean_code(raw: str) -> str:
    """A join code as typed ("ab3 k7m", "AB3-K7M") in its canonical form, or Refused."""
    code = re.sub(r"[\s-]", "", str(raw or "")[:40]).upper()
    if len(code) != CODE_LENGTH or any(c not in CODE_ALPHABET for c in code):
        raise Refused(
            f"A join code is {CODE_LENGTH} letters and digits, as the teacher's screen shows it."
        )
    return code


_NICK_PUNCT = set(" -_.'")


def clean_nickname(raw: str | None) -> str | None:
    """An optional nickname: at most 24 letters, digits, spaces and - _ . ' (any script), starting
    with a letter or digit; None when empty. Anything else is refused, not silently changed.
    (Nicknames are never shown on the teacher's screen; only an export that asks for them
    carries them.)"""
    text = unicodedata.normalize("NFKC", str(raw or ""))
    text = " ".join(text.split())
    if not text:
        return None
    if len(text) > NICKNAME_MAX:
        raise Refused(f"A nickname has at most {NICKNAME_MAX} characters.")
    for ch in text:
        cat = unicodedata.category(ch)
        if not (cat[0] in "LN" or ch in _NICK_PUNCT) or cat in ("Lm", "Nl"):
            raise Refused("A nickname may have letters, digits, spaces and - _ . ' only.")
    if not text[0].isalnum():
        raise Refused("A nickname starts with a letter or a digit.")
    return text


# What a page says when the database is down: never the database's host and port nor the SQLite
# file's path on the server (issue 39, item 8: a student saw both); the server's log names them.
UNAVAILABLE = (
    "The live class's database is not answering, so classes cannot start, join or answer "
    "right now. Everything else in the app works; try again in a moment."
)


class Store:
    """One database's classes. Thread-safe; one per process and URL (``get_store``)."""

    def __init__(self, url: str | None = None, limits: Limits | None = None, clock=time.time):
        self.url = url or database_url()
        self.limits = limits or Limits.from_env()
        self.clock = clock
        self.engine = make_engine(self.url)
        self._write = self.engine.execution_options(kvlab_write=True)
        self._ready = False
        self._lock = threading.Lock()
        self._down_until = 0.0
        self._last_purge = 0.0
        self._views: dict[str, tuple[float, ClassView]] = {}

    # -- plumbing -------------------------------------------------------------------------
    def _call(self, fn, *args, **kwargs):
        """Run fn(*args) with the schema ready; a database failure becomes Unavailable."""
        now = time.monotonic()
        if now < self._down_until:
            raise Unavailable(UNAVAILABLE)
        try:
            self._ensure_schema()
            self._maybe_purge()
            return fn(*args, **kwargs)
        except (Refused, NotAllowed, Unavailable):
            raise
        except sa_exc.IntegrityError:
            # Two requests crossed (the same new join code drawn twice, an answer to a class
            # ended meanwhile): nothing was written; the person may simply try again.
            raise Refused(
                "That did not go through (another change came at the same moment); try again."
            ) from None
        except (sa_exc.DBAPIError, sa_exc.TimeoutError, sa_exc.DisconnectionError, OSError) as e:
            self._down_until = time.monotonic() + DOWN_FOR_S
            log.warning(
                "classroom database %s error: %s",
                describe_url(self.url),
                (str(e).splitlines() or [""])[0][:200],
            )
            raise Unavailable(UNAVAILABLE) from None

    def _ensure_schema(self) -> None:
        if self._ready:
            return
        with self._lock:
            if self._ready:
                return
            if self.engine.dialect.name == "sqlite":
                db = self.engine.url.database
                if db and db != ":memory:":
                    Path(db).parent.mkdir(parents=True, exist_ok=True)
            upgrade(self.engine)
            self._ready = True

    def _maybe_purge(self) -> None:
        now = time.monotonic()
        if now - self._last_purge < PURGE_EVERY_S:
            return
        self._last_purge = now
        try:
            self.purge()
        except sa_exc.SQLAlchemyError as e:  # the next call tries again in a minute
            log.warning("classroom purge failed: %s", str(e).splitlines()[0][:200])

    def _in(self, fn, *args, write: bool = False):
        """fn(conn, *args) in one writing transaction (``write``) or a read, through _call."""

        def _run():
            with self._write.begin() if write else self.engine.connect() as conn:
                return fn(conn, *args)

        return self._call(_run)

    def ping(self) -> None:
        """Raise Unavailable unless the database answers (and its schema is ready)."""
        self._in(lambda conn: conn.execute(sa.text("SELECT 1")))

    # -- the teacher ------------------------------------------------------------------------
    def create_class(self, seed: int, visitor: str) -> NewClass:
        seed = int(seed)
        if not 0 <= seed <= 999_999:
            raise Refused("The practice set is a number from 0 to 999,999.")
        visitor = str(visitor)[:VISITOR_MAX]
        return self._in(self._create, seed, visitor, write=True)

    def _create(self, conn, seed: int, visitor: str) -> NewClass:
        now = self.clock()
        lim = self.limits
        network = network_of(visitor)
        if not _within(conn, "start", visitor, now, 3600, lim.classes_per_hour):
            raise Refused(
                f"At most {lim.classes_per_hour} classes an hour can be started "
                "from one address; use one you started, or wait."
            )
        _check_live_classes(conn, now, lim, visitor, network)
        key = secrets.token_urlsafe(32)
        for _ in range(8):
            code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
            taken = conn.execute(sa.select(ClassRow.id).where(ClassRow.code == code)).first()
            if taken is None:
                break
        else:  # pragma: no cover - 8 collisions in a billion codes
            raise Refused("No free join code was found; try again.")
        conn.execute(  # position, revealed and version: the model's defaults
            sa.insert(ClassRow).values(
                code=code,
                key_hash=_hash(key),
                seed=seed,
                creator=visitor,
                created_at=now,
                expires_at=now + lim.class_hours * 3600,
                network=network,
                joining=True,
            )
        )
        return NewClass(code=code, key=key)

    def _teacher_class(self, conn, code: str, key: str) -> ClassRow:
        """The class whose teacher key this is, or NotAllowed (the same for every failure)."""
        code = clean_code(code)
        row = conn.execute(sa.select(ClassRow.__table__).where(ClassRow.code == code)).first()
        given = _hash(key) if isinstance(key, str) and _TOKEN.fullmatch(key or "") else ""
        stored = row.key_hash if row is not None else _hash("no class")
        if not hmac.compare_digest(given, stored) or row is None:
            raise NotAllowed("That is not the teacher key of this class.")
        if row.expires_at <= self.clock():
            raise Refused("This class has ended (classes expire 12 hours after they start).")
        return row

    def _as_teacher(self, code: str, key: str, fn, write: bool = False, show: bool = False):
        """fn(conn, row) on the class whose teacher key this is, in a writing transaction
        (``write``: the projector's cached view is dropped) or a read; ``show``: then the
        class's view, read again."""

        def _run():
            with self._write.begin() if write else self.engine.connect() as conn:
                row = self._teacher_class(conn, code, key)
                out = fn(conn, row)
            if write:
                self._views.pop(row.code, None)
            return self._class_view(row.code) if show else out

        return self._call(_run)

    def check_teacher(self, code: str, key: str) -> ClassView:
        return self._as_teacher(code, key, lambda conn, row: view_of(row))

    def move(self, code: str, key: str, to: int) -> ClassView:
        """Put question ``to`` (from 0, clamped to the deck) on every screen, answer hidden."""

        def _move(conn, row):
            pos = min(max(int(to), 0), len(deck(row.seed)) - 1)
            _update_class(conn, row, position=pos, revealed=False, version=ClassRow.version + 1)

        return self._as_teacher(code, key, _move, write=True, show=True)

    def reveal(self, code: str, key: str, on: bool = True) -> ClassView:
        """Show (or hide again) the worked solution on every student's screen; while it shows,
        answers to the question are closed."""

        bump = partial(_update_class, revealed=bool(on), version=ClassRow.version + 1)
        return self._as_teacher(code, key, bump, write=True, show=True)

    def end(self, code: str, key: str) -> None:
        """Delete the class and every row of it now."""
        self._as_teacher(code, key, lambda conn, row: _delete_classes(conn, [row.id]), write=True)

    def set_joining(self, code: str, key: str, open_: bool) -> None:
        """Let new students join the class, or not (a student who joined comes back all the
        same, from the browser that joined)."""

        self._as_teacher(code, key, partial(_update_class, joining=bool(open_)), write=True)

    def roster(self, code: str, key: str) -> Roster:
        """Whether the class takes new students, and its students (not those removed),
        numbered as the export numbers them."""

        def _roster(conn, row):
            s, a = StudentRow.__table__, AnswerRow.__table__
            n = sa.select(sa.func.count()).select_from(a).where(a.c.student_id == s.c.id)
            rows = _students_of(conn, row, s.c.nickname, s.c.removed, n.scalar_subquery())
            students = [
                Student(number=i + 1, nickname=nick or "", answers=int(got or 0))
                for i, (nick, removed, got) in enumerate(rows)
                if not removed
            ]
            return Roster(joining=bool(row.joining), students=students)

        return self._as_teacher(code, key, _roster)

    def remove_students(self, code: str, key: str, numbers) -> int:
        """Remove students (by their roster numbers) and their answers: their places open no
        more, their browsers cannot join this class again, their nicknames are free. Returns
        how many were removed."""
        wanted = {int(n) for n in numbers}

        def _remove(conn, row) -> int:
            joined = _students_of(conn, row, StudentRow.id)
            ids = [r.id for i, r in enumerate(joined, 1) if i in wanted]
            if not ids:
                return 0
            conn.execute(sa.delete(AnswerRow).where(AnswerRow.student_id.in_(ids)))
            done = conn.execute(
                sa.update(StudentRow)
                .where(StudentRow.id.in_(ids), StudentRow.removed == sa.false())
                .values(removed=True, nickname_key=None)
            ).rowcount
            # A new version: every phone reads its own place again at its next poll, so
            # a removed student's screen says so at once.
            _update_class(conn, row, version=ClassRow.version + 1)
            return int(done or 0)

        return self._as_teacher(code, key, _remove, write=True)

    def results(self, code: str, key: str, question: int | None = None) -> Results:
        """The class's figures for ``question`` (default: the one on screen)."""

        def _results(conn, row):
            view = view_of(row)
            qi = view.position if question is None else int(question)
            if not 0 <= qi < view.count:
                raise Refused(f"There is no question {qi + 1} in this class.")
            joined = _count(
                conn, StudentRow, StudentRow.class_id == row.id, StudentRow.removed == sa.false()
            )
            rows = conn.execute(
                sa.select(AnswerRow.__table__).where(
                    AnswerRow.class_id == row.id, AnswerRow.question == qi
                )
            ).all()
            r = summarize(view, joined, qi, rows)
            r.joining = bool(row.joining)
            return r

        return self._as_teacher(code, key, _results)

    def export(self, code: str, key: str, names: bool = False) -> list[dict]:
        """Every answer of the class, one row each: question, part, student (anonymous: a
        number in join order), the answer, correct or not, the named slip; ``names`` adds the
        nicknames students chose to give."""

        def _export(conn, row):
            students = _students_of(conn, row, StudentRow.id, StudentRow.nickname)
            answers = conn.execute(
                sa.select(AnswerRow.__table__)
                .where(AnswerRow.class_id == row.id)
                .order_by(AnswerRow.question, AnswerRow.part, AnswerRow.student_id)
            ).all()
            return export.answer_rows(deck(row.seed), students, answers, names)

        return self._as_teacher(code, key, _export)

    def export_csv(self, code: str, key: str, names: bool = False) -> str:
        return export.to_csv(self.export(code, key, names), names)

    def export_json(self, code: str, key: str, names: bool = False) -> str:
        rows = self.export(code, key, names)
        return export.to_json(self.check_teacher(code, key), rows, self.clock(), names)

    # -- everyone ---------------------------------------------------------------------------
    def class_view(self, code: str) -> ClassView:
        """What the projector shows (the question, revealed or not), cached for a second per
        process: every student's screen polls it."""
        code = clean_code(code)
        hit = self._views.get(code)
        if hit is not None and time.monotonic() - hit[0] < VIEW_TTL_S:
            if hit[1].expires_at <= self.clock():
                raise Refused("This class has ended.")
            return hit[1]
        return self._call(self._class_view, code)

    def _class_view(self, code: str) -> ClassView:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(ClassRow.__table__).where(ClassRow.code == code)).first()
        if row is None or row.expires_at <= self.clock():
            self._views.pop(code, None)
            raise Refused(
                "There is no class with this code now (a class ends 12 hours after "
                "it starts, or when its teacher ends it)."
            )
        view = view_of(row)
        if len(self._views) > 4096:
            self._views.clear()
        self._views[code] = (time.monotonic(), view)
        return view

    # -- students ---------------------------------------------------------------------------
    def join(
        self, code: str, nickname: str | None, visitor: str, browser: str | None = None
    ) -> str:
        """A student of class ``code``: their token (kept by their browser, never shown to
        anyone else). ``visitor`` is the source address, ``browser`` the browser that asks
        (webui.visitor; None: a browser of its own, for a caller outside a browser). One
        student per browser per class: a browser that joined before gets its student back (a
        new token: the older one no longer opens the place)."""
        nick = clean_nickname(nickname)
        visitor = str(visitor)[:VISITOR_MAX]
        browser = str(browser)[:VISITOR_MAX] if browser else None
        token = secrets.token_urlsafe(16)
        problem = self._in(self._join, str(code or ""), nick, visitor, browser, token, write=True)
        if problem is not None:  # raised after the transaction: the join counts all the same
            raise problem
        return token

    def _join(self, conn, raw_code: str, nick, visitor: str, browser, token: str) -> Refused | None:
        now = self.clock()
        lim = self.limits
        # Every attempt counts, a wrong code too: guessing codes costs the same.
        for kind, who, most, whose in (
            ("join-browser", browser, lim.joins_per_browser, "this browser"),
            ("join", visitor, lim.joins_per_minute, "your network"),
        ):
            if who is not None and not _within(conn, kind, who, now, 60, most):
                raise Refused(
                    f"Too many joins from {whose} in a minute (at most {most}); wait a "
                    "moment and try again."
                )
        try:
            code = clean_code(raw_code)
        except Refused as e:
            return e
        row = conn.execute(
            sa.select(ClassRow.__table__).where(ClassRow.code == code).with_for_update()
        ).first()
        if row is None or row.expires_at <= now:
            return Refused(
                "There is no class with this code now. Check it on the teacher's screen."
            )
        return self._seat(conn, row, token, nick, visitor, browser, now)

    def _seat(self, conn, row, token, nick, visitor, browser, now) -> Refused | None:
        """Seat a student in class ``row`` under ``token`` (lock held on the class): this
        browser's student again, or a new one within the class's bounds; else the refusal."""
        lim = self.limits
        s = StudentRow.__table__
        in_class = s.c.class_id == row.id
        mine = None
        if browser:
            cols = s.c.id, s.c.removed, s.c.nickname_key
            mine = conn.execute(sa.select(*cols).where(in_class, s.c.browser == browser)).first()
        key = nick.casefold() if nick else None
        if key is not None and (mine is None or mine.nickname_key != key):
            taken = conn.execute(sa.select(s.c.id).where(in_class, s.c.nickname_key == key)).first()
            if taken is not None:
                return Refused(
                    f"Someone in this class already goes by {nick!r}: choose another nickname "
                    "(or none)."
                )
        if mine is not None:  # this browser's student: its place again, under a new token
            if mine.removed:
                return Refused("Your teacher removed you from this class.")
            values: dict = {"token_hash": _hash(token)}
            if key is not None:
                values.update(nickname=nick, nickname_key=key)
            conn.execute(sa.update(StudentRow).where(s.c.id == mine.id).values(**values))
            return None
        if not row.joining:
            return Refused("Your teacher has closed this class to new students.")
        seated = in_class, s.c.removed == sa.false()
        if _count(conn, s, *seated) >= lim.max_students:
            return Refused(f"This class is full ({lim.max_students} students).")
        here = _count(conn, s, *seated, s.c.visitor == visitor)
        if here >= lim.students_per_address:
            return Refused(
                f"This class has {here} students from your network already, as many as one "
                "network may bring; ask your teacher."
            )
        conn.execute(  # not removed, no submissions yet: the model's defaults
            sa.insert(StudentRow).values(
                class_id=row.id,
                token_hash=_hash(token),
                nickname=nick,
                nickname_key=key,
                visitor=visitor,
                browser=browser or "anon:" + secrets.token_hex(8),
                joined_at=now,
            )
        )
        return None

    def _student(self, conn, token: str, browser: str | None = None):
        """(student, class) rows of a student token, or NotAllowed: a token that opens no
        place, a student the teacher removed, or (``browser`` given) a place that another
        browser holds (issue 39 B15: a student's link opened elsewhere does not answer for
        them)."""
        if not isinstance(token, str) or not _TOKEN.fullmatch(token):
            raise NotAllowed(
                "This page does not hold a student's place in a class: join with the code."
            )
        s, c = StudentRow.__table__, ClassRow.__table__
        shown = [c.c[n] for n in ("code", "seed", "position", "revealed", "version", "expires_at")]
        row = conn.execute(
            sa.select(s, *shown)
            .join(c, s.c.class_id == c.c.id)
            .where(s.c.token_hash == _hash(token))
        ).first()
        if row is None:
            raise NotAllowed(
                "This student's place is not in any class now (the class ended, this browser "
                "joined again in another tab, or the link is not yours): join again with the code."
            )
        if row.expires_at <= self.clock():
            raise Refused("This class has ended.")
        if row.removed:
            raise NotAllowed("Your teacher removed you from this class.")
        if browser is not None and not _same_browser(row.browser, browser):
            raise NotAllowed(
                "This student's place is held by another browser (the one that joined): it "
                "answers from there. To answer from here, join the class with its code."
            )
        return row

    def student_view(
        self, token: str, browser: str | None = None
    ) -> tuple[ClassView, dict[tuple[int, int], dict]]:
        """The class as this student sees it, and their own answers:
        {(question, part): {"text", "correct", "slip", "attempts"}}; ``browser``: the browser
        that asks (None: not checked, for a caller outside a browser)."""

        def _sv(conn):
            st = self._student(conn, token, browser)
            a = AnswerRow.__table__
            rows = conn.execute(
                sa.select(
                    a.c.question, a.c.part, a.c.text, a.c.correct, a.c.slip, a.c.attempts
                ).where(a.c.student_id == st.id)
            ).all()
            mine = {
                (q, p): {"text": text, "correct": bool(ok), "slip": slip, "attempts": n}
                for q, p, text, ok, slip, n in rows
            }
            return view_of(st), mine

        return self._in(_sv)

    def answer(self, token: str, question: int, part: int, text: str, browser: str | None = None):
        """Grade and store a student's answer to the question on screen, in one transaction,
        from ``browser`` (only the browser that holds the place answers; None: not checked).
        Returns (graded, stored): an unreadable answer (a typo) is graded, not stored."""
        text = str(text or "")
        if len(text) > ANSWER_TEXT_MAX:
            raise Refused(f"An answer has at most {ANSWER_TEXT_MAX} characters.")
        return self._in(self._answer, token, int(question), int(part), text, browser, write=True)

    def _answer(self, conn, token: str, question: int, part: int, text: str, browser: str | None):
        now = self.clock()
        lim = self.limits
        st = self._student(conn, token, browser)
        if question != st.position:
            raise Refused(f"The class has moved on: the teacher is on question {st.position + 1}.")
        if st.revealed:
            raise Refused("The answer has been revealed: answers to this question are closed.")
        q = deck(st.seed)[question]
        if part not in parts(q):
            raise Refused("This question has no such part.")
        graded = grade_answer(q, part, text)
        if not graded.readable:
            return graded, False
        s = StudentRow.__table__
        fresh = s.c.window_start < now - 60
        count = conn.execute(
            sa.update(StudentRow)
            .where(s.c.id == st.id)
            .values(
                window_count=sa.case((fresh, 1), else_=s.c.window_count + 1),
                window_start=sa.case((fresh, now), else_=s.c.window_start),
                submissions=s.c.submissions + 1,
            )
            .returning(s.c.window_count, s.c.submissions)
        ).one()
        if count.window_count > lim.answers_per_minute:
            raise Refused(
                f"At most {lim.answers_per_minute} answers a minute: wait a few "
                "seconds, then send it again."
            )
        if count.submissions > lim.max_submissions:
            raise Refused("You have sent as many answers as one student may in a class.")
        stmt = _insert(conn)(AnswerRow.__table__).values(
            class_id=st.class_id,
            student_id=st.id,
            question=question,
            part=part,
            text=(text.strip().upper() if is_choice(q) else text.strip())[:ANSWER_TEXT_MAX],
            value=graded.value,
            correct=graded.correct,
            first_correct=graded.correct,
            slip=graded.slip[:SLIP_MAX],
            attempts=1,
            answered_at=now,
        )
        a, new = AnswerRow.__table__, stmt.excluded
        again = {k: new[k] for k in ("text", "value", "correct", "slip", "answered_at")}
        again["attempts"] = sa.case((a.c.text != new.text, a.c.attempts + 1), else_=a.c.attempts)
        stmt = stmt.on_conflict_do_update(
            index_elements=[a.c.class_id, a.c.question, a.c.part, a.c.student_id], set_=again
        )
        conn.execute(stmt)
        return graded, True

    # -- housekeeping -----------------------------------------------------------------------
    def purge(self) -> int:
        """Delete every expired class with its students and answers, and limit events older
        than an hour; returns the classes deleted."""
        now = self.clock()
        with self._write.begin() as conn:
            ids = list(
                conn.execute(sa.select(ClassRow.id).where(ClassRow.expires_at <= now)).scalars()
            )
            _delete_classes(conn, ids)
            conn.execute(sa.delete(EventRow).where(EventRow.at < now - 3600))
        for code, (_, v) in list(self._views.items()):
            if v.expires_at <= now:
                self._views.pop(code, None)
        return len(ids)

    def counts(self) -> dict[str, int]:
        """Rows per table (for the tests and the bench)."""

        tables = (ClassRow, StudentRow, AnswerRow, EventRow)
        return self._in(lambda conn: {t.__tablename__: _count(conn, t) for t in tables})

    def dispose(self) -> None:
        self.engine.dispose()


# -- helpers ----------------------------------------------------------------------------------


def _same_browser(held: str, asking: str) -> bool:
    """Whether ``asking`` may act for a place ``held`` by a browser. A place a browser took
    with its cookie (``b:``) is that browser's alone, whatever the request sends or leaves out.
    A place taken without one (``s:``, a session's own id: XSRF protection off, or a client that
    sent no cookie) has only its token to go by, as before: that browser's next page load is a
    new session."""
    return not held.startswith("b:") or hmac.compare_digest(held, asking)


def _check_live_classes(conn, now: float, lim: Limits, visitor: str, network: str) -> None:
    """Refused when a new class would pass the classes live at once of the address, of its
    network (a share of the server's, the reserve of issue 39 B16) or of the server."""
    live = ClassRow.expires_at > now
    if _count(conn, ClassRow, live, ClassRow.creator == visitor) >= lim.live_classes:
        raise Refused(
            f"{lim.live_classes} classes started from your address are running already (at "
            "most that many at once): end one you no longer need, or use one of them."
        )
    if _count(conn, ClassRow, live, ClassRow.network == network) >= lim.classes_per_network:
        raise Refused(
            f"Classes started from your network hold {lim.classes_per_network} of this "
            "server's places, as many as one network may: end one you no longer need, or "
            "try again later."
        )
    if _count(conn, ClassRow, live) >= lim.max_classes:
        raise Refused("This server holds as many classes as it may; try again later.")


def _count(conn, table, *where) -> int:
    return conn.execute(sa.select(sa.func.count()).select_from(table).where(*where)).scalar_one()


def _within(conn, kind: str, who: str, now: float, window: float, most: int) -> bool:
    """Whether ``who`` had fewer than ``most`` events of ``kind`` in the last ``window`` seconds;
    if so, this one is counted."""
    e = EventRow
    n = _count(conn, e, e.kind == kind, e.visitor == who, e.at > now - window)
    if n < most:
        conn.execute(sa.insert(EventRow).values(kind=kind, visitor=who, at=now))
    return n < most


def _students_of(conn, row, *columns) -> list:
    """The class's students in the order they joined (the roster's and the export's numbers)."""
    where = StudentRow.class_id == row.id
    return list(conn.execute(sa.select(*columns).where(where).order_by(StudentRow.id)))


def _update_class(conn, row, **values) -> None:
    conn.execute(sa.update(ClassRow).where(ClassRow.id == row.id).values(**values))


def _delete_classes(conn, ids: list[int]) -> None:
    """Delete classes and their rows explicitly (SQLite enforces no cascade unless told)."""
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        conn.execute(sa.delete(AnswerRow).where(AnswerRow.class_id.in_(chunk)))
        conn.execute(sa.delete(StudentRow).where(StudentRow.class_id.in_(chunk)))
        conn.execute(sa.delete(ClassRow).where(ClassRow.id.in_(chunk)))


def _insert(conn):
    from sqlalchemy.dialects import postgresql, sqlite

    return postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert


_STORES: dict[str, Store] = {}
_STORES_LOCK = threading.Lock()


def get_store() -> Store:
    """This process's store for the configured database (made on first use)."""
    url = database_url()
    with _STORES_LOCK:
        if url not in _STORES:
            _STORES[url] = Store(url)
        return _STORES[url]
