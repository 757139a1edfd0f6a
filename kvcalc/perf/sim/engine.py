"""One GPU's pool and clock for the serving simulator: the ``Setup`` and ``setup``, which refuses
by name each model the simulator cannot serve, sizes the pool with vLLM's arithmetic
(``kvcalc.engines.budget``, ``kvcalc.engines.vllm``) and derives the step-time constants.

The one step clock is ``Setup.step_seconds``: max(FLOPs / (peak x MFU), bytes / (bandwidth x
achieved share)) plus what a real engine adds (``fixed_seconds``), the law of
``roofline.step_time`` and ``roofline.prefill``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from ...cache.kv import stage_layers
from ...cache.weight_bytes import Weights
from ...config.limits import MAX_CONTEXT
from ...core.arith import cdiv
from ...core.dtypes import KV_DTYPES, DType, get_dtype
from ...core.model import Layer, ModelSpec, SlidingWindow
from ...core.units import GB, check_float, check_int
from ...engines import vllm as _vllm
from ...engines.budget import DEFAULT_RESERVE_BYTES, Budget, budget, default_gpu_mem_util
from ..calibration import ACTIVATION_BYTES, ALLREDUCES_PER_LAYER, StepModel
from ..roofline import DEFAULT_MFU

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
                wire = (
                    2
                    * (self.tp - 1)
                    / self.tp
                    * tokens
                    * self.allreduce_bytes_per_token
                    / (self.tp_link_gbs * GB)
                )
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
        weights = self.weights_read(tokens)
        states = self.state_read_bytes * scheduled
        fixed = self.fixed_seconds(tokens)
        fps, bps = self.flops_per_s, self.bytes_per_s
        att, dec, slide = (
            self.attention_flops_per_pair,
            self.decode_flops_per_pair,
            self.slide_flops_per_pair,
        )
        kv, slide_kv = self.kv_read_bytes_per_token, self.slide_read_bytes_per_token

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
) -> Setup:
    """The pool (vLLM's arithmetic, ``kvcalc.engines.budget``) and the step-time constants for
    ``spec`` on one GPU of ``total_bytes``; ValueError naming what to change when it cannot run.

    ``speed`` (kvcalc.perf.calibration: the ideal bound, the calibrated estimate or a user's own
    coefficients) times the steps; without it ``bw_share`` and ``mfu`` do, and nothing is
    added (the ideal bound at that share). ``tp_link_gbs`` is the GPU's link for the
    all-reduces (GB/s one way). ``kv_pool_bytes`` gives the pool's size instead of vLLM's
    arithmetic (the reserve is then what is left beside the weights).

    In order: the inputs checked, the layers refused or accepted, the pool sized, vLLM's groups
    read, the step constants derived (each step its own function below)."""
    tp, peak_tflops, bandwidth_gbs, bw_share, mfu, max_model_len = _checked_inputs(
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
    layers, windows = _served_layers(spec, tp, dtype, scales)
    wbytes = (
        w.bytes if weights_bytes is None else check_int("weights (bytes)", weights_bytes, 0, 2**60)
    )
    if kv_pool_bytes is not None:
        kv_pool_bytes = check_int("KV pool (bytes)", kv_pool_bytes, 1, 2**50)
        reserve_bytes = _reserve_beside(
            kv_pool_bytes,
            total_bytes=total_bytes,
            wbytes=wbytes,
            tp=tp,
            gpu_mem_util=gpu_mem_util,
            vllm_version=vllm_version,
        )
    b = _pool(
        spec,
        total_bytes=total_bytes,
        max_model_len=max_model_len,
        wbytes=wbytes,
        gpu_mem_util=gpu_mem_util,
        reserve_bytes=reserve_bytes,
        block_size=block_size,
        dtype=dtype,
        scales=scales,
        tp=tp,
        vllm_version=vllm_version,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
        gpu_name=gpu_name,
    )
    bs = b.effective_block_size or b.block_size
    version, mns = b.vllm_version, b.max_num_seqs
    if version is None or mns is None:  # a vLLM budget states both
        raise RuntimeError(f"the vLLM budget of {spec.name} has no version or max_num_seqs")
    mnbt = (
        max_num_batched_tokens
        if max_num_batched_tokens is not None
        else _vllm.default_max_num_batched_tokens(version, total_bytes, gpu_name)
    )
    groups = _groups(
        spec,
        b,
        max_model_len=max_model_len,
        block_size=block_size,
        tp=tp,
        dtype=dtype,
        scales=scales,
        version=version,
        mnbt=mnbt,
        gpu_name=gpu_name,
    )
    mnbt = check_int("max_num_batched_tokens", mnbt, 1, 10**7)
    if mnbt < mns:
        raise ValueError(
            f"max_num_batched_tokens ({mnbt:,}) must be at least max_num_seqs "
            f"({mns:,}), as vLLM requires"
        )
    constants = _step_constants(
        spec,
        w,
        layers,
        dtype=dtype,
        scales=scales,
        tp=tp,
        weights_bytes=weights_bytes,
        wbytes=wbytes,
        mnbt=mnbt,
    )
    extra = _engine_costs(spec, speed, tp=tp, tp_link_gbs=tp_link_gbs)
    notes = _notes(
        b,
        version=version,
        bs=bs,
        reserve_bytes=reserve_bytes,
        kv_pool_bytes=kv_pool_bytes,
        slide_groups=groups["slide_groups"],
        windows=windows,
        state_blocks=groups["state_blocks"],
    )
    return Setup(
        model=spec.name,
        num_blocks=b.num_blocks - _vllm.fact("null_block", version),
        block_size=bs,
        max_num_seqs=mns,
        max_num_batched_tokens=mnbt,
        prefix_caching=bool(prefix_caching),
        tp=tp,
        kv_dtype=dtype.name,
        linear_flops_per_token=2.0 * spec.active_params / tp,
        bandwidth_gbs=bandwidth_gbs,
        bw_share=bw_share,
        peak_tflops=peak_tflops,
        mfu=mfu,
        kv_pool_bytes=b.kv_pool_bytes,
        block_bytes=b.block_bytes,
        vllm_version=version,
        max_model_len=max_model_len,
        notes=tuple(notes),
        window=windows[0] if windows else 0,
        logged_concurrency=b.max_concurrency,
        pool_blocks=b.num_blocks,
        logged_blocks_per_request=b.blocks_per_request,
        **groups,
        **constants,
        **extra,
    )


def _checked_inputs(
    spec: ModelSpec,
    *,
    tp: int,
    pp: int,
    peak_tflops: float | None,
    bandwidth_gbs: float,
    speed: StepModel | None,
    bw_share: float,
    mfu: float,
    max_model_len: int,
) -> tuple[int, float, float, float, float, int]:
    """The numeric inputs checked (ValueError naming the one to change), in setup's order."""
    tp = check_int("tensor parallel size", tp, 1, 64)
    pp = check_int("pipeline parallel size", pp, 1, 64)
    if pp != 1:
        raise ValueError(
            "the serving simulator models tensor parallelism only: set pipeline parallel to 1"
        )
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
        raise ValueError(
            f"{spec.name}: kvcalc cannot count this model's parameters "
            f"({spec.params_error or 'unknown family'}), and prefill's compute "
            "needs them; pick a registry model"
        )
    if max_model_len > spec.max_context:
        raise ValueError(
            f"the longest request ({max_model_len:,} tokens: longest prompt + "
            f"longest output) is beyond {spec.name}'s limit of "
            f"{spec.max_context:,} tokens; shorten the prompt or the output"
        )
    return tp, peak_tflops, bandwidth_gbs, bw_share, mfu, max_model_len


def _served_layers(
    spec: ModelSpec, tp: int, dtype: DType, scales: bool
) -> tuple[list[Layer], list[int]]:
    """The layers of one GPU (the TP split validated) and the window sizes, or ValueError naming
    the layers the simulator does not serve: kinds other than full attention, MLA, sliding
    windows and recurrent states, more than one window size, pages of more than one size."""
    layers = [lay for stage in stage_layers(spec, tp, 1) for lay in stage]
    big = 1_000_003
    odd = sorted(
        {
            lay.label
            for lay in layers
            if not (
                lay.kind in ("full", "mla", "sliding", "state")
                or not (
                    lay.stores_tokens or lay.state_elements or lay.read_bytes(big, dtype, scales)
                )
            )
            or lay.fixed_kv_bytes(dtype, scales)
            or (
                lay.kind in ("full", "mla")
                and lay.read_bytes(big, dtype, scales) != big * lay.read_bytes(1, dtype, scales)
            )
        }
    )
    if odd:
        raise ValueError(
            f"{spec.name} has {', '.join(odd)} layers; the serving simulator "
            "handles full attention, MLA, sliding windows and recurrent states. "
            "Pick another model"
        )
    windows = sorted({lay.window for lay in layers if isinstance(lay, SlidingWindow)})
    if len(windows) > 1:
        raise ValueError(
            f"{spec.name} has sliding windows of {', '.join(map(str, windows))} "
            "tokens; the serving simulator handles one window size. Pick another "
            "model"
        )
    pages = {lay.bytes_per_token(dtype, scales) for lay in layers if lay.stores_tokens}
    if len(pages) > 1:
        raise ValueError(
            f"{spec.name}'s layers cache different bytes per token "
            f"({', '.join(f'{b:,}' for b in sorted(pages))} B), so vLLM gives "
            "its groups blocks of different sizes; the serving simulator handles "
            "one block size. Pick another model"
        )
    return layers, windows


def _reserve_beside(
    kv_pool_bytes: int,
    *,
    total_bytes: int,
    wbytes: int,
    tp: int,
    gpu_mem_util: float | None,
    vllm_version: str | None,
) -> int:
    """A pool of a given size: the reserve is what vLLM's requested memory leaves beside the
    weights (per GPU) and the pool; ValueError when nothing is left."""
    util = default_gpu_mem_util("vllm", vllm_version) if gpu_mem_util is None else gpu_mem_util
    reserve_bytes = math.ceil(total_bytes * util) - math.ceil(wbytes / tp) - kv_pool_bytes
    if reserve_bytes < 0:
        raise ValueError(
            f"a KV pool of {kv_pool_bytes / 2**30:,.2f} GiB does not fit beside "
            f"the weights ({wbytes / tp / 2**30:,.2f} GiB per GPU) in "
            f"{util:g} of the GPU's {total_bytes / 2**30:,.2f} GiB; give a "
            "smaller pool or a larger gpu_memory_utilization"
        )
    return reserve_bytes


def _pool(
    spec: ModelSpec,
    *,
    total_bytes: int,
    max_model_len: int,
    wbytes: int,
    gpu_mem_util: float | None,
    reserve_bytes: int,
    block_size: int,
    dtype: DType,
    scales: bool,
    tp: int,
    vllm_version: str | None,
    max_num_batched_tokens: int | None,
    max_num_seqs: int | None,
    gpu_name: str | None,
) -> Budget:
    """vLLM's budget for the pool, or ValueError when the weights leave no pool or vLLM would
    refuse to start."""
    b = budget(
        spec,
        total_bytes=total_bytes,
        context=max_model_len,
        weights_bytes=wbytes,
        gpu_mem_util=gpu_mem_util,
        reserve_bytes=reserve_bytes,
        block_size=block_size,
        kv_dtype=dtype.name,
        scales=scales,
        tp=tp,
        engine="vllm",
        find_max_context=False,
        vllm_version=vllm_version,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
        gpu_name=gpu_name,
    )
    if b.kv_pool_bytes <= 0:
        raise ValueError(
            f"{spec.name} does not fit: its weights and the reserve take more than "
            "the memory the engine may use; use tensor parallel, smaller weights "
            "or a larger GPU"
        )
    if b.startup_error:
        raise ValueError(
            "vLLM would refuse to start: "
            + b.startup_error.split(". ")[0]
            + ". Lower the longest prompt + output, or give the cache more memory"
        )
    return b


def _groups(
    spec: ModelSpec,
    b: Budget,
    *,
    max_model_len: int,
    block_size: int,
    tp: int,
    dtype: DType,
    scales: bool,
    version: str,
    mnbt: int,
    gpu_name: str | None,
) -> dict[str, Any]:
    """vLLM's KV-cache groups (kvcalc.engines.vllm.predict) as the blocks a request holds: token
    groups of full attention, sliding groups, state blocks. ValueError without a token group."""
    p = _vllm.predict(
        spec,
        available_bytes=b.kv_pool_bytes,
        max_model_len=max_model_len,
        block_size=block_size,
        tp=tp,
        kv_dtype=dtype.name,
        scales=scales,
        vllm_version=version,
        max_num_batched_tokens=mnbt,
        gpu_name=gpu_name,
    )
    kinds = [g.kind for g in p.groups]
    full_groups = sum(k in ("full", "mla") for k in kinds)
    slide_groups = kinds.count("sliding")
    state_blocks = sum(g.blocks_per_request for g in p.groups if g.kind == "state")
    if not full_groups + slide_groups:
        raise ValueError(
            f"{spec.name} keeps no per-token cache; the serving simulator needs "
            "an attention layer. Pick another model"
        )
    return dict(full_groups=full_groups, slide_groups=slide_groups, state_blocks=state_blocks)


def _step_constants(
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


def _engine_costs(
    spec: ModelSpec, speed: StepModel | None, *, tp: int, tp_link_gbs: float | None
) -> dict[str, Any]:
    """What a real engine adds to each step (kvcalc.perf.calibration); nothing without a step
    model. ValueError when the all-reduces need a hidden size the config does not give."""
    if speed is None:
        return {}
    charge = speed.allreduce and tp > 1
    if charge and not spec.hidden_size:
        raise ValueError(
            f"{spec.name}: the all-reduce time needs the hidden size, which "
            "the config does not give"
        )
    return dict(
        step_overhead_s=speed.step_overhead_s,
        allreduces=ALLREDUCES_PER_LAYER * spec.num_layers if charge else 0,
        allreduce_latency_s=speed.allreduce_latency_s,
        allreduce_bytes_per_token=(spec.hidden_size or 0) * ACTIVATION_BYTES,
        tp_link_gbs=tp_link_gbs,
        api_overhead_s=speed.api_overhead_s,
        speed=speed.name,
    )


def _notes(
    b: Budget,
    *,
    version: str,
    bs: int,
    reserve_bytes: int,
    kv_pool_bytes: int | None,
    slide_groups: int,
    windows: list[int],
    state_blocks: int,
) -> list[str]:
    """The assumptions a result reports: where the pool came from, the null block, the
    windows' and states' blocks."""
    notes = [
        f"pool: vLLM {version}'s arithmetic at gpu_memory_utilization {b.gpu_mem_util:g}, "
        f"reserve {reserve_bytes / 2**30:g} GiB, blocks of {bs} tokens"
        if kv_pool_bytes is None
        else f"pool: {kv_pool_bytes / 2**30:,.2f} GiB as given, blocks of {bs} tokens"
    ]
    if _vllm.fact("null_block", version):
        notes.append("one block is vLLM's null block and holds no tokens")
    if slide_groups:
        notes.append(
            f"{slide_groups} sliding-window group(s) of {windows[0]:,} tokens: a "
            "request's blocks that leave the window go back to the pool as it "
            "decodes (vLLM's remove_skipped_blocks); when a prefill ends, up to one "
            "step before vLLM frees them"
        )
    if state_blocks:
        notes.append(
            f"recurrent states: {state_blocks} block(s) per request, taken at "
            "admission, read once a step"
        )
    return notes
