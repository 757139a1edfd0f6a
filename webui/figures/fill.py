"""The cache at work: the cache-fill animation, the live page's measured bytes and step
times, and the picture of what the cache holds (an inline SVG)."""

from __future__ import annotations

import html

import plotly.graph_objects as go

from webui.memo import LARGE_ENTRY_BYTES, memo

from .base import COLORS, IN_ORDER, Figure, Parts, layout

FILL_COLORS = ["#eef0f4", "#2f9e6e", "#f2a541", "#d62728"]  # empty, cached, new, recomputed


def _fill_layout(steps: list, row_labels: list[str], cols: int, frame_ms: int) -> dict:
    """The fill figure's layout: the grid above, the work bars below, and the Play / Pause
    buttons and step slider that animate its frames."""
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
    return {
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


def fill_figure(steps: list, row_labels: list[str], frame_ms: int = 450) -> dict:
    """The cache-fill grid animated step by step on the client (Plotly frames), with the total work
    so far (token passes) with and without a cache in a bar below. Returned as a plain dict, which
    st.plotly_chart takes as it is: with one frame per step, building validated go.Figure objects
    would cost over 100 ms per rerun."""
    scale = []
    for i, c in enumerate(FILL_COLORS):  # a discrete scale for the values 0..3
        scale += [[i / 4, c], [(i + 1) / 4, c]]
    cols = len(steps[0].grid[0]) if steps and steps[0].grid else 0

    def moving(s):
        """What a frame carries: the grid and the two bars' lengths and labels. Plotly keeps
        every other attribute of the traces it animates."""
        passes = [s.passes_without_cache, s.passes_with_cache]
        return [
            {"type": "heatmap", "z": [list(r) for r in s.grid]},
            {"type": "bar", "x": passes, "text": [f"{p:,}" for p in passes]},
        ]

    grid, bars = moving(steps[0])
    grid |= {
        "x": list(range(1, cols + 1)),
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
    bars |= {
        "orientation": "h",
        "xaxis": "x2",
        "yaxis": "y2",
        "y": ["without a cache", "with a cache"],
        "marker": {"color": [FILL_COLORS[3], FILL_COLORS[1]]},
        "textposition": "auto",
        "hovertemplate": "%{y}: %{x:,} token passes<extra></extra>",
    }
    frames = [{"name": str(s.step), "traces": [0, 1], "data": moving(s)} for s in steps]
    return {
        "data": [grid, bars],
        "layout": _fill_layout(steps, row_labels, cols, frame_ms),
        "frames": frames,
    }


# An animation of every step is large by nature (1.6 MiB at 40 new tokens, 3.8 MiB at the
# page's 159): kept up to LARGE_ENTRY_BYTES each, within 12 MiB of its own.
@memo(8, entry_bytes=LARGE_ENTRY_BYTES, own_bytes=12 * 2**20)
def fill_chart(steps: tuple, row_labels: tuple) -> go.Figure:
    """``fill_figure`` validated once into a kept figure: st.plotly_chart validates a plain
    dict on every rerun, and with one frame per step that was most of the page's time."""
    return Figure(fill_figure(list(steps), list(row_labels)))


def live_bytes_figure(steps: list) -> go.Figure:
    """Measured cache bytes (markers) on top of kvcalc's prediction (line), in MiB."""
    x = [s.tokens for s in steps]
    fig = Parts()
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
    fig.update_layout(
        xaxis_title="tokens in the cache", yaxis_title="cache (MiB)", **layout(IN_ORDER)
    )
    return fig.done()


def live_time_figure(steps: list, no_cache: list, fit: tuple[float, float]) -> go.Figure:
    """Step time against tokens in the cache, with and without a cache, and the fitted line."""
    x = [s.tokens for s in steps[1:]]
    fig = Parts()
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
    fig.update_layout(
        xaxis_title="tokens in the sequence", yaxis_title="step time (ms)", **layout(IN_ORDER)
    )
    return fig.done()


def cache_picture(tokens: list[str], new: str) -> str:
    """What the cache holds, for one layer and head, as an inline SVG (no Plotly to load on the
    first page a student opens): the keys and values of ``tokens`` (written once, read at every
    later step), the new token's K and V (written this step), and its query (used once, then
    dropped), with a line from that query to every key, its own included."""
    n = len(tokens)
    # Narrow enough (about 400 px for five tokens) that a phone's 360 px column shrinks it by
    # a tenth, not by half: its 14 px labels stay readable there (review 4, F26).
    cell, gap, left, top = 40, 62, 62, 78
    width, height = left + (n + 1) * gap, top + 214
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
            f'<text x="{x[i] + cell / 2}" y="{y["V"] + cell + 22}" font-size="15" '
            f'text-anchor="middle" fill="#333"{bold}>{html.escape(word)}</text>'
        )
    parts.append(  # on a line of its own, so it does not run into the word before it
        f'<text x="{x[n] + cell / 2}" y="{y["V"] + cell + 40}" font-size="13" '
        'text-anchor="middle" fill="#333">(new)</text>'
    )
    parts.append("</svg>")
    return "".join(parts)
