"""vLLM's release facts: what changed between versions, each with its source, and the
version string read as numbers (``fact(Facts.name, version)`` is the one way the other modules
ask; every release rule of kvcalc.engines.vllm is a fact here)."""

from __future__ import annotations

import re
from typing import Any, Generic, TypeVar

T = TypeVar("T")
Release = tuple[int, int, int]


def resolve_version(v: str | None) -> tuple[int, ...]:
    """A version string ("0.11.0", "v0.10.1rc2") as numbers; None means NEWEST."""
    if not v:
        v = NEWEST
    text = str(v)[:40].strip().lower().lstrip("v")
    nums = re.findall(r"\d+", text.replace(".x", ".99"))  # "0.11.x": the last 0.11 release
    if not nums or not text[:1].isdigit():
        raise ValueError(f"vllm_version must look like 0.10.1, got {str(v)[:40]!r}")
    return tuple(int(n) for n in nums[:3]) + (0,) * (3 - min(3, len(nums)))


def _growing(
    *rows: tuple[Release, tuple[str, ...], str],
) -> tuple[tuple[Release, frozenset[str], str], ...]:
    """Steps of a set that only grows: each row names what its release added."""
    have: frozenset[str] = frozenset()
    out = []
    for since, added, why in rows:
        have = have | frozenset(added)
        out.append((since, have, why))
    return tuple(out)


_ADVICE = "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing"
_DOCS_LINK = (
    " See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
)


# -- facts that changed between vLLM releases ----------------------------------------------------
# Every rule of vLLM's capacity arithmetic that changed between releases, with the first release
# that has each value and the change that made it, read off every wheel from v0.7.0 to v0.33.0
# (how, and what is not pinned down: docs/vllm.md; quotes: tests/data/vllm-facts.md).


class Fact(Generic[T]):
    """What changed, and its steps: (first release, value, source) each."""

    def __init__(self, what: str, *steps: tuple[Release, T, str]) -> None:
        self.what, self.steps = what, steps

    def at(self, version: tuple[int, ...]) -> T:
        value = self.steps[0][1]
        for since, v, _ in self.steps:
            if version >= since:
                value = v
        return value


class Facts:
    """Every release rule, a typed Fact named for what changed (``fact(Facts.x, version)``)."""

    group_threshold = Fact[float | None](
        "hybrid grouping: all types get the largest count as group size when max < min x this "
        "(None: always the smallest count)",
        ((0, 9, 1), None, "hybrid grouping first appears"),
        ((0, 12, 0), 1.25, "PR #29303 (gpt-oss-20b + EAGLE: 12 sliding + 13 full)"),
        ((0, 18, 0), 1.5, "PR #36684 (speculative drafters add layers to one type)"),
    )
    tokens_line = Fact[str](
        '"GPU KV cache size: N tokens"',
        ((0, 8, 0), "blocks", "PR #13596: num_blocks // groups x block_size"),
        (
            (0, 20, 1),
            "concurrency",
            "int(max_concurrency x max_model_len); PR not pinned (#41069 or #40694)",
        ),
    )
    pp_grouping = Fact[str](
        "pipeline parallelism: layers grouped per stage, or over the whole model",
        ((0, 0, 0), "per stage", "each worker grouped its own layers"),
        (
            (0, 11, 0),
            "whole model",
            "PR #23974: global groups, then the smallest num_blocks of all workers",
        ),
    )
    gpu_memory_utilization = Fact[float](
        "default gpu_memory_utilization",
        ((0, 0, 0), 0.9, "long-standing default"),
        ((0, 20, 0), 0.92, "PR #38284 (with CUDA-graph memory profiled first)"),
    )
    in_flight_batches = Fact[int](
        "batches of max_num_batched_tokens a window or chunk reserves room for (async "
        "scheduling, one pipeline stage)",
        ((0, 0, 0), 1, "max_num_batched_tokens"),
        ((0, 26, 0), 2, "max_in_flight_tokens = 2 x max_num_batched_tokens; PR not pinned"),
    )
    null_block = Fact[int](
        "blocks reserved before checking that one max_model_len request fits",
        ((0, 0, 0), 0, "none"),
        ((0, 29, 0), 1, "PR #47272: the null block"),
    )
    log_format = Fact[str](
        "how the capacity is logged",
        (
            (0, 8, 0),
            "two lines",
            'PR #13596: "GPU KV cache size: N tokens", then "Maximum concurrency for ..."',
        ),
        (
            (0, 28, 0),
            "one line",
            '"GPU KV cache size: N tokens, Maximum concurrency for '
            '... per request: X.XXx"; PR not pinned',
        ),
    )
    error_wording = Fact[str](
        "start-up error wording",
        ((0, 0, 0), "models's", "v0.8.x-v0.21.0"),
        ((0, 22, 0), "model's", "v0.22.0"),
    )
    chunked_local_pages = Fact[bool](
        "chunked local attention layers get pages of their own (ChunkedLocalAttentionSpec, "
        "freed chunk by chunk) rather than full attention's",
        (
            (0, 0, 0),
            False,
            "before v0.10.0 no ChunkedLocalAttentionSpec (v0.9.2's kv_cache_interface.py): "
            "every token kept",
        ),
        ((0, 10, 0), True, "PR #19351 (hybrid KV cache for local chunked attention)"),
        (
            (0, 10, 1),
            False,
            "PR #21761: VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to 0, which "
            "disables the hybrid KV cache manager (v0.10.1-v0.13.0 envs.py)",
        ),
        ((0, 14, 0), True, "the variable defaults to 1 (v0.14.0 envs.py; PR #29627)"),
    )
    hybrid_prefix_caching = Fact[bool](
        "prefix caching on by default for hybrid (attention + Mamba) models",
        (
            (0, 0, 0),
            False,
            "ModelConfig.is_prefix_caching_supported: hybrid models "
            "not (v0.15.0-v0.20.0); v0.27.1 arg_utils: 'and not "
            "model_config.is_hybrid'",
        ),
        ((0, 28, 0), True, "PR #50991 '[Mamba] enable prefix cache by default'"),
    )
    mamba_cache_mode = Fact[str | None](
        "mamba_cache_mode chosen when prefix caching is on (MambaModelConfig)",
        ((0, 0, 0), None, "before v0.15.0: no mamba_cache_mode (not modelled)"),
        (
            (0, 15, 0),
            "all or align",
            "'all' for models with SupportsMambaPrefixCaching, else 'align'",
        ),
        ((0, 28, 0), "align", "PR #50991: 'align' whenever prefix caching is on"),
    )
    hybrid_block_alignment = Fact[str](
        "attention block size for a hybrid model: a multiple of this many tokens",
        ((0, 0, 0), "16", "HybridAttentionMambaModelConfig: kernel block 16"),
        (
            (0, 20, 0),
            "max(16, block_size)",
            "Platform._align_hybrid_block_size: max(smallest kernel block, block_size)",
        ),
    )
    gdn_prefill_checkpoint = Fact[bool](
        "Qwen Gated DeltaNet with FlashInfer prefill in 'align' mode: one more block per "
        "request and blocks a multiple of 64 tokens",
        ((0, 0, 0), False, "absent up to v0.32.0"),
        (
            (0, 33, 0),
            True,
            "qwen_gdn_linear_attn.py: num_prefill_checkpoint_blocks=1, "
            "FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64",
        ),
    )
    nemotron_h_ssm_default = Fact[str](
        "NemotronH SSM state dtype when neither the flag nor config.json sets one",
        (
            (0, 0, 0),
            "fp16",
            "NemotronHForCausalLMConfig: getattr(hf_config, "
            "'mamba_ssm_cache_dtype', 'float16') (seen in v0.14.0)",
        ),
        ((0, 20, 0), "fp32", "DEFAULT_MAMBA_SSM_CACHE_DTYPE = 'float32'"),
    )
    qwen3_5_ssm_from_config = Fact[bool](
        "Qwen3.5 SSM state dtype read from config.json's mamba_ssm_dtype",
        (
            (0, 0, 0),
            False,
            "v0.16.0 has no Qwen3.5 model; main builds before PR #34489 kept the SSM "
            "state in the conv state's dtype",
        ),
        (
            (0, 16, 1),
            True,
            "PR #34489 (2026-02-13), Qwen3_5ForConditionalGenerationConfig."
            "verify_and_update_config: in the main builds stamped 0.16.1rc1.devN (logs "
            "of 2026-03-01 and 03-09 raise the block to the float32 state) and in every "
            "release from v0.17.0",
        ),
    )
    # Speculative decoding (tests/data/vllm-speculative-facts.md, from the wheels v0.10.0 to
    # v0.34.0): the drafter's layers join the pool in every release (Q0); these changed.
    spec_draft_model = Fact[bool](
        "a separate draft model (method 'draft_model') served",
        ((0, 0, 0), False, '"Speculative decoding with draft model is not supported yet"'),
        ((0, 15, 0), True, "PR #24322: vllm/v1/spec_decode/draft_model.py"),
    )
    spec_hybrid = Fact[str](
        "recurrent-state (Mamba, linear attention) models served with speculative decoding",
        ((0, 0, 0), "none", '"Mamba with speculative decoding is not supported yet"'),
        ((0, 10, 2), "qwen3_next", "only a qwen3_next target (Gated DeltaNet)"),
        ((0, 17, 0), "any", "PR #33726 (Nemotron-H MTP and Mamba speculative decoding)"),
    )
    spec_state_blocks = Fact[bool](
        "the start-up count charges a recurrent group num_speculative_tokens more blocks",
        ((0, 0, 0), False, "num_speculative_blocks not in MambaSpec.max_memory_usage_bytes"),
        ((0, 15, 0), True, "PR #30877: page x (1 or 2 + num_speculative_blocks)"),
    )
    spec_conv_rows = Fact[frozenset[str]](
        "recurrent flavours whose conv state keeps conv_kernel - 1 + num_speculative_tokens rows",
        ((0, 0, 0), frozenset(), "no num_spec in MambaStateShapeCalculator"),
        ((0, 10, 2), frozenset({"gated_deltanet"}), "gated_delta_net_state_shape(num_spec)"),
        (
            (0, 17, 0),
            frozenset({"gated_deltanet", "mamba2"}),
            "PR #33726: MambaMixer2 num_spec",
        ),
        (
            (0, 27, 0),
            frozenset({"gated_deltanet", "mamba2", "kda"}),
            "KDA: conv_kernel_size - 1 + num_spec",
        ),
    )
    mm_prefix_lm_batch_floor = Fact[bool](
        "default max_num_batched_tokens raised to one multimodal item (Gemma 4)",
        ((0, 0, 0), False, "absent in v0.21.0"),
        ((0, 22, 0), True, "EngineArgs._get_min_mm_batched_tokens"),
    )
    # Rules of the defaults, the formats and the start-up error (tests/data/vllm-facts.md)
    kv_cache_dtypes = Fact[frozenset[str]](
        "--kv-cache-dtype choices (vLLM's CacheDType Literal, vllm/config/cache.py; Q4)",
        *_growing(
            ((0, 0, 0), ("auto", "fp8", "fp8_e4m3", "fp8_e5m2"), "auto and fp8 (= fp8_e4m3)"),
            ((0, 10, 0), ("fp8_inc",), "Intel Gaudi fp8 (float8_e4m3fn)"),
            ((0, 11, 0), ("bfloat16",), "v0.11.0"),
            ((0, 11, 1), ("fp8_ds_mla",), "DeepSeek sparse MLA layout (MLAAttentionSpec)"),
            ((0, 18, 0), ("float16",), "v0.18.0"),
            (
                (0, 20, 0),
                ("int8_per_token_head", "fp8_per_token_head", "nvfp4")
                + ("turboquant_k8v4", "turboquant_4bit_nc")
                + ("turboquant_k3v4_nc", "turboquant_3bit_nc"),
                "PR #38378 (per-token-head), PR #37332 (nvfp4), TurboQuant",
            ),
            ((0, 25, 0), ("int4_per_token_head",), "PR #40835"),
            ((0, 28, 0), ("nvfp4_4over6",), "PR #45187: the nvfp4 layout"),
            ((0, 30, 0), ("nvfp4_ds_mla",), "flashmla_sparse.py"),
            ((0, 32, 0), ("ultraquant_4bit",), "packed FP4 + UE8M0 slots"),
            ((0, 33, 0), ("octave_k3v4", "octave_k3v3", "octave_k3v3_compact"), "ROCm Octave"),
        ),
    )
    kda_ssm_flag = Fact[bool](
        "--mamba-ssm-cache-dtype sets Kimi-Linear's KDA recurrent state",
        ((0, 0, 0), False, "KDA's recurrent state is float32 (kda_state_dtype)"),
        ((0, 30, 0), True, "float32 or bfloat16 from the flag (v0.30.0)"),
    )
    uniform_type_specs = Fact[bool](
        "layers of one type whose pages differ share one group (UniformTypeKVCacheSpecs)",
        ((0, 0, 0), False, "refused: vLLM cannot allocate them"),
        ((0, 11, 0), True, "UniformTypeKVCacheSpecs: a block holds a page of every layer"),
    )
    mla_block_rule = Fact[str](
        "how an MLA model's block size is chosen for its attention kernel (Q16)",
        (
            (0, 0, 0),
            "forced",
            "CudaPlatformBase.check_and_update_config forces the backend's size",
        ),
        (
            (0, 18, 0),
            "preferred",
            "PR #35122: update_block_size_for_backend asks get_preferred_block_size(16); "
            "a --block-size given is kept",
        ),
    )
    blackwell_flashinfer_mla = Fact[bool](
        "Blackwell takes FlashInfer MLA (blocks of 64) when qk_nope_head_dim is 128",
        ((0, 0, 0), False, "CUTLASS MLA (blocks of 128)"),
        ((0, 15, 0), True, '"Forcing kv cache block size to 64 for FlashInferMLA backend."'),
    )
    mla_block_line_plural = Fact[str](
        'the MLA block line ends "backend." or "backend(s)."',
        ((0, 0, 0), "", "one backend"),
        ((0, 32, 0), "(s)", "every backend asked at once"),
    )
    batch_tier_by = Fact[str](
        "what puts a GPU in the large row of the batch defaults (get_batch_defaults)",
        ((0, 0, 0), "name", "v0.7.x-v0.8.4: H100 or H200 by name (PR #12369)"),
        ((0, 8, 5), "memory", "70 GiB or more (PRs #16158, #17073, #17885)"),
    )
    max_num_seqs_by_tier = Fact[bool](
        "default max_num_seqs by the GPU's row (256 in the small one), not 1,024 everywhere",
        ((0, 0, 0), False, "1,024 on every GPU up to v0.8.3"),
        ((0, 8, 4), True, "256 on the small row (PR #16158)"),
    )
    a100_small_tier = Fact[bool](
        "an A100 takes the small row of the batch defaults whatever its memory",
        ((0, 0, 0), False, "by memory"),
        ((0, 9, 0), True, "v0.9.0: not an A100"),
    )
    huge_batch_tier = Fact[bool](
        "a row of 16,384 batched tokens for GPUs of 160 GiB or more",
        ((0, 0, 0), False, "no such row"),
        ((0, 28, 0), True, "v0.28.0; PR not pinned"),
    )
    gb10_small_tier = Fact[bool](
        "DGX Spark (GB10, compute capability 12.1) stays in the small row",
        ((0, 0, 0), False, "by memory"),
        ((0, 33, 0), True, "v0.33.0"),
    )
    error_advice = Fact[str](
        "the advice that ends the start-up error (Q7)",
        ((0, 0, 0), _ADVICE + " the engine.", "v0.8.x-v0.19.x"),
        ((0, 20, 0), _ADVICE + " the engine." + _DOCS_LINK, "v0.20.0: a link to the docs"),
        (
            (0, 22, 0),
            "Try increasing `gpu_memory_utilization` (which also controls CPU memory on the "
            "CPU backend) or decreasing `max_model_len` when initializing the engine." + _DOCS_LINK,
            "v0.22.0: the CPU backend named",
        ),
    )
    mamba2_spec_pages_unsized = Fact[bool](
        "FalconH1, GraniteMoeHybrid and Zamba2 size their pages without the conv rows "
        "speculative decoding adds to Mamba-2, and fail at start-up",
        ((0, 0, 0), False, "no Mamba-2 with speculative decoding"),
        ((0, 17, 0), True, "PR #33726 widened the conv state"),
        ((0, 32, 0), False, "fixed, PR #47635"),
    )


VERSION_FACTS: dict[str, Fact[Any]] = {k: v for k, v in vars(Facts).items() if isinstance(v, Fact)}
NEWEST = "0.33.0"


def fact(f: Fact[T], version: tuple[int, ...] | str | None = None) -> T:
    """The value of fact ``f`` in ``version`` (a tuple, a string, or None: NEWEST)."""
    return f.at(version if isinstance(version, tuple) else resolve_version(version))


def version_choices() -> list[str]:
    """NEWEST first, then the releases on both sides of every change in VERSION_FACTS."""
    out = dict.fromkeys([NEWEST])  # a dict keeps the first place of each text
    changes = {since for f in VERSION_FACTS.values() for since, _, _ in f.steps[1:]}
    for since in sorted(changes, reverse=True):
        major, minor, patch = since
        before = f"{major}.{minor}.{patch - 1}" if patch else f"{major}.{minor - 1}.x"
        out |= dict.fromkeys((".".join(map(str, since)), before))
    return list(out)
