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
(``precision``, ``gemm_quant_mode``, ``moe_quant_mode``), the lengths and the users. ``before``
is today's model as it stood before issue 41 (one pooled calibrated estimate, every GPU of the
layout as tensor parallel); ``after`` adds ``--engine backend@version``.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kvcalc.cli import commands as cli  # noqa: E402

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
GPUS = {"h100_sxm": "h100-sxm-80gb", "h200_sxm": "h200-141gb", "b200_sxm": "b200"}
ENGINES = {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm"}

# How many requests a row's closed loop serves: REQUEST_WAVES x its users (at least
# MIN_REQUESTS). AIC's collector does not state its count; three waves let the loop desynchronise
# past the first one, whose prompts all arrive at once.
REQUEST_WAVES = 3
MIN_REQUESTS = 8


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

    @property
    def gpus(self) -> int:
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


def load_rows(path: Path = CSV) -> list[Row]:
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            tp = _int(r["tp_size"])
            moe_tp, moe_ep = _int(r["moe_tp_size"]), _int(r["moe_ep_size"])
            adp = _int(r["attention_dp_size"], 0)
            if not adp:  # not stated: the attention side spans every GPU the MoE side uses
                adp = max(1, (moe_tp * moe_ep) // tp)
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
                    users=int(r["batch_size"]),
                    tp=tp,
                    attention_dp=adp,
                    moe_tp=moe_tp,
                    moe_ep=moe_ep,
                    ttft_ms=float(r["silicon_ttft_ms"]),
                    tpot_ms=float(r["silicon_tpot_ms"]),
                )
            )
    return rows


def weight_flags(r: Row, *, before: bool = False) -> list[str]:
    """The weights' format as the row states it: FP8 GEMMs (per-tensor or block scales) as FP8,
    int4 weight-only experts (Kimi-K2.5's compressed-tensors W4A16) as INT4 experts beside
    16-bit attention, no precision as the checkpoint's 16 bits."""
    if r.precision == "fp8":
        return ["--weight-dtype", "fp8"]
    if r.precision == "int4" and before:  # no expert format of its own before issue 41
        return ["--weight-dtype", "int4"]
    if r.precision == "int4":
        return ["--weight-dtype", "bf16", "--expert-weight-dtype", "int4"]
    return ["--weight-dtype", "bf16"]


def row_argv(r: Row, *, layout: bool = True) -> list[str]:
    """``simulate`` for the row, from its own columns only. ``layout`` False: every GPU as
    tensor parallel (what kvcalc could state before issue 41)."""
    argv = [
        "simulate",
        "--config",
        str(AIC / "configs" / CONFIGS[r.model]),
        "--gpu",
        GPUS[r.gpu],
        "--users",
        str(r.users),
        "--requests",
        str(max(MIN_REQUESTS, REQUEST_WAVES * r.users)),
        "--prompt-tokens",
        str(r.isl),
        "--output-tokens",
        str(r.osl),
        *weight_flags(r, before=not layout),
        "--json",
    ]
    if layout:
        argv += ["--tp", str(r.tp)]
        if r.attention_dp > 1:
            argv += ["--attention-dp", str(r.attention_dp)]
        if r.moe_ep > 1:
            argv += ["--ep", str(r.moe_ep)]
    else:
        argv += ["--tp", str(r.gpus)]
    return argv


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
    ttft = j["ttft_mean_steady_s"] if j.get("ttft_mean_steady_s") is not None else j["ttft_mean_s"]
    return ttft * 1e3, j["tpot_mean_s"] * 1e3


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
)
SHARES = ("bw_share", "kv_bw_share", "mfu", "attn_mfu")  # at most 1
PRIOR_WEIGHT = 0.3  # per coefficient, toward START (log scale): a row weighs 1
VERSION_WEIGHT = 3.0  # per coefficient, a version's departure from its engine's (log scale)
HUBER = 0.25  # residuals beyond 25% (log scale) weigh as |r| (robust to a few odd runs)
FD_STEP = 0.05  # finite differences in log(coefficient)
ITERATIONS = 4


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
    ttft = j["ttft_mean_steady_s"] if j.get("ttft_mean_steady_s") is not None else j["ttft_mean_s"]
    return ttft * 1e3, j["tpot_mean_s"] * 1e3


def _relevant(r: Row, c: str) -> bool:
    if c == "allreduce_latency_s":
        return r.gpus > 1
    if c == "ep_latency_s":
        return r.moe_ep > 1
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


def solve(rows: list[Row], res: dict, jac: dict, thetas: dict[str, np.ndarray], engine: str):
    """One damped Gauss-Newton step for one engine: its shared coefficients and each version's
    departure from them (ridge VERSION_WEIGHT), a weak prior toward START, Huber weights;
    returns the new log-coefficients of each of its versions."""
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
    A, b = np.array(A_rows), np.array(b_rows)
    delta = np.linalg.lstsq(A, b, rcond=None)[0]
    delta = np.clip(delta, -0.7, 0.7)  # a trust region: the model is not linear far away
    out = {}
    for vi, key in enumerate(keys):
        th = cur[vi] + delta[:k] + delta[k * (1 + vi) : k * (2 + vi)]
        for i, c in enumerate(COEFS):  # a share is at most 1
            if c in SHARES:
                th[i] = min(th[i], 0.0)
        out[key] = th
    return out


def initial_thetas(rows: list[Row]) -> dict[str, np.ndarray]:
    start = np.log([START[c] for c in COEFS])
    return {family(r): start.copy() for r in rows}


def fit(rows: list[Row], thetas=None, iterations: int = ITERATIONS, workers: int = 2, log=print):
    """The engine profiles fitted on ``rows``: ``iterations`` Gauss-Newton steps from the pooled
    estimate (or ``thetas``). Returns the log-coefficients per profile and the last
    linearisation (residuals and derivatives at the point before the last step)."""
    thetas = dict(thetas or initial_thetas(rows))
    res = jac = None
    for it in range(iterations):
        res, jac = linearise(rows, thetas, workers)
        cost = sum(float(np.sum(v**2)) for v in res.values())
        log(f"iteration {it}: {len(res)} rows, sum of squared log errors {cost:.2f}")
        for engine in sorted({r.engine for r in rows}):
            thetas.update(solve(rows, res, jac, thetas, engine))
    return thetas, res, jac


def coefs_of(theta) -> dict[str, float]:
    return {c: float(f"{math.exp(t):.3g}") for c, t in zip(COEFS, theta)}


# -- validation: leave one model / one GPU out; calibrate from one row --------------------------


def _nearest(key: str, trained: list[str]) -> str:
    engine, version = key.split("@")
    same = [k for k in trained if k.startswith(engine + "@")]
    want = eng.version_key(version)
    return min(same, key=lambda k: eng.release_distance(eng.version_key(k.split("@")[1]), want))


def refit_without(rows, res, jac, thetas, held: set[str]):
    """The profiles refitted without the rows in ``held`` (ids): one Gauss-Newton step from the
    full fit on the others' linearisation (residuals and derivatives at the fitted point); a
    version whose rows are all held out takes its engine's nearest trained version, as a user's
    unfitted version does."""
    train = [r for r in rows if r.id not in held]
    out = dict(thetas)
    for engine in sorted({r.engine for r in train}):
        out.update(solve(train, res, jac, thetas, engine))
    trained = sorted({family(r) for r in train})
    for key in {family(r) for r in rows} - set(trained):
        engine = key.split("@")[0]
        if any(k.startswith(engine + "@") for k in trained):
            out[key] = out[_nearest(key, trained)]
        else:  # no run of that engine left: the pooled estimate's coefficients (START)
            out[key] = np.log([START[c] for c in COEFS])
    return out


def leave_out(rows, res, jac, thetas, by: str, workers: int = 2) -> dict[str, tuple]:
    """Each row predicted by the profiles fitted without its model (``by`` 'model') or its GPU
    ('gpu'), through the command line: {row id: (TTFT ms, TPOT ms) or refusal}."""
    groups = sorted({getattr(r, by) for r in rows})
    preds = {}
    for g in groups:
        held = {r.id for r in rows if getattr(r, by) == g}
        th = refit_without(rows, res, jac, thetas, held)
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
        ttft = (
            j["ttft_mean_steady_s"] if j.get("ttft_mean_steady_s") is not None else j["ttft_mean_s"]
        )
        return {"TTFT": ttft, "TPOT": j["tpot_mean_s"]}

    try:
        cal_ = calibrate(base, [bench_row], pred)
    except (ValueError, SystemExit) as exc:
        return {r.id: str(exc)[:100] for r in group}, None
    coefs = cal_.profile.coefficients()
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
        lines.append(f'        _p("{engine}", "{version}", {counts.get(key, 0)}, {args}),')
    return lines


def main(fit_first: bool = False, workers: int = 2, quick: bool = False) -> None:
    rows = load_rows()
    if quick:
        rows = rows[::8]
    if fit_first:
        thetas, _, _ = fit(rows, workers=workers)
        print("### fitted profiles (kvcalc/perf/engines.py, PROFILES)\n")
        print("\n".join(profiles_block(thetas, rows)))
        print()
    else:
        thetas = committed_thetas(rows)
    with ProcessPoolExecutor(workers) as ex:
        before = dict(zip([r.id for r in rows], ex.map(_before_job, rows, chunksize=8)))
    after = evaluate_rows(rows, thetas, workers)
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
    res, jac = linearise(rows, thetas, workers)
    lomo = leave_out(rows, res, jac, thetas, "model", workers)
    logo = leave_out(rows, res, jac, thetas, "gpu", workers)
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
    preds, fits = calibrate_one_row(rows, thetas, workers)
    sub = [r for r in rows if r.id in preds]
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
