"""Several engines on one workload (issue 43, item 2: kvcalc.perf.sim.fleet): aggregated
replicas and disaggregated xPyD. The expected times are worked by hand from sim_hand's step law
(Llama 3.1 8B on an H100 SXM, BF16, the ideal bound at MFU 0.5): a prefill step of p tokens reads
the weights and attends p(p+1)/2 pairs; a decode engine computes a request's last prompt token
(reading its p tokens, attending p pairs) and gives its first output token; each later token at
context c reads c tokens and attends c pairs.
"""

from __future__ import annotations

import json
import math

import pytest
from sim_hand import hand_setup, model_and_gpu, pairs, registry_setup, step_s

from kvcalc import registry
from kvcalc.cli import main
from kvcalc.perf.sim import Scheduler, Workload, fixed, lognormal, simulate
from kvcalc.perf.sim.fleet import (
    Targets,
    fewest_disagg,
    fewest_replicas,
    simulate_disagg,
    simulate_replicas,
)

INF = math.inf


@pytest.fixture(scope="module")
def llama():
    return model_and_gpu()


def decode_s(p: int, o: int) -> float:
    """The o - 1 decode steps after the first token of a p-token prompt, alone on its engine."""
    return sum(step_s(1, p + k, p + k) for k in range(1, o))


def test_one_request_disaggregated_by_hand(llama):
    p, o, move = 2000, 50, 0.0123
    wl = Workload(requests=1, prompt=fixed(p), output=fixed(o), rate=INF)
    s = hand_setup(llama, wl)
    r = simulate_disagg(
        s, s, wl, prefill_engines=1, decode_engines=1, transfer_seconds=lambda n: move
    )
    prefill = step_s(p, p, pairs(p))
    last_prompt_token = step_s(1, p, pairs(p) - pairs(p - 1))  # = p pairs
    ttft = prefill + move + last_prompt_token
    assert r.ttft_p50_s == pytest.approx(ttft, rel=1e-12)
    assert r.e2el_p50_s == pytest.approx(ttft + decode_s(p, o), rel=1e-12)
    assert r.tpot_p50_s == pytest.approx(decode_s(p, o) / (o - 1), rel=1e-12)
    assert r.gpus == 2 and r.layout == "1P1D"
    assert r.transfer_mean_s == move and r.handoff_p50_s == pytest.approx(move)
    # aggregated, one replica: the prefill step gives the first token itself
    a = simulate_replicas(s, wl, 1)
    assert a.ttft_p50_s == pytest.approx(prefill, rel=1e-12)
    assert a.e2el_p50_s == pytest.approx(prefill + decode_s(p, o), rel=1e-12)


def test_moves_queue_on_the_prefill_engines_link(llama):
    # two prompts prefilled in one step: the second move waits for the first
    p, move = 1000, 0.02
    wl = Workload(requests=2, prompt=fixed(p), output=fixed(5), rate=INF)
    s = hand_setup(llama, wl)
    assert s.max_num_batched_tokens >= 2 * p
    r = simulate_disagg(
        s, s, wl, prefill_engines=1, decode_engines=2, transfer_seconds=lambda n: move
    )
    both = step_s(2 * p, 2 * p, 2 * pairs(p))
    one = step_s(1, p, p)
    # each on its own decode engine: TTFTs end-of-prefill + 1 or 2 moves + one step
    assert r.ttft_p50_s == pytest.approx(both + 1.5 * move + one, rel=1e-12)
    assert r.handoff_p99_s == pytest.approx(move + 0.99 * move, rel=1e-12)
    # two prefill engines: one prompt each, no wait
    r2 = simulate_disagg(
        s, s, wl, prefill_engines=2, decode_engines=2, transfer_seconds=lambda n: move
    )
    assert r2.ttft_p50_s == pytest.approx(step_s(p, p, pairs(p)) + move + one, rel=1e-12)
    assert r2.gpus == 4


def test_replicas_split_a_burst(llama):
    # two replicas each prefill one prompt alone; one replica batches both into one step
    p, o = 1000, 3
    wl = Workload(requests=2, prompt=fixed(p), output=fixed(o), rate=INF)
    s = hand_setup(llama, wl)
    two = simulate_replicas(s, wl, 2)
    assert two.ttft_p50_s == pytest.approx(step_s(p, p, pairs(p)), rel=1e-12)
    one = simulate_replicas(s, wl, 1)
    assert one.ttft_p50_s == pytest.approx(step_s(2 * p, 2 * p, 2 * pairs(p)), rel=1e-12)
    # the one-replica fleet is the one-engine simulator, request for request
    alone = simulate(s, wl, series=False)
    assert one.ttft_p50_s == pytest.approx(alone.ttft_p50_s, rel=1e-12)
    assert one.e2el_p50_s == pytest.approx(alone.e2el_p50_s, rel=1e-12)


# -- closed loops: each user sends the next request when the last one ends ----------------------


def test_one_user_disaggregated_by_hand(llama):
    # one user, three requests one after the other: each is the lone request of
    # test_one_request_disaggregated_by_hand, sent the moment the last one's final token came
    p, o, move = 2000, 50, 0.0123
    wl = Workload(requests=3, prompt=fixed(p), output=fixed(o), users=1)
    s = hand_setup(llama, wl)
    r = simulate_disagg(
        s, s, wl, prefill_engines=1, decode_engines=1, transfer_seconds=lambda n: move
    )
    ttft = step_s(p, p, pairs(p)) + move + step_s(1, p, p)
    e2el = ttft + decode_s(p, o)
    assert r.requests == 3 and r.layout == "1P1D"
    assert r.ttft_p50_s == pytest.approx(ttft, rel=1e-12)
    assert r.ttft_p99_s == pytest.approx(ttft, rel=1e-12)
    assert r.e2el_p50_s == pytest.approx(e2el, rel=1e-12)
    assert r.duration_s == pytest.approx(3 * e2el, rel=1e-12)  # no overlap, no gap
    assert r.transfer_mean_s == move and r.handoff_p99_s == pytest.approx(move)


def test_two_users_on_two_replicas_each_have_an_engine_to_themselves(llama):
    # fixed lengths: the users' requests end together, so each next pair is dealt one to each
    # replica, where it prefills alone (one prompt's step), never batched with the other's
    p, o = 1000, 20
    wl = Workload(requests=8, prompt=fixed(p), output=fixed(o), users=2)
    s = hand_setup(llama, wl)
    r = simulate_replicas(s, wl, 2)
    alone = step_s(p, p, pairs(p))
    assert r.ttft_p50_s == pytest.approx(alone, rel=1e-12)
    assert r.ttft_p99_s == pytest.approx(alone, rel=1e-12)
    assert r.e2el_p50_s == pytest.approx(alone + decode_s(p, o), rel=1e-12)
    assert r.duration_s == pytest.approx(4 * (alone + decode_s(p, o)), rel=1e-12)
    # on one replica both share every step: the first prefill batches the two prompts
    one = simulate_replicas(s, wl, 1)
    assert one.ttft_p50_s == pytest.approx(step_s(2 * p, 2 * p, 2 * pairs(p)), rel=1e-12)


def test_a_closed_loop_on_one_replica_is_the_one_engine_simulator(llama):
    # the fleet's closed loop on one engine sends, draws and times every request as the
    # one-engine scheduler's own closed loop does (spread lengths, a queue at the start)
    wl = Workload(
        requests=60, prompt=lognormal(800, 0.5, 3000), output=lognormal(60, 0.5, 200), users=12
    )
    s = hand_setup(llama, wl)
    alone = simulate(s, wl, series=False)
    one = simulate_replicas(s, wl, 1)
    for q in ("ttft_mean_s", "ttft_p99_s", "tpot_mean_s", "tpot_p50_s", "e2el_p50_s", "duration_s"):
        assert getattr(one, q) == pytest.approx(getattr(alone, q), rel=1e-9), q


def test_draw_is_the_schedulers_own_arrivals(llama):
    wl = Workload(
        requests=40,
        prompt=lognormal(300, 0.8, 2000),
        output=lognormal(100, 0.8, 400),
        rate=7.0,
        seed=11,
    )
    s = hand_setup(llama, wl)
    sched = Scheduler(s, wl, series=False)
    sched.run()
    drawn = wl.draw()
    assert [p for _, p, _ in drawn] == sched.prompt
    assert [o for *_, o in drawn] == sched.output
    assert [t + s.api_overhead_s for t, _, _ in drawn] == pytest.approx(sched.arrival)
    with pytest.raises(ValueError, match="arrival rate"):
        Workload(requests=2, prompt=fixed(5), output=fixed(5), users=2).draw()


@pytest.mark.parametrize(
    "key,tp",
    [
        ("gemma-2-9b", 1),
        ("gpt-oss-20b", 1),
        ("qwen3-next-80b-a3b", 2),
        ("deepseek-v3", 8),
        ("llama-3.1-8b", 1),
    ],
)
def test_decode_engines_return_every_block_for_every_layer_kind(key, tp):
    # sliding windows, recurrent states, MLA and full attention: a decode engine admits each
    # request with its prompt's cache and the run ends with every block back (the scheduler
    # raises otherwise); the first token comes one decode step after the cache arrives
    reg = registry()
    m, g = reg.model(key), reg.gpu("h200-141gb")
    wl = Workload(
        requests=30, prompt=lognormal(3000, 0.7, 7000), output=lognormal(60, 0.5, 200), rate=20.0
    )
    s = registry_setup(m, g, max_model_len=wl.longest, tp=tp)
    r = simulate_disagg(
        s, s, wl, prefill_engines=2, decode_engines=1, transfer_seconds=lambda n: 1e-3
    )
    assert r.requests == 30 and r.preemptions == 0
    assert r.ttft_p50_s > 1e-3
    a = simulate_replicas(s, wl, 3)
    assert a.requests == 30


def test_decode_engine_holds_the_whole_prompt_from_admission(llama):
    # 10 prompts of 1,600 tokens (100 blocks each) arrive with their caches at once: a decode
    # engine admits each with all 100 blocks and computes one token for it, all in one step
    p = 1600
    wl = Workload(requests=10, prompt=fixed(p), output=fixed(2), rate=INF)
    s = hand_setup(llama, wl)
    sched = Scheduler(s, wl, series=True, arrivals=[(0.0, p, 2)] * 10, remote_prefill=True)
    r = sched.run()
    assert r.prefix_hit_rate == 0.0  # the moved cache is not a prefix-cache hit
    first = step_s(10, 10 * p, 10 * p)  # 10 tokens, each reading and attending its p
    assert r.ttft_p50_s == pytest.approx(first + s.api_overhead_s, rel=1e-12)
    assert round(r.kv_utilization_peak * s.num_blocks) == 10 * (p // 16 + 1)  # + the second token's


def test_fewest_gpus_meet_the_target_with_one_fewer_missing(llama):
    wl = Workload(requests=120, prompt=fixed(3000), output=fixed(100), rate=30.0)
    s = hand_setup(llama, wl)
    t = Targets(ttft_s=0.25, tpot_s=0.012, pct=90)
    agg = fewest_replicas(s, wl, t)
    assert agg.best is not None and t.met(agg.best)
    k = agg.best.gpus
    if k > 1:
        assert not t.met(simulate_replicas(s, wl, k - 1))
        assert agg.short[0].gpus == k - 1 and t.missed(agg.short[0])
    dis = fewest_disagg(s, s, wl, t, lambda n: n * 131_072 / 50e9)
    assert dis.best is not None and t.met(dis.best)
    for short in dis.short:
        assert not t.met(short) and short.gpus == dis.best.gpus - 1


def test_cli_disagg_compares_layouts(capsys):
    args = [
        "disagg", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--requests", "60",
        "--rate", "10", "--prompt-tokens", "4000", "--output-tokens", "100", "--prefill", "1",
        "--decode", "1", "--link", "ib-ndr-400",
    ]  # fmt: skip
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["disaggregated"]["layout"] == "1P1D" and out["disaggregated"]["gpus"] == 2
    assert out["aggregated"]["gpus"] == 2
    # the move: 4,000 tokens x 128 KiB at 50 GB/s, as RDMA moves it (0.35 ms + 72% of line rate)
    assert out["disaggregated"]["transfer_mean_s"] == pytest.approx(
        0.35e-3 + 4000 * 131_072 / 50e9 / 0.72
    )
    # the speed model is named, the one `simulate` names for the same flags
    simulate = ["simulate", *args[1:13], "--json"]
    assert main(simulate) == 0
    assert out["estimate"] == json.loads(capsys.readouterr().out)["estimate"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "1P1D on 2 GPUs" in text and "2 replicas of TP 1 on 2 GPUs" in text
    assert f"speed: the {out['estimate']} on every engine" in text
    # a closed loop of users runs too, and says so
    assert main([*args[:7], "--users", "4", *args[9:]]) == 0
    text = capsys.readouterr().out
    assert "(4 users (closed loop))" in text and "each user sends the next request" in text


def test_cli_disagg_target_search_says_which_needs_fewer(capsys):
    args = [
        "disagg", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--requests", "80",
        "--rate", "12", "--prompt-tokens", "3000", "--output-tokens", "150", "--ttft-ms", "400",
        "--tpot-ms", "15",
    ]  # fmt: skip
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "target: p90 TTFT at most 400 ms and p90 TPOT at most 15 ms" in text
    assert "fewest GPUs" in text
    assert main([*args[:-2]]) == 2
    assert "both --ttft-ms and --tpot-ms" in capsys.readouterr().err
    # a closed loop's load follows the GPUs it is given: no target to size them for
    assert main([*args[:7], "--users", "8", *args[9:]]) == 2
    assert "give --rate" in capsys.readouterr().err


def test_cli_disagg_costs_both_layouts_side_by_side(capsys):
    # dollars per million output tokens = GPUs x price / (tokens/s x 3,600 / 10^6), by hand from
    # each layout's simulated throughput; kWh the same with the H100's 700 W
    args = [
        "disagg", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--requests", "60",
        "--rate", "10", "--prompt-tokens", "2000", "--output-tokens", "100",
        "--price-per-gpu-hour", "2.5", "--json",
    ]  # fmt: skip
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    for name in ("aggregated", "disaggregated"):
        r = out[name]
        per_hour = r["output_tokens_per_s"] * 3600 / 1e6
        assert r["cost"]["dollars_per_million"] == pytest.approx(r["gpus"] * 2.5 / per_hour)
        assert r["cost"]["kwh_per_million"] == pytest.approx(r["gpus"] * 0.7 / per_hour)
    assert main(args[:-1]) == 0
    assert "cost per million output tokens at $2.5 a GPU-hour" in capsys.readouterr().out
