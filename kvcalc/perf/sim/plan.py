"""One engine of a ``Deployment`` under an engine's profile: one prompt's time to its first
token on it idle (``lone_prompt``), and, for one workload (issue 43, item 2), aggregated or
disaggregated: the fewest GPUs each layout needs for a TTFT and a TPOT target
(``kvcalc.perf.sim.fleet``), with which layout wins and what one engine fewer misses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ...cache.deployment import Deployment
from ...cache.transfer import transfer
from ..calibration import StepModel
from ..engines import EngineProfile, resolve
from .engine import Setup, Speed, setup
from .fleet import Choice, StepBudget, Targets, fewest_disagg, fewest_replicas
from .scheduler import simulate
from .workload import Workload, fixed


def engine_setup(dep: Deployment, wl: Workload, profile: EngineProfile, tp: int) -> Setup:
    """One engine of ``dep`` at tensor parallel ``tp``, with ``profile``'s step model and its
    batching defaults, sized for ``wl``'s longest request."""
    dep, pool = profile.serve(dep.but(tp=tp))
    e = dep.engine
    return _engine(
        dep, profile.step_model(), e.max_num_seqs, e.max_num_batched_tokens, wl.longest, pool
    )


def _engine(
    dep: Deployment,
    model: StepModel,
    seqs: int | None,
    tokens: int | None,
    longest: int,
    pool: int | None = None,
) -> Setup:
    """One engine of ``dep`` under ``model`` with its batch caps, sized for ``longest`` (its pool
    ``pool`` bytes where the engine sizes its own)."""
    gpu, w = dep.gpu, dep.weights
    if gpu is None or w is None:
        raise ValueError("an engine needs the GPU and the weights of the deployment")
    speed = Speed.of(
        gpu, w.dtype, model, attention_peak_tflops=gpu.attention_tflops(dep.cache.kv_dtype)
    )
    caps = dep.but(max_num_seqs=seqs, max_num_batched_tokens=tokens)
    return setup(caps, longest, speed, kv_pool_bytes=pool)


@dataclass(frozen=True, kw_only=True)
class LonePrompt:
    """One prompt on an idle engine under an engine profile, as the simulator times it."""

    model: str  # the step model's name, "vLLM 0.18.0 profile"
    time_s: float  # the time to its first token: the engine's steps, then the serving stack's
    engine_s: float  # the prefill steps on the engine
    api_s: float  # the serving stack's time (0: called directly)
    steps: int  # prefill steps: the prompt in chunks of at most ``chunk`` tokens
    chunk: int
    tokens: int


def lone_prompt(dep: Deployment, prompt: int, model: StepModel, *, served: bool = True):
    """``prompt`` tokens sent alone to an idle engine of ``dep`` under the engine profile's
    step model ``model``: the simulator's own steps (the prompt in chunks of the engine's token
    budget, each on ``Setup.clock``), so the step-time, prefill and simulate commands and the
    pages give one figure. ``served``: the serving stack's time before the engine sees it.
    ValueError when the deployment cannot hold the prompt."""
    if not model.engine:
        raise ValueError("one prompt on an engine needs an engine profile's step model")
    given = dep.engine
    seqs, tokens, chunk = resolve(model.engine)[0].batching(dep.total_bytes, dep.attention_dp)
    dep = dep.but(long_prefill_token_threshold=given.long_prefill_token_threshold or chunk)
    s = _engine(
        dep,
        model if served else replace(model, api_overhead_s=0.0),
        given.max_num_seqs or seqs,
        given.max_num_batched_tokens or tokens,
        prompt + 1,
    )
    r = simulate(s, Workload(requests=1, prompt=fixed(prompt), output=fixed(1), rate=math.inf))
    return LonePrompt(
        model=model.name,
        time_s=r.ttft_mean_s,
        engine_s=r.ttft_mean_s - s.api_overhead_s,
        api_s=s.api_overhead_s,
        steps=r.steps,
        chunk=s.chunk_tokens or s.max_num_batched_tokens // s.dp,  # one rank's chunk
        tokens=prompt,
    )


@dataclass(frozen=True, kw_only=True)
class Plan:
    targets: Targets
    profile: str  # the engine profile's label, "vLLM 0.18.0"
    aggregated: Choice
    disaggregated: Choice

    @property
    def winner(self) -> str | None:
        """ "aggregated", "disaggregated", "tie" (as many GPUs) or None (neither meets it)."""
        a, d = self.aggregated.best, self.disaggregated.best
        if a is None and d is None:
            return None
        if a is None:
            return "disaggregated"
        if d is None:
            return "aggregated"
        if a.gpus == d.gpus:
            return "tie"
        return "aggregated" if a.gpus < d.gpus else "disaggregated"


def plan(
    dep: Deployment,
    wl: Workload,
    targets: Targets,
    profile: EngineProfile,
    link_gbs: float,
    tps: tuple[int, int, int],
    max_steps: int | None = None,
) -> Plan:
    """The fewest GPUs for ``targets`` aggregated (TP ``tps[0]``) and disaggregated (prefill TP
    ``tps[1]``, decode TP ``tps[2]``), each move as RDMA makes it over ``link_gbs`` a GPU;
    ValueError once the runs pass ``max_steps`` engine steps between them."""
    budget = StepBudget(max_steps) if max_steps else None
    agg_tp, p_tp, d_tp = tps
    memo: dict[int, float] = {}

    def move_s(n: int) -> float:
        if n not in memo:
            t = transfer(
                dep.spec,
                n,
                kv_dtype=dep.cache.kv_dtype,
                prefill_tp=p_tp,
                decode_tp=d_tp,
                link_gbs=link_gbs,
                scales=dep.cache.scales,
            )
            memo[n] = t.estimate_s or 0.0
        return memo[n]

    s_agg, s_pre, s_dec = (engine_setup(dep, wl, profile, tp) for tp in tps)
    return Plan(
        targets=targets,
        profile=profile.label,
        aggregated=fewest_replicas(s_agg, wl, targets, budget=budget),
        disaggregated=fewest_disagg(s_pre, s_dec, wl, targets, move_s, budget=budget),
    )
