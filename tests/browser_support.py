"""What every browser test shares: Debian's Chromium driven by Python playwright, the app served
as the benches serve it, and the wait for a run to end.

Importing this module skips the importing test file, saying why, when Chromium or playwright is
missing; .ci/run installs both (never `playwright install`: the system's Chromium only).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, start_server

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    pytest.skip(
        "Chromium is not installed (apt-get install chromium); .ci/run installs it",
        allow_module_level=True,
    )
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="python playwright is not installed (requirements-dev.txt)"
)
sys.path.insert(0, str(ROOT / "bench"))
from pages import launch  # noqa: E402  (bench/pages.py: the one set of Chromium flags)
from serve import run_args  # noqa: E402  (bench/serve.py: the one list the benches serve with)

# True once the app has shown no "running" status for ``polls`` polls in a row (100 ms apart): a
# condition, not a fixed sleep, and robust to a rerun that starts just after the first poll.
QUIET = """(polls) => {
    const busy = !!document.querySelector('[data-testid=stStatusWidget]');
    window.__kvlabQuiet = busy ? 0 : (window.__kvlabQuiet || 0) + 1;
    return window.__kvlabQuiet >= polls;
}"""


def app_server(env: dict | None = None):
    """The app on a free port of 127.0.0.1 (a generator for a module fixture): its base URL,
    then the server stopped."""
    proc, base = start_server(
        lambda port: [sys.executable, "-m", "streamlit", *run_args(port)], env=env
    )
    try:
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def chromium():
    """Headless Chromium (a generator for a module fixture)."""
    with sync_api.sync_playwright() as p:
        b = launch(p)
        try:
            yield b
        finally:
            b.close()


def wait_ready(
    page, polls: int = 3, timeout_ms: int = 60_000, selector: str = "[data-testid=stMain] h1"
) -> None:
    """Until the page shows ``selector`` (its title) and the run has ended."""
    page.wait_for_selector(selector, timeout=timeout_ms)
    page.evaluate("window.__kvlabQuiet = 0")
    page.wait_for_function(QUIET, arg=polls, polling=100, timeout=timeout_ms)


def _sidebar_select(page, label: str):
    return page.locator("[data-testid=stSidebar] [data-testid=stSelectbox]").filter(
        has=page.get_by_text(label, exact=True)
    )


def choose(page, label: str, option: str) -> None:
    """Pick ``option`` (its whole text, any case) in the sidebar's select box ``label``, as a
    student does: typing it first, since a long list (Streamlit renders a window of about a
    dozen options once there are more than 25) shows only the options near the top."""
    _sidebar_select(page, label).first.click()
    page.keyboard.type(option)
    page.get_by_role("option", name=re.compile(f"^{re.escape(option)}$", re.I)).first.click()


def chosen(page, label: str) -> str:
    """What the sidebar's select box ``label`` shows."""
    return _sidebar_select(page, label).first.locator("input").first.input_value()
