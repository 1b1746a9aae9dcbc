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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vta.compiler.accel import driver
from vta.compiler.accel.driver import Compiled, Cost, memory_cycles, packed_bytes, roofline
from vta.compiler.accel.ops import packing
from vta.compiler.ops.conv2d import Conv2dSpec, conv2d_acc
from vta.compiler.ops.epilogue import Epilogue, apply_epilogue, random_bias, saturated_fraction
from vta.compiler.ops.matmul import MatmulSpec, matmul_acc
from vta.compiler.ops.workloads import Network, Workload
from vta.config import DTYPE_BITS, HwConfig
from vta.errors import ShapeError
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
            "schedule": _schedule_dict(c.schedule),
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
    """Random user tensors (NCHW/OIHW or matrices) and their packed simulator inputs, both by
    the op's placeholder names (``data``, ``kernel``, ``bias``: the DRAM allocations and the GPU
    kernel's parameters too): data and weights uniform over int8, the bias uniform within the
    epilogue's ``bias_bound`` (the distribution ``calibrated_epilogue`` assumes)."""
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
        user: dict[str, np.ndarray] = {"data": x, "kernel": wt, "bias": bias}
    else:
        x = rng.integers(-128, 128, size=(conv.n, conv.ic, conv.h, conv.w), dtype=np.int8)
        wt = rng.integers(-128, 128, size=(conv.oc, conv.ic, conv.kh, conv.kw), dtype=np.int8)
        xf, wf = x, wt
        if c.fold is not None and c.fold.kind != "none":  # the runtime's im2col repacking
            xf, wf = packing.fold_data(x, c.fold), packing.fold_kernel(wt, c.fold)
        data = packing.pack_data(xf, g.batch, g.block_in, P.data_shape)
        kernel = packing.pack_kernel(wf, g.block_out, g.block_in, P.kernel_shape)
        user = {"data": x, "kernel": wt, "bias": bias}
    packed = {"data": packing.to_entries(data), "kernel": packing.to_entries(kernel)}
    if c.epilogue.bias:
        packed["bias"] = packing.to_entries(packing.pack_bias(bias, g.batch, g.block_out, P.ocb))
    return user, packed


def reference_acc(c: Compiled, user: Mapping[str, np.ndarray]) -> np.ndarray:
    """numpy's int32 accumulators of the user's problem: (M, N) or (N, OC, OH, OW)."""
    if isinstance(c.workload.spec, MatmulSpec):
        return matmul_acc(user["data"], user["kernel"])
    return conv2d_acc(user["data"], user["kernel"], c.user_conv)


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


def _schedule_dict(s: Any) -> dict[str, Any]:
    """A run's schedule knobs (the loop order and operand placement where not VTA's)."""
    d = {"tco": s.tco, "tci": s.tci, "th": s.th, "tw": s.tw, "vthreads": s.vthreads,
         "vt_axis": s.vt_axis}
    d.update({f: getattr(s, f) for f, v in (("order", "oc"), ("operands", "once"))
              if getattr(s, f) != v})
    return d


def _slice_programs(w: Workload, hw: HwConfig, first: Compiled) -> list[Compiled]:
    """``first`` (epilogue ``none(0)``) and the programs reading the accumulator's other
    slices, compiled with ``first``'s fold and schedule (so they address the same layouts)."""
    bits = DTYPE_BITS[hw.gemm.out_dtype]
    sch = first.schedule
    knobs = {"tco": sch.tco, "tci": sch.tci, "th": sch.th, "tw": sch.tw,
             "vthreads": sch.vthreads, "vt_axis": sch.vt_axis, "order": sch.order,
             "operands": sch.operands}
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
                raw: bool = False, pick: Callable[[Workload], Compiled | None] | None = None,
                **knobs: Any) -> NetworkResult:
    """Compile and simulate every distinct layer of ``net`` once (bit-exact against numpy;
    repeats of a shape run the same program, whose cycle count does not depend on the data).
    ``pick``: a layer's program compiled elsewhere (a tuned schedule), or None for the
    default."""
    for w, _ in net.layers:  # refuse a too-large layer before compiling any
        check_size(w, hw)
    layers = [(run_workload(w, hw, seed=seed, latency_hiding=latency_hiding, raw=raw,
                            compiled=pick(w) if pick is not None else None, **knobs), n)
              for w, n in net.layers]
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
    from vta.compiler.accel.ops import depthwise_packed as dwp
    from vta.compiler.ops import depthwise as dw

    c = dwp.compile_depthwise(spec, hw, cost=timing_cost(hw), **kwargs)
    rng = np.random.default_rng(seed)
    P, g = c.packed, hw.gemm
    x = rng.integers(-128, 128, size=(spec.n, spec.c, spec.h, spec.w), dtype=np.int8)
    w = rng.integers(-128, 128, size=(spec.c, spec.k, spec.k), dtype=np.int8)
    bias = rng.integers(-(1 << 12), 1 << 12, size=(spec.c,), dtype=np.int32)
    inputs = {"data": packing.to_entries(packing.pack_data(x, g.batch, g.block_in,
                                                           P.data_shape)),
              "kernel": packing.to_entries(dwp.pack_dw_kernel(w, P, c.layout))}
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


# ---------------------------------------------------------------------------- whole graphs


@dataclass
class StepRun:
    """One step of a graph run: a kernel simulated (``sim``) or a host fallback (``sim``
    None), when it started (cycle), and how its output compared with the interpreter."""

    index: int
    step: Any
    sim: Any
    start: int
    mismatches: int
    checked: int

    @property
    def cycles(self) -> int:
        return self.sim.stats.cycles if self.sim is not None else 0


@dataclass
class GraphRun:
    """A whole graph run on the simulated accelerator, every tensor checked bit-exact against
    the numpy interpreter of the same quantized graph (``vta.graph.interp``)."""

    compiled: Any
    steps: list[StepRun]
    outputs: dict[Any, np.ndarray]
    reference: dict[Any, np.ndarray]
    seconds_sim: float
    seconds_check: float
    seconds_reference: float

    @property
    def cycles(self) -> int:
        return sum(s.cycles for s in self.steps)

    @property
    def passed(self) -> bool:
        return all(s.mismatches == 0 for s in self.steps) and all(
            np.array_equal(self.outputs[v], self.reference[v])
            for v in self.compiled.graph.outputs)

    def summary(self) -> dict[str, Any]:
        return graph_summary(self)


def _graph_inputs(cg: Any, image: np.ndarray | dict[str, np.ndarray]) -> dict[Any, np.ndarray]:
    g = cg.graph
    if isinstance(image, dict):
        return {v: np.asarray(image[v.name]) for v in g.inputs}
    if len(g.inputs) != 1:
        raise ValueError(f"graph {g.name} has {len(g.inputs)} inputs: give them by name")
    return {g.inputs[0]: np.asarray(image)}


def run_graph(cg: Any, image: np.ndarray | dict[str, np.ndarray], *,
              trace_path: str | None = None) -> GraphRun:
    """Run the compiled graph ``cg`` (``vta.graph.compile.compile_graph``) from its input
    (an array, or arrays by input name) to its outputs: the host packs the inputs, each
    kernel's linked program is simulated in order on the DRAM the previous ones left (a
    kernel's FINISH ends it, as a runtime's kernel launch returns), host fallbacks run the
    reference semantics between unpack and pack; each stored tensor is compared with the
    interpreter's as soon as it is written (later steps may reuse its memory). ``trace_path``
    writes one timeline for the whole network."""
    from vta.graph import interp
    from vta.graph.layout import pack, unpack
    from vta.graph.link import const_name
    from vta.graph.place import Kernel

    hw = cg.hw
    host = _graph_inputs(cg, image)
    t0 = time.perf_counter()
    ref = interp.run_graph(cg.graph, host)
    t_ref = time.perf_counter() - t0
    for v in cg.graph.constants():
        host[v] = v.data  # type: ignore[assignment]
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
            bind = cg.layouts.bindings[k]
            inputs: dict[str, np.ndarray] = {}
            for a in prog.inputs:
                const = const_name(a.name)
                inputs[a.name] = dram[a.name] if const is None else st.consts[const]
            t1 = time.perf_counter()
            sim = simulate(prog, hw, inputs)
            t_sim += time.perf_counter() - t1
            out_t = bind[st.write[0]]
            dram[out_t.name] = np.asarray(sim.outputs[out_t.name])
            t1 = time.perf_counter()
            got = unpack(dram[out_t.name], out_t.value.type, out_t.layout)
            want = ref[out_t.value]
            mism = int(np.count_nonzero(got != want))
            t_check += time.perf_counter() - t1
            runs.append(StepRun(k, st, sim, start, mism, want.size))
            start += sim.stats.cycles
        else:
            out = interp.eval_node(st.group, host)
            host[st.group.output] = out
            mism = int(np.count_nonzero(out != ref[st.group.output]))
            runs.append(StepRun(k, st, None, start, mism, out.size))
    transforms(len(cg.steps))
    outputs = {v: host[v] for v in cg.graph.outputs}  # unpacked from DRAM, or the host's
    r = GraphRun(cg, runs, outputs, ref, t_sim, t_check, t_ref)
    if trace_path is not None:
        write_graph_trace(r, trace_path)
    return r


def write_graph_trace(r: GraphRun, path: str) -> None:
    """One Chrome/Perfetto timeline for the whole network: every kernel's units (fetch, load,
    compute, store) shifted to when the kernel ran, plus an ``ops`` track naming each step."""
    import json
    from pathlib import Path

    from vta.sim import SimError
    from vta.sim.trace import trace_events

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
    from vta.graph.passes.fuse import group_nodes

    return f"{st.group.output.name} [{'+'.join(n.op for n in group_nodes(st.group))}]"


def graph_summary(r: GraphRun) -> dict[str, Any]:
    """Per step and in total: cycles, utilization, DRAM bytes, bounds, placement, the check."""
    from vta.graph.passes.fuse import group_nodes
    from vta.graph.place import Kernel

    cg = r.compiled
    hw = cg.hw
    clock = hw.board.clock_mhz * 1e6
    rows = []
    bound = gemm = dram_bytes = 0.0
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
                        "compile_s": st.compile_s, "acc_hazards": stats.acc_hazards})
            bound += b
            gemm += stats.gemm_cycles
            dram_bytes += nbytes
        else:
            row.update({"placement": "cpu", "reason": st.reason, "cycles": 0,
                        "macs": sum(_macs(n) for n in group_nodes(st.group))})
        rows.append(row)
    cycles = r.cycles
    t = cycles / clock
    macs, acc_macs = cg.macs, cg.accelerated_macs
    batch = cg.graph.inputs[0].type.shape[0] if cg.graph.inputs else 1
    mem = cg.memory
    return {
        "graph": cg.graph.name, "hw": hw.name, "fusion": cg.fusion, "passed": r.passed,
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
        "tensors_checked": len(r.steps),
        "mismatched_tensors": [row["op"] for row in rows if row["mismatches"]],
        "compile_s": cg.compile_s, "sim_s": r.seconds_sim, "check_s": r.seconds_check,
        "reference_s": r.seconds_reference}


def _macs(n: Any) -> int:
    from vta.graph.ir import node_macs

    return node_macs(n)
