"""Plotly figure builders: pure functions from kvcalc results to go.Figure.

Only the app's pages import this module (it imports plotly); ``import kvcalc`` does not.
Every axis says its unit (GiB = 2^30 B; milliseconds; tokens).
"""

from __future__ import annotations

import html
import math

import plotly.graph_objects as go

from kvcalc.core.units import GiB
from kvcalc.engines.budget import Budget

from .memo import memo

__all__ = [
    "budget_figure",
    "concurrency_figure",
    "step_time_figure",
    "batch_figure",
    "techniques_figure",
    "fill_figure",
    "fill_chart",
    "cache_picture",
    "COLORS",
]

COLORS = {
    "weights": "#e0607e",  # rose: the fixed part
    "kv": "#2f9e6e",  # green: the cache
    "reserve": "#8c8c9a",
    "unused": "#d9dbe3",
    "over": "#d62728",
    "state": "#7b61c9",
}
# No template: st.plotly_chart applies the app theme, and resolving a template costs ~10 ms.
_LAYOUT = dict(
    margin=dict(l=10, r=10, t=40, b=10),
    legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, traceorder="normal"),
    height=360,
)


class Figure(go.Figure):
    """A go.Figure that is built once and then only read: the builders' figures are kept in
    webui.memo and shared by every session. st.plotly_chart asks for the figure's dict on every
    rerun, and go.Figure.to_dict deep-copies the whole figure each time (most of the chart's
    server time once the figure itself is kept); this one makes its dict once. Nothing may
    change the figure after it is built."""

    def to_dict(self) -> dict:
        once = self.__dict__.get("_dict_once")
        if once is None:
            once = self._dict_once = super().to_dict()
        return once


class _Fig:
    """Collects traces, shapes, annotations and layout as plain dicts and builds the Figure once
    at the end: every go.Figure.add_* call validates the whole figure again, which made a chart
    with a few dozen shapes cost tens of milliseconds per rerun."""

    def __init__(self) -> None:
        self.data: list[dict] = []
        self.layout: dict = {}

    def add_scatter(self, **kw) -> None:
        self.data.append({"type": "scatter", **kw})

    def add_bar(self, **kw) -> None:
        self.data.append({"type": "bar", **kw})

    def add_shape(self, **kw) -> None:
        self.layout.setdefault("shapes", []).append(kw)

    def add_annotation(self, **kw) -> None:
        self.layout.setdefault("annotations", []).append(kw)

    def update_layout(self, **kw) -> None:
        for key, value in kw.items():
            old = self.layout.get(key)
            self.layout[key] = (
                {**old, **value} if isinstance(old, dict) and isinstance(value, dict) else value
            )

    def done(self) -> go.Figure:
        return Figure(data=self.data, layout=self.layout)


def _vline(
    fig: _Fig, x: float, text: str, dash: str = "dot", position: str = "right", log_x: bool = False
) -> None:
    """A vertical marker across the plot with a label at its top (cheaper than add_vline).

    On a log x axis Plotly takes a shape's x0/x1 as data values (8,192) but an annotation's x
    as log10 of the value (3.913): ``log_x`` places both at ``x``."""
    fig.add_shape(
        type="line",
        x0=x,
        x1=x,
        y0=0,
        y1=1,
        yref="paper",
        xref="x",
        line=dict(dash=dash, color="#444", width=1.5),
    )
    fig.add_annotation(
        x=math.log10(x) if log_x else x,
        y=1,
        yref="paper",
        xref="x",
        text=text,
        showarrow=False,
        xanchor="left" if position == "right" else "right",
        yanchor="bottom",
        font=dict(size=11, color="#444"),
    )


@memo(32)
def budget_figure(b: Budget) -> go.Figure:
    """Two bars in GiB: the GPU's memory split (weights, reserve, KV pool, left unused by
    gpu_memory_utilization), and the cache the user asks for drawn against the pool (red beyond)."""
    pool = max(b.kv_pool_bytes, 0) / GiB
    weights = b.weights_bytes / GiB
    reserve = b.reserve_bytes / GiB
    unused = max(b.total_bytes - b.requested_bytes, 0) / GiB
    if b.engine == "trtllm":
        unused = (
            max(b.total_bytes - b.weights_bytes - b.reserve_bytes - max(b.kv_pool_bytes, 0), 0)
            / GiB
        )
    gpu_row, ask_row = "GPU memory", "Requested KV"
    fig = _Fig()
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
    _vline(fig, offset + pool, "end of KV pool")
    fig.update_layout(barmode="stack", xaxis_title="GiB (2^30 bytes)", **_LAYOUT)
    fig.update_layout(height=260, yaxis=dict(autorange="reversed"))
    return fig.done()


def _limit_region(
    fig: _Fig, x0: float, x1: float, text: str, color: str, log_x: bool = False
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
    fig.add_annotation(
        x=math.log10(x0) if log_x else x0,
        y=0.02,
        yref="paper",
        xref="x",
        text=text,
        showarrow=False,
        xanchor="left",
        yanchor="bottom",
        font=dict(size=11, color=color),
    )


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
    fig = _Fig()
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
        _vline(fig, marker, f"{marker:,} tokens", log_x=True)
    if model_max and model_max <= x_hi:
        _vline(
            fig,
            model_max,
            f"model limit {model_max:,}",
            dash="dashdot",
            position="left",
            log_x=True,
        )
        _limit_region(fig, model_max, x_hi, "past the model's limit", COLORS["reserve"], log_x=True)
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
        **_LAYOUT,
    )
    return fig.done()


@memo(32)
def step_time_figure(
    curve: dict,
    crossover: int | None,
    batch: int,
    fits_to: int | None = None,
    model_max: int | None = None,
    estimate: list[float] | None = None,
    estimate_name: str = "calibrated estimate",
) -> go.Figure:
    """Stacked areas: the fixed weight-read band and the KV-read wedge (ms per step), the ideal
    bound; ``estimate`` (seconds at each context) draws a real engine's step over it, dashed.
    Contexts at which ``batch`` sequences do not fit in memory (past ``fits_to``) are shaded red
    and not drawn; the model's maximum context is a vertical line, with the lengths past it
    shaded."""
    x = curve["context"]
    keep = [i for i, c in enumerate(x) if fits_to is None or c <= fits_to]
    xs = [x[i] for i in keep]
    fig = _Fig()
    fig.add_scatter(
        x=xs,
        y=[curve["weight_s"][i] * 1e3 for i in keep],
        name="reading weights",
        mode="lines",
        stackgroup="step",
        line_color=COLORS["weights"],
        hovertemplate="%{x:,} tokens: weights %{y:.2f} ms<extra></extra>",
    )
    fig.add_scatter(
        x=xs,
        y=[curve["kv_s"][i] * 1e3 for i in keep],
        name=f"reading the KV cache (batch {batch})",
        mode="lines",
        stackgroup="step",
        line_color=COLORS["kv"],
        hovertemplate="%{x:,} tokens: KV %{y:.2f} ms<extra></extra>",
    )
    if estimate is not None:
        fig.add_scatter(
            x=xs,
            y=[estimate[i] * 1e3 for i in keep],
            name=f"{estimate_name} (a real engine)",
            mode="lines",
            line=dict(color="#222", dash="dash", width=2),
            hovertemplate="%{x:,} tokens: %{y:.2f} ms (" + estimate_name + ")<extra></extra>",
        )
    if crossover is not None and x and x[0] <= crossover <= x[-1]:
        _vline(fig, crossover, f"crossover {crossover:,} tokens", dash="dash", position="left")
    if x and model_max is not None and model_max < x[-1]:
        _vline(fig, model_max, f"model limit {model_max:,}", dash="dashdot")
        _limit_region(fig, model_max, x[-1], "past the model's limit", COLORS["reserve"])
    if x and fits_to is not None and fits_to < min(x[-1], model_max or x[-1]):
        end = min(x[-1], model_max or x[-1])
        _limit_region(
            fig,
            max(fits_to, x[0]),
            end,
            f"{batch} sequence{'s' if batch != 1 else ''} of this length "
            f"{'does' if batch == 1 else 'do'} not fit",
            COLORS["over"],
        )
    fig.update_layout(
        xaxis=dict(title="context per sequence (tokens)", range=[x[0], x[-1]] if x else None),
        yaxis=dict(title="decode step time (ms)"),
        **_LAYOUT,
    )
    return fig.done()


@memo(32)
def batch_figure(
    curve: dict,
    max_batch: int | None = None,
    estimate_tps: list[float] | None = None,
    estimate_name: str = "calibrated estimate",
) -> go.Figure:
    """Step time (stacked weight/KV reads, ms: the ideal bound) and tokens/s against batch
    size; ``estimate_tps`` adds a real engine's tokens/s, dashed. Batches larger than
    ``max_batch`` (they do not fit in memory) are drawn hatched, with no tokens/s."""
    x = curve["batch"]
    fits = [max_batch is None or b <= max_batch for b in x]
    pattern = dict(shape=["" if f else "/" for f in fits])
    fig = _Fig()
    fig.add_bar(
        x=x,
        y=[s * 1e3 for s in curve["weight_s"]],
        name="reading weights",
        marker_color=COLORS["weights"],
        marker_pattern=pattern,
    )
    fig.add_bar(
        x=x,
        y=[s * 1e3 for s in curve["kv_s"]],
        name="reading the KV cache",
        marker_color=COLORS["kv"],
        marker_pattern=pattern,
    )
    fig.add_scatter(
        x=x,
        y=[t if f else None for t, f in zip(curve["tokens_per_s"], fits)],
        name="tokens/s, ideal bound (right axis)",
        yaxis="y2",
        mode="lines+markers",
        line_color="#333",
    )
    if estimate_tps is not None:
        fig.add_scatter(
            x=x,
            y=[t if f else None for t, f in zip(estimate_tps, fits)],
            name=f"tokens/s, {estimate_name} (right axis)",
            yaxis="y2",
            mode="lines+markers",
            line=dict(color="#333", dash="dash"),
        )
    if not all(fits):
        first = x[fits.index(False)]
        fig.add_annotation(
            x=str(first),
            xref="x",
            y=1,
            yref="paper",
            showarrow=False,
            xanchor="left",
            yanchor="bottom",
            font=dict(size=11, color=COLORS["over"]),
            text=f"hatched: does not fit in memory (at most {max_batch:,})",
        )
    fig.update_layout(
        barmode="stack",
        xaxis=dict(title="batch (sequences)", type="category"),
        yaxis=dict(title="decode step time (ms)", rangemode="nonnegative"),
        yaxis2=dict(
            title="tokens/s",
            overlaying="y",
            side="right",
            showgrid=False,
            rangemode="nonnegative",
            visible=any(fits),
        ),
        **_LAYOUT,
    )
    return fig.done()


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
    fig.update_layout(xaxis_title=f"K/V of one sequence ({unit})", showlegend=False, **_LAYOUT)
    fig.update_layout(yaxis=dict(autorange="reversed"), height=60 + 36 * len(rows))
    return fig


# -- teaching views -----------------------------------------------------------------------------

FILL_COLORS = ["#eef0f4", "#2f9e6e", "#f2a541", "#d62728"]  # empty, cached, new, recomputed


def fill_figure(steps: list, row_labels: list[str], frame_ms: int = 450) -> dict:
    """The cache-fill grid animated step by step on the client (Plotly frames), with the total
    work so far (token passes) with and without a cache in a bar below.

    Returned as a plain figure dict, which st.plotly_chart takes as it is: with one frame per
    step, building validated go.Figure objects would cost over 100 ms per rerun."""
    scale = []
    for i, c in enumerate(FILL_COLORS):  # a discrete scale for the values 0..3
        scale += [[i / 4, c], [(i + 1) / 4, c]]
    cols = len(steps[0].grid[0]) if steps and steps[0].grid else 0
    x = list(range(1, cols + 1))

    def heat(s):
        return {
            "type": "heatmap",
            "z": [list(r) for r in s.grid],
            "x": x,
            "y": row_labels,
            "zmin": -0.5,
            "zmax": 3.5,
            "colorscale": scale,
            "showscale": False,
            "xgap": 1,
            "ygap": 1,
            "xaxis": "x",
            "yaxis": "y",
            "hovertemplate": "token %{x}, %{y}<extra></extra>",
        }

    def bars(s):
        return {
            "type": "bar",
            "orientation": "h",
            "xaxis": "x2",
            "yaxis": "y2",
            "y": ["without a cache", "with a cache"],
            "x": [s.passes_without_cache, s.passes_with_cache],
            "marker": {"color": [FILL_COLORS[3], FILL_COLORS[1]]},
            "text": [f"{s.passes_without_cache:,}", f"{s.passes_with_cache:,}"],
            "textposition": "auto",
            "hovertemplate": "%{y}: %{x:,} token passes<extra></extra>",
        }

    max_work = max(s.passes_without_cache for s in steps)
    instant = {
        "mode": "immediate",
        "frame": {"duration": 0, "redraw": True},
        "transition": {"duration": 0},
    }
    slider_steps = [
        {
            "method": "animate",
            "label": "prefill" if s.step == 0 else str(s.step),
            "args": [[str(s.step)], instant],
        }
        for s in steps
    ]
    layout = {
        "height": 230 + 22 * len(row_labels) + 140,
        "showlegend": False,
        "margin": {"l": 10, "r": 10, "t": 10, "b": 120},
        "xaxis": {
            "title": {"text": "token position"},
            "dtick": max(1, cols // 16),
            "anchor": "y",
            "domain": [0, 1],
        },
        "yaxis": {"autorange": "reversed", "domain": [0.36, 1], "anchor": "x"},
        "xaxis2": {
            "title": {"text": "token passes through the model so far"},
            "range": [0, max_work * 1.05],
            "anchor": "y2",
            "domain": [0, 1],
        },
        "yaxis2": {"domain": [0, 0.2], "anchor": "x2"},
        "updatemenus": [
            {
                "type": "buttons",
                "direction": "left",
                "x": 0,
                "y": -0.16,
                "xanchor": "left",
                "yanchor": "top",
                "showactive": False,
                "buttons": [
                    {
                        "label": "Play",
                        "method": "animate",
                        "args": [
                            None,
                            {
                                "frame": {"duration": frame_ms, "redraw": True},
                                "fromcurrent": True,
                                "transition": {"duration": 0},
                            },
                        ],
                    },
                    {
                        "label": "Pause",
                        "method": "animate",
                        "args": [
                            [None],
                            {"mode": "immediate", "frame": {"duration": 0, "redraw": False}},
                        ],
                    },
                ],
            }
        ],
        "sliders": [
            {
                "active": 0,
                "steps": slider_steps,
                "x": 0.14,
                "len": 0.86,
                "y": -0.12,
                "yanchor": "top",
                "currentvalue": {"prefix": "step: "},
                "pad": {"t": 10},
            }
        ],
    }
    first = steps[0]
    # A frame carries what changes (the grid, the two bars' lengths and labels); Plotly keeps
    # every other attribute of the traces it animates, so repeating them in each frame only
    # made the message larger (and slower to build and send) for the same picture.
    return {
        "data": [heat(first), bars(first)],
        "layout": layout,
        "frames": [
            {
                "name": str(s.step),
                "traces": [0, 1],
                "data": [
                    {"type": "heatmap", "z": [list(r) for r in s.grid]},
                    {
                        "type": "bar",
                        "x": [s.passes_without_cache, s.passes_with_cache],
                        "text": [f"{s.passes_without_cache:,}", f"{s.passes_with_cache:,}"],
                    },
                ],
            }
            for s in steps
        ],
    }


@memo(8)
def fill_chart(steps: tuple, row_labels: tuple) -> go.Figure:
    """``fill_figure`` validated once into a kept figure: st.plotly_chart validates a plain
    dict on every rerun, and with one frame per step that was most of the page's time."""
    return Figure(fill_figure(list(steps), list(row_labels)))


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
    digits = "".join(ch for ch in rid if ch.isdigit())
    return _OWNER_COLORS[(int(digits) - 1) % len(_OWNER_COLORS)] if digits else "#888"


@memo(32)
def blocks_figure(blocks: tuple, block_size: int, per_row: int = 16) -> go.Figure:
    """The block pool as a grid of squares: colored by owner, shared blocks outlined and marked
    with their reference count, cached free blocks hatched grey, free blocks white."""
    xs, ys, colors, texts, hovers, lines = [], [], [], [], [], []
    for b in blocks:
        xs.append(b.bid % per_row)
        ys.append(b.bid // per_row)
        owners = b.owners
        if b.state == "used":
            colors.append(owner_color(owners[0]) if owners else "#888")
            texts.append(("x" + str(b.ref_count)) if b.ref_count > 1 else owners[0])
            lines.append(3 if b.ref_count > 1 else 0.5)
            hovers.append(
                f"block {b.bid}: {' + '.join(owners)} ({b.tokens}/{block_size} "
                f"slots){', shared by ' + str(b.ref_count) if b.ref_count > 1 else ''}"
                + (f"<br>hash {b.hash[:8]}" if b.hash else "")
            )
        elif b.state == "cached":
            colors.append("#d7dbe2")
            texts.append("c")
            lines.append(0.5)
            hovers.append(
                f"block {b.bid}: free, still holds cached tokens (hash "
                f"{b.hash[:8]}); reused on a prefix hit, evicted when needed"
            )
        else:
            colors.append("#ffffff")
            texts.append("")
            lines.append(0.5)
            hovers.append(f"block {b.bid}: free")
    rows = (len(blocks) + per_row - 1) // per_row
    fig = Figure(
        go.Scatter(
            x=xs,
            y=ys,
            mode="markers+text",
            text=texts,
            hovertext=hovers,
            hoverinfo="text",
            textfont=dict(size=10, color="#111"),
            marker=dict(
                symbol="square", size=30, color=colors, line=dict(color="#222", width=lines)
            ),
        )
    )
    fig.update_layout(
        height=60 + 38 * rows,
        margin=dict(l=10, r=10, t=10, b=10),
        xaxis=dict(visible=False, range=[-0.7, per_row - 0.3]),
        yaxis=dict(visible=False, autorange="reversed"),
        showlegend=False,
        plot_bgcolor="rgba(0,0,0,0)",
    )
    return fig


# -- live measurement ---------------------------------------------------------------------------


def live_bytes_figure(steps: list) -> go.Figure:
    """Measured cache bytes (markers) on top of kvcalc's prediction (line), in MiB."""
    x = [s.tokens for s in steps]
    fig = _Fig()
    fig.add_scatter(
        x=x,
        y=[s.predicted_bytes / 2**20 for s in steps],
        mode="lines",
        name="predicted by kvcalc",
        line=dict(color=COLORS["kv"], width=6),
        opacity=0.45,
    )
    fig.add_scatter(
        x=x,
        y=[s.measured_bytes / 2**20 for s in steps],
        mode="markers",
        name="measured in the cache's tensors",
        marker=dict(color="#222", size=6),
    )
    if any(s.storage_bytes != s.measured_bytes for s in steps):
        fig.add_scatter(
            x=x,
            y=[s.storage_bytes / 2**20 for s in steps],
            mode="lines",
            name="memory kept allocated",
            line=dict(color="#999", dash="dot"),
        )
    fig.update_layout(xaxis_title="tokens in the cache", yaxis_title="cache (MiB)", **_LAYOUT)
    return fig.done()


def live_time_figure(steps: list, no_cache: list, fit: tuple[float, float]) -> go.Figure:
    """Step time against tokens in the cache, with and without a cache, and the fitted line."""
    x = [s.tokens for s in steps[1:]]
    fig = _Fig()
    fig.add_scatter(
        x=x,
        y=[s.step_time_s * 1e3 for s in steps[1:]],
        mode="markers",
        name="decode step with the cache",
        marker=dict(color=COLORS["kv"]),
    )
    if x:
        a, b = fit
        fig.add_scatter(
            x=[x[0], x[-1]],
            y=[(a + b * x[0]) * 1e3, (a + b * x[-1]) * 1e3],
            mode="lines",
            name=f"fit: {a * 1e3:.2f} ms + {b * 1e6:.2f} µs/token",
            line=dict(color="#222", dash="dash"),
        )
    if no_cache:
        fig.add_scatter(
            x=[s.tokens for s in no_cache],
            y=[s.step_time_s * 1e3 for s in no_cache],
            mode="markers+lines",
            name="step without a cache (recompute all)",
            marker=dict(color=COLORS["over"]),
        )
    fig.update_layout(xaxis_title="tokens in the sequence", yaxis_title="step time (ms)", **_LAYOUT)
    return fig.done()


def cache_picture(tokens: list[str], new: str) -> str:
    """What the cache holds, for one layer and head, as an inline SVG (no Plotly to load on the
    first page a student opens): the keys and values of ``tokens`` (written once, read at every
    later step), the new token's K and V (written this step), and its query (used once, then
    dropped), with a line from that query to every key, its own included."""
    n = len(tokens)
    cell, gap, left, top = 44, 100, 96, 78
    width, height = left + (n + 1) * gap + 10, top + 200
    x = [left + i * gap for i in range(n + 1)]
    y = {"Q": top, "K": top + 70, "V": top + 126}
    old, fresh, query = COLORS["kv"], "#f28e2b", COLORS["reserve"]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif">'
    ]
    for j, (color, text) in enumerate(
        (
            (old, "in the cache: written once, read at every step"),
            (fresh, "written this step"),
            (query, "query: used once, then dropped"),
        )
    ):
        parts.append(
            f'<rect x="8" y="{6 + 20 * j}" width="13" height="13" fill="{color}"/>'
            f'<text x="28" y="{17 + 20 * j}" font-size="14" fill="#444">{text}</text>'
        )
    for row, label in (("Q", "query"), ("K", "keys"), ("V", "values")):
        parts.append(
            f'<text x="8" y="{y[row] + cell / 2 + 5}" font-size="14" fill="#555">{label}</text>'
        )
    qx, qy = x[n] + cell / 2, y["Q"] + cell
    for i in range(n + 1):  # the new query against every key, its own included
        parts.append(
            f'<line class="read" x1="{qx}" y1="{qy}" x2="{x[i] + cell / 2}" '
            f'y2="{y["K"]}" stroke="#9aa0b4" stroke-width="1.4"/>'
        )

    def box(i: int, row: str, color: str, kind: str) -> None:
        parts.append(
            f'<rect class="{kind}" x="{x[i]}" y="{y[row]}" width="{cell}" '
            f'height="{cell}" rx="5" fill="{color}"/>'
            f'<text x="{x[i] + cell / 2}" y="{y[row] + cell / 2 + 6}" font-size="16" '
            f'text-anchor="middle" fill="white">{row}</text>'
        )

    for i in range(n):
        box(i, "K", old, "cached")
        box(i, "V", old, "cached")
    box(n, "K", fresh, "written")
    box(n, "V", fresh, "written")
    box(n, "Q", query, "query")
    for i, word in enumerate([*tokens, new]):
        bold = ' font-weight="bold"' if i == n else ""
        parts.append(
            f'<text x="{x[i] + cell / 2}" y="{y["V"] + cell + 24}" font-size="15" '
            f'text-anchor="middle" fill="#333"{bold}>'
            f"{html.escape(word)}{' (new)' if i == n else ''}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)
