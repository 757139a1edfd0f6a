"""The roofline: attainable TFLOP/s against arithmetic intensity, with each workload placed."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import plotly.graph_objects as go

from webui.memo import memo

from .base import Parts, decades, layout

_POINT_SYMBOL = {"gemm": "square", "attention": "diamond", None: "circle"}


_POINT_COLORS = [
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#7f7f7f",
]


def _point_traces(fig: Parts, points: list, y_of: Callable[[Any], float]) -> None:
    """Each workload as one marker at its intensity: squares on the GEMM roof, diamonds on
    attention's, circles for a whole step."""
    for i, p in enumerate(points):
        symbol, color = _POINT_SYMBOL[p.roof], _POINT_COLORS[i % len(_POINT_COLORS)]
        fig.add_trace(
            dict(
                type="scatter",
                x=[p.intensity],
                y=[y_of(p)],
                mode="markers",
                name=p.label,
                # The attention variants are drawn smaller, so one that coincides with a part of
                # the step (the model's own GQA, say) shows inside it rather than hiding it.
                marker=dict(
                    size=9 if p.label.startswith("attention ") else 15,
                    symbol=symbol,
                    color=color,
                    line=dict(width=1, color="#222"),
                ),
                hovertemplate=f"{p.label}: %{{x:,.1f}} FLOP/B, %{{y:,.1f}} TFLOP/s<extra></extra>",
            )
        )


def _ridge_lines(fig: Parts, roofs: Any, ridges: list[tuple[str, float, float]]) -> None:
    """A dotted vertical line at each ridge point, labelled with its FLOPs per byte."""
    for i, (which, _, ridge) in enumerate(ridges):
        fig.add_shape(
            type="line",
            x0=ridge,
            x1=ridge,
            y0=0,
            y1=1,
            yref="paper",
            line=dict(dash="dot", color="#888"),
        )
        label = "ridge" if roofs.one_roof else f"{which.replace('gemm', 'GEMM')} ridge"
        # Two ridges a factor 2 apart: one label to the right of its line, one to the left.
        fig.add_annotation(
            x=math.log10(ridge),
            y=1,
            yref="paper",
            showarrow=False,
            text=f"{label} {ridge:,.0f} FLOP/B",
            yanchor="bottom",
            xanchor="center" if roofs.one_roof else ("left" if i == 0 else "right"),
        )


@memo(32)
def roofline_figure(roofs, points: list, trajectory: list | None = None) -> go.Figure:
    """Attainable TFLOP/s = min(peak, intensity x bandwidth) on log-log axes: one roof for the
    GEMMs (the weights' format) and one for attention (the format it computes in), their ridge
    points, and each workload at its arithmetic intensity (FLOPs per byte). A point bound by one
    roof sits on it; a whole step (GEMMs and attention together, or a prefill at its MFU) sits
    at its FLOPs over the time the page states for it."""
    bw = roofs.bandwidth_gbs

    def y_of(p):
        if p.roof is None:
            return p.achieved_tflops
        peak = roofs.gemm_tflops if p.roof == "gemm" else roofs.attention_tflops
        return min(peak, p.intensity * bw / 1e3)

    ridges = [("gemm", roofs.gemm_tflops, roofs.gemm_ridge)]
    if not roofs.one_roof:
        ridges.append(("attention", roofs.attention_tflops, roofs.attention_ridge))
    drawn = points + list(trajectory or [])
    xs = [p.intensity for p in drawn] + [r for *_, r in ridges]
    lo = 10 ** math.floor(math.log10(max(min(xs) / 2, 1e-3)))
    hi = 10 ** math.ceil(math.log10(max(xs) * 5))  # room for the ridge labels
    ys = [y_of(p) for p in drawn] + [lo * bw / 1e3] + [peak for _, peak, _ in ridges]
    fig = Parts()
    for which, peak, ridge in ridges:
        name = (
            f"roof for GEMMs and attention ({roofs.name('gemm')})"
            if roofs.one_roof
            else f"GEMM roof ({roofs.name('gemm')} weights)"
            if which == "gemm"
            else f"attention roof ({roofs.name('attention')} math)"
        )
        fig.add_scatter(
            x=[lo, ridge, hi],
            y=[lo * bw / 1e3, peak, peak],
            mode="lines",
            name=name,
            line=dict(color="#444", dash="solid")
            if which == "gemm"
            else dict(color="#b04a62", dash="dash"),
        )
    if trajectory:
        fig.add_scatter(
            x=[p.intensity for p in trajectory],
            y=[y_of(p) for p in trajectory],
            mode="lines+markers",
            name="decode steps, batch 1 to the largest that fits",
            line=dict(color="#2f9e6e", dash="dot"),
            marker=dict(size=6),
            text=[p.label for p in trajectory],
            hovertemplate="%{text}: %{x:,.1f} FLOP/B, %{y:,.1f} TFLOP/s<extra></extra>",
        )
    _point_traces(fig, points, y_of)
    _ridge_lines(fig, roofs, ridges)
    xv, xt = decades(lo, hi)
    yv, yt = decades(min(ys) / 1.5, max(ys) * 1.5)
    fig.update_layout(
        xaxis_title="arithmetic intensity (FLOPs per byte read)",
        yaxis_title="attainable TFLOP/s (per GPU)",
        showlegend=True,
        **layout(height=520, legend=dict(yanchor="top", y=-0.18)),
    )
    fig.update_xaxis(type="log", tickvals=xv, ticktext=xt, range=[math.log10(lo), math.log10(hi)])
    fig.update_yaxis(type="log", tickvals=yv, ticktext=yt)
    return fig.done()
