"""The scheduler: continuous batching with chunked prefill on a paged pool, one engine step at a
time, in vLLM's order: ``arrive``, ``decode`` (``preempt`` when no block is free),
``prefill_chunks``, ``admit``, ``clock`` (``Setup.step_seconds``, the one clock), ``finish``;
decode-only stretches run lean (``decode_stretch``), alike requests as one ``Group``
(``groups_apply``): one set of rules either way, so the module is longer than the 600 lines.
Without chunked prefill a step follows vLLM V0's default scheduler (``prefill_first_step``;
vllm/core/scheduler.py, ``Scheduler._schedule_default``, vllm-project/vllm@0054e1fa). The rules
and their sources: docs/simulator.md.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Callable, Sequence

from ...core.arith import cdiv
from .engine import Setup
from .metrics import SimResult, Tally, summarize
from .state import Decoding, Group, Pool, chunk_pairs, window_pairs
from .workload import Workload


def simulate(s: Setup, wl: Workload, *, series: bool = True) -> SimResult:
    """Run ``wl`` on ``s`` to the last request; deterministic for a seed. Where requests come
    alike (``groups_apply``) they are simulated in groups, with the same result."""
    return Scheduler(s, wl, series=series, grouped=groups_apply(s, wl)).run()


def groups_apply(s: Setup, wl: Workload) -> bool:
    """Whether a run of ``wl`` on ``s`` may keep alike requests in groups: fixed lengths,
    chunked prefill, one group of full-attention blocks, no shared prefix."""
    shared = int(wl.prefix_share * wl.prompt.lo) // s.block_size if s.prefix_caching else 0
    return (
        s.chunked_prefill
        and wl.prompt.kind == "fixed"
        and wl.output.kind == "fixed"
        and s.full_groups == 1
        and not s.slide_groups
        and not s.window_kind
        and not s.state_blocks
        and shared == 0
    )


def busiest_rank(chunks: list[tuple[int, ...]], dp: int) -> tuple[int, ...]:
    """The prefill work of the busiest of ``dp`` attention data parallel ranks in one step.
    ``chunks``: (tokens, cached tokens read, pairs, sliding reads, sliding pairs, requests) of
    each group's chunk. A request's chunk runs whole on its own rank, and requests go to the
    least loaded rank (vLLM's DP coordinator balances the engines' queues): the largest
    chunks first, each to the rank with the fewest chunk tokens so far. Returns that rank's
    sums of the first five."""
    loads: list[list[int]] = [[0, 0, 0, 0, 0] for _ in range(dp)]
    least = [(0, r) for r in range(dp)]  # (chunk tokens, rank), a heap
    for chunk in sorted(chunks, key=lambda c: -c[0]):
        for _ in range(chunk[5]):  # at most a step's budget over the chunk: a few dozen
            _, r = heapq.heappop(least)
            load = loads[r]
            for i in range(5):
                load[i] += chunk[i]
            heapq.heappush(least, (load[0], r))
    return tuple(loads[max(range(dp), key=lambda r: loads[r][0])])


def estimated_steps(s: Setup, wl: Workload) -> int:
    """About how many engine steps ``simulate(s, wl)`` runs (to refuse a run that would keep a
    server busy for seconds): output tokens over the batch that fits, plus the prefill chunks."""
    longest = wl.prompt.hi + wl.output.hi
    per_request = (
        s.blocks_held(longest, s.skipped(longest)) if s.multi_group else cdiv(longest, s.block_size)
    )
    batch = max(1, min(wl.users or wl.requests, s.max_num_seqs, s.num_blocks // per_request))
    return math.ceil(
        wl.requests * wl.output.mean / batch
        + wl.requests * wl.prompt.mean / s.max_num_batched_tokens
    )


class Scheduler:
    """One run of ``wl`` on ``s``, one engine step at a time (``run``). ``grouped``: alike requests
    kept in groups (``groups_apply`` must hold); else one request a group. ``arrivals``: the
    requests given instead of drawn, (time it reaches the engine, prompt, output) in time order
    (one engine of several, ``kvcalc.perf.sim.fleet``). ``remote_prefill``: a decode engine of a
    disaggregated deployment, whose requests arrive with all but their last prompt token in the
    cache (``admit``). ``live``: room for that many requests, given one at a time while it runs
    (``inject``, ``next_start``, ``advance``: several engines run side by side, one step at a
    time, by ``kvcalc.perf.sim.fleet``'s closed loops)."""

    def __init__(
        self,
        s: Setup,
        wl: Workload,
        *,
        series: bool = True,
        grouped: bool = False,
        arrivals: Sequence[tuple[float, int, int]] | None = None,
        remote_prefill: bool = False,
        live: int = 0,
    ):
        if live:
            if arrivals is not None or grouped or not s.chunked_prefill:
                raise ValueError("internal error: a live engine takes its requests one at a time")
            arrivals = []
        longest = (
            wl.longest if arrivals is None else max((p + o for _, p, o in arrivals), default=0)
        )
        if longest > s.max_model_len:
            raise ValueError(
                f"the workload's longest request ({longest:,} tokens) is longer "
                f"than the setup's max_model_len ({s.max_model_len:,})"
            )
        if arrivals is not None and (
            grouped or any(a[0] > b[0] for a, b in zip(arrivals, arrivals[1:]))
        ):
            raise ValueError("internal error: given arrivals must be in time order, ungrouped")
        if wl.prefix_share and s.multi_group:
            raise ValueError(
                "prefix sharing is simulated for models whose every layer keeps "
                "all tokens; this model has sliding windows or recurrent states"
            )
        if grouped and not groups_apply(s, wl):
            raise ValueError("requests are grouped only where groups_apply holds")
        self.s, self.wl, self.series, self.grouped = s, wl, series, grouped
        self.given, self.remote = arrivals, remote_prefill
        self.rng = random.Random(wl.seed)
        self.bs = s.block_size
        self.nreq = n = wl.requests if arrivals is None else live or len(arrivals)
        # vLLM's KV-cache groups (Setup's): gt token groups take a block every bs tokens, gs of
        # them windows of W tokens; st state blocks a request. Full attention: gt 1, gs = st = 0.
        self.gt = s.full_groups + s.slide_groups
        self.gs, self.st, self.W = s.slide_groups, s.state_blocks, s.window
        self.multi = self.gt > 1 or self.gs > 0 or self.st > 0
        # windowed layers read and attend a window or a chunk, whatever groups hold them
        self.windowed, self.chunked = bool(s.window_kind), s.window_kind == "chunked"
        self.host = bool(s.seq_overhead_s or s.request_overhead_s)
        if not s.chunked_prefill:  # V0 ignores a prompt that can never be allocated
            need = s.blocks_held(longest) if self.multi else cdiv(longest, s.block_size)
            if need > s.num_blocks - s.watermark_blocks:
                raise ValueError(
                    f"the longest request ({longest:,} tokens) needs {need:,} blocks, more "
                    f"than the {s.num_blocks - s.watermark_blocks:,} vLLM V0 admits a prompt "
                    f"into ({s.num_blocks:,} less its watermark of {s.watermark_blocks:,}); "
                    "shorten the requests or give the cache more memory"
                )
        # A request reaches the engine the serving stack's time (s.api_overhead_s) after the
        # client sends it: its arrival is that time; the client's TTFT and E2EL add it back.
        self.api = s.api_overhead_s
        # each request's lengths and times, by id
        self.prompt, self.output = [wl.prompt.lo] * n, [wl.output.lo] * n
        self.arrival, self.first, self.finished_at = [0.0] * n, [-1.0] * n, [-1.0] * n
        self.pending: deque[Group] = deque()  # arrivals not yet due, in time order
        self.waiting: deque[Group] = deque()
        self.running: dict[Group, None] = {}  # admission order
        self.nrun = 0  # running requests
        self.prefilling: list[Group] = []
        self.finish_at: dict[int, list[Group]] = {}
        self.fin_heap: list[int] = []  # steps at which some group may finish (stale skipped)
        self.pool = Pool(s.num_blocks)
        self.dec = Decoding(s)
        self.tally = Tally()
        self.clocks: dict[tuple[int, int, int, int, int], Callable[..., float]] = {}
        self.seq = self.step = self.in_system = self.done = 0
        self.t = 0.0
        self._new_step()
        # without chunked prefill: prefill-only steps, the groups whose first token came since
        # the last decode step (end time, groups), whether one ran since, that step's end
        self.extra_steps = 0
        self.joined: list[tuple[float, list[Group]]] = []
        self.since_decode = False
        self.t_decode = 0.0
        self.sent = self._send_first()

    def _send(self, first: int, k: int, t: float) -> None:
        """Requests ``first`` to ``first + k - 1``, sent to reach the engine at ``t``: one group
        when grouped (joining the last one sent at ``t``), else one each, lengths drawn."""
        wl = self.wl
        if self.grouped:  # (the lengths are filled in at the start)
            p, o = wl.prompt.lo, wl.output.lo
            tail = self.pending[-1] if self.pending else None
            if tail is not None and tail.arrival == t:
                tail.ids += range(first, first + k)
                tail.n += k
            else:
                self.pending.append(Group(list(range(first, first + k)), t, p, o, 0))
            return
        for i in range(first, first + k):
            p = wl.prompt.sample(self.rng)
            o = wl.output.sample(self.rng)
            shared = int(wl.prefix_share * p) // self.bs if self.s.prefix_caching else 0
            self.prompt[i], self.output[i] = p, o
            self.pending.append(Group([i], t, p, o, shared))

    def _send_first(self) -> int:
        """The open loop's every arrival, or the closed loop's first request of each user (or
        the arrivals given, at the times given)."""
        wl, api = self.wl, self.api
        if self.given is not None:
            for i, (t, p, o) in enumerate(self.given):
                shared = int(wl.prefix_share * p) // self.bs if self.s.prefix_caching else 0
                self.prompt[i], self.output[i] = p, o
                self.pending.append(Group([i], t, p, o, shared))
            return self.nreq
        if wl.rate is not None:
            t = 0.0
            for i in range(self.nreq):
                self._send(i, 1, t + api)
                if wl.rate != math.inf:
                    t += self.rng.expovariate(wl.rate)
            return self.nreq
        k = min(wl.users or 0, self.nreq)  # a closed loop (Workload gives a rate or users)
        self._send(0, k, api)
        return k

    def run(self) -> SimResult:
        s, nreq = self.s, self.nreq
        while self.done < nreq:
            if not s.chunked_prefill:
                self.prefill_first_step()
                continue
            self.advance()
        return self.result()

    def advance(self, horizon: float = math.inf) -> list[Group]:
        """One engine step (vLLM V1's), after the decode-only steps that come first; with a
        ``horizon`` (a live engine's: when another engine's next step starts), those decode-only
        steps stop there and the full step is left for later. Returns the groups finished."""
        dec = self.dec
        if dec.n and not self.waiting and not self.prefilling:
            step = self.step
            self.decode_stretch(horizon)
            if self.step > step and self.t >= horizon:
                return []
        self.step = j = self.step + 1
        if self.pending:
            self.arrive()
        self._new_step()
        self.decode(j)
        if self.prefilling:
            self.prefill_chunks(j)
        reason = self.admit() if self.waiting else "kv_pool" if self.preempted else None
        dt = self.clock(j)
        self.account(dt, reason)
        return self.finish(j, self.t + dt, ended=True)
        # requests that arrive inside the step: they wait from their arrival, counted at the
        # next step's start (area += t - arrival)

    def inject(self, i: int, t: float, prompt: int, output: int) -> None:
        """A live engine's request ``i``: reaching it at ``t`` (before or after its clock),
        queued in arrival order."""
        if prompt + output > self.s.max_model_len:
            raise ValueError(
                f"a request of {prompt + output:,} tokens is longer than the setup's "
                f"max_model_len ({self.s.max_model_len:,})"
            )
        shared = int(self.wl.prefix_share * prompt) // self.bs if self.s.prefix_caching else 0
        self.prompt[i], self.output[i] = prompt, output
        g = Group([i], t, prompt, output, shared)
        pending = self.pending
        k = len(pending)
        while k and pending[k - 1].arrival > t:
            k -= 1
        pending.insert(k, g)

    def next_start(self) -> float:
        """When a live engine's next step starts: now while it has requests, else at its next
        arrival (inf: none)."""
        if self.running or self.waiting:
            return self.t
        return max(self.t, self.pending[0].arrival) if self.pending else math.inf

    def result(self) -> SimResult:
        """The run's metrics (``run``'s end: every block must be back)."""
        s = self.s
        pool = self.pool
        if pool.free + pool.chain_len != pool.total or pool.chain_hot:  # every block back
            raise RuntimeError(
                f"internal error: {pool.total - pool.free - pool.chain_len} "
                "blocks not returned at the end of the run"
            )
        self.tally.duration, self.tally.steps = self.t, self.step + self.extra_steps
        return summarize(
            s, self.arrival, self.first, self.finished_at, self.prompt, self.output, self.tally
        )

    def _new_step(self) -> None:
        """This step's: token budget left, whether it preempted, the bucket whose decoding
        requests hold their new block (-1: none yet), the prefill chunks scheduled."""
        self.budget_left = self.s.max_num_batched_tokens
        self.preempted = False
        self.grown: tuple[int, ...] = ()
        self.chunks: list[tuple[Group, int]] = []

    def prefill_first_step(self) -> None:
        """One step of vLLM V0's default scheduler: the prompts it can admit whole, in a step of
        their own (the decode clock does not move), else a decode step."""
        if self.dec.n and not self.waiting and not self.since_decode:
            self.decode_stretch()
            self.t_decode = self.t
        self.arrive()
        self._new_step()
        reason = self.admit() if self.waiting else None
        if self.chunks:
            j = self.step  # the decode clock's last step: what ends here decodes from j + 1
            self.extra_steps += 1
            dt = self.clock(j, decodes=False)
            self.account(dt, reason, decodes=False)
            t_end = self.t + dt
            started = self.finish(j, t_end)
            if started:
                self.joined.append((t_end, started))
            self.since_decode = True
            return
        self.step = j = self.step + 1
        self.decode(j)
        dt = self.clock(j)
        self.account(dt, "kv_pool" if self.preempted else reason)
        self.finish(j, self.t + dt)

    # -- the named steps, in a step's order -------------------------------------------------

    def arrive(self) -> None:
        """1. Arrivals due by now join the waiting queue (an idle engine jumps to the next),
        each adding its wait so far to the time integral, one request at a time."""
        pending, waiting, tally = self.pending, self.waiting, self.tally
        if not self.running and not waiting and pending and pending[0].arrival > self.t:
            self.t = pending[0].arrival
        t, area, arrival = self.t, tally.area_in_system, self.arrival
        while pending and pending[0].arrival <= t:
            g = pending.popleft()
            self.in_system += g.n
            wait = t - g.arrival
            for i in g.ids:  # in the system since it arrived
                arrival[i] = g.arrival
                area += wait
            tail = waiting[-1] if waiting else None
            if self.grouped and tail is not None and tail.gen == 0:  # a new request's state
                tail.ids += g.ids
                tail.n += g.n
            else:
                waiting.append(g)
        tally.area_in_system = area

    def decode(self, j: int) -> None:
        """2. Every decoding request takes one token, a new block (in each token group) at its
        bucket's step, a window's oldest freed first; the newest are preempted for blocks."""
        dec, pool = self.dec, self.pool
        if self.gs and dec.n:
            dec.window_moves(j)
            pool.free += dec.leaving(j)
        if dec.uniform:  # one block size: one bucket takes blocks, in every token group
            b = (-j) % dec.B
            need = self.gt * dec.bcount[b]
            if need and not pool.take(need):
                self._make_room(j, [(b, self.gt)])
            self.grown = (b,)  # its decoding requests hold their new blocks
        else:
            grow = dec.growing(j)
            need = sum(per * dec.bcount[b] for b, per in grow)
            if need and not pool.take(need):
                self._make_room(j, grow)
            self.grown = tuple(b for b, _ in grow)
        self.budget_left -= dec.n

    def _make_room(self, j: int, grow: list[tuple[int, int]]) -> None:
        """The decoding requests of the buckets in ``grow`` (bucket, blocks each takes) take
        their blocks in admission order, the newest running requests preempted for them."""
        dec, pool = self.dec, self.pool
        order = sorted(
            ((g, per) for b, per in grow for g in dec.buckets[b]), key=lambda x: x[0].seq
        )
        for g, per in order:
            i = 0
            while i < g.n:
                k = min(pool.available() // per, g.n - i)
                if k:
                    pool.take(per * k)
                    i += k
                else:
                    self.preempt(j)

    def chunk_cap(self) -> int:
        """The most tokens one request's chunk may take in this step: what is left of the token
        budget, at most ``chunk_tokens`` (vLLM's long_prefill_token_threshold), and with
        attention data parallel ranks (each scheduling its own requests under its own
        max_num_batched_tokens) one rank's budget less its share of the decodes."""
        s = self.s
        cap = self.budget_left
        if s.chunk_tokens and s.chunked_prefill:  # long_prefill_token_threshold
            cap = min(cap, s.chunk_tokens)
        if s.dp == 1 or not s.chunked_prefill:
            return cap
        rank = s.max_num_batched_tokens // s.dp - cdiv(self.dec.n, s.dp)
        return min(cap, max(1, rank))

    def prefill_chunks(self, j: int) -> None:
        """3. Requests in prefill take chunks of what is left of the token budget, preempting
        the newest for blocks; a group whose requests get different chunks is split there."""
        s, pool, bs, gt, uniform = self.s, self.pool, self.bs, self.gt, self.dec.uniform
        for g in list(self.prefilling):
            if self.budget_left <= 0:
                break
            if not g.n:  # preempted
                continue
            if self.gs:  # what left the window with the last chunk goes back first
                freed = s.skipped(g.computed)
                pool.free += self.gs * (freed - g.skip) * g.n
                g.skip = freed
            c0 = g.computed
            rem = g.target - c0
            parts: list[tuple[int, int]] = []  # (requests, chunk), in order
            i = 0
            while i < g.n and self.budget_left > 0:
                n = min(rem, self.chunk_cap())
                if uniform:
                    need = (cdiv(c0 + n, bs) - cdiv(c0, bs)) * gt
                else:
                    need = s.blocks_grown(c0, c0 + n)
                k = min(g.n - i, self.budget_left // rem) if n == rem else 1
                if not pool.take(need * k):  # one at a time, preempting for blocks
                    k = 1
                    while i < g.n and not pool.take(need):
                        self.preempt(j)
                    if i >= g.n:
                        break
                self.budget_left -= n * k
                if parts and parts[-1][1] == n:
                    parts[-1] = (parts[-1][0] + k, n)
                else:
                    parts.append((k, n))
                i += k
            if len(parts) == 1 and parts[0][0] == g.n:
                self.chunks.append((g, parts[0][1]))
            elif parts:
                self._split(g, parts)

    def _split(self, g: Group, parts: list[tuple[int, int]]) -> None:
        """``g``'s requests took ``parts`` (how many, what chunk) in order, the rest none: one
        group per part, in place in the running and prefilling orders."""
        groups = [g]
        for k, _ in parts:  # the last split: the requests that took no chunk, if any
            if groups[-1].n > k:
                groups.append(groups[-1].split(k))
        at = self.prefilling.index(g) + 1
        self.prefilling[at:at] = groups[1:]
        order = list(self.running)
        at = order.index(g) + 1
        order[at:at] = groups[1:]
        self.running = dict.fromkeys(order)
        for x, (_, n) in zip(groups, parts):
            self.chunks.append((x, n))

    def admit(self) -> str | None:
        """4. Waiting requests are admitted (docs/simulator.md#one-engine-step; cached shared-prefix
        blocks counted as theirs), as many of a group at once as every limit allows. Returns what
        stopped the admissions (None: the queue ran empty)."""
        s, pool, bs, waiting, tally = self.s, self.pool, self.bs, self.waiting, self.tally
        reason = None
        while waiting:
            if self.preempted:
                reason = "kv_pool"
                break
            if self.nrun >= s.max_num_seqs:
                reason = "max_num_seqs"
                break
            if self.budget_left <= 0:
                reason = "max_num_batched_tokens"
                break
            g = waiting[0]
            # A decode engine's new request: its prompt's cache came from the prefill engine
            # but for the last token, computed here for its logits (vLLM's rule for a prompt
            # whose every token is cached: KVCacheManager.get_computed_blocks).
            remote = self.remote and g.gen == 0
            hits = 0
            if s.prefix_caching and not remote:
                hits = min(pool.chain_len, g.shared, (g.target - 1) // bs)
            start = g.target - 1 if remote else hits * bs
            n = min(g.target - start, self.chunk_cap())
            if n < g.target - start and not s.chunked_prefill:  # V0 runs a prompt whole
                reason = "max_num_batched_tokens"
                break
            if remote:  # every block of the prompt (a window's within it)
                need = (
                    s.blocks_held(g.target, s.skipped(start)) if self.multi else cdiv(g.target, bs)
                )
            else:
                need = s.blocks_held(start + n) if self.multi else cdiv(start + n, bs) - hits
            free = pool.free + pool.chain_len - max(pool.chain_hot, hits) - s.watermark_blocks
            if need > free:
                reason = "kv_pool"
                tally.kv_waits += 1
                break
            k = 1
            if g.n > 1 and n == g.target - start:  # whole prompts: as many as every limit allows
                k = min(g.n, s.max_num_seqs - self.nrun, self.budget_left // n, free // need)
            if k < g.n:
                g = g.take(k)
            else:
                waiting.popleft()
            if hits:
                pool.share(g, hits)
            pool.take(need * k)
            g.computed = start
            if remote and self.gs:
                g.skip = s.skipped(start)
            g.seq = self.seq + 1
            self.seq += k
            self.nrun += k
            self.running[g] = None
            self.prefilling.append(g)
            self.chunks.append((g, n))
            self.budget_left -= n * k
            tally.hit_tokens += hits * bs * k
            tally.query_tokens += g.target * k
            tally.t_last_admit, tally.run_at_last_admit = self.t, tally.area_run
        return "kv_pool" if self.preempted else reason

    def preempt(self, j: int) -> None:
        """The running request admitted last (the newest group's last) is preempted, to recompute
        its prompt and its output from the head of the queue (vLLM's recompute preemption)."""
        s, bs = self.s, self.bs
        g = next(reversed(self.running))
        vid = g.ids.pop()
        if g.bucket >= 0:  # decoding: its state at the start of step j
            computed = g.dbase + j
            gen = g.gbase + j
            slots = computed + (g.bucket in self.grown)  # with this step's new blocks, if taken
            # every group's blocks, less what left the window this step
            blocks = s.blocks_held(slots, s.skipped(computed)) if self.multi else cdiv(slots, bs)
            self.dec.stop(g, 1)
        else:
            computed, gen = g.computed, g.gen
            blocks = s.blocks_held(computed, g.skip) if self.multi else cdiv(computed, bs)
            if g.n == 1:
                self.prefilling.remove(g)
        g.n -= 1
        self.nrun -= 1
        if not g.n:
            del self.running[g]
        self.pool.release(g, blocks)  # (g.held is one request's; a larger group has none)
        head = self.waiting[0] if self.waiting else None
        if self.grouped and head is not None and head.gen == gen and head.last == g.last:
            head.ids.insert(0, vid)
            head.n += 1
        else:
            victim = Group([vid], g.arrival, g.prompt, g.output, g.shared)
            victim.gen, victim.target, victim.last = gen, g.prompt + gen, g.last
            self.waiting.appendleft(victim)
        self.tally.preemptions += 1
        self.preempted = True

    def clock(self, j: int, decodes: bool = True) -> float:
        """5. The step's time (``Setup.step_seconds``) from its work: the decode tokens read
        their caches (none in a prefill-only step, ``decodes`` False); the prefill chunks'
        tokens enter the cache, each reading and attending to what is before it."""
        dec, W, windowed, chunked = self.dec, self.W, self.windowed, self.chunked
        tokens = read_tokens = pairs = decode_pairs = slide_read = slide_pairs = 0
        n_dec = scheduled = dec.n if decodes else 0
        if n_dec:
            ctx = dec.base_sum + n_dec * (j + 1)  # each its cache and the new token
            tokens += n_dec
            read_tokens += ctx
            decode_pairs += ctx
            if windowed:  # a windowed layer reads and attends at most the window or chunk
                slide_read = dec.window_context(j)
                slide_pairs = slide_read
        new = 0
        dp = self.s.dp
        ranked: list[tuple[int, ...]] = []  # with data parallel ranks: each chunk's work
        for g, n in self.chunks:
            a, e, k = g.computed, g.computed + n, g.n
            new += k if not a else 0
            tokens += n * k
            one = [n, e, e * (e + 1) // 2 - a * (a + 1) // 2, 0, 0]  # tokens, reads, pairs
            if chunked:  # the tokens of the chunks these fall in, up to the last
                one[3:] = (e - a // W * W), chunk_pairs(e, W) - chunk_pairs(a, W)
            elif windowed:
                one[3:] = min(e, e - a + W - 1), window_pairs(a, e, W)
            if dp > 1:
                ranked.append((*one, k))
            else:
                read_tokens += one[1] * k
                pairs += one[2] * k
                slide_read += one[3] * k
                slide_pairs += one[4] * k
            scheduled += k
            g.computed = e
        if tokens == 0:
            raise RuntimeError("internal error: a step with no token to compute")
        dense = tokens
        if ranked:  # the step waits for the busiest rank: its chunks' work, whole
            busy = busiest_rank(ranked, dp)
            dense = n_dec + busy[0] * dp  # Setup's per-token work is a rank's (1 / dp) share
            read_tokens += busy[1] * dp
            pairs += busy[2] * dp
            slide_read += busy[3] * dp
            slide_pairs += busy[4] * dp
        seconds = self._clock(tokens, scheduled if self.st else 0, scheduled, new, dense)
        return seconds(read_tokens, pairs, slide_read, slide_pairs, decode_pairs)

    def _clock(
        self, tokens: int, scheduled: int, seqs: int, new: int = 0, dense: int | None = None
    ) -> Callable[..., float]:
        """``Setup.clock`` for steps of ``tokens`` new tokens (``dense`` of them for the layers
        outside the experts), ``scheduled`` requests reading their states and ``seqs`` requests
        (``new`` starting their prefill), kept per count (up to a few thousand)."""
        if not self.host:  # no host cost per request: the count does not change the clock
            seqs = new = 0
        dense = tokens if dense is None else dense
        key = (tokens, scheduled, seqs, new, dense)
        seconds = self.clocks.get(key)
        if seconds is None:
            seconds = self.s.clock(tokens, scheduled, seqs, new, dense)
            if len(self.clocks) < 4096:
                self.clocks[key] = seconds
        return seconds

    def account(self, dt: float, reason: str | None, decodes: bool = True) -> None:
        """The step's share of the time integrals, the batch it ran, its decode tokens' gap
        (none in a prefill-only step, ``decodes`` False)."""
        tally = self.tally
        used = self.pool.used()
        tally.peak(used)
        tally.area_used += used * dt
        tally.area_in_system += self.in_system * dt
        nrun = self.nrun
        tally.area_run += nrun * dt
        tally.batch(nrun, reason)
        if self.series:
            tally.trace.append((self.t, used, nrun))
        if not self.s.chunked_prefill:
            if decodes:
                self._decode_gaps(self.t + dt)
        elif self.dec.n:
            tally.itl_steps.append((dt, self.dec.n))

    def _decode_gaps(self, t_end: float) -> None:
        """Without chunked prefill, a decode step's token gaps: since the last decode step for
        those that decoded in it, across every prefill-only step between; since its own first
        token for a request whose prefill step came after."""
        itl, new = self.tally.itl_steps, 0
        for t_first, gs in self.joined:
            c = sum(g.n for g in gs if g.bucket >= 0)  # still decoding (not preempted)
            if c:
                itl.append((t_end - t_first, c))
                new += c
        if self.dec.n > new:
            itl.append((t_end - self.t_decode, self.dec.n - new))
        self.joined = []
        self.since_decode = False
        self.t_decode = t_end

    def finish(self, j: int, t_end: float, ended: bool = False) -> list[Group]:
        """6. Tokens come out at the end of the step; a finished request frees its blocks at once
        (and, in a closed loop, its user sends the next). Returns the groups that decode from
        here on, or (``ended``) those that finished."""
        finished = self._finish_decodes(j)
        started = self._end_prefills(j, t_end, finished)
        tally = self.tally
        if finished and tally.t_first_finish < 0:
            tally.t_first_finish, tally.run_at_first_finish = t_end, tally.area_run
        done, finished_at = 0, self.finished_at
        for g in finished:
            for i in g.ids:
                finished_at[i] = t_end
            done += g.n
        self.done += done
        self.in_system -= done
        if self.wl.users is not None and done and self.sent < self.nreq:
            k = min(done, self.nreq - self.sent)
            self._send(self.sent, k, t_end + self.api)
            self.sent += k
        self.t = t_end
        return finished if ended else started

    def _finish_decodes(self, j: int) -> list[Group]:
        """Decoding groups whose last token is this step's, their blocks freed."""
        s, finished = self.s, []
        for g in self.finish_at.pop(j, ()):
            if g.done_step != j:
                continue  # preempted since
            end = g.dbase + j + 1
            blocks = s.blocks_held(end, s.skipped(end - 1)) if self.multi else cdiv(end, self.bs)
            self.dec.stop(g)
            del self.running[g]
            self.nrun -= g.n
            g.gen = g.output
            self.pool.release(g, blocks * g.n)
            finished.append(g)
        return finished

    def _end_prefills(self, j: int, t_end: float, finished: list[Group]) -> list[Group]:
        """This step's chunks: shared-prefix blocks become cached; a completed prefill gives its
        token and decodes from the next step (or finishes). Returns the groups that decode."""
        s, pool, bs = self.s, self.pool, self.bs
        started: list[Group] = []
        for g, _ in self.chunks:
            if g.shared:
                pool.extend(g, bs)
            if g.computed < g.target:
                continue
            self.prefilling.remove(g)
            if g.gen == 0:
                for i in g.ids:
                    self.first[i] = t_end
            else:
                self.tally.itl_extra.extend([t_end - g.last] * g.n)
            g.gen += 1
            g.last = t_end
            if g.gen >= g.output:
                del self.running[g]
                self.nrun -= g.n
                blocks = s.blocks_held(g.computed, g.skip) if self.multi else cdiv(g.computed, bs)
                pool.release(g, blocks * g.n)
                finished.append(g)
                continue
            self.dec.start(g, j, pool)  # decoding from step j + 1
            g.done_step = g.output - 1 - g.gbase
            if g.done_step not in self.finish_at:
                self.finish_at[g.done_step] = []
                heapq.heappush(self.fin_heap, g.done_step)
            self.finish_at[g.done_step].append(g)
            started.append(g)
        return started

    # -- decode-only stretches ---------------------------------------------------------------

    def decode_stretch(self, horizon: float = math.inf) -> None:
        """Decode-only steps up to the next finish or arrival (or those that start before
        ``horizon``), done lean (the step's counts in locals); a step whose new blocks are not
        free is left to the full step."""
        dec, pool, tally = self.dec, self.pool, self.tally
        while self.fin_heap and self.fin_heap[0] not in self.finish_at:
            heapq.heappop(self.fin_heap)
        next_finish = self.fin_heap[0] if self.fin_heap else self.step + 1
        arrival = self.pending[0].arrival if self.pending else math.inf
        arrival = min(arrival, horizon)
        n_dec = nrun = dec.n
        # the one clock, worked out once: every step here has n_dec tokens and as many states
        seconds = self._clock(n_dec, n_dec if self.st else 0, n_dec)
        counted = nrun >= tally.max_batch
        if nrun > tally.max_batch:
            tally.max_batch = nrun
            tally.at_max = {}
        gt, gs, bcount, base_sum = self.gt, self.gs, dec.bcount, dec.base_sum
        B, uniform, windowed = dec.B, dec.uniform, self.windowed
        free, total, cached = pool.free, pool.total, pool.chain_len - pool.chain_hot
        t, step, in_system, series = self.t, self.step, self.in_system, self.series
        trace, itl_steps = tally.trace, tally.itl_steps
        peak_used, area_used = tally.peak_used, tally.area_used
        area_in_system, area_run = tally.area_in_system, tally.area_run
        streak = 0
        while step + 1 < next_finish and arrival > t:
            k = step + 1
            nb = gt * bcount[(-k) % B] if uniform else dec.need(k)
            if gs:
                dec.window_moves(k)
                back = dec.leaving(k)  # blocks that leave the window
                if nb > free + back:
                    break
                free += back
            elif nb > free:
                break  # the full step handles evictions and preemptions
            free -= nb
            ctx = base_sum + n_dec * (k + 1)
            ctx_w = dec.window_context(k) if windowed else 0
            dt = seconds(ctx, 0, ctx_w, ctx_w, ctx)
            used = total - free - cached
            if used > peak_used:
                peak_used = used
            area_used += used * dt
            area_in_system += in_system * dt
            area_run += nrun * dt
            if series:
                trace.append((t, used, nrun))
            itl_steps.append((dt, n_dec))
            t += dt
            step = k
            streak += 1
        pool.free, self.t, self.step = free, t, step
        tally.peak_used, tally.area_used = peak_used, area_used
        tally.area_in_system, tally.area_run = area_in_system, area_run
        if streak:
            tally.peak(pool.used())
            if counted:
                tally.at_max["arrivals"] = tally.at_max.get("arrivals", 0) + streak
