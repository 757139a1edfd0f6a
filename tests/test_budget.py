"""GPU budget arithmetic against hand-worked vLLM examples."""

import math

import pytest
from conftest import llama_config

from kvcalc import GiB, budget, get_model, kv_cache, pp_partition, spec_from_config
from kvcalc.cache.deployment import Deployment

L8B = get_model("llama-3.1-8b").spec


def dep(spec=L8B, memory=80 * GiB, weights=15 * GiB, **kw) -> Deployment:
    """``spec`` on one GPU of ``memory`` bytes with ``weights`` bytes of weights and the 2 GiB
    reserve, unless ``kw`` (any Deployment, cache or engine field by name) says otherwise."""
    return Deployment(spec=spec, memory_bytes=memory, weights_bytes=weights).but(**kw)


HAND = dep(gpu_memory_utilization=0.9)  # the hand-worked example's 55 GiB pool


def test_hand_worked_vllm_example():
    # Llama 3.1 8B BF16, 80 GiB GPU, util 0.9, 15 GiB weights, 2 GiB reserve, block 16:
    #   requested = ceil(80 GiB x 0.9) = 72 GiB; pool = 72 - 15 - 2 = 55 GiB
    #   page = 16 tokens x (2 x 8 x 128 x 2 B) = 65,536 B per layer
    #   num_blocks = 55 GiB // 65,536 // 32 = 28,160
    #   max concurrency at 8,192 tokens = 28,160 / (8,192 / 16) = 55.0
    b = budget(HAND, 8192)
    assert b.requested_bytes == 72 * GiB
    assert b.kv_pool_bytes == 55 * GiB
    assert b.page_bytes == 65_536
    assert b.num_blocks == 28_160
    assert b.kv_capacity_tokens == 28_160 * 16
    assert b.max_concurrency == 55.0
    # The longest max_model_len one request can have: all 28,160 blocks up to v0.28; from
    # v0.29.0 vLLM first sets one aside for its null block (PR #47272).
    assert b.max_context_tokens == (28_160 - 1) * 16
    old = budget(HAND.but(version="0.28.0"), 8192)
    assert old.max_context_tokens == 28_160 * 16
    assert b.unused_bytes == 8 * GiB


def test_concurrency_rounds_context_up_to_whole_blocks():
    b = budget(HAND, 8193)
    assert b.max_concurrency == 28_160 / 513  # cdiv(8193, 16) = 513 blocks


def test_overflow_is_reported_in_bytes():
    # 64 sequences of 8,192 tokens need 64 GiB against a 55 GiB pool: 9 GiB over.
    b = budget(HAND, 8192, 64)
    assert not b.fits
    assert b.needed_bytes == 64 * GiB
    assert b.overflow_bytes == 9 * GiB
    ok = budget(HAND, 8192, 55)
    assert ok.fits and ok.overflow_bytes == 0


def test_weights_larger_than_memory():
    b = budget(dep(get_model("llama-3.1-70b").spec, weights=140 * GiB), 4096)
    assert b.kv_pool_bytes < 0 and b.num_blocks == 0 and not b.fits
    assert b.max_concurrency == 0 and b.max_context_tokens == 0


def test_trtllm_fraction_of_free_memory():
    # TensorRT-LLM: 0.9 x (80 - 15 - 2) GiB = 56.7 GiB of pool.
    b = budget(dep(), 8192, convention="trtllm")
    assert b.kv_pool_bytes == math.floor(63 * GiB * 0.9)
    assert b.num_blocks == b.kv_pool_bytes // 65_536 // 32


def test_block_size_changes_rounding_not_capacity_much():
    b16, b256 = (budget(dep(block_size=n), 100) for n in (16, 256))
    # 100 tokens take 7 blocks of 16 (112 tokens) or 1 block of 256 (256 tokens).
    assert b16.seq_bytes == 112 * 131_072 and b256.seq_bytes == 256 * 131_072
    assert b16.max_concurrency > b256.max_concurrency


def test_sliding_window_needs_fewer_blocks():
    spec = spec_from_config(llama_config(sliding_window=1024))  # every layer slides
    full = spec_from_config(llama_config(sliding_window=1024), honor_sliding_window=False)
    kw = dict(memory=8 * GiB, weights=0, reserve_bytes=0)
    # Bytes actually held: 1,024 of 32,768 tokens per layer, 32x fewer.
    ideal = budget(dep(spec, **kw), 32_768, convention="ideal").max_concurrency
    assert ideal == 32 * budget(dep(full, **kw), 32_768, convention="ideal").max_concurrency
    # vLLM up to v0.25 reserves, per sliding layer, cdiv(min(1,023 + 8,192, 32,768), 16) + 1 =
    # 576 + 1 blocks (a window plus one batch of max_num_batched_tokens, and one block of
    # slack) against cdiv(32,768, 16) = 2,048 for full attention.
    old = dict(kw, version="0.25.0", max_num_batched_tokens=8192)
    b, f = budget(dep(spec, **old), 32_768), budget(dep(full, **old), 32_768)
    assert b.blocks_per_request == 577 and f.blocks_per_request == 2048
    assert b.num_blocks == f.num_blocks
    assert b.max_concurrency == b.num_blocks / 577
    assert b.max_context_tokens is None  # one sequence never fills the pool
    # v0.33.0, with vLLM's defaults for an 8 GiB GPU (under 70 GiB: max_num_batched_tokens
    # 2,048) and two batches in flight: cdiv(min(1,023 + 4,096, 32,768), 16) + 1 = 320 + 1.
    assert budget(dep(spec, **kw, version="0.33.0"), 32_768).blocks_per_request == 321


def test_hybrid_state_is_charged_per_sequence():
    spec = get_model("jamba-v0.1").spec
    b = budget(dep(spec, weights=0, reserve_bytes=0), 8192, convention="ideal")
    kv = kv_cache(spec, 8192)
    assert b.state_bytes_per_seq == kv.state_bytes
    assert b.seq_bytes == kv.kv_bytes + kv.state_bytes  # 8192 is a whole number of blocks


def test_tensor_parallel_splits_heads_and_weights():
    one, two = (budget(dep(weights=16 * GiB, tp=tp), 8192) for tp in (1, 2))
    assert two.weights_bytes == 8 * GiB
    assert two.page_bytes == one.page_bytes // 2  # 4 of 8 KV heads per GPU
    assert two.max_concurrency > 2 * one.max_concurrency  # and more pool per GPU


def test_tp_beyond_kv_heads_replicates():
    # 8 KV heads on 16 GPUs: each GPU keeps max(1, 8 // 16) = 1 head, not half a head.
    r16 = kv_cache(L8B, 1, tp=16)
    assert r16.kv_bytes_per_token_nominal == 2 * 32 * 1 * 128 * 2
    with pytest.raises(ValueError, match="divide"):
        kv_cache(L8B, 1, tp=3)


def test_mla_latent_is_replicated_on_every_tp_gpu():
    ds = get_model("deepseek-v3").spec
    assert kv_cache(ds, 1, tp=8).kv_bytes_per_token_nominal == 70_272


def test_pipeline_partition_like_vllm():
    # vLLM's get_pp_indices: even split, remainder to the stages before the last.
    assert pp_partition(27, 2) == [14, 13]
    assert pp_partition(30, 4) == [7, 8, 8, 7]
    assert pp_partition(32, 4) == [8, 8, 8, 8]
    with pytest.raises(ValueError):
        pp_partition(3, 4)


def test_pipeline_binding_stage_has_most_layers():
    spec = spec_from_config(llama_config(num_hidden_layers=27))
    b = budget(dep(spec, GiB, 0, reserve_bytes=0, pp=2), 1024)
    assert b.stage == 0 and b.kv_layers == 14
    assert kv_cache(spec, 1, pp=2).kv_bytes_per_token_nominal == 14 * 2 * 2 * 64 * 2


@pytest.mark.parametrize(
    "kw,field",
    [
        (dict(context=0), "context"),
        (dict(context=-5), "context"),
        (dict(gpu_memory_utilization=0), "gpu_memory_utilization"),
        (dict(gpu_memory_utilization=1.5), "gpu_memory_utilization"),
        (dict(gpu_memory_utilization=float("nan")), "gpu_memory_utilization"),
        (dict(block_size=0), "block_size"),
        (dict(concurrency=0), "concurrency"),
        (dict(convention="sglang-ish"), "engine"),
        (dict(kv_dtype="fp7"), "dtype"),
        (dict(memory=-1), "GPU memory"),
        (dict(tp=0), "tensor parallel"),
    ],
)
def test_bad_budget_inputs(kw, field):
    call = ("context", "concurrency", "convention")
    args = dict(context=1024) | {k: v for k, v in kw.items() if k in call}
    with pytest.raises(ValueError, match=field):
        budget(dep(weights=GiB, **{k: v for k, v in kw.items() if k not in call}), **args)


def test_derivation_is_the_cores_own_arithmetic():
    # vLLM, Llama 3.1 8B in 80 GiB x 0.9 - 15 GiB - 2 GiB = 55 GiB: a page is 16 tokens x
    # (2 x 8 x 128 x 2 B) = 65,536 B; 55 GiB // 65,536 // 32 layers = 28,160 blocks; 8,192 tokens
    # take 512 blocks: 55.00.
    text = budget(HAND, 8192).derivation()
    assert f"= {55 * GiB:,} B (55.00 GiB)" in text
    assert f"{55 * GiB:,} // 65,536 // 32 layers per group = 28,160" in text
    assert "28,160 / 512 = 55.00" in text
    # TensorRT-LLM with pages that differ by layer (KV heads 2, 4, 2, 4 of head size 64: 512 and
    # 1,024 B per token): a block is 16 x 3,072 = 49,152 B and the pool is divided by it whole.
    spec = spec_from_config(llama_config())
    mixed = spec.with_layers(
        lay.with_kv_heads(4) if i % 2 else lay for i, lay in enumerate(spec.layers)
    )
    t = budget(dep(mixed, 8 * GiB, GiB, reserve_bytes=GiB), 1024, convention="trtllm")
    pool = int(0.9 * 6 * GiB)
    assert t.kv_pool_bytes == pool and t.num_blocks == pool // 49_152
    assert (
        f"{pool:,} // 49,152 B (one page of every K/V layer) = {pool // 49_152:,}" in t.derivation()
    )


def test_per_layer_sums_run_once_per_distinct_layer_and_stay_exact():
    # A 1,024-layer model has a handful of distinct layers: spec_from_config makes equal layers
    # one object and every per-layer sum counts each once x its count (issue 22: the Budget
    # page's sweeps of such a model took 3 to 8 s per rerun). The figures are the same ints as
    # a layer-by-layer sum over separate objects.
    import copy
    import time
    from dataclasses import replace

    import worst_inputs as W

    from kvcalc import step_time
    from kvcalc.cache.deployment import Deployment
    from kvcalc.cache.weight_bytes import weights_given
    from kvcalc.core.model import counted
    from kvcalc.perf.sweeps import concurrency_curve

    spec = spec_from_config(W.layer_types_fits())
    assert len(counted(spec.layers)) == 4 and spec.num_layers == 1024
    apart = replace(spec, layers=tuple(copy.copy(lay) for lay in spec.layers))
    assert len(counted(apart.layers)) == 1024
    for tp, pp in ((1, 1), (2, 4)):
        for s in (spec, apart):
            d = dep(s, weights=GiB, tp=tp, pp=pp)
            got = (
                kv_cache(s, 100_000, 3, tp=tp, pp=pp).to_dict(),
                budget(d, 100_000).to_dict(),
                budget(d, 100_000, convention="ideal").to_dict(),
                step_time(
                    Deployment(spec=s, weights=weights_given(GiB, "bf16"), tp=tp, pp=pp),
                    context=100_000,
                    batch=8,
                    bandwidth_gbs=3350,
                ),
            )
            if s is spec:
                first = got
            else:
                assert got == first
    # The Budget page's curve: 42 contexts, none of which fits (each asks vLLM's estimate of the
    # longest max_model_len, which is searched once).
    big = spec_from_config(W.mla_at_caps())
    t0 = time.process_time()
    concurrency_curve(dep(big, weights=GiB), [2**i for i in range(10, 27)] * 2 + [10**8] * 8)
    assert time.process_time() - t0 < 1.0


# -- each convention's words live on its class (issue 25: nothing branches on the name) --------


def test_the_memory_left_unused_follows_each_convention():
    d = dep(weights=16 * GiB, gpu_memory_utilization=0.9)
    v = budget(d, 8192, convention="vllm")
    # vLLM takes ceil(0.9 x total) and leaves the rest: 80 GiB x 0.1 = 8 GiB (to a byte)
    assert abs(v.idle_bytes - 8 * GiB) <= 1
    t = budget(d, 8192, convention="trtllm")
    # TensorRT-LLM takes 0.9 of what is free after the weights and its reserve; the other
    # 0.1 is left: 0.1 x (80 - 16 - 2) GiB = 6.2 GiB
    assert abs(t.idle_bytes - 0.1 * 62 * GiB) <= 1
    assert t.unused_bytes == 0  # the field keeps its meaning: total - requested


def test_each_convention_says_its_own_words():
    d = dep(get_model("gemma-3-27b").spec, weights=54 * GiB)
    v, i, t = (budget(d, 32768, convention=e) for e in ("vllm", "ideal", "trtllm"))
    assert (v.has_blocks, i.has_blocks, t.has_blocks) == (True, False, True)
    assert (v.logs_startup_lines, i.logs_startup_lines, t.logs_startup_lines) == (
        True,
        False,
        False,
    )
    assert v.concurrency_label(32768) == "vLLM logs at 32,768"
    assert i.concurrency_label(32768) == t.concurrency_label(32768) == "Max concurrency at 32,768"
    assert "window - 1" in v.concurrency_help(True) and "window" not in v.concurrency_help(False)
    assert i.blocks_help() == "the ideal convention counts bytes, not blocks"
    assert t.blocks_help() == f"{t.block_size} tokens each"
    assert v.setup_line().startswith("  requested:    ceil(")
    assert "TensorRT-LLM" in t.setup_line() and "ideal" in i.setup_line()
    assert v.engine_lines()[0].startswith(f"  vLLM {v.vllm_version}: ")
    assert i.engine_lines() == t.engine_lines() == []
    # the class words are not fields: the --json keys stay what they were
    assert not {"has_blocks", "logs_startup_lines", "concurrency_note"} & set(v.to_dict())


def test_the_budget_page_cli_and_chart_never_compare_the_convention_name():
    import ast

    from conftest import ROOT

    for rel in ("app_pages/budget.py", "kvcalc/cli/sizing.py", "webui/figures/budget.py"):
        tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                named = any(isinstance(s, ast.Attribute) and s.attr == "engine" for s in sides)
                literal = any(
                    isinstance(s, ast.Constant) and isinstance(s.value, str) for s in sides
                )
                assert not (named and literal), f"{rel}:{node.lineno} branches on the engine name"
