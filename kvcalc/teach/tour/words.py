"""The tour's words for a model's layers: kinds, sizes, what they store, their config fields."""

from __future__ import annotations

from ...config.catalog import GPU
from ...core.dtypes import KV_DTYPES, get_dtype
from ...core.model import ChunkedLocal, FullAttention, Layer, MLALatent, ModelSpec, SlidingWindow
from ..practice import plural
from ..prose import prose

TEXT = prose("tour")
KIND_WORDS: dict[str, str] = TEXT["kind_words"]  # "sliding": "sliding-window", ...
FLAVORS: dict[str, str] = TEXT["flavors"]  # a recurrent layer's flavor: "mamba2": "Mamba-2"
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
    if kinds & set(ATTENTION_KINDS):
        kinds.add("attention")
    text = "; ".join(clause for kind, clause in TEXT["stores"].items() if kind in kinds)
    return text[0].upper() + text[1:] + "."


def geometry_givens(spec: ModelSpec) -> list[tuple[str, str]]:
    """The config fields per-token bytes come from, per kind of layer that stores tokens."""
    out: list[tuple[str, str]] = []
    geos: dict[tuple, list[str]] = {}  # the givens of one geometry: the layers that have it
    for word, _, layer in layer_groups(spec):
        if isinstance(layer, (FullAttention, SlidingWindow, ChunkedLocal)):  # ATTENTION_KINDS
            hd, vd = layer.head_dim, layer.v_head_dim
            key: tuple = (
                ("KV heads (num_key_value_heads)", f"{layer.kv_heads:,}"),
                ("query heads (num_attention_heads)", f"{layer.q_heads:,}"),
                ("head dimension (head_dim)", f"{hd:,}" if hd == vd else f"K {hd:,}, V {vd:,}"),
            )
        elif isinstance(layer, MLALatent):
            key = (
                ("latent (kv_lora_rank)", f"{layer.kv_lora_rank:,} numbers"),
                ("RoPE key (qk_rope_head_dim)", f"{layer.qk_rope_head_dim:,} numbers"),
                ("query heads (num_attention_heads)", f"{layer.q_heads:,}"),
            )
        else:
            continue
        geos.setdefault(key, []).append(word.split(" (")[0])
    for key, words in geos.items():
        pre = "" if len(geos) == 1 else f"{' and '.join(words).capitalize()} layers: "
        out += [(pre + label, value) for label, value in key]
    for word, _, layer in layer_groups(spec):
        if isinstance(layer, SlidingWindow):
            out.append(("Sliding window (sliding_window)", f"{layer.window:,} tokens"))
        if isinstance(layer, ChunkedLocal):
            out.append(("Attention chunk (attention_chunk_size)", f"{layer.chunk:,} tokens"))
        if layer.extra is not None:
            also = layer.extra.formula() + " per token"
            out.append((f"{word.capitalize()} layers also keep", also))
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


def reserve_rule(spec: ModelSpec) -> str:
    """How vLLM's groups of this model's layers reserve blocks for one request, in words."""
    kinds = kinds_of(spec)
    rules = [rule for group, rule in TEXT["reserve"].items() if kinds & set(group.split("_"))]
    return "over every group of layers: " + "; ".join(rules)
