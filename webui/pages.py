"""The page registry: every page of the app once, with its section, title and icon, for
st.navigation (app.py), the tour's links and the tests. A page's name is its script's file name
in app_pages/ and so its URL path (``/budget``)."""

from __future__ import annotations

from dataclasses import dataclass

FOLDER = "app_pages"


@dataclass(frozen=True)
class Page:
    name: str  # the script's file name in app_pages/, and the page's URL path
    title: str
    icon: str
    section: str
    default: bool = False  # the page at the app's root URL
    # Runs its own model (SmolLM2 or a twin) or needs none: the sidebar says that its choices
    # do not apply there (issue 23 [38]).
    own_model: bool = False

    @property
    def path(self) -> str:
        return f"{FOLDER}/{self.name}.py"


# Two paths, named (docs/design.md principle 7): Learn is the chapter, in its order, with the
# chapter's formula only (the ideal bound); Engineer holds what a deployment needs, the
# engine-aware estimate and its measured band included; Measure runs a real model.
LEARN, ENGINEER, MEASURE = "Learn", "Engineer", "Measure"
SECTIONS = (LEARN, ENGINEER, MEASURE)
PAGES = (
    Page("home", "Home", ":material/home:", LEARN, default=True),
    Page("cache_fill", "Cache fill", ":material/grid_on:", LEARN),
    Page("budget", "Budget", ":material/memory:", LEARN),
    Page("step_time", "Decode step time", ":material/speed:", LEARN),
    Page("techniques", "Shrinking the cache", ":material/compress:", LEARN),
    Page("engine", "Engine view: blocks", ":material/view_module:", LEARN),
    Page("interview", "Interview check", ":material/school:", LEARN),
    Page("tour", "Guided tour", ":material/flag:", LEARN),
    Page("live_class", "Live class", ":material/co_present:", LEARN),
    Page("lab", "Inference Lab", ":material/tune:", ENGINEER),
    Page("roofline", "Roofline", ":material/roofing:", ENGINEER),
    Page("frontier", "Serving frontier", ":material/show_chart:", ENGINEER),
    Page("vllm_startup", "vLLM start-up lines", ":material/terminal:", ENGINEER),
    Page("disagg", "Disaggregated serving", ":material/swap_horiz:", ENGINEER),
    *(
        Page(name, title, icon, MEASURE, own_model=True)
        for name, title, icon in (
            ("live", "Live: a real model", ":material/science:"),
            ("microscope", "Attention microscope", ":material/biotech:"),
            ("kv_quality", "Measured cost of shrinking", ":material/query_stats:"),
        )
    ),
)
_BY_NAME = {p.name: p for p in PAGES}


def page(name: str) -> Page:
    """The registered page called ``name``; KeyError naming the registered ones otherwise."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no page {name!r} in webui.pages (pages: {', '.join(_BY_NAME)})") from None


def path(name: str) -> str:
    """The script of the page called ``name``, for st.page_link and AppTest.switch_page."""
    return page(name).path


def by_url(url_path: str) -> Page:
    """The page at ``url_path`` (st.navigation's, "" for the default)."""
    return page(url_path or "home")


def next_page(name: str) -> Page | None:
    """The page after ``name`` in its own section's order (the chapter's order on the Learn
    path), or None for the last one."""
    here = page(name)
    same = [p for p in PAGES if p.section == here.section]
    at = same.index(here)
    return same[at + 1] if at + 1 < len(same) else None


def navigation() -> dict[str, list]:
    """The st.Page objects by section, in the registry's order, for st.navigation."""
    import streamlit as st

    return {
        section: [
            st.Page(p.path, title=p.title, icon=p.icon, default=p.default)
            for p in PAGES
            if p.section == section
        ]
        for section in SECTIONS
    }


def link(name: str, label: str | None = None, icon: str | None = None, where=None) -> None:
    """A link to the page called ``name`` (in ``where``, a column, or the page): its title
    and icon unless given, so a renamed page fails here, at test time, not in a browser."""
    import streamlit as st

    p = page(name)
    (where or st).page_link(p.path, label=label or p.title, icon=icon or p.icon)
