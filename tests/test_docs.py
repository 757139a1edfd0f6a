"""The documents the code cites are in the repository, with the sections it names.

A citation is ``docs/<file>.md`` or ``docs/<file>.md#<section>``, where the section is the
heading's anchor as GitHub makes it (lower case, punctuation dropped, spaces to hyphens); a
Markdown link (``[text](path.md#section)``) in the project's own Markdown files is checked the
same way, relative to the file it is in. Nothing may cite the handbook files that live outside
the repository (``facts.md``, ``design.md`` without ``docs/``)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [
    "kvcalc",
    "webui",
    "app_pages",
    "tests",
    "bench",
    "deploy",
    "docs",
    "app.py",
    "README.md",
    "CONTRIBUTING.md",
    "pyproject.toml",
    "Makefile",
    "Dockerfile",
    ".ci/run",
    ".pre-commit-config.yaml",
]
SKIP = {"data", "__pycache__"}  # tests/data: third-party configs and their notes
SUFFIXES = {".py", ".md", ".toml", ".yaml", ".yml", ".cfg", ".txt", ""}

CITATION = re.compile(r"(?<![\w/.-])docs/([A-Za-z0-9_.-]+\.md)(?:#([A-Za-z0-9_-]+))?")
LINK = re.compile(r"\]\(([^)\s#]+\.md)(?:#([^)\s]+))?\)")
# a bare name, not docs/'s own, nor a Markdown link's target (checked by LINK)
OUTSIDE = re.compile(r"shared/(?:facts|design)\.md|(?<![\w/.-])(?<!\]\()(?:facts|design)\.md")


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(md: Path) -> set[str]:
    heads = re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", md.read_text(encoding="utf-8"), re.M)
    return {slug(h) for h in heads}


def files() -> list[Path]:
    out = []
    for name in SOURCES:
        p = ROOT / name
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            out += [
                f
                for f in sorted(p.rglob("*"))
                if f.is_file()
                and f.suffix in SUFFIXES
                and not SKIP & set(f.relative_to(ROOT).parts)
            ]
    here = Path(__file__).resolve()  # its own examples of bad citations are planted
    return [f for f in out if f.resolve() != here]


def problems(path: Path, text: str) -> list[str]:
    """What in ``text`` (the contents of ``path``) cites a file or section that is not there."""
    out = []
    targets = [(ROOT / "docs" / f, a) for f, a in CITATION.findall(text)]
    if path.suffix == ".md":
        targets += [
            ((path.parent / f).resolve(), a) for f, a in LINK.findall(text) if "://" not in f
        ]
    for target, anchor in targets:
        rel = target.relative_to(ROOT) if target.is_relative_to(ROOT) else target
        if not target.is_file():
            out.append(f"{rel} does not exist")
        elif anchor and anchor not in anchors(target):
            out.append(f"{rel} has no section #{anchor}")
    out += [
        f"cites {m.group(0)}, which is not in the repository (docs/ has its own)"
        for m in OUTSIDE.finditer(text)
    ]
    return out


def test_the_sources_are_found():
    found = {f.relative_to(ROOT).as_posix() for f in files()}
    assert {
        "kvcalc/config/hfconfig.py",
        "tests/test_seed_numbers.py",
        "docs/formulas.md",
        "README.md",
    } <= found


@pytest.mark.parametrize("path", files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_docs_citation_exists_with_its_section(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    assert problems(path, text) == []


def test_the_code_cites_the_docs():
    # The citations this suite is about: each document is cited from the code at least once.
    cited = {
        f
        for p in files()
        if p.suffix == ".py"
        for f, _ in CITATION.findall(p.read_text(encoding="utf-8"))
    }
    assert {"formulas.md", "engine-facts.md", "design.md"} <= cited


def test_the_checker_reports_what_is_missing():
    fake = ROOT / "kvcalc" / "x.py"
    assert problems(fake, "see docs/formulas.md#bytes-per-token") == []
    assert problems(fake, "see docs/formulas.md#no-such-section") == [
        "docs/formulas.md has no section #no-such-section"
    ]
    assert problems(fake, "see docs/nothing.md") == ["docs/nothing.md does not exist"]
    assert len(problems(fake, "as shared/facts.md section 2 says")) == 1
    assert len(problems(fake, "the laws (design.md)")) == 1
    assert problems(fake, "tests/data/vllm-facts.md, Q10") == []
    md = ROOT / "docs" / "x.md"
    assert problems(md, "[f](formulas.md#worked-numbers) [z](zoo.md)") == []
    assert problems(md, "[f](formulas.md#nope)") == ["docs/formulas.md has no section #nope"]
    assert problems(md, "[d](design.md#laws)") == []


def test_slugs_follow_githubs_rule():
    assert slug("vLLM: memory to blocks") == "vllm-memory-to-blocks"
    assert slug("SmolLM2-135M") == "smollm2-135m"
    assert slug("Decode step and the crossover") == "decode-step-and-the-crossover"
