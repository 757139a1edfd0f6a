"""The serving simulator's figures: the throughput frontier and the pool's utilization over
time."""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go

from kvcalc.perf.engines import BATCH_FLAGS, parse_engine
from webui.memo import LARGE_ENTRY_BYTES, LARGE_MEMO_BYTES, memo

from .base import Parts, layout, nice_step, note, vrule

LIMIT_SYMBOLS = {
    "arrivals": "circle",
    "max_num_seqs": "square",
    "kv_pool": "x",
    "max_num_batched_tokens": "diamond",
}


LIMIT_NAMES = {
    "arrivals": "the users (every request is running)",
    "max_num_seqs": "max_num_seqs",
    "kv_pool": "the KV pool",
    "max_num_batched_tokens": "max_num_batched_tokens",
}


def limit_name(limit: str, engine: str | None = None) -> str:
    """LIMIT_NAMES' words for a run's binding limit, a batch cap by the name ``engine``'s
    flag gives it ("sglang@0.5.9": max_running_requests; None: vLLM's)."""
    if engine and limit in ("max_num_seqs", "max_num_batched_tokens"):
        seqs, tokens = BATCH_FLAGS[parse_engine(engine)[0]]
        return seqs if limit == "max_num_seqs" else tokens
    return LIMIT_NAMES[limit]


_CURVE_COLORS = ["#2f9e6e", "#e0607e"]


def _slo(fig: Parts, slo: dict) -> list[float]:
    """The service-level objective over the frontier: the runs that meet it ringed, the best
    of them pointed at, the TPOT target as a vertical line; returns that line's x (or none),
    which the x axis's ticks must reach."""
    if slo.get("meets"):
        fig.add_scatter(
            x=[x for x, _ in slo["meets"]],
            y=[y for _, y in slo["meets"]],
            mode="markers",
            name="meets the service-level objective",
            marker=dict(size=18, symbol="circle-open", color="#2f9e6e", line=dict(width=2)),
            hoverinfo="skip",
        )
    if slo.get("best"):
        x, y, label = slo["best"]
        fig.add_annotation(
            x=math.log10(max(x, 1e-9)),
            y=y,
            text=label,
            showarrow=True,
            arrowhead=2,
            ax=40,
            ay=-30,
            font=dict(size=11, color="#2f9e6e"),
        )
    if slo.get("tpot_s"):
        x = 1 / slo["tpot_s"]
        vrule(fig, x, color="#2f9e6e")
        text = f"TPOT target {slo['tpot_s'] * 1e3:,g} ms"
        where: dict[str, Any] = dict(yref="paper", xref="x", xanchor="left", yanchor="bottom")
        note(fig, math.log10(x), 1, text, "#2f9e6e", **where)
        return [x]
    return []


@memo(32, entry_bytes=LARGE_ENTRY_BYTES, own_bytes=LARGE_MEMO_BYTES)
def frontier_figure(
    curves: list[tuple], slo: dict | None = None, engine: str | None = None
) -> go.Figure:
    """Output tokens/s per GPU against tokens/s per user, one curve per setup: (name, users,
    results[, onset users[, dash]]); each point is a concurrency (users), its marker the limit that
    bound the batch. Only powers of two and the onset carry a label (the others are dense near the
    onset and would pile up); every point says its count in the tooltip. ``slo`` draws a
    service-level objective: ``tpot_s`` (the p99 time per output token a run must stay under: a
    vertical line at 1 / it), ``meets`` (the (x, y) of runs that meet every target, ringed) and
    ``best`` ((x, y, label): the most throughput among them)."""
    fig = Parts()
    xs = [r.output_tokens_per_s_per_user for c in curves for r in c[2]]
    ys = [r.output_tokens_per_s_per_gpu for c in curves for r in c[2]]
    lx = [math.log10(max(x, 1e-9)) for x in xs]
    span_x = (max(lx) - min(lx)) or 1.0
    span_y = (max(ys) - min(ys)) or 1.0
    kept: list[tuple[float, float]] = []  # labelled points, in shares of the plot

    def room(x: float, y: float) -> bool:
        """No other label within 4% of the plot's width and 6% of its height."""
        px, py = (math.log10(max(x, 1e-9)) - min(lx)) / span_x, (y - min(ys)) / span_y
        if any(abs(px - a) < 0.04 and abs(py - b) < 0.06 for a, b in kept):
            return False
        kept.append((px, py))
        return True

    for i, curve in enumerate(curves):
        name, users, results, onset, dash = (*curve, None, None)[:5]
        color = _CURVE_COLORS[i % len(_CURVE_COLORS)]
        # The onset first, then powers of two from the most users down: where points bunch up
        # (few users all get the same speed) only the first of them keeps its label.
        labels = [""] * len(users)
        order = sorted(range(len(users)), key=lambda k: (users[k] != onset, -users[k]))
        for k in order:
            u, r = users[k], results[k]
            if (u == onset or u & (u - 1) == 0) and room(
                r.output_tokens_per_s_per_user, r.output_tokens_per_s_per_gpu
            ):
                labels[k] = f"{u:,}"
        fig.add_scatter(
            x=[r.output_tokens_per_s_per_user for r in results],
            y=[r.output_tokens_per_s_per_gpu for r in results],
            mode="lines+markers+text",
            name=name,
            line=dict(color=color, dash=dash),
            marker=dict(
                size=[13 if r.binding_limit == "kv_pool" else 9 for r in results],
                symbol=[LIMIT_SYMBOLS[r.binding_limit] for r in results],
                color=color,
            ),
            text=labels,
            textposition="top right" if i else "top center",
            textfont=dict(size=11),
            cliponaxis=False,
            customdata=[
                [u, limit_name(r.binding_limit, engine), r.preemptions, r.max_batch]
                for u, r in zip(users, results)
            ],
            hovertemplate="%{customdata[0]:,} users: %{y:,.0f} tokens/s per GPU, %{x:,.1f} "
            "tokens/s per user<br>batch up to %{customdata[3]:,}, limited by "
            "%{customdata[1]}, %{customdata[2]:,} preemptions<extra></extra>",
        )
    if slo:
        xs += _slo(fig, slo)
    fig.update_layout(
        xaxis_title="tokens/s per user (1 / median TPOT)",
        yaxis_title="output tokens/s per GPU",
        **layout(height=420, margin=dict(r=30, t=50)),
    )
    # Whole values at 1-2-5 steps: a log axis's bare minor digits read as values.
    ticks = [
        m * 10**e
        for e in range(-3, 7)
        for m in (1, 2, 5)
        if min(xs) / 1.5 <= m * 10**e <= max(xs) * 1.5
    ]
    fig.update_xaxis(type="log", tickvals=ticks, ticktext=[f"{t:,g}" for t in ticks])
    fig.update_yaxis(rangemode="tozero", tickformat=",d")
    return fig.done()


@memo(32, entry_bytes=LARGE_ENTRY_BYTES, own_bytes=LARGE_MEMO_BYTES)
def utilization_figure(series: tuple, batch: tuple, num_blocks: int) -> go.Figure:
    """KV blocks in use (share of the pool) and running requests over time."""
    fig = Parts()
    fig.add_scatter(
        x=[t for t, _ in series],
        y=[100 * u for _, u in series],
        name="KV blocks in use (% of the pool)",
        line=dict(color="#2f9e6e", shape="hv"),
    )
    fig.add_scatter(
        x=[t for t, _ in batch],
        y=[n for _, n in batch],
        name="running requests",
        yaxis="y2",
        line=dict(color="#444", shape="hv", dash="dot"),
    )
    most = max((n for _, n in batch), default=1)
    step = nice_step(max(1, most))
    fig.update_layout(
        xaxis_title="time (s)",
        yaxis=dict(title=f"% of the pool's {num_blocks:,} blocks", range=[0, 105]),
        # whole requests at round steps, on no grid of their own (the left axis draws it)
        yaxis2=dict(
            title="running requests",
            overlaying="y",
            side="right",
            range=[0, math.ceil(most / step) * step * 1.05],
            tickmode="linear",
            tick0=0,
            dtick=step,
            tickformat=",d",
            showgrid=False,
        ),
        **layout(height=320, margin=dict(r=50)),
    )
    return fig.done()
