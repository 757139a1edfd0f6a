"""Memory given back when sessions leave (issue 22; webui/memtrim.py, bench/memory.py).

36 heavy sessions left +132 MiB in the server after they had gone (bench/memory.py): freed
Python objects whose memory the allocator kept. The server runs with glibc's allocator for
Python's small objects and two heaps (SERVER_ENV, in the Dockerfile and deploy/replicas.py),
and a thread that collects and trims when sessions leave; every cache of the app is bounded.
"""

import ast
import os
import subprocess
import sys
import textwrap
import threading

import pytest
from conftest import ROOT

from webui import memtrim

APP_SOURCES = [
    ROOT / "app.py",
    *sorted((ROOT / "app_pages").glob("*.py")),
    *sorted((ROOT / "webui").glob("*.py")),
    *sorted((ROOT / "kvcalc").rglob("*.py")),
]


def _unbounded_caches(source: str, name: str) -> list[str]:
    """Each cache decorator in ``source`` that can grow without a bound: st.cache_data and
    st.cache_resource without max_entries (unless the function takes no argument: one entry),
    functools.lru_cache(maxsize=None) and functools.cache."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        a = node.args
        takes_args = bool(a.posonlyargs or a.args or a.kwonlyargs or a.vararg or a.kwarg)
        for dec in node.decorator_list:
            call = dec if isinstance(dec, ast.Call) else None
            target = ast.unparse(call.func if call else dec)
            kw = {k.arg: k.value for k in (call.keywords if call else [])}
            where = f"{name}:{node.lineno} {node.name}"
            if target.endswith(("cache_data", "cache_resource")):
                bound = kw.get("max_entries")
                if takes_args and (
                    bound is None or (isinstance(bound, ast.Constant) and bound.value is None)
                ):
                    out.append(f"{where}: @{target} without max_entries")
            elif target.endswith("lru_cache"):
                size = kw.get("maxsize", call.args[0] if call and call.args else None)
                if isinstance(size, ast.Constant) and size.value is None:
                    out.append(f"{where}: @{target}(maxsize=None)")
            elif target in ("functools.cache", "cache") and takes_args:
                out.append(f"{where}: @{target} (unbounded)")
    return out


def test_the_cache_check_finds_unbounded_caches():
    src = textwrap.dedent("""
        import functools
        import streamlit as st
        @st.cache_data(show_spinner=False)
        def a(x): ...
        @st.cache_resource
        def b(x): ...
        @functools.lru_cache(maxsize=None)
        def c(x): ...
        @functools.cache
        def d(x): ...
        @st.cache_data(max_entries=None)
        def e(x): ...
        @st.cache_data(max_entries=8)
        def ok1(x): ...
        @st.cache_resource
        def ok2(): ...
        @functools.lru_cache(maxsize=64)
        def ok3(x): ...
    """)
    found = _unbounded_caches(src, "t.py")
    assert [f.split()[1].rstrip(":") for f in found] == ["a", "b", "c", "d", "e"]


def test_every_cache_of_the_app_is_bounded():
    found = [
        f for p in APP_SOURCES for f in _unbounded_caches(p.read_text(), str(p.relative_to(ROOT)))
    ]
    assert not found, "caches that can grow without a bound:\n" + "\n".join(found)


def test_trim_gives_freed_small_objects_back_under_the_server_env():
    """The mechanism, in a process started as the server is: a few long-lived objects among
    many freed ones (as cache entries made during busy script runs) keep pymalloc's arenas;
    with SERVER_ENV, trim() gives nearly all of it back."""
    code = textwrap.dedent("""
        import gc
        from webui import memtrim
        def rss():
            for line in open("/proc/self/status"):
                if line.startswith("VmRSS"):
                    return int(line.split()[1]) >> 10
        base = rss()
        junk, keep = [], []
        for i in range(400_000):
            (keep if i % 2000 == 0 else junk).append({"a": i, "b": str(i)})
        peak = rss()
        del junk
        memtrim.trim()
        print(base, peak, rss())
    """)
    if not os.path.exists("/proc/self/status") or memtrim._MALLOC_TRIM is None:
        pytest.skip("needs Linux and glibc")
    env = {**os.environ, **memtrim.SERVER_ENV}
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    base, peak, after = map(int, out.split())
    assert peak - base > 60  # MiB of small objects were made
    assert after - base < 0.2 * (peak - base), out


def test_the_server_starts_with_the_allocator_settings(monkeypatch, tmp_path):
    from test_deploy import env_from_dockerfile

    docker = env_from_dockerfile()
    assert {k: docker.get(k) for k in memtrim.SERVER_ENV} == memtrim.SERVER_ENV
    sys.path.insert(0, str(ROOT / "deploy"))
    import replicas

    seen = {}

    class FakePopen:
        def __init__(self, cmd, env=None, **kw):
            seen.update(env)

    monkeypatch.setattr(replicas.subprocess, "Popen", FakePopen)
    c = replicas.Cluster(run_dir=tmp_path)
    c._spawn(replicas.Replica("app1", "127.0.0.1:1", tmp_path / "app1.log"))
    assert {k: seen.get(k) for k in memtrim.SERVER_ENV} == memtrim.SERVER_ENV
    assert seen.get("KVLAB_HOSTED") == "1"


def test_trim_is_due_after_sessions_leave_at_most_once_a_gap():
    t = memtrim.Trigger(min_gap_s=30)
    assert not t.due((3, 3), 0)  # the first reading
    assert not t.due((5, 5), 5)  # more sessions: nothing to give back
    assert t.due((2, 5), 10)  # tabs closed (kept for reconnecting)
    assert not t.due((2, 5), 15)
    assert not t.due((2, 2), 20)  # their TTL passed, inside the gap: waits...
    assert t.due((2, 2), 40)  # ...and trims when the gap ends
    assert not t.due((2, 2), 80)  # nothing dropped since


def test_reap_expired_drops_sessions_past_their_ttl():
    """Streamlit 1.67 forgets a disconnected session past its TTL only on the next write to its
    session store; reap_expired does it now, under the session manager's own lock. This pins
    the Streamlit internals it relies on (a rename makes reap_expired a silent no-op)."""
    pytest.importorskip("streamlit")
    from streamlit.runtime.memory_session_storage import MemorySessionStorage
    from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache
    from streamlit.runtime.session_manager import SessionInfo
    from streamlit.runtime.websocket_session_manager import WebsocketSessionManager

    storage = MemorySessionStorage(ttl_seconds=0)  # every stored session already expired
    mgr = WebsocketSessionManager(
        storage, MemoryUploadedFileManager("/upload"), ScriptCache(), None
    )
    assert isinstance(mgr._storage_lock, type(threading.Lock()))

    class Session:
        id = "s1"

    storage.save(SessionInfo(client=None, session=Session(), script_run_count=1))
    assert mgr.num_sessions() == 0 and len(storage._cache._data) == 1  # expired, still held
    memtrim.reap_expired(mgr)
    assert len(storage._cache._data) == 0


def test_the_app_starts_the_trimming_thread():
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert memtrim._started
    assert any(t.name == "kvlab-memtrim" and t.daemon for t in threading.enumerate())
    assert not memtrim.start()  # once per process
