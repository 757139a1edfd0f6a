"""A serving simulator: continuous batching with chunked prefill on a paged KV-cache pool, in
vLLM's order, every engine step max(compute time, memory time), metrics as vLLM's benchmark names
them. The modules: ``workload`` (lengths and arrivals), ``pool`` (the pool's size), ``engine``
(one GPU's clock, ``Setup``, ``Speed``), ``scheduler`` (the steps), ``state`` (its bookkeeping),
``metrics`` (``SimResult``). The steps, the models supported, prefix sharing and vLLM V0's
prefill-first scheduler: docs/simulator.md.
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
