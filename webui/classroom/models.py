"""The live class's tables (SQLAlchemy 2.x declarative models; the schema itself is made by the
Alembic migrations beside this file, never by ``create_all``).

Times are seconds since the epoch (a float, the same in SQLite and PostgreSQL), compared with
the asking replica's clock. Secrets are stored hashed (SHA-256 of a 256-bit teacher key, of a
128-bit student token): a copy of the database opens no class. ``creator`` and a student's
``visitor`` are source addresses (an IPv4 address or an IPv6 /64), ``network`` the IPv4 /24 or
IPv6 /48 around a class's creator, a student's ``browser`` the hashed key of the browser that
joined (webui.visitor): only that browser answers for the student.
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    UniqueConstraint,
    false,
    true,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NICKNAME_MAX = 24
ANSWER_TEXT_MAX = 64
SLIP_MAX = 400
VISITOR_MAX = 80
# A nickname compared case-insensitively (str.casefold, which may lengthen it: "ß" -> "ss").
NICKNAME_KEY_MAX = 3 * NICKNAME_MAX


class Base(DeclarativeBase):
    pass


class ClassRow(Base):
    __tablename__ = "classroom_classes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    code: Mapped[str] = mapped_column(String(8), unique=True)
    key_hash: Mapped[str] = mapped_column(String(64))
    seed: Mapped[int] = mapped_column(Integer)  # the practice set
    position: Mapped[int] = mapped_column(Integer, default=0)  # the question on screen, from 0
    revealed: Mapped[bool] = mapped_column(Boolean, default=False)
    version: Mapped[int] = mapped_column(Integer, default=0)  # +1 on every move or reveal
    creator: Mapped[str] = mapped_column(String(VISITOR_MAX), index=True)
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float] = mapped_column(Float, index=True)
    network: Mapped[str] = mapped_column(String(VISITOR_MAX), server_default="", index=True)
    joining: Mapped[bool] = mapped_column(Boolean, server_default=true())  # new students may join


class StudentRow(Base):
    __tablename__ = "classroom_students"
    __table_args__ = (
        Index("ix_classroom_students_class_browser", "class_id", "browser"),
        Index("ix_classroom_students_class_visitor", "class_id", "visitor"),
        # Nicknames unique within a class; NULL (no nickname, or a removed student's) repeats.
        Index("uq_classroom_students_nickname", "class_id", "nickname_key", unique=True),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    class_id: Mapped[int] = mapped_column(
        ForeignKey("classroom_classes.id", ondelete="CASCADE"), index=True
    )
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    nickname: Mapped[str | None] = mapped_column(String(NICKNAME_MAX), nullable=True)
    nickname_key: Mapped[str | None] = mapped_column(String(NICKNAME_KEY_MAX), nullable=True)
    visitor: Mapped[str] = mapped_column(String(VISITOR_MAX))
    browser: Mapped[str] = mapped_column(String(VISITOR_MAX), server_default="")
    removed: Mapped[bool] = mapped_column(Boolean, server_default=false())  # by the teacher
    joined_at: Mapped[float] = mapped_column(Float)
    # Submissions in the current one-minute window (the per-student rate limit), and in all.
    window_start: Mapped[float] = mapped_column(Float, default=0.0)
    window_count: Mapped[int] = mapped_column(Integer, default=0)
    submissions: Mapped[int] = mapped_column(Integer, default=0)


class AnswerRow(Base):
    __tablename__ = "classroom_answers"
    __table_args__ = (
        UniqueConstraint("class_id", "question", "part", "student_id", name="uq_classroom_answer"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    class_id: Mapped[int] = mapped_column(
        ForeignKey("classroom_classes.id", ondelete="CASCADE"), index=True
    )
    student_id: Mapped[int] = mapped_column(
        ForeignKey("classroom_students.id", ondelete="CASCADE"), index=True
    )
    question: Mapped[int] = mapped_column(Integer)  # index in the class's deck, from 0
    part: Mapped[int] = mapped_column(Integer)  # 1, or 2 for a question's second number
    text: Mapped[str] = mapped_column(String(ANSWER_TEXT_MAX))
    value: Mapped[float | None] = mapped_column(Float, nullable=True)
    correct: Mapped[bool] = mapped_column(Boolean)
    first_correct: Mapped[bool] = mapped_column(Boolean)
    slip: Mapped[str] = mapped_column(String(SLIP_MAX), default="")
    attempts: Mapped[int] = mapped_column(Integer, default=1)  # distinct answers given
    answered_at: Mapped[float] = mapped_column(Float)


class EventRow(Base):
    """Joins and class starts per visitor, for the limits per minute shared by every replica."""

    __tablename__ = "classroom_events"
    __table_args__ = (Index("ix_classroom_events_kind_visitor_at", "kind", "visitor", "at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    visitor: Mapped[str] = mapped_column(String(VISITOR_MAX))
    at: Mapped[float] = mapped_column(Float)
