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
    reads that student's own answers, nothing else;
  * the join code is public: it gives what the projector shows (the question, revealed or not).

Bounds (environment variables override them; see ``Limits``): students per class, answers per
student per minute and in all, joins and class starts per visitor (a source address, as
webui.visitor names it) per minute and hour, classes at once, nickname and answer length. A class
expires 12 hours after it starts; expired rows are deleted at most once a minute, by whichever
call comes next. Each answer is one transaction, an upsert on (class, question, part, student):
a resubmission replaces the earlier answer, a retry of the same answer changes nothing.

A database that is down or slow raises ``Unavailable`` (a sentence for the page), never a
driver's traceback; for a few seconds after a failure calls fail at once instead of waiting on
the network again, so a page that polls does not hang.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
import logging
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
    max_students: int = 500  # per class (a lecture hall)
    answers_per_minute: int = 30  # per student: a question has at most 2 parts
    max_submissions: int = 400  # per student per class, everything counted
    joins_per_minute: int = 120  # per visitor (a school's NAT is one visitor)
    classes_per_hour: int = 10  # class starts per visitor
    max_classes: int = 1000  # classes at once, every visitor together
    class_hours: float = 12.0

    @classmethod
    def from_env(cls) -> "Limits":
        d = cls()
        return cls(
            max_students=int(_env_num("KVLAB_CLASS_MAX_STUDENTS", d.max_students, 1, 5000)),
            answers_per_minute=int(
                _env_num("KVLAB_CLASS_ANSWERS_PER_MINUTE", d.answers_per_minute, 1, 1000)
            ),
            max_submissions=d.max_submissions,
            joins_per_minute=int(
                _env_num("KVLAB_CLASS_JOINS_PER_MINUTE", d.joins_per_minute, 1, 100_000)
            ),
            classes_per_hour=int(
                _env_num("KVLAB_CLASS_STARTS_PER_HOUR", d.classes_per_hour, 1, 1000)
            ),
            max_classes=int(_env_num("KVLAB_CLASS_MAX_CLASSES", d.max_classes, 1, 100_000)),
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


def _unavailable_message(url: str) -> str:
    return (
        f"The live class's database ({describe_url(url)}) is not answering, so classes "
        "cannot start, join or answer right now. Everything else in the app works; try "
        "again in a moment."
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
            raise Unavailable(_unavailable_message(self.url))
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
            log.warning("classroom database error: %s", str(e).splitlines()[0][:200])
            raise Unavailable(_unavailable_message(self.url)) from None

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
            live = conn.execute(
                sa.select(sa.func.count()).select_from(ClassRow).where(ClassRow.expires_at > now)
            ).scalar_one()
            if live >= lim.max_classes:
                raise Refused("This server holds as many classes as it may; try again later.")
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
                    .where(StudentRow.class_id == row.id)
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
            return _summarize(view, joined, qi, rows)

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
                        "value": a.value,
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
                right = None if is_choice(q) else q.part(p).value
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
        return json.dumps(doc, indent=1)

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
    def join(self, code: str, nickname: str | None, visitor: str) -> str:
        """A new student of class ``code``: their token (kept by their browser, never shown to
        anyone else)."""
        nick = clean_nickname(nickname)
        visitor = str(visitor)[:VISITOR_MAX]
        raw = str(code or "")
        return self._call(self._join, raw, nick, visitor)

    def _join(self, raw_code: str, nick: str | None, visitor: str) -> str:
        now = self.clock()
        lim = self.limits
        problem = None
        token = secrets.token_urlsafe(16)
        with self._write.begin() as conn:
            recent = conn.execute(
                sa.select(sa.func.count())
                .select_from(EventRow)
                .where(EventRow.kind == "join", EventRow.visitor == visitor, EventRow.at > now - 60)
            ).scalar_one()
            if recent >= lim.joins_per_minute:
                raise Refused(
                    f"Too many joins from this address in a minute (at most "
                    f"{lim.joins_per_minute}); wait a moment and try again."
                )
            # Every attempt counts, a wrong code too: guessing codes costs the same limit.
            conn.execute(sa.insert(EventRow).values(kind="join", visitor=visitor, at=now))
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
                    n = conn.execute(
                        sa.select(sa.func.count())
                        .select_from(StudentRow)
                        .where(StudentRow.class_id == row.id)
                    ).scalar_one()
                    if n >= lim.max_students:
                        problem = Refused(f"This class is full ({lim.max_students} students).")
                    else:
                        conn.execute(
                            sa.insert(StudentRow).values(
                                class_id=row.id,
                                token_hash=_hash(token),
                                nickname=nick,
                                visitor=visitor,
                                joined_at=now,
                                window_start=0.0,
                                window_count=0,
                                submissions=0,
                            )
                        )
        if problem is not None:
            raise problem
        return token

    def _student(self, conn, token: str):
        """(student, class) rows of a student token, or NotAllowed."""
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
                "This student's place is not in any class now (the class ended, "
                "or the link is not yours): join again with the code."
            )
        if row.expires_at <= self.clock():
            raise Refused("This class has ended.")
        return row

    def student_view(self, token: str) -> tuple[ClassView, dict[tuple[int, int], dict]]:
        """The class as this student sees it, and their own answers:
        {(question, part): {"text", "correct", "slip", "attempts"}}."""

        def _sv():
            with self.engine.connect() as conn:
                st = self._student(conn, token)
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

    def answer(self, token: str, question: int, part: int, text: str):
        """Grade and store a student's answer to the question on screen, in one transaction.
        Returns (graded, stored): an unreadable answer (a typo) is graded, not stored."""
        text = str(text or "")
        if len(text) > ANSWER_TEXT_MAX:
            raise Refused(f"An answer has at most {ANSWER_TEXT_MAX} characters.")
        return self._call(self._answer, token, int(question), int(part), text)

    def _answer(self, token: str, question: int, part: int, text: str):
        now = self.clock()
        lim = self.limits
        with self._write.begin() as conn:
            st = self._student(conn, token)
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


def _delete_classes(conn, ids: list[int]) -> None:
    """Delete classes and their rows explicitly (SQLite enforces no cascade unless told)."""
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        conn.execute(sa.delete(AnswerRow).where(AnswerRow.class_id.in_(chunk)))
        conn.execute(sa.delete(StudentRow).where(StudentRow.class_id.in_(chunk)))
        conn.execute(sa.delete(ClassRow).where(ClassRow.id.in_(chunk)))


def _insert(conn):
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert


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
