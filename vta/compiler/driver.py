"""Compile and run a workload on the simulated accelerator, checked bit-exact against numpy.

``run_workload`` is what ``vta run`` calls: choose the schedule (the default model, with any
knob overridden), define the op in the tensor IR (``conv2d_compute`` / ``matmul_compute``),
schedule it with the primitives and ``lower`` it (``schedules.default.lower_op``), run the VTA
pipeline, pack random inputs,
simulate (cycle-level, and optionally the reference interpreter too), unpack and compare with
the numpy reference, and report cycles, utilization, the roofline bound and traffic.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vta.compiler.ops import packing
from vta.compiler.ops.conv2d import Conv2dSpec, conv2d_compute, conv2d_reference, packed_dims
from vta.compiler.ops.epilogue import Epilogue, PackedOp
from vta.compiler.ops.fold import FOLDS, ConvFold, fold_candidates
from vta.compiler.ops.matmul import MatmulSpec, matmul_compute, matmul_reference, packed_matmul_dims
from vta.compiler.pipeline import CompileResult, compile_func
from vta.compiler.schedules.default import (
    ConvSchedule,
    ScheduleError,
    estimate,
    fit_report,
    lower_op,
    ranked_schedules,
)
from vta.compiler.workloads import Network, Workload
from vta.config import HwConfig

__all__ = ["Compiled", "NetworkResult", "RunResult", "compile_workload", "roofline", "run_network",
           "run_workload"]


@dataclass
class Compiled:
    """A compiled workload. ``conv`` is the convolution the program computes: the user's, or
    for a folded layer (``fold.kind != "none"``, ``ops.fold``) the folded one over the
    repacked input; ``fold.spec`` is always the user's."""

    workload: Workload
    hw: HwConfig
    conv: Conv2dSpec
    schedule: ConvSchedule
    epilogue: Epilogue
    result: CompileResult
    fold: ConvFold | None = None

    @property
    def program(self):  # type: ignore[no-untyped-def]
        return self.result.program

    @property
    def user_conv(self) -> Conv2dSpec:
        """The user's convolution (a matmul as its 1x1 convolution)."""
        return self.fold.spec if self.fold is not None else self.conv

    @property
    def fold_kind(self) -> str:
        return self.fold.kind if self.fold is not None else "none"


def _conv_of(w: Workload, hw: HwConfig) -> Conv2dSpec:
    return w.spec if isinstance(w.spec, Conv2dSpec) else w.spec.as_conv(hw.gemm.batch)


#: How many of the schedule model's best candidates ``compile_workload`` compiles and times
#: (timing-only simulation) to pick the fastest; 1 = the model's first choice.
REFINE = 3


def _folds(w: Workload, hw: HwConfig, fold: str | None) -> list[ConvFold]:
    """The layouts to consider: ``fold`` if given, else the plain one and, for a convolution
    with fewer channels than ``block_in``, its folds (``ops.fold.fold_candidates``)."""
    conv = _conv_of(w, hw)
    if fold is not None:
        if fold not in FOLDS:
            return [ConvFold(conv, fold)]  # raises the named error
        if fold != "none" and not isinstance(w.spec, Conv2dSpec):
            return [ConvFold(conv)]  # a matmul has no window to fold
        return [ConvFold(conv, fold)]
    return fold_candidates(conv, hw) if isinstance(w.spec, Conv2dSpec) else [ConvFold(conv)]


def compile_workload(w: Workload, hw: HwConfig, *, latency_hiding: bool = True,
                     epilogue: Epilogue | None = None, check: bool = False,
                     refine: int = REFINE, fold: str | None = None, **knobs: Any) -> Compiled:
    """Compile ``w``: the schedule is the knobs given, else the best of the model's ``refine``
    cheapest estimates measured by the timing-only simulator (the model ranks, the simulator
    decides among near ties the first-order estimate cannot separate).

    ``fold`` (``ops.fold``): ``None`` lets the model choose among the plain layout and, for a
    convolution with fewer input channels than ``block_in``, its reduction folds (their
    schedules ranked together by the estimate, the best ``refine`` timed); ``"none"``,
    ``"kw"`` or ``"khkw"`` forces one. Fully forced tile knobs (tco, tci, th, tw) describe the
    plain layout unless ``fold`` names another."""
    t0 = time.perf_counter()
    epi = epilogue or Epilogue()
    vth = knobs.pop("vthreads", None)
    if not latency_hiding:
        vth = 1
    over = {k: v for k, v in knobs.items() if v is not None}
    if {"tco", "tci", "th", "tw"} <= over.keys():
        f = _folds(w, hw, fold or "none")[0]
        sch = ConvSchedule(over["tco"], over["tci"], over["th"], over["tw"], vth or 1,
                           over.get("vt_axis", "oh"))
        fit_report(f.device, hw, sch)
        return _compile_with(w, hw, f, sch, epi, check)
    scored: list[tuple[float, int, ConvFold, ConvSchedule]] = []
    error: ScheduleError | None = None
    for f in _folds(w, hw, fold):
        dev = f.device
        try:
            ranked = ranked_schedules(dev, hw, refine, vthreads=vth, **over)
        except ScheduleError as e:
            error = error or e
            continue
        scored += [(estimate(dev, hw, s), len(scored), f, s) for s in ranked]
    if not scored:
        assert error is not None
        raise error
    scored.sort(key=lambda e: (round(e[0], 6), e[1]))
    cands = [(f, s) for _, _, f, s in scored[:max(1, refine)]]
    if len(cands) == 1:
        return _compile_with(w, hw, cands[0][0], cands[0][1], epi, check)
    from vta.sim import simulate

    best: tuple[int, Compiled] | None = None
    for f, sch in cands:
        c = _compile_with(w, hw, f, sch, epi, check)
        cycles = simulate(c.program, hw, timing_only=True).stats.cycles
        if best is None or cycles < best[0]:
            best = (cycles, c)
    assert best is not None
    c = best[1]
    c.result.seconds = time.perf_counter() - t0  # the whole choice counts as compile time
    return c


def _compile_with(w: Workload, hw: HwConfig, fold: ConvFold, sch: ConvSchedule,
                  epi: Epilogue, check: bool) -> Compiled:
    t0 = time.perf_counter()
    op = op_compute(w, hw, sch, epi, fold)
    func = lower_op(op, hw, sch)
    t_lower = time.perf_counter() - t0
    res = compile_func(func, hw, check=check)
    res.seconds += t_lower
    return Compiled(w, hw, fold.device, sch, epi, res, fold)


def op_compute(w: Workload, hw: HwConfig, sch: ConvSchedule, epi: Epilogue,
               fold: ConvFold | None = None) -> PackedOp:
    """The workload's op in the tensor IR, over the layouts packed for ``sch`` (a folded
    convolution: the folded one, ``ops.fold``)."""
    if isinstance(w.spec, MatmulSpec):
        return matmul_compute(w.spec, hw, sch, epi)
    return conv2d_compute(fold.device if fold is not None else w.spec, hw, sch, epi)


def _packed(c: Compiled):  # type: ignore[no-untyped-def]
    if isinstance(c.workload.spec, MatmulSpec):
        return packed_matmul_dims(c.workload.spec, c.hw, c.schedule)
    return packed_dims(c.conv, c.hw, c.schedule)


def _packed_bytes(conv: Conv2dSpec, hw: HwConfig, bias: bool) -> int:
    """Every packed tensor of ``conv`` moved exactly once."""
    g = hw.gemm
    icb, ocb = math.ceil(conv.ic / g.block_in), math.ceil(conv.oc / g.block_out)
    nb = math.ceil(conv.n / g.batch)
    return (nb * icb * conv.h * conv.w * hw.inp_elem_bytes
            + ocb * icb * conv.kh * conv.kw * hw.wgt_elem_bytes
            + (ocb * hw.acc_elem_bytes if bias else 0)
            + nb * ocb * conv.oh * conv.ow * hw.out_elem_bytes)


def roofline(c: Compiled) -> dict[str, float]:
    """Two bounds on the layer's cycles (unpadded ops; compulsory DRAM traffic: every packed
    tensor moved exactly once):

    * the classic roofline ``max(compute, memory)``: ``compute`` = ideal GEMM cycles
      (ops / (2 * MACs per cycle)), ``memory`` = compulsory bytes / bus bytes per cycle;
    * the machine bound ``max(compute + epilogue, memory)``, which adds the ALU work the
      compute module must do serially with its GEMMs: per accumulator entry one GEMM reset
      (``gemm.ii``) and the epilogue's ALU ops (SHR and MAX/MIN at ``alu.ii_imm``, the bias
      ADD at ``alu.ii``, times the issues per entry).

    Both describe the user's layer, whatever layout the compiler chose: ``ops`` are the true
    ``2*N*OC*OH*OW*KH*KW*IC``, so a folded layer (``ops.fold``), whose GEMMs do fewer padded
    MACs, is held to the same compute bound as the plain one; the compulsory bytes are the
    fewer of the plain and the chosen layout's (a fold can move fewer bytes than the plain
    layout's channel padding)."""
    hw, conv = c.hw, c.user_conv
    ops = c.workload.spec.ops
    compute = ops / (2 * hw.macs_per_cycle)
    g, a, epi = hw.gemm, hw.alu, c.epilogue
    ocb = math.ceil(conv.oc / g.block_out)
    nb = math.ceil(conv.n / g.batch)
    byts = min(_packed_bytes(conv, hw, epi.bias), _packed_bytes(c.conv, hw, epi.bias))
    memory = byts / hw.memory.bus_bytes
    entries = nb * ocb * conv.oh * conv.ow
    issues = math.ceil(g.batch * g.block_out / a.lanes)
    per_entry = g.ii + issues * (a.ii_imm * ((epi.shift > 0) + 2) + a.ii * epi.bias)
    epilogue = entries * per_entry
    return {"compute_cycles": compute, "memory_cycles": memory,
            "bound_cycles": max(compute, memory), "epilogue_cycles": epilogue,
            "epilogue_per_entry": per_entry, "machine_cycles": max(compute + epilogue, memory),
            "min_bytes": byts, "ops": ops}


@dataclass
class RunResult:
    compiled: Compiled
    passed: bool
    cycles: int
    seconds_compile: float
    seconds_sim: float
    stats: Any
    sim: Any
    roofline: dict[str, float]
    reference_agrees: bool | None = None
    mismatches: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        c, hw, st = self.compiled, self.compiled.hw, self.stats
        t = self.cycles / (hw.board.clock_mhz * 1e6)
        ops = self.roofline["ops"]
        units = {n: {"busy": u.busy, "token": u.token, "queue": u.queue, "memory": u.memory,
                     "idle": u.idle, "insns": u.insns} for n, u in st.units.items()}
        return {
            "workload": c.workload.name, "shape": c.workload.spec.describe(), "hw": hw.name,
            "schedule": {"tco": c.schedule.tco, "tci": c.schedule.tci, "th": c.schedule.th,
                         "tw": c.schedule.tw, "vthreads": c.schedule.vthreads,
                         "vt_axis": c.schedule.vt_axis},
            "fold": c.fold_kind, "device_shape": c.conv.describe(),
            "passed": self.passed, "mismatches": self.mismatches,
            "reference_agrees": self.reference_agrees,
            "cycles": self.cycles, "time_ms": t * 1e3, "gops": ops / t / 1e9 if t else 0.0,
            "gemm_cycles": st.gemm_cycles, "utilization": st.gemm_cycles / self.cycles,
            "useful_utilization": self.roofline["compute_cycles"] / self.cycles,
            "dram_bytes": sum(st.bytes.values()),
            "ideal_gemm_cycles": self.roofline["compute_cycles"],
            "roofline_cycles": self.roofline["bound_cycles"],
            "roofline_compute_cycles": self.roofline["compute_cycles"],
            "roofline_memory_cycles": self.roofline["memory_cycles"],
            "of_roofline": self.roofline["bound_cycles"] / self.cycles,
            "memory_bound": self.roofline["memory_cycles"] > self.roofline["compute_cycles"],
            "machine_bound_cycles": self.roofline["machine_cycles"],
            "epilogue_cycles": self.roofline["epilogue_cycles"],
            "of_machine_bound": self.roofline["machine_cycles"] / self.cycles,
            "utilization_ceiling": self.roofline["compute_cycles"]
            / self.roofline["machine_cycles"],
            "instructions": len(c.program.instructions),
            "insn_counts": dict(st.insn_counts), "acc_hazards": st.acc_hazards,
            "bytes": dict(st.bytes), "units": units,
            "compile_s": self.seconds_compile, "sim_s": self.seconds_sim,
        }


def make_inputs(c: Compiled, seed: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Random user tensors and their packed simulator inputs (by DRAM allocation name)."""
    rng = np.random.default_rng(seed)
    g, conv = c.hw.gemm, c.user_conv
    P = _packed(c)
    bias = rng.integers(-(1 << 12), 1 << 12, size=(conv.oc,), dtype=np.int32)
    if isinstance(c.workload.spec, MatmulSpec):
        m = c.workload.spec
        x = rng.integers(-128, 128, size=(m.m, m.k), dtype=np.int8)
        wt = rng.integers(-128, 128, size=(m.n, m.k), dtype=np.int8)
        data = packing.pack_matrix(x, g.batch, g.block_in, P.data_shape)
        kernel = packing.pack_matrix(wt, g.block_out, g.block_in, P.kernel_shape)
        user: dict[str, np.ndarray] = {"x": x, "w": wt, "bias": bias}
    else:
        x = rng.integers(-128, 128, size=(conv.n, conv.ic, conv.h, conv.w), dtype=np.int8)
        wt = rng.integers(-128, 128, size=(conv.oc, conv.ic, conv.kh, conv.kw), dtype=np.int8)
        xf, wf = x, wt
        if c.fold is not None and c.fold.kind != "none":  # the runtime's im2col repacking
            xf, wf = packing.fold_data(x, c.fold), packing.fold_kernel(wt, c.fold)
        data = packing.pack_data(xf, g.batch, g.block_in, P.data_shape)
        kernel = packing.pack_kernel(wf, g.block_out, g.block_in, P.kernel_shape)
        user = {"x": x, "w": wt, "bias": bias}
    packed = {"data": packing.to_entries(data), "kernel": packing.to_entries(kernel)}
    if c.epilogue.bias:
        packed["bias"] = packing.to_entries(packing.pack_bias(bias, g.batch, g.block_out, P.ocb))
    return user, packed


def expected_and_actual(c: Compiled, user: Mapping[str, np.ndarray],
                        outputs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    P = _packed(c)
    res = np.asarray(outputs["res"]).reshape(P.res_shape)
    bias = user["bias"] if c.epilogue.bias else None
    if isinstance(c.workload.spec, MatmulSpec):
        m = c.workload.spec
        return (matmul_reference(user["x"], user["w"], bias, c.epilogue),
                packing.unpack_matrix(res, m.m, m.n))
    conv = c.user_conv
    return (conv2d_reference(user["x"], user["w"], bias, conv, c.epilogue),
            packing.unpack_result(res, conv.n, conv.oc, conv.oh, conv.ow))


def run_workload(w: Workload, hw: HwConfig, *, seed: int = 0, latency_hiding: bool = True,
                 trace_path: str | None = None, check_reference: bool = False,
                 compiled: Compiled | None = None, **knobs: Any) -> RunResult:
    from vta.sim import run_reference, simulate

    t0 = time.perf_counter()
    c = compiled or compile_workload(w, hw, latency_hiding=latency_hiding, **knobs)
    t_compile = time.perf_counter() - t0
    user, packed = make_inputs(c, seed)
    t1 = time.perf_counter()
    sim = simulate(c.program, hw, packed, trace_path=trace_path)
    t_sim = time.perf_counter() - t1
    want, got = expected_and_actual(c, user, sim.outputs)
    mism = int(np.count_nonzero(want != got))
    agrees = None
    if check_reference:
        ref = run_reference(c.program, hw, packed)
        ref_out = ref.outputs if hasattr(ref, "outputs") else ref
        agrees = all(np.array_equal(np.asarray(ref_out[k]), np.asarray(v))
                     for k, v in sim.outputs.items())
    return RunResult(c, mism == 0 and agrees is not False, sim.stats.cycles, t_compile, t_sim,
                     sim.stats, sim, roofline(c), agrees, mism)


@dataclass
class NetworkResult:
    """A whole network: each distinct layer compiled and simulated once (bit-exact checked),
    its cycles counted as often as the layer occurs. Layers run one after another, so the
    network's cycles are the sum."""

    network: Network
    hw: HwConfig
    layers: list[tuple[RunResult, int]]

    @property
    def passed(self) -> bool:
        return all(r.passed for r, _ in self.layers)

    @property
    def cycles(self) -> int:
        return sum(r.cycles * n for r, n in self.layers)

    def summary(self) -> dict[str, Any]:
        hw = self.hw
        clock = hw.board.clock_mhz * 1e6
        rows = []
        gemm = ideal = machine = 0.0
        for r, n in self.layers:
            s = r.summary()
            gemm += s["gemm_cycles"] * n
            ideal += s["ideal_gemm_cycles"] * n
            machine += s["machine_bound_cycles"] * n
            rows.append({"workload": s["workload"], "shape": s["shape"], "repeats": n,
                         "passed": s["passed"], "cycles": s["cycles"],
                         "total_cycles": s["cycles"] * n,
                         "share": s["cycles"] * n / self.cycles if self.cycles else 0.0,
                         "utilization": s["utilization"],
                         "useful_utilization": s["useful_utilization"], "fold": s["fold"],
                         "of_machine_bound": s["of_machine_bound"],
                         "schedule": s["schedule"], "compile_s": s["compile_s"],
                         "sim_s": s["sim_s"]})
        t = self.cycles / clock
        return {"network": self.network.name, "hw": hw.name, "passed": self.passed,
                "layers": rows, "convolutions": sum(n for _, n in self.layers),
                "cycles": self.cycles, "time_ms": t * 1e3,
                "gops": self.network.ops / t / 1e9 if t else 0.0,
                "utilization": gemm / self.cycles if self.cycles else 0.0,
                "useful_utilization": ideal / self.cycles if self.cycles else 0.0,
                "machine_bound_cycles": machine,
                "of_machine_bound": machine / self.cycles if self.cycles else 0.0,
                "compile_s": sum(r["compile_s"] for r in rows),
                "sim_s": sum(r["sim_s"] for r in rows)}


def run_network(net: Network, hw: HwConfig, *, seed: int = 0, latency_hiding: bool = True,
                **knobs: Any) -> NetworkResult:
    """Compile and simulate every distinct layer of ``net`` once (bit-exact against numpy;
    repeats of a shape run the same program, whose cycle count does not depend on the data)."""
    layers = [(run_workload(w, hw, seed=seed, latency_hiding=latency_hiding, **knobs), n)
              for w, n in net.layers]
    return NetworkResult(net, hw, layers)
