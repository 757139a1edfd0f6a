"""The zoo: kvcalc against the cache transformers allocates, for every architecture transformers
ships (each from its config class's defaults, on the meta device, in a child process of its own).

The oracle is transformers' own cache object. A verdict of "wrong" (kvcalc gave numbers that
transformers' cache contradicts) or "error" (kvcalc crashed instead of refusing) fails the run;
a refusal that names its cause, or a model transformers itself cannot run on the meta device, is
allowed. The same run counts each type's parameters (kvcalc.measure.param_check): a count that
differs from transformers' own model fails. docs/zoo.md, the committed table, must list every
model_type the run finds."""

import re
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the zoo needs torch (pip install -r requirements.txt)")
pytest.importorskip("transformers", reason="the zoo needs transformers")

from kvcalc.measure import param_check, zoo  # noqa: E402

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


def test_no_parameter_count_is_wrong(run):
    """kvcalc's parameter count of each type equals transformers' own model's (its parameters
    plus the score-correction bias buffers checkpoints store), or is refused by name."""
    bad = [f"{r.model_type}: {r.params_detail}" for r in run.results if r.params == "wrong"]
    assert not bad, "\n".join(bad)
    assert all(r.params in param_check.PARAMS_VERDICTS for r in run.results)
    for r in run.results:
        if r.params in ("refused", "cannot build"):
            assert len(r.params_detail) > 10, r


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
    # the parameter table: one row per type, none committed as wrong
    params = dict(
        re.findall(
            r"^\| `([^`]+)` \| (exact|refused|cannot build|wrong) \|", TABLE.read_text(), re.M
        )
    )
    assert not sorted(set(run.found) - set(params)), "docs/zoo.md's parameter table lacks types"
    assert "wrong" not in params.values()


def _imported_by_a_check(model_type: str) -> list[str]:
    """In a forkserver child: the modules one type's check imports that are not the type's own
    (``transformers.models.*``)."""
    import sys

    entry = zoo.entries([model_type])[0]
    before = set(sys.modules)
    zoo._check(entry)
    return sorted(m for m in set(sys.modules) - before if not m.startswith("transformers.models."))


def test_a_child_imports_only_its_own_model_the_server_imported_the_rest():
    """CI time: each type's check runs in a fresh child forked from a server that has imported
    zoo.PRELOAD. The machinery every check shares (model base class, cache, masks, generation,
    kvcalc's readers) cost each child about 3 s when it was left to the child, most of the
    zoo's time. A plain decoder, a hybrid and an MLA model must import nothing shared."""
    import multiprocessing

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(zoo.PRELOAD))
    with ctx.Pool(1, maxtasksperchild=1) as pool:
        found = dict(
            zip(
                types := ["llama", "qwen3_next", "deepseek_v3"],
                pool.map(_imported_by_a_check, types, chunksize=1),
                strict=False,
            )
        )
    leftover = {
        t: f"{len(mods)} modules, such as {', '.join(mods[:6])}"
        for t, mods in found.items()
        if mods
    }
    assert not leftover, f"add to zoo.PRELOAD what every check imports: {leftover}"
