"""Number formats for weights and the KV cache.

Sizes are kept in bits per element so that 4-bit formats stay exact; byte counts are
rounded up only where a real layout has to hold whole bytes (see ``bytes_for``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class DType:
    name: str
    bits: float  # bits per element, including any block scales the format always carries
    quantized: bool  # True when the format needs scales to be read back (fp8, int8, int4)
    label: str

    @property
    def bytes_per_element(self) -> float:
        return self.bits / 8


_ALL = {
    "fp32": DType(name="fp32", bits=32, quantized=False, label="FP32 (4 B)"),
    "fp16": DType(name="fp16", bits=16, quantized=False, label="FP16 (2 B)"),
    "bf16": DType(name="bf16", bits=16, quantized=False, label="BF16 (2 B)"),
    "fp8": DType(name="fp8", bits=8, quantized=True, label="FP8 (1 B)"),
    "int8": DType(name="int8", bits=8, quantized=True, label="INT8 (1 B)"),
    "int4": DType(name="int4", bits=4, quantized=True, label="INT4 (0.5 B)"),
    # MXFP4 (OCP microscaling): 32 four-bit values share one 8-bit scale -> 4 + 8/32 = 4.25 bits.
    # gpt-oss ships its MoE expert weights in this format.
    "mxfp4": DType(name="mxfp4", bits=4.25, quantized=True, label="MXFP4 (4.25 bit)"),
    # NVFP4 (NVIDIA): 16 four-bit values share one FP8 (E4M3) scale -> 4 + 8/16 = 4.5 bits
    # (plus one FP32 scale per tensor, left out). NVIDIA's ModelOpt checkpoints ship it.
    "nvfp4": DType(name="nvfp4", bits=4.5, quantized=True, label="NVFP4 (4.5 bit)"),
}

KV_DTYPES = ("fp32", "fp16", "bf16", "fp8", "int8", "int4")
# The formats a recurrent layer's state may be kept in (conv and SSM states).
STATE_DTYPES = ("fp32", "fp16", "bf16")
WEIGHT_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "mxfp4", "nvfp4")

_ALIASES = {
    "float32": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "float8": "fp8",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
}


def get_dtype(name: str, allowed: tuple[str, ...] | None = None) -> DType:
    """Look a format up by name ("bf16", "fp8", ...); ValueError lists the valid names."""
    if not isinstance(name, str):
        raise ValueError(f"dtype must be a name such as 'bf16', got {name!r}")
    key = _ALIASES.get(name.strip().lower(), name.strip().lower())
    names = allowed if allowed is not None else tuple(_ALL)
    if key not in _ALL or key not in names:
        raise ValueError(f"unknown dtype {name!r}; choose one of: {', '.join(names)}")
    return _ALL[key]


def bytes_for(elements: int, dtype: DType) -> int:
    """Bytes that ``elements`` values of ``dtype`` occupy, rounded up to a whole byte."""
    return math.ceil(elements * dtype.bits / 8)
