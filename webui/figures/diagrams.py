"""Diagrams drawn from the chosen model's own numbers: head sharing (MHA, GQA, MQA), multi-head
latent attention, the sliding window, and PagedAttention's block tables.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from webui.memo import memo

from .base import Parts, diagram_axes, note

_Q_COLOR, _KV_COLOR, _LINE_COLOR = "#4c78a8", "#2f9e6e", "#9aa5b1"


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
    fig = Parts()
    for r, (name, kv, own) in enumerate(rows):
        top, bottom = -3 * r, -3 * r - 1.4
        group = q_heads // kv
        drawn_kv = sorted({i // group for i in qs})
        center = {g: (g * group + (group - 1) / 2) * scale for g in drawn_kv}
        lx, ly = [], []
        for i in qs:
            lx += [i * scale, center[i // group], None]
            ly += [top, bottom, None]
        fig.add_scatter(
            x=lx,
            y=ly,
            mode="lines",
            name=f"{name}: sharing",
            line=dict(color=_LINE_COLOR, width=1),
            hoverinfo="skip",
        )
        fig.add_scatter(
            x=[i * scale for i in qs],
            y=[top] * len(qs),
            mode="markers",
            name=f"{name}: query heads",
            marker=dict(symbol="square", size=size, color=_Q_COLOR),
            customdata=qs,
            hovertemplate="query head %{customdata}<extra></extra>",
        )
        fig.add_scatter(
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
        per_token = kv * (head_dim + v_dim)
        share = "1 query head per K/V head" if group == 1 else f"{group:,} query heads per K/V head"
        sample = (
            ""
            if shown == q_heads
            else f" ({len(qs):,} of the {q_heads:,} query heads drawn, evenly spread)"
        )
        text = (
            f"<b>{name}</b>{' (this model)' if own else ''}: {q_heads:,} query heads, "
            f"{kv:,} K/V head{'s' if kv != 1 else ''}, {share}; one token stores "
            f"{kv:,} x ({head_dim} + {v_dim}) = {per_token:,} numbers per layer "
            f"({per_token * bytes_per_element:,.0f} B){sample}"
        )
        note(fig, -0.5, top + 0.55, text, size=12, xanchor="left", yanchor="bottom")
    fig.update_xaxis(range=[-1, q_heads * scale])
    return diagram_axes(fig, 90 + 115 * len(rows))


def _mla_boxes(fig: Parts, boxes: list[tuple]) -> None:
    """Each (lane, x, label, numbers, color, name) as a box whose height grows with the square
    root of its numbers, its label a text trace (so the numbers show on hover)."""
    big = max(b[3] for b in boxes)
    for lane, x, label, n, color, name in boxes:
        h = 0.55 + 0.75 * math.sqrt(n / big)
        y = -2.2 * lane
        fig.add_shape(
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
        fig.add_scatter(
            x=[x],
            y=[y],
            mode="text",
            text=[label],
            name=name,
            customdata=[n],
            textfont=dict(size=11, color="#111"),
            hovertemplate=f"{name}: %{{customdata:,}} numbers<extra></extra>",
        )


def _mla_arrows(fig: Parts) -> None:
    """The two lanes' names, the arrows between their boxes with what each step does, and the
    arrow that joins the lanes: every head's scores read the cached latents and RoPE keys."""
    for lane, text in ((0, "<b>Store</b>, every token:"), (1, "<b>Decode</b>, each query head i:")):
        note(fig, -0.6, -2.2 * lane + 0.75, text, xanchor="left")
    arrows = [
        (0, 0, 2, "x W_DKV<br>(compress)"),
        (1, 0, 2, "x W_UK,i<br>(absorbed)"),
        (1, 2, 4, "q . c_KV +<br>q_rope . k_rope"),
        (1, 4, 6, "softmax,<br>weighted sum"),
        (1, 6, 8, "x W_UV,i<br>(into W_O)"),
    ]
    for lane, x0, x1, text in arrows:
        y = -2.2 * lane
        _arrow(fig, x0 + 0.47, y, x1 - 0.47, y)
        note(fig, (x0 + x1) / 2, y - 0.1, text, "#444", size=10, yanchor="top")
    note(fig, 3.1, -0.75, "RoPE key: x W_KR", "#444", size=10)
    # What joins the lanes: every head's scores read the cached latents and RoPE keys.
    _arrow(fig, 2.6, -0.62, 4, -2.2 + 0.62, arrowcolor=_KV_COLOR, arrowwidth=1.5)


def _arrow(fig: Parts, x0: float, y0: float, x1: float, y1: float, **kw) -> None:
    """An arrow in data units from (x0, y0) to (x1, y1)."""
    where = dict(xref="x", yref="y", axref="x", ayref="y")
    fig.add_annotation(
        x=x1, y=y1, ax=x0, ay=y0, **where, showarrow=True, arrowhead=2, text="", **kw
    )


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
    hidden_label = f"hidden state<br>{hidden:,}" if hidden else "hidden state"
    boxes = [  # (lane, x, label, numbers, color, name)
        (0, 0, hidden_label, hidden or rank, "#bbb", "hidden"),
        (0, 2, f"latent c_KV<br>{rank:,}", rank, _KV_COLOR, "latent"),
        (0, 3.1, f"RoPE key<br>{rope:,}", rope, _KV_COLOR, "rope"),
        (1, 0, f"query head i<br>{qk_nope} + {rope} RoPE", qk_nope + rope, _Q_COLOR, "query"),
        (1, 2, f"absorbed query<br>{rank:,} + {rope} RoPE", rank + rope, _Q_COLOR, "absorbed"),
        (1, 4, "scores vs every<br>cached latent", rank + rope, "#ddd", "scores"),
        (1, 6, f"sum of latents<br>{rank:,}", rank, "#ddd", "sum"),
        (1, 8, f"value of head i<br>{v_head_dim}", v_head_dim, _Q_COLOR, "value"),
    ]
    fig = Parts()
    _mla_boxes(fig, boxes)
    _mla_arrows(fig)
    cached_text = f"<b>cached per token and layer: {rank:,} + {rope} = {cached:,} numbers</b>"
    note(fig, 2.55, -1.25, f"{cached_text}, read by all {q_heads:,} heads", size=12)
    mha = (
        f"{'This model' if own else 'An MLA layer here'} without the latent (MHA): {q_heads:,} "
        f"heads x ({qk_nope + rope} K + {v_head_dim} V)<br>= {full:,} numbers per token and "
        f"layer, {full / cached:,.1f}x more"
    )
    note(fig, 4, 1.45, mha, size=12)
    fig.update_xaxis(range=[-0.7, 8.7])
    fig.update_yaxis(range=[-3.2, 1.9])
    return diagram_axes(fig, 380)


def _layer_strip(fig: Parts, kinds: list[str], sliding: int, full: int) -> None:
    """A strip above the matrix, one square per layer in model order: sliding green, full
    dark, anything else light."""
    fig.add_scatter(
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
                _KV_COLOR if k == "sliding" else "#555" if k == "full" else "#ddd" for k in kinds
            ],
        ),
        customdata=kinds,
        hovertemplate="layer %{x}: %{customdata}<extra></extra>",
    )
    fig.update_layout(
        xaxis2=dict(domain=[0, 1], anchor="y2", visible=False, range=[-1, len(kinds)]),
        yaxis2=dict(domain=[0.86, 1], anchor="x2", visible=False),
    )
    text = f"layers interleave: {sliding:,} sliding (green), {full:,} full (dark), in model order"
    note(fig, 0, 1.0, text, xref="paper", yref="paper", xanchor="left", yanchor="bottom")


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
    fig = Parts()
    fig.add_scatter(
        x=[0, n, 0, 0],
        y=[0, n, n, 0],
        fill="toself",
        mode="lines",
        name="full attention: every earlier key",
        fillcolor="rgba(160,170,180,0.35)",
        line=dict(color="#888"),
        hoverinfo="name",
    )
    # The band between key = query (the diagonal) and key = query - window + 1.
    fig.add_scatter(
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
    fig.add_scatter(
        x=[n - drawn, n],
        y=[n, n],
        mode="lines",
        name="kept in the cache now",
        line=dict(color="#1d5e42", width=6),
        hoverinfo="name",
    )
    xanchor = "right" if drawn < 0.3 * n else "center"
    note(fig, n - drawn / 2, n, f"cached for the next token: {w:,}", yshift=12, xanchor=xanchor)
    fig.update_layout(
        xaxis=dict(title="key position (tokens)", range=[0, n], domain=[0, 1]),
        yaxis=dict(title="query position (tokens)", range=[n, 0], domain=[0, 0.78 if mixed else 1]),
        height=440,
        margin=dict(l=10, r=10, t=30, b=10),
        legend=dict(orientation="h", yanchor="top", y=-0.15, x=0),
        plot_bgcolor="rgba(0,0,0,0)",
    )
    if mixed:
        _layer_strip(fig, kinds, sliding, full)
    return fig.done()
