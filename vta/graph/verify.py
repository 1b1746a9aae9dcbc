"""The graph verifier: every node well-typed, every value defined once and before it is used.

``infer_type`` states each operator's typing rule once (operand dtypes, ranks and shapes,
attribute ranges, the output's shape, dtype, layout and derived scale); the builder calls it
to type new nodes, ``verify_graph`` to check a whole graph (after the builder, the ONNX
importer or a pass). Every failure is a ``GraphError`` naming the node and what is wrong.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from vta.errors import GraphError
from vta.graph import ir as G
from vta.isa.requant import unpack_scale

__all__ = ["infer_type", "verify_graph", "check_node"]

_INT32 = (-(1 << 31), (1 << 31) - 1)


def _want(where: str, v: G.Value, dtype: str, rank: int, what: str) -> tuple[int, ...]:
    t = v.type
    if t.dtype != dtype or len(t.shape) != rank:
        raise GraphError(f"{where}: {what} {v.name} must be {dtype} of rank {rank}, got "
                         f"{t.dtype}{list(t.shape)}")
    return t.shape


def _range(where: str, name: str, value: int, lo: int, hi: int) -> None:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) \
            or not lo <= value <= hi:
        raise GraphError(f"{where}: {name} must be an integer in [{lo}, {hi}], got {value!r}")


def _clip_range(where: str, lo: int, hi: int) -> None:
    _range(where, "lo", lo, G.INT8_MIN, G.INT8_MAX)
    _range(where, "hi", hi, G.INT8_MIN, G.INT8_MAX)
    if lo > hi:
        raise GraphError(f"{where}: clip range [{lo}, {hi}] is empty")


def _scaled(where: str, v: G.Value) -> float:
    if v.type.scale is None or not (math.isfinite(v.type.scale) and v.type.scale > 0):
        raise GraphError(f"{where}: {v.name} has no quantization scale (a positive number)")
    return v.type.scale


def _check_mults(where: str, x: G.Value, mults: G.Value, mult: int,
                 words_ok: bool = False) -> None:
    """Per-channel multipliers: a positive int32 constant, one per channel of ``x``'s axis 1,
    with ``mult`` 1 (``words_ok``: scale words, any int32 whose 24-bit mantissa is not 0)."""
    if mult != 1:
        raise GraphError(f"{where}: a per-channel requantize has mult 1, got {mult}")
    data = mults.data
    if data is None or data.dtype != np.int32 or data.shape != (x.type.shape[1],):
        raise GraphError(f"{where}: per-channel multipliers {mults.name} must be a constant "
                         f"int32[{x.type.shape[1]}], got {mults.type.dtype}"
                         f"{list(mults.type.shape)}")
    if words_ok:
        if (unpack_scale(data)[0] == 0).any():
            raise GraphError(f"{where}: scale words {mults.name} must have non-zero mantissas")
    elif (data <= 0).any():
        raise GraphError(f"{where}: per-channel multipliers {mults.name} must be positive")


def _check_words(where: str, x: G.Value, words: G.Value | None, mult: int, shift: int) -> None:
    """ORT's arithmetic (``Requantize.exact``): scale words, one per channel of ``x``'s axis 1,
    an int32 constant with non-zero mantissas, ``mult`` 1 and ``shift`` 0."""
    if mult != 1 or shift != 0:
        raise GraphError(f"{where}: an exact requantize has mult 1 and shift 0 (its scale is "
                         f"in the scale words), got mult {mult}, shift {shift}")
    if words is None:
        raise GraphError(f"{where}: an exact requantize needs its scale words (mults)")
    _check_mults(where, x, words, mult, words_ok=True)


def _offsets(where: str, attrs: Mapping[str, Any], inputs: Mapping[str, G.Value]) -> int:
    """Check an add's or average pool's input zero points (``zero_<operand>``: each its
    operand's) and output ``zero`` (int8); the output zero."""
    for key, v in inputs.items():
        z = attrs.get(f"zero_{key}", 0)
        if z != v.type.zero:
            raise GraphError(f"{where}: zero_{key} is {z}, but {v.name} has zero point "
                             f"{v.type.zero}")
    zero = attrs.get("zero", 0)
    _range(where, "zero", zero, G.INT8_MIN, G.INT8_MAX)
    return int(zero)


def infer_type(op: type[G.Node], inputs: tuple[G.Value, ...], attrs: Mapping[str, Any],
               where: str) -> G.TensorType:
    """The output type of ``op`` applied to ``inputs`` with ``attrs`` (the output's scale for
    operators that set it: requantize, add, global_avg_pool), or a ``GraphError``."""
    if op is G.Conv2d:
        x, w, b = inputs
        n, c, h, wd = _want(where, x, "int8", 4, "input")
        o, ci, kh, kw = _want(where, w, "int8", 4, "weight")
        (bo,) = _want(where, b, "int32", 1, "bias")
        groups = attrs.get("groups", 1)
        _range(where, "groups", groups, 1, max(c, 1))
        if c % groups or o % groups:
            raise GraphError(f"{where}: groups {groups} does not divide the {c} input and {o} "
                             f"output channels")
        if ci * groups != c:
            per = f" per group ({groups} groups)" if groups != 1 else ""
            raise GraphError(f"{where}: weight {w.name} has {ci} input channels{per}, input "
                             f"{x.name} has {c}")
        if bo != o:
            raise GraphError(f"{where}: bias {b.name} has {bo} entries for {o} output channels")
        stride, pad = attrs["stride"], attrs["pad"]
        _range(where, "stride", stride, 1, 1 << 16)
        _range(where, "pad", pad, 0, max(kh, kw) - 1)
        _range(where, "pad_value", attrs.get("pad_value", 0), G.INT8_MIN, G.INT8_MAX)
        oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
        if oh < 1 or ow < 1:
            raise GraphError(f"{where}: a {kh}x{kw} kernel does not fit the {h}x{wd} input "
                             f"padded by {pad}")
        return G.TensorType((n, o, oh, ow), "int32", "NCHW",
                          _scaled(where, x) * _scaled(where, w))
    if op is G.Dense:
        x, w, b = inputs
        n, k = _want(where, x, "int8", 2, "input")
        m, kw_ = _want(where, w, "int8", 2, "weight")
        (bm,) = _want(where, b, "int32", 1, "bias")
        if kw_ != k or bm != m:
            raise GraphError(f"{where}: weight {w.name} {list(w.type.shape)} and bias {b.name} "
                             f"{list(b.type.shape)} do not match input {x.name} {[n, k]}")
        _range(where, "useful_k", attrs.get("useful_k", 0), 0, k)
        return G.TensorType((n, m), "int32", "NC", _scaled(where, x) * _scaled(where, w))
    if op is G.Requantize:
        x = inputs[0]
        if x.type.dtype != "int32":
            raise GraphError(f"{where}: input {x.name} must be int32, got {x.type.dtype}")
        _range(where, "mult", attrs["mult"], -(1 << 31), (1 << 31) - 1)
        _clip_range(where, attrs["lo"], attrs["hi"])
        if attrs["mult"] == 0:
            raise GraphError(f"{where}: mult must be non-zero")
        zero = attrs.get("zero", 0)
        _range(where, "zero", zero, G.INT8_MIN, G.INT8_MAX)
        mults = attrs.get("mults") or (inputs[1] if len(inputs) > 1 else None)
        if attrs.get("exact", False):
            _check_words(where, x, mults, attrs["mult"], attrs["shift"])
            return G.TensorType(x.type.shape, "int8", x.type.layout, attrs.get("scale"), zero)
        _range(where, "shift", attrs["shift"], 1, 31)
        if attrs.get("even", False) and (attrs["mult"] != 1 or mults is not None):
            raise GraphError(f"{where}: rounding half to even (even) is a shift alone: mult "
                             f"must be 1 without per-channel multipliers, got mult "
                             f"{attrs['mult']}{', mults' if mults is not None else ''}")
        if mults is not None:
            _check_mults(where, x, mults, attrs["mult"])
            return G.TensorType(x.type.shape, "int8", x.type.layout, attrs.get("scale"), zero)
        s = _scaled(where, x) * (1 << attrs["shift"]) / attrs["mult"]
        return G.TensorType(x.type.shape, "int8", x.type.layout, abs(s), zero)
    if op in (G.Relu, G.Clip):
        (x,) = inputs
        if x.type.dtype != "int8":
            raise GraphError(f"{where}: input {x.name} must be int8, got {x.type.dtype}")
        if op is G.Clip:
            _clip_range(where, attrs["lo"], attrs["hi"])
        return x.type
    if op is G.Add:
        a, b = inputs[:2]
        offsets = attrs.get("offsets") or (inputs[2] if len(inputs) > 2 else None)
        if offsets is not None:
            if offsets.data is None or offsets.type.dtype != "int32" \
                    or len(a.type.shape) < 2 or offsets.type.shape != (a.type.shape[1],):
                raise GraphError(f"{where}: offsets {offsets.name} must be an int32 constant "
                                 f"with one entry per channel of {a.name} "
                                 f"{list(a.type.shape)}, got {offsets.type}")
            if np.abs(offsets.data.astype(np.int64)).max(initial=0) > 1 << 30:
                raise GraphError(f"{where}: offsets {offsets.name} must lie in "
                                 f"[-2**30, 2**30]")
        for v in (a, b):
            if v.type.dtype != "int8":
                raise GraphError(f"{where}: operand {v.name} must be int8, got {v.type.dtype}")
        if a.type.shape != b.type.shape or a.type.layout != b.type.layout:
            raise GraphError(f"{where}: operands {a.name} {list(a.type.shape)} and {b.name} "
                             f"{list(b.type.shape)} differ in shape or layout")
        for key in ("mult_a", "mult_b"):
            _range(where, key, attrs[key], *_INT32)
        _range(where, "shift", attrs["shift"], 1, 31)
        _range(where, "offset", attrs.get("offset", 0), -(1 << 30), 1 << 30)
        if attrs.get("even", False) and attrs.get("offset", 0):
            raise GraphError(f"{where}: rounding half to even (even) takes no rounding offset, "
                             f"got offset {attrs['offset']}")
        _clip_range(where, attrs["lo"], attrs["hi"])
        return G.TensorType(a.type.shape, "int8", a.type.layout, attrs.get("scale"),
                            _offsets(where, attrs, {"a": a, "b": b}))
    if op is G.MaxPool2d:
        (x,) = inputs
        n, c, h, wd = _want(where, x, "int8", 4, "input")
        k, s, p = attrs["kernel"], attrs["stride"], attrs["pad"]
        _range(where, "kernel", k, 1, 1 << 16)
        _range(where, "stride", s, 1, 1 << 16)
        _range(where, "pad", p, 0, k - 1)
        oh, ow = (h + 2 * p - k) // s + 1, (wd + 2 * p - k) // s + 1
        if oh < 1 or ow < 1:
            raise GraphError(f"{where}: a {k}x{k} window does not fit the {h}x{wd} input")
        return G.TensorType((n, c, oh, ow), "int8", "NCHW", x.type.scale, x.type.zero)
    if op is G.GlobalAvgPool:
        x = inputs[0]
        n, c, h, wd = _want(where, x, "int8", 4, "input")
        if attrs.get("exact", False):  # ORT's kernel: one scale word per channel
            mults = attrs.get("mults") or (inputs[1] if len(inputs) > 1 else None)
            _check_words(where, x, mults, attrs["mult"], attrs["shift"])
        else:
            _range(where, "mult", attrs["mult"], *_INT32)
            _range(where, "shift", attrs["shift"], 1, 31)
        _clip_range(where, attrs["lo"], attrs["hi"])
        return G.TensorType((n, c), "int8", "NC", attrs.get("scale"),
                            _offsets(where, attrs, {"x": x}))
    if op is G.Lut2:
        a, b, table = inputs
        for v in (a, b):
            if v.type.dtype != "int8":
                raise GraphError(f"{where}: operand {v.name} must be int8, got {v.type.dtype}")
        if a.type.shape != b.type.shape:
            raise GraphError(f"{where}: operands {a.name} {list(a.type.shape)} and {b.name} "
                             f"{list(b.type.shape)} differ in shape")
        _want(where, table, "int8", 2, "table")
        if table.type.shape != (256, 256) or not table.is_const:
            raise GraphError(f"{where}: table {table.name} must be an int8[256, 256] constant")
        return G.TensorType(a.type.shape, "int8", a.type.layout, attrs.get("scale"),
                            attrs.get("zero", 0))
    if op is G.Pad:
        (x,) = inputs
        n, c, h, wd = _want(where, x, "int8", 4, "input")
        _range(where, "pad", attrs["pad"], 0, 1 << 16)
        _range(where, "value", attrs["value"], G.INT8_MIN, G.INT8_MAX)
        p = attrs["pad"]
        return G.TensorType((n, c, h + 2 * p, wd + 2 * p), "int8", "NCHW", x.type.scale,
                            x.type.zero)
    if op in TRANSFORMER_RULES:
        return TRANSFORMER_RULES[op](inputs, attrs, where)
    raise GraphError(f"{where}: unknown operator {op.__name__}")


def check_node(node: G.Node, where: str) -> None:
    """``node``'s output type is the one its rule infers (scale compared relatively)."""
    if isinstance(node, G.Fused):
        prev = node.anchor.output
        check_node(node.anchor, f"{where} (anchor {node.anchor.op})")
        for m in node.chain:
            if all(v is not prev for v in m.inputs):
                raise GraphError(f"{where}: fused {m.op} does not read the chain's value "
                                 f"{prev.name}")
            check_node(m, f"{where} ({m.op})")
            prev = m.output
        return
    attrs = node.attrs()
    attrs["scale"] = node.output.type.scale
    want = infer_type(type(node), node.inputs, attrs, where)
    got = node.output.type
    if (got.shape, got.dtype, got.layout, got.zero) != (want.shape, want.dtype, want.layout,
                                                        want.zero):
        raise GraphError(f"{where}: output {node.output.name} is {got}, the operator gives "
                         f"{want.dtype}{list(want.shape)} {want.layout}")
    if want.scale is not None and (got.scale is None
                                   or not math.isclose(got.scale, want.scale, rel_tol=1e-6)):
        raise GraphError(f"{where}: output {node.output.name} has scale {got.scale}, the "
                         f"operator gives {want.scale:.6g}")


def verify_graph(g: G.Graph) -> G.Graph:
    """Check ``g`` (returned unchanged): unique value names, each value defined once and
    before use, constants matching their types, graph outputs computed, every node typed by
    its rule."""
    defined: set[int] = set()
    names: dict[str, G.Value] = {}

    def define(v: G.Value, where: str) -> None:
        if id(v) in defined:
            raise GraphError(f"{where}: value {v.name} is defined twice")
        other = names.get(v.name)
        if other is not None and other is not v:
            raise GraphError(f"{where}: two values are named {v.name!r}")
        names[v.name] = v
        defined.add(id(v))

    for v in g.inputs:
        if v.is_const:
            raise GraphError(f"graph {g.name}: input {v.name} is a constant")
        define(v, f"graph {g.name} input")
    for k, n in enumerate(g.nodes):
        where = f"node {k} ({n.op} -> {n.output.name})"
        for v in n.inputs:
            if v.is_const and id(v) not in defined:
                _check_const(v, where)
                define(v, where)
            elif id(v) not in defined:
                raise GraphError(f"{where}: reads {v.name}, which is not an input, a constant "
                                 f"or the output of an earlier node")
        inner = n.nodes[:-1] if isinstance(n, G.Fused) else ()
        for m in inner:
            define(m.output, where)
        check_node(n, where)
        define(n.output, where)
    for v in g.outputs:
        if id(v) not in defined:
            raise GraphError(f"graph {g.name}: output {v.name} is not computed")
    return g


def _check_const(v: G.Value, where: str) -> None:
    assert v.data is not None
    if v.data.shape != v.type.shape or v.data.dtype != np.dtype(v.type.dtype):
        raise GraphError(f"{where}: constant {v.name} holds {v.data.dtype}{list(v.data.shape)}, "
                         f"its type says {v.type.dtype}{list(v.type.shape)}")


# ------------------------------------------------------------------------------ transformers


def _matmul_type(inputs: tuple[G.Value, ...], attrs: Mapping[str, Any], where: str
                 ) -> G.TensorType:
    """``(..., M, K) @ (..., K, N)`` -> int32 ``(..., M, N)``, the same batch dimensions; the
    scale is the product of the operands'."""
    a, b = inputs
    for v in (a, b):
        if v.type.dtype != "int8" or len(v.type.shape) < 2:
            raise GraphError(f"{where}: operand {v.name} must be int8 of rank >= 2, got "
                             f"{v.type.dtype}{list(v.type.shape)}")
    sa, sb = a.type.shape, b.type.shape
    if len(sa) != len(sb) or sa[:-2] != sb[:-2] or sa[-1] != sb[-2]:
        raise GraphError(f"{where}: {a.name} {list(sa)} @ {b.name} {list(sb)}: the operands "
                         f"need the same batch dimensions and a's last equal to b's "
                         f"second-to-last (no broadcasting)")
    for key, v in (("a", a), ("b", b)):
        if attrs.get(f"zero_{key}", 0) != v.type.zero:
            raise GraphError(f"{where}: zero_{key} is {attrs.get(f'zero_{key}', 0)}, but "
                             f"{v.name} has zero point {v.type.zero}")
    shape = (*sa[:-1], sb[-1])
    return G.TensorType(shape, "int32", _layout_of(shape),
                        _scaled(where, a) * _scaled(where, b))


def _layout_of(shape: tuple[int, ...]) -> str:
    """The logical layout a tensor of this rank carries (``NC`` for matrices, ``NCHW`` for
    4-D, ``ND`` for any other rank)."""
    return {2: "NC", 4: "NCHW"}.get(len(shape), "ND")


def _reshape_type(inputs: tuple[G.Value, ...], attrs: Mapping[str, Any], where: str
                  ) -> G.TensorType:
    (x,) = inputs
    shape = tuple(attrs["shape"])
    if x.type.dtype != "int8":
        raise GraphError(f"{where}: input {x.name} must be int8, got {x.type.dtype}")
    if any(not isinstance(d, (int, np.integer)) or d < 1 for d in shape) \
            or int(np.prod(shape, dtype=np.int64)) != x.type.size:
        raise GraphError(f"{where}: cannot view {x.name} {list(x.type.shape)} as "
                         f"{list(shape)} (every dimension positive, the same number of "
                         f"elements)")
    return G.TensorType(shape, "int8", _layout_of(shape), x.type.scale, x.type.zero)


def _transpose_type(inputs: tuple[G.Value, ...], attrs: Mapping[str, Any], where: str
                    ) -> G.TensorType:
    (x,) = inputs
    perm = tuple(attrs["perm"])
    if x.type.dtype != "int8":
        raise GraphError(f"{where}: input {x.name} must be int8, got {x.type.dtype}")
    if sorted(perm) != list(range(len(x.type.shape))):
        raise GraphError(f"{where}: perm {list(perm)} is not a permutation of the "
                         f"{len(x.type.shape)} axes of {x.name} {list(x.type.shape)}")
    shape = tuple(x.type.shape[p] for p in perm)
    return G.TensorType(shape, "int8", _layout_of(shape), x.type.scale, x.type.zero)


def _host_float_type(inputs: tuple[G.Value, ...], attrs: Mapping[str, Any], where: str
                     ) -> G.TensorType:
    """A float island: int8 inputs, one scale, zero point and ONNX shape of the same size each,
    steps naming known operators and earlier results; the output an int8 view of
    ``out_shape``."""
    scales, zeros, shapes = attrs["scales"], attrs["zeros"], attrs["shapes"]
    if not (len(scales) == len(zeros) == len(shapes) == len(inputs)):
        raise GraphError(f"{where}: {len(inputs)} inputs but {len(scales)} scales, "
                         f"{len(zeros)} zero points and {len(shapes)} shapes")
    for v, s, z, shp in zip(inputs, scales, zeros, shapes, strict=True):
        if v.type.dtype != "int8" or int(np.prod(shp, dtype=np.int64)) != v.type.size:
            raise GraphError(f"{where}: input {v.name} {v.type.dtype}{list(v.type.shape)} is "
                             f"not an int8 tensor of shape {list(shp)}'s size")
        if not (math.isfinite(s) and s > 0):
            raise GraphError(f"{where}: input {v.name}'s scale {s} is not positive")
        _range(where, f"zero point of {v.name}", z, G.INT8_MIN, G.INT8_MAX)
    steps = attrs["steps"]
    if not steps:
        raise GraphError(f"{where}: a float island needs at least one step")
    counts = {"in": len(inputs), "const": attrs["n_consts"]}
    for k, st in enumerate(steps):
        if st.op not in G.FLOAT_OPS:
            raise GraphError(f"{where}: step {k}: unknown float operator {st.op!r}")
        for kind, i in st.args:
            limit = k if kind == "tmp" else counts.get(kind, 0)
            if not 0 <= i < limit:
                raise GraphError(f"{where}: step {k} ({st.op}) reads {kind} {i}, which does not "
                                 f"exist")
    shape = tuple(attrs["shape"])
    zero = attrs.get("zero", 0)
    _range(where, "zero", zero, G.INT8_MIN, G.INT8_MAX)
    return G.TensorType(shape, "int8", _layout_of(shape), attrs.get("scale"), int(zero))


def _take_type(inputs: tuple[G.Value, ...], attrs: Mapping[str, Any], where: str
               ) -> G.TensorType:
    (x,) = inputs
    if x.type.dtype != "int8" or len(x.type.shape) < 2:
        raise GraphError(f"{where}: input {x.name} must be int8 of rank >= 2, got "
                         f"{x.type.dtype}{list(x.type.shape)}")
    _range(where, "index", attrs["index"], 0, x.type.shape[0] - 1)
    shape = x.type.shape[1:]
    return G.TensorType(shape, "int8", _layout_of(shape), x.type.scale, x.type.zero)


def _stack_type(inputs: tuple[G.Value, ...], attrs: Mapping[str, Any], where: str
                ) -> G.TensorType:
    if not inputs:
        raise GraphError(f"{where}: stack needs at least one tensor")
    first = inputs[0].type
    for v in inputs:
        t = v.type
        if (t.dtype, t.shape, t.zero) != ("int8", first.shape, first.zero) or \
                not math.isclose(t.scale or 0.0, first.scale or 0.0, rel_tol=1e-9):
            raise GraphError(f"{where}: {v.name} {t} differs from {inputs[0].name} {first} "
                             f"(stacked tensors share an int8 type, scale and zero point)")
    shape = (len(inputs), *first.shape)
    return G.TensorType(shape, "int8", _layout_of(shape), first.scale, first.zero)


#: the typing rules of the transformer operators (``infer_type`` reads them)
TRANSFORMER_RULES: dict[type[G.Node], Any] = {
    G.MatMul: _matmul_type, G.Reshape: _reshape_type, G.Transpose: _transpose_type,
    G.HostFloat: _host_float_type, G.Take: _take_type, G.Stack: _stack_type}


def _qlinear_softmax_type(inputs: tuple[G.Value, ...], attrs: Mapping[str, Any], where: str
                          ) -> G.TensorType:
    """An int8 tensor, an axis of it, a positive input scale; the output has the input's
    shape, the stated output scale and zero point."""
    (x,) = inputs
    if x.type.dtype != "int8":
        raise GraphError(f"{where}: input {x.name} must be int8, got {x.type.dtype}")
    rank = len(x.type.shape)
    _range(where, "axis", attrs["axis"], -rank, rank - 1)
    s = attrs["x_scale"]
    if not (math.isfinite(s) and s > 0):
        raise GraphError(f"{where}: x_scale {s} is not positive")
    zero = attrs.get("zero", 0)
    _range(where, "zero", zero, G.INT8_MIN, G.INT8_MAX)
    return G.TensorType(x.type.shape, "int8", x.type.layout, attrs.get("scale"), int(zero))


#: the typing rules of the QOperator operators (``infer_type`` reads them with the
#: transformer ones)
TRANSFORMER_RULES[G.QLinearSoftmax] = _qlinear_softmax_type


def _concat_type(inputs: tuple[G.Value, ...], attrs: Mapping[str, Any], where: str
                 ) -> G.TensorType:
    """int8 tensors of one rank, scale and zero point whose shapes differ along ``axis``
    only; the output's ``axis`` is their sum."""
    if not inputs:
        raise GraphError(f"{where}: concat needs at least one tensor")
    first = inputs[0].type
    rank = len(first.shape)
    axis = attrs["axis"]
    _range(where, "axis", axis, 0, rank - 1)
    for v in inputs:
        t = v.type
        same = len(t.shape) == rank and all(d == e for k, (d, e) in
                                            enumerate(zip(t.shape, first.shape, strict=True))
                                            if k != axis)
        # scales within 1e-3: a fixed-point requantize states its approximated scale, the
        # tensor it joins the model's own (the integers mean the same real values)
        if t.dtype != "int8" or not same or t.zero != first.zero or \
                not math.isclose(t.scale or 0.0, first.scale or 0.0, rel_tol=1e-3):
            raise GraphError(f"{where}: {v.name} {t} does not concatenate with "
                             f"{inputs[0].name} {first} along axis {axis}")
    shape = tuple(sum(v.type.shape[axis] for v in inputs) if k == axis else d
                  for k, d in enumerate(first.shape))
    return G.TensorType(shape, "int8", _layout_of(shape), first.scale, first.zero)


TRANSFORMER_RULES[G.Concat] = _concat_type


def _qlinear_avg_pool_type(inputs: tuple[G.Value, ...], attrs: Mapping[str, Any], where: str
                           ) -> G.TensorType:
    (x,) = inputs
    n, c, h, wd = _want(where, x, "int8", 4, "input")
    k, s, p = attrs["kernel"], attrs["stride"], attrs["pad"]
    _range(where, "kernel", k, 1, 1 << 16)
    _range(where, "stride", s, 1, 1 << 16)
    _range(where, "pad", p, 0, k - 1)
    xs = attrs["x_scale"]
    if not (math.isfinite(xs) and xs > 0):
        raise GraphError(f"{where}: x_scale {xs} is not positive")
    for key in ("zero_x", "zero"):
        _range(where, key, attrs.get(key, 0), G.INT8_MIN, G.INT8_MAX)
    oh, ow = (h + 2 * p - k) // s + 1, (wd + 2 * p - k) // s + 1
    if oh < 1 or ow < 1:
        raise GraphError(f"{where}: a {k}x{k} window does not fit the {h}x{wd} input")
    return G.TensorType((n, c, oh, ow), "int8", "NCHW", attrs.get("scale"),
                        int(attrs.get("zero", 0)))


TRANSFORMER_RULES[G.QLinearAvgPool] = _qlinear_avg_pool_type
