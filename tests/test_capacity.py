"""Capacity: one pool default for every page (issue 23, finding 22), vLLM's logged worst case
against what a running server holds (findings 13, 19, 20, item 3), and the MLA block size vLLM
picks by release and GPU generation (finding 21). Every expected value is worked by hand here.

Hand facts (as in tests/test_sim.py and tests/test_tour.py):
- Llama 3.1 8B BF16: 2 x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B per token; weights
  8,030,261,248 x 2 B = 16,060,522,496 B.
- H100 SXM: nvidia-smi's 81,559 MiB = 85,520,809,984 B.
- vLLM's default gpu_memory_utilization: 0.92 from v0.20.0 (vllm/config/cache.py,
  ``gpu_memory_utilization: float = Field(default=0.92, gt=0, le=1)`` in v0.20.0 and v0.33.0;
  0.9 in v0.19.0).
"""

import math

import pytest

from kvcalc import DEFAULT_GPU_MEM_UTIL, DEFAULT_RESERVE_BYTES, budget, get_gpu, get_model
from kvcalc.memory import (
    DEFAULT_ACTIVATION_BYTES,
    DEFAULT_CUDA_GRAPH_BYTES,
    DEFAULT_NON_TORCH_BYTES,
    pool_defaults_text,
)
from kvcalc.units import GiB
from kvcalc.vllm import available_bytes, predict

W = 16_060_522_496
KV = 131_072
H100 = 81_559 * 2**20


@pytest.fixture(scope="module")
def llama():
    m = get_model("llama-3.1-8b")
    return m.spec, m.weights(), get_gpu("h100-sxm-80gb")


def test_one_named_pool_default(llama):
    spec, w, gpu = llama
    assert DEFAULT_GPU_MEM_UTIL == 0.92  # vLLM 0.33.0's own default
    assert DEFAULT_RESERVE_BYTES == 2 * GiB == (DEFAULT_ACTIVATION_BYTES + DEFAULT_NON_TORCH_BYTES
                                               + DEFAULT_CUDA_GRAPH_BYTES)
    assert pool_defaults_text() == ("gpu_memory_utilization 0.92 (vLLM 0.33.0's default) and a 2 "
                                    "GiB reserve")
    # requested = ceil(85,520,809,984 x 0.92) = 78,679,145,186 B; pool = requested - 16,060,522,496
    # - 2,147,483,648 = 60,471,139,042 B = 56.32 GiB; blocks = pool // (16 x 131,072 B) = 28,834.
    requested = math.ceil(H100 * 0.92)
    assert requested == 78_679_145_186
    b = budget(spec, total_bytes=gpu.memory_bytes, context=8192, weights_bytes=w.bytes)
    assert (b.gpu_mem_util, b.reserve_bytes) == (0.92, 2 * GiB)
    assert b.kv_pool_bytes == requested - W - 2 * GiB == 60_471_139_042
    assert b.num_blocks == 60_471_139_042 // (16 * KV) == 28_834
    assert f"{b.kv_pool_bytes / GiB:.2f}" == "56.32"
    # The vLLM start-up page's estimate with its default inputs (activation 1 GiB, non-torch
    # 0.5 GiB, CUDA graphs 0.5 GiB) is the same pool, and vLLM's arithmetic the same blocks.
    est = available_bytes(total_bytes=gpu.memory_bytes, gpu_mem_util=DEFAULT_GPU_MEM_UTIL,
                          weights_bytes=w.bytes, activation_bytes=DEFAULT_ACTIVATION_BYTES,
                          non_torch_bytes=DEFAULT_NON_TORCH_BYTES,
                          cuda_graph_bytes=DEFAULT_CUDA_GRAPH_BYTES)
    assert est == b.kv_pool_bytes
    assert predict(spec, available_bytes=est, max_model_len=8192).num_blocks == 28_834


def test_an_older_vllm_takes_its_own_default(llama):
    spec, w, gpu = llama
    # v0.19.0: 0.9. ceil(85,520,809,984 x 0.9) = 76,968,728,986; - W - 2 GiB = 58,760,722,842 B
    # = 54.73 GiB; // 2,097,152 = 28,019 blocks (the figure the old Budget page showed).
    old = budget(spec, total_bytes=gpu.memory_bytes, context=8192, weights_bytes=w.bytes,
                 vllm_version="0.19.0")
    assert old.gpu_mem_util == 0.9
    assert old.kv_pool_bytes == math.ceil(H100 * 0.9) - W - 2 * GiB == 58_760_722_842
    assert old.num_blocks == 28_019
    # TensorRT-LLM's convention keeps its own 0.9 of the memory free after weights and reserve.
    trt = budget(spec, total_bytes=gpu.memory_bytes, context=8192, weights_bytes=w.bytes,
                 engine="trtllm")
    assert trt.gpu_mem_util == 0.9
    assert trt.kv_pool_bytes == math.floor((H100 - W - 2 * GiB) * 0.9)
