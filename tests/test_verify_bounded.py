"""The transformers check in a child process with hard limits (kvcalc.verify_bounded)."""

import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

from kvcalc import load_config_file  # noqa: E402
from kvcalc.verify_bounded import verify_bounded  # noqa: E402

pytestmark = pytest.mark.slow
DATA = Path(__file__).parent / "data" / "configs"


def test_agrees_within_its_limits():
    r = verify_bounded(load_config_file(DATA / "lfm2-350m.json"), timeout_s=120, memory_gib=4)
    assert r.agrees is True and "agrees" in r.line
    assert r.report["checkable"] and len(r.report["rows"]) == 16


def test_stopped_at_its_time_limit_and_reaped():
    t0 = time.perf_counter()
    r = verify_bounded(load_config_file(DATA / "llama-3.1-8b.json"), timeout_s=1)
    assert r.agrees is None and "longer than 1 s" in r.line
    assert time.perf_counter() - t0 < 10


def test_stopped_at_its_memory_limit():
    r = verify_bounded(load_config_file(DATA / "llama-3.1-8b.json"), memory_gib=0.3)
    assert r.agrees is None and r.line.startswith("not checked")
