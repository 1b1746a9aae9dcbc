"""Text form of a graph: one line per node, values as ``%name``, constants as ``@name``.

::

    graph resnet18(%image: int8[1, 3, 224, 224] NCHW scale=0.0078125) {
      %conv1 = conv2d(%image, @conv1_w, @conv1_b, stride=2, pad=3) : int32[1, 64, 112, 112] ...
      %conv1_q = requantize(%conv1, mult=..., shift=..., lo=0, hi=127) : int8[...] ...
      ...
      return %logits
    }

A fused node prints as ``fused[conv2d+requantize+add]`` with its inner nodes indented below.
"""

from __future__ import annotations

from vta.graph.ir import Fused, Graph, Node, Value

__all__ = ["format_graph"]


def _ref(v: Value) -> str:
    return f"@{v.name}" if v.is_const else f"%{v.name}"


def _node_line(n: Node) -> str:
    args = [_ref(v) for v in n.inputs]
    args += [f"{k}={v}" for k, v in n.attrs().items()]
    return f"%{n.output.name} = {n.op}({', '.join(args)}) : {n.output.type}"


def format_graph(g: Graph, placement: dict[int, str] | None = None) -> str:
    """``g`` as text; ``placement`` (node id -> note) is appended to node lines."""
    params = ", ".join(f"%{v.name}: {v.type}" for v in g.inputs)
    lines = [f"graph {g.name}({params}) {{"]
    for n in g.nodes:
        note = f"  # {placement[id(n)]}" if placement and id(n) in placement else ""
        if isinstance(n, Fused):
            ins = ", ".join(_ref(v) for v in n.inputs)
            lines.append(f"  %{n.output.name} = fused[{n.name}]({ins}) : {n.output.type}{note}")
            for m in n.nodes:
                lines.append(f"    | {_node_line(m)}")
        else:
            lines.append(f"  {_node_line(n)}{note}")
    lines.append(f"  return {', '.join(_ref(v) for v in g.outputs)}")
    lines.append("}")
    return "\n".join(lines)
