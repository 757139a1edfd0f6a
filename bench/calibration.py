"""kvcalc against published measurements (issue 24): predicted / measured, before and after
calibration.

    .venv/bin/python bench/calibration.py            # the tables (whole corpus, held back)
    .venv/bin/python bench/calibration.py --points   # every point: its command line and ratios
    .venv/bin/python bench/calibration.py --fit      # refit the coefficients and print them
    .venv/bin/python bench/calibration.py --aic      # engine profiles on AIC's rows (issue 41)

Every measurement in tests/data/benchmarks/ is run from the command line with its own flags
(``point_runs`` builds them from the YAML entry; nothing else): ``step-time --calibrated`` for a
single stream (llama.cpp), ``simulate`` for everything else, once with ``--ideal`` (before: the
ideal bound) and once as it is (after: the calibrated estimate, kvcalc.perf.calibration). Flags that
describe an engine or a benchmark harness rather than a point (TensorRT-LLM's runtime caps,
SGLang's memory fraction) are in ``HARNESS``, each with the line of its source that states it.

The corpus split (kvcalc.perf.calibration.HELD_BACK): whole sources, chosen before any fit, so that
the held-back part shares no publication, harness or run with the training part, holds one GPU
the training part never sees (MI300X), and still has every metric class the issue judges:
serving throughput, TTFT and ITL (SGLang on 4 x H200), batch latency and output rate (vLLM on
8 x MI300X) and single-stream decode (llama.cpp's own PR on an RTX 4090).
A second held-back set (kvcalc.perf.calibration.HELD_BACK_LATER) holds sources added after the
fit, each chosen by a rule stated in its file; it is never fitted either. A third
(kvcalc.perf.calibration.HELD_BACK_FRESH) holds sources collected on 2026-12-02 without any
prediction and committed before the frozen model first ran on them: the one set nobody had
looked at while mechanisms were added. The tables are five: the whole corpus, the held-back part,
the held-back part with the later sources, the fresh set alone, and every held-back row
(ERROR_BAND, what the pages show: every point never fitted).

The fit (``--fit``) is staged; each stage is a least-squares fit of the relative error on the
training points that isolate its coefficients, with the earlier stages' values fixed:

1. BW_SHARE and STEP_OVERHEAD_S from decode steps at tensor parallel 1 whose batch is known
   (single streams and static batches): measured step = ideal byte time / share + overhead;
2. ALLREDUCE_LATENCY_S from the same kind of steps at tensor parallel > 1: the rest is
   2 x layers x (latency + the ring's bytes over the datasheet link);
3. MFU from the output rate of the offline runs (every request at once);
4. API_OVERHEAD_S from served requests' times to first token at low load (open loops of at most
   MAX_FIT_RATE requests/s, closed loops of at most MAX_FIT_USERS users): measured = the
   simulated engine's + the overhead; then the same stage on each engine family's points alone,
   API_OVERHEAD_BY_STACK (``simulate --serving-stack``), for the families that have any;
5. DEQUANT_GEMM_MFU from the request rate of the offline runs of vLLM's awq_gemm kernel, which
   dequantises 4-bit weights inside each matrix multiply (``simulate --dequant-gemm``; the
   runs in DEQUANT_KERNELS; training: vllm-pr2566-awq-a100.yaml alone), stages 1-3 fixed.
   Those runs enter no other stage.

``--fit --closed-loop`` also lets the served closed loops (vllm bench serve --max-concurrency C)
into stages 1 and 2 (their mean ITL as the step, at the batch the users keep decoding: C -
request rate x mean TTFT, Little's law). Without it the fit is the one the committed
coefficients came from. A served run of an engine family with a fitted stack is compared with
that stack's overhead (``Run.calibrated``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import statistics
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from kvcalc.cli import commands as cli  # noqa: E402
from kvcalc.config.catalog import registry  # noqa: E402
from kvcalc.perf import calibration as cal  # noqa: E402
from kvcalc.perf.sim import MAX_REQUESTS  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "benchmarks"

# Bits per weight of llama.cpp's GGUF formats: Q4_0 and Q8_0 by their block layout (32 weights
# in 18 and 34 bytes, ggml's block_q4_0 / block_q8_0), the K-quant mixes as llama.cpp's quantize
# README measures them on Llama 2 7B ("Q4_K_M | 4.84", "Q5_K_M | 5.68"). params x bpw / 8
# reproduces the sizes llama-bench printed in the corpus (6.74 B params: F16 12.55 GiB, Q8_0
# 6.67 GiB).
GGUF_BPW = {
    "gguf-q4_0": 4.5,
    "gguf-q8_0": 8.5,
    "gguf-q4_k_m": 4.84,
    "gguf-q5_k_m": 5.68,
    "f16": 16.0,
}
# Group-quantised 4-bit formats, bits per weight with their 16-bit group scales: AWQ W4A16
# (arXiv:2306.00978) in groups of 128, 4 + 16 / 128 (jan-trtllm-llamacpp-rtx.yaml: "For
# TensorRT-LLM, we used `Mistral-7b-int4 AWQ`"; zhjunqin-rtx3090-llama3-8b-engines.yaml: "使用
# AWQ 量化后的性能"); MLC LLM's q4f16_1 in groups of 32, 4 + 16 / 32, which reproduces the size
# MLC printed for Llama 3 8B ("Parameters: 4308.13 MB": 8.03 B x 4.5 / 8 bytes, in MiB).
GROUP_QUANT_BPW = {"int4-awq": 4.125, "mlc-q4f16_1": 4.5}
# The corpus's formats as kvcalc's --weight-dtype. gpt-oss's own checkpoint (weight_format
# mxfp4: its config's quantization_config {quant_method: mxfp4}) keeps attention and the rest in
# BF16 and only the MoE experts in MXFP4; kvcalc's "auto" reads exactly that from the registry
# (models.yaml: expert_weight_dtype: mxfp4), where "mxfp4" would make every weight MXFP4.
WEIGHT_DTYPE = {"bf16": "bf16", "fp16": "fp16", "fp8": "fp8", "f16": "fp16", "mxfp4": "auto"}

# What an engine or a harness sets for every point it ran, with the source's own words.
HARNESS = {
    # trtllm-perf-overview-v0.14.yaml, offline_method_quote: "Max Runtime Batch Size: 4096",
    # "Max Runtime Tokens: 8192"; the default kv_cache_free_gpu_mem_fraction is 0.9 (the v1.0
    # page: "better performance than the default setting of `0.90`"). A local client.
    ("tensorrt-llm", "offline_max_throughput"): [
        "--max-num-seqs",
        "4096",
        "--max-num-batched-tokens",
        "8192",
        "--kv-free-fraction",
        "0.9",
        "--direct",
    ],
    # trtllm-perf-overview-v1.0.yaml, header_quote: "In many cases, we also use a higher KV cache
    # percentage by setting `--kv_cache_free_gpu_mem_fraction 0.95`"; the runtime caps of the
    # v0.14 page (not restated).
    ("tensorrt-llm (pytorch backend)", "offline_max_throughput"): [
        "--max-num-seqs",
        "4096",
        "--max-num-batched-tokens",
        "8192",
        "--kv-free-fraction",
        "0.95",
        "--direct",
    ],
    # The Triton backend's online table states no runtime settings: TensorRT-LLM's default free
    # fraction 0.9, the runtime token cap of the offline table; served over HTTP.
    ("tensorrt-llm (triton tensorrtllm_backend)", "serving"): [
        "--max-num-batched-tokens",
        "8192",
        "--kv-free-fraction",
        "0.9",
    ],
    # trtllm-bench-h100x8-llama31-70b-fp8.yaml: its own flags per point (_trtllm_bench_flags).
    # zhjunqin-rtx3090-llama3-8b-engines.yaml (one RTX 3090, HTTP-served). vLLM 0.4.1's printed
    # Namespace: "gpu_memory_utilization=0.9", "max_num_seqs=256", "enable_chunked_prefill=False"
    # with "max_seq_len=8192" (V0 without chunked prefill batches up to max_model_len tokens).
    ("vllm", "0.4.1"): [
        "--gpu-memory-utilization",
        "0.9",
        "--max-num-seqs",
        "256",
        "--max-num-batched-tokens",
        "8192",
    ],
    # vllm-pr2566-awq-a100.yaml: benchmark_throughput.py of January 2024 (V0) in-process, vLLM's
    # defaults then: gpu_memory_utilization 0.9, max_num_seqs 256 and, with no chunked prefill,
    # max_num_batched_tokens = max(max_model_len, 2048) = 2,048 ("--max-model-len 1070").
    ("vllm (benchmark_throughput)", "offline_max_throughput"): [
        "--gpu-memory-utilization",
        "0.9",
        "--max-num-seqs",
        "256",
        "--max-num-batched-tokens",
        "2048",
        "--direct",
    ],
    # LMDeploy 0.4.0's api_server with no flag ("lmdeploy serve api_server
    # Meta-Llama-3-8B-Instruct --server-port 23333"): its pool convention at its default,
    # cache_max_entry_count 0.8 of the memory free once the weights are in (lmdeploy/messages.py
    # at v0.4.0: "For lmdeploy versions greater than `v0.2.1`, it defaults to 0.8, signifying the
    # percentage of FREE GPU memory to be reserved for the k/v cache"). Not for the v0.1.0a1
    # static batches (lmdeploy-a100-fp16.yaml): that TurboMind took cache_max_entry_count of the
    # TOTAL memory (BlockManager::GetBlockCount at v0.1.0a1: "total * ratio"), a value their
    # source does not state. Its scheduler's caps at their defaults too: `lmdeploy serve
    # api_server` passes --max-batch-size (lmdeploy/cli/utils.py at v0.4.0: "default=128") and
    # no max_prefill_token_num, so TurbomindEngineConfig's "max_prefill_token_num: int = 8192"
    # (the tokens a prefill iteration takes) stands; its blocks hold --cache-block-seq-len
    # tokens, "default=64" (lmdeploy/cli/utils.py at v0.4.0).
    ("lmdeploy (api_server)", "0.4.0"): [
        "--cache-max-entry-count",
        "0.8",
        "--block-size",
        "64",
        "--max-num-seqs",
        "128",
        "--max-num-batched-tokens",
        "8192",
    ],
    # MLC LLM's log: "So max batch size is 48, max KV cache token capacity is 126754, prefill
    # chunk size is 8192" (its --gpu-memory-utilization 0.90 comes from server_args).
    ("mlc-llm", "0.1.dev1166"): ["--max-num-seqs", "48", "--max-num-batched-tokens", "8192"],
    # The Triton log: "TRTGptModel maxNumSequences: 40", "kv_cache_free_gpu_mem_fraction is not
    # specified, will use default value of 0.9".
    ("tensorrt-llm (triton, RTX 3090 engine)", "0.9.0"): [
        "--max-num-seqs",
        "40",
        "--kv-free-fraction",
        "0.9",
    ],
    # LMDeploy's profile_generation: `batch` threads call the engine in-process.
    ("lmdeploy-turbomind", "static_batch"): ["--direct"],
    # sglang-benchmark-vllm060.yaml, header: "The `gpu_memory_utilization` of vLLM is by default
    # 0.9 ... SGLang's `mem_frac` is 0.88 at TP 1 and 0.85 at TP 4, so we manually set it to
    # 0.88 at TP 4"; vLLM's server "--max_model_len 4096" (0.6.0: no chunked prefill below
    # 32K, so a step batches up to max_model_len tokens; max_num_seqs 256). SGLang 0.3's
    # chunked prefill is 8,192 tokens and its running requests are capped by its pool.
    ("sglang", "0.3.0"): [
        "--gpu-memory-utilization",
        "0.88",
        "--max-num-batched-tokens",
        "8192",
        "--max-num-seqs",
        "4096",
    ],
    ("vllm", "0.6.0"): [
        "--gpu-memory-utilization",
        "0.9",
        "--max-num-batched-tokens",
        "4096",
        "--max-num-seqs",
        "256",
    ],
    # sglang-h200-datacrunch.yaml: the server's defaults (mem_frac 0.85 at TP 4, as the SGLang
    # source above states).
    ("sglang", None): [
        "--gpu-memory-utilization",
        "0.85",
        "--max-num-batched-tokens",
        "8192",
        "--max-num-seqs",
        "4096",
    ],
    # vLLM's benchmark_latency: one LLM.generate call in-process, the batch all admitted;
    # gpu_memory_utilization 0.9 (vLLM's default before 0.9.x raised it to 0.92 on main), and
    # the LLM class's 16,384-token step (large GPUs) or, before chunked prefill (V0, early
    # 2024), max_model_len's (Mixtral: 32,768).
    ("vllm", "offline_batch_latency"): ["--gpu-memory-utilization", "0.9", "--direct"],
    ("vllm (ROCm)", "offline_batch_latency"): [
        "--gpu-memory-utilization",
        "0.9",
        "--max-num-batched-tokens",
        "16384",
        "--direct",
    ],
    # gpustack-qwen3-8b-h100.yaml: "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B"
    # and no other server flag. At 4 users neither SGLang's memory fraction nor its caps bind
    # (four ShareGPT requests hold under 1 GiB of KV cache; a prompt of at most 1,024 tokens fits
    # one chunk), so nothing is passed and the simulator's defaults stand; above all, not the
    # late-2024 datacrunch defaults of ("sglang", None) below.
    ("sglang", "0.5.3.post3"): [],
    # trtllm-serve with no flags (gpustack-qwen3-8b-h100.yaml: "trtllm-serve Qwen/Qwen3-8B"):
    # TensorRT-LLM's default KV share of free memory, 0.9 (trtllm-perf-overview-v1.0.yaml,
    # header_quote: "better performance than the default setting of `0.90`"); HTTP-served.
    ("tensorrt-llm (pytorch backend)", "serving"): ["--kv-free-fraction", "0.9"],
}
# trtllm-bench-h100x8-llama31-70b-fp8.yaml, header_quote (every result file): "Max Runtime
# Batch Size: 2048", "Max Runtime Tokens: 8192", "Scheduling Policy: Guaranteed No Evict"; and
# the executor's log in each of the 63 files (results/result_<ISL>_<OSL>_<N>.txt at the pinned
# commit, every file the same): "Number of blocks in KV cache primary pool: 42668", "Number of
# tokens per block: 64.", "Allocated 52.08 GiB for max tokens in paged KV cache (2730752)",
# "Capacity Scheduler Policy: GUARANTEED_NO_EVICT". TensorRT-LLM's GuaranteedNoEvictScheduler
# (cpp/tensorrt_llm/batch_manager/capacityScheduler.cpp) admits a request only when the blocks
# every running request needs "to completion" (KVCacheManager::getRemainingBlocksToCompletion:
# prompt + max new tokens) are free, so with fixed lengths at most
# floor(42668 / ceil((ISL + OSL) / 64)) requests run at once: the simulator's --max-num-seqs,
# over the logged pool (--kv-pool-gib), where it then never preempts. (trtllm-bench's own
# max_batch_size / max_num_tokens heuristic, tensorrt_llm/bench/build/tuning.py
# calc_engine_setting, chose the engine's limits at build time; the logs print what ran.)
TRTLLM_BENCH_CAPS = {"max_num_seqs": 2048, "max_num_tokens": 8192}
TRTLLM_BENCH_POOL = {"blocks": 42668, "tokens_per_block": 64, "gib": 52.08}


TRTLLM_BENCH_FILE = "trtllm-bench-h100x8-llama31-70b-fp8.yaml"
# trtllm-bench's pool where a source logs none: TensorRT-LLM's default share of free memory,
# 0.9 (trtllm-tuning-guide-llama33-70b-h100x4.yaml, common_notes: "KV cache 90% of free
# memory"; trtllm-perf-overview-v1.0.yaml: "the default setting of `0.90`"), in TensorRT-LLM's
# blocks of 64 tokens (the logs above: "Number of tokens per block: 64.").
TRTLLM_FREE_FRACTION = 0.9
TRTLLM_TOKENS_PER_BLOCK = 64


def _no_evict_seqs(blocks: int, w: dict, cap: int) -> int:
    """Guaranteed No Evict with fixed lengths: the requests whose blocks to completion (prompt
    + max new tokens) the pool holds at once, at most ``cap``."""
    per_request = -(-(int(w["input_len"]) + int(w["output_len"])) // TRTLLM_TOKENS_PER_BLOCK)
    return max(1, min(cap, blocks // per_request))


def _build_config_flags(m: dict, base: list[str]) -> list[str]:
    """trtllm-bench throughput on an engine whose build config a source states
    (engine.build_config: max_batch_size, max_num_tokens) and whose pool it does not log: the
    default free fraction, and as many requests as Guaranteed No Evict admits in that pool (the
    pool's blocks read from the simulator's own --json for the same setup)."""
    bc = m["engine"]["build_config"]
    pool = [
        "--kv-free-fraction",
        f"{TRTLLM_FREE_FRACTION:g}",
        "--block-size",
        str(TRTLLM_TOKENS_PER_BLOCK),
    ]
    probe = run_cli(base + ["--requests", "1", "--rate", "inf", "--direct", "--json"] + pool)
    seqs = _no_evict_seqs(probe["usable_blocks"], m["workload"], int(bc["max_batch_size"]))
    return pool + [
        "--max-num-seqs",
        str(seqs),
        "--max-num-batched-tokens",
        str(int(bc["max_num_tokens"])),
        "--direct",
    ]


def _trtllm_bench_flags(w: dict) -> list[str]:
    """trtllm-bench throughput's runtime settings for one fixed-length point: its logged caps
    and pool, and the requests Guaranteed No Evict can hold at once."""
    seqs = _no_evict_seqs(TRTLLM_BENCH_POOL["blocks"], w, TRTLLM_BENCH_CAPS["max_num_seqs"])
    return [
        "--max-num-seqs",
        str(seqs),
        "--max-num-batched-tokens",
        str(TRTLLM_BENCH_CAPS["max_num_tokens"]),
        "--kv-pool-gib",
        f"{TRTLLM_BENCH_POOL['gib']:g}",
        "--direct",
    ]


# vLLM runs whose own source or version says chunked prefill was off: they run on vLLM V0's
# default scheduler (simulate --scheduler prefill-first: whole prompts in steps of their own,
# the decodes waiting; vllm/core/scheduler.py Scheduler._schedule_default). Keyed by corpus file
# and engine name, training and held-back files alike, each with the words of that file that
# state it (tests/test_calibration.py finds them there).
PREFILL_FIRST = {
    # zhjunqin-rtx3090-llama3-8b-engines.yaml, vLLM 0.4.1's printed Namespace (notes: "no
    # chunked prefill"): "scheduler_delay_factor=0.0, enable_chunked_prefill=False".
    ("zhjunqin-rtx3090-llama3-8b-engines.yaml", "vllm"): "no chunked prefill",
    # vllm-pr-mixtral-latency-a100.yaml, metric_note: "vLLM defaults of that era: CUDA graphs on
    # (no --enforce-eager in the commands), no chunked prefill".
    ("vllm-pr-mixtral-latency-a100.yaml", "vllm"): "no chunked prefill",
    # vllm-pr2542-mixtral-h100-tp8.yaml, common_notes: "vLLM of January 2024 (V0): CUDA graphs
    # on, no chunked prefill" (chunked prefill first shipped, opt-in, in 0.4.0).
    ("vllm-pr2542-mixtral-h100-tp8.yaml", "vllm"): "no chunked prefill",
    # sglang-benchmark-vllm060.yaml: vLLM 0.6.0 served with "--num-scheduler-steps 10" and
    # "--max_model_len 4096" and no --enable-chunked-prefill: 0.6.0 turns chunked prefill on by
    # itself only above 32K tokens of max_model_len (the HARNESS note above), so V0's default.
    ("sglang-benchmark-vllm060.yaml", "vllm"): "--max_model_len 4096",
}
# Server flags a corpus entry's engine.server_args may carry that kvcalc's simulate takes under
# the same name and meaning (vLLM's `vllm serve` engine arguments); any other server flag is
# described in the entry's notes, not simulated.
SERVER_FLAGS = ("--max-num-batched-tokens", "--max-num-seqs", "--gpu-memory-utilization")
V0_LATENCY_TOKENS = 32768  # vLLM V0's LLM class without chunked prefill: max_model_len (Mixtral)

# Points or metrics left out, each with its reason (never silently).
_NO_FP4 = (
    "NVFP4 weights on FP4 tensor cores: the pooled estimate's constants were fitted before kvcalc "
    "timed FP4 GEMMs (issue 41 added Blackwell's FP4 peak), and fitting these points would move "
    "them; the engine profiles time NVFP4 on B200"
)
_EP_DP = (
    "run with expert parallelism and attention data parallelism (the page's MoE options) of "
    "sizes the page does not publish: kvcalc simulates both (--ep, --attention-dp) but needs "
    "the layout, and TP 8 alone cannot split Qwen3's 4 K/V heads"
)
EXCLUDED_POINTS = {
    "trtllm10-b200-llama33-70b-fp4-tp1-1000-1000": _NO_FP4,
    "trtllm10-b200x8-qwen3-235b-a22b-fp4-tp8-1000-1000": _NO_FP4,
    "trtllm10-h100x8-qwen3-235b-a22b-fp8-tp8-1000-1000": _EP_DP,
    "trtllm10-h200x8-qwen3-235b-a22b-fp8-tp8-1000-1000": _EP_DP,
}
EXCLUDED_METRICS = {
    # vLLM 0.6.0 ran with --num-scheduler-steps 10 (multi-step scheduling), which kvcalc does
    # not simulate: tokens stream in bursts of 10 steps and a new prompt waits for a burst.
    ("vllm", "0.6.0", "itl_p50_s"): "multi-step scheduling (10 steps a burst): ITL is a burst",
    ("vllm", "0.6.0", "ttft_p50_s"): "multi-step scheduling: a new prompt waits for the burst",
    # llama.cpp's prompt_eval of a 9-token prompt is 78-106 ms, 5x a decode step: the first
    # call's setup, not prefill work.
    ("llama.cpp (CUDA)", None, "prompt_eval_s"): "llama.cpp's first-call setup (5x a step "
    "for a 9-token prompt), not prefill",
}
NOT_COMPARED = (
    "ttft_min_s",
    "ttft_max_s",
    "token_latency_p75_s",
    "token_latency_p95_s",
    "token_latency_p99_s",
    "batch_latency_p50_s",
)

# Measured metric -> (metric class, the simulator's --json key).
SIM_METRICS = {
    "output_tokens_per_s": ("output_tokens_per_s", "output_tokens_per_s"),
    "single_stream_tokens_per_s": ("single_stream", "output_tokens_per_s"),
    "tpot_p50_s": ("tpot_itl", "tpot_p50_s"),
    "tpot_mean_s": ("tpot_itl", "tpot_mean_s"),
    "itl_p50_s": ("tpot_itl", "itl_p50_s"),
    "itl_mean_s": ("tpot_itl", "itl_mean_s"),
    "token_latency_p50_s": ("tpot_itl", "itl_p50_s"),
    "ttft_mean_s": ("ttft", "ttft_mean_s"),
    "ttft_p50_s": ("ttft", "ttft_p50_s"),
    "batch_latency_s": ("batch_latency", "duration_s"),
    "e2el_p50_s": ("e2el", "e2el_p50_s"),
    "e2el_mean_s": ("e2el", "e2el_mean_s"),
    "duration_s": ("duration", "duration_s"),
    "request_throughput": ("request_throughput", "request_throughput"),
    "total_tokens_per_s": ("total_tokens_per_s", "total_tokens_per_s"),
}
CLASSES = (
    "output_tokens_per_s",
    "tpot_itl",
    "ttft",
    "single_stream",
    "batch_latency",
    "e2el",
    "request_throughput",
    "total_tokens_per_s",
    "duration",
    "prefill",
)
JUDGED = ("output_tokens_per_s", "tpot_itl", "ttft", "single_stream")  # the Done when
ENGINE_FAMILIES = ("llama.cpp", "lmdeploy", "sglang", "tensorrt-llm", "vllm")  # engine.name starts


@dataclass
class Run:
    """One command line and the measured metrics it predicts: measured name -> (class, key)."""

    argv: list[str]  # without --ideal / --calibrated
    command: str  # "simulate" or "step-time"
    metrics: dict[str, tuple[str, str]]
    calibrated: list[str] = field(default_factory=list)  # flags of the calibrated run only


@dataclass
class Point:
    id: str
    file: str
    entry: dict
    runs: list[Run] = field(default_factory=list)
    excluded: dict[str, str] = field(default_factory=dict)  # metric (or "*") -> reason

    @property
    def held_back(self) -> bool:
        return self.file in cal.HELD_BACK

    @property
    def held_back_later(self) -> bool:
        """In the second held-back set (sources added after the fit)."""
        return self.file in cal.HELD_BACK_LATER

    @property
    def held_back_fresh(self) -> bool:
        """In the third held-back set (collected without any prediction, after the model froze)."""
        return self.file in cal.HELD_BACK_FRESH

    @property
    def never_fitted(self) -> bool:
        return self.held_back or self.held_back_later or self.held_back_fresh

    @property
    def training(self) -> bool:
        return not self.never_fitted


def load_corpus() -> list[tuple[str, dict]]:
    out = []
    for path in sorted(CORPUS.glob("*.yaml")):
        for m in yaml.safe_load(path.read_text(encoding="utf-8"))["measurements"]:
            out.append((path.name, m))
    return out


def _model_key(m: dict) -> str:
    key = m["model"].get("kvcalc_key") or m["model"].get("same_architecture_as")
    if not key:
        raise ValueError(f"{m['id']}: no registry model")
    return key


def _weight_flags(m: dict) -> list[str]:
    fmt = m["weight_format"]
    if fmt.startswith("gguf-"):
        return ["--weight-bits", f"{GGUF_BPW[fmt]:g}"]
    if fmt in GROUP_QUANT_BPW:
        return ["--weight-bits", f"{GROUP_QUANT_BPW[fmt]:g}"]
    return ["--weight-dtype", WEIGHT_DTYPE[fmt]]


# The engines whose 4-bit kernel is vLLM's awq_gemm, the kernel DEQUANT_GEMM_MFU was fitted on,
# and the steps it runs in. Main before vLLM PR #2566 (vllm-pr2566-awq-a100.yaml): every matrix
# multiply. From that PR on (vLLM 0.3; the zhjunqin runs are 0.4.1), vLLM's AWQLinearMethod
# (vllm/model_executor/layers/quantization/awq.py) has "FP16_MATMUL_HEURISTIC_CONDITION =
# x.shape[:-1].numel() >= 256" and then "out = ops.awq_dequantize(...)", "out =
# torch.matmul(reshaped_x, out)", else "out = ops.awq_gemm(...)": only steps of fewer than 256
# tokens. Other engines' 4-bit kernels (MLC LLM's q4f16_1, TensorRT-LLM's W4A16 AWQ) are other
# kernels with no measurement at batch > 1 in the training part: their matrix multiplies stay at
# the MFU, as before.
DEQUANT_KERNELS = {
    ("vllm (benchmark_throughput)", "int4-awq"): ["--dequant-gemm"],
    ("vllm", "int4-awq"): ["--dequant-gemm", "256"],
}


def _kernel_flags(m: dict) -> list[str]:
    """``--dequant-gemm`` for the runs of vLLM's awq_gemm kernel (DEQUANT_KERNELS)."""
    return list(DEQUANT_KERNELS.get((m["engine"]["name"], m["weight_format"]), []))


def _kv_flag(m: dict) -> list[str]:
    kv = m.get("kv_cache_dtype")
    if kv in ("fp8", "int8"):
        return ["--kv-dtype", kv]
    if (
        kv == "f16"
        or m["weight_format"] in ("fp16", "f16")
        or m["weight_format"].startswith("gguf-")
    ):
        return ["--kv-dtype", "fp16"]
    return ["--kv-dtype", "bf16"]


def _harness(m: dict, file: str = "", base: list[str] | None = None) -> list[str]:
    eng, ver, kind = m["engine"]["name"], m["engine"].get("version"), m["workload"]["kind"]
    if (file, kind) == (TRTLLM_BENCH_FILE, "offline_max_throughput"):
        flags = _trtllm_bench_flags(m["workload"])
    elif m["engine"].get("build_config") and kind == "offline_max_throughput":
        flags = _build_config_flags(m, base or [])
    elif (eng, kind) in HARNESS:
        flags = list(HARNESS[(eng, kind)])
    elif (eng, ver) in HARNESS:
        flags = list(HARNESS[(eng, ver)])
    elif (eng, None) in HARNESS:
        flags = list(HARNESS[(eng, None)])
    else:
        flags = []
    if eng == "vllm" and kind == "offline_batch_latency":
        flags += ["--max-num-batched-tokens", str(V0_LATENCY_TOKENS)]
    return flags


def _server_flags(m: dict) -> list[str]:
    """The SERVER_FLAGS in the entry's own server command line (engine.server_args), as given
    there: e.g. "vllm serve ... --max-num-batched-tokens 4096"."""
    args = (m["engine"].get("server_args") or "").split()
    out = []
    for i, a in enumerate(args):
        name, _, value = a.partition("=")
        if name in SERVER_FLAGS:
            out += [name, value or args[i + 1]]
    return out


def clipped_lognormal_mean(median: float, sigma: float, lo: int, hi: int) -> float:
    """The mean of a log-normal of ``median`` and ``sigma`` clipped to [lo, hi] (rounding
    aside): E[X; lo < X < hi] + lo P(X <= lo) + hi P(X >= hi), in closed form."""
    mu = math.log(median)

    def cdf(z: float) -> float:
        return 0.5 * (1 + math.erf(z / math.sqrt(2)))

    a, b = (math.log(lo) - mu) / sigma, (math.log(hi) - mu) / sigma
    body = math.exp(mu + sigma**2 / 2) * (cdf(b - sigma) - cdf(a - sigma))
    return body + lo * cdf(a) + hi * (1 - cdf(b))


def median_for_mean(mean: float, sigma: float, lo: int, hi: int) -> float:
    """The median whose clipped log-normal has ``mean`` (bisection to 0.01 token)."""
    if not lo < mean < hi:
        raise ValueError(f"a mean of {mean:g} tokens cannot be clipped to {lo}-{hi}")
    a, b = 1.0, float(hi)
    while b - a > 0.01:
        m = (a + b) / 2
        a, b = (m, b) if clipped_lognormal_mean(m, sigma, lo, hi) < mean else (a, m)
    return round((a + b) / 2, 1)


def published_means(w: dict) -> tuple[float, float] | None:
    """A run's own mean prompt and output tokens (its total tokens over its prompts), where the
    entry publishes them; None where it does not."""
    n = w.get("num_prompts")
    if n and w.get("total_input_tokens") and w.get("total_output_tokens"):
        return w["total_input_tokens"] / n, w["total_output_tokens"] / n
    return None


def sharegpt_means(w: dict) -> tuple[int, int]:
    """A ShareGPT run's mean prompt and output tokens, rounded: its own where published, else
    the preset's (SHAREGPT_MEANS)."""
    own = published_means(w)
    return (round(own[0]), round(own[1])) if own else SHAREGPT_MEANS


def _lengths(w: dict) -> list[str]:
    ds = w.get("dataset") or ""
    if ds == "sharegpt":
        own = published_means(w)
        if own:
            # the preset's shape (log-normal, sigma 1, clipped to 4-1,024) at the run's own
            # means: its lengths as the benchmark drew them, in place of the corpus average
            p, o = own
            return [
                "--prompt-dist",
                f"lognormal:{median_for_mean(p, 1, 4, 1024):g}:1:1024:4",
                "--output-dist",
                f"lognormal:{median_for_mean(o, 1, 4, 1024):g}:1:1024:4",
            ]
        return ["--lengths", "sharegpt"]
    if ds.startswith("random"):
        # SGLang's bench_serving (and vLLM's benchmark_serving of 2024) draws each length
        # uniformly from int(length x range ratio) (at least 1) to the length: ratio 0 (the
        # entries that state none) is 1 to the maximum, ratio 1 the length itself.
        r = float(w.get("random_range_ratio") or 0)
        out = []
        for flag, n in (
            ("--prompt-dist", w["random_input_len"]),
            ("--output-dist", w["random_output_len"]),
        ):
            lo = max(int(int(n) * r), 1)
            out += [flag, f"fixed:{n}" if lo >= int(n) else f"uniform:{lo}:{n}"]
        return out
    d = w.get("default_if_unset") or {}
    p = w.get("input_len") if w.get("input_len") is not None else d.get("input_len")
    o = w.get("output_len") if w.get("output_len") is not None else d.get("output_len")
    return ["--prompt-tokens", str(max(int(p), 1)), "--output-tokens", str(int(o))]


def _simulate_setup(base: list[str], m: dict, tp: int) -> list[str]:
    """``simulate`` with an entry's model, GPU, formats, tensor parallelism, kernels and
    lengths: every flag but the load and the harness's."""
    return ["simulate", *base, *_kv_flag(m), "--tp", str(tp), *_kernel_flags(m)] + _lengths(
        m["workload"]
    )


def point_runs(file: str, m: dict) -> Point:
    """The command lines that reproduce one corpus entry, from its own fields."""
    pt = Point(id=m["id"], file=file, entry=m)
    if m["id"] in EXCLUDED_POINTS:
        pt.excluded["*"] = EXCLUDED_POINTS[m["id"]]
        return pt
    key = _model_key(m)
    gpu = m["gpu"]["kvcalc_key"]
    w = m["workload"]
    kind = w["kind"]
    eng, ver = m["engine"]["name"], m["engine"].get("version")
    for name in m["metrics"]:
        why = EXCLUDED_METRICS.get((eng, ver, name)) or EXCLUDED_METRICS.get((eng, None, name))
        if why:
            pt.excluded[name] = why
        elif name in NOT_COMPARED:
            pt.excluded[name] = "a run's extreme or a second summary of the same run"
    base = ["--model", key, "--gpu", gpu] + _weight_flags(m)
    tp, pp = m["parallel"].get("tp", 1), m["parallel"].get("pp", 1)
    # in the entry's own order (a set made --json list its rows by PYTHONHASHSEED)
    wanted = [k for k in m["metrics"] if k not in pt.excluded]
    if kind in ("llama_bench_tg", "single_stream_generation"):
        # One stream decoding from a short prompt: the step at its mean context (llama-bench's
        # tg N starts from an empty cache; a Dec 2023 row states no lengths: 128 assumed).
        p = w.get("input_len") or 0
        o = w.get("output_len") or 256
        ctx = max(p + o // 2, 1)
        argv = (
            ["step-time"]
            + base
            + _kv_flag(m)
            + ["--context", str(ctx), "--batch", "1"]
            + (["--tp", str(tp)] if tp > 1 else [])
            + (["--pp", str(pp)] if pp > 1 else [])
            + ["--json"]
        )
        ss = {
            k: ("single_stream", "tokens_per_s")
            for k in wanted
            if k == "single_stream_tokens_per_s"
        }
        ss.update({k: ("tpot_itl", "step_time_s") for k in wanted if k == "decode_step_mean_s"})
        if ss:
            pt.runs.append(Run(argv=argv, command="step-time", metrics=ss))
        served = {k: SIM_METRICS[k] for k in wanted if k in SIM_METRICS and k not in ss}
        if served:
            # A tool that times one request at a time and prints its first token and its
            # inter-token latency (trtllm-bench latency): a closed loop of one user, the
            # engine called in the tool's own process.
            argv = (
                _simulate_setup(base, m, tp)
                + ["--requests", str(min(int(w.get("num_prompts") or 1), MAX_REQUESTS))]
                + ["--users", "1", "--direct", "--json"]
            )
            pt.runs.append(Run(argv=argv, command="simulate", metrics=served))
        if "prefill_tokens_per_s" in wanted and pp > 1:
            pt.excluded["prefill_tokens_per_s"] = (
                "llama.cpp's layer split over two GPUs; the "
                "simulator models tensor parallelism only"
            )
        elif "prefill_tokens_per_s" in wanted:
            # llama-bench's pp N: one N-token prompt (512; a Dec 2023 row: 512 assumed).
            n = 512
            argv = (
                ["simulate"]
                + base
                + _kv_flag(m)
                + [
                    "--requests",
                    "1",
                    "--rate",
                    "inf",
                    "--prompt-tokens",
                    str(n),
                    "--output-tokens",
                    "1",
                    "--direct",
                    "--json",
                ]
            )
            pt.runs.append(
                Run(
                    argv=argv,
                    command="simulate",
                    metrics={"prefill_tokens_per_s": ("prefill", f"rate:{n}")},
                )
            )
        return pt
    n = int(w.get("num_prompts") or w.get("batch_size") or 1)
    load = []
    if kind in ("static_batch", "offline_batch_latency"):
        b = int(w["batch_size"])
        load = ["--requests", str(b), "--rate", "inf", "--max-num-seqs", str(b)]
    elif w.get("max_concurrency"):
        # vllm bench serve --max-concurrency C at rate inf: C requests in flight, the next sent
        # as one ends (a semaphore around the requests), i.e. a closed loop of C users.
        load = ["--requests", str(min(n, MAX_REQUESTS)), "--users", str(int(w["max_concurrency"]))]
    else:
        rate = w.get("request_rate")
        rate = "inf" if rate is None or rate == math.inf else f"{rate:g}"
        load = ["--requests", str(min(n, MAX_REQUESTS)), "--rate", rate]
    setup = _simulate_setup(base, m, tp)
    argv = (
        setup
        + load
        + _harness(m, file, setup)
        + _server_flags(m)
        + (["--scheduler", "prefill-first"] if (file, eng) in PREFILL_FIRST else [])
        + ["--json"]
    )
    metrics = {k: SIM_METRICS[k] for k in wanted if k in SIM_METRICS}
    # A served run (an HTTP client) goes through its engine's own serving stack, where kvcalc
    # has that stack's fitted API overhead; the ideal bound has none.
    fam = next((f for f in ENGINE_FAMILIES if eng.startswith(f)), None)
    stack = (
        ["--serving-stack", fam]
        if kind == "serving" and "--direct" not in argv and fam in cal.API_OVERHEAD_BY_STACK
        else []
    )
    pt.runs.append(Run(argv=argv, command="simulate", metrics=metrics, calibrated=stack))
    return pt


def all_points() -> list[Point]:
    return [point_runs(f, m) for f, m in load_corpus()]


def run_cli(argv: list[str]) -> dict:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    if code:
        raise ValueError(err.getvalue().strip() or f"exit {code}")
    return json.loads(out.getvalue())


def _value(j: dict, key: str, calibrated: bool) -> float:
    if key.startswith("rate:"):  # tokens per second of a prompt: its length / TTFT
        return int(key.split(":")[1]) / j["ttft_p50_s"]
    if calibrated and "estimated_step_time_s" in j:
        key = {
            "tokens_per_s": "estimated_tokens_per_s",
            "step_time_s": "estimated_step_time_s",
        }.get(key, key)
    return j[key]


def evaluate(points: list[Point]) -> list[dict]:
    """One row per compared metric: class, measured, predicted before and after."""
    rows = []
    for pt in points:
        for run in pt.runs:
            if run.command == "step-time":
                after = run_cli(run.argv + ["--calibrated"])
                before = after
            else:
                before = run_cli(run.argv + ["--ideal"])
                after = run_cli(run.argv + run.calibrated)
            for name, (klass, key) in run.metrics.items():
                meas = float(pt.entry["metrics"][name])
                rows.append(
                    dict(
                        id=pt.id,
                        file=pt.file,
                        held_back=pt.held_back,
                        held_back_later=pt.held_back_later,
                        held_back_fresh=pt.held_back_fresh,
                        metric=name,
                        klass=klass,
                        measured=meas,
                        before=_value(before, key, False),
                        after=_value(after, key, True),
                        argv=" ".join(run.argv + run.calibrated),
                    )
                )
    return rows


def summary(rows: list[dict], which: str) -> dict[str, dict]:
    """Per class: n, median |ratio - 1|, median ratio, 10th-90th percentile ratio, worst."""
    out = {}
    for klass in CLASSES:
        rs = [r for r in rows if r["klass"] == klass]
        if not rs:
            continue
        ratios = sorted(r[which] / r["measured"] for r in rs)
        dev = sorted(abs(x - 1) for x in ratios)
        worst = max(max(x, 1 / x) for x in ratios)
        out[klass] = dict(
            n=len(rs),
            median_abs=statistics.median(dev),
            median=statistics.median(ratios),
            lo=_pct(ratios, 10),
            hi=_pct(ratios, 90),
            worst=worst,
        )
    return out


def _pct(xs: list[float], p: float) -> float:
    pos = (len(xs) - 1) * p / 100
    i = int(pos)
    return xs[i] if i + 1 >= len(xs) else xs[i] + (xs[i + 1] - xs[i]) * (pos - i)


def table(rows: list[dict], title: str) -> list[str]:
    b, a = summary(rows, "before"), summary(rows, "after")
    lines = [
        f"### {title}",
        "",
        "| metric | n | before: median pred/meas (p10-p90), worst | after: median "
        "pred/meas (p10-p90), worst | after: median abs error |",
        "|---|---|---|---|---|",
    ]
    for k in CLASSES:
        if k not in a:
            continue
        star = " *" if k in JUDGED else ""
        lines.append(
            f"| {k}{star} | {a[k]['n']} | {b[k]['median']:.2f} ({b[k]['lo']:.2f}-"
            f"{b[k]['hi']:.2f}), {b[k]['worst']:.2f}x | {a[k]['median']:.2f} "
            f"({a[k]['lo']:.2f}-{a[k]['hi']:.2f}), {a[k]['worst']:.2f}x | "
            f"{a[k]['median_abs']:.1%} |"
        )
    return lines


# -- the fit -----------------------------------------------------------------------------------

TRIM = 0.25  # stage 1 drops steps more than 25% off its first fit, then fits again
MAX_FIT_RATE = 4.0  # requests/s: "low load" (decode steps by Little's law; the API overhead)
# With --closed-loop: a closed loop (vllm bench serve --max-concurrency) of at most 8 users is
# low load too (the 2025 engines' per-token runs in the corpus are all closed loops of 1-8).
MAX_FIT_USERS = 8
SHAREGPT_MEANS = (224, 190)  # the --lengths sharegpt preset's mean prompt and output tokens


@dataclass
class Step:
    """A decode step whose batch is known: measured and its ideal parts, per GPU."""

    id: str
    source: str  # the corpus file
    tp: int
    measured_s: float
    ideal_s: float  # bytes / full bandwidth (the ideal bound)
    allreduces: int  # per step (0 at tp 1)
    wire_s: float  # the all-reduces' bytes over the link, all of them (no latency)
    batch: int = 0  # sequences decoding in the step


def _step(pt: Point, measured: float, argv: list[str], tp: int) -> Step:
    j = run_cli(argv + ["--calibrated"])
    key = argv[argv.index("--model") + 1]
    gpu = registry().gpu(argv[argv.index("--gpu") + 1])
    spec = registry().model(key).spec
    n = cal.ALLREDUCES_PER_LAYER * spec.num_layers if tp > 1 else 0
    wire = cal.allreduce_seconds(spec, j["batch"], tp, gpu.tp_link_gbs, 0.0)
    return Step(
        id=pt.id,
        source=pt.file,
        tp=tp,
        measured_s=measured,
        ideal_s=j["step_time_s"],
        allreduces=n,
        wire_s=wire,
        batch=j["batch"],
    )


def decode_steps(points: list[Point], closed_loop: bool = False) -> list[Step]:
    """Stage 1 and 2's points (training only): single streams (llama.cpp, LMDeploy's batches of
    one), LMDeploy's per-token latency in its static batches, and vLLM latency runs whose
    prompts are a small part of the work (batch x prompt <= 2,048 tokens, >= 100 steps: the
    batch latency over the steps), each at its mean context. With ``closed_loop``, also served
    closed loops of at most MAX_FIT_USERS users (their mean ITL or TPOT), each at its mean
    context with the batch its users keep decoding."""
    out = []
    for pt in points:
        if not pt.training or "*" in pt.excluded:
            continue
        m, w = pt.entry, pt.entry["workload"]
        met = {k: v for k, v in m["metrics"].items() if k not in pt.excluded}
        tp = m["parallel"].get("tp", 1)
        kind = w["kind"]
        if kind in ("llama_bench_tg", "single_stream_generation"):
            if "single_stream_tokens_per_s" in met:
                out.append(_step(pt, 1 / met["single_stream_tokens_per_s"], pt.runs[0].argv, tp))
            continue
        if kind == "serving" and w.get("max_concurrency"):
            users = int(w["max_concurrency"])
            itl = met.get("itl_mean_s") or met.get("tpot_mean_s") or met.get("itl_p50_s")
            rate, ttft = met.get("request_throughput"), met.get("ttft_mean_s")
            if not closed_loop or users > MAX_FIT_USERS or None in (itl, rate, ttft):
                continue
            # Little's law on the wait for a first token: of the C requests in flight, rate x
            # TTFT are waiting for it, the rest decode in every step.
            b = max(1, round(users - rate * ttft))
            p, o = (
                sharegpt_means(w)
                if w.get("dataset") == "sharegpt"
                else (w["input_len"], w["output_len"])
            )
            argv = (
                ["step-time", "--model", _model_key(m), "--gpu", m["gpu"]["kvcalc_key"]]
                + _weight_flags(m)
                + _kv_flag(m)
                + ["--tp", str(tp), "--batch", str(b), "--context", str(p + o // 2), "--json"]
            )
            out.append(_step(pt, itl, argv, tp))
            continue
        if kind == "serving" and (w.get("request_rate") or math.inf) <= MAX_FIT_RATE:
            # Low load: the batch is the requests in flight, rate x end-to-end latency
            # (Little's law), each at its mean context.
            itl = met.get("itl_mean_s") or met.get("itl_p50_s") or met.get("tpot_p50_s")
            if itl is None:
                continue
            if w.get("dataset") == "sharegpt":
                p, o = sharegpt_means(w)
            else:
                p, o = w["input_len"], w["output_len"]
            e2el = (
                met.get("e2el_mean_s")
                or met.get("e2el_p50_s")
                or met.get("ttft_mean_s", 0) + (o - 1) * itl
            )
            b = max(1, round(w["request_rate"] * e2el))
            argv = (
                ["step-time", "--model", _model_key(m), "--gpu", m["gpu"]["kvcalc_key"]]
                + _weight_flags(m)
                + _kv_flag(m)
                + ["--tp", str(tp), "--batch", str(b), "--context", str(p + o // 2), "--json"]
            )
            out.append(_step(pt, itl, argv, tp))
            continue
        if kind not in ("static_batch", "offline_batch_latency"):
            continue
        d = w.get("default_if_unset") or {}
        p = w.get("input_len") if w.get("input_len") is not None else d.get("input_len")
        o = w.get("output_len") if w.get("output_len") is not None else d.get("output_len")
        b = w["batch_size"]
        argv = (
            ["step-time", "--model", _model_key(m), "--gpu", m["gpu"]["kvcalc_key"]]
            + _weight_flags(m)
            + _kv_flag(m)
            + ["--tp", str(tp), "--batch", str(b), "--context", str(p + o // 2), "--json"]
        )
        if kind == "static_batch":
            if b == 1 and "single_stream_tokens_per_s" in met:
                out.append(_step(pt, 1 / met["single_stream_tokens_per_s"], argv, tp))
            elif "token_latency_p50_s" in met:
                out.append(_step(pt, met["token_latency_p50_s"], argv, tp))
        elif "batch_latency_s" in met and b * p <= 2048 and o >= 100:
            out.append(_step(pt, met["batch_latency_s"] / o, argv, tp))
    return out


def fit_share_overhead(steps: list[Step]) -> tuple[float, float, list[str]]:
    """Stage 1: measured = ideal / share + overhead, least squares on the relative error,
    trimmed once; (share, overhead s, ids dropped)."""

    def solve(ss):
        # minimise sum(w (a u + o v - 1)^2), u = ideal / measured, v = 1 / measured, each
        # source weighing as one (w = 1 / its points), so no one table outvotes the others
        n = Counter(s.source for s in ss)
        su = sv = suv = bu = bv = 0.0
        for s in ss:
            w, u, v = 1 / n[s.source], s.ideal_s / s.measured_s, 1 / s.measured_s
            su, sv, suv, bu, bv = (
                su + w * u * u,
                sv + w * v * v,
                suv + w * u * v,
                bu + w * u,
                bv + w * v,
            )
        det = su * sv - suv * suv
        return (bu * sv - bv * suv) / det, (su * bv - suv * bu) / det

    tp1 = [s for s in steps if s.tp == 1]
    a, o = solve(tp1)
    kept = [s for s in tp1 if abs((a * s.ideal_s + o) / s.measured_s - 1) <= TRIM]
    a, o = solve(kept)
    return min(1.0, 1 / a), max(0.0, o), sorted(s.id for s in tp1 if s not in kept)


def fit_allreduce_latency(steps: list[Step], share: float, overhead: float) -> float:
    """Stage 2: what tensor-parallel steps take beyond stage 1's model and the wire time is
    2 x layers all-reduce latencies; least squares on the relative error."""
    tps = [s for s in steps if s.tp > 1]
    n = Counter(s.source for s in tps)
    num = den = 0.0
    for s in tps:
        k = s.ideal_s / share + overhead + s.wire_s
        num += (s.allreduces / s.measured_s) * (1 - k / s.measured_s) / n[s.source]
        den += (s.allreduces / s.measured_s) ** 2 / n[s.source]
    return max(0.0, num / den) if den else 0.0


def _coef_flags(share, overhead, latency, mfu=None, api=None, dequant=None) -> list[str]:
    f = [
        "--bw-share",
        f"{share:g}",
        "--step-overhead-ms",
        f"{overhead * 1e3:g}",
        "--allreduce-latency-us",
        f"{latency * 1e6:g}",
    ]
    if mfu is not None:
        f += ["--mfu", f"{mfu:g}"]
    if api is not None:
        f += ["--api-overhead-ms", f"{api * 1e3:g}"]
    if dequant is not None:
        f += ["--dequant-mfu", f"{dequant:g}"]
    return f


def _sim_rows(
    points, kinds, metrics, flags, rate_max=None, users_max=None, dequant=False
) -> list[tuple[float, float, str]]:
    """(predicted, measured, source) of training points of ``kinds`` for ``metrics``, the
    simulator run with ``flags``; with ``rate_max``, only open loops at most that rate and
    (``users_max``) closed loops of at most that many users; only the runs with dequantising
    GEMMs (``--dequant-gemm``) when ``dequant``, else only the others."""
    out = []
    for pt in points:
        if not pt.training or "*" in pt.excluded or pt.entry["workload"]["kind"] not in kinds:
            continue
        rate = pt.entry["workload"].get("request_rate")
        users = pt.entry["workload"].get("max_concurrency")
        if rate_max is not None and users:
            if users_max is None or users > users_max:
                continue
        elif rate_max is not None and (rate is None or rate > rate_max):
            continue
        for run in pt.runs:
            use = {k: v for k, v in run.metrics.items() if k in metrics}
            if run.command != "simulate" or not use or ("--dequant-gemm" in run.argv) != dequant:
                continue
            j = run_cli(run.argv + flags)
            for name, (_, key) in use.items():
                out.append((_value(j, key, True), float(pt.entry["metrics"][name]), pt.file))
    return out


def _weights(rows) -> list[float]:
    """Each source weighs as one: 1 / its rows."""
    n = Counter(r[2] for r in rows)
    return [1 / n[r[2]] for r in rows]


def fit_mfu(points, share, overhead, latency) -> float:
    """Stage 3: the MFU at which the simulator's output rate of the offline (all requests at
    once) runs matches theirs: least squares on log(predicted / measured), each source weighing
    as one, golden-section search on [0.2, 0.95] to 0.001."""

    def loss(m):
        rows = _sim_rows(
            points,
            ("offline_max_throughput",),
            ("output_tokens_per_s",),
            _coef_flags(share, overhead, latency, m),
        )
        return sum(w * math.log(p / y) ** 2 for w, (p, y, _) in zip(_weights(rows), rows))

    return _golden(loss, 0.2, 0.95)


def _golden(loss, lo: float, hi: float) -> float:
    """The minimum of ``loss`` on [lo, hi] by golden-section search, to 0.001."""
    g = (math.sqrt(5) - 1) / 2
    c, d = hi - g * (hi - lo), lo + g * (hi - lo)
    fc, fd = loss(c), loss(d)
    while hi - lo > 0.001:
        if fc < fd:
            hi, d, fd = d, c, fc
            c = hi - g * (hi - lo)
            fc = loss(c)
        else:
            lo, c, fc = c, d, fd
            d = lo + g * (hi - lo)
            fd = loss(d)
    return (lo + hi) / 2


def fit_api(points, share, overhead, latency, mfu) -> float:
    """Stage 4: the API overhead is what served requests' times to first token at low load
    (open loops of at most MAX_FIT_RATE requests/s and closed loops of at most MAX_FIT_USERS
    users: the time to first token is measured directly, so a closed loop needs no inferred
    batch) take beyond the simulated engine's; least squares on the relative error, each
    source weighing as one, closed form. ZeroDivisionError when no point qualifies."""
    rows = _sim_rows(
        points,
        ("serving",),
        ("ttft_mean_s", "ttft_p50_s"),
        _coef_flags(share, overhead, latency, mfu, 0.0),
        rate_max=MAX_FIT_RATE,
        users_max=MAX_FIT_USERS,
    )
    w = _weights(rows)
    num = sum(wi * (y - p) / y**2 for wi, (p, y, _) in zip(w, rows))
    den = sum(wi / y**2 for wi, (p, y, _) in zip(w, rows))
    return max(0.0, num / den)


def fit_dequant_mfu(points, share, overhead, latency, mfu) -> float:
    """Stage 5: the share of the 16-bit peak at which the simulator's request rate of the offline
    runs with dequantising GEMMs (``--dequant-gemm``) matches theirs, stages 1-3 fixed: least
    squares on log(predicted / measured), each source weighing as one, golden-section search on
    [0.02, 0.95] to 0.001. (Their total tokens/s is the same number times a constant: not
    counted twice.)"""

    def loss(d):
        rows = _sim_rows(
            points,
            ("offline_max_throughput",),
            ("request_throughput",),
            _coef_flags(share, overhead, latency, mfu, dequant=d),
            dequant=True,
        )
        return sum(w * math.log(p / y) ** 2 for w, (p, y, _) in zip(_weights(rows), rows))

    return _golden(loss, 0.02, 0.95)


def fit(points: list[Point], closed_loop: bool = False) -> dict:
    """The four stages, each value rounded as it is printed before the next stage uses it;
    ``closed_loop`` (--closed-loop) lets closed loops of at most MAX_FIT_USERS users into
    stages 1, 2 and 4 (off: the fit as the committed coefficients were made)."""
    steps = decode_steps(points, closed_loop)
    share, overhead, dropped = fit_share_overhead(steps)
    share, overhead = round(share, 3), round(overhead, 4)
    latency = round(fit_allreduce_latency(steps, share, overhead), 6)
    mfu = round(fit_mfu(points, share, overhead, latency), 3)
    api = round(fit_api(points, share, overhead, latency, mfu), 4)
    dequant = round(fit_dequant_mfu(points, share, overhead, latency, mfu), 3)
    stacks = {}
    for fam in ENGINE_FAMILIES:  # stage 4 again on one engine family's points
        mine = [pt for pt in points if engine_family(pt) == fam]
        with contextlib.suppress(ZeroDivisionError):  # no served run at low load
            stacks[fam] = round(fit_api(mine, share, overhead, latency, mfu), 4)
    return dict(
        BW_SHARE=share,
        STEP_OVERHEAD_S=overhead,
        ALLREDUCE_LATENCY_S=latency,
        MFU=mfu,
        DEQUANT_GEMM_MFU=dequant,
        API_OVERHEAD_S=api,
        API_OVERHEAD_BY_STACK=stacks,
        steps=len(steps),
        trimmed=dropped,
    )


def fit_report(points: list[Point], closed_loop: bool = False) -> list[str]:
    f = fit(points, closed_loop)
    return [
        f"# closed loops of at most {MAX_FIT_USERS} users in stage 4: yes; in stages 1 and 2: "
        f"{'yes' if closed_loop else 'no (--closed-loop lets them in)'}",
        f"# stage 1: {f['steps']} decode steps of known batch (training); trimmed: "
        f"{', '.join(f['trimmed']) or 'none'}",
        f"BW_SHARE = {f['BW_SHARE']!r}",
        f"STEP_OVERHEAD_S = {f['STEP_OVERHEAD_S']!r}",
        f"ALLREDUCE_LATENCY_S = {f['ALLREDUCE_LATENCY_S']!r}",
        f"MFU = {f['MFU']!r}",
        f"DEQUANT_GEMM_MFU = {f['DEQUANT_GEMM_MFU']!r}",
        f"API_OVERHEAD_S = {f['API_OVERHEAD_S']!r}",
        f"API_OVERHEAD_BY_STACK = {f['API_OVERHEAD_BY_STACK']!r}",
    ]


def _never_fitted(r: dict) -> bool:
    return r["held_back"] or r["held_back_later"] or r["held_back_fresh"]


def error_band(rows: list[dict]) -> dict[str, tuple[float, float, int]]:
    """kvcalc.perf.calibration.ERROR_BAND from every held-back row (HELD_BACK, the later
    HELD_BACK_LATER and the fresh HELD_BACK_FRESH: none was ever fitted): per judged class,
    (median |predicted / measured - 1|, worst max(ratio, 1 / ratio), n), rounded as committed."""
    s = summary([r for r in rows if _never_fitted(r)], "after")
    return {
        k: (round(s[k]["median_abs"], 3), round(s[k]["worst"], 2), s[k]["n"])
        for k in JUDGED
        if k in s
    }


# -- a diagnostic, not the committed model: one profile per engine family ---------------------


def engine_family(pt: Point) -> str:
    """The corpus entry's engine family ("vllm (ROCm)" is vllm)."""
    name = pt.entry["engine"]["name"]
    return next((f for f in ENGINE_FAMILIES if name.startswith(f)), name)


def per_engine(points: list[Point], closed_loop: bool) -> list[str]:
    """What one profile per engine family would do on the held-back sources: the pooled fit's
    share and MFU, and per family the step overhead (stage 1 with the share fixed), the
    all-reduce latency (stage 2) and the API overhead (stage 4) from that family's training
    points only (the pooled value where it has none). Printed, not committed: it shows whether
    the engine, an input a deploying engineer knows, explains the held-back error."""
    pooled = fit(points, closed_loop)
    share, mfu = pooled["BW_SHARE"], pooled["MFU"]
    steps = decode_steps(points, closed_loop)
    family = {pt.id: engine_family(pt) for pt in points}
    lines = [
        f"# pooled fit (closed loops: {'yes' if closed_loop else 'no'}): "
        + ", ".join(
            f"{k} {pooled[k]:g}"
            for k in ("BW_SHARE", "STEP_OVERHEAD_S", "ALLREDUCE_LATENCY_S", "MFU", "API_OVERHEAD_S")
        ),
        "| engine | TP 1 steps | TP > 1 steps | step overhead (ms) | all-reduce (us) | "
        "API overhead (ms) |",
        "|---|---|---|---|---|---|",
    ]
    prof = {}
    for f in ENGINE_FAMILIES:
        ss = [s for s in steps if family[s.id] == f]
        tp1 = [s for s in ss if s.tp == 1]
        over = pooled["STEP_OVERHEAD_S"]
        if len(tp1) >= 2:  # least squares on the relative error, the share fixed
            num = sum((1 - s.ideal_s / share / s.measured_s) / s.measured_s for s in tp1)
            over = max(0.0, num / sum(1 / s.measured_s**2 for s in tp1))
        lat = (
            fit_allreduce_latency(ss, share, over)
            if any(s.tp > 1 for s in ss)
            else pooled["ALLREDUCE_LATENCY_S"]
        )
        mine = [pt for pt in points if family[pt.id] == f]
        try:
            api = fit_api(mine, share, over, lat, mfu)
        except ZeroDivisionError:  # no served TTFT at low load in this family
            api = pooled["API_OVERHEAD_S"]
        prof[f] = (over, lat, api)
        lines.append(
            f"| {f} | {len(tp1)} | {sum(s.tp > 1 for s in ss)} | {over * 1e3:.2f} | "
            f"{lat * 1e6:.1f} | {api * 1e3:.1f} |"
        )
    rows = []
    for pt in points:
        if not pt.held_back:
            continue
        over, lat, api = prof[family[pt.id]]
        for run in pt.runs:
            if run.command == "step-time":
                j = run_cli(
                    run.argv + ["--bw-share", f"{share:g}", "--step-overhead-ms", f"{over * 1e3:g}"]
                )
            else:
                j = run_cli(run.argv + _coef_flags(share, over, lat, mfu, api))
            for name, (klass, key) in run.metrics.items():
                rows.append(
                    dict(
                        klass=klass,
                        after=_value(j, key, True),
                        measured=float(pt.entry["metrics"][name]),
                    )
                )
    s = summary(rows, "after")
    lines += ["", "held back, one profile per engine family: median |pred / meas - 1|, worst"]
    lines += [
        f"  {k}: {s[k]['median_abs']:.1%}, {s[k]['worst']:.2f}x (n {s[k]['n']})"
        for k in JUDGED
        if k in s
    ]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", action="store_true", help="every point with its command")
    ap.add_argument("--fit", action="store_true", help="refit and print the coefficients")
    ap.add_argument("--json", action="store_true", help="the rows as JSON")
    ap.add_argument(
        "--closed-loop",
        action="store_true",
        help=f"with --fit: closed loops of at most {MAX_FIT_USERS} users enter stages 1, 2 and 4",
    )
    ap.add_argument(
        "--per-engine",
        action="store_true",
        help="a diagnostic: one profile per engine family, on the held-back part",
    )
    ap.add_argument(
        "--aic",
        action="store_true",
        help="the engine profiles on aiconfigurator's silicon sample (training split, "
        "bench/aic.py): before and after, leave one model / GPU out, calibrated from one row; "
        "with --fit, refit the profiles first (about half an hour on 2 cores)",
    )
    ap.add_argument("--quick", action="store_true", help="with --aic: every 8th row only")
    args = ap.parse_args()
    if args.aic:
        import aic

        aic.main(fit_first=args.fit, quick=args.quick)
        return
    points = all_points()
    if args.per_engine:
        for line in per_engine(points, args.closed_loop):
            print(line)
        return
    if args.fit:
        for line in fit_report(points, args.closed_loop):
            print(line)
        return
    rows = evaluate(points)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    held = [r for r in rows if r["held_back"]]
    later = [r for r in rows if r["held_back"] or r["held_back_later"]]
    fresh = [r for r in rows if r["held_back_fresh"]]
    print(
        f"{len(points)} corpus entries, {len(rows)} compared metrics "
        f"({len(held)} held back: {', '.join(cal.HELD_BACK) or 'none'}; "
        f"{len(later) - len(held)} more held back later: "
        f"{', '.join(cal.HELD_BACK_LATER) or 'none'}; "
        f"{len(fresh)} held back fresh: {', '.join(cal.HELD_BACK_FRESH) or 'none'})"
    )
    print()
    for line in (
        table(rows, "Whole corpus")
        + [""]
        + table(held, "Held back")
        + [""]
        + table(later, "Held back, with the sources added later (HELD_BACK_LATER)")
        + [""]
        + table(fresh, "Held back fresh (HELD_BACK_FRESH: never looked at before the model froze)")
        + [""]
        + table([r for r in rows if _never_fitted(r)], "Every held-back row (ERROR_BAND)")
    ):
        print(line)
    print()
    print(
        "* the classes the issue judges. Before: the ideal bound; after: the calibrated estimate."
    )
    print(f"ERROR_BAND = {error_band(rows)!r}")
    for pt in points:
        for k, why in pt.excluded.items():
            if why and not why.startswith("a run's extreme"):
                print(f"excluded: {pt.id} {'' if k == '*' else k + ' '}- {why}")
    if args.points:
        print()
        for r in rows:
            print(
                f"{r['id']} {r['metric']}: measured {r['measured']:.4g}, before "
                f"{r['before'] / r['measured']:.2f}x, after {r['after'] / r['measured']:.2f}x"
                f"{' (held back)' if r['held_back'] else ''}"
                f"{' (held back later)' if r['held_back_later'] else ''}"
                f"{' (held back fresh)' if r['held_back_fresh'] else ''}\n    python -m kvcalc "
                f"{r['argv']}"
            )


if __name__ == "__main__":
    main()
