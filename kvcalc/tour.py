"""The guided tour's questions: one prediction per stop, computed for the chosen model and GPU.

Stops follow the path Home -> Cache fill -> Budget -> Step time -> Roofline -> Frontier ->
Interview. Each stop is a ``kvcalc.quiz.Question`` that ``quiz.grade`` grades, with the
mistakes a student is likely to make named as hints. A stop that cannot be asked for a setup
(a model that does not fit, a GPU without a known peak) raises ValueError saying why.
"""

from __future__ import annotations

from dataclasses import dataclass

from .catalog import GPU
from .intensity import decode_point, ridge_point
from .kv import kv_cache
from .memory import budget, pool_defaults_text
from .model import ModelSpec
from .quiz import Question
from .roofline import step_time
from .units import check_int, fmt_bytes
from .weight_bytes import Weights

__all__ = ["STOPS", "Stop", "stop_question", "CONVERSATION", "PROMPT", "OUTPUT"]

CONVERSATION = 8192  # tokens of the "8K conversation" the tour asks about
PROMPT, OUTPUT = 512, 256  # the serving frontier's default request


@dataclass(frozen=True)
class Stop:
    number: int
    title: str
    page: str  # the full page, for a link
    teaches: str  # one sentence: what the page shows


STOPS = (
    Stop(1, "Home", "app_pages/home.py",
         "Why a model keeps K and V for every token it has seen."),
    Stop(2, "Cache fill", "app_pages/cache_fill.py",
         "How the cache fills, token by token and layer by layer."),
    Stop(3, "Budget", "app_pages/budget.py",
         "How the GPU's memory splits into weights, a reserve and the KV pool."),
    Stop(4, "Decode step time", "app_pages/step_time.py",
         "Why each decode step reads every weight and every cached token."),
    Stop(5, "Roofline", "app_pages/roofline.py",
         "Why prefill is compute bound and decode waits for memory."),
    Stop(6, "Serving frontier", "app_pages/frontier.py",
         "How a larger batch trades each user's speed for the GPU's throughput."),
    Stop(7, "Interview check", "app_pages/interview.py",
         "The questions every engineer who serves large language models should answer."),
)


def _pool(spec: ModelSpec, w: Weights, gpu: GPU, context: int, kv_dtype: str, tp: int,
          pp: int):
    b = budget(spec, total_bytes=gpu.memory_bytes, context=context, weights_bytes=w.bytes,
               kv_dtype=kv_dtype, tp=tp, pp=pp, find_max_context=False, gpu_name=gpu.name)
    if b.kv_pool_bytes <= 0:
        raise ValueError(f"{spec.name} does not fit on {gpu.name} with these settings, so no "
                         "cache fits either: pick a larger GPU, tensor parallel or smaller "
                         "weights in the sidebar for this stop")
    return b


def stop_question(number: int, spec: ModelSpec, w: Weights, gpu: GPU, *, kv_dtype: str = "bf16",
                  bandwidth_gbs: float | None = None, tp: int = 1, pp: int = 1) -> Question:
    """The prediction asked at stop ``number`` (1 to 7) for this setup."""
    n = check_int("tour stop", number, 1, len(STOPS))
    bw = gpu.bandwidth_gbs if bandwidth_gbs is None else bandwidth_gbs
    kvd = kv_dtype.upper()
    name = spec.name
    qid = f"tour-{n}"
    if n in (1, 2) and not spec.kv_layers:
        raise ValueError(f"{name} keeps no per-token cache (no attention layer stores keys and "
                         "values), so there is nothing to predict at this stop: pick a model "
                         "with attention in the sidebar")
    if n == 1:
        r = kv_cache(spec, 1, kv_dtype=kv_dtype)
        per = r.kv_bytes_per_token_nominal
        return Question(
            qid=qid, level="core", value=per, unit="B", ask_unit="KiB",
            prompt=(f"{name} has {spec.num_layers} layers. Each new token stores its keys and "
                    f"values in every attention layer, in {kvd}. How many bytes does one token "
                    "add to the cache? (1 KiB = 1,024 B)"),
            answer=f"**{per:,} B ({fmt_bytes(per)})** per token.",
            solution=r.per_token_formula())
    if n == 2:
        r = kv_cache(spec, CONVERSATION, kv_dtype=kv_dtype)
        per = kv_cache(spec, 1, kv_dtype=kv_dtype).kv_bytes_per_token_nominal
        every = per * CONVERSATION
        note = ("" if r.kv_bytes == every else
                f" Less than {CONVERSATION:,} x {per:,} B = {fmt_bytes(every)}: some layers keep "
                "only a window of recent tokens, or no per-token cache at all.")
        return Question(
            qid=qid, level="core", value=r.kv_bytes, unit="B", ask_unit="GiB",
            prompt=(f"A conversation has reached {CONVERSATION:,} tokens. How much cache does "
                    f"{name} hold for it, in GiB? (1 GiB = 2^30 B)"),
            answer=f"**{fmt_bytes(r.kv_bytes)}** ({r.kv_bytes:,} B).{note}",
            solution=f"sum over layers of bytes per token x tokens kept = {r.kv_bytes:,} B")
    if n == 3:
        b = _pool(spec, w, gpu, CONVERSATION, kv_dtype, tp, pp)
        seq = b.seq_bytes
        no_weights = b.requested_bytes / seq if seq else 0.0
        return Question(
            qid=qid, level="mid", value=b.max_concurrency, unit="sequences",
            ask_unit="sequences", floor_ok=True,
            prompt=(f"vLLM serves {name} on {gpu.name} ({pool_defaults_text()}, "
                    f"KV cache in {kvd}). How many {CONVERSATION:,}-token conversations "
                    "fit in its KV pool at once?"),
            answer=(f"**{b.max_concurrency:,.2f}**, so {int(b.max_concurrency):,} whole ones: "
                    f"the pool is {fmt_bytes(b.kv_pool_bytes)} per GPU after the weights "
                    f"({fmt_bytes(b.weights_bytes)}) and the reserve."),
            solution=(f"pool = {b.requested_bytes:,} B requested - {b.weights_bytes:,} B weights "
                      f"- {b.reserve_bytes:,} B reserve = {b.kv_pool_bytes:,} B -> "
                      f"{b.num_blocks:,} blocks of {b.block_size} tokens; one conversation "
                      f"reserves {b.blocks_per_request:,} blocks: {b.num_blocks:,} / "
                      f"{b.blocks_per_request:,} = {b.max_concurrency:,.2f}"),
            mistakes=((no_weights / b.max_concurrency if b.max_concurrency else 1.0,
                       "That divides all the memory vLLM may use by one conversation: the "
                       f"weights ({fmt_bytes(b.weights_bytes)}) and the reserve come first, and "
                       "only the pool left after them holds caches."),
                      (0.5, "Half the answer: did you count K and V twice, or 4 bytes a number?"),
                      (2.0, "Twice the answer: did you forget the factor 2 for K and V?")))
    if n == 4:
        _pool(spec, w, gpu, CONVERSATION, kv_dtype, tp, pp)  # no speed for what does not fit
        s = step_time(spec, w, context=CONVERSATION, batch=1, bandwidth_gbs=bw,
                      kv_dtype=kv_dtype, tp=tp, pp=pp)
        if s.crossover_context is None:
            return Question(
                qid=qid, level="mid", value=s.tokens_per_s, unit="tokens/s", ask_unit="tokens/s",
                prompt=(f"One sequence of {CONVERSATION:,} tokens decodes alone. Every step "
                        f"reads all of {name}'s weights and its cache at {bw:,.0f} GB/s. How "
                        "many tokens per second is that?"),
                answer=(f"**{s.tokens_per_s:,.1f} tokens/s**. This model's cache stops growing, "
                        "so reading it never costs as much as reading the weights: there is no "
                        "crossover."),
                solution=(f"({s.weight_read_bytes:,} + {s.kv_read_bytes + s.state_read_bytes:,}) "
                          f"B / {bw:,.0f} GB/s = {s.step_time_s * 1e3:,.3f} ms per token"))
        return Question(
            qid=qid, level="mid", value=s.crossover_context, unit="tokens", ask_unit="tokens",
            prompt=(f"At batch 1, each decode step reads all of {name}'s weights once and the "
                    "sequence's whole cache. From what context length (tokens) does the cache "
                    "read cost more than the weight read: where is the crossover?"),
            answer=(f"**{s.crossover_context:,} tokens**"
                    + (f", beyond the model's limit of {spec.max_context:,}: at the lengths it "
                       "serves, the weights stay the larger read." if s.crossover_context
                       > spec.max_context else ".")),
            solution=(f"smallest N with KV(N) >= {s.weight_read_bytes:,} B of weights read per "
                      f"step: N = {s.crossover_context:,}"),
            mistakes=((2.0, "Twice the answer: count K and V once each, and check the bytes per "
                            "number."),
                      (0.5, "Half the answer: did you count K and V twice?")))
    if n == 5:
        peak = gpu.peak_tflops(w.dtype)
        if peak is None:
            raise ValueError(f"{gpu.name} has no dense peak for {w.dtype.upper()} weights in "
                             "the registry: pick another GPU for this stop")
        ridge = ridge_point(peak, bw)
        d1 = decode_point(spec, w, batch=1, context=CONVERSATION, kv_dtype=kv_dtype, tp=tp)
        return Question(
            qid=qid, level="mid", value=ridge, unit="FLOP/B", ask_unit="FLOP/B",
            prompt=(f"{gpu.name} does {peak:,.1f} TFLOPS (dense, {w.dtype.upper()}) and moves "
                    f"{bw:,.0f} GB/s. How many floating-point operations (FLOPs) per byte must "
                    "work do before the arithmetic, not memory, limits it: where is its ridge "
                    "point?"),
            answer=(f"**{ridge:,.0f} FLOP/B**. Decode of one {CONVERSATION:,}-token sequence "
                    f"does {d1.intensity:,.2f} FLOP/B, {ridge / d1.intensity:,.0f} times less: "
                    "it waits for memory."),
            solution=(f"{peak:,.1f} x 10^12 FLOP/s / ({bw:,.0f} x 10^9 B/s) = {ridge:,.1f} "
                      "FLOP/B"),
            mistakes=((1000.0, "A thousand times too many: TFLOPS are 10^12 and GB/s 10^9."),
                      (0.001, "A thousand times too few: TFLOPS are 10^12 and GB/s 10^9.")))
    if n == 6:
        ctx = PROMPT + OUTPUT
        b = _pool(spec, w, gpu, ctx, kv_dtype, tp, pp)
        per = b.blocks_per_request
        return Question(
            qid=qid, level="mid", value=b.max_concurrency, unit="sequences",
            ask_unit="sequences", floor_ok=True,
            prompt=(f"Requests of {PROMPT} prompt tokens and {OUTPUT} output tokens each need up "
                    f"to {ctx:,} tokens of cache. How many can run at once before the KV pool, "
                    "not the number of users, stops the batch from growing?"),
            answer=(f"**{b.max_concurrency:,.2f}** ({b.num_blocks:,} blocks / {per} blocks per "
                    "request). With more users than that, requests wait for blocks or are "
                    "preempted: the frontier's curve flattens there."),
            solution=(f"{b.num_blocks:,} blocks of {b.block_size} tokens / {per} blocks per "
                      f"request of {ctx:,} tokens = {b.max_concurrency:,.2f}"))
    b16 = _pool(spec, w, gpu, CONVERSATION, "bf16", tp, pp)
    b8 = _pool(spec, w, gpu, CONVERSATION, "fp8", tp, pp)
    ratio = b8.max_concurrency / b16.max_concurrency
    return Question(
        qid=qid, level="mid", value=ratio, unit="x", ask_unit="x",
        prompt=(f"Switch {name}'s KV cache from BF16 (2 bytes a number) to FP8 (1 byte). How "
                f"many times more {CONVERSATION:,}-token conversations fit?"),
        answer=(f"**{ratio:,.2f}x**: from {b16.max_concurrency:,.2f} to "
                f"{b8.max_concurrency:,.2f}. The pool stays the same; each conversation "
                "takes half the bytes. The price is accuracy, which you measure."),
        solution=(f"{b8.num_blocks:,} FP8 blocks / {b16.num_blocks:,} BF16 blocks = "
                  f"{ratio:,.3f}"))
