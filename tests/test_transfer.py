"""The cache a disaggregated deployment ships from prefill to decode GPUs (issue 43, item 1:
kvcalc.cache.transfer and ``kvcalc transfer``). Every expected byte count is worked by hand from
the model's config.json fields (in models.yaml), at 2 bytes an element (BF16):

- Llama 3.1 70B: 80 layers x 2 (K, V) x 8 KV heads x 128 = 327,680 B a token.
- DeepSeek-V3 (MLA): 61 layers x (kv_lora_rank 512 + qk_rope_head_dim 64) = 70,272 B a token,
  the whole latent on every tensor-parallel GPU.
- Gemma 2 9B: 42 layers alternating sliding (window 4,096) and full, 2 x 8 heads x 256 = 8,192 B
  a token a layer.
- Qwen3-Next 80B-A3B: 12 full-attention layers (2 KV heads x 256) and 36 Gated DeltaNet layers,
  each a fixed state of conv (2 x 16 x 128 + 32 x 128) x (4 - 1) = 24,576 and recurrent
  32 x 128 x 128 = 524,288 elements.
"""

from __future__ import annotations

import json

import pytest

from kvcalc import registry
from kvcalc.cache.transfer import transfer
from kvcalc.cli import main

GB = 1e9


def spec(key: str):
    return registry().model(key).spec


def test_dense_gqa_llama_70b_the_chapter_question_over_400_gbps():
    # "an 8,192-token prompt on Llama 3.1 70B: how many bytes move, and how long over 400 Gb/s?"
    t = transfer(spec("llama-3.1-70b"), 8192, link_gbs=400 / 8)
    assert t.bytes_per_decode_gpu == 8192 * 80 * 2 * 8 * 128 * 2 == 2_684_354_560
    assert t.bytes_moved == t.bytes_per_decode_gpu
    assert t.seconds == pytest.approx(2_684_354_560 / 50e9)  # 53.7 ms
    # split over 4 decode GPUs: 2 KV heads each, a quarter each; the wire carries the same total
    t4 = transfer(spec("llama-3.1-70b"), 8192, decode_tp=4, prefill_tp=4, link_gbs=50)
    assert t4.bytes_per_decode_gpu == 2_684_354_560 // 4
    assert t4.bytes_moved == 2_684_354_560
    assert t4.seconds == pytest.approx(2_684_354_560 / 4 / 50e9)
    # one prefill GPU sending to 4 decode GPUs: its one port carries it all
    t14 = transfer(spec("llama-3.1-70b"), 8192, decode_tp=4, prefill_tp=1, link_gbs=50)
    assert t14.seconds == pytest.approx(2_684_354_560 / 50e9)
    # 16 decode GPUs for 8 KV heads: each head on two GPUs, so twice the bytes cross the wire
    t16 = transfer(spec("llama-3.1-70b"), 8192, decode_tp=16, prefill_tp=16, link_gbs=50)
    assert t16.bytes_per_decode_gpu == 8192 * 80 * 2 * 1 * 128 * 2
    assert t16.bytes_moved == 2 * 2_684_354_560


def test_mla_deepseek_v3_ships_the_whole_latent_to_every_decode_gpu():
    t = transfer(spec("deepseek-v3"), 8192, decode_tp=8, prefill_tp=8, link_gbs=50)
    per_gpu = 8192 * 61 * (512 + 64) * 2
    assert per_gpu == 575_668_224
    assert [(r.kind, r.layers, r.tokens, r.bytes) for r in t.rows] == [("mla", 61, 8192, per_gpu)]
    assert t.bytes_per_decode_gpu == per_gpu and t.bytes_moved == 8 * per_gpu
    assert t.seconds == pytest.approx(per_gpu / 50e9)


def test_sliding_window_gemma_2_ships_only_the_window_of_its_sliding_layers():
    t = transfer(spec("gemma-2-9b"), 8192)
    rows = {r.kind: r for r in t.rows}
    assert rows["full"].layers == 21 and rows["full"].bytes == 21 * 8192 * 8192
    assert rows["sliding"].layers == 21 and rows["sliding"].tokens == 4096
    assert rows["sliding"].bytes == 21 * 4096 * 8192
    assert t.bytes_per_decode_gpu == 21 * 8192 * 8192 + 21 * 4096 * 8192
    short = transfer(spec("gemma-2-9b"), 1000)  # within the window: every token in every layer
    assert short.bytes_per_decode_gpu == 42 * 1000 * 8192


def test_recurrent_hybrid_qwen3_next_ships_a_fixed_state_beside_its_attention():
    state_per_layer = ((2 * 16 * 128 + 32 * 128) * 3 + 32 * 128 * 128) * 2
    assert state_per_layer == 1_097_728
    for n in (1, 8192, 100_000):
        t = transfer(spec("qwen3-next-80b-a3b"), n)
        rows = {r.kind: r for r in t.rows}
        assert rows["state"].layers == 36 and rows["state"].bytes == 36 * state_per_layer
        assert rows["full"].bytes == 12 * n * 2 * 2 * 256 * 2
        assert t.bytes_per_decode_gpu == 36 * state_per_layer + 12 * n * 2048


def test_an_fp8_cache_moves_half_the_bytes():
    bf16 = transfer(spec("llama-3.1-70b"), 4096)
    fp8 = transfer(spec("llama-3.1-70b"), 4096, kv_dtype="fp8")
    assert fp8.bytes_per_decode_gpu * 2 == bf16.bytes_per_decode_gpu


def test_the_cli_states_the_bytes_and_time_and_compares_with_the_prefill(capsys):
    code = main(
        [
            "transfer",
            "--model",
            "llama-3.1-70b",
            "--prompt-tokens",
            "8192",
            "--link",
            "ib-ndr-400",
            "--gpu",
            "h100-sxm-80gb",
            "--prefill-tp",
            "4",
            "--decode-tp",
            "4",
            "--json",
        ]
    )
    assert code == 0
    j = json.loads(capsys.readouterr().out)
    assert j["bytes_per_decode_gpu"] == 2_684_354_560 // 4
    assert j["seconds"] == pytest.approx(2_684_354_560 / 4 / 50e9)
    assert j["link"] == "ib-ndr-400" and j["link_gbs"] == 50
    # the prefill at MFU 0.5 of the H100's 989.4 TFLOPS over 4 GPUs, linear layers alone a floor
    linear = 2 * spec("llama-3.1-70b").active_params * 8192 / (4 * 989.4e12 * 0.5)
    assert j["prefill_s"] >= linear
    main(["transfer", "--model", "llama-3.1-70b", "--prompt-tokens", "8192"])
    text = capsys.readouterr().out
    assert "2.50 GiB" in text and "53.69 ms" in text


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--prompt-tokens", "0"], "prompt-tokens"),
        (["--prompt-tokens", "10", "--link", "warp-drive"], "unknown link"),
    ],
)
def test_bad_input_is_one_line_naming_what_to_fix(argv, says, capsys):
    try:
        code = main(["transfer", "--model", "llama-3.1-8b", *argv])
    except SystemExit as exc:  # argparse's own refusal of a flag's value
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and says in err and "Traceback" not in err


# Mooncake's measured moves (kvcache-ai/Mooncake, docs/source/performance/vllm/
# vllm-v1-pd-performance.md): vLLM's Mooncake connector, 1P1D, Qwen3-8B at TP 8 on each side, H800s,
# 8 x ConnectX-7 RoCE ("theoretical maximum bandwidth of approximately 200 GB/s": 25 GB/s a GPU),
# `vllm bench serve --random-input-len N --max-concurrency 1`. (prompt tokens asked, KV size in
# MiB as published, the move in ms)
MOONCAKE_VLLM = [
    (128, 20, 0.54),
    (256, 38, 0.61),
    (512, 74, 0.92),
    (1024, 146, 1.50),
    (2048, 290, 2.51),
    (4096, 578, 4.75),
    (8192, 1.13 * 1024, 8.84),
    (16384, 2.25 * 1024, 16.43),
    (32768, 4.50 * 1024, 31.65),
]
# The same team's SGLang runs (docs/source/performance/sglang/sglang-benchmark-results-v1.md):
# Qwen3-235B-A22B (BF16), TP 8 a side on H20s, four 400 GbE links a node (200 GB/s: 25 GB/s a GPU).
# (prompt tokens, bytes moved as published in GB, the move in ms)
MOONCAKE_SGLANG = [(1024, 0.394, 3.96), (8192, 3.15, 20.31), (32768, 12.62, 76.78)]
MiB = 2**20


def test_mooncake_vllm_bytes_per_token_are_qwen3_8b_cache():
    # Between two published rows the KV size grows by exactly the cache of the added tokens:
    # Qwen3-8B keeps 36 layers x 2 x 8 heads x 128 x 2 B = 147,456 B (144 KiB) a token, and with
    # TP 8 on both sides (one head a GPU) the wire carries the whole cache once.
    per_token = transfer(spec("qwen3-8b"), 1, prefill_tp=8, decode_tp=8).bytes_moved
    assert per_token == 36 * 2 * 8 * 128 * 2 == 147_456
    for (n0, mib0, _), (n1, mib1, _) in zip(MOONCAKE_VLLM[3:], MOONCAKE_VLLM[4:]):
        assert (mib1 - mib0) * MiB / (n1 - n0) == pytest.approx(per_token, rel=0.01)
    # each row's size is the prompt plus the chat template's few tokens (vLLM's chat endpoint):
    # 14 more reproduce all nine as printed
    for n, mib, _ in MOONCAKE_VLLM:
        moved = transfer(spec("qwen3-8b"), n + 14, prefill_tp=8, decode_tp=8).bytes_moved / MiB
        assert moved == pytest.approx(mib, abs=0.5 if mib < 1024 else 0.006 * 1024)


def test_mooncake_sglang_bytes_count_each_replicated_head_twice():
    # Qwen3-235B-A22B: 94 layers, 4 KV heads of 128. At TP 8 each head sits on two GPUs and each
    # decode GPU receives its own: 8 x 94 x 2 x 1 x 128 x 2 B = 385,024 B a token cross the wire,
    # twice the 192,512 B cache. Mooncake's published sizes are the doubled ones.
    for n, gb, _ in MOONCAKE_SGLANG:
        t = transfer(spec("qwen3-235b-a22b"), n, prefill_tp=8, decode_tp=8)
        assert t.bytes_moved == n * 385_024
        assert t.bytes_moved / GB == pytest.approx(gb, abs=0.006)


def test_move_estimate_against_mooncake_measured_moves():
    from kvcalc.cache.transfer import LINK_SHARE, MOVE_LATENCY_S

    # the fit (0.35 ms, 72% of line rate) on the vLLM table: within 8.2% of each row
    for n, _, ms in MOONCAKE_VLLM:
        t = transfer(spec("qwen3-8b"), n + 14, prefill_tp=8, decode_tp=8, link_gbs=25)
        assert t.seconds == pytest.approx(t.bytes_per_decode_gpu / 25e9)  # line rate: a floor
        assert t.seconds < ms / 1e3
        assert t.estimate_s == pytest.approx(MOVE_LATENCY_S + t.seconds / LINK_SHARE)
        assert t.estimate_s * 1e3 == pytest.approx(ms, rel=0.085)
    # the SGLang table took no part in the fit: within 23% (its shortest move is 22% under)
    for n, _, ms in MOONCAKE_SGLANG:
        t = transfer(spec("qwen3-235b-a22b"), n, prefill_tp=8, decode_tp=8, link_gbs=25)
        assert t.seconds < ms / 1e3
        assert t.estimate_s * 1e3 == pytest.approx(ms, rel=0.23)
