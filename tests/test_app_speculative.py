"""The Budget page's speculative-decoding fold (issue 38, item 3): one toggle adds the drafter's
cache, and the page states what it adds per token and what it costs in sequences.

Expected values by hand: a drafter layer of the model's own attention adds one layer's bytes per
token (DeepSeek-V3's MTP layer: one MLA latent, (512 + 64) x 2 = 1,152 B; Llama 3.1 8B's EAGLE
head: 2 x 8 x 128 x 2 = 4,096 B). vLLM's pool is the same with or without it, and a model of one
layer kind shares its blocks over all layers, so the sequences that fit scale by layers / (layers
+ 1): 61/62 for DeepSeek-V3, 32/33 for Llama 3.1 8B (block rounding aside)."""

import re

import pytest
from conftest import formulas, open_page

from webui.pages import path

CASES = {
    # model, gpu, tp: (bytes the drafter adds per token, its share, own layers, its weights
    # per GPU as the caption prints them or None)
    # DeepSeek-V3's MTP module, by hand from its config and vLLM's deepseek_mtp.py: MLA
    # attention 187,107,328 (q_a 7,168 x 1,536 + 1,536 + q_b 1,536 x 128 x 192 + kv_a 7,168 x
    # 576 + 512 + kv_b 512 x 128 x 256 + o 128 x 128 x 7,168), MoE 11,320,164,608 (256 + 1
    # experts x 3 x 7,168 x 2,048 + gate 256 x 7,168 + 256 bias), 2 x 7,168 norms, eh_proj
    # 2 x 7,168 x 7,168 and enorm, hnorm, shared_head.norm 3 x 7,168: 11,610,068,224
    # parameters in FP8, 1 B each, over 8 GPUs = 1.35 GiB.
    ("deepseek-v3", "h200-141gb", "8"): ("1.12 KiB", 100 / 62, 61, "1.35 GiB per GPU"),
    ("llama-3.1-8b", "h100-sxm-80gb", "1"): ("4.00 KiB", 100 / 33, 32, None),
}


def _fold(at):
    return [m.value for m in at.markdown if "drafter" in m.value]


@pytest.mark.parametrize("case", list(CASES))
def test_toggle_adds_the_drafters_cache(case):
    model, gpu, tp = case
    per_token, share, layers, weights = CASES[case]
    at = open_page(path("budget"), model=model, gpu=gpu, tp=tp, b_ctx="32768", b_spec="true")
    assert not at.exception
    said = " ".join(_fold(at))
    assert f"adds **{per_token} per token**" in said, said
    assert f"{share:.1f}% of the cache" in said, said
    m = re.search(r"\*\*([\d.,]+) without it, ([\d.,]+) with it\*\*", said)
    assert m, said
    without, with_ = (float(x.replace(",", "")) for x in m.groups())
    if weights is None:  # an EAGLE head's weights are not counted: the cache alone
        assert with_ / without == pytest.approx(layers / (layers + 1), rel=0.005)
    else:  # the drafter's weights shrink the pool too
        assert with_ / without < layers / (layers + 1)
        caption = " ".join(c.value for c in at.caption)
        assert f"The drafter's own weights, {weights}" in caption, caption


def test_toggle_off_changes_nothing_and_one_move_turns_it_on():
    at = open_page(path("budget"), model="llama-3.1-8b", b_ctx="32768")
    assert not any("adds **" in v for v in _fold(at))
    at.toggle(key="b_spec").set_value(True).run()
    assert any("adds **4.00 KiB per token**" in v for v in _fold(at))


def test_vllm_page_sizes_the_pool_with_the_drafter():
    """vLLM's lines with an EAGLE head on Llama 3.1 8B, by hand: 40 GiB = 42,949,672,960 B;
    a block of 16 tokens in one layer 16 x 4,096 = 65,536 B; 32 + 1 layers share the blocks:
    42,949,672,960 // 65,536 // 33 = 19,859 blocks; 32,768 tokens take 2,048 blocks:
    19,859 / 2,048 = 9.70x, and int(9.6968... x 32,768) = 317,744 tokens."""
    at = open_page(
        path("vllm_startup"),
        model="llama-3.1-8b",
        u_spec="EAGLE head (1 layer)",
        u_gib="40",
        u_len="32768",
    )
    assert not at.exception
    lines = formulas(at)[0]
    assert "GPU KV cache size: 317,744 tokens" in lines
    assert "Maximum concurrency for 32,768 tokens per request: 9.70x" in lines
    # MTP on a model that declares none: said, with what to choose instead
    at = open_page(
        path("vllm_startup"), model="llama-3.1-8b", u_spec="MTP (the model's own layers)"
    )
    assert not at.exception
    assert any("declares no MTP layers" in e.value for e in at.error)
