"""Golden numbers from the seed documents (docs/formulas.md#worked-numbers and
docs/formulas.md#decode-step-and-the-crossover).

Every expected value below is the seed's own figure, or its formula evaluated by hand here."""

import pytest
from conftest import llama_config

from kvcalc import GiB, get_model, kv_cache, spec_from_config, step_time
from kvcalc.cache.deployment import Deployment


def test_llama31_8b_per_token_is_128_kib():
    # Chapter: 2 x 32 x 8 x 128 x 2 = 131,072 bytes = 128 KiB per token in BF16.
    r = kv_cache(get_model("llama-3.1-8b").spec, 1, kv_dtype="bf16")
    assert r.kv_bytes_per_token_nominal == 2 * 32 * 8 * 128 * 2 == 131_072
    assert r.kv_bytes_per_token_nominal == 128 * 1024


def test_llama31_8b_8k_conversation_is_1_gib_and_64_of_them_4x_weights():
    m = get_model("llama-3.1-8b")
    one = kv_cache(m.spec, 8192)
    assert one.kv_bytes == 1 * GiB
    sixty_four = kv_cache(m.spec, 8192, batch=64)
    assert sixty_four.kv_bytes == 64 * GiB
    # "...which is four times the size of the model's weights" (~16 GB of BF16 weights).
    ratio = sixty_four.kv_bytes / m.weights("bf16").bytes
    assert 4.0 <= ratio < 4.5


def test_interview_40_layers_8_heads_fp16():
    # Chapter interview check: 2 x 40 x 8 x 128 x 2 = 163,840 B = 160 KiB; 8,192 tokens = 1.25 GiB.
    spec = spec_from_config(
        llama_config(
            num_hidden_layers=40, num_attention_heads=32, num_key_value_heads=8, hidden_size=4096
        )
    )
    r = kv_cache(spec, 8192, kv_dtype="fp16")
    assert r.kv_bytes_per_token_nominal == 163_840 == 160 * 1024
    assert r.kv_bytes == int(1.25 * GiB)


@pytest.mark.parametrize(
    "key,batch,context,gib",
    [
        # Blog table (its "GB" are GiB: 2 x 32 x 32 x 128 x 2048 x 2 B = 2^30 exactly).
        ("llama-2-7b", 1, 2048, 1.0),
        ("llama-2-7b", 16, 8192, 64.0),
        ("llama-2-7b", 32, 16384, 256.0),
        ("llama-3.1-8b", 1, 2048, 0.25),
        ("llama-3.1-8b", 16, 8192, 16.0),
        ("llama-3.1-8b", 32, 16384, 64.0),
    ],
)
def test_blog_table_fp16(key, batch, context, gib):
    assert kv_cache(get_model(key).spec, context, batch, "fp16").kv_bytes == gib * GiB


def test_deepseek_v3_mla_per_token():
    # 61 layers x (512 + 64) x 2 B = 70,272 B in BF16, about 68.6 KiB: below Llama 3.1 8B.
    r = kv_cache(get_model("deepseek-v3").spec, 1)
    assert r.kv_bytes_per_token_nominal == 61 * (512 + 64) * 2 == 70_272
    assert (
        r.kv_bytes_per_token_nominal
        < kv_cache(get_model("llama-3.1-8b").spec, 1).kv_bytes_per_token_nominal
    )


def test_technique_ratios_from_the_chapter_table():
    # GQA 4x (Llama 2 7B MHA vs Llama 3.1 8B GQA-8: 32 vs 8 KV heads).
    mha = kv_cache(get_model("llama-2-7b").spec, 1).kv_bytes_per_token_nominal
    gqa = kv_cache(get_model("llama-3.1-8b").spec, 1).kv_bytes_per_token_nominal
    assert mha / gqa == 4
    # MLA vs the same DeepSeek-V3 layers as MHA and as GQA-8. The chapter says ~50x and ~4x,
    # taking a head size of 128 for K and V. DeepSeek-V3's config has K heads of 192 (128 + a
    # 64-wide RoPE part) and V heads of 128, so by hand: MHA 128 x (192 + 128) = 40,960 numbers
    # per token and layer, GQA-8 8 x 320 = 2,560, against the latent's 512 + 64 = 576.
    ds = get_model("deepseek-v3").spec
    latent = kv_cache(ds, 1).kv_bytes_per_token_nominal
    as_mha = kv_cache(ds.with_layers(lay.as_mha() for lay in ds.layers), 1)
    as_gqa = kv_cache(ds.with_layers(lay.with_kv_heads(8) for lay in ds.layers), 1)
    assert as_mha.kv_bytes_per_token_nominal / latent == pytest.approx(40_960 / 576)  # 71.1x
    assert as_gqa.kv_bytes_per_token_nominal / latent == pytest.approx(2_560 / 576)  # 4.44x
    # FP8 halves and INT4 quarters the cache.
    spec = get_model("llama-3.1-8b").spec
    bf16 = kv_cache(spec, 4096).kv_bytes
    assert kv_cache(spec, 4096, kv_dtype="fp8").kv_bytes * 2 == bf16
    assert kv_cache(spec, 4096, kv_dtype="int4").kv_bytes * 4 == bf16


def test_crossover_llama31_8b():
    # docs/formulas.md#decode-step-and-the-crossover (and the seed chapter): C* ~ 122K tokens at
    # batch 1 and ~3.8K at batch 32, counting every weight as read each step. A decode step
    # gathers only its tokens' rows of the untied input embedding (issue 13, item 10), which
    # moves C* to ~114.5K. By hand, from the
    # Llama 3.1 8B config (hidden 4096, 32 layers, 32 heads, 8 KV heads, head_dim 128, MLP 14336,
    # vocab 128256, untied):
    per_layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    embedding = 128_256 * 4096
    total = 32 * per_layer + 2 * embedding + 4096
    assert total == 8_030_261_248  # the model card's 8.03B
    kv_per_token = 2 * 8 * 128 * 32 * 2  # 131,072 B

    def read(batch):  # bytes: every weight but the input table, plus one row per token
        return 2 * (total - embedding + batch * 4096)

    m = get_model("llama-3.1-8b")
    w = m.weights("bf16")
    s1 = step_time(Deployment(spec=m.spec, weights=w), context=1024, batch=1, bandwidth_gbs=3350)
    s32 = step_time(Deployment(spec=m.spec, weights=w), context=1024, batch=32, bandwidth_gbs=3350)
    assert s1.weight_read_bytes == read(1) == 15_009_857_536
    assert s1.crossover_context == -(-read(1) // kv_per_token) == 114_517
    assert s32.crossover_context == -(-read(32) // (32 * kv_per_token)) == 3_579
    # The seed's figures count the whole table: 2 x total / 131,072 = 122,532.06.
    assert 2 * total / kv_per_token == pytest.approx(122_532.06, abs=0.01)
