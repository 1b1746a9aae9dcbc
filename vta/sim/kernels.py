"""The cycle-level machine's on-chip state and its vectorised steps: DMA, and the micro-op
loop of every compute instruction (GEMM, the ALU's functions, a user's unit).

This is the machine's fast implementation of the loops, not the definition: ``reference.py``
walks the same loops one execution at a time (sharing no code with this module or
``gemm.py``), and the differential tests check the two against each other. What an execution
*computes* is the instruction's own semantics (``InstructionDef.semantics``), the one numpy
function both simulators call; ``gemm.py`` is a faster evaluation of GEMM's.

The loops (defined by reference.py; see docs/simulator.md):

* LOAD copies ``data_rows`` rows of ``x_size`` entries (rows ``x_stride`` entries apart in DRAM)
  into a contiguous SRAM image of ``rows x cols`` entries, zeros in the pads its memory type
  writes (``vta.isa.insn.Load``, ``builtins.load_image``): INP and ACC write their pads even
  without data, WGT none, UOP copies ``x_size`` micro-ops. A LOAD without data or pads writes
  nothing.
* A micro-op instruction runs ``for o < iter_out: for i < iter_in: for u in uops[bgn:end]``;
  operand ``f`` of execution ``(o, i, u)`` is entry ``u.f + o*f_factor_out + i*f_factor_in``
  (+ a base field) of its scratchpad. ``reset`` does what the definition says on the config
  (``InstructionDef.reset_mode``: zero acc and out; zero acc and keep out; zero acc and write
  to out what the execution computes, vta.cc's GEMM; or nothing, vta.cc's ALU). An
  ``accumulate`` instruction adds each execution's result to its destination (wrapping: the
  executions of one instruction may be summed first); an ``update`` instruction replaces it, in
  loop order (a later execution sees an earlier one's write), computed exactly then wrapped to
  acc.
* Narrowing: after a compute instruction, ``out[a]`` = the low out-dtype bits of ``acc[a]``
  (two's complement truncation), but for a reset's ``out`` as above.
* STORE copies ``y_size x x_size`` contiguous out entries to DRAM rows ``x_stride`` apart;
  overlapping rows are written in row order (the later row wins).

Every SRAM index and DRAM byte is bounds-checked first; a violation raises ``AddressError``
naming the instruction, the buffer and the offending index, before anything is modified.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple, TypeVar

import numpy as np

from vta.config import BUFFER_KINDS, DATA_KINDS, HwConfig
from vta.errors import AddressError
from vta.isa import (
    Alu,
    AluOp,
    Instruction,
    InstructionDef,
    Load,
    MemType,
    Operand,
    Program,
    Store,
    uop_layout,
)
from vta.isa.asm import where
from vta.isa.builtins import ALU, load_image, shift_amount, store_rows
from vta.sim.dram import Dram, entry_spec

__all__ = ["Sram", "Ctx", "dram_rows", "dram_run", "exec_load", "exec_store", "exec_microop",
           "microop_indices", "apply_sums", "as_slice", "Entries", "count_raw_hazards",
           "operand_label", "alu_shortcut", "add_wrapped", "shared_plans", "shared_plan",
           "run_heads", "permuted_run", "LoadCopy", "load_copy", "LoadPlace", "load_place",
           "affine_grid", "grid_entries"]


class Ctx(NamedTuple):
    """Which instruction is executing (for error messages). A typed named tuple: one is made
    per instruction executed, and a frozen dataclass costs about three times as much to
    construct."""

    #: the instruction's index in the program (it hides ``tuple.index``, which no caller uses)
    index: int  # type: ignore[assignment]
    insn: Instruction
    program: Program | None

    def bounds(self, buffer: str, index: int, size: int, detail: str = "") -> AddressError:
        return AddressError(f"{where(self.index, self.insn, self.program)}: {buffer} index "
                           f"{index} out of range (size {size}){detail}")


class Sram:
    """The five scratchpads. Micro-ops are kept decoded as three int64 index arrays."""

    def __init__(self, hw: HwConfig) -> None:
        self.hw = hw
        self.depth = {k: hw.depth(k) for k in BUFFER_KINDS}
        self.uop = np.zeros((3, self.depth["uop"]), dtype=np.int64)  # rows: dst, src, wgt
        self.data: dict[str, np.ndarray] = {}
        #: each kind's little-endian DRAM entry dtype and entry shape (``dram.entry_spec``)
        self.spec = {k: entry_spec(hw, k) for k in BUFFER_KINDS}
        for kind in DATA_KINDS:
            dtype, shape = self.spec[kind]
            self.data[kind] = np.zeros((self.depth[kind], *shape), dtype=dtype.newbyteorder("="))
        #: each data kind's entries as one flat run of bytes (a view), where they are laid
        #: out as DRAM's (little-endian, as on every host numpy ships for): a LOAD copies
        #: DRAM's bytes in unconverted (``load_copy``)
        self.raw = {k: a.reshape(-1).view(np.uint8) for k, a in self.data.items()
                    if a.dtype == self.spec[k][0]}
        self.acc_dtype = self.data["acc"].dtype
        self.out_dtype = self.data["out"].dtype
        self._uop_fields = [(pos, (1 << width) - 1) for _, pos, width in uop_layout(hw)]
        #: bumped by every LOAD.UOP that writes micro-ops: the index plans below key on it
        self.uop_version = 0
        #: ``exec_microop``'s index work per (instruction's identity, ``uop_version``): the
        #: run's own plans, found in ``shared`` (by content) when first needed
        self.plans: dict[tuple[int, int], _MicroPlan] = {}
        #: the plans every run on ``hw`` shares (``shared_plans``)
        self.shared = shared_plans(hw)
        #: ``exec_load``'s ``load_copy`` of each LOAD by the instruction's identity, beside
        #: the instruction and the DRAM image it reads (held here: neither identity is reused
        #: by another object while kept): a tiled program issues one LOAD object many times
        self.loads: dict[int, tuple[Load, Dram, LoadCopy | None]] = {}
        #: ``load_place`` of each LOAD by its fields but its DRAM address (``load_copy``)
        self.places: dict[tuple[Any, ...], LoadPlace | None] = {}

    def decode_uops(self, words: np.ndarray) -> np.ndarray:
        """uint32 words -> (3, n) int64 (dst, src, wgt)."""
        w = words.astype(np.int64)
        return np.stack([(w >> pos) & mask for pos, mask in self._uop_fields])


# ------------------------------------------------------------------------------ shared plans

#: plans kept per config (``shared_plans``), and the bytes of micro-ops their keys may hold,
#: before that cache starts afresh (a plan's arrays are smaller than its key: the resnet18
#: graph's 369 distinct plans hold 1.3 MB of keys and 0.6 MB of arrays), and the configs kept
_MAX_SHARED, _MAX_SHARED_BYTES, _MAX_CONFIGS = 4096, 8 << 20, 8

_Plan = TypeVar("_Plan")


class _SharedPlans:
    """One config's shared plans (``shared_plans``) and the bytes of their keys' micro-ops."""

    def __init__(self) -> None:
        self.plans: dict[Any, Any] = {}
        self.bytes = 0
        #: ``alu_shortcut`` of each built-in ALU function by its fields (``_builtin_alu``)
        self.alus: dict[tuple[Any, bool, int], AluShortcut | None] = {}


@lru_cache(maxsize=_MAX_CONFIGS)
def shared_plans(hw: HwConfig) -> _SharedPlans:
    """The index plans of micro-op instructions on ``hw`` (``_MicroPlan``, and ``gemm.py``'s)
    shared by every run, keyed by what each is a pure function of: the instruction's fields
    its plan reads, its definition and the contents of the micro-ops it reads
    (``shared_plan``). A run keys its own plans by its micro-op version (cheap) and asks here
    on a miss, so a program simulated again (a bench's repeats, the compiler timing its
    candidates, a sweep's energy run) and a network's identical layers build each plan once.
    Per config, like the machine's descriptions (``machine._described``): hashing a
    HwConfig per plan would cost more than the lookup saves."""
    return _SharedPlans()


def shared_plan(sram: Sram, key: Any, uop_bgn: int, uop_end: int,
                build: Callable[[], _Plan]) -> _Plan:
    """The plan ``shared_plans`` holds for ``key`` (the instruction's fields and definition)
    and the micro-ops ``uop_bgn:uop_end`` now in ``sram``, else ``build()`` (which checks the
    indices and raises what it finds: nothing is kept then), kept."""
    shared = sram.shared
    uops = sram.uop[:, uop_bgn: uop_end].tobytes()
    content = (key, uops)
    got = shared.plans.get(content)
    if got is None:
        got = build()
        if len(shared.plans) >= _MAX_SHARED or shared.bytes >= _MAX_SHARED_BYTES:
            shared.plans.clear()
            shared.bytes = 0
        shared.plans[content] = got
        shared.bytes += len(uops)
    return got


# ------------------------------------------------------------------------------ DMA


def dram_rows(dram: Dram, ctx: Ctx, kind: str, base: int, rows: int, cols: int,
              stride: int) -> np.ndarray:
    """A ``(rows, cols * elem_bytes)`` uint8 strided view of DRAM, bounds-checked."""
    eb = dram.elem_bytes[kind]
    end = (base + (rows - 1) * stride + cols) * eb
    if end > dram.buf.size:
        last = base + (rows - 1) * stride + cols - 1
        raise AddressError(f"{where(ctx.index, ctx.insn, ctx.program)}: DRAM {kind} element "
                          f"{last} (byte {end - 1}) is outside the DRAM image "
                          f"({dram.buf.size} bytes)")
    first = base * eb
    if rows == 1 or stride == cols:  # one contiguous span (the common tile row)
        return dram.buf[first: first + rows * cols * eb].reshape(rows, cols * eb)
    if stride > cols and first + rows * stride * eb <= dram.buf.size:  # rows inside a slice
        return dram.buf[first: first + rows * stride * eb].reshape(rows, stride * eb)[
            :, : cols * eb]
    # rows up to the image's end (the slice above would pass it): a strided view made by
    # ``np.ndarray`` over the image's memory (checked against its size: the bound above),
    # cheaper than ``as_strided``'s interface object
    return np.ndarray((rows, cols * eb), np.uint8, dram.buf, first, (stride * eb, 1))


def dram_run(dram: Dram, ctx: Ctx, kind: str, base: int, n: int) -> np.ndarray:
    """The bytes of ``n`` entries of ``kind`` from element ``base`` on, as one 1-D uint8 view
    of DRAM: ``dram_rows``' one row of ``n`` (its bounds check and error), without the
    row-shaped view a run of rows lying back to back does not need."""
    eb = dram.elem_bytes[kind]
    first = base * eb
    if first + n * eb > dram.buf.size:
        dram_rows(dram, ctx, kind, base, 1, n, n)  # raises the error naming the element
    return dram.buf[first: first + n * eb]


def _check_sram(ctx: Ctx, sram: Sram, kind: str, base: int, n: int) -> None:
    if base + n > sram.depth[kind]:
        raise ctx.bounds(kind, base + n - 1, sram.depth[kind],
                         f" (entries {base}..{base + n - 1})")


#: each ``MemType``'s buffer kind, by value (``MemType.kind``'s own table, read here as a
#: tuple: the property is a Python call, and the LOAD path asks once per instruction)
_KIND_OF = tuple(m.kind for m in sorted(MemType))


#: a LOAD of data as ``load_copy`` finds it on one run's buffers: ``(fill, dst, src,
#: written)``: the image's bytes to zero first (its pads' rows and columns with the data's
#: place: one fill; None without pads), where the data goes (shaped as ``src``), DRAM's
#: bytes of the data, and what ``exec_load`` returns. Views of the run's DRAM image and
#: scratchpad, which a run never replaces: the same instruction issued again (a tiled
#: loop's) is the same copy (``Sram.loads``), its fields read and checked once. A plain
#: tuple: one is made per distinct LOAD, and unpacked on every issue
LoadCopy = tuple[np.ndarray | None, np.ndarray, np.ndarray, tuple[str, int, int]]


#: where a LOAD of data goes in one run's scratchpad (``load_place``): ``(fill, dst, rows,
#: written)``: ``LoadCopy``'s fill, dst and written, and the shape DRAM's run of bytes takes
#: to match ``dst`` (None: as it is, a run or rows as ``dram_rows`` gives them). Views of
#: the scratchpad alone, so one serves every LOAD with the same fields but its DRAM address
#: (a tiled loop's LOADs of the next tile into the same place)
LoadPlace = tuple[np.ndarray | None, np.ndarray, tuple[int, int] | None, tuple[str, int, int]]


def load_place(sram: Sram, insn: Load, eb: int) -> LoadPlace | None:
    """The scratchpad's side of ``load_copy`` (``LoadPlace``; ``eb``: bytes per entry), or
    None where the general path runs (micro-ops, no data, an SRAM index out of range, a
    host whose SRAM is not laid out as DRAM). A function of the LOAD's fields but its DRAM
    address."""
    mem = insn.mem
    if mem is MemType.UOP:
        return None
    kind = _KIND_OF[mem]
    dst = sram.raw.get(kind)
    rows, cols = insn.y_size, insn.x_size
    if mem is MemType.WGT:  # its load ignores the pad fields (``Load.pads``)
        y0 = y1 = x0 = x1 = 0
    else:
        y0, y1, x0, x1 = insn.pad_y0, insn.pad_y1, insn.pad_x0, insn.pad_x1
    lo = insn.sram_base
    width = x0 + cols + x1
    hi = lo + (y0 + rows + y1) * width
    if dst is None or not rows * cols or hi > sram.depth[kind]:
        return None
    span = cols * eb
    run = rows == 1 or insn.x_stride == cols  # DRAM's rows back to back: one run of bytes
    img = dst[lo * eb: hi * eb]
    fill = None
    if y0 or y1 or x0 or x1:  # the pads a tile has (an edge tile pads one or two sides)
        fill = img
        if rows == 1 or not (x0 or x1):  # the data one run of the image's bytes
            at = (y0 * width + x0) * eb
            img = img[at: at + rows * span]
        else:
            img = img.reshape(y0 + rows + y1, width * eb)[y0: y0 + rows, x0 * eb: x0 * eb + span]
    shape = None
    if img.ndim == 1 and not run:  # DRAM's side rows: the image's run as rows too
        img = img.reshape(rows, span)
    elif img.ndim == 2 and run:  # the image's side rows: DRAM's run as rows too
        shape = (rows, span)
    return fill, img, shape, (kind, lo, hi)


#: ``Sram.places``' miss (None is a place: the general path's)
_NO_PLACE: Any = object()


def load_copy(sram: Sram, dram: Dram, insn: Load, ctx: Ctx) -> LoadCopy | None:
    """A LOAD of inp, wgt or acc data inside its scratchpad as a ``LoadCopy``: the same entries
    ``load_image`` gives, written in place as bytes (``Sram.raw``: the SRAM's entries are laid
    out as DRAM's, so the copy converts nothing). A padded image is zeroed whole, then its
    data copied in (the bytes the pads and the data write, with one fill instead of one per
    pad side); the data's rows are one run of bytes on either side where they lie back to
    back there (a row, rows without gaps), copied as one (no row-shaped views). The
    scratchpad's side is ``load_place``'s, found once per run for the LOAD's fields but its
    DRAM address (``Sram.places``); DRAM's side is read here. None where the general path
    runs instead (``load_place``). A DRAM index out of range raises here (``dram_run``,
    ``dram_rows``)."""
    key = (insn.mem, insn.sram_base, insn.y_size, insn.x_size, insn.x_stride, insn.pad_y0,
           insn.pad_y1, insn.pad_x0, insn.pad_x1)
    place = sram.places.get(key, _NO_PLACE)
    kind = _KIND_OF[insn.mem]
    if place is _NO_PLACE:
        place = sram.places[key] = load_place(sram, insn, dram.elem_bytes[kind])
    if place is None:
        return None
    fill, img, shape, written = place
    rows, cols = insn.y_size, insn.x_size
    if rows == 1 or insn.x_stride == cols:  # DRAM's rows back to back: one run of bytes
        raw = dram_run(dram, ctx, kind, insn.dram_base, rows * cols)
        if shape is not None:
            raw = raw.reshape(shape)
    else:
        raw = dram_rows(dram, ctx, kind, insn.dram_base, rows, cols, insn.x_stride)
    return fill, img, raw, written


def exec_load(sram: Sram, dram: Dram, insn: Load, ctx: Ctx) -> tuple[str, int, int]:
    """Execute a LOAD; returns ``(kind, first, end)``: the SRAM entries it wrote. A LOAD of
    data in range is a ``load_copy``, found once per instruction and image (``Sram.loads``);
    the rest, errors included, the general path below."""
    memo = sram.loads.get(id(insn))
    if memo is not None and memo[1] is dram:
        copy = memo[2]
    else:
        copy = load_copy(sram, dram, insn, ctx)
        sram.loads[id(insn)] = insn, dram, copy
    if copy is not None:
        fill, dst, src, written = copy
        if fill is not None:
            fill.fill(0)
        dst[...] = src
        return written
    kind = insn.mem.kind
    n = insn.sram_elems
    if n == 0:
        return kind, insn.sram_base, insn.sram_base
    _check_sram(ctx, sram, kind, insn.sram_base, n)
    dtype, shape = sram.spec[kind]
    rows, cols = insn.data_rows, insn.x_size
    pads = insn.pads
    if insn.data_elems:
        raw = dram_rows(dram, ctx, kind, insn.dram_base, rows, cols, insn.x_stride)
        data = np.ascontiguousarray(raw).view(dtype).reshape(rows, cols, *shape)
    else:  # pads only
        data = np.zeros((rows, cols, *shape), dtype=dtype)
    # without pads LOAD's image is its data (``load_image``), which then need not be built
    img = (data if pads == (0, 0, 0, 0) else load_image(insn, data)).reshape(n, *shape)
    lo, hi = insn.sram_base, insn.sram_base + n
    if kind == "uop":
        sram.uop[:, lo:hi] = sram.decode_uops(img)
        sram.uop_version += 1
    else:
        sram.data[kind][lo:hi] = img
    return kind, lo, hi


def exec_store(sram: Sram, dram: Dram, insn: Store, ctx: Ctx) -> None:
    """Execute a STORE of out entries to DRAM: their bytes as they lie in the scratchpad
    where it is laid out as DRAM (``Sram.raw``: a view, no converted copy), else converted
    to DRAM's dtype first."""
    n = insn.sram_elems
    if n == 0:
        return
    _check_sram(ctx, sram, "out", insn.sram_base, n)
    rows, cols, lo = insn.y_size, insn.x_size, insn.sram_base
    dst = dram_rows(dram, ctx, "out", insn.dram_base, rows, cols, insn.x_stride)
    raw = sram.raw.get("out")
    if raw is not None:  # the entries' bytes in place, one row of bytes per entry
        eb = dram.elem_bytes["out"]
        entries = raw[lo * eb: (lo + n) * eb].reshape(n, eb)
    else:
        entries = sram.data["out"][lo: lo + n].astype(sram.spec["out"][0])
    src = store_rows(insn, entries).view(np.uint8).reshape(rows, -1)
    if rows > 1 and insn.x_stride < cols:  # overlapping rows: in row order
        for r in range(rows):
            dst[r] = src[r]
    else:
        dst[...] = src


# ------------------------------------------------------------------------------ loop indices


#: at most this many executions of each micro-op (iter_out * iter_in) for ``_loop`` to list
#: their offsets in Python (one array made from a list) rather than by numpy's arange arithmetic
_LISTED_ITERS = 64


def _loop(base: np.ndarray, iter_out: int, iter_in: int, f_out: int, f_in: int,
          offset: int = 0) -> np.ndarray:
    """``base[u] + offset + o*f_out + i*f_in`` for every (o, i, u) in loop order, flattened (a
    fresh array). The offsets ``offset + o*f_out + i*f_in`` of the few iterations are made
    first, then added to ``base`` once: one pass over the executions (the instruction's base
    field included) instead of one to add it and one per loop axis."""
    if iter_out == 1 and iter_in == 1:
        return base + offset
    n = iter_out * iter_in
    if n <= _LISTED_ITERS:
        steps = np.array([offset + o * f_out + i * f_in for o in range(iter_out)
                          for i in range(iter_in)], dtype=np.int64)
    else:
        steps = (np.arange(iter_out, dtype=np.int64)[:, None] * f_out
                 + np.arange(iter_in, dtype=np.int64)[None, :] * f_in + offset).ravel()
    return (steps[:, None] + base).ravel()


def _out_of_range(ctx: Ctx, buffer: str, idx: np.ndarray, size: int,
                  dims: tuple[int, int, int], uop_bgn: int) -> AddressError:
    """The error naming the first execution whose index in ``idx`` is ``size`` or more."""
    k = int(np.argmax(idx >= size))
    o, i, u = np.unravel_index(k, dims)
    return ctx.bounds(buffer, int(idx[k]), size, f" at iteration o={o}, i={i}, uop {uop_bgn + u}")


def operand_label(d: InstructionDef, op: Operand) -> str:
    """How bounds errors name an operand: its scratchpad, and which operand when the
    destination's scratchpad is read too (``acc (ALU src)``)."""
    if op.writes or op.memory != d.dst.memory:
        return op.memory
    return f"{op.memory} ({d.name.split('.')[0]} {op.name})"


_FIELD_ROW = {"dst": 0, "src": 1, "wgt": 2}


def microop_indices(sram: Sram, insn: Any, d: InstructionDef, ctx: Ctx,
                    reads: tuple[Operand, ...] | None = None) -> dict[str, np.ndarray]:
    """The entry index of every operand (the destination, and each operand this instruction
    reads: ``reads``, ``d.reads`` when not given) for every execution, in loop order,
    bounds-checked."""
    if insn.uop_end > sram.depth["uop"]:
        raise ctx.bounds("uop", insn.uop_end - 1, sram.depth["uop"],
                         f" (uop range {insn.uop_bgn}:{insn.uop_end})")
    u = sram.uop[:, insn.uop_bgn: insn.uop_end]
    dims = (insn.iter_out, insn.iter_in, u.shape[1])
    out: dict[str, np.ndarray] = {}
    for op in (d.dst, *(d.reads(insn, sram.hw) if reads is None else reads)):
        fo, fi = (getattr(insn, op.factors[0]), getattr(insn, op.factors[1])) if op.factors \
            else (0, 0)
        idx = _loop(u[_FIELD_ROW[op.name]], insn.iter_out, insn.iter_in, fo, fi,
                    op.offset(insn))
        size = sram.depth[op.memory]
        if idx.size and int(idx.max()) >= size:  # the label is only made for the error
            raise _out_of_range(ctx, operand_label(d, op), idx, size, dims, insn.uop_bgn)
        out[op.name] = idx
    return out


# ------------------------------------------------------------------------------ compute


@dataclass(frozen=True, slots=True)
class _Grid:
    """An index sequence that is an affine grid: ``first + sum(i[d] * steps[d])`` over the
    positions ``i`` of ``shape`` in C order (a conv's output pixels: rows of columns; its
    taps: kernel rows of kernel columns)."""

    first: int
    shape: tuple[int, ...]
    steps: tuple[int, ...]


#: at most this many dimensions in a ``_Grid`` (a sequence that needs more is gathered)
_MAX_GRID_DIMS = 8


def affine_grid(seq: np.ndarray) -> _Grid | None:
    """``seq`` (1-D, integer, not empty) as a ``_Grid``, or None when it is not one (within
    ``_MAX_GRID_DIMS`` dimensions). Innermost first: the run of constant step that starts the
    sequence is the last dimension; the sequence must be rows of that run, each the first
    row shifted; the rows' starts are then decomposed the same way. A row is the first shifted
    when it steps by the same constant, so a level is checked on the one difference array
    that finds its run: every difference other than the step falls between two rows (a few
    numpy calls per level, each on the whole level: a plan asks this of small sequences)."""
    shape: list[int] = []
    steps: list[int] = []
    cur = seq.astype(np.int64, copy=False)
    while cur.size > 1:
        if len(shape) == _MAX_GRID_DIMS:
            return None
        diff = cur[1:] - cur[:-1]
        step = int(diff[0])
        bad = (diff != step).nonzero()[0]
        run = cur.size
        if bad.size:
            run = int(bad[0]) + 1
            # rows of ``run``: the differences between two rows are at run - 1, 2 run - 1, ...
            if cur.size % run or bool(((bad + 1) % run).any()):
                return None
        shape.append(run)
        steps.append(step)
        cur = cur[::run]
    return _Grid(int(seq[0]), tuple(reversed(shape)), tuple(reversed(steps)))


def grid_entries(a: np.ndarray, g: _Grid) -> np.ndarray:
    """The entries of ``a`` (entries first, each C-contiguous) that the grid ``g`` names, in
    its order, as a strided view ``(*g.shape, *a.shape[1:])`` (``a[seq]`` without the
    gather: a step of 0 repeats an entry). Made by ``np.ndarray`` over ``a``'s memory, which
    checks the extent against ``a``'s (cheaper than ``as_strided``'s interface object)."""
    row = a.strides[0]
    return np.ndarray((*g.shape, *a.shape[1:]), a.dtype, a, g.first * row,
                      (*(s * row for s in g.steps), *a.strides[1:]))


#: distinct entries of a buffer: an index array, or the same run of entries as a slice
Entries = np.ndarray | slice


def as_slice(idx: np.ndarray) -> Entries:
    """``idx`` as a slice when it is one ascending run of consecutive entries (then reading and
    writing them is a view, not a gather or a scatter: the same entries, faster), else
    ``idx`` itself."""
    n = idx.size
    if n == 0:
        return idx
    lo = int(idx[0])
    if int(idx[-1]) - lo != n - 1 or (n > 1 and not bool((idx[1:] - idx[:-1] == 1).all())):
        return idx
    return slice(lo, lo + n)


def run_heads(s: np.ndarray) -> np.ndarray:
    """Whether each element of the sorted 1-D ``s`` starts a run of equal ones (the first is
    True, also for an empty ``s``): the bool mask the plans find their groups by, built by one
    ``concatenate`` (``np.r_``'s index parsing costs more than the comparison)."""
    return np.concatenate(([True], s[1:] != s[:-1]))


def apply_sums(sram: Sram, entries: Entries, sums: np.ndarray) -> None:
    """``acc[entries] += sums`` (exact int64 sums; ``entries`` distinct), wrapped; then narrow
    into out."""
    acc = sram.data["acc"]
    new = (acc[entries].astype(np.int64) + sums).astype(sram.acc_dtype)
    acc[entries] = new
    sram.data["out"][entries] = new.astype(sram.out_dtype)


def add_wrapped(sram: Sram, entries: Entries, sums: np.ndarray) -> None:
    """``apply_sums`` with ``sums`` already wrapped to the acc dtype: the addition wraps in
    that dtype, the same bits modulo ``2**bits`` (a signed integer acc, the only kind the
    config allows), without the int64 round trip."""
    acc = sram.data["acc"]
    if isinstance(entries, slice):  # a view: add in place
        view = acc[entries]
        np.add(view, sums, out=view)
        sram.data["out"][entries] = view
        return
    new = acc[entries] + sums
    acc[entries] = new
    sram.data["out"][entries] = new


def _set(sram: Sram, entries: Entries, exact: np.ndarray) -> None:
    new = exact.astype(sram.acc_dtype)
    sram.data["acc"][entries] = new
    sram.data["out"][entries] = new.astype(sram.out_dtype)


def _needs_order(a: np.ndarray, sa: np.ndarray, reads: list[np.ndarray], depth: int) -> bool:
    """Whether loop order matters for an update: a destination repeats (``sa``: ``a``
    sorted), or an execution reads an acc entry an earlier execution wrote."""
    if sa.size > 1 and bool((sa[1:] == sa[:-1]).any()):
        return True
    if not reads:
        return False
    written_at = np.full(depth, a.size, dtype=np.int64)  # op position writing each entry
    written_at[a] = np.arange(a.size)
    pos = np.arange(a.size)
    return any(bool((written_at[r] < pos).any()) for r in reads)


def _gather(sram: Sram, d: InstructionDef, insn: Any, idx: dict[str, np.ndarray],
            sel: Any = slice(None)) -> dict[str, np.ndarray]:
    return {op.name: sram.data[op.memory][idx[op.name][sel]].astype(np.int64)
            for op in d.reads(insn, sram.hw)}


@dataclass(frozen=True, slots=True)
class _MicroPlan:
    """The index work of one micro-op instruction over the micro-ops in SRAM: what depends
    only on its fields and those micro-ops, so the same instruction issued again (a tiled
    loop) pays only the gathers and its semantics."""

    idx: dict[str, np.ndarray]  # ``microop_indices``
    mode: str | None  # ``reset_mode``
    hazards: int
    #: ``idx`` with each consecutive run as a slice (``as_slice``), for the batched paths
    sel: dict[str, Entries] | None = None
    #: an update: whether loop order matters (``_needs_order``)
    ordered: bool = False
    #: an accumulate: executions sorted by destination, and where each destination starts
    order: np.ndarray | None = None
    starts: np.ndarray | None = None
    entries: np.ndarray | None = None  # the distinct destinations, sorted
    #: an update by a built-in ALU function, in the acc dtype (``alu_shortcut``)
    alu: AluShortcut | None = None
    #: ``alu``'s src entries (``sel``'s order) as a grid when ``sel`` holds them as an index
    #: array and dst as one slice (a bias broadcast over a tile, a pooling window's step):
    #: read through ``grid_entries``' view instead of gathered
    src_grid: _Grid | None = None


def _micro_plan(sram: Sram, insn: Any, d: InstructionDef, ctx: Ctx, lag: int) -> _MicroPlan:
    """The plan of ``insn`` (definition ``d``) over the micro-ops now in ``sram``: its index
    plan (``_index_plan``) with its ALU function (``_with_alu``)."""
    return _with_alu(sram, insn, d, _index_plan(sram, insn, d, ctx, lag))


def _index_plan(sram: Sram, insn: Any, d: InstructionDef, ctx: Ctx, lag: int) -> _MicroPlan:
    """``_micro_plan`` without its built-in ALU function (``alu`` None; ``src_grid`` set where
    ``sel`` holds src as an index array and dst as one slice, whether or not a function will
    read it): a function of the fields ``_plan_key`` keeps, so a built-in ALU function's
    instructions over the same micro-ops and loops (an epilogue's shift, clip and add, each
    with its immediate) share one."""
    reads = d.reads(insn, sram.hw)  # asked once: the indices and the hazards use it
    idx = microop_indices(sram, insn, d, ctx, reads)
    a = idx["dst"]
    mode = d.reset_mode(insn, sram.hw)
    if a.size == 0 or mode in ("zero", "keep"):
        return _MicroPlan(idx, mode, 0)
    if mode is None and not reads and d.kind != "accumulate":
        lo = permuted_run(a)
        if lo is not None:  # ``_update_plan``'s answer for distinct destinations read by none
            return _MicroPlan(idx, mode, 0, sel={"dst": slice(lo, lo + a.size)})
    acc_reads = [idx[op.name] for op in reads if op.memory == "acc"]
    hazards = count_raw_hazards(a, (a, *acc_reads), lag)
    if mode == "sum":
        return _MicroPlan(idx, mode, hazards)
    if d.kind == "accumulate":
        order = a.argsort(kind="stable")
        sa = a[order]
        starts = run_heads(sa).nonzero()[0]
        return _MicroPlan(idx, mode, hazards, order=order, starts=starts, entries=sa[starts])
    perm = a.argsort(kind="stable")
    ordered = _needs_order(a, a[perm], acc_reads, sram.depth["acc"])
    if ordered:
        return _MicroPlan(idx, mode, hazards, ordered=True)
    # distinct destinations, none read after an earlier execution wrote it: every read
    # sees the value from before the instruction, so the executions may go in any order;
    # sorted by destination, the runs an epilogue's loop interleaves (o, i strides)
    # become one slice of acc (views instead of gathers and scatters)
    sel = {k: as_slice(v[perm]) for k, v in idx.items()}
    src = sel.get("src")
    grid = affine_grid(src) if isinstance(src, np.ndarray) and isinstance(sel["dst"], slice) \
        else None
    return _MicroPlan(idx, mode, hazards, sel=sel, src_grid=grid)


def _with_alu(sram: Sram, insn: Any, d: InstructionDef, plan: _MicroPlan) -> _MicroPlan:
    """``plan`` (an ``_index_plan``) for ``insn`` itself: where its executions may go in any
    order (``sel``), with its built-in ALU function (``_builtin_alu``), which alone reads
    ``src_grid``; without one, no grid."""
    if plan.sel is None:
        return plan
    alu = _builtin_alu(sram, insn, d)
    grid = plan.src_grid if alu is not None else None
    if alu is None and grid is plan.src_grid:
        return plan
    return _MicroPlan(plan.idx, plan.mode, plan.hazards, plan.sel, plan.ordered, plan.order,
                      plan.starts, plan.entries, alu, grid)  # (``replace`` costs thrice)


def _plan_key(insn: Any, d: InstructionDef) -> Any:
    """What ``_index_plan`` of ``insn`` (definition ``d``) is a function of besides the
    micro-ops (``shared_plan``'s key): for a built-in ALU function, its loop fields, reset
    flag and ``use_imm`` (the functions' definitions differ only in what they compute: the
    same operands, reset, issue and pipeline; not the function, its immediate or the
    dependency flags), else the instruction and its definition."""
    if isinstance(insn, Alu) and isinstance(insn.op, AluOp) and ALU.get(insn.op) is d:
        return ("alu", insn.reset, insn.uop_bgn, insn.uop_end, insn.iter_out, insn.iter_in,
                insn.dst_factor_out, insn.dst_factor_in, insn.src_factor_out,
                insn.src_factor_in, insn.use_imm, insn.uop_base)
    return insn, d


def permuted_run(a: np.ndarray) -> int | None:
    """The first entry when the non-empty ``a`` holds every entry of one run ``lo .. lo +
    a.size - 1`` once, in any order (the compiler's epilogue loops: micro-ops ``s`` apart
    interleaved by an inner loop of stride 1), else None. Then ``a``'s executions write
    distinct entries, sorted they are that run (one slice of acc), and no execution writes
    what an earlier one did: what ``_micro_plan`` otherwise finds by a sort, a scatter over
    the scratchpad and a comparison per lag, here from one count of each entry (``bincount``,
    which finds the largest itself: no reductions for the bounds): ``a.size`` executions
    cover the last ``a.size`` entries up to the largest exactly when each is counted, once."""
    least = 0
    try:
        counts = np.bincount(a)
    except ValueError:  # a negative entry (fields set by hand): counted from the least
        least = int(a.min())
        counts = np.bincount(a - least)
    lo = counts.size - a.size
    return least + lo if lo >= 0 and bool(counts[lo:].all()) else None


def _builtin_alu(sram: Sram, insn: Any, d: InstructionDef) -> AluShortcut | None:
    """``alu_shortcut`` where ``insn`` runs a built-in ALU function (its definition is the
    function's), else None; kept per config (``shared_plans``) by the function's fields:
    the compiler's epilogues repeat a few (a shift, a clip) on every tile."""
    if not (isinstance(insn, Alu) and isinstance(insn.op, AluOp) and ALU.get(insn.op) is d):
        return None
    key = (insn.op, insn.use_imm, insn.imm)
    alus = sram.shared.alus
    if key not in alus:
        alus[key] = alu_shortcut(insn, sram.acc_dtype, sram.hw)
    return alus[key]


def exec_microop(sram: Sram, insn: Any, d: InstructionDef, ctx: Ctx,
                 lag: int | Callable[[], int]) -> int:
    """Execute a micro-op compute instruction with its definition's semantics (vectorised;
    an update whose executions depend on each other runs one execution at a time). Returns the
    accumulator read-after-write hazards inside the instruction (``lag``: the definition's
    hazard window, or a function giving it: asked only when the plan is built). The index work
    is cached per (instruction, micro-ops) (``_MicroPlan``; the run's by the instruction's
    identity, which the program keeps alive, then every run's by content: ``shared_plan`` of
    its ``_index_plan``, shared by a built-in ALU function's instructions that differ in their
    function or immediate alone, ``_plan_key``)."""
    key = (id(insn), sram.uop_version)
    plan = sram.plans.get(key)
    if plan is None:
        plan = sram.plans[key] = _with_alu(sram, insn, d, shared_plan(
            sram, _plan_key(insn, d), insn.uop_bgn, insn.uop_end,
            lambda: _index_plan(sram, insn, d, ctx, lag if isinstance(lag, int) else lag())))
    idx, mode = plan.idx, plan.mode
    a = idx["dst"]
    if a.size == 0:
        return 0
    if mode in ("zero", "keep"):
        sram.data["acc"][a] = 0
        if mode == "zero":
            sram.data["out"][a] = 0
        return 0
    if mode == "sum":
        _reset_sum(sram, insn, d, idx)
        return plan.hazards
    if plan.order is not None:  # accumulate
        assert plan.starts is not None and plan.entries is not None
        delta = d.delta(insn, _gather(sram, d, insn, idx), sram.hw,
                        (a.size, *sram.data["acc"].shape[1:]))
        apply_sums(sram, plan.entries, np.add.reduceat(delta[plan.order], plan.starts, axis=0))
        return plan.hazards
    acc = sram.data["acc"]
    if not plan.ordered:  # the destinations are distinct: each run of them a slice
        assert plan.sel is not None
        at = plan.sel
        if plan.alu is not None:
            dst, grid = at["dst"], plan.src_grid
            if grid is not None:  # src a strided view of acc (numpy reads an input that
                # overlaps the output as it was before: the gather's values), dst alike
                assert isinstance(dst, slice)
                entries = grid_entries(acc, grid)
                view = acc[dst]
                shaped = view.reshape(entries.shape)
                plan.alu(shaped, entries, shaped)
                sram.data["out"][dst] = view
                return plan.hazards
            src = None if insn.use_imm else acc[at["src"]]
            if isinstance(dst, slice):  # a view of acc: computed into it, then narrowed
                view = acc[dst]
                plan.alu(view, src, view)
                sram.data["out"][dst] = view
                return plan.hazards
            new_acc = plan.alu(acc[dst], src, None)
            acc[dst] = new_acc
            sram.data["out"][dst] = new_acc
            return plan.hazards
        new = d.update(insn, acc[at["dst"]].astype(np.int64),
                       {op.name: sram.data[op.memory][at[op.name]].astype(np.int64)
                        for op in d.reads(insn, sram.hw)}, sram.hw)
        _set(sram, at["dst"], new)
        return plan.hazards
    for k in range(a.size):  # a dependence inside the instruction: one execution at a time
        sel = slice(k, k + 1)
        new = d.update(insn, acc[a[sel]].astype(np.int64), _gather(sram, d, insn, idx, sel),
                       sram.hw)
        _set(sram, a[sel], new)
    return plan.hazards


#: computes a built-in ALU function in the acc dtype: ``(dst entries, src entries or None,
#: out)``, into ``out`` (the dst entries' own view of acc: the inputs are read as they were
#: before, numpy's rule for overlapping operands) or a new array (``out`` None), returned
AluShortcut = Callable[[np.ndarray, np.ndarray | None, np.ndarray | None], np.ndarray]


def alu_shortcut(insn: Alu, dt: np.dtype[Any], hw: HwConfig) -> AluShortcut | None:
    """A built-in ALU function (``builtins.ALU_FUNCTIONS``) computed in the accumulator's own
    dtype ``dt``, without the int64 round trip of its definition's semantics, where that gives
    the same bits: ADD and MUL wrap modulo ``2**bits`` either way; MIN and MAX with an operand
    the dtype holds never leave its range; SHR by an immediate is an arithmetic right shift
    (an amount past the width gives the sign, as ``width - 1`` does) or a left shift modulo
    ``2**bits`` (``alu_shift`` then the wrap). The function takes the destination entries and
    the src entries (None for an immediate), both in ``dt``, and where to write (``out``, or
    None for a new array). None where this does not apply (a
    register SHR, an immediate outside the dtype for MIN/MAX, a dtype that is not a signed
    integer): the caller then runs the definition. Decided once per instruction (its plan)."""
    if dt.kind != "i":
        return None
    bits = dt.itemsize * 8
    op = insn.op
    if op is AluOp.SHR:
        if not insn.use_imm:
            return None
        s = int(shift_amount(np.int64(insn.imm), hw))
        if s >= 0:
            right = min(s, bits - 1)
            return lambda dst, src, out: np.right_shift(dst, right, out=out)
        if -s >= bits:  # every bit shifted out: zeros (``& 0``: into ``out`` as the others)
            return lambda dst, src, out: np.bitwise_and(dst, 0, out=out)
        unsigned = np.dtype(f"u{dt.itemsize}").newbyteorder(dt.byteorder)
        left = unsigned.type(-s)
        return lambda dst, src, out: np.left_shift(
            dst.view(unsigned), left, out=None if out is None else out.view(unsigned)).view(dt)
    fn = {AluOp.MIN: np.minimum, AluOp.MAX: np.maximum, AluOp.ADD: np.add,
          AluOp.MUL: np.multiply}.get(AluOp(op))
    if fn is None:
        return None
    if not insn.use_imm:
        def register(dst: np.ndarray, src: np.ndarray | None,
                     out: np.ndarray | None) -> np.ndarray:
            assert src is not None  # a register operand: the src entries
            return fn(dst, src, out=out)
        return register
    # the signed dtype's range (what ``np.iinfo`` gives, without building one per plan)
    if op in (AluOp.MIN, AluOp.MAX) and not -(1 << bits - 1) <= insn.imm < 1 << bits - 1:
        return None
    imm = np.array(insn.imm, dtype=np.int64).astype(dt)  # ADD/MUL: the same mod 2**bits
    return lambda dst, src, out: fn(dst, imm, out=out)


def _reset_sum(sram: Sram, insn: Any, d: InstructionDef, idx: dict[str, np.ndarray]) -> None:
    """A reset whose out gets the computed value (vta.cc's GEMM; the machine runs GEMM's in
    ``gemm.FastGemm.reset``): one execution at a time, in loop order, each computing as without
    reset from what it reads (a later one on the same entry sees the 0 an earlier one wrote),
    acc becoming 0 and out the narrowing of what it computed."""
    acc, out, hw = sram.data["acc"], sram.data["out"], sram.hw
    a = idx["dst"]
    for k in range(a.size):
        sel = slice(k, k + 1)
        cur = acc[a[sel]].astype(np.int64)
        ops = _gather(sram, d, insn, idx, sel)
        new = cur + d.delta(insn, ops, hw, cur.shape) if d.kind == "accumulate" \
            else d.update(insn, cur, ops, hw)
        acc[a[sel]] = 0
        out[a[sel]] = new.astype(sram.acc_dtype).astype(sram.out_dtype)


# ------------------------------------------------------------------------------ hazards


def count_raw_hazards(writes: np.ndarray, reads: tuple[np.ndarray, ...], max_lag: int) -> int:
    """Reads of an acc entry that one of the previous ``max_lag`` ops (in loop order) writes.

    With initiation interval ``ii`` and pipeline depth ``d``, op ``k`` writes back ``d`` cycles
    after issue while op ``j`` reads at ``(j - k) * ii`` cycles after it, so the lags at risk are
    ``1 .. ceil(d / ii) - 1`` (``InstructionDef.hazard_lag``).
    """
    total = 0
    for lag in range(1, min(max_lag, writes.size - 1) + 1):
        for r in reads:
            total += int(np.count_nonzero(r[lag:] == writes[:-lag]))
    return total
