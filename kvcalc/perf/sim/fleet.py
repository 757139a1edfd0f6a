"""Several engines serving one workload (issue 43, item 2): R aggregated replicas, or a
disaggregated deployment of P prefill engines and D decode engines (xPyD) with each request's
cache moved between them; and the fewest GPUs either layout needs for a TTFT and a TPOT target.

The requests are drawn once (``Workload.draw``) and dealt to the engines in turn, so both
layouts serve the same requests; each engine is the one-engine scheduler. Disaggregated, a
request is prefilled as a request of one output token, its cache moves over the prefill
engine's link (one move at a time, after the prefill ends), and a decode engine admits it with
all but its last prompt token cached (``Scheduler(remote_prefill=True)``): TTFT is the decode
engine's first token. A closed loop of users, whose sends wait on finishes, runs the engines
side by side instead (``_closed_loop``). The rules and their sources:
docs/simulator.md#disaggregated-serving.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace

from ...core.units import check_int
from .engine import Setup
from .metrics import percentile_sorted
from .scheduler import Scheduler, estimated_steps
from .workload import Workload

MAX_ENGINES = 64  # engines on one side of a layout


class StepBudget:
    """Engine steps a set of runs may simulate between them (a page's plan): each run spends
    its steps, and ValueError ends the search once they are spent."""

    def __init__(self, steps: int):
        self.steps = self.left = check_int("engine steps", steps, 1, 10**9)

    def spend(self, steps: int) -> None:
        self.left -= steps
        if self.left < 0:
            raise ValueError(
                f"this would simulate more than {self.steps:,} engine steps (seconds of "
                "work): shorten the prompt or the output, or lower the rate"
            )


@dataclass(frozen=True, kw_only=True)
class FleetResult:
    """One layout's run: vLLM's benchmark metrics over every request (seconds), throughput per
    GPU, and for a disaggregated layout the move of each request's cache."""

    layout: str  # "3 replicas of TP 2" or "2P1D"
    gpus: int
    requests: int
    duration_s: float
    ttft_mean_s: float
    ttft_p50_s: float
    ttft_p90_s: float
    ttft_p99_s: float
    tpot_mean_s: float
    tpot_p50_s: float
    tpot_p90_s: float
    tpot_p99_s: float
    e2el_p50_s: float
    output_tokens_per_s: float
    output_tokens_per_s_per_gpu: float
    request_throughput: float
    preemptions: int
    # disaggregated only (0 aggregated): prefill end to the cache at the decode engine, with
    # its wait for the link; the move alone
    handoff_p50_s: float = 0.0
    handoff_p99_s: float = 0.0
    transfer_mean_s: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    def ttft(self, pct: int) -> float:
        return {50: self.ttft_p50_s, 90: self.ttft_p90_s, 99: self.ttft_p99_s}[pct]

    def tpot(self, pct: int) -> float:
        return {50: self.tpot_p50_s, 90: self.tpot_p90_s, 99: self.tpot_p99_s}[pct]


def _deal(n: int, engines: int) -> list[list[int]]:
    """Request indices 0..n-1 dealt to ``engines`` in turn."""
    return [list(range(k, n, engines)) for k in range(engines)]


def _run(
    s: Setup,
    wl: Workload,
    reqs: Sequence[tuple[float, int, int]],
    *,
    remote: bool = False,
    budget: StepBudget | None = None,
) -> Scheduler:
    """One engine's run of ``reqs`` (engine arrival time, prompt, output): its scheduler, run."""
    sub = replace(wl, requests=len(reqs), rate=math.inf, users=None)
    sched = Scheduler(s, sub, series=False, arrivals=reqs, remote_prefill=remote)
    sched.run()
    if budget is not None:
        budget.spend(sched.tally.steps)
    return sched


def _result(
    layout: str,
    gpus: int,
    sends: Sequence[float],
    first: Sequence[float],
    finish: Sequence[float],
    output: Sequence[int],
    preemptions: int,
) -> FleetResult:
    """vLLM's benchmark metrics (kvcalc.perf.sim.metrics) from each request's times."""
    n = len(sends)
    ttft = sorted(f - a for a, f in zip(sends, first))
    tpot = sorted((e - f) / (o - 1) for f, e, o in zip(first, finish, output) if o > 1)
    e2el = sorted(e - a for a, e in zip(sends, finish))
    duration = max(finish) - min(sends)
    out = sum(output)

    def pct(xs: list[float], p: int) -> float:
        return percentile_sorted(xs, p) if xs else 0.0

    return FleetResult(
        layout=layout,
        gpus=gpus,
        requests=n,
        duration_s=duration,
        ttft_mean_s=sum(ttft) / n,
        ttft_p50_s=pct(ttft, 50),
        ttft_p90_s=pct(ttft, 90),
        ttft_p99_s=pct(ttft, 99),
        tpot_mean_s=sum(tpot) / len(tpot) if tpot else 0.0,
        tpot_p50_s=pct(tpot, 50),
        tpot_p90_s=pct(tpot, 90),
        tpot_p99_s=pct(tpot, 99),
        e2el_p50_s=pct(e2el, 50),
        output_tokens_per_s=out / duration,
        output_tokens_per_s_per_gpu=out / duration / gpus,
        request_throughput=n / duration,
        preemptions=preemptions,
    )


def fleet_steps(s: Setup, wl: Workload, engines: int) -> int:
    """About how many engine steps ``engines`` engines of ``s`` run for ``wl`` between them (to
    refuse a run that would keep a server busy for seconds)."""
    per = replace(wl, requests=max(1, math.ceil(wl.requests / engines)))
    return engines * estimated_steps(s, per)


def simulate_replicas(
    s: Setup, wl: Workload, replicas: int, budget: StepBudget | None = None
) -> FleetResult:
    """``wl`` served by ``replicas`` aggregated engines of ``s``, requests dealt in turn."""
    r = check_int("replicas", replicas, 1, MAX_ENGINES)
    layout = f"{r} replica{'s' if r > 1 else ''} of TP {s.tp}"
    if wl.users is not None:
        loop = _closed_loop(wl, s.api_overhead_s, [_live(s, wl) for _ in range(r)], budget=budget)
        return _result(layout, r * s.tp * s.dp, *loop.times())
    reqs = wl.draw()
    n, api = len(reqs), s.api_overhead_s
    first, finish = [0.0] * n, [0.0] * n
    pre = 0
    for ids in _deal(n, r):
        if not ids:
            continue
        sched = _run(
            s, wl, [(reqs[i][0] + api, reqs[i][1], reqs[i][2]) for i in ids], budget=budget
        )
        pre += sched.tally.preemptions
        for j, i in enumerate(ids):
            first[i], finish[i] = sched.first[j], sched.finished_at[j]
    gpus = r * s.tp * s.dp
    return _result(layout, gpus, [t for t, _, _ in reqs], first, finish, [o for *_, o in reqs], pre)


def simulate_disagg(
    prefill: Setup,
    decode: Setup,
    wl: Workload,
    *,
    prefill_engines: int,
    decode_engines: int,
    transfer_seconds: Callable[[int], float],
    budget: StepBudget | None = None,
) -> FleetResult:
    """``wl`` served by ``prefill_engines`` engines of ``prefill`` and ``decode_engines`` of
    ``decode``, each request's cache moved between them in ``transfer_seconds(prompt)``."""
    P = check_int("prefill engines", prefill_engines, 1, MAX_ENGINES)
    D = check_int("decode engines", decode_engines, 1, MAX_ENGINES)
    if wl.prefix_share:
        raise ValueError(
            "prefix sharing is not simulated in a disaggregated deployment: "
            "set the shared prefix to 0"
        )
    if wl.users is not None:
        loop = _closed_loop(
            wl,
            prefill.api_overhead_s,
            [_live(prefill, wl) for _ in range(P)],
            [_live(decode, wl, remote=True) for _ in range(D)],
            transfer_seconds,
            budget,
        )
        gpus = P * prefill.tp * prefill.dp + D * decode.tp * decode.dp
        return _with_moves(_result(f"{P}P{D}D", gpus, *loop.times()), loop.moves)
    reqs = wl.draw()
    n, api = len(reqs), prefill.api_overhead_s
    moved = [0.0] * n  # the cache at its decode engine
    pre, moves = 0, []
    memo: dict[int, float] = {}
    for ids in _deal(n, P):
        if not ids:
            continue
        sched = _run(prefill, wl, [(reqs[i][0] + api, reqs[i][1], 1) for i in ids], budget=budget)
        pre += sched.tally.preemptions
        link = 0.0  # this engine's link, free from
        for j in sorted(range(len(ids)), key=lambda j: sched.finished_at[j]):
            i, end = ids[j], sched.finished_at[j]
            p = reqs[i][1]
            if p not in memo:
                memo[p] = transfer_seconds(p)
            link = max(link, end) + memo[p]
            moved[i] = link
            moves.append((link - end, memo[p]))
    order = sorted(range(n), key=lambda i: (moved[i], i))
    first, finish = [0.0] * n, [0.0] * n
    for ids in _deal(n, D):
        if not ids:
            continue
        picked = [order[k] for k in ids]
        sched = _run(
            decode,
            wl,
            [(moved[i], reqs[i][1], reqs[i][2]) for i in picked],
            remote=True,
            budget=budget,
        )
        pre += sched.tally.preemptions
        for j, i in enumerate(picked):
            first[i], finish[i] = sched.first[j], sched.finished_at[j]
    gpus = P * prefill.tp * prefill.dp + D * decode.tp * decode.dp
    r = _result(
        f"{P}P{D}D", gpus, [t for t, _, _ in reqs], first, finish, [o for *_, o in reqs], pre
    )
    return _with_moves(r, moves)


def _with_moves(r: FleetResult, moves: list[tuple[float, float]]) -> FleetResult:
    """``r`` with its caches' moves: (wait for the link, the move) of each request."""
    handoff = sorted(w for w, _ in moves)
    return replace(
        r,
        handoff_p50_s=percentile_sorted(handoff, 50),
        handoff_p99_s=percentile_sorted(handoff, 99),
        transfer_mean_s=sum(m for _, m in moves) / len(moves),
    )


def _live(s: Setup, wl: Workload, remote: bool = False) -> Scheduler:
    """An engine of ``s`` with room for ``wl``'s requests, given to it one at a time."""
    sub = replace(wl, rate=math.inf, users=None)
    return Scheduler(s, sub, series=False, live=wl.requests, remote_prefill=remote)


@dataclass
class _Loop:
    """A closed loop's run: each request's send, first token, finish and lengths (by the
    order the users sent them), the preemptions, and the caches' moves (disaggregated)."""

    sends: list[float]
    first: list[float]
    finish: list[float]
    output: list[int]
    preemptions: int
    moves: list[tuple[float, float]]

    def times(self) -> tuple:
        return self.sends, self.first, self.finish, self.output, self.preemptions


def _closed_loop(
    wl: Workload,
    api: float,
    first_side: list[Scheduler],
    decode_side: list[Scheduler] | None = None,
    transfer_seconds: Callable[[int], float] | None = None,
    budget: StepBudget | None = None,
) -> _Loop:
    """``wl``'s closed loop (``wl.users`` users, ``wl.requests`` requests between them, lengths
    drawn in the order they are sent) on engines run side by side: the engine whose next step
    starts first takes it (a tie: the first listed), with the others' next start as the horizon
    of its decode-only steps, so a request that one engine hands to another reaches it in time
    order. A request reaches a ``first_side`` engine (in turn) ``api`` after its send; with a
    ``decode_side``, a ``first_side`` engine prefills it (one output token), its cache moves
    over that engine's link (one move at a time, ``transfer_seconds(prompt)``) and a decode
    engine (in turn) gives its tokens. A user sends the next request when the last one ends."""
    users, n = wl.users or 0, wl.requests
    rng = random.Random(wl.seed)
    sends, first, finish = [0.0] * n, [0.0] * n, [0.0] * n
    prompt, output = [0] * n, [0] * n
    engines = first_side + (decode_side or [])
    k_first = len(first_side)
    link = [0.0] * k_first  # each prefill engine's link, free from
    moves: list[tuple[float, float]] = []
    memo: dict[int, float] = {}
    sent = moved = 0

    def send(t: float) -> None:
        nonlocal sent
        i = sent
        prompt[i], output[i] = wl.prompt.sample(rng), wl.output.sample(rng)
        sends[i] = t
        out = 1 if decode_side else output[i]
        first_side[i % k_first].inject(i, t + api, prompt[i], out)
        sent += 1

    for _ in range(min(users, n)):
        send(0.0)
    done = 0
    while done < n:
        starts = [e.next_start() for e in engines]
        k = min(range(len(engines)), key=starts.__getitem__)
        if starts[k] == math.inf:
            raise RuntimeError("internal error: a closed loop with no engine left to run")
        horizon = min((t for j, t in enumerate(starts) if j != k), default=math.inf)
        e = engines[k]
        for g in e.advance(horizon):
            for i in g.ids:
                t_end = e.finished_at[i]
                if decode_side and k < k_first:  # a prefill ends: its cache moves
                    if prompt[i] not in memo:
                        assert transfer_seconds is not None
                        memo[prompt[i]] = transfer_seconds(prompt[i])
                    link[k] = max(link[k], t_end) + memo[prompt[i]]
                    moves.append((link[k] - t_end, memo[prompt[i]]))
                    decode_side[moved % len(decode_side)].inject(i, link[k], prompt[i], output[i])
                    moved += 1
                    continue
                first[i], finish[i] = e.first[i], t_end
                done += 1
                if sent < n:
                    send(t_end)
    pre = 0
    for e in engines:
        pre += e.tally.preemptions
        if budget is not None:
            budget.spend(e.step)
    return _Loop(sends, first, finish, output, pre, moves)


@dataclass(frozen=True, kw_only=True)
class Targets:
    """A latency target: ``pct``-th percentile TTFT and TPOT at most these (seconds)."""

    ttft_s: float
    tpot_s: float
    pct: int = 90

    def __post_init__(self) -> None:
        if self.pct not in (50, 90, 99):
            raise ValueError(f"the target's percentile is 50, 90 or 99, got {self.pct!r}")

    def met(self, r: FleetResult) -> bool:
        return r.ttft(self.pct) <= self.ttft_s and r.tpot(self.pct) <= self.tpot_s

    def missed(self, r: FleetResult) -> str:
        """What ``r`` misses, in words (empty when it meets both)."""
        p = self.pct
        out = []
        if r.ttft(p) > self.ttft_s:
            out.append(f"p{p} TTFT {r.ttft(p) * 1e3:,.0f} ms > {self.ttft_s * 1e3:,.0f} ms")
        if r.tpot(p) > self.tpot_s:
            out.append(f"p{p} TPOT {r.tpot(p) * 1e3:,.1f} ms > {self.tpot_s * 1e3:,.1f} ms")
        return ", ".join(out)


@dataclass(frozen=True, kw_only=True)
class Choice:
    """The fewest engines of one layout that meet the targets (``best``, None when none up to
    the cap does) and the run with one engine fewer on each side, which misses (``short``)."""

    best: FleetResult | None
    short: tuple[FleetResult, ...]


def _fewest(run: Callable[[int], FleetResult], targets: Targets, cap: int) -> tuple[int, dict]:
    """The least k in 1..cap with ``run(k)`` meeting ``targets`` (0: none), by doubling then
    bisection (more engines never make the targets harder to meet here), and the runs made."""
    runs: dict[int, FleetResult] = {}

    def ok(k: int) -> bool:
        if k not in runs:
            runs[k] = run(k)
        return targets.met(runs[k])

    hi = 1
    while not ok(hi):
        if hi >= cap:
            return 0, runs
        hi = min(cap, hi * 2)
    lo = hi // 2  # fails (or 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi, runs


def fewest_replicas(
    s: Setup, wl: Workload, targets: Targets, cap: int = 16, budget: StepBudget | None = None
) -> Choice:
    """The fewest aggregated replicas of ``s`` that serve ``wl`` within ``targets``."""
    k, runs = _fewest(lambda r: simulate_replicas(s, wl, r, budget), targets, cap)
    if not k:
        return Choice(best=None, short=(runs[max(runs)],))
    return Choice(best=runs[k], short=(runs[k - 1],) if k > 1 else ())


def fewest_disagg(
    prefill: Setup,
    decode: Setup,
    wl: Workload,
    targets: Targets,
    transfer_seconds: Callable[[int], float],
    cap: int = 8,
    budget: StepBudget | None = None,
) -> Choice:
    """The xPyD layout with the fewest GPUs (then the fewest prefill engines) that serves ``wl``
    within ``targets``: for each P up to ``cap``, the fewest D."""

    def run(p: int, d: int) -> FleetResult:
        return simulate_disagg(
            prefill, decode, wl, prefill_engines=p, decode_engines=d,
            transfer_seconds=transfer_seconds, budget=budget,
        )  # fmt: skip

    best: FleetResult | None = None
    best_pd = (0, 0)
    last = None
    for p in range(1, cap + 1):
        if best is not None and p * prefill.tp >= best.gpus:
            break
        d, runs = _fewest(functools.partial(run, p), targets, cap)
        last = runs[max(runs)]
        if d and (best is None or runs[d].gpus < best.gpus):
            best, best_pd = runs[d], (p, d)
    if best is None:
        assert last is not None
        return Choice(best=None, short=(last,))
    p, d = best_pd
    short = tuple(run(*pd) for pd in ((p - 1, d), (p, d - 1)) if min(pd) >= 1)
    return Choice(best=best, short=short)
