"""The zoo's parameter check: kvcalc's parameter count against transformers' own model (built on
the meta device in the zoo's child), one of ``PARAMS_VERDICTS`` per type. What is counted and
why: docs/measurement.md. torch and transformers are imported inside the functions.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..core.model import ModelSpec

PARAMS_VERDICTS = ("exact", "refused", "cannot build", "wrong")
# Buffers in transformers that the checkpoints store and vLLM loads as weights: DeepSeek-V3's
# (and its descendants') router score-correction bias (DeepseekV3TopkRouter registers it as a
# buffer; vLLM's DeepseekV2MoE gate makes it a Parameter; the safetensors index lists it), and
# LFM2-MoE's expert_bias (vLLM's lfm2_moe.py loads it as the router's e_score_correction_bias).
STORED_BUFFERS = ("e_score_correction_bias", "expert_bias")
# What a multimodal model names its language model (LLaVA-style wrappers, Idefics3-style ones).
LANGUAGE_PARTS = ("language_model", "text_model")
# Encoders a causal LM keeps inside its own model (Phi-4-multimodal's image and audio embedders),
# left out as a wrapper's are.
ENCODER_PARTS = ("embed_tokens_extend",)
# The generation classes a multimodal or encoder-decoder wrapper is built through, in order:
# (transformers' name mapping, the auto class that builds from it).
_WRAPPER_MAPPINGS = (
    ("MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES", "AutoModelForImageTextToText"),
    ("MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES", "AutoModelForMultimodalLM"),
    ("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "AutoModelForCausalLM"),
    ("MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", "AutoModelForSeq2SeqLM"),
    ("MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES", "AutoModelForSpeechSeq2Seq"),
)


def count_model(model) -> tuple[int, int] | str:
    """(parameters, stored-buffer elements) of ``model``'s language model and output head, or
    a sentence saying why it cannot be counted (no output head: a base model)."""
    try:
        head = model.get_output_embeddings()
    except Exception as exc:  # a class whose head accessor is not implemented
        return f"transformers' {type(model).__name__} names no output head ({exc_line(exc)})"
    if head is None or not hasattr(head, "parameters"):
        return (
            f"transformers builds {type(model).__name__}, a model without an output head: "
            "no causal LM to count"
        )
    language = next(
        (m for name, m in model.named_modules() if name.rsplit(".", 1)[-1] in LANGUAGE_PARTS),
        None,
    )
    parts = [model] if language is None else [language, head]
    seen: set[int] = set()
    for name, m in model.named_modules():
        if name.rsplit(".", 1)[-1] in ENCODER_PARTS:
            seen.update(id(p) for p in m.parameters())  # counted as already seen: left out
    params = buffers = 0
    for part in parts:
        for p in part.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                params += p.numel()
        for name, b in part.named_buffers():
            if name.rsplit(".", 1)[-1] in STORED_BUFFERS and id(b) not in seen:
                seen.add(id(b))
                buffers += b.numel()
    return params, buffers


def judge(spec, counted: tuple[int, int] | str) -> tuple[str, str, int | None, int | None]:
    """(verdict, detail, kvcalc's total, transformers' total) of one type."""
    if isinstance(counted, str):
        return "cannot build", counted, None, None
    params, buffers = counted
    expected = params + buffers
    if spec.params is None:
        return "refused", spec.params_error or "no count", None, expected
    total = spec.params.total
    added = (
        f" ({params:,} parameters + {buffers:,} elements of {', '.join(STORED_BUFFERS)}, "
        "buffers the checkpoint stores as weights)"
        if buffers
        else ""
    )
    if total == expected:
        return "exact", added.strip(" ()"), total, expected
    return (
        "wrong",
        f"kvcalc {total:,}, transformers {expected:,} ({total - expected:+,}){added}",
        total,
        expected,
    )


def fields(spec, counted: list, model_type: str, via_text: str | None) -> dict:
    """The parameter verdict's fields of a ZooResult, from the count verify's model gave
    (``counted``: empty, or one count_model answer). A text model built without an output head
    (no causal-LM class of its own) is counted through its wrapper's generation class, with
    kvcalc reading the wrapper's whole config."""
    what = counted[0] if counted else "transformers built no model"
    where = ""
    if isinstance(what, str) and via_text and "without an output head" in what:
        spec, what, cls = wrapper_count(model_type)
        if isinstance(spec, ValueError):
            return {"params": "refused", "params_detail": f"the wrapper's config: {spec}"}
        where = f"{cls}'s language model and head" if cls else ""
    verdict, detail, k, t = judge(spec, what)
    if where and verdict != "cannot build":
        detail = f"{where}; {detail}" if detail else where
    return {
        "params": verdict,
        "params_detail": detail,
        "params_kvcalc": k,
        "params_transformers": t,
    }


def wrapper_count(model_type: str):
    """For a type whose text model has no causal-LM class: (kvcalc's spec of the wrapper's whole
    config or the ValueError it raised, transformers' count of the wrapper's language model and
    head or why not, the class built)."""
    import torch
    import transformers
    from transformers.models.auto import modeling_auto
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from ..config.hfconfig import spec_from_config

    cfg = CONFIG_MAPPING[model_type]()
    config = cfg.to_dict() | {"model_type": model_type}
    spec: ModelSpec | ValueError
    try:
        spec = spec_from_config(config, name=model_type)
    except ValueError as exc:
        spec = exc
    for mapping, auto in _WRAPPER_MAPPINGS:
        names = getattr(modeling_auto, mapping, {})
        if model_type not in names:
            continue
        build = getattr(transformers, auto).from_config
        try:
            with torch.device("meta"):
                model = build(cfg)
        except Exception as exc:
            return spec, f"transformers cannot build {names[model_type]} ({exc_line(exc)})", None
        return spec, count_model(model), type(model).__name__
    return spec, "transformers has no generation class for the wrapper either", None


def exc_line(exc: BaseException, limit: int = 200) -> str:
    """An exception in one line: its class and the first ``limit`` characters of its text."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:limit]}"


def counts(results) -> dict[str, int]:
    c = Counter(r.params for r in results if r.params)
    return {v: c.get(v, 0) for v in PARAMS_VERDICTS}


def summary_lines(results) -> list[str]:
    c = counts(results)
    lines = ["  parameters: " + ", ".join(f"{v}: {c[v]}" for v in PARAMS_VERDICTS)]
    wrong = [r for r in results if r.params == "wrong"]
    return lines + [f"  PARAMS WRONG: {r.model_type}: {r.params_detail}" for r in wrong]


def markdown_lines(results, cell) -> list[str]:
    """The parameter section of docs/zoo.md: the counts and one row per type."""
    c = counts(results)
    lines = [
        "",
        "## Parameter counts: kvcalc against transformers' own model",
        "",
        "The same child process counts the model transformers built on the meta device: the "
        "sum of its parameters' `numel` (a tied weight once) over the causal LM with its output "
        "head, or a multimodal model's language model and head, plus the buffers checkpoints "
        f"store as weights ({', '.join(f'`{b}`' for b in STORED_BUFFERS)}). kvcalc's count "
        "(`ModelSpec.params.total`) must equal it or be refused by name.",
        "",
        "| params verdict | count |",
        "|---|---:|",
    ]
    lines += [f"| {v} | {c[v]} |" for v in PARAMS_VERDICTS]
    lines += [
        "",
        "| model_type | params | kvcalc | transformers | detail |",
        "|---|---|---:|---:|---|",
    ]
    for r in results:
        k = f"{r.params_kvcalc:,}" if r.params_kvcalc is not None else ""
        t = f"{r.params_transformers:,}" if r.params_transformers is not None else ""
        lines.append(f"| `{r.model_type}` | {r.params} | {k} | {t} | {cell(r.params_detail)} |")
    return lines
