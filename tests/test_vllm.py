"""vLLM's start-up capacity lines: the arithmetic of vllm/v1/core/kv_cache_utils.py, worked by
hand for each case, and the log reader."""

import contextlib
import io
import json

import pytest
from conftest import llama_config

from kvcalc import GiB, get_model, spec_from_config
from kvcalc.cache.deployment import Deployment
from kvcalc.cli import main
from kvcalc.engines.vllm import explain_log, parse_log, predict

L8B = get_model("llama-3.1-8b").spec


def dep(model=L8B, **kw) -> Deployment:
    """A model (a spec or a catalog key) with no GPU given, ``kw`` any Deployment, cache or
    engine field by name."""
    return Deployment(spec=get_model(model).spec if isinstance(model, str) else model).but(**kw)


def test_uniform_full_attention_hand_example():
    # 55 GiB // (16 x 4,096 B) // 32 layers = 28,160 blocks; 8,192 tokens = 512 blocks each.
    p = predict(dep(), 55 * GiB, 8192)
    assert (p.num_blocks, p.blocks_per_request, p.max_concurrency) == (28_160, 512, 55.0)
    assert p.kv_cache_tokens == 450_560 and len(p.groups) == 1 and p.padding_layers == 0


def test_both_tokens_formulas_match_a_published_log():
    # vLLM PR 13596 prints "GPU KV cache size: 2,042,016 tokens" and "Maximum concurrency for
    # 2,048 tokens per request: 997.08x" for 127,626 blocks of 16 tokens.
    avail = 127_626 * 16 * 4096 * 32
    old = predict(dep(version="0.8.0"), avail, 2048)
    new = predict(dep(), avail, 2048)
    assert old.num_blocks == 127_626 and old.kv_cache_tokens == 2_042_016
    assert round(old.max_concurrency, 2) == 997.08
    assert new.kv_cache_tokens == int(127_626 / 128 * 2048)


def test_tokens_line_switches_at_0_20_1():
    # Gemma 3 27B, 20 GiB, 32K: 16,384 blocks, 7 groups. v0.20.0 prints
    # 16,384 // 7 x 16 = 37,440 tokens; v0.20.1 prints int(max_concurrency x 32,768) with
    # 2,048 + 6 x 577 = 5,510 blocks a request (v0.20.x reserves one batch per window).
    a, b = (predict(dep("gemma-3-27b", version=v), 20 * GiB, 32768) for v in ("0.20.0", "0.20.1"))
    assert a.kv_cache_tokens == 16_384 // 7 * 16 == 37_440
    assert b.kv_cache_tokens == int(16_384 / 5_510 * 32_768)


def test_gemma3_groups_padding_and_window_blocks():
    # 52 sliding + 10 full layers: groups of 10 -> 1 full + 6 sliding groups, 8 padding layers
    # (vLLM: "may waste at most 15.38%"). Per request at 32,768 tokens: full cdiv(32768, 16) =
    # 2,048 blocks; sliding, up to v0.25: cdiv(min(1024 - 1 + 8192, 32768), 16) + 1 = 577
    # blocks, six times.
    p = predict(dep("gemma-3-27b", version="0.25.0"), 20 * GiB, 32768)
    assert p.group_size == 10 and len(p.groups) == 7 and p.padding_layers == 8
    assert round(p.padding_waste_pct, 2) == 15.38
    assert p.blocks_per_request == 2048 + 6 * 577
    # From v0.26.0 a window reserves the tokens in flight, two batches under asynchronous
    # scheduling: cdiv(min(1,023 + 16,384, 32,768), 16) + 1 = 1,089 blocks.
    new = predict(dep("gemma-3-27b", version="0.26.0"), 20 * GiB, 32768)
    assert new.blocks_per_request == 2048 + 6 * 1089
    p = new
    page = 16 * 2 * 16 * 128 * 2
    assert p.page_bytes == page and p.num_blocks == 20 * GiB // page // 10
    assert p.kv_cache_tokens == int(p.num_blocks / p.blocks_per_request * 32768)


def test_draft_layer_regroups_gpt_oss():
    # gpt-oss-20b: 12 sliding + 12 full. EAGLE adds one full layer: 13 < 12 x 1.25 (v0.12.0,
    # PR #29303), so vLLM uses groups of 13 and pads the sliding layers by one (8.33%).
    base = predict(dep("gpt-oss-20b"), 40 * GiB, 131072)
    eagle = predict(dep("gpt-oss-20b", num_draft_layers=1), 40 * GiB, 131072)
    assert (base.group_size, base.padding_layers) == (12, 0)
    assert (eagle.group_size, eagle.padding_layers) == (13, 1)
    assert round(eagle.padding_waste_pct, 2) == 8.33
    assert eagle.num_blocks < base.num_blocks
    # Before v0.12.0 the group size was always the smallest count: groups of 12, the 13 full
    # layers in two groups (7 + 6) padded to 12 each: 11 padding layers.
    old = predict(dep("gpt-oss-20b", num_draft_layers=1, version="0.11.2"), 40 * GiB, 131072)
    assert (old.group_size, len(old.groups), old.padding_layers) == (12, 3, 11)


def test_grouping_threshold_125_then_15():
    # 12 sliding + 17 full (a drafter adding 5 full layers): 17 < 12 x 1.5 but not < 12 x 1.25.
    # v0.12.0-v0.17.x (1.25): groups of 12 (sliding 1 group; full 2 groups, 7 padding).
    # v0.18.0 on (1.5, PR #36684): groups of 17 (sliding padded by 5, full 1 group).
    five = dep("gpt-oss-20b", num_draft_layers=5)
    a, b = (predict(five.but(version=v), 40 * GiB, 8192) for v in ("0.17.1", "0.18.0"))
    assert (a.group_size, len(a.groups), a.padding_layers) == (12, 3, 7)
    assert (b.group_size, len(b.groups), b.padding_layers) == (17, 2, 5)


def test_hybrid_state_raises_the_block_size():
    # Qwen3-Next at TP 4: a Gated DeltaNet state per GPU is (8192 x 3 + 32 x 128 x 128) / 4 =
    # 137,216 elements = 274,432 B in BF16; an attention token is 2 x 1 x 256 x 2 = 1,024 B.
    # Block = 16 x cdiv(274,432, 16 x 1,024) = 272 tokens; the state page is padded by 1.49%.
    p = predict(dep("qwen3-next-80b-a3b", tp=4, enable_prefix_caching=False), 30 * GiB, 262144)
    assert p.block_size == 272 and p.page_bytes == 272 * 1024
    assert round(p.state_page_padding_pct, 2) == 1.49
    # 12 attention + 36 state layers: groups of 12 -> 1 + 3 groups; with prefix caching off a
    # state group needs one block per request (MambaSpec.max_memory_usage_bytes, mode 'none').
    assert len(p.groups) == 4 and p.blocks_per_request == -(-262144 // 272) + 3
    # vLLM 0.28.0 on turns prefix caching on for hybrid models (PR #50991): 'align' keeps two.
    on = predict(dep("qwen3-next-80b-a3b", tp=4), 30 * GiB, 262144)
    assert on.blocks_per_request == -(-262144 // 272) + 3 * 2


def test_mla_latent_same_on_every_rank():
    # v0.33.0 on an H100 (none given): FlashAttention MLA keeps the block of 16
    a, b = (predict(dep("deepseek-v3", tp=tp, version="0.33.0"), 30 * GiB, 32768) for tp in (1, 8))
    assert a.page_bytes == b.page_bytes == 16 * 576 * 2


def test_pipeline_parallel_binding_stage():
    # 27 layers on 2 stages: 14 + 13. Each GPU's block holds one page of each of its layers:
    # GiB // (16 x 512 B) // 14 on the first stage binds. Up to v0.10.x each stage grouped its
    # own layers (group size 14); from v0.11.0 (PR #23974) the grouping is the whole model's
    # (one group of 27) and each stage keeps only its own slots.
    spec = spec_from_config(llama_config(num_hidden_layers=27))
    page = 16 * 2 * 2 * 64 * 2
    old = predict(dep(spec, pp=2, version="0.10.2"), GiB, 1024)
    new = predict(dep(spec, pp=2), GiB, 1024)
    assert old.stage_blocks == (GiB // page // 14, GiB // page // 13)
    assert old.num_blocks == min(old.stage_blocks) and old.group_size == 14
    assert new.stage_blocks == old.stage_blocks and new.group_size == 27
    assert new.num_blocks == GiB // page // 14


def test_bad_settings():
    with pytest.raises(ValueError, match="divide"):
        predict(dep(tp=3), GiB, 1024)
    with pytest.raises(ValueError, match="max_model_len"):
        predict(dep(), GiB, 0)
    with pytest.raises(ValueError, match="vllm_version"):
        predict(dep(version="latest"), GiB, 10)


def test_kv_cache_dtypes_by_version():
    # Per-token-head INT8 arrived in v0.20.0 (PR #38378), INT4 in v0.25.0 (PR #40835): a version
    # without the format says so instead of showing another format's numbers.
    with pytest.raises(ValueError, match="vLLM 0.19.0 has no INT8"):
        predict(dep(kv_dtype="int8", version="0.19.0"), GiB, 1024)
    with pytest.raises(ValueError, match="vLLM 0.24.0 has no INT4"):
        predict(dep(kv_dtype="int4", version="0.24.0"), GiB, 1024)
    # Llama 3.1 8B: a page per layer in INT8 per token and head is 16 x 8 x (256 + 8) B (one
    # fp32 scale for K and one for V per head); INT4: 16 x 8 x (128 + 8) B.
    p8 = predict(dep(kv_dtype="int8", version="0.20.0"), GiB, 1024)
    p4 = predict(dep(kv_dtype="int4", version="0.25.0"), GiB, 1024)
    assert p8.page_bytes == 16 * 8 * 264 and p8.kv_cache_dtype == "int8_per_token_head"
    assert p4.page_bytes == 16 * 8 * 136
    plain = predict(dep(kv_dtype="fp8"), GiB, 1024)
    assert plain.page_bytes == 16 * 8 * 256 and plain.kv_cache_dtype == "fp8"


def test_defaults_by_version_and_gpu():
    from kvcalc.engines.vllm import (
        Facts,
        default_max_num_batched_tokens,
        default_max_num_seqs,
        fact,
    )

    assert fact(Facts.gpu_memory_utilization, "0.19.1") == 0.9
    assert fact(Facts.gpu_memory_utilization, "0.20.0") == 0.92
    h100, a100, l4, b200 = 79.6 * GiB, 79.2 * GiB, 22 * GiB, 178 * GiB
    assert default_max_num_seqs(None, int(h100), "NVIDIA H100 80GB HBM3") == 1024
    assert default_max_num_seqs(None, int(a100), "NVIDIA A100-SXM4-80GB") == 256
    assert default_max_num_seqs("0.8.5", int(a100), "NVIDIA A100-SXM4-80GB") == 1024
    assert default_max_num_seqs(None, int(l4), "NVIDIA L4") == 256
    assert default_max_num_batched_tokens(None, int(b200), "NVIDIA B200") == 16384
    assert default_max_num_batched_tokens("0.27.0", int(b200), "NVIDIA B200") == 8192
    assert default_max_num_batched_tokens(None, int(l4), "NVIDIA L4") == 2048


def test_startup_error_and_estimate():
    from kvcalc.engines.vllm import estimate_max_model_len, startup_error

    # 1 GiB holds 1 GiB // (16 x 4,096) // 32 = 512 blocks = 8,192 tokens of Llama 3.1 8B.
    # v0.29.0 on (PR #47272) first sets aside the null block: 511 blocks, 8,176 tokens.
    assert estimate_max_model_len(dep(version="0.28.0"), GiB) == 8192
    assert estimate_max_model_len(dep(), GiB) == 8176
    text = startup_error(dep(), GiB, 131072)
    assert "model's max seq len (131072)" in text and "(16.00 GiB KV cache is needed" in text
    assert "estimated maximum model length is 8176" in text
    old = startup_error(dep(version="0.21.0"), GiB, 131072)
    assert "models's max seq len" in old
    assert startup_error(dep(version="0.28.0"), GiB, 8192) is None


LOG = """INFO 11-29 Initializing a V1 LLM engine (v0.10.1) with config: \
model='meta-llama/Llama-3.1-8B',
 dtype=torch.bfloat16, max_seq_len=8192, tensor_parallel_size=1, pipeline_parallel_size=1,
 kv_cache_dtype=auto, enable_prefix_caching=True
INFO [gpu_worker.py:276] Available KV cache memory: 55.00 GiB
INFO [kv_cache_utils.py:849] GPU KV cache size: 450,560 tokens
INFO [kv_cache_utils.py:853] Maximum concurrency for 8,192 tokens per request: 55.00x
"""


def test_log_lines_agree(tmp_path):
    log = parse_log(LOG)
    assert log["version"] == "0.10.1" and log["max_model_len"] == 8192
    p, lines = explain_log(L8B, log)
    assert [lay.agrees for lay in lines] == [True, True]
    f = tmp_path / "vllm.log"
    f.write_text(LOG)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["vllm", "--log", str(f), "--json"]) == 0
    d = json.loads(buf.getvalue())
    assert d["all_agree"] and d["model"] == "Llama 3.1 8B"


def test_log_that_differs_is_explained():
    # Two ranks printed their own memory; the smaller one binds.
    text = (
        LOG.replace("GPU KV cache size: 450,560", "GPU KV cache size: 400,000")
        + "INFO Available KV cache memory: 54.00 GiB\n"
    )
    log = parse_log(text)
    p, lines = explain_log(L8B, log)
    assert p.available_bytes == 54 * GiB
    bad = [lay for lay in lines if not lay.agrees]
    assert bad and "rank" in bad[0].why


def test_log_without_memory_line():
    with pytest.raises(ValueError, match="Available KV cache memory"):
        parse_log("INFO nothing here")


def test_cli_contract_keys(capsys):
    assert (
        main(
            [
                "vllm",
                "--model",
                "gemma-3-27b",
                "--available-kv-gib",
                "20",
                "--max-model-len",
                "32768",
                "--json",
            ]
        )
        == 0
    )
    d = json.loads(capsys.readouterr().out)
    for key in (
        "num_blocks",
        "block_size",
        "kv_cache_tokens",
        "max_concurrency",
        "groups",
        "padding_layers",
    ):
        assert key in d
    assert main(["vllm", "--model", "llama-3.1-8b", "--max-model-len", "10"]) == 2


def test_available_memory_like_vllm():
    from kvcalc.engines.vllm import available_bytes

    # 80 GiB x 0.9 = 72 GiB requested; minus 15 + 1 + 0.5 + 0.5 GiB leaves 55 GiB.
    assert (
        available_bytes(
            total_bytes=80 * GiB,
            gpu_mem_util=0.9,
            weights_bytes=15 * GiB,
            activation_bytes=GiB,
            non_torch_bytes=GiB // 2,
            cuda_graph_bytes=GiB // 2,
        )
        == 55 * GiB
    )
    with pytest.raises(ValueError):
        available_bytes(
            total_bytes=80 * GiB,
            gpu_mem_util=1.5,
            weights_bytes=0,
            activation_bytes=0,
            non_torch_bytes=0,
        )


def test_predictions_say_the_conventions_they_rest_on():
    # v0.33.0's default max_num_batched_tokens on an H100 (none given): 8,192, two in flight
    new = predict(dep("gemma-3-27b", version="0.33.0"), 20 * GiB, 32768)
    old = predict(dep("gemma-3-27b", version="0.25.0"), 20 * GiB, 32768)
    assert any("2 x max_num_batched_tokens (16,384 tokens in flight)" in n for n in new.notes)
    assert not any("in flight" in n for n in old.notes)
    hybrid = predict(dep("qwen3-next-80b-a3b"), 30 * GiB, 8192)
    assert any("mamba_cache_mode 'align'" in n for n in hybrid.notes)


def test_capacity_lines_follow_the_versions_log_format():
    # tests/data/vllm-facts.md: two lines up to v0.27.x; from v0.28.0 one line,
    # "GPU KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx".
    # Llama 3.1 8B with 50 GiB: 50 GiB / (16 x 131,072 B) = 25,600 blocks; 8,192 tokens take 512
    # blocks each: 50.00x, and 25,600 x 16 = 409,600 tokens.
    old, new = (predict(dep(version=v), 50 * GiB, 8192) for v in ("0.27.0", "0.28.0"))
    assert old.capacity_lines() == [
        "GPU KV cache size: 409,600 tokens",
        "Maximum concurrency for 8,192 tokens per request: 50.00x",
    ]
    assert new.capacity_lines() == [
        "GPU KV cache size: 409,600 tokens, Maximum concurrency for 8,192 tokens per request: "
        "50.00x"
    ]
    # A pasted one-line log is read as well as a two-line one.
    from kvcalc.engines.vllm import parse_log

    log = parse_log("INFO Available KV cache memory: 50.00 GiB\nINFO " + new.capacity_lines()[0])
    assert log["tokens"] == 409_600 and log["concurrency"] == 50.0
