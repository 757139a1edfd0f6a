"""Work is not time: recomputing an n-token prefix against one cached decode step, timed.

Without a cache, producing the next token after n tokens reruns all n of them: n token passes of
work. With a cache it is one token pass that reads n cached K/V. The work differs n-fold, but the
time does not: a forward over n tokens turns the weight matrices' vector products into matrix
products, which a CPU or GPU runs far more efficiently per token, and on a GPU both are dominated by
reading the weights once until n is large. Both are measured here, at several n, with the live
page's models (kvcalc.measure.runtime.load_model); each time is the median of a few repeats.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field

__all__ = ["WorkPoint", "WorkTime", "measure", "DEFAULT_NS"]

DEFAULT_NS = (8, 32, 128, 512)


@dataclass
class WorkPoint:
    tokens: int
    recompute_s: float  # one forward over n tokens, no cache: n token passes
    cached_step_s: float  # one token with n tokens in the cache: 1 token pass

    @property
    def work_ratio(self) -> int:
        return self.tokens

    @property
    def time_ratio(self) -> float:
        return self.recompute_s / self.cached_step_s


@dataclass
class WorkTime:
    model: str
    source: str
    device: str
    dtype: str
    weight_bytes: int  # bytes of the model's parameters (what one forward reads at least)
    points: list[WorkPoint] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def measure(
    *,
    model: str,
    source: str = "twin",
    ns=DEFAULT_NS,
    dtype: str = "fp32",
    device: str = "auto",
    repeats: int = 3,
    should_stop=None,
    local_files_only: bool = False,
) -> WorkTime:
    from ..core.units import check_int
    from . import runtime

    torch = runtime.import_torch()
    ns = sorted({check_int("tokens", n, 1, 4096) for n in ns})
    if not ns:
        raise ValueError("give at least one token count")
    repeats = check_int("repeats", repeats, 1, 10)
    dev = runtime.resolve_device(torch, device, dtype)
    net, _, _ = runtime.load_model(source, model, dtype, dev, local_files_only)
    max_pos = getattr(net.config, "max_position_embeddings", None) or getattr(
        net.config, "n_positions", None
    )
    if max_pos and ns[-1] + repeats + 1 > max_pos:
        raise runtime.LiveError(f"{ns[-1]:,} tokens exceed this model's {max_pos:,}-token context")
    from transformers import DynamicCache

    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    vocab = int(net.config.vocab_size)
    gen = torch.Generator().manual_seed(7)
    ids = torch.randint(0, vocab, (1, ns[-1] + repeats + 1), generator=gen).to(dev)
    weight_bytes = sum(p.numel() * p.element_size() for p in net.parameters())
    out = WorkTime(
        model=model, source=source, device=dev, dtype=dtype, weight_bytes=int(weight_bytes)
    )

    def stop():
        if should_stop is not None and should_stop():
            raise runtime.LiveError("The run was stopped.")

    with torch.inference_mode():
        net(input_ids=ids[:, :8], use_cache=False)  # warm-up
        for n in ns:
            rec = []
            for _ in range(repeats):
                stop()
                sync()
                t = time.perf_counter()
                net(input_ids=ids[:, :n], use_cache=False)
                sync()
                rec.append(time.perf_counter() - t)
            stop()
            cache = DynamicCache(config=net.config)
            cache = net(input_ids=ids[:, :n], cache=cache, use_cache=True).cache
            step = []
            for r in range(repeats):
                stop()
                sync()
                t = time.perf_counter()
                cache = net(input_ids=ids[:, n + r : n + r + 1], cache=cache, use_cache=True).cache
                sync()
                step.append(time.perf_counter() - t)
            out.points.append(
                WorkPoint(
                    tokens=n,
                    recompute_s=statistics.median(rec),
                    cached_step_s=statistics.median(step),
                )
            )
    return out
