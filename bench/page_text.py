"""Every page's rendered elements (text, metrics, tables, figures, widget labels) from this tree
and from another commit, compared: the pages' counterpart of bench/outputs.py, the proof that a
refactor of webui/ or app_pages/ changed nothing a student sees.

    python bench/page_text.py --against 70a63f1   # both trees, print the pages that differ
    python bench/page_text.py --write out.json    # this tree only

Each case opens the app in AppTest (as tests/conftest.open_page does) with a link's values,
switches to the page and records every element's protobuf in order (figures as their JSON
spec). The other commit is exported with `git archive` and run with the same interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (page, link values): the defaults, then a second model, a format and a parallel setup.
SETUPS = [
    {},
    {"model": "DeepSeek-V3", "gpu": "NVIDIA H200 SXM 141GB"},
    {"kv": "fp8", "model": "Gemma 3 27B"},
    {"tp": "2", "model": "Llama 3.1 70B"},
    {"model": "Qwen3-Next 80B-A3B"},
]
SKIP = {"live", "microscope", "kv_quality", "live_class"}  # a model or a database


def _elements(node, out: list) -> None:
    from google.protobuf.json_format import MessageToDict

    proto = getattr(node, "proto", None)
    if proto is not None and not hasattr(node, "children"):
        element = MessageToDict(proto)
        if isinstance(element.get("spec"), str):  # a chart: its JSON, keys in one order
            element["spec"] = json.loads(element["spec"])
        out.append(element)
    for child in getattr(node, "children", {}).values():
        _elements(child, out)


def dump(root: Path) -> dict:
    sys.path.insert(0, str(root))
    from streamlit.testing.v1 import AppTest

    from webui import pages

    out = {}
    for page in pages.PAGES:
        if page.name in SKIP:
            continue
        for query in SETUPS:
            at = AppTest.from_file(str(root / "app.py"), default_timeout=120)
            for k, v in query.items():
                at.query_params[k] = v
            at.run()
            at.switch_page(page.path)
            at.run()
            got: list = []
            _elements(at._tree, got)
            key = f"{page.name} {json.dumps(query, sort_keys=True)}"
            # A widget's id carries a hash of the app's path (two checkouts differ): key only.
            text = re.sub(r"\$\$ID-[0-9a-f]{32}-", "$$ID-", json.dumps(got, default=str))
            out[key] = json.loads(text)
            out[key].append({"exceptions": [e.value for e in at.exception]})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", help="a commit to compare with")
    ap.add_argument("--write", help="write this tree's dump here")
    ap.add_argument("--root", default=str(ROOT), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.against is None:
        result = dump(Path(args.root))
        text = json.dumps(result, indent=1, sort_keys=True)
        Path(args.write).write_text(text) if args.write else print(text)
        return
    with tempfile.TemporaryDirectory() as tmp:
        other = Path(tmp) / "other"
        other.mkdir()
        archive = subprocess.run(
            ["git", "archive", args.against], cwd=ROOT, capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(other)], input=archive.stdout, check=True)
        runs = {}
        for name, root in (("this", ROOT), (args.against, other)):
            dest = Path(tmp) / f"{name}.json"
            subprocess.run(
                [sys.executable, __file__, "--root", str(root), "--write", str(dest)],
                cwd=root,
                check=True,
                env={**os.environ, "PYTHONHASHSEED": "0"},  # a set's printed order
            )
            runs[name] = json.loads(dest.read_text())
    a, b = runs["this"], runs[args.against]
    differ = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    for k in differ:
        x, y = a.get(k) or [], b.get(k) or []
        first = next(
            (i for i in range(max(len(x), len(y))) if i >= len(x) or i >= len(y) or x[i] != y[i]),
            None,
        )
        print(f"DIFFER {k}: element {first} of {len(x)} here / {len(y)} there")
        if first is not None:
            print("  here: ", json.dumps(x[first] if first < len(x) else None)[:400])
            print("  there:", json.dumps(y[first] if first < len(y) else None)[:400])
    print(f"{len(a)} cases, {len(differ)} differ")


if __name__ == "__main__":
    main()
