"""Laws (docs/design.md#laws) checked with hypothesis, and fuzzing: only ValueError ever
escapes."""

import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kvcalc import GiB, budget, kv_cache, spec_from_config, step_time, weights
from kvcalc.cache.deployment import Deployment

settings.register_profile(
    "ci", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci")


@st.composite
def configs(draw, window=None):
    kv = draw(st.sampled_from([1, 2, 4, 8]))
    group = draw(st.sampled_from([1, 2, 4]))
    heads = kv * group
    head_dim = draw(st.sampled_from([32, 64, 128, 256]))
    cfg = {
        "model_type": "llama",
        "hidden_size": heads * head_dim,
        "num_hidden_layers": draw(st.integers(1, 48)),
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "vocab_size": draw(st.integers(100, 200_000)),
        "intermediate_size": draw(st.integers(64, 30_000)),
    }
    if window:
        cfg["sliding_window"] = draw(st.integers(16, 8192))
    return cfg


contexts = st.integers(1, 1_000_000)
dtypes = st.sampled_from(["fp32", "fp16", "bf16", "fp8", "int8", "int4"])


@given(configs(), contexts, st.integers(1, 64), dtypes)
def test_full_attention_bytes_are_linear_in_context_and_batch(cfg, n, b, dt):
    spec = spec_from_config(cfg)
    one = kv_cache(spec, n, 1, dt).kv_bytes
    assert kv_cache(spec, 2 * n, 1, dt).kv_bytes == 2 * one
    assert kv_cache(spec, n, b, dt).kv_bytes == b * one
    assert one == n * kv_cache(spec, 1, 1, dt).kv_bytes_per_token_nominal


@given(configs(window=True), contexts)
def test_sliding_layers_are_flat_past_the_window(cfg, n):
    spec = spec_from_config(cfg)
    w = cfg["sliding_window"]
    at_w = kv_cache(spec, w).kv_bytes
    assert kv_cache(spec, max(n, w)).kv_bytes == at_w
    assert kv_cache(spec, max(n, w)).kv_bytes_per_token == 0
    assert kv_cache(spec, min(n, w)).kv_bytes <= at_w


@given(configs(), contexts)
def test_gqa_never_exceeds_mha(cfg, n):
    mha = dict(cfg, num_key_value_heads=cfg["num_attention_heads"])
    assert (
        kv_cache(spec_from_config(cfg), n).kv_bytes <= kv_cache(spec_from_config(mha), n).kv_bytes
    )


@given(configs(), contexts)
def test_fp8_is_half_of_bf16_and_int4_a_quarter(cfg, n):
    spec = spec_from_config(cfg)
    bf16 = kv_cache(spec, n, kv_dtype="bf16").kv_bytes
    assert 2 * kv_cache(spec, n, kv_dtype="fp8").kv_bytes == bf16
    assert 4 * kv_cache(spec, n, kv_dtype="int4").kv_bytes == bf16
    assert kv_cache(spec, n, kv_dtype="fp32").kv_bytes == 2 * bf16


@given(
    configs(),
    st.integers(1, 200),
    st.integers(1, 200),
    st.integers(1, 131_072),
    st.sampled_from([1, 8, 16, 32, 128]),
    st.floats(0.05, 1.0),
)
def test_more_memory_never_lowers_concurrency(cfg, mem_a, mem_b, ctx, bs, util):
    spec = spec_from_config(cfg)
    lo, hi = sorted((mem_a, mem_b))
    d = Deployment(spec=spec, weights_bytes=GiB // 2, reserve_bytes=GiB // 4)
    d = d.but(block_size=bs, gpu_memory_utilization=util)
    a, b = (budget(d.but(memory_bytes=m * GiB), ctx) for m in (lo, hi))
    assert b.max_concurrency >= a.max_concurrency
    assert b.num_blocks >= a.num_blocks
    assert (b.max_context_tokens or 0) >= (a.max_context_tokens or 0)


@given(configs(), st.integers(1, 100_000), st.integers(1, 256))
def test_step_time_grows_with_context_and_batch(cfg, n, b):
    spec = spec_from_config(cfg)
    dep = Deployment(spec=spec, weights=weights(spec))
    s = step_time(dep, context=n, batch=b, bandwidth_gbs=1000)
    assert step_time(dep, context=n + 1000, batch=b, bandwidth_gbs=1000).step_time_s > s.step_time_s
    assert step_time(dep, context=n, batch=b + 1, bandwidth_gbs=1000).step_time_s > s.step_time_s


bad_numbers = st.one_of(
    st.integers(max_value=0),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=10**13),
    st.text(max_size=5),
    st.none(),
    st.booleans(),
    st.lists(st.integers(), max_size=3),
)


@given(bad_numbers)
def test_bad_context_is_valueerror(value):
    assume(
        not (
            isinstance(value, float)
            and math.isfinite(value)
            and value == int(value)
            and 0 <= value <= 10**12
        )
    )
    spec = spec_from_config(
        {
            "hidden_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 1,
            "vocab_size": 10,
            "intermediate_size": 10,
        }
    )
    if isinstance(value, int) and not isinstance(value, bool) and value == 0:
        assert kv_cache(spec, value).kv_bytes == 0  # an empty cache is a valid answer
        return
    with pytest.raises(ValueError):
        kv_cache(spec, value)


@given(
    st.sampled_from(
        [
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "head_dim",
            "vocab_size",
            "sliding_window",
            "intermediate_size",
        ]
    ),
    bad_numbers,
)
def test_bad_config_sizes_are_valueerror(field, value):
    cfg = {
        "model_type": "llama",
        "hidden_size": 512,
        "num_hidden_layers": 2,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "vocab_size": 100,
        "intermediate_size": 128,
        "sliding_window": 64,
    }
    cfg[field] = value
    try:
        spec = spec_from_config(cfg)
    except ValueError:
        return
    kv_cache(spec, 100)
    # Only the parameter count reads these: a bad value loses the weights, not the cache.
    if field in ("vocab_size", "intermediate_size") and spec.params is None:
        assert field in spec.params_error
        return
    # Accepted only if the value was a usable size (None means "absent": a default applies).
    assert value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


json_values = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(-(10**6), 10**15), st.floats(), st.text(max_size=8)
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
config_keys = st.sampled_from(
    [
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "vocab_size",
        "intermediate_size",
        "sliding_window",
        "sliding_window_pattern",
        "layer_types",
        "use_sliding_window",
        "multi_query",
        "num_kv_heads",
        "new_decoder_architecture",
        "n_embd",
        "n_head",
        "n_layer",
        "text_config",
        "kv_lora_rank",
        "qk_rope_head_dim",
        "qk_nope_head_dim",
        "v_head_dim",
        "full_attention_interval",
        "attn_layer_period",
        "attn_layer_offset",
        "num_local_experts",
        "num_experts_per_tok",
        "model_type",
        "tie_word_embeddings",
        "mamba_d_state",
        "linear_num_value_heads",
        "first_k_dense_replace",
        "mlp_only_layers",
    ]
)


@given(st.dictionaries(config_keys, json_values, max_size=12), st.integers(1, 10**6))
@settings(max_examples=400)
def test_fuzz_config_parser_only_raises_valueerror(cfg, n):
    try:
        spec = spec_from_config(cfg)
        kv_cache(spec, n)
        budget(Deployment(spec=spec, memory_bytes=80 * GiB, weights_bytes=GiB), n)
    except ValueError:
        pass


@given(st.dictionaries(config_keys, st.integers(-5, 70), max_size=20), st.integers(1, 10**5))
@settings(max_examples=400)
def test_fuzz_small_integer_configs(cfg, n):
    try:
        spec = spec_from_config(cfg)
    except ValueError:
        return
    r = kv_cache(spec, n)
    assert r.kv_bytes >= 0 and r.state_bytes >= 0
    if spec.params is None:  # no parameter count: the weight figures are refused, by name
        with pytest.raises(ValueError, match="weight"):
            weights(spec)
        return
    w = weights(spec)
    s = step_time(Deployment(spec=spec, weights=w), context=n, batch=1, bandwidth_gbs=100)
    assert s.step_time_s >= 0
