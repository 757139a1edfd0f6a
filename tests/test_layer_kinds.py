"""The layer kinds that keep a per-token cache (attention and MLA's latent) share one set of
per-token rules; these pin them for MLA, whose rules were once copied in from the attention
class, and tie the typed ``kv_layers`` view to the ``stores_tokens`` flag.

Expected numbers are worked by hand from DeepSeek-V3's published config: kv_lora_rank 512,
qk_rope_head_dim 64, so one latent of 512 + 64 = 576 elements per token and layer (no factor 2,
no per-head count); BF16 is 2 B an element, FP8 1 B plus one fp32 scale (4 B) per vector, and
an MLA token is one vector.
"""

from pathlib import Path

import pytest

from kvcalc import load_config_file, registry, spec_from_config
from kvcalc.core.dtypes import get_dtype
from kvcalc.core.model import FullAttention, MLALatent

CONFIGS = sorted((Path(__file__).parent / "data" / "configs").glob("*.json"))

LATENT = MLALatent(
    kv_lora_rank=512, qk_rope_head_dim=64, q_heads=128, qk_head_dim=192, v_head_dim=128
)


def test_mla_bytes_per_token_by_hand():
    assert LATENT.bytes_per_token(get_dtype("bf16")) == 576 * 2
    assert LATENT.bytes_per_token(get_dtype("fp8")) == 576
    assert LATENT.bytes_per_token(get_dtype("fp8"), scales=True) == 576 + 4
    # a 16-bit cache has no scales to keep, asked or not
    assert LATENT.bytes_per_token(get_dtype("bf16"), scales=True) == 576 * 2


def test_mla_keeps_and_attends_every_token():
    assert LATENT.tokens_kept(8192) == 8192
    assert list(LATENT.kept_positions(5)) == [0, 1, 2, 3, 4]
    assert LATENT.attended(100) == 100
    assert LATENT.attended_pairs(4) == 1 + 2 + 3 + 4
    # vLLM reserves ceil(max_model_len / block) blocks for a full-length request
    assert LATENT.vllm_blocks_per_request(1000, 64, 8192) == 16
    assert LATENT.seq_bytes(1000, get_dtype("bf16")) == 1000 * 1152


def test_attention_scales_are_two_vectors_per_kv_head():
    # 8 KV heads of 128: K and V are 2 x 8 x 128 = 2,048 elements; FP8 scales 2 x 8 x 4 B
    layer = FullAttention(kv_heads=8, head_dim=128, v_head_dim=128, q_heads=32)
    assert layer.bytes_per_token(get_dtype("bf16")) == 4096
    assert layer.bytes_per_token(get_dtype("fp8"), scales=True) == 2048 + 64


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_kv_layers_are_the_layers_that_store_tokens(path):
    spec = spec_from_config(load_config_file(path))
    assert spec.kv_layers == tuple(lay for lay in spec.layers if lay.stores_tokens)


def test_kv_layers_of_every_registry_model():
    for key, model in registry().models.items():
        spec = model.spec
        assert spec.kv_layers == tuple(lay for lay in spec.layers if lay.stores_tokens), key
