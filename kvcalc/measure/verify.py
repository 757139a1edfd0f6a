"""kvcalc's layers checked against the cache transformers itself allocates, on the meta device.

    python -m kvcalc verify --config path/to/config.json [--context N]

``verify`` compares layer by layer, a legitimate difference from vLLM named; ``verify_bounded``
runs it in a limited child process for an allowed model type (``precheck``). Design, the named
differences and the allow-list: docs/measurement.md. torch is imported inside the functions.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..config.hfconfig import spec_from_config
from ..core.units import check_int

MAX_VERIFY_CONTEXT = 1 << 17


@dataclass(frozen=True, kw_only=True)
class VerifyRow:
    layer: int
    kvcalc: str  # the layer as kvcalc reads it
    transformers: str  # the cache layer class transformers built
    expected: dict  # elements kvcalc predicts in transformers' layout at the context
    found: dict  # elements read off transformers' tensors
    verdict: str  # "agrees", "agrees (named difference)" or "differs"
    why: str = ""


@dataclass(frozen=True, kw_only=True)
class VerifyReport:
    model: str
    context: int
    transformers_version: str
    checkable: bool
    verdict: str
    reason: str = ""
    rows: tuple[VerifyRow, ...] = ()
    differences: tuple[str, ...] = field(default_factory=tuple)  # named, legitimate ones
    unverified: tuple[str, ...] = ()  # fields the reading left out (spec_from_config refuses)

    @property
    def agrees(self) -> bool:
        return self.checkable and all(r.verdict != "differs" for r in self.rows)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["agrees"] = self.agrees
        return d

    def table(self) -> list[str]:
        return [f"{'layer':>5}  {'kvcalc':<34} {'transformers':<28} verdict"] + [
            f"{r.layer:>5}  {r.kvcalc[:34]:<34} {r.transformers[:28]:<28} "
            f"{r.verdict}{': ' + r.why if r.why else ''}"
            for r in self.rows
        ]


def _expected(layer, n: int) -> dict:
    """Elements one sequence holds in this layer at context n, in transformers' layout."""
    view = layer.transformers_view()
    kept = view.tokens_kept(n)
    return {
        "kv": view.elements_per_token * kept if view.stores_tokens else 0,
        "indexer": view.extra.elements * kept if view.extra else 0,
        "state": view.state_elements,
    }


def _numel(t) -> int:
    if isinstance(t, dict):
        t = list(t.values())
    if isinstance(t, (list, tuple)):
        return sum(_numel(v) for v in t)
    return int(t.numel()) if hasattr(t, "numel") else 0


def _found(cache, i: int) -> tuple[str, dict]:
    layers = getattr(cache, "layers", [])
    layer = layers[i] if i < len(layers) else None
    name = type(layer).__name__ if layer is not None else "(none)"
    kv = _numel([getattr(layer, "keys", None), getattr(layer, "values", None)])
    state = _numel([getattr(layer, n, None) for n in ("conv_states", "recurrent_states")])
    linear = getattr(cache, "linear_cache", None)  # MiniMax keeps its states beside the layers
    if linear is not None and i < len(linear) and _numel(linear[i]):
        state += _numel(linear[i])
        name = "linear_cache"
    rnn = getattr(cache, "rnn_state", None)  # xLSTMCache: {layer: (C, n, m)}, no layers at all
    if isinstance(rnn, dict) and _numel(rnn.get(i)):
        state += _numel(rnn[i])
        name = f"{type(cache).__name__}.rnn_state"
    return name, {"kv": kv, "indexer": _numel(getattr(layer, "indexer_keys", None)), "state": state}


_DIFFERENCES = {
    "sliding": "sliding layers: transformers keeps window - 1 tokens between steps; vLLM reserves "
    "blocks for window - 1 + one batch of new tokens",
    "chunked": "chunked layers: transformers keeps a rolling window of chunk - 1 tokens; vLLM "
    "keeps the current chunk",
    "state": "recurrent layers: transformers keeps the whole convolution kernel; vLLM keeps "
    "kernel - 1 inputs",
    "mla": "MLA: transformers caches the latent as 'keys' and the RoPE key as 'values'",
    "indexer": "indexer keys: transformers keeps them in the model dtype; vLLM stores fp8 plus "
    "fp32 scales",
    "none": "MLP/MoE-only and KV-sharing layers: transformers holds a placeholder that stores "
    "nothing",
}


def _transformers_config(config: dict):
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    model_type = config.get("model_type")
    if not isinstance(model_type, str) or model_type not in CONFIG_MAPPING:
        raise LookupError(
            f"transformers has no built-in model_type {model_type!r}; it would "
            "need the model's own remote code, which kvcalc never runs"
        )
    # The weights' format (MXFP4, FP8) does not change the cache; dropping it keeps transformers
    # from building quantized kernels that cannot run on meta tensors.
    rest = {k: v for k, v in config.items() if k not in ("model_type", "quantization_config")}
    if isinstance(rest.get("text_config"), dict):
        rest["text_config"] = {
            k: v for k, v in rest["text_config"].items() if k != "quantization_config"
        }
    return AutoConfig.for_model(model_type, **rest)


def verify(
    config: dict,
    *,
    context: int | None = None,
    name: str | None = None,
    on_model: Callable[[Any], None] | None = None,
) -> VerifyReport:
    """Build ``config`` on the meta device, run one forward of ``context`` tokens and compare the
    cache transformers allocates with kvcalc's layers, layer by layer. ``on_model`` is called
    with the model once it is built, before the forward pass (the zoo counts its parameters).
    Each way transformers can fail is a report that says why the config cannot be checked."""
    # The generic reading of a config kvcalc refuses is what a user asks this check about:
    # compare it too, and say that it is unverified.
    spec = spec_from_config(config, name=name, unverified=True)
    if context is None:
        bounds = [b for b in (lay.token_bound() for lay in spec.layers) if b is not None]
        context = min(MAX_VERIFY_CONTEXT, max(bounds, default=31) + 33)
    n = check_int("context", context, 2, MAX_VERIFY_CONTEXT)
    from .runtime import import_torch

    torch = import_torch("verify")
    import transformers

    version = transformers.__version__
    head = {"model": spec.name, "context": n, "transformers_version": version}

    def refused(reason: str) -> VerifyReport:
        return VerifyReport(
            **head, checkable=False, verdict=f"cannot be checked: {reason}", reason=reason
        )

    try:
        cfg = _transformers_config(config)
    except LookupError as exc:
        return refused(str(exc))
    except Exception as exc:  # transformers rejects the config itself
        return refused(
            f"transformers {version} refuses this config ({type(exc).__name__}: {str(exc)[:200]})"
        )
    errors: list[str] = []
    model = _build(torch, cfg, errors)
    if model is None:
        return refused(
            f"transformers {version} cannot build a causal LM from it (" + "; ".join(errors) + ")"
        )
    if on_model is not None:
        on_model(model)
    out = _forward(torch, model, n, errors)
    if out is None:
        return refused("a forward pass on the meta device fails (" + "; ".join(errors[-2:]) + ")")
    cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
    if cache is None:
        return refused("the forward pass returned no cache")
    named: list[str] = []
    rows = [_row(i, layer, n, cache, named) for i, layer in enumerate(spec.layers)]
    return _report(head, spec, rows, named, cache)


def _first(call: Callable[..., Any], attempts, errors: list[str]):
    """``call(*args)`` for the first of ``attempts`` that does not raise, or None (each failure
    appended to ``errors``)."""
    for args in attempts:
        try:
            return call(*args)
        except Exception as exc:  # this way does not work for this config: try the next
            errors.append(f"{type(exc).__name__}: {str(exc)[:160]}")
    return None


def _build(torch, cfg, errors: list[str]):
    """The model of ``cfg`` on the meta device, or None (each failure appended to ``errors``).

    A causal LM first; else the base model (vision-language classes have no causal-LM entry).
    Eager attention builds the mask as a tensor instead of reading values to skip it; BF16
    because some MoE kernels (gpt-oss) accept nothing else. Shapes do not depend on it."""
    from transformers import AutoModel, AutoModelForCausalLM

    def build(auto, candidate):
        with torch.device("meta"):
            return auto.from_config(candidate, attn_implementation="eager", dtype=torch.bfloat16)

    text = getattr(cfg, "get_text_config", lambda: cfg)()
    tries = ((AutoModelForCausalLM, cfg), (AutoModelForCausalLM, text), (AutoModel, cfg))
    return _first(build, tries, errors)


def _forward(torch, model, n: int, errors: list[str]):
    """One forward pass of ``n`` tokens with the cache on, or None (each failure appended to
    ``errors``). Explicit masks and positions keep transformers' mask code from reading values
    (.item()) off meta tensors; without them some models (Gemma 4) cannot run on the meta
    device, so they are tried first."""
    ids = torch.zeros((1, n), dtype=torch.long, device="meta")
    mask = torch.ones((1, n), dtype=torch.long, device="meta")

    def forward(extra: dict[str, Any]):
        with torch.no_grad():
            return model(input_ids=ids, use_cache=True, **extra)

    explicit = {"attention_mask": mask, "position_ids": torch.arange(n, device="meta")[None]}
    return _first(forward, ((explicit,), ({},)), errors)


def _row(i: int, layer, n: int, cache, named: list[str]) -> VerifyRow:
    """Layer ``i``'s row: kvcalc's elements against transformers' at context ``n``; an agreement
    lists the named differences that apply (each added to ``named``)."""
    expected = _expected(layer, n)
    cls, found = _found(cache, i)
    why = []
    if expected == found:
        verdict = "agrees"
        for key, applies in (
            ("sliding", layer.kind == "sliding"),
            ("chunked", layer.kind == "chunked"),
            (
                "state",
                bool(layer.state_elements)
                and layer.state_elements != layer.transformers_view().state_elements,
            ),
            ("mla", layer.kind == "mla"),
            ("indexer", bool(expected["indexer"])),
            ("none", layer.kind in ("none", "shared")),
        ):
            if applies:
                why.append(key)
                named.append(_DIFFERENCES[key])
        own = layer.transformers_note()
        if own:
            why.append(getattr(layer, "transformers_note_key", layer.kind))
            named.append(own)
        if why:
            verdict = "agrees (named difference)"
    else:
        verdict = "differs"
        why = [
            f"{k}: kvcalc {expected[k]:,} elements, transformers {found[k]:,}"
            for k in expected
            if expected[k] != found[k]
        ]
    return VerifyRow(
        layer=i,
        kvcalc=layer.label,
        transformers=cls,
        expected=expected,
        found=found,
        verdict=verdict,
        why=", ".join(why),
    )


def _report(head: dict, spec, rows: list[VerifyRow], named: list[str], cache) -> VerifyReport:
    """The checked report: the first differing layer, or agreement with the cache's extra
    (multi-token-prediction) layers named; a reading that left fields out says so."""
    extra_layers = len(getattr(cache, "layers", [])) - spec.num_layers
    differs = [r for r in rows if r.verdict == "differs"]
    if differs:
        verdict = (
            f"differs on {len(differs)} of {len(rows)} layers (first: layer "
            f"{differs[0].layer}, {differs[0].why})"
        )
    else:
        verdict = (
            f"checked against transformers {head['transformers_version']}: layer geometry agrees"
        )
        if extra_layers > 0:
            named.append(
                f"transformers' cache has {extra_layers} more layer(s) than the config "
                "declares (multi-token-prediction layers), not counted here"
            )
    if spec.unverified:
        verdict = (
            f"the standard-decoder reading (without the fields kvcalc does not "
            f"understand: {', '.join(spec.unverified[:8])}"
            f"{' ...' if len(spec.unverified) > 8 else ''}) {verdict[0].lower()}"
            f"{verdict[1:]}"
        )
    return VerifyReport(
        **head,
        checkable=True,
        verdict=verdict,
        rows=tuple(rows),
        differences=tuple(dict.fromkeys(named)),
        unverified=spec.unverified,
    )


# -- where the check may run: the allow-list and the bounded child ---------------------------
# Types whose transformers code loads or compiles native code, never built on a server: how they
# were found, docs/measurement.md; tests/test_verify_types.py reads them again for every type.
NATIVE_CODE = frozenset({"rwkv", "mra", "yoso", "sam3_video"})
# The zoo's types (docs/zoo.md): regenerate after a zoo run with a new transformers.
ZOO_TYPES = frozenset(
    """
afmoe apertus apertus1p5 apertus1p5_text arcee aria aria_text audioflamingo3 axk1 axk2
aya_vision bailing_hybrid bamba bart beam bert bert-generation big_bird bigbird_pegasus biogpt
bitnet blenderbot blenderbot-small blip-2 bloom blt camembert clip codegen cohere cohere2
cohere2_moe cohere2_vision cohere_compass cohere_compass_text colmodernvbert colpali colqwen2
cosmos3_edge cosmos3_omni cpmant ctrl cwm data2vec-text dbrx deepseek_v2 deepseek_v3
deepseek_v32 deepseek_v4 deepseek_vl deepseek_vl_hybrid diffllama doge dory dots1 dots3_note
dots3_note_text electra embedding_gemma2 emu3 encoder-decoder ernie ernie4_5 ernie4_5_moe
exaone exaone4 exaone4_5 exaone_moe falcon falcon_h1 falcon_mamba fast_vlm flex_olmo flint
florence2 fun_asr_nano fuyu gemma gemma2 gemma3 gemma3_text gemma3n gemma3n_text gemma4
gemma4_assistant gemma4_text gemma4_unified gemma4_unified_assistant gemma4_unified_text git
glm glm4 glm46v glm4_moe glm4_moe_lite glm4v glm4v_moe glm5_next glm_image glm_moe_dsa glm_ocr
glmasr glmga got_ocr2 gpt-sw3 gpt2 gpt_bigcode gpt_neo gpt_neox gpt_neox_japanese gpt_oss gptj
granite granite_docling granite_speech granite_speech_plus granite_swa granitemoe
granitemoe_swa granitemoehybrid granitemoeshared grounding-dino helium hrm_text
hunyuan_v1_dense hunyuan_v1_moe hunyuan_vl hy_v3 hy_v4 hy_v4_vl hyperclovax
hyperclovax_vision_v2 idefics2 idefics3 inkling2 inkling2_loop inkling2_loop_text inkling2_text
inkling_mm_model inkling_text instructblip instructblipvideo internlm3 internvl iquestcoder
jais2 jamba janus jetmoe jev kimi_k25 kimi_linear kolibri1 laguna lara_mini lfm2 lfm2_moe
lfm2_vl lfm3 lfm3_vl lighton_ocr llama llama4 llama4_text llava llava_next llava_next_video
llava_onevision longcat_flash mamba mamba2 marian mbart megatron-bert mellum mimo_v2_flash
minicpm3 minicpm_ocr minicpmv4_6 minicpmv4_7 minimax minimax_m2 minimax_m3_vl
minimax_m3_vl_text ministral ministral3 mistral mistral3 mistral_large4 mixtral mllama
mm-grounding-dino modernbert-decoder modernvbert molmo2 moshi moss_transcribe_diarize mpt
muse_glimmer muse_spark musicflamingo musicgen musicgen_melody mvp nanochat nemo_speechlm
nemotron nemotron_h nemotron_h_omni olmo olmo2 olmo3 olmo_hybrid olmoe omdet-turbo omniasr
openai-gpt opt ovis2 paligemma pe_audio pe_audio_video pe_video pegasus perception_lm persimmon
phi phi3 phi4_multimodal phimoe plbart pp_chart2table prophetnet qianfan_ocr qwen2 qwen2_5_vl
qwen2_audio qwen2_moe qwen2_vl qwen3 qwen3_5 qwen3_5_moe qwen3_5_moe_text qwen3_5_text
qwen3_asr qwen3_moe qwen3_next qwen3_vl qwen3_vl_moe qwen4_exp qwen4_exp_text rag
recurrent_gemma reformer rembert roberta roberta-prelayernorm roc_bert roformer rwkv sam3
sam3_lite_text sarvam_mla sarvam_moe seed_oss shieldgemma2 smollm3 smolvlm solar_open
speech-encoder-decoder stablelm starcoder2 tipsv2 trocr ultravbert vaultgemma vibevoice
vibevoice_asr video_llama_3 video_llava vipllava vision-encoder-decoder
vision-text-dual-encoder voxtral voxtral_realtime whisper xglm xlm xlm-roberta xlm-roberta-xl
xlnet xlstm xmod youtu zamba zamba2 zaya
    """.split()
)


def refusal(model_type: object) -> str | None:
    """Why the check will not build ``model_type`` here, or None when it may."""
    if not isinstance(model_type, str) or not model_type:
        return "not checked: the config has no model_type, so transformers has no class to build"
    shown = model_type[:60].encode("unicode_escape").decode("ascii")
    if model_type in NATIVE_CODE:
        return (
            f"not checked here: transformers' {shown} model loads or compiles native code "
            "when it is built, which this server never does (run `python -m kvcalc verify` "
            "on your own machine)"
        )
    if model_type not in ZOO_TYPES:
        return (
            f"not checked: model_type '{shown}' is not one of the {len(ZOO_TYPES)} "
            "decoder types transformers ships that this check builds (docs/zoo.md)"
        )
    return None


DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MEMORY_GIB = 4.0  # torch alone maps about 1 GiB of address space
# The deepest real decoders have 126 (Llama 3.1 405B) to about 160 layers; building 512 on the
# meta device takes about a second per hundred layers and well under the memory limit.
MAX_CHECK_LAYERS = 512
POLL_S = 0.1


@dataclass(frozen=True)
class BoundedVerdict:
    agrees: bool | None  # None: could not be checked (refused, not buildable, out of limits)
    line: str  # one sentence: the verdict, what differs, or why it was not checked
    report: dict | None = None  # VerifyReport.to_dict() when the check ran


def limit_memory(memory_gib: float):
    def apply() -> None:  # runs in the child, before it executes Python
        import resource

        limit = int(memory_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def precheck(config: object) -> str | None:
    """Why ``config`` will not be built by the check, in one line, or None when it may be.
    Milliseconds: the reader's caps, the model-type allow-list and the depth limit."""
    if not isinstance(config, dict):
        return "not checked: a config.json is a JSON object"
    why = refusal(config.get("model_type"))
    if why:
        return why
    try:
        spec = spec_from_config(config, unverified=True)
    except ValueError as exc:
        return f"not checked: {str(exc)[:400]}"
    if spec.num_layers > MAX_CHECK_LAYERS:
        return (
            f"not checked: {spec.num_layers:,} layers is more than the {MAX_CHECK_LAYERS} "
            "this check builds within its limits"
        )
    return None


def verify_bounded(
    config: dict,
    *,
    context: int | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_gib: float = DEFAULT_MEMORY_GIB,
    should_stop: Callable[[], bool] | None = None,
) -> BoundedVerdict:
    """The meta-device check of ``config`` in a child process (``python -m
    kvcalc.measure.verify``): at most ``timeout_s`` seconds and ``memory_gib`` GiB of
    address space, refused before it starts when ``precheck`` says so; when the time is up or
    ``should_stop()`` turns true the child's whole process group is killed, and it is always
    reaped."""
    why = precheck(config)
    if why:
        return BoundedVerdict(None, why)
    payload = json.dumps({"config": config, "context": context}, allow_nan=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kvcalc.measure.verify"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        preexec_fn=limit_memory(memory_gib),
        start_new_session=True,
        text=True,
    )
    deadline = time.monotonic() + timeout_s
    stopped = None
    send: str | None = payload
    try:
        while not stopped:
            try:
                out, _ = proc.communicate(send, timeout=POLL_S)
                break
            except subprocess.TimeoutExpired:
                send = None  # the input went on the first call
            if time.monotonic() > deadline:
                stopped = f"the check took longer than {timeout_s:g} s and was stopped"
            elif should_stop is not None and should_stop():
                stopped = "the check was stopped before it finished"
    finally:
        if proc.returncode is None:  # stopped, or an exception in should_stop: kill and reap
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    if stopped:
        return BoundedVerdict(None, f"not checked: {stopped}")
    try:
        got = json.loads(out.strip().splitlines()[-1]) if out.strip() else None
    except ValueError:
        got = None
    if not isinstance(got, dict):
        if proc.returncode and proc.returncode < 0:
            why = f"the check's process died (signal {-proc.returncode})"
        else:
            why = (
                f"the check's process ended (status {proc.returncode}) without a result, "
                f"probably over its {memory_gib:g} GiB limit"
            )
        return BoundedVerdict(None, f"not checked: {why}")
    return BoundedVerdict(
        agrees=got.get("agrees"), line=str(got.get("line", "")), report=got.get("report")
    )


def _main() -> None:
    """The child: a JSON request on stdin, one JSON line on stdout, nothing else printed."""
    request = json.loads(sys.stdin.read())
    real_stdout = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # transformers and torch print; only the result goes to stdout
    warnings.simplefilter("ignore")
    try:
        try:
            import torch  # noqa: F401  (first: under a tight limit this is what fails)
        except ImportError as exc:
            raise ValueError(
                f"not checked: torch could not be loaded in the check's process "
                f"(not installed, or its memory limit is too small: {exc})"[:300]
            ) from exc
        from transformers.utils import logging

        logging.set_verbosity_error()
        r = verify(request["config"], context=request.get("context"))
        line = r.verdict
        if r.differences:
            line += " (named differences: " + "; ".join(r.differences) + ")"
        out = {"agrees": r.agrees if r.checkable else None, "line": line, "report": r.to_dict()}
    except MemoryError:
        out = {
            "agrees": None,
            "line": "not checked: building the model needs more address "
            "space than the check is given",
        }
    except ValueError as exc:
        out = {"agrees": None, "line": str(exc)}
    except Exception as exc:  # transformers failing inside: still one line, never a traceback
        out = {"agrees": None, "line": f"not checked: {type(exc).__name__}: {str(exc)[:200]}"}
    with os.fdopen(real_stdout, "w") as fh:
        fh.write(json.dumps(out, default=str) + "\n")


if __name__ == "__main__":
    _main()
