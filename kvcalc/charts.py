"""Plotly figure builders: pure functions from kvcalc results to go.Figure.

Only the app's pages import this module (it imports plotly); ``import kvcalc`` does not.
Every axis says its unit (GiB = 2^30 B; milliseconds; tokens).
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from .budget import Budget
from .units import GiB

__all__ = ["budget_figure", "concurrency_figure", "step_time_figure", "batch_figure",
           "techniques_figure", "COLORS"]

COLORS = {
    "weights": "#e0607e",  # rose: the fixed part
    "kv": "#2f9e6e",  # green: the cache
    "reserve": "#8c8c9a",
    "unused": "#d9dbe3",
    "over": "#d62728",
    "state": "#7b61c9",
}
# No template: st.plotly_chart applies the app theme, and resolving a template costs ~10 ms.
_LAYOUT = dict(margin=dict(l=10, r=10, t=40, b=10),
               legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, traceorder="normal"),
               height=360)


def _vline(fig: go.Figure, x: float, text: str, dash: str = "dot",
           position: str = "right") -> None:
    """A vertical marker across the plot with a label at its top (cheaper than add_vline)."""
    fig.add_shape(type="line", x0=x, x1=x, y0=0, y1=1, yref="paper", xref="x",
                  line=dict(dash=dash, color="#444", width=1.5))
    fig.add_annotation(x=x, y=1, yref="paper", xref="x", text=text, showarrow=False,
                       xanchor="left" if position == "right" else "right", yanchor="bottom",
                       font=dict(size=11, color="#444"))


def budget_figure(b: Budget) -> go.Figure:
    """Two bars in GiB: the GPU's memory split (weights, reserve, KV pool, left unused by
    gpu_memory_utilization), and the cache the user asks for drawn against the pool (red beyond)."""
    pool = max(b.kv_pool_bytes, 0) / GiB
    weights = b.weights_bytes / GiB
    reserve = b.reserve_bytes / GiB
    unused = max(b.total_bytes - b.requested_bytes, 0) / GiB
    if b.engine == "trtllm":
        unused = max(b.total_bytes - b.weights_bytes - b.reserve_bytes - max(b.kv_pool_bytes, 0),
                     0) / GiB
    gpu_row, ask_row = "GPU memory", "Requested KV"
    fig = go.Figure()
    fig.add_bar(y=[gpu_row], x=[weights], name="Weights", orientation="h",
                marker_color=COLORS["weights"], hovertemplate="Weights: %{x:.2f} GiB<extra></extra>")
    fig.add_bar(y=[gpu_row], x=[reserve], name="Reserve (activations, runtime)", orientation="h",
                marker_color=COLORS["reserve"], hovertemplate="Reserve: %{x:.2f} GiB<extra></extra>")
    fig.add_bar(y=[gpu_row], x=[pool], name="KV pool", orientation="h", marker_color=COLORS["kv"],
                hovertemplate="KV pool: %{x:.2f} GiB<extra></extra>")
    fig.add_bar(y=[gpu_row], x=[unused], name="Left unused (utilization)", orientation="h",
                marker_color=COLORS["unused"], hovertemplate="Unused: %{x:.2f} GiB<extra></extra>")
    needed = b.needed_bytes / GiB
    offset = weights + reserve  # the request is drawn where the pool starts
    fits = min(needed, pool)
    over = max(needed - pool, 0.0)
    fig.add_bar(y=[ask_row], x=[offset], orientation="h", marker_color="rgba(0,0,0,0)",
                showlegend=False, hoverinfo="skip")
    fig.add_bar(y=[ask_row], x=[fits], orientation="h", name="Requested, fits",
                marker_color=COLORS["kv"] if not over else "#f4a3a3",
                hovertemplate="Requested: %{x:.2f} GiB<extra></extra>", showlegend=False)
    if over:
        fig.add_bar(y=[ask_row], x=[over], orientation="h", name="Overflow",
                    marker_color=COLORS["over"],
                    hovertemplate="Over the pool by %{x:.2f} GiB<extra></extra>")
    _vline(fig, offset + pool, "end of KV pool")
    fig.update_layout(barmode="stack", xaxis_title="GiB (2^30 bytes)", **_LAYOUT)
    fig.update_layout(height=260, yaxis=dict(autorange="reversed"))
    return fig


def concurrency_figure(series: list[tuple[str, list[int], list[float]]],
                       marker: int | None = None) -> go.Figure:
    """Max concurrent sequences against context length, one line per model (log-log)."""
    fig = go.Figure()
    for label, contexts, values in series:
        fig.add_scatter(x=list(contexts), y=list(values), mode="lines", name=label,
                        hovertemplate="%{x:,} tokens: %{y:,.1f} sequences<extra>" + label
                        + "</extra>")
    if marker:
        _vline(fig, math.log10(marker), f"{marker:,} tokens")
    fig.update_layout(xaxis=dict(type="log", title="context per sequence (tokens)"),
                      yaxis=dict(type="log", title="max concurrent sequences"), **_LAYOUT)
    return fig


def step_time_figure(curve: dict, crossover: int | None, batch: int) -> go.Figure:
    """Stacked areas: the fixed weight-read band and the KV-read wedge (ms per step)."""
    x = curve["context"]
    fig = go.Figure()
    fig.add_scatter(x=x, y=[s * 1e3 for s in curve["weight_s"]], name="reading weights",
                    mode="lines", stackgroup="step", line_color=COLORS["weights"],
                    hovertemplate="%{x:,} tokens: weights %{y:.2f} ms<extra></extra>")
    fig.add_scatter(x=x, y=[s * 1e3 for s in curve["kv_s"]], name=f"reading the KV cache "
                    f"(batch {batch})", mode="lines", stackgroup="step", line_color=COLORS["kv"],
                    hovertemplate="%{x:,} tokens: KV %{y:.2f} ms<extra></extra>")
    if crossover is not None and x and x[0] <= crossover <= x[-1]:
        _vline(fig, crossover, f"crossover {crossover:,} tokens", dash="dash", position="left")
    fig.update_layout(xaxis=dict(title="context per sequence (tokens)"),
                      yaxis=dict(title="decode step time (ms)"), **_LAYOUT)
    return fig


def batch_figure(curve: dict) -> go.Figure:
    """Step time (stacked weight/KV reads, ms) and tokens/s against batch size."""
    x = curve["batch"]
    fig = go.Figure()
    fig.add_bar(x=x, y=[s * 1e3 for s in curve["weight_s"]], name="reading weights",
                marker_color=COLORS["weights"])
    fig.add_bar(x=x, y=[s * 1e3 for s in curve["kv_s"]], name="reading the KV cache",
                marker_color=COLORS["kv"])
    fig.add_scatter(x=x, y=curve["tokens_per_s"], name="tokens/s (right axis)", yaxis="y2",
                    mode="lines+markers", line_color="#333")
    fig.update_layout(barmode="stack", xaxis=dict(title="batch (sequences)", type="category"),
                      yaxis=dict(title="decode step time (ms)"),
                      yaxis2=dict(title="tokens/s", overlaying="y", side="right",
                                  showgrid=False), **_LAYOUT)
    return fig


def techniques_figure(rows: list, unit: str = "KiB") -> go.Figure:
    """Horizontal bars: K/V bytes of one sequence under each technique (KiB, MiB or GiB)."""
    scale = {"KiB": 2**10, "MiB": 2**20, "GiB": GiB}[unit]
    names = [r.name for r in rows]
    values = [r.seq_bytes / scale for r in rows]
    colors = [COLORS["weights"] if r.key == "own" else
              (COLORS["kv"] if r.saving >= 1 else COLORS["over"]) for r in rows]
    text = ["reference" if r.key == "own" else
            (f"{r.saving:,.1f}x smaller" if r.saving >= 1 else f"{1 / r.saving:,.1f}x larger")
            for r in rows]
    fig = go.Figure(go.Bar(y=names, x=values, orientation="h", marker_color=colors, text=text,
                           textposition="auto",
                           hovertemplate="%{y}: %{x:,.2f} " + unit + "<extra></extra>"))
    fig.update_layout(xaxis_title=f"K/V of one sequence ({unit})", showlegend=False, **_LAYOUT)
    fig.update_layout(yaxis=dict(autorange="reversed"), height=60 + 36 * len(rows))
    return fig
