"""What every page shares, in one import (``from webui import common``): the link-bound widgets
(urlstate), the sidebar and its selection (selection), the header, errors and stops (render)."""

from .hosted import plain  # noqa: F401
from .render import (  # noqa: F401
    PageStop,
    formula,
    guarded,
    live_missing,
    page_body,
    page_header,
    require_live,
    show_error,
    smollm2_missing,
    stop,
    stop_on_error,
    table,
    text_table,
)
from .selection import (  # noqa: F401
    embedding_note,
    estimate_step,
    pool_deployment,
    real_steps,
    require_fit,
    require_selection,
    selection,
    sidebar,
    speed_caption,
    upgrade_link,
)
from .urlstate import (  # noqa: F401
    bound,
    inputs_fold,
    number,
    select,
    slider,
    url_guard_begin,
    url_guard_end,
)
