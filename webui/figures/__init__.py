"""The app's figure builders: pure functions from kvcalc results to Plotly figures, one module
per subject (each says what it draws). Only the app's pages import this package (it imports
plotly). Every axis says its unit."""

from .base import Figure
from .budget import budget_figure, concurrency_figure
from .classroom import answers_figure
from .diagrams import MAX_DRAWN_HEADS, head_sharing_figure, mla_figure, window_figure
from .disagg import transfer_figure
from .fill import (
    FILL_COLORS,
    cache_picture,
    fill_chart,
    fill_figure,
    live_bytes_figure,
    live_time_figure,
)
from .measured import (
    attention_row_figure,
    causal_figure,
    gqa_figure,
    kv_figure,
    quality_figure,
    work_time_figure,
)
from .paging import blocks_figure, paged_figure
from .roofline import roofline_figure
from .serving import LIMIT_NAMES, frontier_figure, limit_name, utilization_figure
from .speed import batch_figure, step_time_figure
from .techniques import techniques_figure

__all__ = [
    "FILL_COLORS",
    "Figure",
    "LIMIT_NAMES",
    "limit_name",
    "MAX_DRAWN_HEADS",
    "answers_figure",
    "transfer_figure",
    "attention_row_figure",
    "batch_figure",
    "blocks_figure",
    "budget_figure",
    "cache_picture",
    "causal_figure",
    "concurrency_figure",
    "fill_chart",
    "fill_figure",
    "frontier_figure",
    "gqa_figure",
    "head_sharing_figure",
    "kv_figure",
    "live_bytes_figure",
    "live_time_figure",
    "mla_figure",
    "paged_figure",
    "quality_figure",
    "roofline_figure",
    "step_time_figure",
    "techniques_figure",
    "utilization_figure",
    "window_figure",
    "work_time_figure",
]
