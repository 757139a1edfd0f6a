"""The capacity lines vLLM prints at start-up, predicted (steps 1-5 of
docs/vllm.md#the-start-up-lines), and around them its estimate_max_model_len, its refusal to
start when one request does not fit, and the memory it finds for the cache."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from itertools import accumulate
from typing import Any

from ...cache.deployment import Deployment
from ...cache.kv import pp_partition, stage_layers
from ...config.limits import MAX_CONTEXT
from ...core.arith import cdiv, last_true
from ...core.model import FullAttention, Layer, MLALatent, RecurrentState, counted
from ...core.units import GiB, check_int
from .facts import Facts, fact, resolve_version
from .kv_cache import KVCacheGrouping, layer_grouping, per_request_blocks, vllm_bytes_per_token
from .settings import (
    MAMBA_ALL_MODE,
    EngineSettings,
    batched_tokens_default,
    engine_settings,
    gpu_memory,
)
from .speculative import chunked_view, speculative_view


@dataclass(frozen=True, kw_only=True)
class Group:
    kind: str  # full, sliding, chunked, mla, state
    layers: int  # real layers in this group
    padding: int  # padding layers added to reach the group size
    blocks_per_request: int  # what vLLM's start-up check reserves: its worst case
    span: int = 0  # a sliding window or an attention chunk, in tokens
    block_size: int = 0  # tokens per block in this group

    def held_blocks(self, n: int) -> int:
        """Blocks one running request holds in this group at its n-th token: its n tokens' less
        those vLLM freed (remove_skipped_blocks, n - 1 computed: a window the blocks wholly before
        computed - window + 1, a chunk those before the current one); a state its blocks."""
        if self.kind == "state":
            return self.blocks_per_request
        bs = self.block_size
        alloc = cdiv(n, bs)
        if self.kind == "sliding" and self.span:
            return alloc - max(0, n - self.span) // bs
        if self.kind == "chunked" and self.span:
            return alloc - (n - 1) // self.span * self.span // bs
        return alloc


@dataclass(frozen=True, kw_only=True)
class VllmPrediction:
    available_bytes: int
    max_model_len: int
    block_size: int  # the effective one (raised for hybrid recurrent models)
    requested_block_size: int
    page_bytes: int  # one block of one layer
    group_size: int
    groups: tuple[Group, ...]
    padding_layers: int
    padding_waste_pct: float  # vLLM's "may waste at most X%" of the padded type
    state_page_padding_pct: float  # recurrent page padded to the attention page
    num_blocks: int
    blocks_per_request: int
    max_concurrency: float
    kv_cache_tokens: int
    tokens_formula: str
    stage: int = 0  # the pipeline stage whose numbers bind
    block_size_line: str = ""  # what vLLM logs when it sets an MLA model's block size
    vllm_version: str = ""  # the version whose rules were applied
    kv_cache_dtype: str = "auto"  # vLLM's name for the cache format used
    stage_blocks: tuple[int, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["groups"] = list(d["groups"])
        d["num_groups"] = len(self.groups)
        d["capacity_lines"] = self.capacity_lines()
        return d

    def held_blocks(self, n: int) -> int:
        """Blocks one running request holds at n tokens, every group summed: what it really
        keeps, against the worst case the start-up line divides by."""
        return sum(g.held_blocks(n) for g in self.groups)

    def capacity_lines(self) -> list[str]:
        """The capacity lines as this vLLM version prints them (one line from v0.28.0, two
        before; a CUDA GPU named "GPU")."""
        tokens = f"GPU KV cache size: {self.kv_cache_tokens:,} tokens"
        conc = (
            f"Maximum concurrency for {self.max_model_len:,} tokens per request: "
            f"{self.max_concurrency:.2f}x"
        )
        if fact(Facts.log_format, self.vllm_version or None) == "one line":
            return [f"{tokens}, {conc}"]
        return [tokens, conc]


def predict(
    dep: Deployment,
    available_bytes: int,
    max_model_len: int,
    *,
    architecture: str | None = None,
    mm_batch_tokens: int | None = None,
    mla_block_rule: bool = True,
) -> VllmPrediction:
    """The capacity lines vLLM prints for ``dep`` given the memory it found for the cache. A
    format the version does not have, or one kvcalc does not model, is refused by name. How each
    setting is read (formats, recurrent states, prefix caching, max_num_batched_tokens None,
    ``architecture``, ``mm_batch_tokens``, an MLA model's block size and ``mla_block_rule``):
    docs/vllm.md#the-settings-predict-reads."""
    notes: list[str] = []
    version = resolve_version(dep.engine.version)
    view = chunked_view(speculative_view(dep.spec, version, notes), version, notes)
    if view is not dep.spec:
        dep = replace(dep, spec=view)
    kinds = [lay for lay, _ in counted(view.layers)]  # each distinct layer once, for the scans
    unsupported = next((lay.vllm_unsupported for lay in kinds if lay.vllm_unsupported), None)
    if unsupported:  # refused by name
        raise ValueError(
            f"vLLM cannot serve {view.name}: {unsupported} (the encoder-decoder "
            "models, mllama among them, were removed after v0.10.2, PR #24907)"
        )
    available_bytes = check_int("available KV cache memory (bytes)", available_bytes, 0, 2**50)
    max_model_len = check_int("max_model_len", max_model_len, 1, MAX_CONTEXT)
    settings = engine_settings(
        dep,
        max_model_len,
        notes,
        architecture=architecture,
        mm_batch_tokens=mm_batch_tokens,
        mla_block_rule=mla_block_rule,
    )
    _note_qwen3_5_before_hook(kinds, settings.version, dep.cache.mamba_ssm_cache_dtype, notes)
    layers, stages = gpu_stages(dep)
    parts = pp_partition(len(view.target_layers), dep.pp)
    binding = binding_stage(
        layers,
        stages,
        settings,
        available_bytes=available_bytes,
        max_model_len=max_model_len,
        notes=notes,
    )
    return _prediction(binding, settings, kinds, parts, available_bytes, max_model_len, notes)


def _note_qwen3_5_before_hook(
    kinds: list, version: tuple[int, ...], ssm_flag: str | None, notes: list[str]
) -> None:
    """Say it where a Qwen3.5 state declares its format (config.json mamba_ssm_dtype) but the
    version asked predates vLLM reading it: the release has no Qwen3.5 model, and main builds
    stamped with its number straddle PR #34489 (tests/data/vllm-facts.md, Q18)."""
    if fact(Facts.qwen3_5_ssm_from_config, version) or ssm_flag not in (None, "auto"):
        return
    states = [lay for lay in kinds if isinstance(lay, RecurrentState)]
    by_field = {x.ssm_dtype for x in states if x.ssm_dtype_field == "mamba_ssm_dtype"}
    declared = sorted(d for d in by_field if d)
    if declared:
        shown = ".".join(map(str, version))
        notes.append(
            f"vLLM {shown} has no Qwen3.5 model: the SSM state is counted in the conv state's "
            "format, as main builds before PR #34489 (2026-02-13) kept it; a main build "
            f"stamped {shown} after that PR keeps it in config.json's mamba_ssm_dtype "
            f"({declared[0]}), as 0.16.1rc1.devN builds and v0.17.0 on do: give "
            "mamba_ssm_cache_dtype for such a build"
        )


def _prediction(
    binding: Binding,
    s: EngineSettings,
    kinds: list,
    parts: list[int],
    available_bytes: int,
    max_model_len: int,
    notes: list[str],
) -> VllmPrediction:
    """The binding stage's blocks as the numbers vLLM prints (steps 4 and 5), with the notes
    taken so far and the engine conventions they rest on."""
    bind, per_req, num_blocks = binding.grouping, binding.per_request, binding.num_blocks
    per_request = sum(per_req)
    conc = num_blocks / per_request if per_request else 0.0
    if fact(Facts.tokens_line, s.version) == "concurrency":
        tokens = int(conc * max_model_len)
        formula = "int(max_concurrency x max_model_len)"
    else:
        tokens = num_blocks // len(bind.groups) * bind.block_size
        formula = "num_blocks // groups x block_size"
    notes = list(bind.notes) + notes + convention_notes(binding, kinds=kinds, s=s, parts=parts)
    groups = tuple(
        Group(
            kind=g.kind,
            layers=len(g.members),
            padding=g.padding,
            blocks_per_request=r,
            span=(g.spec.vllm_group_key() or (None, None))[1] or 0,
            block_size=g.block_size,
        )
        for g, r in zip(bind.groups, per_req, strict=True)
    )
    same = ("block_size", "page_bytes", "group_size", "padding_layers", "padding_waste_pct")
    return VllmPrediction(
        **{k: getattr(bind, k) for k in (*same, "state_page_padding_pct")},
        available_bytes=available_bytes,
        max_model_len=max_model_len,
        requested_block_size=s.requested_block_size,
        block_size_line=s.block_size_line,
        groups=groups,
        num_blocks=num_blocks,
        blocks_per_request=per_request,
        max_concurrency=conc,
        kv_cache_tokens=tokens,
        tokens_formula=formula,
        stage=binding.index,
        vllm_version=".".join(map(str, s.version)),
        kv_cache_dtype=s.fmt.name,
        stage_blocks=tuple(binding.stage_blocks),
        notes=tuple(notes),
    )


# -- the layers on the GPUs and stages, and the stage that binds ----------------------------------


def gpu_stages(dep: Deployment) -> tuple[list[Layer], list[list[int]]]:
    """The layers one GPU holds, stage after stage (kvcalc.cache.kv.stage_layers; a draft
    model's on the last), and each pipeline stage's layer positions."""
    stages = [list(stage) for stage in stage_layers(dep.spec, dep.tp, dep.pp)]
    if dep.engine.num_draft_layers:
        # A draft model (EAGLE adds one decoder layer) keeps its cache in the same pool, with
        # the target's geometry and full attention.
        ref = next((lay for lay in dep.spec.kv_layers if not isinstance(lay, MLALatent)), None)
        if ref is None:
            raise ValueError("draft layers need an attention layer to copy the geometry from")
        draft = FullAttention(
            kv_heads=ref.kv_heads,
            head_dim=ref.head_dim,
            v_head_dim=ref.v_head_dim,
            q_heads=ref.q_heads,
        )
        stages[-1] += [draft.split(dep.tp) if dep.tp > 1 else draft] * dep.engine.num_draft_layers
    ends = list(accumulate(map(len, stages)))
    positions = [list(range(end - len(stage), end)) for stage, end in zip(stages, ends)]
    return [lay for stage in stages for lay in stage], positions


@dataclass(frozen=True)
class Binding:
    """The stage whose numbers bind: its grouping, its pool's blocks, the blocks one request
    takes in each of its groups; and every stage's blocks, and the binding stage's index."""

    grouping: KVCacheGrouping
    num_blocks: int
    per_request: list[int]
    stage_blocks: list[int]
    index: int


def binding_stage(
    layers: list[Layer],
    stages: list[list[int]],
    s: EngineSettings,
    *,
    available_bytes: int,
    max_model_len: int,
    notes: list[str],
) -> Binding:
    """The stage whose numbers bind (``Binding``)."""
    pp = len(stages)
    version, in_flight, state_blocks, fmt = s.version, s.in_flight, s.state_blocks, s.fmt
    if pp > 1 and fact(Facts.pp_grouping, version) == "whole model":
        # v0.11.0 on: groups from the whole model; each stage's block holds only its own layers
        # of each group; every stage takes the smallest num_blocks of all.
        g = layer_grouping(tuple(layers), s)
        per_req = per_request_blocks(g, max_model_len, in_flight, state_blocks)
        stage_blocks = []
        for positions in stages:
            mine = set(positions)
            slots = max(len(mine.intersection(group.members)) for group in g.groups)
            per_block = g.page_bytes * max(1, slots)
            if g.uniform:  # a page of every layer of the stage
                per_block = g.block_size * sum(
                    vllm_bytes_per_token(layers[i], fmt) for i in positions
                )
            stage_blocks.append(available_bytes // max(1, per_block))
        index = min(range(pp), key=lambda i: stage_blocks[i])
        notes.append(
            "pipeline stages share one grouping of the whole model (vLLM 0.11.0 on); "
            "the stage with the fewest blocks sets the numbers"
        )
        return Binding(g, stage_blocks[index], per_req, stage_blocks, index)
    groupings = [layer_grouping(tuple(layers[i] for i in positions), s) for positions in stages]
    stage_blocks = [available_bytes // g.block_bytes for g in groupings]
    per_reqs = [per_request_blocks(g, max_model_len, in_flight, state_blocks) for g in groupings]
    index = min(range(pp), key=lambda i: stage_blocks[i] / max(1, sum(per_reqs[i])))
    return Binding(groupings[index], stage_blocks[index], per_reqs[index], stage_blocks, index)


def convention_notes(
    binding: Binding, *, kinds: list, s: EngineSettings, parts: list[int]
) -> list[str]:
    """The engine conventions the numbers rest on: tokens in flight, the state formats and
    blocks, the pipeline stages."""
    bind, per_req = binding.grouping, binding.per_request
    notes = []
    if s.batches > 1 and any(
        r > 0 and g.spec.token_bound() is not None
        for g, r in zip(bind.groups, per_req, strict=True)
    ):
        notes.append(
            f"each window or chunk reserves room for {s.batches} x max_num_batched_tokens "
            f"({s.in_flight:,} tokens in flight): asynchronous scheduling, vLLM 0.26.0 on"
        )
    if any(g.spec.state_elements for g in bind.groups):
        conv, ssm = s.state_dtypes
        notes.append(f"recurrent state: conv in {conv.name.upper()}, SSM in {ssm.name.upper()}")
        if s.mamba_cache_mode == "none":
            notes.append(
                "a recurrent state takes one block per request: prefix caching off "
                "(mamba_cache_mode 'none')"
            )
        else:
            notes.append(
                f"prefix caching on (mamba_cache_mode 'align'): each recurrent group "
                f"keeps {s.state_blocks} blocks per request"
                + (
                    " (2 + one prefill checkpoint of FlashInfer's Gated DeltaNet)"
                    if s.checkpoint
                    else ""
                )
            )
            if (
                fact(Facts.gdn_prefill_checkpoint, s.version)
                and not s.checkpoint
                and any(getattr(lay, "flavor", "") == "gated_deltanet" for lay in kinds)
            ):
                notes.append(
                    "on Hopper (or Blackwell with CUDA 13) vLLM 0.33.0's FlashInfer "
                    "Gated DeltaNet prefill keeps a third block and aligns blocks to "
                    "64 tokens: set gdn_prefill_checkpoint (--gdn-prefill-checkpoint)"
                )
            if fact(Facts.mamba_cache_mode, s.version) == "all or align" and s.architecture is None:
                notes.append(
                    "vLLM 0.15.0-0.27.x uses mamba_cache_mode 'all' instead for "
                    + ", ".join(MAMBA_ALL_MODE)
                    + " (not modelled)"
                )
    if len(parts) > 1:
        notes.append(f"pipeline stages hold {', '.join(map(str, parts))} layers")
    return notes


# -- around the capacity lines: the longest max_model_len, the refusal to start, the memory ------


def fixed_batch(
    dep: Deployment, max_model_len: int | None, mm_batch_tokens: int | None
) -> Deployment:
    """``dep`` with its max_num_batched_tokens fixed to vLLM's default where none is given:
    vLLM's checks use its scheduler's one value."""
    if dep.engine.max_num_batched_tokens is not None:
        return dep
    version = resolve_version(dep.engine.version)
    tokens = batched_tokens_default(dep, version, max_model_len, mm_batch_tokens)
    return dep.but(max_num_batched_tokens=tokens)


_MEMO: dict[tuple, int | None] = {}


def estimate_max_model_len(dep: Deployment, available_bytes: int, **extras: Any) -> int | None:
    """The longest max_model_len one request of which fits in the pool, as vLLM's
    estimate_max_model_len finds it by bisection (at most 10^8 tokens); None when a request's
    blocks stop growing, 0 when not even one token fits. ``extras``: predict()'s keywords.
    Memoised: a Budget page asks again at every point of its concurrency curve (42 x 28
    predictions of a 1,024-layer model took 8 s)."""
    dep = fixed_batch(dep, None, extras.get("mm_batch_tokens"))
    parts = (dep.spec, dep.tp, dep.pp, dep.cache, dep.engine, gpu_memory(dep))
    key = (parts, available_bytes, tuple(sorted(extras.items())))
    try:
        if key in _MEMO:
            return _MEMO[key]
    except TypeError:  # an unhashable argument: no memo
        return _estimate_max_model_len(dep, available_bytes, extras)
    if len(_MEMO) >= 16:
        _MEMO.pop(next(iter(_MEMO)))
    _MEMO[key] = _estimate_max_model_len(dep, available_bytes, extras)
    return _MEMO[key]


def _estimate_max_model_len(dep: Deployment, available_bytes: int, extras: dict) -> int | None:
    def blocks(n: int) -> tuple[int, int]:
        p = predict(dep, available_bytes, n, **extras)
        return p.blocks_per_request, p.num_blocks

    null = fact(Facts.null_block, dep.engine.version)  # v0.29.0 on: the null block first

    def fits(n: int) -> bool:
        need, have = blocks(n)
        return need <= have - null

    hi = MAX_CONTEXT
    if fits(hi):
        # Bounded layers only (windows, states): a request never needs more, so nothing ever
        # fills the pool. Otherwise the answer is at least 10^8 tokens, as far as vLLM goes.
        return None if blocks(hi)[0] == blocks(hi // 2)[0] else hi
    if not fits(1):
        return 0
    return last_true(fits, 1, hi)


def startup_error(
    dep: Deployment,
    available_bytes: int,
    max_model_len: int,
    prediction: VllmPrediction | None = None,
    **extras: Any,
) -> str | None:
    """vLLM's own refusal to start when one request of max_model_len does not fit (None when it
    fits), in the wording of the chosen version, with its estimate of the longest max_model_len
    that would (tests/data/vllm-facts.md, Q7). ``prediction``: predict()'s result for these
    same arguments, when the caller has it already; ``extras``: predict()'s keywords."""
    dep = fixed_batch(dep, max_model_len, extras.get("mm_batch_tokens"))
    p = prediction or predict(dep, available_bytes, max_model_len, **extras)
    if p.blocks_per_request <= p.num_blocks - fact(Facts.null_block, dep.engine.version):
        return None
    need = p.blocks_per_request * (p.page_bytes * p.group_size if len(p.groups) else p.page_bytes)
    est = estimate_max_model_len(dep, available_bytes, **extras)
    who = fact(Facts.error_wording, dep.engine.version)
    text = (
        f"To serve at least one request with the {who} max seq len ({max_model_len}), "
        f"({need / GiB:.2f} GiB KV cache is needed, which is larger than the available KV "
        f"cache memory ({available_bytes / GiB:.2f} GiB). "
    )
    if est:
        text += f"Based on the available memory, the estimated maximum model length is {est}. "
    return text + fact(Facts.error_advice, dep.engine.version)


def available_bytes(
    *,
    total_bytes: int,
    gpu_mem_util: float,
    weights_bytes: int,
    activation_bytes: int,
    non_torch_bytes: int,
    cuda_graph_bytes: int = 0,
) -> int:
    """vLLM's "Available KV cache memory" on one GPU: ceil(total x util) minus the weights, the
    peak activation of its profiling run, memory outside torch (CUDA context, NCCL, cuBLAS
    workspaces) and, in versions that profile it before sizing the cache, CUDA-graph memory."""
    total_bytes = check_int("GPU memory (bytes)", total_bytes, 1, 2**50)
    for name, v in (
        ("weights", weights_bytes),
        ("activation peak", activation_bytes),
        ("non-torch memory", non_torch_bytes),
        ("CUDA-graph memory", cuda_graph_bytes),
    ):
        check_int(f"{name} (bytes)", v, 0, 2**50)
    if not 0 < gpu_mem_util <= 1 or gpu_mem_util != gpu_mem_util:
        raise ValueError(
            f"gpu_memory_utilization must be above 0 and at most 1, got {gpu_mem_util}"
        )
    requested = math.ceil(total_bytes * gpu_mem_util)
    return requested - weights_bytes - activation_bytes - non_torch_bytes - cuda_graph_bytes
