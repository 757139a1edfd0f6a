"""Stops 4 (Decode step time: the crossover context within the limit, else tokens/s) and 5
(Roofline: where the GPU's arithmetic, not its memory, would limit a step)."""

from __future__ import annotations

from typing import Any

from ...cache.weight_bytes import Weights
from ...core.model import ModelSpec
from ...core.units import GB, GiB, fmt_gb, fmt_seconds
from ...perf.intensity import decode_point, ridge_point
from ...perf.roofline import StepTime, crossover_context, step_time
from .lesson import TEXT, Lesson, Setup, fill
from .slips import Slip
from .words import where_text


def weights_read_text(spec: ModelSpec, w: Weights) -> str:
    """Which weights one decode step of one token reads."""
    t = TEXT["stop4"]["reads"]
    if w.input_embedding_bytes:
        text = t["untied"].format(emb=fmt_gb(w.input_embedding_bytes), row=w.embedding_row_bytes)
    else:
        text = t["tied" if spec.params is not None and spec.params.tied else "all"]
    if spec.moe is not None:
        m = spec.moe
        text += t["routed"].format(top_k=m.top_k, experts=m.num_experts, layers=m.layers)
    return text


def _step(s: Setup, context: int, **kw: Any) -> StepTime:
    """One decode step at batch 1, the ideal bound: the Learn path's formula (issue 37)."""
    return step_time(s.deployment, context=context, batch=1, bandwidth_gbs=s.bw, **kw)


def _probe(s: Setup, context: int, weight_read_bytes: int | None = None) -> StepTime:
    """A step with no crossover search: the probes stop 4 reads its givens and slips from."""
    dep = s.deployment.but(weights_bytes=weight_read_bytes)
    return step_time(dep, context=context, batch=1, bandwidth_gbs=s.bw, find_crossover=False)


def weight_readings(s: Setup, read: int) -> list[tuple[int, str]]:
    """Wrong weight reads of one step: the whole embedding table, every expert, or both."""
    t = TEXT["stop4"]["readings"]
    table = s.w.input_embedding_bytes - s.w.embedding_row_bytes
    idle = s.w.bytes - read - table  # experts no token of this step is routed to
    moe = s.spec.moe
    readings = []
    if table > 0:
        readings.append((read + table, t["table"].format(row=s.w.embedding_row_bytes)))
    if idle > 0 and moe is not None:
        readings.append((read + idle, t["experts"].format(n=moe.num_experts, top_k=moe.top_k)))
    if table > 0 and idle > 0:
        readings.append((s.w.bytes, t["both"]))
    return readings


def stop4(s: Setup) -> Lesson:
    spec, n, t = s.spec, s.n, TEXT["stop4"]
    s.pool(n)  # no speed for what does not fit
    peaks = s.gpu.peak_tflops(s.w.dtype), s.gpu.attention_tflops(s.kv_dtype)
    st = _step(s, n, peak_tflops=peaks[0], attention_tflops=peaks[1])
    read = s.w.read_per_step(spec, 1)  # the Decode step time page's weights read, whole model
    w_gpu = st.weight_read_bytes  # one GPU's share
    readings = weight_readings(s, read)
    nums: dict[str, Any] = dict(
        w_gpu=w_gpu,
        w_gb=fmt_gb(w_gpu),
        read=read,
        tp=s.tp,
        tp_note=t["tp_note"].format(tp=s.tp, read=read) if s.tp > 1 else "",
        reads=weights_read_text(spec, s.w),
        bw=s.bw,
        limit=spec.max_context,
        each=" (each GPU)" if s.tp > 1 else "",
        on_each=" on each GPU" if s.tp > 1 else "",
        step=fmt_seconds(st.step_time_s),
        tps=st.tokens_per_s,
    )
    cross = st.crossover_context
    value: float
    if cross is not None and cross <= spec.max_context:
        probe = _probe(s, cross)
        growth = _probe(s, cross + 1).kv_read_bytes - probe.kv_read_bytes
        fixed = probe.kv_read_bytes - growth * cross
        nums.update(cross=cross, growth=growth, fixed=fixed)
        text = {**t, **t["crossover"]}
        text["solution"] += t["crossover"]["solve" if not fixed else "found"]
        slips: list[Slip] = [
            ((crossover_context(spec, wrong, 1, s.kv_dtype, tp=s.tp) or 0) / cross, why)
            for wrong, why in readings
        ]
        value, unit = cross, "tokens"
        nums["fixed_note"] = text["fixed_note"].format(fixed=fixed) if fixed else ""
    else:
        kv = st.kv_read_bytes + st.state_read_bytes
        tps = st.tokens_per_s
        nums.update(
            kv=kv,
            kv_gb=fmt_gb(kv),
            ms=st.memory_time_s * 1e3,
            share=st.kv_share,
            where=where_text(s.gpu, s.tp, 1),
            state=t["throughput"]["state"].format(st.state_read_bytes)
            if st.state_read_bytes
            else "",
        )
        text = {**t, **t["throughput"]}
        why_not = "no_crossover" if cross is None else "past_limit"
        nums["why_not"] = text[why_not].format(**nums)
        slips = [
            (_probe(s, n, weight_read_bytes=wrong).tokens_per_s / tps, why)
            for wrong, why in readings
        ]
        slips += [(s.bw * GB / w_gpu / tps, text["slip_cache"]), (GiB / GB, text["slip_gib"])]
        value, unit = tps, "tokens/s"
    givens = [
        ("Weights one decode step reads", t["weights_given"].format(**nums)),
        ("Memory bandwidth", f"{s.bw:,.0f} GB/s (1 GB = 10^9 B)"),
        fill(text["given"], dict(nums, n=n)),
    ]
    return s.lesson(text, nums, givens=givens, slips=slips, value=value, unit=unit)


def _fits(s: Setup) -> bool:
    try:
        s.pool(s.n)
    except ValueError:
        return False
    return True


def stop5(s: Setup) -> Lesson:
    spec, n, t = s.spec, s.n, TEXT["stop5"]
    peak = s.gpu.peak_tflops(s.w.dtype)
    if peak is None:
        no_peak = TEXT["errors"]["no_peak"]
        raise ValueError(no_peak.format(gpu=s.gpu.name, dtype=s.w.dtype.upper()))
    ridge = ridge_point(peak, s.bw)
    d1 = (
        decode_point(spec, s.w, batch=1, context=n, kv_dtype=s.kv_dtype, tp=s.tp)
        if _fits(s)
        else None
    )
    nums = dict(gpu=s.gpu.name, peak=peak, wd=s.w.dtype.upper(), bw=s.bw, ridge=ridge)
    if d1:
        nums.update(d1=d1.intensity, times=ridge / d1.intensity)
        text = {**t, **t["placed"]}
        nums["decode"] = text["decode"].format(n=n, **nums)
    else:
        text = {**t, **t["not_placed"]}
        nums["decode"] = ""
    givens = [
        (f"Dense peak ({nums['wd']} weights)", f"{peak:,.1f} TFLOPS (10^12 FLOP/s)"),
        ("Memory bandwidth", f"{s.bw:,.0f} GB/s (10^9 B/s)"),
    ]
    slips: list[Slip] = [(1000.0, t["slip_many"]), (0.001, t["slip_few"])]
    return s.lesson(
        text, nums, givens=givens, slips=slips, kv_hints=True, value=ridge, unit="FLOP/B"
    )
