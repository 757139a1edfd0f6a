"""The paged-block engine simulator: admission, growth, preemption, freeing, prefix sharing,
hash chains and eviction order, worked by hand; invariants checked with hypothesis."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcalc.engines.paging import (
    SCENARIOS,
    Engine,
    Request,
    contiguous_capacity,
    parse_requests,
    simulate,
)


def req(rid, prompt, out, arrival=0):
    return Request(rid=rid, prompt=tuple(prompt), output_len=out, arrival=arrival)


def test_one_request_grows_block_by_block_and_frees_at_once():
    eng = Engine([req("R1", range(6), 3)], num_blocks=10, block_size=4)
    s = eng.step()  # prefill 6 tokens: blocks of 4 + 2
    assert s.used_blocks == 2 and s.fragmentation_slots == 2
    s = eng.step()  # 7 tokens: fits in block 2
    assert s.used_blocks == 2 and s.fragmentation_slots == 1
    s = eng.step()  # 8 tokens: block 2 full
    assert s.used_blocks == 2 and s.fragmentation_slots == 0
    s = eng.step()  # the 9th token needs a third block; it is the last one: finished
    assert s.used_blocks == 0 and s.free_blocks == 10 and s.finished == 1
    assert any("finish R1" in e for e in s.events)


def test_admission_waits_for_free_blocks_first_come_first_served():
    # 4 blocks of 4: R1 (12-token prompt) takes 3; R2 (8 tokens) must wait; R3 (2) queues behind.
    eng = Engine(
        [req("R1", range(12), 1), req("R2", range(100, 108), 1), req("R3", range(200, 202), 1)],
        num_blocks=4,
        block_size=4,
    )
    s = eng.step()
    assert s.running == 1 and s.waiting == 2
    assert any("wait R2" in e for e in s.events)
    s = eng.step()  # R1 finishes after one decode step; R2 and R3 are admitted
    assert s.finished == 1 and s.running == 2


def test_shared_prefix_is_stored_once_with_reference_counts():
    prefix = list(range(8))  # two full blocks of 4
    eng = Engine(
        [req("R1", prefix + [50, 51], 5), req("R2", prefix + [60, 61], 5)],
        num_blocks=10,
        block_size=4,
    )
    s = eng.step()
    shared = [b for b in s.blocks if b.ref_count == 2]
    assert len(shared) == 2 and all(set(b.owners) == {"R1", "R2"} for b in shared)
    assert s.used_blocks == 2 + 1 + 1  # the prefix once, one tail block each
    assert s.prefix_hit_tokens == 8 and s.prefix_query_tokens == 20


def test_whole_prompt_hit_still_computes_the_last_token():
    # vLLM: at most prompt_len - 1 tokens can come from the cache.
    prompt = list(range(8))
    eng = Engine(
        [req("R1", prompt, 1), req("R2", prompt, 1, arrival=3)], num_blocks=10, block_size=4
    )
    for _ in range(3):
        eng.step()
    s = eng.step()
    assert s.prefix_hit_tokens == 4  # one block of the two, not both


def test_hash_chain_depends_on_the_parent():
    # Same second block, different first block: no hit on the second.
    a = list(range(4)) + list(range(10, 14)) + [99]
    b = list(range(20, 24)) + list(range(10, 14)) + [98]
    eng = Engine([req("R1", a, 2), req("R2", b, 2)], num_blocks=10, block_size=4)
    s = eng.step()
    assert s.prefix_hit_tokens == 0


def test_freed_blocks_stay_cached_and_tail_is_evicted_first():
    # Pool of 4 blocks of 4. R1 = an 8-token prefix + 3 tokens, 1 to generate: blocks 0, 1, 2.
    prefix = list(range(8))
    eng = Engine(
        [
            req("R1", prefix + [7, 7, 7], 1),
            req("X", list(range(500, 506)), 1, arrival=3),
            req("R2", prefix + [9], 1, arrival=5),
        ],
        num_blocks=4,
        block_size=4,
    )
    eng.step()
    s = eng.step()  # R1 writes its 12th token (block 2 now full) and finishes
    assert "R1" in eng.done and s.used_blocks == 0
    # Freed tail first, so the eviction queue is: never-used block 3, then 2, 1, 0.
    assert list(eng.pool.free) == [3, 2, 1, 0]
    assert s.cached_free_blocks == 3  # all three full blocks keep their hash
    s = eng.step()  # X arrives (step 3) and takes two blocks: 3, then 2 (R1's tail, evicted)
    assert "evict cached block 2" in s.events
    assert eng.pool.blocks[0].block_hash and eng.pool.blocks[1].block_hash  # the prefix survives
    while "R2" not in eng.done:
        s = eng.step()
    assert eng.hit_tokens == 8  # R2 found R1's whole 8-token prefix after R1 had finished


def test_preemption_frees_the_newest_and_recomputes_it():
    eng, snap, log = simulate(
        [req("R1", range(4), 8), req("R2", range(100, 104), 8)], 100, num_blocks=4, block_size=4
    )
    events = [e for h in log for e in h.events]
    assert any(e.startswith("preempt R2") for e in events)
    assert not any(e.startswith("preempt R1") for e in events)
    assert snap.finished == 2 and snap.preemptions >= 1
    assert eng.done["R1"].generated == 8 and eng.done["R2"].generated == 8


def test_request_larger_than_pool_is_refused():
    with pytest.raises(ValueError, match="more than the whole pool"):
        Engine([req("R1", range(30), 5)], num_blocks=2, block_size=4)


def test_contiguous_allocation_fits_fewer():
    # 48 blocks x 8 tokens = 384 slots; 50-token max length -> 7 contiguous requests.
    assert contiguous_capacity(48, 8, 50) == 7
    eng, snap, log = simulate(
        parse_requests(SCENARIOS["shared-prompt"]["text"]), 50, num_blocks=48, block_size=8
    )
    assert max(h.running for h in log) >= 6


@pytest.mark.parametrize("key", list(SCENARIOS))
def test_scenarios_run_to_completion(key):
    sc = SCENARIOS[key]
    reqs = parse_requests(sc["text"])
    eng, snap, _ = simulate(reqs, 2000, num_blocks=sc["num_blocks"], block_size=sc["block_size"])
    assert eng.finished and snap.finished == len(reqs)
    if key == "shared-prompt":
        assert snap.prefix_hit_rate > 0.5
    if key == "pressure":
        assert snap.preemptions > 0


def test_deterministic():
    sc = SCENARIOS["pressure"]
    runs = [
        simulate(
            parse_requests(sc["text"]), 40, num_blocks=sc["num_blocks"], block_size=sc["block_size"]
        )[1]
        for _ in range(2)
    ]
    assert runs[0] == runs[1]


@pytest.mark.parametrize(
    "text,msg",
    [
        ("", "at least one request"),
        ("10", "prompt output"),
        ("a b", "whole numbers"),
        ("0 5", "1 to 4,096"),
        ("10 5 11", "shared prefix"),
        ("10 5 0 -1", "arrival"),
    ],
)
def test_parse_requests_errors(text, msg):
    with pytest.raises(ValueError, match=msg):
        parse_requests(text)


def _check_invariants(eng: Engine) -> None:
    bs = eng.block_size
    used = [b for b in eng.pool.blocks if b.ref_count > 0]
    assert len(used) + len(eng.pool.free) == eng.pool.num_blocks
    assert all(b.ref_count == 0 for b in (eng.pool.blocks[i] for i in eng.pool.free))
    holders: dict[int, int] = {}
    for run in eng.running:
        assert len(run.blocks) == -(-len(run.tokens) // bs)
        for bid in run.blocks:
            holders[bid] = holders.get(bid, 0) + 1
    for b in eng.pool.blocks:
        assert b.ref_count == holders.get(b.bid, 0)
        if holders.get(b.bid, 0) > 1:
            assert b.block_hash is not None  # only full, hashed prefix blocks are shared
    for h, bid in eng.pool.cached.items():
        assert eng.pool.blocks[bid].block_hash == h


requests_strategy = st.lists(
    st.tuples(st.integers(1, 40), st.integers(1, 20), st.integers(0, 16), st.integers(0, 6)),
    min_size=1,
    max_size=8,
)


@settings(max_examples=120, deadline=None)
@given(requests_strategy, st.sampled_from([1, 2, 4, 8]), st.integers(0, 40), st.booleans())
def test_invariants_hold_at_every_step(specs, bs, extra_blocks, caching):
    text = "\n".join(f"{p} {o} {min(s, p)} {a}" for p, o, s, a in specs)
    reqs = parse_requests(text)
    need = max(-(-(len(r.prompt) + r.output_len) // bs) for r in reqs)
    eng = Engine(reqs, num_blocks=need + extra_blocks, block_size=bs, prefix_caching=caching)
    limit = 20 * sum(len(r.prompt) + r.output_len for r in reqs) + 50
    steps = 0
    while not eng.finished:
        eng.step()
        _check_invariants(eng)
        steps += 1
        assert steps < limit, "the engine stopped making progress"
    assert all(eng.done[r.rid].generated == r.output_len for r in reqs)
    assert eng.snapshot().used_blocks == 0


def test_simulate_matches_step_by_step_snapshots():
    # simulate() draws only the last step; it must equal stepping the engine one by one.
    sc = SCENARIOS["mixed"]
    reqs = parse_requests(sc["text"])
    eng = Engine(reqs, num_blocks=sc["num_blocks"], block_size=sc["block_size"])
    snaps = []
    while len(snaps) < 12 and not eng.finished:
        snaps.append(eng.step())
    _, snap, log = simulate(reqs, 12, num_blocks=sc["num_blocks"], block_size=sc["block_size"])
    assert snap == snaps[-1]
    assert [h.running for h in log[1:]] == [s.running for s in snaps]
    assert [h.events for h in log[1:]] == [s.events for s in snaps]
