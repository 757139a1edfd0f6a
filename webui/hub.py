"""Optional: fetch a config.json from the Hugging Face Hub, the app's only network call, only when
the user asks. Ids are checked before any network access; only config.json is downloaded (never
weights, never remote code); offline or missing, the message says what to do instead."""

from __future__ import annotations

import copy
import os
import re
import threading
import time
from collections import OrderedDict, deque

from kvcalc.config.hfconfig import MAX_CONFIG_BYTES, parse_config_text

from .hosted import hub_allowlist

# Before huggingface_hub is first imported here: no telemetry, no agent-registry request.
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"

_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
TIMEOUT_S = 8
# Three limits in any RATE_WINDOW_S seconds (issue 22 B10: one server-wide limit let one tab
# lock every other visitor out; issue 39 B12: a limit per address made a class behind one school
# address share six fetches): per browser (however many tabs), per source address (against a
# script that claims to be many browsers: two thirds of the server's, so 20 a minute stay for
# every other address; a class asking for the same models fetches each once, see RECENT_S),
# and for the whole server.
RATE_LIMIT = 60
RATE_PER_ADDRESS = 40
RATE_PER_VISITOR = 6
RATE_WINDOW_S = 60.0
MAX_VISITORS_TRACKED = 10_000
_fetches: deque[float] = deque()
_by_visitor: dict[str, deque[float]] = {}
_by_address: dict[str, deque[float]] = {}
_rate_lock = threading.Lock()
# A config fetched in the last RECENT_S seconds is served again, uncounted (a class: one request).
RECENT_S = 600.0
RECENT_MAX = 256
_recent: OrderedDict[str, tuple[float, dict]] = OrderedDict()


def _prune(times: deque[float], now: float) -> None:
    while times and now - times[0] > RATE_WINDOW_S:
        times.popleft()


def _window(table: dict[str, deque[float]], key: str, now: float) -> deque[float] | None:
    """``key``'s fetch times in the window (lock held), or None when it has none on record."""
    times = table.get(key)
    if times is not None:
        _prune(times, now)
    return times


def _track(table: dict[str, deque[float]], key: str, now: float) -> deque[float]:
    """``key``'s fetch times, a new record made if needed (lock held); bounded: the keys done
    with fetching are forgotten when the table is full."""
    times = table.get(key)
    if times is None:
        if len(table) >= MAX_VISITORS_TRACKED:
            for k in [k for k, t in table.items() if not t or now - t[-1] > RATE_WINDOW_S]:
                del table[k]
        times = table.setdefault(key, deque())
    return times


def _take_fetch_slot(
    visitor: str = "", now: float | None = None, address: str | None = None
) -> None:
    """Count one fetch of ``visitor`` (a browser) at ``address`` (default: the visitor is its
    own address) against its own limit, its address's and the server's, or ValueError (saying
    how long to wait) when one is used up."""
    now = time.monotonic() if now is None else now
    address = visitor if address is None else address
    with _rate_lock:
        _prune(_fetches, now)
        mine = _window(_by_visitor, visitor, now)
        ours = _window(_by_address, address, now)
        for used, cap, who in (
            (mine, RATE_PER_VISITOR, "You have"),
            (ours, RATE_PER_ADDRESS, "Your network has"),
            (_fetches, RATE_LIMIT, "This server has"),
        ):
            if used is not None and len(used) >= cap:
                wait = RATE_WINDOW_S - (now - used[0])
                raise ValueError(
                    f"{who} fetched {cap} configs from the Hub in the last minute; try again "
                    f"in {max(1, round(wait))} s, or paste the config.json."
                )
        _track(_by_visitor, visitor, now).append(now)
        _track(_by_address, address, now).append(now)
        _fetches.append(now)


def check_repo_id(repo_id: str) -> str:
    """``org/name`` with safe characters only, or ValueError (no URLs, no paths, no '..')."""
    repo_id = (repo_id or "").strip()
    if not repo_id:
        raise ValueError("Type a Hub model id such as 'Qwen/Qwen2.5-0.5B-Instruct'.")
    if not _REPO_ID.match(repo_id) or ".." in repo_id:
        raise ValueError(
            f"'{repo_id[:80]}' is not a Hub model id: use the form 'organization/"
            "model-name' (letters, digits, '.', '_', '-'), not a URL or a path."
        )
    allow = hub_allowlist()
    if allow is not None and repo_id not in allow:
        raise ValueError(
            f"'{repo_id}' is not on this server's list of allowed Hub models: {', '.join(allow)}."
        )
    return repo_id


def fetch_config(repo_id: str, visitor: str = "", browser: str | None = None) -> dict:
    """The config.json of ``repo_id`` from the Hub (or the local HF cache), for ``browser``
    (default: the calling session's) at the address ``visitor``. One request for the file and
    nothing else: huggingface_hub's telemetry (which also fetches ``/api/agent-harnesses``) is
    switched off before it is imported, and again on its constants if something imported it
    first."""
    repo_id = check_repo_id(repo_id)
    with _rate_lock:
        got = _recent.get(repo_id)
        if got is not None and time.monotonic() - got[0] < RECENT_S:
            return copy.deepcopy(got[1])
    if browser is None:
        browser = _calling_browser(visitor)
    cfg = _download(repo_id, browser, visitor)
    with _rate_lock:
        _recent[repo_id] = (time.monotonic(), copy.deepcopy(cfg))
        _recent.move_to_end(repo_id)
        while len(_recent) > RECENT_MAX:
            _recent.popitem(last=False)
    return cfg


def _calling_browser(visitor: str) -> str:
    """The browser of the Streamlit session that calls (webui.visitor.browser_id), or, outside
    one (plain Python), the address itself."""
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        if get_script_run_ctx() is None:
            return visitor
    except ImportError:
        return visitor
    from .visitor import browser_id

    return browser_id()


def _download(repo_id: str, browser: str, address: str) -> dict:
    try:
        from huggingface_hub import constants, errors, hf_hub_download
    except ImportError:
        raise ValueError(
            "Fetching from the Hub needs the huggingface_hub package "
            "(pip install huggingface_hub). You can paste the config.json instead."
        ) from None
    constants.HF_HUB_DISABLE_TELEMETRY = True
    _take_fetch_slot(browser, address=address)
    try:
        path = hf_hub_download(repo_id, "config.json", etag_timeout=TIMEOUT_S)
    except errors.HFValidationError:
        raise ValueError(
            f"'{repo_id}' is not a valid Hub model id (the Hub's own rules, e.g. no "
            "'--' and no trailing '.'); check it, or paste the config.json."
        ) from None
    except errors.GatedRepoError:
        raise ValueError(
            f"'{repo_id}' is gated on the Hub: accept its licence there, or paste "
            "its config.json instead."
        ) from None
    except errors.RepositoryNotFoundError:
        raise ValueError(
            f"No public Hub model named '{repo_id}'. Check the spelling, or paste the config.json."
        ) from None
    except errors.RemoteEntryNotFoundError:
        raise ValueError(f"'{repo_id}' has no config.json.") from None
    except errors.LocalEntryNotFoundError:  # no connection and not in the local cache
        raise ValueError(
            "Could not reach the Hugging Face Hub, and this config is not in the "
            "local cache. This machine may be offline: pick a model from the list, "
            "or paste the config.json."
        ) from None
    except errors.HfHubHTTPError as exc:  # the Hub answered, with an error: not an offline machine
        status = getattr(getattr(exc, "response", None), "status_code", None)
        raise ValueError(
            f"The Hub refused the request for '{repo_id}'"
            + (f" (HTTP {status})" if status else "")
            + "; try again later, or paste the config.json."
        ) from None
    except Exception as exc:  # offline, DNS, timeouts, proxies: all the same to a student
        raise ValueError(
            f"Could not reach the Hugging Face Hub ({type(exc).__name__}). This "
            "machine may be offline: pick a model from the list, or paste the "
            "config.json."
        ) from None
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read(MAX_CONFIG_BYTES + 1)
    return parse_config_text(text, source=f"config.json of {repo_id}")
