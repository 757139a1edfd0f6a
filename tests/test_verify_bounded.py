"""The transformers check in a child process with hard limits (kvcalc.measure.verify).

How a check ended is asserted (the child killed and reaped, how many times the parent polled it),
never how many seconds it took: bench/refusals.py prints those."""

import signal
from pathlib import Path

import pytest
from child_support import spy_children

pytest.importorskip("torch")

from kvcalc import load_config_file  # noqa: E402
from kvcalc.measure.verify import POLL_S, verify_bounded  # noqa: E402

pytestmark = pytest.mark.slow
DATA = Path(__file__).parent / "data" / "configs"


def test_agrees_within_its_limits():
    r = verify_bounded(load_config_file(DATA / "lfm2-350m.json"), timeout_s=120, memory_gib=4)
    assert r.agrees is True and "agrees" in r.line
    assert r.report["checkable"] and len(r.report["rows"]) == 16


def test_stopped_at_its_time_limit_and_reaped(monkeypatch):
    children = spy_children(monkeypatch)
    r = verify_bounded(load_config_file(DATA / "llama-3.1-8b.json"), timeout_s=1)
    assert r.agrees is None and "longer than 1 s" in r.line
    (child,) = children
    # Killed, not waited for to the end, and reaped; at its limit: each poll waits at least
    # POLL_S, so a check still polled past 1 s would have polled more often than this.
    assert child.returncode == -signal.SIGKILL and child.reaped()
    assert 1 <= child.polls <= 1 / POLL_S + 1


def test_stopped_at_its_memory_limit():
    r = verify_bounded(load_config_file(DATA / "llama-3.1-8b.json"), memory_gib=0.3)
    assert r.agrees is None and r.line.startswith("not checked")


def test_refused_before_a_process_starts(monkeypatch):
    """Issue 22 B2: a pasted model_type: rwkv made transformers run ninja; a 199,000-entry
    pattern ran 695 s at 4,368 MiB. Now: the model-type allow-list, the reader's caps and the
    depth limit refuse them by name before any child process exists."""
    import subprocess

    def no_process(*a, **k):
        raise AssertionError("a process was started")

    monkeypatch.setattr(subprocess, "Popen", no_process)
    rwkv = load_config_file(DATA / "rwkv-4-430m-pile.json")
    r = verify_bounded({**rwkv, "sliding_window": 131000})
    assert r.agrees is None and "native code" in r.line and "rwkv" in r.line
    r = verify_bounded({"model_type": "resnet\x1b[2J", "num_hidden_layers": 2})
    assert "resnet\\x1b[2J" in r.line and "not one of the 297" in r.line
    r = verify_bounded(
        {
            "model_type": "nemotron_h",
            "hybrid_override_pattern": "M*" * 99_500,
            "hidden_size": 64,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
        }
    )
    assert r.agrees is None and "1,024" in r.line
    llama = load_config_file(DATA / "llama-3.1-8b.json")
    r = verify_bounded({**llama, "num_hidden_layers": 600})
    assert "600 layers is more than the 512" in r.line  # and no process (no_process above)


def test_should_stop_ends_the_check_and_reaps_the_child(monkeypatch):
    """The app's device queue asks to stop (Stop, a closed tab, its cap): the child is killed
    within a poll, and no process is left."""
    import os

    calls = []

    def stop():
        calls.append(len(calls))
        return len(calls) > 3

    spied = spy_children(monkeypatch)
    before = set(os.listdir("/proc"))
    r = verify_bounded(load_config_file(DATA / "llama-3.1-8b.json"), timeout_s=60, should_stop=stop)
    assert r.agrees is None and "stopped before it finished" in r.line
    (child,) = spied
    # Asked 4 times, stopped at the 4th (no poll after it), killed rather than run to its end.
    assert len(calls) == 4 and child.polls == 4
    assert child.returncode == -signal.SIGKILL and child.reaped()
    children = [
        p
        for p in set(os.listdir("/proc")) - before
        if p.isdigit()
        and os.path.exists(f"/proc/{p}/cmdline")
        and b"kvcalc.measure.verify" in Path(f"/proc/{p}/cmdline").read_bytes()
    ]
    assert children == []
