"""The graph IR: a typed dataflow graph of quantized integer operators over tensors.

A ``Graph`` holds ``Value``s (tensors: graph inputs, constants and node outputs, identified by
object; names are for printing) and ``Node``s in topological order, one frozen dataclass per
operator with typed attributes. Every value has a ``TensorType``: shape, dtype (``int8`` or
``int32``), logical layout (``NCHW`` for images, ``NC`` for matrices) and its quantization
(``scale`` and ``zero``: the real value is ``scale * (integer - zero)``; ``zero`` is 0 for a
symmetric tensor).

The operators are those of a quantized CNN, each with exact integer semantics (every step
wraps to int32, as the accelerator's accumulator does; ``vta.graph.interp`` is the numpy
definition):

=================  ==============================================================================
``conv2d``         int8 NCHW ``x``, int8 OIHW ``weight``, int32 ``bias`` -> int32 ``sum + bias``
                   (``groups``: a grouped or depthwise convolution, weight ``(O, I/groups, ..)``)
``dense``          int8 (N, K) ``x``, int8 (M, K) ``weight``, int32 ``bias`` -> int32 (N, M)
``requantize``     int32 -> int8 ``clip((x * mult + 2**(shift-1)) >> shift, lo, hi)`` (``mult`` a
                   per-channel constant ``mults`` when the weights' scales are per channel)
``relu``           int8 -> int8 ``max(x, 0)``
``clip``           int8 -> int8 ``min(max(x, lo), hi)``
``add``            int8, int8 -> int8 ``clip((a * mult_a + b * mult_b + 2**(shift-1) + offset)
                   >> shift)``
                   (zero points: ``(a - zero_a) * mult_a``, ... ``+ zero`` before the clip)
``max_pool2d``     int8 -> int8, the maximum over each window (padding never wins)
``global_avg_pool`` int8 NCHW -> int8 (N, C) ``clip((sum_hw x * mult + 2**(shift-1)) >> shift)``
                   (``exact``: ORT's QLinearGlobalAveragePool, a scale word instead)
``pad``            int8 NCHW -> int8, ``pad`` rows and columns of ``value`` on each side
``lut2``           int8, int8 -> int8 ``table[a + 128, b + 128]`` (a (256, 256) int8 constant)
``fused``          a chain made by operator fusion (``vta.graph.passes.fuse``): an anchor and the
                   element-wise operators applied to its result, one kernel
``matmul``         int8 ``(..., M, K)`` ``a``, int8 ``(..., K, N)`` ``b`` (two activations) -> int32
                   ``sum_k (a - zero_a)(b - zero_b)`` (attention's ``Q @ K^T`` and ``P @ V``)
``reshape``        int8 -> int8, the same elements in another shape (a layout operator)
``transpose``      int8 -> int8, axes permuted by ``perm`` (a layout operator)
``take``           int8 ``(B, ...)`` -> int8 ``x[index]`` (one head; a layout operator)
``stack``          int8 tensors of one type -> int8 ``(B, ...)`` (a layout operator)
``host_float``     int8 inputs -> int8: a float32 island of an ONNX model (dequantize, softmax /
                   layer norm / erf / add / mul ..., quantize), run on the host as ORT computes it
``qlinear_softmax`` int8 -> int8: ONNX Runtime's ``QLinearSoftmax`` (a table of exponentials)
``concat``         int8 tensors of one type -> int8, joined along ``axis`` (a layout operator)
``qlinear_avg_pool`` int8 NCHW -> int8: ONNX Runtime's ``QLinearAveragePool`` (float32 window
                   means)
=================  ==============================================================================

Zero points (asymmetric quantization): a tensor's real value is ``scale * (integer - zero)``
(``TensorType.zero``; 0 for symmetric tensors). ``requantize`` adds its ``zero`` after the
rounding shift and before the clip; ``add`` subtracts its inputs' zero points (``zero_a``,
``zero_b``) before multiplying, ``global_avg_pool`` subtracts ``H*W * zero_x`` from the sum,
and both add their output ``zero`` after the shift (every constant an int8 or a small
immediate, as the ALU's 16-bit immediates need); a convolution's or dense layer's input zero
point is folded into its bias by the importer (``-z_x * sum_k w``, as TVM's QNN and gemmlowp
do), and a padded convolution of such an input reads an explicit ``pad`` with the zero point
(VTA's LOAD pads with zeros only). All default to 0: a symmetric graph is unchanged. A uint8
tensor is the int8 tensor ``u - 128`` with zero point ``z_u - 128`` (the int8 GEMM core then
computes it exactly).

The multipliers and shifts are the fixed-point form of the ratio of scales (``quant``):
``mult / 2**shift ~ scale_in / scale_out``. ``>> shift`` with ``+ 2**(shift-1)`` is a rounding
shift, evaluated as ``((t >> pre) + 2**(post-1)) >> post`` with ``post = min(shift,
ROUND_BITS)``, ``pre = shift - post`` (``split_shift``): the same floor of ``(t +
2**(shift-1)) / 2**shift`` whenever the direct sum does not wrap, and a rounding constant
that fits a 16-bit immediate.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar

import numpy as np

from vta.errors import GraphError

__all__ = ["GraphError", "TensorType", "Value", "Node", "Conv2d", "Dense", "Requantize",
           "Relu", "Clip", "Add", "MaxPool2d", "GlobalAvgPool", "Pad", "Lut2", "Fused", "Graph",
           "ELEMENTWISE", "INT8_MIN", "INT8_MAX", "node_macs", "ROUND_BITS", "split_shift",
           "MatMul", "Reshape", "Transpose", "HostFloat", "FloatStep", "FLOAT_OPS",
           "matmul_macs", "Take", "Stack", "UniqueNames", "QLinearSoftmax",
           "Concat", "QLinearAvgPool"]

INT8_MIN, INT8_MAX = -128, 127
#: the rounding add of a rounding shift is at most 2**(ROUND_BITS - 1) (``split_shift``)
ROUND_BITS = 15


def split_shift(shift: int) -> tuple[int, int]:
    """``(pre, post)``: a rounding shift by ``shift`` is ``>> pre``, then ``+ 2**(post-1)``,
    then ``>> post``."""
    post = min(shift, ROUND_BITS)
    return shift - post, post


@dataclass(frozen=True, slots=True)
class TensorType:
    """``shape``, ``dtype``, logical ``layout`` and quantization ``scale`` (None: the tensor
    carries no real-valued interpretation, e.g. a bias) and ``zero`` point (the real value
    is ``scale * (integer - zero)``)."""

    shape: tuple[int, ...]
    dtype: str
    layout: str = "NCHW"
    scale: float | None = None
    zero: int = 0

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __str__(self) -> str:
        s = f"{self.dtype}[{', '.join(map(str, self.shape))}] {self.layout}"
        s = s if self.scale is None else f"{s} scale={self.scale:.6g}"
        return s if not self.zero else f"{s} zero={self.zero}"


@dataclass(frozen=True, eq=False)
class Value:
    """A tensor of the graph. ``data`` holds a constant's contents (weights, biases); a graph
    input or a node output has none. Identity is the object."""

    name: str
    type: TensorType
    data: np.ndarray | None = field(default=None, repr=False)

    @property
    def is_const(self) -> bool:
        return self.data is not None

    def __repr__(self) -> str:
        return f"Value({self.name}: {self.type})"


@dataclass(frozen=True, eq=False)
class Node:
    """An operator application: its operand values (``inputs``, in the order of the
    operator's fields) and its ``output``. Subclasses add typed attributes."""

    op: ClassVar[str] = "node"
    #: the operand fields, in order
    operands: ClassVar[tuple[str, ...]] = ()

    @property
    def inputs(self) -> tuple[Value, ...]:
        return tuple(getattr(self, f) for f in self.operands)

    @property
    def output(self) -> Value:
        """The node's result: its ``out`` field (every operator has one; ``Fused`` overrides
        this with its last node's)."""
        # each subclass declares ``out`` after its operands (positional construction), so the
        # base cannot declare it
        out: Value = getattr(self, "out")  # noqa: B009
        return out

    def attrs(self) -> dict[str, Any]:
        """The attributes (not operands or output), by name, for printing; an attribute with a
        default (a zero point, an offset) only where it differs from it."""
        skip = {*self.operands, "out"}
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip
                and (f.default is MISSING or getattr(self, f.name) != f.default)}


@dataclass(frozen=True, eq=False)
class Conv2d(Node):
    op: ClassVar[str] = "conv2d"
    operands: ClassVar[tuple[str, ...]] = ("x", "weight", "bias")
    x: Value
    weight: Value
    bias: Value
    stride: int
    pad: int
    out: Value
    #: grouped convolution: input and output channels split into ``groups`` equal groups,
    #: group ``g``'s outputs reading only group ``g``'s inputs (the weight is ``(O, I/groups,
    #: KH, KW)``); ``groups`` = channels is a depthwise convolution (MobileNet's)
    groups: int = 1
    #: the value the input is padded with: an asymmetric input's zero point (its real 0;
    #: ``passes.fold_pad`` folds a ``pad`` into the convolution; the accelerator pads with 0
    #: and adds the difference as a per-position bias, ``place.pad_correction``)
    pad_value: int = 0


@dataclass(frozen=True, eq=False)
class Dense(Node):
    op: ClassVar[str] = "dense"
    operands: ClassVar[tuple[str, ...]] = ("x", "weight", "bias")
    x: Value
    weight: Value
    bias: Value
    out: Value
    #: the reduction length of the model's product when the dense layer also sums its zero
    #: points' cross terms along an extended K (``passes.split_matmul``: ``K' = 3K``); its
    #: MACs are the product's, ``N * M * useful_k`` (0: all of K)
    useful_k: int = 0


class _ScaleOperand:
    """``inputs`` and ``attrs`` of a node whose optional ``mults`` (per-channel multipliers or
    ORT's scale words) is an operand beside ``x``, not an attribute."""

    x: Value
    mults: Value | None

    @property
    def inputs(self) -> tuple[Value, ...]:
        return (self.x,) if self.mults is None else (self.x, self.mults)

    def attrs(self) -> dict[str, Any]:
        a = Node.attrs(self)  # type: ignore[arg-type]
        a.pop("mults", None)
        return a


@dataclass(frozen=True, eq=False)
class Requantize(_ScaleOperand, Node):
    op: ClassVar[str] = "requantize"
    operands: ClassVar[tuple[str, ...]] = ("x",)
    x: Value
    mult: int
    shift: int
    lo: int
    hi: int
    out: Value
    zero: int = 0
    #: per-channel multipliers (an int32 constant, one per channel of axis 1: the ratio of
    #: scales of per-channel weights), used instead of ``mult`` (then 1); an operand
    mults: Value | None = None
    #: ONNX Runtime's arithmetic (``vta.isa.requant``): ``mults`` holds each channel's float32
    #: ratio as a scale word (the same word in every channel for a per-tensor ratio), ``mult``
    #: is 1 and ``shift`` 0; the output is ``clip(scale_mul(x, word) + zero, lo, hi)``, what
    #: ORT's QLinearConv / QGemm and ``ALU.REQUANT_F32`` compute
    exact: bool = False
    #: round half to even (ONNX Runtime's rounding of a power-of-two ratio, ``mult`` 1) instead
    #: of half up: ``clip(rne(x / 2**shift) + zero, lo, hi)`` (``vta.float_scale.rne_shift``;
    #: on VTA's ALU ``ops.chain.even_round_stage``)
    even: bool = False
    #: its multipliers computed by shifts and adds (``quant.shift_add_multipliers``: an ALU
    #: without MUL; the same int32 bits as the multiply, more ALU instructions)
    shift_add: bool = False



@dataclass(frozen=True, eq=False)
class Relu(Node):
    op: ClassVar[str] = "relu"
    operands: ClassVar[tuple[str, ...]] = ("x",)
    x: Value
    out: Value


@dataclass(frozen=True, eq=False)
class Clip(Node):
    op: ClassVar[str] = "clip"
    operands: ClassVar[tuple[str, ...]] = ("x",)
    x: Value
    lo: int
    hi: int
    out: Value


@dataclass(frozen=True, eq=False)
class Add(Node):
    op: ClassVar[str] = "add"
    operands: ClassVar[tuple[str, ...]] = ("a", "b")
    a: Value
    b: Value
    mult_a: int
    mult_b: int
    shift: int
    lo: int
    hi: int
    out: Value
    zero_a: int = 0
    zero_b: int = 0
    zero: int = 0
    #: added to the sum before the rounding shift (beside its ``2**(shift-1)``): with it an
    #: imported add reproduces ONNX Runtime's float32 add bit for bit (``vta.graph.ort_add``)
    offset: int = 0
    #: an int32 constant per channel (axis 1) added beside ``offset``: an add of a constant
    #: tensor that varies along the channels only (a bias), folded into the rounding
    #: (``ort_add.fit_channel_add``: then ``b`` is ``a`` and ``mult_b`` 0); an operand
    offsets: Value | None = None
    #: round half to even (ONNX Runtime's rounding of a sum whose scale ratios are powers of
    #: two) instead of half up: ``clip(rne(t / 2**shift) + zero, lo, hi)`` with ``t`` the sum
    #: (``offset`` 0; ``vta.float_scale.rne_shift``, on VTA's ALU ``ops.chain.even_round_stage``)
    even: bool = False
    #: its multipliers computed by shifts and adds (``quant.shift_add_multipliers``: an ALU
    #: without MUL; the same int32 bits as the multiply, more ALU instructions)
    shift_add: bool = False

    @property
    def inputs(self) -> tuple[Value, ...]:
        return (self.a, self.b) if self.offsets is None else (self.a, self.b, self.offsets)

    def attrs(self) -> dict[str, Any]:
        a = Node.attrs(self)
        a.pop("offsets", None)
        return a


@dataclass(frozen=True, eq=False)
class MaxPool2d(Node):
    op: ClassVar[str] = "max_pool2d"
    operands: ClassVar[tuple[str, ...]] = ("x",)
    x: Value
    kernel: int
    stride: int
    pad: int
    out: Value


@dataclass(frozen=True, eq=False)
class GlobalAvgPool(_ScaleOperand, Node):
    op: ClassVar[str] = "global_avg_pool"
    operands: ClassVar[tuple[str, ...]] = ("x",)
    x: Value
    mult: int
    shift: int
    lo: int
    hi: int
    out: Value
    zero_x: int = 0
    zero: int = 0
    #: ONNX Runtime's QLinearGlobalAveragePool (``quant_mlas.qlinear_global_avg_pool``):
    #: ``mults`` holds its float32 ratio as a scale word per channel (all the same), ``mult`` is
    #: 1 and ``shift`` 0; the output is ``clip(scale_mul(sum - H*W * zero_x, word) + zero, lo,
    #: hi)`` (``ALU.REQUANT_F32`` after the window sum); an operand, like ``Requantize``'s
    mults: Value | None = None
    exact: bool = False
    #: its multipliers computed by shifts and adds (``quant.shift_add_multipliers``: an ALU
    #: without MUL; the same int32 bits as the multiply, more ALU instructions)
    shift_add: bool = False



@dataclass(frozen=True, eq=False)
class Pad(Node):
    """Host-side padding of an NCHW tensor with ``value`` (an asymmetric tensor's zero point,
    which VTA's LOAD, padding with zeros only, cannot write)."""

    op: ClassVar[str] = "pad"
    operands: ClassVar[tuple[str, ...]] = ("x",)
    x: Value
    pad: int
    value: int
    out: Value


@dataclass(frozen=True, eq=False)
class Lut2(Node):
    """An element-wise int8 operator of two tensors given by its table: ``table[a + 128, b +
    128]`` (an int8 ``(256, 256)`` constant). The importer emits it for an ONNX Runtime add
    that no integer add reproduces on every input pair (``vta.graph.ort_add``: exact ties of
    the real sum, which ORT rounds half to even); it runs on the host."""

    op: ClassVar[str] = "lut2"
    operands: ClassVar[tuple[str, ...]] = ("a", "b", "table")
    a: Value
    b: Value
    table: Value
    out: Value
    #: the output's zero point (the table holds it already; stated for the type)
    zero: int = 0


@dataclass(frozen=True, eq=False)
class Fused(Node):
    """Operator fusion's result: ``anchor`` followed by the element-wise ``chain``, each reading
    the previous one's output (plus operands computed elsewhere); one kernel. ``inputs`` are
    the values the group reads from outside, ``output`` the chain's last output."""

    op: ClassVar[str] = "fused"
    anchor: Node
    chain: tuple[Node, ...]

    @property
    def nodes(self) -> tuple[Node, ...]:
        return (self.anchor, *self.chain)

    @property
    def inputs(self) -> tuple[Value, ...]:
        inner = {id(n.output) for n in self.nodes}
        out: list[Value] = []
        for n in self.nodes:
            for v in n.inputs:
                if id(v) not in inner and all(v is not o for o in out):
                    out.append(v)
        return tuple(out)

    @property
    def output(self) -> Value:
        return self.nodes[-1].output

    @property
    def name(self) -> str:
        """``conv2d+requantize+add`` ..."""
        return "+".join(n.op for n in self.nodes)

    def attrs(self) -> dict[str, Any]:
        return {}


#: element-wise (and injective) operators fusion may append to a producer's epilogue
ELEMENTWISE: tuple[type[Node], ...] = (Requantize, Relu, Clip, Add)


class UniqueNames:
    """Fresh value names, unique among ``taken`` and every name given before: ``base``, else
    ``base_2``, ``base_3`` ... (the graph builder's and the graph passes' one naming rule)."""

    def __init__(self, taken: Iterable[str] = ()) -> None:
        self.taken = set(taken)

    def __contains__(self, name: object) -> bool:
        return name in self.taken

    def __call__(self, base: str) -> str:
        name, k = base, 1
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name


@dataclass(frozen=True, eq=False)
class Graph:
    """``nodes`` in topological order; ``inputs`` the values a run provides (constants are
    reachable through the nodes); ``outputs`` what it returns."""

    name: str
    inputs: tuple[Value, ...]
    outputs: tuple[Value, ...]
    nodes: tuple[Node, ...]

    def producer(self, v: Value) -> Node | None:
        """The node computing ``v`` (None for inputs and constants)."""
        return self._producers().get(id(v))

    def consumers(self, v: Value) -> list[Node]:
        """The nodes reading ``v``, in order."""
        return [n for n in self.nodes if any(x is v for x in n.inputs)]

    def _producers(self) -> dict[int, Node]:
        cache = self.__dict__.get("_prod")
        if cache is None:
            cache = {id(n.output): n for n in self.nodes}
            object.__setattr__(self, "_prod", cache)
        return cache

    def values(self) -> Iterator[Value]:
        """Every value once: inputs, then each node's operands and output in order."""
        seen: set[int] = set()
        for v in self.inputs:
            seen.add(id(v))
            yield v
        for n in self.nodes:
            for v in (*n.inputs, n.output):
                if id(v) not in seen:
                    seen.add(id(v))
                    yield v

    def constants(self) -> list[Value]:
        return [v for v in self.values() if v.is_const]

    def with_nodes(self, nodes: Sequence[Node], outputs: Sequence[Value] | None = None
                   ) -> Graph:
        return Graph(self.name, self.inputs, tuple(outputs or self.outputs), tuple(nodes))

    @property
    def macs(self) -> int:
        """Multiply-accumulates of the convolutions and dense layers."""
        total = 0
        for n in self.nodes:
            for m in (n.nodes if isinstance(n, Fused) else (n,)):
                total += node_macs(m)
        return total


def node_macs(n: Node) -> int:
    """Multiply-accumulates a node performs (0 for element-wise operators and pooling)."""
    if isinstance(n, Conv2d):
        o = n.out.type.shape
        w = n.weight.type.shape
        return int(np.prod(o, dtype=np.int64)) * w[1] * w[2] * w[3]
    if isinstance(n, Dense):
        nb, m = n.out.type.shape
        return nb * m * (n.useful_k or n.weight.type.shape[1])
    if isinstance(n, Fused):
        return sum(node_macs(m) for m in n.nodes)
    if isinstance(n, MatMul):
        return matmul_macs(n)
    return 0


# ------------------------------------------------------------------------------ transformers
# A transformer encoder's operators (BERT): a matrix product of two activations, the layout
# operators between heads, and the float operators ONNX Runtime's quantizer leaves between a
# DequantizeLinear and a QuantizeLinear (softmax, layer norm, GELU's erf, scalings), which run
# on the host in float32 (``HostFloat``).


@dataclass(frozen=True, eq=False)
class MatMul(Node):
    """``a @ b`` of two int8 activations (ONNX MatMul's broadcast-free batched form): ``a``
    ``(..., M, K)``, ``b`` ``(..., K, N)`` with the same leading (batch) dimensions -> int32
    ``(..., M, N)``, ``sum_k (a - zero_a) * (b - zero_b)`` wrapped to int32 (each operand's
    zero point subtracted before the product, as ONNX's MatMulInteger and ORT's
    QLinearMatMul do)."""

    op: ClassVar[str] = "matmul"
    operands: ClassVar[tuple[str, ...]] = ("a", "b")
    a: Value
    b: Value
    out: Value
    zero_a: int = 0
    zero_b: int = 0


@dataclass(frozen=True, eq=False)
class Reshape(Node):
    """The int8 tensor ``x`` viewed as ``shape`` (same elements, row-major order): a layout
    operator (no arithmetic); scale and zero point unchanged."""

    op: ClassVar[str] = "reshape"
    operands: ClassVar[tuple[str, ...]] = ("x",)
    x: Value
    shape: tuple[int, ...]
    out: Value


@dataclass(frozen=True, eq=False)
class Transpose(Node):
    """``x`` with its axes permuted (``out.shape[i] = x.shape[perm[i]]``, numpy's and ONNX's
    ``perm``): a layout operator; scale and zero point unchanged."""

    op: ClassVar[str] = "transpose"
    operands: ClassVar[tuple[str, ...]] = ("x",)
    x: Value
    perm: tuple[int, ...]
    out: Value


#: the float32 operators a ``HostFloat`` program may apply (``vta.graph.interp`` defines each)
FLOAT_OPS = ("add", "sub", "mul", "div", "erf", "softmax", "layer_norm", "reshape", "transpose")


@dataclass(frozen=True)
class FloatStep:
    """One float32 operation of a ``HostFloat`` program: ``op`` (``FLOAT_OPS``) applied to
    ``args`` (each ``("in", i)``: input ``i`` dequantized; ``("const", j)``: float constant
    ``j``; ``("tmp", k)``: the result of step ``k``) with ``attrs`` (softmax ``axis``;
    layer norm ``axis`` and ``epsilon``; reshape ``shape``; transpose ``perm``)."""

    op: str
    args: tuple[tuple[str, int], ...]
    attrs: tuple[tuple[str, Any], ...] = ()

    def attr(self, name: str) -> Any:
        return dict(self.attrs)[name]


@dataclass(frozen=True, eq=False)
class HostFloat(Node):
    """A float island of a quantized model, run on the host in float32: each int8 input
    dequantized with the scale and zero point its ``DequantizeLinear`` states (``scales``,
    ``zeros``: ``float32(x - zero) * scale``) and viewed in its ONNX shape (``shapes``: the
    graph may hold a [1, S, H] tensor as (S, H)), the ``steps`` applied in order (float
    constants ``consts``), the last step's result quantized to ``out`` (its type's scale and
    ``zero`` point: ONNX Runtime's QuantizeLinear, round half to even, saturated) and viewed
    as ``shape``."""

    op: ClassVar[str] = "host_float"
    operands: ClassVar[tuple[str, ...]] = ("xs",)
    xs: tuple[Value, ...]
    scales: tuple[float, ...]
    zeros: tuple[int, ...]
    shapes: tuple[tuple[int, ...], ...]
    consts: tuple[np.ndarray, ...]
    steps: tuple[FloatStep, ...]
    shape: tuple[int, ...]
    out: Value
    zero: int = 0

    @property
    def inputs(self) -> tuple[Value, ...]:
        return self.xs

    @property
    def name(self) -> str:
        """``layer_norm``, ``div+erf`` ...: the float operators it runs."""
        return "+".join(s.op for s in self.steps)

    def attrs(self) -> dict[str, Any]:
        """The typing rule's attributes (``consts`` by count: the arrays are data)."""
        return {"ops": self.name, "scales": self.scales, "zeros": self.zeros,
                "shapes": self.shapes, "n_consts": len(self.consts), "steps": self.steps,
                "shape": self.shape, "zero": self.zero}


@dataclass(frozen=True, eq=False)
class Take(Node):
    """``x[index]``: one slice of ``x`` along its first axis (a head of a batched tensor); a
    layout operator, scale and zero point unchanged."""

    op: ClassVar[str] = "take"
    operands: ClassVar[tuple[str, ...]] = ("x",)
    x: Value
    index: int
    out: Value


@dataclass(frozen=True, eq=False)
class Stack(Node):
    """``xs`` (int8, one shape, scale and zero point) stacked along a new first axis: a layout
    operator (``Take``'s inverse)."""

    op: ClassVar[str] = "stack"
    operands: ClassVar[tuple[str, ...]] = ("xs",)
    xs: tuple[Value, ...]
    out: Value

    @property
    def inputs(self) -> tuple[Value, ...]:
        return self.xs

    def attrs(self) -> dict[str, Any]:
        return {}


def matmul_macs(n: MatMul) -> int:
    """Multiply-accumulates of an activation matmul: every output element sums K products."""
    return int(np.prod(n.out.type.shape, dtype=np.int64)) * n.a.type.shape[-1]


# ------------------------------------------------------------------------------ QOperator
# ONNX Runtime's QOperator transformer operators that have no integer form on the accelerator
# (``vta.graph.ort_qop`` reproduces each kernel; the host runs them).


@dataclass(frozen=True, eq=False)
class QLinearSoftmax(Node):
    """ONNX Runtime's ``QLinearSoftmax`` of int8 ``x`` along ``axis`` (``ort_qop.
    qlinear_softmax``: a table of 256 float32 exponentials built from ``x_scale``, a float32
    row sum, and each output ``round(exp * floor(1 / out.scale) / sum) + zero``, saturated);
    ``unsigned``: the ONNX tensors are uint8 (``x`` and ``out`` hold ``u - 128``, ``zero``
    too). Its output type's scale is the ``y_scale`` the model states. Runs on the host."""

    op: ClassVar[str] = "qlinear_softmax"
    operands: ClassVar[tuple[str, ...]] = ("x",)
    x: Value
    axis: int
    x_scale: float
    out: Value
    zero: int = 0
    unsigned: bool = False


@dataclass(frozen=True, eq=False)
class Concat(Node):
    """``xs`` (int8, one scale and zero point, equal shapes but along ``axis``) joined along
    ``axis``: a layout operator (ORT's ``QLinearConcat`` after each input's rescale to the
    output's scale)."""

    op: ClassVar[str] = "concat"
    operands: ClassVar[tuple[str, ...]] = ("xs",)
    xs: tuple[Value, ...]
    axis: int
    out: Value

    @property
    def inputs(self) -> tuple[Value, ...]:
        return self.xs


@dataclass(frozen=True, eq=False)
class QLinearAvgPool(Node):
    """ONNX Runtime's ``QLinearAveragePool`` of int8 NCHW ``x`` (``ort_qop.
    qlinear_average_pool``: each value dequantized in float32 with ``x_scale`` and ``zero_x``,
    a float32 sum over the ``kernel`` x ``kernel`` window (stride ``stride``, ``pad`` on every
    side), divided by the window's size (``count_include_pad``) or its valid taps, quantized
    to the output's scale and ``zero``); ``unsigned``: the ONNX tensors are uint8 (int8 forms
    held). Runs on the host."""

    op: ClassVar[str] = "qlinear_avg_pool"
    operands: ClassVar[tuple[str, ...]] = ("x",)
    x: Value
    kernel: int
    stride: int
    pad: int
    x_scale: float
    out: Value
    count_include_pad: bool = False
    zero_x: int = 0
    zero: int = 0
    unsigned: bool = False
