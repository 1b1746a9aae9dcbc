"""Memory planning: DRAM offsets of the packed activations, reusing freed space.

Pre:  a ``LayoutPlan`` (every DRAM tensor, the steps that read and write each) and the steps'
      constants (weights, biases, micro-ops, the identity block).
Post: a ``MemoryPlan``: an offset for every DRAM tensor inside the activation arena such that
      two tensors whose lifetimes overlap never overlap in memory, and a separate region for
      the constants (never reused). A tensor lives from the step that writes it (a graph input:
      from the start) to the last step that reads it (a graph output: to the end); when a step
      runs, the tensors whose last reader ran before it are free, and the step's outputs take
      the best-fitting free block (the smallest that fits; freed neighbours coalesce), or the
      arena grows. ``peak_bytes`` is the arena's size, the most activation memory the run
      needs at once; ``naive_bytes`` what giving every tensor its own space would take.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vta.compiler.ops.chain import EYE
from vta.config import BUFFER_KINDS, HwConfig
from vta.graph.ir import Graph
from vta.graph.passes.plan_layouts import DramTensor, LayoutPlan
from vta.graph.place import Kernel, Step
from vta.isa.program import DRAM_ALIGN

__all__ = ["MemoryPlan", "plan_memory", "ALIGN"]

#: every region starts on this many bytes: the largest DRAM element (a 16x16 int8 weight
#: entry, 256 B on pynq) is aligned by rounding up to it per config (``_align``)
ALIGN = DRAM_ALIGN


def _align(hw: HwConfig) -> int:
    return max(ALIGN, *(hw.elem_bytes(k) for k in BUFFER_KINDS))


def _up(x: int, a: int) -> int:
    return -(-x // a) * a


@dataclass
class MemoryPlan:
    """Offsets (bytes) of the activations in the arena ``[0, peak_bytes)`` and of each
    step's constants (``(step, allocation)``) in the region after it."""

    offsets: dict[int, int] = field(default_factory=dict)  # id(DramTensor) -> offset
    peak_bytes: int = 0
    naive_bytes: int = 0
    const_offsets: dict[tuple[int, str], int] = field(default_factory=dict)
    const_bytes: int = 0
    shared_consts: dict[str, int] = field(default_factory=dict)
    lifetimes: dict[int, tuple[int, int]] = field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        return self.const_base + self.const_bytes

    @property
    def const_base(self) -> int:
        return self.peak_bytes

    def offset(self, t: DramTensor) -> int:
        return self.offsets[id(t)]


class _Arena:
    """First-fit bookkeeping of free blocks (best fit, coalescing)."""

    def __init__(self) -> None:
        self.free: list[tuple[int, int]] = []  # (offset, size), sorted by offset
        self.end = 0

    def alloc(self, size: int) -> int:
        best = None
        for i, (_, sz) in enumerate(self.free):
            if sz >= size and (best is None or sz < self.free[best][1]):
                best = i
        if best is None:
            # extend: a free block ending at the arena's end grows into the new space
            if self.free and sum(self.free[-1]) == self.end:
                off, _ = self.free.pop()
                self.end = off + size
                return off
            off = self.end
            self.end += size
            return off
        off, sz = self.free.pop(best)
        if sz > size:
            self.free.insert(best, (off + size, sz - size))
        return off

    def release(self, off: int, size: int) -> None:
        self.free.append((off, size))
        self.free.sort()
        merged: list[tuple[int, int]] = []
        for o, s in self.free:
            if merged and sum(merged[-1]) == o:
                merged[-1] = (merged[-1][0], merged[-1][1] + s)
            else:
                merged.append((o, s))
        self.free = merged


def plan_memory(graph: Graph, steps: list[Step], layouts: LayoutPlan, hw: HwConfig) -> MemoryPlan:
    """The plan (module docstring)."""
    al = _align(hw)
    plan = MemoryPlan()
    n = len(steps)
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    outs = {id(v) for v in graph.outputs}
    for t in layouts.tensors:
        first[id(t)], last[id(t)] = n, -1
    for k, bind in enumerate(layouts.bindings):
        st = steps[k]
        for alloc, t in bind.items():
            first[id(t)] = min(first[id(t)], k)
            if not (isinstance(st, Kernel) and alloc == st.write[0]):
                last[id(t)] = max(last[id(t)], k)
    for tr in layouts.transforms:  # the host writes (pack) or reads (unpack) before step at
        t = tr.tensor
        if tr.kind == "pack":
            first[id(t)] = min(first[id(t)], tr.at)
        else:
            last[id(t)] = max(last[id(t)], tr.at)
    for t in layouts.tensors:
        if id(t.value) in outs:
            last[id(t)] = n
        last[id(t)] = max(last[id(t)], first[id(t)])  # written, never read: its own step
        plan.lifetimes[id(t)] = (first[id(t)], last[id(t)])
    arena = _Arena()
    live: list[DramTensor] = []
    for k in range(n + 1):
        for t in list(live):
            if last[id(t)] < k:
                arena.release(plan.offsets[id(t)], _up(t.nbytes(hw), al))
                live.remove(t)
        born = sorted((t for t in layouts.tensors if first[id(t)] == k),
                      key=lambda t: -t.nbytes(hw))
        for t in born:
            plan.offsets[id(t)] = arena.alloc(_up(t.nbytes(hw), al))
            live.append(t)
    plan.peak_bytes = _up(arena.end, al)
    plan.naive_bytes = sum(_up(t.nbytes(hw), al) for t in layouts.tensors)
    # constants: each kernel's own (weights, bias, micro-ops), the identity block shared
    pos = 0
    for k, st in enumerate(steps):
        if not isinstance(st, Kernel):
            continue
        for region in st.program.allocations:
            if region.name in layouts.bindings[k]:
                continue
            if region.name == EYE:  # the identity block: one copy for every kernel
                if region.name not in plan.shared_consts:
                    plan.shared_consts[region.name] = pos
                    pos += _up(region.nbytes, al)
                continue
            plan.const_offsets[(k, region.name)] = pos
            pos += _up(max(region.nbytes, 1), al)
    plan.const_bytes = pos
    return plan
