"""A GPU and which of its peaks a piece of work gets; kvcalc.config.catalog loads models.yaml."""

from __future__ import annotations

from dataclasses import dataclass, field

from .units import GB, MiB


@dataclass(frozen=True, kw_only=True)
class GPU:
    """A GPU's memory, bandwidth and dense peaks per math format (datasheet figures, without
    sparsity). Which peak a piece of work gets depends on the format its arithmetic runs in:
    ``gemm_format`` for the weights' matrix multiplies, ``attention_format`` for attention."""

    key: str
    name: str
    memory_gb: float  # as sold
    memory_mib_driver: int | None
    bandwidth_gbs: float
    bf16_tflops: float | None  # dense 16-bit tensor-core peak (FP16 runs at the same rate)
    fp8_tflops: float | None  # dense FP8 tensor-core peak; None: no FP8 tensor cores
    fp16_tflops: float | None  # for GPUs without BF16 (Turing)
    fp32_tflops: float | None = None  # FP32 on the CUDA cores, not the tensor cores
    # dense FP4 tensor-core peak (Blackwell's NVFP4 / MXFP4 GEMMs); None: no FP4 tensor cores
    # (Hopper and older run 4-bit weights dequantised to 16 bits)
    fp4_tflops: float | None = None
    power_w: float | None = None  # board power at full load (the datasheet's max TDP)
    # vLLM computes attention in FP8 when the cache is FP8 (FlashAttention 3 and FlashMLA on
    # Hopper quantise the queries too); elsewhere an FP8 cache is dequantised to 16 bits.
    fp8_attention: bool = False
    sources: dict = field(default_factory=dict)
    # The link tensor parallelism's all-reduces cross between GPUs (a key of links:), and its
    # one-way bandwidth in GB/s, resolved when the registry loads; None: not stated.
    tp_link: str | None = None
    tp_link_gbs: float | None = None

    @property
    def memory_bytes(self) -> int:
        """Total memory an engine sees: the driver's figure when known, else the sold GB."""
        if self.memory_mib_driver:
            return self.memory_mib_driver * MiB
        return int(self.memory_gb * GB)

    @property
    def has_bf16(self) -> bool:
        return self.bf16_tflops is not None

    @property
    def half(self) -> str:
        """The 16-bit format vLLM computes in here: BF16, or FP16 on a GPU without BF16
        (vllm/platforms/cuda.py, supported_dtypes: BF16 from compute capability 8.0)."""
        return "bf16" if self.has_bf16 else "fp16"

    def tflops(self, math: str) -> float | None:
        """Dense peak for arithmetic in ``math`` ("fp32", "bf16", "fp16", "fp8"); None when
        unknown."""
        if math == "fp32":
            return self.fp32_tflops
        if math == "fp8":
            return self.fp8_tflops
        if math == "fp4":
            return self.fp4_tflops
        if math == "fp16":
            return self.fp16_tflops or self.bf16_tflops
        return self.bf16_tflops or self.fp16_tflops

    def gemm_format(self, weight_dtype: str = "bf16") -> str:
        """The format the matrix multiplies of weights stored in ``weight_dtype`` run in:
        FP32 weights in FP32 (PyTorch leaves TF32 off for matrix multiplies by default); FP8 and
        INT8 weights with 8-bit activations where the GPU has FP8 tensor cores (W8A8), else
        dequantised to 16 bits; NVFP4 weights with 4-bit activations where the GPU has FP4
        tensor cores (Blackwell's W4A4 GEMMs), else dequantised; other 4-bit weights (INT4,
        MXFP4) are dequantised to 16 bits (W4A16, as vLLM's Marlin kernels do, and vLLM's
        default MXFP4 x BF16 MoE on Blackwell); 16-bit weights in 16 bits."""
        if weight_dtype == "nvfp4" and self.fp4_tflops:
            return "fp4"
        return self._math(weight_dtype, weight_dtype in ("fp8", "int8"))

    def attention_format(self, kv_dtype: str = "bf16") -> str:
        """The format attention's arithmetic runs in with a cache stored in ``kv_dtype``: FP32
        for an FP32 cache; FP8 for an FP8 cache where vLLM's kernels compute in FP8
        (``fp8_attention``: Hopper); otherwise the 16-bit model format, the cache dequantised
        as it is read."""
        return self._math(kv_dtype, kv_dtype == "fp8" and self.fp8_attention)

    def _math(self, dtype: str, fp8: bool) -> str:
        """FP32 and FP16 as stored; FP8 where ``fp8`` and the GPU has FP8 tensor cores; else the
        16-bit format."""
        if dtype in ("fp32", "fp16"):
            return dtype
        return "fp8" if fp8 and self.fp8_tflops else self.half

    def peak_tflops(self, dtype: str = "bf16") -> float | None:
        """Dense peak for the GEMMs of weights stored in ``dtype`` (see ``gemm_format``)."""
        return self.tflops(self.gemm_format(dtype))

    def attention_tflops(self, kv_dtype: str = "bf16") -> float | None:
        """Dense peak for attention over a cache stored in ``kv_dtype``."""
        return self.tflops(self.attention_format(kv_dtype))
