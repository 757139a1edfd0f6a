"""One GPU's pool and clock for the serving simulator: the ``Setup`` and ``setup``, which refuses
by name each model the simulator cannot serve, sizes the pool with vLLM's arithmetic
(``kvcalc.engines.budget``, ``kvcalc.engines.vllm``; the checks and the pool in
``kvcalc.perf.sim.sizing``) and derives the step-time constants.

The one step clock is ``Setup.step_seconds``: max(FLOPs / (peak x MFU), bytes / (bandwidth x
achieved share)) plus what a real engine adds (``fixed_seconds``), the law of
``roofline.step_time`` and ``roofline.prefill``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from ...cache.weight_bytes import Weights
from ...core.arith import cdiv
from ...core.dtypes import KV_DTYPES, DType, get_dtype
from ...core.model import Layer, ModelSpec
from ...core.units import GB, check_int
from ...engines import vllm as _vllm
from ...engines.budget import DEFAULT_RESERVE_BYTES
from ..calibration import ACTIVATION_BYTES, ALLREDUCES_PER_LAYER, StepModel
from ..roofline import DEFAULT_MFU
from .sizing import checked_inputs, pool_fields, served_layers

__all__ = ["Setup", "setup"]


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
    # The linear layers' share of the peak when every GEMM dequantises 4-bit group-quantised
    # weights (kvcalc.perf.calibration.DEQUANT_GEMM_MFU); 0: they run at ``mfu`` like attention.
    dequant_mfu: float = 0.0
    # only steps of fewer tokens dequantise in the GEMM (0: every step); larger ones dequantise
    # the weights once and run the 16-bit GEMM at ``mfu`` (vLLM's AWQ from 0.3: 256)
    dequant_below: int = 0
    # The scheduling policy (kvcalc.perf.sim.scheduler): True, decodes first and prefill chunks
    # in what is left of the token budget (vLLM V1; V0 with --enable-chunked-prefill); False,
    # vLLM V0's default scheduler (Scheduler._schedule_default): whole prompts in a step of
    # their own while any can be admitted, the decodes waiting; ``watermark_blocks`` are the
    # blocks V0's block manager keeps free when it admits a prompt (1% of the pool).
    chunked_prefill: bool = True
    watermark_blocks: int = 0
    # Attention data parallelism (``dp`` ranks, each ``tp`` GPUs holding the attention weights
    # and the caches of its own requests) and expert parallelism (``ep``: whole experts per
    # GPU, tokens exchanged with an all-to-all before and after each MoE layer). The pool,
    # the caps and the token budget above are the whole engine's (dp ranks); the step's
    # per-GPU work is one rank's share, the batch spread evenly over the ranks.
    dp: int = 1
    ep: int = 1
    ep_exchanges: int = 0  # all-to-alls per step (2 per MoE layer with ep > 1)
    ep_latency_s: float = 0.0
    # An engine profile's KV reads and attention FLOPs at their own shares (kvcalc.perf.engines):
    # bw_share / kv share and mfu / attention MFU (1: as the weights and the GEMMs)
    kv_read_factor: float = 1.0
    attention_factor: float = 1.0
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
        """Weight bytes one GPU reads in a step of ``tokens`` new tokens (the whole engine's:
        with attention data parallel ranks each rank's attention weights read for its share,
        the experts the whole step touches split over every GPU)."""
        if not self._fixed_read:
            return self.weight_read_bytes  # weights given as one number: read whole
        table, row = self._embed
        if self.dp > 1:
            dense = self._fixed_read + min(table, cdiv(tokens, self.dp) * row)
            moe = self._moe_reads[min(tokens, len(self._moe_reads) - 1)] if self._moe_reads else 0
            return cdiv(dense, self.tp) + cdiv(moe, self.tp * self.dp)
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
                wire = (
                    2
                    * (self.tp - 1)
                    / self.tp
                    * tokens
                    * self.allreduce_bytes_per_token
                    / (self.tp_link_gbs * GB)
                )
            t += self.allreduces * (self.allreduce_latency_s + wire)
        if self.ep_exchanges and tokens:
            wire = 0.0
            if self.tp_link_gbs:  # each GPU sends (ep - 1) / ep of its tokens' activations
                wire = (
                    (self.ep - 1)
                    / self.ep
                    * cdiv(tokens, self.dp)
                    * self.allreduce_bytes_per_token
                    / (self.tp_link_gbs * GB)
                )
            t += self.ep_exchanges * (self.ep_latency_s + wire)
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
        return (
            (self.full_groups + self.slide_groups) * n
            - self.slide_groups * skipped
            + self.state_blocks
        )

    def skipped(self, computed: int) -> int:
        """Blocks of one sliding group vLLM has freed once ``computed`` tokens are in the cache
        (SlidingWindowManager.get_num_skipped_tokens: computed - window + 1, in whole blocks)."""
        if not self.slide_groups or computed < self.window:
            return 0
        return (computed - self.window + 1) // self.block_size

    def step_seconds(
        self,
        tokens: int,
        read_tokens: int,
        pairs: int,
        slide_read: int = 0,
        slide_pairs: int = 0,
        scheduled: int = 0,
        decode_pairs: int = 0,
    ) -> float:
        """One step of ``tokens`` new tokens whose requests read ``read_tokens`` cached tokens in
        all and attend to ``pairs`` (query, key) pairs of prefill chunks and ``decode_pairs``
        of decode tokens in the full-attention layers (an MLA decode pair is absorbed), and
        ``slide_read`` / ``slide_pairs`` in the sliding ones, ``scheduled`` requests reading
        their recurrent states: max(compute, memory), plus ``fixed_seconds``. The clock of
        every step (``clock`` computes it)."""
        return self.clock(tokens, scheduled)(
            read_tokens, pairs, slide_read, slide_pairs, decode_pairs
        )

    def clock(self, tokens: int, scheduled: int = 0) -> Callable[..., float]:
        """``step_seconds`` for steps of ``tokens`` new tokens and ``scheduled`` requests reading
        their states, as a function of the rest (read_tokens, pairs, slide_read, slide_pairs,
        decode_pairs): what depends on the token count alone (the weights read, the linear
        FLOPs, the fixed costs) is worked out once, so a run of decode-only steps of one batch
        costs one call a step. The same sums in the same order, so the same floats."""
        linear = self.linear_flops_per_token * tokens
        if self.dequant_mfu and (not self.dequant_below or tokens < self.dequant_below):
            linear = linear * self.mfu / self.dequant_mfu  # at their own share of the peak
        weights = self.weights_read(tokens)
        states = self.state_read_bytes * scheduled
        fixed = self.fixed_seconds(tokens)
        fps, bps = self.flops_per_s, self.bytes_per_s
        att: float
        dec: float
        slide: float
        kv: float
        slide_kv: float
        att, dec, slide = (
            self.attention_flops_per_pair,
            self.decode_flops_per_pair,
            self.slide_flops_per_pair,
        )
        kv, slide_kv = self.kv_read_bytes_per_token, self.slide_read_bytes_per_token
        if self.kv_read_factor != 1.0:  # the KV reads at their own share of the bandwidth
            kv, slide_kv = kv * self.kv_read_factor, slide_kv * self.kv_read_factor
        if self.attention_factor != 1.0:  # attention at its own share of the peak
            af = self.attention_factor
            att, dec, slide = att * af, dec * af, slide * af

        def seconds(
            read_tokens: int,
            pairs: int,
            slide_read: int = 0,
            slide_pairs: int = 0,
            decode_pairs: int = 0,
        ) -> float:
            compute = (linear + att * pairs + dec * decode_pairs + slide * slide_pairs) / fps
            memory = (weights + kv * read_tokens + slide_kv * slide_read + states) / bps
            return (compute if compute > memory else memory) + fixed

        return seconds


def setup(
    spec: ModelSpec,
    w: Weights,
    *,
    total_bytes: int,
    bandwidth_gbs: float,
    peak_tflops: float | None,
    max_model_len: int,
    kv_dtype: str = "bf16",
    scales: bool = False,
    tp: int = 1,
    pp: int = 1,
    block_size: int = _vllm.DEFAULT_BLOCK_SIZE,
    gpu_mem_util: float | None = None,
    reserve_bytes: int = DEFAULT_RESERVE_BYTES,
    weights_bytes: int | None = None,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    prefix_caching: bool = True,
    bw_share: float = 1.0,
    mfu: float = DEFAULT_MFU,
    vllm_version: str | None = None,
    gpu_name: str | None = None,
    speed: StepModel | None = None,
    tp_link_gbs: float | None = None,
    kv_pool_bytes: int | None = None,
    dequant_gemm: bool = False,
    dequant_below: int = 0,
    chunked_prefill: bool = True,
    attention_dp: int = 1,
    ep: int = 1,
    attention_peak_tflops: float | None = None,
) -> Setup:
    """The pool (vLLM's arithmetic, ``kvcalc.engines.budget``) and the step-time constants for
    ``spec`` on one GPU of ``total_bytes``; ValueError naming what to change when it cannot run.

    ``speed`` (kvcalc.perf.calibration: the ideal bound, the calibrated estimate or a user's own
    coefficients) times the steps; without it ``bw_share`` and ``mfu`` do, and nothing is
    added (the ideal bound at that share). ``tp_link_gbs`` is the GPU's link for the
    all-reduces (GB/s one way). ``kv_pool_bytes`` gives the pool's size instead of vLLM's
    arithmetic (the reserve is then what is left beside the weights). ``dequant_gemm``: the
    weights are 4-bit group-quantised and every linear layer's GEMM dequantises them, at the step
    model's ``dequant_mfu`` of the peak (the ideal bound, or no step model: at the MFU); with
    ``dequant_below``, only the steps of fewer tokens (the others run the 16-bit GEMM).
    ``chunked_prefill`` False schedules as vLLM V0's default scheduler does
    (``Setup.chunked_prefill``); its token budget then defaults to V0's max(max_model_len,
    2,048) and may not be below max_model_len.

    In order: the inputs checked, the layers refused or accepted, the pool sized and vLLM's
    groups read (kvcalc.perf.sim.sizing), the step constants derived (functions below)."""
    tp, peak_tflops, bandwidth_gbs, bw_share, mfu, max_model_len = checked_inputs(
        spec,
        tp=tp,
        pp=pp,
        peak_tflops=peak_tflops,
        bandwidth_gbs=bandwidth_gbs,
        speed=speed,
        bw_share=bw_share,
        mfu=mfu,
        max_model_len=max_model_len,
    )
    dtype = get_dtype(kv_dtype, KV_DTYPES)
    dp, ep = _layout(spec, tp, attention_dp, ep)
    layers, windows = served_layers(spec, tp, dtype, scales)
    wbytes = (
        w.bytes if weights_bytes is None else check_int("weights (bytes)", weights_bytes, 0, 2**60)
    )
    if dp > 1 and weights_bytes is None:  # a rank's attention, 1 / (tp x dp) of the experts
        wbytes = wbytes - w.expert_bytes + cdiv(w.expert_bytes, dp)
    pool = pool_fields(
        spec,
        windows,
        total_bytes=total_bytes,
        max_model_len=max_model_len,
        wbytes=wbytes,
        gpu_mem_util=gpu_mem_util,
        reserve_bytes=reserve_bytes,
        kv_pool_bytes=kv_pool_bytes,
        block_size=block_size,
        dtype=dtype,
        scales=scales,
        tp=tp,
        vllm_version=vllm_version,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
        gpu_name=gpu_name,
        chunked_prefill=chunked_prefill,
    )
    constants = step_constants(
        spec,
        w,
        layers,
        dtype=dtype,
        scales=scales,
        tp=tp,
        weights_bytes=weights_bytes,
        wbytes=wbytes,
        mnbt=pool["max_num_batched_tokens"],
    )
    _spread_over_ranks(pool, constants, dp)
    return Setup(
        model=spec.name,
        prefix_caching=bool(prefix_caching),
        chunked_prefill=bool(chunked_prefill),
        tp=tp,
        dp=dp,
        ep=ep,
        kv_dtype=dtype.name,
        linear_flops_per_token=2.0 * spec.active_params / (tp * dp),
        bandwidth_gbs=bandwidth_gbs,
        bw_share=bw_share,
        peak_tflops=peak_tflops,
        mfu=mfu,
        max_model_len=max_model_len,
        **pool,
        **constants,
        **_costs(spec, speed, tp, tp_link_gbs, dp, ep, peak_tflops, attention_peak_tflops),
        dequant_mfu=(speed.dequant_mfu or 0.0) if dequant_gemm and speed is not None else 0.0,
        dequant_below=check_int("dequantising GEMMs below (tokens)", dequant_below, 0, 10**7),
    )


def _layout(spec: ModelSpec, tp: int, attention_dp: int, ep: int) -> tuple[int, int]:
    """Attention data parallel and expert parallel sizes, checked against the model and tp."""
    dp = check_int("attention data parallel size", attention_dp, 1, 64)
    ep = check_int("expert parallel size", ep, 1, 512)
    if ep > 1 and spec.moe is None:
        raise ValueError(f"{spec.name} has no experts: expert parallel needs a MoE model")
    if ep > tp * dp:
        raise ValueError(
            f"expert parallel {ep} spans more GPUs than the layout's {tp * dp} (tensor "
            "parallel x attention data parallel)"
        )
    return dp, ep


def _spread_over_ranks(pool: dict[str, Any], constants: dict[str, Any], dp: int) -> None:
    """Attention data parallel: the whole engine holds dp ranks' pools, caps and token budgets;
    a GPU reads and attends for one rank's share of the batch (in place)."""
    if dp == 1:
        return
    for k in ("num_blocks", "pool_blocks", "max_num_seqs", "max_num_batched_tokens"):
        pool[k] = pool[k] * dp
    for k in (
        "kv_read_bytes_per_token",
        "slide_read_bytes_per_token",
        "attention_flops_per_pair",
        "decode_flops_per_pair",
        "slide_flops_per_pair",
        "state_read_bytes",
    ):
        constants[k] = constants[k] / dp


def step_constants(
    spec: ModelSpec,
    w: Weights,
    layers: list[Layer],
    *,
    dtype: DType,
    scales: bool,
    tp: int,
    weights_bytes: int | None,
    wbytes: int,
    mnbt: int,
) -> dict[str, Any]:
    """Setup's per-GPU step constants: KV bytes read per token (sliding layers apart), FLOPs per
    attended pair in each phase, the recurrent states read, and the weights a step reads."""
    kv_pt = sum(lay.read_bytes(1, dtype, scales) for lay in layers)
    sdtype = get_dtype("bf16")  # the budget's state format (vLLM's 'auto' for a BF16 model)

    # One pair's FLOPs in each phase (roofline.attention_flops per layer: MLA absorbed at
    # decode), the sliding layers apart: they read and attend at most a window.
    def pair_flops(sliding: bool, decode: bool) -> float:
        return (
            sum(
                lay.attention_flops(0, 1, decode)
                for lay in spec.layers
                if (lay.kind == "sliding") == sliding
            )
            / tp
        )

    slide_pt = sum(lay.read_bytes(1, dtype, scales) for lay in layers if lay.kind == "sliding")
    return dict(
        kv_read_bytes_per_token=kv_pt - slide_pt,
        attention_flops_per_pair=pair_flops(False, False),
        decode_flops_per_pair=pair_flops(False, True),
        slide_flops_per_pair=pair_flops(True, False),
        slide_read_bytes_per_token=slide_pt,
        state_read_bytes=sum(lay.state_bytes(sdtype) for lay in layers),
        **_weight_reads(spec, w, tp=tp, weights_bytes=weights_bytes, wbytes=wbytes, mnbt=mnbt),
    )


def _weight_reads(
    spec: ModelSpec, w: Weights, *, tp: int, weights_bytes: int | None, wbytes: int, mnbt: int
) -> dict[str, Any]:
    """The weights a step reads: one number when the weights are given as one (read whole),
    else Weights.read_per_step split into its parts so a step of n tokens costs no call: the
    non-expert weights less the input embedding, n of its rows, the experts n tokens touch."""
    if weights_bytes is not None:
        return dict(weight_read_bytes=math.ceil(wbytes / tp))
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
    return dict(
        weight_read_bytes=cdiv(w.read_per_step(spec, 1), tp),
        _fixed_read=fixed_read,
        _embed=embed,
        _moe_reads=moe,
    )


def _costs(spec, speed, tp, tp_link_gbs, dp, ep, peak, attention_peak) -> dict[str, Any]:
    """engine_costs, with attention's FLOPs at the attention peak where it is not the GEMMs'
    (FP8 weights beside a 16-bit cache: the GEMMs at the FP8 peak, attention at the 16-bit
    one). Only with an engine profile, so the pooled estimate's figures stay as they were."""
    costs = engine_costs(spec, speed, tp=tp, tp_link_gbs=tp_link_gbs, dp=dp, ep=ep)
    if speed is not None and speed.engine and attention_peak and attention_peak != peak:
        costs["attention_factor"] = costs["attention_factor"] * peak / attention_peak
    return costs


def engine_costs(
    spec: ModelSpec,
    speed: StepModel | None,
    *,
    tp: int,
    tp_link_gbs: float | None,
    dp: int = 1,
    ep: int = 1,
) -> dict[str, Any]:
    """What a real engine adds to each step (kvcalc.perf.calibration); nothing without a step
    model. ValueError when the all-reduces need a hidden size the config does not give.

    Tensor parallelism's two all-reduces a layer (Megatron-LM); with expert parallel, the MoE
    layers exchange tokens instead (a dispatch and a combine, all-to-all, at the profile's
    ``ep_latency_s``) and only attention's all-reduce is left where tp > 1; with attention data
    parallel and no expert parallel, the MoE layers' exchange over every GPU is timed as an
    all-reduce."""
    if speed is None:
        return {}
    n = tp * dp
    moe_layers = spec.moe.layers if spec.moe is not None else 0
    charge = speed.allreduce and n > 1
    if ep > 1:
        allreduces = spec.num_layers if speed.allreduce and tp > 1 else 0
        exchanges = 2 * moe_layers if speed.allreduce else 0
    else:
        allreduces = ALLREDUCES_PER_LAYER * spec.num_layers if charge else 0
        exchanges = 0
    factors = dict(
        kv_read_factor=speed.bw_share / speed.kv_share,
        attention_factor=speed.mfu / speed.attention_mfu,
    )
    if charge and not spec.hidden_size:
        raise ValueError(
            f"{spec.name}: the all-reduce time needs the hidden size, which "
            "the config does not give"
        )
    return dict(
        step_overhead_s=speed.step_overhead_s,
        allreduces=allreduces,
        ep_exchanges=exchanges,
        ep_latency_s=speed.ep_latency_s,
        **factors,
        allreduce_latency_s=speed.allreduce_latency_s,
        allreduce_bytes_per_token=(spec.hidden_size or 0) * ACTIVATION_BYTES,
        tp_link_gbs=tp_link_gbs,
        api_overhead_s=speed.api_overhead_s,
        speed=speed.name,
    )
