"""The serving simulator against what can be worked out by hand.

Hand facts used below (none produced by kvcalc.perf.sim):
- Llama 3.1 8B (config.json: hidden 4096, 32 layers, 32 query heads, 8 KV heads, head_dim 128,
  intermediate 14336, vocab 128256, untied embeddings) has
  2 x 128256 x 4096 (embeddings + lm_head) + 32 x (4096 x 4096 x 2 (q, o) + 4096 x 1024 x 2
  (k, v) + 3 x 4096 x 14336 (MLP) + 2 x 4096 (norms)) + 4096 = 8,030,261,248 parameters,
  16,060,522,496 B in BF16, of which 8,030,261,248 - 128,256 x 4096 = 7,504,924,672 compute
  (the input embedding is a table look-up; 2 FLOPs per parameter and token); its cache is
  2 x 32 x 8 x 128 x 2 = 131,072 B per token.
- A step of t new tokens reads every weight once, except the untied input embedding
  (128,256 x 4096 x 2 B = 1,050,673,152 B): it gathers only the t rows it needs, 8,192 B each.
- Attention FLOPs per attended (query, key) pair: 32 layers x 2 x 32 heads x (128 + 128).
- H100 SXM (models.yaml, NVIDIA's datasheet): 3,350 GB/s, 989.4 dense BF16 TFLOPS; nvidia-smi
  reports 81,559 MiB. MFU 0.5 is the stated prefill assumption.
- A decode step is max(FLOPs / (peak x MFU), bytes / bandwidth); one token at context c reads c
  tokens of cache and attends to c keys. A chunk of prompt from s to e tokens adds
  e(e+1)/2 - s(s+1)/2 pairs and reads e tokens.
"""

import math

import pytest
from sim_hand import (
    BW,
    FLOPS,
    KV,
    NA,
    PAIR,
    W,
    hand_setup,
    model_and_gpu,
    pairs,
    registry_setup,
    step_s,
    wread,
)

from kvcalc import get_gpu, get_model, prefill, step_time
from kvcalc.cache.deployment import Deployment
from kvcalc.perf.sim import (
    CLI_KEYS,
    Scheduler,
    Speed,
    Workload,
    fixed,
    lognormal,
    percentile,
    setup,
    simulate,
    uniform,
)


@pytest.fixture(scope="module")
def llama():
    return model_and_gpu()


def make(llama, wl, **kw):
    s = hand_setup(llama, wl, **kw)
    return s, simulate(s, wl)


def test_pool_is_vllm_arithmetic_by_hand(llama):
    s, _ = make(llama, Workload(requests=1, prompt=fixed(10), output=fixed(2), rate=1.0))
    # gpu_memory_utilization 0.92: vLLM 0.33.0's default (0.9 before 0.20.0, PR #38284)
    requested = math.ceil(81_559 * 2**20 * 0.92)
    pool = requested - W - 2 * 2**30
    blocks = pool // (16 * KV // 32) // 32  # page: 16 tokens of one layer; 32 layers
    assert s.num_blocks == blocks - 1  # vLLM's null block (v0.29.0 and later)
    assert s.num_blocks == 28_833


def test_single_request_ttft_and_decode_time(llama):
    P, OUT = 512, 64
    _, r = make(llama, Workload(requests=1, prompt=fixed(P), output=fixed(OUT), rate=math.inf))
    ttft = step_s(P, P, pairs(P))
    assert ttft == pytest.approx((2 * NA * P + PAIR * pairs(P)) / FLOPS)  # compute bound
    decode = sum(step_s(1, c, c) for c in range(P + 1, P + OUT))  # O - 1 steps
    assert r.ttft_p50_s == pytest.approx(ttft, rel=1e-12)
    assert r.e2el_s[0] == pytest.approx(ttft + decode, rel=1e-12)
    assert r.tpot_p50_s == pytest.approx(decode / (OUT - 1), rel=1e-12)
    # Blocks held at every step: the prefill's 32, then ceil(c / 16) with c tokens written.
    held = [round(u * r.num_blocks) for _, u in r.utilization_series]
    assert held == [P // 16] + [-(-c // 16) for c in range(P + 1, P + OUT)]
    assert r.kv_utilization_peak * r.num_blocks == pytest.approx(-(-(P + OUT - 1) // 16))
    # One decode step alone is the Step time page's figure (memory bound at batch 1).
    m, g = llama
    st = step_time(
        Deployment(spec=m.spec, weights=m.weights()),
        context=P + 1,
        batch=1,
        bandwidth_gbs=g.bandwidth_gbs,
    )
    assert step_s(1, P + 1, P + 1) == pytest.approx(st.step_time_s, rel=1e-12)
    # ...and the prefill is the roofline's time to first token (plus its own cache read,
    # which is below the compute time here).
    pf = prefill(
        m.spec, P, g.bf16_tflops, weight_read_bytes=wread(P), bandwidth_gbs=g.bandwidth_gbs
    )
    assert r.ttft_p50_s == pytest.approx(pf.time_s, rel=1e-12)


@pytest.mark.parametrize("key", ["llama-3.1-8b", "gemma-2-9b"])
def test_decode_only_stretch_and_full_steps_share_one_clock(key):
    # One request, one prefill step, then decode steps 2..OUT-1 run as a decode-only stretch
    # and the last as a full step. Every step is timed by Setup.step_seconds for its work: the
    # prompt's P tokens and pairs, then one token at context c = P + 1 .. P + OUT - 1 reading
    # its c cached tokens (in a sliding layer too: c stays below Gemma 2's 4,096-token
    # window). Each step's time is exactly that (the scheduler's tally of decode steps), and
    # the run's clock is those times added in order: a second copy of the formula that sums
    # its terms in another order misses by an ulp at most contexts (here c = 514 first).
    P, OUT = 512, 64
    m, g = get_model(key), get_gpu("h100-sxm-80gb")
    wl = Workload(requests=1, prompt=fixed(P), output=fixed(OUT), rate=math.inf)
    s = registry_setup(m, g, max_model_len=wl.longest)
    sl = 1 if s.slide_groups else 0
    assert sl == (key == "gemma-2-9b") and s.window == (4096 if sl else 0)
    t = s.step_seconds(P, P, pairs(P), sl * P, sl * pairs(P))
    for c in range(P + 1, P + OUT):
        t += s.step_seconds(1, c, 0, sl * c, sl * c, 0, c)
    run = Scheduler(s, wl)
    r = run.run()
    assert r.steps == OUT
    assert run.tally.itl_steps == [
        (s.step_seconds(1, c, 0, sl * c, sl * c, 0, c), 1) for c in range(P + 1, P + OUT)
    ]
    assert r.duration_s == t


def test_chunked_prefill_adds_up_to_one_prefill(llama):
    # 20,000 tokens with max_num_batched_tokens 8,192: chunks of 8,192, 8,192 and 3,616, each
    # compute bound; their attention pairs add up to the whole prompt's.
    P = 20_000
    _, r = make(
        llama,
        Workload(requests=1, prompt=fixed(P), output=fixed(2), rate=1.0),
        max_num_batched_tokens=8192,
    )
    bounds = [(0, 8192), (8192, 16384), (16384, 20000)]
    ttft = sum(step_s(e - s, e, pairs(e) - pairs(s)) for s, e in bounds)
    assert r.ttft_p50_s == pytest.approx(ttft, rel=1e-12)
    m, g = llama
    assert ttft == pytest.approx(prefill(m.spec, P, g.bf16_tflops).time_s, rel=1e-12)


def test_steady_state_decode_throughput_is_batch_over_step_time(llama):
    # 32 requests at once, prefilled together in one step (32 x 512 = 16,384 tokens <= the
    # budget), then 128 decode steps at batch 32, contexts 513..640: memory bound.
    b, P, OUT = 32, 512, 129
    _, r = make(
        llama,
        Workload(requests=b, prompt=fixed(P), output=fixed(OUT), rate=math.inf),
        max_num_batched_tokens=16384,
    )
    prefill_step = step_s(b * P, b * P, b * pairs(P))
    steps = [step_s(b, b * c, b * c) for c in range(P + 1, P + OUT)]
    assert all(
        (wread(b) + KV * b * c) / BW > (2 * NA * b + PAIR * b * c) / FLOPS
        for c in range(P + 1, P + OUT)
    )  # every decode step is memory bound
    assert r.ttft_p50_s == pytest.approx(prefill_step, rel=1e-12)
    assert r.duration_s == pytest.approx(prefill_step + sum(steps), rel=1e-12)
    decode_tps = b * (OUT - 1) / (r.duration_s - r.ttft_p50_s)
    assert decode_tps == pytest.approx(b / (sum(steps) / len(steps)), rel=1e-12)
    assert r.max_batch == b and r.preemptions == 0 and r.binding_limit == "arrivals"


def test_littles_law_within_sampling_error(llama):
    # L = lambda x W. Over 5,000 Poisson arrivals the empirical rate is within about
    # 1/sqrt(5000) = 1.4% of the nominal one (one standard error); allow 3.
    rate, n = 4.0, 5000
    wl = Workload(requests=n, prompt=uniform(100, 900), output=uniform(50, 300), rate=rate, seed=7)
    _, r = make(llama, wl)
    assert r.mean_in_system == pytest.approx(rate * r.e2el_mean_s, rel=3 / math.sqrt(n))
    # The simulation's clock is independent of the request count: the run lasts about n / rate.
    assert r.duration_s == pytest.approx(n / rate, rel=3 / math.sqrt(n))


def test_no_preemption_when_the_pool_holds_every_request(llama):
    wl = Workload(requests=300, prompt=fixed(512), output=fixed(256), rate=math.inf)
    s, r = make(llama, wl)
    assert s.num_blocks >= 300 * math.ceil(768 / 16)  # 14,400 blocks hold all of them
    assert r.preemptions == 0 and r.max_batch == 300 and r.binding_limit == "arrivals"
    # A pool that holds 40 whole requests: 300 at once must preempt, and the pool binds.
    s, r = make(
        llama, wl, gpu_memory_utilization=(W + 2 * 2**30 + 41 * 48 * 16 * KV) / (81_559 * 2**20)
    )
    assert s.num_blocks < 300 * 48
    assert r.preemptions > 0 and r.binding_limit == "kv_pool"
    assert r.max_batch * 32 <= s.num_blocks  # admitted on their prompts' 32 blocks each


def test_max_num_seqs_binds_when_the_pool_does_not(llama):
    wl = Workload(requests=200, prompt=fixed(256), output=fixed(64), rate=math.inf)
    _, r = make(llama, wl, max_num_seqs=64)
    assert r.max_batch == 64 and r.binding_limit == "max_num_seqs" and r.preemptions == 0


def test_fp8_doubles_the_pool_and_ends_the_preemptions(llama):
    wl = Workload(requests=1000, prompt=fixed(512), output=fixed(256), rate=math.inf)
    s16, r16 = make(llama, wl)
    s8, r8 = make(llama, wl, kv_dtype="fp8")
    pool = math.ceil(81_559 * 2**20 * 0.92) - W - 2 * 2**30
    assert s16.num_blocks == pool // (16 * 2 * 8 * 128 * 2) // 32 - 1
    assert s8.num_blocks == pool // (16 * 2 * 8 * 128 * 1) // 32 - 1  # FP8: 1 byte a number
    assert r16.preemptions > 0 and r8.preemptions == 0
    assert r8.output_tokens_per_s > r16.output_tokens_per_s
    assert r16.binding_limit == "kv_pool" and r8.binding_limit == "arrivals"


def test_closed_loop_of_one_user_is_serial(llama):
    P, OUT = 128, 16
    _, r = make(llama, Workload(requests=3, prompt=fixed(P), output=fixed(OUT), users=1))
    one = step_s(P, P, pairs(P)) + sum(step_s(1, c, c) for c in range(P + 1, P + OUT))
    assert r.duration_s == pytest.approx(3 * one, rel=1e-12)
    assert r.max_batch == 1 and r.e2el_s == pytest.approx((one, one, one), rel=1e-12)


def test_prefix_cache_hits_the_shared_system_prompt(llama):
    # Two requests one after the other; half of each 512-token prompt is shared: 256 tokens,
    # 16 full blocks. The second finds them cached and computes only tokens 256..511.
    P = 512
    wl = Workload(requests=2, prompt=fixed(P), output=fixed(2), users=1, prefix_share=0.5)
    _, r = make(llama, wl)
    assert r.prefix_hit_rate == pytest.approx(256 / 1024)
    assert r.ttft_s[1] == pytest.approx(step_s(256, P, pairs(P) - pairs(256)), rel=1e-12)
    _, off = make(llama, wl, enable_prefix_caching=False)
    assert off.prefix_hit_rate == 0 and off.ttft_s[1] == pytest.approx(off.ttft_s[0])


def test_deterministic_for_a_seed(llama):
    wl = Workload(
        requests=300,
        prompt=lognormal(400, 0.8, 4000),
        output=uniform(20, 400),
        rate=30.0,
        prefix_share=0.3,
        seed=3,
    )
    a = make(llama, wl)[1]
    b = make(llama, wl)[1]
    assert a == b
    c = make(llama, Workload(**{**wl.__dict__, "seed": 4}))[1]
    assert c.ttft_s != a.ttft_s


def test_percentile_is_numpys_linear_rule():
    # numpy.percentile([1, 2, 3, 4], 50) = 2.5; at 99: 3 + 0.97 = 3.97
    assert percentile([4, 1, 3, 2], 50) == 2.5
    assert percentile([1, 2, 3, 4], 99) == pytest.approx(3.97)
    # weights: [1, 2, 2, 2] -> median 2; p0 = 1
    assert percentile([1, 2], 50, [1, 3]) == 2
    assert percentile([1, 2], 0, [1, 3]) == 1


def test_mla_and_tensor_parallel_run(llama):
    m = get_model("deepseek-v3")
    g = get_gpu("h200-141gb")
    wl = Workload(requests=50, prompt=fixed(1024), output=fixed(64), rate=math.inf)
    dep = Deployment(spec=m.spec, weights=m.weights(), gpu=g, tp=8)
    s = setup(
        dep, wl.longest, Speed(bandwidth_gbs=g.bandwidth_gbs, peak_tflops=g.peak_tflops("fp8"))
    )
    r = simulate(s, wl)
    assert r.requests == 50 and r.preemptions == 0
    # The latent (512 + 64 RoPE, BF16) is replicated on every GPU: 70,272 B per token each.
    assert s.kv_read_bytes_per_token == 61 * (512 + 64) * 2
    assert r.output_tokens_per_s_per_gpu == pytest.approx(r.output_tokens_per_s / 8)


@pytest.mark.parametrize(
    "bad, message",
    [
        (dict(pp=2), "pipeline parallel to 1"),
        (dict(prompt=140_000), "beyond"),
        (dict(max_num_batched_tokens=100), "at least max_num_seqs"),
    ],
)
def test_refusals_name_what_to_change(bad, message):
    m = get_model(bad.pop("model", "llama-3.1-8b"))
    g = get_gpu("h100-sxm-80gb")
    prompt = bad.pop("prompt", 512)
    with pytest.raises(ValueError, match=message):
        registry_setup(m, g, max_model_len=prompt + 256, **bad)


def test_windows_and_chunks_together_are_refused_by_name(llama):
    # Llama 3.1 8B with every fourth layer made chunked-local (Llama 4's pattern, chunk 8,192)
    # and every other a sliding window: the simulator serves chunks (tests/test_capacity.py)
    # or windows, not both in one model.
    from kvcalc.core.model import ChunkedLocal, SlidingWindow

    m, g = llama
    heads = dict(kv_heads=8, head_dim=128, v_head_dim=128, q_heads=32)
    layers = [
        ChunkedLocal(chunk=8192, **heads)
        if i % 4 == 1
        else SlidingWindow(window=4096, **heads)
        if i % 4 == 2
        else lay
        for i, lay in enumerate(m.spec.layers)
    ]
    with pytest.raises(ValueError, match="sliding windows and attention chunks"):
        dep = Deployment(spec=m.spec.with_layers(layers), weights=m.weights(), gpu=g)
        setup(dep, 768, Speed(bandwidth_gbs=g.bandwidth_gbs, peak_tflops=g.bf16_tflops))


def test_workload_refusals():
    with pytest.raises(ValueError, match="not both"):
        Workload(requests=1, prompt=fixed(1), output=fixed(1), rate=1.0, users=1)
    with pytest.raises(ValueError, match="not both and not neither"):
        Workload(requests=1, prompt=fixed(1), output=fixed(1))
    with pytest.raises(ValueError, match="arrival rate"):
        Workload(requests=1, prompt=fixed(1), output=fixed(1), rate=float("nan"))
    with pytest.raises(ValueError, match="requests"):
        Workload(requests=10**6, prompt=fixed(1), output=fixed(1), rate=1.0)


def test_cli_keys_are_the_issues():
    # Issue 16's keys, and issue 24's named as vLLM's benchmark names its metrics (in s).
    vllm_names = {
        "ttft_p50_s",
        "ttft_mean_s",
        "ttft_p99_s",
        "tpot_p50_s",
        "tpot_mean_s",
        "itl_p50_s",
        "itl_p99_s",
        "e2el_p50_s",
        "duration_s",
        "request_throughput",
        "output_tokens_per_s",
    }
    issue16 = {
        "ttft_p50_s",
        "ttft_p99_s",
        "tpot_p50_s",
        "tpot_p99_s",
        "output_tokens_per_s",
        "preemptions",
        "kv_utilization_mean",
        "max_batch",
        "binding_limit",
    }
    assert vllm_names | issue16 <= set(CLI_KEYS)
    assert len(set(CLI_KEYS)) == len(CLI_KEYS)
