"""Plotly figure builders for the pages added with issue 16 (frontier, roofline).

Pure functions from kvcalc results to go.Figure; every axis states its unit. (The older
builders live in kvcalc/charts.py until the refactor moves them here.)
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

__all__ = ["frontier_figure", "utilization_figure", "roofline_figure", "LIMIT_SYMBOLS"]

_LAYOUT = dict(margin=dict(l=10, r=10, t=40, b=10),
               legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0), height=420)
LIMIT_SYMBOLS = {"arrivals": "circle", "max_num_seqs": "square", "kv_pool": "x",
                 "max_num_batched_tokens": "diamond"}
LIMIT_NAMES = {"arrivals": "the users (every request is running)",
               "max_num_seqs": "max_num_seqs", "kv_pool": "the KV pool",
               "max_num_batched_tokens": "max_num_batched_tokens"}
_CURVE_COLORS = ["#2f9e6e", "#e0607e"]


def frontier_figure(curves: list[tuple[str, list[int], list]]) -> go.Figure:
    """Output tokens/s per GPU against tokens/s per user, one curve per setup; each point is a
    concurrency (users), its marker the limit that bound the batch."""
    fig = go.Figure()
    for i, (name, users, results) in enumerate(curves):
        color = _CURVE_COLORS[i % len(_CURVE_COLORS)]
        fig.add_trace(go.Scatter(
            x=[r.output_tokens_per_s_per_user for r in results],
            y=[r.output_tokens_per_s_per_gpu for r in results],
            mode="lines+markers+text", name=name, line=dict(color=color),
            marker=dict(size=[13 if r.binding_limit == "kv_pool" else 9 for r in results],
                        symbol=[LIMIT_SYMBOLS[r.binding_limit] for r in results],
                        color=color),
            text=[f"{u:,}" for u in users], textposition="top center",
            customdata=[[u, LIMIT_NAMES[r.binding_limit], r.preemptions, r.max_batch]
                        for u, r in zip(users, results)],
            hovertemplate="%{customdata[0]} users: %{y:,.0f} tokens/s per GPU, %{x:,.1f} "
                          "tokens/s per user<br>batch up to %{customdata[3]}, limited by "
                          "%{customdata[1]}, %{customdata[2]} preemptions<extra></extra>"))
    fig.update_layout(xaxis_title="tokens/s per user (1 / median TPOT)",
                      yaxis_title="output tokens/s per GPU", **_LAYOUT)
    fig.update_xaxes(type="log")
    return fig


def utilization_figure(series: tuple, batch: tuple, num_blocks: int) -> go.Figure:
    """KV blocks in use (share of the pool) and running requests over time."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[t for t, _ in series], y=[100 * u for _, u in series],
                             name="KV blocks in use (% of the pool)", line=dict(color="#2f9e6e",
                                                                              shape="hv")))
    fig.add_trace(go.Scatter(x=[t for t, _ in batch], y=[n for _, n in batch],
                             name="running requests", yaxis="y2",
                             line=dict(color="#444", shape="hv", dash="dot")))
    fig.update_layout(xaxis_title="time (s)", yaxis=dict(title="% of the pool's "
                                                         f"{num_blocks:,} blocks",
                                                         range=[0, 105]),
                      yaxis2=dict(title="running requests", overlaying="y", side="right",
                                  rangemode="tozero"),
                      **{**_LAYOUT, "height": 320})
    return fig


def roofline_figure(peak_tflops: float, bandwidth_gbs: float, points: list,
                    trajectory: list | None = None) -> go.Figure:
    """Attainable TFLOP/s = min(peak, intensity x bandwidth) on log-log axes, the ridge point,
    and each workload at its arithmetic intensity (FLOPs per byte)."""
    ridge = peak_tflops * 1e12 / (bandwidth_gbs * 1e9)
    xs = [p.intensity for p in points] + ([p.intensity for p in trajectory] if trajectory
                                          else [])
    lo = 10 ** math.floor(math.log10(max(min(xs + [ridge]) / 2, 1e-3)))
    hi = 10 ** math.ceil(math.log10(max(xs + [ridge]) * 2))
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[lo, ridge, hi], y=[lo * bandwidth_gbs / 1e3, peak_tflops,
                                                    peak_tflops],
                             mode="lines", name="roofline: min(peak, intensity x bandwidth)",
                             line=dict(color="#444")))
    if trajectory:
        fig.add_trace(go.Scatter(
            x=[p.intensity for p in trajectory],
            y=[min(peak_tflops, p.intensity * bandwidth_gbs / 1e3) for p in trajectory],
            mode="lines+markers", name="decode as the batch grows", line=dict(color="#2f9e6e",
                                                                              dash="dot"),
            text=[p.label for p in trajectory], hovertemplate="%{text}: %{x:,.1f} FLOP/B"
                                                              "<extra></extra>"))
    for p in points:
        fig.add_trace(go.Scatter(
            x=[p.intensity], y=[min(peak_tflops, p.intensity * bandwidth_gbs / 1e3)],
            mode="markers+text", name=p.label, text=[p.label], textposition="top center",
            marker=dict(size=11), hovertemplate=f"{p.label}: %{{x:,.1f}} FLOP/B<extra></extra>"))
    fig.add_shape(type="line", x0=ridge, x1=ridge, y0=0, y1=1, yref="paper",
                  line=dict(dash="dot", color="#888"))
    fig.add_annotation(x=math.log10(ridge), y=1, yref="paper", showarrow=False,
                       text=f"ridge {ridge:,.0f} FLOP/B", yanchor="bottom")
    fig.update_layout(xaxis_title="arithmetic intensity (FLOPs per byte read)",
                      yaxis_title="attainable TFLOP/s", showlegend=False,
                      **{**_LAYOUT, "height": 460})
    fig.update_xaxes(type="log")
    fig.update_yaxes(type="log")
    return fig
