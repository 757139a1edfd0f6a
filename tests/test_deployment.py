"""The Deployment value (kvcalc.cache.deployment): validated once, and the same numbers as the
keyword calls it replaces. Expected values are derived by hand in each test."""

import pytest

from kvcalc import get_gpu, get_model
from kvcalc.cache.deployment import CacheFormat, Deployment, EngineArgs
from kvcalc.core.units import GiB


def llama8b(**kw) -> Deployment:
    m = get_model("llama-3.1-8b")
    return Deployment(spec=m.spec, weights=m.weights(), gpu=get_gpu("h100-sxm-80gb"), **kw)


def test_kv_cache_is_the_chapter_formula_per_gpu():
    # 2 (K and V) x 32 layers x 8 KV heads x 128 head_dim x 2 B (BF16) = 131,072 B a token;
    # at tp=2 each GPU holds 4 of the 8 KV heads: half of it.
    assert llama8b().kv_cache(1).kv_bytes_per_token == 2 * 32 * 8 * 128 * 2
    assert llama8b(tp=2).kv_cache(1000, 3).kv_bytes == 3 * 1000 * 2 * 32 * 4 * 128 * 2
    fp8 = llama8b(cache=CacheFormat(kv_dtype="fp8"))
    assert fp8.kv_cache(1).kv_bytes_per_token == 2 * 32 * 8 * 128 * 1


def test_memory_and_weights_come_from_the_gpu_and_checkpoint_or_by_hand():
    d = llama8b()
    assert d.total_bytes == 81_559 * 2**20  # the H100 SXM's driver figure, 81,559 MiB
    assert d.all_weights_bytes == d.weights.bytes
    hand = d.but(memory_bytes=24 * GiB, weights_bytes=5 * GiB)
    assert (hand.total_bytes, hand.all_weights_bytes) == (24 * GiB, 5 * GiB)
    assert hand.num_gpus == 1 and llama8b(tp=4, pp=2).num_gpus == 8


def test_but_reaches_into_the_cache_and_engine_parts():
    d = llama8b().but(kv_dtype="fp8", block_size=32, tp=2)
    assert (d.cache.kv_dtype, d.engine.block_size, d.tp) == ("fp8", 32, 2)
    assert d.cache.scales is False and d.engine.version is None


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(tp=0), "tensor parallel size must be between 1 and 4,096, got 0"),
        (dict(tp=1.5), "tensor parallel size must be a whole number"),
        (dict(pp=True), "pipeline parallel size must be a whole number"),
        (dict(cache=CacheFormat(kv_dtype="fp7")), "fp7"),
        (dict(memory_bytes=0), "GPU memory"),
    ],
)
def test_bad_values_are_refused_by_name(kw, message):
    with pytest.raises(ValueError, match=message):
        llama8b(**kw)


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(gpu_memory_utilization=0.0), "gpu_memory_utilization must be above 0"),
        (dict(gpu_memory_utilization=1.2), "at most 1"),
        (dict(block_size=0), "block_size"),
        (dict(max_num_seqs=0), "max_num_seqs"),
        (dict(usage_context="web"), "usage_context"),
    ],
)
def test_bad_engine_arguments_are_refused_by_name(kw, message):
    with pytest.raises(ValueError, match=message):
        EngineArgs(**kw)


def test_state_format_is_checked_and_tp_as_float_is_normalised():
    with pytest.raises(ValueError, match="int8"):
        CacheFormat(state_dtype="int8")
    assert llama8b(tp=2.0).tp == 2 and isinstance(llama8b(tp=2.0).tp, int)


def test_the_package_names_a_deployment_and_what_it_is_made_of():
    # `import kvcalc` is the library's front door: the one value every entry point takes, its
    # parts, and the types its results come in, without reaching into the subpackages.
    import kvcalc

    for name in (
        "Deployment",
        "CacheFormat",
        "EngineArgs",
        "ModelSpec",
        "GPU",
        "Weights",
        "KVCache",
        "Budget",
        "RegistryModel",
    ):
        assert isinstance(getattr(kvcalc, name), type), name
        assert name in kvcalc.__all__
    m = kvcalc.get_model("llama-3.1-8b")
    d = kvcalc.Deployment(spec=m.spec, weights=m.weights(), gpu=kvcalc.get_gpu("h100-sxm-80gb"))
    assert isinstance(kvcalc.budget(d, 8192), kvcalc.Budget)
    assert d.kv_cache(1).kv_bytes_per_token == 128 * kvcalc.KiB  # 2 x 32 x 8 x 128 x 2 B


def test_the_deployment_accepts_every_vllm_cache_format_the_engine_models():
    # The cache layer cannot import the engines (tests/test_layers.py), so the --kv-cache-dtype
    # names a Deployment accepts are listed apart from the engine's table: they must be every
    # name some vLLM release offers (its CacheDType choices, the facts table), and no other.
    from kvcalc.cache.deployment import VLLM_KV_CACHE_DTYPES
    from kvcalc.engines.vllm import version_choices
    from kvcalc.engines.vllm.kv_cache import kv_cache_dtypes

    offered = {n for v in version_choices() for n in kv_cache_dtypes(v, vllm_names=True)}
    assert set(VLLM_KV_CACHE_DTYPES) == offered
    assert {"auto", "fp8", "fp8_e4m3", "fp8_e5m2"} <= offered
