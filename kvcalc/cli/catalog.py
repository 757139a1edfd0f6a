"""The catalog commands: the seed blog's table, and the registry's models and GPUs."""

from __future__ import annotations

import argparse

from ..cache.kv import kv_cache
from ..config.catalog import registry
from ..core.model import FullAttention
from ..core.units import GB, GiB, fmt_gib
from .registry import command

# The seed blog's "Llama 3 8B" has Llama 3.1 8B's cache geometry (32 layers, 8 KV heads, 128).
_TABLE_MODELS = (("llama-2-7b", "Llama 2 7B (MHA)"), ("llama-3.1-8b", "Llama 3 8B (GQA)"))
_TABLE_POINTS = ((1, 2048), (16, 8192), (32, 16384))
_GPU_FIELDS: tuple[str, ...] = ("name", "memory_gb", "memory_bytes", "bandwidth_gbs")
_GPU_FIELDS += ("bf16_tflops", "fp8_tflops", "fp4_tflops", "fp16_tflops", "fp32_tflops")


def _json_only(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true")


@command("table", "the seed blog's MHA vs GQA table (FP16)", _json_only)
def cmd_table(args):
    rows = []
    text = ["KV cache in FP16 (the seed blog's table; its 'GB' are GiB = 2^30 bytes)"]
    for key, label in _TABLE_MODELS:
        spec = registry().model(key).spec
        layer = spec.kv_layers[0]
        assert isinstance(layer, FullAttention)  # both models: K/V heads in every layer
        text.append(
            f"{label}: {spec.num_layers} layers | {layer.kv_heads} KV heads | "
            f"{layer.head_dim} head dim"
        )
        text.append(f"  {'batch':>5}  {'context':>8}  {'KV cache':>12}")
        for batch, ctx in _TABLE_POINTS:
            r = kv_cache(spec, ctx, batch, "fp16")
            row = dict(model=key, label=label, batch=batch, context=ctx, kv_bytes=r.kv_bytes)
            rows.append(row | dict(kv_gib=r.kv_bytes / GiB, kv_gb=r.kv_bytes / GB))
            text.append(
                f"  {batch:>5}  {ctx:>8,}  {r.kv_bytes / GiB:>8.3f} GiB  "
                f"({r.kv_bytes / GB:,.1f} GB)"
            )
    return {"kv_dtype": "fp16", "rows": rows}, text


@command("models", "list the registry's models", _json_only)
def cmd_models(args):
    out: dict[str, list[dict]] = {"models": []}
    text: list[str] = []
    for key, m in registry().models.items():
        s, per = m.spec, kv_cache(m.spec, 1).kv_bytes_per_token_nominal
        kinds = ", ".join(f"{n} {k}" for k, n in s.kind_counts().items())
        row = dict(key=key, name=m.name, hf_id=m.hf_id, params_total=s.total_params)
        row.update(params_active=s.active_params, kv_bytes_per_token_bf16=per)
        out["models"].append(row | dict(layers=s.kind_counts(), max_context=s.max_context))
        text.append(
            f"{key:<20} {s.total_params / 1e9:>8.2f}B params  "
            f"{per / 1024:>8.2f} KiB/token (BF16)  [{kinds}]"
        )
    return out, text


@command("gpus", "list the registry's GPUs and links", _json_only)
def cmd_gpus(args):
    out: dict[str, list[dict]] = {"gpus": [], "links": []}
    text: list[str] = []
    for key, g in registry().gpus.items():
        out["gpus"].append({"key": key, **{f: getattr(g, f) for f in _GPU_FIELDS}})
        text.append(
            f"{key:<15} {g.memory_gb:>5g} GB sold = {fmt_gib(g.memory_bytes)} usable  "
            f"{g.bandwidth_gbs:>6,.0f} GB/s  {g.peak_tflops() or 0:>7,.1f} TFLOPS 16-bit"
        )
    for key, lay in registry().links.items():
        out["links"].append({"key": key, "name": lay.name, "gbs": lay.gbs})
        text.append(f"link {key:<12} {lay.name}: {lay.gbs:g} GB/s one way")
    return out, text
