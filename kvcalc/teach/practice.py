"""Practice questions with realistic random parameters, every number computed here.

A seeded generator draws a model's geometry (layers, KV heads, head dimension, query heads) and
its KV format, then one question of each kind in turn: bytes per token, bytes per token read off
a config.json, a batch's cache, conversations that fit (vLLM's arithmetic), the batch-1
crossover, and the saving of GQA, FP8 or MLA. A class that shares the seed shares the same set.
``kvcalc.teach.quiz`` re-exports ``practice_questions``.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from ..cache.deployment import CacheFormat, Deployment
from ..config.hfconfig import spec_from_config
from ..core.units import GB, GiB, KiB, check_int
from ..engines.budget import budget, pool_defaults_text
from .question import Question

__all__ = ["practice_questions", "llama_like"]


def llama_like(layers: int, kv_heads: int, head_dim: int, q_heads: int | None = None) -> dict:
    """A Llama config.json with this geometry (query heads 4x the KV heads unless given)."""
    q = q_heads or kv_heads * 4
    return {
        "model_type": "llama",
        "num_hidden_layers": layers,
        "num_key_value_heads": kv_heads,
        "num_attention_heads": q,
        "head_dim": head_dim,
        "hidden_size": q * head_dim,
        "intermediate_size": 4 * q * head_dim,
        "vocab_size": 32000,
    }


_DTYPES = [("BF16", 2), ("FP16", 2), ("FP8", 1), ("FP32", 4)]
_KINDS = ("per_token", "config", "sequence", "concurrency", "crossover", "saving")


def practice_questions(seed: int, count: int = 8) -> list[Question]:
    """``count`` questions with realistic random parameters; the same seed gives the same set."""
    seed = check_int("seed", seed, 0, 2**31)
    count = check_int("count", count, 1, 50)
    rng = random.Random(seed)
    return [_make(rng, _KINDS[i % len(_KINDS)], i + 1) for i in range(count)]


def _geometry(rng: random.Random) -> tuple[int, int, int, int]:
    layers = rng.choice([24, 28, 32, 36, 40, 48, 60, 64, 80])
    kv = rng.choice([1, 2, 4, 8, 8, 16])
    head_dim = rng.choice([64, 128, 128, 256])
    q = kv * rng.choice([1, 2, 4, 8])
    return layers, kv, head_dim, q


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _a(n: float) -> str:
    """The article before a number read aloud: "an 80 GiB GPU", "an 8K context", "a 24 GiB"."""
    lead = f"{abs(n):.0f}"
    # eight..., eighty..., and eleven / eighteen (thousand, million) are read with a vowel
    return "an" if lead[0] == "8" or (len(lead) % 3 == 2 and lead[:2] in ("11", "18")) else "a"


@dataclass(frozen=True)
class _Drawn:
    """The model one practice question is about, as drawn: its geometry and KV format."""

    layers: int
    kv: int
    hd: int
    q: int
    dname: str
    db: int  # bytes per number

    @property
    def per(self) -> int:
        """KV bytes per token: 2 (K and V) x layers x KV heads x head dim x bytes."""
        return 2 * self.layers * self.kv * self.hd * self.db

    @property
    def text(self) -> str:
        """The model as a prompt names it."""
        return (
            f"{self.layers} layers, {_plural(self.kv, 'KV head')} of dimension {self.hd}, "
            f"KV cache in {self.dname}"
        )


def _make(rng: random.Random, kind: str, n: int) -> Question:
    layers, kv, hd, q = _geometry(rng)
    dname, db = rng.choice(_DTYPES)
    m = _Drawn(layers=layers, kv=kv, hd=hd, q=q, dname=dname, db=db)
    qid = f"p{n}"
    if kind == "config":
        return _from_config(rng, qid)
    return _MAKERS[kind](rng, m, qid)


def _per_token(rng: random.Random, m: _Drawn, qid: str) -> Question:
    per = m.per
    return Question(
        qid=qid,
        level="core",
        prompt=f"A model has {m.text}. How many bytes does one token add to its KV cache?",
        answer=f"{per:,} B ({per / KiB:g} KiB)",
        value=per,
        unit="B",
        ask_unit="B",
        solution=f"2 x {m.layers} layers x {m.kv} heads x {m.hd} x {m.db} B = {per:,} B",
    )


def _sequence(rng: random.Random, m: _Drawn, qid: str) -> Question:
    per = m.per
    ctx = rng.choice([2048, 4096, 8192, 16384, 32768, 131072])
    batch = rng.choice([1, 4, 8, 16, 32])
    total = per * ctx * batch
    return Question(
        qid=qid,
        level="core",
        prompt=f"A model has {m.text}. How much KV cache "
        f"{'does' if batch == 1 else 'do'} {_plural(batch, 'sequence')} "
        f"of {ctx:,} tokens need, in GiB?",
        answer=f"{total / GiB:,.3f} GiB",
        value=total,
        unit="B",
        ask_unit="GiB",
        solution=f"{per:,} B/token x {ctx:,} tokens x {batch} = {total:,} B = "
        f"{total / GiB:,.3f} GiB",
    )


def _concurrency(rng: random.Random, m: _Drawn, qid: str) -> Question:
    per, layers = m.per, m.layers
    gpu_gib = rng.choice([24, 40, 48, 80, 141])
    weights_gib = rng.choice([2, 4, 8, 14, 16])
    if weights_gib > gpu_gib * 0.6:
        weights_gib = 4
    ctx = rng.choice([2048, 4096, 8192, 16384])
    spec = spec_from_config(llama_like(layers, m.kv, m.hd, m.q))
    dt = {1: "fp8", 2: "bf16", 4: "fp32"}[m.db]
    dep = Deployment(
        spec=spec,
        memory_bytes=gpu_gib * GiB,
        weights_bytes=weights_gib * GiB,
        reserve_bytes=2 * GiB,
        cache=CacheFormat(kv_dtype=dt),
    )
    b = budget(dep, ctx, find_max_context=False)
    return Question(
        qid=qid,
        level="mid",
        prompt=(
            f"A model with {m.text} and {weights_gib} GiB of weights runs in vLLM on "
            f"{_a(gpu_gib)} {gpu_gib} GiB GPU ({pool_defaults_text()}, blocks of "
            f"16 tokens). How many {ctx:,}-token sequences can run at once?"
        ),
        answer=f"{b.max_concurrency:,.2f} sequences (so {int(b.max_concurrency):,} whole ones)",
        value=b.max_concurrency,
        unit="sequences",
        ask_unit="sequences",
        floor_ok=True,
        solution=(
            f"pool = ceil({gpu_gib} GiB x {b.gpu_mem_util:g}) - {weights_gib} GiB "
            "- 2 GiB = "
            f"{b.kv_pool_bytes / GiB:,.2f} GiB; page = 16 x {per // layers:,} B; "
            f"blocks = pool // page // {layers} = {b.num_blocks:,}; concurrency = "
            f"{b.num_blocks:,} / ({ctx:,} / 16) = {b.max_concurrency:,.2f}"
        ),
    )


def _crossover(rng: random.Random, m: _Drawn, qid: str) -> Question:
    per = m.per
    weights_gb = rng.choice([2, 4, 8, 16, 30, 70, 140])
    batch = rng.choice([1, 2, 4, 8, 16, 32, 64])
    cross = weights_gb * GB / (batch * per)
    return Question(
        qid=qid,
        level="mid",
        prompt=(
            f"A model has {m.text} and {weights_gb} GB of weights. At batch {batch}, from "
            "what context length (tokens per sequence) does a decode step read more KV "
            "cache than weights?"
        ),
        answer=f"{cross:,.0f} tokens",
        value=cross,
        unit="tokens",
        ask_unit="tokens",
        solution=(
            f"{batch} x context x {per:,} B = {weights_gb} x 10^9 B -> context = "
            f"{weights_gb * GB:,} / ({batch} x {per:,}) = {cross:,.0f} tokens"
        ),
    )


def _saving(rng: random.Random, m: _Drawn, qid: str) -> Question:
    kv, hd, db = m.kv, m.hd, m.db
    which = rng.choice(["gqa", "fp8", "mla"])
    if which == "fp8" and db == 1:
        which = "gqa"  # an FP8 cache does not shrink with FP8: no question with a false premise
    if which == "mla" and 2 * kv * hd <= 512 + 64:
        which = "gqa"  # a latent of 576 would not shrink a layer that stores fewer numbers
    if which == "gqa":
        mha_heads = kv * rng.choice([2, 4, 8])
        return Question(
            qid=qid,
            level="core",
            prompt=(
                f"A model with {mha_heads} attention heads switches from multi-head attention "
                f"to grouped-query attention with {_plural(kv, 'KV head')}. How many times "
                "smaller is its KV cache?"
            ),
            answer=f"{mha_heads / kv:g}x",
            value=mha_heads / kv,
            unit="x",
            ask_unit="x",
            solution=f"K/V heads go from {mha_heads} to {kv}: {mha_heads} / {kv} = "
            f"{mha_heads / kv:g}x",
        )
    if which == "fp8":
        return Question(
            qid=qid,
            level="core",
            prompt=f"A model has {m.text}. By what factor does an FP8 KV cache shrink it?",
            answer=f"{db / 1:g}x",
            value=db / 1,
            unit="x",
            ask_unit="x",
            solution=f"{db} bytes per number -> 1 byte: {db}x",
        )
    rank, rope = 512, 64
    ratio = 2 * kv * hd / (rank + rope)
    return Question(
        qid=qid,
        level="senior",
        prompt=(
            f"A layer with {_plural(kv, 'KV head')} of dimension {hd} is replaced by an MLA "
            f"layer that "
            f"caches one latent of {rank} plus a {rope}-dimensional RoPE key per token. By what "
            "factor does its cache shrink (same number format)?"
        ),
        answer=f"{ratio:,.2f}x",
        value=ratio,
        unit="x",
        ask_unit="x",
        solution=f"2 x {kv} x {hd} = {2 * kv * hd} numbers per token -> {rank} + {rope} = "
        f"{rank + rope}: {2 * kv * hd} / {rank + rope} = {ratio:,.2f}x",
    )


_MAKERS = {
    "per_token": _per_token,
    "sequence": _sequence,
    "concurrency": _concurrency,
    "crossover": _crossover,
    "saving": _saving,
}


def _from_config(rng: random.Random, qid: str) -> Question:
    """Per-token KV bytes read off a config.json snippet that gives query heads and KV heads but
    no head_dim (it is hidden_size / num_attention_heads), as real Llama-family configs do."""
    layers = rng.choice([16, 22, 24, 28, 32, 36, 40, 48, 64, 80])
    head_dim = rng.choice([64, 128, 128])
    kv = rng.choice([1, 2, 4, 8, 8])
    q = kv * rng.choice([3, 4, 4, 5, 6, 7])  # not 2 or 8: those ratios have their own hints
    dname, db = rng.choice([("bfloat16", 2), ("float16", 2), ("float32", 4)])
    hidden = q * head_dim
    cfg = {
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": 4 * hidden,
        "num_attention_heads": q,
        "num_hidden_layers": layers,
        "num_key_value_heads": kv,
        "torch_dtype": dname,
        "vocab_size": 32000,
    }
    per = 2 * layers * kv * head_dim * db
    text = json.dumps(cfg, indent=2)
    return Question(
        qid=qid,
        level="core",
        prompt=(
            "Here is part of a model's config.json, and its KV cache is kept in the "
            "checkpoint's own number format (torch_dtype). How many bytes does one token "
            "add to the cache?"
        ),
        config=text,
        answer=f"{per:,} B ({per / KiB:g} KiB)",
        value=per,
        unit="B",
        ask_unit="B",
        solution=(
            f"head_dim = hidden_size / num_attention_heads = {hidden} / {q} = {head_dim}; "
            f"2 (K and V) x {layers} layers x {kv} KV heads x {head_dim} x {db} B = "
            f"{per:,} B"
        ),
        mistakes=(
            (
                q / kv,
                f"That counts the {q} query heads (num_attention_heads). K and V are "
                f"stored once per KV head: num_key_value_heads = {kv}.",
            ),
        ),
    )
