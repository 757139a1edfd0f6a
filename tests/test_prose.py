"""The pages' prose (webui/text/<name>.toml, read by webui.prose): every T("key", ...) call in
app_pages/ and webui/ names a template of its own file, gives every field the template uses and
nothing else, and every template is used. Read from the source with ``ast``, so a sentence
shown only on a rare branch (an error, one model) cannot fail first in front of a user."""

from __future__ import annotations

import ast
import re
import string
import tomllib
from pathlib import Path

import pytest
from conftest import ROOT

from webui.prose import prose


def _fields(template: str) -> set[str]:
    return {
        re.match(r"\w+", field).group(0)
        for _, field, _, _ in string.Formatter().parse(template)
        if field is not None
    }


def problems(root: Path) -> list[str]:
    """What is wrong with the templates and their calls under ``root``."""
    texts = {p.stem: tomllib.loads(p.read_text()) for p in (root / "webui/text").glob("*.toml")}
    found, used = [], set()
    for path in sorted([*(root / "app_pages").glob("*.py"), *(root / "webui").rglob("*.py")]):
        src = path.read_text()
        m = re.search(r'^(\w+) = prose\("(\w+)"\)$', src, re.M)
        if m is None:
            continue
        var, name = m.groups()
        for call in ast.walk(ast.parse(src)):
            if not (isinstance(call, ast.Call) and getattr(call.func, "id", None) == var):
                continue
            key = call.args[0].value
            where = f"{path.relative_to(root)}:{call.lineno} {name}.{key}"
            if key not in texts.get(name, {}):
                found.append(f"{where}: no such template")
                continue
            used.add((name, key))
            given = {k.arg for k in call.keywords}
            wanted = _fields(texts[name][key])
            if wanted - given:
                found.append(f"{where}: no value for {sorted(wanted - given)}")
            if given - wanted:
                found.append(f"{where}: {sorted(given - wanted)} not in the template")
    found += [f"{n}.{k}: never used" for n in texts for k in texts[n] if (n, k) not in used]
    return found


def test_every_template_and_its_calls_agree():
    assert problems(ROOT) == []


def _tree(tmp_path: Path, code: str, toml: str) -> Path:
    (tmp_path / "app_pages").mkdir()
    (tmp_path / "webui/text").mkdir(parents=True)
    (tmp_path / "app_pages/page.py").write_text(f'T = prose("page")\n{code}\n')
    (tmp_path / "webui/text/page.toml").write_text(toml)
    return tmp_path


@pytest.mark.parametrize(
    ("code", "toml", "said"),
    [
        ('T("here")\nT("gone")', 'here = "x"\n', "page.gone: no such template"),
        ('T("n", a=1)', 'n = "{a} and {b.c:,}"\n', "no value for ['b']"),
        ('T("n", a=1, extra=2)', 'n = "{a}"\n', "['extra'] not in the template"),
        ('T("n")', 'n = "x"\nlost = "y"\n', "page.lost: never used"),
    ],
)
def test_each_kind_of_mismatch_is_reported(tmp_path, code, toml, said):
    found = problems(_tree(tmp_path, code, toml))
    assert len(found) == 1 and said in found[0], found


def test_a_template_is_filled_by_str_format():
    t = prose("frontier")
    assert "{slo_tpot:,}" in t["no_run"]
    assert t("no_run", slo_tpot=1000, slo_ttft=2500).startswith(
        "No simulated run keeps TPOT p99 within 1,000 ms and TTFT p99 within 2,500 ms"
    )
