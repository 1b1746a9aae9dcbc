"""Run workloads on the simulated accelerator: compile, simulate, check bit-exact against numpy.

This is what ``vta run`` calls. It sits above the compiler (``vta.compiler.driver``) and the
simulator (``vta.sim``), joining them: it hands the compiler the timing-only simulator as the
cost oracle for choosing among schedule candidates, packs random inputs (the runtime's job:
NCHW -> NCHWnc, channel padding, the fold's repacking), simulates (cycle-level, optionally the
reference interpreter too), unpacks, compares with the numpy reference and reports cycles,
utilization, both bounds, traffic and the fraction of outputs the epilogue's clip saturated.

The check is informative by construction: every layer runs with its calibrated epilogue
(``Workload.epilogue``: few outputs saturate, so comparing them compares the accumulators) and
the random inputs the calibration assumes (uniform int8 data and weights, bias within
``Epilogue.bias_bound``). ``raw=True`` (``vta run --epilogue none``) checks the int32
accumulators themselves: the out port is narrower than the accumulator (int8 of int32 on every
shipped config), so the layer is compiled once per out-dtype-wide slice of the accumulator
(epilogue ``SHR 8p`` with a wrapping narrow, ``Epilogue.none``; the same schedule each time),
and the slices, joined, must equal numpy's accumulators bit for bit. The reported cycles are
those of slice 0, the program without any epilogue.

Workloads whose packed tensors cannot fit the simulator's DRAM image (``vta.sim.dram``) are
refused, naming the shape, before anything is compiled or allocated.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vta.compiler import driver
from vta.compiler.driver import Compiled, Cost, memory_cycles, packed_bytes, roofline
from vta.compiler.ops import packing
from vta.compiler.ops.conv2d import Conv2dSpec, ShapeError, conv2d_acc
from vta.compiler.ops.epilogue import Epilogue, apply_epilogue, random_bias, saturated_fraction
from vta.compiler.ops.matmul import MatmulSpec, matmul_acc
from vta.compiler.workloads import Network, Workload
from vta.config import DTYPE_BITS, HwConfig
from vta.isa import Program
from vta.sim import run_reference, simulate
from vta.sim.dram import MAX_DRAM_BYTES

__all__ = ["NetworkResult", "RunResult", "check_size", "compile_workload", "expected_and_actual",
           "make_inputs", "reference_acc", "run_network", "run_workload", "timing_cost",
           "unpack_output"]


def timing_cost(hw: HwConfig) -> Cost:
    """The timing-only simulator as a cost oracle: a program's cycles on ``hw``."""

    def cycles(program: Program) -> int:
        return simulate(program, hw, timing_only=True).stats.cycles

    return cycles


def check_size(w: Workload, hw: HwConfig) -> None:
    """A ``ShapeError`` naming ``w``'s shape when its packed tensors (each moved once, before
    any tile padding: a lower bound) exceed the simulator's DRAM image limit."""
    conv = w.spec if isinstance(w.spec, Conv2dSpec) else w.spec.as_conv(hw.gemm.batch)
    need = packed_bytes(conv, hw, bias=True)
    if need > MAX_DRAM_BYTES:
        raise ShapeError(f"{w.name} ({w.spec.describe()}) is too large to simulate: its packed "
                         f"tensors need at least {need:,} bytes of DRAM, more than the "
                         f"simulator's {MAX_DRAM_BYTES:,}-byte image")


def compile_workload(w: Workload, hw: HwConfig, **kwargs: Any) -> Compiled:
    """``vta.compiler.driver.compile_workload`` with the timing-only simulator as its oracle
    (after ``check_size``)."""
    check_size(w, hw)
    return driver.compile_workload(w, hw, cost=timing_cost(hw), **kwargs)


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
    #: fraction of the outputs the epilogue's clip saturated (0 for a raw check)
    saturated: float = 0.0
    #: the check compared the int32 accumulators, read back in this many slices (0: no)
    raw_slices: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        c, hw, st = self.compiled, self.compiled.hw, self.stats
        t = self.cycles / (hw.board.clock_mhz * 1e6)
        ops = self.roofline["ops"]
        b = st.bytes
        moved = memory_cycles(hw, sum(v for k, v in b.items() if k != "out"), b.get("out", 0))
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
            "epilogue": {"shift": c.epilogue.shift, "bias": c.epilogue.bias,
                         "clip": [c.epilogue.clip_lo, c.epilogue.clip_hi] if c.epilogue.clip
                         else None},
            "check": "int32 accumulators" if self.raw_slices else "outputs",
            "raw_slices": self.raw_slices, "saturated": self.saturated,
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
            "moved_memory_cycles": moved,
            "memory_bound_moved": moved > self.roofline["compute_cycles"],
            "compulsory_bytes": self.roofline["min_bytes"],
            "machine_bound_cycles": self.roofline["machine_cycles"],
            "machine_gemm_cycles": self.roofline["gemm_cycles"],
            "epilogue_cycles": self.roofline["epilogue_cycles"],
            "serial_epilogue": self.roofline["serial_epilogue"],
            "of_machine_bound": self.roofline["machine_cycles"] / self.cycles,
            "utilization_ceiling": self.roofline["gemm_cycles"]
            / self.roofline["machine_cycles"],
            "instructions": len(c.program.instructions),
            "insn_counts": dict(st.insn_counts), "acc_hazards": st.acc_hazards,
            "bytes": dict(st.bytes), "units": units,
            "compile_s": self.seconds_compile, "sim_s": self.seconds_sim,
        }


def make_inputs(c: Compiled, seed: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Random user tensors and their packed simulator inputs (by DRAM allocation name): data
    and weights uniform over int8, the bias uniform within the epilogue's ``bias_bound`` (the
    distribution ``calibrated_epilogue`` assumes)."""
    rng = np.random.default_rng(seed)
    g, conv = c.hw.gemm, c.user_conv
    P = c.packed
    bias = random_bias(c.epilogue, conv.oc, rng)
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


def reference_acc(c: Compiled, user: Mapping[str, np.ndarray]) -> np.ndarray:
    """numpy's int32 accumulators of the user's problem: (M, N) or (N, OC, OH, OW)."""
    if isinstance(c.workload.spec, MatmulSpec):
        return matmul_acc(user["x"], user["w"])
    return conv2d_acc(user["x"], user["w"], c.user_conv)


def unpack_output(c: Compiled, outputs: Mapping[str, np.ndarray]) -> np.ndarray:
    """The program's result allocation in the user's layout (the reference's)."""
    res = np.asarray(outputs["res"]).reshape(c.packed.res_shape)
    if isinstance(c.workload.spec, MatmulSpec):
        m = c.workload.spec
        return packing.unpack_matrix(res, m.m, m.n)
    conv = c.user_conv
    return packing.unpack_result(res, conv.n, conv.oc, conv.oh, conv.ow)


def expected_and_actual(c: Compiled, user: Mapping[str, np.ndarray],
                        outputs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(numpy's output, the program's output), both in the user's layout."""
    bias = user["bias"] if c.epilogue.bias else None
    return apply_epilogue(reference_acc(c, user), bias, c.epilogue, 1), unpack_output(c, outputs)


def _slices(hw: HwConfig) -> int:
    """How many out-dtype-wide slices make up one accumulator."""
    g = hw.gemm
    return -(-DTYPE_BITS[g.acc_dtype] // DTYPE_BITS[g.out_dtype])


def _join_slices(parts: list[np.ndarray], bits: int, acc_bits: int) -> np.ndarray:
    """The signed ``acc_bits``-wide accumulators (int64) from their ``bits``-wide slices, low
    slice first."""
    total = np.zeros(parts[0].shape, np.int64)
    for i, part in enumerate(parts):
        total |= (part.astype(np.int64) & ((1 << bits) - 1)) << (i * bits)
    sign = 1 << (acc_bits - 1)
    return ((total & ((1 << acc_bits) - 1)) ^ sign) - sign


def _slice_programs(w: Workload, hw: HwConfig, first: Compiled) -> list[Compiled]:
    """``first`` (epilogue ``none(0)``) and the programs reading the accumulator's other
    slices, compiled with ``first``'s fold and schedule (so they address the same layouts)."""
    bits = DTYPE_BITS[hw.gemm.out_dtype]
    sch = first.schedule
    knobs = {"tco": sch.tco, "tci": sch.tci, "th": sch.th, "tw": sch.tw,
             "vthreads": sch.vthreads, "vt_axis": sch.vt_axis}
    return [first] + [compile_workload(w, hw, epilogue=Epilogue.none(i * bits),
                                       fold=first.fold_kind, **knobs)
                      for i in range(1, _slices(hw))]


def run_workload(w: Workload, hw: HwConfig, *, seed: int = 0, latency_hiding: bool = True,
                 trace_path: str | None = None, check_reference: bool = False,
                 compiled: Compiled | None = None, raw: bool = False,
                 **knobs: Any) -> RunResult:
    """Compile (unless ``compiled``), simulate and check ``w`` bit-exact against numpy: its
    outputs under the layer's calibrated epilogue, or with ``raw`` its int32 accumulators
    (module docstring). ``check_reference`` also runs the reference interpreter."""
    t0 = time.perf_counter()
    if raw:
        if compiled is not None and compiled.epilogue != Epilogue.none():
            raise ValueError("a raw check needs a program compiled with Epilogue.none()")
        knobs["epilogue"] = Epilogue.none()
    check_size(w, hw)
    c = compiled or compile_workload(w, hw, latency_hiding=latency_hiding, **knobs)
    programs = _slice_programs(w, hw, c) if raw else [c]
    t_compile = time.perf_counter() - t0
    user, packed = make_inputs(c, seed)
    t1 = time.perf_counter()
    sims = [simulate(p.program, hw, packed, trace_path=trace_path if i == 0 else None)
            for i, p in enumerate(programs)]
    t_sim = time.perf_counter() - t1
    acc = reference_acc(c, user)
    if raw:
        want = acc
        got = _join_slices([unpack_output(p, s.outputs) for p, s in zip(programs, sims,
                                                                       strict=True)],
                           DTYPE_BITS[hw.gemm.out_dtype], DTYPE_BITS[hw.gemm.acc_dtype])
        saturated = 0.0
    else:
        bias = user["bias"] if c.epilogue.bias else None
        want = apply_epilogue(acc, bias, c.epilogue, 1)
        got = unpack_output(c, sims[0].outputs)
        saturated = saturated_fraction(acc, bias, c.epilogue, 1)
    mism = int(np.count_nonzero(want != got))
    agrees = None
    if check_reference:
        agrees = all(_reference_agrees(p.program, hw, packed, s.outputs)
                     for p, s in zip(programs, sims, strict=True))
    return RunResult(c, mism == 0 and agrees is not False, sims[0].stats.cycles, t_compile,
                     t_sim, sims[0].stats, sims[0], roofline(c), agrees, mism, saturated,
                     len(programs) if raw else 0)


def _reference_agrees(program: Program, hw: HwConfig, packed: Mapping[str, np.ndarray],
                      outputs: Mapping[str, np.ndarray]) -> bool:
    ref_out = run_reference(program, hw, packed)
    return all(np.array_equal(np.asarray(ref_out[k]), np.asarray(v)) for k, v in outputs.items())


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
                         "saturated": s["saturated"],
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
                "saturated_max": max((r["saturated"] for r in rows), default=0.0),
                "raw": any(r.raw_slices for r, _ in self.layers),
                "compile_s": sum(r["compile_s"] for r in rows),
                "sim_s": sum(r["sim_s"] for r in rows)}


def run_network(net: Network, hw: HwConfig, *, seed: int = 0, latency_hiding: bool = True,
                raw: bool = False, **knobs: Any) -> NetworkResult:
    """Compile and simulate every distinct layer of ``net`` once (bit-exact against numpy;
    repeats of a shape run the same program, whose cycle count does not depend on the data)."""
    for w, _ in net.layers:  # refuse a too-large layer before compiling any
        check_size(w, hw)
    layers = [(run_workload(w, hw, seed=seed, latency_hiding=latency_hiding, raw=raw, **knobs),
               n) for w, n in net.layers]
    return NetworkResult(net, hw, layers)


@dataclass
class DepthwiseRun:
    compiled: Any
    passed: bool
    cycles: int
    stats: Any
    mismatches: int
    reference_agrees: bool | None
    saturated: float

    @property
    def gops(self) -> float:
        hw = self.compiled.hw
        return self.compiled.spec.ops / (self.cycles / (hw.board.clock_mhz * 1e6)) / 1e9


def run_depthwise(spec: Any, hw: HwConfig, *, seed: int = 0, check_reference: bool = False,
                  **kwargs: Any) -> DepthwiseRun:
    """Compile a depthwise layer (``ops.depthwise.compile_depthwise``, the timing-only
    simulator choosing among the model's candidates), simulate it on random data and compare
    with the numpy reference (and, with ``check_reference``, the reference interpreter)."""
    from vta.compiler.ops import depthwise as dw

    c = dw.compile_depthwise(spec, hw, cost=timing_cost(hw), **kwargs)
    rng = np.random.default_rng(seed)
    P, g = c.packed, hw.gemm
    x = rng.integers(-128, 128, size=(spec.n, spec.c, spec.h, spec.w), dtype=np.int8)
    w = rng.integers(-128, 128, size=(spec.c, spec.k, spec.k), dtype=np.int8)
    bias = rng.integers(-(1 << 12), 1 << 12, size=(spec.c,), dtype=np.int32)
    inputs = {"data": packing.to_entries(packing.pack_data(x, g.batch, g.block_in,
                                                           P.data_shape)),
              "kernel": packing.to_entries(dw.pack_dw_kernel(w, P, c.layout))}
    if c.epilogue.bias:
        inputs["bias"] = packing.to_entries(packing.pack_bias(bias, g.batch, g.block_out, P.cb))
    sim = simulate(c.program, hw, inputs)
    res = np.asarray(sim.outputs["res"]).reshape(P.res_shape)
    got = packing.unpack_result(res, spec.n, spec.c, spec.oh, spec.ow)
    want = dw.depthwise_reference(x, w, bias if c.epilogue.bias else None, spec, c.epilogue)
    mism = int(np.count_nonzero(want != got))
    agrees = None
    if check_reference:
        ref = run_reference(c.program, hw, inputs)
        agrees = all(np.array_equal(np.asarray(ref[k]), np.asarray(v))
                     for k, v in sim.outputs.items())
    lo, hi = c.epilogue.clip_lo, c.epilogue.clip_hi
    saturated = float(np.mean((want == lo) | (want == hi))) if want.size else 0.0
    return DepthwiseRun(c, mism == 0 and agrees is not False, sim.stats.cycles, sim.stats, mism,
                        agrees, saturated)
