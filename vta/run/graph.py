"""Whole graphs on any target (``vta run resnet18``, ``vta run --onnx F``), every tensor
checked against the graph interpreter.

``compile_for(graph, target)`` compiles a quantized graph for a target: on the accelerator
``vta.graph.compile.compile_graph`` (fusion, placement, layout and memory plans, linked
programs; the timing-only simulator choosing schedules), on a GPU target one kernel per fused
group (``vta.graph.gpu_place.group_kernel``: the task-mapping implicit GEMM for convolutions,
channels-last, and for dense layers, each with the fused chain in its epilogue, window kernels
for pooling and element-wise groups). ``run_graph(compiled, inputs, target)`` runs it from its
inputs to its outputs; each stored tensor is compared with the interpreter's as soon as it is
written (later steps may reuse its memory), and the verdict is ``vta.run.check``'s. On a GPU
target each activation stays in the layout its producer wrote (NHWC between convolutions);
the host transposes it only where a consumer takes the other layout (the NCHW window kernels),
and the summary counts those transposes.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vta.config import HwConfig
from vta.errors import HostFallback, VtaError
from vta.gpu.kernels.conv2d import ohwi_weight
from vta.graph import interp
from vta.graph.compile import CompiledGraph, compile_graph
from vta.graph.dram_layout import pack, unpack
from vta.graph.gpu_place import LUT2_ANCHORS, NCHW, NHWC, OHWI, GroupKernel, group_kernel
from vta.graph.ir import Graph, Node, Value, node_macs
from vta.graph.link import const_name
from vta.graph.passes.fold_pad import fold_pads
from vta.graph.passes.fuse import fuse, group_nodes
from vta.graph.passes.split_matmul import split_matmuls
from vta.graph.place import Kernel
from vta.isa.builtins import VTA_INSTRUCTIONS, instruction_counts
from vta.run.check import Check, compare, merge
from vta.run.targets import AccelTarget, CompiledKernel, Execution, Target
from vta.sim import SimError
from vta.sim.energy import Energy, energy_of
from vta.sim.trace import trace_events

__all__ = ["GpuGraph", "GraphRun", "StepRun", "compile_for", "run_graph",
           "graph_summary", "write_graph_trace"]

#: what every graph run is checked against
AGAINST = "the graph interpreter (numpy)"


# ---------------------------------------------------------------------------- compiling


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


def compile_for(graph: Graph, target: Target, *, fusion: str = "full"
                ) -> CompiledGraph | GpuGraph:
    """``graph`` compiled for ``target`` (module docstring)."""
    if isinstance(target, AccelTarget):
        return compile_graph(graph, target.hw, fusion=fusion, cost=target.cycles,
                             memo=target.memo)
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


# ---------------------------------------------------------------------------- running


@dataclass
class StepRun:
    """One step of a graph run: a kernel executed (``execution``) or a host fallback (None),
    when it started (cycle, on the accelerator), and its output's check."""

    index: int
    step: Any
    execution: Execution | None
    start: int
    check: Check
    reason: str = ""
    #: a host step's wall-clock seconds (the interpreter's semantics, numpy on the host)
    host_s: float = 0.0

    @property
    def mismatches(self) -> int:
        return self.check.mismatches

    @property
    def checked(self) -> int:
        return self.check.compared

    @property
    def sim(self) -> Any:
        return self.execution.sim if self.execution is not None else None

    @property
    def cycles(self) -> int:
        sim = self.sim
        return sim.stats.cycles if sim is not None else 0

    @property
    def seconds(self) -> float:
        return self.execution.seconds if self.execution is not None else 0.0


@dataclass
class GraphRun:
    """A whole graph run on ``target``: every step, the outputs and the interpreter's."""

    compiled: CompiledGraph | GpuGraph
    target: Target
    steps: list[StepRun]
    outputs: dict[Value, np.ndarray]
    reference: dict[Value, np.ndarray]
    seconds_sim: float
    seconds_check: float
    seconds_reference: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def graph(self) -> Graph:
        return self.compiled.graph

    @property
    def cycles(self) -> int:
        return sum(s.cycles for s in self.steps)

    @property
    def check(self) -> Check:
        outs = [v for v in self.graph.outputs
                if not np.array_equal(self.outputs[v], self.reference[v])]
        c = merge([s.check for s in self.steps], against=AGAINST,
                  subject=f"the outputs and all {len(self.steps)} stored tensors",
                  names=[_op_name(s) for s in self.steps])
        if outs and not c.mismatched:
            c = merge([c], against=AGAINST, subject=c.subject, names=["the outputs"])
        return c

    @property
    def passed(self) -> bool:
        return self.check.passed

    def summary(self) -> dict[str, Any]:
        if isinstance(self.compiled, CompiledGraph):
            return graph_summary(self)
        return _gpu_summary(self)


def _op_name(s: StepRun) -> str:
    group = s.step.group if hasattr(s.step, "group") else s.step
    return str(group.output.name)


def _inputs(graph: Graph, image: np.ndarray | dict[str, np.ndarray]) -> dict[Value, np.ndarray]:
    if isinstance(image, dict):
        return {v: np.asarray(image[v.name]) for v in graph.inputs}
    if len(graph.inputs) != 1:
        raise VtaError(f"graph {graph.name} has {len(graph.inputs)} inputs: give them by name")
    return {graph.inputs[0]: np.asarray(image)}


def _reference(graph: Graph, image: np.ndarray | dict[str, np.ndarray]
               ) -> tuple[dict[Value, np.ndarray], dict[Value, np.ndarray], float]:
    """The host's values to start from (the inputs and the constants), the interpreter's
    value of every tensor, and how long the interpreter took."""
    host = _inputs(graph, image)
    t0 = time.perf_counter()
    ref = interp.run_graph(graph, host)
    t_ref = time.perf_counter() - t0
    for v in graph.constants():
        host[v] = v.data  # type: ignore[assignment]
    return host, ref, t_ref


def _compare(out: np.ndarray, want: np.ndarray) -> Check:
    return compare(want, out, against=AGAINST)


def run_graph(compiled: CompiledGraph | GpuGraph, image: np.ndarray | dict[str, np.ndarray], *,
              target: Target | None = None, trace_path: str | None = None) -> GraphRun:
    """Run ``compiled`` (``compile_for``) from its input (an array, or arrays by input name)
    to its outputs on ``target`` (default: the target it was compiled for). On the
    accelerator the host packs the inputs, each kernel's linked program runs in order on the
    DRAM the previous ones left (a kernel's FINISH ends it, as a runtime's kernel launch
    returns) and host fallbacks run the interpreter's semantics between unpack and pack;
    ``trace_path`` writes one timeline for the whole network."""
    if isinstance(compiled, GpuGraph):
        t_gpu = target if target is not None else compiled.target
        if isinstance(t_gpu, AccelTarget):
            raise VtaError("a graph compiled for a GPU target runs on cuda-emu or cuda")
        return _run_gpu(compiled, image, t_gpu)
    t = target if target is not None else AccelTarget(compiled.hw)
    if not isinstance(t, AccelTarget):
        raise VtaError(f"a graph compiled for the accelerator cannot run on {t.name}")
    r = _run_accel(compiled, image, t)
    if trace_path is not None:
        write_graph_trace(r, trace_path)
    return r


def _run_accel(cg: CompiledGraph, image: np.ndarray | dict[str, np.ndarray],
               target: AccelTarget) -> GraphRun:
    hw = cg.hw
    host, ref, t_ref = _reference(cg.graph, image)
    dram: dict[str, np.ndarray] = {}
    by_at: dict[int, list[Any]] = {}
    for tr in cg.layouts.transforms:
        by_at.setdefault(tr.at, []).append(tr)

    def transforms(k: int) -> None:
        for tr in by_at.get(k, []):
            t = tr.tensor
            if tr.kind == "pack":
                dram[t.name] = pack(host[t.value], t.value.type, t.layout, hw)
            else:
                host[t.value] = unpack(dram[t.name], t.value.type, t.layout)

    runs: list[StepRun] = []
    t_sim = t_check = 0.0
    start = 0
    for k, st in enumerate(cg.steps):
        transforms(k)
        if isinstance(st, Kernel):
            prog = cg.programs[k]
            assert prog is not None  # every Kernel step has its program
            bind = cg.layouts.bindings[k]
            inputs: dict[str, np.ndarray] = {}
            for a in prog.inputs:
                const = const_name(a.name)
                inputs[a.name] = dram[a.name] if const is None else st.consts[const]
            ex = target.execute(prog, inputs)
            t_sim += ex.seconds
            out_t = bind[st.write[0]]
            dram[out_t.name] = ex.outputs[out_t.name]
            t1 = time.perf_counter()
            got = unpack(dram[out_t.name], out_t.value.type, out_t.layout)
            chk = _compare(got, ref[out_t.value])
            t_check += time.perf_counter() - t1
            runs.append(StepRun(k, st, ex, start, chk))
            start += ex.stats.cycles
        else:
            t1 = time.perf_counter()
            out = interp.eval_node(st.group, host)
            host_s = time.perf_counter() - t1
            host[st.group.output] = out
            runs.append(StepRun(k, st, None, start, _compare(out, ref[st.group.output]),
                                st.reason, host_s))
    transforms(len(cg.steps))
    outputs = {v: host[v] for v in cg.graph.outputs}  # unpacked from DRAM, or the host's
    return GraphRun(cg, target, runs, outputs, ref, t_sim, t_check, t_ref)


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


def _run_gpu(gg: GpuGraph, image: np.ndarray | dict[str, np.ndarray], target: Target
             ) -> GraphRun:
    env, ref, t_ref = _reference(gg.graph, image)
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


# ---------------------------------------------------------------------------- reports


def write_graph_trace(r: GraphRun, path: str) -> None:
    """One Chrome/Perfetto timeline for the whole network: every kernel's units (fetch, load,
    compute, store) shifted to when the kernel ran, plus an ``ops`` track naming each step."""
    assert isinstance(r.compiled, CompiledGraph)
    mhz = r.compiled.hw.board.clock_mhz
    events: list[dict[str, Any]] = []
    seen_meta = False
    ops_tid = 0
    for s in r.steps:
        label = _step_label(s.step)
        events.append({"ph": "X", "name": label, "pid": 1, "tid": ops_tid, "ts": s.start / mhz,
                       "dur": max(s.cycles, 1) / mhz, "cat": "op",
                       "args": {"step": s.index, "cycles": s.cycles,
                                "placement": "vta" if s.sim is not None else "cpu"}})
        if s.sim is None:
            continue
        for ev in trace_events(s.sim):
            if ev["ph"] == "M":
                if not seen_meta:
                    events.append(ev)
                continue
            ev = dict(ev)
            ev["ts"] = ev["ts"] + s.start / mhz
            ev.setdefault("args", {})["step"] = s.index
            events.append(ev)
        seen_meta = True
    events.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": ops_tid,
                   "args": {"name": "ops"}})
    doc = {"traceEvents": events, "displayTimeUnit": "ns",
           "otherData": {"hw": r.compiled.hw.name, "cycles": r.cycles,
                         "graph": r.compiled.graph.name}}
    try:
        Path(path).write_text(json.dumps(doc))
    except OSError as e:
        raise SimError(f"cannot write trace {path}: {e.strerror or e}") from None


def _step_label(st: Any) -> str:
    return f"{st.group.output.name} [{'+'.join(n.op for n in group_nodes(st.group))}]"


def graph_summary(r: GraphRun) -> dict[str, Any]:
    """Per step and in total: cycles, utilization, DRAM bytes, bounds, placement, the check."""
    cg = r.compiled
    assert isinstance(cg, CompiledGraph)
    hw: HwConfig = cg.hw
    clock = hw.board.clock_mhz * 1e6
    rows = []
    insns: Counter[str] = Counter()
    bound = gemm = dram_bytes = 0.0
    energies: list[Energy] = []
    for s in r.steps:
        st = s.step
        ops = [n.op for n in group_nodes(st.group)]
        row: dict[str, Any] = {"step": s.index, "op": st.group.output.name, "ops": ops,
                               "fused": ops[1:], "mismatches": s.mismatches,
                               "checked": s.checked}
        if isinstance(st, Kernel):
            stats = s.sim.stats
            b = float(st.bound["machine_cycles"])
            nbytes = int(sum(stats.bytes.values()))
            row.update({"placement": "vta", "kind": st.kind, "cycles": stats.cycles,
                        "gemm_cycles": stats.gemm_cycles,
                        "utilization": stats.gemm_cycles / stats.cycles,
                        "useful_utilization": st.macs / hw.macs_per_cycle / stats.cycles,
                        "macs": st.macs, "dram_bytes": nbytes, "machine_bound_cycles": b,
                        "of_machine_bound": b / stats.cycles, "schedule": st.detail,
                        "compile_s": st.compile_s, "acc_hazards": stats.acc_hazards,
                        "instructions": instruction_counts(st.program)})
            e = energy_of(st.program, dict(stats.bytes), hw)
            energies.append(e)
            row.update({"energy_uj": e.total_uj, "energy": e.summary()})
            insns.update(row["instructions"])
            bound += b
            gemm += stats.gemm_cycles
            dram_bytes += nbytes
        else:
            row.update({"placement": "cpu", "reason": st.reason, "cycles": 0,
                        "host_ms": s.host_s * 1e3,
                        "macs": sum(node_macs(n) for n in group_nodes(st.group))})
        rows.append(row)
    cycles = r.cycles
    t = cycles / clock
    macs, acc_macs = cg.macs, cg.accelerated_macs
    batch = cg.graph.inputs[0].type.shape[0] if cg.graph.inputs else 1
    mem = cg.memory
    check = r.check
    return {
        "graph": cg.graph.name, "hw": hw.name, "fusion": cg.fusion, "passed": r.passed,
        "verdict": check.line(),
        "steps": rows, "kernels": len(cg.kernels), "host_ops": len(cg.host_ops),
        "cycles": cycles, "time_ms": t * 1e3, "frames_per_s": batch / t if t else 0.0,
        "gops": 2 * macs / t / 1e9 if t else 0.0,
        "utilization": gemm / cycles if cycles else 0.0,
        "useful_utilization": acc_macs / hw.macs_per_cycle / cycles if cycles else 0.0,
        "machine_bound_cycles": bound, "of_machine_bound": bound / cycles if cycles else 0.0,
        "dram_bytes": int(dram_bytes), "macs": macs, "accelerated_macs": acc_macs,
        "mac_share": acc_macs / macs if macs else 1.0,
        "peak_dram_bytes": mem.peak_bytes, "naive_dram_bytes": mem.naive_bytes,
        "const_dram_bytes": mem.const_bytes, "dram_image_bytes": mem.total_bytes,
        "transforms": [{"kind": tr.kind, "tensor": tr.tensor.name, "at": tr.at}
                       for tr in cg.layouts.transforms],
        "instructions": dict(sorted(insns.items())),
        "non_vta_instructions": {k: n for k, n in sorted(insns.items())
                                 if k not in {d.name for d in VTA_INSTRUCTIONS}},
        "tensors_checked": len(r.steps),
        "mismatched_tensors": list(check.mismatched),
        "energy": {**Energy.total(energies).summary(), "node_nm": hw.energy.node_nm,
                   "scale": hw.energy.scale},
        "compile_s": cg.compile_s, "sim_s": r.seconds_sim, "check_s": r.seconds_check,
        "reference_s": r.seconds_reference,
        "host_ms": sum(s.host_s for s in r.steps) * 1e3}


def _kernel_name(k: tuple[CompiledKernel, GroupKernel] | None) -> str:
    return k[0].func.name if k is not None else "host"


def _kernel_layout(k: tuple[CompiledKernel, GroupKernel] | None) -> str:
    return k[1].out_layout if k is not None else NCHW


def _gpu_summary(r: GraphRun) -> dict[str, Any]:
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
