"""Prefill fills the cache, decode appends to it: the picture step by step, as data (a K and
a V row per shown layer, a column per token; step 0 is the prefill)."""

from __future__ import annotations

from dataclasses import dataclass

from ..cache.kv import kv_cache
from ..core.model import ModelSpec
from ..core.units import check_int
from ..perf.roofline import token_passes

EMPTY, CACHED, NEW, RECOMPUTED = 0, 1, 2, 3
MAX_TOKENS = 160  # columns the picture can show legibly


@dataclass(frozen=True, kw_only=True)
class FillStep:
    step: int  # 0 = prefill
    tokens: int  # tokens in the sequence after this step
    grid: tuple[tuple[int, ...], ...]  # rows (K and V of each shown layer) x columns (tokens)
    passes_with_cache: int  # token passes done so far, with a cache
    passes_without_cache: int  # ... and without one
    cache_bytes: int  # K/V bytes the whole model holds after this step (all layers)
    state_bytes: int  # fixed recurrent state, if any


def shown_layers(spec: ModelSpec, count: int) -> list[int]:
    """Indices of ``count`` layers spread over the model (first and last included)."""
    n = spec.num_layers
    count = max(1, min(count, n))
    if count == 1:
        return [0]
    return sorted({round(i * (n - 1) / (count - 1)) for i in range(count)})


def fill_timeline(
    spec: ModelSpec,
    prompt: int,
    new_tokens: int,
    *,
    layers: int = 4,
    kv_dtype: str = "bf16",
    use_cache: bool = True,
    grid_every: int = 1,
) -> list[FillStep]:
    """The grid after the prefill and after each decode step. With ``grid_every`` k > 1 only
    every k-th step and the last carry a grid (the others an empty one), which bounds the work
    and the size of an animation at the largest inputs; counts and bytes are always there."""
    grid_every = check_int("grid_every", grid_every, 1, MAX_TOKENS + 1)
    prompt = check_int("prompt length", prompt, 1, MAX_TOKENS)
    new_tokens = check_int("tokens to generate", new_tokens, 0, MAX_TOKENS)
    if prompt + new_tokens > MAX_TOKENS:
        raise ValueError(
            f"prompt + generated tokens is at most {MAX_TOKENS} in this picture, "
            f"got {prompt + new_tokens}"
        )
    layers = check_int("layers shown", layers, 1, 16)
    idx = shown_layers(spec, layers)
    total = prompt + new_tokens
    shown = [spec.layers[i] for i in idx]
    steps = []
    for step in range(new_tokens + 1):
        n = prompt + step  # tokens in the sequence after this step
        passes = token_passes(step, prompt)
        grid = []
        drawn = step % grid_every == 0 or step == new_tokens
        for layer in shown if drawn else ():
            kept = layer.kept_positions(n)  # empty for a layer that stores no per-token cache
            # EMPTY: not yet written, slid out of a window or chunk, or never
            old = CACHED if use_cache else RECOMPUTED  # a token written before this step
            line = tuple(
                (NEW if step == 0 or t == n - 1 else old) if t in kept else EMPTY
                for t in range(total)
            )
            grid += [line] * max(1, len(layer.cache_rows))  # K and V, or latent and RoPE key
        kv = kv_cache(spec, n, kv_dtype=kv_dtype)
        steps.append(
            FillStep(
                step=step,
                tokens=n,
                grid=tuple(grid),
                passes_with_cache=passes["with_cache"],
                passes_without_cache=passes["without_cache"],
                cache_bytes=kv.kv_bytes if use_cache else 0,
                state_bytes=kv.state_bytes,
            )
        )
    return steps
