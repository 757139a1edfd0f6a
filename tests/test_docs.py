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


# -- the README: a newcomer's page; the reference lives in docs/ (issue 40) ----------------------
README = ROOT / "README.md"
README_MAX_BYTES = 12_000
IMAGE_MAX_BYTES = 300_000


def readme() -> str:
    return README.read_text(encoding="utf-8")


def linked_from(path: Path) -> set[Path]:
    text = path.read_text(encoding="utf-8")
    return {
        (path.parent / f.split("#")[0]).resolve() for f, _ in LINK.findall(text) if "://" not in f
    }


def test_the_readme_is_short_and_reaches_every_document():
    # The README links what a user reads; docs/design.md the notes on the code's internals:
    # every document is one link from the README, or two through design.md.
    assert len(readme().encode("utf-8")) < README_MAX_BYTES, "move reference material to docs/"
    linked = linked_from(README)
    assert (ROOT / "CONTRIBUTING.md").resolve() in linked
    assert (ROOT / "docs" / "design.md").resolve() in linked
    reached = linked | linked_from(ROOT / "docs" / "design.md")
    unreached = sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.resolve() not in reached)
    assert unreached == [], "neither the README nor docs/design.md links these"


def test_the_readme_shows_one_screenshot_that_exists():
    images = re.findall(r"!\[[^\]]+\]\(([^)\s]+)\)", readme())
    assert len(images) == 1, images
    image = ROOT / images[0]
    assert image.suffix == ".png" and image.is_file(), images[0]
    assert image.stat().st_size < IMAGE_MAX_BYTES


def _bash_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", text, re.S)]


def test_the_readme_s_two_commands_are_what_ci_and_make_run():
    # The first two blocks are the fresh machine's commands: the app, then the tests. Each step
    # of the test command is a line of .ci/run (which runs exactly it on a clean machine), and
    # the app command installs requirements.txt (the app and the live page) and runs what
    # `make app` runs.
    app, tests = _bash_blocks(readme())[:2]
    ci = {line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()}
    steps = [s.strip() for s in tests.split("&&")]
    assert steps[-1].endswith("-m pytest -q") and "requirements-dev.txt" in steps[1]
    assert [s for s in steps if s not in ci] == []
    venv, install, run = (s.strip() for s in app.split("&&"))
    assert venv == steps[0] and install == ".venv/bin/pip install -r requirements.txt"
    reqs = (ROOT / "requirements.txt").read_text().split()
    assert ".[app,live]" in reqs
    recipe = re.search(r"^app:.*\n\t(.+)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert run == recipe.replace("$(BIN)", ".venv/bin")


def _flags_of(command: str) -> str:
    """The --help text of one kvcalc command (argparse exits after printing it)."""
    import contextlib
    import io

    from kvcalc.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main([command, "--help"])
    return out.getvalue()


def unknown_flags(text: str) -> tuple[int, list[str]]:
    """How many ``python -m kvcalc <command>`` lines ``text`` has, and each "command --flag" of
    them that the command's --help does not list (continued lines joined first)."""
    lines = re.findall(r"python -m kvcalc ([a-z][\w-]*)([^\n#]*)", text.replace("\\\n", " "))
    helps: dict[str, str] = {}
    wrong = []
    for command, rest in lines:
        helps.setdefault(command, _flags_of(command))
        wrong += [
            f"{command} {flag}"
            for flag in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", rest)
            if not re.search(rf"(?<![\w-]){flag}(?![\w-])", helps[command])
        ]
    return len(lines), wrong


@pytest.mark.parametrize("name", ["README.md", "docs/cli.md"])
def test_every_documented_command_line_uses_flags_its_command_has(name):
    count, wrong = unknown_flags((ROOT / name).read_text(encoding="utf-8"))
    assert count >= (2 if name == "README.md" else 20)
    assert wrong == []


def test_the_flag_check_reports_an_unknown_flag():
    planted = "python -m kvcalc kv --model x \\\n    --context 8 --no-such-flag  # --not-read"
    assert unknown_flags(planted) == (1, ["kv --no-such-flag"])
    assert unknown_flags("python -m kvcalc kv --context-size 8") == (1, ["kv --context-size"])


# -- module docstrings fit on a screen; a design essay goes to a topic file of docs/ (issue 40) -
DOCSTRING_LINES = 15  # from the opening quotes to the closing ones
# The packages whose docstrings have been cut to a screen; the others join as theirs are.
SHORT_DOCSTRINGS = ("kvcalc/__init__.py", "kvcalc/core", "kvcalc/cache", "kvcalc/engines")
SHORT_DOCSTRINGS += ("kvcalc/perf", "kvcalc/cli", "kvcalc/config", "kvcalc/teach", "kvcalc/measure")
SHORT_DOCSTRINGS += ("webui", "app_pages", "app.py")


def long_docstrings(root: Path, names=SHORT_DOCSTRINGS) -> list[str]:
    import ast

    found = []
    for name in names:
        top = root / name
        for path in [top] if top.is_file() else sorted(top.rglob("*.py")):
            body = ast.parse(path.read_text(encoding="utf-8")).body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                lines = (body[0].end_lineno or 0) - body[0].lineno + 1
                if lines > DOCSTRING_LINES:
                    found.append(f"{path.relative_to(root).as_posix()}: {lines} lines")
    return found


def test_module_docstrings_fit_on_a_screen():
    assert long_docstrings(ROOT) == []


def test_a_long_module_docstring_is_reported(tmp_path):
    (tmp_path / "kvcalc").mkdir()
    (tmp_path / "kvcalc" / "m.py").write_text('"""One.\n' + "more\n" * 14 + '"""\nx = 1\n')
    (tmp_path / "kvcalc" / "ok.py").write_text('"""One.\n' + "more\n" * 13 + '"""\nx = 1\n')
    assert long_docstrings(tmp_path, ("kvcalc",)) == ["kvcalc/m.py: 16 lines"]
