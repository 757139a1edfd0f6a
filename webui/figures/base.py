"""What every figure builder shares: the one layout, the one Figure class, the one parts
builder, and the small helpers. No template: st.plotly_chart applies the app theme, and
resolving a template costs ~10 ms."""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go

COLORS = {
    "weights": "#e0607e",  # rose: the fixed part
    "kv": "#2f9e6e",  # green: the cache
    "reserve": "#8c8c9a",
    "unused": "#d9dbe3",
    "over": "#d62728",
    "state": "#7b61c9",
}
# The one layout: small margins, the legend in a row above the plot. A figure that needs
# another height or margin says so through layout(), which merges into a copy of this.
LAYOUT: dict[str, Any] = dict(
    margin=dict(l=10, r=10, t=40, b=10),
    legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0),
    height=360,
)
# Stacked bars and areas list their legend in reverse unless told: these keep the drawn order.
IN_ORDER = dict(legend=dict(traceorder="normal"))


def layout(*overs: dict, **over: Any) -> dict[str, Any]:
    """LAYOUT with ``overs`` and ``over`` merged in order: a dict value merges into LAYOUT's
    dict of the same name (``margin=dict(r=30)`` keeps the other three margins), anything else
    replaces it."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in LAYOUT.items()}
    for extra in (*overs, over):
        for key, value in extra.items():
            out[key] = _merged(out.get(key), value)
    return out


def _merged(old: Any, value: Any) -> Any:
    """``value``, merged into ``old`` where both are dicts."""
    return {**old, **value} if isinstance(old, dict) and isinstance(value, dict) else value


class Figure(go.Figure):
    """A go.Figure built once and then only read (kept in webui.memo, shared by every session),
    which makes its dict once: st.plotly_chart asks for it on every rerun, and go.Figure.to_dict
    deep-copies the whole figure each time (most of a kept chart's server time)."""

    def to_dict(self) -> dict:
        once = self.__dict__.get("_dict_once")
        if once is None:
            once = self._dict_once = super().to_dict()
        return once


class Parts:
    """Collects traces, shapes, annotations and layout as plain dicts and builds the Figure once
    at the end: every go.Figure.add_* call validates the whole figure again, which made a chart
    with a few dozen shapes cost tens of milliseconds per rerun."""

    def __init__(self) -> None:
        self.data: list[dict] = []
        self.layout: dict = {}

    def add_trace(self, trace: dict) -> None:
        self.data.append(trace)

    def add_scatter(self, **kw) -> None:
        self.data.append({"type": "scatter", **kw})

    def add_bar(self, **kw) -> None:
        self.data.append({"type": "bar", **kw})

    def add_shape(self, **kw) -> None:
        self.layout.setdefault("shapes", []).append(kw)

    def add_annotation(self, **kw) -> None:
        self.layout.setdefault("annotations", []).append(kw)

    def update_layout(self, **kw) -> None:
        """Sets layout values; a dict merges into the one already set under its name, and
        ``xaxis_title`` / ``yaxis_title`` set that axis's title."""
        for key, value in kw.items():
            if key in ("xaxis_title", "yaxis_title"):
                key, value = key[:5], {"title": value}
            self.layout[key] = _merged(self.layout.get(key), value)

    def update_xaxis(self, **kw) -> None:
        self.update_layout(xaxis=kw)

    def update_yaxis(self, **kw) -> None:
        self.update_layout(yaxis=kw)

    def done(self) -> Figure:
        return Figure(data=self.data, layout=self.layout)


def vrule(
    fig: Parts,
    x: float,
    dash: str = "dot",
    color: str = "#444",
    width: float = 1.5,
    top: float = 1,
    name: str | None = None,
) -> None:
    """A vertical line at data ``x`` from the plot's foot to ``top`` (a share of its height),
    as a shape (cheaper than add_vline); ``name`` lets a test find it."""
    fig.add_shape(
        type="line",
        **({"name": name} if name else {}),
        x0=x,
        x1=x,
        y0=0,
        y1=top,
        xref="x",
        yref="paper",
        line=dict(dash=dash, color=color, width=width),
    )


def vline(
    fig: Parts, x: float, text: str, dash: str = "dot", position: str = "right", log_x: bool = False
) -> None:
    """A vertical marker across the plot with a label at its top. On a log x axis Plotly takes a
    shape's x0/x1 as data values (8,192) but an annotation's x as log10 of the value (3.913):
    ``log_x`` places both at ``x``."""
    vrule(fig, x, dash=dash)
    xanchor = "left" if position == "right" else "right"
    x = math.log10(x) if log_x else x
    note(fig, x, 1, text, "#444", xref="x", yref="paper", xanchor=xanchor, yanchor="bottom")


def limit_region(
    fig: Parts, x0: float, x1: float, text: str, color: str, log_x: bool = False
) -> None:
    """A tinted band over [x0, x1] on the x axis (data units), labelled at its top left."""
    if x1 <= x0:
        return
    fig.add_shape(
        type="rect",
        x0=x0,
        x1=x1,
        y0=0,
        y1=1,
        yref="paper",
        xref="x",
        fillcolor=color,
        opacity=0.12,
        line_width=0,
        layer="below",
    )
    x = math.log10(x0) if log_x else x0
    note(fig, x, 0.02, text, color, xref="x", yref="paper", xanchor="left", yanchor="bottom")


def note(
    fig: Parts,
    x: float,
    y: float,
    text: str,
    color: str | None = None,
    *,
    size: int = 11,
    **kw: Any,
) -> None:
    """A label at (x, y) with no arrow, in a ``size`` px font (``color`` when given); ``kw``:
    the annotation's other settings (xref, yref, xanchor, yanchor, ...)."""
    font = dict(size=size) if color is None else dict(size=size, color=color)
    fig.add_annotation(x=x, y=y, text=text, showarrow=False, font=font, **kw)


def diagram_axes(fig: Parts, height: float) -> Figure:
    """A diagram's frame: no axes, no legend, no background, small margins, ``height`` px."""
    fig.update_layout(
        height=height,
        margin=dict(l=10, r=10, t=10, b=10),
        showlegend=False,
        plot_bgcolor="rgba(0,0,0,0)",
    )
    fig.update_xaxis(visible=False)
    fig.update_yaxis(visible=False)
    return fig.done()


_OWNER_COLORS = [
    "#4c78a8",
    "#f58518",
    "#54a24b",
    "#b279a2",
    "#e45756",
    "#72b7b2",
    "#eeca3b",
    "#9d755d",
    "#ff9da6",
    "#bab0ac",
    "#1f77b4",
    "#8c564b",
]


def owner_color(rid: str) -> str:
    """One colour per request id, from the digits in it (r1, r2, ...); grey without digits."""
    digits = "".join(ch for ch in rid if ch.isdigit())
    return _OWNER_COLORS[(int(digits) - 1) % len(_OWNER_COLORS)] if digits else "#888"


def decades(lo: float, hi: float) -> tuple[list[float], list[str]]:
    """Tick values at the powers of ten from lo to hi, and their text (0.1, 1, 10, 1,000): a
    log axis then shows no minor digits that read as values."""
    vals = [10.0**k for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]
    return vals, [f"{v:,.0f}" if v >= 1 else f"{v:g}" for v in vals]


def nice_step(top: float, ticks: int = 5) -> int:
    """A whole 1-2-5 step that cuts 0..top into about ``ticks`` parts."""
    raw = max(1.0, top / ticks)
    e = 10 ** math.floor(math.log10(raw))
    return int(next(m * e for m in (1, 2, 5, 10) if m * e >= raw))
