"""The committed measurements of the quality table (kvcalc/results/, written by `python -m
kvcalc quality --write-result`), read without torch: each file is whole, and its cache bytes
are the ones worked by hand from SmolLM2-135M's config (30 layers, 3 KV heads, head_dim 64:
46,080 B per token in fp32, docs/formulas.md#smollm2-135m). tests/test_quality.py runs the
command again and compares; tests/test_app_quality.py checks that the page shows these files'
numbers."""

import json
from importlib import resources

import pytest

from kvcalc.measure import quality

# Bytes by hand at 512 and 2,048 tokens, W = 256 (tests/test_quality.py works the 2,048 ones).
# KIVI at 512 tokens: 128 x floor(511 / 128) = 384 quantized, 128 residual (fp32). K per layer
# and head: 384 x 64 x 0.5 B = 12,288 + 12 groups x 64 x 4 B = 3,072; V: 12,288 + 384 x 2 x 4 B
# = 3,072; 90 x 30,720 = 2,764,800 + 128 x 46,080 = 5,898,240 -> 8,663,040. INT2: codes 6,144:
# 90 x 18,432 = 1,658,880 + 5,898,240 = 7,557,120.
BYTES = {
    512: {
        "exact": 512 * 46_080,
        "fp8": 512 * 11_520,
        "int8-token": 512 * 12_240,
        "int4-token": 512 * 6_480,
        "int4-kivi": 8_663_040,
        "int2-kivi": 7_557_120,
        "window-256": 256 * 46_080,
        "sink4-window-256": 260 * 46_080,
    },
    2048: {
        "exact": 2048 * 46_080,
        "fp8": 2048 * 11_520,
        "int8-token": 2048 * 12_240,
        "int4-token": 2048 * 6_480,
        "int4-kivi": 19_722_240,
        "int2-kivi": 14_192_640,
        "window-256": 256 * 46_080,
        "sink4-window-256": 260 * 46_080,
    },
}
RESULTS = resources.files("kvcalc") / "results"  # package data, wherever quality.py lives
FILES = sorted(
    str(RESULTS / n)
    for n in ("quality-smollm2-135m-512-w256.json", "quality-smollm2-135m-2048-w256.json")
)


@pytest.mark.parametrize("path", FILES)
def test_each_committed_result_is_whole_and_its_bytes_are_worked_by_hand(path):
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    t = doc["table"]
    assert doc["format"] == 1 and doc["commit"] and len(doc["commit"]) == 40
    assert doc["uncommitted_changes"] is False  # measured on the commit it names
    assert doc["command"] == (
        f"python -m kvcalc quality --model smollm2-135m --tokens {t['tokens']} --window 256"
    )
    assert doc["machine"]["threads"] == 1 and doc["machine"]["device"] == "cpu"
    assert f"the first {t['tokens']:,} tokens" in t["text_source"]
    assert {r["variant"]: r["kv_bytes"] for r in t["rows"]} == BYTES[t["tokens"]]
    exact = t["rows"][0]
    assert exact["variant"] == "exact" and exact["attention_error"] == 0
    assert exact["next_token_agreement"] == 1
    assert all(r["perplexity"] > 1 and 0 <= r["next_token_agreement"] <= 1 for r in t["rows"])


def test_the_page_finds_every_committed_file():
    docs = quality.committed_results()
    assert sorted(d["file"] for d in docs) == sorted(p.rsplit("/", 1)[1] for p in FILES)
    assert quality.committed_result(512, 256)["file"] == "quality-smollm2-135m-512-w256.json"
    assert quality.committed_result(2048, 256)["table"].tokens == 2048
    assert quality.committed_result(2048, 128) is None


def test_a_broken_or_foreign_file_is_left_out(tmp_path):
    with open(FILES[0], encoding="utf-8") as fh:
        good = json.load(fh)
    (tmp_path / "quality-good.json").write_text(json.dumps(good))
    (tmp_path / "quality-cut.json").write_text(json.dumps(good)[:500])
    (tmp_path / "quality-format2.json").write_text(json.dumps({**good, "format": 2}))
    no_machine = {**good, "machine": {"cpu": "x"}}
    (tmp_path / "quality-nomachine.json").write_text(json.dumps(no_machine))
    (tmp_path / "other.json").write_text(json.dumps(good))
    assert [d["file"] for d in quality.committed_results(tmp_path)] == ["quality-good.json"]
    assert quality.committed_results(tmp_path / "absent") == []
