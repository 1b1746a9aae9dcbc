"""The same graph through the GPU path: one CUDA kernel per fused group, layer by layer.

``run_graph_gpu(graph, inputs, target)`` fuses the graph (``passes.fuse``) and runs each group
as a generated kernel in the plain layouts (NCHW activations, OIHW weights reshaped to
(OC, IC*KH*KW)): a convolution or dense layer as the implicit GEMM of ``vta.gpu.ops`` (the
tensor-core schedule when M and N are at least 16, else SIMT) with the bias and the fused chain
(``place.chain_of``, the same stages the accelerator runs) in its output stage; a max-pool,
global average pool or stand-alone element-wise operator as ``vta.gpu.window``. ``cuda-emu``
runs each kernel in the SIMT emulator, ``cuda`` on the GPU (CuPy). Every group's output is
compared with the graph interpreter's; a group no kernel takes runs on the host, named.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vta.compiler.ir import stmt as S
from vta.compiler.ops.chain import Chain
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.compiler.ops.window import WindowSpec
from vta.errors import HostFallback
from vta.graph import interp
from vta.graph.ir import (
    Add,
    Clip,
    Conv2d,
    Dense,
    GlobalAvgPool,
    Graph,
    MaxPool2d,
    Node,
    Relu,
    Requantize,
    Value,
    split_shift,
)
from vta.graph.passes.fuse import fuse, group_nodes
from vta.graph.place import chain_of

__all__ = ["GpuStep", "GpuGraphRun", "run_graph_gpu", "group_kernel"]


@dataclass
class GpuStep:
    index: int
    group: Node
    kernel: str
    seconds: float
    mismatches: int
    reason: str = ""


@dataclass
class GpuGraphRun:
    graph: Graph
    target: str
    fusion: str
    steps: list[GpuStep]
    outputs: dict[Value, np.ndarray]
    reference: dict[Value, np.ndarray]
    build_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(s.mismatches == 0 for s in self.steps) and all(
            np.array_equal(self.outputs[v], self.reference[v]) for v in self.graph.outputs)

    def summary(self) -> dict[str, Any]:
        where = "SIMT emulator" if self.target == "cuda-emu" else "GPU"
        steps = [{"step": s.index, "op": s.group.output.name,
                  "ops": [n.op for n in group_nodes(s.group)], "kernel": s.kernel,
                  "ms": s.seconds * 1e3, "mismatches": s.mismatches, "reason": s.reason}
                 for s in self.steps]
        return {"graph": self.graph.name, "where": where, "fusion": self.fusion,
                "passed": self.passed, "steps": steps,
                "ms": sum(s.seconds for s in self.steps) * 1e3, "build_s": self.build_s,
                "mismatched_tensors": [r["op"] for r in steps if r["mismatches"]]}


def group_kernel(group: Node) -> tuple[S.PrimFunc, list[Value], Chain | None]:
    """The scheduled GPU kernel of ``group``, the graph values of its array parameters (in
    order, the output last excluded) and its chain; a group no kernel takes raises with the
    reason."""
    from vta.gpu import schedules as G
    from vta.gpu.window import window_func

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
        from vta.compiler.ops.chain import requant_stage

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
            chain = Chain((requant_stage(a.mult, pre, post, a.lo, a.hi), *rest.stages),
                          rest.operands)
            x = a.x
        else:
            x = a.a if isinstance(a, Add) else a.x
            shape = x.type.shape
            n, c, h, w = (*shape, 1, 1) if len(shape) == 2 else shape
            spec_w = WindowSpec("ewise", n, c, h, w)
            chain, vals = chain_of(nodes, x)
        return window_func(spec_w, chain or None), [x, *vals], chain
    raise HostFallback(f"no GPU kernel for {a.op}")


def _arrays(params: list[Value], env: dict[Value, np.ndarray], out: Value,
            func: S.PrimFunc) -> list[np.ndarray]:
    arrays = []
    for v, b in zip(params, func.params, strict=False):
        arrays.append(np.ascontiguousarray(env[v]).reshape(b.shape))
    last = func.params[-1]
    arrays.append(np.zeros(last.shape, np.dtype(out.type.dtype)))
    return arrays


def run_graph_gpu(graph: Graph, inputs: dict[str, np.ndarray], *, target: str = "cuda-emu",
                  fusion: str = "full") -> GpuGraphRun:
    """Run ``graph`` group by group on ``target`` (module docstring)."""
    from vta.gpu.lower_gpu import lower_for_gpu

    if target == "cuda":  # say so before building anything
        from vta.gpu.runtime import require_cupy

        require_cupy()
    fused = fuse(graph, fusion)
    ref = interp.run_graph(graph, inputs)
    env: dict[Value, np.ndarray] = {v: np.asarray(inputs[v.name]) for v in graph.inputs}
    for v in graph.constants():
        env[v] = v.data  # type: ignore[assignment]
    steps: list[GpuStep] = []
    build_s = 0.0
    for k, group in enumerate(fused.nodes):
        t0 = time.perf_counter()
        try:
            func, params, _ = group_kernel(group)
        except HostFallback as e:
            out = interp.eval_node(group, env)
            env[group.output] = out
            steps.append(GpuStep(k, group, "host", 0.0,
                                 int(np.count_nonzero(out != ref[group.output])), str(e)))
            continue
        low = lower_for_gpu(func)
        build_s += time.perf_counter() - t0
        arrays = _arrays(params, env, group.output, low)
        t1 = time.perf_counter()
        if target == "cuda":
            from vta.gpu.cuda import render_cuda
            from vta.gpu.runtime import run_kernel

            got = run_kernel(render_cuda(low), arrays)[-1]
        else:
            from vta.gpu.emulator import Emulator

            Emulator(low).run(*arrays)
            got = arrays[-1]
        dt = time.perf_counter() - t1
        out = np.asarray(got).reshape(group.output.type.shape)
        env[group.output] = out
        steps.append(GpuStep(k, group, low.name, dt,
                             int(np.count_nonzero(out != ref[group.output]))))
    outputs = {v: env[v] for v in graph.outputs}
    return GpuGraphRun(graph, target, fusion, steps, outputs, ref, build_s)
