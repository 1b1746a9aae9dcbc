"""One layer (a named workload: a convolution, matmul or dense) on any target, checked
against numpy.

``run_layer(w, target)`` is what ``vta run LAYER`` calls for every target: it draws the
layer's inputs in the user's layouts (``layer_inputs``: NCHW data and OIHW weights, or
row-major matrices; the same arrays for every target at one seed), computes numpy's answer
once (``layer_reference``), has the target compile the layer with its default schedule
(``compile_layer``), lays the inputs out as the program or kernel stores them
(``LayerProgram.pack``), executes, reads the output back into the user's layout and decides
PASS/FAIL with ``vta.run.check.compare``.

The check is informative by construction: every layer runs with its calibrated epilogue
(``Workload.epilogue``: few outputs saturate, so comparing them compares the accumulators) and
the random inputs the calibration assumes (uniform int8 data and weights, bias within
``Epilogue.bias_bound``). ``raw=True`` (``vta run --epilogue none``) checks the int32
accumulators themselves. A GPU kernel writes them directly. The accelerator's out port is
narrower than its accumulator (int8 of int32 on every shipped config), so there the layer is
compiled once per out-dtype-wide slice of the accumulator (epilogue ``SHR 8p`` with a wrapping
narrow, ``Epilogue.none``; the same schedule each time), and the slices, joined, must equal
numpy's accumulators bit for bit; the reported cycles are those of slice 0, the program
without any epilogue.

Workloads whose packed tensors cannot fit the simulator's DRAM image (``vta.sim.dram``), or
whose tensors exceed the GPU targets' host limit, are refused, naming the shape, before
anything is compiled or allocated.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from vta.compiler.accel.driver import Compiled, memory_cycles, roofline
from vta.compiler.accel.ops import packing
from vta.compiler.accel.ops.depthwise_packed import (
    CompiledDepthwise,
    compile_depthwise,
    pack_dw_kernel,
)
from vta.compiler.ops.conv2d import Conv2dSpec, conv2d_acc
from vta.compiler.ops.depthwise import DepthwiseSpec, depthwise_acc
from vta.compiler.ops.epilogue import Epilogue, apply_epilogue, random_bias, saturated_fraction
from vta.compiler.ops.matmul import MatmulSpec, matmul_acc
from vta.compiler.ops.workloads import Workload
from vta.config import DTYPE_BITS, HwConfig
from vta.errors import VtaError
from vta.gpu.dialect import KERNEL
from vta.gpu.kernels.conv2d import ohwi_weight
from vta.run.check import Check, compare
from vta.run.gpu_workloads import GpuWorkload, build_func, gpu_workload
from vta.run.targets import AccelTarget, CompiledKernel, Execution, GpuLaunch, Target
from vta.sim.energy import energy_of

__all__ = ["LayerProgram", "AccelLayer", "GpuLayer", "LayerRun", "layer_inputs",
           "layer_reference", "compile_layer", "run_layer", "schedule_dict", "DepthwiseRun",
           "run_depthwise"]


class LayerProgram(Protocol):
    """A layer compiled for a target: the ``artifact`` the target executes, and the layer's
    user-layout tensors to and from the artifact's stored layouts."""

    @property
    def artifact(self) -> Any: ...

    def pack(self, user: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]: ...

    def unpack(self, outputs: Mapping[str, np.ndarray]) -> np.ndarray: ...


# ------------------------------------------------------------------- inputs and reference


def _oc(spec: Conv2dSpec | MatmulSpec) -> int:
    return spec.oc if isinstance(spec, Conv2dSpec) else spec.n


#: the user arrays' names before they became the op's placeholder names: accepted, and read
#: back, for one release with a ``DeprecationWarning``
RENAMED_INPUTS = {"x": "data", "w": "kernel"}


def _renamed_warning(old: str) -> None:
    warnings.warn(f"the layer input {old!r} is now {RENAMED_INPUTS[old]!r} (the op's placeholder "
                  f"name); {old!r} is accepted for one release", DeprecationWarning, stacklevel=3)


class LayerInputs(dict[str, np.ndarray]):
    """The user arrays of a layer by their names; ``inputs["x"]`` and ``inputs["w"]`` still
    read ``data`` and ``kernel`` for one release (``RENAMED_INPUTS``), with a warning."""

    def __missing__(self, key: str) -> np.ndarray:
        new = RENAMED_INPUTS.get(key)
        if new is None or new not in self:
            raise KeyError(key)
        _renamed_warning(key)
        return self[new]


def user_inputs(user: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    """``user`` with arrays given by their old names (``x``, ``w``) under the new ones, with a
    ``DeprecationWarning`` (one release); as it is otherwise."""
    old = [k for k in RENAMED_INPUTS if k in user and RENAMED_INPUTS[k] not in user]
    if not old:
        return user
    for k in old:
        _renamed_warning(k)
    return {RENAMED_INPUTS.get(k, k) if k in old else k: v for k, v in user.items()}


def layer_inputs(spec: Conv2dSpec | MatmulSpec, epi: Epilogue | None, seed: int,
                 dtype: str = "int8") -> LayerInputs:
    """Random user tensors by the op's placeholder names (``data``, ``kernel``, ``bias``: the
    DRAM allocations and the GPU kernel's parameters too): int8 data and weights uniform over
    their range and the bias uniform within the epilogue's ``bias_bound`` (the distribution
    ``calibrated_epilogue`` assumes); float data and weights standard normal."""
    rng = np.random.default_rng(seed)
    bias = random_bias(epi or Epilogue(), _oc(spec), rng)
    shapes: list[tuple[int, ...]]
    if isinstance(spec, MatmulSpec):
        shapes = [(spec.m, spec.k), (spec.n, spec.k)]
    else:
        shapes = [(spec.n, spec.ic, spec.h, spec.w), (spec.oc, spec.ic, spec.kh, spec.kw)]
    if dtype == "int8":
        x, wt = (rng.integers(-128, 128, size=s, dtype=np.int8) for s in shapes)
    else:
        x, wt = (rng.standard_normal(s).astype(np.dtype(dtype)) for s in shapes)
    out = LayerInputs({"data": x, "kernel": wt})
    if epi is not None and epi.bias:
        out["bias"] = bias
    return out


def _acc(spec: Conv2dSpec | MatmulSpec, user: Mapping[str, np.ndarray]) -> np.ndarray:
    if isinstance(spec, MatmulSpec):
        return matmul_acc(user["data"], user["kernel"])
    return conv2d_acc(user["data"], user["kernel"], spec)


def layer_reference(spec: Conv2dSpec | MatmulSpec, user: Mapping[str, np.ndarray],
                    epi: Epilogue | None) -> tuple[np.ndarray, float | None]:
    """numpy's answer in the user's layout ((M, N) or (N, OC, OH, OW)) and the fraction of it
    the epilogue's clip saturated (None without an epilogue: the int32 accumulators). Floats:
    the float32 product of a matmul (a float convolution has no reference here)."""
    user = user_inputs(user)
    x = user["data"]
    if x.dtype.kind == "f":
        if isinstance(spec, Conv2dSpec):
            raise VtaError("a float conv2d has no numpy reference here (int8 only)")
        return x.astype(np.float32) @ user["kernel"].astype(np.float32).T, None
    acc = _acc(spec, user)
    if epi is None:
        return acc, None
    bias = user.get("bias")
    return apply_epilogue(acc, bias, epi, 1), saturated_fraction(acc, bias, epi, 1)


# ------------------------------------------------------------------- the accelerator


@dataclass(frozen=True)
class AccelLayer:
    """A layer's program on the accelerator (``driver.Compiled``) with the runtime's packing:
    NCHW -> NCHWnc (channel padding, the fold's repacking), matrices into blocks."""

    compiled: Compiled

    @property
    def artifact(self) -> Compiled:
        return self.compiled

    def pack(self, user: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        c = self.compiled
        g, P = c.hw.gemm, c.packed
        user = user_inputs(user)
        x, wt = user["data"], user["kernel"]
        if isinstance(c.workload.spec, MatmulSpec):
            data = packing.pack_matrix(x, g.batch, g.block_in, P.data_shape)
            kernel = packing.pack_matrix(wt, g.block_out, g.block_in, P.kernel_shape)
        else:
            if c.fold is not None and c.fold.kind != "none":  # the runtime's im2col repacking
                x, wt = packing.fold_data(x, c.fold), packing.fold_kernel(wt, c.fold)
            data = packing.pack_data(x, g.batch, g.block_in, P.data_shape)
            kernel = packing.pack_kernel(wt, g.block_out, g.block_in, P.kernel_shape)
        out = {"data": packing.to_entries(data), "kernel": packing.to_entries(kernel)}
        if c.epilogue.bias:
            out["bias"] = packing.to_entries(packing.pack_bias(user["bias"], g.batch,
                                                               g.block_out, P.ocb))
        return out

    def unpack(self, outputs: Mapping[str, np.ndarray]) -> np.ndarray:
        c = self.compiled
        res = np.asarray(outputs["res"]).reshape(c.packed.res_shape)
        if isinstance(c.workload.spec, MatmulSpec):
            m = c.workload.spec
            return packing.unpack_matrix(res, m.m, m.n)
        conv = c.user_conv
        return packing.unpack_result(res, conv.n, conv.oc, conv.oh, conv.ow)


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


def schedule_dict(s: Any) -> dict[str, Any]:
    """A run's schedule knobs (the loop order and operand placement where not VTA's)."""
    d = {"tco": s.tco, "tci": s.tci, "th": s.th, "tw": s.tw, "vthreads": s.vthreads,
         "vt_axis": s.vt_axis}
    d.update({f: getattr(s, f) for f, v in (("order", "oc"), ("operands", "once"))
              if getattr(s, f) != v})
    return d


def _accel_slices(t: AccelTarget, w: Workload, first: Compiled) -> list[Compiled]:
    """``first`` (epilogue ``none(0)``) and the programs reading the accumulator's other
    slices, compiled with ``first``'s fold and schedule (so they address the same layouts)."""
    bits = DTYPE_BITS[t.hw.gemm.out_dtype]
    sch = first.schedule
    knobs = {"tco": sch.tco, "tci": sch.tci, "th": sch.th, "tw": sch.tw,
             "vthreads": sch.vthreads, "vt_axis": sch.vt_axis, "order": sch.order,
             "operands": sch.operands}
    return [first] + [t.compile_layer(w, epilogue=Epilogue.none(i * bits), fold=first.fold_kind,
                                      **knobs)
                      for i in range(1, _slices(t.hw))]


# ------------------------------------------------------------------- the GPU targets


@dataclass(frozen=True)
class GpuLayer:
    """A layer's kernel on a GPU target. The task-mapping conv2d takes its weight OHWI,
    (OC, KH*KW*IC); the others OIHW flattened, (OC, IC*KH*KW)."""

    workload: GpuWorkload
    kernel: CompiledKernel

    @property
    def artifact(self) -> CompiledKernel:
        return self.kernel

    def pack(self, user: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        params = self.kernel.func.params
        user = user_inputs(user)
        wt = user["kernel"]
        if self.workload.is_conv and self.kernel.func.attr(KERNEL) == "task-mapping":
            wt = ohwi_weight(wt)
        arrays = [user["data"], wt] + ([user["bias"]] if "bias" in user else [])
        return {b.name: np.ascontiguousarray(a).reshape(b.shape)
                for b, a in zip(params[:-1], arrays, strict=True)}

    def unpack(self, outputs: Mapping[str, np.ndarray]) -> np.ndarray:
        out = self.kernel.func.params[-1]
        s = self.workload.spec
        shape = (s.m, s.n) if isinstance(s, MatmulSpec) else (s.n, s.oc, s.oh, s.ow)
        return np.asarray(outputs[out.name]).reshape(shape)


# ------------------------------------------------------------------- on any target


def compile_layer(w: Workload, target: Target, *, raw: bool = False,
                  compiled: Compiled | None = None, latency_hiding: bool = True,
                  gpu_schedule: str = "auto", dtype: str = "int8", **knobs: Any
                  ) -> list[LayerProgram]:
    """``w`` compiled for ``target``: one program (the accelerator's raw check: one per
    accumulator slice, the first without any epilogue). ``compiled``: the accelerator's
    program compiled elsewhere (a tuned schedule); ``knobs``: the accelerator's schedule knobs
    (``tco``, ``vthreads``, ...); ``gpu_schedule``/``dtype``: the GPU kernel's."""
    if isinstance(target, AccelTarget):
        if raw:
            if compiled is not None and compiled.epilogue != Epilogue.none():
                raise VtaError("a raw check needs a program compiled with Epilogue.none()")
            knobs["epilogue"] = Epilogue.none()
        c = compiled or target.compile_layer(w, latency_hiding=latency_hiding, **knobs)
        return [AccelLayer(p) for p in (_accel_slices(target, w, c) if raw else [c])]
    gw = gpu_workload(w, dtype, raw)
    return [GpuLayer(gw, target.compile(build_func(gw, gpu_schedule)))]


class _Judged:
    """What a run's ``check`` (and, when asked, its target's own oracle) says of it."""

    check: Check
    reference_agrees: bool | None

    @property
    def passed(self) -> bool:
        return self.check.passed and self.reference_agrees is not False

    @property
    def mismatches(self) -> int:
        return self.check.mismatches

    @property
    def saturated(self) -> float:
        return self.check.saturated or 0.0


@dataclass
class LayerRun(_Judged):
    """A layer run on a target: its programs (one, or the accelerator's accumulator slices),
    their executions, the check against numpy, and the times."""

    workload: Workload
    target: Target
    programs: list[LayerProgram]
    executions: list[Execution]
    check: Check
    seconds_compile: float
    seconds_sim: float
    #: the target's functional oracle agreed with the execution (None: not run)
    reference_agrees: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def raw_slices(self) -> int:
        """How many slices the int32 accumulators were read back in (0: not a raw check)."""
        raw = self.check.unit == "int32 accumulators"
        return len(self.programs) if raw else 0

    @property
    def stats(self) -> Any:
        return self.executions[0].stats

    @property
    def sim(self) -> Any:
        return self.executions[0].sim

    @property
    def compiled(self) -> Compiled:
        """The accelerator's program (``driver.Compiled``; slice 0 of a raw check)."""
        p = self.programs[0]
        if not isinstance(p, AccelLayer):
            raise VtaError(f"a {self.target.name} layer run has no accelerator program")
        return p.compiled

    @property
    def kernel(self) -> CompiledKernel:
        p = self.programs[0]
        if not isinstance(p, GpuLayer):
            raise VtaError("an accelerator layer run has no GPU kernel")
        return p.kernel

    @property
    def cycles(self) -> int:
        """Simulated cycles (the accelerator; slice 0 of a raw check)."""
        return int(self.stats.cycles)

    @property
    def roofline(self) -> dict[str, float]:
        return roofline(self.compiled)

    def summary(self) -> dict[str, Any]:
        """Everything the run measured, as JSON-ready values."""
        if isinstance(self.target, AccelTarget):
            return _accel_summary(self)
        return _gpu_summary(self)


def _accel_summary(r: LayerRun) -> dict[str, Any]:
    c, st = r.compiled, r.stats
    hw = c.hw
    rl = r.roofline
    t = r.cycles / (hw.board.clock_mhz * 1e6)
    ops = rl["ops"]
    b = st.bytes
    moved = memory_cycles(hw, sum(v for k, v in b.items() if k != "out"), b.get("out", 0))
    units = {n: {"busy": u.busy, "token": u.token, "queue": u.queue, "memory": u.memory,
                 "idle": u.idle, "insns": u.insns} for n, u in st.units.items()}
    return {
        "workload": c.workload.name, "shape": c.workload.spec.describe(), "hw": hw.name,
        "target": r.target.name, "schedule": schedule_dict(c.schedule),
        "fold": c.fold_kind, "device_shape": c.conv.describe(),
        "passed": r.passed, "mismatches": r.mismatches,
        "reference_agrees": r.reference_agrees,
        "epilogue": {"shift": c.epilogue.shift, "bias": c.epilogue.bias,
                     "clip": [c.epilogue.clip_lo, c.epilogue.clip_hi] if c.epilogue.clip
                     else None},
        "check": "int32 accumulators" if r.raw_slices else "outputs",
        "verdict": r.check.line(),
        "raw_slices": r.raw_slices, "saturated": r.saturated,
        "cycles": r.cycles, "time_ms": t * 1e3, "gops": ops / t / 1e9 if t else 0.0,
        "gemm_cycles": st.gemm_cycles, "utilization": st.gemm_cycles / r.cycles,
        "useful_utilization": rl["compute_cycles"] / r.cycles,
        "dram_bytes": sum(st.bytes.values()),
        "ideal_gemm_cycles": rl["compute_cycles"],
        "roofline_cycles": rl["bound_cycles"],
        "roofline_compute_cycles": rl["compute_cycles"],
        "roofline_memory_cycles": rl["memory_cycles"],
        "of_roofline": rl["bound_cycles"] / r.cycles,
        "memory_bound": rl["memory_cycles"] > rl["compute_cycles"],
        "moved_memory_cycles": moved,
        "memory_bound_moved": moved > rl["compute_cycles"],
        "compulsory_bytes": rl["min_bytes"],
        "machine_bound_cycles": rl["machine_cycles"],
        "machine_gemm_cycles": rl["gemm_cycles"],
        "epilogue_cycles": rl["epilogue_cycles"],
        "serial_epilogue": rl["serial_epilogue"],
        "of_machine_bound": rl["machine_cycles"] / r.cycles,
        "utilization_ceiling": rl["gemm_cycles"] / rl["machine_cycles"],
        "instructions": len(c.program.instructions),
        "insn_counts": dict(st.insn_counts), "acc_hazards": st.acc_hazards,
        "bytes": dict(st.bytes), "units": units,
        "energy": {**energy_of(c.program, dict(st.bytes), hw).summary(),
                   "node_nm": hw.energy.node_nm, "scale": hw.energy.scale},
        "compile_s": r.seconds_compile, "sim_s": r.seconds_sim,
    }


def _gpu_summary(r: LayerRun) -> dict[str, Any]:
    p = r.programs[0]
    assert isinstance(p, GpuLayer)
    launch: GpuLaunch = r.stats
    s = p.workload.spec
    return {"workload": p.workload.name, "shape": s.describe(), "target": r.target.name,
            "dtype": p.workload.dtype, "kernel": p.kernel.cuda.name,
            "grid": list(launch.grid), "block": list(launch.block),
            "shared_bytes": launch.shared_bytes, "gop": s.ops / 1e9,
            "passed": r.passed, "mismatches": r.mismatches, "verdict": r.check.line(),
            "reference_agrees": r.reference_agrees,
            "check": "int32 accumulators" if p.workload.epi is None and
            p.workload.dtype == "int8" else "outputs",
            "saturated": r.check.saturated, "compile_s": r.seconds_compile,
            "run_s": r.seconds_sim}


def _agrees(target: Target, p: LayerProgram, packed: Mapping[str, np.ndarray],
            ex: Execution) -> bool:
    ref = target.reference(p.artifact, packed)
    return all(np.array_equal(np.asarray(ref[k]), np.asarray(v)) for k, v in ex.outputs.items()
               if k in ref)


def run_layer(w: Workload, target: Target, *, seed: int = 0, raw: bool = False,
              compiled: Compiled | None = None, check_reference: bool = False,
              trace_path: str | None = None, latency_hiding: bool = True,
              gpu_schedule: str = "auto", dtype: str = "int8",
              references: dict[Any, Any] | None = None, **knobs: Any) -> LayerRun:
    """Compile (unless ``compiled``), execute and check ``w`` against numpy on ``target``
    (module docstring). ``check_reference`` also runs the target's functional oracle (the
    ISA's reference interpreter; the loop-nest interpreter for a GPU kernel) and compares it
    with the execution. ``trace_path`` (accelerator) writes slice 0's timeline.
    ``references``: a memo of the random inputs and numpy's answer, keyed here by what they
    are a function of (the op's shapes, the epilogue drawn for, ``seed``, ``dtype``, ``raw``;
    not the target): a sweep checking one layer at many hardware points computes them once
    (read only: the arrays are packed, never written)."""
    t0 = time.perf_counter()
    progs = compile_layer(w, target, raw=raw, compiled=compiled, latency_hiding=latency_hiding,
                          gpu_schedule=gpu_schedule, dtype=dtype, **knobs)
    t_compile = time.perf_counter() - t0
    accel = isinstance(target, AccelTarget)
    # the epilogue the program computes: its bias is drawn within that epilogue's bound
    first = progs[0]
    drawn = first.compiled.epilogue if isinstance(first, AccelLayer) else \
        first.workload.epi  # type: ignore[attr-defined]
    ref_key = (w.spec, drawn, seed, dtype, raw)
    if references is not None and ref_key in references:
        user, want, saturated = references[ref_key]
    else:
        user = layer_inputs(w.spec, drawn, seed, dtype)
        want, saturated = layer_reference(w.spec, user, None if raw else drawn)
        if references is not None:
            references[ref_key] = (user, want, saturated)
    runs: list[Execution] = []
    parts: list[np.ndarray] = []
    agrees: bool | None = None
    t_run = 0.0
    for i, p in enumerate(progs):
        packed = p.pack(user)
        ex = target.execute(p.artifact, packed, trace_path=trace_path if i == 0 else None)
        t_run += ex.seconds
        runs.append(ex)
        parts.append(p.unpack(ex.outputs))
        if check_reference:
            ok = _agrees(target, p, packed, ex)
            agrees = ok if agrees is None else agrees and ok
    if raw and accel:
        g = target.hw.gemm  # type: ignore[attr-defined]
        got = _join_slices(parts, DTYPE_BITS[g.out_dtype], DTYPE_BITS[g.acc_dtype])
        chk = compare(want, got, subject="int32 accumulators", unit="int32 accumulators",
                      note=f"read back in {len(progs)} slices, no epilogue")
    elif raw:
        chk = compare(want, parts[0], subject="int32 accumulators", unit="int32 accumulators",
                      note="no epilogue")
    else:
        chk = compare(want, parts[0], saturated=saturated)
    return LayerRun(w, target, progs, runs, chk, t_compile, t_run, agrees)


# ------------------------------------------------------------------- depthwise layers


@dataclass
class DepthwiseRun(_Judged):
    """A depthwise layer run on the accelerator (``accel.ops.depthwise_packed``)."""

    compiled: CompiledDepthwise
    execution: Execution
    check: Check
    reference_agrees: bool | None

    @property
    def cycles(self) -> int:
        return int(self.execution.stats.cycles)

    @property
    def stats(self) -> Any:
        return self.execution.stats

    @property
    def gops(self) -> float:
        hw = self.compiled.hw
        return self.compiled.spec.ops / (self.cycles / (hw.board.clock_mhz * 1e6)) / 1e9


def run_depthwise(spec: DepthwiseSpec, target: AccelTarget, *, seed: int = 0,
                  check_reference: bool = False, **kwargs: Any) -> DepthwiseRun:
    """Compile a depthwise layer (``compile_depthwise``, the timing-only simulator choosing
    among the model's candidates), run it on random data and compare with numpy (and, with
    ``check_reference``, the ISA's reference interpreter). ``kwargs`` go to
    ``compile_depthwise`` (the intrinsic and the weights' scratchpad of a variant)."""
    hw = target.hw
    c = compile_depthwise(spec, hw, cost=target.cycles, **kwargs)
    rng = np.random.default_rng(seed)
    P, g = c.packed, hw.gemm
    x = rng.integers(-128, 128, size=(spec.n, spec.c, spec.h, spec.w), dtype=np.int8)
    w = rng.integers(-128, 128, size=(spec.c, spec.k, spec.k), dtype=np.int8)
    bias = rng.integers(-(1 << 12), 1 << 12, size=(spec.c,), dtype=np.int32)
    inputs = {"data": packing.to_entries(packing.pack_data(x, g.batch, g.block_in,
                                                           P.data_shape)),
              "kernel": packing.to_entries(pack_dw_kernel(w, P, c.layout))}
    if c.epilogue.bias:
        inputs["bias"] = packing.to_entries(packing.pack_bias(bias, g.batch, g.block_out, P.cb))
    ex = target.execute(c.program, inputs)
    res = np.asarray(ex.outputs["res"]).reshape(P.res_shape)
    got = packing.unpack_result(res, spec.n, spec.c, spec.oh, spec.ow)
    acc = depthwise_acc(x, w, spec)
    b = bias if c.epilogue.bias else None
    want = apply_epilogue(acc, b, c.epilogue, 1)
    chk = compare(want, got, saturated=saturated_fraction(acc, b, c.epilogue, 1))
    agrees = None
    if check_reference:
        ref = target.reference(c.program, inputs)
        agrees = all(np.array_equal(np.asarray(ref[k]), np.asarray(v))
                     for k, v in ex.outputs.items())
    return DepthwiseRun(c, ex, chk, agrees)
