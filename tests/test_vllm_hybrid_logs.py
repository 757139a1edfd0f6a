"""Real start-up logs of hybrid (Gated DeltaNet + full attention) Qwen3.5/3.6 models, every
capacity line reproduced (issue 38, item 4). Two of them are the misses an external tester
reported: a Qwen3.5-9B AWQ checkpoint with an FP8 cache on an L40S (7.89x predicted, 6.82x
logged) and Qwen3.5-122B-A10B INT4 at tensor parallel 2 (2.09x predicted, 1.89x logged), both
from vLLM main builds stamped 0.16.1rc1.devN. Every expected number below is worked by hand
from the config.json and vLLM's code (tests/data/vllm-facts.md, Q18, quotes the wheels); the
logged lines are read from the logs (tests/data/vllm-logs/README.md gives their sources)."""

import pytest
from conftest import ROOT

from kvcalc import GiB
from kvcalc.cache.deployment import Deployment
from kvcalc.config.hfconfig import load_config_file, spec_from_config
from kvcalc.engines.vllm import explain_log, parse_log, predict, state_dtypes
from kvcalc.engines.vllm.facts import Facts, fact, resolve_version

LOGS = ROOT / "tests/data/vllm-logs"
CONFIGS = ROOT / "tests/data/configs"

Q9B = load_config_file(LOGS / "qwen3.5-9b.json")
Q122B = load_config_file(LOGS / "qwen3.5-122b-a10b.json")
Q35B = load_config_file(CONFIGS / "qwen3.5-35b-a3b.json")


def fp8(config: dict, version: str, **kw) -> Deployment:
    """The model of ``config`` with an FP8 cache under vLLM ``version`` (``kw``: any
    Deployment, cache or engine field by name)."""
    return Deployment(spec=spec_from_config(config)).but(kv_dtype="fp8", version=version, **kw)


def _log(name: str) -> tuple[str, dict]:
    text = (LOGS / name).read_text()
    return text, parse_log(text)


def _all_agree(spec, log, **kw):
    p, lines = explain_log(spec, log, **kw)
    assert [line.name.split(" (")[0] for line in lines][:1] == ["GPU KV cache size"]
    assert len(lines) == 3 and all(line.agrees for line in lines), lines
    return p


# -- 1. the two logs the tester ran ---------------------------------------------------------------


def test_qwen35_9b_awq_fp8_l40s_log():
    # cyankiwi/Qwen3.5-9B-AWQ-BF16-INT8 on an L40S, vLLM 0.16.1rc1.dev265, --kv-cache-dtype fp8,
    # --enable-prefix-caching ('align'), max_model_len 16,384, "Available KV cache memory:
    # 2.43 GiB". By hand, from qwen3.5-9b.json (32 layers: 8 full attention, 24 Gated DeltaNet):
    #   attention token, one layer: 2 x 4 KV heads x 256 x 1 B (fp8) = 2,048 B
    #   GDN state: conv (2 x 16 x 128 + 32 x 128) x (4 - 1) x 2 B = 49,152 B,
    #              SSM 32 x 128 x 128 x 4 B (mamba_ssm_dtype float32) = 2,097,152 B;
    #              page 2,146,304 B
    #   block 16 x cdiv(2,146,304, 16 x 2,048) = 16 x 66 = 1,056 tokens (logged), padding
    #   (1,056 x 2,048 - 2,146,304) / 2,146,304 = 16,384 / 2,146,304 = 0.76% (logged)
    #   groups of 8 layers (24 >= 8 x 1.25): 1 full + 3 GDN; a block is 8 x 2,162,688 =
    #   17,301,504 B; 2.43 GiB = 2,609,192,632 B -> 150 blocks (150.8)
    #   tokens 150 // 4 x 1,056 = 37 x 1,056 = 39,072; a request cdiv(16,384, 1,056) = 16
    #   attention blocks + 3 groups x 2 ('align') = 22; 150 / 22 = 6.818 -> "6.82x".
    text, log = _log("qwen3.5-9b-awq-l40s-fp8.log")
    assert log["version"] == "0.16.1rc1.dev265+gd106bf39f" and log["kv_cache_dtype"] == "fp8"
    assert (log["available_gib"], log["tokens"], log["concurrency"]) == (2.43, 39_072, 6.82)
    p = _all_agree(spec_from_config(Q9B), log)
    assert (p.block_size, p.page_bytes, p.group_size) == (1056, 2_162_688, 8)
    assert round(p.state_page_padding_pct, 2) == 0.76
    assert p.num_blocks == 150
    assert [g.blocks_per_request for g in p.groups] == [16, 2, 2, 2]
    assert p.kv_cache_tokens == 39_072 and round(p.max_concurrency, 2) == 6.82
    for line in p.capacity_lines():  # the lines vLLM printed, character for character
        assert line in text


def test_qwen35_122b_int4_tp2_fp8_log():
    # Qwen3.5-122B-A10B (compressed-tensors WNA16, 4 bits) at tensor parallel 2 on two
    # compute-capability 8.9 GPUs, vLLM 0.16.1rc1.dev111, fp8 cache, prefix caching ('align'),
    # max_model_len 131,072, 1.73 GiB a GPU. By hand, per GPU (qwen3.5-122b-a10b.json: 48
    # layers, 12 full attention with 2 KV heads x 256, 36 GDN with 16 key / 64 value heads):
    #   attention token, one layer: 2 x (2 / 2) x 256 x 1 B = 512 B
    #   GDN state: conv (2 x 16 x 128 + 64 x 128) / 2 x 3 x 2 B = 36,864 B,
    #              SSM (64 / 2) x 128 x 128 x 4 B = 2,097,152 B; page 2,134,016 B
    #   block 16 x cdiv(2,134,016, 16 x 512) = 16 x 261 = 4,176 (logged), padding
    #   4,096 / 2,134,016 = 0.19% (logged)
    #   groups of 12: 1 full + 3 GDN; a block 12 x 4,176 x 512 = 25,657,344 B;
    #   1.73 GiB = 1,857,573,355 B -> 72 blocks (72.4; 72.2-72.6 over the 0.01 GiB rounding)
    #   tokens 72 // 4 x 4,176 = 18 x 4,176 = 75,168; a request cdiv(131,072, 4,176) = 32 + 3 x 2
    #   = 38; 72 / 38 = 1.895 -> "1.89x".
    text, log = _log("qwen3.5-122b-a10b-int4-tp2-fp8.log")
    assert (log["tp"], log["available_gib"], log["tokens"], log["concurrency"]) == (
        2,
        1.73,
        75_168,
        1.89,
    )
    p = _all_agree(spec_from_config(Q122B), log)
    assert (p.block_size, p.page_bytes, p.group_size, p.num_blocks) == (4176, 2_138_112, 12, 72)
    assert round(p.state_page_padding_pct, 2) == 0.19
    assert [g.blocks_per_request for g in p.groups] == [32, 2, 2, 2]
    assert p.kv_cache_tokens == 75_168 and round(p.max_concurrency, 2) == 1.89
    for line in p.capacity_lines():
        assert line in text


def test_memory_line_pins_one_block_count():
    # The memory line is printed to 0.01 GiB: 2.425-2.435 GiB allows 150 or 151 blocks of
    # 17,301,504 B (150.50-151.12); both give 37 x 1,056 = 39,072 tokens, but 151 / 22 = 6.86x:
    # only 150 blocks print all three lines. The 122B's 1.725-1.735 GiB allows 72 blocks only.
    d = fp8(Q9B, "0.16.1", enable_prefix_caching=True)
    low = predict(d, int(2.425 * GiB) + 1, 16384)
    high = predict(d, int(2.435 * GiB), 16384)
    assert (low.num_blocks, high.num_blocks) == (150, 151)
    assert low.kv_cache_tokens == high.kv_cache_tokens == 39_072
    assert (round(low.max_concurrency, 2), round(high.max_concurrency, 2)) == (6.82, 6.86)
    big = fp8(Q122B, "0.16.1", tp=2, enable_prefix_caching=True)
    assert {
        predict(big, b, 131072).num_blocks for b in (int(1.725 * GiB) + 1, int(1.735 * GiB))
    } == {72}


# -- 2. why the tester saw 7.89x and 2.09x ---------------------------------------------------------


def test_what_the_bf16_state_predicted():
    # Before the fix, a version stamped 0.16.1 counted Qwen3.5's SSM state in the conv state's
    # BF16 (the rule was v0.17.0 on). The state page halves, so does the block, and the pool
    # holds twice the blocks: the tokens line (blocks // groups x block) barely moves, but a
    # request's 3 x 2 state blocks and its rounding up do not halve.
    # 9B: SSM 524,288 x 2 = 1,048,576 B, page 1,097,728 B; block 16 x cdiv(1,097,728, 32,768) =
    # 16 x 34 = 544; a block 8 x 544 x 2,048 = 8,912,896 B -> 292 blocks (292.7); tokens
    # 73 x 544 = 39,712 (1.6% above 39,072); a request cdiv(16,384, 544) = 31 + 6 = 37;
    # 292 / 37 = 7.892 -> the reported "7.89x" against the logged 6.82x.
    bf16 = dict(enable_prefix_caching=True, mamba_ssm_cache_dtype="bfloat16")
    p = predict(fp8(Q9B, "0.16.1", **bf16), round(2.43 * GiB), 16384)
    assert (p.block_size, p.num_blocks, p.blocks_per_request) == (544, 292, 37)
    assert p.kv_cache_tokens == 39_712 and round(p.max_concurrency, 2) == 7.89
    # 122B per GPU: SSM 32 x 128 x 128 x 2 = 1,048,576 B, page 1,085,440 B; block
    # 16 x cdiv(1,085,440, 8,192) = 16 x 133 = 2,128; a block 12 x 2,128 x 512 = 13,074,432 B
    # -> 142 blocks; tokens 35 x 2,128 = 74,480 (0.9% below 75,168); a request
    # cdiv(131,072, 2,128) = 62 + 6 = 68; 142 / 68 = 2.088 -> the reported "2.09x" (logged 1.89x).
    p = predict(fp8(Q122B, "0.16.1", tp=2, **bf16), round(1.73 * GiB), 131072)
    assert (p.block_size, p.num_blocks, p.blocks_per_request) == (2128, 142, 68)
    assert p.kv_cache_tokens == 74_480 and round(p.max_concurrency, 2) == 2.09


def test_qwen35_ssm_format_by_version():
    # PR #34489 (2026-02-13) added Qwen3_5ForConditionalGenerationConfig, which copies
    # text_config.mamba_ssm_dtype into mamba_ssm_cache_dtype; main builds stamped 0.16.1rc1.devN
    # have it (the two logs' 1,056- and 4,176-token blocks need the float32 state), the first
    # release with it is v0.17.0, and v0.16.0 has no Qwen3.5 model at all.
    assert resolve_version("0.16.1rc1.dev111+gafd089f23") == (0, 16, 1)
    assert not fact(Facts.qwen3_5_ssm_from_config, "0.16.0")
    assert fact(Facts.qwen3_5_ssm_from_config, "0.16.1rc1.dev265+gd106bf39f")
    assert fact(Facts.qwen3_5_ssm_from_config, "0.17.0")
    assert state_dtypes(Q9B, vllm_version="0.16.1rc1.dev265+gd106bf39f")[:2] == ("bf16", "fp32")
    # At 0.16.0 the prediction says why its state format is a guess for such a model.
    p = predict(fp8(Q9B, "0.16.0"), round(2.43 * GiB), 16384)
    assert p.block_size == 544
    assert any("PR #34489" in note and "mamba_ssm_cache_dtype" in note for note in p.notes)
    later = predict(fp8(Q9B, "0.17.0"), round(2.43 * GiB), 16384)
    assert later.block_size == 1056 and not any("PR #34489" in n for n in later.notes)


# -- 3. a release log of the same rules (v0.20.0) --------------------------------------------------


def test_qwen36_35b_nvfp4_v020_log_align_blocks():
    # RedHatAI/Qwen3.6-35B-A3B-NVFP4 on vLLM 0.20.0, fp8_e4m3 cache, prefix caching ('align'),
    # max_model_len 65,536, 1.28 GiB. Qwen3.6-35B-A3B has Qwen3.5-35B-A3B's text layout
    # (qwen3.5-35b-a3b.json: 40 layers, 10 full with 2 KV heads x 256, 30 GDN 16 / 32 heads):
    #   attention token 2 x 2 x 256 x 1 B = 1,024 B; state 49,152 + 2,097,152 = 2,146,304 B;
    #   block 16 x cdiv(2,146,304, 16,384) = 16 x 131 = 2,096 (logged) and 2,096 x 1,024 =
    #   2,146,304 B is the state page exactly: no "Padding mamba page size" line in the log
    #   a block 10 x 2,146,304 = 21,463,040 B; 1.28 GiB -> 64 blocks (64.04)
    #   tokens 64 // 4 x 2,096 = 33,536; a request cdiv(65,536, 2,096) = 32 + 3 x 2 = 38;
    #   64 / 38 = 1.684 -> "1.68x".
    text, log = _log("qwen3.6-35b-a3b-nvfp4-v0.20.0.log")
    spec = spec_from_config(Q35B)
    p = _all_agree(spec, log)
    assert (p.block_size, p.num_blocks, p.blocks_per_request) == (2096, 64, 38)
    assert p.state_page_padding_pct == 0
    for line in p.capacity_lines():
        assert line in text
    # With prefix caching off a state group keeps 1 block: 32 + 3 = 35, 64 / 35 = 1.83x, and
    # the tokens line is the same 33,536: only the concurrency line tells the modes apart.
    off = predict(fp8(Q35B, "0.20.0", enable_prefix_caching=False), round(1.28 * GiB), 65536)
    assert off.kv_cache_tokens == 33_536 and off.blocks_per_request == 35
    assert round(off.max_concurrency, 2) == 1.83


@pytest.mark.parametrize(
    "name, config",
    [
        ("qwen3.5-9b-awq-l40s-fp8.log", Q9B),
        ("qwen3.5-122b-a10b-int4-tp2-fp8.log", Q122B),
    ],
)
def test_diagnosis_before_the_fix_named_the_state(name, config):
    # Given the BF16 state the old rule chose, the log reader names the float32 SSM state as the
    # one setting that reproduces every line (it did so before the fix too).
    _, log = _log(name)
    p, lines = explain_log(spec_from_config(config), log, mamba_ssm_cache_dtype="bfloat16")
    assert not any(line.agrees for line in lines)
    assert all("SSM state float32" in line.why for line in lines)
