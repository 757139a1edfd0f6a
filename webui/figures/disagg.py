"""One request in a disaggregated deployment, on one time line: the prefill GPUs compute its
prompt, the link carries its cache to the decode GPUs, the decode GPUs take their first step;
and the next turn, when the cache comes back from CPU memory instead of being recomputed."""

from __future__ import annotations

from webui.memo import memo

from .base import COLORS, Figure, Parts, layout

LANES = ("prefill GPUs", "the link", "decode GPUs", "next turn: from CPU")


@memo(16)
def transfer_figure(
    prefill_s: float,
    transfer_s: float,
    step_s: float,
    moved: str,
    link: str,
    reload: tuple[float, str] = (0.0, ""),
) -> Figure:
    """Three lanes (prefill GPUs, the link, decode GPUs) and three bars end to end: the
    prefill, the cache's move (``moved`` over ``link``), the first decode step; with
    ``reload`` (seconds, the host link's name), a fourth lane from 0, beside the prefill: the
    next turn's cache back from CPU memory instead of recomputed."""
    fig = Parts()
    bars: tuple[tuple[str, float, float, str, str], ...] = (
        ("prefill GPUs", 0.0, prefill_s, "prefill: the prompt computed", COLORS["weights"]),
        ("the link", prefill_s, transfer_s, f"the cache moves: {moved} over {link}", COLORS["kv"]),
        (
            "decode GPUs",
            prefill_s + transfer_s,
            step_s,
            "first decode step",
            COLORS["state"],
        ),
    )
    if reload[1]:
        bars += (
            (
                "next turn: from CPU",
                0.0,
                reload[0],
                f"next turn: the cache back from CPU memory over {reload[1]}",
                COLORS["kv"],
            ),
        )
    for lane, start, length, name, color in bars:
        fig.add_bar(
            y=[lane],
            x=[length * 1e3],
            base=[start * 1e3],
            orientation="h",
            name=name,
            # the next turn's reload: the cache again, hatched (another time, not this request's)
            marker=dict(color=color, pattern=dict(shape="/" if lane == LANES[3] else "")),
            hovertemplate=f"{name}: %{{x:,.2f}} ms<extra></extra>",
        )
    fig.update_layout(
        **layout(
            height=300 if reload[1] else 260,
            barmode="overlay",
            yaxis=dict(
                categoryorder="array",
                categoryarray=list(reversed(LANES if reload[1] else LANES[:3])),
            ),
            xaxis=dict(title="time since the prompt reached the prefill GPUs (ms)"),
            legend=dict(traceorder="normal"),
        )
    )
    return fig.done()
