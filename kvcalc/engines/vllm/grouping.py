"""vLLM's KV-cache groups (its KVCacheGroupSpec / KVCacheConfig) for a model's layers on one GPU
or pipeline stage: the effective block size, the page, the group size and the members."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ...core.arith import cdiv
from ...core.model import Layer
from .formats import CacheFormat, vllm_bytes_per_token


@dataclass(frozen=True, kw_only=True)
class KVCacheGroupSpec:
    """One of vLLM's KV-cache groups (its KVCacheGroupSpec): layers that share one block table,
    each block holding one page of every member."""

    kind: str  # full, sliding, chunked, mla, state
    members: tuple[int, ...]  # the layers' positions (on this GPU or pipeline stage)
    padding: int  # padding layers added to reach the group size
    spec: Layer  # one member, for the kind's rules (vLLM's kv_cache_spec)
    block_size: int  # tokens per block: a page smaller than the largest holds more


@dataclass(frozen=True, kw_only=True)
class KVCacheGrouping:
    """The groups of a model's layers and the block they share (vLLM's KVCacheConfig, before
    the pool is divided into blocks)."""

    block_size: int  # the effective block size (raised for hybrid recurrent models)
    page_bytes: int  # one block of one layer (uniform: of every layer)
    group_size: int  # layers per group (padding included)
    groups: tuple[KVCacheGroupSpec, ...]
    padding_layers: int
    padding_waste_pct: float  # vLLM's "may waste at most X%" of the padded type
    state_page_padding_pct: float  # recurrent page padded to the attention page
    notes: tuple[str, ...]
    # One type whose pages differ (UniformTypeKVCacheSpecs): one group, a block holds one page
    # of every layer.
    uniform: bool = False

    @property
    def block_bytes(self) -> int:
        """Bytes of one block across the layers of a group (the pool's unit)."""
        return self.page_bytes if self.uniform else self.page_bytes * self.group_size


def layer_grouping(layers, **kw) -> KVCacheGrouping:
    """``_grouping_of`` for a list of layers, memoised: the groups do not depend on
    max_model_len, and estimate_max_model_len and the Budget's sweeps ask for the same
    grouping dozens of times."""
    return _grouping_of(tuple(layers), **kw)


@functools.lru_cache(maxsize=512)
def _grouping_of(
    layers: tuple,
    *,
    block_size: int,
    fmt: CacheFormat,
    state_dtypes: tuple,
    alignment: int,
    threshold: float | None,
    version: tuple[int, ...],
) -> KVCacheGrouping:
    """vLLM's KV-cache groups for ``layers`` (already split for tensor parallelism):
    the effective block size, the page, the group size and each group's member positions.

    Equal page sizes (after raising a recurrent model's block size) form vLLM's hybrid groups;
    layers of one type whose pages differ (an indexer cache on some MLA layers only) form one
    group whose block holds a page of every layer (UniformTypeKVCacheSpecs, v0.11.0)."""
    attn = [(i, lay) for i, lay in enumerate(layers) if lay.stores_tokens]
    states = [(i, lay) for i, lay in enumerate(layers) if lay.state_elements]
    notes: list[str] = []
    bs, state_page, state_pad_pct = _hybrid_block(
        attn, states, block_size, fmt, state_dtypes, alignment, notes
    )
    buckets: dict[tuple, list] = {}
    pages = {}
    for i, lay in attn:
        page = bs * vllm_bytes_per_token(lay, fmt)
        key = (*lay.vllm_group_key(), page)
        buckets.setdefault(key, []).append(i)
        pages[key] = page
    if states:
        key = (*states[0][1].vllm_group_key(), state_page)
        buckets[key] = [i for i, _ in states]
        pages[key] = state_page
    if not buckets:
        raise ValueError("this model has no layer that keeps a KV cache")
    types = {k[:2] for k in buckets}
    if len(set(pages.values())) > 1 and len(types) == 1 and not states:
        return _uniform_type(layers, buckets, bs, fmt, version, state_pad_pct, notes)
    if len(set(pages.values())) > 1:
        # vLLM raises smaller pages' block size to the largest page when they divide it.
        biggest = max(pages.values())
        if any(biggest % p for p in pages.values()):
            shown = ", ".join(f"{p:,}" for p in sorted(set(pages.values())))
            raise ValueError(
                f"in this KV cache format the layers' pages ({shown} B) do not "
                "divide each other, so vLLM cannot unify them and refuses to "
                "start (unify_kv_cache_spec_page_size); choose another KV cache "
                "format"
            )
        notes.append("layers of different page sizes: smaller pages get larger blocks")
    page = max(pages.values())
    counts = [len(ms) for ms in buckets.values()]
    group_size = min(counts)
    if len(buckets) == 1:
        group_size = counts[0]
    elif threshold is not None and max(counts) < min(counts) * threshold:
        group_size = max(counts)
    groups, padding_total, waste = _dealt_groups(
        layers, buckets, pages, bs, page, group_size, notes
    )
    return KVCacheGrouping(
        block_size=bs,
        page_bytes=page,
        group_size=group_size,
        groups=tuple(groups),
        padding_layers=padding_total,
        padding_waste_pct=waste,
        state_page_padding_pct=state_pad_pct,
        notes=tuple(notes),
    )


def _hybrid_block(
    attn: list,
    states: list,
    block_size: int,
    fmt: CacheFormat,
    state_dtypes: tuple,
    alignment: int,
    notes: list[str],
) -> tuple[int, int, float]:
    """The block size, the state page and its padding (in %) of a model with recurrent
    states: beside attention layers the block is raised until an attention page holds a state
    page, which is padded to it. Without states: the block size as given."""
    bs = block_size
    state_pad_pct = 0.0
    state_page = 0
    if states:
        # State page per layer on this GPU (heads split over tp, as vLLM shards them).
        state_page = max(lay.state_bytes(*state_dtypes) for _, lay in states)
        if attn:
            # The smallest multiple of ``alignment`` tokens whose attention page holds a state
            # page (Platform._align_hybrid_block_size); a larger block asked for is kept.
            one_token = vllm_bytes_per_token(attn[0][1], fmt)
            bs = max(alignment * cdiv(state_page, alignment * one_token), block_size)
            attn_page = bs * one_token
            state_pad_pct = (attn_page - state_page) / state_page * 100
            if bs != block_size:
                notes.append(
                    f"attention block size raised to {bs} tokens so that an attention "
                    f"page ({attn_page:,} B) is at least a state page ({state_page:,} "
                    f"B); the state page is padded by {state_pad_pct:.2f}%"
                )
            state_page = attn_page
    return bs, state_page, state_pad_pct


def _uniform_type(
    layers: tuple,
    buckets: dict[tuple, list],
    bs: int,
    fmt: CacheFormat,
    version: tuple[int, ...],
    state_pad_pct: float,
    notes: list[str],
) -> KVCacheGrouping:
    """Layers of one type whose pages differ: one group whose block holds a page of every
    layer (vLLM's UniformTypeKVCacheSpecs, v0.11.0 on; refused before)."""
    if version < (0, 11, 0):
        raise ValueError(
            "layers of one type with different page sizes: vLLM before 0.11.0 cannot allocate them"
        )
    # One group; a block holds one page of every layer (their sizes summed).
    members = sorted(i for ms in buckets.values() for i in ms)
    rep = layers[members[0]]
    notes.append(
        "layers of one type but different page sizes form one group: a block holds "
        "a page of every layer (vLLM's UniformTypeKVCacheSpecs)"
    )
    return KVCacheGrouping(
        block_size=bs,
        page_bytes=sum(bs * vllm_bytes_per_token(layers[i], fmt) for i in members),
        group_size=1,
        groups=(
            KVCacheGroupSpec(
                kind=rep.kind, members=tuple(members), padding=0, spec=rep, block_size=bs
            ),
        ),
        padding_layers=0,
        padding_waste_pct=0.0,
        state_page_padding_pct=state_pad_pct,
        notes=tuple(notes),
        uniform=True,
    )


def _dealt_groups(
    layers: tuple,
    buckets: dict[tuple, list],
    pages: dict,
    bs: int,
    page: int,
    group_size: int,
    notes: list[str],
) -> tuple[list[KVCacheGroupSpec], int, float]:
    """Each bucket's layers dealt into groups of ``group_size`` (padding the last), the
    padding layers added, and vLLM's "may waste at most X%" of the most padded type."""
    groups = []
    padding_total = 0
    waste = 0.0
    for key, members in buckets.items():
        count = len(members)
        n_groups = cdiv(count, group_size)
        padding = n_groups * group_size - count
        if padding:
            padding_total += padding
            waste = max(waste, padding / count * 100)
            notes.append(
                f"{padding} padding layer(s) added to the {key[0]} layers: vLLM warns "
                f"this may waste at most {padding / count * 100:.2f}% of the cache"
            )
        layer_bs = bs * (page // pages[key])  # a smaller page holds more tokens per block
        for g in range(n_groups):  # vLLM deals the layers out: layers[g::n_groups]
            share = members[g::n_groups]
            groups.append(
                KVCacheGroupSpec(
                    kind=key[0],
                    members=tuple(share),
                    padding=group_size - len(share),
                    spec=layers[share[0]],
                    block_size=layer_bs,
                )
            )
    return groups, padding_total, waste


def per_request_blocks(
    grouping: KVCacheGrouping, max_model_len: int, in_flight: int, state_blocks: int = 1
) -> list[int]:
    """Blocks one request of max_model_len takes in each group; a recurrent group takes
    ``state_blocks`` (MambaSpec.max_memory_usage_bytes: 1, or 2 + checkpoints in 'align')."""
    return [
        state_blocks
        if g.spec.state_elements
        else g.spec.vllm_blocks_per_request(max_model_len, g.block_size, in_flight)
        for g in grouping.groups
    ]
