"""The results speak, the pages render: the Budget page's headline is ``Budget.verdict`` and its
side by side is webui/compare.py. Each branch of the headline, the need worked by hand (KV bytes
per token x tokens x sequences; Llama 3.1 8B keeps 32 layers x 8 K/V heads x 128 x 2 x 2 B =
128 KiB a token in BF16)."""

import pytest

from kvcalc import budget, get_model, kv_cache, registry
from kvcalc.cache.deployment import Deployment
from webui import compare

H100 = registry().gpus["h100-sxm-80gb"].memory_bytes


def _on_h100(key, tp=1):
    """``key``'s checkpoint on one H100's memory (as its driver reports it), over ``tp`` GPUs."""
    m = get_model(key)
    return Deployment(spec=m.spec, weights=m.weights("auto"), memory_bytes=H100, tp=tp)


def _budget(key, context, concurrency, tp=1):
    return budget(_on_h100(key, tp), context, concurrency, find_max_context=False)


def quote(text: str) -> str:
    return f"<{text}>"


def test_it_fits():
    level, text = _budget("llama-3.1-8b", 8192, 16).verdict("Llama 3.1 8B", False, quote)
    assert level == "success"
    # 16 x 8,192 x 128 KiB = 16 GiB
    assert text.startswith("16 x 8,192 tokens need 16.00 GiB of cache blocks; the pool holds ")
    assert ": it fits, with " in text and text.endswith(" to spare.")


def test_over_the_pool():
    level, text = _budget("llama-3.1-8b", 32768, 200).verdict("Llama 3.1 8B", False, quote)
    assert level == "error"
    assert text.startswith("200 x 32,768 tokens need 800.00 GiB of cache blocks but the pool ")
    assert text.endswith("The engine would queue or preempt the sequences that do not fit.")


def test_no_room_for_a_cache_names_the_model_quoted():
    # 70B parameters in BF16 are about 131 GiB: more than one 80 GB GPU.
    b = _budget("llama-3.1-70b", 8192, 16)
    assert b.kv_pool_bytes <= 0
    level, text = b.verdict("Llama 3.1 70B", False, quote)
    assert level == "error" and text.startswith("<Llama 3.1 70B> does not fit: its weights take ")


def test_vllm_refuses_to_start_in_its_own_words_quoted():
    b = _budget("llama-3.1-70b", 1_000_000, 1, tp=2)
    assert b.kv_pool_bytes > 0 and b.startup_error
    level, text = b.verdict("Llama 3.1 70B", False, quote)
    assert level == "error"
    assert text.startswith("vLLM would refuse to start with max_model_len = 1,000,000: ")
    assert text.endswith(f"Its own message: <{b.startup_error}>")


def test_windows_that_hold_less_while_decoding():
    # Gemma 3 27B: 4 x 32,768 tokens overflow vLLM's start-up count, but its sliding layers
    # hold only their window while decoding, so the 4 run: a warning, not an error. The same
    # budget read as if every layer kept every token is an error.
    b = _budget("gemma-3-27b", 32768, 4)
    assert not b.fits and b.held_concurrency >= 4
    level, text = b.verdict("Gemma 3 27B", True, quote)
    assert level == "warning" and text.startswith("By vLLM's start-up arithmetic 4 x 32,768 ")
    assert "so all 4 fit while they run" in text
    assert b.verdict("Gemma 3 27B", False, quote)[0] == "error"


def _me(key, context=8192):
    m = get_model(key)
    b = _budget(key, context, 1)
    per = kv_cache(m.spec, context)
    return compare.Compared(m.name, m.spec, m.weights("auto").bytes, b, per.kv_bytes_per_token)


def test_the_comparison_leaves_out_the_page_model_and_says_what_it_refuses():
    me = _me("llama-3.1-8b")
    keys = {"Llama 3.1 8B": "llama-3.1-8b", "Llama 2 7B": "llama-2-7b"}
    pool = _on_h100("llama-3.1-8b")
    names = ["Llama 3.1 8B", "Llama 2 7B", "nope"]
    others, refused = compare.models(names, keys, me, "auto", pool, "vllm")
    assert [c.name for c in others] == ["Llama 2 7B"] and refused == []
    # Llama 2 7B: 32 layers x 32 heads x 128 x 2 x 2 B = 512 KiB a token, 4x Llama 3.1 8B's
    assert others[0].kv_per_token == 4 * me.kv_per_token == 512 * 1024
    assert compare.why(others[0], me, 8192).startswith(
        "Per token Llama 2 7B keeps 512.00 KiB against Llama 3.1 8B's 128.00 KiB: 4.00x more"
    )
    row = compare.row(others[0], 8192)
    assert row["KV per token"] == "512.00 KiB" and row["model"] == "Llama 2 7B"
    # Each curve stops at its own model's limit: 4,096 for Llama 2, 131,072 for Llama 3.1.
    curves = compare.curves([me, *others], 8192, pool, "vllm")
    assert [(name, max(xs)) for name, xs, _ in curves] == [
        ("Llama 3.1 8B", 131_072),
        ("Llama 2 7B", 4096),
    ]


@pytest.mark.parametrize("tp", [1, 2])
def test_a_model_over_the_gpu_is_compared_without_a_curve(tp):
    me = _me("llama-3.1-8b")
    keys = {"Llama 3.1 70B": "llama-3.1-70b"}
    pool = _on_h100("llama-3.1-8b", tp)
    others, _ = compare.models(["Llama 3.1 70B"], keys, me, "auto", pool, "vllm")
    assert others[0].fits == (tp == 2)
    assert compare.row(others[0], 8192)["KV pool"].startswith("does not fit") == (tp == 1)
    names = [name for name, _, _ in compare.curves([me, *others], 8192, pool, "vllm")]
    assert names == (["Llama 3.1 8B"] if tp == 1 else ["Llama 3.1 8B", "Llama 3.1 70B"])
