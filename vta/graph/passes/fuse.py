"""Operator fusion: element-wise operators join their producer's kernel as its epilogue.

Pre:  a verified graph (``verify.verify_graph``), nodes in topological order, no ``Fused``.
Post: the same computation as a sequence of *groups* in execution order: each a ``Fused``
      node (an anchor and the element-wise chain applied to its result) or, when nothing was
      fused to it, the original node. Every value a group reads is a graph input, a constant
      or the output of an earlier group; the values inside a group (its anchor's and all but
      its last node's outputs) are no longer materialised. Semantics are unchanged: a fused
      chain evaluates each node on the previous node's exact output (an int8 value that was
      to be stored is the same integer kept in the 32-bit accumulator).

Rules (TVM's FuseOps for an injective epilogue): walking the nodes in order, an element-wise
node (``requantize``, ``relu``, ``clip``, ``add``) joins the group whose last output it reads
when that output has no other reader and is not a graph output, and when every other value it
reads (an add's other branch) is computed before that group runs; an add may join the group of
either operand. A ``lut2`` (a table of two int8 tensors) joins the same way when the caller
names the anchors that can take it (``lut2_after``: the GPU path's kernels, whose epilogue reads
the table; the accelerator has no table lookup, so by default a ``lut2`` is a group of its own,
and takes no epilogue either: what followed it would run on the host with it).
Anything else starts a group. ``level="requant"`` fuses only a
``requantize`` into the convolution or dense layer before it (the int32 accumulators never
leave the kernel, the granularity of ONNX's QLinear operators): the unfused baseline.
"""

from __future__ import annotations

from vta.errors import GraphError
from vta.graph.ir import (
    ELEMENTWISE,
    Conv2d,
    Dense,
    Fused,
    Graph,
    HostFloat,
    Lut2,
    Node,
    Requantize,
    Reshape,
    Stack,
    Take,
    Transpose,
)
from vta.graph.verify import verify_graph

__all__ = ["fuse", "LEVELS", "group_nodes"]

LEVELS = ("full", "requant", "none")
#: anchors that take no epilogue: a float island (its int8 output is ORT's QuantizeLinear, and
#: an integer operator after it runs where integer operators run) and the layout operators
NO_EPILOGUE = (HostFloat, Reshape, Transpose, Take, Stack)


class _Group:
    def __init__(self, anchor: Node, order: int) -> None:
        self.nodes = [anchor]
        self.order = order

    @property
    def tail(self) -> Node:
        return self.nodes[-1]


def fuse(graph: Graph, level: str = "full",
         lut2_after: tuple[type[Node], ...] = ()) -> Graph:
    """The fused graph (module docstring); ``level`` ``"full"``, ``"requant"`` or ``"none"``
    (every node its own group); ``lut2_after``: the anchors a ``lut2`` may join (level
    ``"full"`` only)."""
    if level not in LEVELS:
        raise GraphError(f"fusion level must be one of {', '.join(LEVELS)}, got {level!r}")
    if any(isinstance(n, Fused) for n in graph.nodes):
        raise GraphError(f"graph {graph.name} is already fused")
    outputs = {id(v) for v in graph.outputs}
    readers: dict[int, int] = {}  # value -> how many nodes read it (an add of x with
    for n in graph.nodes:          # itself is one reader)
        for v in {id(v): v for v in n.inputs}.values():
            readers[id(v)] = readers.get(id(v), 0) + 1
    groups: list[_Group] = []
    made_by: dict[int, _Group] = {}  # value -> the group computing it
    open_tail: dict[int, _Group] = {}  # a group's last output -> the group
    for n in graph.nodes:
        target = _target(n, level, open_tail, made_by, readers, outputs, lut2_after) \
            if level != "none" else None
        if target is None:
            target = _Group(n, len(groups))
            groups.append(target)
        else:
            open_tail.pop(id(target.tail.output), None)
            target.nodes.append(n)
        made_by[id(n.output)] = target
        open_tail[id(n.output)] = target
    nodes = [g.nodes[0] if len(g.nodes) == 1 else Fused(g.nodes[0], tuple(g.nodes[1:]))
             for g in groups]
    return verify_graph(graph.with_nodes(nodes))


def _target(n: Node, level: str, open_tail: dict[int, _Group], made_by: dict[int, _Group],
            readers: dict[int, int], outputs: set[int],
            lut2_after: tuple[type[Node], ...] = ()) -> _Group | None:
    """The group ``n`` joins, or None."""
    table = isinstance(n, Lut2)
    if not isinstance(n, ELEMENTWISE) and not (table and lut2_after and level == "full"):
        return None
    for v in n.inputs:
        g = open_tail.get(id(v))
        if g is None or readers.get(id(v), 0) != 1 or id(v) in outputs:
            continue
        if isinstance(g.nodes[0], NO_EPILOGUE):  # a host float island or a layout operator
            continue
        if table and not isinstance(g.nodes[0], lut2_after):
            continue
        if isinstance(g.nodes[0], Lut2) and Lut2 not in lut2_after:
            continue  # a table is a host step there: an epilogue would follow it to the host
        if level == "requant" and not (isinstance(n, Requantize)
                                       and isinstance(g.nodes[0], (Conv2d, Dense))
                                       and len(g.nodes) == 1):
            continue
        others = [o for o in n.inputs if o is not v]
        if all(id(o) not in made_by or made_by[id(o)].order < g.order for o in others):
            return g
    return None


def group_nodes(n: Node) -> tuple[Node, ...]:
    """The nodes a group executes: a fused node's anchor and chain, else the node itself."""
    return n.nodes if isinstance(n, Fused) else (n,)
