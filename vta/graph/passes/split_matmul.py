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
      the requantize's constants are the matmul's.

Zero points (asymmetric attention operands: ``a8``, the softmax output's -128) fold into the
reduction, as gemmlowp and TVM's QNN fold them into offsets: ``sum_k (a - z_a)(b - z_b) =
sum_k a b + sum_k a (-z_b) + sum_k (-z_a) b + K z_a z_b``. The two cross terms depend on the
runtime operands (a row sum of ``a``, a column sum of ``b``), so the GEMM core computes them in
the same accumulator, along an extended K: the dense layer's input is ``[a_h | a_h | C_a]``
and its weight ``[b_h^T | C_b | b_h^T]`` (host ``concat``s, layout operators), with ``C_a``
the constant ``-z_a`` (M x K) and ``C_b`` the constant ``-z_b`` (N x K) (a ``-z`` of 128,
which int8 cannot hold, as two blocks of 127 and 1), and ``K z_a z_b`` its bias (int32,
wrapped). Bit-exact in int32 arithmetic modulo ``2**32``, like the accumulator; the GEMM does
``K'/K`` times the product's MACs (3 with both zero points), ``Dense.useful_k`` records K.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from vta.graph.ir import (
    INT8_MAX,
    INT8_MIN,
    Concat,
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

__all__ = ["split_matmuls", "splittable", "int8_parts"]


def splittable(n: Node, graph: Graph) -> Requantize | None:
    """The requantize after matmul ``n`` when ``split_matmuls`` rewrites it, else None."""
    if not isinstance(n, MatMul):
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
    if cls is Concat:
        return Concat(inputs, attrs["axis"], out)  # type: ignore[arg-type]
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
    za, zb = mm.zero_a, mm.zero_b
    ca = [_filled(names, f"{base}_za", (m, k), p, a.type) for p in int8_parts(-za)]
    cb = [_filled(names, f"{base}_zb", (n, k), p, b.type) for p in int8_parts(-zb)]
    bias = np.full(n, _wrap32(k * za * zb), np.int32)
    for h in range(heads):
        tag = f"{base}_h{h}" if batch else base
        ah = add(_node(Take, names, f"{a.name}_h{h}", (a3,), index=h)) if batch else a
        bh = add(_node(Take, names, f"{b.name}_h{h}", (b3,), index=h)) if batch else b
        wt = add(_node(Transpose, names, f"{bh.name}_t", (bh,), perm=(1, 0)))
        bv = Value(names(f"{tag}_b"), TensorType((n,), "int32", "C"), bias.copy())
        if za or zb:  # the cross terms along an extended K (module docstring)
            xs = (ah, *(ah for _ in cb), *ca)
            ws = (wt, *cb, *(wt for _ in ca))
            xk = add(_node(Concat, names, f"{ah.name}_zk", xs, axis=1))
            wk = add(_node(Concat, names, f"{wt.name}_zk", ws, axis=1))
            acc = add(_node(Dense, names, f"{tag}_acc", (xk, wk, bv), useful_k=k))
        else:
            acc = add(_node(Dense, names, f"{tag}_acc", (ah, wt, bv)))
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


def int8_parts(v: int) -> tuple[int, ...]:
    """``v`` (in [-127, 128]: a negated int8 zero point) as int8 summands, none zero: ``()``
    for 0, ``(v,)`` when it fits, ``(127, 1)`` for 128."""
    if not v:
        return ()
    return (v,) if INT8_MIN <= v <= INT8_MAX else (INT8_MAX, v - INT8_MAX)


def _filled(names: UniqueNames, base: str, shape: tuple[int, int], value: int,
            like: TensorType) -> Value:
    """A constant int8 matrix of ``value``, typed like the operand it is concatenated with
    (its scale and zero point: a concat joins one quantization; the dense layer reads plain
    integers)."""
    return Value(names(base), TensorType(shape, "int8", "NC", like.scale, like.zero),
                 np.full(shape, value, np.int8))


def _wrap32(v: int) -> int:
    """``v`` wrapped to int32 (the accumulator's arithmetic)."""
    return (v + (1 << 31)) % (1 << 32) - (1 << 31)


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
