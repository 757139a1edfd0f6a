"""The scheduler: continuous batching with chunked prefill on a paged pool, one engine step at a
time, in vLLM's order: ``arrive``, ``decode`` (``preempt`` when no block is free),
``prefill_chunks``, ``admit``, ``clock`` (``Setup.step_seconds``, the one clock), ``finish``.

A stretch of decode-only steps before the next finish or arrival runs lean
(``decode_stretch``). Without chunked prefill (``Setup.chunked_prefill`` False) a step follows
vLLM V0's default scheduler instead (``prefill_first_step``; vllm/core/scheduler.py,
``Scheduler._schedule_default``, vllm-project/vllm@0054e1fa). The rules and their sources:
docs/simulator.md#one-engine-step and docs/simulator.md#vllm-v0s-prefill-first-scheduler.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque

from ...core.arith import cdiv
from . import cohort
from .engine import Setup
from .metrics import SimResult, Tally, summarize
from .pool import Decoding, Pool, Request, window_pairs
from .workload import Workload

__all__ = ["Scheduler", "simulate", "estimated_steps"]


def simulate(s: Setup, wl: Workload, *, series: bool = True) -> SimResult:
    """Run ``wl`` on ``s`` to the last request; deterministic for a seed. Where requests come
    alike (``cohort.applies``) they are simulated in groups, with the same result."""
    if cohort.applies(s, wl):
        return cohort.CohortScheduler(s, wl, series=series).run()
    return Scheduler(s, wl, series=series).run()


def estimated_steps(s: Setup, wl: Workload) -> int:
    """About how many engine steps ``simulate(s, wl)`` runs (to refuse a run that would keep a
    server busy for seconds): output tokens over the batch the pool and the caps allow, plus
    the prefill chunks."""
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
    """One run of ``wl`` on ``s``: the queues, the pool, the decoding requests and the tally,
    advanced one engine step at a time by the named steps below (``run``)."""

    def __init__(self, s: Setup, wl: Workload, *, series: bool = True):
        if wl.longest > s.max_model_len:
            raise ValueError(
                f"the workload's longest request ({wl.longest:,} tokens) is longer "
                f"than the setup's max_model_len ({s.max_model_len:,})"
            )
        if wl.prefix_share and s.multi_group:
            raise ValueError(
                "prefix sharing is simulated for models whose every layer keeps "
                "all tokens; this model has sliding windows or recurrent states"
            )
        self.s, self.wl, self.series = s, wl, series
        self.rng = random.Random(wl.seed)
        self.bs = s.block_size
        self.nreq = wl.requests
        # vLLM's KV-cache groups: gt token groups take a block every bs tokens; gs of them are
        # sliding windows of W tokens, which give one back every bs tokens once past the
        # window; every request also holds st state blocks. One group of full attention:
        # gt = 1, gs = st = 0.
        self.gt = s.full_groups + s.slide_groups
        self.gs, self.st, self.W = s.slide_groups, s.state_blocks, s.window
        self.multi = self.gt > 1 or self.gs > 0 or self.st > 0
        if not s.chunked_prefill:  # V0 ignores a prompt that can never be allocated
            need = s.blocks_held(wl.longest) if self.multi else cdiv(wl.longest, s.block_size)
            if need > s.num_blocks - s.watermark_blocks:
                raise ValueError(
                    f"the longest request ({wl.longest:,} tokens) needs {need:,} blocks, more "
                    f"than the {s.num_blocks - s.watermark_blocks:,} vLLM V0 admits a prompt "
                    f"into ({s.num_blocks:,} less its watermark of {s.watermark_blocks:,}); "
                    "shorten the requests or give the cache more memory"
                )
        # A request reaches the engine the serving stack's time after the client sends it
        # (HTTP, tokenizer, template: s.api_overhead_s, 0 for the ideal bound); r.arrival is
        # that engine time, and the client's TTFT and E2EL add the stack's time back.
        self.api = s.api_overhead_s
        self.reqs: list[Request] = []
        self.pending: deque[Request] = deque()  # arrivals not yet due, in time order
        self.waiting: deque[Request] = deque()
        self.running: dict[Request, None] = {}  # admission order
        self.prefilling: list[Request] = []
        self.finish_at: dict[int, list[Request]] = {}
        self.fin_heap: list[int] = []  # steps at which some request may finish (stale skipped)
        self.pool = Pool(s.num_blocks)
        self.dec = Decoding(s)
        self.tally = Tally()
        self.seq_counter = 0
        self.t = 0.0
        self.step = 0
        self.in_system = 0
        self.done = 0
        # this step's: token budget left, whether it preempted, the bucket whose decoding
        # requests hold their new block (-1: none yet), the prefill chunks scheduled
        self.budget_left = 0
        self.preempted = False
        self.grown = -1
        self.chunks: list[tuple[Request, int]] = []
        # without chunked prefill: prefill-only steps, the requests whose first token came at
        # the end of one since the last decode step (end time, requests), whether one ran since,
        # and the end of the last decode step (a decoding request's previous token)
        self.extra_steps = 0
        self.joined: list[tuple[float, list[Request]]] = []
        self.since_decode = False
        self.t_decode = 0.0
        self.sent = self._send_first()

    def _make(self, i: int, t: float) -> Request:
        p = self.wl.prompt.sample(self.rng)
        o = self.wl.output.sample(self.rng)
        shared = int(self.wl.prefix_share * p) // self.bs if self.s.prefix_caching else 0
        r = Request(i, t, p, o, shared)
        self.reqs.append(r)
        return r

    def _send_first(self) -> int:
        """The open loop's every arrival, or the closed loop's first request of each user."""
        wl, api = self.wl, self.api
        if wl.rate is not None:
            t = 0.0
            for i in range(self.nreq):
                self.pending.append(self._make(i, t + api))
                if wl.rate != math.inf:
                    t += self.rng.expovariate(wl.rate)
        elif wl.users is not None:  # a closed loop (Workload gives a rate or users, never both)
            for i in range(min(wl.users, self.nreq)):
                self.pending.append(self._make(i, api))
        return len(self.pending)

    def run(self) -> SimResult:
        s = self.s
        while self.done < self.nreq:
            if not s.chunked_prefill:
                self.prefill_first_step()
                continue
            if self.dec.n and not self.waiting and not self.prefilling:
                self.decode_stretch()
            self.step += 1
            j = self.step
            self.arrive()
            self.budget_left = s.max_num_batched_tokens
            self.preempted = False
            self.grown = -1
            self.chunks = []
            self.decode(j)
            self.prefill_chunks(j)
            reason = self.admit()
            dt = self.clock(j)
            self.account(dt, reason)
            self.finish(j, self.t + dt)
            # requests that arrive inside the step: they wait from their arrival, counted at
            # the next step's start (area += t - arrival)
        pool = self.pool
        if pool.free + pool.chain_len != pool.total or pool.chain_hot:  # every block back
            raise RuntimeError(
                f"internal error: {pool.total - pool.free - pool.chain_len} "
                "blocks not returned at the end of the run"
            )
        steps = self.step + self.extra_steps
        return summarize(s, self.reqs, self.tally, duration=self.t, steps=steps, api=self.api)

    def prefill_first_step(self) -> None:
        """One step of vLLM V0's default scheduler: the waiting prompts it can admit whole run
        as a step of their own (the decode clock does not move), else every decoding request
        takes a token (preempting the newest when the pool runs dry)."""
        s = self.s
        if self.dec.n and not self.waiting and not self.since_decode:
            self.decode_stretch()
            self.t_decode = self.t
        self.arrive()
        self.budget_left = s.max_num_batched_tokens
        self.preempted = False
        self.grown = -1
        self.chunks = []
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
        self.step += 1
        j = self.step
        self.decode(j)
        dt = self.clock(j)
        self.account(dt, "kv_pool" if self.preempted else reason)
        self.finish(j, self.t + dt)

    # -- the named steps, in a step's order -------------------------------------------------

    def arrive(self) -> None:
        """1. Arrivals due by now join the waiting queue (an idle engine jumps to the next)."""
        pending = self.pending
        if not self.running and not self.waiting and pending and pending[0].arrival > self.t:
            self.t = pending[0].arrival
        while pending and pending[0].arrival <= self.t:
            r = pending.popleft()
            self.waiting.append(r)
            self.in_system += 1
            self.tally.area_in_system += self.t - r.arrival  # in the system since it arrived

    def decode(self, j: int) -> None:
        """2. Every decoding request takes one token; those of this step's bucket need a new
        block (one in each token group); past a window, a sliding group's oldest block is freed
        first. When the pool runs dry, the newest running requests are preempted."""
        dec, pool, gt = self.dec, self.pool, self.gt
        if self.gs and dec.n:
            dec.window_moves(j)
            pool.free += dec.leaving(j)
        bucket = dec.buckets[(-j) % self.bs] if dec.n else None
        if bucket:
            need = gt * len(bucket)
            if need <= pool.available():
                pool.take(need)
            else:
                running = self.running
                for r in sorted(bucket, key=lambda q: q.seq):
                    if r not in running:
                        continue
                    while pool.available() < gt:
                        self.preempt(j)
                        if r not in running:
                            break
                    if r in running:
                        pool.take(gt)
        self.grown = (-j) % self.bs  # decoding requests of this bucket hold one more block
        self.budget_left -= dec.n

    def prefill_chunks(self, j: int) -> None:
        """3. Running requests still in prefill take chunks of their prompt from what is left of
        the token budget, in admission order, preempting the newest for blocks."""
        s, pool, running = self.s, self.pool, self.running
        for r in list(self.prefilling):
            if self.budget_left <= 0:
                break
            if r not in running:
                continue
            n = min(r.target - r.computed, self.budget_left)
            need = cdiv(r.computed + n, self.bs) - cdiv(r.computed, self.bs)
            if self.multi:
                need *= self.gt
                if self.gs:  # what left the window with the last chunk goes back first
                    freed = s.skipped(r.computed)
                    pool.free += self.gs * (freed - r.skip)
                    r.skip = freed
            while need > pool.available() and r in running:
                self.preempt(j)
            if r not in running:
                continue
            pool.take(need)
            self.chunks.append((r, n))
            self.budget_left -= n

    def admit(self) -> str | None:
        """4. Unless this step preempted, waiting requests are admitted first come first served
        while fewer than max_num_seqs run, tokens are left in the budget and the blocks of
        their first chunk are free (cached shared-prefix blocks counted as theirs). Returns
        what stopped the admissions (None: the queue ran empty)."""
        s, pool, bs = self.s, self.pool, self.bs
        reason = None
        while self.waiting:
            if self.preempted:
                reason = "kv_pool"
                break
            if len(self.running) >= s.max_num_seqs:
                reason = "max_num_seqs"
                break
            if self.budget_left <= 0:
                reason = "max_num_batched_tokens"
                break
            r = self.waiting[0]
            hits = min(pool.chain_len, r.shared, (r.target - 1) // bs) if s.prefix_caching else 0
            start = hits * bs
            n = min(r.target - start, self.budget_left)
            if n < r.target - start and not s.chunked_prefill:  # V0 runs a prompt whole
                reason = "max_num_batched_tokens"
                break
            need = s.blocks_held(start + n) if self.multi else cdiv(start + n, bs) - hits
            free = pool.free + pool.chain_len - max(pool.chain_hot, hits) - s.watermark_blocks
            if need > free:
                reason = "kv_pool"
                self.tally.kv_waits += 1
                break
            self.waiting.popleft()
            self._admit_one(r, hits, n, need)
        return "kv_pool" if self.preempted else reason

    def _admit_one(self, r: Request, hits: int, n: int, need: int) -> None:
        tally = self.tally
        self.pool.share(r, hits)
        self.pool.take(need)
        r.computed = hits * self.bs
        self.seq_counter += 1
        r.seq = self.seq_counter
        self.running[r] = None
        self.prefilling.append(r)
        self.chunks.append((r, n))
        self.budget_left -= n
        tally.hit_tokens += r.computed
        tally.query_tokens += r.target
        tally.t_last_admit, tally.run_at_last_admit = self.t, tally.area_run

    def preempt(self, j: int) -> None:
        """The running request admitted last is preempted: its blocks are freed and it waits
        again at the head of the queue, to recompute its prompt plus what it had generated
        (vLLM's recompute preemption, newest first)."""
        s, bs = self.s, self.bs
        victim = next(reversed(self.running))
        del self.running[victim]
        blocks = None
        if victim.bucket >= 0:  # decoding: its state at the start of step j
            victim.computed = victim.dbase + j
            victim.gen = victim.gbase + j
            blocks = cdiv(victim.computed, bs) + (victim.bucket == self.grown)
            if self.multi:  # every group's blocks, less what left the window this step
                blocks = self.gt * blocks - self.gs * s.skipped(victim.computed) + self.st
            self.dec.stop(victim)
        else:
            self.prefilling.remove(victim)
            if self.multi:
                blocks = s.blocks_held(victim.computed, victim.skip)
        self.pool.release(victim, cdiv(victim.computed, bs) if blocks is None else blocks)
        victim.skip = 0
        victim.computed = 0
        victim.target = victim.prompt + victim.gen
        self.waiting.appendleft(victim)
        self.tally.preemptions += 1
        self.preempted = True

    def clock(self, j: int, decodes: bool = True) -> float:
        """5. The step's time (``Setup.step_seconds``) from its work: the decode tokens read
        their caches (none in a prefill-only step, ``decodes`` False); the prefill chunks'
        tokens enter the cache, each reading and attending to what is before it."""
        dec, W, gs = self.dec, self.W, self.gs
        tokens = read_tokens = pairs = decode_pairs = slide_read = slide_pairs = 0
        n_dec = dec.n if decodes else 0
        if n_dec:
            ctx = dec.context(j)  # each reads its cache with the new token
            tokens += n_dec
            read_tokens += ctx
            decode_pairs += ctx
            if gs:  # a sliding layer reads and attends at most the window
                slide_read = dec.window_context(j)
                slide_pairs = slide_read
        for r, n in self.chunks:
            a, e = r.computed, r.computed + n
            tokens += n
            read_tokens += e
            pairs += e * (e + 1) // 2 - a * (a + 1) // 2
            if gs:
                slide_read += min(e, e - a + W - 1)
                slide_pairs += window_pairs(a, e, W)
            r.computed = e
        if tokens == 0:
            raise RuntimeError("internal error: a step with no token to compute")
        return self.s.step_seconds(
            tokens,
            read_tokens,
            pairs,
            slide_read,
            slide_pairs,
            n_dec + len(self.chunks) if self.st else 0,
            decode_pairs,
        )

    def account(self, dt: float, reason: str | None, decodes: bool = True) -> None:
        """The step's share of the time integrals, the batch it ran, its decode tokens' gap
        (none in a prefill-only step, ``decodes`` False)."""
        tally = self.tally
        used = self.pool.used()
        tally.peak(used)
        tally.area_used += used * dt
        tally.area_in_system += self.in_system * dt
        nrun = len(self.running)
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
        for t_first, rs in self.joined:
            c = sum(r.bucket >= 0 for r in rs)  # still decoding (not preempted this step)
            if c:
                itl.append((t_end - t_first, c))
                new += c
        if self.dec.n > new:
            itl.append((t_end - self.t_decode, self.dec.n - new))
        self.joined = []
        self.since_decode = False
        self.t_decode = t_end

    def finish(self, j: int, t_end: float) -> list[Request]:
        """6. Tokens come out at the end of the step: one per decoding request, and the first of
        a request whose prefill completed. A finished request frees its blocks at once (and, in
        a closed loop, its user sends the next)."""
        finished = self._finish_decodes(j)
        started = self._end_prefills(j, t_end, finished)
        tally = self.tally
        if finished and tally.t_first_finish < 0:
            tally.t_first_finish, tally.run_at_first_finish = t_end, tally.area_run
        for r in finished:
            r.finish = t_end
            r.last = t_end
            r.skip = 0
            self.done += 1
            self.in_system -= 1
            if self.wl.users is not None and self.sent < self.nreq:
                self.pending.append(self._make(self.sent, t_end + self.api))
                self.sent += 1
        self.t = t_end
        return started

    def _finish_decodes(self, j: int) -> list[Request]:
        """Decoding requests whose last token is this step's, their blocks freed."""
        s, finished = self.s, []
        for r in self.finish_at.pop(j, ()):
            if r.done_step != j:
                continue  # preempted since
            blocks = cdiv(r.dbase + j + 1, self.bs)
            if self.multi:
                blocks = self.gt * blocks - self.gs * s.skipped(r.dbase + j) + self.st
            self.dec.stop(r)
            del self.running[r]
            r.gen = r.output
            self.pool.release(r, blocks)
            finished.append(r)
        return finished

    def _end_prefills(self, j: int, t_end: float, finished: list[Request]) -> list[Request]:
        """This step's chunks: shared-prefix blocks become cached; a completed prefill gives its
        token and decodes from the next step (or finishes, with one output token). Returns the
        requests that start decoding."""
        s, pool = self.s, self.pool
        started: list[Request] = []
        for r, _ in self.chunks:
            pool.extend(r, self.bs)
            if r.computed < r.target:
                continue
            self.prefilling.remove(r)
            if r.gen == 0:
                r.first = t_end
            else:
                self.tally.itl_extra.append(t_end - r.last)
            r.gen += 1
            r.last = t_end
            if r.gen >= r.output:
                del self.running[r]
                pool.release(
                    r,
                    s.blocks_held(r.computed, r.skip) if self.multi else cdiv(r.computed, self.bs),
                )
                r.skip = 0
                finished.append(r)
                continue
            self.dec.start(r, j, pool)  # decoding from step j + 1
            r.done_step = r.output - 1 - r.gbase
            if r.done_step not in self.finish_at:
                self.finish_at[r.done_step] = []
                heapq.heappush(self.fin_heap, r.done_step)
            self.finish_at[r.done_step].append(r)
            started.append(r)
        return started

    # -- decode-only stretches ---------------------------------------------------------------

    def decode_stretch(self) -> None:
        """Decode-only steps up to the next finish or arrival: the work of ``decode``,
        ``clock`` and ``account`` with nothing to admit, schedule or free, done lean (the
        step's counts in locals). It stops early when a step's new blocks are not free, and
        leaves that step, and any eviction or preemption, to the full step."""
        s, dec, pool, tally = self.s, self.dec, self.pool, self.tally
        while self.fin_heap and self.fin_heap[0] not in self.finish_at:
            heapq.heappop(self.fin_heap)
        next_finish = self.fin_heap[0] if self.fin_heap else self.step + 1
        arrival = self.pending[0].arrival if self.pending else math.inf
        n_dec = nrun = dec.n
        # the one clock (Setup.step_seconds), its parts that depend on the batch alone worked
        # out once: every step here has n_dec tokens and as many requests reading their states
        seconds = s.clock(n_dec, n_dec if self.st else 0)
        counted = nrun >= tally.max_batch
        if nrun > tally.max_batch:
            tally.max_batch = nrun
            tally.at_max = {}
        gt, gs, bs, buckets = self.gt, self.gs, self.bs, dec.buckets
        free, total, cached = pool.free, pool.total, pool.chain_len - pool.chain_hot
        t, step, in_system, series = self.t, self.step, self.in_system, self.series
        trace, itl_steps = tally.trace, tally.itl_steps
        peak_used, area_used = tally.peak_used, tally.area_used
        area_in_system, area_run = tally.area_in_system, tally.area_run
        streak = 0
        while step + 1 < next_finish and arrival > t:
            k = step + 1
            nb = gt * len(buckets[(-k) % bs])
            if gs:
                dec.window_moves(k)
                back = dec.leaving(k)  # blocks that leave the window
                if nb > free + back:
                    break
                free += back
            elif nb > free:
                break  # the full step handles evictions and preemptions
            free -= nb
            ctx = dec.context(k)
            ctx_w = dec.window_context(k) if gs else 0
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
