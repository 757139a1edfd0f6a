"""The smallest change of hardware that lets a model run, offered where its weights do not fit:
the same GPU split by tensor parallelism (1, 2, 4, 8), else the next larger GPU of the registry,
each with the fewest GPUs whose KV pool holds one sequence by vLLM's arithmetic
(``kvcalc.engines.budget.budget``). The rule: docs/vllm.md#the-smallest-setup-that-fits."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..cache.deployment import Deployment
from ..config.catalog import GPU
from .budget import Budget, budget

# Tensor-parallel sizes tried on one GPU kind: one node of up to 8 GPUs, as the chapter's
# DeepSeek-V3 example (8 x H200) and vLLM's usual single-node deployments.
NODE_TP = (1, 2, 4, 8)


@dataclass(frozen=True)
class FitSetup:
    """A setup that fits: ``tp`` GPUs of kind ``gpu`` (pipeline parallel 1) and its budget at
    the context asked for."""

    gpu: GPU
    tp: int
    budget: Budget

    @property
    def label(self) -> str:
        return f"{self.tp} x {self.gpu.name}" if self.tp > 1 else self.gpu.name


def fitting_setup(
    dep: Deployment, gpus: Iterable[GPU], context: int, *, tps: tuple[int, ...] = NODE_TP
) -> FitSetup | None:
    """The first setup, in the module's order, where ``dep``'s model fits with room for one
    sequence of ``context`` tokens (its weights, cache format and pool settings kept; the GPU
    and tp changed, pp 1); None when no GPU of ``gpus`` does with up to ``max(tps)`` of them.
    A tensor-parallel size the model's heads cannot take is skipped."""
    current = dep.gpu
    if current is None:
        raise ValueError("a fitting setup starts from a GPU: give the deployment one")
    larger = sorted(
        (g for g in gpus if g.memory_bytes > current.memory_bytes),
        key=lambda g: (g.memory_bytes, g.key),
    )
    for gpu in [current, *larger]:
        for tp in tps:
            try:
                b = budget(dep.but(gpu=gpu, tp=tp, pp=1), context, find_max_context=False)
            except ValueError:  # a TP the KV heads cannot split: try the next
                continue
            if b.kv_pool_bytes > 0 and b.max_concurrency >= 1 and not b.startup_error:
                return FitSetup(gpu=gpu, tp=tp, budget=b)
    return None
