"""A serving simulator: continuous batching with chunked prefill on a paged KV-cache pool.

It joins three parts of kvcalc that each answer one question:

* the pool: ``budget`` (vLLM's arithmetic) gives how many blocks of ``block_size`` tokens the
  GPU holds once the weights and the reserve are in;
* the blocks: requests take whole blocks as they grow, and give them back when they finish or
  are preempted, as in ``kvcalc.engines.paging`` (PagedAttention, vLLM's scheduler);
* the clock: every engine step costs max(compute time, memory time), the same law as
  ``roofline.step_time`` (decode) and ``roofline.prefill`` (time to first token).

One engine step (an iteration of the scheduler), in this order:

1. Requests that arrived by the start of the step join the waiting queue.
2. Every running request that has finished its prefill decodes one token. A request whose last
   block is full takes a new one. When none is free, the running request admitted last is
   preempted: its blocks are freed and it waits again at the head of the queue, to recompute its
   prompt plus what it had generated (vLLM's recompute preemption, newest first).
3. Running requests still in prefill take chunks of their prompt from what is left of
   ``max_num_batched_tokens`` (chunked prefill), in the order they were admitted.
4. If nothing was preempted in this step, waiting requests are admitted first come first served
   while fewer than ``max_num_seqs`` run, tokens are left in the budget and the blocks of their
   first chunk are free.
5. The step's time is max(FLOPs / (peak x MFU), bytes / (bandwidth x achieved share)):

       FLOPs = 2 x active params x tokens in the step + attention FLOPs of its pairs
       bytes = weight bytes read + KV bytes per token x tokens each scheduled request reads

   per GPU (tensor parallel: 1/tp of the weights, heads and FLOPs). A pair costs what its layer
   says (``roofline.attention_flops``): 2 x q_heads x (qk_dim + v_dim) for a prefill chunk's
   pairs, and for a decode token's the same except MLA, whose decode is absorbed
   (2 x q_heads x (2 x kv_lora_rank + qk_rope_head_dim)). A decode token at context c
   reads the c tokens of its cache (its own included) and attends to c of them; a prefill chunk
   from s to e tokens reads e tokens and adds e(e+1)/2 - s(s+1)/2 attended pairs. A decode-only
   step of b requests at context c is exactly ``step_time(context=c, batch=b)`` when memory
   bound; a single prompt's step is ``prefill(...)`` (plus the prompt's own cache read).
6. Tokens come out at the end of the step: one per decoding request, and the first token of a
   request whose prefill completed. A finished request frees its blocks at once.

Decodes go before prefill chunks (vLLM's chunked-prefill policy; vLLM V1 walks its running list
in admission order, which gives the same batches unless a long prefill sits before decodes).

Prefix sharing: a fraction ``prefix_share`` of each prompt is one system prompt common to every
request. With prefix caching its full blocks are kept once, reference counted, and reused by
every request that finds them resident (at most prompt - 1 tokens come from the cache, as in
vLLM). Freed shared blocks stay cached until a new block is needed and no other block is free
(vLLM evicts least recently freed first; this model evicts the shared prefix last, a stated
simplification that only matters when the pool is nearly empty).

Metrics follow vLLM's benchmark (benchmarks/benchmark_serving.py): TTFT = first token - arrival;
TPOT = (last token - first token) / (output tokens - 1), per request with more than one output
token; ITL = every gap between two successive tokens of a request; E2EL = last token - arrival;
output tokens/s = all output tokens / (last finish - first arrival); percentiles with linear
interpolation (numpy's default). Tokens/s per user = 1 / median TPOT.

Supported models: full attention, MLA, sliding windows (one window size) and recurrent states,
every layer's pages of one size. vLLM lays such a model's cache out in groups that draw on one
pool of blocks (kvcalc.engines.vllm): a request holds, in every token group, the blocks of its
tokens, less, in a sliding group, those wholly before the window (vLLM's remove_skipped_blocks frees
them: computed - window + 1 tokens, in whole blocks), plus its state blocks from admission on. A
sliding layer reads and attends min(context, window) tokens; a state is read once a step.
Prefix sharing is simulated for single-group models only. Chunked-local (Llama 4), shared-KV and
cross-attention layers are refused by name.

A run is pool-bound (``binding_limit == "kv_pool"``) once anything was preempted or a waiting
request found too few free blocks; otherwise it is labelled by what held its peak batch. The
warm-up is every request sent before the first one finished (a closed loop's users all send at
t = 0); ``ttft_*_steady_s`` leave it out.
"""

from __future__ import annotations

import bisect
import heapq
import math
import random
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

from ..cache.kv import stage_layers
from ..cache.weight_bytes import Weights
from ..config.limits import MAX_CONTEXT
from ..core.arith import cdiv
from ..core.dtypes import KV_DTYPES, get_dtype
from ..core.model import ModelSpec, SlidingWindow
from ..core.units import GB, check_float, check_int
from ..engines import vllm as _vllm
from ..engines.budget import DEFAULT_RESERVE_BYTES, budget, default_gpu_mem_util
from .calibration import ACTIVATION_BYTES, ALLREDUCES_PER_LAYER, StepModel
from .roofline import DEFAULT_MFU

__all__ = [
    "Dist",
    "fixed",
    "uniform",
    "lognormal",
    "Workload",
    "Setup",
    "setup",
    "simulate",
    "SimResult",
    "percentile",
    "estimated_steps",
    "MAX_REQUESTS",
    "BINDING_LIMITS",
    "CLI_KEYS",
]

MAX_REQUESTS = 20_000  # about 10 s of simulation at most on one core
MAX_TOKENS = 1_000_000  # one request's prompt or output
BINDING_LIMITS = ("kv_pool", "max_num_seqs", "max_num_batched_tokens", "arrivals")
# ``simulate --json``: the first keys as vLLM's benchmark names its metrics (in seconds), then
# the simulator's own.
CLI_KEYS = ("ttft_p50_s", "ttft_mean_s", "ttft_p99_s", "tpot_p50_s", "tpot_mean_s", "tpot_p99_s",
            "itl_p50_s", "itl_mean_s", "itl_p99_s", "e2el_p50_s", "e2el_mean_s", "duration_s",
            "request_throughput", "output_tokens_per_s", "total_tokens_per_s", "preemptions",
            "kv_utilization_mean", "max_batch", "binding_limit")
_SERIES_POINTS = 400  # utilization-over-time samples kept for a chart


# -- lengths -------------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Dist:
    """A length distribution in tokens: fixed, uniform on [lo, hi], or log-normal with a given
    median and sigma (of the logarithm), clipped to [lo, hi]."""

    kind: str
    lo: int
    hi: int
    median: float = 0.0
    sigma: float = 0.0

    def sample(self, rng: random.Random) -> int:
        if self.kind == "fixed":
            return self.lo
        if self.kind == "uniform":
            return rng.randint(self.lo, self.hi)
        x = round(self.median * math.exp(self.sigma * rng.gauss(0.0, 1.0)))
        return min(self.hi, max(self.lo, x))

    @property
    def mean(self) -> float:
        """The mean before clipping (log-normal: median x exp(sigma^2 / 2))."""
        if self.kind == "fixed":
            return float(self.lo)
        if self.kind == "uniform":
            return (self.lo + self.hi) / 2
        return self.median * math.exp(self.sigma ** 2 / 2)

    def describe(self) -> str:
        if self.kind == "fixed":
            return f"{self.lo:,}"
        if self.kind == "uniform":
            return f"uniform {self.lo:,} to {self.hi:,}"
        return (f"log-normal, median {self.median:,.0f}, sigma {self.sigma:g}, clipped to "
                f"{self.lo:,}-{self.hi:,}")


def fixed(n: int, what: str = "length") -> Dist:
    n = check_int(what, n, 1, MAX_TOKENS)
    return Dist(kind="fixed", lo=n, hi=n)


def uniform(lo: int, hi: int, what: str = "length") -> Dist:
    lo = check_int(f"{what} (lowest)", lo, 1, MAX_TOKENS)
    hi = check_int(f"{what} (highest)", hi, lo, MAX_TOKENS)
    return Dist(kind="uniform", lo=lo, hi=hi)


def lognormal(median: float, sigma: float, hi: int, lo: int = 1, what: str = "length") -> Dist:
    median = check_float(f"{what} (median)", median, 1.0, MAX_TOKENS)
    sigma = check_float(f"{what} (sigma)", sigma, 0.0, 3.0)
    lo = check_int(f"{what} (lowest)", lo, 1, MAX_TOKENS)
    hi = check_int(f"{what} (clip)", hi, max(lo, math.ceil(median)), MAX_TOKENS)
    return Dist(kind="lognormal", lo=lo, hi=hi, median=median, sigma=sigma)


@dataclass(frozen=True, kw_only=True)
class Workload:
    """``requests`` requests, arriving as a Poisson process of ``rate`` per second (math.inf:
    all at time 0; the first at time 0 either way, as vLLM's benchmark sends them), or from a
    closed loop of ``users`` who each send their next request the moment the last one ends."""

    requests: int
    prompt: Dist
    output: Dist
    rate: float | None = None
    users: int | None = None
    prefix_share: float = 0.0  # fraction of each prompt that is a system prompt shared by all
    seed: int = 0

    def __post_init__(self):
        check_int("requests", self.requests, 1, MAX_REQUESTS)
        if (self.rate is None) == (self.users is None):
            raise ValueError("give either an arrival rate (requests/s) or a number of users "
                             "(a closed loop), not both and not neither")
        if self.rate is not None and not (isinstance(self.rate, (int, float))
                                          and not isinstance(self.rate, bool)
                                          and (self.rate == math.inf or
                                               0 < self.rate <= 1e6)):
            raise ValueError(f"the arrival rate must be above 0 and at most 1,000,000 "
                             f"requests/s, or inf (all at once), got {self.rate!r}")
        if self.users is not None:
            check_int("users", self.users, 1, MAX_REQUESTS)
        check_float("prefix-sharing fraction", self.prefix_share, 0.0, 1.0)
        check_int("seed", self.seed, 0, 2**31)

    @property
    def longest(self) -> int:
        return self.prompt.hi + self.output.hi


# -- the engine and its clock --------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Setup:
    """One GPU's pool and clock (per GPU at tensor parallel ``tp``)."""

    model: str
    num_blocks: int  # usable blocks (vLLM's null block taken out)
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    prefix_caching: bool
    tp: int
    kv_dtype: str
    weight_read_bytes: int  # per GPU, a step of one token (dense; MoE: the experts it touches)
    kv_read_bytes_per_token: int  # per GPU, every layer
    linear_flops_per_token: float  # 2 x active params / tp
    # 2 x q_heads x (qk_dim + v_dim), all layers, / tp: a pair of a prefill chunk
    attention_flops_per_pair: float
    decode_flops_per_pair: float  # a decode token's pair: the same, MLA's absorbed, / tp
    bandwidth_gbs: float  # peak
    bw_share: float
    peak_tflops: float
    mfu: float
    kv_pool_bytes: int
    block_bytes: int
    vllm_version: str
    max_model_len: int
    notes: tuple[str, ...] = ()
    # vLLM's KV-cache groups, as blocks a request holds (every group draws on one pool):
    # full_groups keep every token; slide_groups a window of `window` tokens (vLLM frees the
    # blocks that leave it); state_blocks are a recurrent state's, taken at admission.
    full_groups: int = 1
    slide_groups: int = 0
    window: int = 0
    state_blocks: int = 0
    slide_read_bytes_per_token: int = 0  # per GPU, the sliding layers (kv_read_...: the rest)
    slide_flops_per_pair: float = 0.0
    state_read_bytes: int = 0  # per GPU, every recurrent state of one request, read each step
    # vLLM's start-up line for max_model_len: every request at its full length, windows charged
    # window - 1 + the tokens in flight ("Maximum concurrency for N tokens per request")
    logged_concurrency: float = 0.0
    logged_blocks_per_request: int = 0
    pool_blocks: int = 0  # the pool's blocks as vLLM counts them (num_blocks: the null block in)
    # What a real engine adds (kvcalc.perf.calibration; all zero for the ideal bound): a fixed cost
    # per step, tensor parallelism's all-reduces (``allreduces`` per step, each a latency plus
    # 2 (tp - 1) / tp x tokens x ``allreduce_bytes_per_token`` over ``tp_link_gbs``), and a
    # serving stack's time before the engine sees a request (added to its TTFT and E2EL).
    step_overhead_s: float = 0.0
    allreduces: int = 0
    allreduce_latency_s: float = 0.0
    allreduce_bytes_per_token: int = 0
    tp_link_gbs: float | None = None
    api_overhead_s: float = 0.0
    speed: str = "ideal bound"  # the step model's name (kvcalc.perf.calibration.StepModel.name)
    # Weights a step of n tokens reads (whole model, before the TP split): every weight but the
    # input embedding and the routed experts, plus n gathered embedding rows (at most the table),
    # plus the experts n tokens touch (table indexed by n, its last entry for more).
    _fixed_read: int = field(default=0, repr=False)
    _embed: tuple = field(default=(0, 0), repr=False)  # (table bytes, row bytes); 0: not gathered
    _moe_reads: tuple = field(default=(), repr=False)

    @property
    def bytes_per_s(self) -> float:
        return self.bandwidth_gbs * self.bw_share * GB

    @property
    def flops_per_s(self) -> float:
        return self.peak_tflops * 1e12 * self.mfu

    @property
    def ridge_flops_per_byte(self) -> float:
        return self.flops_per_s / self.bytes_per_s

    def weights_read(self, tokens: int) -> int:
        """Weight bytes one GPU reads in a step of ``tokens`` new tokens."""
        if not self._fixed_read:
            return self.weight_read_bytes  # weights given as one number: read whole
        table, row = self._embed
        total = self._fixed_read + min(table, tokens * row)
        if self._moe_reads:
            total += self._moe_reads[min(tokens, len(self._moe_reads) - 1)]
        return cdiv(total, self.tp)

    def fixed_seconds(self, tokens: int) -> float:
        """What a step of ``tokens`` new tokens costs beyond max(compute, memory): the fixed
        overhead and the all-reduces (kvcalc.perf.calibration.allreduce_seconds)."""
        t = self.step_overhead_s
        if self.allreduces and tokens:
            wire = 0.0
            if self.tp_link_gbs:
                wire = (2 * (self.tp - 1) / self.tp * tokens * self.allreduce_bytes_per_token
                        / (self.tp_link_gbs * GB))
            t += self.allreduces * (self.allreduce_latency_s + wire)
        return t

    @property
    def multi_group(self) -> bool:
        """Whether a request holds blocks of more than one kind (windows or states)."""
        return bool(self.slide_groups or self.state_blocks)

    def blocks_held(self, allocated: int, skipped: int = 0) -> int:
        """Blocks a request holds with ``allocated`` tokens given slots and ``skipped`` blocks
        of each sliding group freed: cdiv(allocated, block) in every token group, less the
        freed ones, plus its states."""
        if not allocated:
            return 0
        n = cdiv(allocated, self.block_size)
        return (self.full_groups + self.slide_groups) * n - self.slide_groups * skipped \
            + self.state_blocks

    def skipped(self, computed: int) -> int:
        """Blocks of one sliding group vLLM has freed once ``computed`` tokens are in the cache
        (SlidingWindowManager.get_num_skipped_tokens: computed - window + 1, in whole blocks)."""
        if not self.slide_groups or computed < self.window:
            return 0
        return (computed - self.window + 1) // self.block_size

    def step_seconds(self, tokens: int, read_tokens: int, pairs: int, slide_read: int = 0,
                     slide_pairs: int = 0, scheduled: int = 0, decode_pairs: int = 0) -> float:
        """One step of ``tokens`` new tokens whose requests read ``read_tokens`` cached tokens in
        all and attend to ``pairs`` (query, key) pairs of prefill chunks and ``decode_pairs``
        of decode tokens in the full-attention layers (an MLA decode pair is absorbed), and
        ``slide_read`` / ``slide_pairs`` in the sliding ones, ``scheduled`` requests reading
        their recurrent states: max(compute, memory)."""
        compute = (self.linear_flops_per_token * tokens
                   + self.attention_flops_per_pair * pairs
                   + self.decode_flops_per_pair * decode_pairs
                   + self.slide_flops_per_pair * slide_pairs) / self.flops_per_s
        memory = (self.weights_read(tokens)
                  + self.kv_read_bytes_per_token * read_tokens
                  + self.slide_read_bytes_per_token * slide_read
                  + self.state_read_bytes * scheduled) / self.bytes_per_s
        return (compute if compute > memory else memory) + self.fixed_seconds(tokens)


# Complex by design (C901): refuses by name each model the simulator cannot serve, then derives the
# Setup's fields.
def setup(  # noqa: C901
        spec: ModelSpec, w: Weights, *, total_bytes: int, bandwidth_gbs: float,
        peak_tflops: float | None, max_model_len: int, kv_dtype: str = "bf16",
        scales: bool = False, tp: int = 1, pp: int = 1,
        block_size: int = _vllm.DEFAULT_BLOCK_SIZE,
        gpu_mem_util: float | None = None, reserve_bytes: int = DEFAULT_RESERVE_BYTES,
        weights_bytes: int | None = None, max_num_seqs: int | None = None,
        max_num_batched_tokens: int | None = None, prefix_caching: bool = True,
        bw_share: float = 1.0, mfu: float = DEFAULT_MFU, vllm_version: str | None = None,
        gpu_name: str | None = None, speed: StepModel | None = None,
        tp_link_gbs: float | None = None, kv_pool_bytes: int | None = None) -> Setup:
    """The pool (vLLM's arithmetic, ``kvcalc.engines.budget``) and the step-time constants for
    ``spec`` on one GPU of ``total_bytes``; ValueError naming what to change when it cannot run.

    ``speed`` (kvcalc.perf.calibration: the ideal bound, the calibrated estimate or a user's own
    coefficients) times the steps; without it ``bw_share`` and ``mfu`` do, and nothing is
    added (the ideal bound at that share). ``tp_link_gbs`` is the GPU's link for the
    all-reduces (GB/s one way). ``kv_pool_bytes`` gives the pool's size instead of vLLM's
    arithmetic (the reserve is then what is left beside the weights)."""
    tp = check_int("tensor parallel size", tp, 1, 64)
    pp = check_int("pipeline parallel size", pp, 1, 64)
    if pp != 1:
        raise ValueError("the serving simulator models tensor parallelism only: set pipeline "
                         "parallel to 1")
    if peak_tflops is None:
        raise ValueError("the GPU's dense peak (TFLOPS) is needed to time prefill")
    peak_tflops = check_float("peak TFLOPS", peak_tflops, 0.0, 1e6, lo_open=True)
    bandwidth_gbs = check_float("bandwidth (GB/s)", bandwidth_gbs, 0.0, 1e7, lo_open=True)
    if speed is not None:
        bw_share, mfu = speed.bw_share, speed.mfu
    bw_share = check_float("achieved share of peak bandwidth", bw_share, 0.0, 1.0, lo_open=True)
    mfu = check_float("MFU", mfu, 0.0, 1.0, lo_open=True)
    max_model_len = check_int("longest request (tokens)", max_model_len, 2, MAX_CONTEXT)
    if spec.params is None:
        raise ValueError(f"{spec.name}: kvcalc cannot count this model's parameters "
                         f"({spec.params_error or 'unknown family'}), and prefill's compute "
                         "needs them; pick a registry model")
    if max_model_len > spec.max_context:
        raise ValueError(f"the longest request ({max_model_len:,} tokens: longest prompt + "
                         f"longest output) is beyond {spec.name}'s limit of "
                         f"{spec.max_context:,} tokens; shorten the prompt or the output")
    dtype = get_dtype(kv_dtype, KV_DTYPES)
    layers = [lay for stage in stage_layers(spec, tp, 1) for lay in stage]  # validates the TP split
    sdtype = get_dtype("bf16")  # the budget's state format (vLLM's 'auto' for a BF16 model)
    big = 1_000_003
    odd = sorted({lay.label for lay in layers
                  if not (lay.kind in ("full", "mla", "sliding", "state")
                          or not (lay.stores_tokens or lay.state_elements
                                  or lay.read_bytes(big, dtype, scales)))
                  or lay.fixed_kv_bytes(dtype, scales)
                  or (lay.kind in ("full", "mla") and lay.read_bytes(big, dtype, scales)
                      != big * lay.read_bytes(1, dtype, scales))})
    if odd:
        raise ValueError(f"{spec.name} has {', '.join(odd)} layers; the serving simulator "
                         "handles full attention, MLA, sliding windows and recurrent states. "
                         "Pick another model")
    windows = sorted({lay.window for lay in layers if isinstance(lay, SlidingWindow)})
    if len(windows) > 1:
        raise ValueError(f"{spec.name} has sliding windows of {', '.join(map(str, windows))} "
                         "tokens; the serving simulator handles one window size. Pick another "
                         "model")
    pages = {lay.bytes_per_token(dtype, scales) for lay in layers if lay.stores_tokens}
    if len(pages) > 1:
        raise ValueError(f"{spec.name}'s layers cache different bytes per token "
                         f"({', '.join(f'{b:,}' for b in sorted(pages))} B), so vLLM gives "
                         "its groups blocks of different sizes; the serving simulator handles "
                         "one block size. Pick another model")
    wbytes = w.bytes if weights_bytes is None else check_int("weights (bytes)", weights_bytes,
                                                               0, 2**60)
    if kv_pool_bytes is not None:
        # A pool of a given size: the reserve is what vLLM's requested memory leaves beside the
        # weights (per GPU) and the pool.
        kv_pool_bytes = check_int("KV pool (bytes)", kv_pool_bytes, 1, 2**50)
        util = default_gpu_mem_util("vllm", vllm_version) if gpu_mem_util is None else gpu_mem_util
        reserve_bytes = math.ceil(total_bytes * util) - math.ceil(wbytes / tp) - kv_pool_bytes
        if reserve_bytes < 0:
            raise ValueError(f"a KV pool of {kv_pool_bytes / 2**30:,.2f} GiB does not fit beside "
                             f"the weights ({wbytes / tp / 2**30:,.2f} GiB per GPU) in "
                             f"{util:g} of the GPU's {total_bytes / 2**30:,.2f} GiB; give a "
                             "smaller pool or a larger gpu_memory_utilization")
    b = budget(spec, total_bytes=total_bytes, context=max_model_len, weights_bytes=wbytes,
               gpu_mem_util=gpu_mem_util, reserve_bytes=reserve_bytes, block_size=block_size,
               kv_dtype=dtype.name, scales=scales, tp=tp, engine="vllm",
               find_max_context=False, vllm_version=vllm_version,
               max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
               gpu_name=gpu_name)
    if b.kv_pool_bytes <= 0:
        raise ValueError(f"{spec.name} does not fit: its weights and the reserve take more than "
                         "the memory the engine may use; use tensor parallel, smaller weights "
                         "or a larger GPU")
    if b.startup_error:
        raise ValueError("vLLM would refuse to start: " + b.startup_error.split(". ")[0]
                         + ". Lower the longest prompt + output, or give the cache more memory")
    bs = b.effective_block_size or b.block_size
    version, mns = b.vllm_version, b.max_num_seqs
    if version is None or mns is None:  # a vLLM budget states both
        raise RuntimeError(f"the vLLM budget of {spec.name} has no version or max_num_seqs")
    mnbt = (max_num_batched_tokens if max_num_batched_tokens is not None else
            _vllm.default_max_num_batched_tokens(version, total_bytes, gpu_name))
    p = _vllm.predict(spec, available_bytes=b.kv_pool_bytes, max_model_len=max_model_len,
                      block_size=block_size, tp=tp, kv_dtype=dtype.name, scales=scales,
                      vllm_version=version, max_num_batched_tokens=mnbt, gpu_name=gpu_name)
    kinds = [g.kind for g in p.groups]
    full_groups = sum(k in ("full", "mla") for k in kinds)
    slide_groups = kinds.count("sliding")
    state_blocks = sum(g.blocks_per_request for g in p.groups if g.kind == "state")
    if not full_groups + slide_groups:
        raise ValueError(f"{spec.name} keeps no per-token cache; the serving simulator needs "
                         "an attention layer. Pick another model")
    mnbt = check_int("max_num_batched_tokens", mnbt, 1, 10**7)
    if mnbt < mns:
        raise ValueError(f"max_num_batched_tokens ({mnbt:,}) must be at least max_num_seqs "
                         f"({mns:,}), as vLLM requires")
    usable = b.num_blocks - _vllm.fact("null_block", version)
    kv_pt = sum(lay.read_bytes(1, dtype, scales) for lay in layers)
    # One pair's FLOPs in each phase (roofline.attention_flops per layer: MLA absorbed at
    # decode), the sliding layers apart: they read and attend at most a window.
    def pair_flops(sliding: bool, decode: bool) -> float:
        return sum(lay.attention_flops(0, 1, decode) for lay in spec.layers
                   if (lay.kind == "sliding") == sliding) / tp

    per_pair = pair_flops(False, False)
    per_decode_pair = pair_flops(False, True)
    slide_pair = pair_flops(True, False)
    slide_pt = sum(lay.read_bytes(1, dtype, scales) for lay in layers if lay.kind == "sliding")
    kv_pt -= slide_pt
    state_read = sum(lay.state_bytes(sdtype) for lay in layers)
    fixed_read, embed = 0, (0, 0)
    moe: tuple[int, ...] = ()
    if weights_bytes is None:
        # Weights.read_per_step, split into its parts so a step of n tokens costs no call:
        # the non-expert weights less the input embedding, n of its rows, the touched experts.
        embed = (w.input_embedding_bytes, w.embedding_row_bytes)
        fixed_read = w.dense_bytes - w.input_embedding_bytes
        if spec.moe is not None:
            # Experts touched by a step of n tokens (uniform routing), until every expert is.
            table, n = [0], 1
            while True:
                table.append(w.read_per_step(spec, n) - fixed_read - min(embed[0], n * embed[1]))
                if table[-1] >= w.expert_bytes or n >= mnbt:
                    break
                n += 1
            moe = tuple(table)
        wread = cdiv(w.read_per_step(spec, 1), tp)
    else:
        wread = math.ceil(wbytes / tp)
    extra: dict[str, Any] = {}
    if speed is not None:
        charge = speed.allreduce and tp > 1
        if charge and not spec.hidden_size:
            raise ValueError(f"{spec.name}: the all-reduce time needs the hidden size, which "
                             "the config does not give")
        extra = dict(step_overhead_s=speed.step_overhead_s,
                     allreduces=ALLREDUCES_PER_LAYER * spec.num_layers if charge else 0,
                     allreduce_latency_s=speed.allreduce_latency_s,
                     allreduce_bytes_per_token=(spec.hidden_size or 0) * ACTIVATION_BYTES,
                     tp_link_gbs=tp_link_gbs, api_overhead_s=speed.api_overhead_s,
                     speed=speed.name)
    notes = [f"pool: vLLM {version}'s arithmetic at gpu_memory_utilization {b.gpu_mem_util:g}, "
             f"reserve {reserve_bytes / 2**30:g} GiB, blocks of {bs} tokens"
             if kv_pool_bytes is None else
             f"pool: {kv_pool_bytes / 2**30:,.2f} GiB as given, blocks of {bs} tokens"]
    if _vllm.fact("null_block", version):
        notes.append("one block is vLLM's null block and holds no tokens")
    if slide_groups:
        notes.append(f"{slide_groups} sliding-window group(s) of {windows[0]:,} tokens: a "
                     "request's blocks that leave the window go back to the pool as it "
                     "decodes (vLLM's remove_skipped_blocks); when a prefill ends, up to one "
                     "step before vLLM frees them")
    if state_blocks:
        notes.append(f"recurrent states: {state_blocks} block(s) per request, taken at "
                     "admission, read once a step")
    return Setup(model=spec.name, num_blocks=usable, block_size=bs, max_num_seqs=mns,
                 max_num_batched_tokens=mnbt, prefix_caching=bool(prefix_caching), tp=tp,
                 kv_dtype=dtype.name, weight_read_bytes=wread, kv_read_bytes_per_token=kv_pt,
                 linear_flops_per_token=2.0 * spec.active_params / tp,
                 attention_flops_per_pair=per_pair, decode_flops_per_pair=per_decode_pair,
                 bandwidth_gbs=bandwidth_gbs,
                 bw_share=bw_share, peak_tflops=peak_tflops, mfu=mfu,
                 kv_pool_bytes=b.kv_pool_bytes, block_bytes=b.block_bytes, vllm_version=version,
                 max_model_len=max_model_len, notes=tuple(notes), full_groups=full_groups,
                 slide_groups=slide_groups, window=windows[0] if windows else 0,
                 state_blocks=state_blocks, slide_read_bytes_per_token=slide_pt,
                 logged_concurrency=b.max_concurrency, pool_blocks=b.num_blocks,
                 logged_blocks_per_request=b.blocks_per_request,
                 slide_flops_per_pair=slide_pair, state_read_bytes=state_read,
                 _fixed_read=fixed_read, _embed=embed, _moe_reads=moe, **extra)


# -- results -------------------------------------------------------------------------------------

def percentile(values: list[float], p: float, weights: list[int] | None = None) -> float:
    """numpy.percentile's default (linear interpolation between closest ranks). With
    ``weights``, each value counts that many times (values sorted ascending)."""
    if weights is None:
        xs = sorted(values)
        n = len(xs)
        if n == 0:
            return 0.0
        pos = (n - 1) * p / 100.0
        i = int(math.floor(pos))
        if i + 1 >= n:
            return xs[-1]
        return xs[i] + (xs[i + 1] - xs[i]) * (pos - i)
    n = sum(weights)
    if n == 0:
        return 0.0
    pos = (n - 1) * p / 100.0
    i = int(math.floor(pos))
    cum, below = [], 0
    for c in weights:
        below += c
        cum.append(below)

    def at(k):  # the k-th smallest (0-based)
        return values[bisect.bisect_right(cum, k)]

    if i + 1 >= n:
        return at(n - 1)
    return at(i) + (at(i + 1) - at(i)) * (pos - i)


@dataclass(frozen=True, kw_only=True)
class SimResult:
    requests: int
    duration_s: float
    output_tokens: int
    prompt_tokens: int
    ttft_mean_s: float
    ttft_p50_s: float
    ttft_p99_s: float
    tpot_mean_s: float
    tpot_p50_s: float
    tpot_p99_s: float
    itl_p50_s: float
    itl_p99_s: float
    itl_mean_s: float
    e2el_mean_s: float
    e2el_p50_s: float
    e2el_p99_s: float
    output_tokens_per_s: float  # the whole deployment (tp GPUs)
    request_throughput: float  # requests / duration
    total_tokens_per_s: float  # (prompt + output tokens) / duration
    output_tokens_per_s_per_gpu: float
    output_tokens_per_s_per_user: float  # 1 / median TPOT
    preemptions: int
    prefix_hit_rate: float
    kv_utilization_mean: float  # blocks held by running requests / usable blocks, time-weighted
    kv_utilization_peak: float
    mean_in_system: float  # time-average of requests arrived and not finished
    max_batch: int
    binding_limit: str
    steps: int
    num_blocks: int
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    tp: int
    kv_dtype: str
    utilization_series: tuple[tuple[float, float], ...] = ()  # (time s, share of blocks used)
    batch_series: tuple[tuple[float, int], ...] = ()  # (time s, running requests)
    ttft_s: tuple[float, ...] = ()  # per request, in arrival order
    e2el_s: tuple[float, ...] = ()
    notes: tuple[str, ...] = ()
    kv_wait_steps: int = 0  # steps in which a waiting request found too few free blocks
    warmup_requests: int = 0  # sent before the first request finished
    ttft_p50_steady_s: float | None = None  # TTFT of the others (None: every request warm-up)
    ttft_p99_steady_s: float | None = None
    mean_batch: float = 0.0  # running requests, time-weighted over the whole run
    steady_batch: float | None = None  # the same from the first finish to the last admission

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("utilization_series", "batch_series", "ttft_s", "e2el_s"):
            d.pop(k)
        d["notes"] = list(self.notes)
        return d

    def cli_dict(self) -> dict:
        """The keys of ``python -m kvcalc simulate --json``."""
        return {k: getattr(self, k) for k in CLI_KEYS}


class _Req:
    __slots__ = ("i", "arrival", "prompt", "output", "shared", "gen", "computed", "target",
                 "held", "seq", "first", "last", "finish", "dbase", "gbase", "done_step",
                 "bucket", "skip", "win", "epoch")

    def __init__(self, i, arrival, prompt, output, shared):
        self.i = i
        self.arrival = arrival
        self.prompt = prompt
        self.output = output
        self.shared = shared  # full blocks of the shared system prompt in this prompt
        self.gen = 0  # output tokens so far (exact while waiting or in prefill)
        self.computed = 0  # tokens in the cache (exact while in prefill)
        self.target = prompt  # tokens the current prefill must compute
        self.held = 0  # leading blocks that belong to the shared chain
        self.seq = 0  # admission order
        self.first = -1.0
        self.last = -1.0
        self.finish = -1.0
        self.dbase = 0  # decoding: tokens in cache at the start of step j = dbase + j
        self.gbase = 0  # decoding: output tokens before step j = gbase + j
        self.done_step = -1
        self.bucket = -1
        self.skip = 0  # blocks of each sliding group freed (they left the window)
        self.win = 0  # decoding: 0 reads less than the window, 1 a whole window, 2 frees too
        self.epoch = 0  # decode stints started (stale window events are skipped)


# Complex by design (C901): the scheduler loop and its step closures; issue 25 item 2 splits it into
# named steps.
def simulate(s: Setup, wl: Workload, *, series: bool = True) -> SimResult:  # noqa: C901
    """Run ``wl`` on ``s`` to the last request; deterministic for a seed."""
    if wl.longest > s.max_model_len:
        raise ValueError(f"the workload's longest request ({wl.longest:,} tokens) is longer "
                         f"than the setup's max_model_len ({s.max_model_len:,})")
    if wl.prefix_share and s.multi_group:
        raise ValueError("prefix sharing is simulated for models whose every layer keeps all "
                         "tokens; this model has sliding windows or recurrent states")
    rng = random.Random(wl.seed)
    bs = s.block_size
    nreq = wl.requests
    # vLLM's KV-cache groups: gt token groups take a block every bs tokens; gs of them are
    # sliding windows of W tokens, which give one back every bs tokens once past the window;
    # every request also holds st state blocks. One group of full attention: gt = 1, gs = st = 0.
    gt = s.full_groups + s.slide_groups
    gs, st, W = s.slide_groups, s.state_blocks, s.window
    multi = gt > 1 or gs > 0 or st > 0
    reqs: list[_Req] = []

    def make(i: int, t: float) -> _Req:
        p = wl.prompt.sample(rng)
        o = wl.output.sample(rng)
        shared = int(wl.prefix_share * p) // bs if s.prefix_caching else 0
        r = _Req(i, t, p, o, shared)
        reqs.append(r)
        return r

    # A request reaches the engine the serving stack's time after the client sends it (HTTP,
    # tokenizer, template: s.api_overhead_s, 0 for the ideal bound); r.arrival is that engine
    # time, and the client's TTFT and E2EL add the stack's time back.
    api = s.api_overhead_s
    pending: deque[_Req] = deque()  # arrivals not yet due, in time order
    if wl.rate is not None:
        t = 0.0
        for i in range(nreq):
            pending.append(make(i, t + api))
            if wl.rate != math.inf:
                t += rng.expovariate(wl.rate)
    elif wl.users is not None:  # a closed loop (Workload gives a rate or users, never both)
        for i in range(min(wl.users, nreq)):
            pending.append(make(i, api))
    sent = len(pending)

    waiting: deque[_Req] = deque()
    running: dict[_Req, None] = {}  # admission order
    prefilling: list[_Req] = []
    buckets: list[dict[_Req, None]] = [{} for _ in range(bs)]
    finish_at: dict[int, list[_Req]] = {}
    n_dec = 0
    dec_sum = 0  # sum of dbase over decoding requests
    # Sliding windows: decoding requests by where their context is (r.win), so that a step's
    # reads and frees are counts, as the growth is: below the window (how many, sum of dbase),
    # and those past it that free a block, by bucket; wheap holds when each moves on.
    n_below = 0
    below_sum = 0
    past_cnt = [0] * bs
    wheap: list[tuple[int, int, int, _Req]] = []  # (step, order, epoch, request)
    worder = 0
    kv_waits = 0  # steps in which a request waited for blocks

    total = s.num_blocks
    free_plain = total
    chain_ref: list[int] = []  # reference count of each shared-prefix block
    chain_len = 0  # shared-prefix blocks resident
    chain_hot = 0  # of which held by a running request (a prefix of the chain)
    seq_counter = 0
    preemptions = 0
    hit_tokens = 0
    query_tokens = 0
    t = 0.0
    step = 0
    itl_steps: list[tuple[float, int]] = []  # (step time, decode tokens in it)
    itl_extra: list[float] = []  # gaps across a preemption
    area_in_system = 0.0
    area_used = 0.0
    in_system = 0
    max_batch = 0
    at_max: dict[str, int] = {}
    done = 0
    peak_used = 0

    def take(n: int) -> None:
        nonlocal free_plain, chain_len
        if free_plain >= n:
            free_plain -= n
            return
        n -= free_plain
        free_plain = 0
        chain_len -= n  # evict cached shared blocks, deepest first
        assert chain_len >= chain_hot

    def release(r: _Req, blocks: int) -> None:
        nonlocal free_plain, chain_hot
        free_plain += blocks - r.held
        if r.held:
            for k in range(r.held):
                chain_ref[k] -= 1
            while chain_hot and chain_ref[chain_hot - 1] == 0:
                chain_hot -= 1
            r.held = 0

    def stop_decoding(r: _Req) -> None:
        nonlocal n_dec, dec_sum, n_below, below_sum
        n_dec -= 1
        dec_sum -= r.dbase
        if gs:
            if r.win == 0:
                n_below -= 1
                below_sum -= r.dbase
            elif r.win == 2:
                past_cnt[r.bucket] -= 1
            r.epoch += 1  # its pending window events are stale
        del buckets[r.bucket][r]
        r.bucket = -1
        r.done_step = -1

    def start_decoding(r: _Req, j: int) -> None:
        """``r`` decodes from step j + 1 on, with r.computed tokens in its cache."""
        nonlocal n_dec, dec_sum, n_below, below_sum, free_plain, worder
        r.dbase = r.computed - (j + 1)
        r.gbase = r.gen - (j + 1)
        b = r.dbase % bs  # needs a block at step k when (dbase + k) % bs == 0
        r.bucket = b
        buckets[b][r] = None
        n_dec += 1
        dec_sum += r.dbase
        if gs:
            # Blocks that left the window while the prompt was computed go back now (vLLM
            # frees them at the next step's start); later ones one at a time, by bucket.
            c0 = r.computed
            freed = s.skipped(c0 - 1)
            free_plain += gs * (freed - r.skip)
            r.skip = freed
            if c0 >= W:
                r.win = 2
                past_cnt[b] += 1
            else:
                r.win = 1 if c0 == W - 1 else 0
                if r.win == 0:
                    n_below += 1
                    below_sum += r.dbase
                    worder += 1
                    heapq.heappush(wheap, (W - 1 - r.dbase, worder, r.epoch, r))
                worder += 1
                heapq.heappush(wheap, (W - r.dbase, worder, r.epoch, r))

    def window_moves(k: int) -> None:
        """Decoding requests whose context reaches the window (W - 1 tokens: it reads a whole
        window) or passes it (W: it frees a block every bs tokens) at step k."""
        nonlocal n_below, below_sum
        while wheap and wheap[0][0] <= k:
            _, _, epoch, r = heapq.heappop(wheap)
            if epoch != r.epoch or r.bucket < 0:
                continue
            if r.win == 0:
                r.win = 1
                n_below -= 1
                below_sum -= r.dbase
            elif r.win == 1:
                r.win = 2
                past_cnt[r.bucket] += 1

    def preempt_newest(j: int) -> _Req:
        nonlocal preemptions
        victim = next(reversed(running))
        del running[victim]
        blocks = None
        if victim.bucket >= 0:  # decoding: its state at the start of step j
            victim.computed = victim.dbase + j
            victim.gen = victim.gbase + j
            blocks = cdiv(victim.computed, bs) + (victim.bucket == grown)
            if multi:  # every group's blocks, less what left the window this step
                blocks = gt * blocks - gs * s.skipped(victim.computed) + st
            stop_decoding(victim)
        else:
            prefilling.remove(victim)
            if multi:
                blocks = s.blocks_held(victim.computed, victim.skip)
        release(victim, cdiv(victim.computed, bs) if blocks is None else blocks)
        victim.skip = 0
        victim.computed = 0
        victim.target = victim.prompt + victim.gen
        waiting.appendleft(victim)
        preemptions += 1
        return victim

    lin, a1 = s.linear_flops_per_token, s.decode_flops_per_pair / s.flops_per_s
    m1 = s.kv_read_bytes_per_token / s.bytes_per_s
    a1s = s.slide_flops_per_pair / s.flops_per_s
    m1s = s.slide_read_bytes_per_token / s.bytes_per_s
    mst = s.state_read_bytes / s.bytes_per_s
    fps, bps = s.flops_per_s, s.bytes_per_s
    area_run = 0.0  # time integral of the running batch
    run_at_first_finish = run_at_last_admit = 0.0
    t_first_finish = t_last_admit = -1.0
    trace: list[tuple[float, int, int]] = []  # (step start, blocks used, running requests)
    fin_heap: list[int] = []  # steps at which some request may finish (stale ones skipped)
    while done < nreq:
        if n_dec and not waiting and not prefilling:
            # A stretch of decode-only steps before the next finish or arrival: the same work
            # as the full step below with nothing to admit, schedule or free, done lean.
            while fin_heap and fin_heap[0] not in finish_at:
                heapq.heappop(fin_heap)
            next_finish = fin_heap[0] if fin_heap else step + 1
            arrival = pending[0].arrival if pending else math.inf
            nrun = n_dec
            a0 = lin * n_dec / fps
            m0 = s.weights_read(n_dec) / bps + mst * n_dec
            fx = s.fixed_seconds(n_dec)  # overhead and all-reduces: the same every step here
            counted = nrun >= max_batch
            if nrun > max_batch:
                max_batch = nrun
                at_max = {}
            streak = 0
            while step + 1 < next_finish and arrival > t:
                k = step + 1
                nb = gt * len(buckets[(-k) % bs])
                if gs:
                    window_moves(k)
                    back = gs * past_cnt[(W - 1 - k) % bs]  # blocks that leave the window
                    if nb > free_plain + back:
                        break
                    free_plain += back
                elif nb > free_plain:
                    break  # the full step handles evictions and preemptions
                free_plain -= nb
                ctx = dec_sum + n_dec * (k + 1)
                dt = a0 + a1 * ctx
                mem = m0 + m1 * ctx
                if gs:
                    ctx_w = below_sum + n_below * (k + 1) + W * (n_dec - n_below)
                    dt += a1s * ctx_w
                    mem += m1s * ctx_w
                if mem > dt:
                    dt = mem
                dt += fx
                used = total - free_plain - (chain_len - chain_hot)
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
            if streak:
                used = total - free_plain - (chain_len - chain_hot)
                if used > peak_used:
                    peak_used = used
                if counted:
                    at_max["arrivals"] = at_max.get("arrivals", 0) + streak
        step += 1
        j = step
        # 1. arrivals due by now (jump over idle time)
        if not running and not waiting and pending and pending[0].arrival > t:
            t = pending[0].arrival
        while pending and pending[0].arrival <= t:
            r = pending.popleft()
            waiting.append(r)
            in_system += 1
            area_in_system += t - r.arrival  # it was in the system since it arrived
        budget_left = s.max_num_batched_tokens
        preempted = False
        grown = -1  # set once this step's decoding requests hold their new blocks
        tokens = 0
        read_tokens = 0
        pairs = 0
        decode_pairs = 0
        # 2. decodes: every decoding request takes one token; some need a new block (one in
        # each token group); past a window, a sliding group's oldest block is freed first
        if gs and n_dec:
            window_moves(j)
            free_plain += gs * past_cnt[(W - 1 - j) % bs]
        bucket = buckets[(-j) % bs] if n_dec else None
        if bucket:
            need = gt * len(bucket)
            if need <= free_plain + chain_len - chain_hot:
                take(need)
            else:
                for r in sorted(bucket, key=lambda q: q.seq):
                    if r not in running:
                        continue
                    while free_plain + chain_len - chain_hot < gt:
                        preempt_newest(j)
                        preempted = True
                        if r not in running:
                            break
                    if r in running:
                        take(gt)
        grown = (-j) % bs  # decoding requests of this bucket now hold one more block
        budget_left -= n_dec
        # 3. chunks of prompts already admitted
        chunks: list[tuple[_Req, int]] = []
        for r in list(prefilling):
            if budget_left <= 0:
                break
            if r not in running:
                continue
            n = min(r.target - r.computed, budget_left)
            need = cdiv(r.computed + n, bs) - cdiv(r.computed, bs)
            if multi:
                need *= gt
                if gs:  # what left the window with the last chunk goes back first
                    freed = s.skipped(r.computed)
                    free_plain += gs * (freed - r.skip)
                    r.skip = freed
            while need > free_plain + chain_len - chain_hot and r in running:
                preempt_newest(j)
                preempted = True
            if r not in running:
                continue
            take(need)
            chunks.append((r, n))
            budget_left -= n
        # 4. admissions
        reason = None
        while waiting:
            if preempted:
                reason = "kv_pool"
                break
            if len(running) >= s.max_num_seqs:
                reason = "max_num_seqs"
                break
            if budget_left <= 0:
                reason = "max_num_batched_tokens"
                break
            r = waiting[0]
            hits = min(chain_len, r.shared, (r.target - 1) // bs) if s.prefix_caching else 0
            start = hits * bs
            n = min(r.target - start, budget_left)
            need = cdiv(start + n, bs) - hits
            if multi:
                need = s.blocks_held(start + n)
            if need > free_plain + chain_len - max(chain_hot, hits):
                reason = "kv_pool"
                kv_waits += 1
                break
            waiting.popleft()
            for k in range(hits):
                chain_ref[k] += 1
            if hits > chain_hot:
                chain_hot = hits
            r.held = hits
            take(need)
            r.computed = start
            seq_counter += 1
            r.seq = seq_counter
            running[r] = None
            prefilling.append(r)
            chunks.append((r, n))
            budget_left -= n
            hit_tokens += start
            query_tokens += r.target
            t_last_admit, run_at_last_admit = t, area_run
        if preempted:
            reason = "kv_pool"
        slide_read = slide_pairs = 0
        if n_dec:
            ctx = dec_sum + n_dec * (j + 1)  # each reads its cache with the new token
            tokens += n_dec
            read_tokens += ctx
            decode_pairs += ctx
            if gs:  # a sliding layer reads and attends at most the window
                slide_read = below_sum + n_below * (j + 1) + W * (n_dec - n_below)
                slide_pairs = slide_read
        for r, n in chunks:
            a, e = r.computed, r.computed + n
            tokens += n
            read_tokens += e
            pairs += e * (e + 1) // 2 - a * (a + 1) // 2
            if gs:
                slide_read += min(e, e - a + W - 1)
                slide_pairs += _window_pairs(a, e, W)
            r.computed = e
        if tokens == 0:
            raise RuntimeError("internal error: a step with no token to compute")
        # 5. the clock
        dt = s.step_seconds(tokens, read_tokens, pairs, slide_read, slide_pairs,
                            n_dec + len(chunks) if st else 0, decode_pairs)
        used = total - free_plain - (chain_len - chain_hot)
        if used > peak_used:
            peak_used = used
        area_used += used * dt
        area_in_system += in_system * dt
        nrun = len(running)
        area_run += nrun * dt
        if nrun > max_batch:
            max_batch = nrun
            at_max = {}
        if nrun == max_batch:
            key = reason or "arrivals"
            at_max[key] = at_max.get(key, 0) + 1
        if series:
            trace.append((t, used, nrun))
        t_end = t + dt
        # 6. tokens out
        if n_dec:
            itl_steps.append((dt, n_dec))
        finished: list[_Req] = []
        for r in finish_at.pop(j, ()):
            if r.done_step != j:
                continue  # preempted since
            blocks = cdiv(r.dbase + j + 1, bs)
            if multi:
                blocks = gt * blocks - gs * s.skipped(r.dbase + j) + st
            stop_decoding(r)
            del running[r]
            r.gen = r.output
            release(r, blocks)
            finished.append(r)
        for r, _ in chunks:
            # shared-prefix blocks computed so far become cached for later requests
            if r.shared > chain_len and r.held == chain_len:
                full = min(r.computed // bs, r.shared)
                if full > chain_len:
                    _promote(chain_ref, chain_len, full)
                    chain_len = full
                    r.held = full
                    chain_hot = max(chain_hot, full)
            if r.computed < r.target:
                continue
            prefilling.remove(r)
            if r.gen == 0:
                r.first = t_end
            else:
                itl_extra.append(t_end - r.last)
            r.gen += 1
            r.last = t_end
            if r.gen >= r.output:
                del running[r]
                release(r, s.blocks_held(r.computed, r.skip) if multi else
                        cdiv(r.computed, bs))
                r.skip = 0
                finished.append(r)
                continue
            start_decoding(r, j)  # decoding from step j + 1
            r.done_step = r.output - 1 - r.gbase
            if r.done_step not in finish_at:
                finish_at[r.done_step] = []
                heapq.heappush(fin_heap, r.done_step)
            finish_at[r.done_step].append(r)
        if finished and t_first_finish < 0:
            t_first_finish, run_at_first_finish = t_end, area_run
        for r in finished:
            r.finish = t_end
            r.last = t_end
            r.skip = 0
            done += 1
            in_system -= 1
            if wl.users is not None and sent < nreq:
                pending.append(make(sent, t_end + api))
                sent += 1
        t = t_end
        # requests that arrive inside the step: they wait from their arrival, counted at the
        # next step's start (area += t - arrival)

    if free_plain + chain_len != total or chain_hot:  # every block back in the pool
        raise RuntimeError(f"internal error: {total - free_plain - chain_len} blocks not "
                           "returned at the end of the run")
    duration = t
    out_tokens = sum(r.output for r in reqs)
    ttft = [r.first - r.arrival + api for r in reqs]
    e2el = [r.finish - r.arrival + api for r in reqs]
    tpots = [(r.finish - r.first) / (r.output - 1) for r in reqs if r.output > 1]
    # ITL: every decode token's gap is its step's time; tokens after a preemption add theirs
    itl: dict[float, int] = {}
    for dt, n in itl_steps:
        itl[dt] = itl.get(dt, 0) + n
    for g in itl_extra:
        itl[g] = itl.get(g, 0) + 1
    ivals = sorted(itl)
    iw = [itl[v] for v in ivals]
    # Pool-bound once anything was preempted or waited for blocks (issue 23, finding 13: a run
    # labelled by its peak alone hid hundreds of preemptions); else what held the peak batch.
    if preemptions or kv_waits:
        binding = "kv_pool"
    else:
        binding = max(at_max, key=lambda k: (at_max[k], -BINDING_LIMITS.index(k))) \
            if at_max else "arrivals"
    # The warm-up: requests sent before the first one finished (a closed loop's users all send
    # at t = 0). The steady figures leave them out.
    steady = [x for r, x in zip(reqs, ttft) if t_first_finish >= 0 and r.arrival >= t_first_finish]
    span = t_last_admit - t_first_finish
    steady_batch = ((run_at_last_admit - run_at_first_finish) / span
                    if t_first_finish >= 0 and span > 0 else None)
    trace = _thin(trace)
    util = tuple((x, u / total) for x, u, _ in trace)
    tpot50 = percentile(tpots, 50) if tpots else 0.0
    return SimResult(
        requests=nreq, duration_s=duration, output_tokens=out_tokens,
        prompt_tokens=sum(r.prompt for r in reqs),
        ttft_mean_s=sum(ttft) / nreq, ttft_p50_s=percentile(ttft, 50),
        ttft_p99_s=percentile(ttft, 99),
        tpot_mean_s=sum(tpots) / len(tpots) if tpots else 0.0, tpot_p50_s=tpot50,
        tpot_p99_s=percentile(tpots, 99) if tpots else 0.0,
        itl_p50_s=percentile(ivals, 50, iw), itl_p99_s=percentile(ivals, 99, iw),
        itl_mean_s=sum(v * c for v, c in zip(ivals, iw)) / sum(iw) if iw else 0.0,
        e2el_mean_s=sum(e2el) / nreq, e2el_p50_s=percentile(e2el, 50),
        e2el_p99_s=percentile(e2el, 99),
        output_tokens_per_s=out_tokens / duration,
        request_throughput=nreq / duration,
        total_tokens_per_s=(out_tokens + sum(r.prompt for r in reqs)) / duration,
        output_tokens_per_s_per_gpu=out_tokens / duration / s.tp,
        output_tokens_per_s_per_user=1.0 / tpot50 if tpot50 else 0.0,
        preemptions=preemptions,
        prefix_hit_rate=hit_tokens / query_tokens if query_tokens else 0.0,
        kv_utilization_mean=area_used / total / duration,
        kv_utilization_peak=peak_used / total,
        mean_in_system=area_in_system / duration, max_batch=max_batch,
        binding_limit=binding, steps=step, num_blocks=total, block_size=bs,
        max_num_seqs=s.max_num_seqs, max_num_batched_tokens=s.max_num_batched_tokens,
        tp=s.tp, kv_dtype=s.kv_dtype, utilization_series=util,
        batch_series=tuple((x, n) for x, _, n in trace),
        ttft_s=tuple(ttft), e2el_s=tuple(e2el), notes=s.notes,
        kv_wait_steps=kv_waits, warmup_requests=nreq - len(steady),
        ttft_p50_steady_s=percentile(steady, 50) if steady else None,
        ttft_p99_steady_s=percentile(steady, 99) if steady else None,
        mean_batch=area_run / duration, steady_batch=steady_batch)


def _window_pairs(a: int, e: int, w: int) -> int:
    """(query, key) pairs a sliding layer of window ``w`` attends while tokens a+1..e are
    computed: each token t attends min(t, w)."""
    lo = min(e, w)
    pairs = lo * (lo + 1) // 2 - min(a, w) * (min(a, w) + 1) // 2 if a < w else 0
    return pairs + w * (e - max(a, w)) if e > w else pairs


def estimated_steps(s: Setup, wl: Workload) -> int:
    """About how many engine steps ``simulate(s, wl)`` runs (to refuse a run that would keep a
    server busy for seconds): output tokens over the batch the pool and the caps allow, plus
    the prefill chunks."""
    longest = wl.prompt.hi + wl.output.hi
    per_request = (s.blocks_held(longest, s.skipped(longest)) if s.multi_group else
                   cdiv(longest, s.block_size))
    batch = max(1, min(wl.users or wl.requests, s.max_num_seqs, s.num_blocks // per_request))
    return math.ceil(wl.requests * wl.output.mean / batch
                     + wl.requests * wl.prompt.mean / s.max_num_batched_tokens)


def _promote(chain_ref: list[int], start: int, end: int) -> None:
    """Blocks start..end-1 of the shared prefix become cached, held by the request that wrote
    them (reference count 1)."""
    for k in range(start, end):
        if k < len(chain_ref):
            chain_ref[k] = 1
        else:
            chain_ref.append(1)


def _thin(points: list, n: int = _SERIES_POINTS) -> list:
    if len(points) <= n:
        return points
    stride = len(points) / n
    return [points[int(i * stride)] for i in range(n)] + [points[-1]]
