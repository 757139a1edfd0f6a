"""Capacity on the pages (issue 23): Budget, the vLLM start-up page and Home show one pool for one
setup (finding 22); the Budget page puts vLLM's logged worst case beside what a running server
holds (findings 19, 20, item 3); the frontier labels and samples runs by the pool (findings 13-15).
Expected values are worked by hand in tests/test_capacity.py; here the pages must show them."""

import re

import pytest

pytest.importorskip("streamlit")
from conftest import open_page  # noqa: E402


def _text(at) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [c.value for c in at.code] + [m.value for m in at.info] + [m.value for m in
                                                                      at.success]
    parts += [f"{m.label}: {m.value}" for m in at.metric]
    return re.sub(r"\\(.)", r"\1", "\n".join(parts))


def _metric(at, start: str) -> str:
    for m in at.metric:
        if m.label.startswith(start):
            return m.value
    raise AssertionError(f"no metric {start!r} in {[m.label for m in at.metric]}")


SETUPS = {
    # Llama 3.1 8B on one H100: 60,471,139,042 B = 56.32 GiB, 28,834 blocks of 16 tokens.
    "llama-h100": (dict(), "56.32 GiB", "28,834"),
}


@pytest.mark.parametrize("name", list(SETUPS))
def test_budget_vllm_page_and_home_show_one_pool(name):
    query, pool, blocks = SETUPS[name]
    home = open_page("app_pages/home.py", **query)
    assert not home.exception
    assert f"KV pool on each GPU: {pool} = {blocks} blocks" in _text(home)

    b = open_page("app_pages/budget.py", **query)
    assert not b.exception and not b.error
    assert _metric(b, "Blocks") == blocks
    assert f"({pool})" in "\n".join(c.value for c in b.code)  # KV pool = ... B (56.32 GiB)

    v = open_page("app_pages/vllm_startup.py", **query)
    assert not v.exception and not v.error
    assert f"Available KV cache memory: {pool}" in "\n".join(c.value for c in v.code)
    assert _metric(v, "Blocks") == blocks
