"""The GPU budget and concurrency: where the memory goes and how many sequences of each length
fit."""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go

from kvcalc.core.units import GiB
from kvcalc.engines.budget import Budget
from webui.memo import memo

from .base import COLORS, IN_ORDER, Parts, decades, layout, limit_region, note, vline, vrule


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
    for x, name, color, hover in (
        (weights, "Weights", "weights", "Weights"),
        (reserve, "Reserve (activations, runtime)", "reserve", "Reserve"),
        (pool, "KV pool", "kv", "KV pool"),
        (unused, "Left unused (utilization)", "unused", "Unused"),
    ):
        fig.add_bar(
            y=[gpu_row],
            x=[x],
            name=name,
            showlegend=None if color != "kv" else pool > 0,  # no pool, no legend entry for one
            orientation="h",
            marker_color=COLORS[color],
            hovertemplate=f"{hover}: %{{x:.2f}} GiB<extra></extra>",
        )
    fig.update_layout(barmode="stack", xaxis_title="GiB (2^30 bytes)", **layout(IN_ORDER))
    if b.kv_pool_bytes <= 0:
        # No pool, so no request to draw against it and no pool line (review 4, F20): the line
        # marks what the engine may use, which the weights alone pass.
        _marker(
            fig, b.requested_bytes / GiB, f"the engine may use {b.requested_bytes / GiB:,.2f} GiB"
        )
        fig.update_layout(height=200, bargap=0.5, yaxis=dict(autorange="reversed"))
        return fig.done()
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
    _marker(fig, offset + pool, "end of KV pool", y=0.5)
    fig.update_layout(height=260, bargap=0.45, yaxis=dict(autorange="reversed"))
    return fig.done()


def _marker(fig: Parts, x: float, text: str, y: float = 1.0) -> None:
    """A dotted vertical line at ``x`` GiB labelled inside the plot, at ``y`` (a share of its
    height: 0.5 is the gap between the two bars), clear of the legend above the plot."""
    vrule(fig, x)
    where: dict[str, Any] = dict(yref="paper", xref="x", xanchor="left")
    where.update(yanchor="middle" if y < 1 else "top", xshift=4, bgcolor="rgba(255,255,255,0.85)")
    note(fig, x, y, text, "#444", **where)


def _hline(fig: Parts, y, label_y, text: str, dash: str, color: str, yanchor="top") -> None:
    """A line across the plot at ``y``, labelled at its right end (at ``label_y``)."""
    line = dict(dash=dash, color=color, width=1.5)
    fig.add_shape(type="line", x0=0, x1=1, xref="paper", y0=y, y1=y, yref="y", line=line)
    note(fig, 1, label_y, text, color, xref="paper", yref="y", xanchor="right", yanchor=yanchor)


@memo(32)
def concurrency_figure(
    series: list[tuple[str, list[int], list[float]]],
    marker: int | None = None,
    ceiling: int | None = None,
    model_max: int | None = None,
    limits: tuple[int, ...] | None = None,
) -> go.Figure:
    """Max concurrent sequences against context length, one line per model (log-log), with
    vLLM's max_num_seqs as a horizontal line when given, and a line at one sequence. ``limits``
    (each series' max_position_embeddings): a curve that stops there ends in a marker labelled
    with it (review 4, F10). ``model_max``: one model's limit as a vertical line, the lengths
    past it shaded. A series with no positive value is not drawn. Both axes are ticked at the
    powers of ten only (F21)."""
    fig = Parts()
    x_lo, x_hi = math.inf, 0
    ys: list[float] = []
    for i, (label, contexts, values) in enumerate(series):
        if not any(v > 0 for v in values):
            continue
        fig.add_scatter(
            x=list(contexts),
            y=list(values),
            mode="lines",
            name=label,
            legendgroup=label,
            hovertemplate="%{x:,} tokens: %{y:,.2f} sequences<extra>" + label + "</extra>",
        )
        x_lo, x_hi = min([x_lo, *contexts]), max([x_hi, *contexts])
        ys += [v for v in values if v > 0]
        if limits and contexts and contexts[-1] == limits[i] and values[-1] > 0:
            fig.add_scatter(
                x=[contexts[-1]],
                y=[values[-1]],
                mode="markers+text",
                marker=dict(symbol="line-ns-open", size=14, line=dict(width=2)),
                text=[f"limit {limits[i]:,}"],
                textposition="top center",
                textfont=dict(size=11),
                legendgroup=label,
                showlegend=False,
                hovertemplate=f"{label}: its limit, {limits[i]:,} tokens<extra></extra>",
            )
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
    if ys and min(ys) < 1:
        _hline(fig, 1, 0, "below 1: not one sequence of this length fits", "dot", COLORS["over"])
    if ceiling:  # labelled at the right, where the curves are low: clear of them
        text = f"max_num_seqs = {ceiling:,}: the scheduler runs no more"
        _hline(fig, ceiling, math.log10(ceiling), text, "dash", "#b03a2e", yanchor="bottom")
        ys.append(ceiling)
    xaxis: dict = dict(type="log", title="context per sequence (tokens)")
    yaxis: dict = dict(type="log", title="max concurrent sequences")
    if x_hi:
        xaxis["tickvals"], xaxis["ticktext"] = decades(x_lo, x_hi)
    if ys:
        yaxis["tickvals"], yaxis["ticktext"] = decades(min(ys), max(ys))
    fig.update_layout(xaxis=xaxis, yaxis=yaxis, **layout(IN_ORDER))
    return fig.done()
