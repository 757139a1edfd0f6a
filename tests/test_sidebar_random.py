"""No ordinary sidebar choice ends in a generic error box (issue 22): 2,000 random choices of
model (the registry), GPU (the registry's or a custom one), TP, PP, weight and KV format,
achieved bandwidth share, and each page's context and batch inputs, with a fixed seed, spread
over the pages in turn. Most are made with the widgets of a session that stays open, as a
visitor clicks; one in ten opens a fresh session from a link carrying the same choice
(webui/urlstate.py), where issue 22 found its crash (/frontier?model=smollm2-135m&tp=2); and
one in ten pastes a config of the worst-input corpus (tests/worst_inputs.py) instead of
picking a registry model, with the other choices as random as ever.

A page may say that a setup does not fit or cannot be split; it must say so in a sentence of
ours (webui.render.show_error), never an exception box or a Python exception's own text
(tests/worst_inputs.generic_errors). The worst-input corpus's configs go through every page in
tests/test_worst.py."""

import math
import os
import random

import pytest

pytest.importorskip("streamlit")
import worst_inputs as W  # noqa: E402
from conftest import open_page  # noqa: E402

from kvcalc import KV_DTYPES, WEIGHT_DTYPES, registry  # noqa: E402
from webui.selection import PP_CHOICES, TP_CHOICES  # noqa: E402

SEED = 22
# Issue 22's bar is 2,000 choices: `KVCALC_RANDOM_CHOICES=2000 pytest tests/test_sidebar_random.py`
# (about 5 minutes on 2 cores; it passed at 2,000 with seed 22). CI runs the first 500 of the
# same sequence, to keep a whole CI run well under 30 minutes.
CHOICES = int(os.environ.get("KVCALC_RANDOM_CHOICES", "500"))

# Each page's context and batch inputs: (key, lowest, highest) as the page's widgets take them.
PAGE_INPUTS = {
    "budget": [("b_ctx", 1, 10_000_000), ("b_conc", 1, 1_000_000)],
    "step_time": [("s_ctx", 0, 10_000_000), ("s_batch", 1, 4096)],
    "lab": [("l_ctx", 1, 10_000_000), ("l_batch", 1, 4096), ("l_prompt", 1, 10_000_000)],
    "techniques": [("t_ctx", 1, 10_000_000)],
    "roofline": [("r_prompt", 1, 1_000_000), ("r_batch", 1, 4096), ("r_ctx", 1, 1_000_000)],
    "frontier": [("fr_prompt", 1, 32_768), ("fr_output", 2, 8192)],
    "vllm_startup": [("u_len", 1, 10_000_000)],
    "disagg": [("dg_prompt", 1, 1_000_000)],
    "cache_fill": [("f_prompt", 1, 96), ("f_new", 0, 159)],
}


def _log_uniform(rng: random.Random, lo: int, hi: int) -> int:
    if rng.random() < 0.15:
        return rng.choice([lo, hi])  # the ends of the range are ordinary choices too
    a, b = math.log(max(lo, 1)), math.log(hi)
    return max(lo, min(hi, round(math.exp(rng.uniform(a, b)))))


def draw(rng: random.Random, page: str) -> dict:
    """One visitor's choice: sidebar keys and the page's own inputs, as URL values."""
    reg = registry()
    choice = {
        "model": rng.choice(list(reg.models)),
        "gpu": rng.choice(list(reg.gpus) + ["custom"]),
        "tp": rng.choice(TP_CHOICES),
        "pp": rng.choice(PP_CHOICES),
        "wdtype": rng.choice(["auto", *WEIGHT_DTYPES]),
        "kvdtype": rng.choice(list(KV_DTYPES)),
        "bw_share": round(rng.choice([1.0, rng.uniform(0.3, 1.0)]) * 20) / 20,
    }
    if choice["gpu"] == "custom":
        choice["gpu_gib"] = float(rng.choice([1, 8, 24, 80, 141, 192, 4096]))
    for key, lo, hi in PAGE_INPUTS.get(page, []):
        choice[key] = _log_uniform(rng, lo, hi)
    return choice


def _set(at, key: str, value) -> None:
    """Set ``key`` the way a visitor does, through its widget (when this page has it)."""
    for kind in ("selectbox", "number_input", "slider"):
        try:
            widget = getattr(at, kind)(key=key)
        except KeyError:
            continue
        if kind != "selectbox" and widget.min is not None and widget.max is not None:
            value = min(max(value, widget.min), widget.max)  # a widget takes only its range
            value = int(value) if isinstance(widget.value, int) else float(value)
        widget.set_value(value)
        return


def _visit(at, choice: dict, page: str, text: str | None = None) -> None:
    # the model and GPU first: the rest of the sidebar (and a custom GPU's inputs) follow them
    _set(at, "model", "my-config" if text is not None else choice["model"])
    _set(at, "gpu", choice["gpu"])
    at.run()
    if text is not None:
        at.text_area(key="cfg_text").set_value(text)
    for key, value in choice.items():
        if key not in ("model", "gpu"):
            _set(at, key, value)
    at.run()


@pytest.mark.slow
def test_random_sidebar_choices_never_end_in_a_generic_error_box():
    rng = random.Random(SEED)
    corpus = W.texts()
    problems = []
    sessions = {}
    for i in range(CHOICES):
        page = W.PAGES[i % len(W.PAGES)]
        choice = draw(rng, page)
        pasted = rng.choice(sorted(corpus)) if i % 10 == 5 else None
        text = corpus[pasted] if pasted else None
        if page not in sessions or (i % 10 == 0 and pasted is None):
            at = open_page(f"app_pages/{page}.py", **{k: str(v) for k, v in choice.items()})
            sessions[page] = at
            if pasted:
                _visit(at, choice, page, text)
        else:
            at = sessions[page]
            _visit(at, choice, page, text)
        found = W.generic_errors(at)
        if found:
            link = "&".join(f"{k}={v}" for k, v in choice.items())
            problems.append(f"/{page}?{link}{' pasting ' + pasted if pasted else ''}: {found[0]}")
    assert not problems, f"{len(problems)} of {CHOICES}:\n" + "\n".join(problems[:20])
