"""The scheduler of ``kvcalc.perf.sim.scheduler`` with requests kept in groups: the same steps,
the same order and the same sums, for the runs where many requests are alike at once.

With fixed lengths on a model of one group of blocks, requests admitted together stay alike
until one is preempted; a ``Group`` holds them and a step's work is done once per group.
Integers are multiplied by a group's size; float sums are added request by request, so the
results are equal. ``applies`` says when a run may go this way. tests/test_sim_cohort.py
compares both schedulers field by field. The rules: docs/simulator.md#alike-requests-in-groups.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from typing import Callable

from ...core.arith import cdiv
from .engine import Setup
from .metrics import SimResult, Tally, summarize_columns
from .workload import Workload

__all__ = ["applies", "CohortScheduler"]


def applies(s: Setup, wl: Workload) -> bool:
    """Whether a run of ``wl`` on ``s`` may be simulated in groups: fixed lengths, chunked
    prefill, one group of full-attention blocks, no shared prefix."""
    shared = int(wl.prefix_share * wl.prompt.lo) // s.block_size if s.prefix_caching else 0
    return (
        s.chunked_prefill
        and wl.prompt.kind == "fixed"
        and wl.output.kind == "fixed"
        and s.full_groups == 1
        and not s.slide_groups
        and not s.state_blocks
        and shared == 0
    )


class Group:
    """Requests in the same state: ``ids`` in admission order (the newest last)."""

    __slots__ = (
        "ids",
        "n",
        "seq",
        "gen",
        "computed",
        "target",
        "last",
        "dbase",
        "gbase",
        "bucket",
        "done_step",
    )

    def __init__(self, ids: list[int], gen: int, target: int, last: float):
        self.ids = ids
        self.n = len(ids)
        self.seq = 0  # running: the admission order of its first request
        self.gen = gen  # output tokens so far (exact while waiting or in prefill)
        self.computed = 0  # tokens in the cache (exact while in prefill)
        self.target = target  # tokens the current prefill must compute
        self.last = last  # the time of its last token before a preemption
        self.dbase = 0  # decoding: tokens in cache at the start of step j = dbase + j
        self.gbase = 0  # decoding: output tokens before step j = gbase + j
        self.bucket = -1  # decoding: needs a block at step k when (dbase + k) % bs == 0
        self.done_step = -1

    def take(self, k: int) -> Group:
        """The first ``k`` requests, as a group of their own (same state); ``self`` keeps the
        rest (the larger part of a long queue stays where it is)."""
        head = Group(self.ids[:k], self.gen, self.target, self.last)
        head.computed = self.computed
        del self.ids[:k]
        self.n -= k
        return head

    def split(self, k: int) -> Group:
        """The requests after the first ``k``, as a group of their own (same state)."""
        rest = Group(self.ids[k:], self.gen, self.target, self.last)
        rest.computed = self.computed
        rest.seq = self.seq + k
        del self.ids[k:]
        self.n = k
        return rest


class CohortScheduler:
    """One run of ``wl`` on ``s`` in groups (``applies`` must hold): ``Scheduler``'s steps."""

    def __init__(self, s: Setup, wl: Workload, *, series: bool = True):
        if wl.longest > s.max_model_len:
            raise ValueError(
                f"the workload's longest request ({wl.longest:,} tokens) is longer "
                f"than the setup's max_model_len ({s.max_model_len:,})"
            )
        self.s, self.wl, self.series = s, wl, series
        self.bs = s.block_size
        self.nreq = wl.requests
        self.P, self.O = wl.prompt.lo, wl.output.lo
        self.api = s.api_overhead_s
        self.arrival = [0.0] * self.nreq
        self.first = [-1.0] * self.nreq
        self.finished_at = [-1.0] * self.nreq
        # arrivals not yet due, in time order: (arrival, first id, how many), ids consecutive
        self.pending: deque[tuple[float, int, int]] = deque()
        self.waiting: deque[Group] = deque()
        self.running: list[Group] = []  # admission order
        self.prefilling: list[Group] = []
        self.nrun = 0
        self.buckets: list[dict[Group, None]] = [{} for _ in range(self.bs)]
        self.bcount = [0] * self.bs  # decoding requests by bucket
        self.dec_n = 0
        self.base_sum = 0  # sum of dbase over decoding requests
        self.finish_at: dict[int, list[Group]] = {}
        self.fin_heap: list[int] = []
        self.free = s.num_blocks
        self.tally = Tally()
        self.seq = 0
        self.t = 0.0
        self.step = 0
        self.in_system = 0
        self.done = 0
        self.budget_left = 0
        self.preempted = False
        self.grown = -1
        self.chunks: list[tuple[Group, int]] = []
        self.clocks: dict[int, Callable[..., float]] = {}
        self.sent = self._send_first()

    def _pend(self, first: int, k: int, t: float) -> None:
        self.arrival[first : first + k] = [t] * k
        self.pending.append((t, first, k))

    def _send_first(self) -> int:
        """The open loop's every arrival (one group per arrival time), or the closed loop's
        first request of each user (one group)."""
        wl, api, rng = self.wl, self.api, random.Random(self.wl.seed)
        if wl.rate is not None:
            t, start = 0.0, 0
            for i in range(self.nreq):
                if i and t + api != self.arrival[start]:
                    self._pend(start, i - start, self.arrival[start])
                    start = i
                self.arrival[i] = t + api
                if wl.rate != math.inf:
                    t += rng.expovariate(wl.rate)
            self._pend(start, self.nreq - start, self.arrival[start])
            return self.nreq
        n = min(wl.users or 0, self.nreq)
        self._pend(0, n, api)
        return n

    def run(self) -> SimResult:
        s, nreq, budget = self.s, self.nreq, self.s.max_num_batched_tokens
        stretch, arrive, decode = self.decode_stretch, self.arrive, self.decode
        prefill_chunks, admit, clock = self.prefill_chunks, self.admit, self.clock
        account, finish = self.account, self.finish
        while self.done < nreq:
            if self.dec_n and not self.waiting and not self.prefilling:
                stretch()
            self.step = j = self.step + 1
            if self.pending:  # (nothing to arrive otherwise)
                arrive()
            self.budget_left = budget
            self.preempted = False
            self.grown = -1
            self.chunks = []
            decode(j)
            if self.prefilling:
                prefill_chunks(j)
            if self.waiting:
                reason = admit()
            else:  # what admit says of an empty queue
                reason = "kv_pool" if self.preempted else None
            dt = clock(j)
            account(dt, reason)
            finish(j, self.t + dt)
        if self.free != s.num_blocks:  # every block back
            raise RuntimeError(
                f"internal error: {s.num_blocks - self.free} blocks not returned at the end "
                "of the run"
            )
        n = self.nreq
        return summarize_columns(
            s,
            self.arrival,
            self.first,
            self.finished_at,
            [self.P] * n,
            [self.O] * n,
            self.tally,
            duration=self.t,
            steps=self.step,
            api=self.api,
        )

    # -- the named steps, in a step's order (Scheduler's) -----------------------------------

    def arrive(self) -> None:
        """1. Arrivals due by now join the waiting queue (an idle engine jumps to the next);
        each adds its wait so far to the time integral, one request at a time."""
        pending, waiting, tally = self.pending, self.waiting, self.tally
        if not self.nrun and not waiting and pending and pending[0][0] > self.t:
            self.t = pending[0][0]
        t = self.t
        while pending and pending[0][0] <= t:
            arrival, first, k = pending.popleft()
            self.in_system += k
            wait, area = t - arrival, tally.area_in_system
            for _ in range(k):
                area += wait
            tally.area_in_system = area
            tail = waiting[-1] if waiting else None
            if tail is not None and tail.gen == 0:  # a new request's state: join it
                tail.ids += range(first, first + k)
                tail.n += k
            else:
                waiting.append(Group(list(range(first, first + k)), 0, self.P, -1.0))

    def decode(self, j: int) -> None:
        """2. Every decoding request takes one token; those of this step's bucket a new block,
        the newest running requests preempted when the pool runs dry."""
        if self.dec_n:
            b = (-j) % self.bs
            need = self.bcount[b]
            if need:
                if need <= self.free:
                    self.free -= need
                else:
                    self._decode_short(j, b)
        self.grown = (-j) % self.bs
        self.budget_left -= self.dec_n

    def _decode_short(self, j: int, b: int) -> None:
        """The bucket's requests in admission order each take a block, the newest running
        request preempted while none is free (a group's requests are running while their
        index is below its size: the newest go first)."""
        for g in sorted(self.buckets[b], key=lambda x: x.seq):
            i = 0
            while i < g.n:
                if self.free >= 1:
                    k = min(self.free, g.n - i)
                    self.free -= k
                    i += k
                else:
                    self.preempt(j)

    def prefill_chunks(self, j: int) -> None:
        """3. Running requests still in prefill take chunks of their prompt from what is left
        of the token budget, in admission order, preempting the newest for blocks; a group
        whose requests get different chunks is split there."""
        bs = self.bs
        for g in list(self.prefilling):
            if self.budget_left <= 0:
                break
            if not g.n:
                continue
            rem, c0 = g.target - g.computed, g.computed
            parts: list[tuple[int, int]] = []  # (requests, chunk), in order
            i = 0
            while i < g.n and self.budget_left > 0:
                n = min(rem, self.budget_left)
                need = cdiv(c0 + n, bs) - cdiv(c0, bs)
                k = min(g.n - i, self.budget_left // rem) if n == rem else 1
                if need * k > self.free:  # one at a time, preempting for blocks
                    k = 1
                    while need > self.free and i < g.n:
                        self.preempt(j)
                    if i >= g.n:
                        break
                self.free -= need * k
                self.budget_left -= n * k
                if parts and parts[-1][1] == n:
                    parts[-1] = (parts[-1][0] + k, n)
                else:
                    parts.append((k, n))
                i += k
            self._split_chunks(g, parts)

    def _split_chunks(self, g: Group, parts: list[tuple[int, int]]) -> None:
        """``g``'s requests took ``parts`` (how many, what chunk) in order, the rest none: one
        group per part, in place in the running and prefilling orders."""
        if not parts:
            return
        groups = [g]
        for k, _ in parts:  # the last split: the requests that took no chunk, if any
            if groups[-1].n > k:
                groups.append(groups[-1].split(k))
        if len(groups) > 1:
            r = self.running.index(g) + 1
            self.running[r:r] = groups[1:]
            p = self.prefilling.index(g) + 1
            self.prefilling[p:p] = groups[1:]
        for x, (_, n) in zip(groups, parts):
            self.chunks.append((x, n))

    def admit(self) -> str | None:
        """4. Unless this step preempted, waiting requests are admitted first come first served
        while fewer than max_num_seqs run, tokens are left in the budget and the blocks of
        their first chunk are free: as many of a group at once as all of these allow."""
        s, bs, waiting, tally = self.s, self.bs, self.waiting, self.tally
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
            target = g.target
            n = min(target, self.budget_left)
            need = cdiv(n, bs)
            free = self.free - s.watermark_blocks
            if need > free:
                reason = "kv_pool"
                tally.kv_waits += 1
                break
            k = 1
            if n == target:
                k = min(g.n, s.max_num_seqs - self.nrun, self.budget_left // target, free // need)
            if k < g.n:
                g = g.take(k)
            else:
                waiting.popleft()
            self.free -= need * k
            g.seq = self.seq + 1
            self.seq += k
            self.nrun += k
            self.running.append(g)
            self.prefilling.append(g)
            self.chunks.append((g, n))
            self.budget_left -= n * k
            tally.query_tokens += target * k
            tally.t_last_admit, tally.run_at_last_admit = self.t, tally.area_run
        return "kv_pool" if self.preempted else reason

    def preempt(self, j: int) -> None:
        """The running request admitted last is preempted: its blocks are freed and it waits
        again at the head of the queue (with the others of its group preempted before it)."""
        bs = self.bs
        g = self.running[-1]
        vid = g.ids.pop()
        g.n -= 1
        self.nrun -= 1
        if g.bucket >= 0:  # decoding: its state at the start of step j
            computed = g.dbase + j
            gen = g.gbase + j
            blocks = cdiv(computed, bs) + (g.bucket == self.grown)
            self.dec_n -= 1
            self.base_sum -= g.dbase
            self.bcount[g.bucket] -= 1
        else:
            computed, gen = g.computed, g.gen
            blocks = cdiv(computed, bs)
        if not g.n:
            self.running.pop()
            if g.bucket >= 0:
                del self.buckets[g.bucket][g]
                g.bucket = -1
                g.done_step = -1  # its finish is stale
            else:
                self.prefilling.remove(g)
        self.free += blocks
        head = self.waiting[0] if self.waiting else None
        if head is not None and head.gen == gen and head.last == g.last and head.computed == 0:
            head.ids.insert(0, vid)
            head.n += 1
        else:
            self.waiting.appendleft(Group([vid], gen, self.P + gen, g.last))
        self.tally.preemptions += 1
        self.preempted = True

    def clock(self, j: int) -> float:
        """5. The step's time (``Setup.step_seconds``) from its work, a group's chunks counted
        once per request."""
        tokens = read_tokens = pairs = decode_pairs = 0
        n_dec = self.dec_n
        if n_dec:
            ctx = self.base_sum + n_dec * (j + 1)
            tokens += n_dec
            read_tokens += ctx
            decode_pairs += ctx
        for g, n in self.chunks:
            a, e, k = g.computed, g.computed + n, g.n
            tokens += n * k
            read_tokens += e * k
            pairs += (e * (e + 1) // 2 - a * (a + 1) // 2) * k
            g.computed = e
        if tokens == 0:
            raise RuntimeError("internal error: a step with no token to compute")
        return self._clock(tokens)(read_tokens, pairs, 0, 0, decode_pairs)

    def _clock(self, tokens: int) -> Callable[..., float]:
        """``Setup.clock`` for steps of ``tokens`` new tokens, worked out once per count:
        ``step_seconds`` is ``clock(tokens, scheduled)(...)``, and no state is read here."""
        seconds = self.clocks.get(tokens)
        if seconds is None:
            seconds = self.clocks[tokens] = self.s.clock(tokens, 0)
        return seconds

    def account(self, dt: float, reason: str | None) -> None:
        """The step's share of the time integrals, the batch it ran, its decode tokens' gap."""
        tally = self.tally
        used = self.s.num_blocks - self.free
        tally.peak(used)
        tally.area_used += used * dt
        tally.area_in_system += self.in_system * dt
        nrun = self.nrun
        tally.area_run += nrun * dt
        tally.batch(nrun, reason)
        if self.series:
            tally.trace.append((self.t, used, nrun))
        if self.dec_n:
            tally.itl_steps.append((dt, self.dec_n))

    def finish(self, j: int, t_end: float) -> None:
        """6. Tokens come out at the end of the step; finished requests free their blocks and,
        in a closed loop, their users send the next (one group)."""
        finished = self._finish_decodes(j)
        self._end_prefills(j, t_end, finished)
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
            self._pend(self.sent, k, t_end + self.api)
            self.sent += k
        self.t = t_end

    def _finish_decodes(self, j: int) -> list[Group]:
        """Decoding groups whose last token is this step's, their blocks freed."""
        finished: list[Group] = []
        due = self.finish_at.pop(j, None)
        if due is None:
            return finished
        for g in due:
            if g.done_step != j:
                continue  # preempted since
            blocks = cdiv(g.dbase + j + 1, self.bs)
            self._stop(g)
            self.running.remove(g)
            self.nrun -= g.n
            g.gen = self.O
            self.free += blocks * g.n
            finished.append(g)
        return finished

    def _stop(self, g: Group) -> None:
        self.dec_n -= g.n
        self.base_sum -= g.dbase * g.n
        self.bcount[g.bucket] -= g.n
        del self.buckets[g.bucket][g]
        g.bucket = -1
        g.done_step = -1

    def _end_prefills(self, j: int, t_end: float, finished: list[Group]) -> None:
        """This step's chunks: a completed prefill gives its token and decodes from the next
        step (or finishes, with one output token)."""
        bs = self.bs
        for g, _ in self.chunks:
            if g.computed < g.target:
                continue
            self.prefilling.remove(g)
            if g.gen == 0:
                first = self.first
                for i in g.ids:
                    first[i] = t_end
            else:
                self.tally.itl_extra.extend([t_end - g.last] * g.n)
            g.gen += 1
            g.last = t_end
            if g.gen >= self.O:
                self.running.remove(g)
                self.nrun -= g.n
                self.free += cdiv(g.computed, bs) * g.n
                finished.append(g)
                continue
            g.dbase = g.computed - (j + 1)  # decoding from step j + 1
            g.gbase = g.gen - (j + 1)
            b = g.dbase % bs
            g.bucket = b
            self.buckets[b][g] = None
            self.bcount[b] += g.n
            self.dec_n += g.n
            self.base_sum += g.dbase * g.n
            g.done_step = self.O - 1 - g.gbase
            if g.done_step not in self.finish_at:
                self.finish_at[g.done_step] = []
                heapq.heappush(self.fin_heap, g.done_step)
            self.finish_at[g.done_step].append(g)

    def decode_stretch(self) -> None:
        """Decode-only steps up to the next finish or arrival (``Scheduler.decode_stretch``):
        the work of ``decode``, ``clock`` and ``account`` with nothing to admit, schedule or
        free. It stops early when a step's new blocks are not free."""
        s, tally = self.s, self.tally
        while self.fin_heap and self.fin_heap[0] not in self.finish_at:
            heapq.heappop(self.fin_heap)
        next_finish = self.fin_heap[0] if self.fin_heap else self.step + 1
        arrival = self.pending[0][0] if self.pending else math.inf
        n_dec = nrun = self.dec_n
        seconds = self._clock(n_dec)
        counted = nrun >= tally.max_batch
        if nrun > tally.max_batch:
            tally.max_batch = nrun
            tally.at_max = {}
        bs, bcount, base_sum = self.bs, self.bcount, self.base_sum
        free, total = self.free, s.num_blocks
        t, step, in_system, series = self.t, self.step, self.in_system, self.series
        trace, itl_steps = tally.trace, tally.itl_steps
        peak_used, area_used = tally.peak_used, tally.area_used
        area_in_system, area_run = tally.area_in_system, tally.area_run
        streak = 0
        while step + 1 < next_finish and arrival > t:
            k = step + 1
            nb = bcount[(-k) % bs]
            if nb > free:
                break  # the full step handles preemptions
            free -= nb
            ctx = base_sum + n_dec * (k + 1)
            dt = seconds(ctx, 0, 0, 0, ctx)
            used = total - free
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
        self.free, self.t, self.step = free, t, step
        tally.peak_used, tally.area_used = peak_used, area_used
        tally.area_in_system, tally.area_run = area_in_system, area_run
        if streak:
            tally.peak(total - free)
            if counted:
                tally.at_max["arrivals"] = tally.at_max.get("arrivals", 0) + streak
