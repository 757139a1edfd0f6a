"""A serving simulator: continuous batching with chunked prefill on a paged KV-cache pool.

The pool is vLLM's budget, requests take and free whole blocks, and every engine step costs
max(compute time, memory time), the law of ``roofline.step_time`` and ``roofline.prefill``.
A step, in vLLM's order: arrivals join the queue; decodes take a token each (preempting the
newest request when no block is free); prefills take chunks of the token budget; waiting
requests are admitted; the step is timed; tokens come out. Metrics follow vLLM's
benchmark_serving.py (TTFT, TPOT, ITL, E2EL). The modules: ``workload`` (lengths and
arrivals), ``pool`` (the pool's size), ``engine`` (one GPU's clock, ``Setup``, ``Speed``),
``scheduler`` (the steps, over single requests or groups of alike ones), ``state`` (the
scheduler's bookkeeping), ``metrics`` (``SimResult``).

The steps in full, prefix sharing, the models supported and vLLM V0's prefill-first scheduler:
docs/simulator.md.
"""

from __future__ import annotations

from .engine import Setup, Speed, setup
from .metrics import CLI_KEYS, SimResult, percentile
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
    "CLI_KEYS",
]
