"""The zoo: kvcalc against the cache transformers allocates, for every architecture transformers
ships (each from its config class's defaults, on the meta device, in a child process of its own).

The oracle is transformers' own cache object. A verdict of "wrong" (kvcalc gave numbers that
transformers' cache contradicts) or "error" (kvcalc crashed instead of refusing) fails the run;
a refusal that names its cause, or a model transformers itself cannot run on the meta device, is
allowed. docs/zoo.md, the committed table, must list every model_type the run finds."""

import re
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the zoo needs torch (pip install -r requirements.txt)")
pytest.importorskip("transformers", reason="the zoo needs transformers")

from kvcalc.measure import zoo  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "docs" / "zoo.md"


@pytest.fixture(scope="module")
def run():
    return zoo.run_zoo()


def test_the_zoo_covers_every_causal_lm_transformers_ships(run):
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES as LM

    assert set(LM) <= set(run.found)
    assert len(run.results) == len(run.found)
    assert all(r.verdict in zoo.VERDICTS for r in run.results)


def test_no_architecture_is_wrong(run):
    bad = [
        f"{r.model_type}: {r.verdict}: {r.detail}"
        for r in run.results
        if r.verdict in ("wrong", "error")
    ]
    assert not bad, "\n".join(bad)


def test_every_refusal_names_its_cause(run):
    for r in run.results:
        if r.verdict in ("refused", "cannot build"):
            assert len(r.detail) > 10, r


def test_the_committed_table_lists_every_model_type_the_run_found(run):
    listed = set(re.findall(r"^\| `([^`]+)` \|", TABLE.read_text(), flags=re.M))
    missing = sorted(set(run.found) - listed)
    assert not missing, (
        "docs/zoo.md lacks " + ", ".join(missing) + "; rewrite it with "
        "`python -m kvcalc verify --zoo --markdown > docs/zoo.md`"
    )
