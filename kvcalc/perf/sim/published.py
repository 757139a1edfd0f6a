"""A published disaggregated measurement beside the simulator's figure for it (issue 43): how
well ``kvcalc.perf.sim.fleet`` reproduces a real xPyD deployment.

Mooncake's vLLM runs (kvcache-ai/Mooncake, docs/source/performance/vllm/
vllm-v1-pd-performance.md): 1P1D, Qwen3-8B at TP 8 on each side, H800s, 8 x ConnectX-7 RoCE
(about 200 GB/s a node: 25 GB/s a GPU), vLLM 0.11.2.dev358 with the Mooncake connector and prefix
caching off, `vllm bench serve` on the chat endpoint with random prompts of N tokens, 128 output
tokens, one request at a time. The chat template adds 14 tokens to each prompt (the published
cache sizes are those of N + 14 tokens: tests/test_transfer.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...cache.deployment import Deployment
from ...cache.transfer import transfer
from ...config.catalog import registry
from ..engines import resolve
from .fleet import simulate_disagg
from .plan import engine_setup
from .workload import Workload, fixed

TEMPLATE_TOKENS = 14
# (prompt tokens asked, mean TTFT ms, the move ms), as published
MOONCAKE_VLLM_1P1D = (
    (128, 46.09, 0.54),
    (256, 48.04, 0.61),
    (512, 59.91, 0.92),
    (1024, 67.29, 1.50),
    (2048, 85.31, 2.51),
    (4096, 124.42, 4.75),
    (8192, 212.05, 8.84),
    (16384, 387.52, 16.43),
    (32768, 749.62, 31.65),
)
MOONCAKE_ENGINE = "vllm@0.11.2"  # the release Mooncake ran (0.11.2.dev358)
SOURCE = "Mooncake's vLLM 1P1D runs (Qwen3-8B, TP 8 a side, H800, 8 x 200 Gb/s RoCE)"


@dataclass(frozen=True, kw_only=True)
class CheckRow:
    prompt_tokens: int
    measured_ttft_s: float
    simulated_ttft_s: float
    measured_move_s: float
    simulated_move_s: float

    @property
    def error(self) -> float:
        """simulated / measured - 1."""
        return self.simulated_ttft_s / self.measured_ttft_s - 1


def mooncake_check(engine: str = MOONCAKE_ENGINE) -> list[CheckRow]:
    """Each published row simulated: one request, 1P1D as run, under ``engine``'s profile (the
    nearest fitted release)."""
    reg = registry()
    m, gpu, link = reg.model("qwen3-8b"), reg.gpu("h800-sxm-80gb"), reg.link("roce-200")
    profile, _ = resolve(engine)
    dep = Deployment(spec=m.spec, weights=m.weights(), gpu=gpu).but(enable_prefix_caching=False)
    rows = []
    for n, ttft_ms, move_ms in MOONCAKE_VLLM_1P1D:
        p = n + TEMPLATE_TOKENS
        wl = Workload(requests=1, prompt=fixed(p), output=fixed(128), rate=float("inf"))
        s = engine_setup(dep, wl, profile, 8)
        move = transfer(m.spec, p, prefill_tp=8, decode_tp=8, link_gbs=link.gbs).estimate_s
        assert move is not None
        r = simulate_disagg(
            s, s, wl, prefill_engines=1, decode_engines=1, transfer_seconds={p: move}.__getitem__
        )
        rows.append(
            CheckRow(
                prompt_tokens=n,
                measured_ttft_s=ttft_ms / 1e3,
                simulated_ttft_s=r.ttft_p50_s,
                measured_move_s=move_ms / 1e3,
                simulated_move_s=move,
            )
        )
    return rows
