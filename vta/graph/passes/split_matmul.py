"""Matrix products of two activations as dense layers with a runtime weight, one per head.

The GEMM core computes ``x @ W.T`` with ``W`` read as packed weight entries; a dense layer's
weight need not be a constant: the host packs it into DRAM in the weight layout before the
kernel runs (``place``: a runtime weight). So ``a @ b`` of two activations (attention's
``Q @ K^T`` and ``P @ V``) is a dense layer of ``x = a``, ``W = b^T`` (a host transpose). A
batched product (one per head) becomes one dense layer per batch entry: the host takes each
head's slices and stacks the int8 results (layout operators, no arithmetic).

Pre:  a verified, unfused graph.
Post: every ``matmul`` whose operands have zero point 0 and whose only reader is a
      ``requantize`` is replaced, with ``B`` the product of its batch dimensions, by: ``a``
      and ``b`` viewed as ``(B, M, K)`` and ``(B, K, N)``; per head ``h`` a ``take`` of each,
      a ``transpose`` of ``b_h`` to ``(N, K)``, ``dense(a_h, b_h^T, 0)`` and a copy of the
      requantize on its ``(M, N)`` result (ORT's scale words, one per channel, repeated over
      the ``N`` channels); a ``stack`` of the heads viewed in the original shape as the
      requantize's own output (readers and names unchanged). A 2-D product needs no take or
      stack. The same integers: each dense layer sums exactly the products the matmul did, and
      the requantize's constants are the matmul's. A matmul with a zero point stays (its
      cross terms ``z_b * sum_k a`` depend on both runtime operands: no bias can hold them).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from vta.graph.ir import (
    Dense,
    Graph,
    MatMul,
    Node,
    Requantize,
    Reshape,
    Stack,
    Take,
    TensorType,
    Transpose,
    UniqueNames,
    Value,
)
from vta.graph.verify import infer_type, verify_graph

__all__ = ["split_matmuls", "splittable"]


def splittable(n: Node, graph: Graph) -> Requantize | None:
    """The requantize after matmul ``n`` when ``split_matmuls`` rewrites it, else None."""
    if not isinstance(n, MatMul) or n.zero_a or n.zero_b:
        return None
    readers = graph.consumers(n.output)
    if len(readers) != 1 or not isinstance(readers[0], Requantize) \
            or any(v is n.output for v in graph.outputs):
        return None
    return readers[0]


def _node(cls: type[Node], names: UniqueNames, base: str, inputs: tuple[Value, ...],
          **attrs: object) -> Node:
    """A typed node of ``cls`` (``infer_type``) with a fresh output name."""
    t = infer_type(cls, inputs, attrs, f"{cls.op} {base}")
    out = Value(names(base), t)
    if cls is Stack:
        return Stack(inputs, out)
    return cls(*inputs, **attrs, out=out)  # type: ignore[call-arg]


def _split(mm: MatMul, rq: Requantize, names: UniqueNames) -> list[Node]:
    """The nodes replacing ``mm`` and ``rq`` (module docstring)."""
    a, b = mm.a, mm.b
    *batch, m, k = a.type.shape
    n = b.type.shape[-1]
    heads = math.prod(batch)
    base = rq.out.name
    nodes: list[Node] = []

    def add(node: Node) -> Value:
        nodes.append(node)
        return node.output

    if batch:
        a3 = add(_node(Reshape, names, f"{a.name}_heads", (a,), shape=(heads, m, k))) \
            if len(batch) > 1 else a
        b3 = add(_node(Reshape, names, f"{b.name}_heads", (b,), shape=(heads, k, n))) \
            if len(batch) > 1 else b
    outs = []
    for h in range(heads):
        tag = f"{base}_h{h}" if batch else base
        ah = add(_node(Take, names, f"{a.name}_h{h}", (a3,), index=h)) if batch else a
        bh = add(_node(Take, names, f"{b.name}_h{h}", (b3,), index=h)) if batch else b
        wt = add(_node(Transpose, names, f"{bh.name}_t", (bh,), perm=(1, 0)))
        zeros = Value(names(f"{tag}_b"), TensorType((n,), "int32", "C"),
                      np.zeros(n, np.int32))
        acc = add(_node(Dense, names, f"{tag}_acc", (ah, wt, zeros)))
        mults = rq.mults
        if mults is not None and mults.data is not None:
            words = np.full(n, mults.data.reshape(-1)[0], dtype=np.int32)
            mults = Value(names(f"{tag}_words"), TensorType((n,), "int32", "C"), words)
        out_t = TensorType((m, n), "int8", "NC", rq.out.type.scale, rq.out.type.zero)
        out = rq.out if not batch else Value(names(tag), out_t)
        nodes.append(dataclasses.replace(rq, x=acc, out=out, mults=mults))
        outs.append(out)
    if not batch:
        return nodes
    stacked = add(_node(Stack, names, f"{base}_stack", tuple(outs)))
    nodes.append(Reshape(stacked, rq.out.type.shape, rq.out))
    return nodes


def split_matmuls(graph: Graph) -> Graph:
    """``graph`` with its splittable matmuls as dense layers (module docstring); the same
    graph object when there are none."""
    pairs = {id(n): rq for n in graph.nodes if (rq := splittable(n, graph)) is not None}
    if not pairs:
        return graph
    names = UniqueNames(v.name for v in graph.values())
    done = {id(rq) for rq in pairs.values()}
    nodes: list[Node] = []
    for n in graph.nodes:
        if id(n) in done:
            continue
        rq = pairs.get(id(n))
        if rq is not None:
            assert isinstance(n, MatMul)
            nodes.extend(_split(n, rq, names))
        else:
            nodes.append(n)
    return verify_graph(graph.with_nodes(nodes))
