"""vLLM V0's default scheduler (``--scheduler prefill-first``) against what can be worked out by
hand.

The policy, from vLLM's own source and docs (not from kvcalc): vllm/core/scheduler.py,
``Scheduler._schedule_default`` (vllm-project/vllm @0054e1fa, the 0.4 series): waiting prompts
are scheduled whole, first come first served, while the token budget, max_num_seqs and the
block manager allow; "Don't schedule decodes if prefills are scheduled"; the 0.4-0.6 docs
(docs/source/models/performance.rst): "By default, vLLM scheduler prioritizes prefills and
doesn't batch prefill and decode to the same batch. This policy optimizes the TTFT (time to the
first token), but incurs slower ITL (inter token latency)". V0's defaults: without chunked
prefill max_num_batched_tokens = max(max_model_len, 2048), and it may not be smaller than
max_model_len (vllm/config.py, SchedulerConfig); the block manager admits a prompt only while
watermark_blocks = int(0.01 x num_gpu_blocks) stay free (block_manager_v1.py).

Hand facts (as in test_sim.py): Llama 3.1 8B has 8,030,261,248 parameters (16,060,522,496 B in
BF16), of which 7,504,924,672 compute (the input embedding, 128,256 x 4,096 x 2 B, is gathered a
row of 8,192 B a token); 131,072 B of cache per token; 32 x 2 x 32 x (128 + 128) attention FLOPs
per attended pair. H100 SXM: 3,350 GB/s, 989.4 dense BF16 TFLOPS, MFU 0.5 (the ideal bound).
A step is max(FLOPs / (peak x MFU), bytes / bandwidth); a decode token at context c reads c
tokens and attends to c keys; a whole prompt of p tokens reads p and attends p(p+1)/2 pairs.
"""

import json
import math

import pytest
from sim_hand import hand_setup, model_and_gpu, step_s

from kvcalc.cli import main
from kvcalc.perf.sim import Scheduler, Workload, fixed, simulate


def prefill_s(p):
    return step_s(p, p, p * (p + 1) // 2)


make = hand_setup


@pytest.fixture(scope="module")
def llama():
    return model_and_gpu()


P, OUT = 512, 64


def two_requests(s, arrival_b):
    """A at t = 0 and B at ``arrival_b``, each a P-token prompt and OUT output tokens."""
    sch = Scheduler(s, Workload(requests=2, prompt=fixed(P), output=fixed(OUT), rate=math.inf))
    sch.pending[1].arrival = arrival_b
    return sch, sch.run()


def test_a_prompt_runs_in_a_step_of_its_own_and_the_decode_waits(llama):
    s = make(llama, Workload(requests=2, prompt=fixed(P), output=fixed(OUT), rate=1.0))
    v0 = make(
        llama,
        Workload(requests=2, prompt=fixed(P), output=fixed(OUT), rate=1.0),
        enable_chunked_prefill=False,
    )
    assert v0.max_num_batched_tokens == 2048  # max(max_model_len 576, 2048)
    # The timeline worked by hand: A's prefill alone, A decoding alone until B has arrived at
    # a step's start, B's prefill alone (A waits), then both decode.
    t = prefill_s(P)
    a_first, a_ctx = t, P
    arrival_b = t + 10.5 * step_s(1, P + 1, P + 1)
    a_last = t
    while t < arrival_b:
        t += step_s(1, a_ctx + 1, a_ctx + 1)
        a_ctx += 1
        a_last = t
    b_first = t + prefill_s(P)
    both = step_s(2, a_ctx + 1 + P + 1, a_ctx + 1 + P + 1)
    sch, r = two_requests(v0, arrival_b)
    assert sch.first[0] == pytest.approx(a_first, rel=1e-12)
    assert sch.first[1] == pytest.approx(b_first, rel=1e-12)
    assert r.ttft_s[1] == pytest.approx(b_first - arrival_b, rel=1e-12)
    # A's token after B's prefill comes a whole prefill step plus a step of two decodes after
    # its last one; B's second token one step of two decodes after its first.
    gaps = sch.tally.itl_steps
    assert (pytest.approx(b_first - a_last + both, rel=1e-12), 1) in gaps
    assert (pytest.approx(both, rel=1e-12), 1) in gaps
    assert max(g for g, _ in gaps) == pytest.approx(prefill_s(P) + both, rel=1e-12)
    # Two prefill steps beside the decode steps: A's OUT - 1 decodes, of which B's OUT - 1
    # overlap but for the ones after A finished.
    a_alone = a_ctx - P
    assert r.steps == 2 + (OUT - 1) + a_alone
    # The chunked-prefill policy puts B's prompt in A's step instead: no gap holds two steps.
    sch_c, _ = two_requests(s, arrival_b)
    assert max(g for g, _ in sch_c.tally.itl_steps) < prefill_s(P) + both
    assert max(g for g, _ in sch_c.tally.itl_steps) == pytest.approx(
        step_s(1 + P, a_ctx + 1 + P, a_ctx + 1 + P * (P + 1) // 2), rel=1e-12
    )


def test_whole_prompts_share_a_prefill_step_up_to_the_token_budget(llama):
    # Three 700-token prompts at once with a 2,048-token budget: V0 takes two whole (1,400
    # tokens) and does not chunk the third into the 648 left; the third runs alone next, and
    # only then does anyone decode.
    p = 700
    wl = Workload(requests=3, prompt=fixed(p), output=fixed(4), rate=math.inf)
    v0 = make(llama, wl, enable_chunked_prefill=False)
    r = simulate(v0, wl)
    two = step_s(2 * p, 2 * p, 2 * (p * (p + 1) // 2))
    assert sorted(r.ttft_s)[:2] == [pytest.approx(two, rel=1e-12)] * 2
    assert max(r.ttft_s) == pytest.approx(two + prefill_s(p), rel=1e-12)
    assert r.steps == 2 + 3  # two prefill steps, then three decode steps of three


def test_v0_token_budget_and_watermark_defaults(llama):
    wl = Workload(requests=1, prompt=fixed(3000), output=fixed(100), rate=1.0)
    v0 = make(llama, wl, enable_chunked_prefill=False)
    assert v0.max_num_batched_tokens == 3100  # max(max_model_len, 2048)
    assert v0.watermark_blocks == int(0.01 * v0.pool_blocks)
    assert make(llama, wl).watermark_blocks == 0  # V1 has no watermark
    with pytest.raises(ValueError, match="is smaller than the longest request"):
        make(llama, wl, enable_chunked_prefill=False, max_num_batched_tokens=2048)


def test_cli_scheduler_flag(capsys):
    base = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--requests", "20"]
    base += ["--rate", "4", "--prompt-tokens", "512", "--output-tokens", "64", "--ideal"]
    assert main(base + ["--scheduler", "prefill-first"]) == 0
    out = capsys.readouterr().out
    assert "scheduler:  prefill-first" in out and "max_num_batched_tokens 2,048" in out
    assert main(base) == 0
    assert "scheduler:" not in capsys.readouterr().out  # the default prints what it did
    assert main(base + ["--scheduler", "prefill-first", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["max_batch"] >= 1
    code = main(base + ["--scheduler", "prefill-first", "--max-num-batched-tokens", "300"])
    assert code == 2 and "is smaller than the longest request" in capsys.readouterr().err
