import os
import tempfile
from pathlib import Path

import pytest

# kvcalc and webui are imported as installed (pip install -e .[dev]); ROOT is for paths only.
ROOT = Path(__file__).resolve().parent.parent
# SmolLM2's dequantised weights (kvcalc.measure.live): one folder for the test run and the
# servers and commands it starts, outside the user's own cache; the first load writes it, later
# ones read it.
os.environ.setdefault(
    "KVLAB_WEIGHTS_CACHE", os.path.join(tempfile.gettempdir(), "kvlab-test-weights")
)


def llama_config(**overrides):
    """A small Llama-style config.json dict; tests override the fields they are about."""
    cfg = {
        "model_type": "llama",
        "hidden_size": 512,
        "intermediate_size": 1024,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "vocab_size": 1000,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": False,
    }
    cfg.update(overrides)
    return {k: v for k, v in cfg.items() if v is not ...}


def metric(at, label_start: str) -> str:
    """The value of the AppTest page's metric whose label starts with ``label_start``."""
    for m in at.metric:
        if m.label.startswith(label_start):
            return m.value
    raise AssertionError(f"no metric {label_start!r} in {[m.label for m in at.metric]}")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PortTaken(Exception):
    """The port picked for a server was taken by someone else before the server bound it."""


def wait_healthy(base: str, proc, seconds: float = 60) -> None:
    """Wait until a Streamlit server answers /_stcore/health, or fail with its output. Raises
    PortTaken when the server exited because another process took its port first."""
    import time
    import urllib.request

    import pytest

    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:  # exited: say why instead of waiting out the deadline
            break
        try:
            with urllib.request.urlopen(base + "/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    proc.kill()
    out = proc.stdout.read().decode(errors="replace")[-2000:] if proc.stdout else ""
    if "is not available" in out or "Address already in use" in out:
        raise PortTaken(out)
    pytest.fail("the Streamlit server did not start: " + out)


def start_server(command, *, cwd=ROOT, env=None, tries: int = 5):
    """Start a server whose command line is ``command(port)`` on a free port and wait until it
    is healthy: (process, base URL). A port is only free until someone binds it, so when
    another process takes it first the server is started again on a new one."""
    import subprocess

    for _ in range(tries):
        port = free_port()
        proc = subprocess.Popen(
            command(port), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        base = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(base, proc)
        except PortTaken:
            continue
        return proc, base
    raise RuntimeError(f"no free port after {tries} tries")


@pytest.fixture(scope="module")
def server():
    """The app served on 127.0.0.1 for a browser test module (tests/browser_support.py)."""
    from browser_support import app_server

    yield from app_server()


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium for a browser test module (tests/browser_support.py)."""
    from browser_support import chromium

    yield from chromium()


def bench_module(name: str):
    """bench/<name>.py imported once, as ``bench_<name>`` (dataclasses look their module up by
    name, so it is registered in sys.modules before it runs)."""
    import importlib.util
    import sys

    key = f"bench_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, ROOT / "bench" / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        spec.loader.exec_module(mod)
    return sys.modules[key]


def open_page(page: str, **query):
    """An AppTest of the app opened with ``query`` as its link, switched to ``page``."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    if page != "app_pages/home.py":
        at.switch_page(page)
        at.run()
    return at


# Markers by file, so a developer can run the fast core suite in seconds:
#   python -m pytest -q -m "not browser and not live and not slow"
# CI runs everything.
_MARKS = {
    "test_browser.py": "browser",
    "test_live.py": "live",
    "test_app_live.py": "live",
    "test_verify.py": "live",
    "test_quality.py": "live",
    "test_microscope.py": "live",
    "test_replicas.py": "slow",
    "test_hostile.py": "slow",
    "test_deploy.py": "slow",
    "test_device_queue.py": "slow",
    "test_manifests.py": "slow",
    "test_haproxy_limits.py": "slow",
    "test_zoo.py": "slow",
    "test_visitor.py": "slow",
}


def pytest_configure(config):
    _scan_streamlit_components_once()


def _scan_streamlit_components_once() -> None:
    """CI time: every AppTest's first run scans the metadata of every installed distribution for
    Streamlit components (streamlit.components.v2.manifest_scanner; about 0.2 s on 2 cores, and
    a run opens hundreds of AppTests). The installed packages do not change during a test run,
    so the first scan's result serves the rest (a fresh list each time)."""
    try:
        from streamlit.components.v2 import manifest_scanner
    except ImportError:  # no streamlit: the app's tests skip
        return
    real = manifest_scanner.scan_component_manifests
    found: list = []

    def scan_once(*args, **kwargs):
        if not found:
            found.append(real(*args, **kwargs))
        return list(found[0])

    manifest_scanner.scan_component_manifests = scan_once


def pytest_collection_modifyitems(config, items):
    import pytest

    for item in items:
        name = item.path.name
        mark = _MARKS.get(name) or (
            "browser"
            if name.startswith("test_browser")
            else "slow"
            if name.startswith("test_app")
            else None
        )
        if mark:
            item.add_marker(getattr(pytest.mark, mark))


def formulas(at) -> list[str]:
    """The text of a page's derivation blocks (webui.render.formula: fixed-width HTML), in
    order, as a reader sees it."""
    import html
    import re

    out = []
    for h in at.get("html"):
        m = re.fullmatch(r'<pre class="kv-formula"[^>]*>(.*)</pre>', h.proto.body, re.S)
        if m:
            out.append(html.unescape(m.group(1)))
    return out


def tables(at):
    """A page's Markdown tables (webui.render.text_table), in order, as pandas DataFrames of
    the text a reader sees."""
    import re

    import pandas as pd

    def cells(line: str) -> list[str]:
        parts = re.split(r"(?<!\\)\|", line.strip())[1:-1]
        return [re.sub(r"\\(.)", r"\1", p.strip()) for p in parts]

    out = []
    for m in at.markdown:
        lines = m.value.split("\n")
        if len(lines) >= 2 and lines[0].startswith("| ") and lines[1].startswith("| ---"):
            out.append(pd.DataFrame([cells(x) for x in lines[2:]], columns=cells(lines[0])))
    return out
