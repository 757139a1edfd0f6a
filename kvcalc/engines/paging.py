"""A small, deterministic model of how a serving engine manages the KV cache in blocks, after
vLLM's design (PagedAttention, the V1 scheduler, automatic prefix caching); each rule, and why
it is deterministic: docs/simulator.md#the-engine-views-block-pool. Its inputs are here too:
requests typed as lines of numbers (``parse_requests``) or a preset scenario of the Engine view.
Token ids are made up: requests with the same shared-prefix length start with the same ids."""

from __future__ import annotations

import hashlib
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TypedDict

from ..core.arith import cdiv
from ..core.units import check_int

# -- the inputs: requests and the preset scenarios ---------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Request:
    rid: str
    prompt: tuple[int, ...]  # token ids
    output_len: int
    arrival: int = 0  # the step at which it arrives
    group: str = ""  # label of the shared prefix, for display


def _tokens(seed: int, n: int) -> tuple[int, ...]:
    return tuple(seed * 1000 + i for i in range(n))


def parse_requests(text: str, *, max_requests: int = 64) -> list[Request]:
    """Requests from lines ``prompt_tokens output_tokens [shared_prefix_tokens [arrival_step]]``;
    those with the same shared-prefix length share that many leading tokens."""
    reqs: list[Request] = []
    for lineno, line in enumerate((text or "").splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.replace(",", " ").split()
        if not 2 <= len(parts) <= 4:
            raise ValueError(
                f"line {lineno}: write 'prompt output [shared_prefix [arrival]]', "
                f"e.g. '40 12 32', got {line[:40]!r}"
            )
        try:
            nums = [int(p) for p in parts]
        except ValueError:
            raise ValueError(f"line {lineno}: only whole numbers, got {line[:40]!r}") from None
        prompt, out, shared, arrival = nums + [0] * (4 - len(nums))
        if not 1 <= prompt <= 4096 or not 1 <= out <= 4096:
            raise ValueError(f"line {lineno}: prompt and output must be 1 to 4,096 tokens")
        if not 0 <= shared <= prompt:
            raise ValueError(f"line {lineno}: the shared prefix must be 0 to the prompt length")
        if not 0 <= arrival <= 10_000:
            raise ValueError(f"line {lineno}: the arrival step must be 0 to 10,000")
        i = len(reqs)
        prefix = _tokens(7, shared)  # every request with a shared prefix starts the same way
        reqs.append(
            Request(
                rid=f"R{i + 1}",
                prompt=prefix + _tokens(100 + i, prompt - shared),
                output_len=out,
                arrival=arrival,
                group=f"shared {shared}" if shared else "",
            )
        )
        if len(reqs) > max_requests:
            raise ValueError(f"at most {max_requests} requests")
    if not reqs:
        raise ValueError("give at least one request: 'prompt output [shared_prefix [arrival]]'")
    return reqs


class Scenario(TypedDict):
    """A preset of the Engine view: its title, its request lines and its pool."""

    title: str
    text: str  # lines for parse_requests
    num_blocks: int
    block_size: int


SCENARIOS: dict[str, Scenario] = {
    "shared-prompt": {
        "title": "Many users, one system prompt",
        "text": "# 6 users; each prompt starts with the same 32-token system prompt\n"
        + "\n".join(f"{40 + 2 * i} 10 32 {i}" for i in range(6)),
        "num_blocks": 48,
        "block_size": 8,
    },
    "mixed": {
        "title": "Long and short requests mixed",
        "text": "# two long documents and a stream of short questions\n"
        "120 16 0 0\n12 6 0 0\n10 8 0 1\n100 12 0 2\n14 6 0 2\n9 10 0 3\n16 6 0 4\n"
        "11 7 0 5",
        "num_blocks": 64,
        "block_size": 8,
    },
    "pressure": {
        "title": "Memory pressure: preemption",
        "text": "# long outputs in a small pool: the newest request is preempted\n"
        "24 40\n24 40\n24 40\n24 40",
        "num_blocks": 20,
        "block_size": 8,
    },
}


# -- the engine ---------------------------------------------------------------------------------


@dataclass
class Block:
    bid: int
    ref_count: int = 0
    block_hash: str | None = None  # set once the block is full (prefix caching)
    tokens: int = 0  # slots used by the request that wrote it
    owners: list[str] = field(default_factory=list)


@dataclass(eq=False)  # identity: comparing token lists made every `in` and remove() O(length)
class _Running:
    req: Request
    tokens: list[int]  # prompt (+ generated so far, after a preemption) + generated
    generated: int
    blocks: list[int]
    admitted_at: int
    sealed: int = 0  # leading full blocks already named by their hash


@dataclass(frozen=True, kw_only=True)
class BlockView:
    """One physical block as a page shows it."""

    bid: int
    ref_count: int
    owners: tuple[str, ...]
    hash: str | None  # the chained hash once full (prefix caching)
    tokens: int  # slots in use (0 when free)
    state: str  # "used", "cached" (free, hash kept) or "free"


@dataclass(frozen=True)
class TableView:
    """One request's block table and where it stands."""

    rid: str
    state: str
    tokens: int
    generated: int
    blocks: tuple[int, ...]  # its block table: logical block i is physical block blocks[i]


@dataclass(frozen=True, kw_only=True)
class Snapshot:
    """Everything a page shows after a step."""

    step: int
    blocks: tuple[BlockView, ...]
    tables: tuple[TableView, ...]
    events: tuple[str, ...]  # this step's events
    used_blocks: int
    free_blocks: int
    cached_free_blocks: int
    fragmentation_slots: int  # allocated but empty token slots of running requests
    prefix_hit_tokens: int
    prefix_query_tokens: int
    preemptions: int
    finished: int
    waiting: int
    running: int

    @property
    def prefix_hit_rate(self) -> float:
        return (
            self.prefix_hit_tokens / self.prefix_query_tokens if self.prefix_query_tokens else 0.0
        )


def _hash(parent: str | None, tokens: tuple[int, ...]) -> str:
    text = (parent or "root") + ",".join(map(str, tokens))  # the parent's hash, then the tokens
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class BlockPool:
    """The physical blocks: take and release them, name full ones by their chained hash, and
    find the cached blocks that hold a prompt's prefix (vLLM's KV-cache manager)."""

    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool = True):
        self.num_blocks = check_int("number of blocks", num_blocks, 1, 100_000)
        self.block_size = check_int("block size", block_size, 1, 4096)
        self.prefix_caching = bool(prefix_caching)
        self.blocks = [Block(bid=i) for i in range(self.num_blocks)]
        # Free blocks in eviction order: the head is taken (and its cached hash evicted) first.
        self.free: OrderedDict[int, None] = OrderedDict((i, None) for i in range(self.num_blocks))
        self.cached: dict[str, int] = {}  # block hash -> block id
        self._chains: dict[str, tuple[int, list[str]]] = {}  # rid -> (tokens hashed, hashes)
        self.events: list[str] = []  # the scheduler hands in each step's list

    def take_many(self, n: int) -> list[int]:
        """``n`` free blocks, for a caller that has counted them free (admission)."""
        if n > len(self.free):
            raise RuntimeError(f"{n} blocks asked for with {len(self.free)} free")
        return [self.take() for _ in range(n)]

    def take(self) -> int:
        """A free block (evicting its cached hash, least recently freed first)."""
        bid, _ = self.free.popitem(last=False)
        b = self.blocks[bid]
        if b.block_hash is not None:
            if self.cached.get(b.block_hash) == bid:
                del self.cached[b.block_hash]
            self.events.append(f"evict cached block {bid}")
            b.block_hash = None
        b.tokens = 0
        b.owners = []
        b.ref_count = 1
        return bid

    def share(self, bid: int, rid: str) -> None:
        """One more request reads a cached block (it leaves the free queue if it was there)."""
        b = self.blocks[bid]
        if bid in self.free:
            del self.free[bid]
        b.ref_count += 1
        b.owners.append(rid)

    def release(self, run: _Running) -> None:
        for bid in reversed(run.blocks):  # tail first: the prefix is evicted last
            b = self.blocks[bid]
            b.ref_count -= 1
            if run.req.rid in b.owners:
                b.owners.remove(run.req.rid)
            if b.ref_count == 0:
                if b.block_hash is None or not self.prefix_caching:
                    b.block_hash = None
                    b.tokens = 0
                self.free[bid] = None  # appended: evicted after the blocks freed before it
        run.blocks = []

    def seal(self, run: _Running) -> None:
        """Name every full block of ``run`` by its chained hash (prefix caching)."""
        if not self.prefix_caching:
            return
        bs = self.block_size
        # Blocks before run.sealed are named already: start from the last of them.
        parent = self.blocks[run.blocks[run.sealed - 1]].block_hash if run.sealed else None
        for i in range(run.sealed, min(len(run.blocks), len(run.tokens) // bs)):
            b = self.blocks[run.blocks[i]]
            if b.block_hash is None:
                b.block_hash = _hash(parent, tuple(run.tokens[i * bs : (i + 1) * bs]))
                self.cached.setdefault(b.block_hash, run.blocks[i])
            parent = b.block_hash
            run.sealed = i + 1

    def prefix_hits(self, tokens: list[int], rid: str) -> list[int]:
        """Cached blocks that hold the longest prefix of ``tokens`` (at most len - 1 tokens)."""
        if not self.prefix_caching:
            return []
        hits = []
        for h in self._chain(rid, tokens):
            bid = self.cached.get(h)
            if bid is None:
                break
            hits.append(bid)
        return hits

    def forget(self, rid: str) -> None:
        self._chains.pop(rid, None)

    def _chain(self, rid: str, tokens: list[int]) -> list[str]:
        """The chained hashes of ``tokens``' full blocks (all but the last token), computed once
        per waiting request: a request that waits is asked again every step."""
        known = self._chains.get(rid)
        if known is not None and known[0] == len(tokens):
            return known[1]
        hashes, parent, bs = [], None, self.block_size
        for i in range((len(tokens) - 1) // bs):
            parent = _hash(parent, tuple(tokens[i * bs : (i + 1) * bs]))
            hashes.append(parent)
        self._chains[rid] = (len(tokens), hashes)
        return hashes

    def fill(self, run: _Running, tail_only: bool = False) -> None:
        """Token counts and owners of ``run``'s blocks; after one decoded token only the last
        block can have changed (``tail_only``), which keeps a step's cost flat in length."""
        bs = self.block_size
        start = len(run.blocks) - 1 if tail_only and run.blocks else 0
        for i in range(start, len(run.blocks)):
            b = self.blocks[run.blocks[i]]
            b.tokens = min(bs, max(0, len(run.tokens) - i * bs))
            if run.req.rid not in b.owners:
                b.owners.append(run.req.rid)

    def views(self) -> tuple[BlockView, ...]:
        return tuple(
            BlockView(
                bid=b.bid,
                ref_count=b.ref_count,
                owners=tuple(b.owners),
                hash=b.block_hash,
                tokens=b.tokens if b.ref_count else 0,
                state="used" if b.ref_count > 0 else "free" if b.block_hash is None else "cached",
            )
            for b in self.blocks
        )


class Engine:
    """The scheduler (vLLM's): admit waiting requests, decode running ones, preempt the newest
    when the pool runs dry. Blocks are the :class:`BlockPool`'s. ``step()`` advances one engine
    iteration."""

    def __init__(
        self,
        requests: list[Request],
        *,
        num_blocks: int,
        block_size: int,
        prefix_caching: bool = True,
    ):
        self.pool = BlockPool(num_blocks, block_size, prefix_caching)
        self.block_size = self.pool.block_size
        ids = [r.rid for r in requests]
        if len(set(ids)) != len(ids):
            raise ValueError("request ids must be unique")
        for r in requests:
            if not r.prompt:
                raise ValueError(f"request {r.rid}: the prompt needs at least one token")
            if r.output_len < 1:
                raise ValueError(f"request {r.rid}: it must generate at least one token")
            if cdiv(len(r.prompt) + r.output_len, self.block_size) > self.pool.num_blocks:
                raise ValueError(
                    f"request {r.rid} needs {len(r.prompt) + r.output_len} tokens, more than the "
                    f"whole pool ({self.pool.num_blocks} blocks x {self.block_size} tokens) "
                    "holds"
                )
        self.pending = sorted(requests, key=lambda r: (r.arrival, r.rid))
        self.waiting: list[tuple[Request, list[int]]] = []  # (request, tokens to recompute)
        self.running: list[_Running] = []
        self.done: dict[str, _Running] = {}
        self.preempted_ids: set[str] = set()
        self.step_no = 0
        self.events: list[str] = []
        self.preemptions = 0
        self.hit_tokens = 0
        self.query_tokens = 0

    def _try_admit(self, req: Request, tokens: list[int]) -> bool:
        pool, bs = self.pool, self.block_size
        hits = pool.prefix_hits(tokens, req.rid)
        need = cdiv(len(tokens), bs) - len(hits)
        # Cached blocks that sit in the free queue are about to be reused, not allocated.
        free_after_hits = len(pool.free) - sum(1 for bid in hits if bid in pool.free)
        if need > free_after_hits:
            return False
        for bid in hits:
            pool.share(bid, req.rid)
        blocks = list(hits) + pool.take_many(need)
        run = _Running(
            req=req,
            tokens=list(tokens),
            generated=len(tokens) - len(req.prompt),
            blocks=blocks,
            admitted_at=self.step_no,
        )
        pool.fill(run)
        self.running.append(run)
        pool.forget(req.rid)
        self.query_tokens += len(tokens)
        self.hit_tokens += len(hits) * bs
        shared = f", {len(hits)} cached block(s) reused ({len(hits) * bs} tokens)" if hits else ""
        self.events.append(
            f"admit {req.rid}: prefill {len(tokens)} tokens into {len(blocks)} block(s){shared}"
        )
        pool.seal(run)
        return True

    def _preempt_newest(self) -> None:
        victim = max(self.running, key=lambda r: (r.admitted_at, self.running.index(r)))
        self.running.remove(victim)
        self.pool.release(victim)
        self.preemptions += 1
        self.preempted_ids.add(victim.req.rid)
        # Recompute later: everything it had (prompt + generated) becomes the new prefill.
        self.waiting.insert(0, (victim.req, victim.tokens))
        self.events.append(
            f"preempt {victim.req.rid}: no free block; its "
            f"{len(victim.tokens)} tokens will be recomputed"
        )

    def _decode(self) -> None:
        pool, bs = self.pool, self.block_size
        decoded, finished = [], []
        for run in list(self.running):
            if run.admitted_at == self.step_no or run not in self.running:
                continue  # admitted this step (prefill) or preempted meanwhile
            if len(run.tokens) % bs == 0:  # last block full: take a new one
                while not pool.free and run in self.running:
                    self._preempt_newest()  # the newest (perhaps run itself) frees its blocks
                if run not in self.running:
                    continue
                run.blocks.append(pool.take())
            # A made-up but deterministic next token (str hash() is salted per process).
            token = 50_000 + zlib.crc32(f"{run.req.rid}:{run.generated}".encode()) % 10_000
            run.tokens.append(token)
            run.generated += 1
            decoded.append(run.req.rid)
            pool.fill(run, tail_only=True)
            pool.seal(run)
            if run.generated >= run.req.output_len:
                self.running.remove(run)
                pool.release(run)
                self.done[run.req.rid] = run
                finished.append(
                    f"finish {run.req.rid}: {run.generated} tokens generated, "
                    "blocks returned to the free pool"
                )
        if decoded:
            self.events.append(f"decode one token each: {', '.join(decoded)}")
        self.events.extend(finished)

    def step(self) -> Snapshot:
        """One engine iteration, and the full picture after it."""
        self.advance()
        return self.snapshot()

    def advance(self) -> None:
        """One engine iteration without building a snapshot (``simulate`` draws only the last)."""
        self.step_no += 1
        self.events = self.pool.events = []
        while self.pending and self.pending[0].arrival <= self.step_no:
            r = self.pending.pop(0)
            self.waiting.append((r, list(r.prompt)))
            self.events.append(
                f"arrive {r.rid} ({len(r.prompt)} prompt tokens, {r.output_len} to generate)"
            )
        before = self.preemptions
        self._decode()
        # Like vLLM, no new admissions in a step that had to preempt: memory is short.
        while self.waiting and self.preemptions == before:
            req, tokens = self.waiting[0]
            if not self._try_admit(req, tokens):
                self.events.append(f"wait {req.rid}: needs more free blocks")
                break
            self.waiting.pop(0)
        if not self.events:
            self.events.append("idle")

    @property
    def finished(self) -> bool:
        return not (self.pending or self.waiting or self.running)

    def snapshot(self) -> Snapshot:
        bs, pool = self.block_size, self.pool
        # TableView rows (rid, state, tokens, generated, blocks): running, waiting, coming, done
        rows = [
            (r.req.rid, "running", len(r.tokens), r.generated, tuple(r.blocks))
            for r in self.running
        ]
        for req, tokens in self.waiting:
            state = "preempted, waiting" if req.rid in self.preempted_ids else "waiting"
            rows.append((req.rid, state, len(tokens), len(tokens) - len(req.prompt), ()))
        rows += [(req.rid, f"arrives at step {req.arrival}", 0, 0, ()) for req in self.pending]
        rows += [(rid, "finished", len(r.tokens), r.generated, ()) for rid, r in self.done.items()]
        frag = sum(len(r.blocks) * bs - len(r.tokens) for r in self.running)
        return Snapshot(
            step=self.step_no,
            blocks=pool.views(),
            tables=tuple(TableView(*row) for row in rows),
            events=tuple(self.events),
            used_blocks=sum(1 for b in pool.blocks if b.ref_count > 0),
            free_blocks=len(pool.free),
            cached_free_blocks=sum(1 for bid in pool.free if pool.blocks[bid].block_hash),
            fragmentation_slots=frag,
            prefix_hit_tokens=self.hit_tokens,
            prefix_query_tokens=self.query_tokens,
            preemptions=self.preemptions,
            finished=len(self.done),
            waiting=len(self.waiting),
            running=len(self.running),
        )


@dataclass(frozen=True, kw_only=True)
class StepLog:
    """What the page keeps of a step it does not draw: its events and how many ran."""

    step: int
    events: tuple[str, ...]
    running: int


def simulate(
    requests: list[Request],
    steps: int,
    *,
    num_blocks: int,
    block_size: int,
    prefix_caching: bool = True,
) -> tuple[Engine, Snapshot, list[StepLog]]:
    """Run ``steps`` engine steps (or until every request finished) from the start: the engine,
    a full snapshot of the last step (the only one drawn), and a light log of every step."""
    steps = check_int("steps", steps, 0, 100_000)
    eng = Engine(
        requests, num_blocks=num_blocks, block_size=block_size, prefix_caching=prefix_caching
    )
    log = [StepLog(step=0, events=(), running=0)]
    for _ in range(steps):
        if eng.finished:
            break
        eng.advance()
        log.append(StepLog(step=eng.step_no, events=tuple(eng.events), running=len(eng.running)))
    return eng, eng.snapshot(), log


def contiguous_capacity(num_blocks: int, block_size: int, max_model_len: int) -> int:
    """Requests that fit if each reserves max_model_len contiguous slots up front (no paging)."""
    max_model_len = check_int("max_model_len", max_model_len, 1, 10**9)
    return (num_blocks * block_size) // max_model_len
