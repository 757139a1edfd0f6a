"""The capacity lines vLLM prints at start-up, predicted (steps 1-5 of
docs/vllm.md#the-start-up-lines).

predict() checks its arguments, resolves the engine settings, lays the layers out on the GPUs
and pipeline stages and finds the stage whose grouping binds (each a step in ``steps``), and
turns that stage's blocks into the two numbers vLLM prints. The longest max_model_len that fits,
vLLM's refusal to start and its available memory are in ``startup``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ...config.limits import MAX_CONTEXT
from ...core.arith import cdiv
from ...core.model import ModelSpec, RecurrentState, counted
from ...core.units import check_int
from .defaults import DEFAULT_BLOCK_SIZE
from .facts import fact, resolve_version
from .speculative import speculative_view
from .steps import (
    Binding,
    EngineSettings,
    binding_stage,
    convention_notes,
    engine_settings,
    layers_on_gpu,
    pipeline_stages,
)


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
    notes: list[str] = []
    spec = speculative_view(spec, resolve_version(vllm_version), notes)
    kinds = [lay for lay, _ in counted(spec.layers)]  # each distinct layer once, for the scans
    _check_servable(spec, kinds)
    available_bytes = check_int("available KV cache memory (bytes)", available_bytes, 0, 2**50)
    max_model_len = check_int("max_model_len", max_model_len, 1, MAX_CONTEXT)
    block_size = check_int("block size", block_size, 1, 4096)
    tp = check_int("tensor parallel size", tp, 1, 4096)
    pp = check_int("pipeline parallel size", pp, 1, 4096)
    num_draft_layers = check_int("draft layers", num_draft_layers, 0, 64)
    settings = engine_settings(
        spec,
        kinds,
        notes,
        max_model_len=max_model_len,
        pp=pp,
        block_size=block_size,
        vllm_version=vllm_version,
        max_num_batched_tokens=max_num_batched_tokens,
        kv_dtype=kv_dtype,
        scales=scales,
        state_dtype=state_dtype,
        mamba_cache_dtype=mamba_cache_dtype,
        mamba_ssm_cache_dtype=mamba_ssm_cache_dtype,
        enable_prefix_caching=enable_prefix_caching,
        mamba_cache_mode=mamba_cache_mode,
        architecture=architecture,
        gdn_prefill_checkpoint=gdn_prefill_checkpoint,
        usage_context=usage_context,
        gpu_memory_bytes=gpu_memory_bytes,
        gpu_name=gpu_name,
        mm_batch_tokens=mm_batch_tokens,
        mla_block_rule=mla_block_rule,
    )
    _note_qwen3_5_before_hook(kinds, settings.version, mamba_ssm_cache_dtype, notes)
    layers = layers_on_gpu(spec, num_draft_layers, tp)
    parts, stages = pipeline_stages(spec, layers, pp)
    binding = binding_stage(
        layers,
        stages,
        settings,
        available_bytes=available_bytes,
        max_model_len=max_model_len,
        notes=notes,
    )
    return _prediction(binding, settings, kinds, parts, available_bytes, max_model_len, notes)


def _check_servable(spec: ModelSpec, kinds: list) -> None:
    """Refuse a model vLLM cannot serve, by name."""
    unsupported = next((lay.vllm_unsupported for lay in kinds if lay.vllm_unsupported), None)
    if unsupported:
        raise ValueError(
            f"vLLM cannot serve {spec.name}: {unsupported} (the encoder-decoder "
            "models, mllama among them, were removed after v0.10.2, PR #24907)"
        )


def _note_qwen3_5_before_hook(
    kinds: list, version: tuple[int, ...], ssm_flag: str | None, notes: list[str]
) -> None:
    """Say it where a Qwen3.5 state declares its format (config.json mamba_ssm_dtype) but the
    version asked predates vLLM reading it: the release has no Qwen3.5 model, and main builds
    stamped with its number straddle PR #34489 (tests/data/vllm-facts.md, Q18)."""
    if fact("qwen3_5_ssm_from_config", version) or ssm_flag not in (None, "auto"):
        return
    declared = sorted(
        {
            lay.ssm_dtype
            for lay in kinds
            if isinstance(lay, RecurrentState)
            and lay.ssm_dtype
            and lay.ssm_dtype_field == "mamba_ssm_dtype"
        }
    )
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
    if fact("tokens_line", s.version) == "concurrency":
        tokens = int(conc * max_model_len)
        formula = "int(max_concurrency x max_model_len)"
    else:
        tokens = num_blocks // len(bind.groups) * bind.block_size
        formula = "num_blocks // groups x block_size"
    # Say the engine conventions these numbers rest on.
    notes = (
        list(bind.notes) + notes + convention_notes(binding, kinds=kinds, settings=s, parts=parts)
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
        requested_block_size=s.requested_block_size,
        block_size_line=s.block_size_line,
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
        stage=binding.index,
        vllm_version=".".join(map(str, s.version)),
        kv_cache_dtype=s.fmt.name,
        stage_blocks=tuple(binding.stage_blocks),
        notes=tuple(notes),
    )
