"""A live class on two replicas behind HAProxy sharing one PostgreSQL, with one replica killed
while students answer: bench/classroom.py's run, small (6 students, 3 s). Every answer sent is
stored, the teacher's screen counts them all, and the killed replica's students carry on."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import sys

import pytest
from classroom_support import fresh_database
from conftest import ROOT

pytestmark = pytest.mark.slow
if shutil.which("haproxy") is None:
    pytest.skip(
        "HAProxy is not installed (apt-get install haproxy); .ci/run installs it",
        allow_module_level=True,
    )
pytest.importorskip("websockets")
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "deploy"))


@pytest.mark.parametrize("kill", ["app1", "the teacher's"])
def test_two_replicas_on_postgres_lose_nothing_when_one_dies(kill, monkeypatch):
    import classroom
    import replicas

    url = fresh_database("kvlab_replicas")
    for var in (
        "KVLAB_LB_WEBSOCKETS_PER_SOURCE",
        "KVLAB_LB_CONN_PER_SOURCE",
        "KVLAB_LB_CONN_RATE_PER_SOURCE",
        "KVLAB_CLASS_JOINS_PER_MINUTE",
    ):
        monkeypatch.setenv(var, "1000")
    args = argparse.Namespace(
        students=6, seconds=3.0, join_concurrency=6, kill_teachers=kill != "app1"
    )
    with replicas.Cluster(replicas=2, port=0, base_port=0, database_url=url) as c:
        assert all(r.healthy for r in c.members)
        base = c.url

        def do_kill(name):
            c.kill(name, signal.SIGKILL)
            return name

        r = asyncio.run(
            classroom.run_class("ws" + base[4:] + "/_stcore/stream", base, args, do_kill)
        )
    teacher, students = r["teacher"], r["students"]
    assert r["sent"] == 6 and classroom.stored(url, teacher.code, teacher.key) == 6
    assert r["saw"] is not None  # the teacher's screen showed all six
    assert not [e for s in students for e in s.c.errors] and not teacher.c.errors
    killed = r["killed"]["name"]
    on_it = [s for s in students if s.c.replicas[0] == killed]
    assert all(s.c.replicas[-1] != killed for s in on_it)  # they moved to the survivor
    if kill != "app1":
        assert teacher.reconnects >= 1  # the teacher reopened the teacher link
