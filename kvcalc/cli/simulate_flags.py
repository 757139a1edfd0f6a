"""The flags of ``python -m kvcalc simulate`` and the argparse types that read them (a rate,
a number in a range, a length distribution), each refusing a bad value with a message that says
what to type. ``kvcalc.cli.simulate`` runs the command."""

from __future__ import annotations

import argparse
import math

from ..cache.weight_bytes import MAX_WEIGHT_BITS, MIN_WEIGHT_BITS
from ..core.dtypes import WEIGHT_DTYPES
from ..perf.calibration import API_OVERHEAD_BY_STACK
from ..perf.sim import MAX_REQUESTS, MAX_TOKENS, Dist, fixed, lognormal, uniform

__all__ = ["add_arguments", "dist_arg", "SHAREGPT", "LENGTH_PRESETS", "SCHEDULERS"]

# The simulator's scheduling policies (kvcalc.perf.sim.scheduler), as vLLM's documentation names
# them: chunked prefill, or the V0 default that "prioritizes prefills".
SCHEDULERS = ("chunked-prefill", "prefill-first")


def _rate(text: str) -> float:
    """Requests per second: a number above 0 and at most 1,000,000, or inf (all at time 0)."""
    t = text.strip().lower()
    if t in ("inf", "infinity"):
        return math.inf
    try:
        v = float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of requests/s or inf, got {text[:40]!r}"
        ) from None
    if not math.isfinite(v) or not 0 < v <= 1e6:
        raise argparse.ArgumentTypeError(
            f"must be above 0 and at most 1,000,000 requests/s, or inf, got {text[:40]!r}"
        )
    return v


def _num(x: float) -> str:
    return f"{x:,.0f}" if x == int(x) else f"{x:g}"


def _number(what: str, lo: float, hi: float, unit: str = "", *, lo_open: bool = False):
    """An argparse type: a finite number in [lo, hi] (above lo with ``lo_open``), in ``unit``;
    the message says what to type."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a number{' of ' + what if what else ''}, got {text[:40]!r}"
            ) from None
        if not math.isfinite(v) or not (lo < v if lo_open else lo <= v) or v > hi:
            raise argparse.ArgumentTypeError(
                f"must be {'above' if lo_open else 'at least'} {_num(lo)} and at most "
                f"{_num(hi)}{' ' + unit if unit else ''}, got {text[:40]!r}"
            )
        return v

    return parse


_share = _number("", 0.0, 1.0, lo_open=True)


# ShareGPT as vLLM's and SGLang's benchmarks sample it (prompts of 4 to 1,024 tokens, outputs of
# at least 4): log-normal, sigma 1 each (a heavy tail: the published mean end-to-end latency is
# 1.6x the median), medians set so that the clipped means are the corpus's own, 224 prompt and
# 190 output tokens per request (sglang-h200-datacrunch.yaml: 269,081 / 1,200 and
# 226,901 / 1,200 tokens of Llama 3's tokenizer).
SHAREGPT = {"prompt": "lognormal:145:1:1024:4", "output": "lognormal:120:1:1024:4"}
LENGTH_PRESETS = {"sharegpt": SHAREGPT}


def dist_arg(text: str, what: str = "length") -> Dist:
    """A length distribution: 'fixed:N', 'uniform:LO:HI' or 'lognormal:MEDIAN:SIGMA:CLIP[:LO]'
    (tokens; a bare number is fixed)."""
    parts = text.strip().lower().split(":")
    kind, nums = parts[0], parts[1:]
    try:
        if len(parts) == 1:
            return fixed(int(parts[0]), what)
        if kind == "fixed" and len(nums) == 1:
            return fixed(int(nums[0]), what)
        if kind == "uniform" and len(nums) == 2:
            return uniform(int(nums[0]), int(nums[1]), what)
        if kind == "lognormal" and len(nums) in (3, 4):
            lo = int(nums[3]) if len(nums) == 4 else 1
            return lognormal(float(nums[0]), float(nums[1]), int(nums[2]), lo=lo, what=what)
    except ValueError as exc:
        if "invalid literal" not in str(exc) and "could not convert" not in str(exc):
            raise argparse.ArgumentTypeError(str(exc)) from None
    raise argparse.ArgumentTypeError(
        f"expected fixed:N, uniform:LO:HI or lognormal:MEDIAN:SIGMA:CLIP[:LO] (tokens), got "
        f"{text[:60]!r}"
    )


_ms = _number("milliseconds", 0.0, 10_000.0, "ms")
_us = _number("microseconds", 0.0, 10_000_000.0, "µs")


_gib = _number("GiB", 0.0, float(2**20), "GiB")


_bits = _number("bits", MIN_WEIGHT_BITS, MAX_WEIGHT_BITS, "bits per weight")


def add_arguments(p, *, key, int_arg, path=str) -> None:
    """The simulate command's flags, in --help's order: the model, GPU and workload; the
    engine's formats and limits; the KV pool; the step model."""
    _workload_arguments(p, key=key, int_arg=int_arg, path=path)
    _engine_arguments(p, int_arg=int_arg)
    _pool_arguments(p, int_arg=int_arg)
    _speed_arguments(p)
    p.add_argument("--seed", type=int_arg(0, 2**31), default=0)
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _workload_arguments(p, *, key, int_arg, path) -> None:
    """The model (a registry key or a config.json), the GPU, the requests and how they arrive,
    their lengths."""
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", type=key, help="registry key")
    src.add_argument("--config", metavar="PATH", type=path, help="a Hugging Face config.json file")
    p.add_argument("--gpu", type=key, required=True, help="GPU key")
    p.add_argument("--requests", type=int_arg(1, MAX_REQUESTS), required=True)
    load = p.add_mutually_exclusive_group(required=True)
    load.add_argument(
        "--rate",
        type=_rate,
        help="Poisson arrivals, requests/s (inf: all at once, as vLLM's benchmark default)",
    )
    load.add_argument(
        "--users",
        type=int_arg(1, MAX_REQUESTS),
        help="a closed loop: each user sends the next request when one ends",
    )
    lengths = p.add_argument_group(
        "request lengths (tokens): a fixed prompt and output, a distribution for each, or a preset"
    )
    lengths.add_argument("--prompt-tokens", type=int_arg(1, MAX_TOKENS))
    lengths.add_argument("--output-tokens", type=int_arg(1, MAX_TOKENS))
    lengths.add_argument(
        "--prompt-dist",
        type=lambda s: dist_arg(s, "prompt tokens"),
        metavar="SPEC",
        help="fixed:N, uniform:LO:HI or lognormal:MEDIAN:SIGMA:CLIP[:LO]",
    )
    lengths.add_argument(
        "--output-dist",
        type=lambda s: dist_arg(s, "output tokens"),
        metavar="SPEC",
        help="as --prompt-dist",
    )
    lengths.add_argument(
        "--lengths",
        choices=tuple(LENGTH_PRESETS),
        help="a preset for both: sharegpt (log-normal, means 224 prompt and "
        "190 output tokens, each clipped to 4-1,024)",
    )


def _engine_arguments(p, *, int_arg) -> None:
    """The cache's and the weights' formats, vLLM's batching limits, tensor parallel, the
    shared prefix."""
    p.add_argument("--kv-dtype", default="bf16", choices=("bf16", "fp16", "fp8", "int8"))
    w = p.add_mutually_exclusive_group()
    w.add_argument(
        "--weight-dtype",
        choices=("auto",) + WEIGHT_DTYPES,
        default="auto",
        help="format of the weights (auto: the checkpoint's own)",
    )
    w.add_argument(
        "--weights-gib", type=_gib, help="weights of the whole model, GiB (read whole every step)"
    )
    p.add_argument(
        "--expert-weight-dtype",
        choices=WEIGHT_DTYPES,
        default=None,
        help="format of the routed experts when it is not the other weights' (Kimi-K2.5's "
        "INT4 weight-only experts beside 16-bit attention: --weight-dtype bf16 "
        "--expert-weight-dtype int4)",
    )
    w.add_argument(
        "--weight-bits",
        type=_bits,
        default=None,
        help="bits per weight of a quantised checkpoint, scales included (GGUF "
        "Q4_K_M: about 4.84); it computes in 16 bits",
    )
    p.add_argument(
        "--dequant-gemm",
        nargs="?",
        const=0,
        default=None,
        type=int_arg(1, 10**7),
        metavar="TOKENS",
        help="the 4-bit group-quantised weights (AWQ; with --weight-bits or --weight-dtype "
        "int4) are dequantised inside every matrix multiply, which the calibrated estimate "
        "times at kvcalc.perf.calibration.DEQUANT_GEMM_MFU of the 16-bit peak (vLLM's "
        "awq_gemm); with TOKENS, only in steps of fewer tokens, the others dequantising "
        "once for a 16-bit GEMM (vLLM's AWQ from 0.3: 256)",
    )
    add_engine_limits(p, int_arg)
    add_layout_arguments(p, int_arg)
    p.add_argument(
        "--scheduler",
        choices=SCHEDULERS,
        default="chunked-prefill",
        help="chunked-prefill: decodes first, prompts in chunks of what is left of "
        "max_num_batched_tokens (vLLM V1; V0 with --enable-chunked-prefill); prefill-first: "
        "vLLM V0's default scheduler (0.4-0.6 unless --enable-chunked-prefill), whole prompts in "
        "steps of their own while the decodes wait (max_num_batched_tokens then defaults to "
        "max(longest request, 2,048))",
    )
    p.add_argument(
        "--prefix-share",
        type=float,
        default=0.0,
        help="fraction of each prompt shared by every request (0 to 1)",
    )


def _pool_arguments(p, *, int_arg) -> None:
    """How the KV pool is sized: vLLM's share, the reserve, a given size or TensorRT-LLM's or
    LMDeploy's fraction of free memory; the tokens of a block."""
    pool = p.add_argument_group("the KV pool")
    pool.add_argument(
        "--block-size",
        type=int_arg(1, 1024),
        default=None,
        help="tokens per KV block (vLLM's --block-size, 16 by default; LMDeploy's "
        "cache_block_seq_len is 64)",
    )
    pool.add_argument(
        "--gpu-memory-utilization",
        "--gpu-mem-util",
        dest="gpu_mem_util",
        type=_share,
        default=None,
        help="vLLM's share of total memory (default: vLLM's own)",
    )
    pool.add_argument(
        "--reserve-gib",
        type=_gib,
        default=None,
        help="activations, CUDA graphs and non-torch memory (default 2 GiB)",
    )
    pool.add_argument(
        "--kv-pool-gib",
        type=_gib,
        default=None,
        help="the pool's size per GPU instead of vLLM's arithmetic",
    )
    pool.add_argument(
        "--kv-free-fraction",
        type=_share,
        default=None,
        help="TensorRT-LLM's kv_cache_free_gpu_mem_fraction: the pool is this "
        "share of the memory left after the weights and the reserve",
    )
    pool.add_argument(
        "--cache-max-entry-count",
        type=_share,
        default=None,
        help="LMDeploy's cache_max_entry_count (0.8 by default from v0.2.2): the pool is this "
        "share of the memory free once the weights are loaded (the reserve then defaults to "
        "0.5 GiB, the CUDA context: LMDeploy allocates its activations after the pool)",
    )


def _speed_arguments(p) -> None:
    """The step model: the calibrated estimate unless --ideal, each flag one coefficient."""
    speed = p.add_argument_group(
        "the step model (default: the calibrated estimate, kvcalc.perf.calibration; each flag "
        "replaces one fitted coefficient)"
    )
    speed.add_argument(
        "--ideal",
        action="store_true",
        help="the ideal bound instead: full bandwidth, the full dense peak (MFU 1), nothing added",
    )
    add_engine_argument(speed)
    speed.add_argument(
        "--calibrate-from",
        metavar="FILE",
        default=None,
        help="your own benchmark of this setup (rows in aiconfigurator's silicon-sample "
        "columns, the JSON of `vllm bench serve --save-result`, or `vllm bench latency` "
        "output): the engine profile's coefficients are fitted to it first, and the result "
        "says what changed and how far off the fit is on your rows",
    )
    speed.add_argument(
        "--bw-share",
        type=_share,
        default=None,
        help="achieved share of peak bandwidth (1.0 = ideal)",
    )
    speed.add_argument(
        "--step-overhead-ms", type=_ms, default=None, help="fixed cost of each engine step, ms"
    )
    speed.add_argument(
        "--mfu",
        type=_share,
        default=None,
        help="share of the dense peak the matrix multiplies reach",
    )
    speed.add_argument(
        "--dequant-mfu",
        type=_share,
        default=None,
        help="with --dequant-gemm: share of the 16-bit dense peak the dequantising "
        "matrix multiplies reach",
    )
    speed.add_argument(
        "--allreduce-latency-us",
        type=_us,
        default=None,
        help="latency of one tensor-parallel all-reduce, us (0 to 10,000)",
    )
    speed.add_argument(
        "--api-overhead-ms",
        type=_ms,
        default=None,
        help="a serving stack's time per request before the engine sees it "
        "(HTTP, tokenizer, template), ms; 0 for a benchmark that calls "
        "the engine directly",
    )
    speed.add_argument(
        "--serving-stack",
        choices=sorted(API_OVERHEAD_BY_STACK),
        default=None,
        help="the API overhead fitted on that engine's own served runs, in place "
        "of the pooled one (kvcalc.perf.calibration.API_OVERHEAD_BY_STACK)",
    )
    speed.add_argument(
        "--direct",
        action="store_true",
        help="the client calls the engine in its own process (vLLM's LLM class, "
        "trtllm-bench, a static batch): no serving stack, no API overhead",
    )


def add_engine_limits(p, int_arg) -> None:
    """The scheduler's two caps and the tensor-parallel size, as `simulate` and `capacity` take
    them (vLLM's own flag names)."""
    p.add_argument(
        "--max-num-seqs", type=int_arg(1, 10**6), default=None, help="default: vLLM's for the GPU"
    )
    p.add_argument(
        "--max-num-batched-tokens",
        type=int_arg(1, 10**7),
        default=None,
        help="default: vLLM's for the GPU",
    )
    p.add_argument("--tp", type=int_arg(1, 64), default=1, help="tensor parallel size")


def add_layout_arguments(p, int_arg) -> None:
    """Attention data parallelism and expert parallelism, as the engines' flags state them
    (SGLang --dp-size with --enable-dp-attention, vLLM --data-parallel-size with
    --enable-expert-parallel, TensorRT-LLM enable_attention_dp / moe_expert_parallel_size)."""
    p.add_argument(
        "--attention-dp",
        type=int_arg(1, 64),
        default=1,
        help="attention data parallel ranks, each of --tp GPUs with its own requests and "
        "caches; the experts split over every GPU (tp x attention-dp)",
    )
    p.add_argument(
        "--ep",
        type=int_arg(1, 512),
        default=1,
        help="expert parallel size: whole experts per GPU, tokens exchanged by all-to-all "
        "before and after each MoE layer",
    )


def add_engine_argument(p) -> None:
    """--engine NAME@VERSION: an engine profile (kvcalc.perf.engines)."""
    p.add_argument(
        "--engine",
        default=None,
        metavar="NAME@VERSION",
        help="time steps with an engine profile fitted on that engine's measured runs "
        "(vllm@0.18.0, sglang@0.5.6, trtllm@1.0; an unfitted version takes the nearest "
        "fitted one and says so); the other step-model flags then replace its coefficients",
    )
