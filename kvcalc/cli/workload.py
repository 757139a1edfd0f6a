"""``simulate``'s workload flags: requests, arrivals (Poisson or closed loop), lengths."""

from __future__ import annotations

import argparse
import math

from ..perf.sim import MAX_REQUESTS, MAX_TOKENS, Dist, Workload, fixed, lognormal, uniform
from .flags import int_arg

# ShareGPT as vLLM's and SGLang's benchmarks sample it (prompts of 4 to 1,024 tokens, outputs of
# at least 4): log-normal, sigma 1 each (a heavy tail: the published mean end-to-end latency is
# 1.6x the median), medians set so that the clipped means are the corpus's own, 224 prompt and
# 190 output tokens per request (sglang-h200-datacrunch.yaml: 269,081 / 1,200 and
# 226,901 / 1,200 tokens of Llama 3's tokenizer).
SHAREGPT = {"prompt": "lognormal:145:1:1024:4", "output": "lognormal:120:1:1024:4"}
LENGTH_PRESETS = {"sharegpt": SHAREGPT}


def dist_arg(text: str, what: str = "length") -> Dist:
    """A length distribution: 'fixed:N', 'uniform:LO:HI' or 'lognormal:MEDIAN:SIGMA:CLIP[:LO]'
    (tokens; a bare number is fixed)."""
    parts = text.strip().lower().split(":")
    kind, nums = parts[0], parts[1:]
    try:
        if len(parts) == 1 or (kind == "fixed" and len(nums) == 1):
            return fixed(int(parts[-1]), what)
        if kind == "uniform" and len(nums) == 2:
            return uniform(int(nums[0]), int(nums[1]), what)
        if kind == "lognormal" and len(nums) in (3, 4):
            lo = int(nums[3]) if len(nums) == 4 else 1
            return lognormal(float(nums[0]), float(nums[1]), int(nums[2]), lo=lo, what=what)
    except ValueError as exc:
        if "invalid literal" not in str(exc) and "could not convert" not in str(exc):
            raise argparse.ArgumentTypeError(str(exc)) from None
    raise argparse.ArgumentTypeError(
        f"expected fixed:N, uniform:LO:HI or lognormal:MEDIAN:SIGMA:CLIP[:LO] (tokens), got "
        f"{text[:60]!r}"
    )


def _rate(text: str) -> float:
    """Requests per second: a number above 0 and at most 1,000,000, or inf (all at time 0)."""
    t = text.strip().lower()
    if t in ("inf", "infinity"):
        return math.inf
    try:
        v = float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of requests/s or inf, got {text[:40]!r}"
        ) from None
    if not math.isfinite(v) or not 0 < v <= 1e6:
        raise argparse.ArgumentTypeError(
            f"must be above 0 and at most 1,000,000 requests/s, or inf, got {text[:40]!r}"
        )
    return v


def workload_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--requests", type=int_arg(1, MAX_REQUESTS), required=True)
    load = p.add_mutually_exclusive_group(required=True)
    load.add_argument(
        "--rate",
        type=_rate,
        help="Poisson arrivals, requests/s (inf: all at once, as vLLM's benchmark default)",
    )
    load.add_argument(
        "--users",
        type=int_arg(1, MAX_REQUESTS),
        help="a closed loop: each user sends the next request when one ends",
    )
    lengths = p.add_argument_group(
        "request lengths (tokens): a fixed prompt and output, a distribution for each, or a preset"
    )
    lengths.add_argument("--prompt-tokens", type=int_arg(1, MAX_TOKENS))
    lengths.add_argument("--output-tokens", type=int_arg(1, MAX_TOKENS))
    lengths.add_argument(
        "--prompt-dist",
        type=lambda s: dist_arg(s, "prompt tokens"),
        metavar="SPEC",
        help="fixed:N, uniform:LO:HI or lognormal:MEDIAN:SIGMA:CLIP[:LO]",
    )
    lengths.add_argument(
        "--output-dist",
        type=lambda s: dist_arg(s, "output tokens"),
        metavar="SPEC",
        help="as --prompt-dist",
    )
    lengths.add_argument(
        "--lengths",
        choices=tuple(LENGTH_PRESETS),
        help="a preset for both: sharegpt (log-normal, means 224 prompt and "
        "190 output tokens, each clipped to 4-1,024)",
    )


def _lengths(args: argparse.Namespace) -> tuple[Dist, Dist]:
    """The prompt and output distributions from exactly one way of giving each."""
    flags = (args.prompt_tokens, args.output_tokens, args.prompt_dist, args.output_dist)
    if args.lengths:
        if any(v is not None for v in flags):
            raise ValueError(
                "--lengths sets both the prompt and the output; leave out "
                "--prompt-tokens, --output-tokens, --prompt-dist and --output-dist"
            )
        preset = LENGTH_PRESETS[args.lengths].items()
        prompt, output = (dist_arg(spec, f"{k} tokens") for k, spec in preset)
        return prompt, output
    out = []
    for what, n, d in (
        ("prompt", args.prompt_tokens, args.prompt_dist),
        ("output", args.output_tokens, args.output_dist),
    ):
        if (n is None) == (d is None):
            raise ValueError(
                f"give the {what} lengths once: --{what}-tokens N or "
                f"--{what}-dist SPEC (or --lengths sharegpt for both)"
            )
        out.append(fixed(n, f"{what} tokens") if d is None else d)
    return out[0], out[1]


def workload_from(args: argparse.Namespace) -> Workload:
    """The workload of the flags (the shared prefix checked)."""
    if not 0.0 <= args.prefix_share <= 1.0 or not math.isfinite(args.prefix_share):
        raise ValueError(f"--prefix-share must be between 0 and 1, got {args.prefix_share:g}")
    prompt, output = _lengths(args)
    flags = {k: getattr(args, k) for k in ("requests", "rate", "users", "prefix_share", "seed")}
    return Workload(prompt=prompt, output=output, **flags)


def load_text(wl: Workload) -> str:
    """How ``wl``'s requests arrive, in words: a closed loop of users, all at once, or Poisson."""
    if wl.users is not None:
        return f"{wl.users:,} users (closed loop)"
    return "all at once" if wl.rate == math.inf else f"Poisson {wl.rate:g} requests/s"
