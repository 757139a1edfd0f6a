"""The largest model kvcalc reads: one cap per kind of size field, wherever the field comes from.

A config.json is user input: a pasted 10,000,000-wide hidden size or a 199,000-entry layer
pattern must be refused by name, with the cap in the message, before any per-layer work, not
turned into a slow computation or a plausible-looking huge number (issue 22). Every cap is far
above the largest published model of its kind (the table with the margins: docs/families.md).
"""

from __future__ import annotations

import math
from typing import Any

from ..core.text import SHORT as _SHORT
from ..core.text import short as _short

MAX_LAYERS = 1024
MAX_HIDDEN = 2**20
MAX_HEADS = 2**14
MAX_HEAD_DIM = 2**16
MAX_VOCAB = 2**24
MAX_INTERMEDIATE = 2**22
MAX_EXPERTS = 2**16
MAX_KERNEL = 1024
MAX_EXPAND = 1024
MAX_CONTEXT = 10**8  # within vLLM's arithmetic (kvcalc.engines.vllm.predict)
MAX_PARAMS = 2**56  # so that even FP32 weights (2^58 B) stay under the budget's 2^60 B
MAX_OTHER = 10_000_000  # any other whole-number field kvcalc reads (periods, offsets)

# (cap, what it sizes): the words of the refusal
_KINDS = {
    "layers": (MAX_LAYERS, "layers (the deepest published model has 162)"),
    "hidden": (MAX_HIDDEN, "a hidden size (the widest published model has 20,480)"),
    "heads": (MAX_HEADS, "a number of heads (published models have at most 256)"),
    "head_dim": (MAX_HEAD_DIM, "a head size or rank (published models have at most 2,048)"),
    "vocab": (MAX_VOCAB, "a vocabulary (the largest published ones have about 1,000,000)"),
    "intermediate": (MAX_INTERMEDIATE, "an MLP width (the widest published one is 73,728)"),
    "experts": (MAX_EXPERTS, "a number of experts (published models have at most 512)"),
    "kernel": (MAX_KERNEL, "a convolution kernel (published models use 4)"),
    "expand": (MAX_EXPAND, "an expansion factor (published models use 2)"),
    "context": (
        MAX_CONTEXT,
        "a context or window in tokens (the longest published model takes 10,485,760)",
    ),
}

_NAMES = {
    "layers": "num_hidden_layers n_layer num_layers n_layers decoder_layers".split(),
    "hidden": "hidden_size n_embd d_model attention_hidden_size lru_width conv_dim".split(),
    "heads": """
        num_attention_heads n_head num_heads n_heads num_key_value_heads num_kv_heads n_head_kv
        multi_query_group_num num_global_key_value_heads swa_num_key_value_heads
        swa_num_attention_heads mamba_num_heads mamba_n_heads linear_num_key_heads
        linear_num_value_heads linear_num_heads decoder_attention_heads attention_heads n_groups
        mamba_n_groups kv_n_heads
    """.split(),
    "head_dim": """
        head_dim kv_channels attention_head_dim v_head_dim global_head_dim swa_head_dim
        swa_v_head_dim qk_rope_head_dim qk_nope_head_dim mamba_head_dim mamba_d_head
        linear_key_head_dim linear_value_head_dim linear_head_dim index_head_dim kv_lora_rank
        q_lora_rank ssm_state_size mamba_d_state state_size mamba_dt_rank time_step_rank
    """.split(),
    "vocab": "vocab_size padded_vocab_size".split(),
    "intermediate": """
        intermediate_size moe_intermediate_size shared_expert_intermediate_size ffn_hidden_size
        n_inner mamba_d_ssm
    """.split(),
    "experts": """
        num_local_experts n_routed_experts num_experts num_experts_per_tok experts_per_token
        num_experts_per_token moe_top_k n_shared_experts
    """.split(),
    "kernel": """
        conv_kernel mamba_d_conv d_conv conv_L_cache conv1d_width linear_conv_kernel_dim
        short_conv_kernel_size
    """.split(),
    "expand": "mamba_expand expand".split(),
    "context": """
        max_position_embeddings n_positions max_seq_len seq_length context_length
        model_max_length sliding_window sliding_window_size attention_window_size
        attention_chunk_size
    """.split(),
}

# field name -> (cap, what it sizes)
FIELD_CAPS: dict[str, tuple[int, str]] = {
    name: _KINDS[kind] for kind, names in _NAMES.items() for name in names
}

# Checked on the whole config before anything is read. The context fields are checked only
# where they are read: a real config may carry an unused alias (a tokenizer's model_max_length
# of 10^30, a window that use_sliding_window turns off) that changes nothing.
UPFRONT = frozenset(FIELD_CAPS) - set(_NAMES["context"])


def cap_of(name: str) -> int:
    """The largest value kvcalc reads in config field ``name``."""
    return FIELD_CAPS.get(name, (MAX_OTHER, ""))[0]


def over_cap(name: str, value: Any, cap: int | None = None) -> str | None:
    """The refusal when ``value`` (a number in field ``name``) is over its cap, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    limit, what = FIELD_CAPS.get(name, (MAX_OTHER, "a size"))
    limit = limit if cap is None else cap
    if isinstance(value, float) and not math.isfinite(value):
        return None  # not a whole number: the reader says so
    if value <= limit:
        return None
    if isinstance(value, float):
        shown = f"{value:,.0f}" if value < 1e30 else f"{value:g}"
    else:
        shown = f"{value:,}" if value.bit_length() <= 3 * _SHORT else _short(value)
    return f"config field {_short(name)} = {shown} is over the {limit:,} kvcalc reads as {what}"
