"""Every error vta raises on purpose, in one place, each name with one meaning.

Every error a user can cause derives from ``VtaError``; the CLI prints its message (which
names the file, field, instruction, shape or tensor at fault) as one line and exits with
status 2. The classes are grouped by the layer that raises them; each layer's modules
re-export theirs, so ``from vta.sim import DeadlockError`` keeps working. Errors that are
also a built-in kind (a bad value, an index out of range) derive from that built-in too, so
generic handlers catch them.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = [
    "VtaError", "UsageError",
    # hardware description
    "HwConfigError", "BoardError",
    # the ISA
    "IsaError", "AsmError", "DefinitionError", "ProgramError",
    # the simulators
    "SimError", "InputError", "AddressError", "DeadlockError",
    # the tensor IR
    "NoRule", "TensorIRError", "ScheduleError", "LowerError", "RegionError", "PolyError",
    "CapacityError", "IntrinError", "InterpError", "VerifyError",
    # the accelerator back end
    "CompileError", "NotAffine", "ShapeError", "TensorizeError", "ScratchpadOverflow",
    "LayoutError", "UnknownPass", "UnknownWorkload",
    # the TC frontend
    "TcError", "TcSyntaxError", "TcTypeError", "TcRangeError", "TcSizeError", "MappingError",
    # the GPU back end
    "GpuLoweringError", "CudaRenderError", "EmulatorError", "EmulatorRaceError",
    "ImplicitGemmError", "TaskMappingError", "NvccError", "GpuUnavailableError",
    # graphs
    "GraphError", "OnnxImportError", "HostFallback",
    # runs
    "BuildError", "TargetError", "PlotError", "PluginError",
    # tuning
    "CacheError", "SearchError", "SweepError", "ExecutorError",
]


class VtaError(Exception):
    """Base of every user-facing error in vta."""


class UsageError(VtaError):
    """A bad command line: the message names the flag or argument."""


# ---------------------------------------------------------------- the hardware description


class HwConfigError(VtaError, ValueError):
    """A hardware description is invalid; the message names file, field and expectation."""


class BoardError(VtaError):
    """An unknown board name."""


# ---------------------------------------------------------------- the ISA


class IsaError(VtaError, ValueError):
    """An instruction cannot be encoded (a field is out of range) or a word cannot be decoded."""


class AsmError(VtaError, ValueError):
    """A line of assembly is malformed; the message names the source, line and problem."""


class DefinitionError(VtaError, ValueError):
    """An instruction or intrinsic definition is malformed or collides with another; the
    message names the definition and what is wrong."""


class ProgramError(VtaError, ValueError):
    """A program's DRAM map is invalid (bad kind or count, a name declared twice, an
    allocation the instructions' DRAM address field cannot reach)."""


# ---------------------------------------------------------------- the simulators


class SimError(VtaError):
    """Base of every error raised while preparing or running a simulation."""


class InputError(VtaError, ValueError):
    """An input array does not match what it is bound to: an unknown name, a missing one, the
    wrong shape, dtype or values (a simulator's DRAM allocation, a built module's parameter)."""


class AddressError(SimError, IndexError):
    """An instruction addressed an SRAM entry or DRAM byte outside its buffer."""


class DeadlockError(SimError):
    """The machine ran out of events while a unit still waited on a queue, token or barrier."""


# ---------------------------------------------------------------- the tensor IR


class NoRule(VtaError, TypeError):
    """A table has no rule for a node's type; the message names the table and the type."""


class TensorIRError(VtaError, ValueError):
    """A tensor definition is malformed (shape, dtype, arity); the message names the tensor."""


class ScheduleError(VtaError):
    """A schedule was refused: a primitive (names the stage, the axis and why), a schedule that
    does not fit the hardware (names the buffer, bytes needed and available) or GPU knobs that
    do not fit the problem (names the knob). The one class every schedule layer raises."""


class LowerError(VtaError):
    """The schedule and arguments cannot be lowered; the message names the tensor or stage."""


class RegionError(VtaError):
    """Region inference failed: the region a stage (or an on-chip buffer) must cover is
    unbounded, ambiguous or outside the buffer."""


class PolyError(VtaError):
    """An expression or region the integer analysis cannot handle (not affine, unbounded)."""


class CapacityError(VtaError):
    """Buffers do not fit a scratchpad; the message names them, bytes needed and available."""


class IntrinError(VtaError):
    """An intrinsic registration or lookup failed; the message names the intrinsic."""


class InterpError(VtaError):
    """The function cannot be executed (unknown statement, out-of-bounds access, bad args)."""


class VerifyError(VtaError):
    """The IR breaks an invariant; the message names the node."""


# ---------------------------------------------------------------- the accelerator back end


class CompileError(VtaError):
    """The VTA pipeline cannot compile this function; the message names the culprit."""


class NotAffine(CompileError):
    """An index expression is not affine in the loop variables."""


class ShapeError(CompileError):
    """A workload shape is invalid."""


class TensorizeError(CompileError):
    """A tensorize region cannot become the intrinsic's instruction; the message says why."""


class _Buffer(Protocol):
    @property
    def name(self) -> str: ...


class ScratchpadOverflow(CompileError):
    """The on-chip buffers of a scope need more than the scratchpad holds; ``buffer`` is the
    one that did not fit, ``entries`` what it needs per copy (``copies`` virtual threads),
    ``available`` the entries left for it."""

    def __init__(self, msg: str, buffer: _Buffer | None = None, entries: int = 0,
                 copies: int = 1, available: int = 0) -> None:
        super().__init__(msg)
        self.buffer, self.entries, self.copies, self.available = buffer, entries, copies, available


class LayoutError(VtaError):
    """A compute (or an array) does not fit the accelerator's layout; names tensor and index."""


class UnknownPass(VtaError):
    """``--dump-ir`` named no pass of the pipeline."""


class UnknownWorkload(VtaError):
    """No workload or network has that name."""


# ---------------------------------------------------------------- the TC frontend


class _Source(Protocol):
    @property
    def name(self) -> str: ...

    def locate(self, pos: Any) -> str: ...

    def snippet(self, pos: Any) -> str: ...


class TcError(VtaError):
    """A TC program is malformed; the message names the place (and shows it when known)."""

    def __init__(self, message: str, source: _Source | None = None, pos: Any = None) -> None:
        self.message, self.source, self.pos = message, source, pos
        if source is not None and pos is not None:
            text = f"{source.locate(pos)}: {message}\n{source.snippet(pos)}"
        elif source is not None:
            text = f"{source.name}: {message}"
        else:
            text = message
        super().__init__(text)


class TcSyntaxError(TcError):
    """The text does not follow the TC grammar (docs/tc.md)."""


class TcTypeError(TcError):
    """A name, arity, dtype or statement form is wrong (unknown tensor, index of a float, a
    reduction index without a reduction operator, ...)."""


class TcRangeError(TcError):
    """Range inference failed: an index whose range is ambiguous or unbounded (add a ``where``
    clause), an empty range, or an access that reads outside its tensor."""


class TcSizeError(TcError):
    """The sizes given for a definition are missing, unknown or not positive integers."""


class MappingError(VtaError):
    """Mapping options that do not fit the kernel or the GPU; the message names the option."""


# ---------------------------------------------------------------- the GPU back end


class GpuLoweringError(VtaError):
    """The IR cannot be lowered to a GPU kernel; the message names the loop or buffer."""


class CudaRenderError(VtaError):
    """The IR holds something the CUDA renderer cannot express; the message names it."""


class EmulatorError(VtaError):
    """The kernel did something a GPU would not allow or would do wrong (out-of-bounds access,
    divergent barrier, non-uniform WMMA operand); the message names the buffer or statement."""


class EmulatorRaceError(EmulatorError):
    """Two threads touched the same shared (or global) element without a barrier between."""


class ImplicitGemmError(VtaError):
    """A compute that is not a contraction with an element-wise epilogue; names the stage."""


class TaskMappingError(VtaError):
    """A task mapping built or used wrongly (rank mismatch, bad shape, worker out of range)."""


class GpuTargetError(VtaError, ValueError):
    """An unknown GPU architecture or a ``GpuTarget`` with an impossible field; names the field."""


class KernelResourceError(VtaError):
    """A kernel that ptxas reports spilling registers or exceeding a limit of its target; the
    message names the kernel, the resource, its amount and the limit."""


class NvccError(VtaError):
    """nvcc is missing or rejected a kernel; the message carries nvcc's diagnostics."""


class GpuUnavailableError(VtaError):
    """CuPy is not installed or no CUDA GPU is usable."""


# ---------------------------------------------------------------- graphs


class GraphError(VtaError):
    """A graph is malformed or an operator does not apply to its inputs; the message names
    the node (or value) and the field at fault."""


class OnnxImportError(GraphError):
    """A model the importer does not take; the message names the node and why."""


class HostFallback(VtaError):
    """An operator group no kernel of the target takes; it runs on the host, and the message
    (the reason) is reported beside it."""


# ---------------------------------------------------------------- runs


class BuildError(VtaError):
    """``build`` was given something it cannot compile (target, hardware, arguments)."""


class PluginError(VtaError):
    """A plugin (``--plugin``, a ``vta.intrinsics`` entry point) that cannot be loaded or
    whose definitions fail: the message names it."""


class TargetError(VtaError):
    """A target was asked for something it cannot do (an unknown name, timing on the emulator,
    a missing hardware config)."""


class PlotError(VtaError):
    """The picture cannot be written (the file's directory, its format)."""


# ---------------------------------------------------------------- tuning


class CacheError(VtaError):
    """A cache file that cannot be used: not SQLite, not a vta cache, unreadable."""


class SearchError(VtaError):
    """An unknown search or a bad budget."""


class SweepError(VtaError):
    """A bad grid file: the message names the file and the field."""


class ExecutorError(VtaError):
    """A cluster address that is malformed or cannot be reached, or Dask missing."""
