"""Parameter counters of the families built on Mamba mixers, checked against transformers' model
on the meta device (tests/test_readers_round6.py, tests/test_params_round6b.py,
tests/test_params_switches.py, the zoo). What each counts: docs/families.md."""

from __future__ import annotations

from ...core.model import MoE, RecurrentState
from ..fields import CONV_KERNEL, EXPAND, STATE_SIZE, Fields, Geometry
from .blocks import Counted, biased_moe, counts, mamba1_mixer, never_tied, qkvo, tied_head, top_k


def granite_hybrid_params(
    f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int
) -> Counted:
    """Granite 4.0-H (transformers' GraniteMoeHybridForCausalLM, vLLM's granitemoehybrid.py)."""
    n = len(layers)
    shared_width = f.int("shared_intermediate_size", default=1024)
    shared = 3 * hidden * shared_width
    experts = f.int("num_local_experts", default=8, minimum=0)
    moe = None
    routed = router = 0
    if experts:
        inter = f.int("intermediate_size")
        k = top_k(f.int("num_experts_per_tok", default=2), experts)
        moe = MoE(
            num_experts=experts,
            top_k=k,
            expert_params=3 * hidden * inter,
            layers=n,
            shared_params_per_layer=shared,
        )
        routed = n * experts * 3 * hidden * inter
        router = n * experts * hidden
    else:
        f.seen.update({"intermediate_size", "num_experts_per_tok"})  # unused without experts
    bias = f.bool("attention_bias", False)
    attn = qkvo(hidden, geo, bias, bias)
    attention = sum(
        _granite_mamba_params(f, hidden, lay) if lay.kind == "state" else attn for lay in layers
    )
    tied = f.bool("tie_word_embeddings", False)  # GraniteMoeHybridConfig's default: untied
    return moe, counts(
        hidden,
        vocab,
        tied,
        attention=attention,
        mlp=0 if experts else n * shared,
        norms=(2 * n + 1) * hidden,
        experts=(routed, n * shared if experts else 0, router),
    )


def _granite_mamba_params(f: Fields, hidden: int, layer: RecurrentState) -> int:
    """GraniteMoeHybridMambaLayer: the Mamba-2 mixer, inner mamba_expand x hidden."""
    inner = f.int("mamba_expand", default=2) * hidden
    heads = f.int("mamba_n_heads", default=128)
    return _mamba2_mixer(f, hidden, layer, inner, heads, "mamba_conv_bias", "mamba_proj_bias")


def _mamba2_mixer(
    f: Fields, hidden: int, layer: RecurrentState, inner: int, heads: int, conv: str, proj: str
) -> int:
    """A Mamba-2 mixer (Granite's, Nemotron-H's, vLLM's MambaMixer2): in_proj to inner + conv
    channels + heads, the depthwise conv (its bias with the field ``conv``), dt_bias, A_log and
    D per head, the gated RMSNorm over inner, out_proj; ``proj`` adds the two projections'
    biases."""
    conv_dim = layer.conv_elements // (layer.conv_kernel - 1)
    p = hidden * (inner + conv_dim + heads) + conv_dim * layer.conv_kernel + 3 * heads + inner
    p += inner * hidden
    if f.bool(conv, True):
        p += conv_dim
    if f.bool(proj, False):
        p += inner + conv_dim + heads + hidden
    return p


def bamba_params(f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int) -> Counted:
    """Bamba (transformers' BambaForCausalLM, vLLM's bamba.py)."""
    n = len(layers)
    bias = f.bool("attention_bias", False)
    attn = qkvo(hidden, geo, bias, bias)
    attention = sum(
        _granite_mamba_params(f, hidden, layer) if layer.kind == "state" else attn
        for layer in layers
    )
    inter = f.int("intermediate_size")
    mlp = 3 * hidden * inter + ((2 * inter + hidden) if f.bool("mlp_bias", False) else 0)
    tied = tied_head(f, False)  # BambaConfig's default: untied
    return None, counts(
        hidden, vocab, tied, attention=attention, mlp=n * mlp, norms=(2 * n + 1) * hidden
    )


_NEMOTRON_BLOCKS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}


def nemotron_h_params(f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int) -> Counted:
    """Nemotron-H and Nemotron 3 (transformers' NemotronHForCausalLM, vLLM's nemotron_h.py)."""
    blocks = _nemotron_blocks(f, len(layers))
    mlp_bias = f.bool("mlp_bias", False)
    if f.bool("attention_bias", False):
        raise ValueError(
            "config field 'attention_bias' is true: NemotronHAttention builds no biases, and "
            "the parameter counter does not pick one reading"
        )
    attention = mamba = 0
    for block, layer in zip(blocks, layers):
        if block == "mamba":
            mamba += _nemotron_mamba_params(f, hidden, layer)
        elif block == "attention":
            attention += qkvo(hidden, geo)
    n_mlp = blocks.count("mlp")
    mlp = 0
    if n_mlp:
        inter = f.int("intermediate_size")
        mlp = n_mlp * (2 * hidden * inter + (inter + hidden if mlp_bias else 0))
    moe, parts = None, (0, 0, 0)
    n_moe = blocks.count("moe")
    if n_moe:
        experts = f.int("n_routed_experts", "num_local_experts")
        k = top_k(f.int("num_experts_per_tok"), experts)
        if f.int("n_shared_experts", default=1, minimum=0) != 1:
            raise ValueError(
                "config field 'n_shared_experts' is not 1: vLLM's NemotronHMoE builds a shared "
                "expert of n_shared_experts x moe_shared_expert_intermediate_size (none at 0), "
                "transformers' one of moe_shared_expert_intermediate_size whatever it says"
            )
        inter = f.int("moe_intermediate_size")
        width = f.int("moe_latent_size", default=hidden)
        per_expert = 2 * width * inter
        s_inter = f.int("moe_shared_expert_intermediate_size")
        per_shared = 2 * hidden * s_inter + (s_inter + hidden if mlp_bias else 0)
        if f.has("moe_latent_size"):
            per_shared += 2 * hidden * width + (width + hidden if mlp_bias else 0)
        moe, parts = biased_moe(experts, k, per_expert, n_moe, per_shared, hidden)
    tied = never_tied(f, "NemotronHForCausalLM")
    return moe, counts(
        hidden,
        vocab,
        tied,
        attention=attention + mamba,
        mlp=mlp,
        norms=(len(layers) + 1) * hidden,
        experts=parts,
    )


def _nemotron_blocks(f: Fields, n: int) -> list[str]:
    """Each layer's block, from the field the cache reader read its layout from."""
    pattern = f.raw("hybrid_override_pattern")
    if isinstance(pattern, str):
        blocks = [_NEMOTRON_BLOCKS.get(c, "?") for c in pattern]
    else:
        names = f.raw("layers_block_type")
        # transformers 5.24's NemotronHConfig writes Mamba and attention blocks as
        # "linear_attention" and "full_attention" (its _pattern_to_list mapping)
        renamed = {"linear_attention": "mamba", "full_attention": "attention"}
        blocks = [str(renamed.get(b, b)) for b in names] if isinstance(names, list) else []
    if len(blocks) != n or any(b not in _NEMOTRON_BLOCKS.values() for b in blocks):
        raise ValueError(
            "the layer pattern does not give one Mamba, attention, MLP or MoE block for each "
            "layer, which the parameter counter needs"
        )
    return blocks


def _nemotron_mamba_params(f: Fields, hidden: int, layer: RecurrentState) -> int:
    """NemotronHMamba2Mixer: the Mamba-2 mixer, inner mamba_num_heads x mamba_head_dim."""
    heads = f.int("mamba_num_heads")
    inner = heads * f.int("mamba_head_dim")
    return _mamba2_mixer(f, hidden, layer, inner, heads, "use_conv_bias", "use_bias")


def falcon_h1_params(f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int) -> Counted:
    """Falcon-H1 (transformers' FalconH1ForCausalLM, vLLM's falcon_h1.py)."""
    if f.raw("mamba_use_mlp", default=True) is not True:
        raise ValueError(
            "config field 'mamba_use_mlp' is not true: transformers' FalconH1DecoderLayer "
            "builds the MLP in every layer whatever it says"
        )
    proj_bias = f.bool("mamba_proj_bias", False)
    if f.bool("projectors_bias", False) != proj_bias:
        raise ValueError(
            "config fields 'projectors_bias' and 'mamba_proj_bias' differ: transformers gives "
            "the Mamba out_proj one and vLLM the other"
        )
    attn_bias = f.bool("attention_bias", False)
    mlp_bias = f.bool("mlp_bias", False)
    inter = f.int("intermediate_size")
    heads = f.int("mamba_n_heads")
    per_attention = qkvo(hidden, geo, attn_bias, attn_bias)
    attention = 0
    for layer in layers:
        inner = layer.state.ssm_elements // f.int("mamba_d_state")
        mixer = _mamba2_mixer(
            f, hidden, layer.state, inner, heads, "mamba_conv_bias", "mamba_proj_bias"
        )
        # _mamba2_mixer counts a gated RMSNorm over inner: Falcon-H1's is there with mamba_rms_norm
        norm = inner if f.bool("mamba_rms_norm", False) else 0
        attention += per_attention + mixer - inner + norm
    n = len(layers)
    mlp = n * (3 * hidden * inter + (2 * inter + hidden if mlp_bias else 0))
    tied = tied_head(f, False)  # FalconH1Config's default: untied
    return None, counts(
        hidden, vocab, tied, attention=attention, mlp=mlp, norms=(2 * n + 1) * hidden
    )


def mamba_params(f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int) -> Counted:
    """Mamba and Falcon-Mamba (transformers' MambaForCausalLM, FalconMambaForCausalLM, vLLM's
    mamba.py)."""
    n = len(layers)
    tied = tied_head(f, True)  # MambaConfig's and FalconMambaConfig's default: tied
    mixer = mamba1_mixer(f, hidden, bias_field="use_bias")
    return None, counts(hidden, vocab, tied, attention=n * mixer, mlp=0, norms=(n + 1) * hidden)


def mamba2_params(f: Fields, layers: list, geo: Geometry, hidden: int, vocab: int) -> Counted:
    """Mamba-2 (transformers' Mamba2ForCausalLM, vLLM's mamba2.py)."""
    n = len(layers)
    inner = f.int(*EXPAND, default=2) * hidden
    heads = f.int("num_heads")
    groups_state = 2 * f.int("n_groups", default=1) * f.int(*STATE_SIZE)
    conv_dim = inner + groups_state
    kernel = f.int(*CONV_KERNEL, default=4)
    mixer = hidden * (2 * inner + groups_state + heads) + conv_dim * kernel + 3 * heads + inner
    mixer += inner * hidden
    if f.bool("use_conv_bias", True):
        mixer += conv_dim
    if f.bool("use_bias", False):
        mixer += 2 * inner + groups_state + heads + hidden
    tied = tied_head(f, False)  # Mamba2Config's default: untied
    return None, counts(hidden, vocab, tied, attention=n * mixer, mlp=0, norms=(n + 1) * hidden)
