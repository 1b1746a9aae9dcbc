"""Window operators for the GPU path: max-pool, sum-pool (the global average pool),
stand-alone element-wise kernels and the two-operand table lookup, over NCHW int8 tensors,
with fused chains.

The same operators as the accelerator's ``vta.compiler.ops.window``, defined in the GPU's plain
layouts: ``max`` reduces ``select(in the image, x, -128)`` over the window (padding never
wins, whatever the sign of the input), ``sum`` reduces the window in int32, ``ewise`` reads
the element; a fused chain (``ops.fused.Chain``: the requantization, an add, a ReLU) follows
in the output's layout, its operands read at the output's index (``vta.gpu.ops``). The SIMT
schedule gives one output element to each thread (128 per block): the reduction is a register
(``local``) stage computed in the thread's loop, the chain is inlined into the store.

``lut2_func`` is the graph's ``Lut2`` (ONNX Runtime's add where no integer add gives its bits,
``vta.graph.ort_add``): ``table[a + 128, b + 128]`` with the ``(256, 256)`` int8 table a
kernel parameter read from global memory (64 KiB: the read-only path and L1 keep it close),
one element a thread like ``ewise``.
"""

from __future__ import annotations

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.lower import lower
from vta.compiler.ir.schedule import create_schedule
from vta.compiler.ir.tensor import ComputeOp, Reduce, Tensor, placeholder, reduce_axis, sum_
from vta.compiler.ops.chain import Chain, ew
from vta.compiler.ops.window import WindowSpec
from vta.gpu.ops import chain_operands, requantize

__all__ = ["window_func", "lut2_func", "THREADS", "LUT_SIZE"]

#: threads per block of the window kernels
THREADS = 128
#: entries of a ``Lut2`` table along each operand: every int8 value
LUT_SIZE = 256


def window_func(spec: WindowSpec, chain: Chain | None = None) -> S.PrimFunc:
    """The scheduled (not yet GPU-lowered) kernel of ``spec`` with ``chain``: parameters
    ``data`` (N, C, H, W) int8, the chain's operands, the int8 output (N, C, OH, OW)."""
    s_, p, k = spec.stride, spec.pad, spec.kernel
    data = placeholder((spec.n, spec.c, spec.h, spec.w), "int8", "data")
    oshape = (spec.n, spec.c, spec.oh, spec.ow)
    if spec.kind == "ewise":
        acc: Tensor = ew(oshape, lambda n, c, y, x: data[n, c, y, x].astype("int32"), "value")
    else:
        rr, rq = reduce_axis(k, "r"), reduce_axis(k, "q")
        if spec.kind == "max":
            def tap(n: E.Expr, c: E.Expr, y: E.Expr, x: E.Expr) -> E.Expr:
                iy, ix = y * s_ + rr - p, x * s_ + rq - p
                inside = (iy >= 0) & (iy < spec.h) & (ix >= 0) & (ix < spec.w)
                v = E.select(inside, data[n, c, iy, ix].astype("int32"), E.const(-128, "int32"))
                return Reduce("max", v, (rr, rq))
            acc = ew(oshape, tap, "pool")
        else:
            acc = ew(oshape, lambda n, c, y, x: sum_(
                data[n, c, y * s_ + rr, x * s_ + rq].astype("int32"), [rr, rq]), "pool")
    ops = chain_operands(chain, oshape)
    return _simt(acc, ops, chain, [data], f"{spec.kind}_window")


def lut2_func(shape: tuple[int, int, int, int], chain: Chain | None = None) -> S.PrimFunc:
    """The scheduled kernel of ``table[a + 128, b + 128]`` (module docstring) over operands of
    NCHW ``shape``, with ``chain``: parameters ``a``, ``b`` int8, ``table`` int8 (256, 256),
    the chain's operands, the int8 output."""
    a = placeholder(shape, "int8", "a")
    b = placeholder(shape, "int8", "b")
    table = placeholder((LUT_SIZE, LUT_SIZE), "int8", "table")
    half = LUT_SIZE // 2

    def look(n: E.Expr, c: E.Expr, y: E.Expr, x: E.Expr) -> E.Expr:
        return table[a[n, c, y, x].astype("int32") + half,
                     b[n, c, y, x].astype("int32") + half].astype("int32")

    acc = ew(shape, look, "value")
    return _simt(acc, chain_operands(chain, shape), chain, [a, b, table], "lut2_window")


def _simt(acc: Tensor, ops: list[Tensor], chain: Chain | None, inputs: list[Tensor],
          name: str) -> S.PrimFunc:
    """``acc`` (N, C, OH, OW) int32, the ``chain`` after it (its ``ops``) and the int8 cast,
    scheduled one output element a thread; parameters ``inputs``, ``ops``, the output."""
    oshape = tuple(acc.shape)
    res, stages = requantize(acc, None, None, "int8", oshape,
                             lambda n, c, y, x: (n, c, y, x), chain, ops)
    sch = create_schedule(res)
    for t in stages:
        sch[t].compute_inline()
    out = sch[res]
    f = out.fuse(out.fuse(out.fuse(out.axis[0], out.axis[1]), out.axis[2]), out.axis[3])
    bx, tx = out.split(f, THREADS)
    out.bind(bx, "blockIdx.x")
    out.bind(tx, "threadIdx.x")
    if isinstance(acc.op, ComputeOp) and isinstance(acc.op.body, Reduce):
        st = sch[acc]
        st.set_scope("local")
        st.compute_at(out, tx)
    else:
        sch[acc].compute_inline()
    func = lower(sch, [*inputs, *ops, res], name)
    return S.PrimFunc(func.name, func.params, func.body, ((S.TARGET, "cuda"),))
