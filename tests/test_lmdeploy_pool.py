"""LMDeploy's pool convention (``simulate --cache-max-entry-count``) worked by hand.

LMDeploy v0.4.0 sizes TurboMind's KV pool from the memory still free once the weights are in,
not from the total as vLLM does (lmdeploy/messages.py, TurbomindEngineConfig; src/turbomind/
models/llama/BlockManager.cc, BlockManager::GetBlockCount); the rule itself is
kvcalc.engines.budget.free_memory_pool, shared with TensorRT-LLM's convention. Llama 3.1 8B in
BF16 is 16,060,522,496 B of weights and 131,072 B of cache per token (see test_sim.py).
"""

import math

from kvcalc.cli import main

W = 16_060_522_496
KV = 131_072


def test_lmdeploy_pool_is_a_share_of_the_memory_free_after_the_weights(capsys):
    # LMDeploy v0.4.0 (TurbomindEngineConfig: cache_max_entry_count 0.8, "the percentage of FREE
    # GPU memory"; BlockManager::GetBlockCount: free x ratio / block bytes, free from
    # cudaMemGetInfo once the weights are loaded, before the activations are allocated). On an
    # RTX 3090 (24,576 MiB as the driver reports it) with Llama 3.1 8B in BF16 and the CUDA
    # context's 0.5 GiB taken: 0.8 x (25,769,803,776 - 16,060,522,496 - 536,870,912)
    # = 7,337,928,294 B, in vLLM's 16-token blocks of 2,097,152 B: 3,498, less the null block.
    free = 24_576 * 2**20 - W - 2**29
    pool = math.floor(0.8 * free)
    assert pool == 7_337_928_294
    blocks = pool // (16 * KV) - 1
    base = ["simulate", "--model", "llama-3.1-8b", "--gpu", "rtx-3090", "--requests", "4"]
    base += ["--rate", "inf", "--prompt-tokens", "128", "--output-tokens", "8", "--ideal"]
    assert main(base + ["--cache-max-entry-count", "0.8"]) == 0
    out = capsys.readouterr().out
    assert f"pool:       {blocks:,} blocks of 16 tokens" in out and blocks == 3_497
    assert "cache_max_entry_count 0.8 of the memory free" in out
    # vLLM's share of the total (0.9 here) gives a smaller pool on the same card:
    # 0.9 x 25,769,803,776 - weights - the 2 GiB reserve, in 16-token blocks.
    vllm_pool = math.ceil(24_576 * 2**20 * 0.9) - W - 2 * 2**30
    assert main(base + ["--gpu-memory-utilization", "0.9"]) == 0
    assert f"pool:       {vllm_pool // (16 * KV) - 1:,} blocks" in capsys.readouterr().out
    code = main(base + ["--cache-max-entry-count", "0.8", "--kv-free-fraction", "0.9"])
    assert code == 2 and "each size the pool" in capsys.readouterr().err


def test_lmdeploy_blocks_of_64_tokens(capsys):
    # LMDeploy's cache_block_seq_len is 64 (lmdeploy/cli/utils.py at v0.4.0: "default=64"): the
    # same pool, 7,337,928,294 B, in blocks of 64 x 131,072 = 8,388,608 B: 874, less the null
    # block.
    base = ["simulate", "--model", "llama-3.1-8b", "--gpu", "rtx-3090", "--requests", "4"]
    base += ["--rate", "inf", "--prompt-tokens", "128", "--output-tokens", "8", "--ideal"]
    assert main(base + ["--cache-max-entry-count", "0.8", "--block-size", "64"]) == 0
    out = capsys.readouterr().out
    assert f"pool:       {7_337_928_294 // (64 * KV) - 1:,} blocks of 64 tokens" in out
    assert "873 blocks" in out
