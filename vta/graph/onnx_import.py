"""Load a quantized ONNX model into the graph IR (needs the optional ``onnx`` extra).

Two spellings of an int8 network are understood:

* the **QLinear operators**: ``QLinearConv``, ``QLinearMatMul``, ``QLinearAdd`` and
  ``QLinearGlobalAveragePool`` (com.microsoft), ``MaxPool`` and ``Relu`` on int8 tensors;
* the **QDQ form**: float ``Conv``, ``Gemm``/``MatMul``, ``Add``, ``Relu``, ``MaxPool``,
  ``GlobalAveragePool`` between ``DequantizeLinear`` (of int8 activations and constant int8
  weights / int32 biases) and ``QuantizeLinear`` (the integer operator is the quantized
  computation: ``Q(Conv(DQ(x), DQ(w), DQ(b)))`` is a convolution and a requantize; a ``Relu``
  before the ``Q`` is the graph's ``relu`` after it).

``Flatten``/``Reshape`` of an (N, C, 1, 1) tensor to (N, C) are layout no-ops. A float graph
input that goes straight into a ``QuantizeLinear`` becomes an int8 input of that scale (the
host quantizes the image), a ``DequantizeLinear`` of an output is dropped (the output is the
int8 tensor, with its scale). Each requantization's ratio of ONNX scales becomes the graph's
fixed-point ``mult / 2**shift`` (``quant``), so results agree with ONNX's float rounding
within one unit of the last place. Anything else is a ``GraphError`` naming the node (or
tensor) and what is not supported: another operator, a non-zero zero point (only symmetric
quantization), uint8 data, per-channel scales, groups or dilations, asymmetric padding.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vta.errors import OnnxImportError
from vta.graph.builder import GraphBuilder
from vta.graph.ir import Graph, Value

__all__ = ["load_onnx", "OnnxImportError"]


def _onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise OnnxImportError("reading ONNX models needs the onnx package: pip install "
                              "'vta[onnx]'") from None
    return onnx


@dataclass
class _Dq:
    """A dequantized tensor: the int8 value (or constant) and its scale."""

    value: Value


@dataclass
class _Pending:
    """A float operator on dequantized inputs, waiting for the QuantizeLinear that gives its
    output scale: ``kind`` conv / dense / add / gap, its inputs and attributes, and a ReLU
    applied before the quantization."""

    kind: str
    inputs: tuple[Any, ...]
    attrs: dict[str, Any]
    relu: bool = False


class _Importer:
    def __init__(self, model: Any) -> None:
        onnx = _onnx()
        self.onnx = onnx
        self.model = model
        g = model.graph
        self.inits = {t.name: onnx.numpy_helper.to_array(t) for t in g.initializer}
        self.b = GraphBuilder(g.name or "onnx")
        self.env: dict[str, Any] = {}
        self.consumers: dict[str, list[Any]] = {}
        for n in g.node:
            for i in n.input:
                self.consumers.setdefault(i, []).append(n)

    # ------------------------------------------------------------------ helpers

    def where(self, n: Any) -> str:
        return f"ONNX node {n.name or n.output[0]!r} ({n.op_type})"

    def const(self, name: str, n: Any) -> np.ndarray:
        if name not in self.inits:
            raise OnnxImportError(f"{self.where(n)}: {name} must be a constant (an initializer)")
        return self.inits[name]

    def scale(self, name: str, n: Any) -> float:
        s = self.const(name, n)
        if s.size != 1:
            raise OnnxImportError(f"{self.where(n)}: scale {name} has {s.size} values; only "
                                  f"per-tensor scales are supported (not per-channel)")
        return float(s.reshape(()))

    def zero(self, name: str | None, n: Any) -> None:
        if not name:
            return
        z = self.const(name, n)
        if z.dtype not in (np.int8, np.int32) or np.any(z != 0):
            raise OnnxImportError(f"{self.where(n)}: zero point {name} is {z.dtype} "
                                  f"{z.reshape(-1)[:4].tolist()}; only symmetric int8 "
                                  f"quantization (zero point 0, int8) is supported")

    def value(self, name: str, n: Any) -> Value:
        v = self.env.get(name)
        if isinstance(v, Value):
            return v
        raise OnnxImportError(f"{self.where(n)}: input {name} is not an int8 tensor of the "
                              f"graph (got {type(v).__name__ if v is not None else 'nothing'})")

    def dq(self, name: str, n: Any) -> Value:
        v = self.env.get(name)
        if isinstance(v, _Dq):
            return v.value
        raise OnnxImportError(f"{self.where(n)}: input {name} is not a DequantizeLinear output "
                              f"(the QDQ form quantizes every operand)")

    def conv_attrs(self, n: Any) -> tuple[int, int]:
        a = {x.name: self.onnx.helper.get_attribute_value(x) for x in n.attribute}
        if a.get("group", 1) != 1:
            raise OnnxImportError(f"{self.where(n)}: group {a['group']} (only group 1)")
        if any(d != 1 for d in a.get("dilations", [1, 1])):
            raise OnnxImportError(f"{self.where(n)}: dilations {a['dilations']} (only 1)")
        strides = list(a.get("strides", [1, 1]))
        pads = list(a.get("pads", [0, 0, 0, 0]))
        if len(set(strides)) != 1 or len(set(pads)) != 1:
            raise OnnxImportError(f"{self.where(n)}: strides {strides} and pads {pads} must "
                                  f"be equal on every side")
        return strides[0], pads[0]

    def pool_attrs(self, n: Any) -> tuple[int, int, int]:
        a = {x.name: self.onnx.helper.get_attribute_value(x) for x in n.attribute}
        ks = list(a.get("kernel_shape", []))
        strides, pads = list(a.get("strides", [1, 1])), list(a.get("pads", [0, 0, 0, 0]))
        if len(set(ks)) != 1 or len(set(strides)) != 1 or len(set(pads)) != 1 \
                or a.get("ceil_mode", 0) or any(d != 1 for d in a.get("dilations", [1])):
            raise OnnxImportError(f"{self.where(n)}: only square windows with equal strides "
                                  f"and pads (no ceil mode, no dilation) are supported")
        return ks[0], strides[0], pads[0]

    # ------------------------------------------------------------------ run

    def run(self) -> Graph:
        g = self.model.graph
        inits = set(self.inits)
        for inp in g.input:
            if inp.name in inits:
                continue
            self.graph_input(inp)
        for n in g.node:
            handler = getattr(self, f"op_{n.op_type}", None)
            if handler is None:
                raise OnnxImportError(f"{self.where(n)}: operator {n.op_type} is not supported "
                                      f"(see vta.graph.onnx_import)")
            handler(n)
        outs = []
        for o in g.output:
            v = self.env.get(o.name)
            if isinstance(v, _Dq):
                v = v.value
            if not isinstance(v, Value):
                raise OnnxImportError(f"ONNX output {o.name} is not a quantized tensor")
            outs.append(v)
        return self.b.build(outs)

    def graph_input(self, inp: Any) -> None:
        t = inp.type.tensor_type
        shape = tuple(d.dim_value for d in t.shape.dim)
        if any(d < 1 for d in shape):
            raise OnnxImportError(f"ONNX input {inp.name}: every dimension must be fixed, got "
                                  f"{shape}")
        dtype = self.onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
        if dtype == np.int8:
            raise OnnxImportError(f"ONNX input {inp.name} is int8 without a scale; quantize a "
                                  f"float input with QuantizeLinear")
        users = self.consumers.get(inp.name, [])
        if len(users) != 1 or users[0].op_type != "QuantizeLinear":
            raise OnnxImportError(f"ONNX input {inp.name} ({dtype}) must feed one "
                                  f"QuantizeLinear (the host quantizes the image)")
        q = users[0]
        self.zero(q.input[2] if len(q.input) > 2 else None, q)
        v = self.b.input(inp.name, shape, self.scale(q.input[1], q))
        self.env[q.output[0]] = v
        self.env[inp.name] = "quantized"  # consumed by that QuantizeLinear

    # ------------------------------------------------------------------ QLinear operators

    def op_QLinearConv(self, n: Any) -> None:
        x = self.value(n.input[0], n)
        self.zero(n.input[2], n)
        self.zero(n.input[5], n)
        self.zero(n.input[7], n)
        w = self.const(n.input[3], n)
        ws = self.scale(n.input[4], n)
        bias = self.const(n.input[8], n) if len(n.input) > 8 and n.input[8] else \
            np.zeros(w.shape[0], np.int32)
        stride, pad = self.conv_attrs(n)
        wv = self.b.const(f"{n.output[0]}_w", w.astype(np.int8), ws)
        bv = self.b.const(f"{n.output[0]}_b", bias.astype(np.int32))
        acc = self.b.conv2d(x, wv, bv, stride, pad, name=f"{n.output[0]}_acc")
        self.env[n.output[0]] = self.b.requantize(acc, self.scale(n.input[6], n),
                                                  name=n.output[0])

    def op_QLinearMatMul(self, n: Any) -> None:
        x = self.value(n.input[0], n)
        for k in (2, 5, 7):
            self.zero(n.input[k], n)
        w = self.const(n.input[3], n)  # (K, M)
        wv = self.b.const(f"{n.output[0]}_w", np.ascontiguousarray(w.T).astype(np.int8),
                          self.scale(n.input[4], n))
        bv = self.b.const(f"{n.output[0]}_b", np.zeros(w.shape[1], np.int32))
        acc = self.b.dense(x, wv, bv, name=f"{n.output[0]}_acc")
        self.env[n.output[0]] = self.b.requantize(acc, self.scale(n.input[6], n),
                                                  name=n.output[0])

    def op_QLinearAdd(self, n: Any) -> None:
        a, c = self.value(n.input[0], n), self.value(n.input[3], n)
        for k in (2, 5, 7):
            self.zero(n.input[k], n)
        self.env[n.output[0]] = self.b.add(a, c, self.scale(n.input[6], n), name=n.output[0])

    def op_QLinearGlobalAveragePool(self, n: Any) -> None:
        x = self.value(n.input[0], n)
        self.zero(n.input[2], n)
        self.zero(n.input[4], n)
        self.env[n.output[0]] = self.b.global_avg_pool(x, self.scale(n.input[3], n),
                                                       name=n.output[0])

    # ------------------------------------------------------------------ both forms

    def op_MaxPool(self, n: Any) -> None:
        k, s, p = self.pool_attrs(n)
        v = self.env.get(n.input[0])
        if isinstance(v, _Dq):  # max commutes with a positive scale: pool the integers
            self.env[n.output[0]] = _Dq(self.b.max_pool2d(v.value, k, s, p, name=n.output[0]))
        else:
            self.env[n.output[0]] = self.b.max_pool2d(self.value(n.input[0], n), k, s, p,
                                                      name=n.output[0])

    def op_Relu(self, n: Any) -> None:
        v = self.env.get(n.input[0])
        if isinstance(v, _Pending):
            self.env[n.output[0]] = _Pending(v.kind, v.inputs, v.attrs, relu=True)
        elif isinstance(v, _Dq):
            self.env[n.output[0]] = _Dq(self.b.relu(v.value, name=n.output[0]))
        else:
            self.env[n.output[0]] = self.b.relu(self.value(n.input[0], n), name=n.output[0])

    def _alias(self, n: Any) -> None:
        v = self.env.get(n.input[0])
        inner = v.value if isinstance(v, _Dq) else v
        if not isinstance(inner, Value) or len(inner.type.shape) != 2:
            raise OnnxImportError(f"{self.where(n)}: only the (N, C, 1, 1) -> (N, C) reshape "
                                  f"of a pooled tensor is supported")
        self.env[n.output[0]] = v

    op_Flatten = _alias
    op_Reshape = _alias

    # ------------------------------------------------------------------ QDQ form

    def op_DequantizeLinear(self, n: Any) -> None:
        self.zero(n.input[2] if len(n.input) > 2 else None, n)
        s = self.scale(n.input[1], n)
        name = n.input[0]
        if name in self.inits:
            data = self.inits[name]
            if data.dtype not in (np.int8, np.int32):
                raise OnnxImportError(f"{self.where(n)}: constant {name} is {data.dtype}; "
                                      f"weights must be int8 and biases int32")
            self.env[n.output[0]] = _Dq(self.b.const(name, data, s))
            return
        v = self.value(name, n)
        if v.type.scale is None or not np.isclose(v.type.scale, s, rtol=1e-3):
            raise OnnxImportError(f"{self.where(n)}: dequantizes {name} with scale {s}, but "
                                  f"it was quantized with {v.type.scale}")
        self.env[n.output[0]] = _Dq(v)

    def op_Conv(self, n: Any) -> None:
        x, w = self.dq(n.input[0], n), self.dq(n.input[1], n)
        b = self.dq(n.input[2], n) if len(n.input) > 2 and n.input[2] else None
        stride, pad = self.conv_attrs(n)
        self.env[n.output[0]] = _Pending("conv", (x, w, b), {"stride": stride, "pad": pad})

    def op_Gemm(self, n: Any) -> None:
        a = {x.name: self.onnx.helper.get_attribute_value(x) for x in n.attribute}
        if a.get("transA", 0) or a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0:
            raise OnnxImportError(f"{self.where(n)}: only Gemm with transA 0, alpha 1, beta 1")
        x, w = self.dq(n.input[0], n), self.dq(n.input[1], n)
        b = self.dq(n.input[2], n) if len(n.input) > 2 and n.input[2] else None
        self.env[n.output[0]] = _Pending("dense", (x, w, b), {"trans_b": a.get("transB", 0)})

    def op_MatMul(self, n: Any) -> None:
        x, w = self.dq(n.input[0], n), self.dq(n.input[1], n)
        self.env[n.output[0]] = _Pending("dense", (x, w, None), {"trans_b": 0})

    def op_Add(self, n: Any) -> None:
        self.env[n.output[0]] = _Pending("add", (self.dq(n.input[0], n),
                                                 self.dq(n.input[1], n)), {})

    def op_GlobalAveragePool(self, n: Any) -> None:
        self.env[n.output[0]] = _Pending("gap", (self.dq(n.input[0], n),), {})

    def op_QuantizeLinear(self, n: Any) -> None:
        if self.env.get(n.input[0]) == "quantized":
            return  # the graph input's quantization, done by the host
        p = self.env.get(n.input[0])
        if isinstance(p, _Dq) and p.value.type.scale is not None and np.isclose(
                p.value.type.scale, self.scale(n.input[1], n), rtol=1e-3):
            self.env[n.output[0]] = p.value  # a max-pool or ReLU of integers, same scale
            return
        if not isinstance(p, _Pending):
            raise OnnxImportError(f"{self.where(n)}: quantizes {n.input[0]}, which is not "
                                  f"the result of a supported float operator on dequantized "
                                  f"inputs")
        self.zero(n.input[2] if len(n.input) > 2 else None, n)
        s, out = self.scale(n.input[1], n), n.output[0]
        b = self.b
        if p.kind == "conv":
            x, w, bias = p.inputs
            bv = bias if bias is not None else b.const(f"{out}_b",
                                                       np.zeros(w.type.shape[0], np.int32))
            y = b.requantize(b.conv2d(x, w, bv, p.attrs["stride"], p.attrs["pad"],
                                      name=f"{out}_acc"), s, name=out if not p.relu else None)
        elif p.kind == "dense":
            x, w, bias = p.inputs
            wv = w if p.attrs["trans_b"] else b.const(
                f"{w.name}_t", np.ascontiguousarray(w.data.T), w.type.scale)
            bv = bias if bias is not None else b.const(f"{out}_b",
                                                       np.zeros(wv.type.shape[0], np.int32))
            y = b.requantize(b.dense(x, wv, bv, name=f"{out}_acc"), s,
                             name=out if not p.relu else None)
        elif p.kind == "add":
            lhs, rhs = p.inputs
            y = b.add(lhs, rhs, scale=s, name=out if not p.relu else f"{out}_add")
        else:
            y = b.global_avg_pool(p.inputs[0], s, name=out if not p.relu else f"{out}_gap")
        self.env[out] = b.relu(y, name=out) if p.relu else y


def load_onnx(model: str | Path | Any) -> Graph:
    """The graph of an ONNX model (a path or a ``ModelProto``; module docstring)."""
    if isinstance(model, (str, Path)) and not Path(model).is_file():
        # named before the onnx package is needed: a wrong path is the user's first problem
        reason = "not a file" if Path(model).exists() else "No such file or directory"
        raise OnnxImportError(f"{model}: cannot read an ONNX model: {reason}")
    onnx = _onnx()
    if isinstance(model, (str, Path)):
        try:
            model = onnx.load(str(model))
        except (OSError, ValueError) as e:
            raise OnnxImportError(f"{model}: cannot read an ONNX model: "
                                  f"{getattr(e, 'strerror', None) or e}") from None
        except Exception as e:  # protobuf's DecodeError for a file that is not a model
            raise OnnxImportError(f"{model}: not an ONNX model ({type(e).__name__})") from None
    return _Importer(model).run()
