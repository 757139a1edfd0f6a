"""One truth for the recurrent state's format and the speculative drafter's cache (issue 38):
`kv`, the Budget page, the vLLM start-up page and the guided tour state the same bytes, each
equal to a value worked by hand from the config's fields (never from kvcalc's output).

By hand, BF16 K/V (2 B), one sequence of 8,192 tokens:
- Qwen3.5-35B-A3B (tests/data/configs): 10 full-attention layers x 2 (K, V) x 2 KV heads x 256
  x 2 B = 20,480 B a token; 30 Gated DeltaNet layers, each conv (2 x 16 x 128 + 32 x 128) x 3 =
  24,576 values in BF16 plus 32 x 128 x 128 values in FP32 (text_config.mamba_ssm_dtype) =
  2,146,304 B; one MTP layer (mtp_num_hidden_layers 1) of full attention: 2,048 B a token.
- Nemotron 3 Nano 30B-A3B: 6 '*' attention layers in hybrid_override_pattern x 2 x 2 x 128 x
  2 B = 6,144 B a token; 23 Mamba-2 layers of (64 x 64 + 2 x 8 x 128) x 3 values in BF16 plus
  64 x 64 x 128 in FP32 (mamba_ssm_cache_dtype) = 2,134,016 B; no MTP layers.
- DeepSeek-V3 (the registry's config): 61 MLA layers x (512 + 64) x 2 B = 70,272 B a token, no
  state; its MTP layer (num_nextn_predict_layers 1) one more latent, 1,152 B.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from conftest import ROOT, formulas, open_page

from kvcalc.core.units import fmt_bytes
from webui.pages import path

CONFIGS = ROOT / "tests/data/configs"
CTX = 8192
GDN = 24_576 * 2 + 32 * 128 * 128 * 4
MAMBA2 = (64 * 64 + 2 * 8 * 128) * 3 * 2 + 64 * 64 * 128 * 4
assert (GDN, MAMBA2) == (2_146_304, 2_134_016)

# case -> (config file or registry key, per token, state per sequence, drafter per token)
CASES = {
    "qwen3.5": ("qwen3.5-35b-a3b.json", 10 * 2048, 30 * GDN, 2048),
    "nemotron-3-nano": ("nemotron-3-nano-30b-a3b.json", 6 * 1024, 23 * MAMBA2, None),
    "deepseek-v3": ("deepseek-v3", 61 * 1152, 0, 1152),
}
MTP = '{"method": "mtp", "num_speculative_tokens": 2}'


def cli(*args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "kvcalc", *args, "--json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return json.loads(out.stdout)


def _source(case):
    src = CASES[case][0]
    return ["--config", str(CONFIGS / src)] if src.endswith(".json") else ["--model", src]


def _open(page, case, **query):
    src = CASES[case][0]
    gpu = "h200-141gb"
    if not src.endswith(".json"):
        return open_page(page, model=src, gpu=gpu, tp="8", **query)
    at = open_page(page, gpu=gpu, tp="1", **query)
    at.sidebar.selectbox(key="model").set_value("my-config")
    at.run()
    at.sidebar.text_area(key="cfg_text").set_value((CONFIGS / src).read_text())
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.parametrize("case", sorted(CASES))
def test_kv_budget_and_tour_state_the_same_bytes(case):
    _, per_token, state, drafter = CASES[case]
    seq = per_token * CTX + state
    # kv
    kv = cli("kv", *_source(case), "--context", str(CTX))
    assert (kv["kv_bytes_per_token_nominal"], kv["state_bytes"]) == (per_token, state)
    # Budget: one sequence, K/V and state together
    at = _open(path("budget"), case, b_ctx=str(CTX))
    shown = {m.label: m.value for m in at.metric}
    one = next(v for k, v in shown.items() if k.startswith(f"One sequence of {CTX:,} tokens"))
    assert one == fmt_bytes(seq), shown
    # the tour's first stop (one token) and, for a hybrid, the state in its second
    # (stops 1 and 2 do not read the weights; a size is given where none is counted)
    tour = cli("tour", *_source(case), "--gpu", "h200-141gb", "--weights-gib", "60")["stops"]
    assert tour[0]["value"] == per_token
    if state:
        assert f"{fmt_bytes(state)} of recurrent state" in tour[1]["answer"]


@pytest.mark.parametrize("case", [c for c in sorted(CASES) if CASES[c][3]])
def test_kv_budget_and_vllm_page_state_the_same_drafter(case):
    _, per_token, _, drafter = CASES[case]
    kv = cli("kv", *_source(case), "--context", str(CTX), "--speculative-config", MTP)
    assert kv["drafter"]["bytes_per_token"] == drafter
    assert kv["kv_bytes_per_token_nominal"] == per_token + drafter
    at = _open(path("budget"), case, b_ctx=str(CTX), b_spec="true")
    said = " ".join(m.value for m in at.markdown if "drafter" in m.value)
    assert f"adds **{fmt_bytes(drafter)} per token**" in said, said
    # the vLLM page's lines with the model's MTP layers are the vllm command's
    page = _open(
        path("vllm_startup"),
        case,
        u_spec="MTP (the model's own layers)",
        u_gib="40",
        u_len=str(CTX),
    )
    lines = formulas(page)[0]
    predicted = cli(
        "vllm",
        *_source(case),
        *(["--tp", "8"] if not CASES[case][0].endswith(".json") else []),
        "--gpu",
        "h200-141gb",
        "--available-kv-gib",
        "40",
        "--max-model-len",
        str(CTX),
        "--kv-dtype",
        "auto",
        "--speculative-config",
        MTP,
    )
    tokens = re.search(r"GPU KV cache size: ([\d,]+) tokens", lines).group(1)
    assert int(tokens.replace(",", "")) == predicted["kv_cache_tokens"]
    assert f"{predicted['max_concurrency']:.2f}x" in lines
