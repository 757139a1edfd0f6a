"""Plotly figure builders for the pages added with issue 16 (frontier, roofline) and the
diagrams drawn from the chosen model's own numbers (head sharing, MLA, sliding window,
PagedAttention).

Pure functions from kvcalc results to go.Figure; every axis states its unit. (The older
builders live in kvcalc/charts.py until the refactor moves them here.)
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from webui.charts import Figure, owner_color
from webui.memo import memo

__all__ = [
    "frontier_figure",
    "utilization_figure",
    "roofline_figure",
    "LIMIT_SYMBOLS",
    "head_sharing_figure",
    "mla_figure",
    "window_figure",
    "paged_figure",
]

_LAYOUT = dict(
    margin=dict(l=10, r=10, t=40, b=10),
    legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0),
    height=420,
)
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
_CURVE_COLORS = ["#2f9e6e", "#e0607e"]


@memo(32)
def frontier_figure(curves: list[tuple], slo: dict | None = None) -> go.Figure:
    """Output tokens/s per GPU against tokens/s per user, one curve per setup: (name, users,
    results[, onset users[, dash]]); each point is a concurrency (users), its marker the limit
    that bound the batch. Only powers of two and the onset carry a label (the others are dense
    near the onset and would pile up); every point says its count in the tooltip.

    ``slo`` draws a service-level objective: ``tpot_s`` (the p99 time per output token a run
    must stay under: a vertical line at 1 / it), ``meets`` (the (x, y) of runs that meet every
    target, ringed) and ``best`` ((x, y, label): the most throughput among them)."""
    fig = _Parts()
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
        name, users, results = curve[:3]
        onset = curve[3] if len(curve) > 3 else None
        dash = curve[4] if len(curve) > 4 else None
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
        fig.trace(
            dict(
                type="scatter",
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
                    [u, LIMIT_NAMES[r.binding_limit], r.preemptions, r.max_batch]
                    for u, r in zip(users, results)
                ],
                hovertemplate="%{customdata[0]:,} users: %{y:,.0f} tokens/s per GPU, %{x:,.1f} "
                "tokens/s per user<br>batch up to %{customdata[3]:,}, limited by "
                "%{customdata[1]}, %{customdata[2]:,} preemptions<extra></extra>",
            )
        )
    if slo:
        if slo.get("meets"):
            fig.trace(
                dict(
                    type="scatter",
                    x=[x for x, _ in slo["meets"]],
                    y=[y for _, y in slo["meets"]],
                    mode="markers",
                    name="meets the service-level objective",
                    marker=dict(size=18, symbol="circle-open", color="#2f9e6e", line=dict(width=2)),
                    hoverinfo="skip",
                )
            )
        if slo.get("best"):
            x, y, label = slo["best"]
            fig.note(
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
            fig.shape(
                type="line",
                x0=x,
                x1=x,
                y0=0,
                y1=1,
                yref="paper",
                xref="x",
                line=dict(dash="dot", color="#2f9e6e", width=1.5),
            )
            fig.note(
                x=math.log10(x),
                y=1,
                yref="paper",
                xref="x",
                showarrow=False,
                text=f"TPOT target {slo['tpot_s'] * 1e3:,g} ms",
                xanchor="left",
                yanchor="bottom",
                font=dict(size=11, color="#2f9e6e"),
            )
            xs.append(x)
    fig.layout(
        xaxis_title="tokens/s per user (1 / median TPOT)",
        yaxis_title="output tokens/s per GPU",
        **{**_LAYOUT, "margin": dict(l=10, r=30, t=50, b=10)},
    )
    # Whole values at 1-2-5 steps: a log axis's bare minor digits read as values.
    ticks = [
        m * 10**e
        for e in range(-3, 7)
        for m in (1, 2, 5)
        if min(xs) / 1.5 <= m * 10**e <= max(xs) * 1.5
    ]
    fig.xaxis(type="log", tickvals=ticks, ticktext=[f"{t:,g}" for t in ticks])
    fig.yaxis(rangemode="tozero", tickformat=",d")
    return fig.figure()


def _nice_step(top: float, ticks: int = 5) -> int:
    """A whole 1-2-5 step that cuts 0..top into about ``ticks`` parts."""
    raw = max(1.0, top / ticks)
    e = 10 ** math.floor(math.log10(raw))
    return int(next(m * e for m in (1, 2, 5, 10) if m * e >= raw))


@memo(32)
def utilization_figure(series: tuple, batch: tuple, num_blocks: int) -> go.Figure:
    """KV blocks in use (share of the pool) and running requests over time."""
    fig = _Parts()
    fig.trace(
        dict(
            type="scatter",
            x=[t for t, _ in series],
            y=[100 * u for _, u in series],
            name="KV blocks in use (% of the pool)",
            line=dict(color="#2f9e6e", shape="hv"),
        )
    )
    fig.trace(
        dict(
            type="scatter",
            x=[t for t, _ in batch],
            y=[n for _, n in batch],
            name="running requests",
            yaxis="y2",
            line=dict(color="#444", shape="hv", dash="dot"),
        )
    )
    most = max((n for _, n in batch), default=1)
    step = _nice_step(max(1, most))
    fig.layout(
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
        **{**_LAYOUT, "height": 320, "margin": dict(l=10, r=50, t=40, b=10)},
    )
    return fig.figure()


def _decades(lo: float, hi: float) -> tuple[list[float], list[str]]:
    """Tick values at the powers of ten from lo to hi, and their text (0.1, 1, 10, 1,000): a
    log axis then shows no minor digits that read as values."""
    vals = [10.0**k for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]
    return vals, [f"{v:,.0f}" if v >= 1 else f"{v:g}" for v in vals]


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
    xs = (
        [p.intensity for p in points]
        + [p.intensity for p in trajectory or []]
        + [r for *_, r in ridges]
    )
    lo = 10 ** math.floor(math.log10(max(min(xs) / 2, 1e-3)))
    hi = 10 ** math.ceil(math.log10(max(xs) * 5))  # room for the ridge labels
    ys = [y_of(p) for p in points + list(trajectory or [])] + [lo * bw / 1e3]
    ys += [peak for _, peak, _ in ridges]
    fig = _Parts()
    for which, peak, ridge in ridges:
        name = (
            f"roof for GEMMs and attention ({roofs.name('gemm')})"
            if roofs.one_roof
            else f"GEMM roof ({roofs.name('gemm')} weights)"
            if which == "gemm"
            else f"attention roof ({roofs.name('attention')} math)"
        )
        fig.trace(
            dict(
                type="scatter",
                x=[lo, ridge, hi],
                y=[lo * bw / 1e3, peak, peak],
                mode="lines",
                name=name,
                line=dict(
                    color="#444" if which == "gemm" else "#b04a62",
                    dash="solid" if which == "gemm" else "dash",
                ),
            )
        )
    if trajectory:
        fig.trace(
            dict(
                type="scatter",
                x=[p.intensity for p in trajectory],
                y=[y_of(p) for p in trajectory],
                mode="lines+markers",
                name="decode steps, batch 1 to the largest that fits",
                line=dict(color="#2f9e6e", dash="dot"),
                marker=dict(size=6),
                text=[p.label for p in trajectory],
                hovertemplate="%{text}: %{x:,.1f} FLOP/B, %{y:,.1f} TFLOP/s<extra></extra>",
            )
        )
    for i, p in enumerate(points):
        symbol, color = _POINT_SYMBOL[p.roof], _POINT_COLORS[i % len(_POINT_COLORS)]
        fig.trace(
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
    for i, (which, _, ridge) in enumerate(ridges):
        fig.shape(
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
        fig.note(
            x=math.log10(ridge),
            y=1,
            yref="paper",
            showarrow=False,
            text=f"{label} {ridge:,.0f} FLOP/B",
            yanchor="bottom",
            xanchor="center" if roofs.one_roof else ("left" if i == 0 else "right"),
        )
    xv, xt = _decades(lo, hi)
    yv, yt = _decades(min(ys) / 1.5, max(ys) * 1.5)
    fig.layout(
        xaxis_title="arithmetic intensity (FLOPs per byte read)",
        yaxis_title="attainable TFLOP/s (per GPU)",
        showlegend=True,
        **{**_LAYOUT, "height": 520, "legend": dict(orientation="h", yanchor="top", y=-0.18, x=0)},
    )
    fig.xaxis(type="log", tickvals=xv, ticktext=xt, range=[math.log10(lo), math.log10(hi)])
    fig.yaxis(type="log", tickvals=yv, ticktext=yt)
    return fig.figure()


# -- diagrams drawn from the chosen model's own numbers ------------------------------------------

_Q_COLOR, _KV_COLOR, _LINE_COLOR = "#4c78a8", "#2f9e6e", "#9aa5b1"


class _Parts:
    """Traces, shapes and annotations collected as plain dicts and turned into a figure once:
    go.Figure's add_* calls validate the whole layout each time (tens of ms per diagram)."""

    def __init__(self) -> None:
        self.traces: list[dict] = []
        self.shapes: list[dict] = []
        self.notes: list[dict] = []
        self.lay: dict = {"xaxis": {}, "yaxis": {}}

    def trace(self, t: dict) -> None:
        self.traces.append(t)

    def shape(self, **kw) -> None:
        self.shapes.append(kw)

    def note(self, **kw) -> None:
        self.notes.append(kw)

    def xaxis(self, **kw) -> None:
        self.lay["xaxis"].update(kw)

    def yaxis(self, **kw) -> None:
        self.lay["yaxis"].update(kw)

    def layout(self, **kw) -> None:
        for k, v in kw.items():
            if k in ("xaxis_title", "yaxis_title"):
                self.lay[k[:5]]["title"] = v
            elif k in ("xaxis", "yaxis"):
                self.lay[k].update(v)
            else:
                self.lay[k] = v

    def figure(self) -> go.Figure:
        return Figure(
            data=self.traces, layout=dict(self.lay, shapes=self.shapes, annotations=self.notes)
        )


def _diagram_axes(fig: _Parts, height: float) -> go.Figure:
    fig.layout(
        height=height,
        margin=dict(l=10, r=10, t=10, b=10),
        showlegend=False,
        plot_bgcolor="rgba(0,0,0,0)",
    )
    fig.xaxis(visible=False)
    fig.yaxis(visible=False)
    return fig.figure()


def head_sharing_rows(q_heads: int, kv_heads: int) -> list[tuple[str, int, bool]]:
    """(name, K/V heads, is the model's own) for MHA, the model's own grouping and MQA."""
    if q_heads < 1 or kv_heads < 1 or q_heads % kv_heads:
        raise ValueError(f"{q_heads} query heads cannot be grouped evenly on {kv_heads} K/V heads")
    rows = [("MHA", q_heads, kv_heads == q_heads)]
    if 1 < kv_heads < q_heads:
        rows.append(("GQA", kv_heads, True))
    rows.append(("MQA", 1, kv_heads == 1 and q_heads > 1))
    if q_heads == 1:
        rows = rows[:1]
    return rows


MAX_DRAWN_HEADS = 128  # the most query heads of a published model; more are drawn as a sample


@memo(32)
def head_sharing_figure(
    q_heads: int,
    kv_heads: int,
    head_dim: int,
    v_head_dim: int | None = None,
    bytes_per_element: float = 2,
) -> go.Figure:
    """Query heads (top of each row) drawn on the K/V heads they read (bottom), one row each for
    MHA (a K/V head per query head), the model's own grouped-query attention (GQA) and
    multi-query attention (MQA, one K/V head for all). Query head i reads K/V head
    i // (q_heads / kv_heads). Each row says what one token stores in one layer.

    Past MAX_DRAWN_HEADS query heads, that many are drawn, evenly spread over all of them and
    each on its own K/V head (a config may ask for 16,384 heads: a figure of every one took
    seconds to build); the notes keep the true counts and say how many are drawn."""
    v_dim = head_dim if v_head_dim is None else v_head_dim
    rows = head_sharing_rows(q_heads, kv_heads)
    shown = min(q_heads, MAX_DRAWN_HEADS)
    # which query heads are drawn, and the x scale that fits all q_heads into `shown` slots
    qs = (
        list(range(q_heads))
        if shown == q_heads
        else sorted({round(j * (q_heads - 1) / (shown - 1)) for j in range(shown)})
    )
    scale = 1 if shown == q_heads else shown / q_heads
    size = max(4, min(14, 420 / shown))
    fig = _Parts()
    for r, (name, kv, own) in enumerate(rows):
        top, bottom = -3 * r, -3 * r - 1.4
        group = q_heads // kv
        drawn_kv = sorted({i // group for i in qs})
        center = {g: (g * group + (group - 1) / 2) * scale for g in drawn_kv}
        lx, ly = [], []
        for i in qs:
            lx += [i * scale, center[i // group], None]
            ly += [top, bottom, None]
        fig.trace(
            dict(
                type="scatter",
                x=lx,
                y=ly,
                mode="lines",
                name=f"{name}: sharing",
                line=dict(color=_LINE_COLOR, width=1),
                hoverinfo="skip",
            )
        )
        fig.trace(
            dict(
                type="scatter",
                x=[i * scale for i in qs],
                y=[top] * len(qs),
                mode="markers",
                name=f"{name}: query heads",
                marker=dict(symbol="square", size=size, color=_Q_COLOR),
                customdata=qs,
                hovertemplate="query head %{customdata}<extra></extra>",
            )
        )
        fig.trace(
            dict(
                type="scatter",
                x=[center[g] for g in drawn_kv],
                y=[bottom] * len(drawn_kv),
                mode="markers",
                name=f"{name}: K/V heads",
                marker=dict(
                    symbol="square",
                    size=size * 1.4,
                    color=_KV_COLOR,
                    line=dict(color="#1d5e42", width=2 if own else 0),
                ),
                customdata=drawn_kv,
                hovertemplate="K/V head %{customdata}<extra></extra>",
            )
        )
        per_token = kv * (head_dim + v_dim)
        share = "1 query head per K/V head" if group == 1 else f"{group:,} query heads per K/V head"
        sample = (
            ""
            if shown == q_heads
            else f" ({len(qs):,} of the {q_heads:,} query heads drawn, evenly spread)"
        )
        fig.note(
            x=-0.5,
            y=top + 0.55,
            xanchor="left",
            yanchor="bottom",
            showarrow=False,
            font=dict(size=12),
            text=(
                f"<b>{name}</b>{' (this model)' if own else ''}: {q_heads:,} query heads, "
                f"{kv:,} K/V head{'s' if kv != 1 else ''}, {share}; one token stores "
                f"{kv:,} x ({head_dim} + {v_dim}) = {per_token:,} numbers per layer "
                f"({per_token * bytes_per_element:,.0f} B){sample}"
            ),
        )
    fig.xaxis(range=[-1, q_heads * scale])
    return _diagram_axes(fig, 90 + 115 * len(rows))


@memo(32)
def mla_figure(
    *,
    hidden: int | None,
    q_heads: int,
    rank: int,
    rope: int,
    qk_nope: int,
    v_head_dim: int,
    own: bool,
) -> go.Figure:
    """Multi-head latent attention in two lanes. Store: each token's hidden state is
    compressed (W_DKV) to a latent c_KV of ``rank`` numbers, and a RoPE key of ``rope`` numbers
    is kept beside it; that is all the cache holds. Decode (absorbed): each query head's
    non-RoPE part is multiplied by that head's key up-projection W_UK once, so it scores the
    cached latents directly; the weighted sum of latents goes through W_UV (folded into the
    output projection). Box heights grow with the square root of the numbers they hold."""
    cached = rank + rope
    full = q_heads * ((qk_nope + rope) + v_head_dim)
    boxes = [  # (lane, x, label, numbers, color, name)
        (
            0,
            0,
            f"hidden state<br>{hidden:,}" if hidden else "hidden state",
            hidden or rank,
            "#bbb",
            "hidden",
        ),
        (0, 2, f"latent c_KV<br>{rank:,}", rank, _KV_COLOR, "latent"),
        (0, 3.1, f"RoPE key<br>{rope:,}", rope, _KV_COLOR, "rope"),
        (1, 0, f"query head i<br>{qk_nope} + {rope} RoPE", qk_nope + rope, _Q_COLOR, "query"),
        (1, 2, f"absorbed query<br>{rank:,} + {rope} RoPE", rank + rope, _Q_COLOR, "absorbed"),
        (1, 4, "scores vs every<br>cached latent", rank + rope, "#ddd", "scores"),
        (1, 6, f"sum of latents<br>{rank:,}", rank, "#ddd", "sum"),
        (1, 8, f"value of head i<br>{v_head_dim}", v_head_dim, _Q_COLOR, "value"),
    ]
    big = max(b[3] for b in boxes)
    fig = _Parts()
    for lane, x, label, n, color, name in boxes:
        h = 0.55 + 0.75 * math.sqrt(n / big)
        y = -2.2 * lane
        fig.shape(
            type="rect",
            x0=x - 0.45,
            x1=x + 0.45,
            y0=y - h / 2,
            y1=y + h / 2,
            fillcolor=color,
            line=dict(color="#333", width=1.2),
            opacity=0.85,
            layer="below",
        )
        fig.trace(
            dict(
                type="scatter",
                x=[x],
                y=[y],
                mode="text",
                text=[label],
                name=name,
                customdata=[n],
                textfont=dict(size=11, color="#111"),
                hovertemplate=f"{name}: %{{customdata:,}} numbers<extra></extra>",
            )
        )
    for lane, text in ((0, "<b>Store</b>, every token:"), (1, "<b>Decode</b>, each query head i:")):
        fig.note(
            x=-0.6,
            y=-2.2 * lane + 0.75,
            xanchor="left",
            showarrow=False,
            text=text,
            font=dict(size=11),
        )
    arrows = [
        (0, 0, 2, "x W_DKV<br>(compress)"),
        (1, 0, 2, "x W_UK,i<br>(absorbed)"),
        (1, 2, 4, "q . c_KV +<br>q_rope . k_rope"),
        (1, 4, 6, "softmax,<br>weighted sum"),
        (1, 6, 8, "x W_UV,i<br>(into W_O)"),
    ]
    for lane, x0, x1, text in arrows:
        y = -2.2 * lane
        fig.note(
            x=x1 - 0.47,
            y=y,
            ax=x0 + 0.47,
            ay=y,
            xref="x",
            yref="y",
            axref="x",
            ayref="y",
            showarrow=True,
            arrowhead=2,
            text="",
        )
        fig.note(
            x=(x0 + x1) / 2,
            y=y - 0.1,
            yanchor="top",
            showarrow=False,
            text=text,
            font=dict(size=10, color="#444"),
        )
    fig.note(
        x=3.1, y=-0.75, showarrow=False, font=dict(size=10, color="#444"), text="RoPE key: x W_KR"
    )
    # What joins the lanes: every head's scores read the cached latents and RoPE keys.
    fig.note(
        x=4,
        y=-2.2 + 0.62,
        ax=2.6,
        ay=-0.62,
        xref="x",
        yref="y",
        axref="x",
        ayref="y",
        showarrow=True,
        arrowhead=2,
        arrowcolor=_KV_COLOR,
        arrowwidth=1.5,
        text="",
    )
    fig.note(
        x=2.55,
        y=-1.25,
        showarrow=False,
        font=dict(size=12),
        text=(
            f"<b>cached per token and layer: {rank:,} + {rope} = {cached:,} "
            f"numbers</b>, read by all {q_heads:,} heads"
        ),
    )
    fig.note(
        x=4,
        y=1.45,
        showarrow=False,
        font=dict(size=12),
        text=(
            f"{'This model' if own else 'An MLA layer here'} "
            f"without the latent (MHA): {q_heads:,} heads x ({qk_nope + rope} K + "
            f"{v_head_dim} V)<br>= {full:,} numbers per token and layer, "
            f"{full / cached:,.1f}x more"
        ),
    )
    fig.xaxis(range=[-0.7, 8.7])
    fig.yaxis(range=[-3.2, 1.9])
    return _diagram_axes(fig, 380)


@memo(32)
def window_figure(window: int, context: int, kinds: list[str]) -> go.Figure:
    """The attention matrix of one sequence of ``context`` tokens (query position down, key
    position across): causal attention fills the lower triangle; a sliding window of ``window``
    keeps only the band of the last ``window`` keys of each query. ``kinds`` ("sliding", "full",
    or anything else) is the model's layer list: when sliding and full layers interleave, a strip
    above the matrix marks each layer."""
    if window < 1 or context < 1:
        raise ValueError("the window and the context must be at least 1 token")
    n, w = context, min(window, context)
    # A band under 2% of the matrix is a hairline at any screen width: draw it at least that
    # wide, and say so in its name (the figures in the text are the real ones).
    drawn = max(w, math.ceil(0.02 * n))
    widened = drawn > w
    sliding = sum(1 for k in kinds if k == "sliding")
    full = sum(1 for k in kinds if k == "full")
    mixed = sliding > 0 and full > 0
    fig = _Parts()
    fig.trace(
        dict(
            type="scatter",
            x=[0, n, 0, 0],
            y=[0, n, n, 0],
            fill="toself",
            mode="lines",
            name="full attention: every earlier key",
            fillcolor="rgba(160,170,180,0.35)",
            line=dict(color="#888"),
            hoverinfo="name",
        )
    )
    # The band between key = query (the diagonal) and key = query - window + 1.
    fig.trace(
        dict(
            type="scatter",
            x=[0, n, n - drawn, 0, 0],
            y=[0, n, n, drawn, 0],
            fill="toself",
            mode="lines",
            name=f"sliding window: the last {w:,} keys"
            + (" (drawn wider to be seen)" if widened else ""),
            fillcolor="rgba(47,158,110,0.55)",
            line=dict(color=_KV_COLOR),
            hoverinfo="name",
        )
    )
    fig.trace(
        dict(
            type="scatter",
            x=[n - drawn, n],
            y=[n, n],
            mode="lines",
            name="kept in the cache now",
            line=dict(color="#1d5e42", width=6),
            hoverinfo="name",
        )
    )
    fig.note(
        x=n - drawn / 2,
        y=n,
        yshift=12,
        showarrow=False,
        font=dict(size=11),
        xanchor="right" if drawn < 0.3 * n else "center",
        text=f"cached for the next token: {w:,}",
    )
    fig.layout(
        xaxis=dict(title="key position (tokens)", range=[0, n], domain=[0, 1]),
        yaxis=dict(title="query position (tokens)", range=[n, 0], domain=[0, 0.78 if mixed else 1]),
        height=440,
        margin=dict(l=10, r=10, t=30, b=10),
        legend=dict(orientation="h", yanchor="top", y=-0.15, x=0),
        plot_bgcolor="rgba(0,0,0,0)",
    )
    if mixed:
        fig.trace(
            dict(
                type="scatter",
                x=list(range(len(kinds))),
                y=[0] * len(kinds),
                mode="markers",
                name="layers",
                xaxis="x2",
                yaxis="y2",
                showlegend=False,
                marker=dict(
                    symbol="square",
                    size=max(4, min(12, 600 / len(kinds))),
                    color=[
                        _KV_COLOR if k == "sliding" else "#555" if k == "full" else "#ddd"
                        for k in kinds
                    ],
                ),
                customdata=kinds,
                hovertemplate="layer %{x}: %{customdata}<extra></extra>",
            )
        )
        fig.layout(
            xaxis2=dict(domain=[0, 1], anchor="y2", visible=False, range=[-1, len(kinds)]),
            yaxis2=dict(domain=[0.86, 1], anchor="x2", visible=False),
        )
        fig.note(
            x=0,
            y=1.0,
            xref="paper",
            yref="paper",
            showarrow=False,
            xanchor="left",
            yanchor="bottom",
            font=dict(size=11),
            text=(
                f"layers interleave: {sliding:,} sliding (green), {full:,} full "
                "(dark), in model order"
            ),
        )
    return fig.figure()


@memo(32)
def paged_figure(tables: tuple, block_size: int, num_blocks: int, per_row: int = 16) -> go.Figure:
    """PagedAttention: each running request's logical blocks (one row per request, in token
    order) mapped through its block table to physical blocks of the pool (the numbered grid
    below). ``tables``: the engine snapshot's rows (rid, tokens, blocks); a request without
    blocks is not drawn."""
    running = [t for t in tables if t.blocks]
    nrun = len(running)
    pool_y0 = nrun + 1.0  # the pool's first row

    def pool_xy(bid: int) -> tuple[int, float]:
        return bid % per_row, pool_y0 + bid // per_row

    fig = _Parts()
    for r, t in enumerate(running):  # lines first: the blocks are drawn over them
        lx, ly = [], []
        for i, bid in enumerate(t.blocks):
            px, py = pool_xy(bid)
            lx += [i, px, None]
            ly += [r, py, None]
        fig.trace(
            dict(
                type="scatter",
                x=lx,
                y=ly,
                mode="lines",
                name=f"{t.rid}: block table",
                line=dict(color=owner_color(t.rid), width=1.2),
                opacity=0.7,
                hoverinfo="skip",
            )
        )
    for r, t in enumerate(running):
        k = len(t.blocks)
        last = t.tokens - (k - 1) * block_size  # slots written in the last logical block
        fills = [block_size] * (k - 1) + [last]
        fig.trace(
            dict(
                type="scatter",
                x=list(range(k)),
                y=[r] * k,
                mode="markers+text",
                name=f"{t.rid}: logical blocks",
                text=[str(i) for i in range(k)],
                textfont=dict(size=9, color="#fff"),
                marker=dict(symbol="square", size=20, color=owner_color(t.rid)),
                customdata=[[b, f] for b, f in zip(t.blocks, fills)],
                hovertemplate=(
                    f"{t.rid}, logical block %{{text}} -> physical block "
                    "%{customdata[0]} (%{customdata[1]}/"
                    f"{block_size} slots written)"
                    "<extra></extra>"
                ),
            )
        )
        fig.note(
            x=-0.7,
            y=r,
            xanchor="right",
            showarrow=False,
            font=dict(size=11),
            text=f"{t.rid}: [{', '.join(map(str, t.blocks))}]",
        )
    owner: dict[int, str] = {}
    for t in running:
        for b in t.blocks:
            owner.setdefault(b, t.rid)
    xs, ys = zip(*(pool_xy(b) for b in range(num_blocks))) if num_blocks else ((), ())
    fig.trace(
        dict(
            type="scatter",
            x=list(xs),
            y=list(ys),
            mode="markers+text",
            name="physical blocks",
            text=[str(b) for b in range(num_blocks)],
            textfont=dict(size=8),
            marker=dict(
                symbol="square",
                size=20,
                line=dict(color="#555", width=0.5),
                color=[
                    owner_color(owner[b]) if b in owner else "#eef1f4" for b in range(num_blocks)
                ],
            ),
            hovertemplate="physical block %{text}<extra></extra>",
        )
    )
    fig.note(
        x=-0.5,
        y=-0.75,
        xanchor="left",
        showarrow=False,
        font=dict(size=11),
        text="<b>logical blocks</b> of each running request, block table in brackets",
    )
    fig.note(
        x=-0.5,
        y=pool_y0 - 0.75,
        xanchor="left",
        showarrow=False,
        font=dict(size=11),
        text="<b>physical blocks</b> of the pool",
    )
    longest = max((len(t.blocks) for t in running), default=1)
    rows = -(-num_blocks // per_row)
    fig.xaxis(range=[-6, max(per_row, longest) + 0.5])
    fig.yaxis(range=[pool_y0 + rows - 0.4, -1.2])
    return _diagram_axes(fig, 70 + 30 * (pool_y0 + rows))
