"""The worst-input corpus (issue 22): the largest configs kvcalc's caps admit (the caps
of kvcalc.config.limits).

Each is built here from a real config of its family (tests/data/configs) with every size at its
cap, so nothing large is stored. Two kinds:

- ``*_at_caps``: every size at its cap. No GPU holds such a model, so the pages mostly say it does
  not fit; what they must not do is crash, overflow or take long.
- ``*_fits``: 1,024 layers (and the longest per-layer lists) of small widths at the longest
  context: the model fits on one GPU, so every page computes everything, layer by layer.

``paste_at_max_chars`` is the widest hybrid padded to exactly the paste cap of the app
(webui.hosted.MAX_PASTE_CHARS) with a field that cannot change the cache.

Used by tests/test_worst.py and bench/pages.py --hostile.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from kvcalc.config.limits import (
    MAX_CONTEXT,
    MAX_EXPAND,
    MAX_EXPERTS,
    MAX_HEAD_DIM,
    MAX_HEADS,
    MAX_HIDDEN,
    MAX_INTERMEDIATE,
    MAX_KERNEL,
    MAX_LAYERS,
    MAX_VOCAB,
)
from webui import pages

DATA = Path(__file__).resolve().parent / "data" / "configs"
N = MAX_LAYERS


def _real(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def dense_at_caps() -> dict:
    cfg = _real("llama-3.1-8b.json")
    cfg.update(
        num_hidden_layers=N,
        hidden_size=MAX_HIDDEN,
        intermediate_size=MAX_INTERMEDIATE,
        num_attention_heads=MAX_HEADS,
        num_key_value_heads=MAX_HEADS,
        head_dim=MAX_HEAD_DIM,
        vocab_size=MAX_VOCAB,
        max_position_embeddings=MAX_CONTEXT,
    )
    return cfg


def dense_fits() -> dict:
    cfg = _real("llama-3.1-8b.json")
    cfg.update(
        num_hidden_layers=N,
        hidden_size=256,
        intermediate_size=512,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=64,
        vocab_size=1024,
        max_position_embeddings=MAX_CONTEXT,
    )
    return cfg


def heads_at_caps_fits() -> dict:
    """The most heads (query and K/V) in a model small enough to fit: every head drawn."""
    cfg = _real("llama-3.1-8b.json")
    cfg.update(
        num_hidden_layers=1,
        hidden_size=MAX_HEADS,
        intermediate_size=64,
        num_attention_heads=MAX_HEADS,
        num_key_value_heads=MAX_HEADS,
        head_dim=1,
        vocab_size=64,
        max_position_embeddings=MAX_CONTEXT,
    )
    return cfg


def _pattern(n: int) -> str:
    return ("M-M*ME" * (n // 6 + 1))[:n]


def hybrid_at_caps() -> dict:
    """Nemotron-H: a 1,024-entry hybrid_override_pattern, every width at its cap."""
    cfg = _real("nemotron-h-56b.json")
    cfg.update(
        hybrid_override_pattern=_pattern(N),
        num_hidden_layers=N,
        hidden_size=MAX_HIDDEN,
        intermediate_size=MAX_INTERMEDIATE,
        num_attention_heads=MAX_HEADS,
        num_key_value_heads=MAX_HEADS,
        attention_head_dim=MAX_HEAD_DIM,
        mamba_num_heads=MAX_HEADS,
        mamba_head_dim=MAX_HEAD_DIM,
        n_groups=MAX_HEADS,
        ssm_state_size=MAX_HEAD_DIM,
        conv_kernel=MAX_KERNEL,
        time_step_rank=MAX_HEAD_DIM,
        vocab_size=MAX_VOCAB,
        max_position_embeddings=MAX_CONTEXT,
    )
    cfg.pop("expand")  # expand x hidden_size must equal the Mamba heads' width
    return cfg


def hybrid_fits() -> dict:
    cfg = _real("nemotron-h-56b.json")
    cfg.update(
        hybrid_override_pattern=_pattern(N),
        num_hidden_layers=N,
        hidden_size=256,
        intermediate_size=512,
        num_attention_heads=4,
        num_key_value_heads=1,
        attention_head_dim=64,
        mamba_num_heads=4,
        mamba_head_dim=64,
        n_groups=1,
        ssm_state_size=16,
        time_step_rank=16,
        vocab_size=1024,
        max_position_embeddings=MAX_CONTEXT,
    )
    cfg["expand"] = 1  # 4 heads x 64 = 256 = 1 x hidden_size
    return cfg


def layer_types_fits() -> dict:
    """A 1,024-entry layer_types of sliding and full layers, the window and context at the
    context cap (Gemma 4 also shares the last layers' caches and gives full layers their own
    head size)."""
    cfg = _real("gemma-4-e2b-it.json")
    text = cfg["text_config"]
    types = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(N)]
    types[-1] = "full_attention"
    text.update(
        layer_types=types,
        num_hidden_layers=N,
        num_kv_shared_layers=N // 2,
        sliding_window=MAX_CONTEXT,
        max_position_embeddings=MAX_CONTEXT,
        hidden_size=256,
        intermediate_size=512,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=64,
        global_head_dim=128,
        vocab_size=1024,
        vocab_size_per_layer_input=1024,
        hidden_size_per_layer_input=16,
    )
    return cfg


def layer_types_at_caps() -> dict:
    cfg = layer_types_fits()
    cfg["text_config"].update(
        hidden_size=MAX_HIDDEN,
        intermediate_size=MAX_INTERMEDIATE,
        num_attention_heads=MAX_HEADS,
        num_key_value_heads=MAX_HEADS,
        head_dim=MAX_HEAD_DIM,
        global_head_dim=MAX_HEAD_DIM,
        vocab_size=MAX_VOCAB,
        vocab_size_per_layer_input=MAX_VOCAB,
    )
    return cfg


def moe_at_caps() -> dict:
    """Qwen3-Next: the most experts, all of them active, 1,024 layers of Gated DeltaNet and
    attention with a 1,024-entry mlp_only_layers."""
    cfg = _real("qwen3-next-80b-a3b-thinking.json")
    cfg.update(
        num_hidden_layers=N,
        hidden_size=MAX_HIDDEN,
        intermediate_size=MAX_INTERMEDIATE,
        moe_intermediate_size=MAX_INTERMEDIATE,
        shared_expert_intermediate_size=MAX_INTERMEDIATE,
        num_experts=MAX_EXPERTS,
        num_experts_per_tok=MAX_EXPERTS,
        num_attention_heads=MAX_HEADS,
        num_key_value_heads=MAX_HEADS,
        head_dim=MAX_HEAD_DIM,
        linear_num_key_heads=MAX_HEADS,
        linear_num_value_heads=MAX_HEADS,
        linear_key_head_dim=MAX_HEAD_DIM,
        linear_value_head_dim=MAX_HEAD_DIM,
        linear_conv_kernel_dim=MAX_KERNEL,
        vocab_size=MAX_VOCAB,
        max_position_embeddings=MAX_CONTEXT,
        mlp_only_layers=list(range(0, 2 * N, 2)),
    )
    return cfg


def moe_fits() -> dict:
    """Mixtral with the most experts a one-layer model can hold on one GPU."""
    cfg = _real("mixtral-8x7b-v0.1.json")
    cfg.update(
        num_hidden_layers=1,
        hidden_size=64,
        intermediate_size=64,
        num_attention_heads=1,
        num_key_value_heads=1,
        vocab_size=64,
        num_local_experts=MAX_EXPERTS,
        num_experts_per_tok=MAX_EXPERTS,
        max_position_embeddings=MAX_CONTEXT,
    )
    return cfg


def mla_at_caps() -> dict:
    """DeepSeek-V3.2: MLA and the sparse-attention indexer, every rank and head at its cap,
    the most experts, a 1,024-entry indexer_types."""
    cfg = _real("deepseek-v3.2.json")
    cfg.update(
        num_hidden_layers=N,
        hidden_size=MAX_HIDDEN,
        intermediate_size=MAX_INTERMEDIATE,
        moe_intermediate_size=MAX_INTERMEDIATE,
        n_routed_experts=MAX_EXPERTS,
        num_experts_per_tok=MAX_EXPERTS,
        n_shared_experts=MAX_EXPERTS,
        num_attention_heads=MAX_HEADS,
        num_key_value_heads=MAX_HEADS,
        kv_lora_rank=MAX_HEAD_DIM,
        q_lora_rank=MAX_HEAD_DIM,
        qk_rope_head_dim=MAX_HEAD_DIM,
        qk_nope_head_dim=MAX_HEAD_DIM,
        v_head_dim=MAX_HEAD_DIM,
        index_head_dim=MAX_HEAD_DIM,
        index_n_heads=MAX_HEADS,
        vocab_size=MAX_VOCAB,
        max_position_embeddings=MAX_CONTEXT,
        indexer_types=["full" if i % 4 == 0 else "shared" for i in range(N)],
    )
    return cfg


def mla_fits() -> dict:
    cfg = _real("deepseek-v3.2.json")
    cfg.update(
        num_hidden_layers=N,
        hidden_size=256,
        intermediate_size=512,
        moe_intermediate_size=64,
        n_routed_experts=16,
        num_experts_per_tok=2,
        first_k_dense_replace=1,
        num_attention_heads=4,
        num_key_value_heads=4,
        kv_lora_rank=64,
        q_lora_rank=64,
        qk_rope_head_dim=32,
        qk_nope_head_dim=32,
        v_head_dim=32,
        index_head_dim=128,
        vocab_size=1024,
        max_position_embeddings=MAX_CONTEXT,
        n_group=1,
        topk_group=1,
        indexer_types=["full" if i % 4 == 0 else "shared" for i in range(N)],
    )
    cfg.pop("quantization_config")
    return cfg


def mamba_at_caps() -> dict:
    cfg = _real("mamba2-codestral-7b-molbap-code2.json")
    cfg.update(
        num_hidden_layers=N,
        hidden_size=MAX_HIDDEN,
        num_heads=MAX_HEADS,
        head_dim=MAX_HEAD_DIM,
        expand=MAX_EXPAND,  # 2^14 x 2^16 = 2^10 x 2^20
        n_groups=MAX_HEADS,
        state_size=MAX_HEAD_DIM,
        conv_kernel=MAX_KERNEL,
        intermediate_size=MAX_HIDDEN,
        vocab_size=MAX_VOCAB,
        time_step_rank=MAX_HEAD_DIM,
    )
    return cfg


def paste_at_max_chars(chars: int | None = None) -> str:
    """The widest hybrid, padded to exactly ``chars`` characters (the app's paste cap)."""
    if chars is None:
        from webui.hosted import MAX_PASTE_CHARS

        chars = MAX_PASTE_CHARS
    cfg = hybrid_at_caps()
    cfg["tokenizer_class"] = ""
    pad = chars - len(json.dumps(cfg))
    cfg["tokenizer_class"] = "x" * pad
    text = json.dumps(cfg)
    assert len(text) == chars, (len(text), chars)
    return text


CONFIGS = {
    f.__name__: f
    for f in (
        dense_at_caps,
        dense_fits,
        heads_at_caps_fits,
        hybrid_at_caps,
        hybrid_fits,
        layer_types_fits,
        layer_types_at_caps,
        moe_at_caps,
        moe_fits,
        mla_at_caps,
        mla_fits,
        mamba_at_caps,
    )
}


def texts() -> dict[str, str]:
    """Every corpus config as the text a user would paste, the paste-cap one included."""
    out = {name: json.dumps(make()) for name, make in CONFIGS.items()}
    out["paste_at_max_chars"] = paste_at_max_chars()
    return out


# --- what a page must never show -------------------------------------------------------------

# Every page of the registry (a new page gets its worst links too), but the Attention
# microscope: it reads no sidebar choice (it runs its own SmolLM2), and opening it starts a real
# model run (about 45 s on a CPU).
PAGES = [p.name for p in pages.PAGES if p.name != "microscope"]
# Pages about speed compute a curve of step times for every point they draw; the others have
# the 0.5 s per rerun budget of issue 11 even for the largest config the caps admit.
SPEED_PAGES = ("step_time", "lab", "roofline", "frontier")

# Words of Python's own exception messages: an error box that says one of these shows an
# exception kvcalc did not mean to raise (app.py shows any ValueError's text), not a sentence of
# ours that says what to change.
_PYTHON_WORDS = re.compile(
    r"Traceback|\b[A-Z]\w*(Error|Exception)\b|object has no attribute|unsupported operand|"
    r"not subscriptable|invalid literal|division by zero|math domain error|empty sequence|"
    r"index out of range|values to unpack|cannot convert|could not convert|NoneType|"
    r"is not in list|must be real number|int too large|not iterable|unhashable|"
    r"takes \d+ positional|got an unexpected keyword|referenced before assignment"
)


def _plain_text(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)  # webui.hosted.plain's escapes undone


def generic_errors(at) -> list[str]:
    """An AppTest's exception boxes, and its error boxes whose text is a Python exception's
    rather than one of kvcalc's sentences: what "no generic error box" rules out."""
    out = [f"exception: {e.value}"[:400] for e in at.exception]
    for e in at.error:
        text = _plain_text(e.value)
        if _PYTHON_WORDS.search(text):
            out.append(f"error: {text}"[:400])
    return out


def open_with(text: str | None, page: str, **state):
    """A fresh AppTest of the app on ``page`` with ``text`` pasted as the config (None: the
    registry model) and ``state`` set in the session: run once, ready for reruns."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(DATA.parent.parent.parent / "app.py"), default_timeout=120)
    at.run()
    if text is not None:
        at.session_state["model"] = "my-config"
        at.session_state["cfg_text"] = text
    for k, v in state.items():
        at.session_state[k] = v
    if page != "home":
        at.switch_page(pages.path(page))
    at.run()
    return at


def rerun_seconds(at, repeats: int = 3) -> tuple[float, float]:
    """(median wall seconds, median CPU seconds of this process) of ``repeats`` reruns. The
    CPU time is the server's own work, whatever else the machine is doing."""
    import statistics
    import time

    wall, cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        at.run()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return statistics.median(wall), statistics.median(cpu)
