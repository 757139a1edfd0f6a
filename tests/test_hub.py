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
    yield
    hub._fetches.clear()


def failing(exc):
    def download(*a, **k):
        raise exc
    return download


@pytest.mark.parametrize("exc,expected", [
    (errors.LocalEntryNotFoundError("no connection"), "offline"),  # what offline really raises
    (errors.HFValidationError("bad id"), "not a valid Hub model id"),
    (OSError("network is unreachable"), "offline"),
])
def test_each_failure_says_what_it_is(monkeypatch, exc, expected):
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", failing(exc))
    with pytest.raises(ValueError, match=expected) as info:
        hub.fetch_config("Qwen/Qwen2.5-0.5B-Instruct")
    assert "has no config.json" not in str(info.value)


def test_server_wide_rate_limit(monkeypatch):
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", failing(OSError("offline")))
    for _ in range(hub.RATE_LIMIT):
        with pytest.raises(ValueError, match="offline"):
            hub.fetch_config("Qwen/Qwen2.5-0.5B-Instruct")
    with pytest.raises(ValueError, match="try again in"):
        hub.fetch_config("Qwen/Qwen2.5-0.5B-Instruct")
    # A minute later the window has moved on.
    hub._take_fetch_slot(now=hub._fetches[-1] + hub.RATE_WINDOW_S + 1)


def test_bad_ids_never_count_against_the_limit():
    for _ in range(hub.RATE_LIMIT + 5):
        with pytest.raises(ValueError, match="not a Hub model id"):
            hub.fetch_config("https://evil.example/x")
    assert len(hub._fetches) == 0
