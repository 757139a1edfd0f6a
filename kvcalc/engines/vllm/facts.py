"""vLLM's release facts: what changed between versions, each with its source, and the
version string read as numbers (``fact(name, version)`` is the one way the other modules ask)."""

from __future__ import annotations

import re
from dataclasses import dataclass


def resolve_version(v: str | None) -> tuple[int, ...]:
    """A version string ("0.11.0", "v0.10.1rc2") as numbers; None means NEWEST."""
    if not v:
        v = NEWEST
    text = str(v)[:40].strip().lower().lstrip("v")
    nums = re.findall(r"\d+", text.replace(".x", ".99"))  # "0.11.x": the last 0.11 release
    if not nums or not text[:1].isdigit():
        raise ValueError(f"vllm_version must look like 0.10.1, got {str(v)[:40]!r}")
    return tuple(int(n) for n in nums[:3]) + (0,) * (3 - min(3, len(nums)))


# -- facts that changed between vLLM releases ----------------------------------------------------
# Every rule of vLLM's capacity arithmetic that changed between releases, with the first release
# that has each value and the change that made it. The releases were read off the Python sources
# of every vLLM wheel on PyPI from v0.7.0 to v0.33.0, compared release by release (release
# candidates and dev builds not checked); PR numbers from vLLM's pull-request threads. Details and
# quotes: tests/data/vllm-facts.md. `predict(..., vllm_version=...)` applies one release's rules;
# the default is NEWEST. A main-branch build's version ("0.16.1rc1.dev111+gafd089f23") is read
# as its first three numbers; where a rule reached main between two releases and real logs of
# such builds show it, its step sits at the builds' stamp (qwen3_5_ssm_from_config: 0.16.1).
#
# Not pinned down: the PR behind the v0.20.1 tokens line (#41069 or #40694's idea), and the PRs
# of the >= 160 GiB batch tier (v0.28.0) and of the in-flight tokens (v0.26.0).


@dataclass(frozen=True, kw_only=True)
class Fact:
    what: str
    steps: tuple[tuple[tuple[int, int, int], object, str], ...]  # (first release, value, source)

    def at(self, version: tuple[int, ...]):
        value = self.steps[0][1]
        for since, v, _ in self.steps:
            if version >= since:
                value = v
        return value


VERSION_FACTS: dict[str, Fact] = {
    "group_threshold": Fact(
        what="hybrid grouping: all types get the largest count as group size when max < min x this "
        "(None: always the smallest count)",
        steps=(
            ((0, 9, 1), None, "hybrid grouping first appears"),
            ((0, 12, 0), 1.25, "PR #29303 (gpt-oss-20b + EAGLE: 12 sliding + 13 full)"),
            ((0, 18, 0), 1.5, "PR #36684 (speculative drafters add layers to one type)"),
        ),
    ),
    "tokens_line": Fact(
        what='"GPU KV cache size: N tokens"',
        steps=(
            ((0, 8, 0), "blocks", "PR #13596: num_blocks // groups x block_size"),
            (
                (0, 20, 1),
                "concurrency",
                "int(max_concurrency x max_model_len); PR not pinned (#41069 or #40694)",
            ),
        ),
    ),
    "pp_grouping": Fact(
        what="pipeline parallelism: layers grouped per stage, or over the whole model",
        steps=(
            ((0, 0, 0), "per stage", "each worker grouped its own layers"),
            (
                (0, 11, 0),
                "whole model",
                "PR #23974: global groups, then the smallest num_blocks of all workers",
            ),
        ),
    ),
    "gpu_memory_utilization": Fact(
        what="default gpu_memory_utilization",
        steps=(
            ((0, 0, 0), 0.9, "long-standing default"),
            ((0, 20, 0), 0.92, "PR #38284 (with CUDA-graph memory profiled first)"),
        ),
    ),
    "in_flight_batches": Fact(
        what="batches of max_num_batched_tokens a window or chunk reserves room for (async "
        "scheduling, one pipeline stage)",
        steps=(
            ((0, 0, 0), 1, "max_num_batched_tokens"),
            ((0, 26, 0), 2, "max_in_flight_tokens = 2 x max_num_batched_tokens; PR not pinned"),
        ),
    ),
    "null_block": Fact(
        what="blocks reserved before checking that one max_model_len request fits",
        steps=(((0, 0, 0), 0, "none"), ((0, 29, 0), 1, "PR #47272: the null block")),
    ),
    "log_format": Fact(
        what="how the capacity is logged",
        steps=(
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
        ),
    ),
    "error_wording": Fact(
        what="start-up error wording",
        steps=(((0, 0, 0), "models's", "v0.8.x-v0.21.0"), ((0, 22, 0), "model's", "v0.22.0")),
    ),
    "hybrid_prefix_caching": Fact(
        what="prefix caching on by default for hybrid (attention + Mamba) models",
        steps=(
            (
                (0, 0, 0),
                False,
                "ModelConfig.is_prefix_caching_supported: hybrid models "
                "not (v0.15.0-v0.20.0); v0.27.1 arg_utils: 'and not "
                "model_config.is_hybrid'",
            ),
            ((0, 28, 0), True, "PR #50991 '[Mamba] enable prefix cache by default'"),
        ),
    ),
    "mamba_cache_mode": Fact(
        what="mamba_cache_mode chosen when prefix caching is on (MambaModelConfig)",
        steps=(
            ((0, 0, 0), None, "before v0.15.0: no mamba_cache_mode (not modelled)"),
            (
                (0, 15, 0),
                "all or align",
                "'all' for models with SupportsMambaPrefixCaching, else 'align'",
            ),
            ((0, 28, 0), "align", "PR #50991: 'align' whenever prefix caching is on"),
        ),
    ),
    "hybrid_block_alignment": Fact(
        what="attention block size for a hybrid model: a multiple of this many tokens",
        steps=(
            ((0, 0, 0), "16", "HybridAttentionMambaModelConfig: kernel block 16"),
            (
                (0, 20, 0),
                "max(16, block_size)",
                "Platform._align_hybrid_block_size: max(smallest kernel block, block_size)",
            ),
        ),
    ),
    "gdn_prefill_checkpoint": Fact(
        what="Qwen Gated DeltaNet with FlashInfer prefill in 'align' mode: one more block per "
        "request and blocks a multiple of 64 tokens",
        steps=(
            ((0, 0, 0), False, "absent up to v0.32.0"),
            (
                (0, 33, 0),
                True,
                "qwen_gdn_linear_attn.py: num_prefill_checkpoint_blocks=1, "
                "FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64",
            ),
        ),
    ),
    "nemotron_h_ssm_default": Fact(
        what="NemotronH SSM state dtype when neither the flag nor config.json sets one",
        steps=(
            (
                (0, 0, 0),
                "fp16",
                "NemotronHForCausalLMConfig: getattr(hf_config, "
                "'mamba_ssm_cache_dtype', 'float16') (seen in v0.14.0)",
            ),
            ((0, 20, 0), "fp32", "DEFAULT_MAMBA_SSM_CACHE_DTYPE = 'float32'"),
        ),
    ),
    "qwen3_5_ssm_from_config": Fact(
        what="Qwen3.5 SSM state dtype read from config.json's mamba_ssm_dtype",
        steps=(
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
        ),
    ),
    # Speculative decoding (tests/data/vllm-speculative-facts.md, from the wheels v0.10.0 to
    # v0.34.0): the drafter's layers join the pool in every release (Q0); these changed.
    "spec_draft_model": Fact(
        what="a separate draft model (method 'draft_model') served",
        steps=(
            ((0, 0, 0), False, '"Speculative decoding with draft model is not supported yet"'),
            ((0, 15, 0), True, "PR #24322: vllm/v1/spec_decode/draft_model.py"),
        ),
    ),
    "spec_hybrid": Fact(
        what="recurrent-state (Mamba, linear attention) models served with speculative decoding",
        steps=(
            ((0, 0, 0), "none", '"Mamba with speculative decoding is not supported yet"'),
            ((0, 10, 2), "qwen3_next", "only a qwen3_next target (Gated DeltaNet)"),
            ((0, 17, 0), "any", "PR #33726 (Nemotron-H MTP and Mamba speculative decoding)"),
        ),
    ),
    "spec_state_blocks": Fact(
        what="the start-up count charges a recurrent group num_speculative_tokens more blocks",
        steps=(
            ((0, 0, 0), False, "num_speculative_blocks not in MambaSpec.max_memory_usage_bytes"),
            ((0, 15, 0), True, "PR #30877: page x (1 or 2 + num_speculative_blocks)"),
        ),
    ),
    "spec_conv_rows": Fact(
        what="recurrent flavours whose conv state keeps conv_kernel - 1 + num_speculative_tokens "
        "rows",
        steps=(
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
        ),
    ),
    "mm_prefix_lm_batch_floor": Fact(
        what="default max_num_batched_tokens raised to one multimodal item (Gemma 4)",
        steps=(
            ((0, 0, 0), False, "absent in v0.21.0"),
            ((0, 22, 0), True, "EngineArgs._get_min_mm_batched_tokens"),
        ),
    ),
}
NEWEST = "0.33.0"


def fact(name: str, version: tuple[int, ...] | str | None = None):
    """The value of VERSION_FACTS[name] in ``version`` (a tuple, a string, or None: NEWEST)."""
    v = version if isinstance(version, tuple) else resolve_version(version)
    return VERSION_FACTS[name].at(v)
