"""Engine profiles (issue 41): the step model's coefficients (``COEFFICIENTS``) and the
scheduler's default batching rules per serving engine and version family, each with its source,
as ``bench/aic.py --fit`` printed them from aiconfigurator's silicon sample
(tests/data/benchmarks/aic/). They are where that fit stops: one more of its steps lowers no
engine's objective by its tolerance, which tests/test_engine_profiles.py checks
(docs/calibration.md#engine-profiles-issue-41). What is physics (experts touched, MLA's absorbed
decode, a format's peak) is not a coefficient. ``BAND`` is the leave-one-out error.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields, replace
from itertools import takewhile
from typing import Any

from ..cache.deployment import Deployment
from ..core.units import GiB, MiB
from ..engines.budget import DEFAULT_NON_TORCH_BYTES, TRTLLM_FREE_FRACTION, free_memory_pool
from .calibration import StepModel

ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}
_ALIASES = {"tensorrt-llm": "trtllm", "tensorrt_llm": "trtllm", "trt-llm": "trtllm"}


@dataclass(frozen=True, kw_only=True)
class Coefficients:
    """The coefficients a profile fits, as StepModel names them, in the fit's order."""

    bw_share: float
    kv_bw_share: float
    step_overhead_s: float
    mfu: float
    attn_mfu: float
    allreduce_latency_s: float
    ep_latency_s: float
    api_overhead_s: float
    seq_overhead_s: float
    request_overhead_s: float
    layer_overhead_s: float
    expert_bw_share: float
    host_overlap: float
    expert_mfu: float
    fp8_gemm_share: float


COEFFICIENTS = tuple(f.name for f in fields(Coefficients))

# The range a share may take in a fit (a profile's or a user's calibration): what the kernels
# reach on the GPUs measured, so that a share cannot soak up an effect the step model lacks and
# then mispredict a model it was not fitted on. Decode reads: streaming kernels reach 80-90% of
# HBM's peak (the pooled fit: 0.931), half is a floor no engine's GEMV falls below. GEMMs and
# attention: FlashAttention-3 reaches 75% of an H100's 16-bit peak in its forward pass (Shah et
# al. 2024, arXiv:2407.08608) and cuBLAS's large GEMMs more; 0.3 leaves room for FP8 and small
# chunks.
SHARE_BOUNDS: dict[str, tuple[float, float]] = {
    "bw_share": (0.5, 1.0),
    "kv_bw_share": (0.5, 1.0),
    "mfu": (0.3, 1.0),
    "attn_mfu": (0.3, 0.75),  # no faster than FlashAttention-3's forward pass (above)
    # a fused MoE kernel's grouped GEMMs over few tokens per expert fall well short of a dense
    # read (vLLM's Triton fused_moe pads each expert's tokens to a block of 16 or more rows)
    "expert_bw_share": (0.2, 1.0),
    # ... and their GEMMs fall short of a dense GEMM's share of the peak: each expert computes
    # its own few rows (top_k / num_experts of a chunk's tokens), in 128 x 128 FP8 blocks
    "expert_mfu": (0.1, 1.0),
    # a share of the host's time, not of a peak: from 2% (all of it added) to all of it hidden
    "host_overlap": (0.02, 1.0),
    # the part of its MFU a GEMM of FP8 weights keeps at the FP8 peak (1: as a 16-bit GEMM at
    # the 16-bit peak); half is a floor: FP8 tensor cores double the peak, not the rest
    "fp8_gemm_share": (0.5, 1.0),
}

# Bounds one engine's fit keeps beside SHARE_BOUNDS, each from a measurement outside the fit's
# rows. vLLM's serving-stack time: Mooncake's single request through vLLM 0.11.2's whole stack
# (the proxy, a 128-token prefill on one node, the KV move, the first token from another) took
# 46.09 ms (kvcalc.perf.sim.published.MOONCAKE_VLLM_1P1D); the profile's own time for the rest
# of that request (the prefill on 8 GPUs, the move, the first decode step) is about 11 ms, which
# leaves the stack at most 35 ms. Fitted free in the rows' client loop it rises to 67-77 ms,
# absorbing what the step model lacks at low load, and that request comes out at 73 ms (+59%).
FIT_BOUNDS: dict[tuple[str, str], tuple[float, float]] = {("vllm", "api_overhead_s"): (1e-3, 0.035)}

# Builds named by a tag, not a release: the release they were cut from (the image's date).
# lmsysorg/sglang:glm5-hopper, measured 2026-03-19 in AIC's sample: SGLang's 0.5.9 line.
BUILD_TAGS = {("sglang", "glm5-hopper"): "0.5.9"}


def version_key(version: str) -> tuple[int, ...]:
    """'0.5.6.post2' -> (0, 5, 6); '1.0.0rc3' -> (1, 0, 0): the release's numbers."""
    parts = [re.match(r"\d+", part) for part in version.strip().lstrip("v").split(".")]
    nums = tuple(int(m.group()) for m in takewhile(bool, parts) if m)
    if not nums:
        raise ValueError(f"version {version!r}: expected numbers such as 0.18.0")
    return nums


def parse_engine(text: str) -> tuple[str, str | None]:
    """'vllm@0.18.0' -> ('vllm', '0.18.0'); 'sglang' -> ('sglang', None)."""
    name, _, asked = text.strip().partition("@")
    name = _ALIASES.get(name.lower(), name.lower())
    if name not in ENGINE_NAMES:
        raise ValueError(
            f"engine {text[:40]!r}: kvcalc has profiles for "
            f"{', '.join(ENGINE_NAMES)} (e.g. vllm@0.18.0, sglang@0.5.6, trtllm@1.0)"
        )
    version = asked.strip() or None
    if version is not None:
        version = BUILD_TAGS.get((name, version), version)
        version_key(version)
    return name, version


@dataclass(frozen=True, kw_only=True)
class EngineProfile(Coefficients):
    """One engine's version family: its fitted coefficients and its batching defaults."""

    engine: str  # vllm, sglang, trtllm
    version: str  # the family's fitted release, e.g. 0.18.0
    # the scheduler's defaults (sources in SCHEDULER_SOURCES)
    max_num_batched_tokens: int
    max_num_seqs: int
    fitted_rows: int  # training rows of this family
    fitted_on: str = "aiconfigurator silicon sample, training split (tests/data/benchmarks/aic/)"
    # a calibration from the user's own benchmark may scale the GPU's time (StepModel's
    # gpu_time_factor); a fitted profile's is 1
    gpu_time_factor: float = 1.0
    notes: tuple[str, ...] = field(default=())
    # the release the user named where its family's profile stands in for it (sglang@0.5.3
    # takes 0.5.1's coefficients): the engine's own pool rule follows that release
    release: str | None = None

    @property
    def key(self) -> str:
        return f"{self.engine}@{self.version}"

    @property
    def label(self) -> str:
        return f"{ENGINE_NAMES[self.engine]} {self.version}"

    def step_model(self) -> StepModel:
        coefs: dict[str, Any] = self.coefficients()
        return StepModel(
            name=f"{self.label} profile",
            allreduce=True,
            engine=self.key,
            gpu_time_factor=self.gpu_time_factor,
            **coefs,
        )

    def coefficients(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in COEFFICIENTS}

    def own_pool(self, dep: Deployment) -> tuple[Deployment, int | None]:
        """``dep`` and the pool this engine sizes by its own rule where ``dep`` gives no share
        of the memory, the deployment then keeping the whole memory beside it:
        - TensorRT-LLM takes kv_cache_free_gpu_mem_fraction (0.9 by default) of what the
          weights (one GPU's: ``Deployment.gpu_weights_bytes``) and the reserve leave;
        - SGLang's weights and pool take mem_fraction_static of the memory free at start
          (``sglang_pool``).
        None for vLLM, whose pool is kvcalc's own arithmetic."""
        if self.engine == "vllm" or dep.engine.gpu_memory_utilization is not None:
            return dep, None
        if self.engine == "sglang":
            release = self.release or self.version
            pool = sglang_pool(dep, release)
            if pool <= 0:  # SGLang's server would not start ("Not enough memory")
                need = dep.gpu_weights_bytes / (dep.total_bytes - SGLANG_CONTEXT_BYTES)
                raise ValueError(
                    f"{dep.spec.name}'s weights take more than SGLang {release}'s default "
                    f"mem_fraction_static {sglang_fraction(dep, release):g} of the memory here, "
                    "so its server would not start: give --mem-fraction-static above "
                    f"{need:.3f} (SGLang's own flag), or use more GPUs or smaller weights"
                )
            what = "SGLang's mem_fraction_static"
        else:
            pool = free_memory_pool(
                dep.total_bytes, dep.gpu_weights_bytes, dep.reserve_bytes, TRTLLM_FREE_FRACTION
            )
            what = "TensorRT-LLM's pool"
        if pool <= 0:
            raise ValueError(
                f"{dep.spec.name}'s weights leave no memory for {what}; use tensor parallel, "
                "smaller weights or a larger GPU"
            )
        return dep.but(gpu_memory_utilization=1.0), pool

    def pool_text(self, dep: Deployment, pool_bytes: int) -> str:
        """Where ``own_pool``'s pool came from, in words."""
        size = f"{pool_bytes / GiB:,.2f} GiB"
        if self.engine == "sglang":
            release = self.release or self.version
            return (
                f"pool: SGLang {release}'s default mem_fraction_static "
                f"{sglang_fraction(dep, release):g} (for this GPU and layout) of the memory free "
                f"at start, less the weights ({size})"
            )
        return (
            f"pool: TensorRT-LLM's {TRTLLM_FREE_FRACTION:g} of the memory the weights and the "
            f"reserve leave ({size})"
        )

    def batching(
        self, total_bytes: int, attention_dp: int = 1
    ) -> tuple[int | None, int | None, int]:
        """(max_num_seqs, max_num_batched_tokens, chunk tokens) this engine's release runs with
        by default on a GPU of ``total_bytes`` (``batching``)."""
        return batching(self.engine, self.release or self.version, total_bytes, attention_dp)

    def serve(self, dep: Deployment) -> tuple[Deployment, int | None]:
        """``dep`` as this engine runs it: its release's pool rules, its batching defaults
        where ``dep`` names none, and the pool it sizes by its own rule (``own_pool``; None:
        vLLM's arithmetic)."""
        dep = self.pool_release(dep)
        given = dep.engine
        seqs, tokens, chunk = self.batching(dep.total_bytes, dep.attention_dp)
        dep = dep.but(
            max_num_seqs=given.max_num_seqs or seqs,
            max_num_batched_tokens=given.max_num_batched_tokens or tokens,
            long_prefill_token_threshold=given.long_prefill_token_threshold or chunk,
        )
        return self.own_pool(dep)

    def pool_release(self, dep: Deployment) -> Deployment:
        """``dep`` with a vLLM profile's own release where ``dep`` names none: its pool is then
        sized by that release's rules (vLLM before 0.20 takes 0.9 of the memory by default, not
        0.92), not by the newest kvcalc knows. Other engines' deployments are unchanged."""
        if self.engine == "vllm" and dep.engine.version is None:
            return dep.but(version=self.version)
        return dep


# -- SGLang's pool -----------------------------------------------------------------------------
# SGLang sizes its pool from mem_fraction_static, the share of the memory free at start that
# the weights and the pool may take (sglang/srt/model_executor/model_runner_kv_cache_mixin.py,
# profile_max_num_token: rest_memory = available after the weights - free at start x (1 -
# mem_fraction_static)). Left unset, ServerArgs derives it from the GPU's memory as nvidia-smi
# gives it (MiB) and the parallel layout, by one of two rules (sglang/srt/server_args.py in the
# PyPI wheels, read 2026-12-07):
# - 0.5.0-0.5.2: a reserve of (9.5 + tp x pp / 2) GiB on 35-90 GiB GPUs, (12 + tp x pp / 2)
#   GiB on 90-160 GiB, 32 GiB above, (2.8 + tp x pp / 10) GiB below 35 GiB; 4 GiB more with
#   data-parallel attention;
# - from 0.5.3 (_handle_gpu_memory_settings): 512 MiB + 1.5 MiB a token of the prefill chunk
#   (2,048 at least) + 2 MiB a CUDA-graph batch slot + tp x pp / 8 GiB, with data-parallel
#   attention 3 MiB (and above 300 slots 1.5 MiB more) a slot and rank, at least 10 GiB on a
#   GPU above 60 GiB; the chunk and the slots by the GPU's memory (SGLANG_GRAPH_TIERS).
# Both: 2 GiB more for a speculative drafter; mem_fraction_static = round((memory - reserve) /
# memory, 3). From 0.5.6 an AMD GPU's default attention backend (aiter, for models with K/V
# heads) takes 0.85 of it where the model's context exceeds 8,192 tokens.
SGLANG_NEW_RESERVE_FROM = (0, 5, 3)
SGLANG_AMD_SHARE_FROM = (0, 5, 6)
# (below this many MiB, prefill chunk, CUDA-graph slots below tensor parallel 4, from 4)
SGLANG_GRAPH_TIERS = (
    (20 * 1024, 2048, 8, 8),
    (35 * 1024, 2048, 24, 80),  # 16 below tensor parallel 4 before 0.5.6 (0.5.4's source)
    (60 * 1024, 4096, 32, 160),
    (90 * 1024, 8192, 256, 512),
    (160 * 1024, 8192, 256, 512),
    (float("inf"), 16384, 512, 512),
)
# the CUDA context and the communicators' buffers, in use before SGLang measures what is free
SGLANG_CONTEXT_BYTES = DEFAULT_NON_TORCH_BYTES


def sglang_mem_fraction(
    version: str,
    gpu_mib: float,
    tp: int,
    *,
    pp: int = 1,
    attention_dp: int = 1,
    speculative: bool = False,
    amd_aiter_long: bool = False,
) -> float:
    """SGLang ``version``'s default mem_fraction_static on a GPU of ``gpu_mib`` MiB, its
    tp_size ``tp`` (every GPU of the layout: attention tensor parallel x ``attention_dp``)."""
    release = version_key(version)
    parallel = tp * pp
    reserve: float
    if release < SGLANG_NEW_RESERVE_FROM:
        if gpu_mib < 35 * 1024:
            reserve = (2.8 + parallel / 10) * 1024
        elif gpu_mib < 90 * 1024:
            reserve = (9.5 + parallel / 2) * 1024
        elif gpu_mib < 160 * 1024:
            reserve = (12 + parallel / 2) * 1024
        else:
            reserve = 32 * 1024
        reserve += 4 * 1024 if attention_dp > 1 else 0
    else:
        _, chunk, few, many = next(t for t in SGLANG_GRAPH_TIERS if gpu_mib < t[0])
        if gpu_mib < 35 * 1024 and tp < 4 and release < (0, 5, 6):
            few = 16
        slots = few if tp < 4 else many
        reserve = 512 + max(chunk, 2048) * 1.5 + slots * 2 + parallel / 8 * 1024
        if attention_dp > 1:
            reserve += slots * attention_dp * 3 + (slots * attention_dp * 1.5 if slots > 300 else 0)
        if gpu_mib > 60 * 1024:
            reserve = max(reserve, 10 * 1024)
    reserve += 2 * 1024 if speculative else 0
    fraction = round((gpu_mib - reserve) / gpu_mib, 3)
    if amd_aiter_long and release >= SGLANG_AMD_SHARE_FROM:
        fraction *= 0.85
    return fraction


def sglang_fraction(dep: Deployment, version: str) -> float:
    """SGLang ``version``'s default mem_fraction_static for ``dep``'s GPU and layout."""
    amd = dep.gpu is not None and dep.gpu.key.startswith("mi")
    with_heads = any(getattr(layer, "kv_heads", None) for layer in dep.spec.layers)
    return sglang_mem_fraction(
        version,
        dep.total_bytes / MiB,
        dep.tp * dep.attention_dp,
        pp=dep.pp,
        attention_dp=dep.attention_dp,
        speculative=dep.spec.draft_layers > 0 or dep.engine.num_draft_layers > 0,
        amd_aiter_long=amd and with_heads and dep.spec.max_context > 8192,
    )


def sglang_pool(dep: Deployment, version: str = "", *, fraction: float | None = None) -> int:
    """The bytes of one GPU's pool SGLang allocates for ``dep``: mem_fraction_static
    (``fraction``, or SGLang ``version``'s default) of the memory free at start, less one
    GPU's weights."""
    if fraction is None:
        fraction = sglang_fraction(dep, version)
    free = dep.total_bytes - SGLANG_CONTEXT_BYTES
    return math.floor(free * fraction) - dep.gpu_weights_bytes


# -- the scheduler's defaults, by engine, with their sources ----------------------------------
SCHEDULER_SOURCES = {
    "vllm": (
        "vLLM V1 `vllm serve` on a GPU of 70 GiB or more: max_num_batched_tokens 8,192 and "
        "max_num_seqs 1,024 (vllm/engine/arg_utils.py, _set_default_args_v1, "
        "default_max_num_batched_tokens / default_max_num_seqs for UsageContext.OPENAI_API_SERVER)"
    ),
    "sglang": (
        "SGLang server_args.py: chunked_prefill_size 8,192 on 80-160 GB GPUs (H100, H200) and "
        "max_running_requests sized from the pool (here: the pool binds first)"
    ),
    "trtllm": (
        "TensorRT-LLM's PyTorch backend (trtllm-serve): max_num_tokens 8,192 and "
        "max_batch_size 2,048 (tensorrt_llm/llmapi/llm_args.py BuildConfig defaults)"
    ),
}
# What each engine calls its two batch caps (the flags of SCHEDULER_SOURCES' files): the most
# requests in a step, and the most new tokens a step takes (SGLang's: the prefill chunk)
BATCH_FLAGS = {
    "vllm": ("max_num_seqs", "max_num_batched_tokens"),
    "sglang": ("max_running_requests", "chunked_prefill_size"),
    "trtllm": ("max_batch_size", "max_num_tokens"),
}
SCHEDULER_DEFAULTS: dict[str, dict[str, Any]] = {
    "vllm": dict(max_num_batched_tokens=8192, max_num_seqs=1024),
    "sglang": dict(max_num_batched_tokens=8192, max_num_seqs=4096),
    "trtllm": dict(max_num_batched_tokens=8192, max_num_seqs=2048),
}


def sglang_chunk(version: str, gpu_mib: float) -> int:
    """SGLang ``version``'s default chunked_prefill_size on a GPU of ``gpu_mib`` MiB
    (server_args.py: from 0.5.3 by SGLANG_GRAPH_TIERS; 0.5.0-0.5.2 2,048 below 35 GiB, 8,192
    below 160 GiB, 16,384 above)."""
    if version_key(version) >= SGLANG_NEW_RESERVE_FROM:
        return next(t[1] for t in SGLANG_GRAPH_TIERS if gpu_mib < t[0])
    return 2048 if gpu_mib < 35 * 1024 else 8192 if gpu_mib < 160 * 1024 else 16384


def batching(
    engine: str, release: str, total_bytes: int, attention_dp: int = 1
) -> tuple[int | None, int | None, int]:
    """(max_num_seqs, max_num_batched_tokens, chunk tokens) ``engine``'s ``release`` runs with
    by default on a GPU of ``total_bytes``; chunk tokens: the most one request's prefill chunk
    takes a step beyond its rank's budget (vLLM's long_prefill_token_threshold; 0: no cap).
    - vLLM: None, its own release's rules for the GPU, which the deployment's release then
      takes (kvcalc.engines.vllm: 1,024 and 8,192 on a GPU of 70 GiB or more, 256 and 2,048
      below); each DP rank its own budget;
    - SGLang: chunked_prefill_size by the GPU's memory (``sglang_chunk``), divided among the DP
      attention ranks (server_args.py, _handle_data_parallelism: chunked_prefill_size //
      dp_size); max_running_requests 4,096 (its pool binds first);
    - TensorRT-LLM: max_num_tokens 8,192 and max_batch_size 2,048 (BuildConfig defaults)."""
    if engine == "vllm":  # kvcalc.engines.vllm's rules for the deployment's release and GPU
        return None, None, 0
    if engine == "sglang":
        tokens = sglang_chunk(release, total_bytes / MiB)
        return 4096, tokens, (max(1, tokens // attention_dp) if attention_dp > 1 else 0)
    defaults = SCHEDULER_DEFAULTS[engine]
    return defaults["max_num_seqs"], defaults["max_num_batched_tokens"], 0


def _p(engine: str, version: str, rows: int, *values: float) -> EngineProfile:
    coefs: dict[str, Any] = dict(zip(COEFFICIENTS, values, strict=True))
    return EngineProfile(
        engine=engine, version=version, fitted_rows=rows, **SCHEDULER_DEFAULTS[engine], **coefs
    )


# -- the fitted profiles (bench/aic.py --fit --from-committed printed these) ------------------
# FITTED-PROFILES-BEGIN
# fmt: off
# each row: engine, version, training rows, then the COEFFICIENTS in their order
PROFILES: dict[str, EngineProfile] = {
    p.key: p
    for p in (
        _p("sglang", "0.5.1", 78, 1.0, 1.0, 0.004928, 0.6799, 0.302, 7.764e-06, 4.9e-05, 0.2244, 2.818e-05, 0.0002333, 1.473e-05, 0.544, 0.4413, 0.663, 0.9847),  # noqa: E501
        _p("sglang", "0.5.6", 70, 1.0, 0.9962, 0.006385, 0.5956, 0.3, 8.046e-06, 4.9e-05, 0.2015, 2.938e-05, 0.0002339, 1.528e-05, 0.5781, 0.4248, 0.5926, 0.9717),  # noqa: E501
        _p("sglang", "0.5.8", 6, 1.0, 1.0, 0.005885, 0.6101, 0.3, 8.062e-06, 4.9e-05, 0.2095, 2.874e-05, 0.0002334, 1.523e-05, 0.544, 0.4328, 0.6078, 0.9847),  # noqa: E501
        _p("sglang", "0.5.9", 30, 1.0, 1.0, 0.006658, 0.6268, 0.3, 8.227e-06, 4.9e-05, 0.2058, 2.879e-05, 0.0002334, 1.556e-05, 0.4986, 0.4324, 0.6213, 0.9861),  # noqa: E501
        _p("trtllm", "1.0.0", 479, 0.8644, 1.0, 0.0004921, 0.8568, 0.3, 1.284e-05, 2.65e-05, 0.01658, 1.308e-05, 0.01554, 1.951e-05, 1.0, 0.1814, 0.2858, 0.5205),  # noqa: E501
        _p("trtllm", "1.2.0", 5, 0.8939, 1.0, 0.0005003, 0.9134, 0.3002, 1.282e-05, 2.756e-05, 0.01653, 1.307e-05, 0.01511, 1.937e-05, 1.0, 0.1836, 0.293, 0.5726),  # noqa: E501
        _p("vllm", "0.12.0", 165, 1.0, 1.0, 0.0007431, 0.5582, 0.75, 3.71e-05, 1.861e-05, 0.035, 2.567e-05, 0.0002016, 2.603e-05, 0.3799, 0.6195, 0.1, 1.0),  # noqa: E501
        _p("vllm", "0.16.0", 75, 1.0, 1.0, 0.000756, 0.5459, 0.75, 3.955e-05, 1.845e-05, 0.035, 2.561e-05, 0.0002018, 2.64e-05, 0.519, 0.6177, 0.1, 0.9683),  # noqa: E501
        _p("vllm", "0.18.0", 84, 1.0, 1.0, 0.0007415, 0.5384, 0.7472, 3.579e-05, 1.811e-05, 0.035, 2.565e-05, 0.0002019, 2.538e-05, 0.5885, 0.6139, 0.1, 0.9461),  # noqa: E501
    )
}
# fmt: on
# FITTED-PROFILES-END

# -- leave-one-model-out bands: median |pred/meas - 1|, p90, worst ratio, rows; per engine and
#    quantity (bench/aic.py printed these at stop 59, on the committed profiles; how, and why
#    they miss issue 41's goal: docs/calibration.md#engine-profiles-issue-41) ------------------
BAND: dict[str, dict[str, tuple[float, float, float, int]]] = {
    "vllm": {"TTFT": (0.303, 0.67, 11.71, 324), "TPOT": (0.178, 0.64, 3.91, 324)},
    "sglang": {"TTFT": (0.373, 0.89, 27.13, 184), "TPOT": (0.296, 0.67, 2.07, 184)},
    "trtllm": {"TTFT": (0.204, 1.15, 23.51, 484), "TPOT": (0.086, 0.23, 1.72, 484)},
}


def resolve(text: str) -> tuple[EngineProfile, str | None]:
    """The profile for 'engine@version' and a note when it is another version's: the nearest
    fitted release of that engine (by release numbers; a tie takes the older)."""
    name, version = parse_engine(text)
    fitted = sorted(
        (p for p in PROFILES.values() if p.engine == name), key=lambda p: version_key(p.version)
    )
    if not fitted:
        raise ValueError(f"no {ENGINE_NAMES[name]} profile has been fitted yet")
    if version is None:
        p = fitted[-1]
        return p, f"no version given: {p.label}, the newest fitted {ENGINE_NAMES[name]} profile"
    want = version_key(version)
    p = min(fitted, key=lambda q: release_distance(version_key(q.version), want))
    if release_distance(version_key(p.version), want)[1] == 0:  # the release itself
        return p, None
    return replace(p, release=version), (
        f"{ENGINE_NAMES[name]} {version} has no fitted profile: using {p.label}'s, the "
        f"nearest fitted release ({', '.join(q.version for q in fitted)} are fitted)"
    )


def release_distance(have: tuple[int, ...], want: tuple[int, ...]) -> tuple:
    """Releases compared number by number: the first that differs decides, the nearer wins,
    and a tie goes to the older release."""
    n = max(len(have), len(want))
    a = have + (0,) * (n - len(have))
    b = want + (0,) * (n - len(want))
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:  # a difference in an earlier number is further
            return (-i, abs(x - y), a > b)
    return (-n, 0, False)


def band_text(profile: EngineProfile, quantity: str) -> str | None:
    """'TPOT within ±X% (median), Y% at p90, Zx at worst on N runs of <engine> left out of its
    fit (leave one model out)', or None where no band was measured."""
    b = BAND.get(profile.engine, {}).get(quantity)
    if not b:
        return None
    med, p90, worst, n = b
    return (
        f"{quantity}: within ±{med:.0%} on half, ±{p90:.0%} on 90% of {n} "
        f"{ENGINE_NAMES[profile.engine]} runs left out of the fit (one model at a time), "
        f"{worst:.2f}x at worst"
    )


def engine_band_text(profile: EngineProfile, calibration=None) -> str:
    """The band a result of ``profile`` carries: the user's own residual where it was calibrated
    from their benchmark, else the leave-one-model-out band of its engine."""
    if calibration is not None:
        return calibration.band_text()
    parts = [t for q in ("TTFT", "TPOT") if (t := band_text(profile, q))]
    if not parts:
        return f"{profile.label} profile: no held-out band measured"
    return f"{profile.label} profile: " + "; ".join(parts)
