"""``streamlit run``, except that the server never looks up its external address.

    python deploy/launch.py run app.py --server.port 8501 ...     # as `streamlit run ...`

Streamlit asks checkip.amazonaws.com for the machine's external address in two places: the
"External URL" line it prints at start (headless, on 0.0.0.0), and the check of every
websocket handshake whose Origin is another site (server.enableCORS, the default: the
external address is one of the hosts it admits). The answer is cached only when one comes, so
without a way out each foreign handshake waited up to two 1-second timeouts in the server's
event loop, and 4 at a time held every other visitor's page load at about 5 s (issue 39, B17).
A hosted app makes no such call (docs/deploy.md), and a replica behind HAProxy or an Ingress has
no use for the address: students reach it by the course's host name.

So before Streamlit starts, its cache (``streamlit.net_util._external_ip``, Streamlit 1.67)
is filled with an empty address: never looked up, never printed ("External URL" is left out
for an empty one), and never admitted as an Origin (an Origin's host is never empty). Foreign
Origins are then refused by Streamlit's own check at once, as well as by HAProxy before they
arrive (deploy/haproxy.cfg). Nothing else changes: the arguments are `streamlit run`'s.

tests/test_haproxy_origin.py checks it on a real replica: foreign-origin handshakes are refused
and the replica's log has no "Did not auto detect external IP". A Streamlit that no longer has
the cache stops here with a message instead of silently looking the address up again.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this folder (deploy/) is first on sys.path: the app must not import
# replicas.py or pgtemp.py as its modules. Streamlit puts app.py's own folder there itself.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    del sys.path[0]

NO_EXTERNAL_ADDRESS = ""  # never a host name: no Origin matches it, and it is not printed


def never_look_up_the_external_address() -> None:
    try:
        from streamlit import net_util
    except ModuleNotFoundError:  # said as `python -m streamlit` says it
        raise SystemExit(
            "No module named streamlit: deploy/launch.py runs `streamlit run` "
            "(pip install -e '.[app]')"
        ) from None

    if not hasattr(net_util, "_external_ip") or not callable(
        getattr(net_util, "get_external_ip", None)
    ):
        raise SystemExit(
            "deploy/launch.py: this Streamlit has no streamlit.net_util._external_ip to set; "
            "check how it finds its external address before serving with it (issue 39, B17)."
        )
    net_util._external_ip = NO_EXTERNAL_ADDRESS


def main() -> None:
    never_look_up_the_external_address()
    from streamlit.web.cli import main as streamlit_main

    # prog_name as `python -m streamlit` sets it: the server sees the same command line.
    streamlit_main(prog_name="streamlit")


if __name__ == "__main__":
    sys.exit(main())
