"""Calibrate an engine profile from the user's own benchmark (issue 41, item 3:
``simulate --engine vllm@0.18.0 --calibrate-from FILE``): ``read_benchmark`` reads the measured
runs (aiconfigurator's silicon-sample CSV, ``vllm bench serve --save-result`` JSON, ``vllm bench
latency`` output), ``calibrate`` fits the profile's coefficients to them (Gauss-Newton on
log(predicted / measured), a ridge toward the profile). The formats' fields and the fit:
docs/calibration.md#calibrating-from-your-own-benchmark.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

from .engines import COEFFICIENTS, SHARE_BOUNDS, EngineProfile
from .floor import past_floor

# What a calibration fits: the profile's coefficients and a factor on the GPU's whole time
# (StepModel.gpu_time_factor: the user's GPUs, clocks, drivers and kernels against the
# profile's), each with a ridge toward the profile (log scale; a measurement weighs 1). One
# row moves the serving stack's time (a ridge of 0.005) to meet its TTFT, and the GPU's
# factor with the step's other coefficients (a ridge of 1 each) part of the way to its TPOT:
# one row moves the factor alone half of the way, n rows that agree n / (n + 1). One row
# cannot tell a cost that grows with the batch from one that does not. Calibrating each
# training setup from its lowest-concurrency row (bench/aic.py), TPOT's median error on the
# setups' other rows, on each half of the setups: 9.3% and 8.4% with stop 55's ridge (no
# factor; the step's fixed cost moved first) -> 7.2% and 7.0% (all rows 8.7% -> 7.1%; vLLM
# 8.2% -> 7.3%, SGLang 9.5% -> 6.9%, TensorRT-LLM 8.7% -> 6.8%; TTFT 21.8% -> 20.1%), and
# 6.3% under stop 56's refitted TensorRT-LLM and vLLM profiles, 6.2% with stop 57's pools,
# 6.1% under stop 58's refit and stop 59's (SWEEP_BAND). A row's
# own departure from its setup is about as large as the setup's from the profile: the factor
# moved all the way (a ridge of 0.1) met the row but did worse on the rest (all 7.3%; vLLM
# 9.0%, SGLang 11.3%, worse than no calibration). Chosen on the first half, checked on the
# second.
FITTED = (*COEFFICIENTS, "gpu_time_factor")
RIDGE = {
    **dict.fromkeys(COEFFICIENTS, 1.0),
    "api_overhead_s": 0.005,
    "gpu_time_factor": 1.0,
}
BOUNDS = {**SHARE_BOUNDS, "gpu_time_factor": (0.25, 4.0)}
SHARES = (
    *("bw_share", "kv_bw_share", "mfu", "attn_mfu", "expert_bw_share", "host_overlap"),
    "expert_mfu",
    "fp8_gemm_share",
)
FD_STEP = 0.05
ITERATIONS = 8  # at most; it stops once every residual is within CONVERGED, or no step helps
DAMPINGS = (0.0, 0.1, 1.0, 10.0)  # Levenberg-Marquardt's, each step tried at each
# Each quantity's weight: a mean TTFT carries the client's first wave and steps in small jumps
# as a coefficient moves, so it weighs a quarter (the profiles' own fit, over many rows, gives
# it half). Calibrating each training setup from its first row (bench/aic.py), TPOT's median
# error on the other rows was 15.5% with TTFT at full weight, 10.6% at half, 8.4-9.1% at a
# quarter (9.7% with no calibration).
QUANTITY_WEIGHT = {"TTFT": 0.25, "TPOT": 1.0, "latency": 1.0}
CONVERGED = 0.005  # |log(predicted / measured)|
MAX_ROWS = 64
# Calibrated from the lowest-concurrency row of each training setup, its other rows predicted:
# median |pred/meas - 1|, p90 and rows, per quantity (bench/calibration.py --aic printed these;
# why they miss issue 41's goal: docs/calibration.md#calibrating-from-your-own-benchmark). From
# stop 60 two setups whose first row is past the physical floor (``past_floor``) are not
# calibrated, and their other 4 rows are out of the count.
SWEEP_BAND: dict[str, tuple[float, float, int]] = {
    "TTFT": (0.191, 0.80, 939),
    "TPOT": (0.061, 0.21, 939),
}


# The client a row in aiconfigurator's silicon-sample columns was measured with (``silicon``
# rows). Its points come from InferenceMAX's client (AIC's README: --num-prompts $(( $CONC * 10 ))
# --max-concurrency $CONC --random-range-ratio 0.8; its benchmark_serving.py draws each length
# as np.random.randint(int(L * 0.8), L + 1)), and AIC's accuracy tooling replays each point so
# (request_count = concurrency x 10, random_range_ratio 0.8). Two engines' rows show otherwise:
# - SGLang's ran in lockstep, every request the stated length: their TTFT grows as half the
#   users' prefills (Qwen3-32B at TP 2, 1,024-token prompts: 0.84 s at 16 users, 4.36 s at 128,
#   about 64 prefills of 65 ms), which a loop out of step cannot give (vLLM's rows of the same
#   model and lengths: 0.69 s at 128 users);
# - TensorRT-LLM's keep one request more in flight than the batch holds, which waits for the
#   next to finish: TTFT is a prefill plus one request's decode time over the batch (Llama 3.1
#   8B at TP 1, 1,024-token prompts, 8 users: 191, 318 and 550 ms at 128, 256 and 512 output
#   tokens, +0.95 ms an output token = TPOT 7.4-7.9 ms / 8; at 16 users +0.45 ms, at 32 +0.26).
CLIENT_WAVES, CLIENT_SPREAD = 10, 0.8
LOCKSTEP_ENGINES = ("sglang",)
ONE_WAITING_ENGINES = ("trtllm",)


@dataclass(frozen=True, kw_only=True)
class BenchRow:
    """One measured run: a closed loop of ``users`` (or Poisson ``rate`` requests/s, or a static
    ``batch`` timed end to end) of ``isl`` + ``osl`` tokens, and what was measured. ``silicon``:
    a row in aiconfigurator's columns, measured by its client (CLIENT_WAVES)."""

    isl: int
    osl: int
    silicon: bool = False
    users: int | None = None
    rate: float | None = None
    batch: int | None = None  # vllm bench latency: one batch, all at once
    requests: int | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    latency_s: float | None = None  # a batch's end-to-end time

    def measured(self) -> dict[str, float]:
        ms = {"TTFT": self.ttft_ms, "TPOT": self.tpot_ms}
        out = {q: v / 1e3 for q, v in ms.items() if v}
        return out | ({"latency": self.latency_s} if self.latency_s else {})

    def describe(self) -> str:
        load = (
            f"batch {self.batch}"
            if self.batch
            else f"{self.users} users"
            if self.users
            else f"{self.rate:g} req/s"
        )
        return f"{self.isl:,} + {self.osl:,} tokens, {load}"


def _number(v, what: str) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: expected a number, got {str(v)[:30]!r}") from None


def _pos_int(v, what: str) -> int:
    x = int(round(_number(v, what)))
    if x < 1:
        raise ValueError(f"{what}: must be at least 1, got {x}")
    return x


def _pos_float(v, what: str) -> float | None:
    if v in (None, ""):
        return None
    x = _number(v, what)
    if not math.isfinite(x) or x <= 0:
        raise ValueError(f"{what}: must be above 0, got {v!r}")
    return x


def _from_csv(text: str) -> list[BenchRow]:
    rows = []
    for i, r in enumerate(csv.DictReader(io.StringIO(text)), 1):
        where = f"row {i}"
        if (r.get("mode") or "agg").strip().lower() not in ("", "agg"):
            raise ValueError(
                f"{where}: mode {str(r.get('mode'))[:20]!r}: a calibration fits one engine "
                "serving the whole loop, so give aggregated runs (mode agg); a disaggregated "
                "layout is timed with `disagg` under the engine's profile"
            )
        ttft = _pos_float(r.get("silicon_ttft_ms"), f"{where} silicon_ttft_ms")
        tpot = _pos_float(r.get("silicon_tpot_ms"), f"{where} silicon_tpot_ms")
        if ttft is None and tpot is None:
            raise ValueError(f"{where}: no silicon_ttft_ms or silicon_tpot_ms")
        isl, osl, users = (_pos_int(r.get(k), f"{where} {k}") for k in ("isl", "osl", "batch_size"))
        # the client's concurrency where the source names it: some of aiconfigurator's rows
        # give batch_size per attention-DP rank (bench/aic.py, ``per_rank``)
        stated = re.search(r"silicon_concurrency=(\d+)", r.get("silicon_data_source") or "")
        if stated and int(stated.group(1)) > 0:
            users = int(stated.group(1))
        rows.append(
            BenchRow(isl=isl, osl=osl, users=users, ttft_ms=ttft, tpot_ms=tpot, silicon=True)
        )
    return rows


def _from_serve_json(objs: list[dict]) -> list[BenchRow]:
    rows = []
    for i, o in enumerate(objs, 1):
        where = f"result {i}"
        done = _pos_int(o.get("completed"), f"{where} completed")
        isl = _pos_int(o.get("total_input_tokens", 0) / done, f"{where} input tokens per request")
        osl = _pos_int(o.get("total_output_tokens", 0) / done, f"{where} output tokens per request")
        users = o.get("max_concurrency")
        rate = o.get("request_rate")
        rate = None if rate in (None, "inf", float("inf")) else _pos_float(rate, f"{where} rate")
        rows.append(
            BenchRow(
                isl=isl,
                osl=osl,
                users=_pos_int(users, f"{where} max_concurrency") if users else None,
                rate=None if users else rate,
                batch=None if users or rate else done,
                requests=done,
                ttft_ms=_pos_float(o.get("mean_ttft_ms"), f"{where} mean_ttft_ms"),
                tpot_ms=_pos_float(o.get("mean_tpot_ms"), f"{where} mean_tpot_ms"),
            )
        )
    return rows


_LATENCY_ARGS = ("input_len", "output_len", "batch_size")
_ARG = r"['\"]?{}['\"]?\s*[=:]\s*(\d+)"


def _from_latency_text(text: str) -> list[BenchRow]:
    m = re.search(r"Avg latency:\s*([\d.]+)\s*seconds", text)
    if not m:
        raise ValueError("no 'Avg latency: X seconds' line")
    found = {}
    for k in _LATENCY_ARGS:
        a = re.search(_ARG.format(k), text)
        if not a:
            raise ValueError(
                f"a vllm bench latency output needs its arguments' {k} (the printed "
                "Namespace(...) line)"
            )
        found[k] = int(a.group(1))
    isl, osl, batch = (_pos_int(found[k], k) for k in _LATENCY_ARGS)
    return [
        BenchRow(isl=isl, osl=osl, batch=batch, latency_s=_pos_float(m.group(1), "Avg latency"))
    ]


def read_benchmark(text: str) -> list[BenchRow]:
    """The measured rows of a benchmark file in any of the three formats (ValueError naming
    what is missing)."""
    t = text.strip()
    if not t:
        raise ValueError("the benchmark file is empty")
    rows: list[BenchRow]
    if t[0] in "[{":
        try:
            data = json.loads(t)
        except json.JSONDecodeError:
            data = [json.loads(line) for line in t.splitlines() if line.strip()]
        objs = data if isinstance(data, list) else [data]
        if objs and all(isinstance(o, dict) and "avg_latency" in o for o in objs):
            # `vllm bench latency --output-json`, one object a run (a list or one per line)
            rows = [
                row
                for o in objs
                for row in _from_latency_text(
                    f"Avg latency: {o['avg_latency']} seconds "
                    + " ".join(f"{k}={o[k]}" for k in _LATENCY_ARGS if k in o)
                )
            ]
        else:
            rows = _from_serve_json(objs)
    elif "Avg latency" in t:
        rows = _from_latency_text(t)
    elif "silicon_tpot_ms" in t.splitlines()[0] or "silicon_ttft_ms" in t.splitlines()[0]:
        rows = _from_csv(t)
    else:
        raise ValueError(
            "not a benchmark kvcalc reads: give rows in aiconfigurator's silicon-sample columns "
            "(isl, osl, batch_size, silicon_ttft_ms, silicon_tpot_ms), the JSON of `vllm bench "
            "serve --save-result`, or `vllm bench latency` output"
        )
    if not rows:
        raise ValueError("the benchmark file has no rows")
    if len(rows) > MAX_ROWS:
        raise ValueError(f"at most {MAX_ROWS} rows are fitted; the file has {len(rows)}")
    return rows


@dataclass(frozen=True, kw_only=True)
class Calibration:
    """The profile fitted to the user's rows: what changed, and how far off it is on them."""

    base: EngineProfile
    profile: EngineProfile
    rows: tuple[BenchRow, ...]
    # per row and quantity: (measured s, predicted before, predicted after)
    fit: tuple[dict[str, tuple[float, float, float]], ...]
    notes: tuple[str, ...] = field(default=())

    def changed(self) -> dict[str, tuple[float, float]]:
        return {
            c: (getattr(self.base, c), getattr(self.profile, c))
            for c in FITTED
            if abs(getattr(self.profile, c) / getattr(self.base, c) - 1) > 0.005
        }

    def residuals(self, which: int = 2) -> list[float]:
        return [abs(v[which] / v[0] - 1) for f in self.fit for v in f.values()]

    def band_text(self) -> str:
        res = self.residuals()
        worst = max(res) if res else 0.0
        text = (
            f"{self.profile.label} profile calibrated on your {len(self.rows)} "
            f"row{'' if len(self.rows) == 1 else 's'}: within ±{worst:.1%} on them"
        )
        if SWEEP_BAND:
            parts = [
                f"{q} ±{med:.0%} (median), ±{p90:.0%} (p90) over {n} runs"
                for q, (med, p90, n) in SWEEP_BAND.items()
            ]
            text += (
                "; the rest of a sweep calibrated so (one row of each training setup, its "
                "other rows predicted): " + ", ".join(parts)
            )
        return text

    def report(self) -> list[str]:
        lines = [f"calibrated from {len(self.rows)} measured row(s) of your benchmark:"]
        ch = self.changed()
        if not ch:
            lines.append("  no coefficient changed: the profile already fits these rows")
        for c, (a, b) in ch.items():
            if c == "gpu_time_factor":
                how = "slower" if b > a else "faster"
                lines.append(
                    f"  gpu_time_factor: {a:.4g} -> {b:.4g} (the GPU's time: your run's steps "
                    f"{abs(b / a - 1):.1%} {how} than the profile's)"
                )
            else:
                lines.append(f"  {c}: {a:.4g} -> {b:.4g}")
        for r, f in zip(self.rows, self.fit):
            parts = [
                f"{q} measured {m * 1e3:,.1f} ms, before {b0 / m:.2f}x, after {b1 / m:.2f}x"
                if q != "latency"
                else f"latency measured {m:,.3f} s, before {b0 / m:.2f}x, after {b1 / m:.2f}x"
                for q, (m, b0, b1) in f.items()
            ]
            lines.append(f"  {r.describe()}: " + "; ".join(parts))
        if self.residuals() and max(self.residuals()) > 0.02:
            lines.append(
                "  why not all the way: each coefficient moves part of the way toward your rows "
                "(a ridge toward the fitted profile). One run is about as far from the rest of its "
                "own sweep as a sweep is from the profile, so meeting one row exactly predicts the "
                "others worse; more rows move it further"
            )
        lines.append(f"  band: {self.band_text()}")
        return lines + [f"  note: {n}" for n in self.notes]

    def to_dict(self) -> dict:
        return dict(
            profile=self.profile.key,
            coefficients={
                **self.profile.coefficients(),
                "gpu_time_factor": self.profile.gpu_time_factor,
            },
            changed={c: list(v) for c, v in self.changed().items()},
            rows=len(self.rows),
            residual_max=max(self.residuals()) if self.fit else None,
            band=self.band_text(),
        )


def _bounded_step(J, r, ridge, theta, theta0, np, damping: float = 0.0):
    """One damped Gauss-Newton step (a ridge toward ``theta0``; ``damping``: Levenberg-
    Marquardt's, on the step itself), a share at its bound that the step would push past it
    held there and the step solved again without it."""
    held: set[int] = set()
    bounds = [BOUNDS.get(c) for c in FITTED]
    while True:
        Jm = J.copy()
        Jm[:, sorted(held)] = 0.0
        k = len(theta)
        A = np.vstack([Jm, np.diag(ridge), math.sqrt(damping) * np.eye(k)])
        b = np.concatenate([-r, -ridge * (theta - theta0), np.zeros(k)])
        step = np.clip(np.linalg.lstsq(A, b, rcond=None)[0], -1.0, 1.0)
        step[sorted(held)] = 0.0
        out = {
            j
            for j, bd in enumerate(bounds)
            if bd is not None
            and j not in held
            and (
                (theta[j] >= math.log(bd[1]) - 1e-12 and step[j] > 0)
                or (theta[j] <= math.log(bd[0]) + 1e-12 and step[j] < 0)
            )
        }
        if not out:
            return step
        held |= out


def calibrate(base: EngineProfile, rows: list[BenchRow], predict) -> Calibration:
    """Fit ``base``'s coefficients to ``rows``. ``predict(profile, row)`` returns the predicted
    quantities of ``row.measured()`` (seconds) under a profile, or raises ValueError. A row
    measured faster than its floor (kvcalc.perf.floor.past_floor) is left out and said so;
    with none left, ValueError."""
    import numpy as np

    past = {i: why for i, r in enumerate(rows) if (why := past_floor(base, r, predict))}
    if past and len(past) == len(rows):
        raise ValueError(
            "nothing to calibrate from: "
            + "; ".join(past.values())
            + (" (each of your rows)" if len(rows) > 1 else "")
        )
    rows = [r for i, r in enumerate(rows) if i not in past]

    keys = [(i, q) for i, r in enumerate(rows) for q in r.measured()]
    meas = np.array([rows[i].measured()[q] for i, q in keys])
    weight = np.array([QUANTITY_WEIGHT[q] for _, q in keys])
    theta0 = np.log([getattr(base, c) for c in FITTED])

    def at(theta) -> EngineProfile:
        coefs: dict[str, Any] = {c: float(math.exp(t)) for c, t in zip(FITTED, theta)}
        return replace(base, **coefs)

    def run(theta) -> np.ndarray:
        p = at(theta)
        pred = {i: predict(p, rows[i]) for i in dict.fromkeys(i for i, _ in keys)}
        return np.array([pred[i][q] for i, q in keys])

    first = run(theta0)
    theta = theta0.copy()
    ridge = np.array([RIDGE[c] for c in FITTED])

    def cost(th, pred) -> float:  # what the fit lowers: the residuals and the ridge
        res = weight * np.log(pred / meas)
        return float(np.sum(res**2) + np.sum((ridge * (th - theta0)) ** 2))

    def bounded(th):  # a share within its physical range
        th = th.copy()
        for j, c in enumerate(FITTED):
            if c in BOUNDS:
                lo, hi = BOUNDS[c]
                th[j] = min(max(th[j], math.log(lo)), math.log(hi))
        return th

    moving = list(range(len(FITTED)))  # the coefficients the rows depend on
    pred = first
    for it in range(ITERATIONS):
        r = np.log(pred / meas)
        if np.max(np.abs(r)) < CONVERGED:
            break
        J = np.zeros((len(keys), len(FITTED)))
        for j in moving:
            c = FITTED[j]
            th = theta.copy()
            h = -FD_STEP if c in SHARES and th[j] + FD_STEP > 0 else FD_STEP  # a share <= 1
            th[j] += h
            J[:, j] = (np.log(run(th) / meas) - r) / h
        if not it:  # a coefficient these rows do not depend on is not worked out again
            moving = [j for j in moving if np.any(np.abs(J[:, j]) > 1e-9)]
        # The simulated loop's times move in small jumps as a coefficient moves (which requests
        # share a step changes), so the linearisation can overshoot: each step is tried at
        # several dampings and the best kept, and the fit stops when none lowers the cost.
        best = (cost(theta, pred), theta, pred)
        for damping in DAMPINGS:
            step = _bounded_step(weight[:, None] * J, weight * r, ridge, theta, theta0, np, damping)
            th = bounded(theta + step)
            got = run(th)
            if cost(th, got) < best[0]:
                best = (cost(th, got), th, got)
        if best[1] is theta:
            break
        _, theta, pred = best
    last = pred
    fitted = at(theta)
    fit = tuple(
        {
            q: (float(meas[n]), float(first[n]), float(last[n]))
            for n, (k, q) in enumerate(keys)
            if k == i
        }
        for i in range(len(rows))
    )
    notes = tuple(f"left out, {why}" for why in past.values()) + loop_notes(rows, base.engine)
    return Calibration(base=base, profile=fitted, rows=tuple(rows), fit=fit, notes=notes)


def loop_notes(rows: list[BenchRow], engine: str) -> tuple[str, ...]:
    """What ``bench_row_loop`` assumed of the clients that measured ``rows``, said once per
    kind of row."""
    out = []
    if any(r.silicon for r in rows):
        how = {
            "sglang": "every request the stated length (SGLang's rows ran in lockstep)",
            "trtllm": "one request more in flight than the batch (as TensorRT-LLM's rows ran)",
        }.get(engine, "")
        out.append(
            f"rows in aiconfigurator's columns are simulated as its client ran them: "
            f"{CLIENT_WAVES} x the users' requests, lengths uniform from {CLIENT_SPREAD:.0%} to "
            f"100% of the stated ones{'; ' + how if how else ''}; TTFT is the mean over every "
            "request"
        )
    if any(r.users and not r.silicon for r in rows):
        out.append(
            "vllm bench serve results are simulated as a closed loop of their users over their "
            "completed requests, every request the stated length; TTFT is the mean over every "
            "request"
        )
    return tuple(out)


@dataclass(frozen=True)
class RowLoop:
    """How one measured row is simulated: its workload, and the engine's batch cap where the
    client kept more requests in flight than the engine ran (None: the profile's)."""

    workload: Any  # kvcalc.perf.sim.Workload
    max_num_seqs: int | None = None


def bench_row_loop(row: BenchRow, engine: str, disaggregated: bool = False) -> RowLoop:
    """The simulator's loop for one measured row on ``engine`` (vllm, sglang, trtllm): a
    silicon row as its client ran (CLIENT_WAVES x users requests of lengths uniform on
    [int(0.8 L), L], SGLang's in lockstep at L, TensorRT-LLM's one request more than the batch);
    a ``vllm bench serve`` row's closed loop of its users over its completed requests (the
    random dataset's default: every request the stated length), its Poisson rate, or a static
    batch all at once. ``disaggregated``: the row's engines are a disaggregated deployment's,
    whose batch is not the client's concurrency (no request more for TensorRT-LLM)."""
    from .sim import Workload, fixed, uniform

    p, o = fixed(row.isl, "prompt tokens"), fixed(row.osl, "output tokens")
    if row.batch:
        return RowLoop(Workload(requests=row.batch, prompt=p, output=o, rate=math.inf))
    if not row.users:
        return RowLoop(Workload(requests=row.requests or 8, prompt=p, output=o, rate=row.rate))
    if not row.silicon:
        n = row.requests or CLIENT_WAVES * row.users
        return RowLoop(Workload(requests=n, prompt=p, output=o, users=row.users))
    if engine not in LOCKSTEP_ENGINES:
        spread = [(int(n * CLIENT_SPREAD), n) for n in (row.isl, row.osl)]
        (plo, phi), (olo, ohi) = ((max(1, lo), hi) for lo, hi in spread)
        p = uniform(plo, phi, "prompt tokens") if plo < phi else p
        o = uniform(olo, ohi, "output tokens") if olo < ohi else o
    more = engine in ONE_WAITING_ENGINES and not disaggregated
    wl = Workload(requests=CLIENT_WAVES * row.users, prompt=p, output=o, users=row.users + more)
    return RowLoop(wl, row.users if more else None)


def predict_row(dep, profile: EngineProfile, row: BenchRow, max_steps: int) -> dict[str, float]:
    """One measured row simulated on ``dep`` (a Deployment with its GPU and weights) under
    ``profile`` in its client's loop (``bench_row_loop``): mean TTFT (over every request, as a
    client reports it) and TPOT, or a static batch's latency (no serving
    stack before it), in seconds. ValueError when it would take more than ``max_steps`` steps."""
    from dataclasses import replace as _replace

    from .sim import Speed, estimated_steps, setup, simulate

    model = profile.step_model()
    if row.batch:  # vllm bench latency calls the engine directly
        model = _replace(model, api_overhead_s=0.0)
    loop = bench_row_loop(row, profile.engine)
    wl = loop.workload
    dep, pool = profile.serve(dep.but(max_num_seqs=loop.max_num_seqs))
    gpu, w = dep.gpu, dep.weights
    speed = Speed.of(
        gpu, w.dtype, model, attention_peak_tflops=gpu.attention_tflops(dep.cache.kv_dtype)
    )
    s = setup(dep, wl.longest, speed, kv_pool_bytes=pool)
    if estimated_steps(s, wl) > max_steps:
        raise ValueError(
            f"{row.describe()} would take more than {max_steps:,} engine steps to simulate; "
            "give shorter runs or fewer users"
        )
    r = simulate(s, wl, series=False)
    return {"TTFT": r.ttft_mean_s, "TPOT": r.tpot_mean_s, "latency": r.e2el_mean_s}
