"""The registry: every model's per-token KV bytes computed by hand from its config fields,
parameter counts against the published totals, and validation of malformed entries."""

import pytest

from kvcalc import get_gpu, get_model, kv_cache, load_registry, registry
from kvcalc.core.units import MiB

# Hand-computed per-token BF16 bytes: 2 (K and V) x KV-layers x KV heads x head_dim x 2 B, with
# head_dim = hidden_size / num_attention_heads unless the config gives head_dim; MLA is one latent
# of (kv_lora_rank + qk_rope_head_dim) per layer. Only layers that attend keep K/V.
HAND_BPT = {
    "llama-2-7b": 2 * 32 * 32 * (4096 // 32) * 2,  # MHA: 32 KV heads
    "llama-3.1-8b": 2 * 32 * 8 * 128 * 2,
    "llama-3.1-70b": 2 * 80 * 8 * (8192 // 64) * 2,
    "llama-2-13b": 2 * 40 * 40 * (5120 // 40) * 2,  # MHA: 40 KV heads
    "llama-2-70b": 2 * 80 * 8 * (8192 // 64) * 2,
    "llama-3.1-405b": 2 * 126 * 8 * (16384 // 128) * 2,
    "mixtral-8x22b": 2 * 56 * 8 * (6144 // 48) * 2,
    "qwen3-235b-a22b": 2 * 94 * 4 * 128 * 2,  # head_dim 128 given (4096 / 64 = 64)
    "mistral-7b-v0.1": 2 * 32 * 8 * 128 * 2,  # every layer sliding, same per token
    "mixtral-8x7b": 2 * 32 * 8 * 128 * 2,
    "qwen2.5-7b": 2 * 28 * 4 * (3584 // 28) * 2,
    "qwen3-8b": 2 * 36 * 8 * 128 * 2,
    "gemma-2-9b": 2 * 42 * 8 * 256 * 2,  # head_dim 256, not 3584/16 = 224
    "gemma-3-27b": 2 * 62 * 16 * 128 * 2,  # from text_config; head_dim 128
    "deepseek-v3": 61 * (512 + 64) * 2,  # MLA latent, no factor 2
    "gpt-oss-20b": 2 * 24 * 8 * 64 * 2,  # head_dim 64, not 2880/64 = 45
    "gpt-oss-120b": 2 * 36 * 8 * 64 * 2,
    "falcon-7b": 2 * 32 * 1 * (4544 // 71) * 2,  # multi_query: one KV head
    "gpt2": 2 * 12 * 12 * (768 // 12) * 2,
    "smollm2-135m": 2 * 30 * 3 * 64 * 2,
    "phi-3-mini-4k": 2 * 32 * 32 * (3072 // 32) * 2,
    "qwen3-next-80b-a3b": 2 * (48 // 4) * 2 * 256 * 2,  # 12 of 48 layers attend
    "jamba-v0.1": 2 * (32 // 8) * 8 * 128 * 2,  # 4 of 32 layers attend
}

REQUIRED_MODELS = set(HAND_BPT)
REQUIRED_GPUS = {
    "h100-sxm-80gb",
    "h200-141gb",
    "a100-80gb",
    "a100-40gb",
    "l4",
    "l40s",
    "a10g",
    "t4",
    "rtx-4090",
    "rtx-3090",
    "mi300x",
    "b200",
    "a100-pcie-80gb",
    "h100-pcie-80gb",
    "rtx-a6000",
    "rtx-6000-ada",
}


def test_registry_has_required_entries():
    r = registry()
    assert set(r.models) >= REQUIRED_MODELS
    assert set(r.gpus) >= REQUIRED_GPUS


@pytest.mark.parametrize("key", sorted(HAND_BPT))
def test_per_token_bytes_by_hand(key):
    assert kv_cache(get_model(key).spec, 1).kv_bytes_per_token_nominal == HAND_BPT[key]


def test_falcon_7b_is_8_kib_and_deepseek_70272():
    # The seed chapter's two extremes, through kvcalc: Falcon 7B's one K/V head of 64 (8 KiB per
    # token) and DeepSeek-V3's latent of 512 + 64 in 61 layers (70,272 B per token).
    assert kv_cache(get_model("falcon-7b").spec, 1).kv_bytes_per_token_nominal == 8 * 1024
    assert kv_cache(get_model("deepseek-v3").spec, 1).kv_bytes_per_token_nominal == 70_272


@pytest.mark.parametrize("key", sorted(HAND_BPT))
def test_total_params_within_2_percent_of_published(key):
    m = get_model(key)
    assert m.spec.total_params == pytest.approx(m.params_total, rel=0.02)


# Published active counts with three significant digits or more (OpenAI's convention: no input
# embedding when the head is untied). Qwen3-Next publishes only the rounded "3B" of its name.
@pytest.mark.parametrize(
    "key",
    ["mixtral-8x7b", "deepseek-v3", "gpt-oss-20b", "gpt-oss-120b", "jamba-v0.1", "mixtral-8x22b"],
)
def test_active_params_within_2_percent(key):
    m = get_model(key)
    assert m.spec.active_params == pytest.approx(m.params_active, rel=0.02)


def test_qwen3_next_active_rounds_to_3b_without_embeddings():
    spec = get_model("qwen3-next-80b-a3b").spec
    non_embedding_active = spec.active_params - spec.params.lm_head
    assert round(non_embedding_active / 1e9) == 3


def test_gpt_oss_mxfp4_checkpoint_size():
    # Experts at 4.25 bits, the rest BF16: the published checkpoints are ~13 GB and ~65 GB.
    assert get_model("gpt-oss-20b").weights().bytes / 1e9 == pytest.approx(13.8, rel=0.03)
    assert get_model("gpt-oss-120b").weights().bytes / 1e9 == pytest.approx(65.3, rel=0.03)
    # Forcing BF16 everywhere doubles-plus the 20b model: 20.9B params x 2 B.
    assert get_model("gpt-oss-20b").weights("bf16").bytes == pytest.approx(2 * 20.915e9, rel=0.001)


def test_every_source_is_a_link():
    for m in registry().models.values():
        assert m.sources["config"].startswith("https://huggingface.co/" + m.hf_id)
        assert m.sources["params"].startswith("https://")
    for g in registry().gpus.values():
        assert g.sources["specs"].startswith("https://")


def test_gpu_memory_from_driver_figure():
    # nvidia-smi prints 81559MiB for an H100 80GB: that is what vLLM's total memory is.
    assert get_gpu("h100-sxm-80gb").memory_bytes == 81559 * MiB
    assert get_gpu("t4").peak_tflops("bf16") == 65  # no BF16 on Turing: FP16 figure
    assert get_gpu("a100-80gb").peak_tflops("fp8") == 312  # no FP8 on Ampere


def test_unknown_keys_suggest_close_matches():
    with pytest.raises(ValueError, match="llama-3.1-8b"):
        get_model("llama-3.1-8")
    with pytest.raises(ValueError, match="unknown GPU"):
        get_gpu("h1000")


GOOD_GPU = """
gpus:
  g:
    name: G
    memory_gb: 10
    bandwidth_gbs: 100
    bf16_tflops: 10
    sources: {specs: https://example.com}
"""


def _registry_text(model_fields: str) -> str:
    return f"models:\n  m1:\n{model_fields}\n{GOOD_GPU}"


GOOD_MODEL = """    name: M
    hf_id: org/m
    params_total: 1000
    sources: {config: https://huggingface.co/org/m, params: https://example.com}
    config: {model_type: llama, hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4,
             vocab_size: 10, intermediate_size: 128}"""


def test_minimal_registry_loads():
    r = load_registry(text=_registry_text(GOOD_MODEL))
    assert r.model("m1").spec.num_layers == 2


@pytest.mark.parametrize(
    "broken,field",
    [
        (GOOD_MODEL.replace("params_total: 1000", "params_total: -5"), "params_total"),
        (GOOD_MODEL.replace("params_total: 1000", "params_total: lots"), "params_total"),
        (GOOD_MODEL.replace("    hf_id: org/m\n", ""), "hf_id"),
        (
            GOOD_MODEL.replace("num_attention_heads: 4", "num_attention_heads: 0"),
            "num_attention_heads",
        ),
        (GOOD_MODEL.replace("hidden_size: 64, ", ""), "hidden_size"),
        (GOOD_MODEL.replace("https://example.com", "nowhere"), "sources.params"),
        (GOOD_MODEL + "\n    weight_dtype: fp7", "weight_dtype"),
    ],
)
def test_malformed_model_entry_names_entry_and_field(broken, field):
    with pytest.raises(ValueError) as exc:
        load_registry(text=_registry_text(broken))
    assert "'m1'" in str(exc.value) and field in str(exc.value)


def test_malformed_gpu_entry_names_entry_and_field():
    text = _registry_text(GOOD_MODEL).replace("bandwidth_gbs: 100", "bandwidth_gbs: .nan")
    with pytest.raises(ValueError, match="gpu 'g'.*bandwidth_gbs"):
        load_registry(text=text)


def test_yaml_alias_bomb_is_refused():
    bomb = (
        "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nmodels: *c\n"
    )
    with pytest.raises(ValueError, match="aliases"):
        load_registry(text=bomb)


def test_not_yaml_or_wrong_shape():
    with pytest.raises(ValueError, match="not valid YAML"):
        load_registry(text="models: [unclosed")
    with pytest.raises(ValueError, match="mapping"):
        load_registry(text="- just a list")
    with pytest.raises(ValueError, match="section 'gpus'"):
        load_registry(text="models: {}\ngpus: 3\n")


def test_qwen3_235b_active_rounds_to_22b():
    # Qwen publishes "22B activated" (two digits): 8 of 128 experts in each of 94 layers.
    assert round(get_model("qwen3-235b-a22b").spec.active_params / 1e9) == 22


def test_every_gpu_names_a_link_for_tensor_parallelism():
    # The all-reduce time (kvcalc.perf.calibration) needs each GPU's link; one-way figures: NVLink 4
    # is the datasheet's 900 GB/s two-way total halved, PCIe 4.0 x16 16 GT/s x 16 x 128/130 / 8.
    r = registry()
    for g in r.gpus.values():
        assert g.tp_link in r.links and g.tp_link_gbs == r.links[g.tp_link].gbs
    assert get_gpu("h100-sxm-80gb").tp_link_gbs == 900 / 2
    assert get_gpu("l40s").tp_link_gbs == pytest.approx(16 * 16 * 128 / 130 / 8, rel=1e-3)
    assert get_gpu("a100-80gb").tp_link_gbs == 600 / 2


def test_a_gpu_naming_an_unknown_link_is_refused():
    text = GOOD_GPU.replace("    sources:", "    tp_link: warp-drive\n    sources:")
    with pytest.raises(ValueError, match="tp_link.*warp-drive"):
        load_registry(text=f"models:\n  m1:\n{GOOD_MODEL}\n{text}")


def test_llama4_scout_from_the_registry():
    # meta-llama/Llama-4-Scout-17B-16E-Instruct: 48 layers of 8 KV heads x 128, every fourth
    # without RoPE and with full attention (transformers' no_rope_layer_interval 4), the other
    # 36 attending within chunks of 8,192 tokens; 4,096 B a token and layer in BF16 (K and V).
    # Model card: 109B parameters in all (the language model's 107.8B and its vision encoder).
    m = get_model("llama-4-scout-17b-16e")
    assert m.spec.kind_counts() == {"chunked": 36, "full": 12}
    assert kv_cache(m.spec, 1).kv_bytes_per_token_nominal == 48 * 8 * 128 * 2 * 2
    # at 20,000 tokens a chunked layer holds at most one chunk (docs/formulas.md: the most
    # held at once), a full one every token
    assert kv_cache(m.spec, 20_000).kv_bytes == 4096 * (12 * 20_000 + 36 * 8192)
    assert m.spec.require_params().total == pytest.approx(109e9, rel=0.02)
