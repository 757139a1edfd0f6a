"""What every stop of the guided tour is made of: the Stop and the Lesson, the conversation and
the request it asks about, the words for the model's layers, the slips the grader names, and the
setup a stop is computed for (kvcalc.teach.tour assembles the stops)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..cache.deployment import Deployment
from ..cache.weight_bytes import Weights
from ..config.catalog import GPU
from ..core.dtypes import KV_DTYPES, get_dtype
from ..core.model import ChunkedLocal, FullAttention, Layer, MLALatent, ModelSpec, SlidingWindow
from ..engines.budget import Budget, budget
from .quiz import TOLERANCE, Question

CONVERSATION = 8192  # tokens of the "8K conversation" the tour asks about (at most the limit)
PROMPT, OUTPUT = 512, 256  # the serving frontier's default request


@dataclass(frozen=True)
class Stop:
    number: int
    title: str
    page: str  # the full page's name in the app (its URL path; webui/pages.py finds its script)
    teaches: str  # one sentence: what the page shows


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

KIND_WORDS = {
    "full": "full-attention",
    "sliding": "sliding-window",
    "chunked": "chunked-attention",
    "mla": "multi-head latent attention (MLA)",
    "shared": "KV-sharing",
    "state": "recurrent",
    "none": "cache-free",
    "cross": "cross-attention",
}
FLAVORS = {
    "gated_deltanet": "Gated DeltaNet",
    "mamba": "Mamba",
    "mamba2": "Mamba-2",
    "linear_attention": "linear attention",
    "kda": "Kimi Delta Attention",
    "rwkv": "RWKV",
}
ATTENTION_KINDS = ("full", "sliding", "chunked")


def kind_word(layer) -> str:
    """A layer's kind in words, with its size: "sliding-window (1,024 tokens)"."""
    word = KIND_WORDS.get(layer.kind, layer.kind)
    if layer.kind == "sliding":
        return f"{word} ({layer.window:,}-token window)"
    if layer.kind == "chunked":
        return f"{word} ({layer.chunk:,}-token chunks)"
    if layer.kind == "state":
        return f"{word} ({FLAVORS.get(layer.flavor, layer.flavor.replace('_', ' '))})"
    return word


def layer_groups(spec: ModelSpec) -> list[tuple[str, int, Layer]]:
    """(words, count, a layer) for each kind and size, in order of first appearance."""
    seen: dict[str, list] = {}
    for layer in spec.layers:
        seen.setdefault(kind_word(layer), [0, layer])[0] += 1
    return [(word, n, layer) for word, (n, layer) in seen.items()]


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def layers_phrase(spec: ModelSpec) -> str:
    """ "32 full-attention layers" or "62 layers: 10 full-attention and 52 sliding-window ..."."""
    groups = layer_groups(spec)
    if len(groups) == 1:
        return f"{plural(spec.num_layers, 'layer')}, all {groups[0][0]}"
    parts = [f"{n:,} {word}" for word, n, _ in groups]
    return f"{spec.num_layers:,} layers: " + ", ".join(parts[:-1]) + f" and {parts[-1]}"


def kinds_of(spec: ModelSpec) -> set[str]:
    return {layer.kind for layer in spec.layers}


def stores_sentence(spec: ModelSpec) -> str:
    """What each kind of layer this model has stores, one clause per kind."""
    kinds = kinds_of(spec)
    parts = []
    if kinds & set(ATTENTION_KINDS):
        parts.append(
            "an attention layer stores a key (K) and a value (V) vector for each of its "
            "KV heads, for every token"
        )
    if "sliding" in kinds:
        parts.append(
            "a sliding-window layer stores each new token too, and drops the tokens "
            "that leave its window"
        )
    if "chunked" in kinds:
        parts.append(
            "a chunked-attention layer stores each new token too, and drops the "
            "tokens of the chunks before the current one"
        )
    if "mla" in kinds:
        parts.append(
            "an MLA layer stores no per-head K and V: one compressed latent vector and "
            "one rotary-position (RoPE) key per token, from which every head's K and V "
            "are rebuilt"
        )
    if "state" in kinds:
        parts.append(
            "a recurrent layer stores nothing per token: it keeps one fixed-size state "
            "per conversation"
        )
    if "shared" in kinds:
        parts.append("a KV-sharing layer stores nothing: it reads the cache an earlier layer wrote")
    if "none" in kinds:
        parts.append("a cache-free layer (no attention) stores nothing")
    if "cross" in kinds:
        parts.append("a cross-attention layer keeps an image's K and V, once per image")
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."


def geometry_givens(spec: ModelSpec) -> list[tuple[str, str]]:
    """The config fields per-token bytes come from, per kind of layer that stores tokens."""
    out: list[tuple[str, str]] = []
    geos: dict[tuple, list[str]] = {}
    for word, _, layer in layer_groups(spec):
        key: tuple
        if isinstance(layer, (FullAttention, SlidingWindow, ChunkedLocal)):  # ATTENTION_KINDS
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
            out.append(
                (
                    f"{pre}head dimension (head_dim)",
                    f"{hd:,}" if hd == vd else f"K {hd:,}, V {vd:,}",
                )
            )
        else:
            _, rank, rope, q = key
            out.append((f"{pre}latent (kv_lora_rank)", f"{rank:,} numbers"))
            out.append((f"{pre}RoPE key (qk_rope_head_dim)", f"{rope:,} numbers"))
            out.append((f"{pre}query heads (num_attention_heads)", f"{q:,}"))
    for word, _, layer in layer_groups(spec):
        if isinstance(layer, SlidingWindow):
            out.append(("Sliding window (sliding_window)", f"{layer.window:,} tokens"))
        if isinstance(layer, ChunkedLocal):
            out.append(("Attention chunk (attention_chunk_size)", f"{layer.chunk:,} tokens"))
        if layer.extra is not None:
            out.append(
                (f"{word.capitalize()} layers also keep", layer.extra.formula() + " per token")
            )
    return [(label[0].upper() + label[1:], value) for label, value in out]


def bytes_a_number(kv_dtype: str) -> str:
    per = get_dtype(kv_dtype, KV_DTYPES).bytes_per_element
    return f"{per:g} byte{'' if per == 1 else 's'} a number"


def format_given(kv_dtype: str) -> tuple[str, str]:
    return ("KV cache format", f"{kv_dtype.upper()}, {bytes_a_number(kv_dtype)}")


def where_text(gpu: GPU, tp: int, pp: int) -> str:
    if tp * pp == 1:
        return gpu.name
    split = [f"tensor parallel {tp}"] + ([f"pipeline parallel {pp}"] if pp > 1 else [])
    return f"{tp * pp} x {gpu.name} ({', '.join(split)})"


# -- slips ------------------------------------------------------------------------------------


def is_near(a: float, b: float, tol: float = TOLERANCE) -> bool:
    return abs(a / b - 1) < tol if b else a == 0


def slips_of(*pairs: tuple[float | None, str]) -> tuple[tuple[float, str], ...]:
    """Named mistakes as (answer / right answer, message): those that would grade as right
    are dropped, and those that give the same answer are joined into one message."""
    out: list[list] = []
    for ratio, why in pairs:
        if ratio is None or not math.isfinite(ratio) or ratio <= 0 or is_near(ratio, 1.0):
            continue
        for entry in out:
            if is_near(ratio, entry[0]):
                entry[1] += f" Or: {why[0].lower() + why[1:]}"
                break
        else:
            out.append([ratio, why])
    return tuple((r, w) for r, w in out)


def times_text(ratio: float) -> str:
    """ "Twice the answer: ", "Half the answer: "... for a round factor; "" for any other."""
    for r, text in (
        (2, "Twice the answer"),
        (0.5, "Half the answer"),
        (8, "Eight times the answer"),
        (1 / 8, "An eighth of the answer"),
    ):
        if is_near(ratio, r):
            return f"{text}: "
    return ""


def lead_text(ratio: float, why: str) -> str:
    """A slip's message led by its factor when that is round: "Twice the answer: that ..."."""
    head = times_text(ratio)
    return head + why if head else why[0].upper() + why[1:]


def as_full(spec: ModelSpec) -> ModelSpec:
    """The same model with every sliding or chunked layer keeping every token."""

    def full(layer):
        if layer.kind in ("sliding", "chunked"):
            return FullAttention(
                kv_heads=layer.kv_heads,
                head_dim=layer.head_dim,
                v_head_dim=layer.v_head_dim,
                q_heads=layer.q_heads,
                extra=layer.extra,
            )
        return layer

    return spec.with_layers(full(layer) for layer in spec.layers)


def kv_parts(spec: ModelSpec, kv_dtype: str, n: int, tp: int = 1) -> dict[str, int]:
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


def kv_slips(
    spec: ModelSpec,
    kv_dtype: str,
    n: int,
    tp: int = 1,
    *,
    count: bool = False,
    per_token: bool = False,
) -> list[tuple[float | None, str]]:
    """The slips of K/V arithmetic, as ratios of the wrong answer to the right one: for the
    bytes of one sequence at ``n`` tokens (with its recurrent state), or (``count``) for how
    many sequences fit, which falls as the bytes rise. ``per_token``: the bytes one token adds
    (no state), with the slips of counting layers."""
    p = kv_parts(spec, kv_dtype, n, tp)
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
        out.append(
            (
                ratio,
                lead_text(
                    ratio,
                    "that is what half the K/V bytes give. K and V are "
                    "two vectors per KV head: did you leave out the "
                    "factor 2?",
                ),
            )
        )
    if p["mla"]:
        ratio = r(total + p["mla"])
        out.append(
            (
                ratio,
                lead_text(
                    ratio,
                    "an MLA layer stores one latent per token, not a K "
                    "and a V: there is no factor 2.",
                ),
            )
        )
        out.append(
            (
                r(total - p["mla"] + p["mha"]),
                "That counts the K and V of every head, rebuilt from the latent: MLA "
                "caches only the latent and the RoPE key.",
            )
        )
    ratio = r(total + 7 * kv)
    bpe = d.bytes_per_element
    article = "An" if d.name.upper()[0] in "AEFHILMNORSX" else "A"  # an FP8, an INT4, a BF16
    out.append(
        (
            ratio,
            lead_text(
                ratio,
                f"that counts bits. {article} {d.name.upper()} number "
                f"is {bpe:g} byte{'' if bpe == 1 else 's'} "
                f"({d.bits:g} bits).",
            ),
        )
    )
    if p["att"] and p["q"] != p["att"]:
        layer = next(lay for lay in spec.layers if lay.kind in ATTENTION_KINDS)
        out.append(
            (
                r(total - p["att"] + p["q"]),
                f"That counts the {layer.q_heads:,} query heads (num_attention_heads): K and "
                f"V are stored once per KV head (num_key_value_heads = "
                f"{layer.kv_heads:,}).",
            )
        )
    stores = spec.kv_layers
    alike = len({lay.bytes_per_token(d) for lay in stores}) == 1
    if per_token and alike and len(stores) < spec.num_layers:
        out.append(
            (
                r(kv * spec.num_layers / len(stores)),
                f"That counts all {spec.num_layers:,} layers: only the {len(stores):,} that "
                "store tokens add bytes per token; the others store nothing per token.",
            )
        )
    if per_token and alike and len(stores) > 1:
        out.append(
            (
                r(kv / len(stores)),
                f"That is one layer's share: each of the {len(stores):,} layers that store "
                "tokens keeps its own.",
            )
        )
    return out


# -- the stops --------------------------------------------------------------------------------


def kv_pool(
    spec: ModelSpec, w: Weights, gpu: GPU, context: int, kv_dtype: str, tp: int, pp: int, **kw
) -> Budget:
    dep = Deployment(spec=spec, gpu=gpu, weights=w, tp=tp, pp=pp).but(kv_dtype=kv_dtype, **kw)
    b = budget(dep, context, find_max_context=False)
    if b.kv_pool_bytes <= 0:
        raise ValueError(
            f"{spec.name} does not fit on {gpu.name} with these settings, so no "
            "cache fits either: pick a larger GPU, tensor parallel or smaller "
            "weights in the sidebar for this stop"
        )
    return b


def logged_capacity(
    spec: ModelSpec, w: Weights, gpu: GPU, context: int, kv_dtype: str, tp: int, pp: int
) -> Budget:
    """vLLM's logged "Maximum concurrency for N tokens per request": its start-up worst case,
    every request at its full length. The one call the tour makes for capacity, so that a
    running-capacity figure (the batch a running server sustains) can take its place here."""
    return kv_pool(spec, w, gpu, context, kv_dtype, tp, pp)


def ratio_of(fn, right: float) -> float | None:
    """fn() / right, or None when fn cannot be computed (a slip that makes the model not fit)."""
    try:
        value = fn()
    except ValueError:
        return None
    return value / right if right else None


def none_fits(b: Budget, n: int, gpu: GPU) -> None:
    """Stops 3, 6 and 7 ask how many conversations fit: when none does, they are not asked."""
    if b.kv_pool_bytes <= 0 or b.max_concurrency <= 0 or not b.seq_bytes:
        raise ValueError(
            f"not even one conversation of {n:,} tokens fits on {gpu.name} with "
            "these settings (the weights and the reserve leave no room for its "
            "cache), so this stop has no question here: pick a larger GPU, more GPUs "
            "or a smaller weight format"
        )


def reserve_rule(spec: ModelSpec) -> str:
    """How vLLM's groups of this model's layers reserve blocks for one request, in words."""
    kinds = kinds_of(spec)
    rules = []
    if kinds & {"full", "mla"}:
        rules.append("a full-attention group for the whole conversation")
    if kinds & {"sliding", "chunked"}:
        rules.append("a sliding-window group for its window and the tokens in flight")
    if "state" in kinds:
        rules.append("a recurrent group the blocks of its state (more with prefix caching)")
    return "over every group of layers: " + "; ".join(rules)


@dataclass(frozen=True, kw_only=True)
class Setup:
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
    def deployment(self) -> Deployment:
        return Deployment(spec=self.spec, weights=self.w, gpu=self.gpu, tp=self.tp, pp=self.pp).but(
            kv_dtype=self.kv_dtype
        )

    @property
    def n(self) -> int:
        return conversation_tokens(self.spec)

    def tokens_given(self) -> tuple[str, str]:
        n = self.n
        note = (
            f" (the model's limit, max_position_embeddings; it cannot hold {CONVERSATION:,})"
            if n < CONVERSATION
            else ""
        )
        return ("Tokens in the conversation", f"{n:,}{note}")

    def per_gpu_note(self, whole: int, per_gpu: int) -> str:
        """What each GPU holds of ``whole`` bytes per token under tensor/pipeline parallel."""
        g = self.tp * self.pp
        if g == 1:
            return ""
        if per_gpu == whole:
            why = (
                "an MLA latent is not split"
                if "mla" in kinds_of(self.spec)
                else "every GPU keeps every head"
            )
            return f" for the whole model; each of the {g} GPUs holds all of it ({why})"
        if per_gpu * g == whole:
            return f" for the whole model; each of the {g} GPUs holds 1/{g} of it, {per_gpu:,} B"
        reasons = []
        if self.tp > 1 and any(
            lay.kv_heads is not None and lay.kv_heads < self.tp for lay in self.spec.kv_layers
        ):
            reasons.append("with fewer KV heads than GPUs a head is replicated")
        if self.pp > 1:
            reasons.append("a pipeline stage holds only its own layers")
        return f" for the whole model; each of the {g} GPUs holds {per_gpu:,} B" + (
            f" ({'; '.join(reasons)})" if reasons else ""
        )
