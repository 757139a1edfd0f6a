"""webui/figures/base.py: the one layout, the one parts builder, and the rule that webui has one
figure builder (issue 25: "write each helper once"). Expected values are written out by hand
from the layout the figures had before the three builder modules became one."""

import ast
from pathlib import Path

import pytest

pytest.importorskip("plotly")

from webui.figures.base import LAYOUT, Parts, layout  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_layout_merges_a_figures_own_values_into_the_one_layout():
    # The frontier's margin (r=30, t=50) keeps the shared l=10 and b=10.
    got = layout(height=420, margin=dict(r=30, t=50))
    assert got["margin"] == {"l": 10, "r": 30, "t": 50, "b": 10}
    assert got["height"] == 420
    assert got["legend"] == {"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0}
    # Positional dicts merge first, keywords last; the shared LAYOUT is never changed.
    got = layout(dict(legend=dict(traceorder="normal")), dict(height=340), height=260)
    assert got["legend"]["traceorder"] == "normal" and got["legend"]["y"] == 1.02
    assert got["height"] == 260
    assert LAYOUT["height"] == 360 and "traceorder" not in LAYOUT["legend"]
    assert LAYOUT["margin"] == {"l": 10, "r": 10, "t": 40, "b": 10}


def test_parts_builds_one_figure_from_plain_dicts():
    fig = Parts()
    fig.add_scatter(x=[1, 2], y=[3, 4], name="a")
    fig.add_trace(dict(type="bar", x=[1], y=[2], name="b"))
    fig.add_shape(type="line", x0=1, x1=1, y0=0, y1=1)
    fig.add_annotation(x=1, y=1, text="one")
    fig.add_annotation(x=2, y=1, text="two")
    fig.update_layout(xaxis_title="tokens", height=300)
    fig.update_xaxis(type="log")  # merges into the axis the title went to
    fig.update_layout(xaxis=dict(range=[0, 3]), height=320)  # a dict merges, a value replaces
    d = fig.done().to_dict()
    assert [t["type"] for t in d["data"]] == ["scatter", "bar"]
    assert [a["text"] for a in d["layout"]["annotations"]] == ["one", "two"]
    assert len(d["layout"]["shapes"]) == 1
    x = d["layout"]["xaxis"]
    assert x["title"]["text"] == "tokens" and x["type"] == "log" and x["range"] == [0, 3]
    assert d["layout"]["height"] == 320


def _defines_a_builder(tree: ast.Module) -> list[str]:
    """Module-level layout dicts, go.Figure subclasses and parts-builder classes."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            found += [t.id for t in node.targets if isinstance(t, ast.Name) and "LAYOUT" in t.id]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if "LAYOUT" in node.target.id:
                found.append(node.target.id)
        elif isinstance(node, ast.ClassDef):
            bases = [ast.unparse(b) for b in node.bases]
            methods = {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
            collects = methods & {"add_trace", "add_scatter", "add_bar", "trace"}
            if any(b.endswith("Figure") for b in bases) or collects:
                found.append(node.name)
    return found


def test_webui_has_one_figure_builder():
    """Only webui/figures/base.py defines a layout, a Figure class or a parts builder; the
    old webui/charts.py, webui/charts_measured.py and webui/figures.py are gone."""
    where = {}
    for path in sorted((ROOT / "webui").rglob("*.py")):
        got = _defines_a_builder(ast.parse(path.read_text()))
        if got:
            where[str(path.relative_to(ROOT))] = got
    assert where == {"webui/figures/base.py": ["LAYOUT", "Figure", "Parts"]}
    for old in ("charts.py", "charts_measured.py", "figures.py"):
        assert not (ROOT / "webui" / old).exists(), old
    # The checker itself finds a second builder (so the test above can fail).
    second = "_LAYOUT = dict(height=1)\nclass _Fig:\n    def trace(self, t):\n        pass\n"
    assert _defines_a_builder(ast.parse(second)) == ["_LAYOUT", "_Fig"]


def test_the_app_serialises_figures_with_orjson_and_the_same_json():
    """webui.warm_up names Plotly's orjson engine (issue 27: every chart of every rerun is
    serialised). The oracle is Plotly's own stdlib-json engine: the JSON must parse to the same
    values, on a figure with the kinds of values the pages put in them (ints, floats with long
    decimals, NaN gaps, log axes, unicode text). Only the spelling differs: orjson writes an em
    dash as UTF-8 and 1e-05 as 0.00001, which the browser's JSON.parse reads the same."""
    import json
    import math

    import plotly.io as pio

    import webui

    webui.warm_up()
    assert pio.json.config.default_engine == "orjson"
    fig = Parts()
    fig.add_scatter(
        x=[1, 2, 3, 4], y=[0.1 + 0.2, math.nan, 1e-05, 123456789.125], name="KV cache — GiB"
    )
    fig.add_trace(dict(type="bar", x=["A100", "H100"], y=[80, 94.5], name="weights"))
    fig.update_layout(xaxis_title="tokens", height=300)
    fig.update_xaxis(type="log")
    built = fig.done()
    fast, plain = (
        pio.to_json(built, validate=False),
        pio.to_json(built, validate=False, engine="json"),
    )
    assert json.loads(fast) == json.loads(plain)
