"""Whole graphs on a GPU target (``cuda-emu``, ``cuda``): one kernel per fused group, run from
the inputs to the outputs, each tensor checked against the graph interpreter.

Apart from ``vta.run.graph`` (which loads this module when a GPU target compiles or runs a
graph) so that a run on the accelerator never loads the GPU back end. ``compile_gpu`` builds
one kernel per fused group (``vta.graph.gpu_place.group_kernel``: the task-mapping implicit
GEMM for convolutions, channels-last, and for dense layers, each with the fused chain in its
epilogue, window kernels for pooling and element-wise groups), or names why the host runs it;
``run_gpu`` keeps each activation in the layout its producer wrote (NHWC between
convolutions), the host transposing it only where a consumer takes the other layout (the NCHW
window kernels), and the summary counts those transposes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from vta.errors import HostFallback
from vta.gpu.kernels.conv2d import ohwi_weight
from vta.graph import interp
from vta.graph.gpu_place import LUT2_ANCHORS, NCHW, NHWC, OHWI, GroupKernel, group_kernel
from vta.graph.ir import Graph, Node, Value
from vta.graph.passes.fold_pad import fold_pads
from vta.graph.passes.fuse import fuse, group_nodes
from vta.graph.passes.split_matmul import split_matmuls
from vta.run.gpu_targets import CompiledKernel
from vta.run.graph import GraphRun, Reference, StepRun, _compare, _op_name
from vta.run.targets import Target

__all__ = ["GpuGraph", "compile_gpu", "run_gpu", "gpu_summary"]


@dataclass
class GpuGraph:
    """A graph compiled for a GPU target: per fused group its kernel and the graph values of
    its parameters (the output last excluded), or the reason it runs on the host."""

    graph: Graph
    #: the GPU target it was compiled for (and runs on)
    target: Target
    fusion: str
    groups: list[Node]
    kernels: list[tuple[CompiledKernel, GroupKernel] | None]
    reasons: list[str]
    compile_s: float


def compile_gpu(graph: Graph, target: Target, fusion: str = "full") -> GpuGraph:
    """``graph`` compiled for the GPU ``target`` (module docstring)."""
    t0 = time.perf_counter()
    graph = fold_pads(graph)  # zero-point pads: the convolutions' own (per-position bias)
    graph = split_matmuls(graph)  # products of two activations: dense layers, per head
    fused = fuse(graph, fusion, lut2_after=LUT2_ANCHORS)  # tables in the GPU's epilogues
    kernels: list[tuple[CompiledKernel, GroupKernel] | None] = []
    reasons = []
    for group in fused.nodes:
        try:
            gk = group_kernel(group)
        except HostFallback as e:
            kernels.append(None)
            reasons.append(str(e))
            continue
        kernels.append((target.compile(gk.func), gk))
        reasons.append("")
    return GpuGraph(graph, target, fusion, list(fused.nodes), kernels, reasons,
                    time.perf_counter() - t0)


class _Activations:
    """The GPU run's tensors, each in the layout it was written in (``NCHW`` or ``NHWC`` for
    4-D activations), converted on the host only when a consumer takes the other layout
    (each conversion kept, counted in ``transposes``); constants in their graph layout."""

    def __init__(self, env: dict[Value, np.ndarray]) -> None:
        self.stored: dict[Value, tuple[np.ndarray, str]] = {v: (a, NCHW) for v, a in env.items()}
        self.copies: dict[tuple[Value, str], np.ndarray] = {}
        self.transposes = 0

    def put(self, v: Value, a: np.ndarray, layout: str) -> None:
        self.stored[v] = (a, layout)

    def get(self, v: Value, layout: str) -> np.ndarray:
        """``v`` in ``layout`` (``gpu_place``'s layout names)."""
        if v not in self.stored and v.data is not None:  # a kernel's own constant (a
            self.stored[v] = (v.data, NCHW)  # grouped conv's dense weight, gpu_place)
        a, have = self.stored[v]
        if layout == OHWI:
            return _const_copy(self.copies, v, a)
        if a.ndim != 4 or layout not in (NCHW, NHWC) or layout == have:
            return a
        key = (v, layout)
        if key not in self.copies:
            self.copies[key] = np.ascontiguousarray(
                a.transpose(0, 2, 3, 1) if layout == NHWC else a.transpose(0, 3, 1, 2))
            self.transposes += 1
        return self.copies[key]

    def nchw(self, v: Value) -> np.ndarray:
        """``v`` channels-first (the interpreter's layout, for checks and outputs), without
        counting it as a transpose of the run."""
        a, have = self.stored[v]
        return a if have != NHWC else np.ascontiguousarray(a.transpose(0, 3, 1, 2))


class _Nchw(Mapping[Value, np.ndarray]):
    """The run's tensors channels-first, converted as they are read (a host fallback's
    operands)."""

    def __init__(self, acts: _Activations) -> None:
        self.acts = acts

    def __getitem__(self, v: Value) -> np.ndarray:
        return self.acts.nchw(v)

    def __iter__(self) -> Iterator[Value]:
        return iter(self.acts.stored)

    def __len__(self) -> int:
        return len(self.acts.stored)


def _const_copy(copies: dict[tuple[Value, str], np.ndarray], v: Value, a: np.ndarray
                ) -> np.ndarray:
    """An OIHW conv weight as (OC, KH*KW*IC), made once per constant (a runtime packs
    weights once, as the accelerator's does)."""
    key = (v, OHWI)
    if key not in copies:
        copies[key] = ohwi_weight(a)
    return copies[key]


def run_gpu(gg: GpuGraph, image: np.ndarray | dict[str, np.ndarray], target: Target
             ) -> GraphRun:
    reference = Reference(gg.graph, image)
    reference.compute()
    env, ref, t_ref = reference.host, reference.values, reference.seconds
    acts = _Activations(env)
    runs: list[StepRun] = []
    t_run = 0.0
    for k, (group, built) in enumerate(zip(gg.groups, gg.kernels, strict=True)):
        if built is None:
            t1 = time.perf_counter()
            out = interp.eval_node(group, _Nchw(acts))
            host_s = time.perf_counter() - t1
            acts.put(group.output, out, NCHW)
            runs.append(StepRun(k, group, None, 0, _compare(out, ref[group.output]),
                                gg.reasons[k], host_s))
            continue
        kernel, gk = built
        arrays = {b.name: acts.get(v, lay).reshape(b.shape)
                  for v, lay, b in zip(gk.params, gk.layouts, kernel.func.params, strict=False)}
        ex = target.execute(kernel, arrays)
        t_run += ex.seconds
        out = ex.outputs[kernel.func.params[-1].name]
        shape = group.output.type.shape
        if gk.out_layout == NHWC:
            out = out.reshape(shape[0], shape[2], shape[3], shape[1])
        else:
            out = out.reshape(shape)
        acts.put(group.output, out, gk.out_layout)
        runs.append(StepRun(k, group, ex, 0, _compare(acts.nchw(group.output),
                                                      ref[group.output])))
    outputs = {v: acts.nchw(v) for v in gg.graph.outputs}
    return GraphRun(gg, target, runs, outputs, ref, t_run, 0.0, t_ref,
                    extra={"host_transposes": acts.transposes})


def _kernel_name(k: tuple[CompiledKernel, GroupKernel] | None) -> str:
    return k[0].func.name if k is not None else "host"


def _kernel_layout(k: tuple[CompiledKernel, GroupKernel] | None) -> str:
    return k[1].out_layout if k is not None else NCHW


def gpu_summary(r: GraphRun) -> dict[str, Any]:
    gg = r.compiled
    assert isinstance(gg, GpuGraph)
    steps = [{"step": s.index, "op": _op_name(s),
              "ops": [n.op for n in group_nodes(s.step)],
              "kernel": _kernel_name(gg.kernels[s.index]),
              "layout": _kernel_layout(gg.kernels[s.index]),
              "ms": (s.seconds + s.host_s) * 1e3, "mismatches": s.mismatches,
              "reason": s.reason}
             for s in r.steps]
    check = r.check
    return {"graph": gg.graph.name, "where": r.target.where, "target": r.target.name,
            "fusion": gg.fusion, "passed": r.passed, "verdict": check.line(), "steps": steps,
            "ms": sum(s.seconds for s in r.steps) * 1e3, "build_s": gg.compile_s,
            "host_transposes": r.extra.get("host_transposes", 0),
            "mismatched_tensors": list(check.mismatched)}
