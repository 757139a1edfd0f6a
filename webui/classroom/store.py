"""The live class's store: every class, student and answer in one database that every replica
shares (SQLAlchemy 2.x; the schema made by the Alembic migrations in migrations/).

Where: ``KVLAB_DATABASE_URL`` (``postgresql://user:password@host/db``, driven by psycopg 3) for
replicas; without it a SQLite file, ``classroom.db`` in ``KVLAB_DATA_DIR`` (default: ``data/``
in the project's folder), so one machine needs no setup. The schema is brought to the newest
migration (``alembic upgrade head``) when a process first uses the store; on PostgreSQL under an
advisory lock, so replicas that start together migrate one at a time.

Who may do what, checked here on every call, never by the page:
  * the teacher key (``secrets.token_urlsafe(32)``, 256 random bits) opens the results, moves
    the class, reveals, exports and ends it; it is stored as its SHA-256 and compared in constant
    time (``hmac.compare_digest``); it is never part of the join code or link;
  * a student token (128 random bits, also stored hashed) answers the question on screen and
    reads that student's own answers, nothing else, and only from the browser that joined
    (webui.visitor.browser_id): one student per browser per class, a second join from that
    browser is the same student under a new token;
  * the join code is public: it gives what the projector shows (the question, revealed or not).

Bounds (environment variables override them; see ``Limits``, which gives their arithmetic):
students per class and per address in a class, answers per student per minute and in all, joins
per browser and per address a minute, class starts per address an hour, classes at once per
address, per network and in all, nickname and answer length; nicknames unique in a class. The
teacher can close a class to new students and remove students. A class
expires 12 hours after it starts; expired rows are deleted at most once a minute, by whichever
call comes next. Each answer is one transaction, an upsert on (class, question, part, student):
a resubmission replaces the earlier answer, a retry of the same answer changes nothing.

A database that is down or slow raises ``Unavailable`` (a sentence for the page, which names
neither the database's address nor a file's path: the server's log does), never a driver's
traceback; for a few seconds after a failure calls fail at once instead of waiting on
the network again, so a page that polls does not hang.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
import logging
import math
import os
import re
import secrets
import threading
import time
import unicodedata
from dataclasses import asdict, dataclass, field
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from ..visitor import network_of
from .deck import deck, grade_answer, is_choice, parts, value_label
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

__all__ = [
    "Store",
    "Limits",
    "Unavailable",
    "Refused",
    "NotAllowed",
    "NewClass",
    "ClassView",
    "Results",
    "Student",
    "Roster",
    "database_url",
    "get_store",
    "clean_nickname",
    "clean_code",
    "CODE_ALPHABET",
    "CODE_LENGTH",
]

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
MIGRATIONS = Path(__file__).resolve().parent / "migrations"
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


def _env_num(name: str, default: float, lo: float, hi: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number, not {raw[:20]!r}") from None
    return min(max(value, lo), hi)


@dataclass(frozen=True)
class Limits:
    """The bounds of the live class (issue 39: sized for a class of 400 behind one address).

    Who is counted (webui.visitor): a browser (a phone), an address (an IPv4 address or an IPv6
    /64: a school's NAT is one address for its whole class) and a network (an IPv4 /24, an IPv6
    /48). A person meets the per-browser limits; the per-address ones are ceilings against a
    script that claims to be many browsers, sized so that a class of 400 behind one address does
    not reach them:

    * joins_per_minute, per address: 400 students, each join tried twice in the worst minute (a
      mistyped code, a retry after a dropped network) is 800, plus a quarter for a second class
      behind the same address or the teacher's own test joins: 1,000. Wrong codes count too, so
      it also bounds guessing: at 1,000 guesses a minute against 32^6 = 1.07e9 codes with at
      most 1,000 classes live, one address finds a class about once in 1,000 minutes, and a
      found code opens only a student's place;
    * joins_per_browser, per browser a minute: 10 (a student joins once; typos and reloads);
    * students_per_address, per class: 400 of the class's 500 places, so 100 stay for
      students on other addresses whatever one address does;
    * classes_per_hour and live_classes, per address: 10 class starts an hour, 20 classes at
      once (a school's teachers behind one NAT);
    * network_share of max_classes, per network: a tenth (100 of 1,000), so one network
      cannot take every class slot of the server (issue 39 B16: one IPv6 /64 took all 1,000).
    """

    max_students: int = 500  # per class (a lecture hall)
    answers_per_minute: int = 30  # per student: a question has at most 2 parts
    max_submissions: int = 400  # per student per class, everything counted
    joins_per_minute: int = 1000  # per address (see above)
    joins_per_browser: int = 10  # per browser per minute
    students_per_address: int = 400  # per class
    classes_per_hour: int = 10  # class starts per address
    live_classes: int = 20  # classes at once per address
    network_share: float = 0.1  # of max_classes, per network
    max_classes: int = 1000  # classes at once, every visitor together
    class_hours: float = 12.0

    @property
    def classes_per_network(self) -> int:
        return max(1, int(self.max_classes * self.network_share))

    @classmethod
    def from_env(cls) -> "Limits":
        d = cls()

        def num(name: str, default: float, lo: float, hi: float) -> int:
            return int(_env_num(name, default, lo, hi))

        return cls(
            max_students=num("KVLAB_CLASS_MAX_STUDENTS", d.max_students, 1, 5000),
            answers_per_minute=num("KVLAB_CLASS_ANSWERS_PER_MINUTE", d.answers_per_minute, 1, 1000),
            max_submissions=d.max_submissions,
            joins_per_minute=num("KVLAB_CLASS_JOINS_PER_MINUTE", d.joins_per_minute, 1, 100_000),
            joins_per_browser=num("KVLAB_CLASS_JOINS_PER_BROWSER", d.joins_per_browser, 1, 1000),
            students_per_address=num(
                "KVLAB_CLASS_STUDENTS_PER_ADDRESS", d.students_per_address, 1, 5000
            ),
            classes_per_hour=num("KVLAB_CLASS_STARTS_PER_HOUR", d.classes_per_hour, 1, 1000),
            live_classes=num("KVLAB_CLASS_LIVE_PER_ADDRESS", d.live_classes, 1, 100_000),
            network_share=_env_num("KVLAB_CLASS_NETWORK_SHARE", d.network_share, 0.001, 1.0),
            max_classes=num("KVLAB_CLASS_MAX_CLASSES", d.max_classes, 1, 100_000),
            class_hours=_env_num("KVLAB_CLASS_HOURS", d.class_hours, 0.01, 48),
        )


def database_url() -> str:
    """KVLAB_DATABASE_URL, or the SQLite file in KVLAB_DATA_DIR (default: data/)."""
    url = os.environ.get("KVLAB_DATABASE_URL", "").strip()
    if url:
        return url
    data = Path(os.environ.get("KVLAB_DATA_DIR", "").strip() or ROOT / "data")
    return f"sqlite:///{data / 'classroom.db'}"


def describe_url(url: str) -> str:
    """The database for a message: its kind and place, never a password."""
    try:
        u = sa.engine.make_url(url)
    except sa_exc.ArgumentError:
        return "an unreadable KVLAB_DATABASE_URL"
    if u.get_backend_name() == "sqlite":
        return f"SQLite ({u.database})"
    return f"PostgreSQL ({u.host or 'localhost'}:{u.port or 5432}/{u.database or ''})"


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


@dataclass(frozen=True)
class NewClass:
    code: str
    key: str  # the teacher key: shown once, to the teacher only


@dataclass(frozen=True)
class ClassView:
    """What the projector and every student may see: no results, no key."""

    code: str
    seed: int
    position: int  # the question on screen, from 0
    revealed: bool
    version: int
    expires_at: float
    count: int  # questions in the deck


@dataclass
class PartResult:
    part: int
    answered: int = 0
    correct: int = 0
    first_correct: int = 0
    bars: list[tuple[str, int, bool]] = field(default_factory=list)  # (label, count, correct)
    slips: list[tuple[str, int]] = field(default_factory=list)  # named mistakes, most first


@dataclass
class Results:
    view: ClassView
    joined: int
    question: int
    answered: int  # students with an answer to every part of the question
    parts: list[PartResult]
    joining: bool = True  # new students may join


@dataclass(frozen=True)
class Student:
    """A student as the teacher's roster lists them (never on the projector)."""

    number: int  # in the order they joined, from 1, as the export numbers them
    nickname: str
    answers: int


@dataclass(frozen=True)
class Roster:
    joining: bool  # new students may join
    students: list[Student]


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
        self.engine = _make_engine(self.url)
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
        except (
            sa_exc.OperationalError,
            sa_exc.InterfaceError,
            sa_exc.TimeoutError,
            sa_exc.DatabaseError,
            sa_exc.DisconnectionError,
            OSError,
        ) as e:
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

    def ping(self) -> None:
        """Raise Unavailable unless the database answers (and its schema is ready)."""

        def _ping():
            with self.engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))

        self._call(_ping)

    # -- the teacher ------------------------------------------------------------------------
    def create_class(self, seed: int, visitor: str) -> NewClass:
        seed = int(seed)
        if not 0 <= seed <= 999_999:
            raise Refused("The practice set is a number from 0 to 999,999.")
        visitor = str(visitor)[:VISITOR_MAX]
        return self._call(self._create, seed, visitor)

    def _create(self, seed: int, visitor: str) -> NewClass:
        now = self.clock()
        lim = self.limits
        network = network_of(visitor)
        with self._write.begin() as conn:
            recent = conn.execute(
                sa.select(sa.func.count())
                .select_from(EventRow)
                .where(
                    EventRow.kind == "start", EventRow.visitor == visitor, EventRow.at > now - 3600
                )
            ).scalar_one()
            if recent >= lim.classes_per_hour:
                raise Refused(
                    f"At most {lim.classes_per_hour} classes an hour can be started "
                    "from one address; use one you started, or wait."
                )
            _check_live_classes(conn, now, lim, visitor, network)
            conn.execute(sa.insert(EventRow).values(kind="start", visitor=visitor, at=now))
            key = secrets.token_urlsafe(32)
            for _ in range(8):
                code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
                taken = conn.execute(sa.select(ClassRow.id).where(ClassRow.code == code)).first()
                if taken is None:
                    break
            else:  # pragma: no cover - 8 collisions in a billion codes
                raise Refused("No free join code was found; try again.")
            conn.execute(
                sa.insert(ClassRow).values(
                    code=code,
                    key_hash=_hash(key),
                    seed=seed,
                    position=0,
                    revealed=False,
                    version=0,
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

    def check_teacher(self, code: str, key: str) -> ClassView:
        def _check():
            with self.engine.connect() as conn:
                return _view(self._teacher_class(conn, code, key))

        return self._call(_check)

    def move(self, code: str, key: str, to: int) -> ClassView:
        """Put question ``to`` (from 0, clamped to the deck) on every screen, answer hidden."""

        def _move():
            with self._write.begin() as conn:
                row = self._teacher_class(conn, code, key)
                pos = min(max(int(to), 0), len(deck(row.seed)) - 1)
                conn.execute(
                    sa.update(ClassRow)
                    .where(ClassRow.id == row.id)
                    .values(position=pos, revealed=False, version=ClassRow.version + 1)
                )
            self._views.pop(row.code, None)
            return self._class_view(row.code)

        return self._call(_move)

    def reveal(self, code: str, key: str, on: bool = True) -> ClassView:
        """Show (or hide again) the worked solution on every student's screen; while it shows,
        answers to the question are closed."""

        def _reveal():
            with self._write.begin() as conn:
                row = self._teacher_class(conn, code, key)
                conn.execute(
                    sa.update(ClassRow)
                    .where(ClassRow.id == row.id)
                    .values(revealed=bool(on), version=ClassRow.version + 1)
                )
            self._views.pop(row.code, None)
            return self._class_view(row.code)

        return self._call(_reveal)

    def end(self, code: str, key: str) -> None:
        """Delete the class and every row of it now."""

        def _end():
            with self._write.begin() as conn:
                row = self._teacher_class(conn, code, key)
                _delete_classes(conn, [row.id])
            self._views.pop(row.code, None)

        self._call(_end)

    def set_joining(self, code: str, key: str, open_: bool) -> None:
        """Let new students join the class, or not (a student who joined comes back all the
        same, from the browser that joined)."""

        def _set():
            with self._write.begin() as conn:
                row = self._teacher_class(conn, code, key)
                conn.execute(
                    sa.update(ClassRow).where(ClassRow.id == row.id).values(joining=bool(open_))
                )

        self._call(_set)

    def roster(self, code: str, key: str) -> Roster:
        """Whether the class takes new students, and its students (not those removed),
        numbered as the export numbers them."""

        def _roster():
            with self.engine.connect() as conn:
                row = self._teacher_class(conn, code, key)
                s, a = StudentRow.__table__, AnswerRow.__table__
                answers = (
                    sa.select(a.c.student_id, sa.func.count().label("n"))
                    .where(a.c.class_id == row.id)
                    .group_by(a.c.student_id)
                    .subquery()
                )
                rows = conn.execute(
                    sa.select(s.c.id, s.c.nickname, s.c.removed, answers.c.n)
                    .outerjoin(answers, answers.c.student_id == s.c.id)
                    .where(s.c.class_id == row.id)
                    .order_by(s.c.id)
                ).all()
            students = [
                Student(number=i + 1, nickname=r.nickname or "", answers=int(r.n or 0))
                for i, r in enumerate(rows)
                if not r.removed
            ]
            return Roster(joining=bool(row.joining), students=students)

        return self._call(_roster)

    def remove_students(self, code: str, key: str, numbers) -> int:
        """Remove students (by their roster numbers) and their answers: their places open no
        more, their browsers cannot join this class again, their nicknames are free. Returns
        how many were removed."""
        wanted = {int(n) for n in numbers}

        def _remove():
            with self._write.begin() as conn:
                row = self._teacher_class(conn, code, key)
                ids = [
                    sid
                    for i, (sid,) in enumerate(
                        conn.execute(
                            sa.select(StudentRow.id)
                            .where(StudentRow.class_id == row.id)
                            .order_by(StudentRow.id)
                        ).all()
                    )
                    if i + 1 in wanted
                ]
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
                conn.execute(
                    sa.update(ClassRow)
                    .where(ClassRow.id == row.id)
                    .values(version=ClassRow.version + 1)
                )
            self._views.pop(row.code, None)
            return int(done or 0)

        return self._call(_remove)

    def results(self, code: str, key: str, question: int | None = None) -> Results:
        """The class's figures for ``question`` (default: the one on screen)."""

        def _results():
            with self.engine.connect() as conn:
                row = self._teacher_class(conn, code, key)
                view = _view(row)
                qi = view.position if question is None else int(question)
                if not 0 <= qi < view.count:
                    raise Refused(f"There is no question {qi + 1} in this class.")
                joined = conn.execute(
                    sa.select(sa.func.count())
                    .select_from(StudentRow)
                    .where(StudentRow.class_id == row.id, StudentRow.removed == sa.false())
                ).scalar_one()
                rows = conn.execute(
                    sa.select(
                        AnswerRow.student_id,
                        AnswerRow.part,
                        AnswerRow.value,
                        AnswerRow.correct,
                        AnswerRow.first_correct,
                        AnswerRow.slip,
                    ).where(AnswerRow.class_id == row.id, AnswerRow.question == qi)
                ).all()
            r = _summarize(view, joined, qi, rows)
            r.joining = bool(row.joining)
            return r

        return self._call(_results)

    def export(self, code: str, key: str, names: bool = False) -> list[dict]:
        """Every answer of the class, one row each: question, part, student (anonymous: a
        number in join order), the answer, correct or not, the named slip; ``names`` adds the
        nicknames students chose to give."""

        def _export():
            with self.engine.connect() as conn:
                row = self._teacher_class(conn, code, key)
                students = conn.execute(
                    sa.select(StudentRow.id, StudentRow.nickname)
                    .where(StudentRow.class_id == row.id)
                    .order_by(StudentRow.id)
                ).all()
                answers = conn.execute(
                    sa.select(AnswerRow.__table__)
                    .where(AnswerRow.class_id == row.id)
                    .order_by(AnswerRow.question, AnswerRow.part, AnswerRow.student_id)
                ).all()
            number = {s.id: i + 1 for i, s in enumerate(students)}
            nick = {s.id: s.nickname or "" for s in students}
            qs = deck(row.seed)
            out = []
            for a in answers:
                q = qs[a.question]
                r = {
                    "question": a.question + 1,
                    "qid": q.qid,
                    "part": a.part,
                    "student": number.get(a.student_id, 0),
                }
                if names:
                    r["nickname"] = nick.get(a.student_id, "")
                r.update(
                    {
                        "answer": a.text,
                        "value": _finite(a.value),
                        "value_label": value_label(q, a.part, a.value),
                        "correct": bool(a.correct),
                        "first_correct": bool(a.first_correct),
                        "attempts": a.attempts,
                        "slip": a.slip,
                        "answered_at": round(a.answered_at, 3),
                    }
                )
                out.append(r)
            return out

        return self._call(_export)

    def export_csv(self, code: str, key: str, names: bool = False) -> str:
        rows = self.export(code, key, names)
        cols = (
            ["question", "qid", "part", "student"]
            + (["nickname"] if names else [])
            + [
                "answer",
                "value",
                "value_label",
                "correct",
                "first_correct",
                "attempts",
                "slip",
                "answered_at",
            ]
        )
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: _cell(v) for k, v in r.items()})
        return buf.getvalue()

    def export_json(self, code: str, key: str, names: bool = False) -> str:
        rows = self.export(code, key, names)
        view = self.check_teacher(code, key)
        qs = deck(view.seed)
        questions = []
        for i, q in enumerate(qs):
            ps = []
            for p in parts(q):
                right = None if is_choice(q) else _finite(q.part(p).value)
                ps.append(
                    {
                        "part": p,
                        "right_value": right,
                        "answers": [r for r in rows if r["question"] == i + 1 and r["part"] == p],
                    }
                )
            questions.append(
                {"number": i + 1, "qid": q.qid, "level": q.level, "prompt": q.prompt, "parts": ps}
            )
        doc = {
            "class": view.code,
            "practice_set": view.seed,
            "exported_at": round(self.clock(), 3),
            "nicknames": bool(names),
            "questions": questions,
        }
        # Strict JSON (issue 39 B14: an infinity was written as Infinity, which strict parsers
        # refuse): every number is finite (_finite), and allow_nan=False makes sure of it.
        return json.dumps(doc, indent=1, allow_nan=False)

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
        view = _view(row)
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
        raw = str(code or "")
        return self._call(self._join, raw, nick, visitor, browser)

    def _join(self, raw_code: str, nick: str | None, visitor: str, browser: str | None) -> str:
        now = self.clock()
        problem = None
        token = secrets.token_urlsafe(16)
        with self._write.begin() as conn:
            self._count_join(conn, now, visitor, browser)
            try:
                code = clean_code(raw_code)
            except Refused as e:
                problem = e
            else:
                row = conn.execute(
                    sa.select(ClassRow.__table__).where(ClassRow.code == code).with_for_update()
                ).first()
                if row is None or row.expires_at <= now:
                    problem = Refused(
                        "There is no class with this code now. Check it on the teacher's screen."
                    )
                else:
                    problem = self._seat(conn, row, token, nick, visitor, browser, now)
        if problem is not None:
            raise problem
        return token

    def _count_join(self, conn, now: float, visitor: str, browser: str | None) -> None:
        """Count a join against the browser's limit and the address's ceiling (Refused when one
        is used up). Every attempt counts, a wrong code too: guessing codes costs the same."""
        lim = self.limits

        def recent(kind: str, who: str) -> int:
            return conn.execute(
                sa.select(sa.func.count())
                .select_from(EventRow)
                .where(EventRow.kind == kind, EventRow.visitor == who, EventRow.at > now - 60)
            ).scalar_one()

        if browser is not None and recent("join-browser", browser) >= lim.joins_per_browser:
            raise Refused(
                f"Too many joins from this browser in a minute (at most "
                f"{lim.joins_per_browser}); wait a moment and try again."
            )
        if recent("join", visitor) >= lim.joins_per_minute:
            raise Refused(
                f"Too many joins from your network in a minute (at most "
                f"{lim.joins_per_minute}); wait a moment and try again."
            )
        conn.execute(sa.insert(EventRow).values(kind="join", visitor=visitor, at=now))
        if browser is not None:
            conn.execute(sa.insert(EventRow).values(kind="join-browser", visitor=browser, at=now))

    def _seat(self, conn, row, token, nick, visitor, browser, now) -> Refused | None:
        """Seat a student in class ``row`` under ``token`` (lock held on the class): this
        browser's student again, or a new one within the class's bounds; else the refusal."""
        lim = self.limits
        s = StudentRow.__table__
        mine = (
            conn.execute(
                sa.select(s.c.id, s.c.removed, s.c.nickname_key).where(
                    s.c.class_id == row.id, s.c.browser == browser
                )
            ).first()
            if browser
            else None
        )
        key = nick.casefold() if nick else None
        if key is not None and (mine is None or mine.nickname_key != key):
            taken = conn.execute(
                sa.select(s.c.id).where(s.c.class_id == row.id, s.c.nickname_key == key)
            ).first()
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
        seated = s.c.class_id == row.id, s.c.removed == sa.false()
        n = conn.execute(sa.select(sa.func.count()).select_from(s).where(*seated)).scalar_one()
        if n >= lim.max_students:
            return Refused(f"This class is full ({lim.max_students} students).")
        here = conn.execute(
            sa.select(sa.func.count()).select_from(s).where(*seated, s.c.visitor == visitor)
        ).scalar_one()
        if here >= lim.students_per_address:
            return Refused(
                f"This class has {here} students from your network already, as many as one "
                "network may bring; ask your teacher."
            )
        conn.execute(
            sa.insert(StudentRow).values(
                class_id=row.id,
                token_hash=_hash(token),
                nickname=nick,
                nickname_key=key,
                visitor=visitor,
                browser=browser or "anon:" + secrets.token_hex(8),
                removed=False,
                joined_at=now,
                window_start=0.0,
                window_count=0,
                submissions=0,
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
        s = StudentRow.__table__
        c = ClassRow.__table__
        row = conn.execute(
            sa.select(
                s,
                c.c.code,
                c.c.seed,
                c.c.position,
                c.c.revealed,
                c.c.version,
                c.c.expires_at,
                c.c.key_hash,
                c.c.created_at,
                c.c.creator,
            )
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

        def _sv():
            with self.engine.connect() as conn:
                st = self._student(conn, token, browser)
                rows = conn.execute(
                    sa.select(
                        AnswerRow.question,
                        AnswerRow.part,
                        AnswerRow.text,
                        AnswerRow.correct,
                        AnswerRow.slip,
                        AnswerRow.attempts,
                    ).where(AnswerRow.student_id == st.id)
                ).all()
            view = ClassView(
                code=st.code,
                seed=st.seed,
                position=st.position,
                revealed=bool(st.revealed),
                version=st.version,
                expires_at=st.expires_at,
                count=len(deck(st.seed)),
            )
            mine = {
                (r.question, r.part): {
                    "text": r.text,
                    "correct": bool(r.correct),
                    "slip": r.slip,
                    "attempts": r.attempts,
                }
                for r in rows
            }
            return view, mine

        return self._call(_sv)

    def answer(self, token: str, question: int, part: int, text: str, browser: str | None = None):
        """Grade and store a student's answer to the question on screen, in one transaction,
        from ``browser`` (only the browser that holds the place answers; None: not checked).
        Returns (graded, stored): an unreadable answer (a typo) is graded, not stored."""
        text = str(text or "")
        if len(text) > ANSWER_TEXT_MAX:
            raise Refused(f"An answer has at most {ANSWER_TEXT_MAX} characters.")
        return self._call(self._answer, token, int(question), int(part), text, browser)

    def _answer(self, token: str, question: int, part: int, text: str, browser: str | None):
        now = self.clock()
        lim = self.limits
        with self._write.begin() as conn:
            st = self._student(conn, token, browser)
            if question != st.position:
                raise Refused(
                    f"The class has moved on: the teacher is on question {st.position + 1}."
                )
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
            a = AnswerRow.__table__
            stmt = stmt.on_conflict_do_update(
                index_elements=[a.c.class_id, a.c.question, a.c.part, a.c.student_id],
                set_={
                    "text": stmt.excluded.text,
                    "value": stmt.excluded.value,
                    "correct": stmt.excluded.correct,
                    "slip": stmt.excluded.slip,
                    "answered_at": stmt.excluded.answered_at,
                    "attempts": sa.case(
                        (a.c.text != stmt.excluded.text, a.c.attempts + 1), else_=a.c.attempts
                    ),
                },
            )
            conn.execute(stmt)
        return graded, True

    # -- housekeeping -----------------------------------------------------------------------
    def purge(self) -> int:
        """Delete every expired class with its students and answers, and limit events older
        than an hour; returns the classes deleted."""
        now = self.clock()
        with self._write.begin() as conn:
            ids = [
                r[0]
                for r in conn.execute(
                    sa.select(ClassRow.id).where(ClassRow.expires_at <= now)
                ).all()
            ]
            _delete_classes(conn, ids)
            conn.execute(sa.delete(EventRow).where(EventRow.at < now - 3600))
        for code, (_, v) in list(self._views.items()):
            if v.expires_at <= now:
                self._views.pop(code, None)
        return len(ids)

    def counts(self) -> dict[str, int]:
        """Rows per table (for the tests and the bench)."""

        def _counts():
            with self.engine.connect() as conn:
                return {
                    t.__tablename__: conn.execute(
                        sa.select(sa.func.count()).select_from(t)
                    ).scalar_one()
                    for t in (ClassRow, StudentRow, AnswerRow, EventRow)
                }

        return self._call(_counts)

    def dispose(self) -> None:
        self.engine.dispose()


# -- helpers ----------------------------------------------------------------------------------


def _view(row) -> ClassView:
    return ClassView(
        code=row.code,
        seed=row.seed,
        position=row.position,
        revealed=bool(row.revealed),
        version=row.version,
        expires_at=row.expires_at,
        count=len(deck(row.seed)),
    )


def _summarize(view: ClassView, joined: int, qi: int, rows) -> Results:
    q = deck(view.seed)[qi]
    out = []
    by_student: dict[int, set[int]] = {}
    for p in parts(q):
        pr = PartResult(part=p)
        bars: dict[str, list] = {}
        slips: dict[str, int] = {}
        for r in rows:
            if r.part != p:
                continue
            by_student.setdefault(r.student_id, set()).add(p)
            pr.answered += 1
            pr.correct += bool(r.correct)
            pr.first_correct += bool(r.first_correct)
            label = value_label(q, p, r.value)
            bar = bars.setdefault(label, [0, False, r.value if r.value is not None else 0.0])
            bar[0] += 1
            bar[1] = bar[1] or bool(r.correct)
            if not r.correct and r.slip:
                slips[r.slip] = slips.get(r.slip, 0) + 1
        order = sorted(bars.items(), key=lambda kv: kv[1][2])
        pr.bars = [(label, b[0], b[1]) for label, b in order]
        pr.slips = sorted(slips.items(), key=lambda kv: (-kv[1], kv[0]))
        out.append(pr)
    need = set(parts(q))
    answered = sum(1 for got in by_student.values() if got >= need)
    return Results(view=view, joined=joined, question=qi, answered=answered, parts=out)


def _same_browser(held: str, asking: str) -> bool:
    """Whether ``asking`` may act for a place ``held`` by a browser. A place a browser took
    with its cookie (``b:``) is that browser's alone, whatever the request sends or leaves out.
    A place taken without one (``s:``, a session's own id: XSRF protection off, or a client that
    sent no cookie) has only its token to go by, as before: that browser's next page load is a
    new session."""
    if held.startswith("b:"):
        return hmac.compare_digest(held, asking)
    return True


def _check_live_classes(conn, now: float, lim: Limits, visitor: str, network: str) -> None:
    """Refused when a new class would pass the classes live at once of the address, of its
    network (a share of the server's, the reserve of issue 39 B16) or of the server."""
    live = ClassRow.expires_at > now

    def count(*where) -> int:
        return conn.execute(
            sa.select(sa.func.count()).select_from(ClassRow).where(live, *where)
        ).scalar_one()

    if count(ClassRow.creator == visitor) >= lim.live_classes:
        raise Refused(
            f"{lim.live_classes} classes started from your address are running already (at "
            "most that many at once): end one you no longer need, or use one of them."
        )
    if count(ClassRow.network == network) >= lim.classes_per_network:
        raise Refused(
            f"Classes started from your network hold {lim.classes_per_network} of this "
            "server's places, as many as one network may: end one you no longer need, or "
            "try again later."
        )
    if count() >= lim.max_classes:
        raise Refused("This server holds as many classes as it may; try again later.")


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


def _finite(value: float | None) -> float | None:
    """A stored number for an export: None where it is not a finite number (a row stored before
    the grader refused such answers), so the export stays strict JSON."""
    if value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _cell(value):
    """A CSV cell that a spreadsheet will not run: text starting with = + - @ (not a number)
    gets a leading apostrophe."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        try:
            float(value.replace(",", ""))
        except ValueError:
            return "'" + value
    return value


def _make_engine(url: str):
    try:
        u = sa.engine.make_url(url)
    except sa_exc.ArgumentError:
        raise ValueError(
            "KVLAB_DATABASE_URL is not a database URL: give e.g. "
            "postgresql://user:password@host:5432/kvlab"
        ) from None
    backend = u.get_backend_name()
    if backend in ("postgresql", "postgres"):
        if u.drivername in ("postgresql", "postgres"):
            u = u.set(drivername="postgresql+psycopg")
        return sa.create_engine(
            u,
            pool_size=5,
            max_overflow=10,
            pool_timeout=5,
            pool_pre_ping=True,
            pool_recycle=300,
            connect_args={
                "connect_timeout": 3,
                "application_name": "kvcache-lab",
                "options": "-c statement_timeout=5000 -c lock_timeout=3000 "
                "-c idle_in_transaction_session_timeout=15000",
            },
        )
    if backend != "sqlite":
        raise ValueError(f"The live class keeps its data in PostgreSQL or SQLite, not {backend!r}.")
    engine = sa.create_engine(u, connect_args={"timeout": 5, "check_same_thread": False})

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, record):  # SQLAlchemy's recipe: we issue BEGIN ourselves
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA busy_timeout = 5000")
        cur.execute("PRAGMA journal_mode = WAL")  # readers never wait for the writer
        cur.execute("PRAGMA synchronous = NORMAL")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn):
        # A transaction that writes takes the write lock at BEGIN, so two writers queue on the
        # busy timeout instead of one failing when it upgrades from reading to writing.
        write = conn.get_execution_options().get("kvlab_write")
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def upgrade(engine) -> None:
    """``alembic upgrade head`` on this engine's database."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.execution_options(kvlab_write=True).begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


_STORES: dict[str, Store] = {}
_STORES_LOCK = threading.Lock()


def get_store() -> Store:
    """This process's store for the configured database (made on first use)."""
    url = database_url()
    with _STORES_LOCK:
        s = _STORES.get(url)
        if s is None:
            s = _STORES[url] = Store(url)
        return s


def results_dict(r: Results) -> dict:
    return {
        "joined": r.joined,
        "question": r.question,
        "answered": r.answered,
        "view": asdict(r.view),
        "parts": [asdict(p) for p in r.parts],
    }
