"""Whole graphs on any target (``vta run resnet18``, ``vta run --onnx F``), every tensor
checked against the graph interpreter.

``compile_for(graph, target)`` compiles a quantized graph for a target: on the accelerator
``vta.graph.compile.compile_graph`` (fusion, placement, layout and memory plans, linked
programs; the timing-only simulator choosing schedules), on a GPU target one kernel per fused
group (``vta.graph.gpu_place.group_kernel``: the task-mapping implicit GEMM for convolutions,
channels-last, and for dense layers, each with the fused chain in its epilogue, window kernels
for pooling and element-wise groups; ``vta.run.graph_gpu``, loaded only then, so that a run on
the accelerator never loads the GPU back end). ``run_graph(compiled, inputs, target)`` runs it
from its inputs to its outputs; each stored tensor is compared with the interpreter's as soon
as it is written (later steps may reuse its memory), and the verdict is ``vta.run.check``'s.
On a GPU target each activation stays in the layout its producer wrote (NHWC between
convolutions); the host transposes it only where a consumer takes the other layout (the NCHW
window kernels), and the summary counts those transposes.
"""

from __future__ import annotations

import json
import mmap
import struct
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vta.config import HwConfig
from vta.errors import VtaError
from vta.graph import interp
from vta.graph.compile import CompiledGraph, accelerator_graph, compile_graph
from vta.graph.dram_layout import pack, unpack
from vta.graph.ir import Fused, Graph, Value, node_macs
from vta.graph.link import const_name
from vta.graph.passes.fuse import group_nodes
from vta.graph.passes.plan_layouts import DramTensor
from vta.graph.place import Kernel
from vta.isa import Program
from vta.isa.builtins import VTA_INSTRUCTIONS, instruction_counts
from vta.isa.encoding import EncodedUops
from vta.run.check import Check, compare, merge
from vta.run.compile_pool import place_parallel
from vta.run.pool import ForkedChild, ForkPool, current_job, default_jobs
from vta.run.targets import AccelTarget, Execution, Target
from vta.sim import SimError
from vta.sim.energy import Energy, energy_of
from vta.sim.trace import trace_events

if TYPE_CHECKING:
    from vta.run.graph_gpu import GpuGraph

__all__ = ["GraphRun", "StepRun", "Reference", "accelerator_graph", "compile_for", "run_graph",
           "graph_summary", "write_graph_trace"]

#: what every graph run is checked against
AGAINST = "the graph interpreter (numpy)"


# ---------------------------------------------------------------------------- compiling


def compile_for(graph: Graph, target: Target, *, fusion: str = "full",
                jobs: int | None = None, meanwhile: Callable[[], None] | None = None
                ) -> CompiledGraph | GpuGraph:
    """``graph`` compiled for ``target`` (module docstring). On the accelerator the kernels
    the target's compile cache lacks are compiled first on ``jobs`` worker processes
    (``vta.run.compile_pool``; default: the idle cores, ``pool.default_jobs``; 1: this
    process alone), then the graph is compiled from them: the same programs as serially.
    ``meanwhile``: work for this process while those workers compile (``vta run`` gives the
    interpreter's run, ``Reference.compute``); not run when nothing is compiled there."""
    if isinstance(target, AccelTarget):
        hw, cost, memo = target.hw, target.cycles, target.memo
        return compile_graph(graph, hw, fusion=fusion, cost=cost, memo=memo,
                             place=lambda fused: place_parallel(fused, hw, cost=cost, memo=memo,
                                                                jobs=jobs, meanwhile=meanwhile))
    return _gpu().compile_gpu(graph, target, fusion)  # type: ignore[no-any-return]


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
    #: the kernel's energy when a worker computed it beside its simulation (``_speculate``;
    #: else ``graph_summary`` computes it)
    energy: Energy | None = None
    #: a kernel's instructions by definition (``isa.builtins.instruction_counts``; the
    #: report's), counted when the run in order reached it, beside the workers still
    #: simulating (``_in_order``; else ``graph_summary`` counts them)
    instructions: dict[str, int] | None = None

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
        return _gpu().gpu_summary(self)  # type: ignore[no-any-return]


def _op_name(s: StepRun) -> str:
    group = s.step.group if hasattr(s.step, "group") else s.step
    return str(group.output.name)


def _inputs(graph: Graph, image: np.ndarray | dict[str, np.ndarray]) -> dict[Value, np.ndarray]:
    if isinstance(image, dict):
        return {v: np.asarray(image[v.name]) for v in graph.inputs}
    if len(graph.inputs) != 1:
        raise VtaError(f"graph {graph.name} has {len(graph.inputs)} inputs: give them by name")
    return {graph.inputs[0]: np.asarray(image)}


class Reference:
    """The graph interpreter's run of ``graph`` on one input (what every tensor is checked
    against, ``AGAINST``), computed once: all at once (``compute``; ``vta run`` computes it
    while the workers compile, ``vta.run.compile_pool``), or a node at a time (``steps``) while
    the kernels whose inputs it has computed are simulated; here, or in a process of its own
    (``start``). ``host``: the values to start from (the inputs, then the constants);
    ``values``: every tensor's; ``seconds``: the interpreter's own time (not what its caller
    did between two nodes, nor what it waited for the process)."""

    def __init__(self, graph: Graph, image: np.ndarray | dict[str, np.ndarray]) -> None:
        self.graph = graph
        self.host = _inputs(graph, image)
        self.values: dict[Value, np.ndarray] = {}
        self.seconds = 0.0
        self.done = False
        self._run: Iterator[dict[Value, np.ndarray]] | None = None
        self._child: ForkedChild | None = None

    def start(self) -> bool:
        """Compute the values in a forked process from now on (``_Slots``: each node's output
        written into memory this process shares, a few bytes over a pipe when it is there),
        so that this process is free meanwhile (``vta run``: to read and link the compile
        cache's programs, then to hand the kernels to the simulation's workers); ``steps``
        then waits for the process. Whether it started (not where no process can be forked,
        nor when the values are being computed already); if the process fails, the values it
        did not give are computed here (the same values: the interpreter is deterministic)."""
        if self._run is not None or self.done or self._child is not None:
            return False
        slots = _Slots(self.graph)
        first = interp.iter_graph(self.graph, self.host)
        env = next(first)  # the inputs checked and the constants, as the interpreter has them
        self._child = ForkedChild.start(lambda report: slots.fill(first, report), _FRAME.size)
        if self._child is None:
            return False
        self._run = self._streamed(env, slots, self._child)
        return True

    def steps(self) -> Iterator[dict[Value, np.ndarray]]:
        """The values so far, after the inputs and constants and again after each node (once,
        complete, when they are computed already)."""
        if self._run is None and not self.done:
            self._run = interp.iter_graph(self.graph, self.host)
        while not self.done:
            assert self._run is not None
            t0 = time.perf_counter()
            try:
                self.values = next(self._run)
            except StopIteration:
                self.done = True
                self._run = None
                for v in self.graph.constants():
                    self.host[v] = v.data  # type: ignore[assignment]
            finally:
                if self._child is None:  # (a process's time comes with its frames)
                    self.seconds += time.perf_counter() - t0
            if not self.done:
                yield self.values
        yield self.values

    def compute(self) -> None:
        """Every value, now."""
        for _ in self.steps():
            pass

    def _streamed(self, env: dict[Value, np.ndarray], slots: _Slots, child: ForkedChild
                  ) -> Iterator[dict[Value, np.ndarray]]:
        """``iter_graph``'s steps from the process ``start`` forked: ``env`` (the inputs and
        constants), then after each node it reports, its outputs (views of the shared
        memory). When it stops early, the rest is computed here."""
        yield env
        got = 0
        try:
            for frame in child.frames():
                k, secs = _FRAME.unpack(frame)
                if k != got:
                    break  # (never: the process reports the nodes in order)
                env.update(slots.views(k))
                self.seconds += secs
                got += 1
                yield env
        finally:
            child.close()
        if got == len(self.graph.nodes):
            return
        t0 = time.perf_counter()  # the process failed: the rest here, from the start
        for k, step in enumerate(interp.iter_graph(self.graph, self.host)):
            if k > got:
                env.update({v: step[v] for v in slots.values[k - 1]})
                self.seconds += time.perf_counter() - t0
                yield env
                t0 = time.perf_counter()


#: a progress frame of ``Reference.start``'s process: the node's position, its seconds
_FRAME = struct.Struct("<Id")


class _Slots:
    """Where each node's outputs go in memory shared with a forked process (``Reference.
    start``): one anonymous shared mapping holding, at 64-byte aligned offsets, every value
    ``interp.iter_graph`` adds after each node (a fused node's inner outputs too), each as
    its type says (the interpreter checks every output's shape and dtype)."""

    def __init__(self, graph: Graph) -> None:
        self.values: list[tuple[Value, ...]] = [
            tuple(m.output for m in n.nodes) if isinstance(n, Fused) else (n.output,)
            for n in graph.nodes]
        self.offsets: dict[Value, int] = {}
        end = 0
        for vs in self.values:
            for v in vs:
                self.offsets[v] = end
                end += -(-_nbytes(v) // 64) * 64
        self.memory = mmap.mmap(-1, max(end, 1))  # MAP_SHARED: the child's writes show here

    def view(self, v: Value) -> np.ndarray:
        return np.ndarray(v.type.shape, dtype=np.dtype(v.type.dtype), buffer=self.memory,
                          offset=self.offsets[v])

    def views(self, k: int) -> dict[Value, np.ndarray]:
        """Node ``k``'s outputs."""
        return {v: self.view(v) for v in self.values[k]}

    def fill(self, steps: Iterator[dict[Value, np.ndarray]], report: Callable[[bytes], None]
             ) -> None:
        """(In the forked process.) The interpreter's remaining ``steps`` (past the inputs),
        each node's outputs copied into their slots and the node reported."""
        t0 = time.perf_counter()
        for k, env in enumerate(steps):
            secs = time.perf_counter() - t0
            for v in self.values[k]:
                np.copyto(self.view(v), env[v], casting="no")
            report(_FRAME.pack(k, secs))
            t0 = time.perf_counter()


def _nbytes(v: Value) -> int:
    return int(np.prod(v.type.shape, dtype=np.int64)) * np.dtype(v.type.dtype).itemsize


def _compare(out: np.ndarray, want: np.ndarray) -> Check:
    return compare(want, out, against=AGAINST)


def run_graph(compiled: CompiledGraph | GpuGraph, image: np.ndarray | dict[str, np.ndarray], *,
              target: Target | None = None, trace_path: str | None = None,
              jobs: int | None = None, reference: Reference | None = None,
              timelines: bool = True) -> GraphRun:
    """Run ``compiled`` (``compile_for``) from its input (an array, or arrays by input name)
    to its outputs on ``target`` (default: the target it was compiled for). On the
    accelerator the host packs the inputs, each kernel's linked program runs in order on the
    DRAM the previous ones left (a kernel's FINISH ends it, as a runtime's kernel launch
    returns) and host fallbacks run the interpreter's semantics between unpack and pack;
    ``trace_path`` writes one timeline for the whole network. The kernels are simulated side
    by side on ``jobs`` worker processes first (default: the idle cores; 1: none), each on the
    inputs the interpreter predicts, and a kernel's simulation is taken from there only
    when its inputs turn out to be exactly those (``_speculate``): the same run as in order.
    ``reference``: the interpreter's run on ``image`` (``Reference``, computed or not; by
    default one is made here); each worker starts on a kernel as soon as the interpreter has
    computed its inputs. ``timelines=False``: a kernel simulated in a worker comes back
    without its timeline (``sim.slices`` empty: ResNet-18's are about 0.9 MB of small tuples to
    pickle and unpickle, and only the trace reads them; kept whenever ``trace_path`` is
    given)."""
    if not isinstance(compiled, CompiledGraph):  # a GpuGraph (vta.run.graph_gpu)
        t_gpu = target if target is not None else compiled.target
        if isinstance(t_gpu, AccelTarget):
            raise VtaError("a graph compiled for a GPU target runs on cuda-emu or cuda")
        return _gpu().run_gpu(compiled, image, t_gpu)  # type: ignore[no-any-return]
    t = target if target is not None else AccelTarget(compiled.hw)
    if not isinstance(t, AccelTarget):
        raise VtaError(f"a graph compiled for the accelerator cannot run on {t.name}")
    # a reference computed on another graph (not the one compiled, whose passes add values)
    # cannot check its steps: the interpreter runs again on the compiled graph
    ref = reference if reference is not None and reference.graph is compiled.graph \
        else Reference(compiled.graph, image)
    r = _run_accel(compiled, ref, t, jobs, timelines or trace_path is not None)
    if trace_path is not None:
        write_graph_trace(r, trace_path)
    return r


def _run_accel(cg: CompiledGraph, reference: Reference, target: AccelTarget,
               jobs: int | None = None, timelines: bool = True) -> GraphRun:
    t0 = time.perf_counter()
    guesses = _speculate(cg, reference, target, jobs, timelines)
    try:
        return _in_order(cg, reference, target, guesses, time.perf_counter() - t0)
    finally:
        guesses.close()


def _in_order(cg: CompiledGraph, reference: Reference, target: AccelTarget,
              guesses: _Speculation, t_sim: float) -> GraphRun:
    """``_run_accel``'s run in order, the kernels' simulations taken from ``guesses`` where
    they ran on the very inputs (``_speculate``); kernel by kernel as the workers give them,
    so that this process checks the kernels done while the workers simulate the next ones
    (rather than all of them after the last). ``t_sim``: the seconds the kernels were being
    handed out (the interpreter's steps between them included); the simulate phase goes on
    until the last kernel is taken from its worker (this process's work between included,
    but its checks: their own phase) and adds the kernels simulated here; the interpreter
    alone (no workers; the time waited for it when it runs in a process of its own,
    ``Reference.start``) is its own phase."""
    hw = cg.hw
    t1 = time.perf_counter()
    reference.compute()  # (done already unless nothing ran side by side)
    alone = 0.0 if guesses.given else time.perf_counter() - t1
    began = time.perf_counter()
    beside = here = 0.0  # (the run in order beside the workers; kernels simulated here)
    host, ref = reference.host, reference.values
    dram: dict[str, np.ndarray] = {}
    by_at: dict[int, list[Any]] = {}
    for tr in cg.layouts.transforms:
        by_at.setdefault(tr.at, []).append(tr)

    def transforms(k: int) -> None:
        for tr in by_at.get(k, []):
            t = tr.tensor
            if tr.kind == "pack":
                done = guesses.packed_of(t.name, host[t.value])  # (the host's input)
                dram[t.name] = done if done is not None else pack(host[t.value], t.value.type,
                                                                   t.layout, hw)
            else:
                host[t.value] = unpack(dram[t.name], t.value.type, t.layout)

    runs: list[StepRun] = []
    t_check = 0.0
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
            given = guesses.given.get(k)
            energy = None
            if given is not None and _same_arrays(inputs, given):
                done, energy = guesses.result(k)
                beside = time.perf_counter() - began - t_check - here
                ex = _attached(done, prog, inputs)  # it ran on these very inputs
            else:
                ex = target.execute(prog, inputs)
                here += ex.seconds
            out_t = bind[st.write[0]]
            dram[out_t.name] = ex.outputs[out_t.name]
            t1 = time.perf_counter()
            got = unpack(dram[out_t.name], out_t.value.type, out_t.layout)
            chk = _compare(got, ref[out_t.value])
            t_check += time.perf_counter() - t1
            runs.append(StepRun(k, st, ex, start, chk, energy=energy,
                                instructions=instruction_counts(st.program) if guesses.given
                                else None))
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
    return GraphRun(cg, target, runs, outputs, ref, t_sim + beside + here, t_check, alone,
                    {"reference_total_s": reference.seconds})


# --------------------------------------------------------------- kernels side by side

#: a worker's simulation comes back without the program (the parent has it) nor the DRAM image
_NO_PROGRAM = Program((), (), {})


class _Speculation:
    """The kernels ``_speculate`` handed to worker processes: by kernel step, the inputs each
    was given (``given``), and its execution and energy as its worker gives them
    (``result``); ``close`` ends the workers (one still simulating a kernel nobody asked for
    is killed)."""

    def __init__(self, pool: ForkPool[Any, tuple[Execution, Energy]] | None) -> None:
        self.pool = pool
        self.given: dict[int, dict[str, np.ndarray]] = {}
        #: kernel step -> the position it was handed out at (the pool's item)
        self.position: dict[int, int] = {}
        #: DRAM tensor name -> the interpreter's array and that array packed (``_guess``)
        self.packed: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def packed_of(self, name: str, value: np.ndarray) -> np.ndarray | None:
        """The DRAM tensor ``name`` as ``_guess`` packed it from this very array ``value``
        (the run in order's pack of the graph's input: the same array packed the same way,
        not packed again); None when it packed another array or none."""
        got = self.packed.get(name)
        return got[1] if got is not None and got[0] is value else None

    def submit(self, k: int, inputs: dict[str, np.ndarray]) -> None:
        """Hand kernel step ``k`` to a worker with these ``inputs`` (the constants among
        them are the job's, inherited: the activations travel)."""
        assert self.pool is not None
        self.given[k] = inputs
        self.position[k] = len(self.position)
        self.pool.submit((k, {n: a for n, a in inputs.items() if const_name(n) is None}))

    def result(self, k: int) -> tuple[Execution, Energy]:
        """Kernel step ``k``'s execution and energy (one of ``given``'s), waiting for its
        worker; each asked for once."""
        assert self.pool is not None
        return self.pool.result(self.position[k])

    def close(self) -> None:
        if self.pool is not None:
            self.pool.__exit__(None, None, None)
            self.pool = None


def _speculate(cg: CompiledGraph, reference: Reference, target: AccelTarget,
               jobs: int | None, timelines: bool = True) -> _Speculation:
    """Every kernel simulated side by side on ``jobs`` worker processes (``vta.run.pool``;
    default: the idle cores), each on the inputs it would get if every kernel before it
    computed the interpreter's values: those packed as the plan stores them. A kernel goes to
    a worker as soon as ``reference`` has computed its inputs (this process steps the
    interpreter meanwhile; when it is computed already, most instructions first). Returns
    once every kernel is handed out (the interpreter's run complete): by kernel step, those
    inputs, and the execution as its worker gives it (``_Speculation``; the caller closes
    it). ``_run_accel`` still runs the kernels in order, on the DRAM the previous ones left,
    and takes a kernel's execution from here only when its inputs are those very arrays
    (else it simulates it there, and that worker's result is never waited for): the run is
    the serial run, bit for bit, whatever the kernels compute. The workers also work out
    each kernel's energy (the report's; a function of its program and the bytes it moved);
    without ``timelines`` they send back no timeline (``_simulate_step``). Empty
    (everything serial) with one job or one kernel."""
    kernels = [k for k, st in enumerate(cg.steps) if isinstance(st, Kernel)]
    workers = jobs if jobs is not None else default_jobs()
    if len(kernels) < 2 or workers < 2:
        return _Speculation(None)
    tensors = {t.name: t for t in cg.layouts.tensors}
    reads = {k: _reads(cg, k, tensors) for k in kernels}
    # (a kernel reading a tensor the interpreter does not name is never guessed: in order)
    pending = [k for k in kernels if reads[k] is not None]
    pool: ForkPool[Any, tuple[Execution, Energy]] = ForkPool(
        _simulate_step, (cg, target, timelines), workers, len(kernels))
    speculation = _Speculation(pool.__enter__())
    try:
        for values in reference.steps():
            ready = [k for k in pending if _computed(reads[k], values)]
            if not ready:
                continue
            pending = [k for k in pending if k not in ready]
            if reference.done:  # all at once: the longest first
                ready.sort(key=lambda k: -_program_size(cg, k))
            # each kernel's inputs packed as it is handed out: the first worker starts on its
            # kernel while this process packs the next ones' (rather than after all of them)
            for k in ready:
                got = reads[k]
                assert got is not None
                speculation.submit(k, _guess(cg, k, got, values, speculation.packed))
        pool.end_input()
    except BaseException:
        speculation.close()
        raise
    return speculation


def _computed(reads: Reads | None, values: dict[Value, np.ndarray]) -> bool:
    """Whether ``values`` (the interpreter's so far) holds every activation a kernel reads
    (``reads``, ``_reads``: a constant is always there)."""
    assert reads is not None
    return all(isinstance(t, str) or t.value in values for _, t in reads)


def _program_size(cg: CompiledGraph, k: int) -> int:
    """Step ``k``'s instructions and micro-ops (how long its simulation takes, roughly),
    counted without decoding micro-ops still encoded (``EncodedUops``: the worker that
    simulates the kernel decodes them)."""
    prog = cg.programs[k]
    assert prog is not None
    uops = prog.uops
    n = uops.count() if isinstance(uops, EncodedUops) else sum(len(u) for u in uops.values())
    return len(prog.instructions) + n


#: a kernel's input allocations in its program's order, each with the DRAM tensor it reads or,
#: for one of the step's constants, the constant's name in the kernel (``link.const_name``)
Reads = list[tuple[str, "DramTensor | str"]]


def _reads(cg: CompiledGraph, k: int, tensors: dict[str, DramTensor]) -> Reads | None:
    """Kernel step ``k``'s input allocations (``Reads``), worked out once for ``_speculate``'s
    every step of the interpreter; None when one is neither a constant nor a tensor of the
    layout plan (the interpreter does not name it: that kernel runs in order)."""
    prog = cg.programs[k]
    assert prog is not None
    reads: Reads = []
    for a in prog.inputs:
        const = const_name(a.name)
        got = const if const is not None else tensors.get(a.name)
        if got is None:
            return None
        reads.append((a.name, got))
    return reads


def _guess(cg: CompiledGraph, k: int, reads: Reads, values: dict[Value, np.ndarray],
           packed: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, np.ndarray]:
    """Kernel step ``k``'s inputs by allocation name (``reads``, ``_reads``), once ``values``
    (the interpreter's so far) holds every activation it reads: those packed as the plan
    stores them (``packed`` keeps each packed array beside the array it was packed from, for
    the next kernels and ``_Speculation.packed_of``)."""
    st = cg.steps[k]
    assert isinstance(st, Kernel)
    inputs: dict[str, np.ndarray] = {}
    for name, t in reads:
        if isinstance(t, str):
            inputs[name] = st.consts[t]
            continue
        if name not in packed:
            v = values[t.value]
            packed[name] = (v, pack(v, t.value.type, t.layout, cg.hw))
        inputs[name] = packed[name][1]
    return inputs


def _simulate_step(item: tuple[int, dict[str, np.ndarray]]) -> tuple[Execution, Energy]:
    """A worker's kernel: step ``k`` of the job's graph simulated on its guessed activations
    (``item``) and its constants, its result without the program and the DRAM image
    (``_attached`` puts the program back), and its energy (``graph_summary``'s); its
    timeline only when the job asks for timelines (``_speculate``)."""
    cg, target, timelines = current_job()
    k, acts = item
    st = cg.steps[k]
    prog = cg.programs[k]
    inputs = {a.name: acts[a.name] if a.name in acts else st.consts[const_name(a.name)]
              for a in prog.inputs}
    ex = target.execute(prog, inputs, timeline=timelines)
    assert ex.sim is not None  # the accelerator's execution carries its simulation
    energy = energy_of(st.program, dict(ex.stats.bytes), cg.hw)
    # an allocation that ends as it began (the weights, the inputs) is not sent back
    changed = {n: a for n, a in ex.outputs.items() if n not in inputs or not _same(a, inputs[n])}
    slices = ex.sim.slices if timelines else ()
    return replace(ex, outputs=changed, sim=replace(ex.sim, program=_NO_PROGRAM, inputs={},
                                                    outputs={}, dram=None,
                                                    slices=slices)), energy


def _attached(ex: Execution, program: Program, inputs: dict[str, np.ndarray]) -> Execution:
    """A worker's execution with its program, inputs and the allocations it left as they
    were (``_simulate_step``: equal in dtype, shape and values to the inputs, so read-only
    views of them: ResNet-18's weights are 11.9 MB that a copy would allocate, fault in and
    copy again in this process, and a view cannot be written to change an input); its
    ``sim.dram`` stays None (the final contents of every allocation are in ``outputs``)."""
    assert ex.sim is not None
    outputs = {a.name: ex.outputs[a.name] if a.name in ex.outputs else _read_only(inputs[a.name])
               for a in program.allocations}
    return replace(ex, outputs=outputs, sim=replace(ex.sim, program=program, inputs=inputs,
                                                    outputs=outputs))


def _read_only(a: np.ndarray) -> np.ndarray:
    """A view of ``a`` that cannot be written through (``a`` itself stays writable)."""
    v = a.view()
    v.flags.writeable = False
    return v


def _same(x: np.ndarray, y: np.ndarray) -> bool:
    """``x`` and ``y`` equal in dtype, shape and every value."""
    return x is y or (x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y))


def _same_arrays(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    """Whether ``a`` and ``b`` hold the same arrays by name (dtype, shape and every value)."""
    return a.keys() == b.keys() and all(_same(a[n], b[n]) for n in a)


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
                        "instructions": s.instructions if s.instructions is not None
                        else instruction_counts(st.program)})
            e = s.energy if s.energy is not None else energy_of(st.program, dict(stats.bytes),
                                                                hw)
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
        "reference_total_s": r.extra.get("reference_total_s", r.seconds_reference),
        "host_ms": sum(s.host_s for s in r.steps) * 1e3}


def _gpu() -> Any:
    """``vta.run.graph_gpu`` (a graph on a GPU target), loaded when one is compiled or run: a
    run on the accelerator never loads the GPU back end."""
    return import_module("vta.run.graph_gpu")
