"""One GPU's pool and clock for the serving simulator: ``setup`` checks the model and sizes the
pool with vLLM's arithmetic (``kvcalc.perf.sim.pool``) and derives ``Setup``'s step constants. The
one step clock, ``Setup.step_seconds``, is max(FLOPs / (peak x MFU), bytes / (bandwidth x achieved
share)) plus what a real engine adds, the law of ``roofline.step_time`` and ``roofline.prefill``;
under an engine profile the GEMMs and attention each take their own roofline, one after the
other."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace

from ...cache.deployment import Deployment
from ...core.arith import cdiv
from ...core.dtypes import KV_DTYPES, get_dtype
from ...core.gpu import GPU
from ...core.model import Layer
from ...core.units import GB, check_float, check_int
from ..calibration import ACTIVATION_BYTES, ALLREDUCES_PER_LAYER, StepModel
from ..roofline import DEFAULT_MFU
from .pool import PoolSize, checked_inputs, served_layers, size_pool


@dataclass(frozen=True, kw_only=True)
class StepWork:
    """Setup's per-GPU step constants: what a step reads and computes per token, pair or state,
    and the weights it reads (Weights.read_per_step split into its parts, so that a step of n
    tokens costs no call)."""

    kv_read_bytes_per_token: float  # per GPU, every layer but the sliding ones
    # 2 x q_heads x (qk_dim + v_dim), all layers, / tp: a pair of a prefill chunk
    attention_flops_per_pair: float
    decode_flops_per_pair: float  # a decode token's pair: the same, MLA's absorbed, / tp
    slide_flops_per_pair: float
    slide_read_bytes_per_token: float  # per GPU, the sliding layers
    state_read_bytes: float  # per GPU, every recurrent state of one request, read each step
    weight_read_bytes: int  # per GPU, a step of one token (dense; MoE: the experts it touches)
    # Weights a step of n tokens reads (whole model, before the TP split): every weight but the
    # input embedding and the routed experts, plus n gathered embedding rows (at most the table),
    # plus the experts n tokens touch (table indexed by n, its last entry for more).
    _fixed_read: int = field(default=0, repr=False)
    _embed: tuple[int, int] = field(default=(0, 0), repr=False)  # (table, row bytes); 0: none
    _moe_reads: tuple[int, ...] = field(default=(), repr=False)

    def per_rank(self, dp: int) -> StepWork:
        """Attention data parallel: a GPU reads and attends for one rank's share of the batch."""
        if dp == 1:
            return self
        weights = ("weight_read_bytes", "_fixed_read", "_embed", "_moe_reads")  # setup splits them
        per_rank = [f.name for f in fields(StepWork) if f.name not in weights]
        return replace(self, **{k: getattr(self, k) / dp for k in per_rank})


@dataclass(frozen=True, kw_only=True)
class EngineCosts:
    """What a real engine adds to each step (all zero for the ideal bound and without a step
    model): a fixed cost, tensor parallelism's all-reduces and expert parallelism's all-to-alls
    (``fixed_seconds``), a serving stack's time before the engine sees a request."""

    step_overhead_s: float = 0.0
    allreduces: int = 0
    allreduce_latency_s: float = 0.0
    allreduce_bytes_per_token: int = 0
    tp_link_gbs: float | None = None
    api_overhead_s: float = 0.0
    speed: str = "ideal bound"  # the step model's name (kvcalc.perf.calibration.StepModel.name)
    ep_exchanges: int = 0  # exchanges per step (2 per MoE layer with ep > 1 or attention DP)
    ep_latency_s: float = 0.0
    # An engine profile's KV reads and attention FLOPs at their own shares (kvcalc.perf.engines):
    # bw_share / kv share and mfu / attention MFU (1: as the weights and the GEMMs)
    kv_read_factor: float = 1.0
    attention_factor: float = 1.0
    # ... and the routed experts' reads at theirs (bw_share / expert share; 1: as the weights)
    expert_read_factor: float = 1.0
    # ... and the routed experts' GEMM FLOPs at their own MFU (mfu / expert MFU; 1: as the rest)
    expert_flops_factor: float = 1.0
    # An engine profile's host-side costs in the engine's loop: per request scheduled in a step
    # (its metadata, sampling and streaming) and per request whose prefill starts in it
    seq_overhead_s: float = 0.0
    request_overhead_s: float = 0.0
    # the share of that host time hidden behind the GPU's work (an engine that schedules the
    # next step while the GPU runs this one): 0, added; 1, the step takes the longer of the two
    host_overlap: float = 0.0
    # a calibration's factor on the GPU's part of every step (StepModel.gpu_time_factor)
    gpu_time_factor: float = 1.0
    # An engine profile times the GEMMs and attention as the kernels they are, one after the
    # other, each at its own roofline: max(GEMM FLOPs, weight bytes) + max(attention FLOPs, KV
    # bytes); False: one roofline for the whole step, max(all FLOPs, all bytes)
    kernel_rooflines: bool = False


@dataclass(frozen=True, kw_only=True)
class Setup(PoolSize, StepWork, EngineCosts):
    """One GPU's pool and clock (per GPU at tensor parallel ``tp``): the pool (``PoolSize``), the
    step's work (``StepWork``), what a real engine adds (``EngineCosts``) and the GPU's figures."""

    model: str
    prefix_caching: bool
    tp: int
    kv_dtype: str
    linear_flops_per_token: float  # 2 x active params / tp
    expert_flops_per_token: float = 0.0  # its routed experts' part (2 x top_k experts' params)
    bandwidth_gbs: float  # peak
    bw_share: float
    peak_tflops: float
    mfu: float
    max_model_len: int
    # The linear layers' share of the peak when every GEMM dequantises 4-bit group-quantised
    # weights (kvcalc.perf.calibration.DEQUANT_GEMM_MFU); 0: they run at ``mfu`` like attention.
    dequant_mfu: float = 0.0
    # only steps of fewer tokens dequantise in the GEMM (0: every step); larger ones dequantise
    # the weights once and run the 16-bit GEMM at ``mfu`` (vLLM's AWQ from 0.3: 256)
    dequant_below: int = 0
    # The scheduling policy: True, decodes first and prefill chunks in what is left of the token
    # budget (vLLM V1; V0 with --enable-chunked-prefill); False, vLLM V0's default scheduler
    # (Scheduler._schedule_default: whole prompts in steps of their own, the decodes waiting).
    chunked_prefill: bool = True
    # the most tokens one request's prefill chunk takes a step (vLLM's
    # long_prefill_token_threshold; 0: what the token budget leaves)
    chunk_tokens: int = 0
    # Attention data parallelism (``dp`` ranks of ``tp`` GPUs, each with its own requests'
    # caches) and expert parallelism (``ep``: whole experts per GPU, tokens exchanged all-to-all
    # around each MoE layer). The pool and caps are the whole engine's; a step's work per GPU
    # one rank's share, the batch spread evenly over the ranks.
    dp: int = 1
    ep: int = 1

    @property
    def bytes_per_s(self) -> float:
        return self.bandwidth_gbs * self.bw_share * GB

    @property
    def flops_per_s(self) -> float:
        return self.peak_tflops * 1e12 * self.mfu

    def weights_read(self, tokens: int) -> int:
        """Weight bytes one GPU reads in a step of ``tokens`` new tokens (the whole engine's:
        with attention data parallel ranks each rank's attention weights read for its share,
        the experts the whole step touches split over every GPU)."""
        return sum(self.weights_read_parts(tokens))

    def weights_read_parts(self, tokens: int) -> tuple[int, int]:
        """``weights_read`` in two parts: every weight but the routed experts, and the
        experts the step touches."""
        if not self._fixed_read:
            return self.weight_read_bytes, 0  # weights given as one number: read whole
        table, row = self._embed
        moe = self._moe_reads[min(tokens, len(self._moe_reads) - 1)] if self._moe_reads else 0
        if self.dp > 1:
            dense = self._fixed_read + min(table, cdiv(tokens, self.dp) * row)
            return cdiv(dense, self.tp), cdiv(moe, self.tp * self.dp)
        if self.expert_read_factor == 1.0:  # one sum, as before experts had a share of their own
            return cdiv(self._fixed_read + min(table, tokens * row) + moe, self.tp), 0
        return cdiv(self._fixed_read + min(table, tokens * row), self.tp), cdiv(moe, self.tp)

    def fixed_seconds(self, tokens: int) -> float:
        """What a step of ``tokens`` new tokens costs beyond max(compute, memory): the fixed
        overhead and the all-reduces (kvcalc.perf.calibration.allreduce_seconds)."""
        link, t = self.tp_link_gbs, self.step_overhead_s

        def wire(share: float, tokens: int) -> float:  # share x tokens' activations on the link
            return share * tokens * self.allreduce_bytes_per_token / (link * GB) if link else 0.0

        if self.allreduces and tokens:
            ring = 2 * (self.tp - 1) / self.tp
            t += self.allreduces * (self.allreduce_latency_s + wire(ring, tokens))
        if self.ep_exchanges and tokens:  # each GPU sends (g - 1) / g of its tokens'
            group = max(self.ep, self.dp)  # the experts' group: EP ranks, or DP ranks
            sent = (group - 1) / group
            t += self.ep_exchanges * (self.ep_latency_s + wire(sent, cdiv(tokens, self.dp)))
        return t

    @property
    def multi_group(self) -> bool:
        """Whether a request holds blocks of more than one kind (windows or states)."""
        return bool(self.slide_groups or self.state_blocks)

    def blocks_held(self, allocated: int, skipped: int = 0) -> int:
        """Blocks a request holds with ``allocated`` tokens given slots and ``skipped`` blocks
        of each sliding group freed."""
        if not allocated:
            return 0
        return (
            self.full_groups * cdiv(allocated, self.block_size)
            + self.slide_groups * (cdiv(allocated, self.slide_block_size) - skipped)
            + self.state_blocks
        )

    def blocks_grown(self, before: int, after: int) -> int:
        """Blocks a request takes as its tokens with slots go from ``before`` to ``after`` (a
        block in each group whose block it fills)."""
        new = self.full_groups * (cdiv(after, self.block_size) - cdiv(before, self.block_size))
        if self.slide_groups:
            sbs = self.slide_block_size
            new += self.slide_groups * (cdiv(after, sbs) - cdiv(before, sbs))
        return new

    def skipped(self, computed: int) -> int:
        """Blocks of one sliding group vLLM has freed once ``computed`` tokens are in the cache
        (SlidingWindowManager.get_num_skipped_tokens: computed - window + 1, in whole blocks of
        the sliding group's size)."""
        if not self.slide_groups or computed < self.window:
            return 0
        if self.window_kind == "chunked":  # the chunks before the current one
            # (ChunkedLocalAttentionManager.get_num_skipped_tokens: computed // chunk x chunk)
            return computed // self.window * self.window // self.slide_block_size
        return (computed - self.window + 1) // self.slide_block_size

    def step_seconds(
        self,
        tokens: int,
        read_tokens: int,
        pairs: int,
        slide_read: int = 0,
        slide_pairs: int = 0,
        scheduled: int = 0,
        decode_pairs: int = 0,
        host: tuple[int, int] = (0, 0),
    ) -> float:
        """One step of ``tokens`` new tokens whose requests read ``read_tokens`` cached tokens and
        attend to ``pairs`` (query, key) pairs of prefill chunks and ``decode_pairs`` of decode
        tokens (MLA's absorbed), ``slide_read`` / ``slide_pairs`` in the sliding layers, and
        ``scheduled`` requests read their states: max(compute, memory) + ``fixed_seconds``, plus
        an engine profile's host costs for ``host`` = (requests in the step, those of them
        starting their prefill)."""
        return self.clock(tokens, scheduled, *host)(
            read_tokens, pairs, slide_read, slide_pairs, decode_pairs
        )

    def clock(
        self, tokens: int, scheduled: int = 0, seqs: int = 0, new: int = 0, dense: int = -1
    ) -> Callable[..., float]:
        """``step_seconds`` for steps of ``tokens`` new tokens, ``scheduled`` requests reading
        their states and ``seqs`` requests (``new`` starting) in the step, as a function of the
        rest: what depends on the counts alone is worked out once. The same sums in the same
        order, so the same floats. ``dense``: with attention data parallel ranks, the tokens
        the layers outside the routed experts compute on the busiest rank, times the ranks
        (the experts compute every token over every GPU); -1: ``tokens``, spread evenly."""
        linear = self.linear_flops_per_token * tokens
        if dense > tokens:  # the busiest rank's share of the dense layers beyond an even one
            linear += (self.linear_flops_per_token - self.expert_flops_per_token) * (dense - tokens)
        if self.expert_flops_factor != 1.0:  # the experts' part at its own MFU
            linear += self.expert_flops_per_token * tokens * (self.expert_flops_factor - 1.0)
        if self.dequant_mfu and (not self.dequant_below or tokens < self.dequant_below):
            linear = linear * self.mfu / self.dequant_mfu  # at their own share of the peak
        dense, experts = self.weights_read_parts(tokens)
        weights = dense + experts * self.expert_read_factor if experts else dense
        states = self.state_read_bytes * scheduled
        fixed = self.fixed_seconds(tokens)
        host = 0.0
        if seqs and (self.seq_overhead_s or self.request_overhead_s):
            host = self.seq_overhead_s * seqs + self.request_overhead_s * new
        hidden, factor = self.host_overlap, self.gpu_time_factor
        fps, bps = self.flops_per_s, self.bytes_per_s
        # the KV reads and attention at their own shares of the bandwidth and the peak (x 1.0
        # where they are the weights' and the GEMMs': exact)
        kf, af = self.kv_read_factor, self.attention_factor
        kv, slide_kv = self.kv_read_bytes_per_token * kf, self.slide_read_bytes_per_token * kf
        att, dec = self.attention_flops_per_pair * af, self.decode_flops_per_pair * af
        slide = self.slide_flops_per_pair * af
        gemms = max(linear / fps, weights / bps) if self.kernel_rooflines else 0.0

        def seconds(
            read_tokens: int,
            pairs: int,
            slide_read: int = 0,
            slide_pairs: int = 0,
            decode_pairs: int = 0,
        ) -> float:
            if self.kernel_rooflines:
                compute = (att * pairs + dec * decode_pairs + slide * slide_pairs) / fps
                memory = (kv * read_tokens + slide_kv * slide_read + states) / bps
                gpu = gemms + (compute if compute > memory else memory) + fixed
            else:
                compute = (linear + att * pairs + dec * decode_pairs + slide * slide_pairs) / fps
                memory = (weights + kv * read_tokens + slide_kv * slide_read + states) / bps
                gpu = (compute if compute > memory else memory) + fixed
            if factor != 1.0:  # a calibration's (the same floats without one)
                gpu = gpu * factor
            if not host:
                return gpu
            # the host's work, the share ``hidden`` of it behind the GPU's (overlap scheduling)
            return gpu + host - hidden * (gpu if gpu < host else host)

        return seconds


@dataclass(frozen=True, kw_only=True)
class Speed:
    """How the simulator times a step: the GPU's figures (``of`` takes a GPU's own: its link
    for the all-reduces, GB/s one way) and the step model applied to them (None: the peaks at
    MFU 0.5, nothing added); attention's peak where it is not the GEMMs' (an engine profile
    only). ``dequant_gemm``: each linear layer's GEMM dequantises 4-bit weights, at the step
    model's ``dequant_mfu``, in steps of fewer than this many tokens (0: every step).
    ``expert_peak_tflops``: the routed experts' GEMMs at their own format's peak."""

    bandwidth_gbs: float
    peak_tflops: float
    model: StepModel | None = None
    tp_link_gbs: float | None = None
    attention_peak_tflops: float | None = None
    dequant_gemm: int | None = None
    # the routed experts' GEMM peak where it is not the weights' format's (W4A8 experts on FP8
    # tensor cores); None: ``peak_tflops``
    expert_peak_tflops: float | None = None

    def __post_init__(self) -> None:
        check_float("peak TFLOPS", self.peak_tflops, 0.0, 1e6, lo_open=True)
        check_float("bandwidth (GB/s)", self.bandwidth_gbs, 0.0, 1e7, lo_open=True)
        if self.dequant_gemm is not None:
            check_int("dequantising GEMMs below (tokens)", self.dequant_gemm, 0, 10**7)
        if self.expert_peak_tflops is not None:
            check_float("experts' peak TFLOPS", self.expert_peak_tflops, 0.0, 1e6, lo_open=True)

    @classmethod
    def of(cls, gpu: GPU, weight_dtype: str, model: StepModel | None = None, **kw) -> Speed:
        """``gpu``'s bandwidth, its peak for weights in ``weight_dtype`` and its link."""
        peak = gpu.peak_tflops(weight_dtype)
        if peak is None:
            raise ValueError("the GPU's dense peak (TFLOPS) is needed to time prefill")
        return cls(
            bandwidth_gbs=gpu.bandwidth_gbs,
            peak_tflops=peak,
            model=model,
            tp_link_gbs=gpu.tp_link_gbs,
            **kw,
        )


def setup(
    dep: Deployment, max_model_len: int, speed: Speed, *, kv_pool_bytes: int | None = None
) -> Setup:
    """The pool (vLLM's arithmetic, ``kvcalc.engines.budget``) and the step-time constants for
    ``dep`` on one GPU; ValueError naming what to change when it cannot run. ``kv_pool_bytes``
    gives the pool's size instead of vLLM's arithmetic (the reserve is then what is left beside
    the weights). ``dep.engine.enable_chunked_prefill`` False schedules as vLLM V0's default
    scheduler does (``Setup.chunked_prefill``); its token budget then defaults to V0's
    max(max_model_len, 2,048) and may not be below max_model_len."""
    spec, tp, dp, model = dep.spec, dep.tp, dep.attention_dp, speed.model
    max_model_len = checked_inputs(dep, max_model_len)
    dtype = get_dtype(dep.cache.kv_dtype, KV_DTYPES)
    layers, windows, window_kind = served_layers(spec, tp, dtype, dep.cache.scales)
    wbytes = dep.rank_weights_bytes  # a rank's attention, 1 / (tp x dp) of the experts
    one_rank = dep.but(kv_dtype=dtype.name, weights_bytes=wbytes)
    pool = size_pool(one_rank, max_model_len, windows, kv_pool_bytes, window_kind)
    work = step_work(dep, layers, wbytes, pool.max_num_batched_tokens).per_rank(dp)
    pool, c = pool.over_ranks(dp), engine_costs(dep, speed)
    if speed.expert_peak_tflops:  # the experts' FLOPs at their own peak: scaled to the GEMMs'
        ratio = speed.peak_tflops / speed.expert_peak_tflops
        c = replace(c, expert_flops_factor=c.expert_flops_factor * ratio)
    dequant_mfu = 0.0
    if speed.dequant_gemm is not None and model is not None:
        dequant_mfu = model.dequant_mfu or 0.0
    return Setup(
        model=spec.name,
        prefix_caching=dep.engine.enable_prefix_caching is not False,
        chunked_prefill=dep.engine.enable_chunked_prefill,
        chunk_tokens=dep.engine.long_prefill_token_threshold,
        tp=tp,
        dp=dp,
        ep=dep.ep,
        kv_dtype=dtype.name,
        linear_flops_per_token=2.0 * spec.active_params / (tp * dp),
        expert_flops_per_token=(
            2.0 * spec.moe.layers * spec.moe.top_k * spec.moe.expert_params / (tp * dp)
            if spec.moe is not None
            else 0.0
        ),
        bandwidth_gbs=speed.bandwidth_gbs,
        bw_share=model.bw_share if model is not None else 1.0,
        peak_tflops=speed.peak_tflops,
        mfu=model.mfu * model.gemm_share(_dtype(dep)) if model is not None else DEFAULT_MFU,
        max_model_len=max_model_len,
        dequant_mfu=dequant_mfu,
        dequant_below=speed.dequant_gemm or 0,
        **asdict(pool),  # Setup's parts
        **asdict(work),
        **asdict(c),
    )


def step_work(dep: Deployment, layers: list[Layer], wbytes: int, mnbt: int) -> StepWork:
    """The step constants of ``dep``'s ``layers`` (one GPU's), its weights ``wbytes`` (one
    rank's) read in steps of at most ``mnbt`` tokens."""
    spec, tp = dep.spec, dep.tp
    dtype, scales = get_dtype(dep.cache.kv_dtype, KV_DTYPES), dep.cache.scales
    kv_pt = sum(lay.read_bytes(1, dtype, scales) for lay in layers)
    sdtype = get_dtype("bf16")  # the budget's state format (vLLM's 'auto' for a BF16 model)

    # One pair's FLOPs in each phase (roofline.attention_flops per layer: MLA absorbed at
    # decode), the windowed layers apart: they read and attend at most a window or a chunk.
    windowed = ("sliding", "chunked")

    def pair_flops(sliding: bool, decode: bool) -> float:
        kind = [lay for lay in spec.layers if (lay.kind in windowed) == sliding]
        return sum(lay.attention_flops(0, 1, decode) for lay in kind) / tp

    slide_pt = sum(lay.read_bytes(1, dtype, scales) for lay in layers if lay.kind in windowed)
    work = StepWork(
        kv_read_bytes_per_token=kv_pt - slide_pt,
        attention_flops_per_pair=pair_flops(False, False),
        decode_flops_per_pair=pair_flops(False, True),
        slide_flops_per_pair=pair_flops(True, False),
        slide_read_bytes_per_token=slide_pt,
        state_read_bytes=sum(lay.state_bytes(sdtype) for lay in layers),
        weight_read_bytes=math.ceil(wbytes / tp),
    )
    w = dep.weights
    if dep.weights_bytes is not None or w is None:
        return work
    embed = (w.input_embedding_bytes, w.embedding_row_bytes)
    fixed_read = w.dense_bytes - w.input_embedding_bytes
    moe: tuple[int, ...] = ()
    if spec.moe is not None:
        # Experts touched by a step of n tokens (uniform routing), until every expert is.
        table, n = [0], 1
        while True:
            table.append(w.read_per_step(spec, n) - fixed_read - min(embed[0], n * embed[1]))
            if table[-1] >= w.expert_bytes or n >= mnbt:
                break
            n += 1
        moe = tuple(table)
    return replace(
        work,
        weight_read_bytes=cdiv(w.read_per_step(spec, 1), tp),
        _fixed_read=fixed_read,
        _embed=embed,
        _moe_reads=moe,
    )


def _dtype(dep: Deployment) -> str | None:
    """The weights' format (None where only their bytes are given)."""
    return dep.weights.dtype if dep.weights is not None else None


def engine_costs(dep: Deployment, speed: Speed) -> EngineCosts:
    """What a real engine adds to each step (kvcalc.perf.calibration; the rules:
    docs/calibration.md#what-a-profile-holds); nothing without a step model. ValueError when the
    all-reduces need a hidden size the config does not give."""
    m, spec, tp, ep = speed.model, dep.spec, dep.tp, dep.ep
    if m is None:
        return EngineCosts()
    moe_layers = spec.moe.layers if spec.moe is not None else 0
    # Attention data parallel ranks of an MoE model meet at every MoE layer, as expert parallel
    # ranks do: every rank's tokens gathered before the experts, the results scattered back
    # (vLLM's FusedMoE dispatch and combine over the DP x TP group; vLLM's data parallel
    # deployment guide: the expert layers of all ranks synchronise in every forward pass). The
    # ranks of a dense model are replicas that never meet.
    exchange = ep > 1 or (dep.attention_dp > 1 and moe_layers > 0)
    charge = m.allreduce and (tp > 1 or exchange)
    if exchange:
        allreduces = spec.num_layers if m.allreduce and tp > 1 else 0
        exchanges = 2 * moe_layers if m.allreduce else 0
    else:
        allreduces = ALLREDUCES_PER_LAYER * spec.num_layers if charge else 0
        exchanges = 0
    if charge and not spec.hidden_size:
        raise ValueError(
            f"{spec.name}: the all-reduce time needs the hidden size, which "
            "the config does not give"
        )
    # the GEMMs at mfu x their format's part of it (Setup.mfu); attention at its own MFU
    attention_factor = m.mfu * m.gemm_share(_dtype(dep)) / m.attention_mfu
    peak, attention_peak = speed.peak_tflops, speed.attention_peak_tflops
    if m.engine and attention_peak and peak and attention_peak != peak:
        attention_factor = attention_factor * peak / attention_peak
    return EngineCosts(
        step_overhead_s=m.fixed_step_s(spec),
        allreduces=allreduces,
        ep_exchanges=exchanges,
        ep_latency_s=m.ep_latency_s,
        kv_read_factor=m.bw_share / m.kv_share,
        expert_read_factor=m.bw_share / m.expert_share,
        expert_flops_factor=m.mfu / m.expert_gemm_mfu,
        attention_factor=attention_factor,
        allreduce_latency_s=m.allreduce_latency_s,
        allreduce_bytes_per_token=(spec.hidden_size or 0) * ACTIVATION_BYTES,
        tp_link_gbs=speed.tp_link_gbs,
        api_overhead_s=m.api_overhead_s,
        speed=m.name,
        seq_overhead_s=m.seq_overhead_s,
        request_overhead_s=m.request_overhead_s,
        host_overlap=m.host_overlap,
        gpu_time_factor=m.gpu_time_factor,
        kernel_rooflines=m.engine is not None,
    )
