"""Where a request's cache can wait between turns (issue 43, item 3): GPU memory, CPU memory,
local NVMe, a remote store. For a workload whose prompts return (a multi-turn chat, a shared
document), how many prefixes each tier holds, how many returning prompts find theirs, and the
time to first token each hit saves against recomputing the prefix.

The model, from first principles: each tier holds ``capacity / prefix bytes`` prefixes; with
``active`` conversations returning in random order and the tiers filled most recent first
(least recently used out, GPU first), a returning prompt finds its prefix in a tier with
probability that tier's share of the conversations (all of them once every prefix fits). A hit
reloads the prefix over the tier's link (the GPU's own pool: nothing to move) instead of
recomputing it; a tier whose reload is slower than the recompute is not worth reading, and the
engine recomputes (``saved`` 0).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..core.units import GB, check_float, check_int


@dataclass(frozen=True, kw_only=True)
class TierSpec:
    """One tier: its name, the bytes it gives the cache (per GPU) and its link to the GPU
    (GB/s one way; None for the GPU's own memory)."""

    name: str
    capacity_bytes: int
    link_gbs: float | None
    fixed_s: float = 0.0  # a fixed cost per reload (finding the blocks, issuing the copy)


@dataclass(frozen=True, kw_only=True)
class TierResult:
    name: str
    capacity_bytes: int
    prefixes: int  # whole prefixes it holds
    hit_share: float  # of returning prompts, the share whose prefix is here
    reload_s: float  # one prefix back on the GPU (0 from the GPU's own memory)
    saved_s: float  # recompute - reload where that is positive, else 0


@dataclass(frozen=True, kw_only=True)
class Tiers:
    prefix_tokens: int
    prefix_bytes: int  # one prefix's cache, per GPU
    active: int  # conversations that return
    recompute_s: float  # prefilling one prefix
    tiers: tuple[TierResult, ...]
    hit_rate: float  # returning prompts that find their prefix anywhere
    mean_saved_s: float  # time to first token saved, averaged over returning prompts

    def to_dict(self) -> dict:
        return asdict(self)


def tiers(
    prefix_tokens: int,
    prefix_bytes: int,
    active: int,
    recompute_s: float,
    specs: list[TierSpec],
) -> Tiers:
    """The tiers ``specs`` (GPU first) for ``active`` conversations whose prefixes of
    ``prefix_tokens`` tokens take ``prefix_bytes`` each and ``recompute_s`` to prefill."""
    n = check_int("prefix tokens", prefix_tokens, 1, 10**8)
    size = check_int("prefix bytes", prefix_bytes, 1, 10**15)
    active = check_int("active conversations", active, 1, 10**9)
    recompute = check_float("recompute time (s)", recompute_s, 0.0, 1e6)
    left, out = active, []
    for t in specs:
        cap = check_int(f"{t.name} capacity (bytes)", t.capacity_bytes, 0, 10**16)
        held = min(left, cap // size)
        left -= held
        reload = 0.0
        if t.link_gbs is not None:
            gbs = check_float(f"{t.name} link (GB/s)", t.link_gbs, 0.0, 1e6, lo_open=True)
            reload = t.fixed_s + size / (gbs * GB)
        out.append(
            TierResult(
                name=t.name,
                capacity_bytes=cap,
                prefixes=cap // size,
                hit_share=held / active,
                reload_s=reload,
                saved_s=max(0.0, recompute - reload),
            )
        )
    hit = sum(r.hit_share for r in out)
    return Tiers(
        prefix_tokens=n,
        prefix_bytes=size,
        active=active,
        recompute_s=recompute,
        tiers=tuple(out),
        hit_rate=hit,
        mean_saved_s=sum(r.hit_share * r.saved_s for r in out),
    )
