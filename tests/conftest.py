import sys
from pathlib import Path

# kvcalc and webui are imported as installed (pip install -e .[dev]); ROOT is for paths only.
ROOT = Path(__file__).resolve().parent.parent


def llama_config(**overrides):
    """A small Llama-style config.json dict; tests override the fields they are about."""
    cfg = {"model_type": "llama", "hidden_size": 512, "intermediate_size": 1024,
           "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
           "vocab_size": 1000, "max_position_embeddings": 4096, "tie_word_embeddings": False}
    cfg.update(overrides)
    return {k: v for k, v in cfg.items() if v is not ...}


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(base: str, proc, seconds: float = 60) -> None:
    """Wait until a Streamlit server answers /_stcore/health, or fail with its output."""
    import time
    import urllib.request

    import pytest

    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(base + "/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    proc.kill()
    out = proc.stdout.read().decode(errors="replace")[-2000:] if proc.stdout else ""
    pytest.fail("the Streamlit server did not start: " + out)


def open_page(page: str, **query):
    """An AppTest of the app opened with ``query`` as its link, switched to ``page``."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    if page != "app_pages/home.py":
        at.switch_page(page)
        at.run()
    return at
