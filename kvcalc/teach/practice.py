"""Practice questions from a seeded draw of a model's geometry and KV format, one of each kind
in turn (``_KINDS``), every number computed; the wording is practice.toml."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from ..cache.deployment import CacheFormat, Deployment
from ..config.hfconfig import spec_from_config
from ..core.units import GB, GiB, KiB, check_int
from ..engines.budget import budget, pool_defaults_text
from .prose import prose
from .question import Question


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
RESERVE_GIB = 2  # the reserve of a concurrency question
LATENT = (512, 64)  # an MLA latent: kv_lora_rank + qk_rope_head_dim (DeepSeek-V2/V3)


def practice_questions(seed: int, count: int = 8) -> list[Question]:
    """``count`` questions with realistic random parameters; the same seed gives the same set."""
    seed = check_int("seed", seed, 0, 2**31)
    count = check_int("count", count, 1, 50)
    rng = random.Random(seed)
    return [_make(rng, _KINDS[i % len(_KINDS)], f"p{i + 1}") for i in range(count)]


def plural(n: int, word: str) -> str:
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

    def numbers(self) -> dict[str, Any]:
        """The drawn model's named numbers, with the model as a prompt names it ("text")."""
        heads = plural(self.kv, "KV head")
        text = f"{self.layers} layers, {heads} of dimension {self.hd}, KV cache in {self.dname}"
        return dict(vars(self), per=self.per, heads=heads, text=text)


def _make(rng: random.Random, kind: str, qid: str) -> Question:
    layers = rng.choice([24, 28, 32, 36, 40, 48, 60, 64, 80])
    kv = rng.choice([1, 2, 4, 8, 8, 16])
    hd = rng.choice([64, 128, 128, 256])
    q = kv * rng.choice([1, 2, 4, 8])
    dname, db = rng.choice(_DTYPES)
    m = _Drawn(layers=layers, kv=kv, hd=hd, q=q, dname=dname, db=db)
    key, nums, fields = _from_config(rng) if kind == "config" else _MAKERS[kind](rng, m)
    t = prose("practice")[key]
    text: dict[str, Any] = {k: v.format(**nums) for k, v in t.items() if isinstance(v, str)}
    mistakes = tuple((nums[r], why.format(**nums)) for r, why in t.get("mistakes", ()))
    return Question(qid=qid, **text, **fields, mistakes=mistakes)


_Made = tuple[str, dict[str, Any], dict[str, Any]]  # (its prose's key, numbers, Question fields)


def _per_token(rng: random.Random, m: _Drawn) -> _Made:
    nums = dict(m.numbers(), per_kib=m.per / KiB)
    return "per_token", nums, dict(value=m.per, unit="B", ask_unit="B")


def _sequence(rng: random.Random, m: _Drawn) -> _Made:
    ctx = rng.choice([2048, 4096, 8192, 16384, 32768, 131072])
    batch = rng.choice([1, 4, 8, 16, 32])
    total = m.per * ctx * batch
    nums = dict(m.numbers(), ctx=ctx, batch=batch, total=total, total_gib=total / GiB)
    nums.update(does="does" if batch == 1 else "do", seqs=plural(batch, "sequence"))
    return "sequence", nums, dict(value=total, unit="B", ask_unit="GiB")


def _concurrency(rng: random.Random, m: _Drawn) -> _Made:
    gpu_gib = rng.choice([24, 40, 48, 80, 141])
    weights_gib = rng.choice([2, 4, 8, 14, 16])
    if weights_gib > gpu_gib * 0.6:
        weights_gib = 4
    ctx = rng.choice([2048, 4096, 8192, 16384])
    spec = spec_from_config(llama_like(m.layers, m.kv, m.hd, m.q))
    dep = Deployment(
        spec=spec,
        memory_bytes=gpu_gib * GiB,
        weights_bytes=weights_gib * GiB,
        reserve_bytes=RESERVE_GIB * GiB,
        cache=CacheFormat(kv_dtype={1: "fp8", 2: "bf16", 4: "fp32"}[m.db]),
    )
    b = budget(dep, ctx, find_max_context=False)
    nums = dict(
        m.numbers(),
        gpu_gib=gpu_gib,
        a=_a(gpu_gib),
        weights_gib=weights_gib,
        reserve_gib=RESERVE_GIB,
        ctx=ctx,
        defaults=pool_defaults_text(),
        conc=b.max_concurrency,
        whole=int(b.max_concurrency),
        util=b.gpu_mem_util,
        pool_gib=b.kv_pool_bytes / GiB,
        per_layer=m.per // m.layers,
        blocks=b.num_blocks,
        block=b.effective_block_size,
    )
    fields = dict(value=b.max_concurrency, unit="sequences", ask_unit="sequences", floor_ok=True)
    return "concurrency", nums, fields


def _crossover(rng: random.Random, m: _Drawn) -> _Made:
    weights_gb = rng.choice([2, 4, 8, 16, 30, 70, 140])
    batch = rng.choice([1, 2, 4, 8, 16, 32, 64])
    cross = weights_gb * GB / (batch * m.per)
    nums = dict(m.numbers(), weights_gb=weights_gb, weights_b=weights_gb * GB, batch=batch)
    return "crossover", dict(nums, cross=cross), dict(value=cross, unit="tokens", ask_unit="tokens")


def _saving(rng: random.Random, m: _Drawn) -> _Made:
    kv, hd, db = m.kv, m.hd, m.db
    rank, rope = LATENT
    which = rng.choice(["gqa", "fp8", "mla"])
    if which == "fp8" and db == 1:
        which = "gqa"  # an FP8 cache does not shrink with FP8: no question with a false premise
    if which == "mla" and 2 * kv * hd <= rank + rope:
        which = "gqa"  # a latent of 576 would not shrink a layer that stores fewer numbers
    nums = m.numbers()
    if which == "gqa":
        mha_heads = kv * rng.choice([2, 4, 8])
        nums.update(mha_heads=mha_heads, ratio=mha_heads / kv)
    elif which == "fp8":
        nums.update(ratio=db / 1)
    else:
        numbers = 2 * kv * hd
        nums.update(rank=rank, rope=rope, numbers=numbers, latent=rank + rope)
        nums.update(ratio=numbers / (rank + rope))
    return f"saving_{which}", nums, dict(value=nums["ratio"], unit="x", ask_unit="x")


_MAKERS = {
    "per_token": _per_token,
    "sequence": _sequence,
    "concurrency": _concurrency,
    "crossover": _crossover,
    "saving": _saving,
}


def _from_config(rng: random.Random) -> _Made:
    """Per-token KV bytes read off a config.json snippet that gives query heads and KV heads but
    no head_dim (it is hidden_size / num_attention_heads), as real Llama-family configs do."""
    layers = rng.choice([16, 22, 24, 28, 32, 36, 40, 48, 64, 80])
    hd = rng.choice([64, 128, 128])
    kv = rng.choice([1, 2, 4, 8, 8])
    q = kv * rng.choice([3, 4, 4, 5, 6, 7])  # not 2 or 8: those ratios have their own hints
    dname, db = rng.choice([("bfloat16", 2), ("float16", 2), ("float32", 4)])
    hidden = q * hd
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
    per = 2 * layers * kv * hd * db
    nums = dict(layers=layers, hd=hd, kv=kv, q=q, db=db, hidden=hidden, per=per, per_kib=per / KiB)
    fields = dict(value=per, unit="B", ask_unit="B", config=json.dumps(cfg, indent=2))
    return "config", dict(nums, q_ratio=q / kv), fields
