"""aiconfigurator's silicon sample (training split) as kvcalc command lines (issue 41).

``tests/data/benchmarks/aic/aic-silicon-train.csv`` holds the 992 training rows of NVIDIA
aiconfigurator's ``silicon_sample.csv`` (Apache-2.0; which rows, and why the rest is held out:
``/work/shared/benchmarks/README.md``, copied as ``tests/data/benchmarks/aic/README.md``). Each
row is one real end-to-end run: an engine and its version, a model, a GPU, a parallel layout,
fixed input and output lengths, a closed loop of ``batch_size`` users, and the measured mean
TTFT and TPOT.

``row_argv`` turns a row into the ``simulate`` command that runs it, with the row's own flags
only (nothing fitted here): the model's config.json, the GPU, the layout (``--tp`` attention
tensor parallel, ``--attention-dp``, ``--ep``), the weights' format as the row states it
(``precision``, ``gemm_quant_mode``, ``moe_quant_mode``), the lengths and the users, and the
closed loop its client ran (``loop_argv``). ``before``
is today's model as it stood before issue 41 (one pooled calibrated estimate, every GPU of the
layout as tensor parallel); ``after`` adds ``--engine backend@version``.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import io
import json
import os
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kvcalc.cli import commands as cli  # noqa: E402
from kvcalc.config.catalog import registry  # noqa: E402
from kvcalc.perf.calibrate_from import BenchRow, bench_row_loop  # noqa: E402

AIC = ROOT / "tests" / "data" / "benchmarks" / "aic"
CSV = AIC / "aic-silicon-train.csv"

CONFIGS = {
    "meta-llama/Llama-3.1-8B-Instruct": "meta-llama--Meta-Llama-3.1-8B.json",
    # NVIDIA's FP8 copy: the 8B config with FP8 weights (the README beside the CSV)
    "nvidia/Llama-3.1-8B-Instruct-FP8": "meta-llama--Meta-Llama-3.1-8B.json",
    "Qwen/Qwen3-32B": "Qwen--Qwen3-32B.json",
    "Qwen/Qwen3-235B-A22B-FP8": "Qwen--Qwen3-235B-A22B-FP8.json",
    "MiniMaxAI/MiniMax-M2.5": "MiniMaxAI--MiniMax-M2.5.json",
    "zhipuai/GLM-5": "zai-org--GLM-5.json",
    "moonshotai/Kimi-K2.5": "moonshotai--Kimi-K2.5.json",
}
GPUS = {
    "h100_sxm": "h100-sxm-80gb",
    "h200_sxm": "h200-141gb",
    "b200_sxm": "b200",
    "gb200_sxm": "gb200",
    "gb200": "gb200",
    "b300_sxm": "b300",
    "gb300_sxm": "gb300",
    "gb300": "gb300",
    "a100_sxm": "a100-80gb",
    "a100_pcie": "a100-pcie-80gb",
    "h100_pcie": "h100-pcie-80gb",
    "l40s": "l40s",
    "l4": "l4",
}
# Where a model's config.json is looked for (``config_path``): the training models' copies,
# then any folder named in KVCALC_AIC_CONFIGS (':'-separated), as ``org--name.json``.
CONFIG_DIRS = [AIC / "configs"] + [
    Path(d) for d in os.environ.get("KVCALC_AIC_CONFIGS", "").split(":") if d
]


def gpu_key(system: str) -> str:
    """kvcalc's registry key for one of AIC's system names (ValueError naming the known ones)."""
    if system not in GPUS:
        raise ValueError(f"AIC system {system!r}: no registry GPU (known: {', '.join(GPUS)})")
    return GPUS[system]


def config_path(model: str) -> Path:
    """The config.json of a row's model (ValueError naming where it was looked for)."""
    name = CONFIGS.get(model, model.replace("/", "--") + ".json")
    for d in CONFIG_DIRS:
        if (d / name).is_file():
            return d / name
    raise ValueError(
        f"no config.json for {model}: put it in one of {', '.join(map(str, CONFIG_DIRS))} "
        f"as {name} (or name a folder in KVCALC_AIC_CONFIGS)"
    )


def registry_key(model: str) -> str | None:
    """The registry model whose Hugging Face id is the row's (case aside), or None."""
    want = model.strip().lower()
    return next((k for k, m in registry().models.items() if (m.hf_id or "").lower() == want), None)


def model_argv(model: str) -> list[str]:
    """The row's model as flags: its config.json where one is found (``config_path``), else
    the registry model of that Hugging Face id (its own config and weights), else the refusal
    saying where a config.json is looked for."""
    try:
        return ["--config", str(config_path(model))]
    except ValueError:
        key = registry_key(model)
        if key is None:
            raise
        return ["--model", key]


@functools.cache
def _has_config(model: str) -> bool:
    try:
        config_path(model)
    except ValueError:
        return False
    return True


def has_experts(model: str) -> bool:
    """Whether the model's config gives routed experts (any of the names configs use)."""
    key = None if _has_config(model) else registry_key(model)
    if key is not None:
        return registry().model(key).spec.moe is not None
    cfg = json.loads(config_path(model).read_text())
    cfg = cfg.get("text_config", cfg) if isinstance(cfg.get("text_config"), dict) else cfg
    keys = ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts")
    return any(isinstance(cfg.get(k), int) and cfg[k] > 1 for k in keys)


ENGINES = {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm"}

# The closed loop a row is simulated as: the one its client ran (kvcalc.perf.calibrate_from's
# ``bench_row_loop`` for a row in these columns, the loop a user's own silicon rows are
# calibrated in): 10 x N requests of lengths uniform on [int(0.8 L), L], SGLang's in lockstep at
# the stated lengths, TensorRT-LLM's with one request more than the batch; TTFT the mean over
# every request, as a client reports it. Until stop 53 the profiles were fitted in a loop of
# 3 x N requests of the stated lengths, TTFT the mean after the first wave
# (docs/calibration.md#the-loop-the-rows-clients-ran).


def loop_argv(r: Row) -> list[str]:
    """The closed loop's flags for a row: its client's loop as ``simulate`` flags."""
    row = BenchRow(isl=r.isl, osl=r.osl, users=r.users, silicon=True)
    loop = bench_row_loop(row, r.engine, disaggregated=r.prefill is not None)
    wl = loop.workload
    argv = ["--users", str(wl.users), "--requests", str(wl.requests)]
    argv += ["--max-num-seqs", str(loop.max_num_seqs)] if loop.max_num_seqs else []
    for flag, d in (("prompt", wl.prompt), ("output", wl.output)):
        fixed = d.kind == "fixed"
        argv += (
            [f"--{flag}-tokens", str(d.lo)]
            if fixed
            else [f"--{flag}-dist", f"uniform:{d.lo}:{d.hi}"]
        )
    return argv


def ttft_of(j: dict) -> float:
    """The simulated TTFT (s) the row's measured one is compared with: the mean over every
    request (a disaggregated row's: its layout's)."""
    return j.get("disaggregated", j)["ttft_mean_s"]


def tpot_of(j: dict) -> float:
    """The simulated mean TPOT (s), as ``ttft_of``."""
    return j.get("disaggregated", j)["tpot_mean_s"]


@dataclass(frozen=True)
class Side:
    """One side of a disaggregated row: its engines (``num_workers``) and each engine's layout
    and batch, as AIC's ``prefill_*`` / ``decode_*`` columns state them."""

    workers: int
    tp: int
    attention_dp: int
    moe_tp: int
    moe_ep: int
    batch: int | None = None

    @property
    def gpus(self) -> int:
        return max(self.tp * self.attention_dp, self.moe_tp * self.moe_ep)


@dataclass(frozen=True)
class Row:
    id: str
    engine: str  # vllm, sglang, trtllm
    version: str
    model: str
    gpu: str  # AIC's system name
    precision: str
    gemm: str
    moe: str
    isl: int
    osl: int
    users: int
    tp: int
    attention_dp: int
    moe_tp: int
    moe_ep: int
    ttft_ms: float
    tpot_ms: float
    pp: int = 1  # pipeline stages (simulate has none: such a row is refused by name)
    # a disaggregated row (AIC's mode disagg): its prefill and decode engines; the fields above
    # then give the decode side's layout, and ``users`` the client's concurrency
    prefill: Side | None = None
    decode: Side | None = None

    @property
    def gpus(self) -> int:
        if self.prefill is not None and self.decode is not None:
            return self.prefill.workers * self.prefill.gpus + self.decode.workers * self.decode.gpus
        return max(self.tp * self.attention_dp, self.moe_tp * self.moe_ep)

    @property
    def setup(self) -> tuple:
        """A setup as issue 41 names one: engine, version, model, GPU, layout, precision."""
        return (
            self.engine,
            self.version,
            self.model,
            self.gpu,
            self.tp,
            self.attention_dp,
            self.moe_tp,
            self.moe_ep,
            self.precision,
        )


def _int(x: str, default: int = 1) -> int:
    if x in ("", None):
        return default
    v = int(float(x))
    return v if v > 0 else default


def _side(r: dict, prefix: str = "") -> Side:
    """The layout the ``prefix``ed columns state (agg: none), attention DP where not stated
    spanning every GPU the MoE side uses."""
    tp = _int(r.get(f"{prefix}tp_size"))
    moe_tp, moe_ep = _int(r.get(f"{prefix}moe_tp_size")), _int(r.get(f"{prefix}moe_ep_size"))
    adp = _int(r.get(f"{prefix}attention_dp_size"), 0)
    if not adp:
        adp = max(1, (moe_tp * moe_ep) // tp)
    batch = _int(r.get(f"{prefix}batch_size"), 0) or None
    return Side(_int(r.get(f"{prefix}num_workers")), tp, adp, moe_tp, moe_ep, batch)


def stated_concurrency(r: dict) -> int | None:
    """The client's concurrency as the row's source names it (``silicon_concurrency=N``)."""
    found = re.search(r"silicon_concurrency=(\d+)", r.get("silicon_data_source") or "")
    return int(found.group(1)) if found and int(found.group(1)) > 0 else None


def per_rank(r: dict, own: Side) -> Side | None:
    """The instance a row in AIC's per-rank encoding ran on, or None for a row that states its
    layout plainly. Some rows of AIC's 2026-04-06 dump give ``batch_size`` per attention-DP rank
    (the source's ``silicon_concurrency`` = batch_size x attention_dp_size) and count GPUs as
    tp_size x attention_dp_size: MiniMax-M2.5 on H100 "tp4_ep4" reads tp 4, attention DP 4, EP
    16. The run had tp_size GPUs: the same runs in the 2026-03-25 dump read TP 4 EP 4 at that
    concurrency with the same TPOT (within 1%), and their 20-32 s TTFT at 64 users is the queue
    of 4 H100s' KV pool (16 GPUs would hold every request). So: tp_size GPUs, attention DP over
    them (tp_size / attention_dp GPUs a rank), the experts over the same GPUs."""
    dp = own.attention_dp
    conc = stated_concurrency(r)
    batch = _int(r.get("batch_size"), 0)
    if dp <= 1 or conc is None or not batch or conc != batch * dp:
        return None
    gpus = own.tp
    moe_ep = max(1, own.moe_ep // dp) if own.moe_ep > 1 else 1
    return Side(own.workers, max(1, gpus // dp), dp, max(1, gpus // moe_ep), moe_ep, conc)


def concurrency(r: dict, decode: Side | None) -> int:
    """The client's users: ``batch_size``; for a disaggregated row that leaves it empty, the
    ``silicon_concurrency`` its source names, else every decode engine's batch."""
    if _int(r.get("batch_size"), 0):
        return _int(r["batch_size"])
    if stated_concurrency(r):
        return stated_concurrency(r) or 0
    if decode is not None and decode.batch:
        return decode.workers * decode.batch
    raise ValueError(f"row {r.get('id', '?')!r}: no batch_size (the client's concurrency)")


def _users(r: dict, decode: Side | None) -> int:
    """``concurrency``, or 0 where the row gives none (``row_argv`` then refuses it alone)."""
    try:
        return concurrency(r, decode)
    except ValueError:
        return 0


def _measured(x: str | None) -> float:
    """A measured time in ms, NaN where the row leaves it empty (predicted all the same)."""
    try:
        return float(x) if x not in (None, "") else math.nan
    except ValueError:
        return math.nan


def load_rows(path: Path = CSV) -> list[Row]:
    """The rows of a file in AIC's silicon-sample columns, aggregated and disaggregated."""
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            disagg = (r.get("mode") or "agg").strip().lower() == "disagg"
            pre, dec = (_side(r, "prefill_"), _side(r, "decode_")) if disagg else (None, None)
            own = dec if dec is not None else _side(r)
            rank = None if disagg else per_rank(r, own)
            own = rank or own
            rows.append(
                Row(
                    id=r["id"],
                    engine=r["backend"],
                    version=r["backend_version"],
                    model=r["model_path"],
                    gpu=r["system"],
                    precision=r["precision"] or "bf16",
                    gemm=r["gemm_quant_mode"] or "",
                    moe=r["moe_quant_mode"] or "",
                    isl=int(r["isl"]),
                    osl=int(r["osl"]),
                    users=rank.batch if rank and rank.batch else _users(r, dec),
                    tp=own.tp,
                    attention_dp=own.attention_dp,
                    moe_tp=own.moe_tp,
                    moe_ep=own.moe_ep,
                    pp=max(
                        _int(r.get(k, "")) for k in ("pp_size", "prefill_pp_size", "decode_pp_size")
                    ),
                    ttft_ms=_measured(r.get("silicon_ttft_ms")),
                    tpot_ms=_measured(r.get("silicon_tpot_ms")),
                    prefill=pre,
                    decode=dec,
                )
            )
    return rows


# AIC's quant modes (gemm_quant_mode for the dense layers, moe_quant_mode for the routed
# experts) as kvcalc's weight formats: FP8 with per-tensor or block scales as FP8, NVFP4 and
# MXFP4 as themselves, a weight-only integer format at its width, a W4A8 format's 4-bit weights,
# and no mode (or a 16-bit one) as the checkpoint's 16 bits.
QUANT_FORMATS = {
    "": "bf16",
    "int4": "int4",
    "float16": "bf16",
    "bfloat16": "bf16",
    "bf16": "bf16",
    "fp8": "fp8",
    "fp8_block": "fp8",
    "fp8_ootb": "fp8",
    "fp8_static": "fp8",
    "nvfp4": "nvfp4",
    "mxfp4": "mxfp4",
    "w4a16_mxfp4": "mxfp4",
    "w4a8_mxfp4_fp8": "mxfp4",
    "w4a8_mxfp4_mxfp8": "mxfp4",
    "int8_wo": "int8",
    "int4_wo": "int4",
    "w4afp8": "int4",
    # the rest of aiconfigurator's GEMMQuantMode and MoEQuantMode (aic-core sdk/common.py):
    # SmoothQuant's W8A8 INT8; NVFP4 weights dequantised to 16 bits (timed as NVFP4 only where
    # the GPU has no FP4 tensor cores: ``weight_flags``); the other MXFP4 MoE kernels
    "sq": "int8",
    "nvfp4_wo": "nvfp4",
    "w4a16_nvfp4": "nvfp4",
    "w4a8_mxfp4_mxfp8_trtllm": "mxfp4",
    "w4a16_mxfp4_cutlass": "mxfp4",
    # a precision column's names where no quant mode is given: NVIDIA's FP4 checkpoints
    "fp4": "nvfp4",
    "int8": "int8",
}
# The MoE modes whose 4-bit experts multiply 8-bit activations on FP8 tensor cores (W4A8:
# TensorRT-LLM's MXFP4 x MXFP8 and MXFP4 x FP8 kernels, its INT4 x FP8 W4AFP8): the experts'
# GEMMs run at the FP8 peak (``--expert-gemm-dtype fp8``), their weights' bytes at 4 bits.
W4A8_MODES = ("w4a8_mxfp4_fp8", "w4a8_mxfp4_mxfp8", "w4a8_mxfp4_mxfp8_trtllm", "w4afp8")
# NVFP4 weights dequantised into a 16-bit GEMM: kvcalc times NVFP4 weights at the FP4 peak on a
# GPU that has one, so these modes run only where it has none (Hopper, as AIC uses them)
WEIGHT_ONLY_NVFP4 = ("nvfp4_wo", "w4a16_nvfp4")


def quant_format(mode: str) -> str:
    """kvcalc's weight format for one of AIC's quant modes (ValueError naming an unknown one)."""
    key = (mode or "").strip().lower()
    if key not in QUANT_FORMATS:
        raise ValueError(
            f"quant mode {mode!r}: no kvcalc weight format (known: {sorted(QUANT_FORMATS)})"
        )
    return QUANT_FORMATS[key]


def weight_flags(r: Row, *, before: bool = False) -> list[str]:
    """The weights' format as the row states it: the dense layers in ``gemm_quant_mode``'s
    format and the routed experts in ``moe_quant_mode``'s (a mode left empty: the row's
    ``precision``). FP8 GEMMs with per-tensor or block scales are FP8; int4 weight-only
    checkpoints (Kimi-K2.5's compressed-tensors W4A16) quantise the experts only, beside
    16-bit attention."""
    if r.precision == "int4" and before:  # no expert format of its own before issue 41
        return ["--weight-dtype", "int4"]
    dense = quant_format(r.gemm or r.precision)
    experts = quant_format(r.moe or r.gemm or r.precision)
    only = [m for m in (r.gemm, r.moe) if m.strip().lower() in WEIGHT_ONLY_NVFP4]
    if only and registry().gpu(gpu_key(r.gpu)).fp4_tflops:
        raise ValueError(
            f"quant mode {only[0]!r} on {r.gpu}: NVFP4 weights dequantised into a 16-bit GEMM; "
            "kvcalc times NVFP4 weights at this GPU's FP4 peak, so it does not time this row"
        )
    if r.gemm == "int4_wo" and r.moe == "int4_wo":  # W4A16 checkpoints quantise the experts
        dense = "bf16"
    flags = ["--weight-dtype", dense]
    if experts != dense and has_experts(r.model):
        flags += ["--expert-weight-dtype", experts]
    if (r.moe or "").strip().lower() in W4A8_MODES and has_experts(r.model):
        flags += ["--expert-gemm-dtype", "fp8"]
    return flags


def row_argv(r: Row, *, layout: bool = True) -> list[str]:
    """``simulate`` for the row, from its own columns only. ``layout`` False: every GPU as
    tensor parallel (what kvcalc could state before issue 41)."""
    if r.users < 1:
        raise ValueError(
            f"row {r.id!r}: no batch_size, silicon_concurrency or decode batch: the client's "
            "concurrency is needed to run its loop"
        )
    if r.pp > 1:
        raise ValueError(
            f"pipeline parallel {r.pp}: simulate times one pipeline stage's GPUs only, so a "
            "row over several stages is refused rather than timed as one"
        )
    argv = [
        "simulate" if r.prefill is None else "disagg",
        *model_argv(r.model),
        "--gpu",
        gpu_key(r.gpu),
        *loop_argv(r),
        *weight_flags(r, before=not layout),
        "--json",
    ]
    if r.prefill is not None and r.decode is not None:
        if not layout:
            raise ValueError("a disaggregated row runs in its own layout only")
        return argv + disagg_argv(r)
    if layout:
        argv += ["--tp", str(r.tp)]
        if r.attention_dp > 1:
            argv += ["--attention-dp", str(r.attention_dp)]
        if r.moe_ep > 1:
            argv += ["--ep", str(r.moe_ep)]
    else:
        argv += ["--tp", str(r.gpus)]
    return argv


# GPUs one node's switch joins (NVLink): an HGX board's 8, a GB200 NVL72 rack's 72
NVLINK_DOMAIN = {"gb200": 72, "gb300": 72}


def disagg_argv(r: Row) -> list[str]:
    """A disaggregated row's layout as ``disagg`` flags: its prefill and decode engines, each
    side's TP, attention DP and EP, and the link the caches move over: the GPUs' own NVLink
    where every GPU of the row shares one NVLink domain, else InfiniBand NDR (400 Gb/s a GPU)."""
    pre, dec = r.prefill, r.decode
    assert pre is not None and dec is not None
    gpu = registry().gpu(gpu_key(r.gpu))
    one_domain = r.gpus <= NVLINK_DOMAIN.get(gpu.key, 8)
    link = gpu.tp_link if one_domain and gpu.tp_link else "ib-ndr-400"
    argv = ["--tp", str(dec.tp), "--prefill", str(pre.workers), "--decode", str(dec.workers)]
    for name, side in (("prefill", pre), ("decode", dec)):
        argv += [f"--{name}-tp", str(side.tp)]
        argv += [f"--{name}-attention-dp", str(side.attention_dp)]
        argv += [f"--{name}-ep", str(side.moe_ep)]
    return argv + ["--link", link, "--no-aggregated"]


def run_cli(argv: list[str]) -> dict:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    if code:
        raise ValueError(err.getvalue().strip().splitlines()[-1] if err.getvalue() else "error")
    return json.loads(out.getvalue())


def predict(r: Row, extra: list[str], *, layout: bool = True) -> tuple[float, float] | str:
    """(TTFT ms, TPOT ms) or the refusal's text."""
    try:
        j = run_cli(row_argv(r, layout=layout) + extra)
    except (ValueError, SystemExit) as exc:
        return str(exc)[:200]
    return ttft_of(j) * 1e3, tpot_of(j) * 1e3


def errors(pairs: list[tuple[float, float]]) -> dict:
    """median, p90 of |pred/meas - 1|, and the worst ratio either way."""
    if not pairs:
        return dict(n=0, median=float("nan"), p90=float("nan"), worst=float("nan"))
    dev = sorted(abs(p / m - 1) for p, m in pairs)
    worst = max(max(p / m, m / p) for p, m in pairs)
    k = (len(dev) - 1) * 0.9
    i = int(k)
    p90 = dev[i] if i + 1 >= len(dev) else dev[i] + (dev[i + 1] - dev[i]) * (k - i)
    return dict(n=len(pairs), median=statistics.median(dev), p90=p90, worst=worst)


def fmt(e: dict) -> str:
    if not e["n"]:
        return "-"
    return f"{e['median']:.1%} / {e['p90']:.0%} / {e['worst']:.2f}x"


# -- engine profiles: the fit (issue 41) --------------------------------------------------------

import math  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402

import numpy as np  # noqa: E402

from kvcalc.perf import calibration as cal  # noqa: E402
from kvcalc.perf import engines as eng  # noqa: E402

COEFS = eng.COEFFICIENTS
# The pooled calibrated estimate, where a fit starts and what an unidentified coefficient
# stays near (PRIOR_WEIGHT): the KV reads and attention as the weights and the GEMMs, an
# all-to-all as an all-reduce.
START = dict(
    bw_share=cal.BW_SHARE,
    kv_bw_share=cal.BW_SHARE,
    step_overhead_s=cal.STEP_OVERHEAD_S,
    mfu=cal.MFU,
    attn_mfu=cal.MFU,
    allreduce_latency_s=cal.ALLREDUCE_LATENCY_S,
    ep_latency_s=cal.ALLREDUCE_LATENCY_S,
    api_overhead_s=cal.API_OVERHEAD_S,
    # host time per request per step and per new request: no pooled value; a start small
    # beside a decode step (20 us x 128 requests = 2.6 ms) that the fit moves
    seq_overhead_s=2e-5,
    request_overhead_s=2e-4,
    layer_overhead_s=2e-5,  # 20 us a layer: a few kernels' floor
    expert_bw_share=cal.BW_SHARE,
    host_overlap=0.5,
    expert_mfu=cal.MFU,
    fp8_gemm_share=1.0,  # FP8 GEMMs as 16-bit ones until the rows say otherwise
)
SHARES = (
    "bw_share",
    "kv_bw_share",
    "mfu",
    "attn_mfu",
    "expert_bw_share",
    "host_overlap",
    "expert_mfu",
    "fp8_gemm_share",
)  # at most 1
PRIOR_WEIGHT = 0.3  # per coefficient, toward START (log scale): a row weighs 1
VERSION_WEIGHT = 3.0  # per coefficient, a version's departure from its engine's (log scale)
HUBER = 0.25  # residuals beyond 25% (log scale) weigh as |r| (robust to a few odd runs)
FD_STEP = 0.05  # finite differences in log(coefficient)
ITERATIONS = 30  # Levenberg-Marquardt steps at most (``fit`` stops at its fixed point)
# TTFT's residual weighs half of TPOT's: a closed loop's TTFT depends on how the benchmark's
# users fall into step with each other, which the simulator only approximates, and TPOT's
# target is the tighter (issue 41: 10% against TTFT's 20%)
QUANTITY_WEIGHT = (0.5, 1.0)


def family(r: Row) -> str:
    """The profile a row fits: its engine and release (a tagged build as its release)."""
    version = eng.BUILD_TAGS.get((r.engine, r.version), r.version)
    return f"{r.engine}@{'.'.join(map(str, eng.version_key(version)))}"


def _profile(key: str, coefs: dict) -> eng.EngineProfile:
    engine, version = key.split("@")
    return eng.EngineProfile(
        engine=engine, version=version, fitted_rows=0, **eng.SCHEDULER_DEFAULTS[engine], **coefs
    )


def predict_with(r: Row, key: str, coefs: dict) -> tuple[float, float] | str:
    """(TTFT ms, TPOT ms) of the row under a profile with these coefficients."""
    kept = eng.PROFILES.get(key)
    eng.PROFILES[key] = _profile(key, coefs)
    try:
        j = run_cli(row_argv(r) + ["--engine", key])
    except (ValueError, SystemExit) as exc:
        return str(exc)[:200]
    finally:  # the committed profile back
        if kept is None:
            del eng.PROFILES[key]
        else:
            eng.PROFILES[key] = kept
    return ttft_of(j) * 1e3, tpot_of(j) * 1e3


def _relevant(r: Row, c: str) -> bool:
    if c == "allreduce_latency_s":
        return r.gpus > 1
    if c == "ep_latency_s":
        return r.moe_ep > 1
    if c in ("expert_bw_share", "expert_mfu"):
        return has_experts(r.model)
    if c == "fp8_gemm_share":
        return "fp8" in weight_flags(r)
    return True


def _job(args):
    r, key, theta = args
    base = {c: math.exp(t) for c, t in zip(COEFS, theta)}
    out = [predict_with(r, key, base)]
    for i, c in enumerate(COEFS):
        if not _relevant(r, c):
            out.append(None)
            continue
        th = list(theta)
        th[i] += -FD_STEP if c in SHARES and th[i] + FD_STEP > 0 else FD_STEP  # a share <= 1
        out.append(predict_with(r, key, {c2: math.exp(t) for c2, t in zip(COEFS, th)}))
    return out


def _eval_job(args):
    r, key, theta = args
    return predict_with(r, key, {c: math.exp(t) for c, t in zip(COEFS, theta)})


def linearise(rows: list[Row], thetas: dict[str, np.ndarray], workers: int = 2):
    """Per row: the residuals log(pred / meas) of TTFT and TPOT and their derivatives in
    log(coefficient), by finite differences through the command line."""
    jobs = [(r, family(r), tuple(thetas[family(r)])) for r in rows]
    with ProcessPoolExecutor(workers) as ex:
        outs = list(ex.map(_job, jobs, chunksize=4))
    res, jac = {}, {}
    for r, out in zip(rows, outs):
        if isinstance(out[0], str):
            continue
        base = np.log(np.array(out[0]) / np.array([r.ttft_ms, r.tpot_ms]))
        J = np.zeros((2, len(COEFS)))
        theta = thetas[family(r)]
        for i, o in enumerate(out[1:]):
            if o is None or isinstance(o, str):
                continue
            h = -FD_STEP if COEFS[i] in SHARES and theta[i] + FD_STEP > 0 else FD_STEP
            J[:, i] = (np.log(np.array(o) / np.array([r.ttft_ms, r.tpot_ms])) - base) / h
        res[r.id], jac[r.id] = base, J
    return res, jac


def evaluate_rows(rows: list[Row], thetas: dict[str, np.ndarray], workers: int = 2) -> dict:
    jobs = [(r, family(r), tuple(thetas[family(r)])) for r in rows]
    with ProcessPoolExecutor(workers) as ex:
        outs = list(ex.map(_eval_job, jobs, chunksize=4))
    return {r.id: o for r, o in zip(rows, outs)}


def solve(
    rows: list[Row],
    res: dict,
    jac: dict,
    thetas: dict[str, np.ndarray],
    engine: str,
    damping: float = 0.0,
):
    """One damped Gauss-Newton step for one engine: its shared coefficients and each version's
    departure from them (ridge VERSION_WEIGHT), a weak prior toward START, Huber weights, and
    ``damping`` (Levenberg-Marquardt's: a ridge on the step itself); returns the new
    log-coefficients of each of its versions."""
    keys = sorted({family(r) for r in rows if r.engine == engine})
    k = len(COEFS)
    n = k * (1 + len(keys))
    A_rows, b_rows = [], []
    # the current point as engine + departures: engine = mean of its versions
    cur = np.array([thetas[key] for key in keys])
    base = cur.mean(axis=0)
    for r in rows:
        if r.engine != engine or r.id not in res:
            continue
        vi = keys.index(family(r))
        for q in range(2):
            resid = res[r.id][q]
            w = 1.0 if abs(resid) <= HUBER else math.sqrt(HUBER / abs(resid))
            w *= QUANTITY_WEIGHT[q]
            a = np.zeros(n)
            a[:k] = jac[r.id][q]
            a[k * (1 + vi) : k * (2 + vi)] = jac[r.id][q]
            A_rows.append(w * a)
            b_rows.append(-w * resid)
    start = np.log([START[c] for c in COEFS])
    for i in range(k):  # prior: base + delta_engine toward START
        a = np.zeros(n)
        a[i] = PRIOR_WEIGHT
        A_rows.append(a)
        b_rows.append(-PRIOR_WEIGHT * (base[i] - start[i]))
    for vi in range(len(keys)):  # each version near the engine
        for i in range(k):
            a = np.zeros(n)
            a[k * (1 + vi) + i] = VERSION_WEIGHT
            A_rows.append(a)
            b_rows.append(-VERSION_WEIGHT * (cur[vi, i] - base[i]))
    if damping:
        for i in range(n):
            a = np.zeros(n)
            a[i] = math.sqrt(damping)
            A_rows.append(a)
            b_rows.append(0.0)
    A, b = np.array(A_rows), np.array(b_rows)
    delta = np.linalg.lstsq(A, b, rcond=None)[0]
    delta = np.clip(delta, -0.7, 0.7)  # a trust region: the model is not linear far away
    out = {}
    for vi, key in enumerate(keys):
        th = cur[vi] + delta[:k] + delta[k * (1 + vi) : k * (2 + vi)]
        for i, c in enumerate(COEFS):  # a share within its physical range
            bound = eng.SHARE_BOUNDS.get(c) or eng.FIT_BOUNDS.get((engine, c))
            if bound:
                lo, hi = bound
                th[i] = min(max(th[i], math.log(lo)), math.log(hi))
        out[key] = th
    return out


def initial_thetas(rows: list[Row]) -> dict[str, np.ndarray]:
    start = np.log([START[c] for c in COEFS])
    return {family(r): start.copy() for r in rows}


def huber(r: float) -> float:
    """The robust loss of one residual (log scale): r^2 within HUBER, linear beyond (the loss
    whose iteratively reweighted least squares ``solve`` runs)."""
    a = abs(r)
    return a * a if a <= HUBER else 2 * HUBER * a - HUBER * HUBER


def residuals(rows: list[Row], preds: dict) -> dict[str, np.ndarray | None]:
    """{row id: log(pred / meas) of (TTFT, TPOT)}, None where the row was refused."""
    out: dict[str, np.ndarray | None] = {}
    for r in rows:
        p = preds.get(r.id)
        ok = isinstance(p, (tuple, list))
        out[r.id] = np.log(np.array(p) / np.array([r.ttft_ms, r.tpot_ms])) if ok else None
    return out


def objective(rows: list[Row], thetas: dict[str, np.ndarray], res: dict) -> dict[str, float]:
    """What the fit minimises, per engine (the terms ``solve`` linearises): each row's
    residuals under Huber's loss weighed by QUANTITY_WEIGHT, the engine's mean coefficients'
    prior toward START (PRIOR_WEIGHT) and each version's ridge toward that mean
    (VERSION_WEIGHT). A refused row costs infinity."""
    start = np.log([START[c] for c in COEFS])
    out = {}
    for engine in sorted({r.engine for r in rows}):
        keys = sorted({family(r) for r in rows if r.engine == engine})
        cur = np.array([thetas[k] for k in keys])
        base = cur.mean(axis=0)
        cost = float(
            PRIOR_WEIGHT**2 * np.sum((base - start) ** 2)
            + VERSION_WEIGHT**2 * np.sum((cur - base) ** 2)
        )
        for r in rows:
            if r.engine != engine:
                continue
            v = res.get(r.id)
            if v is None:
                cost = math.inf
                break
            cost += sum(w * w * huber(x) for w, x in zip(QUANTITY_WEIGHT, v))
        out[engine] = cost
    return out


# Levenberg-Marquardt's dampings tried at each step (a ridge on the step, in units of one row's
# squared residual): the undamped Gauss-Newton step first, then ever shorter ones
DAMPINGS = (0.0, 3.0, 30.0, 300.0, 3000.0)
# the fit stops where no step (at any damping) lowers any engine's objective by this share
TOLERANCE = 5e-3


def lm_step(rows: list[Row], thetas: dict[str, np.ndarray], workers: int = 2):
    """One Levenberg-Marquardt iteration of the fit: linearise at ``thetas``, solve each
    engine's step at every damping of DAMPINGS, simulate every candidate, and keep, per engine,
    the candidate of least objective if it is lower than the current one. Returns the new
    log-coefficients and {engine: (objective before, after)}."""
    res, jac = linearise(rows, thetas, workers)
    now = objective(rows, thetas, {r.id: res.get(r.id) for r in rows})
    best = {e: (v, None) for e, v in now.items()}
    for damping in DAMPINGS:
        cand = dict(thetas)
        for engine in now:
            cand.update(solve(rows, res, jac, thetas, engine, damping=damping))
        got = objective(rows, cand, residuals(rows, evaluate_rows(rows, cand, workers)))
        for engine, v in got.items():
            if v < best[engine][0]:
                best[engine] = (v, cand)
    out = dict(thetas)
    for engine, (_, cand) in best.items():
        if cand is not None:
            out.update({k: th for k, th in cand.items() if k.startswith(engine + "@")})
    return out, {e: (now[e], best[e][0]) for e in now}


def fit(
    rows: list[Row], thetas=None, iterations: int = ITERATIONS, workers: int = 2, log=print
) -> dict[str, np.ndarray]:
    """The engine profiles fitted on ``rows``: Levenberg-Marquardt steps (``lm_step``) from
    ``thetas`` (or the pooled estimate), at most ``iterations``, stopping at the first point
    from which no step lowers any engine's objective by TOLERANCE (that last step is not
    taken, so one more step from what this returns lowers none by TOLERANCE: the fixed point
    tests/test_engine_profiles.py checks)."""
    thetas = dict(thetas or initial_thetas(rows))
    for it in range(iterations):
        new, moved = lm_step(rows, thetas, workers)
        log(
            f"step {it}: "
            + ", ".join(f"{e} {a:.3f} -> {b:.3f}" for e, (a, b) in sorted(moved.items()))
        )
        if all(b >= a * (1 - TOLERANCE) for a, b in moved.values()):
            break
        thetas = new
    return thetas


def coefs_of(theta) -> dict[str, float]:
    return {c: float(f"{math.exp(t):.4g}") for c, t in zip(COEFS, theta)}


# -- validation: leave one model / one GPU out; calibrate from one row --------------------------


def _nearest(key: str, trained: list[str]) -> str:
    engine, version = key.split("@")
    same = [k for k in trained if k.startswith(engine + "@")]
    want = eng.version_key(version)
    return min(same, key=lambda k: eng.release_distance(eng.version_key(k.split("@")[1]), want))


def refit_without(rows, thetas, held: set[str], steps: int, workers: int = 2, log=print):
    """The profiles refitted without the rows in ``held`` (ids): the fit (``fit``, at most
    ``steps`` Levenberg-Marquardt steps) from the full fit's coefficients on the other rows of
    the held rows' engines (an engine's fit is its own); a version whose rows are all held out
    takes its engine's nearest trained version, as a user's unfitted version does."""
    engines = {r.engine for r in rows if r.id in held}
    train = [r for r in rows if r.id not in held and r.engine in engines]
    trained = sorted({family(r) for r in train})
    out = dict(thetas)
    if train:
        out.update(fit(train, {k: thetas[k] for k in trained}, steps, workers, log))
    for key in {family(r) for r in rows if r.engine in engines} - set(trained):
        engine = key.split("@")[0]
        if any(k.startswith(engine + "@") for k in trained):
            out[key] = out[_nearest(key, trained)]
        else:  # no run of that engine left: the pooled estimate's coefficients (START)
            out[key] = np.log([START[c] for c in COEFS])
    return out


# what a row is left out with: its model's architecture (a checkpoint's FP8 copy is the same
# model: the same config.json), or its GPU
LEAVE_OUT_BY = {"model": lambda r: CONFIGS.get(r.model, r.model), "gpu": lambda r: r.gpu}
HELD_OUT_STEPS = 3  # Levenberg-Marquardt steps of each refit without a model or a GPU


def leave_out(
    rows, thetas, by: str, workers: int = 2, steps: int = HELD_OUT_STEPS, log=print
) -> dict[str, tuple]:
    """Each row predicted by the profiles refitted without its model (``by`` 'model') or its
    GPU ('gpu'), through the command line: {row id: (TTFT ms, TPOT ms) or refusal}."""
    key = LEAVE_OUT_BY[by]
    preds = {}
    for g in sorted({key(r) for r in rows}):
        held = {r.id for r in rows if key(r) == g}
        th = refit_without(rows, thetas, held, steps, workers, lambda m, g=g: log(f"- {g}: {m}"))
        preds.update(evaluate_rows([r for r in rows if r.id in held], th, workers))
    return preds


def table_by_engine(rows, preds: dict) -> dict[str, dict[str, dict]]:
    """{engine or 'all': {'TTFT': errors, 'TPOT': errors, 'refused': n}}."""
    out = {}
    for engine in ["all"] + sorted({r.engine for r in rows}):
        mine = [r for r in rows if engine in ("all", r.engine)]
        ok = [(r, preds[r.id]) for r in mine if not isinstance(preds.get(r.id), (str, type(None)))]
        out[engine] = dict(
            TTFT=errors([(p[0], r.ttft_ms) for r, p in ok]),
            TPOT=errors([(p[1], r.tpot_ms) for r, p in ok]),
            refused=len(mine) - len(ok),
        )
    return out


def print_table(title: str, tables: dict[str, dict]) -> list[str]:
    """tables: {column title: table_by_engine(...)}"""
    lines = [f"### {title}", "", "median |pred/meas - 1| / p90 / worst ratio", ""]
    cols = list(tables)
    lines.append("| engine | quantity | " + " | ".join(cols) + " |")
    lines.append("|---|---|" + "---|" * len(cols))
    first = tables[cols[0]]
    for engine in first:
        for q in ("TTFT", "TPOT"):
            cells = [fmt(tables[c][engine][q]) for c in cols]
            n = first[engine][q]["n"]
            lines.append(f"| {engine} ({n}) | {q} | " + " | ".join(cells) + " |")
    return lines


def setups(rows) -> dict[tuple, list[Row]]:
    out: dict[tuple, list[Row]] = {}
    for r in rows:
        out.setdefault(r.setup, []).append(r)
    return out


def _calibrate_job(args):
    """One setup: calibrated from its lowest-concurrency row, its other rows predicted."""
    from kvcalc.perf.calibrate_from import BenchRow, calibrate

    group, theta = args
    key = family(group[0])
    base = _profile(key, {c: math.exp(t) for c, t in zip(COEFS, theta)})
    group = sorted(group, key=lambda r: (r.users, r.isl, r.osl))
    first, rest = group[0], group[1:]
    bench_row = BenchRow(
        isl=first.isl,
        osl=first.osl,
        users=first.users,
        ttft_ms=first.ttft_ms,
        tpot_ms=first.tpot_ms,
    )

    def pred(profile, _row):
        eng.PROFILES[key] = profile
        j = run_cli(row_argv(first) + ["--engine", key])
        return {"TTFT": ttft_of(j), "TPOT": j["tpot_mean_s"]}

    try:
        cal_ = calibrate(base, [bench_row], pred)
    except (ValueError, SystemExit) as exc:  # e.g. a first row past the physical floor
        return {r.id: f"not calibrated: {str(exc)[:160]}" for r in rest}, None
    coefs = {**cal_.profile.coefficients(), "gpu_time_factor": cal_.profile.gpu_time_factor}
    out = {}
    for r in rest:
        out[r.id] = predict_with(r, key, coefs)
    return out, (first.id, cal_.fit[0])


def calibrate_one_row(rows, thetas, workers: int = 2):
    """Within each setup (engine, version, model, GPU, layout, precision) with two rows or
    more: calibrate from its lowest-concurrency row, predict the others."""
    groups = [g for g in setups(rows).values() if len(g) > 1]
    jobs = [(g, tuple(thetas[family(g[0])])) for g in groups]
    preds, fits = {}, []
    with ProcessPoolExecutor(workers) as ex:
        for out, f in ex.map(_calibrate_job, jobs):
            preds.update(out)
            if f:
                fits.append(f)
    return preds, fits


# -- the command: bench/calibration.py --aic [--fit] -------------------------------------------


def committed_thetas(rows) -> dict[str, np.ndarray]:
    """The log-coefficients of the committed profiles (kvcalc.perf.engines.PROFILES), per row
    family."""
    out = {}
    for key in {family(r) for r in rows}:
        p, _ = eng.resolve(key)
        out[key] = np.log([getattr(p, c) for c in COEFS])
    return out


def _before_job(r):
    return predict(r, [], layout=False)


def profiles_block(thetas: dict[str, np.ndarray], rows) -> list[str]:
    """The PROFILES entries to paste into kvcalc/perf/engines.py."""
    counts = {}
    for r in rows:
        counts[family(r)] = counts.get(family(r), 0) + 1
    lines = []
    for key in sorted(thetas, key=lambda k: (k.split("@")[0], eng.version_key(k.split("@")[1]))):
        engine, version = key.split("@")
        c = coefs_of(thetas[key])
        args = ", ".join(repr(v) for v in c.values())
        row = f'_p("{engine}", "{version}", {counts.get(key, 0)}, {args}),'
        lines.append(f"        {row}  # noqa: E501")
    return lines


def committed_or_start(rows) -> dict[str, np.ndarray]:
    """The committed profiles' log-coefficients where they have every coefficient of the fit,
    the pooled start (START) otherwise."""
    try:
        return committed_thetas(rows)
    except (AttributeError, TypeError):
        return initial_thetas(rows)


def step_moves(rows, thetas, workers: int = 2) -> tuple[dict, dict]:
    """One more step of the fit from ``thetas`` (``lm_step``): {engine: (objective now, the
    least a step reaches)} and {profile: {coefficient: |log(new / old)|}} (at the fit's fixed
    point no step lowers the objective, and nothing moves)."""
    new, objectives = lm_step(rows, thetas, workers)
    moves = {
        key: {c: float(abs(a - b)) for c, a, b in zip(COEFS, new[key], thetas[key])}
        for key in thetas
    }
    return objectives, moves


def main(
    fit_first: bool = False,
    workers: int = 2,
    quick: bool = False,
    from_committed: bool = False,
    iterations: int = ITERATIONS,
    fit_only: bool = False,
    parts: tuple[str, ...] = ("table", "held-out", "calibrate"),
) -> None:
    """The fit (``fit_first``) and the tables: before and after (``table``), leave one model
    or GPU out (``held-out``), calibrated from one row (``calibrate``)."""
    rows = load_rows()
    if quick:
        rows = rows[::8]
    if fit_first:
        start = committed_or_start(rows) if from_committed else None
        thetas = fit(rows, thetas=start, iterations=iterations, workers=workers)
        print("### fitted profiles (kvcalc/perf/engines.py, PROFILES)\n")
        print("\n".join(profiles_block(thetas, rows)))
        print()
        if fit_only:
            return
    else:
        thetas = committed_thetas(rows)
    after = evaluate_rows(rows, thetas, workers)
    if "table" in parts:
        _print_before_after(rows, after, workers)
    if "held-out" in parts:
        _print_held_out(rows, thetas, workers)
    if "calibrate" in parts:
        _print_calibrated(rows, thetas, after, workers)
    if "queue" in parts:
        _print_queue(rows, after)


def effective_users(r: Row, predicted_ttft_ms: float) -> float:
    """The users a row's server ran at once if its TTFT beyond the predicted one is a queue:
    with C of the N users running, a waiting request waits (N / C - 1) request lifetimes
    (output tokens x the measured TPOT) on average, so C = N / (1 + excess / lifetime)."""
    lifetime_ms = r.osl * r.tpot_ms
    return r.users / (1 + (r.ttft_ms - predicted_ttft_ms) / lifetime_ms)


def _print_queue(rows, after, least_users: int = 128, excess: float = 1.3) -> None:
    """Rows of at least ``least_users`` users whose TTFT is ``excess`` x the predicted or more:
    the users their server would have run at once (effective_users), by setup."""
    print(
        f"\nTTFT read as a queue: rows of {least_users}+ users measured at {excess:g}x the "
        "predicted TTFT or more; C = the users running at once that the excess implies"
    )
    print(f"{'engine':<8}{'version':<13}{'model':<28}{'gpu':<10}{'tp':>3}{'isl':>6}{'osl':>6}"
          f"{'N':>5}{'meas/pred':>10}{'C':>6}")  # fmt: skip
    for r in sorted(rows, key=lambda r: (r.engine, r.model, r.gpu, r.isl, r.tp, r.osl)):
        p = after.get(r.id)
        if isinstance(p, str) or p is None or r.users < least_users:
            continue
        if r.ttft_ms < excess * p[0]:
            continue
        print(
            f"{r.engine:<8}{r.version[:12]:<13}{r.model[-27:]:<28}{r.gpu[:9]:<10}{r.tp:>3}"
            f"{r.isl:>6}{r.osl:>6}{r.users:>5}{r.ttft_ms / p[0]:>9.2f}x"
            f"{effective_users(r, p[0]):>6.0f}"
        )


def _print_before_after(rows, after, workers: int) -> None:
    with ProcessPoolExecutor(workers) as ex:
        before = dict(zip([r.id for r in rows], ex.map(_before_job, rows, chunksize=8)))
    print(
        "\n".join(
            print_table(
                f"aiconfigurator's silicon sample, training split ({len(rows)} rows): "
                "before (the pooled calibrated estimate, every GPU as TP) and after (the "
                "engine profiles)",
                {
                    "before": table_by_engine(rows, before),
                    "after (fitted on these rows)": table_by_engine(rows, after),
                },
            )
        )
    )


def _print_held_out(rows, thetas, workers: int) -> None:
    lomo = leave_out(rows, thetas, "model", workers)
    logo = leave_out(rows, thetas, "gpu", workers)
    print()
    print(
        "\n".join(
            print_table(
                "held out: each row predicted by profiles fitted without its model, or without "
                "its GPU",
                {
                    "leave one model out": table_by_engine(rows, lomo),
                    "leave one GPU out": table_by_engine(rows, logo),
                },
            )
        )
    )


def _print_calibrated(rows, thetas, after, workers: int) -> None:
    preds, fits = calibrate_one_row(rows, thetas, workers)
    # the rows a calibration predicted, both columns over the same rows; a setup whose first
    # row no calibration takes (past the physical floor) said apart
    refused = {r.setup for r in rows if isinstance(preds.get(r.id), str)}
    sub = [r for r in rows if r.id in preds and not isinstance(preds[r.id], str)]
    for s in sorted(refused, key=str):
        why = next(preds[r.id] for r in rows if r.setup == s and isinstance(preds.get(r.id), str))
        print(f"\nsetup {'/'.join(map(str, s))}: {why}")
    print()
    print(
        "\n".join(
            print_table(
                f"calibrated from one row: within each of {len(setups(rows))} setups, from its "
                f"lowest-concurrency row, the other {len(sub)} rows predicted",
                {
                    "profile alone": table_by_engine(sub, after),
                    "calibrated from one row": table_by_engine(sub, preds),
                },
            )
        )
    )
    resid = [abs(v[2] / v[0] - 1) for _, f in fits for v in f.values()]
    if resid:
        print(
            "\nresidual on the calibration rows themselves: median "
            f"{statistics.median(resid):.1%}, worst {max(resid):.1%} ({len(fits)} rows)"
        )


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="engine profiles on the AIC training split")
    ap.add_argument("--fit", action="store_true", help="refit the profiles first")
    ap.add_argument("--from-committed", action="store_true", help="the fit starts at PROFILES")
    ap.add_argument("--iterations", type=int, default=ITERATIONS)
    ap.add_argument("--fit-only", action="store_true", help="print the fitted profiles only")
    ap.add_argument("--quick", action="store_true", help="every 8th row only")
    ap.add_argument(
        "--step-sizes",
        action="store_true",
        help="one more step of the fit from the committed profiles: the objective it reaches "
        "and each profile's moves (none at the fit's fixed point)",
    )
    ap.add_argument(
        "--parts",
        default="table,held-out,calibrate",
        help="which tables (comma-separated; queue: the TTFT beyond the predicted read as a "
        "queue, effective_users)",
    )
    a = ap.parse_args()
    if a.step_sizes:
        rows = load_rows()[:: 8 if a.quick else 1]
        objectives, moves = step_moves(rows, committed_thetas(rows))
        for e, (now, best) in sorted(objectives.items()):
            print(
                f"{e}: objective {now:.3f}, one more step {best:.3f} ({1 - best / now:.3%} lower)"
            )
        for k, v in sorted(moves.items()):
            big = ", ".join(f"{c} {m:.3f}" for c, m in sorted(v.items(), key=lambda x: -x[1])[:4])
            print(f"{k}: {max(v.values()):.4f} ({big})")
    else:
        parts = tuple(a.parts.split(","))
        main(a.fit, 2, a.quick, a.from_committed, a.iterations, a.fit_only, parts)
