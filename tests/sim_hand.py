"""Hand facts for the serving simulator's tests (test_sim.py, test_sim_prefill_first.py): Llama
3.1 8B on an H100 SXM, counted by hand (test_sim.py's docstring derives each number), the step
time they give, and the setup both files simulate on (each file's ``llama`` fixture gives
``model_and_gpu()``).

A step is max(FLOPs / (peak x MFU), bytes / bandwidth), the ideal bound at MFU 0.5."""

from kvcalc import get_gpu, get_model
from kvcalc.cache.deployment import Deployment
from kvcalc.perf.sim import Speed, setup

N = 8_030_261_248  # Llama 3.1 8B parameters, counted by hand
W = 2 * N  # BF16 weight bytes
EMB, ROW = 128_256 * 4096 * 2, 4096 * 2  # the input embedding table and one of its rows
NA = N - 128_256 * 4096  # parameters a token computes with: the input embedding is a look-up
KV = 131_072  # bytes per token, BF16
PAIR = 32 * 2 * 32 * (128 + 128)  # attention FLOPs per attended pair
BW = 3350e9
FLOPS = 989.4e12 * 0.5


def pairs(p):
    return p * (p + 1) // 2


def wread(tokens):
    """Weight bytes a step of ``tokens`` new tokens reads: all but the embedding, plus its rows."""
    return W - EMB + min(EMB, tokens * ROW)


def step_s(tokens, read, npairs, kv=KV):
    return max((2 * NA * tokens + PAIR * npairs) / FLOPS, (wread(tokens) + kv * read) / BW)


def model_and_gpu():
    m = get_model("llama-3.1-8b")
    g = get_gpu("h100-sxm-80gb")
    assert m.spec.params.total == N  # the hand count agrees with kvcalc's
    return m, g


def registry_setup(m, g, *, max_model_len, speed=None, kv_pool_bytes=None, **dep):
    """The simulator's setup of registry model ``m`` (its own weights) on registry GPU ``g``
    (its memory, bandwidth and BF16 peak, no link), ``dep`` the Deployment's fields."""
    d = Deployment(spec=m.spec, weights=m.weights(), gpu=g).but(**dep)
    clock = Speed(bandwidth_gbs=g.bandwidth_gbs, peak_tflops=g.bf16_tflops, model=speed)
    return setup(d, max_model_len, clock, kv_pool_bytes=kv_pool_bytes)


def hand_setup(llama, wl, **kw):
    """The simulator's setup for ``wl`` on the fixture's model and GPU (max_model_len: the
    workload's longest request unless given)."""
    kw.setdefault("max_model_len", wl.longest)
    return registry_setup(*llama, **kw)
