"""Tensor Comprehensions definitions on any target (``vta run --tc``), checked against the TC
interpreter.

A TC definition (``vta.compiler.tc``) is mapped without a user schedule
(``vta.compiler.accel.tc_map`` for the accelerator, ``vta.gpu.tc_map`` for the GPU targets),
run on random inputs (or the caller's) through the target's ``execute``, and every output is
compared with the TC interpreter by ``vta.run.check.compare_all``: integers bit-exact, floats
within the dtype's tolerance (a compiled float sum adds in another order).

On the accelerator the host executes the plan's tasks in order: a GEMM task gathers its
operands into matrices (the layout transform), packs them, simulates one program run per
batch and per output plane, and scatters the result back; an ALU task gathers its operands
into the output's layout and simulates its program per plane; a CPU task runs the value's
loop nest in the IR interpreter. Cycles are the sum of every simulated run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vta.compiler.accel.driver import Compiled
from vta.compiler.accel.ops import packing
from vta.compiler.accel.tc_map import (
    AluTask,
    CpuTask,
    GemmTask,
    Leaf,
    Task,
    VtaPlan,
    alu_program,
    combine_planes,
    gather,
    gemm_program,
    out_bits,
    pack_rows,
    plan_vta,
    planes,
)
from vta.compiler.ir.interp import run_func
from vta.compiler.ir.lower import lower
from vta.compiler.ir.schedule import create_schedule
from vta.compiler.ir.tensor import Tensor
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.tc import (
    Definition,
)
from vta.compiler.tc.frontend import random_inputs
from vta.compiler.tc.interp import NP_DTYPE
from vta.compiler.tc.ranges import Concrete
from vta.config import HwConfig
from vta.gpu.tc_map import GpuProgram, MappingOptions, isolate, map_gpu
from vta.isa import Program
from vta.run.check import Check, compare_all
from vta.run.targets import AccelTarget, Target

__all__ = ["TaskReport", "VtaRun", "GpuRun", "run_tc", "run_vta", "run_gpu", "check_outputs",
           "placement_of", "gpu_placement", "PLACES", "format_tc"]

Simulate = Callable[[Program, dict[str, np.ndarray]], tuple[dict[str, np.ndarray], int]]


def _simulator(target: AccelTarget) -> Simulate:
    """A task's program run on the target: its outputs and cycles."""

    def run(program: Program, inputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], int]:
        ex = target.execute(program, inputs)
        return ex.outputs, int(ex.stats.cycles)

    return run


@dataclass
class TaskReport:
    """How one task ran: ``kind`` GEMM, ALU or CPU; the statements (labels) it computes;
    ``detail`` (shapes, planes, batches) or the fallback ``reason``; simulated cycles and
    program runs; the work (domain points) of its statements."""

    kind: str
    statements: list[str]
    detail: str
    cycles: int = 0
    runs: int = 0
    work: int = 0
    macs: int = 0

    def line(self) -> str:
        what = "; ".join(self.statements) or "(a value between statements)"
        if self.kind == "CPU":
            return f"{what}: CPU fallback: {self.detail}"
        return f"{what}: {self.kind} {self.detail}: {self.cycles:,} cycles in {self.runs} runs"


class _Checked:
    """A definition's run, judged against the TC interpreter (``check``; None: not checked)."""

    check: Check | None

    @property
    def passed(self) -> bool | None:
        return None if self.check is None else self.check.passed

    @property
    def mismatches(self) -> dict[str, int]:
        """Elements that differ, by output."""
        return {} if self.check is None else dict(self.check.counts)

    def _verdict(self) -> dict[str, Any]:
        return {"passed": self.passed, "mismatches": self.mismatches,
                "verdict": self.check.line() if self.check is not None else None}


@dataclass
class VtaRun(_Checked):
    """A definition run on the simulated accelerator."""

    name: str
    hw: str
    outputs: dict[str, np.ndarray]
    tasks: list[TaskReport]
    work: int
    work_accel: int
    seconds_compile: float
    seconds_sim: float
    #: the outputs against the TC interpreter (None: not checked)
    check: Check | None = None
    #: per statement, in order: where its computation ran (``placement_of``)
    placement: list[dict[str, Any]] = field(default_factory=list)

    @property
    def cycles(self) -> int:
        return sum(t.cycles for t in self.tasks)

    @property
    def fraction(self) -> float:
        """Work (domain points: MACs and element operations) on the accelerator / all."""
        return self.work_accel / self.work if self.work else 0.0

    @property
    def macs(self) -> int:
        return sum(t.macs for t in self.tasks)

    def summary(self) -> dict[str, Any]:
        return {"definition": self.name, "hw": self.hw, "target": "vta", **self._verdict(),
                "cycles": self.cycles,
                "accelerator_fraction": self.fraction, "work": self.work,
                "work_on_accelerator": self.work_accel, "gemm_macs": self.macs,
                "tasks": [t.__dict__ for t in self.tasks], "placement": self.placement,
                "compile_s": self.seconds_compile, "sim_s": self.seconds_sim}


def _labels(plan: VtaPlan, task: Task) -> list[str]:
    """The statements a task computes; a task that only places a statement's result into
    its tensor (a partial range, or a combination with the previous value) says so."""
    out = []
    for s in plan.func.stmts:
        if s.core in task.stages:
            out.append(s.stmt.label)
        elif s.final in task.stages:
            out.append(f"{s.stmt.label} [placing its result]")
    return out


#: where a task's kind runs, as the placement reports it
PLACES = {"GEMM": "accelerator GEMM", "ALU": "accelerator ALU", "CPU": "host"}


def placement_of(plan: VtaPlan, reports: list[TaskReport]) -> list[dict[str, Any]]:
    """Per statement: ``placement`` (``accelerator GEMM``, ``accelerator ALU`` or ``host``:
    where the task computing its domain ran; a GEMM's epilogue is the GEMM's) and, on the
    host, the ``reason`` the accelerator could not take it."""
    out = []
    for s in plan.func.stmts:
        k = next((i for i, t in enumerate(plan.tasks) if s.core in t.stages), None)
        entry: dict[str, Any] = {"statement": s.stmt.index + 1, "text": s.stmt.text}
        if k is None:  # a temporary no output reads
            entry["placement"] = "nowhere (no output depends on it)"
        else:
            entry["placement"] = PLACES[reports[k].kind]
            if reports[k].kind == "CPU":
                entry["reason"] = reports[k].detail
        out.append(entry)
    return out


def _work(plan: VtaPlan, task: Task, c: Concrete) -> int:
    cores = {s.core: s.stmt.index for s in plan.func.stmts}
    return sum(c.points(cores[t]) for t in task.stages if t in cores)


def _run_gemm(task: GemmTask, hw: HwConfig, values: dict[Tensor, np.ndarray], sim: Simulate,
              cost: Callable[[Program], int] | None, refine: int
              ) -> tuple[np.ndarray, int, int, float]:
    """Gather the operands (a convolution's input and weights in NCHW/OIHW, else the (batch, M,
    K) and (batch, N, K) matrices), simulate one program per batch and plane, scatter back."""
    n_planes = planes(task.value_range, task.cast, hw)
    t0 = time.perf_counter()
    progs = [gemm_program(task, hw, p, cost, refine) for p in range(n_planes)]
    t_compile = time.perf_counter() - t0
    nb = task.batches
    conv = task.conv
    if conv is not None:
        xs = gather(Leaf(task.x.tensor, conv.inp_index), (*task.batch, *conv.inp_axes), values)
        xs = xs.reshape(nb, *conv.inp_axes_extents())
        wa = [a for a in conv.wgt_axes if a is not None]
        ws = gather(task.y, (*task.batch, *wa), values).reshape(
            nb, *(a.extent if a is not None else 1 for a in conv.wgt_axes))
        out_order = [a for a in conv.out_axes if a is not None]
        out = np.zeros((nb, *(a.extent if a is not None else 1 for a in conv.out_axes)),
                       NP_DTYPE[task.out.dtype])
    else:
        s = task.spec
        xs = gather(task.x, (*task.batch, *task.rows, *task.red), values).reshape(nb, s.m, s.k)
        ws = gather(task.y, (*task.batch, *task.cols, *task.red), values).reshape(nb, s.n, s.k)
        out_order = [*task.rows, *task.cols]
        out = np.zeros((nb, s.m, s.n), NP_DTYPE[task.out.dtype])
    bs = None
    if task.bias is not None:
        bs = gather(task.bias, (*task.batch, *task.cols), values).reshape(nb, -1)
    cycles = runs = 0
    for b in range(nb):
        parts = []
        for c in progs:
            res, cyc = sim(c.program, _packed_inputs(c, xs[b], ws[b],
                                                     bs[b] if bs is not None else None))
            cycles += cyc
            runs += 1
            parts.append(_unpacked(c, res["res"], task))
        out[b] = combine_planes(parts, task.out.dtype, out_bits(hw))
    order = [*task.batch, *out_order]
    arr = out.reshape([a.extent for a in order])
    arr = np.transpose(arr, [order.index(a) for a in task.axes]) if order else arr
    return np.ascontiguousarray(arr), cycles, runs, t_compile


def _packed_inputs(c: Compiled, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None
                   ) -> dict[str, np.ndarray]:
    """The runtime's packing (as ``vta.run.layer.layer_inputs``): a matmul's matrices in blocks, a
    convolution's NCHW input and OIHW weights folded (``c.fold``) and packed NCHWnc."""
    g, P = c.hw.gemm, c.packed
    if isinstance(c.workload.spec, Conv2dSpec):
        xf, wf = x.astype(g.inp_dtype), w.astype(g.wgt_dtype)
        if c.fold is not None and c.fold.kind != "none":
            xf, wf = packing.fold_data(xf, c.fold), packing.fold_kernel(wf, c.fold)
        data = packing.pack_data(xf, g.batch, g.block_in, P.data_shape)
        kernel = packing.pack_kernel(wf, g.block_out, g.block_in, P.kernel_shape)
    else:
        data = packing.pack_matrix(x.astype(g.inp_dtype), g.batch, g.block_in, P.data_shape)
        kernel = packing.pack_matrix(w.astype(g.wgt_dtype), g.block_out, g.block_in,
                                     P.kernel_shape)
    out = {"data": packing.to_entries(data), "kernel": packing.to_entries(kernel)}
    if bias is not None:
        out["bias"] = packing.to_entries(packing.pack_bias(bias, g.batch, g.block_out, P.ocb))
    return out


def _unpacked(c: Compiled, res: np.ndarray, task: GemmTask) -> np.ndarray:
    P = c.packed
    r = res.reshape(P.res_shape)
    if isinstance(c.workload.spec, Conv2dSpec):
        s = c.user_conv
        return packing.unpack_result(r, s.n, s.oc, s.oh, s.ow)
    return packing.unpack_matrix(r, task.spec.m, task.spec.n)


def _run_alu(task: AluTask, hw: HwConfig, values: dict[Tensor, np.ndarray], sim: Simulate
             ) -> tuple[np.ndarray, int, int, float]:
    g = hw.gemm
    lanes = g.batch * g.block_out
    shape = task.out.shape
    n = int(np.prod(shape))
    entries = -(-n // lanes)
    n_planes = planes(task.value_range, task.cast, hw)
    t0 = time.perf_counter()
    progs = [alu_program(task, hw, p, entries) for p in range(n_planes)]
    t_compile = time.perf_counter() - t0
    leaves = [gather(lf, task.axes, values) for lf in task.leaves]
    parts = []
    cycles = 0
    for c in progs:
        assert isinstance(c.packed, tuple)
        inputs = {f"L{k}": packing.to_entries(pack_rows(a, c.packed, hw))
                  for k, a in enumerate(leaves)}
        res, cyc = sim(c.program, inputs)
        cycles += cyc
        parts.append(res["res"].reshape(-1)[:n].reshape(shape))
    return combine_planes(parts, task.out.dtype, out_bits(hw)), cycles, len(progs), t_compile


def _contiguous(a: np.ndarray) -> np.ndarray:
    """``a`` C-contiguous, a 0-rank array kept 0-rank (``ascontiguousarray`` makes it 1-D)."""
    return np.require(a, requirements="C")


def _run_cpu(task: CpuTask, values: dict[Tensor, np.ndarray]) -> np.ndarray:
    out, inputs, orig = isolate(task.out)
    func = lower(create_schedule(out), [*inputs, out], f"cpu_{task.out.name}")
    arrays = [_contiguous(values[orig[ph]]) for ph in inputs]
    arrays.append(np.zeros(out.shape, NP_DTYPE[out.dtype]))
    run_func(func, dict(zip(func.params, arrays, strict=True)))
    return arrays[-1]


def _detail(task: Task, hw: HwConfig) -> str:
    if isinstance(task, GemmTask):
        s = task.spec
        chain = " ".join(st.op + (f" {st.imm}" if st.imm is not None else " reg")
                         for st in task.steps)
        what = task.conv.spec.describe() if task.conv is not None else \
            f"matmul {s.m}x{s.n}x{s.k}"
        return (f"{task.batches} x {what}"
                + (f" + ALU {chain}" if chain else "")
                + f", {planes(task.value_range, task.cast, hw)} plane(s)")
    if isinstance(task, AluTask):
        ops = [st.op + (f" {st.imm}" if st.imm is not None else " reg") for st in task.steps]
        return (f"{len(task.leaves)} operand(s), {' '.join(ops)}, "
                f"{planes(task.value_range, task.cast, hw)} plane(s)")
    return task.reason


def run_vta(d: Definition, sizes: dict[str, int], target: AccelTarget,
            inputs: dict[str, np.ndarray] | None = None, *, seed: int = 0, refine: int = 1,
            check: bool = True) -> VtaRun:
    """Map ``d`` to the accelerator at ``sizes`` (``plan_vta``), run it on the cycle-level
    simulator (CPU tasks on the host) and, with ``check``, compare with the interpreter.
    ``refine``: GEMM tasks time that many schedule candidates on the timing-only simulator."""
    hw = target.hw
    c = d.at(sizes)
    ins = inputs if inputs is not None else random_inputs(d, c, seed)
    f = d.to_ir(sizes)
    plan = plan_vta(f, hw)
    sim = _simulator(target)
    cost = target.cycles if refine > 1 else None
    values: dict[Tensor, np.ndarray] = {t: ins[t.name] for t in f.inputs}
    reports = []
    t_compile = t_sim = 0.0
    accelerated = plan.accelerated()
    for task in plan.tasks:
        t0 = time.perf_counter()
        rep = TaskReport("CPU", _labels(plan, task), _detail(task, hw), work=_work(plan, task, c))
        if isinstance(task, GemmTask):
            arr, rep.cycles, rep.runs, tc = _run_gemm(task, hw, values, sim, cost, refine)
            rep.kind, rep.macs = "GEMM", task.macs
        elif isinstance(task, AluTask):
            arr, rep.cycles, rep.runs, tc = _run_alu(task, hw, values, sim)
            rep.kind = "ALU"
        else:
            arr, tc = _run_cpu(task, values), 0.0
        t_compile += tc
        t_sim += time.perf_counter() - t0 - tc
        values[task.out] = arr
        reports.append(rep)
    outs = {t.name: values[t] for t in f.outputs}
    work = sum(c.points(k) for k in range(len(d.cdef.stmts)))
    accel = sum(c.points(k) for k in accelerated)
    run = VtaRun(d.name, hw.name, outs, reports, work, accel, t_compile, t_sim,
                 placement=placement_of(plan, reports))
    if check:
        run.check = check_outputs(d, c, ins, outs)
    return run


def check_outputs(d: Definition, c: Concrete, inputs: dict[str, np.ndarray],
                  outputs: dict[str, np.ndarray]) -> Check:
    """Compare ``outputs`` with the TC interpreter (``vta.run.check.compare_all``: integers
    bit-exact, floats within their dtype's tolerance). An output of another dtype than the
    interpreter's differs whole."""
    ref = d.interpret(c, inputs)
    want = {name: ref[name] for name in d.cdef.outputs}
    got = {name: outputs[name] for name in d.cdef.outputs
           if outputs[name].dtype == ref[name].dtype}
    return compare_all(want, got, against="the TC interpreter")


# ---------------------------------------------------------------------------- GPU


@dataclass
class GpuRun(_Checked):
    """A definition run through the GPU mapper on ``target`` (the emulator or a GPU)."""

    name: str
    target: str
    program: GpuProgram
    sources: list[str]
    outputs: dict[str, np.ndarray]
    seconds: float
    #: the outputs against the TC interpreter (None: not checked)
    check: Check | None = None
    #: per statement, in order: the kernels that compute it (``gpu_placement``)
    placement: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {"definition": self.name, "target": self.target, **self._verdict(),
                "seconds": self.seconds, "placement": self.placement,
                "kernels": [{"name": k.name, "statements": list(k.statements),
                             "shared": list(k.shared), "tile": list(k.knobs.tile),
                             "threads": list(k.knobs.threads), "reduction_tile": k.knobs.kt}
                            for k in self.program.kernels]}


def gpu_placement(d: Definition, prog: GpuProgram) -> list[dict[str, Any]]:
    """Per statement: ``placement`` ``GPU`` and the ``kernels`` computing it (an element-wise
    temporary is substituted into each kernel that reads it, so it may be several)."""
    return [{"statement": st.index + 1, "text": st.text, "placement": "GPU",
             "kernels": [k.name for k in prog.kernels if st.index + 1 in k.statements]}
            for st in d.cdef.stmts]


def run_gpu(d: Definition, sizes: dict[str, int], target: Target,
            options: MappingOptions | None = None, inputs: dict[str, np.ndarray] | None = None,
            *, seed: int = 0, check: bool = True) -> GpuRun:
    """Map ``d`` to the GPU (``map_gpu``), compile each kernel for ``target`` (the SIMT
    emulator or a GPU), run them in order and compare with the interpreter."""
    c = d.at(sizes)
    ins = inputs if inputs is not None else random_inputs(d, c, seed)
    prog = map_gpu(d.to_ir(sizes), options)
    bufs: dict[str, np.ndarray] = {k: _contiguous(v) for k, v in ins.items()}
    for name, (shape, dt) in prog.buffers.items():
        bufs[name] = np.zeros(shape, NP_DTYPE[dt])
    for o in d.cdef.outputs:
        bufs[o] = np.zeros(c.shapes[o], NP_DTYPE[d.cdef.tensors[o].dtype])
    sources = []
    t0 = time.perf_counter()
    for k in prog.kernels:
        kernel = target.compile(k.func)
        sources.append(kernel.source)
        params = kernel.func.params
        arrays = {b.name: bufs[n] for b, n in zip(params, (*k.inputs, k.output), strict=True)}
        ex = target.execute(kernel, arrays)
        bufs[k.output] = ex.outputs[params[-1].name]
    outs = {o: bufs[o] for o in d.cdef.outputs}
    run = GpuRun(d.name, target.name, prog, sources, outs, time.perf_counter() - t0,
                 placement=gpu_placement(d, prog))
    if check:
        run.check = check_outputs(d, c, ins, outs)
    return run


def run_tc(d: Definition, sizes: dict[str, int], target: Target, *, seed: int = 0,
           inputs: dict[str, np.ndarray] | None = None, check: bool = True,
           refine: int = 3) -> VtaRun | GpuRun:
    """Run the definition ``d`` at ``sizes`` on ``target``, mapped without a schedule, and
    (with ``check``) compare every output with the TC interpreter."""
    if isinstance(target, AccelTarget):
        return run_vta(d, sizes, target, inputs, seed=seed, refine=refine, check=check)
    return run_gpu(d, sizes, target, inputs=inputs, seed=seed, check=check)


def format_tc(r: VtaRun | GpuRun, sizes: dict[str, int], clock_mhz: float | None = None,
              hw_name: str = "") -> str:
    """A TC definition's run: its tasks on the accelerator (GEMM, ALU or host, with cycles)
    or its kernels on a GPU target, and the verdict against the TC interpreter."""
    at = ", ".join(f"{k}={v}" for k, v in sizes.items())
    out: list[str] = []
    if isinstance(r, VtaRun):
        assert clock_mhz is not None
        out.append(f"{r.name} ({at}) on {hw_name}")
        out += [f"  {t.line()}" for t in r.tasks]
        out.append(f"total {r.cycles:,} cycles = {r.cycles / (clock_mhz * 1e6) * 1e3:.3f} ms at "
                   f"{clock_mhz} MHz; {r.macs:,} MACs on the GEMM core; {r.fraction:.1%} of the "
                   f"work ({r.work_accel:,} of {r.work:,} MACs and element operations) on the "
                   f"accelerator")
        out.append(f"compile {r.seconds_compile:.2f} s  simulate {r.seconds_sim:.2f} s")
        out.append("placement:")
        out += [f"  statement {p['statement']} ({p['text']}): {p['placement']}"
                for p in r.placement]
    else:
        where = "GPU" if r.target == "cuda" else "SIMT emulator"
        out.append(f"{r.name} ({at}) on the {where}: {len(r.program.kernels)} kernel(s), "
                   f"{r.seconds * 1e3:.0f} ms")
        for k in r.program.kernels:
            out.append(f"  {k.name}: statements {', '.join(map(str, k.statements))}; tile "
                       f"{list(k.knobs.tile)}, threads {list(k.knobs.threads)}, reduction "
                       f"tile {k.knobs.kt}, shared {', '.join(k.shared) or '-'}")
        out.append("placement:")
        out += [f"  statement {p['statement']} ({p['text']}): GPU, kernel "
                f"{', '.join(p['kernels']) or '-'}" for p in r.placement]
    assert r.check is not None
    out.append(r.check.line())
    return "\n".join(out)
