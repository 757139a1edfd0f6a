"""Decode speed: the step time against context and against batch size, the ideal bound with a
real engine's estimate over it when given (the Lab)."""

from __future__ import annotations

import plotly.graph_objects as go

from webui.memo import memo

from .base import COLORS, IN_ORDER, Parts, layout, limit_region, note, vrule


@memo(32)
def step_time_figure(
    curve: dict,
    crossover: int | None,
    batch: int,
    fits_to: int | None = None,
    model_max: int | None = None,
    estimate: list[float] | None = None,
    estimate_name: str = "calibrated estimate",
    before: int | None = None,
) -> go.Figure:
    """Stacked areas: the fixed weight-read band and the KV-read wedge (ms per step), the ideal
    bound; ``estimate`` (seconds at each context) draws a real engine's step over it, dashed.
    Contexts at which ``batch`` sequences do not fit in memory (past ``fits_to``) are shaded red
    and not drawn; the model's maximum context is a vertical line, with the lengths past it
    shaded. The x axis spans the curve's contexts (fixed contexts, a still axis); ``before``,
    the crossover before the last change, is a faint "before" line with an arrow to the
    crossover (the shape named "crossover"); one past the chart's end is an arrow at its edge."""
    x = curve["context"]
    keep = [i for i, c in enumerate(x) if fits_to is None or c <= fits_to]
    xs = [x[i] for i in keep]
    fig = Parts()
    for key, name, color, what in (
        ("weight_s", "reading weights", "weights", "weights"),
        ("kv_s", f"reading the KV cache (batch {batch})", "kv", "KV"),
    ):
        fig.add_scatter(
            x=xs,
            y=[curve[key][i] * 1e3 for i in keep],
            name=name,
            mode="lines",
            stackgroup="step",
            line_color=COLORS[color],
            hovertemplate=f"%{{x:,}} tokens: {what} %{{y:.2f}} ms<extra></extra>",
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
        _crossover(fig, crossover, right=crossover < (x[0] + x[-1]) / 2)
    elif crossover is not None and x and crossover > x[-1]:
        _past_the_end(fig, x[-1], f"crossover {crossover:,} tokens", y=1.0)
    if before is not None and before != crossover and x:
        _ghost(fig, before, crossover, x[0], x[-1])
    if x and model_max is not None and model_max < x[-1]:
        # Labelled once, at the foot of its shaded region: a label above the plot ran into
        # the legend wherever the fixed axis puts a short limit near its left edge.
        vrule(fig, model_max, dash="dashdot", name="model limit")
        limit_region(
            fig,
            model_max,
            x[-1],
            f"past the model's limit ({model_max:,} tokens)",
            COLORS["reserve"],
        )
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


GHOST = "#9a9aa6"  # the crossover before the last change: faint, behind the present one


def _crossover(fig: Parts, x: int, right: bool) -> None:
    """The crossover: a dashed line named "crossover", labelled inside the plot's top on the
    side with room (above the plot its label ran into the legend)."""
    vrule(fig, x, dash="dash", name="crossover")
    where = dict(xanchor="left", xshift=4) if right else dict(xanchor="right", xshift=-4)
    text, paper = f"crossover {x:,} tokens", dict(xref="x", yref="paper", yanchor="top")
    note(fig, x, 1, text, "#222", size=12, **paper, **where, bgcolor="rgba(255,255,255,0.85)")


def _past_the_end(fig: Parts, end: float, text: str, y: float) -> None:
    """An arrow at the chart's right edge: ``text`` lies further right than the chart shows."""
    yanchor = "bottom" if y >= 1 else "middle"
    note(fig, end, y, f"{text} →", "#444", xref="x", yref="paper", xanchor="right", yanchor=yanchor)


def _ghost(fig: Parts, before: int, now: int | None, lo: float, hi: float) -> None:
    """The crossover before the last change: a faint dotted line labelled "before", and an
    arrow from it to the present crossover (to the chart's edge where either lies past it)."""
    if lo <= before <= hi:
        vrule(fig, before, color=GHOST, width=2, top=0.84, name="crossover before")
    else:
        _past_the_end(fig, hi, f"before: {before:,} tokens", y=0.84)
    if now is None or (before > hi and now > hi):
        return
    tail, head = min(before, hi), min(now, hi)
    fig.add_annotation(
        x=head,
        y=0.84,
        ax=tail,
        ay=0,
        xref="x",
        yref="paper",
        axref="x",
        ayref="pixel",
        text="before" if before <= hi else "",
        showarrow=True,
        arrowhead=2,
        arrowsize=1.2,
        arrowwidth=1.5,
        arrowcolor=GHOST,
        standoff=3,
        bgcolor="rgba(255,255,255,0.85)",
        font=dict(size=11, color="#666"),
    )


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
    for key, name, color in (
        ("weight_s", "reading weights", "weights"),
        ("kv_s", "reading the KV cache", "kv"),
    ):
        fig.add_bar(
            x=x,
            y=[s * 1e3 for s in curve[key]],
            name=name,
            marker_color=COLORS[color],
            marker_pattern=pattern,
        )
    for tps, name, line in (
        (curve["tokens_per_s"], "ideal bound", dict(color="#333")),
        (estimate_tps, estimate_name, dict(color="#333", dash="dash")),
    ):
        if tps is not None:
            y = [t if f else None for t, f in zip(tps, fits)]
            name = f"tokens/s, {name} (right axis)"
            fig.add_scatter(x=x, y=y, name=name, yaxis="y2", mode="lines+markers", line=line)
    if not all(fits):
        fig.add_annotation(
            x=fits.index(False) - 0.5,  # a category axis places a number by its serial index
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
        # A fixed range: drawn in a closed expander, a category axis autoranged at no width
        # and crammed every bar at its left edge once opened.
        xaxis=dict(title="batch (sequences)", type="category", range=[-0.5, len(x) - 0.5]),
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
