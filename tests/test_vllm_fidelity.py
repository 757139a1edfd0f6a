"""vLLM fidelity: state dtypes, prefix caching ('align' mode), batch defaults, the log reader and
the --kv-cache-dtype choices. Every expected number is worked by hand below from vLLM's source
(tests/data/vllm-facts.md, Q4, Q6, Q10-Q12, which quote the released wheels) or from a real
start-up log (tests/data/vllm-logs/README.md), never from kvcalc's own output."""

import contextlib
import io
import json

import pytest
from conftest import ROOT

from kvcalc import GiB, get_model
from kvcalc.cache.deployment import Deployment
from kvcalc.cli import main
from kvcalc.config.hfconfig import load_config_file, spec_from_config
from kvcalc.core.dtypes import get_dtype
from kvcalc.core.model import RecurrentState
from kvcalc.engines.vllm import (
    default_max_num_batched_tokens,
    diagnose_log,
    explain_log,
    kv_cache_dtype_modelled,
    kv_cache_dtypes,
    mamba_cache_mode_of,
    mm_batch_floor,
    parse_log,
    predict,
    state_dtypes,
)

CONFIGS = ROOT / "tests/data/configs"
LOGS = ROOT / "tests/data/vllm-logs"
Q27 = load_config_file(LOGS / "qwen3.6-27b.json")
Q27_SPEC = spec_from_config(Q27)
# Qwen3.6-27B, worked by hand from its config.json:
#   attention token (one full layer): 2 x 4 KV heads x 256 x 2 B = 4,096 B
#   conv state: (2 x 16 x 128 + 48 x 128) channels x (4 - 1) = 10,240 x 3 = 30,720 values
#   SSM state: 48 value heads x 128 x 128 = 786,432 values
ATTN_TOKEN = 4096
CONV, SSM = 30_720, 786_432


def _cfg(name):
    return load_config_file(CONFIGS / name)


def dep(model=Q27_SPEC, **kw) -> Deployment:
    """A model (a spec or a catalog key) with no GPU given, ``kw`` any Deployment, cache or
    engine field by name."""
    return Deployment(spec=get_model(model).spec if isinstance(model, str) else model).but(**kw)


# -- 1. state dtypes --------------------------------------------------------------------------


def test_recurrent_state_bytes_conv_and_ssm_apart():
    lay = RecurrentState(conv_elements=CONV, ssm_elements=SSM, flavor="gated_deltanet")
    bf16, fp32 = get_dtype("bf16"), get_dtype("fp32")
    assert lay.state_bytes(bf16) == (CONV + SSM) * 2 == 1_634_304  # one dtype, as before
    assert lay.state_bytes(bf16, fp32) == CONV * 2 + SSM * 4 == 3_207_168
    assert lay.state_bytes(fp32) == (CONV + SSM) * 4 == 3_268_608


def test_state_dtypes_follow_vllms_rules():
    # Qwen3.5 (Qwen3_5ForConditionalGenerationConfig, v0.17.0 on): 'auto' SSM state takes
    # text_config.mamba_ssm_dtype; the conv state stays in the model's dtype.
    q35 = _cfg("qwen3.5-35b-a3b.json")
    assert state_dtypes(q35, vllm_version="0.17.0")[:2] == ("bf16", "fp32")
    assert state_dtypes(q35, vllm_version="0.16.0")[:2] == ("bf16", "bf16")
    # A flag wins over the config (the hook acts only while the flag is 'auto').
    assert state_dtypes(q35, ssm_flag="bfloat16")[:2] == ("bf16", "bf16")
    # --mamba-cache-dtype sets the conv state, and the SSM state while that is 'auto' ...
    mamba = _cfg("mamba-2.8b-hf.json")
    assert state_dtypes(mamba)[:2] == ("bf16", "bf16")
    assert state_dtypes(mamba, conv_flag="float32")[:2] == ("fp32", "fp32")
    assert state_dtypes(mamba, ssm_flag="float32")[:2] == ("bf16", "fp32")
    # ... NemotronH: config.json's mamba_ssm_cache_dtype, else float16 up to v0.19.x and
    # float32 from v0.20.0 (NemotronHForCausalLMConfig.DEFAULT_MAMBA_SSM_CACHE_DTYPE).
    nemo = _cfg("nemotron-h-56b.json")  # no mamba_ssm_cache_dtype field
    assert state_dtypes(nemo, vllm_version="0.19.0")[:2] == ("bf16", "fp16")
    assert state_dtypes(nemo, vllm_version="0.20.0")[:2] == ("bf16", "fp32")
    nano = _cfg("nemotron-3-nano-30b-a3b.json")  # "mamba_ssm_cache_dtype": "float32"
    assert state_dtypes(nano, vllm_version="0.19.0")[:2] == ("bf16", "fp32")
    # MiniMax's lightning attention keeps one state, in --mamba-cache-dtype (the SSM flag is
    # not read: MambaStateDtypeCalculator.linear_attention_state_dtype).
    assert state_dtypes(_cfg("minimax-m1.json"), ssm_flag="float32")[:2] == ("bf16", "bf16")
    with pytest.raises(ValueError, match="--mamba-ssm-cache-dtype"):
        state_dtypes(mamba, ssm_flag="fp8")


def test_qwen36_27b_attention_block_784_as_logged():
    # A v0.29.0 log (and several other public logs of Qwen3.5/3.6/3.8-27B) prints "Setting
    # attention block size to 784 tokens" and "Padding mamba page size by 0.13%".
    # State page, SSM float32 + conv bf16: 30,720 x 2 + 786,432 x 4 = 3,207,168 B;
    # block = 16 x cdiv(3,207,168, 16 x 4,096) = 16 x 49 = 784; padding
    # (784 x 4,096 - 3,207,168) / 3,207,168 = 4,096 / 3,207,168 = 0.13%.
    conv, ssm, _ = state_dtypes(Q27, vllm_version="0.29.0")
    v29 = dep(version="0.29.0")
    flagged = v29.but(mamba_cache_dtype=conv, mamba_ssm_cache_dtype=ssm)
    p = predict(flagged, 10 * GiB, 8192)
    assert p.block_size == 784 and p.page_bytes == 784 * ATTN_TOKEN
    assert round(p.state_page_padding_pct, 2) == 0.13
    # One truth (issue 38, item 1): the config's mamba_ssm_dtype is on the layer itself, so
    # predict() with vLLM's 'auto' flags gives the logged 784 without state_dtypes() first, and
    # so does every figure that counts the state (kv, Budget).
    plain = predict(v29, 10 * GiB, 8192)
    assert plain.block_size == 784
    # vLLM 0.16.0 did not read it (no Qwen3_5ForConditionalGenerationConfig): the SSM state took
    # the conv state's bf16 there, 16 x cdiv(1,634,304, 65,536) = 16 x 25 = 400.
    old = predict(dep(version="0.16.0"), 10 * GiB, 8192)
    assert old.block_size == 400
    # Not 400 (both states bf16: 16 x cdiv(1,634,304, 65,536) = 16 x 25) nor 800 (both fp32:
    # 16 x cdiv(3,268,608, 65,536) = 16 x 50): the old single state dtype gave one of those.
    both16 = predict(v29.but(mamba_ssm_cache_dtype="bfloat16"), 10 * GiB, 8192)
    both32 = predict(v29.but(mamba_cache_dtype="float32"), 10 * GiB, 8192)
    assert (both16.block_size, both32.block_size) == (400, 800)
    # 16 full + 48 state layers: groups of 16, 1 full + 3 state groups. Prefix caching is on
    # by default in v0.29.0 ('align'): cdiv(8,192, 784) = 11 + 3 x 2 = 17 blocks a request.
    assert [g.blocks_per_request for g in p.groups] == [11, 2, 2, 2]
    off = predict(flagged.but(enable_prefix_caching=False), 10 * GiB, 8192)
    assert off.blocks_per_request == 11 + 3 * 1


def test_real_log_qwen38_27b_tp2_fp8():
    # mitchross/talos-argocd-proxmox PR #1995 (2026-08-16): Qwen3.8-27B-FP8 (the 27B layout
    # above), TP 2, fp8_e4m3 KV, prefix caching on, 2 x 4.99 GiB pool, max_model_len 131,072:
    # "GPU KV cache size: 302,921 tokens", "Maximum concurrency for 131,072 tokens per request:
    # 2.31x", blocks of 1,568. By hand, per GPU: attention token 2 heads x 256 x 2 x 1 B = 1,024 B;
    # state 5,120 x 3 x 2 B + 24 x 128 x 128 x 4 B = 30,720 + 1,572,864 = 1,603,584 B;
    # block 16 x cdiv(1,603,584, 16,384) = 16 x 98 = 1,568; a block of 16 layers
    # 16 x 1,568 x 1,024 = 25,690,112 B; 4.99 GiB // that = 208 blocks; a request
    # cdiv(131,072, 1,568) = 84 + 3 x 2 = 90; 208 / 90 = 2.311x; int(2.3111 x 131,072) = 302,921.
    conv, ssm, _ = state_dtypes(Q27)
    logged = dep(tp=2, kv_dtype="fp8_e4m3", mamba_cache_dtype=conv, mamba_ssm_cache_dtype=ssm)
    logged = logged.but(enable_prefix_caching=True, version="0.29.0")
    p = predict(logged, round(4.99 * GiB), 131072)
    assert (p.block_size, p.num_blocks, p.blocks_per_request) == (1568, 208, 90)
    assert p.kv_cache_tokens == 302_921 and round(p.max_concurrency, 2) == 2.31


# -- 2. prefix caching and the 'align' mode -----------------------------------------------------


def test_prefix_caching_default_by_version():
    # Hybrid models: off by default up to v0.27.x, on from v0.28.0 (PR #50991).
    assert mamba_cache_mode_of("0.27.1", None) == "none"
    assert mamba_cache_mode_of("0.28.0", None) == "align"
    # Attention-free (pure Mamba) models: never on by default (is_prefix_caching_supported).
    assert mamba_cache_mode_of("0.33.0", None, hybrid=False) == "none"
    # Asked for in v0.15.0-v0.27.x: 'all' for models with Mamba prefix-caching support.
    assert mamba_cache_mode_of("0.20.0", True, architecture="NemotronHForCausalLM") == "all"
    assert (
        mamba_cache_mode_of("0.20.0", True, architecture="Qwen3_5ForConditionalGeneration")
        == "align"
    )
    with pytest.raises(ValueError, match="0.15.0"):
        mamba_cache_mode_of("0.14.0", True)
    # Qwen3-Next: 12 full + 36 state layers, 3 state groups
    old, new = (
        predict(dep("qwen3-next-80b-a3b", version=v), 30 * GiB, 8192) for v in ("0.27.1", "0.28.0")
    )
    assert new.blocks_per_request - old.blocks_per_request == 3  # one more block per group
    with pytest.raises(ValueError, match="'all'"):
        asked = dep("qwen3-next-80b-a3b", version="0.20.0", enable_prefix_caching=True)
        predict(asked, 30 * GiB, 8192, architecture="NemotronHForCausalLM")


def test_v033_gdn_prefill_checkpoint():
    # v0.33.0, FlashInfer GDN prefill (Hopper): 2 + 1 checkpoint block per state group, blocks
    # a multiple of lcm(16, 64) = 64: 64 x cdiv(3,207,168, 64 x 4,096) = 64 x 13 = 832;
    # a request at 8,192 tokens: cdiv(8,192, 832) = 10 + 3 x 3 = 19 blocks.
    conv, ssm, _ = state_dtypes(Q27)
    d = dep(mamba_cache_dtype=conv, mamba_ssm_cache_dtype=ssm, gdn_prefill_checkpoint=True)
    p = predict(d.but(version="0.33.0"), 10 * GiB, 8192)
    assert (p.block_size, p.blocks_per_request) == (832, 19)
    # Absent up to v0.32.0: the flag changes nothing there.
    assert predict(d.but(version="0.32.0"), 10 * GiB, 8192).block_size == 784


# -- 3. default max_num_batched_tokens ------------------------------------------------------------


def test_batch_defaults_by_gpu_and_usage_context():
    # EngineArgs.get_batch_defaults (v0.33.0): (LLM class, vllm serve) = (16,384, 16,384) at
    # >= 160 GiB (v0.28.0), (16,384, 8,192) at >= 70 GiB and not an A100, else (8,192, 2,048).
    h100, a100, l4, b200 = int(79.6 * GiB), int(79.2 * GiB), 22 * GiB, 178 * GiB
    assert default_max_num_batched_tokens(None, h100, "NVIDIA H100 80GB HBM3") == 8192
    assert (
        default_max_num_batched_tokens(None, h100, "NVIDIA H100 80GB HBM3", usage_context="llm")
        == 16384
    )
    assert default_max_num_batched_tokens(None, l4, "NVIDIA L4", usage_context="llm") == 8192
    assert default_max_num_batched_tokens(None, a100, "NVIDIA A100-SXM4-80GB") == 2048
    assert default_max_num_batched_tokens(None, b200, "NVIDIA B200", usage_context="llm") == 16384
    # GB10 (DGX Spark) kept on the small row from v0.33.0.
    assert default_max_num_batched_tokens("0.32.0", 119 * GiB, "NVIDIA GB10") == 8192
    assert default_max_num_batched_tokens("0.33.0", 119 * GiB, "NVIDIA GB10") == 2048
    # v0.7.x-v0.8.4: the large row by name only (PR #12369).
    assert default_max_num_batched_tokens("0.8.4", a100, "NVIDIA A100-SXM4-80GB") == 2048
    assert default_max_num_batched_tokens("0.8.4", h100, "NVIDIA H100 80GB HBM3") == 8192
    # Then at most max_num_seqs x max_model_len: 256 x 4 = 1,024 on an L4.
    assert default_max_num_batched_tokens(None, l4, "NVIDIA L4", max_model_len=4) == 1024
    with pytest.raises(ValueError, match="usage context"):
        default_max_num_batched_tokens(None, l4, usage_context="offline")


def test_gemma4_multimodal_raises_the_batch():
    # Gemma 4 26B-A4B: use_bidirectional_attention "vision" makes it a multimodal prefix-LM
    # (Gemma4ModelArchConfigConvertor.is_mm_prefix_lm); one video must fit one batch:
    # 32 frames x (70 soft tokens + 2 + 6) = 2,496 > an L4's 2,048 (v0.22.0 on; the v0.25.1 log).
    g4 = _cfg("gemma-4-26b-a4b.json")
    assert mm_batch_floor(g4, "0.25.1") == (2496, "video")
    assert mm_batch_floor(g4, "0.21.0") is None
    assert mm_batch_floor(_cfg("gemma-4-e2b-it.json"), "0.25.1") is None  # not bidirectional
    l4 = 22 * GiB
    assert default_max_num_batched_tokens("0.25.1", l4, "NVIDIA L4", config=g4) == 2496
    assert default_max_num_batched_tokens("0.25.1", 80 * GiB, "NVIDIA H100", config=g4) == 8192


def test_cli_batch_default_follows_gpu_and_usage_context(capsys):
    # Gemma 3 27B at 32,768 tokens, v0.26.0 on (two batches in flight): a sliding group needs
    # cdiv(min(1,023 + 2 x mnbt, 32,768), 16) + 1 blocks: L4 + vllm serve (2,048):
    # cdiv(5,119, 16) + 1 = 321; L4 + LLM class (8,192): cdiv(17,407, 16) + 1 = 1,089.
    args = [
        "vllm",
        "--model",
        "gemma-3-27b",
        "--available-kv-gib",
        "20",
        "--max-model-len",
        "32768",
        "--gpu",
        "l4",
        "--json",
    ]
    assert main(args) == 0
    serve = json.loads(capsys.readouterr().out)
    assert main(args + ["--usage-context", "llm"]) == 0
    llm = json.loads(capsys.readouterr().out)
    assert {g["blocks_per_request"] for g in serve["groups"] if g["kind"] == "sliding"} == {321}
    assert {g["blocks_per_request"] for g in llm["groups"] if g["kind"] == "sliding"} == {1089}


# -- 4. the log reader --------------------------------------------------------------------------


def test_log_tolerates_whitespace_and_the_device_word():
    # From v0.30.0 the line starts with the device type ("NPU", "XPU"; "GPU" on CUDA).
    log = parse_log(
        "INFO Available KV cache memory:  50.00 GiB\n"
        "INFO NPU KV cache size:   409,600  tokens, Maximum concurrency for  8,192 "
        "tokens per request:  50.00 x\n"
    )
    assert (log["available_gib"], log["tokens"], log["concurrency_len"], log["concurrency"]) == (
        50.0,
        409_600,
        8192,
        50.0,
    )


def test_ascend_log_exact_bytes(tmp_path):
    # vllm-ascend issue #3479: Qwen3-4B (36 layers, 8 KV heads x 128, as Qwen3-8B's cache),
    # "Available memory: 26954181529", block 128 (vllm-ascend's default): a page of one layer
    # 128 x 2 x 8 x 128 x 2 B = 524,288 B; 26,954,181,529 // (524,288 x 36) = 1,428 blocks;
    # 1,428 x 128 = 182,784 tokens; 1,428 / cdiv(4,096, 128) = 44.625 -> "44.62x".
    log = parse_log((LOGS / "ascend-qwen3-4b.log").read_text())
    assert log["available_bytes"] == 26_954_181_529
    p, lines = explain_log(get_model("qwen3-8b").spec, log, version="0.11.0")
    assert p.block_size == 128 and p.num_blocks == 1428
    assert all(line.agrees and line.low == line.high for line in lines)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert (
            main(
                [
                    "vllm",
                    "--log",
                    str(LOGS / "ascend-qwen3-4b.log"),
                    "--model",
                    "qwen3-8b",
                    "--vllm-version",
                    "0.11.0",
                    "--json",
                ]
            )
            == 0
        )
    assert json.loads(buf.getvalue())["all_agree"]


def _q27_log(gib: float, tokens: int, conc: float) -> dict:
    return parse_log(
        f"INFO Initializing a V1 LLM engine (v0.29.0) with config: "
        f"model='Qwen/Qwen3.6-27B', max_seq_len=8192, kv_cache_dtype=auto\n"
        f"INFO Available KV cache memory: {gib:.2f} GiB\n"
        f"INFO GPU KV cache size: {tokens:,} tokens, Maximum concurrency for 8,192 "
        f"tokens per request: {conc:.2f}x\n"
    )


def test_log_diagnosis_names_prefix_caching():
    # A v0.29.0 log of Qwen3.6-27B at 10.50 GiB with prefix caching off (hand-made from the
    # arithmetic above): a block of 16 layers is 16 x 784 x 4,096 = 51,380,224 B;
    # 11,274,289,152 // 51,380,224 = 219 blocks (219.4, inside the 0.01 GiB rounding);
    # 11 + 3 = 14 blocks a request: 219 / 14 = 15.64x, int(15.643 x 8,192) = 128,146 tokens.
    # The default for v0.29.0 is prefix caching on (17 blocks a request: 12.88x).
    log = _q27_log(10.50, 128_146, 15.64)
    conv, ssm, _ = state_dtypes(Q27)
    kw = dict(mamba_cache_dtype=conv, mamba_ssm_cache_dtype=ssm)
    p, lines = explain_log(Q27_SPEC, log, **kw)
    assert not any(line.agrees for line in lines[:2])
    assert "prefix caching off" in lines[0].why and "likely" in lines[0].why
    assert diagnose_log(Q27_SPEC, log, **{**kw, "max_model_len": 8192, "version": "0.29.0"})[
        0
    ].startswith("prefix caching off")


def test_log_diagnosis_names_the_state_dtype():
    # The same 10.50 GiB with both states in bf16 (block 400): a block of 16 layers is
    # 16 x 400 x 4,096 = 26,214,400 B; 11,274,289,152 // 26,214,400 = 430 blocks (430.08; the
    # rounding interval 430.0-430.2 keeps 430); cdiv(8,192, 400) = 21 + 3 x 2 = 27 blocks:
    # 430 / 27 = 15.93x, int(15.926 x 8,192) = 130,465 tokens. Predicted with the config's
    # float32 SSM state it does not agree; the diagnosis names the dtype.
    log = _q27_log(10.50, 130_465, 15.93)
    conv, ssm, _ = state_dtypes(Q27)
    _, lines = explain_log(Q27_SPEC, log, mamba_cache_dtype=conv, mamba_ssm_cache_dtype=ssm)
    assert not lines[0].agrees and "SSM state in the model's dtype" in lines[0].why


# -- 5. KV cache formats ------------------------------------------------------------------------

# vllm/config/cache.py CacheDType in v0.33.0, copied from the wheel's source.
CACHE_DTYPE_0_33 = [
    "auto",
    "float16",
    "bfloat16",
    "fp8",
    "fp8_e4m3",
    "fp8_e5m2",
    "fp8_inc",
    "fp8_ds_mla",
    "nvfp4_ds_mla",
    "turboquant_k8v4",
    "turboquant_4bit_nc",
    "turboquant_k3v4_nc",
    "turboquant_3bit_nc",
    "octave_k3v4",
    "octave_k3v3",
    "octave_k3v3_compact",
    "ultraquant_4bit",
    "int4_per_token_head",
    "int8_per_token_head",
    "fp8_per_token_head",
    "nvfp4",
    "nvfp4_4over6",
]


def test_every_cache_dtype_of_the_newest_version_is_known():
    assert sorted(kv_cache_dtypes("0.33.0", vllm_names=True)) == sorted(CACHE_DTYPE_0_33)
    # v0.29.0's Literal has no nvfp4_ds_mla, ultraquant or octave formats.
    v29 = kv_cache_dtypes("0.29.0", vllm_names=True)
    assert "nvfp4_4over6" in v29 and not {"nvfp4_ds_mla", "ultraquant_4bit", "octave_k3v4"} & set(
        v29
    )
    refused = [n for n in CACHE_DTYPE_0_33 if not kv_cache_dtype_modelled(n)]
    assert refused == [
        "turboquant_k8v4",
        "turboquant_4bit_nc",
        "turboquant_k3v4_nc",
        "turboquant_3bit_nc",
        "octave_k3v4",
        "octave_k3v3",
        "octave_k3v3_compact",
        "ultraquant_4bit",
    ]
    for name in refused:
        with pytest.raises(ValueError, match=f"{name} is not modelled"):
            predict(dep("llama-3.1-8b", kv_dtype=name), GiB, 1024)
    with pytest.raises(ValueError, match="vLLM 0.32.0 has no --kv-cache-dtype octave_k3v4"):
        predict(dep("llama-3.1-8b", kv_dtype="octave_k3v4", version="0.32.0"), GiB, 1024)


def test_modelled_cache_dtype_pages():
    def page(kv_dtype: str):
        return predict(dep("llama-3.1-8b", kv_dtype=kv_dtype), GiB, 1024)

    # NVFP4: per KV head (128/2 + 128/16) B for K and again for V = 144 B; 8 heads; block 16.
    p = page("nvfp4")
    assert p.page_bytes == 16 * 8 * 144 and p.kv_cache_dtype == "nvfp4"
    assert page("fp8_e5m2").page_bytes == 16 * 8 * 256
    assert page("bfloat16").page_bytes == 16 * 8 * 512
    with pytest.raises(ValueError, match="MLA"):
        page("fp8_ds_mla")
    # DeepSeek-V3.2: fp8_ds_mla 656 B per token and layer + the 132 B indexer keys (Q4, Q8), in
    # blocks of 64 tokens, which sparse MLA takes on every release (Q16).
    ds = spec_from_config(_cfg("deepseek-v3.2.json"))
    p = predict(dep(ds, kv_dtype="fp8_ds_mla"), 30 * GiB, 8192)
    assert p.block_size == 64 and p.page_bytes == 64 * (656 + 132)


def test_cli_kv_cache_dtype_and_state_flags(capsys):
    path = str(LOGS / "qwen3.6-27b.json")
    base = [
        "vllm",
        "--config",
        path,
        "--available-kv-gib",
        "10",
        "--max-model-len",
        "8192",
        "--vllm-version",
        "0.29.0",
        "--json",
    ]
    assert main(base) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["block_size"], d["blocks_per_request"]) == (784, 17)  # worked above
    assert main(base + ["--no-enable-prefix-caching"]) == 0
    assert json.loads(capsys.readouterr().out)["blocks_per_request"] == 14
    assert main(base + ["--mamba-ssm-cache-dtype", "bfloat16"]) == 0
    assert json.loads(capsys.readouterr().out)["block_size"] == 400
    assert main(base + ["--kv-cache-dtype", "turboquant_k8v4"]) == 2
    assert "turboquant_k8v4 is not modelled" in capsys.readouterr().err
