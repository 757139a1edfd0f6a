"""The worst-input corpus (tests/worst_inputs.py: the largest configs the caps of
kvcalc.config.limits admit) through the CLI and every page (issue 22): each ends with a result
or one clear sentence, never an exception, a traceback or a generic error box, and within its
time budget.

The fast suite runs every config through kv, budget, vllm and simulate, and through one page
each (the pages in turn); the whole matrix of configs x pages and verify are marked slow."""

import json
import subprocess
import sys
import time

import pytest
import worst_inputs as W
from conftest import ROOT

from kvcalc.cli import main
from kvcalc.config.hfconfig import parse_config_text
from kvcalc.config.limits import MAX_LAYERS

CORPUS = W.texts()
NAMES = list(CORPUS)


def test_the_corpus_is_the_largest_the_caps_admit():
    from kvcalc import spec_from_config
    from webui.hosted import MAX_PASTE_CHARS

    assert len(CORPUS["paste_at_max_chars"]) == MAX_PASTE_CHARS
    deep = 0
    for name, text in CORPUS.items():
        t0 = time.process_time()
        spec = spec_from_config(parse_config_text(text))
        assert time.process_time() - t0 < 0.5, name
        deep += spec.num_layers == MAX_LAYERS
    assert deep >= 10
    # One more layer, entry or unit of any of them is refused (tests/test_limits.py says how).
    cfg = W.hybrid_at_caps()
    cfg["hybrid_override_pattern"] += "M"
    with pytest.raises(ValueError, match="at most 1,024 layers"):
        spec_from_config(cfg)


# --- the CLI ----------------------------------------------------------------------------------

CLI = {
    "kv": ["--context", "100000000", "--batch", "1000000"],
    "budget": ["--gpu", "h100-sxm-80gb", "--context", "100000000"],
    "vllm": ["--available-kv-gib", "40", "--max-model-len", "100000000"],
    "simulate": [
        "--gpu",
        "h100-sxm-80gb",
        "--requests",
        "2000",
        "--rate",
        "inf",
        "--prompt-tokens",
        "4096",
        "--output-tokens",
        "1024",
    ],
}


@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("worst")
    for name, text in CORPUS.items():
        (folder / f"{name}.json").write_text(text)
    return folder


@pytest.mark.parametrize("command", CLI)
@pytest.mark.parametrize("name", NAMES)
def test_cli_on_the_worst_inputs(corpus_files, capsys, name, command):
    t0 = time.process_time()
    code = main([command, "--config", str(corpus_files / f"{name}.json"), *CLI[command]])
    took = time.process_time() - t0
    out, err = capsys.readouterr()
    assert code in (0, 2), err
    assert "internal error" not in err and "Traceback" not in out + err
    if code:  # refused: one line that says why (a model too large to serve, a step cap ...)
        assert err.startswith("kvcalc: error: ") and err.count("\n") == 1, err
    else:
        assert out.strip()
    assert took < 5, f"{command} {name}: {took:.2f} s"


# The CLI's in-process verify of two of them (15-35 s each); the bounded check the app runs is
# measured on every worst input by bench/verify_memory.py.
VERIFY = ["dense_at_caps", "hybrid_at_caps"]


@pytest.mark.slow
@pytest.mark.parametrize("name", VERIFY)
def test_verify_on_the_worst_inputs(corpus_files, name):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    # The meta-device check builds every module of a 1,024-layer model (10-45 s here); it ends
    # with a verdict or a sentence saying why it could not check, never a traceback.
    r = subprocess.run(
        [sys.executable, "-m", "kvcalc", "verify", "--config", str(corpus_files / f"{name}.json")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert r.returncode in (0, 2), r.stderr[-2000:]
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    first = (r.stdout or r.stderr).splitlines()[0]
    assert (
        "agrees" in first
        or "differ" in first
        or "not" in first
        or first.startswith("kvcalc: error: ")
    ), first


@pytest.mark.slow
def test_verify_of_the_worst_input_is_stopped_within_its_limit(monkeypatch):
    pytest.importorskip("torch")
    from child_support import spy_children

    from kvcalc.measure.verify import POLL_S, verify_bounded

    children = spy_children(monkeypatch)
    r = verify_bounded(json.loads(CORPUS["moe_at_caps"]), timeout_s=3, memory_gib=4)
    assert r.agrees is None and "not checked" in r.line
    # Its 1,024 layers are refused before a process starts (MAX_CHECK_LAYERS); a child it
    # starts is stopped within its 3 s (each poll waits at least POLL_S, so it is polled at
    # most this often) and reaped. The seconds are bench/refusals.py's figure, not a bound here.
    for child in children:
        assert child.reaped() and child.polls <= 3 / POLL_S + 1


# --- every page ---------------------------------------------------------------------------------


def _check_page(name: str, page: str) -> None:
    at = W.open_with(CORPUS[name], page)
    problems = W.generic_errors(at)
    assert not problems, problems
    # The sidebar read the pasted model (not the registry's default)
    said = " ".join(c.value for c in at.sidebar.caption)
    assert "layers:" in said, said
    wall, cpu = W.rerun_seconds(at)
    assert not W.generic_errors(at)
    budget = 1.5 if page in W.SPEED_PAGES else 0.5
    assert cpu < budget, f"{name} on {page}: {cpu:.2f} s CPU ({wall:.2f} s wall) per rerun"


@pytest.mark.parametrize("name", NAMES)
def test_a_page_takes_each_worst_input(name):
    # One page per config, the pages in turn: the whole matrix is the slow test below.
    _check_page(name, W.PAGES[NAMES.index(name) % len(W.PAGES)])


@pytest.mark.slow
@pytest.mark.parametrize("page", W.PAGES)
@pytest.mark.parametrize("name", NAMES)
def test_every_page_takes_every_worst_input(name, page):
    _check_page(name, page)
