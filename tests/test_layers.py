"""The layer rule, read from the source with ``ast`` (nothing is imported).

kvcalc's subpackages form layers, and imports point one way, down the layers:

    core <- cache <- config <- engines <- perf <- teach <- cli
    measure (torch, imported lazily) uses core, cache and config only; only cli uses it

``cache`` (KV and weight bytes) needs only ``core``; ``config`` sits above it because the
registry's models carry their weight bytes (``RegistryModel.weights``). The facade
(``kvcalc/__init__.py``) re-exports public names from core to perf, never measure or cli, so
``import kvcalc`` stays light; no kvcalc module imports the facade or anything outside kvcalc
of this repository (webui, app_pages, tests).

Everywhere in the repository: no module imports a private (underscore) name from another
module, and outside tests/ none reads one from a module it imported (``live._load``); no two
kvcalc modules import each other, directly or round a loop, lazily or under TYPE_CHECKING. The
UI keeps the same two rules one floor up: webui imports no page (app.py <- app_pages <- webui
<- kvcalc), and no two webui modules import each other.

``problems`` is the checker; the tests below plant each kind of violation in a throwaway tree
and assert that it is reported, so a checker that reports nothing would fail them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import ROOT

LAYERS = ("core", "cache", "config", "engines", "perf", "teach", "cli")
# What each layer may import (besides itself): every layer below it; measure only the three
# it needs, and only cli (the top) may import measure.
MAY_IMPORT = {layer: set(LAYERS[: i + 1]) for i, layer in enumerate(LAYERS)}
MAY_IMPORT["measure"] = {"core", "cache", "config", "measure"}
MAY_IMPORT["cli"].add("measure")
MAY_IMPORT["facade"] = set(LAYERS[: LAYERS.index("perf") + 1])  # kvcalc/__init__.py
MAY_IMPORT["main"] = {"cli"}  # kvcalc/__main__.py
ORDER = " <- ".join(LAYERS) + "; measure uses core, cache, config"
UI_ORDER = "app.py <- app_pages <- webui <- kvcalc"
REPO_PACKAGES = ("webui", "app_pages", "app", "tests", "bench", "deploy")
SKIP = ("tests/data",)
SCRIPT_FOLDERS = ("bench", "tests", "deploy")


def _module_name(rel: Path) -> str:
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> str | None:
    """The layer of a kvcalc module, None outside kvcalc."""
    parts = module.split(".")
    if parts[0] != "kvcalc":
        return None
    if len(parts) == 1:
        return "facade"
    if parts[1] == "__main__":
        return "main"
    return parts[1] if parts[1] in MAY_IMPORT else "outside the layers"


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _sources(root: Path) -> dict[str, tuple[Path, ast.Module]]:
    found = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if any(rel.as_posix().startswith(s) for s in SKIP) or any(
            part.startswith(".") for part in rel.parts
        ):
            continue
        found[_module_name(rel)] = (rel, ast.parse(path.read_text(), str(rel)))
    return found


def _sibling(module: str, source: str, modules: set[str]) -> str:
    """Scripts and tests import the files beside them by bare name (``from load import rss``,
    ``from conftest import ROOT``): their folder is on sys.path when they run."""
    folder = module.rpartition(".")[0]
    if folder in SCRIPT_FOLDERS and f"{folder}.{source}" in modules:
        return f"{folder}.{source}"
    return source


def _source(module: str, is_package: bool, node: ast.ImportFrom, modules: set[str]) -> str:
    """The module a ``from ... import`` reads from, its dots resolved."""
    if not node.level:
        return _sibling(module, node.module or "", modules)
    base = (module if is_package else module.rpartition(".")[0]).split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str, is_package: bool, tree: ast.Module, modules: set[str]):
    """(line, target module, imported name or None, local name) for every import in the file,
    at any depth (inside functions and under TYPE_CHECKING too). ``from P import n`` targets
    the module P.n when there is one, else P with the name n."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None, alias.asname
        elif isinstance(node, ast.ImportFrom):
            source = _source(module, is_package, node, modules)
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in modules:
                    yield node.lineno, sub, None, alias.asname or alias.name
                else:
                    yield node.lineno, source, alias.name, alias.asname or alias.name


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), or a self-import."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _webui_import(module, target, modules, where, found, graph) -> None:
    """The UI's own rule: webui sits under the pages (app.py <- app_pages <- webui <- kvcalc),
    and no two webui modules import each other, as in kvcalc."""
    if module.partition(".")[0] != "webui":
        return
    top = target.split(".")[0]
    if top in ("app", "app_pages") and target in modules | {top}:
        found.append(f"{where}: webui imports {target} (a page): the wrong way ({UI_ORDER})")
    elif top == "webui" and target != module:
        graph.setdefault(module, set()).add(target)


def problems(root: Path) -> list[str]:
    """Every violation of the layer rule in the tree at ``root``, one line each."""
    sources = _sources(root)
    modules = set(sources)
    found = []
    graph: dict[str, set[str]] = {}
    for module, (rel, tree) in sources.items():
        is_package = rel.name == "__init__.py"
        layer = _layer(module)
        in_tests = rel.parts[0] == "tests"
        if layer == "outside the layers":
            found.append(f"{rel.as_posix()}: a kvcalc module outside the layers ({ORDER})")
            continue
        imports = list(_imports(module, is_package, tree, modules))
        for line, target, name, _ in imports:
            where = f"{rel.as_posix()}:{line}"
            if name is not None and _is_private(name) and target in modules:
                found.append(f"{where}: imports the private name {name} from {target}")
            _webui_import(module, target, modules, where, found, graph)
            if layer is None:
                continue
            top = target.split(".")[0]
            if top in REPO_PACKAGES and target in modules | {top}:
                found.append(f"{where}: kvcalc imports {target} (outside kvcalc)")
                continue
            if top != "kvcalc":
                continue
            if target != module:
                graph.setdefault(module, set()).add(target)
            to = _layer(target)
            if to == "facade" and layer != "facade" and target != module:
                found.append(f"{where}: imports the facade kvcalc ({name}); import its module")
            elif to != "facade" and to not in MAY_IMPORT[layer]:
                found.append(f"{where}: {layer} imports {target} ({to}): the wrong way ({ORDER})")
        if in_tests:
            continue
        # Local names bound to modules of the tree (from . import live; import a.b as m).
        aliases = {
            local: target
            for _, target, name, local in imports
            if name is None and local and target in modules
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and _is_private(node.attr)
            ):
                found.append(
                    f"{rel.as_posix()}:{node.lineno}: reads the private name "
                    f"{node.attr} of {aliases[node.value.id]}"
                )
    for comp in _cycles(graph):
        found.append("import cycle among " + ", ".join(comp))
    return sorted(set(found))


def test_the_repository_keeps_the_layer_rule():
    assert problems(ROOT) == []


def test_the_layers_are_the_subpackages():
    # Every kvcalc subpackage is a layer the rule knows, and every layer exists.
    found = {p.name for p in (ROOT / "kvcalc").iterdir() if (p / "__init__.py").is_file()}
    assert found == set(LAYERS) | {"measure"}


# A throwaway tree with one module per layer, then each violation planted into it.
CLEAN = {
    "kvcalc/__init__.py": "from .perf.roofline import step_time\n",
    "kvcalc/__main__.py": "from .cli import main\n",
    "kvcalc/core/__init__.py": "",
    "kvcalc/core/units.py": "GiB = 2**30\n_CAP = 10\n",
    "kvcalc/cache/__init__.py": "",
    "kvcalc/cache/kv.py": "from ..core.units import GiB\n",
    "kvcalc/config/__init__.py": "",
    "kvcalc/config/catalog.py": "from ..cache import kv\nfrom ..core import units\n",
    "kvcalc/engines/__init__.py": "",
    "kvcalc/engines/vllm.py": "from ..config.catalog import *\n",
    "kvcalc/perf/__init__.py": "",
    "kvcalc/perf/roofline.py": "from ..engines import vllm\n\ndef step_time():\n    pass\n",
    "kvcalc/teach/__init__.py": "",
    "kvcalc/teach/tour.py": "from kvcalc.perf.roofline import step_time\n",
    "kvcalc/measure/__init__.py": "",
    "kvcalc/measure/live.py": "def run():\n    from ..config import catalog\n",
    "kvcalc/cli/__init__.py": "from .commands import main\n",
    "kvcalc/cli/commands.py": (
        "from ..teach import tour\n\ndef main():\n    from ..measure import live\n"
    ),
    "webui/__init__.py": "",
    "webui/pages.py": "from kvcalc import step_time\nfrom kvcalc.core.units import GiB\n",
    "tests/test_x.py": "from kvcalc.core import units\n\ndef test():\n    units._CAP\n",
}


def _tree(tmp_path: Path) -> Path:
    for rel, text in CLEAN.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def _plant(tmp_path: Path, rel: str, text: str) -> list[str]:
    root = _tree(tmp_path)
    (root / rel).write_text(text)
    return problems(root)


def test_the_clean_tree_has_no_problem(tmp_path):
    assert problems(_tree(tmp_path)) == []


@pytest.mark.parametrize(
    "rel, text, expected",
    [
        # core reaching up into perf, even lazily inside a function
        (
            "kvcalc/core/units.py",
            "def f():\n    from ..perf import roofline\n",
            "kvcalc/core/units.py:2: core imports kvcalc.perf.roofline (perf): the wrong way",
        ),
        # cache reaching up into config (the registry sits above the bytes)
        (
            "kvcalc/cache/kv.py",
            "from ..config.catalog import x\n",
            "kvcalc/cache/kv.py:1: cache imports kvcalc.config.catalog (config): the wrong way",
        ),
        # an absolute import the wrong way under TYPE_CHECKING
        (
            "kvcalc/engines/vllm.py",
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from kvcalc.teach.tour import T\n",
            "kvcalc/engines/vllm.py:3: engines imports kvcalc.teach.tour (teach): the wrong way",
        ),
        # the torch layer used from perf, or measure using engines
        (
            "kvcalc/perf/roofline.py",
            "from ..measure import live\n",
            "kvcalc/perf/roofline.py:1: perf imports kvcalc.measure.live (measure): the wrong way",
        ),
        (
            "kvcalc/measure/live.py",
            "from ..engines.vllm import predict\n",
            "kvcalc/measure/live.py:1: measure imports kvcalc.engines.vllm (engines): "
            "the wrong way",
        ),
        # the facade pulling in the CLI, and a module importing the facade
        (
            "kvcalc/__init__.py",
            "from .cli import main\n",
            "kvcalc/__init__.py:1: facade imports kvcalc.cli (cli): the wrong way",
        ),
        (
            "kvcalc/teach/tour.py",
            "from kvcalc import step_time\n",
            "kvcalc/teach/tour.py:1: imports the facade kvcalc (step_time)",
        ),
        # the core knowing the UI
        (
            "kvcalc/teach/tour.py",
            "import webui.pages\n",
            "kvcalc/teach/tour.py:1: kvcalc imports webui.pages (outside kvcalc)",
        ),
    ],
)
def test_a_wrong_way_import_is_reported(tmp_path, rel, text, expected):
    found = _plant(tmp_path, rel, text)
    assert any(p.startswith(expected) for p in found), found


@pytest.mark.parametrize(
    "rel, text, expected",
    [
        (
            "kvcalc/cache/kv.py",
            "from ..core.units import _CAP\n",
            "kvcalc/cache/kv.py:1: imports the private name _CAP from kvcalc.core.units",
        ),
        (
            "webui/pages.py",
            "from kvcalc.core.units import _CAP\n",
            "webui/pages.py:1: imports the private name _CAP from kvcalc.core.units",
        ),
        (
            "tests/test_x.py",
            "from kvcalc.core.units import _CAP\n",
            "tests/test_x.py:1: imports the private name _CAP from kvcalc.core.units",
        ),
        (
            "kvcalc/cache/kv.py",
            "from ..core import units\nCAP = units._CAP\n",
            "kvcalc/cache/kv.py:2: reads the private name _CAP of kvcalc.core.units",
        ),
        (
            "webui/pages.py",
            "import kvcalc.core.units as u\nu._CAP\n",
            "webui/pages.py:2: reads the private name _CAP of kvcalc.core.units",
        ),
    ],
)
def test_a_private_name_from_another_module_is_reported(tmp_path, rel, text, expected):
    assert expected in _plant(tmp_path, rel, text)


def test_tests_may_read_private_names_but_not_import_them(tmp_path):
    # tests/test_x.py reads units._CAP in CLEAN: white-box tests may; the import form may not.
    assert problems(_tree(tmp_path)) == []


def test_a_cycle_is_reported(tmp_path):
    # Within one layer (no arrow the wrong way), round a loop of three, one of them lazy.
    root = _tree(tmp_path)
    (root / "kvcalc/config/a.py").write_text("from .b import x\n")
    (root / "kvcalc/config/b.py").write_text("from . import c\n")
    (root / "kvcalc/config/c.py").write_text("def f():\n    from .a import y\n")
    assert problems(root) == [
        "import cycle among kvcalc.config.a, kvcalc.config.b, kvcalc.config.c"
    ]


def test_a_cycle_through_type_checking_is_reported(tmp_path):
    # The shape of params.py importing hfconfig's private types while hfconfig imports params.
    root = _tree(tmp_path)
    (root / "kvcalc/config/hf.py").write_text("from .params import count\n")
    (root / "kvcalc/config/params.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .hf import Fields\n"
    )
    assert problems(root) == ["import cycle among kvcalc.config.hf, kvcalc.config.params"]


def test_a_cycle_in_webui_is_reported(tmp_path):
    # The shape of webui/device_queue.py and visitor.py before issue 40: each imported the
    # other lazily, inside a function.
    root = _tree(tmp_path)
    (root / "webui/queue.py").write_text("def run():\n    from .visitor import who\n")
    (root / "webui/visitor.py").write_text("def who():\n    from webui.queue import sid\n")
    assert problems(root) == ["import cycle among webui.queue, webui.visitor"]


def test_webui_importing_a_page_is_reported(tmp_path):
    root = _tree(tmp_path)
    (root / "app_pages").mkdir()
    (root / "app_pages/budget.py").write_text("from webui import pages\n")
    (root / "webui/pages.py").write_text("def f():\n    import app_pages.budget\n")
    assert problems(root) == [
        f"webui/pages.py:2: webui imports app_pages.budget (a page): the wrong way ({UI_ORDER})"
    ]


def test_every_package_is_installed_by_a_non_editable_install():
    """pyproject's explicit package list must name every folder of kvcalc/ and webui/ that holds
    an __init__.py: `pip install .` (the wheel, the Docker image) copies only those, so a
    subpackage left out imports in the checkout and fails in the image."""
    import tomllib

    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for top in ("kvcalc", "webui")
        for p in (ROOT / top).rglob("__init__.py")
    }
    assert found - listed == set(), "add to [tool.setuptools] packages"
    assert listed - found == set(), "listed but not a package"


# -- sizes: no function in kvcalc/ over 120 lines, no module over 600 (CONTRIBUTING.md) ---------
# The limits are issue 25's; a longer one says why in its own docstring, naming the limit
# ("... longer than the 600 lines ...", "... over the 120 lines ..."), as kvcalc/core/model.py does.

MODULE_LINES = 600
FUNCTION_LINES = 120


def size_problems(root: Path) -> list[str]:
    found = []
    for path in sorted((root / "kvcalc").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        lines = len(text.splitlines())
        if lines > MODULE_LINES and f"{MODULE_LINES} lines" not in (ast.get_docstring(tree) or ""):
            found.append(
                f"{rel}: {lines} lines, over {MODULE_LINES}, and its docstring does not say why"
            )
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                why = ast.get_docstring(node) or ""
                if length > FUNCTION_LINES and f"{FUNCTION_LINES} lines" not in why:
                    found.append(
                        f"{rel}:{node.lineno}: {node.name} is {length} lines, over "
                        f"{FUNCTION_LINES}, and its docstring does not say why"
                    )
    return found


def test_no_function_or_module_is_over_its_size_limit():
    assert size_problems(ROOT) == []


def _sized_tree(tmp_path: Path, body: str) -> Path:
    (tmp_path / "kvcalc").mkdir(parents=True)
    (tmp_path / "kvcalc" / "m.py").write_text(body, encoding="utf-8")
    return tmp_path


def test_a_long_function_is_reported(tmp_path):
    # 1 def line + 120 body lines = 121 lines, one over the limit
    body = "def f():\n" + "    x = 1\n" * 120
    assert size_problems(_sized_tree(tmp_path, body)) == [
        "kvcalc/m.py:1: f is 121 lines, over 120, and its docstring does not say why"
    ]


def test_a_function_at_the_limit_or_justified_passes(tmp_path):
    at_limit = "def f():\n" + "    x = 1\n" * 119  # 120 lines
    justified = 'def g():\n    """Over the 120 lines: one table."""\n' + "    x = 1\n" * 130
    assert size_problems(_sized_tree(tmp_path, at_limit + justified)) == []


def test_a_long_module_is_reported_unless_its_docstring_says_why(tmp_path):
    body = "x = 1\n" * 601
    assert size_problems(_sized_tree(tmp_path, body)) == [
        "kvcalc/m.py: 601 lines, over 600, and its docstring does not say why"
    ]
    justified = '"""Longer than the 600 lines, on purpose."""\n' + body
    assert size_problems(_sized_tree(tmp_path / "justified", justified)) == []


# -- the path a reader follows from the Budget page to the per-token formula (issue 40) ----------


def test_the_budget_page_reaches_the_formula_in_four_files():
    # app_pages/budget.py -> kvcalc/cache/kv.py -> kvcalc/core/model.py -> kvcalc/core/dtypes.py:
    # the page takes kv_cache from its own module (no facade to look through), and that module
    # computes a token's bytes from the layer kinds and the formats alone.
    page = ast.parse((ROOT / "app_pages" / "budget.py").read_text())
    source = {
        alias.name: node.module
        for node in page.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert source["kv_cache"] == "kvcalc.cache.kv"
    kv = ast.parse((ROOT / "kvcalc" / "cache" / "kv.py").read_text())
    imported = {
        node.module
        for node in kv.body
        if isinstance(node, ast.ImportFrom) and node.module and node.module != "__future__"
    }
    assert imported - {"collections.abc", "dataclasses"} == {
        "core.dtypes",
        "core.model",
        "core.units",
    }


# -- no wide signatures: a deployment travels as one value (issue 40) ---------------------------
MAX_PARAMETERS = 8


def wide_functions(root: Path) -> list[str]:
    """Public functions and methods in kvcalc/ with more than MAX_PARAMETERS parameters
    (positional and keyword-only, not self/cls, not *args/**kwargs)."""
    found = []
    for path in sorted((root / "kvcalc").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            a = node.args
            names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
            n = len([x for x in names if x not in ("self", "cls")])
            if n > MAX_PARAMETERS and not node.name.startswith("_"):
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.name}: {n}")
    return found


def test_no_public_function_takes_more_than_eight_parameters(tmp_path):
    assert wide_functions(ROOT) == []
    wide = ", ".join(f"a{i}" for i in range(9))
    (tmp_path / "kvcalc").mkdir()
    (tmp_path / "kvcalc" / "m.py").write_text(f"def f({wide}): pass\ndef _g({wide}): pass\n")
    assert wide_functions(tmp_path) == ["kvcalc/m.py:1 f: 9"]
