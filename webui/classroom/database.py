"""Where the live class keeps its data (``KVLAB_DATABASE_URL``, else a SQLite file in
``KVLAB_DATA_DIR``: docs/live-class.md), its engine, and its schema (the Alembic migrations in
migrations/, ``upgrade``).
"""

from __future__ import annotations

import os
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

ROOT = Path(__file__).resolve().parents[2]
MIGRATIONS = Path(__file__).resolve().parent / "migrations"


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


def make_engine(url: str):
    """A SQLAlchemy engine for ``url``: PostgreSQL through psycopg 3 with short timeouts, or
    SQLite in WAL mode, a writing transaction taking the write lock at BEGIN."""
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
