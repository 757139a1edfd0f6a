"""Plotly figures of the measured pages: the attention microscope, the quality table, the
work-is-not-time timing. Bar heights are plain lists (a test reads them back as numbers)."""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from .base import COLORS, layout

_HEIGHT = dict(height=340)
WRITTEN = "#e08a1e"  # orange: K/V written this step


READ = COLORS["kv"]  # green: K/V only read


def tick_labels(labels: list[str]) -> list[str]:
    """'position: token' with spaces made visible, one per position. Plotly reads a few HTML
    tags in labels (<a href>, <b>): a token is text typed by a user, so < > & are escaped."""
    return [
        f"{i}:{html.escape(t.replace(' ', '·').replace(chr(10), '⏎'))}"
        for i, t in enumerate(labels)
    ]


def _z(matrix) -> np.ndarray:
    """A heatmap's values as one float array: Plotly checks an array at once, where a list of
    lists is checked number by number (tens of milliseconds for a page of keys)."""
    return np.asarray(matrix, dtype=np.float64)


def _figure(
    trace: dict, lay: dict, xaxis: dict | None = None, yaxis: dict | None = None
) -> go.Figure:
    """One trace and its layout, built in one go (no update_* passes)."""
    return go.Figure(
        data=[trace], layout=layout(_HEIGHT, lay, xaxis=xaxis or {}, yaxis=yaxis or {})
    )


def _weights(matrix, x: list, y: list, hover: str) -> dict:
    """A heatmap of attention weights (0 to 1, green), ``hover`` naming the cell."""
    return dict(
        type="heatmap",
        z=_z(matrix),
        x=x,
        y=y,
        colorscale="Greens",
        zmin=0,
        colorbar=dict(title="weight"),
        hovertemplate=hover + ": %{z:.4f}<extra></extra>",
    )


def attention_row_figure(
    weights: list[float], labels: list[str], written: range, title: str
) -> go.Figure:
    """The newest token's attention weights over every cached position; the bars of K/V
    written this step in orange, those only read in green."""
    ticks = tick_labels(labels)
    colors = [WRITTEN if i in written else READ for i in range(len(weights))]
    return _figure(
        dict(
            type="bar",
            x=ticks,
            y=list(map(float, weights)),
            marker=dict(color=colors),
            name="attention weight",
            hovertemplate="%{x}<br>weight %{y:.4f}<extra></extra>",
        ),
        dict(title=title, showlegend=False),
        xaxis=dict(title="cached position: token", tickangle=-60, type="category"),
        yaxis=dict(title="attention weight (sums to 1)"),
    )


def gqa_figure(
    rows: list[list[float]], heads: list[int], labels: list[str], kv_head: int
) -> go.Figure:
    """Attention weights of the query heads that share one KV head (rows) over the same
    cached keys (columns)."""
    return _figure(
        _weights(rows, tick_labels(labels), [f"query head {h}" for h in heads], "%{y}, %{x}"),
        dict(
            title=f"Query heads {heads[0]}-{heads[-1]} read the same keys of KV head {kv_head}",
            height=260,
        ),
        xaxis=dict(title="cached position: token", tickangle=-60, type="category"),
    )


def causal_figure(matrix: list[list[float]], labels: list[str], head: int) -> go.Figure:
    """The prompt's attention weights (query rows, key columns) for one head: zero above the
    diagonal, where the causal mask hides later tokens."""
    ticks = tick_labels(labels)
    return _figure(
        _weights(matrix, ticks, ticks, "query %{y} reads %{x}"),
        dict(
            title=f"Prefill, query head {head}: each row reads only itself and earlier tokens",
            height=460,
        ),
        xaxis=dict(title="key position", tickangle=-60, type="category"),
        yaxis=dict(title="query position", autorange="reversed", type="category"),
    )


def kv_figure(matrix: list[list[float]], labels: list[str], what: str, written: range) -> go.Figure:
    """One KV head's cached keys or values: a row per position, a column per dimension."""
    ticks = tick_labels(labels)
    z = _z(matrix)
    shapes = []
    if len(written):
        box = dict(x0=-0.5, x1=z.shape[1] - 0.5, y0=written[0] - 0.5, y1=written[-1] + 0.5)
        shapes.append(dict(type="rect", **box, line=dict(color=WRITTEN, width=2)))
    return _figure(
        dict(
            type="heatmap",
            z=z,
            y=ticks,
            colorscale="RdBu",
            zmid=0,
            colorbar=dict(title=what),
            hovertemplate="%{y}, dim %{x}: %{z:.3f}<extra></extra>",
        ),
        dict(
            title=f"Cached {what.lower()} (orange box: written this step)",
            height=420,
            shapes=shapes,
        ),
        xaxis=dict(title="dimension"),
        yaxis=dict(title="position: token", autorange="reversed", type="category"),
    )


def quality_figure(rows: list, exact_bytes: int) -> go.Figure:
    """Quality lost (perplexity increase, %) against bytes saved (x smaller than exact)."""
    fig = go.Figure()
    base = next(r.perplexity for r in rows if r.variant == "exact")
    # Labels alternate above and below, and left and right, by rank of the bytes saved, so
    # neighbours (fp8 and int8 save about the same) do not print over each other.
    order = sorted(range(len(rows)), key=lambda i: exact_bytes / rows[i].kv_bytes)
    places = ["top center", "bottom center", "top right", "bottom left"]
    where = {i: places[k % len(places)] for k, i in enumerate(order)}
    for i, r in enumerate(rows):
        saved = exact_bytes / r.kv_bytes
        lost = 100 * (r.perplexity / base - 1)
        fig.add_scatter(
            x=[saved],
            y=[lost],
            mode="markers+text",
            text=[r.variant],
            textposition=where[i],
            name=r.variant,
            marker=dict(size=11),
            hovertemplate=f"{r.variant}<br>{saved:.2f}x smaller<br>perplexity "
            f"{r.perplexity:.3f} ({lost:+.2f}%)<br>agreement "
            f"{r.next_token_agreement:.1%}<extra></extra>",
        )
    fig.update_layout(
        **layout(height=420),
        title="Quality lost against bytes saved (measured)",
        xaxis_title="cache bytes saved (x smaller than the exact fp32 cache)",
        yaxis_title="perplexity increase over exact (%)",
        showlegend=False,
    )
    fig.update_xaxes(type="log")
    return fig


def work_time_figure(points: list, weight_floor_s: float | None = None) -> go.Figure:
    """Time to recompute an n-token prefix (no cache) and of one cached decode step with n
    tokens in the cache, against n; both measured."""
    ns = [p.tokens for p in points]
    fig = go.Figure()
    for what, name, color in (
        ("recompute_s", "recompute n tokens (no cache): n token passes", "weights"),
        ("cached_step_s", "one cached step: 1 token pass", "kv"),
    ):
        y = [getattr(p, what) * 1e3 for p in points]
        fig.add_scatter(x=ns, y=y, mode="lines+markers", name=name, line=dict(color=COLORS[color]))
    if weight_floor_s:
        fig.add_scatter(
            x=[ns[0], ns[-1]],
            y=[weight_floor_s * 1e3] * 2,
            mode="lines",
            name="one read of the weights at nominal bandwidth",
            line=dict(color="#444", dash="dot"),
        )
    fig.update_layout(
        **layout(_HEIGHT),
        title="Work is not time (measured)",
        xaxis_title="tokens n (log scale)",
        yaxis_title="time (ms, log scale)",
    )
    fig.update_xaxes(type="log")
    fig.update_yaxes(type="log")
    return fig
