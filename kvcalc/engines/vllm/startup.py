"""What vLLM decides at start-up around the capacity lines: the longest max_model_len that
fits (its estimate_max_model_len), its refusal to start when one request does not, and the
memory it finds for the cache ("Available KV cache memory")."""

from __future__ import annotations

import functools
import math

from ...config.limits import MAX_CONTEXT
from ...core.arith import last_true
from ...core.model import ModelSpec
from ...core.units import GiB, check_int
from .capacity import VllmPrediction, predict
from .defaults import ASSUMED_GPU, default_max_num_batched_tokens, default_max_num_seqs
from .facts import fact, resolve_version


def _default_mnbt(kw: dict, max_model_len: int | None) -> int:
    """predict()'s default max_num_batched_tokens for these keywords (before the
    multimodal floor is applied by predict itself)."""
    assumed = kw.get("gpu_memory_bytes") is None
    gpu_bytes, gname = ASSUMED_GPU if assumed else (kw["gpu_memory_bytes"], kw.get("gpu_name"))
    tokens = default_max_num_batched_tokens(
        kw.get("vllm_version"),
        gpu_bytes,
        gname,
        usage_context=kw.get("usage_context", "serve"),
        max_model_len=max_model_len,
    )
    floor = kw.get("mm_batch_tokens")
    if floor and floor > tokens and fact("mm_prefix_lm_batch_floor", kw.get("vllm_version")):
        tokens = floor
        if max_model_len:
            tokens = min(
                tokens,
                default_max_num_seqs(kw.get("vllm_version"), gpu_bytes, gname) * max_model_len,
            )
    return tokens


def estimate_max_model_len(spec: ModelSpec, *, available_bytes: int, **kw) -> int | None:
    """The longest max_model_len one request of which fits in the pool, as vLLM's
    estimate_max_model_len finds it by bisection (at most 10^8 tokens); None when a request's
    blocks stop growing (every layer keeps a bounded number of tokens), 0 when not even one
    token fits."""
    if kw.get("max_num_batched_tokens") is None:
        # vLLM searches with its scheduler's one max_num_batched_tokens: fix the default once.
        kw = {**kw, "max_num_batched_tokens": _default_mnbt(kw, None)}
    try:
        key = tuple(sorted(kw.items()))
        hash((spec, key))
    except TypeError:  # an unhashable argument: no memo
        return _estimate_max_model_len(spec, available_bytes, **kw)
    return _estimate_memo(spec, available_bytes, key)


@functools.lru_cache(maxsize=16)
def _estimate_memo(spec: ModelSpec, available_bytes: int, key: tuple) -> int | None:
    """The bisection, once per model, pool and engine settings: it takes about 28 predictions,
    and a Budget page whose context does not fit asks for it again at every point of its
    concurrency curve (42 x 28 predictions of a 1,024-layer model took 8 s)."""
    return _estimate_max_model_len(spec, available_bytes, **dict(key))


def _estimate_max_model_len(spec: ModelSpec, available_bytes: int, **kw) -> int | None:
    def blocks(n: int) -> tuple[int, int]:
        p = predict(spec, available_bytes=available_bytes, max_model_len=n, **kw)
        return p.blocks_per_request, p.num_blocks

    null = fact("null_block", kw.get("vllm_version"))  # v0.29.0 on: the null block first

    def fits(n: int) -> bool:
        need, have = blocks(n)
        return need <= have - null

    hi = MAX_CONTEXT
    if fits(hi):
        # Bounded layers only (windows, states): a request never needs more, so nothing ever
        # fills the pool. Otherwise the answer is at least 10^8 tokens, as far as vLLM goes.
        return None if blocks(hi)[0] == blocks(hi // 2)[0] else hi
    if not fits(1):
        return 0
    return last_true(fits, 1, hi)


def startup_error(
    spec: ModelSpec,
    *,
    available_bytes: int,
    max_model_len: int,
    prediction: VllmPrediction | None = None,
    **kw,
) -> str | None:
    """vLLM's own refusal to start when one request of max_model_len does not fit (None when it
    fits), in the wording of the chosen version, with its estimate of the longest max_model_len
    that would (tests/data/vllm-facts.md, Q7). ``prediction``: predict()'s result for these
    same arguments, when the caller has it already."""
    version = kw.get("vllm_version")
    if kw.get("max_num_batched_tokens") is None:
        kw = {**kw, "max_num_batched_tokens": _default_mnbt(kw, max_model_len)}
    p = prediction or predict(
        spec, available_bytes=available_bytes, max_model_len=max_model_len, **kw
    )
    if p.blocks_per_request <= p.num_blocks - fact("null_block", version):
        return None
    need = p.blocks_per_request * (p.page_bytes * p.group_size if len(p.groups) else p.page_bytes)
    est = estimate_max_model_len(spec, available_bytes=available_bytes, **kw)
    v = resolve_version(version)
    who = fact("error_wording", version)
    text = (
        f"To serve at least one request with the {who} max seq len ({max_model_len}), "
        f"({need / GiB:.2f} GiB KV cache is needed, which is larger than the available KV "
        f"cache memory ({available_bytes / GiB:.2f} GiB). "
    )
    if est:
        text += f"Based on the available memory, the estimated maximum model length is {est}. "
    text += (
        "Try increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU "
        "backend) or decreasing `max_model_len` when initializing the engine."
        if v >= (0, 22, 0)
        else "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
        "initializing the engine."
    )
    if v >= (0, 20, 0):
        text += (
            " See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
        )
    return text


def available_bytes(
    *,
    total_bytes: int,
    gpu_mem_util: float,
    weights_bytes: int,
    activation_bytes: int,
    non_torch_bytes: int,
    cuda_graph_bytes: int = 0,
) -> int:
    """vLLM's "Available KV cache memory" on one GPU: ceil(total x util) minus the weights, the
    peak activation of its profiling run, memory outside torch (CUDA context, NCCL, cuBLAS
    workspaces) and, in versions that profile it before sizing the cache, CUDA-graph memory."""
    total_bytes = check_int("GPU memory (bytes)", total_bytes, 1, 2**50)
    for name, v in (
        ("weights", weights_bytes),
        ("activation peak", activation_bytes),
        ("non-torch memory", non_torch_bytes),
        ("CUDA-graph memory", cuda_graph_bytes),
    ):
        check_int(f"{name} (bytes)", v, 0, 2**50)
    if not 0 < gpu_mem_util <= 1 or gpu_mem_util != gpu_mem_util:
        raise ValueError(
            f"gpu_memory_utilization must be above 0 and at most 1, got {gpu_mem_util}"
        )
    requested = math.ceil(total_bytes * gpu_mem_util)
    return requested - weights_bytes - activation_bytes - non_torch_bytes - cuda_graph_bytes
