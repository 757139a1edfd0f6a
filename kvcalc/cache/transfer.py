"""The cache a disaggregated deployment moves (issue 43): a request's prompt is computed on the
prefill GPUs and its KV cache is shipped to the decode GPUs, which then generate. ``transfer``
gives the bytes, per layer kind and per GPU on each side, and the time over a link.

Each decode GPU receives its own shard: the K/V heads it serves at the decode side's tensor
parallel size (a head replicated over several GPUs goes to each of them; an MLA latent, whole on
every GPU, likewise), a sliding layer's window, a recurrent layer's state. The prefill GPUs
send all of it between them: the time is the larger of one decode GPU's share and one prefill
GPU's share of the whole, at the link's line rate (each GPU its own port, as an HGX node has).
That is a floor; ``estimate_s`` adds what RDMA transfers show in practice (``MOVE_LATENCY_S``,
``LINK_SHARE``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..core.model import ModelSpec
from ..core.units import GB, check_float, check_int, check_parallel
from .kv import kv_cache

# What a move takes in practice over RDMA: a fixed 0.35 ms, then the bytes at 72% of the line
# rate. Fitted on Mooncake's nine measured moves (its vLLM connector, 1P1D Qwen3-8B at TP 8 on
# H800s, 8 x 200 Gb/s RoCE, prompts of 128 to 32,768 tokens: within 8.2% of each), and within
# 23% of its three SGLang moves that took no part in the fit (Qwen3-235B-A22B at TP 8 on H20s,
# 4 x 400 GbE a node): tests/test_transfer.py. kvcache-ai/Mooncake, docs/source/performance/
# vllm/vllm-v1-pd-performance.md and sglang/sglang-benchmark-results-v1.md.
MOVE_LATENCY_S = 0.35e-3
LINK_SHARE = 0.72


@dataclass(frozen=True, kw_only=True)
class TransferRow:
    """One layer kind's share of what one decode GPU receives."""

    kind: str  # full, sliding, chunked, mla, shared, state
    label: str
    layers: int
    tokens: int  # tokens it keeps of the prompt (a window keeps at most its window)
    bytes: int  # per decode GPU


@dataclass(frozen=True, kw_only=True)
class Transfer:
    model: str
    prompt_tokens: int
    kv_dtype: str
    prefill_tp: int
    decode_tp: int
    rows: tuple[TransferRow, ...]
    bytes_per_decode_gpu: int  # what one decode GPU receives (its shard)
    bytes_per_prefill_gpu: int  # what one prefill GPU holds of the prompt's cache
    bytes_moved: int  # over the network: every decode GPU's shard
    link_gbs: float | None  # one GPU's port, one way (None: bytes only)
    seconds: float | None  # the larger of the two sides' shares over their ports
    estimate_s: float | None  # the same as RDMA moves it in practice (MOVE_LATENCY_S, LINK_SHARE)

    def to_dict(self) -> dict:
        return asdict(self)


def transfer(
    spec: ModelSpec,
    prompt_tokens: int,
    *,
    kv_dtype: str = "bf16",
    prefill_tp: int = 1,
    decode_tp: int = 1,
    link_gbs: float | None = None,
    scales: bool = False,
    state_dtype: str = "bf16",
) -> Transfer:
    """The cache of one ``prompt_tokens`` prompt moved from ``prefill_tp`` prefill GPUs to
    ``decode_tp`` decode GPUs, and the time over a ``link_gbs`` port per GPU."""
    n = check_int("prompt tokens", prompt_tokens, 1, 10**8)
    prefill_tp, _ = check_parallel(prefill_tp)
    decode_tp, _ = check_parallel(decode_tp)
    if link_gbs is not None:
        link_gbs = check_float("link bandwidth (GB/s)", link_gbs, 0.0, 1e6, lo_open=True)
    dec, pre = (
        kv_cache(spec, n, 1, kv_dtype, scales=scales, state_dtype=state_dtype, tp=tp)
        for tp in (decode_tp, prefill_tp)
    )
    rows = tuple(
        TransferRow(
            kind=r.kind,
            label=r.label,
            layers=r.layers,
            tokens=r.tokens_kept if r.stores_tokens else 0,
            bytes=r.bytes + r.state_bytes * r.layers,
        )
        for r in dec.rows
        if r.bytes or r.state_bytes
    )
    per_decode = dec.total_bytes
    moved = per_decode * decode_tp
    seconds = estimate = None
    if link_gbs is not None:  # each side's GPUs in parallel, each over its own port
        seconds = max(per_decode, moved / prefill_tp) / (link_gbs * GB)
        estimate = MOVE_LATENCY_S + seconds / LINK_SHARE
    return Transfer(
        model=spec.name,
        prompt_tokens=n,
        kv_dtype=dec.kv_dtype,
        prefill_tp=prefill_tp,
        decode_tp=decode_tp,
        rows=rows,
        bytes_per_decode_gpu=per_decode,
        bytes_per_prefill_gpu=pre.total_bytes,
        bytes_moved=moved,
        link_gbs=link_gbs,
        seconds=seconds,
        estimate_s=estimate,
    )
