"""tests/data/benchmarks/SUMMARY.md from the corpus's YAML files (issue 24 item 1).

    .venv/bin/python bench/corpus_summary.py           # rewrite SUMMARY.md
    .venv/bin/python bench/corpus_summary.py --check   # exit 1 if SUMMARY.md is not up to date

It writes the generated part, the totals line, the counts and one row per measurement, and
keeps every section from "## Models and GPUs missing" on as it stands: those are notes written
by hand when the sources were read.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from kvcalc.config.catalog import registry  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "benchmarks"
SUMMARY = CORPUS / "SUMMARY.md"
KEPT = "## Models and GPUs missing"  # from this heading on, SUMMARY.md is written by hand


def load() -> list[tuple[str, int, dict]]:
    """(file name, publications it draws on, entry) for every entry, files in name order."""
    out = []
    for path in sorted(CORPUS.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        for m in doc["measurements"]:
            out.append((path.name, publications(doc), m))
    return out


def publications(doc: dict) -> int:
    """A file's ``source`` is one publication (or its ``urls``, one each); ``sources`` holds one
    block per publication."""
    if "sources" in doc:
        return sum(isinstance(v, dict) for v in doc["sources"].values())
    return len(doc["source"].get("urls") or []) or 1


def engine_family(m: dict) -> str:
    name = m["engine"]["name"].split(" (")[0]
    return "lmdeploy" if name.startswith("lmdeploy") else name


def is_moe(m: dict) -> bool:
    reg = registry()
    key = m["model"].get("kvcalc_key") or m["model"].get("same_architecture_as")
    return bool(key and key in reg.models and reg.model(key).spec.moe)


def kinds(m: dict) -> list[str]:
    w, fmt = m["workload"], m["weight_format"]
    out = []
    if m["parallel"].get("tp", 1) > 1:
        out.append("TP > 1")
    if fmt == "fp8":
        out.append("FP8 weights")
    if w.get("batch_size") == 1 or w["kind"] in ("llama_bench_tg", "single_stream_generation"):
        out.append("batch 1 / single stream")
    if w.get("max_concurrency"):
        out.append("closed loop (fixed max concurrency)")
    if is_moe(m):
        out.append("MoE")
    if fmt.startswith("gguf-"):
        out.append("GGUF quantised")
    if fmt == "nvfp4":
        out.append("FP4 weights")
    if fmt == "mxfp4":
        out.append("MXFP4 weights (gpt-oss's own)")
    return out


def counts(title: str, c: Counter) -> list[str]:
    return [f"| {title} | n |", "|---|---|"] + [f"| {k} | {n} |" for k, n in c.most_common()]


def model_cell(m: dict) -> str:
    md = m["model"]
    name = md.get("hf_id") or md["name_as_published"]
    if md.get("kvcalc_key"):
        return f"{name} (`{md['kvcalc_key']}`)"
    if md.get("same_architecture_as"):
        return f"{name} (not in registry, same arch as `{md['same_architecture_as']}`)"
    return f"{name} (not in registry)"


def workload_cell(w: dict) -> str:
    parts = [w["kind"]]
    if w.get("input_len") is not None and w.get("output_len") is not None:
        parts.append(f"in {w['input_len']}/out {w['output_len']}")
    if w.get("dataset"):
        parts.append(w["dataset"])
    if w.get("random_input_len") is not None:
        parts.append(f"random max {w['random_input_len']}/{w['random_output_len']}")
    if w.get("default_if_unset") and w.get("input_len") is None:
        parts.append("lengths not stated")
    if w.get("max_concurrency"):
        parts.append(f"max concurrency {w['max_concurrency']}")
    elif w.get("request_rate") is not None:
        r = w["request_rate"]
        parts.append("rate inf" if r == math.inf else f"rate {r:g}")
    if w.get("num_prompts"):
        parts.append(f"n {w['num_prompts']}")
    if w.get("batch_size") is not None:
        parts.append(f"batch {w['batch_size']}")
    return ", ".join(parts)


def row(m: dict) -> str:
    e, g, p = m["engine"], m["gpu"], m["parallel"]
    engine = f"{e['name']} {e['version']}" if e.get("version") else e["name"]
    gpu = f"{g['name_as_published']} x{g['count']} (`{g['kvcalc_key']}`) TP{p.get('tp', 1)}"
    if p.get("pp", 1) > 1:
        gpu += f" PP{p['pp']}"
    metrics = "; ".join(f"{k}={v:.6g}" for k, v in m["metrics"].items() if v is not None)
    return (
        f"| {m['id']} | {engine} | {model_cell(m)} | {m['weight_format']} | {gpu} | "
        f"{workload_cell(m['workload'])} | {metrics} |"
    )


def generated(entries) -> list[str]:
    files = {f for f, _, _ in entries}
    pubs = sum({f: n for f, n, _ in entries}.values())
    lines = [
        "# Calibration corpus: summary",
        "",
        f"{len(entries)} published measurements in {len(files)} files from {pubs} "
        "publications (this summary was generated from the YAML files by "
        "`bench/corpus_summary.py`; see README.md for the schema and conventions).",
        "",
        "## Counts",
        "",
    ]
    lines += counts("by engine", Counter(engine_family(m) for _, _, m in entries)) + [""]
    lines += counts(
        "by GPU (kvcalc key)", Counter(m["gpu"]["kvcalc_key"] for _, _, m in entries)
    ) + [""]
    lines += counts("by kind of point", Counter(k for _, _, m in entries for k in kinds(m))) + [""]
    lines += counts("by metric", Counter(k for _, _, m in entries for k in m["metrics"])) + [""]
    lines += [
        "## Every measurement",
        "",
        "Metrics are SI (seconds, tokens/s, requests/s), shown to 6 significant digits (the "
        "YAML files hold the values exactly as published). `TPn` = tensor parallel degree; "
        '`PPn` = pipeline/layer split. "batch 1" in the kind counts means a fixed batch of '
        "one (llama.cpp tg, LMDeploy/vLLM batch-1 runs); low-rate serving points are counted "
        "separately, not as batch 1, and a closed loop of one user (fixed max concurrency "
        "1) is counted as a closed loop.",
        "",
        "| id | engine | model (kvcalc key) | format | GPU x n | workload | metrics |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [row(m) for _, _, m in entries] + [""]
    return lines


def render() -> str:
    kept = SUMMARY.read_text(encoding="utf-8").split(KEPT, 1)
    if len(kept) != 2:
        raise ValueError(f"{SUMMARY}: no '{KEPT}' heading to keep the hand-written notes from")
    return "\n".join(generated(load())) + "\n" + KEPT + kept[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if SUMMARY.md is stale")
    args = ap.parse_args()
    text = render()
    if args.check:
        if text != SUMMARY.read_text(encoding="utf-8"):
            print(f"{SUMMARY} is not up to date: run bench/corpus_summary.py", file=sys.stderr)
            return 1
        return 0
    SUMMARY.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
