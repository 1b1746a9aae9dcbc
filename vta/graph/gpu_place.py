"""A fused group of a graph as a GPU kernel: the GPU counterpart of ``place``.

``group_kernel(group)`` is the kernel of one fused group (``GroupKernel``: the function, the
graph values of its parameters and the layout each is passed in), every one with the bias and
the fused chain (``place.chain_of``, the same stages the accelerator runs: requantize,
residual add, ReLU, clip) in its epilogue:

* a convolution: the task-mapping implicit GEMM of ``vta.gpu.kernels.conv2d`` in channels-last
  layout (``mma_conv2d(layout="NHWC")``: ``cp.async`` ring, ``ldmatrix`` + ``mma.sync``): its
  input, its residual operands and its output NHWC, its weight OHWI (transposed once, on the
  host, as a constant). Every convolution takes it (any channel count: 3 channels take element
  copies of A, the rest 16-byte ``cp.async`` chunks);
* a dense layer: the task-mapping GEMM (``vta.gpu.kernels.gemm``) when the batch and the
  output features are both at least 16 (one ``m16n8`` tile row of warps); else the SIMT
  implicit GEMM (``vta.gpu.ops``), whose 1-row tiles do not waste a tensor-core tile on a
  batch of 1;
* a max-pool, global average pool or stand-alone element-wise operator: ``vta.gpu.window``
  (NCHW);
* a two-operand table lookup (``Lut2``: ONNX Runtime's add where no integer add gives its
  bits): ``vta.gpu.window.lut2_func`` (NCHW), the table a kernel parameter.

An exact requantize (``Requantize.exact``: ONNX Runtime's float32 arithmetic) is a chain stage
like any other: its call ``requant_f32`` is a scalar GPU intrinsic (``vta.gpu.requant``).

A group no kernel takes raises ``HostFallback`` with the reason (it runs on the host).
``vta.run.graph`` compiles and runs the groups, keeping each activation in the layout its
producer wrote and transposing on the host only where a consumer wants the other one.
"""

from __future__ import annotations

from dataclasses import dataclass

from vta.compiler.ir import stmt as S
from vta.compiler.ops.chain import Chain
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.compiler.ops.window import WindowSpec
from vta.errors import HostFallback
from vta.gpu import schedules as G
from vta.gpu.kernels.conv2d import mma_conv2d, tile_knobs
from vta.gpu.kernels.gemm import mma_gemm
from vta.gpu.window import lut2_func, window_func
from vta.graph.ir import (
    Add,
    Clip,
    Conv2d,
    Dense,
    GlobalAvgPool,
    Lut2,
    MaxPool2d,
    Node,
    Relu,
    Requantize,
    TensorType,
    Value,
)
from vta.graph.passes.fuse import group_nodes
from vta.graph.place import (
    TRANSFORMER_HOST,
    block_diagonal,
    chain_of,
    pool_chain,
    transformer_reason,
    with_pad_correction,
)

__all__ = ["group_kernel", "GroupKernel", "NCHW", "NHWC", "OIHW", "OHWI", "PLAIN", "LUT2_ANCHORS"]

#: how a parameter is passed (``GroupKernel.layouts``): a 4-D activation channels-first or
#: channels-last, a conv weight as (OC, IC*KH*KW) or (OC, KH*KW*IC), or as the graph holds it
NCHW, NHWC, OIHW, OHWI, PLAIN = "NCHW", "NHWC", "OIHW", "OHWI", "plain"


@dataclass(frozen=True)
class GroupKernel:
    """The kernel of one fused group: the function (scheduled, or already lowered for the
    task-mapping kernels), the graph values of its array parameters (in order, the output
    excluded), the layout of each and of the output (``NCHW``...), and the fused chain."""

    func: S.PrimFunc
    params: tuple[Value, ...]
    layouts: tuple[str, ...]
    out_layout: str
    chain: Chain | None


def _act(v: Value, layout: str) -> str:
    """``layout`` for a 4-D activation, ``PLAIN`` for anything else."""
    return layout if len(v.type.shape) == 4 else PLAIN


#: the anchors whose GPU kernel takes a ``Lut2`` in its epilogue (``passes.fuse``'s
#: ``lut2_after``): every group ``group_kernel`` gives a kernel, the table read from global
#: memory at the indices the chain computes
LUT2_ANCHORS: tuple[type[Node], ...] = (Conv2d, Dense, MaxPool2d, GlobalAvgPool, Add, Relu, Clip,
                                        Lut2)


def group_kernel(group: Node) -> GroupKernel:
    """The GPU kernel of ``group`` (module docstring); a group no kernel takes raises with the
    reason."""
    nodes = group_nodes(group)
    a = nodes[0]
    if isinstance(a, (Conv2d, Dense)):
        if len(nodes) < 2 or not isinstance(nodes[1], Requantize):
            raise HostFallback(f"{a.op} without a requantize (an int32 result)")
        chain, vals = chain_of(nodes[1:], a.output)
        if isinstance(a, Conv2d) and a.pad_value and a.pad:  # zero-point padding (fold_pad)
            chain, vals = with_pad_correction(a, chain, vals)
        epi = Epilogue(shift=0, bias=True, clip=False)
        params = (a.x, a.weight, a.bias, *vals)
        if isinstance(a, Conv2d):
            n, ic, h, w = a.x.type.shape
            if a.groups != 1:  # the zeros of the block-diagonal weight: exact (place.py)
                params = (a.x, dense_weight(a), a.bias, *vals)
            oc, _, kh, kw = params[1].type.shape
            cs = Conv2dSpec(n, ic, h, w, oc, kh, kw, a.stride, a.pad)
            func = mma_conv2d(cs, "int8", epi, layout=NHWC, chain=chain)
            return GroupKernel(func, params, (NHWC, OHWI, PLAIN, *(_act(v, NHWC) for v in vals)),
                               NHWC, chain)
        n, k = a.x.type.shape
        ms = MatmulSpec(n, a.weight.type.shape[0], k)
        if min(ms.m, ms.n) >= 16:
            func = mma_gemm(ms, "int8", epi, tile_knobs(ms.m, ms.n), chain=chain)
        else:
            func = G.matmul_simt(ms, "int8", epi, chain=chain)
        return GroupKernel(func, params, (PLAIN,) * len(params), PLAIN, chain)
    if isinstance(a, (MaxPool2d, GlobalAvgPool, Add, Relu, Clip)):
        if isinstance(a, MaxPool2d):
            n, c, h, w = a.x.type.shape
            spec_w = WindowSpec("max", n, c, h, w, a.kernel, a.stride, a.pad)
            chain, vals = chain_of(nodes[1:], a.output)
            x = a.x
        elif isinstance(a, GlobalAvgPool):
            n, c, h, w = a.x.type.shape
            if h != w:
                raise HostFallback(f"global average pool over a {h}x{w} image")
            spec_w = WindowSpec("sum", n, c, h, w, h)
            chain, vals = pool_chain(a, *chain_of(nodes[1:], a.output))
            x = a.x
        else:
            x = a.a if isinstance(a, Add) else a.x
            n, c, h, w = _four(x)
            spec_w = WindowSpec("ewise", n, c, h, w)
            chain, vals = chain_of(nodes, x)
        ps = (x, *vals)
        return GroupKernel(window_func(spec_w, chain or None), ps,
                           tuple(_act(v, NCHW) for v in ps), _act(group.output, NCHW), chain)
    if isinstance(a, Lut2):
        n, c, h, w = _four(a.a)
        chain, vals = chain_of(nodes[1:], a.output)
        ps = (a.a, a.b, a.table, *vals)
        return GroupKernel(lut2_func((n, c, h, w), chain or None), ps,
                           (_act(a.a, NCHW), _act(a.b, NCHW), PLAIN,
                            *(_act(v, NCHW) for v in vals)), _act(group.output, NCHW), chain)
    if isinstance(a, TRANSFORMER_HOST):
        raise HostFallback(transformer_reason(a))
    raise HostFallback(f"no GPU kernel for {a.op}")


def _four(v: Value) -> tuple[int, int, int, int]:
    """The 4-D (N, C, H, W) shape an element-wise kernel sees ``v`` as: its own dimensions,
    then ones (the same contiguous elements; a channel operand stays on axis 1). More than
    four dimensions: no element-wise kernel takes it."""
    shape = v.type.shape
    if not 1 <= len(shape) <= 4:
        raise HostFallback(f"{v.name}: an element-wise kernel takes 1 to 4 dimensions, got "
                           f"{list(shape)}")
    n, c, h, w = (*shape, 1, 1, 1)[:4]
    return n, c, h, w


def dense_weight(a: Conv2d) -> Value:
    """A grouped convolution's weight as a constant of the plain convolution
    (``place.block_diagonal``): the GPU runs the grouped convolution as the implicit GEMM over
    those zeros (exact; ``1 - 1/groups`` of its MACs wasted)."""
    assert a.weight.data is not None  # verify_graph: a conv's weight is a constant
    data = block_diagonal(a.weight.data, a.groups)
    return Value(f"{a.weight.name}_dense", TensorType(data.shape, "int8", a.weight.type.layout,
                                                      a.weight.type.scale), data)
