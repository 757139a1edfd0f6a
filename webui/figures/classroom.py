"""The live class's figure: the teacher's histogram of the answers to one question part."""

from __future__ import annotations

CORRECT, OTHER = "#2f9e6e", "#8a9bb0"


def answers_figure(bars: list[tuple[str, int, bool]], head: str, revealed: bool) -> dict:
    """One bar per answer (label, students, is it correct); once ``revealed``, the correct
    answers are green. A plain figure dict: st.plotly_chart takes it as it is."""
    return {
        "data": [
            {
                "type": "bar",
                "x": [b[0] for b in bars],
                "y": [b[1] for b in bars],
                "marker": {"color": [(CORRECT if b[2] and revealed else OTHER) for b in bars]},
                "hovertemplate": "%{x}: %{y}<extra></extra>",
            }
        ],
        "layout": {
            "title": {"text": f"{head}the answers"},
            "height": 300,
            "margin": {"l": 40, "r": 10, "t": 40, "b": 60},
            "xaxis": {"type": "category"},
            "yaxis": {"title": "students"},
        },
    }
