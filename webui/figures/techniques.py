"""The techniques that shrink the cache, side by side: K/V bytes of one sequence under each."""

from __future__ import annotations

import plotly.graph_objects as go

from kvcalc.core.units import GiB
from webui.memo import memo

from .base import COLORS, IN_ORDER, Figure, layout


@memo(32)
def techniques_figure(rows: list, unit: str = "KiB") -> go.Figure:
    """Horizontal bars: K/V bytes of one sequence under each technique (KiB, MiB or GiB)."""
    scale = {"KiB": 2**10, "MiB": 2**20, "GiB": GiB}[unit]
    names = [r.name for r in rows]
    values = [r.seq_bytes / scale for r in rows]
    colors = [
        COLORS["weights"] if r.key == "own" else (COLORS["kv"] if r.saving >= 1 else COLORS["over"])
        for r in rows
    ]
    text = [
        "reference"
        if r.key == "own"
        else (f"{r.saving:,.1f}x smaller" if r.saving >= 1 else f"{1 / r.saving:,.1f}x larger")
        for r in rows
    ]
    fig = Figure(
        go.Bar(
            y=names,
            x=values,
            orientation="h",
            marker_color=colors,
            text=text,
            textposition="auto",
            hovertemplate="%{y}: %{x:,.2f} " + unit + "<extra></extra>",
        )
    )
    fig.update_layout(
        xaxis_title=f"K/V of one sequence ({unit})", showlegend=False, **layout(IN_ORDER)
    )
    fig.update_layout(yaxis=dict(autorange="reversed"), height=60 + 36 * len(rows))
    return fig
