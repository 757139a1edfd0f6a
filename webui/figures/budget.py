"""The GPU budget and concurrency: where the memory goes (weights, reserve, KV pool) and how
many sequences of each length fit. Every axis says its unit (GiB = 2^30 B; tokens).
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from kvcalc.core.units import GiB
from kvcalc.engines.budget import Budget
from webui.memo import memo

from .base import COLORS, IN_ORDER, Parts, layout, limit_region, vline

__all__ = ["budget_figure", "concurrency_figure"]


@memo(32)
def budget_figure(b: Budget) -> go.Figure:
    """Two bars in GiB: the GPU's memory split (weights, reserve, KV pool, left unused by
    gpu_memory_utilization), and the cache the user asks for drawn against the pool (red beyond)."""
    pool = max(b.kv_pool_bytes, 0) / GiB
    weights = b.weights_bytes / GiB
    reserve = b.reserve_bytes / GiB
    unused = b.idle_bytes / GiB
    gpu_row, ask_row = "GPU memory", "Requested KV"
    fig = Parts()
    fig.add_bar(
        y=[gpu_row],
        x=[weights],
        name="Weights",
        orientation="h",
        marker_color=COLORS["weights"],
        hovertemplate="Weights: %{x:.2f} GiB<extra></extra>",
    )
    fig.add_bar(
        y=[gpu_row],
        x=[reserve],
        name="Reserve (activations, runtime)",
        orientation="h",
        marker_color=COLORS["reserve"],
        hovertemplate="Reserve: %{x:.2f} GiB<extra></extra>",
    )
    fig.add_bar(
        y=[gpu_row],
        x=[pool],
        name="KV pool",
        orientation="h",
        marker_color=COLORS["kv"],
        hovertemplate="KV pool: %{x:.2f} GiB<extra></extra>",
    )
    fig.add_bar(
        y=[gpu_row],
        x=[unused],
        name="Left unused (utilization)",
        orientation="h",
        marker_color=COLORS["unused"],
        hovertemplate="Unused: %{x:.2f} GiB<extra></extra>",
    )
    needed = b.needed_bytes / GiB
    offset = weights + reserve  # the request is drawn where the pool starts
    fits = min(needed, pool)
    over = max(needed - pool, 0.0)
    fig.add_bar(
        y=[ask_row],
        x=[offset],
        orientation="h",
        marker_color="rgba(0,0,0,0)",
        showlegend=False,
        hoverinfo="skip",
    )
    fig.add_bar(
        y=[ask_row],
        x=[fits],
        orientation="h",
        name="Requested, fits",
        marker_color=COLORS["kv"] if not over else "#f4a3a3",
        hovertemplate="Requested: %{x:.2f} GiB<extra></extra>",
        showlegend=False,
    )
    if over:
        fig.add_bar(
            y=[ask_row],
            x=[over],
            orientation="h",
            name="Overflow",
            marker_color=COLORS["over"],
            hovertemplate="Over the pool by %{x:.2f} GiB<extra></extra>",
        )
    vline(fig, offset + pool, "end of KV pool")
    fig.update_layout(barmode="stack", xaxis_title="GiB (2^30 bytes)", **layout(IN_ORDER))
    fig.update_layout(height=260, yaxis=dict(autorange="reversed"))
    return fig.done()


@memo(32)
def concurrency_figure(
    series: list[tuple[str, list[int], list[float]]],
    marker: int | None = None,
    ceiling: int | None = None,
    model_max: int | None = None,
) -> go.Figure:
    """Max concurrent sequences against context length, one line per model (log-log), with the
    scheduler's ceiling (vLLM's max_num_seqs) as a horizontal line when given, the model's
    maximum context as a vertical line with the lengths past it shaded, and a line at one
    sequence: below it not even one sequence of that length fits."""
    fig = Parts()
    x_hi = 0
    for label, contexts, values in series:
        fig.add_scatter(
            x=list(contexts),
            y=list(values),
            mode="lines",
            name=label,
            hovertemplate="%{x:,} tokens: %{y:,.1f} sequences<extra>" + label + "</extra>",
        )
        x_hi = max([x_hi, *contexts])
    if marker:
        vline(fig, marker, f"{marker:,} tokens", log_x=True)
    if model_max and model_max <= x_hi:
        vline(
            fig,
            model_max,
            f"model limit {model_max:,}",
            dash="dashdot",
            position="left",
            log_x=True,
        )
        limit_region(fig, model_max, x_hi, "past the model's limit", COLORS["reserve"], log_x=True)
    lows = [v for _, _, values in series for v in values if v > 0]
    if lows and min(lows) < 1:
        fig.add_shape(
            type="line",
            x0=0,
            x1=1,
            xref="paper",
            y0=1,
            y1=1,
            yref="y",
            line=dict(dash="dot", color=COLORS["over"], width=1.5),
        )
        fig.add_annotation(
            x=1,
            xref="paper",
            y=0,
            yref="y",
            showarrow=False,
            text="below 1: not one sequence of this length fits",
            xanchor="right",
            yanchor="top",
            font=dict(size=11, color=COLORS["over"]),
        )
    if ceiling:
        fig.add_shape(
            type="line",
            x0=0,
            x1=1,
            xref="paper",
            y0=ceiling,
            y1=ceiling,
            yref="y",
            line=dict(dash="dash", color="#b03a2e", width=1.5),
        )
        fig.add_annotation(
            x=0,
            xref="paper",
            y=math.log10(ceiling),
            yref="y",
            showarrow=False,
            text=f"max_num_seqs = {ceiling:,}: the scheduler runs no more",
            xanchor="left",
            yanchor="bottom",
            font=dict(size=11, color="#b03a2e"),
        )
    fig.update_layout(
        xaxis=dict(type="log", title="context per sequence (tokens)"),
        yaxis=dict(type="log", title="max concurrent sequences"),
        **layout(IN_ORDER),
    )
    return fig.done()
