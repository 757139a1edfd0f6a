"""The calibration corpus (tests/data/benchmarks/, issue 24): published measurements that
nobody here wrote. These checks keep it honest: every entry names its source, every metric it
records is a number printed in its own verbatim quote (in seconds, or in milliseconds as the
source printed it), ids are unique, and every registry key it names exists."""

import importlib.util
import re
from pathlib import Path

import pytest
import yaml

from kvcalc import registry

DIR = Path(__file__).parent / "data" / "benchmarks"
FIELDS = (
    "source",
    "quote",
    "engine",
    "model",
    "weight_format",
    "gpu",
    "parallel",
    "workload",
    "metrics",
    "notes",
    "assumptions",
)
# a number, possibly followed by its unit as printed ("0.459s", "12.55 GiB")
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\d.])")


def entries():
    for path in sorted(DIR.glob("*.yaml")):
        for m in yaml.safe_load(path.read_text(encoding="utf-8"))["measurements"]:
            yield path.name, m


ALL = list(entries())


def test_the_corpus_is_large_and_diverse():
    assert len(ALL) >= 30
    engines = {m["engine"]["name"].split("-")[0] for _, m in ALL}
    gpus = {m["gpu"]["name_as_published"] for _, m in ALL}
    assert len(engines) >= 3 and len(gpus) >= 4 and len({f for f, _ in ALL}) >= 6


def test_ids_are_unique_kebab_case():
    ids = [m["id"] for _, m in ALL]
    assert len(ids) == len(set(ids))
    assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", i) for i in ids)


@pytest.mark.parametrize("name, m", ALL, ids=[m["id"] for _, m in ALL])
def test_every_metric_is_in_its_own_quote(name, m):
    assert all(k in m for k in FIELDS), [k for k in FIELDS if k not in m]
    assert str(m["source"]).startswith(("http", "repo:")) or isinstance(m["source"], dict)
    printed = [float(x) for x in NUMBER.findall(m["quote"].replace(",", ""))]
    assert m["metrics"], "no metric"
    for key, value in m["metrics"].items():
        if value is None:
            continue
        assert any(
            x == c or (x and abs(c - x) / abs(x) < 1e-9)
            for x in printed
            for c in (value, value * 1000)
        ), (key, value)
    reg = registry()
    for key in (m["model"].get("kvcalc_key"), m["model"].get("same_architecture_as")):
        assert key is None or key in reg.models, key
    gpu = m["gpu"].get("kvcalc_key")
    assert gpu is None or gpu in reg.gpus, gpu


def test_the_summary_is_generated_from_these_files():
    # SUMMARY.md's counts and table come from bench/corpus_summary.py; a changed entry must be
    # followed by a regenerated summary (the totals line counts every entry here).
    spec = importlib.util.spec_from_file_location(
        "corpus_summary", DIR.parent.parent.parent / "bench" / "corpus_summary.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    text = (DIR / "SUMMARY.md").read_text(encoding="utf-8")
    assert text == mod.render(), "SUMMARY.md is stale: run bench/corpus_summary.py"
    assert text.splitlines()[2].startswith(
        f"{len(ALL)} published measurements in {len({f for f, _ in ALL})} files"
    )
