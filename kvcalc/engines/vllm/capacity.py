"""The capacity lines vLLM prints at start-up, predicted (steps 1-5 of the package docstring),
the longest max_model_len that fits, vLLM's refusal to start, and its available memory."""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, field

from ...cache.kv import pp_partition
from ...config.limits import MAX_CONTEXT
from ...core.arith import cdiv, last_true
from ...core.dtypes import DType, get_dtype
from ...core.model import FullAttention, Layer, MLALatent, ModelSpec, RecurrentState, counted
from ...core.units import GiB, check_int
from .defaults import (
    ASSUMED_GPU,
    DEFAULT_BLOCK_SIZE,
    default_max_num_batched_tokens,
    default_max_num_seqs,
    gpu_generation,
    mla_block_size,
)
from .facts import fact, resolve_version
from .formats import (
    MAMBA_ALL_MODE,
    CacheFormat,
    cache_format,
    mamba_cache_mode_of,
    mamba_dtype,
    vllm_bytes_per_token,
)
from .grouping import KVCacheGrouping, layer_grouping, per_request_blocks


@dataclass(frozen=True, kw_only=True)
class Group:
    kind: str  # full, sliding, chunked, mla, state
    layers: int  # real layers in this group
    padding: int  # padding layers added to reach the group size
    blocks_per_request: int  # what vLLM's start-up check reserves: its worst case
    span: int = 0  # a sliding window or an attention chunk, in tokens
    block_size: int = 0  # tokens per block in this group

    def held_blocks(self, n: int) -> int:
        """Blocks one running request holds in this group while it computes its n-th token:
        the blocks of its n tokens, less those vLLM has freed (the v1 KV-cache manager's
        remove_skipped_blocks with n - 1 tokens computed: a sliding window frees the blocks
        wholly before computed - window + 1, a chunk those before the current chunk); a state
        its blocks whatever n."""
        if self.kind == "state":
            return self.blocks_per_request
        bs = self.block_size
        alloc = cdiv(n, bs)
        if self.kind == "sliding" and self.span:
            return alloc - max(0, n - self.span) // bs
        if self.kind == "chunked" and self.span:
            return alloc - (n - 1) // self.span * self.span // bs
        return alloc

    def to_dict(self) -> dict:
        return asdict(self)


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
        d["groups"] = [g.to_dict() for g in self.groups]
        d["num_groups"] = len(self.groups)
        d["capacity_lines"] = self.capacity_lines()
        return d

    def held_blocks(self, n: int | None = None) -> int:
        """Blocks one running request holds at n tokens (default max_model_len), every group
        summed (Group.held_blocks): what a decoding request really keeps, against the worst
        case blocks_per_request that the start-up line divides by."""
        n = self.max_model_len if n is None else n
        return sum(g.held_blocks(n) for g in self.groups)

    def capacity_lines(self) -> list[str]:
        """The capacity lines as this vLLM version prints them (one line from v0.28.0, two
        before; a CUDA GPU named "GPU")."""
        tokens = f"GPU KV cache size: {self.kv_cache_tokens:,} tokens"
        conc = (
            f"Maximum concurrency for {self.max_model_len:,} tokens per request: "
            f"{self.max_concurrency:.2f}x"
        )
        if fact("log_format", self.vllm_version or None) == "one line":
            return [f"{tokens}, {conc}"]
        return [tokens, conc]


def _batched_tokens(
    kinds: list,
    version: tuple[int, ...],
    max_model_len: int,
    usage_context: str,
    gpu_memory_bytes: int | None,
    gpu_name: str | None,
    mm_batch_tokens: int | None,
    notes: list[str],
) -> int:
    """max_num_batched_tokens when none is given: the version's default for the usage context
    and GPU (an 80 GiB H100 when none is given), raised to the multimodal floor and capped at
    max_num_seqs x max_model_len, as EngineArgs does; the default taken is noted when a window
    or chunk depends on it."""
    assumed = gpu_memory_bytes is None
    gpu_bytes, gname = ASSUMED_GPU if gpu_memory_bytes is None else (gpu_memory_bytes, gpu_name)
    shown = ".".join(map(str, version))
    tokens = default_max_num_batched_tokens(
        shown, gpu_bytes, gname, usage_context=usage_context, max_model_len=max_model_len
    )
    if mm_batch_tokens and mm_batch_tokens > tokens and fact("mm_prefix_lm_batch_floor", version):
        tokens = min(mm_batch_tokens, default_max_num_seqs(shown, gpu_bytes, gname) * max_model_len)
    if any(lay.token_bound() is not None for lay in kinds):
        # Only windows and chunks depend on it: say which default was taken.
        notes.append(
            f"max_num_batched_tokens {tokens:,}: vLLM {shown}'s "
            f"default for "
            f"{'vllm serve' if usage_context == 'serve' else 'the LLM class'}"
            + (
                " on an 80 GiB H100 (no GPU given)"
                if assumed
                else f" on {gname or f'a {gpu_bytes / GiB:.0f} GiB GPU'}"
            )
        )
    return tokens


def _state_formats(
    kinds: list, state_dtype: str, mamba_cache_dtype: str, mamba_ssm_cache_dtype: str
) -> tuple[DType, DType]:
    """The conv and SSM state formats as vLLM's flags set them ('auto': the model's dtype, or
    the format a state's model fixes, as Kimi's KDA does float32)."""
    sdtype = get_dtype(state_dtype, ("fp32", "fp16", "bf16"))
    conv = get_dtype(mamba_dtype(mamba_cache_dtype, "--mamba-cache-dtype") or sdtype.name)
    asked_ssm = mamba_dtype(mamba_ssm_cache_dtype, "--mamba-ssm-cache-dtype")
    # 'auto' for a state whose model fixes its format (Kimi's KDA: float32) is that format
    fixed = sorted(
        {lay.ssm_dtype for lay in kinds if isinstance(lay, RecurrentState) and lay.ssm_dtype}
    )
    ssm = get_dtype(asked_ssm or (fixed[0] if len(fixed) == 1 else conv.name))
    return conv, ssm


def _mla_block(
    spec: ModelSpec,
    kinds: list,
    block_size: int,
    version: tuple[int, ...],
    gpu_name: str | None,
    fmt: CacheFormat,
    notes: list[str],
) -> tuple[int, str]:
    """The block size vLLM picks for an MLA model's attention kernel (mla_block_size), and the
    line it logs; said in the notes."""
    block_size, block_line = mla_block_size(spec.layers, block_size, version, gpu_name, fmt)
    on = gpu_name or ASSUMED_GPU[1] + " (no GPU given)"
    mla = any(lay.kind == "mla" for lay in kinds)
    if block_line:
        notes.append(
            f"MLA block size {block_size} tokens on {on}, as vLLM "
            f"{'.'.join(map(str, version))} picks it for its attention kernel "
            f'(it logs "{block_line}")'
        )
    elif mla and gpu_generation(gpu_name) == "rocm":
        notes.append(
            "the block size ROCm's MLA kernels take is not modelled: blocks of "
            f"{block_size} tokens as given"
        )
    elif (
        mla
        and gpu_generation(gpu_name) == "hopper"
        and version >= (0, 18, 0)
        and block_size == DEFAULT_BLOCK_SIZE
    ):
        notes.append(
            f"MLA on {on}: FlashAttention MLA takes blocks of 16 tokens for a "
            "16-bit cache (vLLM up to 0.17.x forced 64 for FlashMLA; an FP8 cache "
            "still gets 64)"
        )
    return block_size, block_line


def _state_mode(
    kinds: list,
    version: tuple[int, ...],
    block_size: int,
    mamba_cache_mode: str | None,
    enable_prefix_caching: bool | None,
    architecture: str | None,
    gdn_prefill_checkpoint: bool,
    notes: list[str],
) -> tuple[str, bool, int, int]:
    """The Mamba cache mode, whether a Gated DeltaNet prefill checkpoint is kept, the blocks a
    recurrent group keeps per request, and the alignment of a hybrid model's block size."""
    has_state = any(lay.state_elements for lay in kinds)
    hybrid = has_state and any(lay.stores_tokens for lay in kinds)
    if mamba_cache_mode is None:
        mode = (
            mamba_cache_mode_of(version, enable_prefix_caching, hybrid, architecture)
            if has_state
            else "none"
        )
    elif mamba_cache_mode in ("none", "align", "all"):
        mode = mamba_cache_mode
    else:
        raise ValueError(
            f"mamba_cache_mode must be none, align or all, got {str(mamba_cache_mode)[:20]!r}"
        )
    if mode == "all" and has_state:
        raise ValueError(
            "mamba_cache_mode 'all' (prefix caching on a model with Mamba "
            "prefix-caching support, vLLM 0.15.0-0.27.x) is not modelled: its "
            "block size follows the Mamba chunk size; give "
            "--no-enable-prefix-caching or vLLM 0.28.0 on"
        )
    checkpoint = (
        bool(gdn_prefill_checkpoint)
        and mode == "align"
        and fact("gdn_prefill_checkpoint", version)
        and any(getattr(lay, "flavor", "") == "gated_deltanet" for lay in kinds)
    )
    state_blocks = 1 if mode == "none" else 2 + int(checkpoint)
    alignment = 16 if fact("hybrid_block_alignment", version) == "16" else max(16, block_size)
    if checkpoint:
        alignment = math.lcm(alignment, 64)
    if any(lay.kind == "mla" for lay in kinds) and has_state:
        # MLA beside recurrent layers (Kimi-Linear): the raised attention block must suit the
        # MLA kernel, which on Hopper (FlashMLA) takes blocks of 64 tokens (vLLM's CUDA platform
        # forces 64 for FlashMLA; CUTLASS MLA on Blackwell takes 128:
        # docs/engine-facts.md#mla-block-size)
        alignment = math.lcm(alignment, 64)
        notes.append(
            "MLA with recurrent layers: the attention block is a multiple of 64 tokens "
            "(FlashMLA on Hopper; CUTLASS MLA on Blackwell needs 128)"
        )
    return mode, checkpoint, state_blocks, alignment


def _layers_on_gpu(spec: ModelSpec, num_draft_layers: int, tp: int) -> list[Layer]:
    """The model's layers (and a draft model's, in the same pool) as one GPU holds them."""
    layers = list(spec.layers)
    if num_draft_layers:
        # A draft model (EAGLE adds one decoder layer) keeps its cache in the same pool, with
        # the target's geometry and full attention.
        ref = next((lay for lay in spec.kv_layers if not isinstance(lay, MLALatent)), None)
        if ref is None:
            raise ValueError("draft layers need an attention layer to copy the geometry from")
        draft = FullAttention(
            kv_heads=ref.kv_heads,
            head_dim=ref.head_dim,
            v_head_dim=ref.v_head_dim,
            q_heads=ref.q_heads,
        )
        layers += [draft] * num_draft_layers
    if tp > 1:  # validates tp against the KV heads; once per distinct layer
        split: dict = {}
        layers = [split.get(id(lay)) or split.setdefault(id(lay), lay.split(tp)) for lay in layers]
    return layers


def _stages(spec: ModelSpec, layers: list[Layer], pp: int) -> tuple[list[int], list[list[int]]]:
    """The layers per pipeline stage, and each stage's layer positions (drafts: the last)."""
    parts = pp_partition(len(spec.layers), pp)
    stages, start = [], 0
    for i, count in enumerate(parts):
        positions = list(range(start, start + count))
        if i == pp - 1:
            positions += list(range(len(spec.layers), len(layers)))  # drafts: the last stage
        stages.append(positions)
        start += count
    return parts, stages


def _binding_stage(
    layers: list[Layer],
    stages: list[list[int]],
    *,
    version: tuple[int, ...],
    available_bytes: int,
    max_model_len: int,
    in_flight: int,
    state_blocks: int,
    gkw: dict,
    notes: list[str],
):
    """The grouping whose numbers bind, its pool's blocks, the blocks a request takes in each
    of its groups, every stage's blocks, and the binding stage's index."""
    pp = len(stages)
    fmt = gkw["fmt"]
    if pp > 1 and fact("pp_grouping", version) == "whole model":
        # v0.11.0 on: groups from the whole model; each stage's block holds only its own layers
        # of each group; every stage takes the smallest num_blocks of all.
        g = layer_grouping(layers, **gkw)
        per_req = per_request_blocks(g, max_model_len, in_flight, state_blocks)
        stage_blocks = []
        for positions in stages:
            mine = set(positions)
            slots = max(len(mine.intersection(group.members)) for group in g.groups)
            per_block = (
                g.page_bytes * max(1, slots)
                if not g.uniform
                else sum(
                    g.block_size * vllm_bytes_per_token(layers[i], fmt)
                    for i in positions
                    if layers[i].stores_tokens
                )
            )
            stage_blocks.append(available_bytes // max(1, per_block))
        index = min(range(pp), key=lambda i: stage_blocks[i])
        notes.append(
            "pipeline stages share one grouping of the whole model (vLLM 0.11.0 on); "
            "the stage with the fewest blocks sets the numbers"
        )
        return g, stage_blocks[index], per_req, stage_blocks, index
    configs = []
    for positions in stages:
        g = layer_grouping([layers[i] for i in positions], **gkw)
        configs.append(
            (
                g,
                available_bytes // g.block_bytes,
                per_request_blocks(g, max_model_len, in_flight, state_blocks),
            )
        )
    stage_blocks = [c[1] for c in configs]
    index = min(range(len(configs)), key=lambda i: configs[i][1] / max(1, sum(configs[i][2])))
    bind, num_blocks, per_req = configs[index]
    return bind, num_blocks, per_req, stage_blocks, index


def _convention_notes(
    bind: KVCacheGrouping,
    per_req: list[int],
    *,
    kinds: list,
    version: tuple[int, ...],
    batches: int,
    in_flight: int,
    conv: DType,
    ssm: DType,
    mode: str,
    state_blocks: int,
    checkpoint: bool,
    architecture: str | None,
    parts: list[int],
) -> list[str]:
    """The engine conventions the numbers rest on: tokens in flight, the state formats and
    blocks, the pipeline stages."""
    notes = []
    if batches > 1 and any(
        r > 0 and g.spec.token_bound() is not None
        for g, r in zip(bind.groups, per_req, strict=True)
    ):
        notes.append(
            f"each window or chunk reserves room for {batches} x max_num_batched_tokens "
            f"({in_flight:,} tokens in flight): asynchronous scheduling, vLLM 0.26.0 on"
        )
    if any(g.spec.state_elements for g in bind.groups):
        notes.append(f"recurrent state: conv in {conv.name.upper()}, SSM in {ssm.name.upper()}")
        if mode == "none":
            notes.append(
                "a recurrent state takes one block per request: prefix caching off "
                "(mamba_cache_mode 'none')"
            )
        else:
            notes.append(
                f"prefix caching on (mamba_cache_mode 'align'): each recurrent group "
                f"keeps {state_blocks} blocks per request"
                + (
                    " (2 + one prefill checkpoint of FlashInfer's Gated DeltaNet)"
                    if checkpoint
                    else ""
                )
            )
            if (
                fact("gdn_prefill_checkpoint", version)
                and not checkpoint
                and any(getattr(lay, "flavor", "") == "gated_deltanet" for lay in kinds)
            ):
                notes.append(
                    "on Hopper (or Blackwell with CUDA 13) vLLM 0.33.0's FlashInfer "
                    "Gated DeltaNet prefill keeps a third block and aligns blocks to "
                    "64 tokens: set gdn_prefill_checkpoint (--gdn-prefill-checkpoint)"
                )
            if fact("mamba_cache_mode", version) == "all or align" and architecture is None:
                notes.append(
                    "vLLM 0.15.0-0.27.x uses mamba_cache_mode 'all' instead for "
                    + ", ".join(MAMBA_ALL_MODE)
                    + " (not modelled)"
                )
    if len(parts) > 1:
        notes.append(f"pipeline stages hold {', '.join(map(str, parts))} layers")
    return notes


def predict(
    spec: ModelSpec,
    *,
    available_bytes: int,
    max_model_len: int,
    block_size: int = DEFAULT_BLOCK_SIZE,
    tp: int = 1,
    pp: int = 1,
    kv_dtype: str = "bf16",
    state_dtype: str = "bf16",
    max_num_batched_tokens: int | None = None,
    num_draft_layers: int = 0,
    vllm_version: str | None = None,
    scales: bool = False,
    mamba_cache_dtype: str = "auto",
    mamba_ssm_cache_dtype: str = "auto",
    enable_prefix_caching: bool | None = None,
    mamba_cache_mode: str | None = None,
    architecture: str | None = None,
    gdn_prefill_checkpoint: bool = False,
    usage_context: str = "serve",
    gpu_memory_bytes: int | None = None,
    gpu_name: str | None = None,
    mm_batch_tokens: int | None = None,
    mla_block_rule: bool = True,
) -> VllmPrediction:
    """The capacity lines vLLM prints for ``spec`` given the memory it found for the cache.

    ``kv_dtype`` is kvcalc's name (bf16, fp8, int8, ...) or vLLM's --kv-cache-dtype; with
    ``scales`` a quantized kvcalc format is vLLM's per-token-head variant. A format the chosen
    version does not have, or one kvcalc does not model, is refused by name, never replaced by
    another one's numbers.

    Recurrent states: ``state_dtype`` is what vLLM's 'auto' means for them (the model's dtype);
    ``mamba_cache_dtype`` sets the conv state (and the SSM state while that is 'auto'),
    ``mamba_ssm_cache_dtype`` the SSM state alone, as vLLM's flags do (resolve a config's own
    choice with state_dtypes()). ``enable_prefix_caching`` None is the version's default;
    with it on a recurrent group keeps 2 blocks a request ('align'), 3 with
    ``gdn_prefill_checkpoint`` (v0.33.0 Gated DeltaNet on FlashInfer prefill: Hopper, or
    Blackwell with CUDA 13). ``architecture`` (config.json's) picks 'all' mode in
    v0.15.0-v0.27.x, which kvcalc does not model.

    ``max_num_batched_tokens`` None is the version's default for ``usage_context`` ('serve':
    ``vllm serve``, 'llm': the LLM class) on the GPU given (an 80 GiB H100 when none is, said
    in the notes), raised to ``mm_batch_tokens`` (mm_batch_floor(config)) and capped at
    max_num_seqs x max_model_len, as EngineArgs does.

    MLA models: the block size is the one vLLM picks for its MLA kernel on ``gpu_name``'s
    generation (an H100 when none is given), see mla_block_size; ``mla_block_rule=False``
    keeps ``block_size`` as given (a block size read from a log)."""
    kinds = [lay for lay, _ in counted(spec.layers)]  # each distinct layer once, for the scans
    unsupported = next((lay.vllm_unsupported for lay in kinds if lay.vllm_unsupported), None)
    if unsupported:
        raise ValueError(
            f"vLLM cannot serve {spec.name}: {unsupported} (the encoder-decoder "
            "models, mllama among them, were removed after v0.10.2, PR #24907)"
        )
    available_bytes = check_int("available KV cache memory (bytes)", available_bytes, 0, 2**50)
    max_model_len = check_int("max_model_len", max_model_len, 1, MAX_CONTEXT)
    block_size = check_int("block size", block_size, 1, 4096)
    tp = check_int("tensor parallel size", tp, 1, 4096)
    pp = check_int("pipeline parallel size", pp, 1, 4096)
    num_draft_layers = check_int("draft layers", num_draft_layers, 0, 64)
    version = resolve_version(vllm_version)
    notes: list[str] = []
    if max_num_batched_tokens is None:
        max_num_batched_tokens = _batched_tokens(
            kinds,
            version,
            max_model_len,
            usage_context,
            gpu_memory_bytes,
            gpu_name,
            mm_batch_tokens,
            notes,
        )
    mnbt = check_int("max_num_batched_tokens", max_num_batched_tokens, 1, MAX_CONTEXT)
    fmt = cache_format(kv_dtype, scales, version)
    conv, ssm = _state_formats(kinds, state_dtype, mamba_cache_dtype, mamba_ssm_cache_dtype)
    asked_block = block_size
    block_line = ""
    if not any(lay.state_elements for lay in kinds) and mla_block_rule:
        block_size, block_line = _mla_block(spec, kinds, block_size, version, gpu_name, fmt, notes)
    mode, checkpoint, state_blocks, alignment = _state_mode(
        kinds,
        version,
        block_size,
        mamba_cache_mode,
        enable_prefix_caching,
        architecture,
        gdn_prefill_checkpoint,
        notes,
    )
    layers = _layers_on_gpu(spec, num_draft_layers, tp)
    parts, stages = _stages(spec, layers, pp)
    # A window (or chunk) reserves room for the tokens in flight: one batch, or two under the
    # asynchronous scheduling of newer releases (with pipeline stages: one per stage).
    batches = fact("in_flight_batches", version)
    in_flight = mnbt * (batches if pp == 1 else max(pp, 1) if batches > 1 else 1)
    gkw = dict(
        block_size=block_size,
        fmt=fmt,
        state_dtypes=(conv, ssm),
        alignment=alignment,
        threshold=fact("group_threshold", version),
        version=version,
    )
    bind, num_blocks, per_req, stage_blocks, index = _binding_stage(
        layers,
        stages,
        version=version,
        available_bytes=available_bytes,
        max_model_len=max_model_len,
        in_flight=in_flight,
        state_blocks=state_blocks,
        gkw=gkw,
        notes=notes,
    )
    per_request = sum(per_req)
    conc = num_blocks / per_request if per_request else 0.0
    if fact("tokens_line", version) == "concurrency":
        tokens = int(conc * max_model_len)
        formula = "int(max_concurrency x max_model_len)"
    else:
        tokens = num_blocks // len(bind.groups) * bind.block_size
        formula = "num_blocks // groups x block_size"
    # Say the engine conventions these numbers rest on.
    notes = (
        list(bind.notes)
        + notes
        + _convention_notes(
            bind,
            per_req,
            kinds=kinds,
            version=version,
            batches=batches,
            in_flight=in_flight,
            conv=conv,
            ssm=ssm,
            mode=mode,
            state_blocks=state_blocks,
            checkpoint=checkpoint,
            architecture=architecture,
            parts=parts,
        )
    )
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
    return VllmPrediction(
        available_bytes=available_bytes,
        max_model_len=max_model_len,
        block_size=bind.block_size,
        requested_block_size=asked_block,
        block_size_line=block_line,
        page_bytes=bind.page_bytes,
        group_size=bind.group_size,
        groups=groups,
        padding_layers=bind.padding_layers,
        padding_waste_pct=bind.padding_waste_pct,
        state_page_padding_pct=bind.state_page_padding_pct,
        num_blocks=num_blocks,
        blocks_per_request=per_request,
        max_concurrency=conc,
        kv_cache_tokens=tokens,
        tokens_formula=formula,
        stage=index,
        vllm_version=".".join(map(str, version)),
        kv_cache_dtype=fmt.name,
        stage_blocks=tuple(stage_blocks),
        notes=tuple(notes),
    )


def _default_mnbt(kw: dict, max_model_len: int | None) -> int:
    """predict()'s default max_num_batched_tokens for these keywords (before the
    multimodal floor is applied by predict itself)."""
    assumed = kw.get("gpu_memory_bytes") is None
    gpu_bytes, gname = ASSUMED_GPU if assumed else (kw["gpu_memory_bytes"], kw.get("gpu_name"))
    tokens = default_max_num_batched_tokens(
        kw.get("vllm_version"),
        gpu_bytes,
        gname,
        usage_context=kw.get("usage_context", "serve"),
        max_model_len=max_model_len,
    )
    floor = kw.get("mm_batch_tokens")
    if floor and floor > tokens and fact("mm_prefix_lm_batch_floor", kw.get("vllm_version")):
        tokens = floor
        if max_model_len:
            tokens = min(
                tokens,
                default_max_num_seqs(kw.get("vllm_version"), gpu_bytes, gname) * max_model_len,
            )
    return tokens


def estimate_max_model_len(spec: ModelSpec, *, available_bytes: int, **kw) -> int | None:
    """The longest max_model_len one request of which fits in the pool, as vLLM's
    estimate_max_model_len finds it by bisection (at most 10^8 tokens); None when a request's
    blocks stop growing (every layer keeps a bounded number of tokens), 0 when not even one
    token fits."""
    if kw.get("max_num_batched_tokens") is None:
        # vLLM searches with its scheduler's one max_num_batched_tokens: fix the default once.
        kw = {**kw, "max_num_batched_tokens": _default_mnbt(kw, None)}
    try:
        key = tuple(sorted(kw.items()))
        hash((spec, key))
    except TypeError:  # an unhashable argument: no memo
        return _estimate_max_model_len(spec, available_bytes, **kw)
    return _estimate_memo(spec, available_bytes, key)


@functools.lru_cache(maxsize=16)
def _estimate_memo(spec: ModelSpec, available_bytes: int, key: tuple) -> int | None:
    """The bisection, once per model, pool and engine settings: it takes about 28 predictions,
    and a Budget page whose context does not fit asks for it again at every point of its
    concurrency curve (42 x 28 predictions of a 1,024-layer model took 8 s)."""
    return _estimate_max_model_len(spec, available_bytes, **dict(key))


def _estimate_max_model_len(spec: ModelSpec, available_bytes: int, **kw) -> int | None:
    def blocks(n: int) -> tuple[int, int]:
        p = predict(spec, available_bytes=available_bytes, max_model_len=n, **kw)
        return p.blocks_per_request, p.num_blocks

    null = fact("null_block", kw.get("vllm_version"))  # v0.29.0 on: the null block first

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
    spec: ModelSpec,
    *,
    available_bytes: int,
    max_model_len: int,
    prediction: VllmPrediction | None = None,
    **kw,
) -> str | None:
    """vLLM's own refusal to start when one request of max_model_len does not fit (None when it
    fits), in the wording of the chosen version, with its estimate of the longest max_model_len
    that would (tests/data/vllm-facts.md, Q7). ``prediction``: predict()'s result for these
    same arguments, when the caller has it already."""
    version = kw.get("vllm_version")
    if kw.get("max_num_batched_tokens") is None:
        kw = {**kw, "max_num_batched_tokens": _default_mnbt(kw, max_model_len)}
    p = prediction or predict(
        spec, available_bytes=available_bytes, max_model_len=max_model_len, **kw
    )
    if p.blocks_per_request <= p.num_blocks - fact("null_block", version):
        return None
    need = p.blocks_per_request * (p.page_bytes * p.group_size if len(p.groups) else p.page_bytes)
    est = estimate_max_model_len(spec, available_bytes=available_bytes, **kw)
    v = resolve_version(version)
    who = fact("error_wording", version)
    text = (
        f"To serve at least one request with the {who} max seq len ({max_model_len}), "
        f"({need / GiB:.2f} GiB KV cache is needed, which is larger than the available KV "
        f"cache memory ({available_bytes / GiB:.2f} GiB). "
    )
    if est:
        text += f"Based on the available memory, the estimated maximum model length is {est}. "
    text += (
        "Try increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU "
        "backend) or decreasing `max_model_len` when initializing the engine."
        if v >= (0, 22, 0)
        else "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
        "initializing the engine."
    )
    if v >= (0, 20, 0):
        text += (
            " See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
        )
    return text


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
