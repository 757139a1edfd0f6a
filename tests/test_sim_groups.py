"""The scheduler in groups of alike requests gives its results request by request, field for
field.

``simulate`` runs a workload of fixed lengths on a one-group model in groups of alike requests
(``groups_apply``); Scheduler request by request (``grouped=False``) is the reference: its rules
are checked by hand in test_sim.py and test_sim_prefill_first.py. Here both run the same inputs,
chosen to take every path where groups split or shrink: a prompt cut by the token budget, a
waiting request that finds too few blocks, preemptions while decoding and while prefilling,
one-token outputs, max_num_seqs, block size 1, Poisson arrivals, all at once and closed loops.
Every field of the result is compared, each request's TTFT and E2EL and the utilization series
included.
"""

import dataclasses
import math
import random

import pytest
from sim_hand import hand_setup, model_and_gpu, registry_setup

from kvcalc import get_gpu, get_model
from kvcalc.perf.calibration import CALIBRATED, IDEAL
from kvcalc.perf.sim import Scheduler, Workload, fixed, lognormal, simulate
from kvcalc.perf.sim.scheduler import groups_apply as applies


@pytest.fixture(scope="module")
def llama():
    return model_and_gpu()


def both(s, wl):
    """Scheduler's result and the grouped one's, with the fields that differ (none, if equal)."""
    assert applies(s, wl)
    ref = Scheduler(s, wl).run()
    got = Scheduler(s, wl, grouped=True).run()
    diff = [f.name for f in dataclasses.fields(ref) if getattr(ref, f.name) != getattr(got, f.name)]
    return ref, got, diff


# (requests, prompt, output, load, setup keywords): each row takes a path of its own
CASES = {
    "closed loop, pool never binds": (400, 512, 64, dict(users=100), {}),
    "all at once, the budget cuts prompts": (300, 3000, 20, dict(rate=math.inf), {}),
    "closed loop past the pool: preemptions": (
        600,
        512,
        300,
        dict(users=400),
        dict(kv_pool_bytes=2**30),
    ),
    "prefill preempts (a small budget, long prompts)": (
        200,
        5000,
        50,
        dict(users=60),
        dict(kv_pool_bytes=2**30, max_num_batched_tokens=1024),
    ),
    "waiting for blocks": (100, 2000, 10, dict(rate=math.inf), dict(kv_pool_bytes=2**28)),
    "one output token": (300, 700, 1, dict(users=50), dict(max_num_batched_tokens=2048)),
    "two output tokens, max_num_seqs 3": (50, 100, 2, dict(users=20), dict(max_num_seqs=3)),
    "block size 1": (200, 37, 41, dict(users=64), dict(block_size=1, kv_pool_bytes=2**28)),
    "Poisson arrivals": (300, 512, 128, dict(rate=40.0), {}),
    "Poisson, calibrated (API time)": (300, 512, 128, dict(rate=400.0), dict(speed=CALIBRATED)),
    "closed loop, calibrated, preempting": (
        800,
        1024,
        256,
        dict(users=500),
        dict(speed=CALIBRATED, kv_pool_bytes=3 * 2**30),
    ),
    "FP8, tensor parallel 2, ideal": (
        500,
        900,
        200,
        dict(users=300),
        dict(kv_dtype="fp8", tp=2, speed=IDEAL, kv_pool_bytes=2**30),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_groups_give_the_schedulers_result(llama, name):
    n, p, o, load, kw = CASES[name]
    wl = Workload(requests=n, prompt=fixed(p), output=fixed(o), **load)
    s = hand_setup(llama, wl, **kw)
    ref, got, diff = both(s, wl)
    assert diff == [], f"{name}: {diff}"
    assert ref.ttft_s == got.ttft_s and ref.utilization_series == got.utilization_series


def test_the_cases_take_the_paths_they_name(llama):
    """The rows above do preempt, wait and cut prompts (by Scheduler's own counts), so the
    comparison covers the splits."""

    def run(name):
        n, p, o, load, kw = CASES[name]
        wl = Workload(requests=n, prompt=fixed(p), output=fixed(o), **load)
        return Scheduler(hand_setup(llama, wl, **kw), wl).run()

    assert run("closed loop past the pool: preemptions").preemptions > 0
    assert run("prefill preempts (a small budget, long prompts)").preemptions > 0
    assert run("waiting for blocks").kv_wait_steps > 0
    assert run("closed loop, pool never binds").preemptions == 0
    assert run("two output tokens, max_num_seqs 3").binding_limit == "max_num_seqs"


def test_random_setups(llama):
    """Forty random small runs on several models (dense, MoE, MLA) and pools."""
    rng = random.Random(27)
    models = ["llama-3.1-8b", "mixtral-8x7b", "deepseek-v3", "smollm2-135m"]
    checked = preempting = 0
    while checked < 40:
        m, g = get_model(rng.choice(models)), get_gpu(rng.choice(["h100-sxm-80gb", "l4"]))
        p, o = rng.choice([1, 16, 17, 300, 2000]), rng.choice([1, 2, 50, 400])
        kw = dict(
            block_size=rng.choice([16, 32, 5]),
            kv_pool_bytes=int(rng.choice([0.01, 0.05, 0.3, 4]) * 2**30),
            max_num_batched_tokens=rng.choice([None, 256, 2048]),
            max_num_seqs=rng.choice([None, 4, 64]),
            speed=rng.choice([None, IDEAL, CALIBRATED]),
        )
        try:
            s = registry_setup(m, g, max_model_len=p + o, tp=rng.choice([1, 1, 2]), **kw)
        except ValueError:
            continue  # the model does not fit that pool: nothing to compare
        load = rng.choice([dict(users=rng.choice([2, 30, 300])), dict(rate=math.inf)])
        wl = Workload(requests=rng.choice([5, 100, 400]), prompt=fixed(p), output=fixed(o), **load)
        ref, _, diff = both(s, wl)
        assert diff == [], (m.name, p, o, kw, load, diff)
        checked += 1
        preempting += ref.preemptions > 0
    assert preempting >= 5  # the random runs reach the pool too


def test_simulate_groups_only_what_it_may(llama):
    """Fixed lengths on one group of full attention go in groups; log-normal lengths, a shared
    prefix, sliding windows and the prefill-first scheduler go request by request."""
    wl = Workload(requests=10, prompt=fixed(512), output=fixed(64), users=4)
    s = hand_setup(llama, wl)
    assert applies(s, wl)
    assert not applies(hand_setup(llama, wl, enable_chunked_prefill=False), wl)
    spread = Workload(requests=10, prompt=lognormal(512, 0.5, 2048), output=fixed(64), users=4)
    assert not applies(hand_setup(llama, spread), spread)
    shared = Workload(requests=10, prompt=fixed(512), output=fixed(64), users=4, prefix_share=0.5)
    assert not applies(s, shared)
    g, m = get_gpu("h100-sxm-80gb"), get_model("gemma-2-9b")
    windows = registry_setup(m, g, max_model_len=576)
    assert not applies(windows, wl)
    # and simulate returns the reference's result either way
    assert simulate(s, wl) == Scheduler(s, wl).run()
