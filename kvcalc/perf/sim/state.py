"""The scheduler's bookkeeping: groups of requests, the pool of blocks and the decoding requests
as counts, so that a step's reads and frees are sums, not loops."""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from .engine import Setup


@dataclass(slots=True, eq=False)  # eq=False: a group is a key by identity
class Group:
    """Requests in one state, ``ids`` in admission order (the newest last): one request, or in a
    grouped run (``groups_apply``) alike requests that moved together; the scheduler's counts are
    a group's times ``n`` (``held``, never in a grouped run, is one request's)."""

    ids: list[int]
    arrival: float
    prompt: int
    output: int
    shared: int  # full blocks of the shared system prompt in this prompt
    n: int = field(init=False)  # len(ids)
    gen: int = 0  # output tokens so far (exact while waiting or in prefill)
    computed: int = 0  # tokens in the cache (exact while in prefill)
    target: int = field(init=False)  # tokens the current prefill must compute (the prompt)
    held: int = 0  # leading blocks that belong to the shared chain
    seq: int = 0  # running: the admission order of its first request
    last: float = -1.0  # the time of its last token
    dbase: int = 0  # decoding: tokens in cache at the start of step j = dbase + j
    gbase: int = 0  # decoding: output tokens before step j = gbase + j
    done_step: int = -1
    bucket: int = -1
    skip: int = 0  # blocks of each sliding group freed (they left the window)
    win: int = 0  # decoding: 0 reads less than the window, 1 a whole window, 2 frees too
    epoch: int = 0  # decode stints started (stale window events are skipped)

    def __post_init__(self) -> None:
        self.n = len(self.ids)
        self.target = self.prompt

    def part(self, ids: list[int]) -> Group:
        """Requests ``ids`` in this group's state, waiting or in prefill."""
        g = Group(ids, self.arrival, self.prompt, self.output, self.shared)
        g.gen, g.computed, g.target, g.last = self.gen, self.computed, self.target, self.last
        g.seq, g.skip = self.seq, self.skip
        return g

    def take(self, k: int) -> Group:
        """The first ``k`` requests, as a group of their own; ``self`` keeps the rest."""
        head = self.part(self.ids[:k])
        del self.ids[:k]
        self.n -= k
        return head

    def split(self, k: int) -> Group:
        """The requests after the first ``k`` (running), as a group of their own."""
        rest = self.part(self.ids[k:])
        rest.seq = self.seq + k
        del self.ids[k:]
        self.n = k
        return rest


class Pool:
    """The usable blocks: ``free`` ones, and the shared prefix's chain of ``chain_len`` cached
    blocks (reference counted), of which the first ``chain_hot`` are held by running requests.
    Cached blocks no one holds are evicted, deepest first, only when nothing else is free."""

    __slots__ = ("total", "free", "chain_ref", "chain_len", "chain_hot")

    def __init__(self, total: int):
        self.total = total
        self.free = total
        self.chain_ref: list[int] = []  # reference count of each shared-prefix block
        self.chain_len = 0  # shared-prefix blocks resident
        self.chain_hot = 0  # of which held by a running request (a prefix of the chain)

    def available(self) -> int:
        return self.free + self.chain_len - self.chain_hot

    def used(self) -> int:
        return self.total - self.free - (self.chain_len - self.chain_hot)

    def take(self, n: int) -> bool:
        """Takes ``n`` blocks, evicting cached shared blocks (deepest first) once none is free;
        False, taking none, when fewer are available."""
        if self.free >= n:
            self.free -= n
            return True
        if n > self.free + self.chain_len - self.chain_hot:
            return False
        self.chain_len -= n - self.free
        self.free = 0
        return True

    def release(self, r: Group, blocks: int) -> None:
        self.free += blocks - r.held
        if r.held:
            for k in range(r.held):
                self.chain_ref[k] -= 1
            while self.chain_hot and self.chain_ref[self.chain_hot - 1] == 0:
                self.chain_hot -= 1
            r.held = 0

    def share(self, r: Group, hits: int) -> None:
        """``r`` is admitted on the first ``hits`` blocks of the chain."""
        for k in range(hits):
            self.chain_ref[k] += 1
        if hits > self.chain_hot:
            self.chain_hot = hits
        r.held = hits

    def extend(self, r: Group, bs: int) -> None:
        """The shared-prefix blocks ``r`` has computed so far become cached for later requests
        (held by ``r``, reference count 1)."""
        if r.shared > self.chain_len and r.held == self.chain_len:
            full = min(r.computed // bs, r.shared)
            if full > self.chain_len:
                self.chain_ref[self.chain_len : full] = [1] * (full - self.chain_len)
                self.chain_len = full
                r.held = full
                self.chain_hot = max(self.chain_hot, full)


class Decoding:
    """The decoding requests, as counts: by bucket (dbase % B, B the larger of the two block
    sizes: a full-attention group's block is needed at step k when (dbase + k) % bs == 0, a
    sliding group's when (dbase + k) % sbs == 0) and, with windows, by where their context is
    (r.win; ``wheap``: when each moves on)."""

    def __init__(self, s: Setup):
        self.s, self.bs, self.gs, self.W = s, s.block_size, s.slide_groups, s.window
        self.sbs = s.slide_block_size if self.gs else self.bs
        self.gf = s.full_groups
        self.B = max(self.bs, self.sbs)  # one divides the other
        self.uniform = self.sbs == self.bs  # one block size: one bucket grows a step
        self.buckets: list[dict[Group, None]] = [{} for _ in range(self.B)]
        self.bcount = [0] * self.B  # decoding requests by bucket
        self.n = 0
        self.base_sum = 0  # sum of dbase over decoding requests
        self.n_below = 0
        self.below_sum = 0
        self.past_cnt = [0] * self.B
        self.wheap: list[tuple[int, int, int, Group]] = []  # (step, order, epoch, group)
        self.worder = 0
        # chunked local attention: decoding requests by where in its chunk dbase falls
        # (dbase % W, a Fenwick tree of the counts) and the sum of those positions
        self.chunked = s.window_kind == "chunked"
        if self.chunked:
            self.cpos = _Counts(self.W)
            self.cpos_sum = 0

    def growing(self, j: int) -> list[tuple[int, int]]:
        """(bucket, blocks each of its requests takes) for the buckets that take blocks at step
        j: a block in each group whose block the new token starts."""
        if self.uniform:
            return [((-j) % self.B, self.gf + self.gs)]
        bs, sbs, gf, gs = self.bs, self.sbs, self.gf, self.gs
        step = min(bs, sbs)
        return [
            (b, gf * ((b + j) % bs == 0) + gs * ((b + j) % sbs == 0))
            for b in range((-j) % step, self.B, step)
        ]

    def need(self, j: int) -> int:
        """Blocks the decoding requests take at step j."""
        bcount = self.bcount
        return sum(per * bcount[b] for b, per in self.growing(j))

    def window_context(self, j: int) -> int:
        """Tokens the decoding requests read at step j (each its cache with the new token) in a
        sliding layer, which reads and attends at most the window, or a chunked one, which
        reads its chunk so far: (dbase + j) % W + 1 each."""
        if self.chunked:
            W, n, jw = self.W, self.n, j % self.W
            # (r + jw) % W is r + jw, less W for the positions r >= W - jw that wrap
            return self.cpos_sum + n * jw - W * self.cpos.at_least(W - jw) + n
        return self.below_sum + self.n_below * (j + 1) + self.W * (self.n - self.n_below)

    def leaving(self, j: int) -> int:
        """Blocks that leave the window at step j (one per sliding group and request; a
        chunked group's whole chunk when the next one starts)."""
        if self.chunked:
            return self.gs * (self.W // self.sbs) * self.cpos.count[(-j) % self.W]
        sbs, past = self.sbs, self.past_cnt
        first = (self.W - 1 - j) % sbs
        if sbs == self.B:
            return self.gs * past[first]
        return self.gs * sum(past[b] for b in range(first, self.B, sbs))

    def stop(self, r: Group, k: int | None = None) -> None:
        """``k`` of ``r``'s requests stop decoding; all of them (None): ``r`` leaves."""
        k = r.n if k is None else k
        self.n -= k
        self.base_sum -= r.dbase * k
        self.bcount[r.bucket] -= k
        if self.chunked:
            at = r.dbase % self.W
            self.cpos.add(at, -k)
            self.cpos_sum -= at * k
        elif self.gs:
            if r.win == 0:
                self.n_below -= k
                self.below_sum -= r.dbase * k
            elif r.win == 2:
                self.past_cnt[r.bucket] -= k
        if k == r.n:
            r.epoch += 1  # its pending window events are stale
            del self.buckets[r.bucket][r]
            r.bucket = -1
            r.done_step = -1

    def start(self, r: Group, j: int, pool: Pool) -> None:
        """``r`` decodes from step j + 1 on, with r.computed tokens in each cache."""
        r.dbase = r.computed - (j + 1)
        r.gbase = r.gen - (j + 1)
        b = r.dbase % self.B  # needs a block at step k when (dbase + k) % bs == 0 (or sbs)
        r.bucket = b
        self.buckets[b][r] = None
        self.bcount[b] += r.n
        self.n += r.n
        self.base_sum += r.dbase * r.n
        if self.chunked:
            at = r.dbase % self.W
            self.cpos.add(at, r.n)
            self.cpos_sum += at * r.n
            if self.gs:  # chunks the prompt finished go back now (vLLM: at the next step)
                freed = self.s.skipped(r.computed - 1)
                pool.free += self.gs * (freed - r.skip) * r.n
                r.skip = freed
        elif self.gs:
            self._enter_window(r, b, pool)

    def _enter_window(self, r: Group, b: int, pool: Pool) -> None:
        # Blocks that left the window while the prompt was computed go back now (vLLM frees
        # them at the next step's start); later ones one at a time, by bucket.
        W = self.W
        c0 = r.computed
        freed = self.s.skipped(c0 - 1)
        pool.free += self.gs * (freed - r.skip) * r.n
        r.skip = freed
        if c0 >= W:
            r.win = 2
            self.past_cnt[b] += r.n
            return
        r.win = 1 if c0 == W - 1 else 0
        if r.win == 0:
            self.n_below += r.n
            self.below_sum += r.dbase * r.n
            self.worder += 1
            heapq.heappush(self.wheap, (W - 1 - r.dbase, self.worder, r.epoch, r))
        self.worder += 1
        heapq.heappush(self.wheap, (W - r.dbase, self.worder, r.epoch, r))

    def window_moves(self, k: int) -> None:
        """Decoding requests whose context reaches the window (W - 1 tokens: it reads a whole
        window) or passes it (W: it frees a block every sbs tokens) at step k."""
        wheap = self.wheap
        while wheap and wheap[0][0] <= k:
            _, _, epoch, r = heapq.heappop(wheap)
            if epoch != r.epoch or r.bucket < 0:
                continue
            if r.win == 0:
                r.win = 1
                self.n_below -= r.n
                self.below_sum -= r.dbase * r.n
            elif r.win == 1:
                r.win = 2
                self.past_cnt[r.bucket] += r.n


class _Counts:
    """Counts by position 0..size-1, with the total at or above a position in log time (a
    Fenwick tree over the reversed positions)."""

    __slots__ = ("size", "count", "_tree")

    def __init__(self, size: int):
        self.size = size
        self.count = [0] * size
        self._tree = [0] * (size + 1)

    def add(self, at: int, k: int) -> None:
        self.count[at] += k
        i = self.size - at  # reversed, 1-based: position size-1 is 1
        while i <= self.size:
            self._tree[i] += k
            i += i & -i

    def at_least(self, lo: int) -> int:
        """The total at positions lo..size-1 (0 for lo >= size)."""
        i, total = self.size - max(lo, 0), 0
        while i > 0:
            total += self._tree[i]
            i -= i & -i
        return total


def chunk_pairs(p: int, c: int) -> int:
    """(query, key) pairs a chunked layer of chunk ``c`` attends over tokens 1..p: each token
    attends those of its own chunk up to itself."""
    full, rest = divmod(p, c)
    return full * (c * (c + 1) // 2) + rest * (rest + 1) // 2


def window_pairs(a: int, e: int, w: int) -> int:
    """(query, key) pairs a sliding layer of window ``w`` attends while tokens a+1..e are
    computed: each token t attends min(t, w)."""
    lo = min(e, w)
    pairs = lo * (lo + 1) // 2 - min(a, w) * (min(a, w) + 1) // 2 if a < w else 0
    return pairs + w * (e - max(a, w)) if e > w else pairs
