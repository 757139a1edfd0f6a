"""What the live-class tests share: a real PostgreSQL server (never a mock), one per test run.

The server is deploy/pgtemp.py's: Debian's initdb and pg_ctl in a temporary folder, on a free
port of 127.0.0.1 (as root, as the ``postgres`` user). Where PostgreSQL is not installed the
tests that need it are skipped, except when KVLAB_REQUIRE_POSTGRES=1 (set by .ci/run): then
they fail, so CI cannot pass with them skipped.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "deploy"))
import pgtemp  # noqa: E402

_PG = None
_LOCK = threading.Lock()


def require_postgres() -> bool:
    return os.environ.get("KVLAB_REQUIRE_POSTGRES", "").strip() in ("1", "true", "yes")


def postgres_server() -> pgtemp.TempPostgres:
    """The run's PostgreSQL server, started on first use and stopped at exit; skips (or fails,
    under KVLAB_REQUIRE_POSTGRES=1) where PostgreSQL is not installed."""
    global _PG
    with _LOCK:
        if _PG is None:
            if pgtemp.pg_bin() is None:
                msg = (
                    "PostgreSQL is not installed (Debian: apt-get install postgresql; "
                    ".ci/run installs it)"
                )
                if require_postgres():
                    pytest.fail(msg + " and KVLAB_REQUIRE_POSTGRES=1 forbids skipping")
                pytest.skip(msg)
            _PG = pgtemp.TempPostgres().start()
            atexit.register(_PG.cleanup)
        return _PG


def fresh_database(name: str) -> str:
    """A new, empty database on the run's server: its URL."""
    import sqlalchemy as sa

    pg = postgres_server()
    admin = sa.create_engine(pg.url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}"')
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    finally:
        admin.dispose()
    return pg.url.rsplit("/", 1)[0] + "/" + name
