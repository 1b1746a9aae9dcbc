"""Load a quantized ONNX model into the graph IR (needs the optional ``onnx`` extra).

The model is validated first (``onnx_load``: the onnx checker with strict shape inference, a
damaged or empty file named). Two spellings of an int8 network are understood, those ONNX
Runtime's ``quantize_static`` writes:

* the **QOperator form**: ``QLinearConv``, ``QLinearMatMul``, ``QGemm``, ``QLinearAdd``,
  ``QLinearMul``, ``QLinearSoftmax``, ``QLinearConcat``, ``QLinearAveragePool`` and
  ``QLinearGlobalAveragePool`` (com.microsoft),
  ``MaxPool``, ``Relu``, ``Reshape`` and ``Transpose`` on int8 tensors, and
  the ``DequantizeLinear -> float op -> QuantizeLinear`` islands ORT leaves around ``Relu``,
  ``MaxPool``, ``GlobalAveragePool``, ``Flatten`` and ``Reshape``;
* the **QDQ form**: float ``Conv``, ``Gemm``/``MatMul``, ``Add``, ``Relu``, ``MaxPool``,
  ``GlobalAveragePool`` between ``DequantizeLinear`` (of int8 activations and constant int8
  weights / int32 biases) and ``QuantizeLinear`` (``Q(Conv(DQ(x), DQ(w), DQ(b)))`` is a
  convolution and a requantize; a ``Relu`` before the ``Q`` is the graph's ``relu`` after it).

Scales: every requantization's multiplier approximates the ratio of the model's **own**
scales (``s_x * s_w / s_y``, as ONNX Runtime's kernels compute it), never a ratio of scales
an earlier approximation produced; a ``DequantizeLinear`` carries its own scale (a model may
dequantize with any scale), so the importer never refuses a model for its own rounding.

Requantize arithmetic (``load_onnx(..., requant=...)``, ``REQUANT_MODES``): ``"fixed"`` (the
default) approximates each ratio by a fixed-point multiplier (``quant.fixed_point``: what
VTA's ALU, or its MUL variant, computes; within one unit of ORT); ``"ort"`` keeps ONNX
Runtime's float32 ratio exactly (``float32(float32(s_x * s_w) / s_y)``, per channel with
per-channel weights, as QLinearConv/QGemm compute it and as the QDQ form's float kernels
reproduce) in an exact requantize (``Requantize.exact``): ORT's bits, on a config with the
``requant_f32`` intrinsic (``hwconfigs/pynq_requant.yaml``) or on the host.

Zero points (ORT's default asymmetric quantization, and uint8): a constant weight's zero point
is folded into the weights (``w - z_w``) when the result is int8. An activation's zero point is
its value's ``TensorType.zero``; a uint8 activation ``u`` is the int8 ``u - 128`` with zero
point ``z - 128`` (the same real values, and ORT's clamp to [0, 255] is the int8 clamp). The
input zero point of a convolution or dense layer is folded into its bias (``b - z_x * sum_k
w``: with symmetric weights, ORT's default, the only cross term of ``sum (x - z_x) w``); a
padded convolution of an input with a non-zero zero point reads an explicit host-side ``pad``
with that zero point and convolves unpadded (VTA's LOAD pads with zeros only; folding the pad
instead needs a per-pixel int32 correction at the borders, which no chain operand carries).
An output zero point is the requantize's ``zero``; ``Relu`` of a tensor of zero point ``z`` is
``clip(z, 127)``; an add's and an average pool's input zero points are their ``zero_a``,
``zero_b``, ``zero_x``. Per-channel weight scales (along the output channel) give a
per-channel requantize (one multiplier per channel, one shift: an ALU MUL by a channel
operand); per-channel scales of anything else are refused by name. ``Flatten``/``Reshape`` of
an (N, C, 1, 1) tensor to (N, C) are layout no-ops.
A transformer encoder in the QDQ form (BERT, ``onnx_ort.bert_tiny``): a ``MatMul`` of two
dequantized activations is the graph's ``matmul`` (zero points subtracted) and a requantize;
``Reshape`` and ``Transpose`` between a ``DequantizeLinear`` and a ``QuantizeLinear`` of one
scale are the layout operators ``reshape`` / ``transpose`` on the int8 tensor (a [1, S, H]
tensor is held as (S, H), a dense layer's matrix); every other float region (``Softmax``,
``LayerNormalization``, ``Erf``, ``Div``, ``Mul``, ``Sub``, an ``Add`` with a constant or
float operand), from the ``DequantizeLinear`` outputs and float constants it reads to the
``QuantizeLinear`` that ends it, is one ``host_float`` node computing ORT's float32 operations
on the host (a dequantized constant only float operators read is a float constant, any zero
point and type). The QOperator form of a transformer, with ORT's kernel arithmetic
(``ort_qop``, ``ort_add``): ``QLinearMatMul`` of a (..., K) activation by a constant is the
dense layer of its (rows, K) view, of two activations the ``matmul`` and its requantize;
``QLinearAdd`` / ``QLinearMul`` with a scalar constant are ORT's 256-entry table as the
integer add (``x + x`` scaled) that reproduces it on every input where one exists, else as
``lut2``; with a constant tensor (a broadcast bias) or, for ``QLinearMul``, two activations,
ORT's (256, 256) table (``lut2``); ``QLinearSoftmax`` is ``qlinear_softmax`` (ORT's
exponential table, on the host). The shapes of the com.microsoft operators' outputs, which
onnx's inference does not know, are stated and inference rerun (``contrib_inferred``).
``QLinearConcat`` rescales each input of another scale through ORT's 256-entry table (an ALU
rescale proven on every input, else ``lut2``) and joins them (``concat``);
``QLinearAveragePool`` is ORT's float32 window mean (``qlinear_avg_pool``, on the host), or
its global pool for a window over the whole image. ``DynamicQuantizeLinear``,
``MatMulInteger`` and ``ConvInteger`` (``quantize_dynamic``'s form) are refused by name.
Every attribute is honored or refused by name (``onnx_attrs``). A float graph input that goes
straight into a ``QuantizeLinear`` becomes an int8 input of that scale and zero point (the host
quantizes the image); a ``DequantizeLinear`` of an output is dropped (the output is the
int8 tensor, with its scale). Anything else is an ``OnnxImportError`` naming the node (or
tensor) and what is not supported.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vta.errors import GraphError, OnnxImportError
from vta.graph import interp
from vta.graph.builder import GraphBuilder
from vta.graph.ir import INT8_MAX, INT8_MIN, FloatStep, GlobalAvgPool, Graph, TensorType, Value
from vta.graph.onnx_attrs import Window, conv_groups, node_attrs, window
from vta.graph.onnx_load import initializers, onnx_module, qdq_form, read_model
from vta.graph.ort_add import (
    MAX_SHIFT,
    fit_add,
    fit_channel_add,
    qdq_add_table,
    qlinear_add_table,
    rescale_table,
)
from vta.graph.ort_qop import qlinear_mul_table
from vta.graph.quant import ort_requantize
from vta.graph.quant_mlas import gap_ratio_refused, qlinear_gap_ratio

__all__ = ["load_onnx", "OnnxImportError", "SCALE_RTOL", "REQUANT_MODES", "ort_ratio"]

#: two ONNX scales are "the same" (a quantize that re-states a dequantize's scale) within this
SCALE_RTOL = 1e-6


@dataclass
class _Dq:
    """A dequantized tensor: the int8 value (or constant) and the scale and zero point (the
    int8 form of a uint8 one) the ``DequantizeLinear`` states."""

    value: Value
    scale: float | np.ndarray
    zero: int = 0
    #: the axis of a per-channel scale (an array ``scale``; a constant's)
    axis: int | None = None
    #: the ONNX tensor is uint8 (``value`` holds ``u - 128``; ORT's float arithmetic reads u)
    unsigned: bool = False


@dataclass
class _Pending:
    """A float operator on dequantized inputs, waiting for the QuantizeLinear that gives its
    output scale: ``kind`` conv / dense / add / gap, its inputs and attributes, and a ReLU
    applied before the quantization."""

    kind: str
    inputs: tuple[Any, ...]
    attrs: dict[str, Any]
    relu: bool = False


#: how an imported model requantizes (module docstring)
REQUANT_MODES = ("fixed", "ort")


def ort_ratio(sx: float, sw: float | np.ndarray, sy: float) -> float | np.ndarray:
    """ONNX Runtime's requantization ratio in float32: ``(s_x * s_w) / s_y``, each operation
    rounded to float32 (one per channel for per-channel ``s_w``)."""
    f32 = np.float32
    r = (f32(sx) * np.asarray(sw, dtype=f32)) / f32(sy)
    return r.astype(np.float64) if np.ndim(r) else float(r)


def _fixed_gap_is_orts(x: Value, mult: int, shift: int, zero: int, ratio: float) -> bool:
    """Whether the fixed-point ``global_avg_pool`` of ``x`` (``mult``, ``shift``, output zero
    point ``zero``) gives ORT's QLinearGlobalAveragePool (``quant_mlas``, ratio ``ratio``) for
    every channel sum ``x`` can have: each sum minus ``N * z_x`` is fed to the interpreter's
    definition of the node as a one-pixel image (so every value is checked, not a sample)."""
    pixels = int(np.prod(x.type.shape[2:]))
    sums = np.arange(pixels * (INT8_MIN - x.type.zero), pixels * (INT8_MAX - x.type.zero) + 1,
                     dtype=np.int64)
    one = Value("sums", TensorType((1, sums.size, 1, 1), "int8"))
    node = GlobalAvgPool(one, mult, shift, INT8_MIN, INT8_MAX,
                         Value("mean", TensorType((1, sums.size), "int8", "NC")), zero=zero)
    ours = interp.eval_node(node, {one: sums.reshape(1, -1, 1, 1)})
    return bool(np.array_equal(ours.reshape(-1), ort_requantize(sums, ratio, zero)))


class _Importer:
    def __init__(self, model: Any, what: str, requant: str = "fixed") -> None:
        self.onnx = onnx_module()
        self.model = model
        self.what = what
        self.requant = requant
        g = model.graph
        self.inits = initializers(model, what)
        self.b = GraphBuilder(g.name or "onnx")
        self.env: dict[str, Any] = {}
        #: ORT's form of the model: in the QDQ form its float GlobalAveragePool groups run as
        #: QLinearGlobalAveragePool (``onnx_ort.reference_for``)
        self.qdq = qdq_form(model)
        self.consumers: dict[str, list[Any]] = {}
        for n in g.node:
            for i in n.input:
                self.consumers.setdefault(i, []).append(n)

    # ------------------------------------------------------------------ helpers

    def where(self, n: Any) -> str:
        return f"ONNX node {n.name or n.output[0]!r} ({n.op_type})"

    def attrs(self, n: Any) -> dict[str, Any]:
        return node_attrs(n, self.where(n))

    def const(self, name: str, n: Any) -> np.ndarray:
        if name not in self.inits:
            raise OnnxImportError(f"{self.where(n)}: {name} must be a constant (an initializer)")
        return self.inits[name]

    def scale(self, name: str, n: Any) -> float:
        s = self.const(name, n)
        if s.size != 1:
            raise OnnxImportError(f"{self.where(n)}: scale {name} has {s.size} values: "
                                  f"per-channel scales are supported for constant weights "
                                  f"only (an activation or output has one scale)")
        v = float(s.reshape(()))
        if not (math.isfinite(v) and v > 0):
            raise OnnxImportError(f"{self.where(n)}: scale {name} is {v}, not a positive "
                                  f"finite number")
        return v

    def wscale(self, name: str, n: Any, channels: int) -> float | np.ndarray:
        """A weight's scale: one number, or (per-channel quantization) one per output channel
        (``channels`` of them), each positive and finite."""
        s = self.const(name, n)
        if s.size == 1:
            return self.scale(name, n)
        if s.shape != (channels,):
            raise OnnxImportError(f"{self.where(n)}: scale {name} has shape {list(s.shape)}; "
                                  f"a per-channel weight scale has one value per output "
                                  f"channel ({channels})")
        v = s.astype(np.float64)
        if not (np.isfinite(v).all() and (v > 0).all()):
            raise OnnxImportError(f"{self.where(n)}: scale {name} has a value that is not a "
                                  f"positive finite number")
        return v

    def zero(self, name: str | None, n: Any, what: str = "activation") -> int:
        """The zero point ``name`` (0 when absent), as the graph IR's int8 tensors carry it: an
        int8 one as is, a uint8 one minus 128 (the tensor ``u - 128``); uint8 weights are
        refused (``weight``)."""
        if not name:
            return 0
        z = self.const(name, n)
        if z.dtype == np.uint8 and what == "activation":
            if z.size != 1:
                raise OnnxImportError(f"{self.where(n)}: zero point {name} has {z.size} "
                                      f"values: per-channel activation quantization is not "
                                      f"supported")
            return int(z.reshape(())) - 128
        if z.dtype not in (np.int8, np.int32):
            raise OnnxImportError(f"{self.where(n)}: zero point {name} is {z.dtype}; only int8 "
                                  f"(and int32 for a bias) are supported")
        if z.size != 1:
            if what == "weight" and z.size and (z == z.flat[0]).all():
                return int(z.flat[0])  # per-channel weights, one zero point (ORT: 0)
            raise OnnxImportError(f"{self.where(n)}: zero point {name} has {z.size} values: "
                                  f"per-channel zero points are not supported (only "
                                  f"per-channel scales with one weight zero point)")
        return int(z.reshape(()))

    def weight(self, data: np.ndarray, zname: str | None, n: Any, name: str) -> np.ndarray:
        """Constant int8 weights ``data`` with the zero point ``zname`` folded in: ``w - z``
        (gemmlowp's and TVM QNN's offset form), which must still be int8."""
        if data.dtype == np.uint8:
            raise OnnxImportError(f"{self.where(n)}: weight {name} is uint8: uint8 tensors are "
                                  f"not supported (quantize with weight_type=QuantType.QInt8)")
        if data.dtype != np.int8:
            raise OnnxImportError(f"{self.where(n)}: weight {name} is {data.dtype}; weights "
                                  f"must be int8")
        z = self.zero(zname, n, what="weight")
        if z == 0:
            return data
        w = data.astype(np.int32) - z
        if w.min() < -128 or w.max() > 127:
            raise OnnxImportError(f"{self.where(n)}: weight {name} minus its zero point {z} "
                                  f"spans [{w.min()}, {w.max()}], beyond int8: asymmetric "
                                  f"weights are not supported (quantize with "
                                  f"WeightSymmetric=True)")
        return w.astype(np.int8)

    def value(self, name: str, n: Any) -> Value:
        v = self.env.get(name)
        if isinstance(v, Value):
            return v
        raise OnnxImportError(f"{self.where(n)}: input {name} is not an int8 tensor of the "
                              f"graph (got {type(v).__name__ if v is not None else 'nothing'})")

    def dq(self, name: str, n: Any) -> _Dq:
        v = self.env.get(name)
        if isinstance(v, _Clipped):  # a float op reads a Clip: clip the integers (exact)
            v = self.env[name] = self._integer_clip(v, name, n)
        if isinstance(v, _Dq):
            return v
        raise OnnxImportError(f"{self.where(n)}: input {name} is not a DequantizeLinear output "
                              f"(the QDQ form quantizes every operand)")

    def qin(self, name: str, sname: str, zname: str, n: Any) -> tuple[Value, float]:
        """A QLinear operator's int8 input and the scale the operator states for it."""
        v = self.value(name, n)
        self.same_zero(v, self.zero(zname, n), name, n)
        return v, self.scale(sname, n)

    def same_zero(self, v: Value, z: int, name: str, n: Any) -> None:
        """The zero point an operator states for its input ``v`` is the one ``v`` was
        quantized with (int8 form)."""
        if z != v.type.zero:
            raise OnnxImportError(f"{self.where(n)}: reads {name} with zero point {z}, but it "
                                  f"was quantized with zero point {v.type.zero} (int8 form; a "
                                  f"uint8 zero point is 128 more)")

    def relu(self, x: Value, name: str | None) -> Value:
        """ReLU of ``x``: ``max(x, z)`` for a zero point ``z`` (the integer of real 0)."""
        if x.type.zero:
            return self.b.clip(x, x.type.zero, 127, name=name)
        return self.b.relu(x, name=name)

    def out(self, name: str, v: Value) -> None:
        """``v`` is the int8 tensor ONNX calls ``name`` (its scale is the operator's: the
        scale of every later ratio comes from the model, never from ``v``'s type)."""
        self.env[name] = v

    def bias(self, name: str | None, n: Any, channels: int) -> np.ndarray:
        if not name:
            return np.zeros(channels, np.int32)
        b = self.const(name, n)
        if b.dtype != np.int32 or b.shape != (channels,):
            raise OnnxImportError(f"{self.where(n)}: bias {name} is {b.dtype}{list(b.shape)}; "
                                  f"expected int32[{channels}]")
        return b

    # ------------------------------------------------------------------ run

    def run(self) -> Graph:
        g = self.model.graph
        inits = set(self.inits)
        for inp in g.input:
            if inp.name in inits:
                continue
            self.graph_input(inp)
        for n in g.node:
            if n.domain not in ("", "ai.onnx", "com.microsoft"):
                raise OnnxImportError(f"{self.where(n)}: operator domain {n.domain!r} is not "
                                      f"supported")
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
            if not isinstance(v, Value) or v.is_const:
                raise OnnxImportError(f"ONNX output {o.name} is not a quantized tensor the graph "
                                      f"computes")
            outs.append(v)
        return self.b.build(outs)

    def graph_input(self, inp: Any) -> None:
        t = inp.type.tensor_type
        shape = tuple(d.dim_value for d in t.shape.dim)
        if any(d < 1 for d in shape):
            raise OnnxImportError(f"ONNX input {inp.name}: every dimension must be fixed, got "
                                  f"{shape}")
        dtype = self.onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
        if dtype in (np.int8, np.uint8):
            raise OnnxImportError(f"ONNX input {inp.name} is {dtype} without a scale; quantize a "
                                  f"float input with QuantizeLinear")
        users = self.consumers.get(inp.name, [])
        refuse_dynamic(inp.name, users)
        if len(users) != 1 or users[0].op_type != "QuantizeLinear":
            raise OnnxImportError(f"ONNX input {inp.name} ({dtype}) must feed one "
                                  f"QuantizeLinear (the host quantizes the image)")
        q = users[0]
        self.attrs(q)
        z = self.zero(q.input[2] if len(q.input) > 2 else None, q)
        s = self.scale(q.input[1], q)
        v = self.b.input(inp.name, shape, s, zero=z)
        self.out(q.output[0], v)
        self.env[inp.name] = "quantized"  # consumed by that QuantizeLinear

    # ------------------------------------------------------------------ QLinear operators

    def conv_window(self, n: Any, x: Value, w_shape: tuple[int, ...]) -> Window:
        """The window of Conv / QLinearConv ``n`` (every attribute honored or refused)."""
        attrs = self.attrs(n)
        groups = conv_groups(attrs, x.type.shape, w_shape, self.where(n))
        win = window(attrs, x.type.shape[2:], self.where(n), list(w_shape[2:]))
        return Window(win.kernel, win.stride, win.pad, groups)

    def _requant(self, acc: Value, ratio: float | np.ndarray, sy: float, name: str | None,
                 zy: int) -> Value:
        """``acc``'s requantize to scale ``sy``, zero point ``zy``: one multiplier, or one per
        channel (``ratio`` an array: per-channel weight scales); ORT's float32 ratio exactly
        with ``requant="ort"``."""
        if self.requant == "ort":
            ratios = [float(r) for r in np.atleast_1d(ratio)]
            return self.b.requantize_exact(acc, ratios, sy, name=name, zero=zy)
        if isinstance(ratio, np.ndarray):
            return self.b.requantize_channels(acc, [float(r) for r in ratio], sy, name=name,
                                              zero=zy)
        return self.b.requantize(acc, ratio=ratio, name=name, zero=zy, even=True)

    def _conv(self, x: Value, sx: float, w: np.ndarray, sw: float | np.ndarray,
              bias: np.ndarray,
              win: Window, sy: float, out: str, relu: bool = False, wname: str = "w",
              zy: int = 0) -> Value:
        """A convolution and its requantize to zero point ``zy`` (``relu``: a ReLU after it),
        ratio ``sx * sw / sy``; ``x``'s zero point folded into the bias (and padded with)."""
        b = self.b
        pad = win.pad
        if x.type.zero and pad:  # LOAD pads with zeros: pad with the zero point on the host
            x = b.pad(x, pad, x.type.zero, name=f"{out}_pad")
            pad = 0
        wv = b.const(f"{out}_{wname}", w, _nominal(sw))
        bv = b.const(f"{out}_b", _fold_zero(bias, w, x.type.zero, out))
        acc = b.conv2d(x, wv, bv, win.stride, pad, name=f"{out}_acc", groups=win.groups)
        ratio = ort_ratio(sx, sw, sy) if self.requant == "ort" else sx * sw / sy
        y = self._requant(acc, ratio, sy, out if not relu else None, zy)
        return self.relu(y, out) if relu else y

    def _dense(self, x: Value, sx: float, w_mk: np.ndarray, sw: float | np.ndarray,
               bias: np.ndarray,
               sy: float, out: str, relu: bool = False, zy: int = 0) -> Value:
        """A dense layer ``x @ w_mk.T + bias`` and its requantize to zero point ``zy``
        (``x``'s zero point folded into the bias)."""
        b = self.b
        wv = b.const(f"{out}_w", np.ascontiguousarray(w_mk), _nominal(sw))
        bv = b.const(f"{out}_b", _fold_zero(bias, w_mk, x.type.zero, out))
        acc = b.dense(x, wv, bv, name=f"{out}_acc")
        ratio = ort_ratio(sx, sw, sy) if self.requant == "ort" else sx * sw / sy
        y = self._requant(acc, ratio, sy, out if not relu else None, zy)
        return self.relu(y, out) if relu else y

    def op_QLinearConv(self, n: Any) -> None:
        x, sx = self.qin(n.input[0], n.input[1], n.input[2], n)
        w = self.weight(self.const(n.input[3], n), n.input[5], n, n.input[3])
        sw, sy = self.wscale(n.input[4], n, w.shape[0]), self.scale(n.input[6], n)
        zy = self.zero(n.input[7], n)
        bias = self.bias(n.input[8] if len(n.input) > 8 else None, n, w.shape[0])
        win = self.conv_window(n, x, w.shape)
        self.out(n.output[0], self._conv(x, sx, w, sw, bias, win, sy, n.output[0], zy=zy))

    def op_QLinearMatMul(self, n: Any) -> None:
        if self.qop_matmul(n):  # QOperator transformers (rank 3, two activations)
            return
        x, sx = self.qin(n.input[0], n.input[1], n.input[2], n)
        w = self.weight(self.const(n.input[3], n), n.input[5], n, n.input[3])  # (K, M)
        self._two_d(n, x, w)
        sw, sy = self.wscale(n.input[4], n, w.shape[1]), self.scale(n.input[6], n)
        zy = self.zero(n.input[7], n)
        self.out(n.output[0], self._dense(x, sx, w.T, sw, np.zeros(w.shape[1], np.int32),
                                          sy, n.output[0], zy=zy))

    def op_QGemm(self, n: Any) -> None:
        a = self.attrs(n)
        if a.get("transA", 0):
            raise OnnxImportError(f"{self.where(n)}: transA {a['transA']} is not supported "
                                  f"(only 0)")
        if len(n.input) < 8 or not n.input[7]:
            raise OnnxImportError(f"{self.where(n)}: QGemm without y_scale (a float output) "
                                  f"is not supported")
        x, sx = self.qin(n.input[0], n.input[1], n.input[2], n)
        w = self.weight(self.const(n.input[3], n), n.input[5], n, n.input[3])
        w_mk = w if a.get("transB", 0) else w.T
        self._two_d(n, x, w_mk.T)
        sw, sy = self.wscale(n.input[4], n, w_mk.shape[0]), self.scale(n.input[7], n)
        zy = self.zero(n.input[8] if len(n.input) > 8 else None, n)
        bias = self.bias(n.input[6] or None, n, w_mk.shape[0])
        alpha = float(a.get("alpha", 1.0))  # y = alpha * (A @ B) + C: C has scale alpha*sx*sw
        if not (math.isfinite(alpha) and alpha > 0):
            raise OnnxImportError(f"{self.where(n)}: alpha {alpha} must be positive")
        self.out(n.output[0], self._dense(x, sx * alpha, w_mk, sw, bias, sy, n.output[0],
                                          zy=zy))

    def _two_d(self, n: Any, x: Value, w_km: np.ndarray) -> None:
        if len(x.type.shape) != 2 or w_km.ndim != 2 or x.type.shape[1] != w_km.shape[0]:
            raise OnnxImportError(f"{self.where(n)}: a matrix product of {list(x.type.shape)} "
                                  f"by a constant {list(w_km.shape)}: only 2-D (N, K) @ (K, M) "
                                  f"is supported")

    def op_QLinearAdd(self, n: Any) -> None:
        if self.qop_binary(n):  # a constant operand (QOperator transformers)
            return
        a, sa = self.qin(n.input[0], n.input[1], n.input[2], n)
        c, sc = self.qin(n.input[3], n.input[4], n.input[5], n)
        sy = self.scale(n.input[6], n)
        zy = self.zero(n.input[7] if len(n.input) > 7 else None, n)
        if self.requant == "ort":
            unsigned = self.unsigned(n.input[7] if len(n.input) > 7 else None, n)
            self.out(n.output[0], self._exact_add(n, a, sa, c, sc, sy, zy, unsigned,
                                                  qlinear_add_table, n.output[0]))
            return
        self.out(n.output[0], self.b.add(a, c, sy, name=n.output[0],
                                         ratios=(sa / sy, sc / sy), zero=zy))

    def op_QLinearGlobalAveragePool(self, n: Any) -> None:
        if self.attrs(n).get("channels_last", 0):
            raise OnnxImportError(f"{self.where(n)}: channels_last 1 is not supported (NCHW "
                                  f"only)")
        x, sx = self.qin(n.input[0], n.input[1], n.input[2], n)
        sy = self.scale(n.input[3], n)
        zy = self.zero(n.input[4], n)
        self.out(n.output[0], self._gap(x, sx, sy, n.output[0], zy, kernel=True))

    def _gap(self, x: Value, sx: float, sy: float, name: str, zy: int = 0,
             kernel: bool = False) -> Value:
        """``x``'s global average pool to scale ``sy``, zero point ``zy``, (N, C). ``kernel``:
        ORT computes it with its QLinearGlobalAveragePool kernel (``quant_mlas``); with
        ``requant="ort"`` vta then gives that kernel's bits: the fixed-point ``global_avg_pool``
        where it equals the kernel on every possible channel sum, else the pool with ORT's
        scale word (``GlobalAvgPool.exact``: REQUANT_F32 after the sum)."""
        hw = int(np.prod(x.type.shape[2:])) if len(x.type.shape) == 4 else 1
        if kernel and self.requant == "ort" and len(x.type.shape) == 4:
            ratio = qlinear_gap_ratio(sx, sy, hw)
            why = gap_ratio_refused(ratio, hw)
            if why is not None:
                raise OnnxImportError(f"global average pool {name}: ONNX Runtime's "
                                      f"QLinearGlobalAveragePool refuses {why}")
            try:
                mult, shift = self.b.gap_fixed_point(x, sx / (hw * sy), name)
                orts = _fixed_gap_is_orts(x, mult, shift, zy, ratio)
            except GraphError:  # no fixed-point form at all
                orts = False
            if not orts:
                return self.b.global_avg_pool_exact(x, ratio, sy, zy, name)
        return self.b.global_avg_pool(x, sy, name=name, ratio=sx / (hw * sy), zero=zy)

    # ------------------------------------------------------------------ both forms

    def op_MaxPool(self, n: Any) -> None:
        v = self.env.get(n.input[0])
        inner = v.value if isinstance(v, _Dq) else self.value(n.input[0], n)
        if len(inner.type.shape) != 4:
            raise OnnxImportError(f"{self.where(n)}: input {n.input[0]} is not NCHW")
        win = window(self.attrs(n), inner.type.shape[2:], self.where(n))
        # max commutes with a positive scale (zero point 0): pool the integers
        y = self.b.max_pool2d(inner, win.kernel, win.stride, win.pad, name=n.output[0])
        if isinstance(v, _Dq):
            self.env[n.output[0]] = _Dq(y, v.scale, v.zero)
        else:
            self.out(n.output[0], y)

    def op_Relu(self, n: Any) -> None:
        v = self.env.get(n.input[0])
        if isinstance(v, _Pending):
            self.env[n.output[0]] = _Pending(v.kind, v.inputs, v.attrs, relu=True)
        elif isinstance(v, _Dq):
            self.env[n.output[0]] = _Dq(self.relu(v.value, n.output[0]), v.scale, v.zero)
        else:
            x = self.value(n.input[0], n)
            self.out(n.output[0], self.relu(x, n.output[0]))

    def _flat_shape(self, n: Any) -> tuple[int, ...]:
        """The shape a Flatten / Reshape gives, from ONNX's own shape inference."""
        a = self.attrs(n)
        src = self._onnx_shape(n.input[0], n)
        if n.op_type == "Flatten":
            axis = int(a.get("axis", 1))
            axis = axis + len(src) if axis < 0 else axis
            return (int(np.prod(src[:axis])), int(np.prod(src[axis:])))
        target = [int(d) for d in self.const(n.input[1], n)]
        if a.get("allowzero", 0) and 0 in target:
            raise OnnxImportError(f"{self.where(n)}: allowzero with a 0 in the shape is not "
                                  f"supported")
        shape = [src[i] if d == 0 else d for i, d in enumerate(target)]
        if -1 in shape:
            known = int(np.prod([d for d in shape if d != -1]))
            shape[shape.index(-1)] = int(np.prod(src)) // max(known, 1)
        return tuple(shape)

    def _onnx_shape(self, name: str, n: Any) -> tuple[int, ...]:
        shapes = self.__dict__.get("_shapes")
        if shapes is None:
            inferred = contrib_inferred(self.onnx, self.model)
            shapes = {}
            for vi in (*inferred.graph.value_info, *inferred.graph.input,
                       *inferred.graph.output):
                dims = vi.type.tensor_type.shape.dim
                shapes[vi.name] = tuple(d.dim_value for d in dims)
            self.__dict__["_shapes"] = shapes
        if shapes.get(name):
            return shapes[name]
        # an output of a com.microsoft operator (onnx's shape inference does not know them):
        # the graph IR's tensor, a pooled (N, C) being ONNX's (N, C, 1, 1)
        v = self.env.get(name)
        inner = v.value if isinstance(v, _Dq) else v
        if isinstance(v, _Pending) and v.kind == "gap":
            inner = v.inputs[0].value
            return (*inner.type.shape[:2], 1, 1)
        if not isinstance(inner, Value):
            raise OnnxImportError(f"{self.where(n)}: the shape of {name} is not known after "
                                  f"shape inference")
        if isinstance(self.b.producer(inner), GlobalAvgPool):
            return (*inner.type.shape, 1, 1)
        return inner.type.shape

    def _reshape(self, n: Any) -> None:
        """(N, C, 1, 1) -> (N, C): a no-op on the graph IR's pooled (N, C) tensors."""
        v = self.env.get(n.input[0])
        shape = self._flat_shape(n)
        src = self._onnx_shape(n.input[0], n)
        ir_shape: tuple[int, ...]
        if isinstance(v, _Pending) and v.kind == "gap" and not v.relu:
            ir_shape = (src[0], src[1])
        else:
            inner = v.value if isinstance(v, _Dq) else v
            if not isinstance(inner, Value):
                raise OnnxImportError(f"{self.where(n)}: input {n.input[0]} is not an int8 "
                                      f"tensor of the graph")
            ir_shape = inner.type.shape
        ok = len(src) == 4 and src[2:] == (1, 1) and shape == (src[0], src[1]) \
            and tuple(ir_shape) == shape
        if not ok and not (len(src) == 2 and shape == tuple(src)):
            raise OnnxImportError(f"{self.where(n)}: {n.op_type} of {list(src)} to "
                                  f"{list(shape)}: only the (N, C, 1, 1) -> (N, C) reshape of "
                                  f"a pooled tensor is supported")
        self.env[n.output[0]] = v

    op_Flatten = _reshape

    # ------------------------------------------------------------------ QDQ form

    def op_DequantizeLinear(self, n: Any) -> None:
        attrs = self.attrs(n)
        zname = n.input[2] if len(n.input) > 2 else None
        name = n.input[0]
        if name in self.inits:
            data = self.inits[name]
            axis = int(attrs.get("axis", 1))
            axis = axis + data.ndim if axis < 0 else axis
            per_channel = self.const(n.input[1], n).size != 1
            if per_channel and not 0 <= axis < data.ndim:
                raise OnnxImportError(f"{self.where(n)}: axis {axis} is not an axis of "
                                      f"{name} {list(data.shape)}")
            s = self.wscale(n.input[1], n, data.shape[axis]) if per_channel else \
                self.scale(n.input[1], n)
            dq_axis = axis if per_channel else None
            if data.dtype == np.int32:
                if self.zero(zname, n, what="weight"):
                    raise OnnxImportError(f"{self.where(n)}: int32 bias {name} has a non-zero "
                                          f"zero point")
                self.env[n.output[0]] = _Dq(self.b.const(name, data, _nominal(s)), s,
                                            axis=dq_axis)
                return
            if self.float_constant(n, data, s, dq_axis):
                return
            w = self.weight(data, zname, n, name)
            self.env[n.output[0]] = _Dq(self.b.const(name, w, _nominal(s)), s, axis=dq_axis)
            return
        s = self.scale(n.input[1], n)
        v = self.value(name, n)
        z = self.zero(zname, n)
        self.same_zero(v, z, name, n)
        self.env[n.output[0]] = _Dq(v, s, z, unsigned=self.unsigned(zname, n))

    def op_Conv(self, n: Any) -> None:
        x, w = self.dq(n.input[0], n), self.dq(n.input[1], n)
        b = self.dq(n.input[2], n) if len(n.input) > 2 and n.input[2] else None
        win = self.conv_window(n, x.value, w.value.type.shape)
        self.env[n.output[0]] = _Pending("conv", (x, w, b), {"window": win})

    def op_Gemm(self, n: Any) -> None:
        a = self.attrs(n)
        if a.get("transA", 0) or a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0:
            raise OnnxImportError(f"{self.where(n)}: transA {a.get('transA', 0)}, alpha "
                                  f"{a.get('alpha', 1.0)}, beta {a.get('beta', 1.0)}: only "
                                  f"Gemm with transA 0, alpha 1, beta 1 is supported")
        x, w = self.dq(n.input[0], n), self.dq(n.input[1], n)
        b = self.dq(n.input[2], n) if len(n.input) > 2 and n.input[2] else None
        self.env[n.output[0]] = _Pending("dense", (x, w, b), {"trans_b": a.get("transB", 0)})

    def op_MatMul(self, n: Any) -> None:
        x, w = self.dq(n.input[0], n), self.dq(n.input[1], n)
        if not w.value.is_const:  # a product of two activations (attention)
            self.env[n.output[0]] = _Pending("act_matmul", (x, w), {})
            return
        self.env[n.output[0]] = _Pending("dense", (self.view_2d(x), w, None), {"trans_b": 0})

    def op_Add(self, n: Any) -> None:
        if not self.two_activations(n):  # a constant operand (a bias) or a float operand
            self.float_op(n, "add")
            return
        self.env[n.output[0]] = _Pending("add", (self.view_2d(self.dq(n.input[0], n)),
                                                 self.view_2d(self.dq(n.input[1], n))), {})

    def op_GlobalAveragePool(self, n: Any) -> None:
        self.env[n.output[0]] = _Pending("gap", (self.dq(n.input[0], n),), {})

    def op_QuantizeLinear(self, n: Any) -> None:
        if self.env.get(n.input[0]) == "quantized":
            return  # the graph input's quantization, done by the host
        self.attrs(n)
        p = self.env.get(n.input[0])
        s, out = self.scale(n.input[1], n), n.output[0]
        z = self.zero(n.input[2] if len(n.input) > 2 else None, n)
        if isinstance(p, _Clipped):
            self.out(out, self._rescale(n, p, s, z))
            return
        if isinstance(p, _Dq) and not p.value.is_const:
            if not math.isclose(p.scale, s, rel_tol=SCALE_RTOL) or z != p.zero:
                raise OnnxImportError(f"{self.where(n)}: requantizes the integers of "
                                      f"{n.input[0]} from scale {p.scale:.8g} (zero point "
                                      f"{p.zero}) to {s:.8g} (zero point {z}); only a quantize "
                                      f"that keeps the dequantize's scale and zero point is "
                                      f"supported around a float Relu / MaxPool / Flatten")
            self.out(out, p.value)  # a max-pool or ReLU of integers, same scale
            return
        if isinstance(p, _Float):
            self.out(out, self.host_float(n, p, s, z))
            return
        if not isinstance(p, _Pending):
            raise OnnxImportError(f"{self.where(n)}: quantizes {n.input[0]}, which is not "
                                  f"the result of a supported float operator on dequantized "
                                  f"inputs")
        self.out(out, self._quantized(n, p, s, out, z))

    def _quantized(self, n: Any, p: _Pending, s: float, out: str, z: int = 0) -> Value:
        b = self.b
        if p.kind == "act_matmul":
            return self.act_matmul(p, s, out, z)
        if p.kind in ("conv", "dense"):
            x, w, bias = p.inputs
            if not w.value.is_const:
                raise OnnxImportError(f"{self.where(n)}: the weights of a {p.kind} must be a "
                                      f"constant")
            wdata = w.value.data
            out_axis = 0 if p.kind == "conv" or p.attrs["trans_b"] else wdata.ndim - 1
            channels = wdata.shape[out_axis]
            if w.axis is not None and w.axis != out_axis:
                raise OnnxImportError(f"{self.where(n)}: the weights {w.value.name} are "
                                      f"quantized per channel along axis {w.axis}; only the "
                                      f"output-channel axis ({out_axis}) is supported")
            bdata = self._qdq_bias(n, bias, x.scale * w.scale, channels)
            if p.kind == "conv":
                return self._conv(x.value, x.scale, wdata, w.scale, bdata, p.attrs["window"], s,
                                  out, relu=p.relu, wname=w.value.name, zy=z)
            w_mk = wdata if p.attrs["trans_b"] else wdata.T
            self._two_d(n, x.value, w_mk.T)
            return self._dense(x.value, x.scale, w_mk, w.scale, bdata, s, out, relu=p.relu,
                               zy=z)
        if p.kind == "add" and self.requant == "ort" and not p.relu:
            lhs, rhs = p.inputs
            unsigned = self.unsigned(n.input[2] if len(n.input) > 2 else None, n)
            y = self._exact_add(n, lhs.value, lhs.scale, rhs.value, rhs.scale, s, z, unsigned,
                                qdq_add_table, out)
        elif p.kind == "add":
            lhs, rhs = p.inputs
            y = b.add(lhs.value, rhs.value, s, name=out if not p.relu else f"{out}_add",
                      ratios=(lhs.scale / s, rhs.scale / s), zero=z, even=True)
        else:
            (x,) = p.inputs
            y = self._gap(x.value, x.scale, s, out if not p.relu else f"{out}_gap", z,
                          kernel=self.qdq)  # ORT fuses it into QLinearGlobalAveragePool
        return self.relu(y, out) if p.relu else y

    def _qdq_bias(self, n: Any, bias: _Dq | None, want: float | np.ndarray, channels: int
                  ) -> np.ndarray:
        """A QDQ bias's int32 data; its scale must be the product of the input's and the
        weights' (then it adds to the accumulator as is)."""
        if bias is None:
            return np.zeros(channels, np.int32)
        data = bias.value.data
        if data is None or data.dtype != np.int32 or data.shape != (channels,):
            raise OnnxImportError(f"{self.where(n)}: bias {bias.value.name} must be a constant "
                                  f"int32[{channels}]")
        if not np.allclose(bias.scale, want, rtol=1e-5, atol=0):
            raise OnnxImportError(f"{self.where(n)}: bias {bias.value.name} has scale "
                                  f"{_text(bias.scale)}, not input scale x weight scale "
                                  f"{_text(want)}")
        return data

    # ------------------------------------------------------------------ transformers
    # BERT's operators as ORT's quantizer writes them (QDQ): matrix products of two
    # activations, Reshape / Transpose between DequantizeLinear and QuantizeLinear of one
    # scale, and float islands (Softmax, LayerNormalization, Erf, Div, Mul, Add of a constant)
    # computed on the host in float32 (``HostFloat``).

    def float_constant(self, n: Any, data: np.ndarray, s: float | np.ndarray,
                       axis: int | None) -> bool:
        """A dequantized constant that only float operators read (GELU's 1 and 0.5, a layer
        norm's scale): its float32 value as ORT's DequantizeLinear computes it, ``float32(q -
        z) * s`` (any zero point, int8 or uint8); False for one an integer operator reads."""
        users = self.consumers.get(n.output[0], [])
        if not users or any(u.op_type in _INTEGER_READERS for u in users):
            return False
        zname = n.input[2] if len(n.input) > 2 and n.input[2] else None
        z = self.const(zname, n).astype(np.int32) if zname else np.int32(0)
        scale = np.asarray(s, dtype=np.float32)
        if scale.ndim and axis is not None:
            scale = scale.reshape([-1 if k == axis else 1 for k in range(data.ndim)])
            z = np.asarray(z).reshape(scale.shape) if np.ndim(z) else z
        value = ((data.astype(np.int32) - z).astype(np.float32) * scale).astype(np.float32)
        self.env[n.output[0]] = _Float(_FExpr("const", (), {"data": value}))
        return True

    def view_2d(self, d: _Dq) -> _Dq:
        """``d`` with a [1, S, H] value viewed as (S, H) (what a dense layer and an add
        take); other ranks unchanged. One view per value."""
        v = d.value
        if v.is_const or len(v.type.shape) != 3 or v.type.shape[0] != 1:
            return d
        return _Dq(self.view(v, v.type.shape[1:]), d.scale, d.zero, d.axis)

    def view(self, v: Value, shape: tuple[int, ...], name: str | None = None) -> Value:
        """``v`` viewed as ``shape`` (a host ``Reshape``, made once per value and shape;
        ``name`` its output's, default ``<v>_view``)."""
        if tuple(v.type.shape) == tuple(shape):
            return v
        views = self.__dict__.setdefault("_views", {})
        key = (id(v), tuple(shape))
        if key not in views:
            views[key] = self.b.reshape(v, tuple(shape), name=name or f"{v.name}_view")
        return views[key]  # type: ignore[no-any-return]

    def quantized_name(self, n: Any) -> str:
        """The name of ``n``'s int8 result: the output of the QuantizeLinear that restates
        it (ORT's tensor of that name), else ``n``'s own output."""
        users = self.consumers.get(n.output[0], [])
        if len(users) == 1 and users[0].op_type == "QuantizeLinear":
            return str(users[0].output[0])
        return str(n.output[0])

    def two_activations(self, n: Any) -> bool:
        """Whether both inputs of binary ``n`` are dequantized activations (an integer
        operator's operands) rather than constants or float results."""
        vs = [self.env.get(i) for i in n.input]
        return all(isinstance(v, _Dq) and not v.value.is_const for v in vs)

    def onnx_shape(self, name: str, n: Any) -> tuple[int, ...]:
        """``name``'s ONNX shape (shape inference), or a named refusal."""
        shape = self._onnx_shape(name, n)
        if not shape or any(d < 1 for d in shape):
            raise OnnxImportError(f"{self.where(n)}: the shape of {name} is not known after "
                                  f"shape inference")
        return shape

    def farg(self, name: str, n: Any) -> _FExpr:
        """Operand ``name`` of a float operator: a float result, a dequantized tensor (its
        float32 values), or a float initializer."""
        v = self.env.get(name)
        if isinstance(v, _Float):
            return v.expr
        if isinstance(v, _Dq):
            if v.value.is_const:
                return _FExpr("const", (), {"data": _dq_const(v)})
            return _FExpr("in", (), {"dq": v, "shape": self.onnx_shape(name, n)})
        if name in self.inits:
            data = self.inits[name]
            if data.dtype != np.float32:
                raise OnnxImportError(f"{self.where(n)}: constant {name} is {data.dtype}; a "
                                      f"float operator's constant must be float32")
            return _FExpr("const", (), {"data": data})
        raise OnnxImportError(f"{self.where(n)}: input {name} is neither a dequantized tensor, "
                              f"a float result nor a float constant")

    def float_op(self, n: Any, op: str, **attrs: Any) -> None:
        """``n``'s output: float operator ``op`` on its inputs (a step of a float island)."""
        args = tuple(self.farg(i, n) for i in n.input if i)
        self.env[n.output[0]] = _Float(_FExpr(op, args, attrs))

    def op_Sub(self, n: Any) -> None:
        self.float_op(n, "sub")

    def op_Mul(self, n: Any) -> None:
        self.float_op(n, "mul")

    def op_Div(self, n: Any) -> None:
        self.float_op(n, "div")

    def op_Erf(self, n: Any) -> None:
        self.attrs(n)
        self.float_op(n, "erf")

    def opset(self) -> int:
        return next((int(o.version) for o in self.model.opset_import
                     if o.domain in ("", "ai.onnx")), 1)

    def op_Softmax(self, n: Any) -> None:
        a = self.attrs(n)
        if self.opset() < 13:
            raise OnnxImportError(f"{self.where(n)}: Softmax before opset 13 (it flattens the "
                                  f"axes from axis on) is not supported; the model is opset "
                                  f"{self.opset()}")
        rank = len(self.onnx_shape(n.input[0], n))
        axis = int(a.get("axis", -1))
        if not -rank <= axis < rank:
            raise OnnxImportError(f"{self.where(n)}: axis {axis} is not an axis of a rank-{rank} "
                                  f"tensor")
        self.float_op(n, "softmax", axis=axis)

    def op_LayerNormalization(self, n: Any) -> None:
        a = self.attrs(n)
        if int(a.get("stash_type", 1)) != 1:
            raise OnnxImportError(f"{self.where(n)}: stash_type {a['stash_type']} is not "
                                  f"supported (only 1: float32 statistics)")
        if any(o for o in n.output[1:]):
            raise OnnxImportError(f"{self.where(n)}: the Mean and InvStdDev outputs are not "
                                  f"supported (only Y)")
        shape = self.onnx_shape(n.input[0], n)
        rank = len(shape)
        axis = int(a.get("axis", -1))
        if not -rank <= axis < rank:
            raise OnnxImportError(f"{self.where(n)}: axis {axis} is not an axis of a rank-{rank} "
                                  f"tensor")
        norm = int(np.prod(shape[axis:], dtype=np.int64))
        for role, name in zip(("scale", "bias"), n.input[1:3], strict=False):
            if not name:
                continue
            size = self.inits[name].size if name in self.inits else \
                int(np.prod(self.onnx_shape(name, n), dtype=np.int64))
            if size != norm:  # ORT's broadcasting kernel (another arithmetic), not modelled
                raise OnnxImportError(f"{self.where(n)}: {role} {name} has {size} values; only "
                                      f"one per normalized value ({norm}: "
                                      f"{list(shape[axis:])}) is supported")
        eps = float(a.get("epsilon", 1e-5))
        if not (math.isfinite(eps) and eps >= 0):
            raise OnnxImportError(f"{self.where(n)}: epsilon {eps} must be a non-negative "
                                  f"number")
        self.float_op(n, "layer_norm", axis=axis, epsilon=eps)

    def op_Reshape(self, n: Any) -> None:
        """A reshape of an int8 tensor (QOperator), of a dequantized activation (QDQ: a
        ``reshape`` view, the same integers and scale) or of a float result; a pooled
        (N, C, 1, 1) tensor pending its quantization is ``_reshape``'s."""
        v = self.env.get(n.input[0])
        if isinstance(v, _Pending):
            self._reshape(n)
            return
        shape, src = self._flat_shape(n), self.onnx_shape(n.input[0], n)
        if int(np.prod(shape)) != int(np.prod(src)):
            raise OnnxImportError(f"{self.where(n)}: cannot reshape {n.input[0]} {list(src)} "
                                  f"to {list(shape)}")
        if isinstance(v, _Float):
            self.env[n.output[0]] = _Float(_FExpr("reshape", (v.expr,), {"shape": shape}))
        elif isinstance(v, Value) and not v.is_const:
            self.out(n.output[0], self.view(v, _ir_shape(shape), n.output[0]))
        elif isinstance(v, _Dq) and not v.value.is_const:
            y = self.view(v.value, _ir_shape(shape), self.quantized_name(n))
            self.env[n.output[0]] = _Dq(y, v.scale, v.zero)
        else:
            raise OnnxImportError(f"{self.where(n)}: reshapes {n.input[0]}, which is not an "
                                  f"activation or a float result")

    def op_Transpose(self, n: Any) -> None:
        src = self.onnx_shape(n.input[0], n)
        perm = tuple(int(p) for p in self.attrs(n).get("perm", range(len(src) - 1, -1, -1)))
        if sorted(perm) != list(range(len(src))):
            raise OnnxImportError(f"{self.where(n)}: perm {list(perm)} is not a permutation of "
                                  f"the {len(src)} axes of {n.input[0]} {list(src)}")
        v = self.env.get(n.input[0])
        if isinstance(v, _Float):
            self.env[n.output[0]] = _Float(_FExpr("transpose", (v.expr,), {"perm": perm}))
            return
        out = tuple(src[p] for p in perm)
        if isinstance(v, Value) and not v.is_const:  # an int8 tensor (QOperator)
            y = self.b.transpose(self.view(v, src), perm, name=n.output[0])
            self.out(n.output[0], self.view(y, _ir_shape(out)))
            return
        if not isinstance(v, _Dq) or v.value.is_const:
            raise OnnxImportError(f"{self.where(n)}: transposes {n.input[0]}, which is not an "
                                  f"activation or a float result")
        y = self.b.transpose(self.view(v.value, src), perm, name=self.quantized_name(n))
        self.env[n.output[0]] = _Dq(self.view(y, _ir_shape(out)), v.scale, v.zero)

    def act_matmul(self, p: _Pending, s: float, out: str, z: int) -> Value:
        """``Q(MatMul(DQ(a), DQ(b)))`` of two activations: an integer ``matmul`` (zero points
        subtracted) and its requantize, ratio ``s_a * s_b / s``."""
        a, c = p.inputs
        acc = self.b.matmul(a.value, c.value, name=f"{out}_acc")
        ratio = ort_ratio(a.scale, c.scale, s) if self.requant == "ort" else a.scale * c.scale / s
        return self._requant(acc, ratio, s, out, z)

    def host_float(self, n: Any, f: _Float, s: float, z: int) -> Value:
        """The ``HostFloat`` node computing float island ``f`` and quantizing it with scale
        ``s``, zero point ``z`` (QuantizeLinear ``n``)."""
        xs: list[_FExpr] = []
        consts: list[np.ndarray] = []
        steps: list[FloatStep] = []
        where: dict[int, tuple[str, int]] = {}

        def visit(e: _FExpr) -> tuple[str, int]:
            if id(e) in where:
                return where[id(e)]
            if e.op == "in":
                same = next((k for k, o in enumerate(xs) if o.attrs["dq"] is e.attrs["dq"]),
                            None)
                if same is None:
                    xs.append(e)
                    same = len(xs) - 1
                ref = ("in", same)
            elif e.op == "const":
                consts.append(np.asarray(e.attrs["data"], dtype=np.float32))
                ref = ("const", len(consts) - 1)
            else:
                args = tuple(visit(a) for a in e.args)
                steps.append(FloatStep(e.op, args, tuple(sorted(e.attrs.items()))))
                ref = ("tmp", len(steps) - 1)
            where[id(e)] = ref
            return ref

        visit(f.expr)
        if not steps:
            raise OnnxImportError(f"{self.where(n)}: quantizes {n.input[0]}, a constant or a "
                                  f"dequantized tensor with another scale (no float operator)")
        shape = _ir_shape(self.onnx_shape(n.output[0], n))
        dqs = [x.attrs["dq"] for x in xs]
        return self.b.host_float([d.value for d in dqs], [float(d.scale) for d in dqs],
                                 [d.zero for d in dqs], [x.attrs["shape"] for x in xs],
                                 consts, steps, shape, s, z, name=n.output[0])
    # ------------------------------------------------------------------ MobileNet-V2's ops
    # (grouped / depthwise convolutions: ``conv_window``; ReLU6 islands and ORT's exact adds)

    def unsigned(self, zname: str | None, n: Any) -> bool:
        """Whether the zero point ``zname`` (and so its tensor) is uint8."""
        return bool(zname) and self.const(str(zname), n).dtype == np.uint8

    def op_Clip(self, n: Any) -> None:
        """``Clip`` of a dequantized tensor (the island ORT leaves around a ReLU6 when its
        output range differs from the input's): bounds from the constant ``min`` / ``max``
        inputs, applied when the ``QuantizeLinear`` after it gives the output scale."""
        self.attrs(n)  # Clip at opset >= 11 has no attributes (min/max are inputs)
        x = self.env.get(n.input[0])
        if not isinstance(x, _Dq) or x.value.is_const:
            raise OnnxImportError(f"{self.where(n)}: Clip of {n.input[0]}, which is not a "
                                  f"dequantized int8 tensor (only DequantizeLinear -> Clip -> "
                                  f"QuantizeLinear is supported)")
        bounds = [self._clip_bound(n, i) for i in (1, 2)]
        self.env[n.output[0]] = _Clipped(x, bounds[0], bounds[1])

    def _clip_bound(self, n: Any, i: int) -> float | None:
        if len(n.input) <= i or not n.input[i]:
            return None
        v = self.const(n.input[i], n)
        if v.size != 1 or not np.isfinite(v).all():
            raise OnnxImportError(f"{self.where(n)}: Clip bound {n.input[i]} must be one finite "
                                  f"number, got {list(v.reshape(-1)[:4])}")
        return float(v.reshape(()))

    def _integer_clip(self, p: _Clipped, name: str, n: Any) -> _Dq:
        """``Clip(DequantizeLinear(x))`` read by a float operator: the same values as the
        dequantized integer clip when each bound, in float32, is ``s * (k - z)`` for an integer
        ``k`` or lies outside the representable range (ReLU6's 0 is the zero point);
        otherwise refused by name."""
        x = p.dq
        off = 128 if x.unsigned else 0
        lo, hi = -128, 127
        grid = _dequantize_ints(np.arange(-128, 128) + off, float(x.scale), x.zero + off)
        for bound, side in ((p.lo, "min"), (p.hi, "max")):
            if bound is None:
                continue
            hit = np.flatnonzero(grid == np.float32(bound))
            inside = grid[0] < np.float32(bound) < grid[-1]
            if inside and not hit.size:
                raise OnnxImportError(f"{self.where(n)}: reads {name}, a Clip whose {side} "
                                      f"{bound:g} is not a value of scale {x.scale:.8g} (zero "
                                      f"point {x.zero}): only a Clip that is quantized again, "
                                      f"or whose bounds are on the integer grid, is supported")
            if hit.size and side == "min":
                lo = int(hit[0]) - 128
            elif hit.size:
                hi = int(hit[0]) - 128
            elif side == "min" and np.float32(bound) >= grid[-1]:
                lo = 127
            elif side == "max" and np.float32(bound) <= grid[0]:
                hi = -128
        y = x.value if (lo, hi) == (-128, 127) else \
            self.b.clip(x.value, lo, max(lo, hi), name=name)
        return _Dq(y, x.scale, x.zero, unsigned=x.unsigned)

    def _rescale(self, n: Any, p: _Clipped, s: float, z: int) -> Value:
        """``QuantizeLinear(Clip(DequantizeLinear(x)))``: ORT's float32 table over every
        stored ``x`` (``ort_add.rescale_table``) as the integer add that reproduces it on all
        of them (``x + x`` with ``mult_b`` 0), or a plain clip where that is the table."""
        x = p.dq
        unsigned = self.unsigned(n.input[2] if len(n.input) > 2 else None, n)
        if unsigned != x.unsigned:
            raise OnnxImportError(f"{self.where(n)}: quantizes a Clip of a "
                                  f"{'u' if x.unsigned else ''}int8 tensor to "
                                  f"{'u' if unsigned else ''}int8")
        off = 128 if unsigned else 0
        table = rescale_table(float(x.scale), x.zero + off, s, z + off, p.lo, p.hi, unsigned)
        ints = np.arange(-128, 128)
        lo, hi = int(table.min()) - off, int(table.max()) - off
        if z == x.zero and np.array_equal(table - off, np.clip(ints, lo, hi)):
            return self.b.clip(x.value, lo, hi, name=n.output[0])
        form = fit_add(np.repeat(table[:, None], 256, axis=1), x.zero, x.zero, z,
                       (float(x.scale) / s, 0.0), unsigned)
        if form is None:
            raise OnnxImportError(f"{self.where(n)}: no integer form (multipliers of two ALU "
                                  f"immediates, shift <= {MAX_SHIFT}) reproduces ONNX "
                                  f"Runtime's requantizing Clip from scale {x.scale:.8g} to "
                                  f"{s:.8g} on every input")
        return self.b.add_form(x.value, x.value, form, s, name=n.output[0], zero=z)

    def _exact_add(self, n: Any, a: Value, sa: float, c: Value, sc: float, sy: float, zy: int,
                   unsigned: bool, arith: Callable[..., np.ndarray], name: str) -> Value:
        """An add with ONNX Runtime's arithmetic (``arith``: ``ort_add.qlinear_add_table`` for
        QLinearAdd, ``qdq_add_table`` for the QDQ form's float Add): the integer form proven
        equal to its table on all 256 x 256 input pairs (``ort_add.fit_add``); where none
        exists (the real sum has exact ties, which ORT rounds half to even and no single
        rounding offset does), ORT's table itself (``Lut2``, a host lookup)."""
        off = 128 if unsigned else 0
        table = arith(sa, a.type.zero + off, sc, c.type.zero + off, sy, zy + off, unsigned)
        form = fit_add(table, a.type.zero, c.type.zero, zy, (sa / sy, sc / sy), unsigned)
        if form is None:
            return self.b.lut2(a, c, table - off, sy, name=name, zero=zy)
        return self.b.add_form(a, c, form, sy, name=name, zero=zy)

    # ------------------------------------------------------------------ QOperator transformers
    # BERT in ORT's QOperator form: QLinearMatMul of rank 3 (a dense layer on the (S, H) view)
    # and of two activations (``matmul`` and its requantize), QLinearAdd of a broadcast
    # constant, QLinearMul and QLinearSoftmax, each with ORT's kernel arithmetic
    # (``ort_add``, ``ort_qop``): an integer add proven on every input where one exists, else
    # ORT's table (``Lut2``) or kernel (``QLinearSoftmax``) on the host.

    def canon(self, name: str, n: Any) -> Value:
        """Activation ``name`` held in the graph IR's form of its ONNX shape (``_ir_shape``:
        a [1, S, H] tensor as (S, H)), rebound so later readers share the view."""
        v = self.value(name, n)
        if v.is_const:
            raise OnnxImportError(f"{self.where(n)}: input {name} is not an activation")
        shape = _ir_shape(self.onnx_shape(name, n))
        if int(np.prod(shape)) != v.type.size:
            raise OnnxImportError(f"{self.where(n)}: input {name} holds {v.type.size} values, "
                                  f"its ONNX shape {list(shape)} {int(np.prod(shape))}")
        y = self.view(v, shape)
        self.env[name] = y
        return y

    def qop_matmul(self, n: Any) -> bool:
        """``QLinearMatMul`` beyond a 2-D activation by a 2-D constant: of two activations
        (attention's ``Q @ K^T`` and ``P @ V``: the integer ``matmul``, zero points
        subtracted, and its requantize), or of a (..., K) activation by a constant (its
        (rows, K) view rebound, then the dense path). False: the 2-D path takes it."""
        self.attrs(n)
        if n.input[3] in self.inits:
            v = self.value(n.input[0], n)
            shape = v.type.shape
            if len(shape) > 2:  # (..., K) @ (K, M): the dense layer of the (rows, K) view
                self.env[n.input[0]] = self.view(v, (int(np.prod(shape[:-1])), shape[-1]))
            return False
        a_shape, b_shape = self.onnx_shape(n.input[0], n), self.onnx_shape(n.input[3], n)
        if len(a_shape) < 2 or a_shape[:-2] != b_shape[:-2] or a_shape[-1] != b_shape[-2]:
            raise OnnxImportError(f"{self.where(n)}: a matrix product of {list(a_shape)} by "
                                  f"{list(b_shape)}: only (..., M, K) @ (..., K, N) with the "
                                  f"same leading dimensions is supported (no broadcasting)")
        self.canon(n.input[0], n)
        self.canon(n.input[3], n)
        a, sa = self.qin(n.input[0], n.input[1], n.input[2], n)
        c, sc = self.qin(n.input[3], n.input[4], n.input[5], n)
        sy, zy = self.scale(n.input[6], n), self.zero(n.input[7], n)
        out = n.output[0]
        acc = self.b.matmul(self.view(a, a_shape), self.view(c, b_shape), name=f"{out}_acc")
        ratio = ort_ratio(sa, sc, sy) if self.requant == "ort" else sa * sc / sy
        y = self._requant(acc, ratio, sy, out, zy)
        self.out(out, self.view(y, _ir_shape((*a_shape[:-1], b_shape[-1]))))
        return True

    def qop_binary(self, n: Any) -> bool:
        """``QLinearAdd`` with a constant operand; False: the plain activation add takes it
        (two activations held in different views of one shape rebound to the IR view)."""
        self.attrs(n)
        if n.input[0] in self.inits or n.input[3] in self.inits:
            self.table_op(n, qlinear_add_table)
            return True
        if self.value(n.input[0], n).type.shape != self.value(n.input[3], n).type.shape:
            self.canon(n.input[0], n)  # a [1, S, H] tensor and an (S, H) view of one
            self.canon(n.input[3], n)
        return False

    def op_QLinearMul(self, n: Any) -> None:
        """ORT's ``QLinearMul``: by a constant, the integer add (``x + x`` scaled) proven on
        every input where one exists, else its table; of two activations, its table
        (``Lut2``: the ALU multiplies by immediates only)."""
        self.attrs(n)
        self.table_op(n, qlinear_mul_table)

    def table_op(self, n: Any, arith: Callable[..., np.ndarray]) -> None:
        """A QLinear element-wise operator (inputs A, A_scale, A_zero, B, B_scale, B_zero,
        C_scale, C_zero) with ORT's arithmetic ``arith`` (a (256, 256) table of stored
        values): one operand may be a constant (any shape that broadcasts to the other's);
        two activations must have one shape."""
        out = n.output[0]
        sa, sb = self.scale(n.input[1], n), self.scale(n.input[4], n)
        sy = self.scale(n.input[6], n)
        zname = n.input[7] if len(n.input) > 7 and n.input[7] else None
        zy = self.zero(zname, n)
        unsigned = self.unsigned(zname, n)
        for i in (0, 3):
            if self.unsigned(n.input[i + 2] or None, n) != unsigned:
                raise OnnxImportError(f"{self.where(n)}: input {n.input[i]} and the output "
                                      f"differ in type (int8 / uint8)")
        off = 128 if unsigned else 0
        za, zb = self.zero(n.input[2] or None, n), self.zero(n.input[5] or None, n)
        table = arith(sa, za + off, sb, zb + off, sy, zy + off, unsigned) - off
        consts = [i for i in (0, 3) if n.input[i] in self.inits]
        if len(consts) == 2:
            raise OnnxImportError(f"{self.where(n)}: both operands are constants (fold them "
                                  f"before import)")
        if not consts:
            shapes = [self.onnx_shape(n.input[i], n) for i in (0, 3)]
            if shapes[0] != shapes[1]:
                raise OnnxImportError(f"{self.where(n)}: operands {list(shapes[0])} and "
                                      f"{list(shapes[1])}: broadcasting between two "
                                      f"activations is not supported")
            a = self.canon(n.input[0], n)
            c = self.canon(n.input[3], n)
            self.same_zero(a, za, n.input[0], n)
            self.same_zero(c, zb, n.input[3], n)
            if n.op_type == "QLinearAdd":
                form = fit_add(table + off, za, zb, zy, (sa / sy, sb / sy), unsigned)
                if form is not None:
                    self.out(out, self.b.add_form(a, c, form, sy, name=out, zero=zy))
                    return
            self.out(out, self.b.lut2(a, c, table, sy, name=out, zero=zy))
            return
        k = consts[0]
        xi = 3 - k
        x = self.canon(n.input[xi], n)
        self.same_zero(x, (za, zb)[xi // 3], n.input[xi], n)
        data = self.const(n.input[k], n)
        if data.dtype != (np.uint8 if unsigned else np.int8):
            raise OnnxImportError(f"{self.where(n)}: constant {n.input[k]} is {data.dtype}; "
                                  f"expected {'u' if unsigned else ''}int8 like the output")
        shape = self.onnx_shape(n.output[0], n)
        if tuple(np.broadcast_shapes(data.shape, shape)) != tuple(shape):
            raise OnnxImportError(f"{self.where(n)}: constant {n.input[k]} "
                                  f"{list(data.shape)} does not broadcast to {list(shape)}")
        ints = data.astype(np.int64) - off  # the int8 form
        t = table if k == 3 else table.T  # rows: the activation's value
        if ints.size == 1:
            cval = int(ints.reshape(-1)[0])
            sx, sc, zc = (sa, sb, zb) if k == 3 else (sb, sa, za)
            ratio = sx * sc * (cval - zc) / sy if n.op_type == "QLinearMul" else sx / sy
            self.out(out, self.unary_table(x, t[:, cval + 128], sy, zy, ratio, unsigned, out))
            return
        # a constant tensor (a bias broadcast along the rows): the integer add with an offset
        # per channel where one gives ORT's table on every input of every channel
        # (ort_add.fit_channel_add), else ORT's table (a host step on the accelerator)
        full = np.broadcast_to(ints, shape).reshape(_ir_shape(shape)).astype(np.int8)
        per_channel = _channel_values(full)
        if n.op_type == "QLinearAdd" and per_channel is not None:
            sx = sa if k == 3 else sb
            chan = fit_channel_add(t, x.type.zero, zy, sx / sy, per_channel)
            if chan is not None:
                self.out(out, self.b.add_channels(x, chan, per_channel, sy, name=out,
                                                  zero=zy))
                return
        cv = self.b.const(f"{out}_{n.input[k]}", np.ascontiguousarray(full), (sa, sb)[k // 3])
        self.out(out, self.b.lut2(x, cv, t, sy, name=out, zero=zy))

    def unary_table(self, x: Value, column: np.ndarray, sy: float, zy: int, ratio: float,
                    unsigned: bool, name: str) -> Value:
        """``column[x + 128]`` (int8 forms): the integer rescale ``x + x`` (``mult_b`` 0)
        that reproduces it on all 256 inputs where one exists (``ratio`` the real multiplier
        it approximates), else ``Lut2(x, x)`` whose rows repeat the column."""
        off = 128 if unsigned else 0
        rows = np.repeat(column[:, None], 256, axis=1)
        if ratio > 0:
            form = fit_add(rows + off, x.type.zero, x.type.zero, zy, (ratio, 0.0), unsigned)
            if form is not None:
                return self.b.add_form(x, x, form, sy, name=name, zero=zy)
        return self.b.lut2(x, x, rows, sy, name=name, zero=zy)

    def op_QLinearConcat(self, n: Any) -> None:
        """ORT's ``QLinearConcat`` (``qlinear_concat.cc``): each input whose scale and zero
        point are not the output's goes through ORT's 256-entry requantization table
        (dequantize, quantize: ``ort_add.rescale_table``) as the integer rescale proven on
        every input where one exists, else the table (``lut2``); then ``concat``."""
        axis = int(self.attrs(n).get("axis", 0))
        if len(n.input) < 5 or (len(n.input) - 2) % 3:
            raise OnnxImportError(f"{self.where(n)}: {len(n.input)} inputs; QLinearConcat takes "
                                  f"Y_scale, Y_zero_point and (X, X_scale, X_zero_point) "
                                  f"triples")
        sy = self.scale(n.input[0], n)
        zy, unsigned = self.zero(n.input[1] or None, n), self.unsigned(n.input[1] or None, n)
        rank = len(self.onnx_shape(n.input[2], n))
        if not -rank <= axis < rank:
            raise OnnxImportError(f"{self.where(n)}: axis {axis} is not an axis of a rank-{rank} "
                                  f"tensor")
        out_shape = self.onnx_shape(n.output[0], n)
        off = 128 if unsigned else 0
        parts = []
        for k in range(2, len(n.input), 3):
            name, sname, zname = n.input[k:k + 3]
            if name in self.inits:
                raise OnnxImportError(f"{self.where(n)}: input {name} is a constant; only "
                                      f"activations are concatenated")
            if self.unsigned(zname or None, n) != unsigned:
                raise OnnxImportError(f"{self.where(n)}: input {name} and the output differ in "
                                      f"type (int8 / uint8)")
            x, sx = self.qin(name, sname, zname, n)
            zx = x.type.zero
            x = self.view(x, self.onnx_shape(name, n))
            if np.float32(sx) != np.float32(sy) or zx != zy:
                table = rescale_table(sx, zx + off, sy, zy + off, None, None, unsigned) - off
                x = self.unary_table(x, table, sy, zy, sx / sy, unsigned,
                                     f"{n.output[0]}_{name}")
            parts.append(x)
        y = self.b.concat(parts, axis % rank, name=n.output[0])
        self.out(n.output[0], self.view(y, _ir_shape(out_shape)))

    def op_QLinearSoftmax(self, n: Any) -> None:
        """ORT's ``QLinearSoftmax`` (``ir.QLinearSoftmax``, on the host). Before opset 13 it
        normalises over every axis from ``axis`` on: refused unless that is the last one."""
        a = self.attrs(n)
        if "opset" not in a:
            raise OnnxImportError(f"{self.where(n)}: attribute opset is missing (ORT requires "
                                  f"it)")
        shape = self.onnx_shape(n.input[0], n)
        rank = len(shape)
        opset = int(a["opset"])
        axis = int(a.get("axis", -1 if opset >= 13 else 1))
        if not -rank <= axis < rank:
            raise OnnxImportError(f"{self.where(n)}: axis {axis} is not an axis of a rank-{rank} "
                                  f"tensor")
        axis %= rank
        if opset < 13 and axis != rank - 1:
            raise OnnxImportError(f"{self.where(n)}: opset {opset} with axis {axis} (softmax "
                                  f"over the flattened axes {axis}..{rank - 1}) is not "
                                  f"supported; only the last axis")
        x, sx = self.qin(n.input[0], n.input[1], n.input[2], n)
        sy = self.scale(n.input[3], n)
        zname = n.input[4] if len(n.input) > 4 and n.input[4] else None
        zy = self.zero(zname, n)
        unsigned = self.unsigned(zname, n)
        if unsigned != self.unsigned(n.input[2] or None, n):
            raise OnnxImportError(f"{self.where(n)}: input and output differ in type (int8 / "
                                  f"uint8)")
        y = self.b.qlinear_softmax(self.view(x, shape), axis, sx, sy, zy, unsigned,
                                   name=n.output[0])
        self.out(n.output[0], self.view(y, _ir_shape(shape)))

    def op_QLinearAveragePool(self, n: Any) -> None:
        """ORT's ``QLinearAveragePool`` (2-D NCHW): a window covering the whole unpadded
        image is ORT's global average pool (``global_avg_pool``, as
        ``QLinearGlobalAveragePool``); any other is ``qlinear_avg_pool`` (ORT's float32
        means, on the host). ``count_include_pad`` honored, ``channels_last`` refused, the
        window's attributes as ``onnx_attrs.window`` reads them."""
        a = self.attrs(n)
        if a.get("channels_last", 0):
            raise OnnxImportError(f"{self.where(n)}: channels_last 1 is not supported (NCHW "
                                  f"only)")
        x, sx = self.qin(n.input[0], n.input[1], n.input[2], n)
        if len(x.type.shape) != 4:
            raise OnnxImportError(f"{self.where(n)}: input {n.input[0]} {list(x.type.shape)} is "
                                  f"not NCHW (only 2-D pooling is supported)")
        sy = self.scale(n.input[3], n)
        zname = n.input[4] if len(n.input) > 4 and n.input[4] else None
        zy, unsigned = self.zero(zname, n), self.unsigned(zname, n)
        if unsigned != self.unsigned(n.input[2] or None, n):
            raise OnnxImportError(f"{self.where(n)}: input and output differ in type (int8 / "
                                  f"uint8)")
        hw = x.type.shape[2:]
        win = window(a, hw, self.where(n))
        if win.pad == 0 and (win.kernel, win.kernel) == tuple(hw):
            self.out(n.output[0], self._gap(x, sx, sy, n.output[0], zy))
            return
        self.out(n.output[0], self.b.qlinear_avg_pool(
            x, win.kernel, win.stride, win.pad, bool(a.get("count_include_pad", 0)), sx, sy, zy,
            unsigned, name=n.output[0]))

    def op_MatMulInteger(self, n: Any) -> None:
        raise OnnxImportError(f"{self.where(n)}: {n.op_type} (an int32 product that float "
                              f"Cast / Mul operators rescale: ORT's quantize_dynamic form) is "
                              f"not supported; QLinearMatMul / QLinearConv and the QDQ form "
                              f"are (quantize with quantize_static)")

    op_ConvInteger = op_MatMulInteger


@dataclass
class _Clipped:
    """A ``Clip`` of a dequantized tensor (``lo`` / ``hi`` None: that side open), waiting for
    the ``QuantizeLinear`` that gives its output scale."""

    dq: _Dq
    lo: float | None
    hi: float | None


def _dequantize_ints(x: np.ndarray, s: float, z: int) -> np.ndarray:
    """ORT's ``DequantizeLinear`` of stored integers ``x``: ``float32(x - z) * s``."""
    return (x - z).astype(np.float32) * np.float32(s)


def _nominal(s: float | np.ndarray) -> float:
    """The one scale a constant's type states: its own, or the largest per-channel one (the
    requantize after it holds each channel's exact ratio)."""
    return float(np.max(s)) if isinstance(s, np.ndarray) else s


def _text(s: float | np.ndarray) -> str:
    if isinstance(s, np.ndarray):
        return f"[{', '.join(f'{v:.8g}' for v in s[:4])}{', ...' if s.size > 4 else ''}]"
    return f"{s:.8g}"


def _fold_zero(bias: np.ndarray, w: np.ndarray, zx: int, out: str) -> np.ndarray:
    """``bias - zx * sum_k w`` per output channel (``w``'s first axis): the input zero point's
    term of ``sum_k (x - zx) * w`` (symmetric weights: the only cross term), in int32."""
    if not zx:
        return bias
    folded = bias.astype(np.int64) - zx * w.reshape(w.shape[0], -1).astype(np.int64).sum(axis=1)
    if np.abs(folded).max(initial=0) >= 1 << 31:
        raise OnnxImportError(f"{out}: the bias with the input zero point {zx} folded in "
                              f"exceeds int32")
    return folded.astype(np.int32)


#: operators whose constant operands are integer weights (``_Importer.float_constant``)
_INTEGER_READERS = ("Conv", "Gemm", "MatMul", "QLinearConv", "QLinearMatMul", "QGemm")


@dataclass(frozen=True, eq=False)
class _FExpr:
    """A float value of an island: ``op`` (``"in"``: a dequantized activation, ``attrs``
    ``dq`` and its ONNX ``shape``; ``"const"``: ``attrs["data"]``; else a ``FLOAT_OPS``
    operator) applied to ``args``."""

    op: str
    args: tuple[_FExpr, ...]
    attrs: dict[str, Any]


@dataclass(frozen=True)
class _Float:
    """An ONNX tensor computed in float (not yet quantized): its expression."""

    expr: _FExpr


def _channel_values(full: np.ndarray) -> np.ndarray | None:
    """The value per channel (axis 1) of a constant that varies along that axis only, else
    None."""
    if full.ndim < 2:
        return None
    first = np.moveaxis(full, 1, 0).reshape(full.shape[1], -1)[:, 0]
    shape = (1, -1) + (1,) * (full.ndim - 2)
    return first if np.array_equal(full, np.broadcast_to(first.reshape(shape), full.shape)) \
        else None


def _ir_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape the graph IR holds an ONNX tensor in: [1, S, H] as (S, H) (a dense layer's
    matrix), any other as is."""
    return tuple(shape[1:]) if len(shape) == 3 and shape[0] == 1 else tuple(shape)


def _dq_const(d: _Dq) -> np.ndarray:
    """A dequantized constant in float32, as ORT's DequantizeLinear computes it (a
    per-channel scale along its axis)."""
    data = d.value.data
    assert data is not None
    scale = np.asarray(d.scale, dtype=np.float32)
    if scale.ndim and d.axis is not None:
        scale = scale.reshape([-1 if k == d.axis else 1 for k in range(data.ndim)])
    return (data.astype(np.int32).astype(np.float32) * scale).astype(np.float32)


# ---------------------------------------------------------------------- QOperator shapes


def _known(vi: Any) -> tuple[int, ...] | None:
    dims = vi.type.tensor_type.shape.dim
    if not vi.type.tensor_type.HasField("shape") or any(d.dim_value < 1 for d in dims):
        return None
    return tuple(d.dim_value for d in dims)


def _contrib_shape(node: Any, shapes: dict[str, tuple[int, ...]]) -> tuple[int, ...] | None:
    """The output shape of a com.microsoft QLinear operator from its inputs' (None: not
    known yet, or an operator whose shape the importer works out itself)."""
    if node.op_type in ("QLinearAdd", "QLinearMul"):
        a, b = shapes.get(node.input[0]), shapes.get(node.input[3])
        if a is None or b is None:
            return None
        try:
            return tuple(int(d) for d in np.broadcast_shapes(a, b))
        except ValueError:
            return None
    if node.op_type == "QLinearSoftmax":
        return shapes.get(node.input[0])
    if node.op_type == "QLinearConcat":
        known = [shapes[i] for i in node.input[2::3] if i in shapes]
        axis = next((int(a.i) for a in node.attribute if a.name == "axis"), 0)
        if not known or len(known) != len(node.input[2::3]):
            return None
        rank = len(known[0])
        if not -rank <= axis < rank or any(len(s) != rank for s in known):
            return None
        axis %= rank
        total = sum(s[axis] for s in known)
        return tuple(total if k == axis else d for k, d in enumerate(known[0]))
    return None


def contrib_inferred(onnx: Any, model: Any) -> Any:
    """``model`` after onnx's shape inference, with the shapes of ORT's element-wise
    com.microsoft operators (``QLinearAdd``, ``QLinearMul``, ``QLinearSoftmax``, which onnx's
    inference does not know) stated and inference rerun until nothing more is learnt: the
    tensors after them (a QOperator transformer's every layer) get their ONNX shapes too."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    elem = {t.name: t.data_type for t in m.graph.initializer}
    for _ in range(len(m.graph.node) + 1):
        inferred = onnx.shape_inference.infer_shapes(m)
        shapes: dict[str, tuple[int, ...]] = {}
        for vi in (*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output):
            k = _known(vi)
            if k is not None:
                shapes[vi.name] = k
        for t in m.graph.initializer:
            shapes[t.name] = tuple(int(d) for d in t.dims)
        new = []
        for node in m.graph.node:
            if node.domain != "com.microsoft" or node.output[0] in shapes:
                continue
            shape = _contrib_shape(node, shapes)
            zname = node.input[-1] if node.input else ""
            if shape is not None and zname in elem:
                new.append(onnx.helper.make_tensor_value_info(node.output[0], elem[zname],
                                                              list(shape)))
        if not new:
            return inferred
        m.graph.value_info.extend(new)
    return inferred


def refuse_dynamic(name: str, users: list[Any]) -> None:
    """A float graph input that ``DynamicQuantizeLinear`` quantizes (ORT's
    ``quantize_dynamic``: the scale computed from each input at run time) is refused by name:
    the accelerator's requantizations need every scale when the model is compiled."""
    for u in users:
        if u.op_type == "DynamicQuantizeLinear":
            raise OnnxImportError(f"ONNX input {name} feeds DynamicQuantizeLinear "
                                  f"{u.name or u.output[0]!r}: dynamic quantization (each "
                                  f"input's scale computed at run time, then MatMulInteger / "
                                  f"ConvInteger rescaled in float) is not supported; quantize "
                                  f"with quantize_static (QOperator or QDQ)")


def load_onnx(model: str | Path | Any, requant: str = "fixed") -> Graph:
    """The graph of an ONNX model (a path or a ``ModelProto``; module docstring); ``requant``
    one of ``REQUANT_MODES``."""
    if requant not in REQUANT_MODES:
        raise OnnxImportError(f"requant must be one of {', '.join(REQUANT_MODES)}, got "
                              f"{requant!r}")
    what = str(model) if isinstance(model, (str, Path)) else "the ONNX model"
    proto = read_model(model)
    return _Importer(proto, what, requant).run()
