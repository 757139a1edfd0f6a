"""A throwaway PostgreSQL server from Debian's own binaries, for the tests and the benches.

    python deploy/pgtemp.py            # prints KVLAB_DATABASE_URL=...; Ctrl-C stops and deletes it

It runs ``initdb`` and ``pg_ctl`` from /usr/lib/postgresql/<version>/bin (Debian's postgresql
package; KVLAB_PG_BIN names another folder) in a new temporary folder, listening on 127.0.0.1
only, on a free port, with trust authentication for the one user ``kvlab`` (no password: no
other machine can connect, and the folder is deleted at the end). PostgreSQL refuses to run as
root, so as root (CI) the server runs as the system's ``postgres`` user (the Debian package
creates it) through ``runuser``; the folder is handed to that user.

Not for real data: fsync is off, so the server's own crash (``stop("immediate")``) loses no
committed transaction (each commit is written to the operating system before it returns), but
a crash of the machine could: what a test server may trade for speed.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["TempPostgres", "pg_bin", "PostgresMissing"]


class PostgresMissing(RuntimeError):
    """No PostgreSQL server binaries on this machine (apt-get install postgresql)."""


def pg_bin() -> Path | None:
    """The folder with initdb and pg_ctl: KVLAB_PG_BIN, else Debian's newest, else PATH."""
    env = os.environ.get("KVLAB_PG_BIN")
    candidates = [Path(env)] if env else []
    candidates += sorted(
        (Path(p) for p in glob.glob("/usr/lib/postgresql/*/bin")),
        key=lambda p: _version(p.parent.name),
        reverse=True,
    )
    which = shutil.which("initdb")
    if which:
        candidates.append(Path(which).parent)
    for c in candidates:
        if (c / "initdb").exists() and (c / "pg_ctl").exists():
            return c
    return None


def _version(name: str) -> tuple:
    try:
        return tuple(int(x) for x in name.split("."))
    except ValueError:
        return (0,)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TempPostgres:
    """Start with ``with TempPostgres() as pg: pg.url``; ``stop()``/``start()`` take it down
    and up again on the same port and data (a database outage, for the tests)."""

    def __init__(self, bin_dir: Path | None = None, max_connections: int = 200):
        self.bin = bin_dir or pg_bin()
        if self.bin is None:
            raise PostgresMissing(
                "PostgreSQL's server is not installed (Debian: apt-get "
                "install postgresql); KVLAB_PG_BIN may name its bin folder."
            )
        self.max_connections = max_connections
        self.dir: Path | None = None
        self.port = 0
        self.user = None  # the system user the server runs as, when we are root

    # -- commands ---------------------------------------------------------------------------
    def _cmd(self, *args: str) -> list[str]:
        if self.user:
            return ["runuser", "-u", self.user, "--", *args]
        return list(args)

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        # In the server's own folder: the postgres user may not be allowed into the caller's
        # (a CI checkout under /root), and initdb and pg_ctl look up their working folder.
        return subprocess.run(
            self._cmd(*args),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            check=check,
            timeout=120,
            text=True,
            cwd=self.dir,
        )

    @property
    def data(self) -> Path:
        return self.dir / "data"

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://kvlab@127.0.0.1:{self.port}/postgres"

    # -- life -------------------------------------------------------------------------------
    def init(self) -> TempPostgres:
        self.dir = Path(tempfile.mkdtemp(prefix="kvlab-pg-"))
        if os.geteuid() == 0:
            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                raise PostgresMissing(
                    "running as root and there is no 'postgres' user to run "
                    "PostgreSQL as (Debian's postgresql package creates it)"
                ) from None
            self.user = "postgres"
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        out = self._run(
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "kvlab",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-instructions",
            check=False,
        )
        if out.returncode != 0:
            raise RuntimeError(f"initdb failed:\n{out.stdout[-2000:]}")
        return self

    def start(self, tries: int = 3) -> TempPostgres:
        if self.dir is None:
            self.init()
        for _ in range(tries):
            if not self.port:
                self.port = _free_port()
            opts = (
                f"-c listen_addresses=127.0.0.1 -p {self.port} "
                f"-c unix_socket_directories={self.dir} -c fsync=off "
                f"-c full_page_writes=off "
                f"-c max_connections={self.max_connections}"
            )
            out = self._run(
                str(self.bin / "pg_ctl"),
                "-D",
                str(self.data),
                "-o",
                opts,
                "-l",
                str(self.dir / "server.log"),
                "-w",
                "-t",
                "60",
                "start",
                check=False,
            )
            if out.returncode == 0:
                return self
            log = (
                (self.dir / "server.log").read_text(errors="replace")[-2000:]
                if (self.dir / "server.log").exists()
                else ""
            )
            if "could not bind" in log or "already in use" in log:
                self.port = 0  # someone took the port: another one
                continue
            raise RuntimeError(f"PostgreSQL did not start:\n{out.stdout[-1000:]}\n{log}")
        raise RuntimeError("PostgreSQL did not start: no free port")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``immediate``: as a crash would); its data stays for start()."""
        if self.dir is not None and (self.data / "postmaster.pid").exists():
            self._run(
                str(self.bin / "pg_ctl"),
                "-D",
                str(self.data),
                "-m",
                mode,
                "-w",
                "stop",
                check=False,
            )

    def cleanup(self) -> None:
        self.stop("immediate")
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self) -> TempPostgres:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.cleanup()


def main() -> int:
    with TempPostgres() as pg:
        print(f"KVLAB_DATABASE_URL={pg.url}", flush=True)
        print(f"(data in {pg.dir}; Ctrl-C stops the server and deletes it)", flush=True)
        signal.signal(signal.SIGTERM, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))
        try:
            while True:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
