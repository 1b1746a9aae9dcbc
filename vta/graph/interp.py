"""The meaning of the graph IR: a numpy interpreter, independent of the compiler.

Every operator is written out here directly in numpy (nothing from ``vta.compiler``), so that
running a graph on the accelerator or the GPU path and comparing with ``run_graph`` checks the
compiler against an independent execution of the same quantized graph. Integer steps wrap to
int32 in the order the operator's definition states them (``vta.graph.ir``); convolutions and
dense layers sum int8 products exactly in float64 (each product is at most 2**14 in magnitude,
so sums stay exact far beyond any layer's reduction) before the int32 wrap.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from vta.compiler.ir import semantics as sem
from vta.compiler.ops.conv2d import conv2d_int32
from vta.errors import GraphError
from vta.graph import ir as G
from vta.graph.ort_qop import qlinear_average_pool, qlinear_softmax
from vta.graph.quant import quantize_linear
from vta.graph.quant_mlas import ort_layer_norm
from vta.isa.requant import rne_shift, scale_mul

__all__ = ["run_graph", "iter_graph", "eval_node", "wrap32", "conv2d_int32", "grouped_conv2d_int32",
           "rounding_shift", "scale_round"]

_INT32 = sem.dtype("int32")


def wrap32(x: np.ndarray) -> np.ndarray:
    """``x`` (any integer array) wrapped to int32, two's complement (the IR's cast,
    ``vta.compiler.ir.semantics``)."""
    return np.asarray(sem.cast(np.asarray(x, dtype=np.int64), _INT32))


def i32(c: int) -> np.int32:
    """The Python integer ``c`` wrapped to an int32 scalar (two's complement): an operand of
    the int32 steps below, which numpy computes modulo 2**32 (its integer arrays wrap)."""
    return np.int32(((c + (1 << 31)) & 0xFFFFFFFF) - (1 << 31))


def rounding_shift(t: np.ndarray, shift: int) -> np.ndarray:
    """The rounding shift of int32 ``t`` (``ir.split_shift``): ``>> pre``, ``+ 2**(post-1)``
    (wrapping to int32), ``>> post``; a new array (``t`` is left as it is)."""
    pre, post = G.split_shift(shift)
    out = np.right_shift(t.astype(np.int32, copy=False), np.int32(pre))
    out += i32(1 << (post - 1))  # int32 wraps modulo 2**32, as ``wrap32`` of the int64 sum
    out >>= np.int32(post)
    return out


def scale_round(x: np.ndarray, mult: int, shift: int) -> np.ndarray:
    """``x * mult`` (wrapping to int32), rounding-shifted by ``shift``. In int32 arithmetic:
    the product modulo 2**32 is the product of the operands modulo 2**32 (``x`` wrapped,
    ``mult`` wrapped), which is what ``wrap32`` of the exact int64 product keeps."""
    t = x.astype(np.int32, copy=False)
    return rounding_shift(t if mult == 1 else t * i32(mult), shift)


def _clip8(x: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return np.clip(x, lo, hi).astype(np.int8)


def _offset8(y: np.ndarray, zero: int, lo: int, hi: int) -> np.ndarray:
    """``clip(wrap32(y + zero), lo, hi)`` as int8, for the int32 array ``y`` the caller owns
    (added to in place: int32 wraps modulo 2**32)."""
    if zero:
        y += i32(zero)
    np.clip(y, lo, hi, out=y)
    return y.astype(np.int8)


def _conv2d(node: G.Conv2d, a: list[np.ndarray]) -> np.ndarray:
    x, w, b = a
    pad = node.pad
    if node.pad_value and pad:  # padded with the value first, then a convolution without
        x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=node.pad_value)
        pad = 0
    acc = grouped_conv2d_int32(x, w, node.stride, pad, node.groups)
    if b.dtype == np.int32:  # a fresh int32 array: the bias added in place, modulo 2**32
        acc += b[None, :, None, None]
        return acc
    return wrap32(acc + b.astype(np.int64)[None, :, None, None])


def grouped_conv2d_int32(x: np.ndarray, w: np.ndarray, stride: int, pad: int, groups: int
                         ) -> np.ndarray:
    """``conv2d_int32`` of each of ``groups`` channel groups (weight ``(O, I/groups, KH,
    KW)``), concatenated along the output channels; ``groups`` 1 is the plain convolution. A
    depthwise convolution (one channel per group) is summed directly, tap by tap (exact in
    int64), instead of as ``groups`` one-channel products."""
    if groups == 1:
        return conv2d_int32(x, w, stride, pad)
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    if cg == 1 and og == 1:
        xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
        acc = np.zeros((n, o, oh, ow), np.int64)
        for i in range(kh):
            for j in range(kw):
                tap = xp[:, :, i:i + stride * (oh - 1) + 1:stride,
                         j:j + stride * (ow - 1) + 1:stride]
                acc += tap * w[None, :, 0, i, j, None, None].astype(np.int64)
        return wrap32(acc)
    return np.concatenate([conv2d_int32(x[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og],
                                        stride, pad) for g in range(groups)], axis=1)


def _dense(node: G.Dense, a: list[np.ndarray]) -> np.ndarray:
    x, w, b = a
    acc = (w.astype(np.float64) @ x.astype(np.float64).T).T.astype(np.int64)
    return wrap32(wrap32(acc).astype(np.int64) + b.astype(np.int64)[None, :])


def _requantize(node: G.Requantize, a: list[np.ndarray]) -> np.ndarray:
    if node.exact:  # ONNX Runtime's arithmetic: scale words per channel (axis 1)
        w = a[1].astype(np.int64).reshape((1, -1) + (1,) * (a[0].ndim - 2))
        y = scale_mul(a[0], w)
    elif node.mults is not None:  # per channel (axis 1)
        m = a[1].astype(np.int64).reshape((1, -1) + (1,) * (a[0].ndim - 2))
        y = rounding_shift(wrap32(a[0].astype(np.int64) * m), node.shift)
    elif node.even:  # ONNX Runtime's rounding of a power-of-two ratio: half to even
        y = rne_shift(a[0], node.shift)
    else:  # int32 throughout (``scale_round``): a new array, the zero point added in place
        return _offset8(scale_round(a[0], node.mult, node.shift), node.zero, node.lo,
                        node.hi)
    return _clip8(wrap32(y.astype(np.int64) + node.zero), node.lo, node.hi)


def _relu(node: G.Relu, a: list[np.ndarray]) -> np.ndarray:
    return np.maximum(a[0], 0).astype(np.int8, copy=False)


def _clip(node: G.Clip, a: list[np.ndarray]) -> np.ndarray:
    return _clip8(a[0], node.lo, node.hi)


def _add(node: G.Add, a: list[np.ndarray]) -> np.ndarray:
    """In int32 arithmetic (numpy's int32 arrays wrap modulo 2**32): each step's sum or
    product modulo 2**32 is what ``wrap32`` of the exact one keeps, and each shift reads the
    wrapped value, as the definition orders them."""
    p = a[0].astype(np.int32)
    if node.zero_a:
        p -= i32(node.zero_a)
    p *= i32(node.mult_a)
    q = a[1].astype(np.int32)
    if node.zero_b:
        q -= i32(node.zero_b)
    q *= i32(node.mult_b)
    p += q
    if node.offset:
        p += i32(node.offset)
    if node.offsets is not None:  # per channel (axis 1)
        p += a[2].astype(np.int32).reshape((1, -1) + (1,) * (p.ndim - 2))
    y = rne_shift(p, node.shift) if node.even else rounding_shift(p, node.shift)
    if node.even:
        return _clip8(wrap32(y.astype(np.int64) + node.zero), node.lo, node.hi)
    return _offset8(y, node.zero, node.lo, node.hi)


def _max_pool(node: G.MaxPool2d, a: list[np.ndarray]) -> np.ndarray:
    x = a[0]
    k, s, p = node.kernel, node.stride, node.pad
    oh, ow = node.out.type.shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=G.INT8_MIN)
    out = np.full(node.out.type.shape, G.INT8_MIN, np.int8)
    for r in range(k):
        for q in range(k):
            out = np.maximum(out, xp[:, :, r: r + s * (oh - 1) + 1: s, q: q + s * (ow - 1) + 1: s])
    return out


def _global_avg_pool(node: G.GlobalAvgPool, a: list[np.ndarray]) -> np.ndarray:
    total = wrap32(a[0].astype(np.int64).sum(axis=(2, 3)))
    hw = a[0].shape[2] * a[0].shape[3]
    if node.exact:  # ONNX Runtime's QLinearGlobalAveragePool: a scale word per channel
        acc = wrap32(total.astype(np.int64) - hw * node.zero_x)
        y = scale_mul(acc, a[1].astype(np.int64).reshape(1, -1))
    else:
        t = wrap32((total.astype(np.int64) - hw * node.zero_x) * node.mult)
        y = rounding_shift(t, node.shift)
    return _clip8(wrap32(y.astype(np.int64) + node.zero), node.lo, node.hi)


def _pad(node: G.Pad, a: list[np.ndarray]) -> np.ndarray:
    p = node.pad
    return np.pad(a[0], ((0, 0), (0, 0), (p, p), (p, p)),
                  constant_values=node.value).astype(np.int8)


#: each operator's numpy semantics (operands in order -> output)
KERNELS: dict[type[G.Node], Callable[..., np.ndarray]] = {
    G.Conv2d: _conv2d, G.Dense: _dense, G.Requantize: _requantize, G.Relu: _relu, G.Clip: _clip,
    G.Add: _add, G.MaxPool2d: _max_pool, G.GlobalAvgPool: _global_avg_pool, G.Pad: _pad,
    G.Lut2: lambda node, a: a[2][a[0].astype(np.int64) + 128, a[1].astype(np.int64) + 128]}


# ------------------------------------------------------------------------------ transformers


def _matmul(node: G.MatMul, a: list[np.ndarray]) -> np.ndarray:
    """``sum_k (a - zero_a) (b - zero_b)``, exact (int64: products of at most 2**16 in
    magnitude, sums far below 2**63), wrapped to int32."""
    x = a[0].astype(np.int64) - node.zero_a
    y = a[1].astype(np.int64) - node.zero_b
    return wrap32(np.matmul(x, y))


def _reshape(node: G.Reshape, a: list[np.ndarray]) -> np.ndarray:
    return a[0].reshape(node.shape)


def _transpose(node: G.Transpose, a: list[np.ndarray]) -> np.ndarray:
    return np.ascontiguousarray(a[0].transpose(node.perm))


_F32 = np.float32


def dequantize(x: np.ndarray, scale: float, zero: int) -> np.ndarray:
    """ONNX Runtime's DequantizeLinear: ``float32(x - zero) * float32(scale)`` (one float32
    rounding, of the product)."""
    return (x.astype(np.int32) - np.int32(zero)).astype(_F32) * _F32(scale)


def _erf(x: np.ndarray) -> np.ndarray:
    """erf in float32: the correctly rounded float64 ``math.erf`` of each value, rounded to
    float32 (ONNX Runtime's MLAS uses a polynomial; docs/graph.md gives the measured
    agreement)."""
    return np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64)).astype(_F32)


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    """MLAS's softmax order: the maximum, ``exp(x - max)`` in float32, their sum, and each
    exponential times the float32 reciprocal of the sum."""
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp((x - m).astype(_F32)).astype(_F32)
    total = np.cumsum(e, axis=axis, dtype=_F32).take([-1], axis=axis)
    return (e * (_F32(1) / total)).astype(_F32)


def float_step(step: G.FloatStep, args: list[np.ndarray]) -> np.ndarray:
    """One float32 operator of a ``HostFloat`` program on its arguments."""
    op = step.op
    if op in ("add", "sub", "mul", "div"):
        x, y = args
        f = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op]
        return np.asarray(f(x, y, dtype=_F32))
    if op == "erf":
        return _erf(args[0])
    if op == "softmax":
        return _softmax(args[0], int(step.attr("axis")))
    if op == "layer_norm":
        return ort_layer_norm(args[0], args[1], args[2] if len(args) > 2 else None,
                              int(step.attr("axis")), float(step.attr("epsilon")))
    if op == "reshape":
        return args[0].reshape(tuple(step.attr("shape")))
    if op == "transpose":
        return np.ascontiguousarray(args[0].transpose(tuple(step.attr("perm"))))
    raise GraphError(f"the interpreter has no float operator {op!r}")


def _host_float(node: G.HostFloat, a: list[np.ndarray]) -> np.ndarray:
    """Dequantize, run the float32 steps, quantize (``HostFloat``)."""
    ins = [dequantize(x.reshape(shp), s, z)
           for x, s, z, shp in zip(a, node.scales, node.zeros, node.shapes, strict=True)]
    tmps: list[np.ndarray] = []
    pools = {"in": ins, "const": list(node.consts), "tmp": tmps}
    for st in node.steps:
        tmps.append(float_step(st, [pools[kind][i] for kind, i in st.args]))
    y = tmps[-1]
    scale = node.out.type.scale
    if scale is None or y.size != node.out.type.size:
        raise GraphError(f"host_float {node.out.name}: its result {list(y.shape)} does not fill "
                         f"{node.out.type}")
    return quantize_linear(y, scale, node.zero).reshape(node.shape)


def _take(node: G.Take, a: list[np.ndarray]) -> np.ndarray:
    return np.ascontiguousarray(a[0][node.index])


def _stack(node: G.Stack, a: list[np.ndarray]) -> np.ndarray:
    return np.stack(a)


#: the transformer operators' semantics (added to ``KERNELS``)
TRANSFORMER_KERNELS: dict[type[G.Node], Callable[..., np.ndarray]] = {
    G.MatMul: _matmul, G.Reshape: _reshape, G.Transpose: _transpose,
    G.HostFloat: _host_float, G.Take: _take, G.Stack: _stack}
KERNELS.update(TRANSFORMER_KERNELS)


def _qlinear_softmax(node: G.QLinearSoftmax, a: list[np.ndarray]) -> np.ndarray:
    """ONNX Runtime's ``QLinearSoftmax`` on the stored integers (a uint8 tensor's ``u`` is
    the int8 form plus 128), back in the int8 form."""
    off = 128 if node.unsigned else 0
    stored = a[0].astype(np.int64) + off
    if node.unsigned:
        stored = stored.astype(np.uint8)
    scale = node.out.type.scale
    if scale is None:
        raise GraphError(f"qlinear_softmax {node.out.name}: its output has no scale")
    y = qlinear_softmax(stored, node.x_scale, scale, node.zero + off, node.axis,
                        node.unsigned)
    return (y.astype(np.int64) - off).astype(np.int8)


def _qlinear_avg_pool(node: G.QLinearAvgPool, a: list[np.ndarray]) -> np.ndarray:
    """ONNX Runtime's ``QLinearAveragePool`` on the stored integers, in the int8 form."""
    off = 128 if node.unsigned else 0
    scale = node.out.type.scale
    if scale is None:
        raise GraphError(f"qlinear_avg_pool {node.out.name}: its output has no scale")
    y = qlinear_average_pool(a[0].astype(np.int64) + off, node.x_scale, node.zero_x + off,
                             node.kernel, node.stride, node.pad, node.count_include_pad,
                             scale, node.zero + off, node.unsigned)
    return (y.astype(np.int64) - off).astype(np.int8)


#: the QOperator operators' semantics (added to ``KERNELS``)
QOP_KERNELS: dict[type[G.Node], Callable[..., np.ndarray]] = {
    G.QLinearSoftmax: _qlinear_softmax,
    G.Concat: lambda node, a: np.concatenate(a, axis=node.axis),
    G.QLinearAvgPool: _qlinear_avg_pool}
KERNELS.update(QOP_KERNELS)


def eval_node(node: G.Node, env: Mapping[G.Value, np.ndarray]) -> np.ndarray:
    """``node``'s output from its operands' arrays in ``env`` (a fused node runs its chain)."""
    if isinstance(node, G.Fused):
        local = dict(env)
        for n in node.nodes:
            local[n.output] = eval_node(n, local)
        return local[node.output]
    fn = KERNELS.get(type(node))
    if fn is None:
        raise GraphError(f"the interpreter has no semantics for operator {node.op}")
    out = fn(node, [np.asarray(env[v]) for v in node.inputs])
    want = node.output.type
    assert out.shape == want.shape and out.dtype == np.dtype(want.dtype), (node.op, out.shape)
    return out


def run_graph(graph: G.Graph, inputs: Mapping[Any, np.ndarray]) -> dict[G.Value, np.ndarray]:
    """Every value of ``graph`` (inputs, constants, every node's output, and the outputs of the
    nodes inside fused ones) computed from ``inputs`` (by value or name)."""
    env: dict[G.Value, np.ndarray] = {}
    for step in iter_graph(graph, inputs):
        env = step
    return env


def iter_graph(graph: G.Graph, inputs: Mapping[Any, np.ndarray]
               ) -> Iterator[dict[G.Value, np.ndarray]]:
    """``run_graph`` a node at a time: the one dictionary of values, yielded once with the
    inputs and constants and again after each of ``graph``'s nodes adds its outputs (a caller
    can start work on a value as soon as it exists: ``vta.run.graph`` simulates a kernel while
    the interpreter computes the next values)."""
    env: dict[G.Value, np.ndarray] = {}
    by_name = {v.name: v for v in graph.inputs}
    for k, arr in inputs.items():
        v = by_name.get(k) if isinstance(k, str) else k
        if v is None or all(v is not i for i in graph.inputs):
            raise GraphError(f"{k if isinstance(k, str) else k.name!r} is not an input of graph "
                             f"{graph.name} (inputs: {', '.join(by_name)})")
        a = np.asarray(arr)
        if a.shape != v.type.shape or a.dtype != np.dtype(v.type.dtype):
            raise GraphError(f"input {v.name}: expected {v.type.dtype}{list(v.type.shape)}, got "
                             f"{a.dtype}{list(a.shape)}")
        env[v] = a
    for v in graph.inputs:
        if v not in env:
            raise GraphError(f"input {v.name} of graph {graph.name} is not given")
    for v in graph.constants():
        env[v] = v.data  # type: ignore[assignment]
    yield env
    for n in graph.nodes:
        if isinstance(n, G.Fused):
            for m in n.nodes:
                env[m.output] = eval_node(m, env)
        else:
            env[n.output] = eval_node(n, env)
        yield env

