"""``vta.build``: from a schedule to a callable module on the accelerator or a GPU.

``build(schedule, args, target, hw=...)`` lowers the schedule (``vta.compiler.ir.lower``) and
compiles it for ``target``:

* ``"vta"``: the accelerator pipeline (``vta.compiler.compile_func``) to an ``isa.Program``;
  calling the module runs it on the cycle-level simulator (``vta.sim.simulate``).
* ``"cuda-emu"``: the GPU pipeline (``vta.gpu.lower_gpu``) and the CUDA text; calling runs the
  kernel in the lockstep SIMT emulator.
* ``"cuda"``: the same kernel launched on an NVIDIA GPU through CuPy.

The module is called with the inputs' arrays by placeholder name (``mod(x=..., w=...)``), by
tensor (``mod({x: ..., w: ...})``) or by position, and returns a ``Result``: the outputs as
numpy arrays by name, plus the run's statistics (the simulator's ``SimStats`` with cycles and
the per-unit table, or the GPU launch). Arrays are in the placeholders' *logical* layouts: when
``args`` is a ``vta.compiler.accel.pack.Packed`` (the accelerator's packed version of a logical
compute), the module packs the inputs and unpacks the outputs with each parameter's ``Layout``
(zero padding, entry blocking, broadcast lanes), so the same arrays go to every target. One
naming scheme everywhere: the placeholders' names are the DRAM allocations of the program, the
CUDA kernel's parameters and the keys of the inputs and outputs.

Input dtypes: an array of the parameter's dtype is used as it is; integers go into an
integer parameter when every value fits (an ``InputError`` naming the range otherwise) and
into a float parameter when every value is exact there; a float goes into a float parameter
of at least its precision (float16 into float32, not float64 into float32). Nothing else is
converted: a bool array is not an int8 one, a float64 array for a float32 or float16
parameter and a float for an integer are ``InputError``s saying to convert with ``astype``,
so no value is rounded behind the caller's back. On the accelerator a float tensor, and an
output of a dtype other than the GEMM's out dtype (an int32 accumulator), are ``BuildError``s
at build time saying what to do (floats run on ``cuda-emu``/``cuda``; end an accelerator
compute with a narrowing stage).

Everything a build produced stays reachable: ``mod.func`` (the lowered loop-nest IR),
``mod.program`` and ``mod.compiled`` (the IR after every accelerator pass), ``mod.kernel`` and
``mod.cuda`` (the GPU kernel and its source). ``mod.interpret(...)`` runs ``mod.func`` in the
IR interpreter and, on the accelerator, ``mod.reference(...)`` runs the program on the ISA's
reference interpreter: the same arrays, the same ``Result``, so the layers can be compared.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vta.compiler.accel.ops.packing import to_entries
from vta.compiler.accel.pack import Layout, Packed
from vta.compiler.ir import stmt as S
from vta.compiler.ir.interp import run_func
from vta.compiler.ir.lower import lower
from vta.compiler.ir.schedule import Schedule
from vta.compiler.ir.tensor import ComputeOp, Tensor
from vta.config import HwConfig
from vta.errors import BuildError, InputError
from vta.run.targets import (
    TARGET_NAMES,
    AccelTarget,
    CompiledKernel,
    CudaEmuTarget,
    GpuLaunch,
    Target,
    get_target,
)
from vta.sim import format_report

__all__ = ["TARGETS", "BuildError", "InputError", "Module", "Result", "GpuLaunch", "build"]

#: what ``build`` compiles for (``vta.run.targets``)
TARGETS = TARGET_NAMES


@dataclass
class Result:
    """One run of a module: ``outputs`` by name (logical layout), on ``target`` (``"vta"``,
    ``"vta-reference"``, ``"interp"``, ``"cuda-emu"``, ``"cuda"``), with ``stats`` (the
    simulator's ``SimStats``, or a ``GpuLaunch``; None for interpreters)."""

    target: str
    outputs: dict[str, np.ndarray]
    stats: Any = None
    seconds: float = 0.0
    sim: Any = field(default=None, repr=False)
    hw: HwConfig | None = field(default=None, repr=False)
    #: the module that ran (its program, kernel and IR)
    module: Module | None = field(default=None, repr=False)

    def __getitem__(self, key: str | Tensor) -> np.ndarray:
        name = key if isinstance(key, str) else key.name
        try:
            return self.outputs[name]
        except KeyError:
            raise KeyError(f"no output named {name!r} (outputs: "
                           f"{', '.join(self.outputs)})") from None

    @property
    def output(self) -> np.ndarray:
        """The only output (an error when there are several)."""
        if len(self.outputs) != 1:
            raise KeyError(f"the module has {len(self.outputs)} outputs "
                           f"({', '.join(self.outputs)}); index the result by name")
        return next(iter(self.outputs.values()))

    @property
    def cycles(self) -> int | None:
        """Simulated cycles (accelerator runs; None elsewhere)."""
        return getattr(self.stats, "cycles", None)

    def report(self) -> str:
        """The run's statistics as text: cycles, utilization, the per-unit busy/stall table
        and bytes per buffer (accelerator), or the launch shape (GPU)."""
        if self.sim is not None and self.hw is not None:
            return format_report(self.sim, self.hw)
        if isinstance(self.stats, GpuLaunch):
            s = self.stats
            text = (f"{self.target}: grid {s.grid}, block {s.block} ({s.threads:,} threads), "
                    f"{s.shared_bytes:,} B static shared memory, {s.seconds * 1e3:.1f} ms")
            if s.profile is not None:
                p = s.profile
                ld, ld_min = p.sectors(False)
                st, st_min = p.sectors(True)
                text += (f"\nbank conflicts {p.bank_conflicts:,}; global load sectors {ld:,} "
                         f"(minimum {ld_min:,}), store sectors {st:,} (minimum {st_min:,}); "
                         f"{p.barriers:,} barriers; warp instructions "
                         + ", ".join(f"{k} {v:,}" for k, v in sorted(p.instructions.items())))
            return text
        return f"{self.target}: {self.seconds * 1e3:.1f} ms"


@dataclass(frozen=True)
class _Param:
    tensor: Tensor
    buffer: S.Buffer
    layout: Layout
    is_output: bool

    @property
    def name(self) -> str:
        return self.tensor.name


class Module:
    """A compiled schedule (``build``'s result); call it with the inputs' arrays."""

    def __init__(self, target: Target, func: S.PrimFunc, params: list[_Param],
                 hw: HwConfig | None) -> None:
        #: where the module runs (``vta.run.targets``)
        self.runner = target
        #: the target's name (``"vta"``, ``"cuda-emu"``, ``"cuda"``)
        self.target = target.name
        #: the lowered loop-nest IR (before the target's pipeline)
        self.func = func
        self.hw = hw
        self._params = params
        #: the accelerator's program and the IR after every pass (``vta`` only)
        self.compiled: Any = None
        #: the GPU target's compiled kernel (``CompiledKernel``: the GPU-lowered function and
        #: the rendered CUDA; GPU targets only)
        self.compiled_kernel: CompiledKernel | None = None

    @property
    def gpu_func(self) -> S.PrimFunc | None:
        """The GPU-lowered function (GPU targets only)."""
        return self.compiled_kernel.func if self.compiled_kernel is not None else None

    @property
    def kernel(self) -> Any:
        """The rendered CUDA kernel (``CudaKernel``; GPU targets only)."""
        return self.compiled_kernel.cuda if self.compiled_kernel is not None else None

    @property
    def profile(self) -> bool:
        """Whether a ``cuda-emu`` run collects the emulator's counters (``GpuLaunch.profile``;
        counting costs emulation time, so a timing comparison turns it off)."""
        return isinstance(self.runner, CudaEmuTarget) and self.runner.profile

    @profile.setter
    def profile(self, on: bool) -> None:
        if isinstance(self.runner, CudaEmuTarget):
            self.runner.profile = on

    # ------------------------------------------------------------------ views

    @property
    def program(self) -> Any:
        """The accelerator's ``isa.Program`` (``vta`` target)."""
        if self.compiled is None:
            raise BuildError(f"a {self.target} module has no accelerator program")
        return self.compiled.program

    @property
    def cuda(self) -> str:
        """The CUDA source (GPU targets)."""
        if self.kernel is None:
            raise BuildError(f"a {self.target} module has no CUDA kernel")
        return str(self.kernel.source)

    @property
    def inputs(self) -> list[str]:
        """The inputs' names, in parameter order (the order of positional calls)."""
        return [p.name for p in self._params if not p.is_output]

    @property
    def outputs(self) -> list[str]:
        """The outputs' names (the keys of a ``Result``)."""
        return [p.name for p in self._params if p.is_output]

    @property
    def layouts(self) -> dict[str, Layout]:
        """Each parameter's layout (identity unless built from a ``Packed`` compute)."""
        return {p.name: p.layout for p in self._params}

    def __repr__(self) -> str:
        return (f"Module({self.func.name}, target={self.target}, inputs={self.inputs}, "
                f"outputs={self.outputs})")

    # ------------------------------------------------------------------ inputs

    def _bind(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        given: dict[str, Any] = {}
        ins = [p for p in self._params if not p.is_output]
        if len(args) == 1 and isinstance(args[0], Mapping):
            for k, v in args[0].items():
                given[k if isinstance(k, str) else k.name] = v
        else:
            if len(args) > len(ins):
                raise InputError(f"{self.func.name}: takes {len(ins)} input arrays "
                                 f"({', '.join(p.name for p in ins)}), got {len(args)}")
            for p, a in zip(ins, args, strict=False):
                given[p.name] = a
        for k, v in kwargs.items():
            if k in given:
                raise InputError(f"{self.func.name}: input {k} given twice")
            given[k] = v
        known = {p.name for p in ins}
        outs = {p.name for p in self._params if p.is_output}
        for k in given:
            if k in outs:
                raise InputError(f"{self.func.name}: {k} is an output; the module allocates it")
            if k not in known:
                raise InputError(f"{self.func.name}: no input named {k!r} (inputs: "
                                 f"{', '.join(sorted(known))})")
        missing = [p.name for p in ins if p.name not in given]
        if missing:
            raise InputError(f"{self.func.name}: missing input(s) {', '.join(missing)}")
        return {p.name: _as_array(p, given[p.name]) for p in ins}

    # ------------------------------------------------------------------ running

    def __call__(self, *args: Any, **kwargs: Any) -> Result:
        """Run on the module's target (module docstring)."""
        arrays = self._bind(args, kwargs)
        if isinstance(self.runner, AccelTarget):
            ex = self.runner.execute(self.compiled, self._dram_inputs(arrays))
            return Result("vta", self._from_dram(ex.outputs), ex.stats, ex.seconds, ex.sim,
                          self.hw, self)
        assert self.compiled_kernel is not None
        ex = self.runner.execute(self.compiled_kernel, self._packed_arrays(arrays))
        return Result(self.target, self._unpacked(ex.outputs), ex.stats, ex.seconds,
                      module=self)

    def interpret(self, *args: Any, **kwargs: Any) -> Result:
        """Run the lowered loop-nest IR (``mod.func``) in the tensor-IR interpreter."""
        arrays = self._bind(args, kwargs)
        mem = self._packed_arrays(arrays)
        t0 = time.perf_counter()
        run_func(self.func, {p.buffer: mem[p.name] for p in self._params})
        return Result("interp", self._unpacked(mem), seconds=time.perf_counter() - t0,
                      module=self)

    def reference(self, *args: Any, **kwargs: Any) -> Result:
        """Run the accelerator program on the ISA's reference interpreter (``vta`` only)."""
        if not isinstance(self.runner, AccelTarget):
            raise BuildError(f"the ISA reference interpreter runs accelerator programs; this "
                             f"module's target is {self.target}")
        arrays = self._bind(args, kwargs)
        t0 = time.perf_counter()
        out = self.runner.reference(self.compiled, self._dram_inputs(arrays))
        return Result("vta-reference", self._from_dram(out), seconds=time.perf_counter() - t0,
                      module=self)

    def _packed_arrays(self, arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Every parameter in its stored layout: inputs packed, outputs zero."""
        out = {}
        for p in self._params:
            if p.is_output:
                out[p.name] = np.zeros(p.buffer.shape, np.dtype(p.buffer.dtype))
            else:
                out[p.name] = p.layout.pack(arrays[p.name])
        return out

    def _unpacked(self, mem: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {p.name: p.layout.unpack(mem[p.name]) for p in self._params if p.is_output}

    def _dram_inputs(self, arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        allocs = {a.name for a in self.program.allocations}
        packed = self._packed_arrays(arrays)
        return {p.name: to_entries(packed[p.name]) if len(p.buffer.shape) >= 2
                else packed[p.name]
                for p in self._params if not p.is_output and p.name in allocs}

    def _from_dram(self, outputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        res = {}
        for p in self._params:
            if not p.is_output:
                continue
            if p.name not in outputs:
                raise BuildError(f"{self.func.name}: the program never stores output {p.name}")
            res[p.name] = p.layout.unpack(np.asarray(outputs[p.name]))
        return res


def _as_array(p: _Param, a: Any) -> np.ndarray:
    """``a`` as an array of ``p``'s logical shape and dtype, by the input dtype rules (module
    docstring): an array of the parameter's dtype as it is; integers into an integer parameter
    when every value fits, into a float one when every value is exact there; a float into a
    float of at least its precision. Anything else (a bool array for an integer, a float64 for
    a float32, a float for an integer) is an ``InputError`` saying how to convert it: no value
    is changed behind the caller's back."""
    arr = np.asarray(a)
    want = np.dtype(p.layout.dtype)
    if tuple(arr.shape) != p.layout.shape:
        raise InputError(f"input {p.name}: expected shape {list(p.layout.shape)}, got "
                         f"{list(arr.shape)}")
    if arr.dtype == want:
        return arr
    fix = f"convert it yourself (np.asarray(...).astype(np.{want}))"
    if arr.dtype.kind == "b" or want.kind == "b":
        raise InputError(f"input {p.name}: expected dtype {want}, got {arr.dtype}: a bool is "
                         f"not a number here; {fix}")
    if arr.dtype.kind in "iu" and want.kind in "iu":
        info = np.iinfo(want)
        if arr.size == 0 or (int(arr.min()) >= info.min and int(arr.max()) <= info.max):
            return arr.astype(want)
        raise InputError(f"input {p.name}: values {int(arr.min())}..{int(arr.max())} do not fit "
                         f"its dtype {want}")
    if arr.dtype.kind in "iu" and want.kind == "f":
        conv = arr.astype(want)
        if np.array_equal(conv.astype(arr.dtype), arr):
            return conv
        raise InputError(f"input {p.name}: some of its {arr.dtype} values are not exact in "
                         f"{want}; {fix} if rounding is meant")
    if arr.dtype.kind == "f" and want.kind == "f":
        if np.can_cast(arr.dtype, want, "safe"):
            return arr.astype(want)
        raise InputError(f"input {p.name}: expected dtype {want}, got {arr.dtype}, which "
                         f"{want} would round; {fix} if rounding is meant")
    raise InputError(f"input {p.name}: expected dtype {want}, got {arr.dtype}; {fix}")


def _accel_dtypes(tensors: Sequence[Tensor], hw: HwConfig) -> None:
    """The accelerator computes integers only, and stores its output narrowed to the GEMM's
    out dtype: a float tensor, or an output of another dtype, is a ``BuildError`` saying
    where such a compute runs (before any pass, whose refusal would name a symptom)."""
    floats = [t.name for t in tensors if np.dtype(t.dtype).kind == "f"]
    if floats:
        raise BuildError(f"build(target='vta'): {', '.join(floats)} "
                         f"{'is' if len(floats) == 1 else 'are'} floating point; the "
                         f"accelerator computes integers ({hw.gemm.inp_dtype} x "
                         f"{hw.gemm.wgt_dtype} -> {hw.gemm.acc_dtype}); floats run on the GPU: "
                         f"build for 'cuda-emu' (no GPU needed) or 'cuda'")
    out_dt = np.dtype(hw.gemm.out_dtype)
    for t in tensors:
        if isinstance(t.op, ComputeOp) and np.dtype(t.dtype) != out_dt:
            raise BuildError(
                f"build(target='vta'): output {t.name} is {t.dtype}; the accelerator's STORE "
                f"writes {out_dt} values (hw.gemm.out_dtype), so end the compute with a "
                f"narrowing stage (compute(shape, lambda *i: {t.name}[i].astype("
                f"'{out_dt}'))), or build for 'cuda-emu'/'cuda', which return "
                f"{t.dtype}; the CLI's raw check (vta run, no epilogue) reads int32 "
                f"accumulators back slice by slice")


def _intrinsics_target(schedule: Schedule, target: str) -> None:
    """Every tensorized stage's intrinsic is the target's: an accelerator instruction in a
    schedule built for a GPU (or a GPU intrinsic built for the accelerator) is a
    ``BuildError`` naming it and the stage, instead of scalar loops or a lowering error."""
    want = "vta" if target == "vta" else "cuda"
    for st in schedule.stages:
        for intrinsic in st.tensorized.values():
            if intrinsic.target != want:
                where = ("the accelerator (target='vta')" if intrinsic.target == "vta" else
                         "a GPU (target='cuda-emu' or 'cuda')")
                raise BuildError(f"build(target={target!r}): stage {st.name} is tensorized "
                                 f"with {intrinsic.name}, an intrinsic of {where}; build "
                                 f"there, or tensorize with one of {target}'s intrinsics")


def _hw(hw: HwConfig | str | Path | None, target: str) -> HwConfig | None:
    if isinstance(hw, (str, Path)):
        return HwConfig.from_yaml(hw)
    if hw is None and target == "vta":
        raise BuildError("build(target='vta') needs the hardware: hw=HwConfig or a YAML path")
    return hw


def build(schedule: Schedule | tuple[Schedule, Sequence[Tensor]],
          args: Sequence[Tensor] | Packed | None = None, target: str = "vta", *,
          hw: HwConfig | str | Path | None = None, name: str | None = None,
          profile: bool = True) -> Module:
    """Compile ``schedule`` with parameters ``args`` (inputs, then outputs) for ``target``
    (``"vta"``, ``"cuda-emu"`` or ``"cuda"``); see the module docstring. ``schedule`` may be a
    ``(schedule, args)`` pair (what the GPU schedules of ``vta.gpu.implicit_gemm`` return);
    ``args`` a ``Packed`` compute (``vta.compiler.accel.pack.pack``), whose layouts the module
    applies. ``name`` names the function (default: the first output's name). ``profile``: a
    ``cuda-emu`` module counts what makes the kernel slow on each run (``GpuLaunch.profile``;
    off, the emulator runs several times faster)."""
    if isinstance(schedule, tuple):
        schedule, pair_args = schedule
        args = pair_args if args is None else args
    if not isinstance(schedule, Schedule):
        raise BuildError(f"build: expected a Schedule, got {type(schedule).__name__}")
    if target not in TARGETS:
        raise BuildError(f"build: unknown target {target!r} (expected one of "
                         f"{', '.join(TARGETS)})")
    if args is None:
        raise BuildError("build: give the parameters (args), inputs then outputs")
    hwc = _hw(hw, target)
    if isinstance(args, Packed):
        tensors, layouts = list(args.args), dict(args.layouts)
    else:
        tensors = list(args)
        layouts = {t.name: Layout(t.name, t.shape, t.dtype) for t in tensors}
    seen: dict[str, Tensor] = {}
    for t in tensors:
        if not isinstance(t, Tensor):
            raise BuildError(f"build: args must be tensors, got {t!r}")
        if t.name in seen and seen[t.name] is not t:
            raise BuildError(f"build: two parameters are named {t.name!r}; the name is how "
                             f"arrays are passed and returned, so it must be unique")
        seen[t.name] = t
    _intrinsics_target(schedule, target)
    outs = [t for t in tensors if isinstance(t.op, ComputeOp)]
    if target == "vta":
        assert hwc is not None
        _accel_dtypes(tensors, hwc)
    fname = name or (outs[0].name if outs else "main")
    func = lower(schedule, tensors, fname, whole_tiles=target == "vta")
    params = [_Param(t, b, layouts[t.name], isinstance(t.op, ComputeOp))
              for t, b in zip(tensors, func.params, strict=True)]
    tgt = get_target(target, hwc, profile=profile)
    mod = Module(tgt, func, params, hwc)
    if isinstance(tgt, AccelTarget):
        mod.compiled = tgt.compile(func, schedule)
    else:
        mod.compiled_kernel = tgt.compile(func)
    return mod
