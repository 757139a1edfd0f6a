"""The interview check: the seed chapter's five questions and one beyond it, on disaggregated
serving (interview.toml), every number computed (Llama 3.1 8B on an H100 at 8,192 tokens; the
chapter's 40-layer model; Llama 3.1 70B's cache on the move)."""

from __future__ import annotations

from typing import Any

from ..cache.deployment import Deployment
from ..cache.kv import kv_cache
from ..cache.transfer import LINK_SHARE, transfer
from ..config.catalog import get_gpu, get_model, registry
from ..config.hfconfig import spec_from_config
from ..core.model import FullAttention
from ..core.units import GiB, KiB, fmt_bytes, fmt_seconds
from ..engines.budget import budget
from ..perf.roofline import StepTime, offload_vs_recompute, prefill, step_time
from .practice import llama_like
from .prose import prose
from .question import Question

CTX = 8192  # the chapter's conversation
FORTY = dict(layers=40, kv=8, hd=128)  # the chapter's 40-layer model, in FP16
SHORT = 32  # a short prefix, recomputed inside a running batch
RELOAD_S = 1e-3  # the fixed cost of one reload from CPU memory


def interview_questions() -> list[Question]:
    """The chapter's five questions and the disaggregated one, answered with numbers computed by
    kvcalc."""
    t = prose("interview")
    spec, w = (l8b := get_model("llama-3.1-8b")).spec, l8b.weights()
    h100 = get_gpu("h100-sxm-80gb")
    bf16 = Deployment(spec=spec, memory_bytes=h100.memory_bytes, weights=w)
    fp8 = bf16.but(kv_dtype="fp8")
    b16, b8 = (budget(d, CTX, find_max_context=False) for d in (bf16, fp8))
    bw = h100.bandwidth_gbs
    s16, s8 = (step_time(d, context=CTX, batch=1, bandwidth_gbs=bw) for d in (bf16, fp8))
    layer = spec.kv_layers[0]
    forty = spec_from_config(llama_like(FORTY["layers"], FORTY["kv"], FORTY["hd"], 32))
    per = kv_cache(forty, 1, kv_dtype="fp16").kv_bytes_per_token_nominal
    seq = kv_cache(forty, CTX, kv_dtype="fp16").kv_bytes
    link = registry().links["pcie5-x16"].gbs  # one direction
    peak = h100.bf16_tflops
    if peak is None:
        raise ValueError(
            "models.yaml: gpu 'h100-sxm-80gb' needs its bf16_tflops for the interview questions"
        )
    # The Learn path's convention for a recompute (issue 37, F17): FLOPs at the full peak (MFU 1).
    ideal: dict[str, Any] = dict(peak_tflops=peak, mfu=1.0)
    off = offload_vs_recompute(spec, CTX, link_gbs=link, **ideal)
    off_fixed = offload_vs_recompute(spec, CTX, link_gbs=link, fixed_s=RELOAD_S, **ideal)
    short = prefill(spec, SHORT, **ideal)  # the marginal cost inside a running batch
    read = w.read_per_step(spec, SHORT)  # on an idle GPU: one weight read at least
    alone = prefill(spec, SHORT, weight_read_bytes=read, bandwidth_gbs=bw, **ideal)
    limit = spec.max_context
    nums: dict[str, Any] = dict(
        FORTY,
        ctx=CTX,
        short_n=SHORT,
        reload_ms=RELOAD_S * 1e3,
        layers8b=spec.num_layers,
        q_heads=layer.q_heads,
        qk_dim=layer.qk_dim,
        q_b=fmt_bytes(spec.num_layers * layer.q_heads * layer.qk_dim * 2),
        kv_b=fmt_bytes(kv_cache(spec, 1).kv_bytes_per_token_nominal),
        per=per,
        per_kib=per // KiB,
        seq=seq,
        seq_gib=seq / GiB,
        w_gib=w.bytes / GiB,
        pool_gib=b16.kv_pool_bytes / GiB,
        util=b16.gpu_mem_util,
        reserve_gib=b16.reserve_bytes / GiB,
        conv_gib=kv_cache(spec, CTX).kv_bytes / GiB,
        c16=b16.max_concurrency,
        c8=b8.max_concurrency,
        move=_crossover_move(t, s16, s8, limit),
        prefix_b=fmt_bytes(off.kv_bytes),
        reload=fmt_seconds(off.reload_s),
        recompute=fmt_seconds(off.recompute_s),
        link=link,
        peak=peak,
        break_even=off_fixed.break_even_tokens,
        short=fmt_seconds(short.time_s),
        alone=fmt_seconds(alone.time_s),
        **_disagg_numbers(peak),
    )
    return [_question(qid, q, nums) for qid, q in t["questions"].items()]


def _disagg_numbers(peak: float) -> dict[str, Any]:
    """The disaggregated-serving question: Llama 3.1 70B's cache of an 8,192-token prompt over
    one 400 Gb/s link (kvcalc.cache.transfer), and the prefill beside it on four H100s."""
    spec = get_model("llama-3.1-70b").spec
    layer = spec.kv_layers[0]
    assert isinstance(layer, FullAttention)  # Llama: every layer full attention
    link = registry().link("ib-ndr-400")
    one = transfer(spec, CTX, link_gbs=link.gbs)
    four = transfer(spec, CTX, prefill_tp=4, decode_tp=4, link_gbs=link.gbs)
    assert one.seconds is not None and one.estimate_s is not None and four.seconds is not None
    pf = prefill(spec, CTX, peak_tflops=peak, mfu=1.0, tp=4)
    return dict(
        d_ctx=CTX,
        d_kvname="BF16",
        d_gbit=link.gbs * 8,
        d_gbs=link.gbs,
        d_layers=spec.num_layers,
        d_kv=layer.kv_heads,
        d_hd=layer.head_dim,
        d_per=kv_cache(spec, 1).kv_bytes_per_token_nominal,
        d_bytes=one.bytes_moved,
        d_gib=one.bytes_moved / GiB,
        d_ms=one.seconds * 1e3,
        d_share=LINK_SHARE,
        d_est_ms=one.estimate_s * 1e3,
        d_tp=4,
        d_ms_tp=four.seconds * 1e3,
        d_pf=fmt_seconds(pf.time_s),
    )


def _question(qid: str, q: dict[str, Any], nums: dict[str, Any]) -> Question:
    """One question of interview.toml, its templates filled with ``nums``."""
    text: dict[str, Any] = {k: v.format(**nums) for k, v in q.items() if isinstance(v, str)}
    values = {k: nums[v] for k, v in q.get("values", {}).items()}  # value, value2: named numbers
    return Question(qid=qid, **text, **values, **q.get("units", {}))


def _crossover_move(t: dict[str, Any], before: StepTime, after: StepTime, limit: int) -> str:
    """'from 114,517 tokens to past the model's limit ...': where a crossover moves (a crossover
    is never quoted past the model's limit)."""
    if before.crossover_context is None or before.crossover_context > limit:
        return t["move_none"].format(limit=limit)
    if after.crossover_context is None or after.crossover_context > limit:
        to = t["at_past"].format(limit=limit)
    else:
        to = t["at"].format(cross=after.crossover_context)
    return t["move"].format(before=before.crossover_context, to=to)
