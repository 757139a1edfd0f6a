"""The guided tour: seven stops, each a short lesson computed for the chosen model and GPU.

Stops follow the path Home -> Cache fill -> Budget -> Decode step time -> Roofline -> Serving
frontier -> Interview. Each stop is a ``Lesson``:

- ``givens``: the config fields and figures its prediction needs, so nothing has to be looked up;
- ``question``: one ``kvcalc.teach.quiz.Question`` that ``quiz.grade`` grades, its box reading
  a bare number in the unit its label names, with the likely slips named (the factor 2, bits vs
  bytes, query heads for KV heads, the input embedding, all experts for the routed ones...);
- ``figure``: one figure its page shows, from the same core call that page makes;
- ``recap`` (two lines) and ``discuss`` (a question for the class).

Questions ask about min(8,192, the model's limit) tokens and are worded by the kinds of the
model's layers (full, sliding-window, MLA, recurrent, shared), so that no prompt says something
false of the model. ``answer_key`` writes the seven lessons as Markdown, for a teacher to print.
A stop that cannot be asked for a setup (a model that does not fit, a GPU without a known peak)
raises ValueError saying why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..cache.kv import kv_cache
from ..cache.weight_bytes import Weights
from ..config.catalog import GPU
from ..core.dtypes import KV_DTYPES, get_dtype
from ..core.model import ChunkedLocal, FullAttention, Layer, MLALatent, ModelSpec, SlidingWindow
from ..core.units import GB, GiB, check_int, fmt_bytes, fmt_gb, fmt_gib, fmt_seconds
from ..engines.budget import Budget, budget
from ..perf.calibration import CALIBRATED, estimate_step
from ..perf.intensity import decode_point, ridge_point
from ..perf.roofline import crossover_context, step_time, token_passes
from .quiz import TOLERANCE, Question

__all__ = ["STOPS", "Stop", "Lesson", "lesson", "stop_question", "answer_key",
           "conversation_tokens", "request_tokens", "CONVERSATION", "PROMPT", "OUTPUT"]

CONVERSATION = 8192  # tokens of the "8K conversation" the tour asks about (at most the limit)
PROMPT, OUTPUT = 512, 256  # the serving frontier's default request
FILL_PROMPT, FILL_NEW = 12, 20  # the Cache fill page's defaults, for its figure


@dataclass(frozen=True)
class Stop:
    number: int
    title: str
    page: str  # the full page's name in the app (its URL path; webui/pages.py finds its script)
    teaches: str  # one sentence: what the page shows


STOPS = (
    Stop(1, "Home", "home",
         "Why a model keeps K and V for every token it has seen."),
    Stop(2, "Cache fill", "cache_fill",
         "How the cache fills, token by token and layer by layer."),
    Stop(3, "Budget", "budget",
         "How the GPU's memory splits into weights, a reserve and the KV pool."),
    Stop(4, "Decode step time", "step_time",
         "Why each decode step reads the weights it uses once and every cached token."),
    Stop(5, "Roofline", "roofline",
         "Why prefill is compute bound and decode waits for memory."),
    Stop(6, "Serving frontier", "frontier",
         "How a larger batch trades each user's speed for the GPU's throughput."),
    Stop(7, "Interview check", "interview",
         "The questions every engineer who serves large language models should answer."),
)


@dataclass(frozen=True, kw_only=True)
class Lesson:
    stop: Stop
    question: Question
    givens: tuple[tuple[str, str], ...]  # (config field or figure, its value with a unit)
    figure: tuple[str, str]  # (what its page calls it, the value the page shows)
    recap: tuple[str, str]
    discuss: str


def conversation_tokens(spec: ModelSpec) -> int:
    """The conversation the tour asks about: 8,192 tokens, or the model's limit when shorter."""
    return min(CONVERSATION, spec.max_context)


def request_tokens(spec: ModelSpec) -> tuple[int, int]:
    """(prompt, output) tokens of the serving request: 512 + 256, or two thirds and one third
    of the model's limit when that is shorter."""
    if spec.max_context >= PROMPT + OUTPUT:
        return PROMPT, OUTPUT
    prompt = max(1, spec.max_context * 2 // 3)
    return prompt, max(1, spec.max_context - prompt)


# -- words for the model's layers -------------------------------------------------------------

_KIND_WORDS = {"full": "full-attention", "sliding": "sliding-window",
               "chunked": "chunked-attention", "mla": "multi-head latent attention (MLA)",
               "shared": "KV-sharing", "state": "recurrent", "none": "cache-free",
               "cross": "cross-attention"}
_FLAVORS = {"gated_deltanet": "Gated DeltaNet", "mamba": "Mamba", "mamba2": "Mamba-2",
            "linear_attention": "linear attention", "kda": "Kimi Delta Attention",
            "rwkv": "RWKV"}
_ATTENTION = ("full", "sliding", "chunked")


def _kind_word(layer) -> str:
    """A layer's kind in words, with its size: "sliding-window (1,024 tokens)"."""
    word = _KIND_WORDS.get(layer.kind, layer.kind)
    if layer.kind == "sliding":
        return f"{word} ({layer.window:,}-token window)"
    if layer.kind == "chunked":
        return f"{word} ({layer.chunk:,}-token chunks)"
    if layer.kind == "state":
        return f"{word} ({_FLAVORS.get(layer.flavor, layer.flavor.replace('_', ' '))})"
    return word


def _groups(spec: ModelSpec) -> list[tuple[str, int, Layer]]:
    """(words, count, a layer) for each kind and size, in order of first appearance."""
    seen: dict[str, list] = {}
    for layer in spec.layers:
        seen.setdefault(_kind_word(layer), [0, layer])[0] += 1
    return [(word, n, layer) for word, (n, layer) in seen.items()]


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _layers_phrase(spec: ModelSpec) -> str:
    """"32 full-attention layers" or "62 layers: 10 full-attention and 52 sliding-window ..."."""
    groups = _groups(spec)
    if len(groups) == 1:
        return f"{_plural(spec.num_layers, 'layer')}, all {groups[0][0]}"
    parts = [f"{n:,} {word}" for word, n, _ in groups]
    return f"{spec.num_layers:,} layers: " + ", ".join(parts[:-1]) + f" and {parts[-1]}"


def _kinds(spec: ModelSpec) -> set[str]:
    return {layer.kind for layer in spec.layers}


def _stores_sentence(spec: ModelSpec) -> str:
    """What each kind of layer this model has stores, one clause per kind."""
    kinds = _kinds(spec)
    parts = []
    if kinds & set(_ATTENTION):
        parts.append("an attention layer stores a key (K) and a value (V) vector for each of its "
                     "KV heads, for every token")
    if "sliding" in kinds:
        parts.append("a sliding-window layer stores each new token too, and drops the tokens "
                     "that leave its window")
    if "chunked" in kinds:
        parts.append("a chunked-attention layer stores each new token too, and drops the "
                     "tokens of the chunks before the current one")
    if "mla" in kinds:
        parts.append("an MLA layer stores no per-head K and V: one compressed latent vector and "
                     "one rotary-position (RoPE) key per token, from which every head's K and V "
                     "are rebuilt")
    if "state" in kinds:
        parts.append("a recurrent layer stores nothing per token: it keeps one fixed-size state "
                     "per conversation")
    if "shared" in kinds:
        parts.append("a KV-sharing layer stores nothing: it reads the cache an earlier layer "
                     "wrote")
    if "none" in kinds:
        parts.append("a cache-free layer (no attention) stores nothing")
    if "cross" in kinds:
        parts.append("a cross-attention layer keeps an image's K and V, once per image")
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."


def _geometry_givens(spec: ModelSpec) -> list[tuple[str, str]]:
    """The config fields per-token bytes come from, per kind of layer that stores tokens."""
    out: list[tuple[str, str]] = []
    geos: dict[tuple, list[str]] = {}
    for word, _, layer in _groups(spec):
        key: tuple
        if isinstance(layer, (FullAttention, SlidingWindow, ChunkedLocal)):  # the _ATTENTION kinds
            key = ("att", layer.kv_heads, layer.head_dim, layer.v_head_dim, layer.q_heads)
        elif isinstance(layer, MLALatent):
            key = ("mla", layer.kv_lora_rank, layer.qk_rope_head_dim, layer.q_heads)
        else:
            continue
        geos.setdefault(key, []).append(word.split(" (")[0])
    for key, words in geos.items():
        pre = "" if len(geos) == 1 else f"{' and '.join(words).capitalize()} layers: "
        if key[0] == "att":
            _, kv, hd, vd, q = key
            out.append((f"{pre}KV heads (num_key_value_heads)", f"{kv:,}"))
            out.append((f"{pre}query heads (num_attention_heads)", f"{q:,}"))
            out.append((f"{pre}head dimension (head_dim)", f"{hd:,}" if hd == vd else
                        f"K {hd:,}, V {vd:,}"))
        else:
            _, rank, rope, q = key
            out.append((f"{pre}latent (kv_lora_rank)", f"{rank:,} numbers"))
            out.append((f"{pre}RoPE key (qk_rope_head_dim)", f"{rope:,} numbers"))
            out.append((f"{pre}query heads (num_attention_heads)", f"{q:,}"))
    for word, _, layer in _groups(spec):
        if isinstance(layer, SlidingWindow):
            out.append(("Sliding window (sliding_window)", f"{layer.window:,} tokens"))
        if isinstance(layer, ChunkedLocal):
            out.append(("Attention chunk (attention_chunk_size)", f"{layer.chunk:,} tokens"))
        if layer.extra is not None:
            out.append((f"{word.capitalize()} layers also keep", layer.extra.formula()
                        + " per token"))
    return [(label[0].upper() + label[1:], value) for label, value in out]


def _bytes_a_number(kv_dtype: str) -> str:
    per = get_dtype(kv_dtype, KV_DTYPES).bytes_per_element
    return f"{per:g} byte{'' if per == 1 else 's'} a number"


def _format_given(kv_dtype: str) -> tuple[str, str]:
    return ("KV cache format", f"{kv_dtype.upper()}, {_bytes_a_number(kv_dtype)}")


def _where(gpu: GPU, tp: int, pp: int) -> str:
    if tp * pp == 1:
        return gpu.name
    split = [f"tensor parallel {tp}"] + ([f"pipeline parallel {pp}"] if pp > 1 else [])
    return f"{tp * pp} x {gpu.name} ({', '.join(split)})"


# -- slips ------------------------------------------------------------------------------------

def _near(a: float, b: float, tol: float = TOLERANCE) -> bool:
    return abs(a / b - 1) < tol if b else a == 0


def _slips(*pairs: tuple[float | None, str]) -> tuple[tuple[float, str], ...]:
    """Named mistakes as (answer / right answer, message): those that would grade as right
    are dropped, and those that give the same answer are joined into one message."""
    out: list[list] = []
    for ratio, why in pairs:
        if ratio is None or not math.isfinite(ratio) or ratio <= 0 or _near(ratio, 1.0):
            continue
        for entry in out:
            if _near(ratio, entry[0]):
                entry[1] += f" Or: {why[0].lower() + why[1:]}"
                break
        else:
            out.append([ratio, why])
    return tuple((r, w) for r, w in out)


def _times(ratio: float) -> str:
    """"Twice the answer: ", "Half the answer: "... for a round factor; "" for any other."""
    for r, text in ((2, "Twice the answer"), (0.5, "Half the answer"),
                    (8, "Eight times the answer"), (1 / 8, "An eighth of the answer")):
        if _near(ratio, r):
            return f"{text}: "
    return ""


def _lead(ratio: float, why: str) -> str:
    """A slip's message led by its factor when that is round: "Twice the answer: that ..."."""
    head = _times(ratio)
    return head + why if head else why[0].upper() + why[1:]


def _as_full(spec: ModelSpec) -> ModelSpec:
    """The same model with every sliding or chunked layer keeping every token."""
    def full(layer):
        if layer.kind in ("sliding", "chunked"):
            return FullAttention(kv_heads=layer.kv_heads, head_dim=layer.head_dim,
                                 v_head_dim=layer.v_head_dim, q_heads=layer.q_heads,
                                 extra=layer.extra)
        return layer
    return spec.with_layers(full(layer) for layer in spec.layers)


def _parts(spec: ModelSpec, kv_dtype: str, n: int, tp: int = 1) -> dict[str, int]:
    """Cache bytes of one sequence at ``n`` tokens on one GPU, split by what holds them: "att"
    (K/V of attention layers), "mla" (latents), "extra" (indexer keys and the like) and
    "state"; and what two misreadings would make of them: "q" (the attention layers with one
    K/V head per query head) and "mha" (the MLA layers' K and V rebuilt for every head)."""
    d = get_dtype(kv_dtype, KV_DTYPES)
    parts = dict.fromkeys(("att", "mla", "extra", "state", "q", "mha"), 0)
    for layer in spec.layers:
        lay = layer.split(tp) if tp > 1 else layer
        parts["state"] += lay.state_bytes(get_dtype("bf16"))
        if not lay.stores_tokens:
            continue
        kept = lay.tokens_kept(n)
        extra = lay.extra.bytes_per_token if lay.extra is not None else 0
        parts["extra"] += extra * kept
        own = (lay.bytes_per_token(d) - extra) * kept
        mha = lay.as_mha()
        rebuilt = (mha.bytes_per_token(d) - (mha.extra.bytes_per_token if mha.extra else 0)) * kept
        if lay.kind == "mla":
            parts["mla"] += own
            parts["mha"] += rebuilt
        else:
            parts["att"] += own
            parts["q"] += rebuilt
    return parts


def _kv_slips(spec: ModelSpec, kv_dtype: str, n: int, tp: int = 1, *, count: bool = False,
              per_token: bool = False) -> list[tuple[float | None, str]]:
    """The slips of K/V arithmetic, as ratios of the wrong answer to the right one: for the
    bytes of one sequence at ``n`` tokens (with its recurrent state), or (``count``) for how
    many sequences fit, which falls as the bytes rise. ``per_token``: the bytes one token adds
    (no state), with the slips of counting layers."""
    p = _parts(spec, kv_dtype, n, tp)
    if per_token:
        p["state"] = 0
    total = p["att"] + p["mla"] + p["extra"] + p["state"]
    if not total or not (p["att"] or p["mla"]):
        return []
    d = get_dtype(kv_dtype, KV_DTYPES)

    def r(wrong: float) -> float:
        return total / wrong if count else wrong / total

    kv = total - p["state"]
    out: list[tuple[float | None, str]] = []
    if p["att"]:
        ratio = r(total - p["att"] / 2)
        out.append((ratio, _lead(ratio, "that is what half the K/V bytes give. K and V are two "
                                        "vectors per KV head: did you leave out the factor 2?")))
    if p["mla"]:
        ratio = r(total + p["mla"])
        out.append((ratio, _lead(ratio, "an MLA layer stores one latent per token, not a K and a "
                                        "V: there is no factor 2.")))
        out.append((r(total - p["mla"] + p["mha"]),
                    "That counts the K and V of every head, rebuilt from the latent: MLA "
                    "caches only the latent and the RoPE key."))
    ratio = r(total + 7 * kv)
    bpe = d.bytes_per_element
    article = "An" if d.name.upper()[0] in "AEFHILMNORSX" else "A"  # an FP8, an INT4, a BF16
    out.append((ratio, _lead(ratio, f"that counts bits. {article} {d.name.upper()} number is "
                                    f"{bpe:g} byte{'' if bpe == 1 else 's'} ({d.bits:g} bits).")))
    if p["att"] and p["q"] != p["att"]:
        layer = next(lay for lay in spec.layers if lay.kind in _ATTENTION)
        out.append((r(total - p["att"] + p["q"]),
                    f"That counts the {layer.q_heads:,} query heads (num_attention_heads): K and "
                    f"V are stored once per KV head (num_key_value_heads = "
                    f"{layer.kv_heads:,})."))
    stores = spec.kv_layers
    alike = len({lay.bytes_per_token(d) for lay in stores}) == 1
    if per_token and alike and len(stores) < spec.num_layers:
        out.append((r(kv * spec.num_layers / len(stores)),
                    f"That counts all {spec.num_layers:,} layers: only the {len(stores):,} that "
                    "store tokens add bytes per token; the others store nothing per token."))
    if per_token and alike and len(stores) > 1:
        out.append((r(kv / len(stores)),
                    f"That is one layer's share: each of the {len(stores):,} layers that store "
                    "tokens keeps its own."))
    return out


# -- the stops --------------------------------------------------------------------------------

def _pool(spec: ModelSpec, w: Weights, gpu: GPU, context: int, kv_dtype: str, tp: int,
          pp: int, **kw) -> Budget:
    b = budget(spec, total_bytes=kw.pop("total_bytes", gpu.memory_bytes), context=context,
               weights_bytes=kw.pop("weights_bytes", w.bytes), kv_dtype=kv_dtype, tp=tp, pp=pp,
               find_max_context=False, gpu_name=gpu.name, **kw)
    if b.kv_pool_bytes <= 0:
        raise ValueError(f"{spec.name} does not fit on {gpu.name} with these settings, so no "
                         "cache fits either: pick a larger GPU, tensor parallel or smaller "
                         "weights in the sidebar for this stop")
    return b


def _logged_capacity(spec: ModelSpec, w: Weights, gpu: GPU, context: int, kv_dtype: str,
                     tp: int, pp: int) -> Budget:
    """vLLM's logged "Maximum concurrency for N tokens per request": its start-up worst case,
    every request at its full length. The one call the tour makes for capacity, so that a
    running-capacity figure (the batch a running server sustains) can take its place here."""
    return _pool(spec, w, gpu, context, kv_dtype, tp, pp)


def _ratio_of(fn, right: float) -> float | None:
    """fn() / right, or None when fn cannot be computed (a slip that makes the model not fit)."""
    try:
        value = fn()
    except ValueError:
        return None
    return value / right if right else None


def lesson(number: int, spec: ModelSpec, w: Weights, gpu: GPU, *, kv_dtype: str = "bf16",
           bandwidth_gbs: float | None = None, tp: int = 1, pp: int = 1,
           name: str | None = None) -> Lesson:
    """The lesson at stop ``number`` (1 to 7) for this setup. ``name`` is how the model is
    called in the text (its spec's name when not given)."""
    n = check_int("tour stop", number, 1, len(STOPS))
    bw = gpu.bandwidth_gbs if bandwidth_gbs is None else bandwidth_gbs
    name = spec.name if name is None else name
    build = (_stop1, _stop2, _stop3, _stop4, _stop5, _stop6, _stop7)[n - 1]
    if n in (1, 2) and not spec.kv_layers:
        raise ValueError(f"{name} keeps no per-token cache (no attention layer stores keys and "
                         "values), so there is nothing to predict at this stop: pick a model "
                         "with attention in the sidebar")
    return build(_Setup(spec=spec, w=w, gpu=gpu, kv_dtype=kv_dtype, bw=bw, tp=tp, pp=pp,
                        name=name, stop=STOPS[n - 1]))


def stop_question(number: int, spec: ModelSpec, w: Weights, gpu: GPU, *, kv_dtype: str = "bf16",
                  bandwidth_gbs: float | None = None, tp: int = 1, pp: int = 1) -> Question:
    """The prediction asked at stop ``number`` (1 to 7) for this setup."""
    return lesson(number, spec, w, gpu, kv_dtype=kv_dtype, bandwidth_gbs=bandwidth_gbs, tp=tp,
                  pp=pp).question


@dataclass(frozen=True, kw_only=True)
class _Setup:
    spec: ModelSpec
    w: Weights
    gpu: GPU
    kv_dtype: str
    bw: float
    tp: int
    pp: int
    name: str
    stop: Stop

    @property
    def kvd(self) -> str:
        return self.kv_dtype.upper()

    @property
    def n(self) -> int:
        return conversation_tokens(self.spec)

    def tokens_given(self) -> tuple[str, str]:
        n = self.n
        note = (f" (the model's limit, max_position_embeddings; it cannot hold "
                f"{CONVERSATION:,})" if n < CONVERSATION else "")
        return ("Tokens in the conversation", f"{n:,}{note}")

    def per_gpu_note(self, whole: int, per_gpu: int) -> str:
        """What each GPU holds of ``whole`` bytes per token under tensor/pipeline parallel."""
        g = self.tp * self.pp
        if g == 1:
            return ""
        if per_gpu == whole:
            why = ("an MLA latent is not split" if "mla" in _kinds(self.spec) else
                   "every GPU keeps every head")
            return f" for the whole model; each of the {g} GPUs holds all of it ({why})"
        if per_gpu * g == whole:
            return f" for the whole model; each of the {g} GPUs holds 1/{g} of it, {per_gpu:,} B"
        reasons = []
        if self.tp > 1 and any(lay.kv_heads is not None and lay.kv_heads < self.tp
                               for lay in self.spec.kv_layers):
            reasons.append("with fewer KV heads than GPUs a head is replicated")
        if self.pp > 1:
            reasons.append("a pipeline stage holds only its own layers")
        return (f" for the whole model; each of the {g} GPUs holds {per_gpu:,} B"
                + (f" ({'; '.join(reasons)})" if reasons else ""))


def _stop1(s: _Setup) -> Lesson:
    spec = s.spec
    r = kv_cache(spec, 1, kv_dtype=s.kv_dtype)
    per = r.kv_bytes_per_token_nominal
    home = kv_cache(spec, CONVERSATION, kv_dtype=s.kv_dtype, tp=s.tp, pp=s.pp)  # as Home shows
    slips = _kv_slips(spec, s.kv_dtype, 1, per_token=True)
    slips.append((1 / 1024, f"That looks like KiB: a bare number here is read in bytes (B). "
                            f"Type the unit, e.g. '{per / 1024:g} KiB'."))
    q = Question(
        qid="tour-1", level="core", value=per, unit="B", ask_unit="B", kv_hints=False,
        prompt=(f"{s.name} has {_layers_phrase(spec)}. {_stores_sentence(spec)} With the cache "
                f"in {s.kvd}, how many bytes does one token add to the cache of the whole model? "
                "(1 KiB = 1,024 B)"),
        answer=(f"**{per:,} B ({fmt_bytes(per)})** per token"
                f"{s.per_gpu_note(per, home.kv_bytes_per_token_nominal)}."),
        solution=r.per_token_formula(), mistakes=_slips(*slips))
    tp_label = f" (per GPU at tensor parallel {s.tp})" if s.tp * s.pp > 1 else ""
    if "mla" in _kinds(spec):
        p = _parts(spec, s.kv_dtype, 1)
        second = (f"MLA's latent is {p['mha'] / p['mla']:,.0f} times smaller than the K and V "
                  "of every head it stands for; query heads never count.")
    elif "state" in _kinds(spec):
        second = (f"Only the {len(spec.kv_layers):,} attention layers add bytes per token; the "
                  "recurrent layers' state is fixed. Query heads never count.")
    else:
        second = ("Fewer KV heads (GQA), a latent (MLA), fewer bytes a number (FP8) or a window "
                  "shrink it; query heads never count.")
    return Lesson(
        stop=s.stop, question=q,
        givens=(("Layers (num_hidden_layers)", _layers_phrase(spec)), *_geometry_givens(spec),
                _format_given(s.kv_dtype)),
        figure=(f"Home: KV cache per token{tp_label}",
                fmt_bytes(home.kv_bytes_per_token_nominal)),
        recap=(f"One token costs {fmt_bytes(per)} in {s.name}'s cache, in every layer that "
               "stores it, for as long as the conversation lasts.", second),
        discuss=("Why are the queries not cached? What would keeping them cost per token, and "
                 "what would it save?"))


def _stop2(s: _Setup) -> Lesson:
    spec, n = s.spec, s.n
    r = kv_cache(spec, n, kv_dtype=s.kv_dtype)
    per = kv_cache(spec, 1, kv_dtype=s.kv_dtype).kv_bytes_per_token_nominal
    total = r.total_bytes  # K/V and any recurrent state: what Home's figure counts
    kinds = _kinds(spec)
    givens = [s.tokens_given(), ("KV cache per token (stop 1)", f"{per:,} B ({fmt_bytes(per)})")]
    rows = [row for row in r.rows if row.stores_tokens]
    if len(rows) > 1 or any(row.tokens_kept < n for row in rows):
        for row in rows:
            keep = (f"they keep only the last {row.tokens_kept:,} tokens" if row.tokens_kept < n
                    else "they keep every token")
            givens.append((f"{row.layers:,} {_KIND_WORDS.get(row.kind, row.kind)} layers",
                           f"{row.bytes_per_token_per_layer:,} B per token each; {keep}"))
    if r.state_bytes:
        givens.append(("Recurrent state per conversation",
                       f"{r.state_bytes:,} B ({fmt_bytes(r.state_bytes)}), whatever its length"))
    slips = _kv_slips(spec, s.kv_dtype, n)
    full_total = kv_cache(_as_full(spec), n, kv_dtype=s.kv_dtype).total_bytes
    if full_total != total:
        window = min(row.tokens_kept for row in r.rows if row.stores_tokens)
        slips.append((full_total / total,
                      f"That keeps all {n:,} tokens in every layer: a sliding-window layer keeps "
                      f"only its last {window:,}."))
    if r.state_bytes:
        slips.append((r.kv_bytes / total, "That is the K/V alone: add the recurrent layers' "
                                          "fixed state."))
    slips.append((GiB, f"That looks like the answer in bytes: a bare number here is read in "
                       f"GiB. Add the unit (e.g. '{total:,} B')."))
    every = per * n
    note = ("" if r.kv_bytes == every else
            f" Less than {n:,} x {per:,} B = {fmt_bytes(every)}: some layers keep only a "
            "window of recent tokens, or no per-token cache at all.")
    state = (f" That is {fmt_bytes(r.kv_bytes)} of K/V and {fmt_bytes(r.state_bytes)} of "
             "recurrent state." if r.state_bytes else "")
    q = Question(
        qid="tour-2", level="core", value=total, unit="B", ask_unit="GiB", kv_hints=False,
        prompt=(f"A conversation has reached {n:,} tokens. How much cache does {s.name} hold "
                f"for it, in GiB, for the whole model? (1 GiB = 2^30 B)"),
        answer=(f"**{fmt_gib(total, 3)}** ({fmt_bytes(total)}, {total:,} B).{state}{note}"
                if total < GiB else f"**{fmt_gib(total)}** ({total:,} B).{state}{note}"),
        solution=(" + ".join(f"{row.layers} x {row.bytes_per_token_per_layer:,} B x "
                             f"{row.tokens_kept:,} tokens" for row in r.rows
                             if row.stores_tokens)
                  + (f" + {r.state_bytes:,} B state" if r.state_bytes else "")
                  + f" = {total:,} B"),
        mistakes=_slips(*slips))
    passes = token_passes(FILL_NEW, FILL_PROMPT)
    if "sliding" in kinds or "chunked" in kinds:
        second = (f"Past their windows the sliding layers stop growing: each further token adds "
                  f"{fmt_bytes(r.kv_bytes_per_token)}, not {fmt_bytes(per)}.")
    elif r.state_bytes:
        second = (f"The recurrent state ({fmt_bytes(r.state_bytes)}) does not grow; only the "
                  "attention layers' K/V does.")
    else:
        second = "Twice the tokens, twice the bytes: the cache grows in a straight line."
    return Lesson(
        stop=s.stop, question=q, givens=tuple(givens),
        figure=(f"Cache fill: token passes for a {FILL_PROMPT}-token prompt and {FILL_NEW} new "
                "tokens",
                f"{passes['with_cache']:,} with a cache, {passes['without_cache']:,} without "
                f"({passes['ratio']:,.1f}x)"),
        recap=(f"{n:,} tokens hold {fmt_bytes(total)} of cache in {s.name}.", second),
        discuss=("When a conversation ends, its cache is freed. What could a server gain by "
                 "keeping it, and when would two conversations share one?"))


def _none_fits(b: Budget, n: int, gpu: GPU) -> None:
    """Stops 3, 6 and 7 ask how many conversations fit: when none does, they are not asked."""
    if b.kv_pool_bytes <= 0 or b.max_concurrency <= 0 or not b.seq_bytes:
        raise ValueError(f"not even one conversation of {n:,} tokens fits on {gpu.name} with "
                         "these settings (the weights and the reserve leave no room for its "
                         "cache), so this stop has no question here: pick a larger GPU, more GPUs "
                         "or a smaller weight format")


def _stop3(s: _Setup) -> Lesson:
    spec, n = s.spec, s.n
    b = _pool(spec, s.w, s.gpu, n, s.kv_dtype, s.tp, s.pp)
    _none_fits(b, n, s.gpu)
    conc = b.max_concurrency
    seq = b.seq_bytes

    def conc_with(**kw):
        return _pool(spec, s.w, s.gpu, n, s.kv_dtype, s.tp, s.pp, **kw).max_concurrency

    slips = [
        (b.requested_bytes / seq / conc if seq else None,
         "That divides all the memory vLLM may use by one conversation: the weights "
         f"({fmt_gib(b.weights_bytes)}{' per GPU' if s.tp * s.pp > 1 else ''}) and the reserve "
         "come first, and only the pool "
         "left after them holds caches."),
        (_ratio_of(lambda: conc_with(reserve_bytes=0), conc),
         f"That leaves out the reserve ({fmt_gib(b.reserve_bytes)} for activations, the CUDA "
         "context and graphs)."),
        (_ratio_of(lambda: conc_with(gpu_mem_util=1.0), conc),
         f"That uses all of the GPU's memory: vLLM takes gpu_memory_utilization "
         f"({b.gpu_mem_util:g}) of it."),
    ]
    if s.gpu.memory_mib_driver:
        slips.append((_ratio_of(lambda: conc_with(total_bytes=int(s.gpu.memory_gb * GB)), conc),
                      f"That starts from the spec sheet's {s.gpu.memory_gb:g} GB: an engine "
                      f"sizes from what the driver reports ({s.gpu.memory_mib_driver:,} MiB)."))
    if s.tp * s.pp > 1:
        slips.append((_ratio_of(lambda: conc_with(weights_bytes=s.w.bytes * s.tp * s.pp), conc),
                      f"That puts all the weights on every GPU: each holds 1/{s.tp * s.pp} "
                      "of them."))
        whole = kv_cache(spec, n, kv_dtype=s.kv_dtype).total_bytes
        mine = kv_cache(spec, n, kv_dtype=s.kv_dtype, tp=s.tp, pp=s.pp).total_bytes
        if "mla" in _kinds(spec) and whole == mine * s.pp:
            slips.append((float(s.tp),
                          f"That splits the MLA latent over the {s.tp} GPUs: it is not split, "
                          "every GPU keeps all of it."))
        elif mine and whole != mine:
            slips.append((mine / whole,
                          "That charges each GPU the whole model's cache: each holds only its "
                          "share of the KV heads (and of the layers, with pipeline stages)."))
    slips += _kv_slips(spec, s.kv_dtype, n, s.tp, count=True)
    if _as_full(spec) != spec:
        slips.append((_ratio_of(lambda: _pool(_as_full(spec), s.w, s.gpu, n, s.kv_dtype, s.tp,
                                              s.pp).max_concurrency, conc),
                      "That charges the sliding-window layers the whole conversation: each "
                      "reserves only its window and the tokens in flight."))
    uniform = b.num_groups <= 1
    givens = [
        s.tokens_given(),
        ("GPU memory the driver reports", (f"{s.gpu.memory_mib_driver:,} MiB = "
                                           if s.gpu.memory_mib_driver else "")
         + f"{b.total_bytes:,} B"),
        ("gpu_memory_utilization", f"{b.gpu_mem_util:g}"),
        ("Weights on each GPU", f"{b.weights_bytes:,} B ({fmt_gib(b.weights_bytes)})"
         + (f", 1/{s.tp * s.pp} of {fmt_gib(s.w.bytes)}" if s.tp * s.pp > 1 else "")),
        ("Reserve (activations, CUDA context, graphs)", fmt_gib(b.reserve_bytes)),
        ("Block (vLLM)", f"{b.effective_block_size:,} tokens; one page (a block of one layer) = "
                         f"{b.page_bytes:,} B on each GPU; a block holds one page in each of "
                         f"{b.group_size:,} layers"
         + ("" if uniform else f" ({b.num_groups} groups of layers share the blocks)")),
        (f"Blocks one {n:,}-token conversation reserves", f"{b.blocks_per_request:,}"
         + ("" if uniform else f" ({_reserve_rule(spec)})")),
    ]
    q = Question(
        qid="tour-3", level="mid", value=conc, unit="sequences", ask_unit="sequences",
        floor_ok=True, kv_hints=False,
        prompt=(f"vLLM serves {s.name} on {_where(s.gpu, s.tp, s.pp)} (gpu_memory_utilization "
                f"{b.gpu_mem_util:g}, a {fmt_gib(b.reserve_bytes)} reserve, KV cache in {s.kvd}). "
                + ("Each GPU holds its share of the weights and of every conversation's cache, "
                   "so count one GPU. " if s.tp * s.pp > 1 else "")
                + f"How many {n:,}-token conversations fit in its KV pool at once?"),
        answer=(f"**{conc:,.2f}**, so {math.floor(conc):,} whole ones: the pool is "
                f"{fmt_gib(b.kv_pool_bytes)} per GPU after the weights "
                f"({fmt_gib(b.weights_bytes)}) and the reserve. This is the figure vLLM logs at "
                f"start-up (\"Maximum concurrency for {n:,} tokens per request\"): its worst case, "
                "every conversation at its full length."),
        solution=(f"pool = ceil({b.total_bytes:,} B x {b.gpu_mem_util:g}) - {b.weights_bytes:,} B "
                  f"weights - {b.reserve_bytes:,} B reserve = {b.kv_pool_bytes:,} B -> "
                  f"{b.kv_pool_bytes:,} // {b.page_bytes:,} // {b.group_size} = "
                  f"{b.num_blocks:,} blocks; one conversation reserves "
                  f"{b.blocks_per_request:,}: {b.num_blocks:,} / {b.blocks_per_request:,} = "
                  f"{conc:,.2f}"),
        mistakes=_slips(*slips))
    return Lesson(
        stop=s.stop, question=q, givens=tuple(givens),
        figure=("Budget: KV pool per GPU", f"{fmt_gib(b.kv_pool_bytes)} = {b.num_blocks:,} blocks "
                                           f"of {b.effective_block_size:,} tokens"),
        recap=(f"The KV pool is what is left of {b.gpu_mem_util:g} x the GPU's memory after the "
               f"weights and the reserve: {fmt_gib(b.kv_pool_bytes)} per GPU.",
               f"Conversations that fit = blocks in the pool / blocks one reserves: "
               f"{b.num_blocks:,} / {b.blocks_per_request:,} = {conc:,.2f}."),
        discuss=("To serve twice as many conversations, would you buy a second GPU, halve the "
                 "context, or switch the cache to FP8? What does each cost?"))


def _reserve_rule(spec: ModelSpec) -> str:
    """How vLLM's groups of this model's layers reserve blocks for one request, in words."""
    kinds = _kinds(spec)
    rules = []
    if kinds & {"full", "mla"}:
        rules.append("a full-attention group for the whole conversation")
    if kinds & {"sliding", "chunked"}:
        rules.append("a sliding-window group for its window and the tokens in flight")
    if "state" in kinds:
        rules.append("a recurrent group the blocks of its state (more with prefix caching)")
    return "over every group of layers: " + "; ".join(rules)


def _weights_read_text(spec: ModelSpec, w: Weights) -> str:
    """Which weights one decode step of one token reads."""
    if w.input_embedding_bytes:
        text = (f"every weight but the untied input embedding table "
                f"({fmt_gb(w.input_embedding_bytes)}), of which the token gathers one "
                f"{w.embedding_row_bytes:,} B row")
    elif spec.params is not None and spec.params.tied:
        text = "every weight (the tied embedding is read whole, as the output head)"
    else:
        text = "every weight"
    if spec.moe is not None:
        m = spec.moe
        text += (f"; of the routed experts only the {m.top_k:,} of {m.num_experts:,} its token "
                 f"is routed to, in each of the {m.layers:,} MoE layers")
    return text


def _stop4(s: _Setup) -> Lesson:
    spec, n = s.spec, s.n
    _pool(spec, s.w, s.gpu, n, s.kv_dtype, s.tp, s.pp)  # no speed for what does not fit
    st = step_time(spec, s.w, context=n, batch=1, bandwidth_gbs=s.bw, kv_dtype=s.kv_dtype,
                   tp=s.tp, pp=s.pp, peak_tflops=s.gpu.peak_tflops(s.w.dtype),
                   attention_tflops=s.gpu.attention_tflops(s.kv_dtype))
    # The stop teaches the ideal bound; what a server takes is the calibrated estimate beside it.
    real = estimate_step(spec, st, CALIBRATED, tp=s.tp, link_gbs=s.gpu.tp_link_gbs)
    real_text = (f"; a real engine: {fmt_seconds(real.time_s)} ({real.tokens_per_s:,.1f} "
                 "tokens/s), the calibrated estimate")
    read = s.w.read_per_step(spec, 1)  # the Decode step time page's weights read, whole model
    w_gpu = st.weight_read_bytes  # one GPU's share
    table = s.w.input_embedding_bytes - s.w.embedding_row_bytes
    idle = s.w.bytes - read - table  # experts no token of this step is routed to
    readings = []
    if table > 0:
        readings.append((read + table, "That reads the whole input embedding table: a token "
                                       f"gathers one {s.w.embedding_row_bytes:,} B row of it."))
    if idle > 0 and spec.moe is not None:
        readings.append((read + idle, f"That reads all {spec.moe.num_experts:,} experts of each "
                                      f"MoE layer: one token is routed to {spec.moe.top_k:,} of "
                                      "them, and only those are read."))
    if table > 0 and idle > 0:
        readings.append((s.w.bytes, "That reads every weight the GPU holds: the step skips the "
                                    "embedding table (one row is gathered) and the experts its "
                                    "token is not routed to."))
    tp_note = (f" on each GPU at tensor parallel {s.tp} (1/{s.tp} of {read:,} B)"
               if s.tp > 1 else "")
    givens = [("Weights one decode step reads", f"{w_gpu:,} B ({fmt_gb(w_gpu)}){tp_note}: "
                                                 f"{_weights_read_text(spec, s.w)}"),
              ("Memory bandwidth", f"{s.bw:,.0f} GB/s (1 GB = 10^9 B)")]
    cross = st.crossover_context
    if cross is not None and cross <= spec.max_context:
        probe = step_time(spec, s.w, context=cross, batch=1, bandwidth_gbs=s.bw,
                          kv_dtype=s.kv_dtype, tp=s.tp, pp=s.pp, find_crossover=False)
        growth = step_time(spec, s.w, context=cross + 1, batch=1, bandwidth_gbs=s.bw,
                           kv_dtype=s.kv_dtype, tp=s.tp, pp=s.pp,
                           find_crossover=False).kv_read_bytes - probe.kv_read_bytes
        fixed = probe.kv_read_bytes - growth * cross
        givens.append(("Cache one step reads, per token of context" +
                       (" (each GPU)" if s.tp > 1 else ""),
                       f"{growth:,} B" + (f", plus {fixed:,} B from the layers whose windows "
                                          "are full" if fixed else "")))
        slips = [((crossover_context(spec, wrong, 1, s.kv_dtype, tp=s.tp) or 0) / cross, why)
                 for wrong, why in readings]
        q = Question(
            qid="tour-4", level="mid", value=cross, unit="tokens", ask_unit="tokens",
            kv_hints=False,
            prompt=(f"At batch 1, each decode step of {s.name} reads the weights that token "
                    "uses once, and the sequence's whole cache. From what context length "
                    "(tokens) does the cache read cost at least as much as the weight read: "
                    "where is the crossover?"),
            answer=(f"**{cross:,} tokens**, within the model's limit of {spec.max_context:,}."),
            solution=(f"smallest N with KV read(N) >= {w_gpu:,} B of weights read per step: "
                      + (f"N = ceil({w_gpu:,} / {growth:,}) = {cross:,}" if not fixed else
                         f"N = {cross:,}")),
            mistakes=_slips(*slips))
        figure = (f"Decode step time: step time at {n:,} tokens, batch 1, ideal bound",
                  f"{fmt_seconds(st.step_time_s)} ({st.tokens_per_s:,.1f} tokens/s){real_text}")
        recap = (f"At batch 1 a step reads {fmt_gb(w_gpu)} of weights and {growth:,} B of cache "
                 "per token of context" + (" on each GPU" if s.tp > 1 else "") + ".",
                 f"Past {cross:,} tokens the cache is the larger read; a larger batch moves that "
                 "point left, an FP8 cache moves it right.")
    else:
        kv = st.kv_read_bytes + st.state_read_bytes
        givens.append((f"Cache one step reads at {n:,} tokens" +
                       (" (each GPU)" if s.tp > 1 else ""),
                       f"{kv:,} B ({fmt_gb(kv)})" + (f", of which {st.state_read_bytes:,} B "
                                                      "recurrent state"
                                                      if st.state_read_bytes else "")))
        tps = st.tokens_per_s

        def tps_with(wrong: int) -> float:
            return step_time(spec, s.w, context=n, batch=1, bandwidth_gbs=s.bw,
                             kv_dtype=s.kv_dtype, tp=s.tp, pp=s.pp, weight_read_bytes=wrong,
                             find_crossover=False).tokens_per_s

        slips = [(tps_with(wrong) / tps, why) for wrong, why in readings]
        slips.append((s.bw * GB / w_gpu / tps, "That leaves out the cache: every step reads the "
                                               "whole cache of the sequence too."))
        slips.append((GiB / GB, "That takes GB/s as GiB/s: bandwidth is decimal, 1 GB/s = "
                                "10^9 B/s."))
        why_not = ("This model's cache stops growing, so at batch 1 reading it never costs as "
                   "much as reading the weights: there is no crossover." if cross is None else
                   f"At batch 1 the cache read does not reach the weight read within the "
                   f"model's limit of {spec.max_context:,} tokens: the weights stay the larger "
                   "read.")
        q = Question(
            qid="tour-4", level="mid", value=tps, unit="tokens/s", ask_unit="tokens/s",
            kv_hints=False,
            prompt=(f"One sequence of {n:,} tokens decodes alone on {_where(s.gpu, s.tp, 1)}. "
                    f"Each step reads the weights its token uses once, and the sequence's whole "
                    f"cache, at {s.bw:,.0f} GB/s. How many tokens per second is that?"),
            answer=(f"**{tps:,.1f} tokens/s**, the ideal bound: every byte at the full "
                    f"{s.bw:,.0f} GB/s and nothing else. A real engine adds a fixed cost per "
                    f"step and reads at less than the peak: about {real.tokens_per_s:,.1f} "
                    f"tokens/s (the calibrated estimate). {why_not}"),
            solution=(f"({w_gpu:,} + {kv:,}) B / {s.bw:,.0f} GB/s = "
                      f"{st.step_time_s * 1e3:,.3f} ms per token -> {tps:,.1f} tokens/s"),
            mistakes=_slips(*slips))
        figure = ("Decode step time: share of the step reading KV, ideal bound",
                  f"{st.kv_share:.0%}{real_text}")
        recap = (f"A step reads {fmt_gb(w_gpu)} of weights and {fmt_gb(kv)} of cache at "
                 f"{n:,} tokens" + (" on each GPU" if s.tp > 1 else "") + ".",
                 "A larger batch reads the same weights for more tokens, so tokens/s rise until "
                 "the caches dominate.")
    return Lesson(stop=s.stop, question=q, givens=tuple(givens), figure=figure, recap=recap,
                  discuss=("Why does a larger batch make each step a little longer but the GPU's "
                           "throughput much higher? Where does that stop?"))


def _fits(s: _Setup) -> bool:
    try:
        _pool(s.spec, s.w, s.gpu, s.n, s.kv_dtype, s.tp, s.pp)
    except ValueError:
        return False
    return True


def _stop5(s: _Setup) -> Lesson:
    spec, n = s.spec, s.n
    peak = s.gpu.peak_tflops(s.w.dtype)
    if peak is None:
        raise ValueError(f"{s.gpu.name} has no dense peak for {s.w.dtype.upper()} weights in "
                         "the registry: pick another GPU for this stop")
    ridge = ridge_point(peak, s.bw)
    fits = _fits(s)
    d1 = decode_point(spec, s.w, batch=1, context=n, kv_dtype=s.kv_dtype, tp=s.tp) if fits \
        else None
    decode = (f" Decode of one {n:,}-token sequence does {d1.intensity:,.2f} FLOP/B, "
              f"{ridge / d1.intensity:,.0f} times less: it waits for memory." if d1 else "")
    q = Question(
        qid="tour-5", level="mid", value=ridge, unit="FLOP/B", ask_unit="FLOP/B",
        prompt=(f"{s.gpu.name} does {peak:,.1f} TFLOPS (dense, {s.w.dtype.upper()}) and moves "
                f"{s.bw:,.0f} GB/s. How many floating-point operations (FLOPs) per byte must "
                "work do before the arithmetic, not memory, limits it: where is its ridge "
                "point?"),
        answer=f"**{ridge:,.0f} FLOP/B**.{decode}",
        solution=(f"{peak:,.1f} x 10^12 FLOP/s / ({s.bw:,.0f} x 10^9 B/s) = {ridge:,.1f} "
                  "FLOP/B"),
        mistakes=_slips((1000.0, "A thousand times too many: TFLOPS are 10^12 and GB/s 10^9."),
                        (0.001, "A thousand times too few: TFLOPS are 10^12 and GB/s 10^9.")))
    figure = ((f"Roofline: decode at batch 1, {n:,} tokens", f"{d1.intensity:,.2f} FLOP/B")
              if d1 else ("Roofline: decode", f"not placed: {s.name} does not fit this setup"))
    return Lesson(
        stop=s.stop, question=q,
        givens=((f"Dense peak ({s.w.dtype.upper()} weights)", f"{peak:,.1f} TFLOPS "
                 "(10^12 FLOP/s)"),
                ("Memory bandwidth", f"{s.bw:,.0f} GB/s (10^9 B/s)")),
        figure=figure,
        recap=(f"{s.gpu.name} needs {ridge:,.0f} FLOPs per byte read to keep its arithmetic "
               "busy.",
               (f"Decode of one sequence does {d1.intensity:,.2f}, so it waits for memory; a "
                "larger batch raises the weights' intensity, not the cache's." if d1 else
                "Decode does a few FLOPs per byte, so it waits for memory; a larger batch "
                "raises the weights' intensity, not the cache's.")),
        discuss=("Prefill runs thousands of tokens per weight read, decode one per sequence. "
                 "What does that say about running them on the same GPU at once?"))


def _stop6(s: _Setup) -> Lesson:
    spec = s.spec
    prompt, output = request_tokens(spec)
    ctx = prompt + output
    b = _logged_capacity(spec, s.w, s.gpu, ctx, s.kv_dtype, s.tp, s.pp)
    _none_fits(b, ctx, s.gpu)
    conc = b.max_concurrency

    def conc_at(tokens: int) -> float:
        return _logged_capacity(spec, s.w, s.gpu, tokens, s.kv_dtype, s.tp, s.pp).max_concurrency

    slips = [
        (_ratio_of(lambda: conc_at(prompt), conc),
         f"That counts the prompt only: a request's cache also holds its output, up to {ctx:,} "
         "tokens in all."),
        (_ratio_of(lambda: conc_at(output), conc),
         f"That counts the output only: a request's cache holds its {prompt:,}-token prompt "
         "too."),
    ]
    if s.n != ctx:
        slips.append((_ratio_of(lambda: conc_at(s.n), conc),
                      f"That is stop 3's {s.n:,}-token conversations: these requests hold at "
                      f"most {ctx:,} tokens."))
    slips += _kv_slips(spec, s.kv_dtype, ctx, s.tp, count=True)
    uniform = b.num_groups <= 1
    givens = [("Request", f"{prompt:,} prompt + {output:,} output tokens = {ctx:,} tokens of "
                          "cache at most"),
              ("Blocks in the KV pool (stop 3)", f"{b.num_blocks:,}, of "
                                                 f"{b.effective_block_size:,} tokens each")]
    if not uniform:
        givens.append((f"Blocks one {ctx:,}-token request reserves",
                       f"{b.blocks_per_request:,} (over {b.num_groups} groups of layers)"))
    q = Question(
        qid="tour-6", level="mid", value=conc, unit="sequences", ask_unit="sequences",
        floor_ok=True, kv_hints=False,
        prompt=(f"Requests of {prompt:,} prompt tokens and {output:,} output tokens each hold up "
                f"to {ctx:,} tokens of cache. At start-up vLLM logs how many such requests its "
                "pool holds if every one is at its full length (\"Maximum concurrency for "
                f"{ctx:,} tokens per request\"). What does it log?"),
        answer=(f"**{conc:,.2f}** ({b.num_blocks:,} blocks / {b.blocks_per_request:,} blocks per "
                "request): vLLM's logged worst case, every request at its full length. A running "
                "server usually holds more at once: a request holds its prompt and only the "
                "output so far, and a finished one frees its blocks. Where the pool really "
                "starts to bind (requests wait for blocks or are preempted) is what the Serving "
                "frontier measures."),
        solution=(f"{b.num_blocks:,} blocks / {b.blocks_per_request:,} blocks per request of "
                  f"{ctx:,} tokens = {conc:,.2f}"),
        mistakes=_slips(*slips))
    return Lesson(
        stop=s.stop, question=q, givens=tuple(givens),
        figure=("vLLM start-up lines: GPU KV cache size", f"{b.kv_capacity_tokens:,} tokens"),
        recap=(f"vLLM's start-up line counts every request at its full {ctx:,} tokens: "
               f"{conc:,.2f} of them.",
               "A running server holds more, as requests are partway through their output; the "
               "Serving frontier shows where the pool really binds."),
        discuss=("What happens when every running request grows at once and the pool runs out? "
                 "Who waits, who is preempted, and what does it cost them?"))


def _stop7(s: _Setup) -> Lesson:
    spec, n = s.spec, s.n
    b16 = _pool(spec, s.w, s.gpu, n, "bf16", s.tp, s.pp)
    b8 = _pool(spec, s.w, s.gpu, n, "fp8", s.tp, s.pp)
    _none_fits(b16, n, s.gpu)
    ratio = b8.max_concurrency / b16.max_concurrency
    k16 = kv_cache(spec, n, kv_dtype="bf16", tp=s.tp, pp=s.pp)
    k8 = kv_cache(spec, n, kv_dtype="fp8", tp=s.tp, pp=s.pp)
    what = "latent" if _kinds(spec) == {"mla"} else "K/V"
    givens = [s.tokens_given(),
              (f"{what} per token on each GPU", f"{k16.kv_bytes_per_token_nominal:,} B in BF16, "
                                                f"{k8.kv_bytes_per_token_nominal:,} B in FP8"),
              ("Conversations that fit in BF16" + (" (stop 3)" if s.kv_dtype == "bf16" else ""),
               f"{b16.max_concurrency:,.2f}")]
    state = ""
    if k16.state_bytes:
        givens.append(("Recurrent state per conversation on each GPU",
                       f"{k16.state_bytes:,} B ({fmt_bytes(k16.state_bytes)}), in BF16 whatever "
                       "the KV format"))
        state = (f" The {len(spec.state_layers):,} recurrent layers' state stays in BF16 "
                 "whatever the KV format.")
    if b16.effective_block_size != b8.effective_block_size:
        givens.append(("Block (vLLM)", f"{b16.effective_block_size:,} tokens in BF16, "
                                       f"{b8.effective_block_size:,} in FP8: a hybrid's page must "
                                       "hold one whole recurrent state"))
    exact = _near(ratio, 2.0, 0.005)
    if exact:
        why = "The pool stays the same; each conversation's cache takes half the bytes."
    else:
        reasons = []
        if k16.state_bytes:
            reasons.append(f"the recurrent state ({fmt_bytes(k16.state_bytes)} per conversation) "
                           "does not shrink")
        if b16.effective_block_size != b8.effective_block_size:
            reasons.append("vLLM sizes a hybrid's pages to hold a whole state, so the blocks "
                           "change size with the format")
        if not reasons:
            reasons.append("the blocks are rounded to whole pages")
        why = ("Not exactly 2: " + " and ".join(reasons) + ".")
    slips = [(1 / ratio, "That is the inverse: FP8 fits more conversations, so the answer is "
                         "above 1.")]
    if not exact:
        slips.append((2.0 / ratio, f"Exactly 2 would hold if every byte of a conversation "
                                   f"halved: {why[len('Not exactly 2: '):]}"))
    q = Question(
        qid="tour-7", level="mid", value=ratio, unit="x", ask_unit="x", kv_hints=False,
        prompt=(f"Switch {s.name}'s KV cache from BF16 ({_bytes_a_number('bf16')}) to FP8 "
                f"({_bytes_a_number('fp8')}), on the same GPU with the same settings.{state} "
                "How many times more "
                f"{n:,}-token conversations fit?"),
        answer=(f"**{ratio:,.2f}x**: from {b16.max_concurrency:,.2f} to {b8.max_concurrency:,.2f}. "
                f"{why} The price is accuracy, which you measure."),
        solution=(f"{b8.max_concurrency:,.4f} / {b16.max_concurrency:,.4f} = {ratio:,.3f} "
                  f"({b8.num_blocks:,} FP8 blocks / {b8.blocks_per_request:,} per conversation; "
                  f"{b16.num_blocks:,} BF16 blocks / {b16.blocks_per_request:,})"),
        mistakes=_slips(*slips))
    s8 = step_time(spec, s.w, context=n, batch=1, bandwidth_gbs=s.bw, kv_dtype="fp8", tp=s.tp,
                   pp=s.pp)
    c8 = s8.crossover_context
    cross = ("never: the cache stops growing" if c8 is None else
             f"beyond the model's limit of {spec.max_context:,} tokens" if c8 > spec.max_context
             else f"{c8:,} tokens")
    return Lesson(
        stop=s.stop, question=q, givens=tuple(givens),
        figure=("Decode step time with an FP8 cache: crossover at batch 1", cross),
        recap=(f"An FP8 cache fits {ratio:,.2f}x as many {n:,}-token conversations"
               + (" and halves every K/V byte a step reads." if exact else
                  ", not 2x: " + why[len("Not exactly 2: "):]),
               "It costs accuracy, which the Measured cost of shrinking page measures: check it "
               "on your own evaluations before turning it on."),
        discuss=("Which would you expect FP8 to hurt more: a short chat, or finding one fact in "
                 "a long document? How would you measure it?"))


# -- the answer key ---------------------------------------------------------------------------

def answer_key(spec: ModelSpec, w: Weights, gpu: GPU, *, kv_dtype: str = "bf16",
               bandwidth_gbs: float | None = None, tp: int = 1, pp: int = 1,
               name: str | None = None) -> str:
    """The seven lessons for this setup as one Markdown document: for each stop the givens, the
    question, the answer and its working, the slips the grader names, the page's figure, the
    recap and the discussion question. A stop that cannot be asked says why."""
    name = spec.name if name is None else name
    bw = gpu.bandwidth_gbs if bandwidth_gbs is None else bandwidth_gbs
    lines = [f"# KV Cache Lab tour: answer key for {name}", "",
             f"- GPU: {_where(gpu, tp, pp)}, {bw:,.0f} GB/s",
             f"- KV cache: {kv_dtype.upper()}; weights: {w.dtype.upper()}"
             + (f" (experts {w.expert_dtype.upper()})" if w.expert_dtype != w.dtype else ""),
             f"- Conversation: {conversation_tokens(spec):,} tokens (the model's limit is "
             f"{spec.max_context:,})",
             "- Units: KiB, MiB, GiB are 2^10, 2^20, 2^30 bytes; GB and GB/s are 10^9.",
             "- Answers are graded within 2%, or at the precision typed; a count of whole "
             "conversations must be the whole number below.", ""]
    for stop in STOPS:
        lines += [f"## Stop {stop.number}: {stop.title}", "", f"*{stop.teaches}*", ""]
        try:
            les = lesson(stop.number, spec, w, gpu, kv_dtype=kv_dtype, bandwidth_gbs=bw, tp=tp,
                         pp=pp, name=name)
        except ValueError as exc:
            lines += [f"Not asked for this setup: {exc}.", ""]
            continue
        q = les.question
        lines += ["| Given | Value |", "|---|---|"]
        lines += [f"| {_cell(k)} | {_cell(v)} |" for k, v in les.givens]
        lines += ["", f"**Predict (in {q.ask_unit or q.unit}).** {q.prompt}", "",
                  f"**Answer.** {q.answer}", "", "```", q.solution, "```", ""]
        if q.mistakes:
            lines.append("**Slips the grader names:**")
            lines += [f"- {why}" for _, why in q.mistakes]
            lines.append("")
        label, value = les.figure
        lines += [f"**On the page.** {label}: {value}.", "",
                  f"**Recap.** {les.recap[0]}  ", les.recap[1], "",
                  f"**Discuss.** {les.discuss}", ""]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
