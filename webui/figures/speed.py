"""Decode speed: the step time against context (the weight-read band and the KV-read wedge)
and against batch size, the ideal bound with a calibrated estimate drawn over it when given.
Every axis says its unit (milliseconds; tokens; tokens/s).
"""

from __future__ import annotations

import plotly.graph_objects as go

from webui.memo import memo

from .base import COLORS, IN_ORDER, Parts, layout, limit_region, vline

__all__ = ["step_time_figure", "batch_figure"]


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
    fig = Parts()
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
        vline(fig, crossover, f"crossover {crossover:,} tokens", dash="dash", position="left")
    if x and model_max is not None and model_max < x[-1]:
        vline(fig, model_max, f"model limit {model_max:,}", dash="dashdot")
        limit_region(fig, model_max, x[-1], "past the model's limit", COLORS["reserve"])
    if x and fits_to is not None and fits_to < min(x[-1], model_max or x[-1]):
        end = min(x[-1], model_max or x[-1])
        limit_region(
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
        **layout(IN_ORDER),
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
    fig = Parts()
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
        **layout(IN_ORDER),
    )
    return fig.done()
