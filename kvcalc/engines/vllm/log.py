"""A reader for a pasted vLLM start-up log, and each logged line checked against predict()."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from ...cache.deployment import Deployment
from ...core.model import ModelSpec
from ...core.speculative import speculation_from, with_speculation
from ...core.units import GiB
from .capacity import VllmPrediction, predict
from .facts import Facts, fact, resolve_version
from .settings import mamba_cache_mode_of

# -- reading a start-up log ---------------------------------------------------------------------

_PATTERNS = {
    "version": re.compile(r"LLM engine \(v([0-9][0-9a-z.+-]*)\)"),
    "model": re.compile(r"model='([^']+)'"),
    "max_model_len": re.compile(r"max_(?:seq|model)_len(?:=|': )([0-9_,]+)"),
    "tp": re.compile(r"tensor_parallel_size(?:=|': )([0-9]+)"),
    "pp": re.compile(r"pipeline_parallel_size(?:=|': )([0-9]+)"),
    "kv_cache_dtype": re.compile(r"kv_cache_dtype(?:=|': ')([a-z0-9_]+)"),
    "block_size": re.compile(r"\bblock_size(?:=|': )([0-9]+)"),
    "max_num_batched_tokens": re.compile(r"max_num_batched_tokens(?:=|': )([0-9]+)"),
    "enable_prefix_caching": re.compile(r"enable_prefix_caching(?:=|': )(True|False)"),
    "mamba_cache_dtype": re.compile(r"'mamba_cache_dtype': '([a-z0-9]+)'"),
    "mamba_ssm_cache_dtype": re.compile(r"mamba_ssm_cache_dtype(?:': '| to ')([a-z0-9]+)'"),
    "mamba_cache_mode": re.compile(r"Mamba cache mode is set to '([a-z]+)'"),
    # speculative decoding: the engine's config line (SpeculativeConfig(method='mtp', ...,
    # num_spec_tokens=3)) or the non-default args ({'method': 'mtp', 'num_speculative_tokens': 3})
    "speculative_method": re.compile(
        r"speculative_config(?:=SpeculativeConfig\(|': \{)'?method(?:=|': )'([a-z0-9_]+)'"
    ),
    "speculative_tokens": re.compile(r"num_spec(?:ulative)?_tokens(?:=|': )([0-9]+)"),
    "available_gib": re.compile(r"Available KV cache memory:\s*([0-9.]+)\s*GiB"),
    # vllm-ascend (worker.py / worker_v1.py, up to early 2026): exact bytes.
    "available_bytes": re.compile(r"Available memory:\s*([0-9]+),\s*total memory:\s*[0-9]+"),
    # "GPU" on CUDA; from v0.30.0 the device type ("NPU", "XPU", ...), "+ host" with HiSparse.
    "tokens": re.compile(r"\b[A-Z]{2,6}(?: \+ host)?\s+KV cache size:\s*([0-9,]+)\s*tokens"),
    "concurrency": re.compile(
        r"Maximum concurrency for\s+([0-9,]+)\s+tokens per request:\s*([0-9.]+)\s*x"
    ),
    "raised_block": re.compile(r"Setting attention block size to\s+([0-9]+)\s+tokens"),
    # an MLA model's kernel block: "Forcing kv cache block size to 64 for FlashMLA backend."
    # (to v0.17.x), "Setting kv cache block size to 64 for FLASHMLA backend(s)." (v0.18.0 on)
    "mla_block": re.compile(r"(?:Forcing|Setting) kv cache block size to\s+([0-9]+)\s+for"),
}
MAX_LOG_BYTES = 5_000_000
# Bounds of the numbers a real start-up log prints, (whole, at most); past them a pasted log is
# refused by line. Tokens, lengths, sizes: at most 10**12, far above any real engine's.
_LOG_BOUNDS = {
    "available_gib": (False, 2**20),  # 1 PiB: predict() takes at most 2**50 bytes
    "available_bytes": (True, 2**50),
    "concurrency": (False, 1e12),
}
_LOG_LINES = {
    "available_gib": "Available KV cache memory",
    "tokens": "GPU KV cache size",
    "concurrency": "Maximum concurrency",
    "concurrency_len": "Maximum concurrency",
    "raised_block": "Setting attention block size",
    "available_bytes": "Available memory",
}
_LOG_TEXT = (
    "version",
    "speculative_method",
    "model",
    "kv_cache_dtype",
    "mamba_cache_dtype",
    "mamba_ssm_cache_dtype",
    "mamba_cache_mode",
)


def _log_number(key: str, text: str) -> int | float:
    """One number of the log, or ValueError naming the line: a pasted log may hold '1.2.3', a
    400-digit value (float() gives inf) or more digits than int() converts."""
    whole, maximum = _LOG_BOUNDS.get(key, (True, 10**12))
    name = _LOG_LINES.get(key, key)
    shown = text if len(text) <= 40 else text[:40] + "..."
    try:
        value = int(text.replace(",", "").replace("_", "")) if whole else float(text)
    except ValueError:
        value = None
    if (
        value is None
        or (isinstance(value, float) and not math.isfinite(value))
        or not 0 <= value <= maximum
    ):  # an int is compared as an int: float(10**400) raises
        what = "a finite size" if key == "available_gib" else "a plausible number"
        unit = " GiB" if key == "available_gib" else ""
        raise ValueError(
            f"the log's '{name}' value {shown!r} is not {what} of at most "
            f"{maximum:,.0f}{unit}; paste the line as vLLM printed it"
        )
    return value


def parse_log(text: str) -> dict:
    """Settings and capacity lines found in a vLLM start-up log (the last of each). The
    memory line is vLLM's "Available KV cache memory: X GiB" (rounded) or vllm-ascend's
    "Available memory: N, total memory: M" (exact bytes, then ``available_bytes``)."""
    if len(text) > MAX_LOG_BYTES:
        raise ValueError(
            f"the log is larger than {MAX_LOG_BYTES:,} bytes; paste the start-up part only"
        )
    out: dict = {}
    for key, pat in _PATTERNS.items():
        found = pat.findall(text)
        if not found:
            continue
        val = found[-1]
        if key == "concurrency":
            out["concurrency_len"] = _log_number("concurrency_len", val[0])
            out["concurrency"] = _log_number(key, val[1])
        elif key in _LOG_TEXT:
            out[key] = val
        elif key == "enable_prefix_caching":
            out[key] = val == "True"
        elif key in ("available_gib", "available_bytes"):  # one line per rank with TP/PP
            out[f"{key}_all"] = [_log_number(key, v) for v in found]
            out[key] = out[f"{key}_all"][-1]
        else:
            out[key] = _log_number(key, val)
    if "available_gib" not in out and "available_bytes" not in out:
        raise ValueError(
            "no 'Available KV cache memory: X GiB' line (nor vllm-ascend's "
            "'Available memory: N, total memory: M') in this log; paste the lines "
            "vLLM prints while it starts"
        )
    return out


@dataclass(frozen=True)
class LogLine:
    name: str
    logged: float
    predicted: float
    low: float  # the range of predictions the rounded GiB line allows
    high: float
    agrees: bool
    why: str

    def to_dict(self) -> dict:
        return asdict(self)


_KV_FROM_LOG = {"auto": "bf16", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}


# predict()'s keywords besides the Deployment's fields (max_model_len is its argument)
_EXTRAS = ("architecture", "mm_batch_tokens", "mla_block_rule")


def log_settings(log: dict) -> dict:
    """The settings a parsed log states, by the Deployment's field names (and max_model_len,
    mla_block_rule): vLLM's defaults otherwise; block size 128 on Ascend, vllm-ascend's
    refresh_block_size."""
    ascend = "available_bytes" in log and "available_gib" not in log
    kv = log.get("kv_cache_dtype", "auto")
    kw = dict(
        max_model_len=log.get("max_model_len") or log.get("concurrency_len"),
        tp=log.get("tp", 1),
        pp=log.get("pp", 1),
        block_size=log.get("block_size", 128 if ascend else 16),
        kv_dtype=_KV_FROM_LOG.get(kv, kv),
        max_num_batched_tokens=log.get("max_num_batched_tokens"),
        version=log.get("version"),
    )
    if "mla_block" in log:  # the block vLLM chose for its MLA kernel, as logged
        kw["block_size"] = log["mla_block"]
        kw["mla_block_rule"] = False
    for key in ("enable_prefix_caching", "mamba_cache_dtype", "mamba_ssm_cache_dtype"):
        if key in log:
            kw[key] = log[key]
    if log.get("mamba_cache_mode") in ("none", "align", "all"):
        kw["mamba_cache_mode"] = log["mamba_cache_mode"]
    return kw


def _log_bounds(log: dict) -> tuple[int, int, int]:
    """(middle, lowest, highest) available bytes the log's memory line allows: exact on Ascend,
    otherwise the 0.01 GiB the line is rounded to; the smallest rank binds."""
    if "available_bytes" in log and "available_gib" not in log:
        b = min(log.get("available_bytes_all") or [log["available_bytes"]])
        return b, b, b
    gib = min(log.get("available_gib_all") or [log["available_gib"]])
    return (
        round(gib * GiB),
        max(0, math.ceil((gib - 0.005) * GiB)),
        min(2**50, math.floor((gib + 0.005) * GiB) - 1),
    )


def _predictor(spec: ModelSpec, kw: dict[str, Any]) -> Callable[[int], VllmPrediction]:
    """predict() at a pool size for settings ``kw`` (log_settings' names)."""
    extras = {k: kw[k] for k in _EXTRAS if k in kw}
    fields = {k: v for k, v in kw.items() if k not in (*_EXTRAS, "max_model_len") and v is not None}
    dep = Deployment(spec=spec).but(**fields)
    return lambda available: predict(dep, available, kw["max_model_len"], **extras)


def _check_log(
    spec: ModelSpec, log: dict[str, Any], kw: dict[str, Any]
) -> tuple[VllmPrediction, list[LogLine]]:
    """(middle prediction, lines) for one set of settings (log_settings' names)."""
    mid_b, lo_b, hi_b = _log_bounds(log)
    mid, lo, hi = map(_predictor(spec, kw), (mid_b, lo_b, hi_b))
    rounding = (
        "vllm-ascend prints the exact bytes"
        if lo_b == hi_b
        else "the GiB line is rounded to 0.01 GiB, so the prediction is a range"
    )
    lines = []

    def line(name: str, key: str, values: tuple[float, ...], slack: float, why: str) -> None:
        """The logged ``key`` against (predicted, low, high), agreeing within ``slack``."""
        low, high = values[1:]
        agrees = low - slack <= log[key] <= high + slack
        lines.append(LogLine(name, log[key], values[0], low, high, agrees, why))

    if "tokens" in log:
        tokens = (mid.kv_cache_tokens, lo.kv_cache_tokens, hi.kv_cache_tokens)
        line("GPU KV cache size (tokens)", "tokens", tokens, 0, rounding)
    if "concurrency" in log:
        conc = tuple(round(p.max_concurrency, 2) for p in (mid, lo, hi))
        name = f"Maximum concurrency for {kw['max_model_len']:,} tokens"
        line(name, "concurrency", conc, 0.005, rounding)
    if "raised_block" in log:
        why = "raised so an attention page holds a state page"
        line("attention block size", "raised_block", (mid.block_size,) * 3, 0, why)
    return mid, lines


def _alternatives(
    spec: ModelSpec, log: dict[str, Any], kw: dict[str, Any]
) -> list[tuple[str, dict[str, Any]]]:
    """(description, changed settings) for each setting a log most often hides."""
    has_state = any(lay.state_elements for lay in spec.layers)
    windowed = any(lay.token_bound() is not None for lay in spec.layers)
    out: list[tuple[str, dict[str, Any]]] = []

    def add(text: str, **change: Any) -> None:
        out.append((text, change))

    if has_state:
        version = resolve_version(kw.get("version"))
        pc = kw.get("enable_prefix_caching")
        if pc is None:
            try:
                pc = mamba_cache_mode_of(version, None) != "none"
            except ValueError:
                pc = False
        blocks = "1 block" if pc else "2 blocks"
        text = f"prefix caching {'off' if pc else 'on'} (recurrent groups keep {blocks} a request)"
        add(text, enable_prefix_caching=not pc, mamba_cache_mode=None)
        states = (kw.get("mamba_cache_dtype", "auto"), kw.get("mamba_ssm_cache_dtype", "auto"))
        for conv, ssm, text in (
            ("auto", "float32", "SSM state float32, conv state in the model's dtype"),
            ("float32", "auto", "both states float32"),
            ("auto", "bfloat16", "SSM state in the model's dtype"),
        ):
            if states != (conv, ssm):
                flag = "--mamba-cache-dtype" if ssm == "auto" else "--mamba-ssm-cache-dtype"
                add(
                    f"{text} ({flag} {conv if ssm == 'auto' else ssm})",
                    mamba_cache_dtype=conv,
                    mamba_ssm_cache_dtype=ssm,
                )
        if fact(Facts.gdn_prefill_checkpoint, version) and not kw.get("gdn_prefill_checkpoint"):
            text = "the FlashInfer Gated DeltaNet prefill checkpoint (Hopper/Blackwell, "
            add(text + "--gdn-prefill-checkpoint)", gdn_prefill_checkpoint=True)
    for mnbt in (2048, 2496, 8192, 16384) if windowed else ():
        if mnbt != kw.get("max_num_batched_tokens"):
            add(
                f"max_num_batched_tokens {mnbt:,} (--max-num-batched-tokens)",
                max_num_batched_tokens=mnbt,
            )
    for bs in (16, 128):
        if bs != kw.get("block_size") and not has_state:
            add(f"block size {bs} (--block-size)", block_size=bs)
    return out


def diagnose_log(spec: ModelSpec, log: dict[str, Any], **kw: Any) -> list[str]:
    """The single settings, one at a time, under which every capacity line of the log is
    reproduced: the likely real cause of a log that does not agree."""
    found = []
    for text, change in _alternatives(spec, log, kw):
        try:
            _, lines = _check_log(spec, log, {**kw, **change})
        except ValueError:
            continue
        if lines and all(line.agrees for line in lines):
            found.append(text)
    return found


def explain_log(
    spec: ModelSpec, log: dict[str, Any], **overrides: Any
) -> tuple[VllmPrediction, list[LogLine]]:
    """Predict from the settings a log states and compare with its capacity lines: a logged
    value agrees inside the range the memory line's rounding to 0.01 GiB allows (vllm-ascend
    prints exact bytes); a line that does not names the one setting that would reproduce the
    log (``diagnose_log``)."""
    kw = log_settings(log)
    kw.update({k: v for k, v in overrides.items() if v is not None})
    if not kw["max_model_len"]:
        raise ValueError("the log does not state max_model_len; give --max-model-len")
    spec = _logged_drafter(spec, log)
    mid, lines = _check_log(spec, log, kw)
    if all(line.agrees for line in lines):
        return mid, lines
    causes = diagnose_log(spec, log, **kw)
    out = []
    for line in lines:
        if line.agrees:
            out.append(line)
            continue
        why = (
            ("reproduced with " + " or ".join(causes) + ": the likely real setting")
            if causes
            else _why(mid, log, "tokens" if "tokens" in line.name else "other")
        )
        out.append(replace(line, why=why))
    return mid, out


def _logged_drafter(spec: ModelSpec, log: dict) -> ModelSpec:
    """``spec`` with the speculative setup the log states, where it states one and ``spec``
    has none yet: the model's own MTP layers for an MTP method, an n-gram lookup as is; an EAGLE
    head or a draft model needs its config (refused by name: give it)."""
    method = log.get("speculative_method")
    if not method or spec.speculative_tokens:
        return spec
    tokens = log.get("speculative_tokens") or 1
    s = speculation_from({"method": method, "num_speculative_tokens": tokens})
    if s.method in ("eagle", "draft_model"):
        raise ValueError(
            f"the log serves with speculative decoding ({method}): its drafter's layers share "
            'the pool; give the drafter\'s config (--speculative-config with its "model") '
            "to check the lines"
        )
    return with_speculation(spec, s)


def _why(p: VllmPrediction, log: dict, what: str) -> str:
    reasons = []
    if len(log.get("available_gib_all", [])) > 1:
        reasons.append("each rank prints its own memory line before the smallest is taken")
    if len(p.groups) > 1:
        reasons.append(f"hybrid grouping ({len(p.groups)} groups of {p.group_size} layers)")
    if what == "tokens":
        reasons.append(
            f"this vLLM version may print the tokens line another way (predicted "
            f"with {p.tokens_formula}); set --vllm-version"
        )
    reasons.append(
        "a draft model's layers (speculative decoding) share the pool; set --num-draft-layers"
    )
    return "; ".join(reasons)
