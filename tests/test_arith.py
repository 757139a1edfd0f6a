"""The helpers written once (issue 25, item 3): ceiling division, bisection, "does this layer
keep a bounded number of tokens", the one safe file reader, and the recurrent-state aliases.
Expected values are worked by hand below, never taken from the code under test."""

import os

import pytest

from kvcalc import get_model, spec_from_config
from kvcalc.config.files import read_regular_file
from kvcalc.core.arith import UNBOUNDED_CONTEXT, cdiv, first_true, last_true
from kvcalc.core.model import ChunkedLocal, FullAttention, NoCache, RecurrentState


@pytest.mark.parametrize(
    "a, b, want",
    [(0, 16, 0), (1, 16, 1), (16, 16, 1), (17, 16, 2), (8192, 16, 512), (8193, 16, 513)],
)
def test_cdiv(a, b, want):
    assert cdiv(a, b) == want


def test_cdiv_is_exact_past_a_float():
    # 2^60 + 1 = 1,152,921,504,606,846,977 = 3 x 384,307,168,202,282,325 + 2, so the ceiling is
    # ...326; through a float (53 bits) the quotient is off by tens.
    assert cdiv(2**60 + 1, 3) == 384_307_168_202_282_326


def test_last_true_finds_the_edge_in_few_calls():
    calls = []

    def ok(n):
        calls.append(n)
        return n * n <= 1000  # 31^2 = 961 fits, 32^2 = 1,024 does not

    assert last_true(ok, 1, 1000) == 31
    assert len(calls) <= 10  # log2(999) < 10
    assert last_true(ok, 31, 32) == 31 and len(calls) <= 10  # nothing left to test


def test_first_true_finds_the_edge():
    # 2^19 = 524,288 < 10^6 <= 2^20 = 1,048,576
    assert first_true(lambda n: 2**n >= 10**6, 0, 64) == 20
    assert first_true(lambda n: n >= 1, 0, 1) == 1


def test_a_layer_knows_whether_it_keeps_a_bounded_number_of_tokens():
    # Published configs: Mistral 7B v0.1 and Gemma 2 9B slide over 4,096 tokens, gpt-oss over
    # 128 (its sliding layers), Gemma 2's other half and gpt-oss's full layers keep every token.
    assert {lay.token_bound() for lay in get_model("mistral-7b-v0.1").spec.layers} == {4096}
    assert {lay.token_bound() for lay in get_model("gemma-2-9b").spec.layers} == {4096, None}
    assert {lay.token_bound() for lay in get_model("gpt-oss-20b").spec.layers} == {128, None}
    assert {lay.token_bound() for lay in get_model("llama-3.1-8b").spec.layers} == {None}
    chunked = ChunkedLocal(kv_heads=8, head_dim=128, v_head_dim=128, q_heads=40, chunk=8192)
    assert chunked.token_bound() == 8192
    full = FullAttention(kv_heads=8, head_dim=128, v_head_dim=128, q_heads=32)
    state = RecurrentState(conv_elements=3 * 5120, ssm_elements=5120 * 16, flavor="mamba")
    assert full.token_bound() is None and state.token_bound() is None
    assert NoCache().token_bound() is None
    # A window as long as the probe itself would read as unbounded: the probe is past every
    # window a config may give (config fields are capped at 10^8 tokens).
    assert UNBOUNDED_CONTEXT > 10**8


def test_the_safe_reader_names_what_it_refuses(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path, kind in ((tmp_path, "a directory"), (fifo, "a FIFO (named pipe)")):
        with pytest.raises(ValueError) as exc:
            read_regular_file(path, limit=10, what="log", give="give the path of a saved log")
        assert str(exc.value) == (
            f"cannot read log {str(path)!r}: it is {kind}, not a regular "
            "file; give the path of a saved log"
        )
    with pytest.raises(ValueError, match="cannot read log .*nope': No such file"):
        read_regular_file(tmp_path / "nope", limit=10, what="log", give="")
    f = tmp_path / "log.txt"
    f.write_bytes(b"0123456789abcdef")
    assert read_regular_file(f, limit=10, what="log", give="") == b"0123456789a"  # limit + 1
    with pytest.raises(ValueError, match="^16 bytes$"):
        read_regular_file(f, limit=10, what="log", give="", too_large=lambda s, n: f"{n} bytes")


def test_the_cache_and_the_parameter_count_read_the_same_state_size():
    # Jamba v0.1 (models.yaml: mamba_d_state 16, mamba_expand 2, hidden 4,096, so d_inner
    # 8,192; 32 layers with attention at i % 8 == 4: 28 Mamba layers). A config that also says
    # ssm_state_size 32 is read as state size 32 by the cache and the parameter count alike
    # (the first alias wins for both), so it reads as the config that says 32 alone.
    base = dict(get_model("jamba-v0.1").config)
    both = spec_from_config({**base, "ssm_state_size": 32})
    alone = spec_from_config({**base, "mamba_d_state": 32})
    assert both.layers == alone.layers and both.params == alone.params
    # And the state size does reach the count: per Mamba layer, x_proj (d_inner x 2 d_state),
    # A_log (d_inner x d_state) and the B/C norms (2 d_state) grow by 16 x (8,192 x 2 + 8,192
    # + 2) = 393,248 parameters: 28 x 393,248 = 11,010,944 in all.
    sixteen = spec_from_config(base)
    assert alone.params.total - sixteen.params.total == 11_010_944
    mamba = [lay for lay in alone.layers if lay.state_elements]
    assert len(mamba) == 28 and mamba[0].ssm_elements == 8192 * 32
