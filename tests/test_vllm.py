"""vLLM's start-up capacity lines: the arithmetic of vllm/v1/core/kv_cache_utils.py, worked by
hand for each case, and the log reader."""

import contextlib
import io
import json

import pytest

from conftest import llama_config
from kvcalc import GiB, get_model, spec_from_config
from kvcalc.cli import main
from kvcalc.vllm import explain_log, parse_log, predict

L8B = get_model("llama-3.1-8b").spec


def test_uniform_full_attention_hand_example():
    # 55 GiB // (16 x 4,096 B) // 32 layers = 28,160 blocks; 8,192 tokens = 512 blocks each.
    p = predict(L8B, available_bytes=55 * GiB, max_model_len=8192)
    assert (p.num_blocks, p.blocks_per_request, p.max_concurrency) == (28_160, 512, 55.0)
    assert p.kv_cache_tokens == 450_560 and len(p.groups) == 1 and p.padding_layers == 0


def test_both_tokens_formulas_match_a_published_log():
    # vLLM PR 13596 prints "GPU KV cache size: 2,042,016 tokens" and "Maximum concurrency for
    # 2,048 tokens per request: 997.08x" for 127,626 blocks of 16 tokens.
    avail = 127_626 * 16 * 4096 * 32
    old = predict(L8B, available_bytes=avail, max_model_len=2048, vllm_version="0.7.3")
    new = predict(L8B, available_bytes=avail, max_model_len=2048)
    assert old.num_blocks == 127_626 and old.kv_cache_tokens == 2_042_016
    assert round(old.max_concurrency, 2) == 997.08
    assert new.kv_cache_tokens == int(127_626 / 128 * 2048)


def test_gemma3_groups_padding_and_window_blocks():
    # 52 sliding + 10 full layers: groups of 10 -> 1 full + 6 sliding groups, 8 padding layers
    # (vLLM: "may waste at most 15.38%"). Per request at 32,768 tokens: full cdiv(32768, 16) =
    # 2,048 blocks; sliding cdiv(min(1024 - 1 + 8192, 32768), 16) + 1 = 577 blocks, six times.
    p = predict(get_model("gemma-3-27b").spec, available_bytes=20 * GiB, max_model_len=32768)
    assert p.group_size == 10 and len(p.groups) == 7 and p.padding_layers == 8
    assert round(p.padding_waste_pct, 2) == 15.38
    assert p.blocks_per_request == 2048 + 6 * 577
    page = 16 * 2 * 16 * 128 * 2
    assert p.page_bytes == page and p.num_blocks == 20 * GiB // page // 10
    assert p.kv_cache_tokens == int(p.num_blocks / p.blocks_per_request * 32768)


def test_draft_layer_regroups_gpt_oss():
    # gpt-oss-20b: 12 sliding + 12 full. EAGLE adds one full layer: 13 < 12 x 1.25, so vLLM
    # uses groups of 13 and pads the sliding layers by one (8.33%).
    base = predict(get_model("gpt-oss-20b").spec, available_bytes=40 * GiB, max_model_len=131072)
    eagle = predict(get_model("gpt-oss-20b").spec, available_bytes=40 * GiB,
                    max_model_len=131072, num_draft_layers=1)
    assert (base.group_size, base.padding_layers) == (12, 0)
    assert (eagle.group_size, eagle.padding_layers) == (13, 1)
    assert round(eagle.padding_waste_pct, 2) == 8.33
    assert eagle.num_blocks < base.num_blocks


def test_hybrid_state_raises_the_block_size():
    # Qwen3-Next at TP 4: a Gated DeltaNet state per GPU is (8192 x 3 + 32 x 128 x 128) / 4 =
    # 137,216 elements = 274,432 B in BF16; an attention token is 2 x 1 x 256 x 2 = 1,024 B.
    # Block = 16 x cdiv(274,432, 16 x 1,024) = 272 tokens; the state page is padded by 1.49%.
    p = predict(get_model("qwen3-next-80b-a3b").spec, available_bytes=30 * GiB,
                max_model_len=262144, tp=4)
    assert p.block_size == 272 and p.page_bytes == 272 * 1024
    assert round(p.state_page_padding_pct, 2) == 1.49
    # 12 attention + 36 state layers: groups of 12 -> 1 + 3 groups; a state group needs one
    # block per request.
    assert len(p.groups) == 4 and p.blocks_per_request == -(-262144 // 272) + 3


def test_mla_latent_same_on_every_rank():
    a = predict(get_model("deepseek-v3").spec, available_bytes=30 * GiB, max_model_len=32768)
    b = predict(get_model("deepseek-v3").spec, available_bytes=30 * GiB, max_model_len=32768,
                tp=8)
    assert a.page_bytes == b.page_bytes == 16 * 576 * 2


def test_pipeline_parallel_binding_stage():
    spec = spec_from_config(llama_config(num_hidden_layers=27))
    p = predict(spec, available_bytes=GiB, max_model_len=1024, pp=2)
    assert p.stage_blocks == (GiB // (16 * 2 * 2 * 64 * 2) // 14,
                              GiB // (16 * 2 * 2 * 64 * 2) // 13)
    assert p.num_blocks == min(p.stage_blocks) and p.group_size == 14


def test_bad_settings():
    with pytest.raises(ValueError, match="divide"):
        predict(L8B, available_bytes=GiB, max_model_len=1024, tp=3)
    with pytest.raises(ValueError, match="max_model_len"):
        predict(L8B, available_bytes=GiB, max_model_len=0)
    with pytest.raises(ValueError, match="vllm_version"):
        predict(L8B, available_bytes=GiB, max_model_len=10, vllm_version="latest")


LOG = """INFO 11-29 Initializing a V1 LLM engine (v0.10.1) with config: model='meta-llama/Llama-3.1-8B',
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
    assert [l.agrees for l in lines] == [True, True]
    f = tmp_path / "vllm.log"
    f.write_text(LOG)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["vllm", "--log", str(f), "--json"]) == 0
    d = json.loads(buf.getvalue())
    assert d["all_agree"] and d["model"] == "Llama 3.1 8B"


def test_log_that_differs_is_explained():
    # Two ranks printed their own memory; the smaller one binds.
    text = LOG.replace("GPU KV cache size: 450,560", "GPU KV cache size: 400,000") + \
        "INFO Available KV cache memory: 54.00 GiB\n"
    log = parse_log(text)
    p, lines = explain_log(L8B, log)
    assert p.available_bytes == 54 * GiB
    bad = [l for l in lines if not l.agrees]
    assert bad and "rank" in bad[0].why


def test_log_without_memory_line():
    with pytest.raises(ValueError, match="Available KV cache memory"):
        parse_log("INFO nothing here")


def test_cli_contract_keys(capsys):
    assert main(["vllm", "--model", "gemma-3-27b", "--available-kv-gib", "20",
                 "--max-model-len", "32768", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    for key in ("num_blocks", "block_size", "kv_cache_tokens", "max_concurrency", "groups",
                "padding_layers"):
        assert key in d
    assert main(["vllm", "--model", "llama-3.1-8b", "--max-model-len", "10"]) == 2


def test_available_memory_like_vllm():
    from kvcalc.vllm import available_bytes

    # 80 GiB x 0.9 = 72 GiB requested; minus 15 + 1 + 0.5 + 0.5 GiB leaves 55 GiB.
    assert available_bytes(total_bytes=80 * GiB, gpu_mem_util=0.9, weights_bytes=15 * GiB,
                           activation_bytes=GiB, non_torch_bytes=GiB // 2,
                           cuda_graph_bytes=GiB // 2) == 55 * GiB
    with pytest.raises(ValueError):
        available_bytes(total_bytes=80 * GiB, gpu_mem_util=1.5, weights_bytes=0,
                        activation_bytes=0, non_torch_bytes=0)
