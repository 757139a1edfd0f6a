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
from kvcalc.cache.deployment import Deployment
from kvcalc.core.units import GiB
from kvcalc.engines.budget import (
    DEFAULT_ACTIVATION_BYTES,
    DEFAULT_CUDA_GRAPH_BYTES,
    DEFAULT_NON_TORCH_BYTES,
    pool_defaults_text,
)
from kvcalc.engines.vllm import available_bytes, predict

W = 16_060_522_496
KV = 131_072
H100 = 81_559 * 2**20


@pytest.fixture(scope="module")
def llama():
    m = get_model("llama-3.1-8b")
    return m.spec, m.weights(), get_gpu("h100-sxm-80gb")


def on(gpu_key: str, spec, **kw) -> Deployment:
    """``spec`` on the catalog's GPU ``gpu_key`` (``kw``: any Deployment, cache or engine field
    by name)."""
    return Deployment(spec=spec, gpu=get_gpu(gpu_key)).but(**kw)


def test_one_named_pool_default(llama):
    spec, w, gpu = llama
    assert DEFAULT_GPU_MEM_UTIL == 0.92  # vLLM 0.33.0's own default
    assert (
        DEFAULT_RESERVE_BYTES
        == 2 * GiB
        == (DEFAULT_ACTIVATION_BYTES + DEFAULT_NON_TORCH_BYTES + DEFAULT_CUDA_GRAPH_BYTES)
    )
    assert pool_defaults_text() == (
        "vLLM 0.33.0's default gpu_memory_utilization 0.92 and a 2 GiB reserve"
    )
    # requested = ceil(85,520,809,984 x 0.92) = 78,679,145,186 B; pool = requested - 16,060,522,496
    # - 2,147,483,648 = 60,471,139,042 B = 56.32 GiB; blocks = pool // (16 x 131,072 B) = 28,834.
    requested = math.ceil(H100 * 0.92)
    assert requested == 78_679_145_186
    b = budget(Deployment(spec=spec, gpu=gpu, weights=w), 8192)
    assert (b.gpu_mem_util, b.reserve_bytes) == (0.92, 2 * GiB)
    assert b.kv_pool_bytes == requested - W - 2 * GiB == 60_471_139_042
    assert b.num_blocks == 60_471_139_042 // (16 * KV) == 28_834
    assert f"{b.kv_pool_bytes / GiB:.2f}" == "56.32"
    # The vLLM start-up page's estimate with its default inputs (activation 1 GiB, non-torch
    # 0.5 GiB, CUDA graphs 0.5 GiB) is the same pool, and vLLM's arithmetic the same blocks.
    est = available_bytes(
        total_bytes=gpu.memory_bytes,
        gpu_mem_util=DEFAULT_GPU_MEM_UTIL,
        weights_bytes=w.bytes,
        activation_bytes=DEFAULT_ACTIVATION_BYTES,
        non_torch_bytes=DEFAULT_NON_TORCH_BYTES,
        cuda_graph_bytes=DEFAULT_CUDA_GRAPH_BYTES,
    )
    assert est == b.kv_pool_bytes
    assert predict(Deployment(spec=spec), est, 8192).num_blocks == 28_834


def test_an_older_vllm_takes_its_own_default(llama):
    spec, w, gpu = llama
    # v0.19.0: 0.9. ceil(85,520,809,984 x 0.9) = 76,968,728,986; - W - 2 GiB = 58,760,722,842 B
    # = 54.73 GiB; // 2,097,152 = 28,019 blocks (the figure the old Budget page showed).
    h100 = Deployment(spec=spec, gpu=gpu, weights=w)
    old = budget(h100.but(version="0.19.0"), 8192)
    assert old.gpu_mem_util == 0.9
    assert old.kv_pool_bytes == math.ceil(H100 * 0.9) - W - 2 * GiB == 58_760_722_842
    assert old.num_blocks == 28_019
    # TensorRT-LLM's convention keeps its own 0.9 of the memory free after weights and reserve.
    trt = budget(h100, 8192, convention="trtllm")
    assert trt.gpu_mem_util == 0.9
    assert trt.kv_pool_bytes == math.floor((H100 - W - 2 * GiB) * 0.9)


# -- finding 21: the MLA block size vLLM picks (tests/data/vllm-facts.md, Q16) -----------------

H200 = 143_771 * 2**20  # nvidia-smi's 143,771 MiB
DSV3_W = 671_026_419_200  # DeepSeek-V3 weights (the checkpoint's own format), split over 8 GPUs
LATENT = (512 + 64) * 2  # one BF16 latent per token and layer: 1,152 B (FP8: 576 B)


@pytest.fixture(scope="module")
def dsv3():
    m = get_model("deepseek-v3")
    assert m.weights().bytes == DSV3_W and m.spec.num_layers == 61
    return m.spec


def _pool(util: float) -> int:
    return math.ceil(H200 * util) - math.ceil(DSV3_W / 8) - 2 * GiB


@pytest.mark.parametrize(
    "version, kv, util, block, blocks",
    [
        # v0.17: FlashMLA forced on Hopper, 0.9 default: 49,653,552,039 // (64 x 1,152) // 61
        ("0.17.0", "bf16", 0.9, 64, 11_040),
        ("0.14.0", "fp8", 0.9, 64, 22_080),  # // (64 x 576) // 61
        # v0.18 on: the backend's preferred size. BF16: FlashAttention MLA takes 16:
        # 52,668,648,441 // (16 x 1,152) // 61 = 46,843; FP8: FlashMLA, 64: // (64 x 576) // 61.
        ("0.33.0", "bf16", 0.92, 16, 46_843),
        ("0.33.0", "fp8", 0.92, 64, 23_421),
    ],
)
def test_mla_block_size_on_hopper_by_release(dsv3, version, kv, util, block, blocks):
    assert _pool(0.9) == 49_653_552_039 and _pool(0.92) == 52_668_648_441
    d = on("h200-141gb", dsv3, weights_bytes=DSV3_W, tp=8, kv_dtype=kv, version=version)
    assert d.total_bytes == H200
    b = budget(d, 8192, find_max_context=False)
    per = LATENT if kv == "bf16" else LATENT // 2
    assert b.gpu_mem_util == util and b.kv_pool_bytes == _pool(util)
    assert b.effective_block_size == block
    assert b.num_blocks == _pool(util) // (block * per) // 61 == blocks
    assert b.max_concurrency == blocks / (8192 // block)


@pytest.mark.parametrize(
    "version, gpu, block",
    [
        ("0.14.0", "b200", 128),  # CUTLASS MLA forced
        ("0.17.0", "b200", 64),  # FlashInfer MLA (qk_nope_head_dim 128) forced
        ("0.33.0", "b200", 32),  # FlashInfer MLA: [32, 64], 16 not taken
        ("0.17.0", "a100-80gb", 16),  # FlashMLA needs Hopper: nothing forced
        ("0.33.0", "a100-80gb", 16),  # TRITON_MLA takes multiples of 16
    ],
)
def test_mla_block_size_by_gpu_generation(dsv3, version, gpu, block):
    p = predict(on(gpu, dsv3, tp=8, version=version), 40 * GiB, 8192)
    assert p.requested_block_size == 16 and p.block_size == block
    assert p.num_blocks == 40 * GiB // (block * LATENT) // 61
    assert p.block_size_line == (
        ""
        if block == 16
        else "Forcing kv cache block size to 128 for CUTLASS_MLA backend."
        if block == 128
        else "Forcing kv cache block size to 64 for FlashInferMLA backend."
        if block == 64
        else "Setting kv cache block size to 32 for FLASHINFER_MLA backend(s)."
    )


def test_mla_block_size_set_by_hand_or_read_from_a_log(dsv3):
    from kvcalc.engines.vllm import log_settings, parse_log

    # v0.18.0 on, a --block-size the user sets is kept (128 on Hopper: FlashAttention MLA).
    p = predict(on("h100-sxm-80gb", dsv3, tp=8, block_size=128), 40 * GiB, 8192)
    assert p.block_size == 128
    # Up to v0.17.x FlashMLA takes any multiple of 64, and forces 64 otherwise.
    old = Deployment(spec=dsv3, tp=8).but(block_size=32, version="0.17.0")
    assert predict(old, 40 * GiB, 8192).block_size == 64
    # A real line of vLLM 0.8.3 serving DeepSeek-V2-Lite at TP 8, quoted from a vLLM issue report
    # ("INFO 04-25 07:45:51 [cuda.py:160] Forcing kv cache block size to 64 for FlashMLA
    # backend."), is read back as the block size used.
    log = parse_log(
        "INFO 04-25 07:45:51 [cuda.py:160] Forcing kv cache block size to 64 for "
        "FlashMLA backend.\nAvailable KV cache memory: 40.00 GiB\n"
    )
    kw = log_settings(log)
    assert kw["block_size"] == 64 and kw["mla_block_rule"] is False
    # ROCm: not modelled, the block size as given, and said.
    p = predict(on("mi300x", dsv3, tp=8), 40 * GiB, 8192)
    assert p.block_size == 16 and any("ROCm" in n for n in p.notes)


# -- the serving simulator with windows, and logged vs running capacity (findings 13, 14, 19) --


def _setup(key, gpu="h100-sxm-80gb", *, max_model_len, **kw):
    from kvcalc.cache.deployment import Deployment
    from kvcalc.perf.sim import Speed, setup

    m, g = get_model(key), get_gpu(gpu)
    w = m.weights()
    speed = Speed(bandwidth_gbs=g.bandwidth_gbs, peak_tflops=g.peak_tflops(w.dtype))
    return setup(Deployment(spec=m.spec, weights=w, gpu=g, **kw), max_model_len, speed)


def test_a_sliding_group_gives_blocks_back_as_vllm_does():
    from kvcalc.perf.sim import Workload, fixed, simulate

    # gpt-oss-20b: 12 sliding (window 128) + 12 full layers of 8 KV heads x 64: 2 x 8 x 64 x 2 B
    # = 2,048 B per token and layer; two groups of 12 layers, blocks of 16 tokens.
    P, OUT = 512, 64
    s = _setup("gpt-oss-20b", max_model_len=P + OUT)
    assert (s.full_groups, s.slide_groups, s.window, s.block_size) == (1, 1, 128, 16)
    assert s.kv_read_bytes_per_token == s.slide_read_bytes_per_token == 12 * 2048
    assert s.block_bytes == 16 * 2048 * 12
    r = simulate(s, Workload(requests=1, prompt=fixed(P), output=fixed(OUT), rate=math.inf))
    held = [round(u * r.num_blocks) for _, u in r.utilization_series]
    # The prefill step takes 32 blocks in each group. Each decode step, computing token c + 1
    # with c in the cache, holds cdiv(c + 1, 16) blocks per group, less what vLLM's
    # remove_skipped_blocks freed in the sliding one: (c - 128 + 1) // 16 (Q17).
    assert held == [2 * 32] + [
        2 * -(-(c + 1) // 16) - (c - 127) // 16 for c in range(P, P + OUT - 1)
    ]
    # Decoding at 575 tokens a request holds 36 + 36 - 28 = 44 blocks; vLLM's start-up check
    # charges the window cdiv(min(127 + 2 x 8,192, 576), 16) + 1 = 37: 36 + 37 = 73.
    assert s.logged_blocks_per_request == 73


def _gemma4_setup(max_model_len: int, kv_pool_bytes: int | None = None):
    from pathlib import Path

    from kvcalc.cache.weight_bytes import weights
    from kvcalc.config.hfconfig import load_config_file, spec_from_config
    from kvcalc.perf.sim import Speed, setup

    data = Path(__file__).resolve().parent / "data" / "configs"
    spec = spec_from_config(load_config_file(str(data / "gemma-4-26b-a4b.json")))
    g = get_gpu("h100-sxm-80gb")
    speed = Speed(bandwidth_gbs=g.bandwidth_gbs, peak_tflops=g.bf16_tflops)
    dep = Deployment(spec=spec, weights=weights(spec, "bf16"), gpu=g)
    return setup(dep, max_model_len, speed, kv_pool_bytes=kv_pool_bytes)


def test_sliding_and_full_layers_of_different_pages_get_blocks_of_their_own_size():
    from kvcalc.perf.sim import Workload, fixed, simulate

    # Gemma 4 26B-A4B (its config.json): 25 sliding layers (window 1,024) of 8 KV heads x 256,
    # K and V: 8,192 B per token; 5 full layers of 2 KV heads x 512: 4,096 B. vLLM groups them
    # as 5 sliding groups and 1 full group of 5 layers each, and makes every page the same size
    # (unify_kv_cache_spec_page_size): 16 sliding tokens x 8,192 x 5 = 655,360 B, so a full
    # group's block holds 655,360 / (4,096 x 5) = 32 tokens.
    P, OUT = 2048, 64
    s = _gemma4_setup(P + OUT)
    assert (s.full_groups, s.slide_groups, s.window) == (1, 5, 1024)
    assert (s.block_size, s.slide_block_size, s.block_bytes) == (32, 16, 655_360)
    r = simulate(s, Workload(requests=1, prompt=fixed(P), output=fixed(OUT), rate=math.inf))
    held = [round(u * r.num_blocks) for _, u in r.utilization_series]

    def cdiv(a, b):
        return -(-a // b)

    # The prefill step takes cdiv(2,048, 32) = 64 full blocks and cdiv(2,048, 16) = 128 in each
    # sliding group; each decode step computing token c + 1 (c in the cache) holds cdiv(c + 1,
    # 32) full blocks and, in each sliding group, cdiv(c + 1, 16) less the (c - 1,024 + 1) // 16
    # blocks vLLM's remove_skipped_blocks freed.
    assert held == [64 + 5 * 128] + [
        cdiv(c + 1, 32) + 5 * (cdiv(c + 1, 16) - (c - 1023) // 16) for c in range(P, P + OUT - 1)
    ]


def test_mixed_block_sizes_survive_preemption_and_give_every_block_back():
    from kvcalc.perf.sim import Scheduler, Workload, fixed

    # A pool of 2,000 pages (655,360 B each) for Gemma 4 26B-A4B, 32 users of 600 + 3,000
    # tokens: a prompt's prefill step takes cdiv(600, 32) + 5 x cdiv(600, 16) = 19 + 5 x 38 =
    # 209 pages, so nine start at once; decoding, each grows to cdiv(3,600, 32) = 113 full and
    # 5 x 65 sliding pages (its window's), 438 in all: decodes preempt and prompts wait. The
    # run ends only with every block back in the pool (Scheduler.result raises otherwise).
    s = _gemma4_setup(3600, kv_pool_bytes=2000 * 655_360)
    assert s.num_blocks == 2000 - 1  # vLLM's null block
    wl = Workload(requests=64, prompt=fixed(600), output=fixed(3000), users=32)
    r = Scheduler(s, wl).run()
    assert r.preemptions > 0 and r.kv_wait_steps > 0
    assert 0 < r.kv_utilization_peak <= 1.0


def _scout_setup(version: str, max_model_len: int, kv_pool_bytes: int | None = None):
    from pathlib import Path

    from kvcalc.cache.weight_bytes import weights
    from kvcalc.config.hfconfig import load_config_file, spec_from_config
    from kvcalc.perf.sim import Speed, setup

    data = Path(__file__).resolve().parent / "data" / "configs"
    spec = spec_from_config(load_config_file(str(data / "llama-4-scout-17b-16e.json")))
    g = get_gpu("h200-141gb")
    speed = Speed(bandwidth_gbs=g.bandwidth_gbs, peak_tflops=g.bf16_tflops)
    dep = Deployment(spec=spec, weights=weights(spec, "bf16"), gpu=g, tp=4).but(version=version)
    return setup(dep, max_model_len, speed, kv_pool_bytes=kv_pool_bytes)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@pytest.mark.parametrize("version", ["0.14.0", "0.12.0"])
def test_chunked_local_attention_frees_a_chunk_where_vllm_does(version):
    from kvcalc.perf.sim import Workload, fixed, simulate

    # Llama 4 Scout at TP 4: 36 chunked layers (chunk 8,192) and 12 full ones, blocks of 16
    # tokens. From v0.14.0 vLLM gives the chunked layers 3 groups of their own and frees a
    # chunk's blocks when the next chunk starts (ChunkedLocalAttentionManager: computed //
    # 8,192 x 8,192 tokens skipped); v0.10.1-v0.13.0 keep every token (one group of 48).
    # One request of 8,180 + 40 tokens crosses the boundary at 8,192 while it decodes.
    P, OUT = 8180, 40
    s = _scout_setup(version, P + OUT)
    hybrid = version == "0.14.0"
    assert (s.window_kind, s.window) == ("chunked", 8192)
    assert (s.full_groups, s.slide_groups) == ((1, 3) if hybrid else (1, 0))
    r = simulate(s, Workload(requests=1, prompt=fixed(P), output=fixed(OUT), rate=math.inf))
    held = [round(u * r.num_blocks) for _, u in r.utilization_series]
    if hybrid:  # the prefill's 512 blocks in each of 4 groups; then the chunk's blocks go back
        want = [4 * 512] + [
            _cdiv(c + 1, 16) + 3 * (_cdiv(c + 1, 16) - c // 8192 * 512)
            for c in range(P, P + OUT - 1)
        ]
    else:  # one group: cdiv(c + 1, 16) blocks of all 48 layers
        want = [512] + [_cdiv(c + 1, 16) for c in range(P, P + OUT - 1)]
    assert held == want


def test_chunked_runs_that_preempt_give_every_block_back():
    from kvcalc.perf.sim import Scheduler, Workload, fixed

    # 6,000 pages of 16 tokens x 12 layers x 1,024 B for Llama 4 Scout (v0.14.0: chunks
    # freed): a request of 6,000 + 4,000 tokens takes 4 x 375 pages in its prefill, grows to
    # 4 x 512 just below the 8,192 boundary and holds 625 + 3 x 113 past it; four start at
    # once and grow past what is free, so decodes preempt. The run ends only with every block
    # back (Scheduler.result raises otherwise).
    s = _scout_setup("0.14.0", 10_000, kv_pool_bytes=6000 * 16 * 12 * 1024)
    assert s.pool_blocks == 6000  # a page holds 16 tokens of one group's 12 layers
    r = Scheduler(s, Workload(requests=48, prompt=fixed(6000), output=fixed(4000), users=24)).run()
    assert r.preemptions > 0 and 0 < r.kv_utilization_peak <= 1.0


def test_chunked_layers_read_their_chunk_so_far():
    from kvcalc.perf.sim.state import Decoding, Group, Pool

    # The decoding requests' reads in the chunked layers at step j, against the sum taken one
    # request at a time: (dbase + j) % 8,192 + 1 each (its chunk's tokens and the new one);
    # and the blocks that go back at step j: 3 groups x 8,192 / 16 for each request whose
    # cache reaches a multiple of 8,192.
    s = _scout_setup("0.14.0", 40000)
    dec, pool = Decoding(s), Pool(s.num_blocks)
    groups = []
    for i, computed in enumerate([100, 8191, 8192, 8193, 16383, 20000, 30000]):
        g = Group([i, 100 + i], 0.0, computed, 10_000, 0)
        g.computed = computed
        dec.start(g, 5, pool)
        groups.append(g)
    dec.stop(groups[2])  # one leaves
    live = [g for g in groups if g is not groups[2]]
    boundaries = {8192 * m - g.dbase for g in live for m in (1, 2, 3, 4)}  # steps that free
    steps = sorted(set(range(6, 20_000, 97)) | {j for j in boundaries if j > 5})
    freed = 0
    for j in steps:
        want = sum(g.n * ((g.dbase + j) % 8192 + 1) for g in live)
        assert dec.window_context(j) == want
        back = sum(g.n for g in live if (g.dbase + j) % 8192 == 0)
        assert dec.leaving(j) == 3 * 512 * back
        freed += back
    assert freed >= 12  # the boundaries were met


def test_gemma3_pool_binds_at_17_users_by_hand():
    from kvcalc.perf.capacity import running_capacity

    # Gemma 3 27B on an H100, vLLM 0.33.0: pool = 78,679,145,186 - 54,018,692,608 weights - 2 GiB
    # = 22,512,968,930 B; a page is 16 tokens x 16 KV heads x 128 x 2 x 2 B = 131,072 B; groups of
    # 10 layers (1 full, 6 sliding of window 1,024, 8 padding slots): 171,760 // 10 = 17,176
    # blocks, one of them vLLM's null block.
    s = _setup("gemma-3-27b", max_model_len=7936 + 256)
    assert s.num_blocks == 22_512_968_930 // 131_072 // 10 - 1 == 17_175
    # vLLM logs 17,176 / (512 + 6 x 513) = 4.78 requests of 8,192 tokens. Decoding at 8,192 a
    # request holds 512 + 6 x (512 - (8,192 - 1,024) // 16) = 896 blocks: 17,176 / 896 = 19.17.
    c = running_capacity(s, 7936, 256)
    assert c.logged_blocks_per_request == 512 + 6 * 513 and c.held_blocks == 896
    assert c.logged_concurrency == pytest.approx(17_176 / 3_590)
    assert c.held_concurrency == pytest.approx(17_176 / 896)
    # A 7,936-token prompt is one chunk (max_num_batched_tokens 8,192) and takes its blocks in all
    # 7 groups at once: 7 x 496 = 3,472; the next step frees the sliding groups down to 64 each
    # (7,935 computed: 496 - (7,935 - 1,023) // 16 = 64): 496 + 6 x 64 = 880 held. Sixteen fit
    # (15 x 880 + 3,472 = 16,672 <= 17,175, and later ones find 15 x 896 + 3,472 = 16,912); the
    # 17th user's first request finds 17,175 - 16 x 880 = 3,095 < 3,472 free and waits.
    assert (c.onset_users, c.last_free_users) == (17, 16)
    r = c.result(17)
    assert r.kv_wait_steps > 0 and r.preemptions == 0 and r.binding_limit == "kv_pool"
    # Once the pool binds the server sustains about 16, between vLLM's 4.78 and the 19.17 held.
    assert 15 <= c.sustained_batch <= 17


@pytest.mark.parametrize("users", [640, 768, 819])
def test_preempted_runs_are_labelled_pool_bound(llama, users):
    from kvcalc.perf.sim import Workload, fixed, simulate

    # Llama 3.1 8B, 512 + 256 tokens: 768 tokens take 48 blocks; 28,833 usable blocks hold
    # 28,833 // 48 = 600 requests at their longest. The review's runs at 640-819 users had
    # 185-554 preemptions and were labelled "arrivals" (their peak batch came before).
    s = _setup("llama-3.1-8b", max_model_len=768)
    r = simulate(
        s,
        Workload(requests=4 * users, prompt=fixed(512), output=fixed(256), users=users),
        series=False,
    )
    assert r.preemptions > 0 and r.binding_limit == "kv_pool"


def test_llama_onset_just_above_the_logged_worst_case():
    from kvcalc.perf.capacity import frontier_users, running_capacity

    s = _setup("llama-3.1-8b", max_model_len=768)
    c = running_capacity(s, 512, 256)
    # vLLM logs 28,834 / 48 = 600.71; no closed loop of 600 users or fewer can bind the pool
    # (600 x 48 = 28,800 <= 28,833), and the review found preemptions from 640.
    assert c.logged_concurrency == pytest.approx(28_834 / 48)
    assert 600 < c.onset_users <= 640 and c.last_free_users == c.onset_users - 1
    assert not (
        c.result(c.last_free_users).preemptions or c.result(c.last_free_users).kv_wait_steps
    )
    # The frontier is sampled densely there: the last free run, the onset, and steps of ~5%.
    users = frontier_users(c)
    assert {
        c.last_free_users,
        c.onset_users,
        round(0.95 * c.onset_users),
        round(1.05 * c.onset_users),
    } <= set(users)
    assert users[:10] == (1, 2, 4, 8, 16, 32, 64, 128, 256, round(0.8 * c.onset_users))


def test_steady_ttft_leaves_out_the_first_wave():
    from kvcalc.perf.sim import Workload, fixed, simulate

    s = _setup("llama-3.1-8b", max_model_len=768)
    r = simulate(
        s, Workload(requests=64 * 4, prompt=fixed(512), output=fixed(256), users=64), series=False
    )
    # All 64 users send at t = 0, before anything finishes: those 64 are the warm-up.
    assert r.warmup_requests == 64
    steady = sorted(x for x in r.ttft_s[64:])  # the others, in arrival order after the first
    assert r.ttft_p50_steady_s == pytest.approx(
        steady[len(steady) // 2 - 1] / 2 + steady[len(steady) // 2] / 2
    )
    assert r.ttft_p99_steady_s < r.ttft_p99_s


def test_cli_capacity_json(capsys):
    from kvcalc.cli import main

    assert (
        main(
            [
                "capacity",
                "--model",
                "gemma-3-27b",
                "--gpu",
                "h100-sxm-80gb",
                "--prompt-tokens",
                "7936",
                "--output-tokens",
                "256",
                "--json",
            ]
        )
        == 0
    )
    import json

    d = json.loads(capsys.readouterr().out)
    # The same figures as worked by hand above.
    assert (d["logged_blocks_per_request"], d["held_blocks"]) == (3590, 896)
    assert (d["onset_users"], d["last_free_users"]) == (17, 16)
    assert d["runs"] and all({"users", "preemptions", "kv_wait_steps"} <= set(r) for r in d["runs"])
