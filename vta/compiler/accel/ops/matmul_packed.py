"""Matrix multiply / dense on the accelerator: the tensor-IR definition over packed matrices.

``matmul_compute`` defines it over x ``(M/b, K/bi, b, bi)``, w ``(N/bo, K/bi, bo, bi)`` and the
result ``(M/b, N/bo, b, bo)`` (packing in ``accel.ops.packing``) with the same epilogue stages
as conv2d, so the default schedule and the passes treat both alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from vta.compiler.accel.ops.packed_op import PackedOp
from vta.compiler.ir.tensor import compute, placeholder, reduce_axis, sum_
from vta.compiler.ops.epilogue import Epilogue, epilogue_compute
from vta.compiler.ops.matmul import MatmulSpec
from vta.config import HwConfig


@dataclass(frozen=True, slots=True)
class PackedMatmul:
    """Packed sizes in blocks: row blocks ``mb`` (padded to whole tiles x threads), ``kb``
    (to the reduction tile), ``nb`` (to the output-channel tile x threads)."""

    mb: int
    kb: int
    nb: int
    b: int
    bi: int
    bo: int

    @property
    def data_shape(self) -> tuple[int, ...]:
        return (self.mb, self.kb, self.b, self.bi)

    @property
    def kernel_shape(self) -> tuple[int, ...]:
        return (self.nb, self.kb, self.bo, self.bi)

    @property
    def bias_shape(self) -> tuple[int, ...]:
        return (self.nb, self.b, self.bo)

    @property
    def res_shape(self) -> tuple[int, ...]:
        return (self.mb, self.nb, self.b, self.bo)

    @property
    def ocb(self) -> int:
        return self.nb


def _up(a: int, m: int) -> int:
    return -(-a // m) * m


def packed_matmul_dims(spec: MatmulSpec, hw: HwConfig, sch) -> PackedMatmul:  # type: ignore[no-untyped-def]
    """Packed sizes under schedule ``sch`` (threads split row blocks unless ``vt_axis`` is oc)."""
    g = hw.gemm
    v_oc = sch.vthreads if sch.vt_axis == "oc" else 1
    v_m = sch.vthreads if sch.vt_axis != "oc" else 1
    return PackedMatmul(mb=_up(-(-spec.m // g.batch), sch.tw * v_m),
                        kb=_up(-(-spec.k // g.block_in), sch.tci),
                        nb=_up(-(-spec.n // g.block_out), sch.tco * v_oc),
                        b=g.batch, bi=g.block_in, bo=g.block_out)


def matmul_compute(spec: MatmulSpec, hw: HwConfig, sch, epi: Epilogue) -> PackedOp:  # type: ignore[no-untyped-def]
    """``res[m, n] = epilogue(sum_k x[m, k] * w[n, k])`` over packed matrices."""
    P = packed_matmul_dims(spec, hw, sch)
    x = placeholder(P.data_shape, "int8", "data")
    w = placeholder(P.kernel_shape, "int8", "kernel")
    bias = placeholder(P.bias_shape, "int32", "bias") if epi.bias else None
    rk, rbi = reduce_axis(P.kb, "k"), reduce_axis(P.bi, "bi")
    acc = compute(P.res_shape, lambda m, n, b, j: sum_(
        x[m, rk, b, rbi].astype("int32") * w[n, rk, j, rbi].astype("int32"), [rk, rbi]), "matmul")
    stages, res = epilogue_compute(acc, bias, epi, channel_axis=1)
    inputs = (x, w) if bias is None else (x, w, bias)
    return PackedOp("matmul", inputs, None, acc, tuple(stages), res, {"ow": 0, "oc": 1})
