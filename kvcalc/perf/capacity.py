"""Logged vs running capacity: vLLM's start-up "Maximum concurrency" line (every request at
max_model_len, every window charged window - 1 + the tokens in flight) against what a running
server sustains (requests hold their tokens so far; windows' blocks are freed as they leave).
``running_capacity`` gives both and the onset, the fewest users at which the pool binds
(doubling, then bisecting). Why and how: docs/simulator.md#logged-and-running-capacity.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.arith import first_true
from ..core.units import GiB, check_int
from .sim import Dist, Setup, SimResult, Workload, estimated_steps, fixed, simulate

MAX_CAPACITY_STEPS = 400_000  # engine steps one search may simulate (a few seconds)
# each run's figures in to_dict
_RUN_KEYS = (
    "max_batch steady_batch preemptions kv_wait_steps binding_limit output_tokens_per_s_per_gpu"
).split()


def requests_for(users: int) -> int:
    """Requests simulated for a closed loop of ``users``: about four each (at least 8)."""
    return min(4096, max(8, 4 * users))


def pool_bound(r: SimResult) -> bool:
    """A run is pool-bound once anything was preempted or waited for blocks."""
    return r.preemptions > 0 or r.kv_wait_steps > 0


@dataclass(frozen=True, kw_only=True)
class RunningCapacity:
    prompt: str  # the workload's lengths, described
    output: str
    max_model_len: int
    num_blocks: int  # usable (vLLM's null block left out)
    block_size: int
    block_bytes: int  # one block across the layers of its group
    logged_concurrency: float  # vLLM's start-up line at max_model_len
    logged_blocks_per_request: int
    held_blocks: int  # one request decoding at max_model_len, windows freed as vLLM does
    held_concurrency: float  # the pool's blocks / held_blocks (Budget.held_concurrency)
    pool_blocks: int = 0
    max_num_seqs: int
    onset_users: int | None  # fewest users that make a run pool-bound; None: none up to cap
    last_free_users: int | None  # most users seen whose run is not pool-bound
    sustained_batch: float | None  # the pool-bound run's steady batch at the most users tried
    sustained_users: int | None
    users_cap: int  # the most users the search tried
    top_limit: str = "arrivals"  # what held the batch in the run with the most users
    runs: tuple[tuple[int, SimResult], ...]  # every run, by users
    notes: tuple[str, ...] = ()

    @property
    def held_bytes(self) -> int:
        return self.held_blocks * self.block_bytes

    def result(self, users: int) -> SimResult:
        return dict(self.runs)[users]

    def derivation(self, engine: str = "vLLM") -> str:
        """The three capacities worked out; ``engine``: whose pool (only vLLM logs the first
        line's figure at start-up)."""
        gib = lambda n: f"{n / GiB:,.2f} GiB"  # noqa: E731
        first = "logged (vLLM)" if engine == "vLLM" else f"at full length ({engine})"
        lines = [
            f"{first:<16} = {self.pool_blocks:,} blocks / {self.logged_blocks_per_request:,}"
            f" per request at {self.max_model_len:,} tokens = {self.logged_concurrency:,.2f}",
            f"held decoding    = {self.held_blocks:,} blocks ({gib(self.held_bytes)}) at "
            f"{self.max_model_len:,} tokens -> {self.pool_blocks:,} / {self.held_blocks:,} = "
            f"{self.held_concurrency:,.2f}",
        ]
        if self.onset_users is None:
            lines.append(
                f"simulated        = never pool-bound up to {self.users_cap:,} users "
                f"({self.top_limit} holds the batch)"
            )
        else:
            lines.append(
                f"simulated        = pool-bound from {self.onset_users:,} users "
                f"({self.last_free_users or 0:,} are not); sustained batch "
                f"{self.sustained_batch or 0:,.1f} at {self.sustained_users:,} users"
            )
        return "\n".join(lines)

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "runs"}
        d["runs"] = [{"users": u} | {k: getattr(r, k) for k in _RUN_KEYS} for u, r in self.runs]
        d["notes"] = list(self.notes)
        return d


def running_capacity(
    s: Setup,
    prompt: Dist | int,
    output: Dist | int,
    *,
    users_cap: int | None = None,
    seed: int = 0,
    prefix_share: float = 0.0,
    max_steps: int = MAX_CAPACITY_STEPS,
) -> RunningCapacity:
    """vLLM's logged worst case, one request's blocks at its longest, and the simulator's onset
    and sustained batch for closed loops of users sending ``prompt`` + ``output`` tokens on ``s``
    up to ``users_cap`` (default: twice what memory holds, at most 5,000; ValueError past
    ``max_steps`` engine steps)."""
    p = prompt if isinstance(prompt, Dist) else fixed(prompt, "prompt tokens")
    o = output if isinstance(output, Dist) else fixed(output, "output tokens")
    longest = p.hi + o.hi
    if longest > s.max_model_len:
        raise ValueError(
            f"the longest request ({longest:,} tokens) is longer than the setup's "
            f"max_model_len ({s.max_model_len:,})"
        )
    held = s.blocks_held(s.max_model_len, s.skipped(s.max_model_len - 1))
    held_conc = (s.pool_blocks or s.num_blocks) / held  # as Budget.held_concurrency counts
    # Past max_num_seqs running requests more users only queue; and no more than the pool holds
    # at the shortest a request ever is can run.
    fewest = max(1, s.blocks_held(p.lo, s.skipped(p.lo)))
    cap = users_cap or max(2, min(5000, 2 * (s.num_blocks // fewest + 1), 2 * s.max_num_seqs))
    cap = check_int("users", cap, 1, 5000)
    runs: dict[int, SimResult] = {}
    spent = 0

    def run(u: int) -> SimResult:
        nonlocal spent
        if u not in runs:
            wl = Workload(
                requests=requests_for(u),
                prompt=p,
                output=o,
                users=u,
                prefix_share=prefix_share,
                seed=seed,
            )
            spent += estimated_steps(s, wl)
            if spent > max_steps:
                raise ValueError(
                    f"finding where the pool binds would simulate more than "
                    f"{max_steps:,} engine steps (several seconds); shorten the "
                    "output or the prompt"
                )
            runs[u] = simulate(s, wl, series=False)
        return runs[u]

    lo, hi = 0, None  # lo: most users not pool-bound; hi: fewest pool-bound
    u = 1
    while u <= cap:
        if pool_bound(run(u)):
            hi = u
            break
        lo = u
        u *= 2
    if hi is None and lo < cap:
        if pool_bound(run(cap)):
            hi = cap
        else:
            lo = cap
    sustained = sustained_users = None
    if hi is not None:
        hi = first_true(lambda n: pool_bound(run(n)), lo, hi)
        lo = hi - 1
        top = max(u for u, r in runs.items() if pool_bound(r))
        if top < 2 * hi and 2 * hi <= cap:
            top = 2 * hi  # well past the onset, where the pool holds the batch
            run(top)
        r = runs[top]
        sustained = r.steady_batch if r.steady_batch is not None else r.mean_batch
        sustained_users = top
    notes = []
    if p.kind == "fixed" and o.kind == "fixed":
        notes.append(
            "fixed lengths: every user's requests start together and stay in step, "
            "so they reach their longest at once; log-normal lengths spread them"
        )
    return RunningCapacity(
        prompt=p.describe(),
        output=o.describe(),
        max_model_len=s.max_model_len,
        num_blocks=s.num_blocks,
        block_size=s.block_size,
        block_bytes=s.block_bytes,
        logged_concurrency=s.logged_concurrency,
        logged_blocks_per_request=s.logged_blocks_per_request,
        held_blocks=held,
        held_concurrency=held_conc,
        pool_blocks=s.pool_blocks or s.num_blocks,
        max_num_seqs=s.max_num_seqs,
        onset_users=hi,
        last_free_users=lo or None,
        sustained_batch=sustained,
        sustained_users=sustained_users,
        users_cap=cap,
        top_limit=runs[max(runs)].binding_limit,
        runs=tuple(sorted(runs.items())),
        notes=tuple(notes),
    )


def frontier_users(
    cap: RunningCapacity, base: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
) -> tuple[int, ...]:
    """User counts for a frontier: powers of two up to 4 x the onset (at least 64: past it the
    batch no longer grows), and densely around the onset (the last free run, -20% to +50%)."""
    onset = cap.onset_users
    top = base[-1] if not onset else min(base[-1], max(64, 4 * onset))
    users = {u for u in base if u <= top}
    if onset:
        users.update({onset, cap.last_free_users or onset})
        for f in (0.8, 0.9, 0.95, 1.05, 1.1, 1.25, 1.5):
            users.add(max(1, round(onset * f)))
    return tuple(sorted(users))
