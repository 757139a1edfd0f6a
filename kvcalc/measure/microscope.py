"""The attention microscope: what a real model's KV cache holds, and how a new token reads it.

SmolLM2-135M generates greedily through the written-out forward (kvcalc.measure.llama_forward);
every step keeps the attention weights, the newest query and, at the end, the cached K/V, and two
measurements check that earlier tokens' K/V never change. docs/measurement.md.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..core.units import check_int

MAX_PROMPT_CHARS = 1000


def caps(hosted: bool) -> dict:
    """Upper bounds of the microscope's inputs: prompt tokens and decode steps."""
    return (
        {"prompt_tokens": 48, "steps": 12, "chars": 300}
        if hosted
        else {"prompt_tokens": 128, "steps": 32, "chars": MAX_PROMPT_CHARS}
    )


@dataclass
class Microscope:
    model: str
    prompt: str
    prompt_tokens: int
    steps: int  # decode steps after the prefill
    n_layers: int
    n_heads: int
    n_kv: int
    head_dim: int
    bytes_per_element: int
    # every position the cache holds at the end, then the last new token; each as text
    token_ids: list[int] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    attn: list = field(default_factory=list)  # per step: [layers, heads, n_q, n_k] float32
    queries: list = field(default_factory=list)  # per step: [layers, heads, head_dim]
    keys: object = None  # [layers, kv_heads, positions, head_dim] at the end
    values: object = None
    unchanged_max_diff: list = field(default_factory=list)  # per decode step, exact
    recompute_max_diff: float = 0.0  # K/V step by step vs one forward from scratch
    causal_upper_max: float = 0.0  # largest prefill weight above the diagonal, any layer/head
    seconds: float = 0.0
    generated_text: str = ""

    @property
    def group(self) -> int:
        return self.n_heads // self.n_kv

    def positions(self, step: int) -> int:
        """Cached positions after ``step`` (0: the prefill)."""
        return self.prompt_tokens + step

    def written(self, step: int) -> range:
        """Positions whose K/V ``step`` wrote."""
        return (
            range(0, self.prompt_tokens)
            if step == 0
            else range(self.prompt_tokens + step - 1, self.prompt_tokens + step)
        )

    def query_position(self, step: int) -> int:
        """The position of the token whose query is shown at ``step`` (the newest)."""
        return self.positions(step) - 1

    def kv_head_of(self, head: int) -> int:
        return head // self.group

    def heads_of(self, kv_head: int) -> list[int]:
        return list(range(kv_head * self.group, (kv_head + 1) * self.group))

    def row(self, step: int, layer: int, head: int):
        """The newest token's attention weights at ``step`` over positions 0 .. n - 1."""
        return self.attn[step][layer, head, -1]

    def kv_bytes_per_token(self) -> int:
        """2 (K and V) x layers x KV heads x head_dim x bytes per element."""
        return 2 * self.n_layers * self.n_kv * self.head_dim * self.bytes_per_element

    def query_numbers_per_token(self) -> int:
        return self.n_layers * self.n_heads * self.head_dim


def run(
    prompt: str, steps: int = 8, *, hosted: bool = False, device: str = "cpu", should_stop=None
) -> Microscope:
    """Prefill ``prompt`` and decode ``steps`` tokens greedily with SmolLM2's real weights,
    recording what the microscope shows (see the module docstring)."""
    from . import runtime
    from .llama_forward import Net

    cap = caps(hosted)
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("The prompt is empty: type a few words, or pick an example.")
    if len(prompt) > cap["chars"]:
        raise ValueError(
            f"The prompt has {len(prompt):,} characters; this page takes at most "
            f"{cap['chars']:,}. Shorten it."
        )
    steps = check_int("steps", steps, 1, cap["steps"])
    torch = runtime.import_torch()
    dev = runtime.resolve_device(torch, device)
    net_model, _, tok = runtime.load_model("gguf", "smollm2-135m", "fp32", dev)
    net = Net(net_model)
    ids = tok(prompt, return_tensors="pt", add_special_tokens=False).input_ids[0].to(dev)
    P = int(ids.numel())
    if P == 0:
        raise ValueError("The prompt has no tokens: type a few words.")
    if cap["prompt_tokens"] < P:
        raise ValueError(
            f"The prompt is {P:,} tokens long; this page takes at most "
            f"{cap['prompt_tokens']:,} tokens. Shorten it."
        )
    t0 = time.perf_counter()
    L = net.n_layers
    # Per layer the cached keys and values (torch tensors), None before the first step.
    K: list[Any] = [None] * L
    V: list[Any] = [None] * L
    m = Microscope(
        model="smollm2-135m",
        prompt=prompt,
        prompt_tokens=P,
        steps=steps,
        n_layers=L,
        n_heads=net.n_heads,
        n_kv=net.n_kv,
        head_dim=net.head_dim,
        bytes_per_element=4,
    )
    seq = ids.clone()
    x_ids = ids
    with torch.inference_mode():
        for step in range(steps + 1):
            if should_stop is not None and should_stop():
                raise runtime.LiveError(f"The run was stopped after {step} of {steps + 1} steps.")
            start = seq.numel() - x_ids.numel()
            before = K + V  # each layer's keys, then values, before this step
            x = net.embed(x_ids)
            cos, sin = net.rope(x, start)
            n = start + x_ids.numel()
            q_pos = torch.arange(start, n, device=dev)
            k_pos = torch.arange(0, n, device=dev)
            allowed = k_pos.view(1, -1) <= q_pos.view(-1, 1)
            attn, qs = [], []
            for i in range(L):
                q, k, v = net.qkv(i, x, cos, sin)
                K[i] = k if K[i] is None else torch.cat([K[i], k], 1)
                V[i] = v if V[i] is None else torch.cat([V[i], v], 1)
                out, p = net.attend(q, K[i], V[i], allowed)
                attn.append(p)
                qs.append(q[:, -1])
                x = net.finish(i, x, out)
            if step:  # did the step touch any earlier token's K/V?
                now = torch.stack(K + V)[:, :, :start]
                m.unchanged_max_diff.append(float((now - torch.stack(before)).abs().max()))
            if step == 0:
                m.causal_upper_max = float(torch.triu(torch.stack(attn), diagonal=1).max())
            m.attn.append(torch.stack(attn).cpu().numpy())
            m.queries.append(torch.stack(qs).cpu().numpy())
            nxt = net.logits(x)[-1].argmax().view(1)
            seq = torch.cat([seq, nxt])
            x_ids = nxt
        # One forward from scratch over every cached position: K/V of each token computed with
        # all later tokens present, against the ones written step by step.
        n = seq.numel() - 1
        x = net.embed(seq[:n])
        cos, sin = net.rope(x, 0)
        pos = torch.arange(n, device=dev)
        allowed = pos.view(1, -1) <= pos.view(-1, 1)
        worst = 0.0
        for i in range(L):
            q, k, v = net.qkv(i, x, cos, sin)
            worst = max(worst, float((k - K[i]).abs().max()), float((v - V[i]).abs().max()))
            out, _ = net.attend(q, k, v, allowed)
            x = net.finish(i, x, out)
        m.recompute_max_diff = worst
    m.keys = torch.stack(K).cpu().numpy()
    m.values = torch.stack(V).cpu().numpy()
    m.token_ids = [int(t) for t in seq]
    m.labels = [tok.decode([t]) for t in m.token_ids]
    m.generated_text = tok.decode(m.token_ids[P:], skip_special_tokens=True)
    m.seconds = time.perf_counter() - t0
    return m
