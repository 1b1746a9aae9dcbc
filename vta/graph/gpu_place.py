"""A fused group of a graph as a GPU kernel: the GPU counterpart of ``place``.

``group_kernel(group)`` is the scheduled (not yet GPU-lowered) kernel of one fused group in
the plain layouts (NCHW activations, OIHW weights reshaped to (OC, IC*KH*KW)): a convolution or
dense layer as the implicit GEMM of ``vta.gpu.ops`` (the tensor-core schedule when M and N are
at least 16, else SIMT) with the bias and the fused chain (``place.chain_of``, the same stages
the accelerator runs) in its output stage; a max-pool, global average pool or stand-alone
element-wise operator as ``vta.gpu.window``. A group no kernel takes raises ``HostFallback``
with the reason (it runs on the host). ``vta.run.graph`` compiles and runs the groups.
"""

from __future__ import annotations

from vta.compiler.ir import stmt as S
from vta.compiler.ops.chain import Chain, requant_stage
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.compiler.ops.window import WindowSpec
from vta.errors import HostFallback
from vta.gpu import schedules as G
from vta.gpu.window import window_func
from vta.graph.ir import (
    Add,
    Clip,
    Conv2d,
    Dense,
    GlobalAvgPool,
    MaxPool2d,
    Node,
    Relu,
    Requantize,
    Value,
    split_shift,
)
from vta.graph.passes.fuse import group_nodes
from vta.graph.place import chain_of

__all__ = ["group_kernel"]


def group_kernel(group: Node) -> tuple[S.PrimFunc, list[Value], Chain | None]:
    """The scheduled GPU kernel of ``group``, the graph values of its array parameters (in
    order, the output last excluded) and its chain; a group no kernel takes raises with the
    reason."""
    nodes = group_nodes(group)
    a = nodes[0]
    if isinstance(a, (Conv2d, Dense)):
        if len(nodes) < 2 or not isinstance(nodes[1], Requantize):
            raise HostFallback(f"{a.op} without a requantize (an int32 result)")
        chain, vals = chain_of(nodes[1:], a.output)
        epi = Epilogue(shift=0, bias=True, clip=False)
        if isinstance(a, Conv2d):
            n, ic, h, w = a.x.type.shape
            oc, _, kh, kw = a.weight.type.shape
            cs = Conv2dSpec(n, ic, h, w, oc, kh, kw, a.stride, a.pad)
            if min(n * cs.oh * cs.ow, oc) >= 16:  # one tensor-core tile at least
                func = G.conv2d_wmma(cs, "int8", epi, chain=chain)
            else:
                func = G.conv2d_simt(cs, "int8", epi, chain=chain)
        else:
            n, k = a.x.type.shape
            ms = MatmulSpec(n, a.weight.type.shape[0], k)
            if min(ms.m, ms.n) >= 16:
                func = G.matmul_wmma(ms, "int8", epi, chain=chain)
            else:
                func = G.matmul_simt(ms, "int8", epi, chain=chain)
        return func, [a.x, a.weight, a.bias, *vals], chain
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
            pre, post = split_shift(a.shift)
            rest, vals = chain_of(nodes[1:], a.output)
            rq = requant_stage(a.mult, pre, post, a.lo, a.hi, offset=-h * w * a.zero_x,
                               zero=a.zero)
            chain = Chain((rq, *rest.stages), rest.operands)
            x = a.x
        else:
            x = a.a if isinstance(a, Add) else a.x
            shape = x.type.shape
            n, c, h, w = (*shape, 1, 1) if len(shape) == 2 else shape
            spec_w = WindowSpec("ewise", n, c, h, w)
            chain, vals = chain_of(nodes, x)
        return window_func(spec_w, chain or None), [x, *vals], chain
    raise HostFallback(f"no GPU kernel for {a.op}")
