"""A serving simulator: continuous batching with chunked prefill on a paged KV-cache pool.

It joins three parts of kvcalc that each answer one question:

* the pool: ``budget`` (vLLM's arithmetic) gives how many blocks of ``block_size`` tokens the
  GPU holds once the weights and the reserve are in;
* the blocks: requests take whole blocks as they grow, and give them back when they finish or
  are preempted, as in ``kvcalc.engines.paging`` (PagedAttention, vLLM's scheduler);
* the clock: every engine step costs max(compute time, memory time), the same law as
  ``roofline.step_time`` (decode) and ``roofline.prefill`` (time to first token).

One engine step (an iteration of the scheduler), in this order:

1. Requests that arrived by the start of the step join the waiting queue.
2. Every running request that has finished its prefill decodes one token. A request whose last
   block is full takes a new one. When none is free, the running request admitted last is
   preempted: its blocks are freed and it waits again at the head of the queue, to recompute its
   prompt plus what it had generated (vLLM's recompute preemption, newest first).
3. Running requests still in prefill take chunks of their prompt from what is left of
   ``max_num_batched_tokens`` (chunked prefill), in the order they were admitted.
4. If nothing was preempted in this step, waiting requests are admitted first come first served
   while fewer than ``max_num_seqs`` run, tokens are left in the budget and the blocks of their
   first chunk are free.
5. The step's time is max(FLOPs / (peak x MFU), bytes / (bandwidth x achieved share)):

       FLOPs = 2 x active params x tokens in the step + attention FLOPs of its pairs
       bytes = weight bytes read + KV bytes per token x tokens each scheduled request reads

   per GPU (tensor parallel: 1/tp of the weights, heads and FLOPs). A pair costs what its layer
   says (``roofline.attention_flops``): 2 x q_heads x (qk_dim + v_dim) for a prefill chunk's
   pairs, and for a decode token's the same except MLA, whose decode is absorbed
   (2 x q_heads x (2 x kv_lora_rank + qk_rope_head_dim)). A decode token at context c
   reads the c tokens of its cache (its own included) and attends to c of them; a prefill chunk
   from s to e tokens reads e tokens and adds e(e+1)/2 - s(s+1)/2 attended pairs. A decode-only
   step of b requests at context c is exactly ``step_time(context=c, batch=b)`` when memory
   bound; a single prompt's step is ``prefill(...)`` (plus the prompt's own cache read).
6. Tokens come out at the end of the step: one per decoding request, and the first token of a
   request whose prefill completed. A finished request frees its blocks at once.

Decodes go before prefill chunks (vLLM's chunked-prefill policy; vLLM V1 walks its running list
in admission order, which gives the same batches unless a long prefill sits before decodes).
``Setup.chunked_prefill`` False (``--scheduler prefill-first``) is vLLM V0's default scheduler
instead: whole prompts in steps of their own, the decodes waiting (``kvcalc.perf.sim.scheduler``).

Prefix sharing: a fraction ``prefix_share`` of each prompt is one system prompt common to every
request. With prefix caching its full blocks are kept once, reference counted, and reused by
every request that finds them resident (at most prompt - 1 tokens come from the cache, as in
vLLM). Freed shared blocks stay cached until a new block is needed and no other block is free
(vLLM evicts least recently freed first; this model evicts the shared prefix last, a stated
simplification that only matters when the pool is nearly empty).

Metrics follow vLLM's benchmark (benchmarks/benchmark_serving.py): TTFT = first token - arrival;
TPOT = (last token - first token) / (output tokens - 1), per request with more than one output
token; ITL = every gap between two successive tokens of a request; E2EL = last token - arrival;
output tokens/s = all output tokens / (last finish - first arrival); percentiles with linear
interpolation (numpy's default). Tokens/s per user = 1 / median TPOT.

Supported models: full attention, MLA, sliding windows (one window size) and recurrent states,
every layer's pages of one size. vLLM lays such a model's cache out in groups that draw on one
pool of blocks (kvcalc.engines.vllm): a request holds, in every token group, the blocks of its
tokens, less, in a sliding group, those wholly before the window (vLLM's remove_skipped_blocks frees
them: computed - window + 1 tokens, in whole blocks), plus its state blocks from admission on. A
sliding layer reads and attends min(context, window) tokens; a state is read once a step.
Prefix sharing is simulated for single-group models only. Chunked-local (Llama 4), shared-KV and
cross-attention layers are refused by name.

A run is pool-bound (``binding_limit == "kv_pool"``) once anything was preempted or a waiting
request found too few free blocks; otherwise it is labelled by what held its peak batch. The
warm-up is every request sent before the first one finished (a closed loop's users all send at
t = 0); ``ttft_*_steady_s`` leave it out.

The package, one job a module:

* ``workload``: request lengths and arrivals (``Dist``, ``Workload``);
* ``engine``: one GPU's pool and its clock (``Setup``, ``setup``: refusals, the pool, the step
  constants); ``Setup.step_seconds`` is the one step clock;
* ``pool``: what ``setup`` checks and sizes (the inputs, the layers served, the pool);
* ``scheduler``: the engine steps above as named methods of a ``Scheduler`` (``simulate`` runs
  one), over groups of alike requests where every request has the same lengths on a model of
  one group of blocks (the same result, a fraction of the time: tests/test_sim_groups.py
  compares the two);
* ``state``: the scheduler's bookkeeping (a group of requests' state, the blocks and the shared
  prefix's chain, the decoding requests as counts);
* ``metrics``: what a run reports (``SimResult``, ``percentile``).
"""

from __future__ import annotations

from .engine import Setup, Speed, setup
from .metrics import BINDING_LIMITS, CLI_KEYS, SimResult, percentile
from .scheduler import Scheduler, estimated_steps, simulate
from .workload import MAX_REQUESTS, MAX_TOKENS, Dist, Workload, fixed, lognormal, uniform

__all__ = [
    "Dist",
    "fixed",
    "uniform",
    "lognormal",
    "Workload",
    "Setup",
    "Speed",
    "setup",
    "simulate",
    "Scheduler",
    "SimResult",
    "percentile",
    "estimated_steps",
    "MAX_REQUESTS",
    "MAX_TOKENS",
    "BINDING_LIMITS",
    "CLI_KEYS",
]
