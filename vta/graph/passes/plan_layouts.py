"""Layout planning: which tensors live in DRAM in which packed layout, and where the host packs.

Pre:  the fused graph's groups placed (``place``): each ``Kernel`` states the packed layout of
      every activation it reads and writes (exact layouts, ``graph.layout``: a producer's
      output is its consumer's input byte for byte; only a graph input may be folded).
Post: a ``LayoutPlan``: every DRAM tensor (a graph value in one layout) once, and the host's
      layout transforms in execution order: one ``pack`` per graph input layout a kernel reads
      (before the first step), one ``unpack`` per graph output (after the last), and around a
      ``HostOp`` an ``unpack`` of each input it reads from DRAM and a ``pack`` of its output
      when a kernel reads it. Between kernels nothing is transformed: tensors stay packed.
      A value two kernels want in different layouts is an error naming both (only graph
      inputs, which the host packs once per layout, may have several).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vta.config import HwConfig
from vta.errors import GraphError
from vta.graph.dram_layout import PackedLayout
from vta.graph.ir import Graph, Value
from vta.graph.place import HostOp, Kernel, Step

__all__ = ["DramTensor", "Transform", "LayoutPlan", "plan_layouts"]


@dataclass(frozen=True, eq=False)
class DramTensor:
    """A graph value held in DRAM in ``layout``; ``name`` is unique (the DRAM map's)."""

    name: str
    value: Value
    layout: PackedLayout

    def nbytes(self, hw: HwConfig) -> int:
        return self.layout.nbytes(hw)


@dataclass(frozen=True)
class Transform:
    """A host layout transform: ``pack`` (host array -> DRAM tensor) or ``unpack``, run before
    step ``at`` (``len(steps)``: after the last)."""

    kind: str
    tensor: DramTensor
    at: int


@dataclass
class LayoutPlan:
    tensors: list[DramTensor] = field(default_factory=list)
    transforms: list[Transform] = field(default_factory=list)
    #: per step, its DRAM allocations (reads and write) -> tensor
    bindings: list[dict[str, DramTensor]] = field(default_factory=list)

    def tensor(self, v: Value, layout: PackedLayout | None = None) -> DramTensor | None:
        for t in self.tensors:
            if t.value is v and (layout is None or t.layout == layout):
                return t
        return None


def plan_layouts(graph: Graph, steps: list[Step], hw: HwConfig) -> LayoutPlan:
    """The plan for ``steps`` (the placed groups of the fused ``graph``, in order)."""
    plan = LayoutPlan()
    inputs = {id(v) for v in graph.inputs}

    def get(v: Value, layout: PackedLayout, who: str) -> DramTensor:
        t = plan.tensor(v)
        if t is not None and t.layout != layout:
            other = plan.tensor(v, layout)
            if other is not None:
                return other
            if id(v) not in inputs:
                raise GraphError(f"layout planning: {who} reads {v.name} as {layout.describe()}"
                                 f" but it is laid out as {t.layout.describe()}")
        elif t is not None:
            return t
        name = v.name if t is None else f"{v.name}@{layout.fold.kind if layout.fold else 'x'}"
        new = DramTensor(name, v, layout)
        plan.tensors.append(new)
        return new

    for k, st in enumerate(steps):
        bind: dict[str, DramTensor] = {}
        if isinstance(st, Kernel):
            for alloc, v in st.reads.items():
                t = get(v, st.layouts[alloc], f"step {k} ({st.group.output.name})")
                bind[alloc] = t
                if id(v) in inputs and not any(x.tensor is t for x in plan.transforms):
                    plan.transforms.append(Transform("pack", t, 0))
            alloc, v = st.write
            bind[alloc] = get(v, st.layouts[alloc], f"step {k}")
        else:
            assert isinstance(st, HostOp)
            for v in st.group.inputs:
                held = None if v.is_const else plan.tensor(v)
                if held is not None and id(v) not in inputs:
                    plan.transforms.append(Transform("unpack", held, k))
        plan.bindings.append(bind)
    # a host op's output a kernel reads is packed after the host op runs
    for k, st in enumerate(steps):
        out = plan.tensor(st.group.output) if isinstance(st, HostOp) else None
        if out is not None:
            plan.transforms.append(Transform("pack", out, k + 1))
    for v in graph.outputs:
        res = plan.tensor(v)
        if res is not None:
            plan.transforms.append(Transform("unpack", res, len(steps)))
    plan.transforms.sort(key=lambda x: x.at)
    return plan
