"""``requant_f32`` on the GPU: ONNX Runtime's float32 requantize as a scalar GPU intrinsic.

A fused chain's exact requantize (``vta.compiler.ops.chain.exact_requant_stage``: what the
importer emits for ORT's QLinearConv / QLinearMatMul / QGemm arithmetic with
``requant="ort"``) is the call ``requant_f32(acc, word)``: the int32 accumulator times the
float32 scale the word holds (``vta.float_scale``: ``m | s << MANTISSA_BITS``, the same word
the accelerator's ``ALU.REQUANT_F32`` reads), rounded half to even, saturated to int32. The
chain's zero point and clip follow as ordinary IR.

On the GPU it is what MLAS computes, in the hardware's float32 (CUDA math: each operation
correctly rounded, half to even, without fast-math):

* ``__int2float_rn(acc)``: the int32 -> float32 conversion (``cvt.rn.f32.s32``), rounded to 24
  significant bits half to even as ``_mm256_cvtepi32_ps`` does;
* the scale: ``ldexpf(m, -s)`` (``m`` has at most 24 bits, so ``(float)m`` is exact, and
  ``ldexpf`` is exact for a result a float32 holds: the word was made from that float32);
* ``__fmul_rn``: one rounded float32 product (never contracted into an FMA);
* ``__float2int_rn``: to the nearest integer, half to even (``cvt.rni.s32.f32``, which
  saturates to int32 like ``_mm256_cvtps_epi32``'s range check in MLAS does by clamping first:
  a product beyond int32 cannot reach the int8 clip anyway).

The emulator runs ``vta.float_scale.scale_mul``: the integer form of the same arithmetic, the
one definition the accelerator's instruction and the graph interpreter read.
``tests/gpu/test_requant_call.py`` checks it against numpy's float32 on random accumulators,
ties and saturation, and nvcc compiles a kernel calling the device function (PTX).
"""

from __future__ import annotations

from vta.float_scale import MANTISSA_BITS, scale_mul
from vta.gpu.intrinsic import GpuCall, register_gpu_call
from vta.resources import REQUANT_F32

__all__ = ["REQUANT_F32_CALL", "DEVICE_FUNCTION"]

#: the CUDA device function's name
DEVICE_FUNCTION = "vta_requant_f32"

_SOURCE = f"""\
#ifndef VTA_REQUANT_F32
#define VTA_REQUANT_F32
// float32(acc) * the float32 scale m / 2**s of word m | s << {MANTISSA_BITS}, rounded half to even,
// saturated to int32: ONNX Runtime's requantize (MlasRequantizeOutput), vta.float_scale
__device__ __forceinline__ int {DEVICE_FUNCTION}(int acc, int word) {{
  const float scale = ldexpf((float)(word & {hex((1 << MANTISSA_BITS) - 1)}),
                             -(int)((unsigned)word >> {MANTISSA_BITS}));
  return __float2int_rn(__fmul_rn(__int2float_rn(acc), scale));
}}
#endif
"""

#: the scalar intrinsic ``requant_f32(int32 acc, int32 word) -> int32``
REQUANT_F32_CALL = register_gpu_call(GpuCall(
    name=REQUANT_F32, args=("int32", "int32"), dtype="int32", function=DEVICE_FUNCTION,
    source=_SOURCE, semantics=scale_mul))
