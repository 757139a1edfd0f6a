"""Config traps (docs/engine-facts.md#config-traps), each on a minimal config dict. Expected values
are the config's own arithmetic, worked out in the comments."""

import json
import re
from pathlib import Path

import pytest
from conftest import llama_config

from kvcalc import kv_cache, parse_config_text, spec_from_config, weights
from kvcalc.config.hfconfig import checkpoint_format, load_config_file

DATA = Path(__file__).parent / "data" / "configs"


def bpt(cfg, **kw):
    return kv_cache(spec_from_config(cfg, **kw), 1).kv_bytes_per_token_nominal


def test_explicit_head_dim_wins_over_hidden_over_heads():
    # 2 x 4 layers x 2 KV heads x head_dim x 2 B
    assert bpt(llama_config()) == 2 * 4 * 2 * (512 // 8) * 2
    assert bpt(llama_config(head_dim=256)) == 2 * 4 * 2 * 256 * 2


def test_missing_kv_heads_means_mha():
    assert bpt(llama_config(num_key_value_heads=...)) == 2 * 4 * 8 * 64 * 2
    assert bpt(llama_config(num_key_value_heads=None)) == 2 * 4 * 8 * 64 * 2


def test_falcon_multi_query_and_num_kv_heads():
    base = {
        "model_type": "falcon",
        "hidden_size": 4544,
        "num_hidden_layers": 2,
        "num_attention_heads": 71,
        "vocab_size": 100,
    }
    assert bpt({**base, "multi_query": True}) == 2 * 2 * 1 * 64 * 2
    # A copy re-saved by newer transformers adds num_kv_heads = 71; multi_query still rules.
    assert (
        bpt({**base, "multi_query": True, "num_kv_heads": 71, "new_decoder_architecture": False})
        == 2 * 2 * 1 * 64 * 2
    )
    # Falcon-40B style: new_decoder_architecture with num_kv_heads.
    big = {**base, "num_attention_heads": 128, "hidden_size": 8192}
    assert (
        bpt({**big, "new_decoder_architecture": True, "num_kv_heads": 8, "multi_query": True})
        == 2 * 2 * 8 * 64 * 2
    )
    assert bpt({**base, "multi_query": False}) == 2 * 2 * 71 * 64 * 2


def test_gpt2_field_names():
    cfg = {
        "model_type": "gpt2",
        "n_embd": 768,
        "n_head": 12,
        "n_layer": 12,
        "n_positions": 1024,
        "vocab_size": 50257,
    }
    spec = spec_from_config(cfg)
    assert spec.num_layers == 12 and spec.max_context == 1024
    assert bpt(cfg) == 2 * 12 * 12 * 64 * 2
    # GPT-2 small has 124,439,808 parameters (wte 50257x768 + wpe 1024x768 + 12 blocks + ln_f).
    assert spec.total_params == 124_439_808


def test_text_config_is_the_language_model():
    inner = llama_config(num_hidden_layers=6)
    cfg = {
        "model_type": "gemma3",
        "text_config": {**inner, "model_type": "gemma3_text", "sliding_window": 64, "head_dim": 32},
        "vision_config": {"hidden_size": 1152, "num_hidden_layers": 27},
    }
    spec = spec_from_config(cfg)
    # gemma3_text default sliding_window_pattern 6: layers 0-4 sliding, layer 5 full.
    assert [lay.kind for lay in spec.layers] == ["sliding"] * 5 + ["full"]
    assert spec.layers[0].head_dim == 32


def test_layer_types_are_read_in_order():
    types = ["sliding_attention", "full_attention"] * 2
    spec = spec_from_config(llama_config(layer_types=types, sliding_window=128))
    assert [lay.kind for lay in spec.layers] == ["sliding", "full", "sliding", "full"]
    assert spec.layers[0].window == 128


def test_gemma2_alternates_without_a_pattern_field():
    cfg = llama_config(model_type="gemma2", num_hidden_layers=6, sliding_window=4096, head_dim=256)
    assert [lay.kind for lay in spec_from_config(cfg).layers] == ["sliding", "full"] * 3


def test_sliding_window_pattern():
    cfg = llama_config(num_hidden_layers=12, sliding_window=1024, sliding_window_pattern=6)
    kinds = [lay.kind for lay in spec_from_config(cfg).layers]
    assert kinds.count("full") == 2 and kinds[5] == "full" and kinds[11] == "full"


def test_use_sliding_window_false_means_no_window():
    cfg = llama_config(
        model_type="qwen2", sliding_window=131072, use_sliding_window=False, max_window_layers=4
    )
    assert {lay.kind for lay in spec_from_config(cfg).layers} == {"full"}
    # Qwen2 with the window switched on: layers from max_window_layers on slide.
    on = llama_config(
        model_type="qwen2", sliding_window=256, use_sliding_window=True, max_window_layers=2
    )
    assert [lay.kind for lay in spec_from_config(on).layers] == [
        "full",
        "full",
        "sliding",
        "sliding",
    ]


def test_every_layer_sliding_without_pattern_and_runtime_override():
    cfg = llama_config(sliding_window=4096)  # Mistral-7B-v0.1, Phi-3 style
    assert {lay.kind for lay in spec_from_config(cfg).layers} == {"sliding"}
    assert {lay.kind for lay in spec_from_config(cfg, honor_sliding_window=False).layers} == {
        "full"
    }
    spec = spec_from_config(cfg)
    # Past the window a sliding layer stops growing: 4096 tokens kept at 10,000.
    assert kv_cache(spec, 10_000).kv_bytes == kv_cache(spec, 4096).kv_bytes


def test_mla_fields():
    cfg = llama_config(
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        qk_nope_head_dim=128,
        v_head_dim=128,
        num_key_value_heads=8,
        q_lora_rank=1536,
    )
    assert bpt(cfg) == 4 * (512 + 64) * 2  # one latent per layer; num_key_value_heads ignored
    assert spec_from_config(cfg).layers[0].kind == "mla"


def test_hybrid_full_attention_interval():
    cfg = llama_config(
        num_hidden_layers=8,
        full_attention_interval=4,
        linear_num_key_heads=4,
        linear_num_value_heads=8,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        linear_conv_kernel_dim=4,
    )
    spec = spec_from_config(cfg)
    assert [lay.kind for lay in spec.layers] == ["state", "state", "state", "full"] * 2
    state = spec.layers[0]
    # conv keeps kernel-1 = 3 inputs of q,k,v (2x4x16 + 8x16 = 256 channels); recurrent state is
    # value heads x key dim x value dim = 8 x 16 x 16.
    assert state.conv_elements == 256 * 3 and state.ssm_elements == 8 * 16 * 16
    r = kv_cache(spec, 1000, batch=2)
    assert r.state_bytes == 2 * 6 * (256 * 3 + 8 * 16 * 16) * 2  # 6 state layers, BF16, batch 2
    assert r.kv_bytes == 2 * 1000 * 2 * 2 * 2 * 64 * 2  # 2 attention layers


def test_hybrid_attn_layer_period_offset():
    cfg = llama_config(
        num_hidden_layers=16,
        attn_layer_period=8,
        attn_layer_offset=4,
        mamba_d_state=16,
        mamba_d_conv=4,
        mamba_expand=2,
    )
    spec = spec_from_config(cfg)
    assert [i for i, lay in enumerate(spec.layers) if lay.kind == "full"] == [4, 12]
    # Mamba: d_inner = 2 x 512; conv (4-1) x d_inner; ssm d_inner x 16.
    assert spec.layers[0].state_elements == 1024 * 3 + 1024 * 16


def test_moe_fields_and_placement():
    cfg = llama_config(
        num_hidden_layers=6,
        n_routed_experts=16,
        num_experts_per_tok=2,
        moe_intermediate_size=64,
        n_shared_experts=1,
        first_k_dense_replace=2,
        moe_layer_freq=1,
    )
    moe = spec_from_config(cfg).moe
    assert (moe.num_experts, moe.top_k, moe.layers) == (16, 2, 4)
    assert moe.expert_params == 3 * 512 * 64
    jamba = llama_config(
        num_hidden_layers=8,
        num_experts=4,
        num_experts_per_tok=2,
        expert_layer_period=2,
        expert_layer_offset=1,
    )
    assert spec_from_config(jamba).moe.layers == 4
    assert spec_from_config(llama_config(num_experts=1)).moe is None


@pytest.mark.parametrize(
    "cfg,field",
    [
        (llama_config(num_key_value_heads=3), "num_key_value_heads"),
        (llama_config(hidden_size=...), "hidden_size"),
        (llama_config(num_hidden_layers=0), "num_hidden_layers"),
        (llama_config(num_attention_heads=-8), "num_attention_heads"),
        (llama_config(hidden_size=500, num_attention_heads=8), "head_dim"),
        (llama_config(hidden_size="4096"), "hidden_size"),
        (llama_config(hidden_size=True), "hidden_size"),
        (llama_config(hidden_size=4096.5), "hidden_size"),
        (llama_config(layer_types=["full_attention"]), "layer_types"),
        (llama_config(layer_types=["full_attention"] * 3 + ["weird"]), "layer_types[3]"),
        (llama_config(layer_types=["sliding_attention"] * 4), "sliding_window"),
        (llama_config(kv_lora_rank=512), "qk_rope_head_dim"),
        (llama_config(full_attention_interval=2), "linear_num_value_heads"),
        (
            llama_config(attn_layer_period=4, attn_layer_offset=4, mamba_d_state=16),
            "attn_layer_offset",
        ),
        (llama_config(multi_query="yes", num_key_value_heads=None), "multi_query"),
        (llama_config(text_config=[1, 2]), "text_config"),
        (llama_config(hidden_size=10**12), "hidden_size"),
    ],
)
def test_bad_configs_name_the_field(cfg, field):
    with pytest.raises(ValueError) as exc:
        spec_from_config(cfg)
    assert field in str(exc.value)


@pytest.mark.parametrize(
    "cfg,field",
    [
        (llama_config(num_local_experts=8, num_experts_per_tok=9), "num_experts_per_tok"),
        (llama_config(vocab_size=float("nan")), "vocab_size"),
        (llama_config(intermediate_size=...), "intermediate_size"),
        # a family whose reader reads it and that the parameter counter does not cover
        # (Hunyuan's remote code; OLMo 2, the example before, is now counted)
        (llama_config(model_type="hunyuan"), "hunyuan"),
    ],
)
def test_parameter_fields_limit_only_the_weights(cfg, field):
    # Cache first: a field only the parameter count needs loses the weight figures, with a note
    # naming it, and the cache figure is still given (2 x 4 layers x 2 KV heads x 64 x 2 B).
    spec = spec_from_config(cfg)
    assert spec.params is None and field in spec.params_error
    assert any(field in n for n in spec.notes)
    assert kv_cache(spec, 1).kv_bytes_per_token_nominal == 2 * 4 * 2 * 64 * 2
    with pytest.raises(ValueError, match="weight"):
        weights(spec)


def test_not_a_dict():
    with pytest.raises(ValueError, match="JSON object"):
        spec_from_config([1, 2, 3])


@pytest.mark.parametrize(
    "text,msg",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "JSON object"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ],
)
def test_config_text_errors(text, msg):
    with pytest.raises(ValueError, match=msg):
        parse_config_text(text)


def test_infinity_and_nan_only_refused_where_read():
    # NVIDIA's Nemotron-H configs carry "time_step_limit": [0.0, Infinity]: a Mamba kernel
    # setting that the nemotron_h reader knows, so the Infinity is accepted there.
    text = (DATA / "nemotron-h-56b.json").read_text()
    assert "Infinity" in text
    # 10 attention layers x 8 KV heads x (128 + 128) x 2 B (tests/test_real_configs.py).
    assert (
        kv_cache(spec_from_config(parse_config_text(text)), 1).kv_bytes_per_token_nominal
        == 10 * 8 * 256 * 2
    )
    # In a Llama config the same field means nothing kvcalc knows: refused by name.
    cfg = parse_config_text(
        json.dumps(llama_config()).replace("}", ', "time_step_limit": [0.0, Infinity]}')
    )
    with pytest.raises(ValueError, match="time_step_limit"):
        spec_from_config(cfg)
    cfg = parse_config_text(
        '{"hidden_size": NaN, "num_hidden_layers": 2, "num_attention_heads": 2}'
    )
    with pytest.raises(ValueError, match="hidden_size"):
        spec_from_config(cfg)


def test_config_file_errors(tmp_path):
    with pytest.raises(ValueError, match="cannot read"):
        load_config_file(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="cannot read"):
        load_config_file(tmp_path)  # a folder, not a file
    big = tmp_path / "big.json"
    big.write_text('{"x": "' + "a" * 1_100_000 + '"}')
    with pytest.raises(ValueError, match="at most"):
        load_config_file(big)
    good = tmp_path / "config.json"
    good.write_text(json.dumps(llama_config()))
    assert spec_from_config(load_config_file(good)).num_layers == 4


def test_checkpoint_format_from_config():
    assert checkpoint_format({"quantization_config": {"quant_method": "mxfp4"}}) == (
        "bf16",
        "mxfp4",
    )
    assert checkpoint_format({"quantization_config": {"quant_method": "fp8"}}) == ("fp8", None)
    assert checkpoint_format({"torch_dtype": "float32"}) == ("fp32", None)
    assert checkpoint_format({"text_config": {"torch_dtype": "float16"}}) == ("fp16", None)
    assert checkpoint_format({}) == ("bf16", None)


# MiMo-V2-Flash's layers: full attention at 0, 5, 11, ..., 47, the others sliding
MIMO_PATTERN = [0 if i == 0 or (i + 1) % 6 == 0 else 1 for i in range(48)]


def _mimo_attention() -> dict:
    """MiMo-V2-Flash's attention fields: full layers 4 KV heads of K 192 / V 128, sliding
    layers (swa_*) 8 of 192 / 128, window 128."""
    return {
        "hidden_size": 4096,
        "num_hidden_layers": 48,
        "num_attention_heads": 64,
        "num_key_value_heads": 4,
        "head_dim": 192,
        "v_head_dim": 128,
        "swa_num_attention_heads": 64,
        "swa_num_key_value_heads": 8,
        "swa_head_dim": 192,
        "swa_v_head_dim": 128,
        "sliding_window": 128,
        "hybrid_layer_pattern": list(MIMO_PATTERN),
    }


def test_mimo_style_per_type_heads_and_unequal_k_v():
    # No verbatim MiMo-V2-Flash config.json was found (tests/data/configs/NOTES-D.md), so this is
    # a config written in its field names: hybrid_layer_pattern 0 = full, 1 = sliding (as the
    # code that reads the published file maps it), full layers 4 KV heads of K 192 / V 128,
    # sliding layers swa_* 8 KV heads of 192 / 128, window 128.
    pattern = MIMO_PATTERN
    cfg = {"model_type": "mimo_v2", **_mimo_attention(), "vocab_size": 1000}
    spec = spec_from_config(cfg)
    assert spec.kind_counts() == {"full": 9, "sliding": 39}
    # Per token at the first token: 9 x 4 x (192 + 128) x 2 + 39 x 8 x (192 + 128) x 2.
    assert kv_cache(spec, 1).kv_bytes_per_token_nominal == 9 * 2560 + 39 * 5120
    # At 1,000 tokens the sliding layers hold 128.
    assert kv_cache(spec, 1000).kv_bytes == 9 * 2560 * 1000 + 39 * 5120 * 128
    with pytest.raises(ValueError, match=r"hybrid_layer_pattern\[2\]"):
        spec_from_config({**cfg, "hybrid_layer_pattern": [0, 1, 2] + pattern[3:]})


def _mimo_v2_flash() -> dict:
    # MiMo-V2-Flash's fields as aiconfigurator ships them (model_configs/
    # XiaomiMiMo--MiMo-V2-Flash_config.json at 095f58a5; a summary, not the Hub file:
    # tests/data/configs/NOTES-D.md): 48 layers, full attention at 0, 5, 11, ..., 47,
    # moe_layer_freq one flag a layer (layer 0 dense), 256 routed experts of width 2,048, top 8.
    return {
        "model_type": "mimo_v2_flash",
        **_mimo_attention(),
        "intermediate_size": 16384,
        "moe_layer_freq": [0] + [1] * 47,
        "moe_intermediate_size": 2048,
        "n_routed_experts": 256,
        "num_experts_per_tok": 8,
        "vocab_size": 152576,
        "tie_word_embeddings": False,
    }


def test_moe_layer_freq_as_one_flag_a_layer_counts_mimo_v2_flash():
    # transformers' MiMoV2FlashDecoderLayer (and vLLM's mimo_v2_flash.py) build the sparse MoE
    # block where config.moe_layer_freq[layer_idx] is true: 47 MoE layers here. Xiaomi's model
    # card: "309B total parameters and 15B active".
    spec = spec_from_config(_mimo_v2_flash())
    assert spec.moe is not None and spec.moe.layers == 47
    assert spec.require_params().total == pytest.approx(309e9, rel=0.02)
    unused = 47 * (256 - 8) * 3 * 4096 * 2048  # the experts a token does not use
    assert spec.require_params().total - unused == pytest.approx(15e9, rel=0.05)


@pytest.mark.parametrize(
    "change, match",
    [
        ({"moe_layer_freq": [0] + [1] * 46}, "each of the 48 layers"),
        ({"moe_layer_freq": [0, 2] + [1] * 46}, "0 \\(dense\\) or 1 \\(MoE\\)"),
        ({"first_k_dense_replace": 3}, "give different MoE layers"),
    ],
)
def test_a_moe_layer_freq_list_that_cannot_be_read_is_refused_by_name(change, match):
    spec = spec_from_config({**_mimo_v2_flash(), **change})
    assert spec.params is None and re.search(match, spec.params_error or "")


@pytest.mark.parametrize(
    "field,value,drop",
    [
        # issue 22 B1: the layer cap held for num_hidden_layers only
        ("hybrid_override_pattern", "M*" * 99_500, "num_hidden_layers"),  # 199,000 layers
        ("layer_types", ["full_attention"] * 1500, "num_hidden_layers"),
        ("hybrid_layer_pattern", [0] * 5000, None),
    ],
)
def test_one_layer_cap_whatever_field_carries_the_layers(field, value, drop, monkeypatch):
    from kvcalc.config import hfconfig

    base = "nemotron-h-56b.json" if field == "hybrid_override_pattern" else "llama-3.1-8b.json"
    cfg = load_config_file(DATA / base)
    cfg[field] = value
    cfg.pop(drop, None)
    # Refused before any per-layer work: the layers are never read (the time it takes is
    # bench/refusals.py's figure, not a bound here).
    read, real = [], hfconfig._read_cache
    monkeypatch.setattr(hfconfig, "_read_cache", lambda *a, **k: read.append(a) or real(*a, **k))
    with pytest.raises(ValueError, match=f"{field}.*at most 1,024 layers"):
        spec_from_config(cfg)
    assert read == []
