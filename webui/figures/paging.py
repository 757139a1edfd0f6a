"""The Engine view's block pool: the pool as a grid of blocks coloured by owner, and
PagedAttention's block tables, each request's logical blocks mapped to the pool's physical ones.
"""

from __future__ import annotations

import plotly.graph_objects as go

from webui.memo import memo

from .base import Parts, diagram_axes, note, owner_color


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
    fig = Parts()
    fig.add_scatter(
        x=xs,
        y=ys,
        mode="markers+text",
        text=texts,
        hovertext=hovers,
        hoverinfo="text",
        textfont=dict(size=10, color="#111"),
        marker=dict(symbol="square", size=30, color=colors, line=dict(color="#222", width=lines)),
    )
    fig.update_xaxis(range=[-0.7, per_row - 0.3])
    fig.update_yaxis(autorange="reversed")
    return diagram_axes(fig, 60 + 38 * rows)


def _logical_rows(fig: Parts, running: list, block_size: int) -> None:
    """One row per running request: its logical blocks in token order (the last one says how
    many of its slots are written), and its block table in brackets on the left."""
    for r, t in enumerate(running):
        k = len(t.blocks)
        last = t.tokens - (k - 1) * block_size  # slots written in the last logical block
        fills = [block_size] * (k - 1) + [last]
        fig.add_scatter(
            x=list(range(k)),
            y=[r] * k,
            mode="markers+text",
            name=f"{t.rid}: logical blocks",
            text=[str(i) for i in range(k)],
            textfont=dict(size=9, color="#fff"),
            marker=dict(symbol="square", size=20, color=owner_color(t.rid)),
            customdata=[[b, f] for b, f in zip(t.blocks, fills)],
            hovertemplate=f"{t.rid}, logical block %{{text}} -> physical block "
            "%{customdata[0]} (%{customdata[1]}/"
            f"{block_size} slots written)"
            "<extra></extra>",
        )
        note(fig, -0.7, r, f"{t.rid}: [{', '.join(map(str, t.blocks))}]", xanchor="right")


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

    fig = Parts()
    for r, t in enumerate(running):  # lines first: the blocks are drawn over them
        lx, ly = [], []
        for i, bid in enumerate(t.blocks):
            px, py = pool_xy(bid)
            lx += [i, px, None]
            ly += [r, py, None]
        fig.add_scatter(
            x=lx,
            y=ly,
            mode="lines",
            name=f"{t.rid}: block table",
            line=dict(color=owner_color(t.rid), width=1.2),
            opacity=0.7,
            hoverinfo="skip",
        )
    _logical_rows(fig, running, block_size)
    owner: dict[int, str] = {}
    for t in running:
        for b in t.blocks:
            owner.setdefault(b, t.rid)
    xs, ys = zip(*(pool_xy(b) for b in range(num_blocks))) if num_blocks else ((), ())
    fig.add_scatter(
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
            color=[owner_color(owner[b]) if b in owner else "#eef1f4" for b in range(num_blocks)],
        ),
        hovertemplate="physical block %{text}<extra></extra>",
    )
    for y, text in (
        (-0.75, "<b>logical blocks</b> of each running request, block table in brackets"),
        (pool_y0 - 0.75, "<b>physical blocks</b> of the pool"),
    ):
        note(fig, -0.5, y, text, xanchor="left")
    longest = max((len(t.blocks) for t in running), default=1)
    rows = -(-num_blocks // per_row)
    fig.update_xaxis(range=[-6, max(per_row, longest) + 0.5])
    fig.update_yaxis(range=[pool_y0 + rows - 0.4, -1.2])
    return diagram_axes(fig, 70 + 30 * (pool_y0 + rows))
