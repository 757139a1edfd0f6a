"""One vLLM model everywhere: the Budget's vLLM convention is kvcalc.engines.vllm.predict's
arithmetic, for every registry model, at three contexts (one past every window), on one GPU and
at TP 2."""

import pytest
from conftest import ROOT

from kvcalc import GiB, budget, get_model, kv_cache, registry
from kvcalc.cache.deployment import Deployment
from kvcalc.config.hfconfig import load_config_file, spec_from_config
from kvcalc.engines import vllm

POOL = 20 * GiB  # available KV memory: 80 GiB x 0.9 - weights 50 GiB - reserve 2 GiB = 20 GiB


def dep(spec, tp: int = 1) -> Deployment:  # a pool of POOL: the weights are in the reserve
    d = Deployment(spec=spec, tp=tp, memory_bytes=80 * GiB, weights_bytes=0, reserve_bytes=52 * GiB)
    return d.but(gpu_memory_utilization=0.9)


def _contexts(spec) -> list[int]:
    bounded = [
        lay.tokens_kept(10**9)
        for lay in spec.layers
        if lay.stores_tokens and lay.tokens_kept(10**9) < 10**9
    ]
    return [1000, 32_768, max(bounded, default=4096) + 9000]  # the last: past every window


@pytest.mark.parametrize("tp", [1, 2])
@pytest.mark.parametrize("key", sorted(registry().models))
def test_budget_is_vllm_predict(key, tp):
    d = dep(get_model(key).spec, tp)
    for n in _contexts(d.spec):
        try:
            p = vllm.predict(d, POOL, n)
        except ValueError as exc:  # e.g. TP 2 cannot split 3 KV heads: both refuse alike
            with pytest.raises(ValueError, match=str(exc)[:30]):
                budget(d, n)
            continue
        b = budget(d, n)
        assert b.kv_pool_bytes == POOL
        assert b.num_blocks == p.num_blocks
        assert b.blocks_per_request == p.blocks_per_request
        assert b.max_concurrency == p.max_concurrency
        assert b.kv_capacity_tokens == p.kv_cache_tokens
        assert b.effective_block_size == p.block_size and b.group_size == p.group_size


def test_opt_runs_through_vllm():
    # OPT-125m: 12 full layers of 12 heads x 64, 3,072 B per token (tests/test_real_configs.py).
    # Page = 16 x 3,072 / 12 layers... num_blocks = 20 GiB // (16 x 6,144 / 2 ...) worked out:
    # per layer per token 2 x 12 x 64 x 2 B = 3,072 B; page = 16 x 3,072 = 49,152 B;
    # num_blocks = 21,474,836,480 // 49,152 // 12 = 36,408; at 2,048 tokens 128 blocks a request.
    spec = spec_from_config(load_config_file(ROOT / "tests/data/configs/opt-125m.json"))
    p = vllm.predict(Deployment(spec=spec), POOL, 2048)
    assert p.num_blocks == 21_474_836_480 // 49_152 // 12 == 36_408
    assert p.blocks_per_request == 128 and p.max_concurrency == 36_408 / 128


def test_ideal_is_named_and_never_vllm():
    # Gemma 3 27B at 32K: the ideal convention holds min(n, 1,024) tokens in 52 sliding layers;
    # vLLM reserves a window plus a batch. Both are shown, named apart.
    d = dep(get_model("gemma-3-27b").spec)
    ideal = budget(d, 32_768, convention="ideal")
    real = budget(d, 32_768)
    kv = kv_cache(d.spec, 32_768)
    assert ideal.seq_bytes == kv.kv_bytes + kv.state_bytes
    assert ideal.max_concurrency == POOL / ideal.seq_bytes
    assert real.max_concurrency < ideal.max_concurrency
    assert ideal.engine == "ideal" and real.engine == "vllm"


def test_budget_is_vllm_predict_for_the_llm_class_too():
    # vLLM's default max_num_batched_tokens depends on how it runs: 16,384 for the LLM class and
    # 8,192 for `vllm serve` on an H100-class GPU (vllm/engine/arg_utils.py, the usage-context
    # table). A sliding window reserves blocks for a batch beyond its window, so Gemma 3 27B's
    # request takes more blocks under the LLM class. The Budget once took the server's default
    # whatever the usage context (2.00 sequences of 32,768 tokens where vLLM's LLM class has 1.20).
    from kvcalc import EngineArgs, get_gpu

    m = get_model("gemma-3-27b")
    llm = Deployment(
        spec=m.spec,
        weights=m.weights(),
        gpu=get_gpu("h100-sxm-80gb"),
        engine=EngineArgs(usage_context="llm"),
    )
    b = budget(llm, 32768)
    p = vllm.predict(llm, b.kv_pool_bytes, 32768)
    assert (b.blocks_per_request, b.max_concurrency) == (p.blocks_per_request, p.max_concurrency)
    served = budget(llm.but(usage_context="serve"), 32768)
    assert served.blocks_per_request < b.blocks_per_request
    # The same as the server told to batch 16,384 tokens: the usage context changes nothing else.
    told = budget(llm.but(usage_context="serve", max_num_batched_tokens=16384), 32768)
    assert (told.blocks_per_request, told.num_blocks) == (b.blocks_per_request, b.num_blocks)


@pytest.mark.parametrize(
    "version, blocks, per_request",
    [
        # before v0.10.0 no chunked pages; v0.10.1-v0.13.0 VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_
        # HYBRID_KV_CACHE defaults to 0 (envs.py of each sdist), which disables the hybrid KV
        # cache manager: all 48 layers in one group of full attention, 40 GiB / (16 tokens x
        # 2 KV heads x 128 x K and V x 2 B x 48 layers) = 54,613 blocks, 32,768 / 16 = 2,048 a
        # request
        ("0.9.2", 54_613, 2048),
        ("0.11.0", 54_613, 2048),
        ("0.13.0", 54_613, 2048),
        # v0.10.0 and from v0.14.0 (the variable defaults to 1): 4 groups of 12 layers, 218,453
        # blocks; a request 2,048 in the full group and cdiv(8,192 + 8,192, 16) = 1,024 in each
        # of the 3 chunked ones (the chunk plus one batch of tokens)
        ("0.10.0", 218_453, 2048 + 3 * 1024),
        ("0.14.0", 218_453, 2048 + 3 * 1024),
    ],
)
def test_llama4_chunked_layers_get_pages_of_their_own_only_where_vllm_gives_them(
    version, blocks, per_request
):
    # Llama 4 Scout: 36 chunked local attention layers (chunk 8,192) and 12 full ones, 8 KV
    # heads of 128 split over TP 4 on an H200
    spec = spec_from_config(
        load_config_file(ROOT / "tests/data/configs/llama-4-scout-17b-16e.json")
    )
    d = Deployment(spec=spec, gpu=registry().gpu("h200-141gb"), tp=4).but(version=version)
    p = vllm.predict(d, 40 * GiB, 32768)
    assert p.num_blocks == blocks
    assert sum(g.blocks_per_request for g in p.groups) == per_request
    assert p.max_concurrency == pytest.approx(blocks / per_request)
    keeps_all = any("keeps every token of the chunked local attention" in n for n in p.notes)
    assert keeps_all == (blocks == 54_613)
