"""The optional Hub fetch: every failure says what it is, and the server limits how often it
fetches. No test touches the network: hf_hub_download is replaced, or the machine is offline
and the real one says so."""

import pytest

pytest.importorskip("huggingface_hub")
import huggingface_hub  # noqa: E402
from huggingface_hub import errors  # noqa: E402

from webui import hub  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_rate_window():
    hub._fetches.clear()
    hub._recent.clear()
    yield
    hub._fetches.clear()
    hub._recent.clear()


def failing(exc):
    def download(*a, **k):
        raise exc

    return download


@pytest.mark.parametrize(
    "exc,expected",
    [
        (errors.LocalEntryNotFoundError("no connection"), "offline"),  # what offline really raises
        (errors.HFValidationError("bad id"), "not a valid Hub model id"),
        (OSError("network is unreachable"), "offline"),
    ],
)
def test_each_failure_says_what_it_is(monkeypatch, exc, expected):
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", failing(exc))
    with pytest.raises(ValueError, match=expected) as info:
        hub.fetch_config("Qwen/Qwen2.5-0.5B-Instruct")
    assert "has no config.json" not in str(info.value)


def test_server_wide_rate_limit(monkeypatch):
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", failing(OSError("offline")))
    hub._by_visitor.clear()
    for i in range(hub.RATE_LIMIT):  # many visitors, each within its own share
        with pytest.raises(ValueError, match="offline"):
            hub.fetch_config("Qwen/Qwen2.5-0.5B-Instruct", f"ip:10.0.{i}.1")
    with pytest.raises(ValueError, match="This server has fetched .* try again in"):
        hub.fetch_config("Qwen/Qwen2.5-0.5B-Instruct", "ip:10.9.9.9")
    hub._by_visitor.clear()
    # A minute later the window has moved on.
    hub._take_fetch_slot(now=hub._fetches[-1] + hub.RATE_WINDOW_S + 1)


def test_bad_ids_never_count_against_the_limit():
    for _ in range(hub.RATE_LIMIT + 5):
        with pytest.raises(ValueError, match="not a Hub model id"):
            hub.fetch_config("https://evil.example/x")
    assert len(hub._fetches) == 0


def test_per_visitor_limit_leaves_others_their_share(monkeypatch):
    """Issue 22 B10: one tab used the server's whole allowance and locked every other visitor
    out. A visitor now has RATE_PER_VISITOR fetches a minute; another visitor still fetches."""
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", failing(OSError("offline")))
    hub._by_visitor.clear()
    for _ in range(hub.RATE_PER_VISITOR):
        with pytest.raises(ValueError, match="offline"):
            hub.fetch_config("Qwen/Qwen2.5-0.5B-Instruct", "ip:10.0.0.1")
    with pytest.raises(ValueError, match="You have fetched .* try again in"):
        hub.fetch_config("Qwen/Qwen2.5-0.5B-Instruct", "ip:10.0.0.1")
    with pytest.raises(ValueError, match="offline"):  # someone else: their own share
        hub.fetch_config("Qwen/Qwen2.5-0.5B-Instruct", "ip:10.0.0.2")
    assert len(hub._fetches) == hub.RATE_PER_VISITOR + 1
    hub._by_visitor.clear()


FETCH = r"""
import json, sys
from webui import hub
print(json.dumps(hub.fetch_config("org-x/model-y")))
"""


def test_one_fetch_is_one_file_request_and_nothing_else(tmp_path):
    """Issue 22 B10: the Hub client also asked for /api/agent-harnesses (telemetry naming the
    caller). A fake Hub on loopback (HF_ENDPOINT) records every request of a real fetch in a
    fresh process: only config.json is asked for."""
    import http.server
    import json
    import os
    import subprocess
    import sys
    import threading
    from pathlib import Path

    body = json.dumps({"model_type": "llama", "num_hidden_layers": 2}).encode()
    seen = []

    class Hub(http.server.BaseHTTPRequestHandler):
        def _answer(self, send_body):
            seen.append((self.command, self.path))
            if self.path.endswith("/resolve/main/config.json"):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("ETag", '"abc123"')
                self.send_header("X-Repo-Commit", "0" * 40)
                self.end_headers()
                if send_body:
                    self.wfile.write(body)
            else:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

        def do_HEAD(self):  # noqa: N802
            self._answer(False)

        def do_GET(self):  # noqa: N802
            self._answer(True)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "KVLAB_"))}
    env.update(HF_ENDPOINT=f"http://127.0.0.1:{server.server_port}", HF_HOME=str(tmp_path))
    try:
        out = subprocess.run(
            [sys.executable, "-c", FETCH],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=Path(__file__).resolve().parent.parent,
        )
    finally:
        server.shutdown()
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1])["num_hidden_layers"] == 2
    paths = {p for _, p in seen}
    assert paths == {"/org-x/model-y/resolve/main/config.json"}, seen


def test_a_config_fetched_recently_is_served_again_without_a_request(monkeypatch, tmp_path):
    """A class behind one address asking for the same model: one request, within the limits."""
    import json

    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 2}))
    calls = []
    monkeypatch.setattr(
        huggingface_hub, "hf_hub_download", lambda *a, **k: calls.append(a) or str(path)
    )
    hub._by_visitor.clear()
    for _ in range(3 * hub.RATE_PER_VISITOR):
        cfg = hub.fetch_config("Qwen/Qwen2.5-0.5B-Instruct", "ip:10.0.0.9")
        assert cfg["num_hidden_layers"] == 2
        cfg["num_hidden_layers"] = 99  # a caller's change never reaches the next caller
    assert len(calls) == 1 and len(hub._fetches) == 1
    hub._by_visitor.clear()
