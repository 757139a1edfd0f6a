"""GPU memory budget: how much of a GPU becomes KV cache, and how many sequences it holds, under
three named conventions, each a Budget subclass built from a Deployment (``from_pool``):
``VllmBudget`` (vLLM's own arithmetic), ``IdealBudget`` (the bytes a sequence really holds, for
teaching) and ``TrtllmBudget`` (TensorRT-LLM's share of the free memory, blocks per layer);
``budget(dep, context, convention=...)`` picks the class once. The engines' pool defaults are
here, the blocks per layer in kvcalc.engines.pool; in words: docs/vllm.md#the-gpu-memory-budget."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar, Self

from ..cache.deployment import DEFAULT_RESERVE_BYTES, Deployment
from ..cache.kv import stage_layers
from ..core.dtypes import KV_DTYPES, get_dtype
from ..core.units import GiB, check_float, check_int, fmt_gib
from . import vllm as _vllm
from .pool import Pool, binding_stage_blocks, max_context, stage_kv_layers

# vLLM's default gpu_memory_utilization in the newest release kvcalc models (the one default of
# every page and of the CLI), the one it replaced and the release that changed it, for the texts
# that say so: Facts.gpu_memory_utilization (0.92 from 0.20.0, PR #38284; 0.9 before).
DEFAULT_GPU_MEM_UTIL: float = _vllm.fact(_vllm.Facts.gpu_memory_utilization, _vllm.NEWEST)
_UTIL_STEPS = _vllm.Facts.gpu_memory_utilization.steps
PREVIOUS_GPU_MEM_UTIL: float = _UTIL_STEPS[-2][1]
GPU_MEM_UTIL_CHANGED_IN = ".".join(map(str, _UTIL_STEPS[-1][0]))
# TensorRT-LLM's default share of the memory still free after the weights that becomes KV cache:
# KvCacheConfig.free_gpu_memory_fraction = 0.9 (tensorrt_llm.llmapi; "How to Change KV Cache
# Behavior" in its documentation).
TRTLLM_FREE_FRACTION = 0.9
# Memory a running engine needs besides weights and KV: the activation peak of a profiling run
# (about 1 GiB for a 7-8B model at 8K batched tokens), the CUDA context and library workspaces
# (~0.5 GiB) and CUDA-graph buffers (~0.5 GiB). Stated round defaults; the user can change them.
DEFAULT_ACTIVATION_BYTES = 1 * GiB
DEFAULT_NON_TORCH_BYTES = GiB // 2
DEFAULT_CUDA_GRAPH_BYTES = GiB // 2
# LMDeploy's TurboMind sizes its pool before it allocates its activation buffers (v0.4.0,
# src/turbomind/models/llama/LlamaBatch.cc: the SequenceManager, then AllocateBuffer):
# free x cache_max_entry_count (0.8 by default, lmdeploy/messages.py) / block bytes, free from
# cudaMemGetInfo (BlockManager::GetBlockCount): besides the weights only the CUDA context and
# the library workspaces are taken.
LMDEPLOY_RESERVE_BYTES = DEFAULT_NON_TORCH_BYTES


def free_memory_pool(
    total_bytes: int, weights_bytes: int, reserve_bytes: int, fraction: float
) -> int:
    """floor(fraction x (total - weights - reserve)), the pool of TensorRT-LLM's
    kv_cache_free_gpu_mem_fraction and LMDeploy's cache_max_entry_count; what is free when it is
    not positive."""
    free = total_bytes - weights_bytes - reserve_bytes
    return math.floor(free * fraction) if free > 0 else free


def pool_defaults_text(
    gpu_mem_util: float = DEFAULT_GPU_MEM_UTIL, reserve_bytes: int = DEFAULT_RESERVE_BYTES
) -> str:
    """The pool's settings in words, for captions and prompts: "vLLM 0.33.0's default
    gpu_memory_utilization 0.92 and a 2 GiB reserve"."""
    whose = f"vLLM {_vllm.NEWEST}'s default " if gpu_mem_util == DEFAULT_GPU_MEM_UTIL else ""
    return (
        f"{whose}gpu_memory_utilization {gpu_mem_util:g} and a {reserve_bytes / GiB:g} GiB reserve"
    )


@dataclass(frozen=True, kw_only=True)
class Budget(Pool):
    """One GPU's budget under one convention: its pool and the figures every convention has. A
    subclass says how its pool follows (``pool``), computes its figures (``from_pool``) and
    writes its derivation; ``engine`` (--json's first key, the page's choice) names it."""

    engine: str
    unused_bytes: int  # total - requested (vLLM leaves it to other processes)
    block_size: int
    kv_layers: int  # on the binding stage's GPU
    page_bytes: int  # one block of one layer (largest layer when they differ)
    block_bytes: int  # one block across every K/V layer of the stage
    num_blocks: int
    kv_capacity_tokens: int
    context: int
    seq_bytes: int  # block-rounded K/V + state of one sequence at `context`
    max_concurrency: float
    max_context_tokens: int | None  # largest context one sequence can reach; None = never fills
    model_max_context: int
    concurrency: int  # what the user asks to run
    needed_bytes: int
    fits: bool
    overflow_bytes: int
    state_bytes_per_seq: int
    tp: int
    pp: int
    stage: int  # which pipeline stage binds
    # vLLM's figures (engine="vllm"); for the other conventions they keep their plain meaning
    blocks_per_request: int = 0  # blocks one request of `context` tokens reserves
    # blocks one running request holds decoding at `context` tokens: windows keep only their
    # last tokens' blocks (vLLM frees the others), a state its blocks (engine="vllm")
    held_blocks_per_request: int = 0
    group_size: int = 0  # layers per KV-cache group: a block holds one page of each
    num_groups: int = 0
    effective_block_size: int = 0  # raised for hybrids with a recurrent state
    vllm_version: str | None = None
    max_num_seqs: int | None = None  # the scheduler's cap on running sequences
    startup_error: str | None = None  # vLLM refuses to start: its own message
    notes: tuple[str, ...] = ()

    @property
    def max_running_seqs(self) -> float:
        """Sequences that can run together: the memory figure, capped by max_num_seqs."""
        return min(self.max_concurrency, self.max_num_seqs or math.inf)

    @property
    def held_concurrency(self) -> float:
        """Requests decoding at `context` tokens that the pool holds at once, each holding only
        what vLLM keeps for it (vLLM's logged max_concurrency charges every window its worst
        case). Equal to max_concurrency when every layer keeps every token."""
        held = self.held_blocks_per_request
        return self.num_blocks / held if held else self.max_concurrency

    @property
    def held_bytes(self) -> int:
        return self.held_blocks_per_request * self.block_bytes

    @property
    def limited_by(self) -> str:
        """What caps the running sequences: "memory" or "max_num_seqs"."""
        return "max_num_seqs" if self.max_running_seqs < self.max_concurrency else "memory"

    @property
    def usable_context(self) -> int:
        cap = self.max_context_tokens
        return self.model_max_context if cap is None else min(cap, self.model_max_context)

    @property
    def max_context_limited_by(self) -> str:
        return "memory" if self.usable_context < self.model_max_context else "model"

    @property
    def usable_bytes(self) -> int:
        """What the pool can hold: whole blocks (vLLM, TensorRT-LLM), or every byte (the ideal
        convention)."""
        return self.num_blocks * self.block_bytes

    # -- what differs by convention, in words (printed by pages and CLI without asking which) -
    has_blocks: ClassVar[bool] = True  # the pool is cut into blocks
    logs_startup_lines: ClassVar[bool] = False  # the engine logs capacity lines at start-up
    concurrency_note: ClassVar[str] = ""  # after the CLI's max concurrency figure

    @property
    def idle_bytes(self) -> int:
        """Memory the engine leaves to other processes (the memory chart's "unused")."""
        return max(self.total_bytes - self.requested_bytes, 0)

    def blocks_help(self) -> str:
        return f"{self.block_size} tokens each"

    def capacity_help(self) -> str:
        return "blocks x block size: tokens the pool holds if every layer keeps every token"

    def concurrency_label(self, context: int) -> str:
        return f"Max concurrency at {context:,}"

    def concurrency_help(self, windowed: bool) -> str:
        return "pool / bytes of one sequence"

    def verdict(
        self, label: str, windowed: bool, quote: Callable[[str], str] = str
    ) -> tuple[str, str]:
        """The headline: (success, warning or error; its sentence), ``quote`` for outside text."""
        n, ctx, gib, pool = self.concurrency, self.context, fmt_gib, fmt_gib(self.usable_bytes)
        need = f"{n:,} x {ctx:,} tokens need {gib(self.needed_bytes)} of cache blocks"
        if self.kv_pool_bytes <= 0:
            return "error", (
                f"{quote(label)} does not fit: its weights take {gib(self.weights_bytes)} per GPU "
                f"and the reserve {gib(self.reserve_bytes)}, more than the "
                f"{gib(self.requested_bytes)} the engine may use, so there is no room for a "
                "cache. The cache per token below does not depend on the GPU."
            )
        if self.startup_error:
            return "error", (
                f"vLLM would refuse to start with max_model_len = {ctx:,}: one request of that "
                f"length does not fit. Its own message: {quote(self.startup_error)}"
            )
        if self.fits:
            spare = gib(self.usable_bytes - self.needed_bytes)
            return "success", f"{need}; the pool holds {pool}: it fits, with {spare} to spare."
        held = windowed and n <= self.held_concurrency  # a window holds less than counted
        return ("warning" if held else "error"), (
            f"By vLLM's start-up arithmetic {need}, over the {pool} pool by "
            f"{gib(self.overflow_bytes)}: it charges every sequence at full length and each "
            f"window its worst case. Decoding, a sequence of {ctx:,} tokens holds only "
            f"{gib(self.held_bytes)}, so all {n:,} fit while they run (see 'Logged vs running "
            "capacity' below); a new prompt needs its whole window while its prefill runs."
            if held
            else f"{need} but the pool holds {pool}: over by {gib(self.overflow_bytes)}. The "
            "engine would queue or preempt the sequences that do not fit."
        )

    def setup_line(self) -> str:
        """The CLI's line on how the engine takes its memory."""
        raise NotImplementedError

    def engine_lines(self) -> list[str]:
        """The CLI's lines on what the engine itself reports (none but vLLM's)."""
        return []

    def derivation(self) -> str:
        """How the pool, the blocks and the concurrency follow, numbers substituted, in the
        engine's own order of operations (what the pages and the CLI print)."""
        return "\n".join(self._pool_lines() + self._block_lines(max(self.kv_pool_bytes, 0)))

    def _pool_lines(self) -> list[str]:
        """The requested memory and the pool in vLLM's order (vLLM and the ideal convention)."""
        return [
            f"requested         = ceil({self.total_bytes:,} B x {self.gpu_mem_util:g}) "
            f"= {self.requested_bytes:,} B ({fmt_gib(self.requested_bytes)})",
            f"KV pool           = {self.requested_bytes:,} - {self.weights_bytes:,} "
            f"weights - {self.reserve_bytes:,} reserve = {self.kv_pool_bytes:,} B "
            f"({fmt_gib(self.kv_pool_bytes)})",
        ]

    def _block_lines(self, pool: int) -> list[str]:
        raise NotImplementedError  # and how its blocks and concurrency do

    @classmethod
    def of(cls, dep: Deployment, context: int, concurrency: int, find_max_context: bool) -> Budget:
        """This convention's budget of ``dep``: its pool, then its figures (``from_pool``)."""
        # EngineArgs refuses a utilisation of 0: None is the only false value
        util = dep.engine.gpu_memory_utilization or cls.default_gpu_mem_util(dep.engine.version)
        util = check_float("gpu_memory_utilization", util, 0.0, 1.0, lo_open=True)
        weights = dep.gpu_weights_bytes  # one GPU's (a data parallel rank's share)
        pool = cls.pool(dep.total_bytes, weights, dep.reserve_bytes, util)
        return cls.from_pool(dep, pool, context, concurrency, find_max_context)

    @staticmethod
    def default_gpu_mem_util(vllm_version: str | None = None) -> float:
        return _vllm.fact(_vllm.Facts.gpu_memory_utilization, vllm_version)  # vLLM's pool

    @staticmethod
    def pool(total_bytes: int, weights_bytes: int, reserve: int, util: float) -> Pool:
        """vLLM's rule: requested_memory = math.ceil(total_memory x gpu_memory_utilization), in
        floats; the pool is what the weights and the reserve leave of it."""
        requested = math.ceil(total_bytes * util)
        kv_pool = requested - weights_bytes - reserve
        return Pool(total_bytes, util, requested, weights_bytes, reserve, kv_pool)

    @classmethod
    def from_pool(
        cls, dep: Deployment, pool: Pool, context: int, concurrency: int, find_max_context: bool
    ) -> Budget:
        raise NotImplementedError  # each convention computes its figures

    @classmethod
    def _made(
        cls, dep: Deployment, pool: Pool, context: int, concurrency: int, **figures: Any
    ) -> Self:
        """This convention's Budget: the pool's and the deployment's fields, ``figures``, and
        whether ``concurrency`` sequences fit in what the pool's blocks (or bytes) hold."""
        blocks = figures["num_blocks"] * figures["block_bytes"]
        usable = blocks if figures["block_bytes"] else max(pool.kv_pool_bytes, 0)
        needed = concurrency * figures["seq_bytes"]
        return cls(
            **asdict(pool),
            needed_bytes=needed,
            fits=pool.kv_pool_bytes > 0 and needed <= usable and not figures.get("startup_error"),
            overflow_bytes=max(0, needed - usable),
            unused_bytes=pool.total_bytes - pool.requested_bytes,
            block_size=dep.engine.block_size,
            context=context,
            model_max_context=dep.spec.max_context,
            concurrency=concurrency,
            tp=dep.tp,
            pp=dep.pp,
            **figures,
        )

    def to_dict(self) -> dict:
        d = {"engine": self.engine} | {f.name: getattr(self, f.name) for f in fields(self)}
        d["usable_context"] = self.usable_context
        d["max_context_limited_by"] = self.max_context_limited_by
        d["max_running_seqs"] = self.max_running_seqs
        d["held_concurrency"] = self.held_concurrency
        d["limited_by"] = self.limited_by
        d["notes"] = list(self.notes)
        return d


@dataclass(frozen=True, kw_only=True)
class VllmBudget(Budget):
    """vLLM's own arithmetic (kvcalc.engines.vllm.predict): a fraction of TOTAL memory, blocks
    shared by groups of layers, its start-up check and max_num_seqs."""

    engine: str = field(default="vllm", init=False)

    @classmethod
    def from_pool(
        cls, dep: Deployment, pool: Pool, context: int, concurrency: int, find_max_context: bool
    ) -> Budget:
        """vLLM's figures (kvcalc.engines.vllm.predict): blocks, per-request blocks,
        concurrency, the start-up check and max_num_seqs, exactly as vLLM computes them."""
        version, total, gpu_name = dep.engine.version, dep.total_bytes, dep.gpu_name
        kv = get_dtype(dep.cache.kv_dtype, KV_DTYPES).name
        # vLLM's one max_num_batched_tokens, as predict() fixes it: the usage context's default
        # (LLM class or server), capped at max_num_seqs x max_model_len
        run = _vllm.capacity.fixed_batch(dep.but(kv_dtype=kv), context, None)
        available = max(pool.kv_pool_bytes, 0)
        p = _vllm.predict(run, available, context)
        block_bytes = p.page_bytes * p.group_size
        seq = p.blocks_per_request * block_bytes
        seqs = dep.engine.max_num_seqs or _vllm.default_max_num_seqs(version, total, gpu_name)
        error = _vllm.startup_error(run, available, context, p)
        longest = _vllm.estimate_max_model_len(run, available) if find_max_context else None
        kv_layers, state = stage_kv_layers(stage_layers(dep.spec, dep.tp, dep.pp)[p.stage], dep)
        return cls._made(
            dep,
            pool,
            context,
            concurrency,
            kv_layers=kv_layers,
            state_bytes_per_seq=state,
            page_bytes=p.page_bytes,
            block_bytes=block_bytes,
            num_blocks=p.num_blocks,
            kv_capacity_tokens=p.kv_cache_tokens,
            seq_bytes=seq,
            max_concurrency=p.max_concurrency,
            max_context_tokens=longest,
            stage=p.stage,
            blocks_per_request=p.blocks_per_request,
            group_size=p.group_size,
            held_blocks_per_request=p.held_blocks(context),
            num_groups=len(p.groups),
            effective_block_size=p.block_size,
            vllm_version=p.vllm_version,
            max_num_seqs=check_int("max_num_seqs", seqs, 1, 10**7),
            startup_error=error,
            notes=p.notes,
        )

    logs_startup_lines = True
    concurrency_note = " (vLLM's logged worst case)"

    def blocks_help(self) -> str:
        return (
            f"{self.effective_block_size or self.block_size} tokens each, one page in each of "
            f"{self.group_size} layers"
        )

    def capacity_help(self) -> str:
        return (
            "vLLM's 'GPU KV cache size' line: int(max concurrency x max_model_len) in this version"
        )

    def concurrency_label(self, context: int) -> str:
        return f"vLLM logs at {context:,}"

    def concurrency_help(self, windowed: bool) -> str:
        return (
            "vLLM's 'Maximum concurrency for N tokens per request', its start-up worst "
            "case: every request at full length at once"
            + (", each window charged window - 1 + the tokens in flight" if windowed else "")
        )

    def setup_line(self) -> str:
        return (
            f"  requested:    ceil({fmt_gib(self.total_bytes)} x {self.gpu_mem_util:g}) = "
            f"{fmt_gib(self.requested_bytes)}"
        )

    def engine_lines(self) -> list[str]:
        lines = [
            f"  vLLM {self.vllm_version}: {self.num_groups} group(s) of {self.group_size} "
            f"layers, {self.blocks_per_request:,} blocks per request; max_num_seqs "
            f"{self.max_num_seqs:,}, so {self.max_running_seqs:,.2f} run at once "
            f"(limited by {self.limited_by})"
        ]
        if self.held_blocks_per_request != self.blocks_per_request:
            lines.append(
                f"  running: one request decoding at {self.context:,} tokens holds "
                f"{self.held_blocks_per_request:,} blocks ({fmt_gib(self.held_bytes)}; windows "
                f"keep their last tokens only), so {self.held_concurrency:.2f} fit"
            )
        if self.startup_error:
            lines.append(f"  vLLM would refuse to start: {self.startup_error}")
        return lines

    def _block_lines(self, pool: int) -> list[str]:
        return [
            f"page (one layer)  = {self.effective_block_size} tokens x per-layer bytes = "
            f"{self.page_bytes:,} B",
            f"blocks            = {pool:,} // {self.page_bytes:,} // {self.group_size} "
            f"layers per group = {self.num_blocks:,}  ({self.num_groups} group(s) share them)",
            f"one request       = {self.blocks_per_request:,} blocks at {self.context:,} tokens "
            "(windows reserve a window plus the tokens in flight; a state one block)",
            f"max concurrency   = {self.num_blocks:,} / {self.blocks_per_request:,} = "
            f"{self.max_concurrency:,.2f}   (vLLM {self.vllm_version})",
        ]


@dataclass(frozen=True, kw_only=True)
class IdealBudget(Budget):
    """The bytes one sequence really holds (the seed's formula), against vLLM's pool: no block
    rounding, no window slack. For teaching what the allocator costs."""

    engine: str = field(default="ideal", init=False)

    @classmethod
    def from_pool(
        cls, dep: Deployment, pool: Pool, context: int, concurrency: int, find_max_context: bool
    ) -> Budget:
        """The bytes one sequence really holds (kvcalc.cache.kv), no block rounding and no
        window slack, against the pool; the layers of the stage that holds the fewest."""
        stage = binding_stage_blocks(dep, pool.kv_pool_bytes, context, False)

        def seq_bytes(n: int) -> int:
            return dep.kv_cache(n).total_bytes

        usable = max(pool.kv_pool_bytes, 0)
        one = seq_bytes(context)
        return cls._made(
            dep,
            pool,
            context,
            concurrency,
            **{k: stage[k] for k in ("kv_layers", "state_bytes_per_seq", "stage")},
            page_bytes=0,
            block_bytes=0,
            num_blocks=0,
            kv_capacity_tokens=0,
            seq_bytes=one,
            max_concurrency=usable / one if one else math.inf,
            max_context_tokens=max_context(seq_bytes, usable) if find_max_context else None,
        )

    has_blocks = False

    def blocks_help(self) -> str:
        return "the ideal convention counts bytes, not blocks"

    def setup_line(self) -> str:
        return (
            "  engine:       ideal (bytes a sequence really holds, no blocks), pool from "
            f"ceil({fmt_gib(self.total_bytes)} x {self.gpu_mem_util:g}) = "
            f"{fmt_gib(self.requested_bytes)}"
        )

    @property
    def usable_bytes(self) -> int:
        return max(self.kv_pool_bytes, 0)

    def _block_lines(self, pool: int) -> list[str]:
        return [
            f"one sequence      = {self.seq_bytes:,} B actually held at {self.context:,} tokens "
            "(no block rounding, windows at most their length)",
            f"max concurrency   = {pool:,} / {self.seq_bytes:,} = {self.max_concurrency:,.2f}",
        ]


@dataclass(frozen=True, kw_only=True)
class TrtllmBudget(Budget):
    """TensorRT-LLM's pool: a fraction of the memory still free after the weights and the
    runtime reserve, cut into blocks per layer."""

    engine: str = field(default="trtllm", init=False)

    @staticmethod
    def default_gpu_mem_util(vllm_version: str | None = None) -> float:
        return TRTLLM_FREE_FRACTION

    @staticmethod
    def pool(total_bytes: int, weights_bytes: int, reserve: int, util: float) -> Pool:
        kv_pool = free_memory_pool(total_bytes, weights_bytes, reserve, util)
        return Pool(total_bytes, util, total_bytes, weights_bytes, reserve, kv_pool)

    @classmethod
    def from_pool(
        cls, dep: Deployment, pool: Pool, context: int, concurrency: int, find_max_context: bool
    ) -> Budget:
        """The stage that holds the fewest sequences, by blocks per layer."""
        st = binding_stage_blocks(dep, pool.kv_pool_bytes, context, find_max_context)
        return cls._made(dep, pool, context, concurrency, **st)

    @property
    def idle_bytes(self) -> int:
        """The free memory's share it does not take (1 - kv_cache_free_gpu_mem_fraction)."""
        free = self.total_bytes - self.weights_bytes - self.reserve_bytes
        return max(free - max(self.kv_pool_bytes, 0), 0)

    def setup_line(self) -> str:
        return f"  engine:       TensorRT-LLM, {self.gpu_mem_util:g} of memory free after weights"

    def _pool_lines(self) -> list[str]:
        return [
            f"KV pool           = floor({self.gpu_mem_util:g} x ({self.total_bytes:,} "
            f"- {self.weights_bytes:,} weights - {self.reserve_bytes:,} reserve)) = "
            f"{self.kv_pool_bytes:,} B ({fmt_gib(self.kv_pool_bytes)})"
        ]

    def _block_lines(self, pool: int) -> list[str]:
        alike = self.block_bytes == self.page_bytes * self.kv_layers  # every layer alike
        if alike:
            blocks = f"{pool:,} // {self.page_bytes:,} // {self.kv_layers} K/V layers"
        else:  # pages differ by layer: a block is one page of every layer
            blocks = f"{pool:,} // {self.block_bytes:,} B (one page of every K/V layer)"
        return [
            f"page (one layer)  = {self.block_size} tokens x per-layer bytes = "
            f"{self.page_bytes:,} B" + ("" if alike else " (the largest layer's)"),
            f"blocks            = {blocks} = {self.num_blocks:,}",
            f"one sequence      = {self.seq_bytes:,} B at {self.context:,} tokens (whole blocks "
            "per layer)",
            f"max concurrency   = {self.num_blocks * self.block_bytes:,} / "
            f"{self.seq_bytes:,} = {self.max_concurrency:,.2f}",
        ]


CONVENTIONS: dict[str, type[VllmBudget] | type[IdealBudget] | type[TrtllmBudget]] = {
    "vllm": VllmBudget,
    "ideal": IdealBudget,
    "trtllm": TrtllmBudget,
}
ENGINES = tuple(CONVENTIONS)


def default_gpu_mem_util(engine: str = "vllm", vllm_version: str | None = None) -> float:
    """The share of memory a convention takes when none is given: vLLM's own default for
    ``vllm_version`` (None: the newest, ``DEFAULT_GPU_MEM_UTIL``), or TensorRT-LLM's 0.9."""
    return CONVENTIONS[engine].default_gpu_mem_util(vllm_version)


def budget(
    dep: Deployment,
    context: int,
    concurrency: int = 1,
    *,
    convention: str = "vllm",
    find_max_context: bool = True,
) -> Budget:
    """The memory budget of one GPU of ``dep`` for ``concurrency`` sequences of ``context``
    tokens under ``convention`` (vllm, ideal, trtllm); ``find_max_context=False`` skips the
    search for the longest single sequence (max_context_tokens None), for fast sweeps. Engine
    settings None take vLLM's defaults for the version (None: the newest) and GPU,
    gpu_memory_utilization None the convention's (``default_gpu_mem_util``)."""
    context = check_int("context", context, 1, 10**9)
    concurrency = check_int("concurrency", concurrency, 1, 10**7)
    if convention not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {convention!r}")
    return CONVENTIONS[convention].of(dep, context, concurrency, find_max_context)
