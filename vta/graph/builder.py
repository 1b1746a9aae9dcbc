"""Build graphs: ``GraphBuilder`` creates typed nodes (``verify.infer_type``) with unique names.

Scales: a convolution's or dense layer's int32 output has scale ``s_x * s_w``; ``requantize``,
``add`` and ``global_avg_pool`` take the output scale and derive their fixed-point multipliers
(``quant.fixed_point``) so that no int32 product can overflow for any input (the bound of a
convolution's sums comes from its actual weights and bias). With calibration data
(``GraphBuilder(calibrate={input name: array})``) every node is evaluated as it is added (the
numpy interpreter), and an output scale left as ``None`` is calibrated: the
``CALIBRATION_QUANTILE`` of the magnitudes maps to 127, as post-training quantization does.

``requant`` (``quant.SCALE_MODES``) says how: ``"fixed"`` (default) takes any ratio of scales;
``"shift"`` keeps every ratio a power of two, so every multiplier is a power of two (a
requantize's and a pool's 1: a rounding shift alone) and VTA's ALU (no MUL) runs every
requantization. There a calibrated scale is rounded up to the input's scale times a power of
two (``quant.shift_scale``: a requantize shifts right by at least 1; an add's scale is its
larger branch's times ``2**k``, ``k >= 0``; a global average pool's is ``s_x * 2**k / (H*W)``, the
pool's mean carried exactly in the scale), and a given scale whose ratio is not a power of two
is a ``GraphError`` naming the node.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from vta.errors import GraphError
from vta.graph import interp
from vta.graph.ir import (
    INT8_MAX,
    INT8_MIN,
    Add,
    Clip,
    Concat,
    Conv2d,
    Dense,
    FloatStep,
    GlobalAvgPool,
    Graph,
    HostFloat,
    Lut2,
    MatMul,
    MaxPool2d,
    Node,
    Pad,
    QLinearAvgPool,
    QLinearSoftmax,
    Relu,
    Requantize,
    Reshape,
    TensorType,
    Transpose,
    UniqueNames,
    Value,
)
from vta.graph.ort_add import AddForm, ChannelForm
from vta.graph.quant import (
    SCALE_MODES,
    fixed_point,
    fixed_point_channels,
    fixed_point_pair,
    is_pow2,
    ort_scale_word,
    shift_scale,
)
from vta.graph.verify import infer_type, verify_graph

__all__ = ["GraphBuilder", "CALIBRATION_QUANTILE"]

#: the fraction of calibration magnitudes a calibrated scale keeps inside int8
CALIBRATION_QUANTILE = 0.9999
_INT32_MAX = (1 << 31) - 1
#: every how many values ``top_order_stats`` samples for its threshold
_SAMPLE_STEP = 16


class GraphBuilder:
    """Add inputs, constants and operators in order; ``build`` verifies and returns the
    graph."""

    def __init__(self, name: str, calibrate: Mapping[str, np.ndarray] | None = None,
                 requant: str = "fixed") -> None:
        if requant not in SCALE_MODES:
            raise GraphError(f"graph {name}: requant must be one of {', '.join(SCALE_MODES)}, got "
                             f"{requant!r}")
        self.name = name
        self.requant = requant
        self.nodes: list[Node] = []
        self.inputs: list[Value] = []
        self._name = UniqueNames()
        self._calib = dict(calibrate) if calibrate is not None else None
        self.values: dict[Value, np.ndarray] = {}
        self._producer: dict[int, Node] = {}

    # ------------------------------------------------------------------ values

    def input(self, name: str, shape: Sequence[int], scale: float, dtype: str = "int8",
              layout: str | None = None, zero: int = 0) -> Value:
        """A graph input of zero point ``zero`` (calibration data for it, when calibrating, is
        given by name)."""
        if name in self._name:
            raise GraphError(f"input {name!r}: the name is taken")
        lay = layout or ("NCHW" if len(shape) == 4 else "NC")
        v = Value(self._name(name), TensorType(tuple(int(d) for d in shape), dtype, lay,
                                               float(scale), int(zero)))
        self.inputs.append(v)
        if self._calib is not None:
            if name not in self._calib:
                raise GraphError(f"calibration data for input {name!r} is missing")
            self.values[v] = np.asarray(self._calib[name])
        return v

    def const(self, name: str, data: np.ndarray, scale: float | None = None) -> Value:
        """A constant tensor (weights, biases)."""
        a = np.ascontiguousarray(data)
        lay = {4: "OIHW", 2: "NC", 1: "C"}.get(a.ndim, "")
        v = Value(self._name(name), TensorType(a.shape, str(a.dtype), lay, scale), a)
        if self._calib is not None:
            self.values[v] = a
        return v

    def _add_node(self, cls: type[Node], name: str, inputs: tuple[Value, ...],
                  **attrs: object) -> Value:
        where = f"{cls.op} {name}"
        t = infer_type(cls, inputs, attrs, where)
        attrs.pop("scale", None)
        out = Value(self._name(name), t)
        node = cls(*inputs, **attrs, out=out)  # type: ignore[call-arg]
        self.nodes.append(node)
        self._producer[id(out)] = node
        if self._calib is not None:
            self.values[out] = interp.eval_node(node, self.values)
        return out

    # ------------------------------------------------------------------ operators

    def conv2d(self, x: Value, weight: Value, bias: Value, stride: int = 1, pad: int = 0,
               name: str = "conv", groups: int = 1, pad_value: int = 0) -> Value:
        extra: dict[str, int] = {"groups": groups} if groups != 1 else {}
        if pad_value:
            extra["pad_value"] = pad_value
        return self._add_node(Conv2d, name, (x, weight, bias), stride=stride, pad=pad, **extra)

    def dense(self, x: Value, weight: Value, bias: Value, name: str = "dense") -> Value:
        return self._add_node(Dense, name, (x, weight, bias))

    def requantize(self, x: Value, scale: float | None = None, lo: int = INT8_MIN,
                   hi: int = INT8_MAX, name: str | None = None,
                   ratio: float | None = None, zero: int = 0, even: bool = False) -> Value:
        """``x`` (int32, scale ``s``) as int8 of ``scale`` (calibrated when None): the
        fixed-point ``mult / 2**shift ~ s / scale``; the output's scale is the one the pair
        actually gives. ``ratio`` (instead of ``scale``) is the ratio itself, when it is known
        exactly (an imported model's own scales: ``s`` is already the approximation an
        earlier requantization gave, and approximating ``s / scale`` would compound it).
        ``zero``: the output's zero point, added after the rounding shift. ``even``: round
        half to even (ONNX Runtime's rounding) where the ratio is a power of two (multiplier
        1: ``Requantize.even``; the ALU rounds so too, ``ops.chain.even_round_stage``); half up
        otherwise, and by default (the project's own graphs)."""
        s_in = self._scale(x)
        name = name or f"{x.name}_q"
        if ratio is None:
            if scale is None:
                scale = self._calibrated(x, s_in)
                if self.requant == "shift":
                    scale = shift_scale(s_in, scale)[0]
            ratio = s_in / scale
        mult, shift = fixed_point(ratio, self.magnitude(x), f"requantize {x.name}")
        self._shift_only(f"requantize {name}", ratio, mult)
        extra: dict[str, Any] = {"zero": zero} if zero else {}
        if even and mult == 1:
            extra["even"] = True
        return self._add_node(Requantize, name, (x,), mult=mult, shift=shift, lo=lo, hi=hi,
                              **extra)

    def requantize_exact(self, x: Value, ratios: Sequence[float], scale: float,
                         lo: int = INT8_MIN, hi: int = INT8_MAX, name: str | None = None,
                         zero: int = 0) -> Value:
        """``x`` (the int32 output of a convolution or dense layer) as int8 of ``scale`` with
        ONNX Runtime's arithmetic (``Requantize.exact``): ``ratios`` are ORT's float32 ratios,
        one per channel of axis 1 or one for all; a ``GraphError`` when one is not a scale
        word's or ``x``'s bound times it could leave int32 (the instruction saturates there,
        ORT would not)."""
        name = name or f"{x.name}_q"
        if len(x.type.shape) < 2:
            raise GraphError(f"requantize {name}: {x.name} {list(x.type.shape)} has no channel "
                             f"axis")
        channels = x.type.shape[1]
        if len(ratios) not in (1, channels):
            raise GraphError(f"requantize {name}: {len(ratios)} ratios for the "
                             f"{list(x.type.shape)} tensor {x.name}")
        full = list(ratios) * channels if len(ratios) == 1 else list(ratios)
        words = [ort_scale_word(r, f"requantize {name}") for r in full]
        for c, (r, bound) in enumerate(zip(full, self.channel_magnitudes(x), strict=True)):
            if bound * float(r) + abs(zero) >= _INT32_MAX:
                raise GraphError(f"requantize {name}: channel {c}: ratio {r:.6g} times the "
                                 f"accumulator bound {bound} leaves int32")
        wv = self.const(f"{name}_words", np.array(words, np.uint32).view(np.int32))
        return self._add_node(Requantize, name, (x,), mult=1, shift=0, lo=lo, hi=hi,
                              scale=scale, mults=wv, exact=True,
                              **({"zero": zero} if zero else {}))

    def requantize_channels(self, x: Value, ratios: Sequence[float], scale: float,
                            lo: int = INT8_MIN, hi: int = INT8_MAX, name: str | None = None,
                            zero: int = 0) -> Value:
        """``x`` (the int32 output of a convolution or dense layer with per-channel weight
        scales) as int8 of ``scale``: channel ``c`` multiplied by ``mults[c] / 2**shift ~
        ratios[c]`` (``quant.fixed_point_channels``, one shift), a per-channel constant."""
        name = name or f"{x.name}_q"
        if len(x.type.shape) < 2 or len(ratios) != x.type.shape[1]:
            raise GraphError(f"requantize {name}: {len(ratios)} ratios for the "
                             f"{list(x.type.shape)} tensor {x.name}")
        mults, shift = fixed_point_channels(list(ratios), self.channel_magnitudes(x),
                                            f"requantize {name}")
        if self.requant == "shift":
            raise GraphError(f"requantize {name}: per-channel multipliers, but graph "
                             f"{self.name} requantizes by shifts alone (requant='shift')")
        mv = self.const(f"{name}_mults", np.array(mults, np.int32))
        return self._add_node(Requantize, name, (x,), mult=1, shift=shift, lo=lo, hi=hi,
                              scale=scale, mults=mv, **({"zero": zero} if zero else {}))

    def relu(self, x: Value, name: str | None = None) -> Value:
        return self._add_node(Relu, name or f"{x.name}_relu", (x,))

    def clip(self, x: Value, lo: int, hi: int, name: str | None = None) -> Value:
        return self._add_node(Clip, name or f"{x.name}_clip", (x,), lo=lo, hi=hi)

    def add(self, a: Value, b: Value, scale: float | None = None, lo: int = INT8_MIN,
            hi: int = INT8_MAX, name: str = "add",
            ratios: tuple[float, float] | None = None, zero: int = 0,
            even: bool = False) -> Value:
        """``a + b`` rescaled to ``scale`` (calibrated when None); ``ratios``: the two ratios
        of scales when known exactly (``requantize``'s ``ratio``). The operands' zero points
        are subtracted before the multipliers (``zero_a``, ``zero_b``); ``zero`` is the
        output's. ``even``: round half to even (ONNX Runtime's rounding, ``Add.even``) where
        both multipliers are powers of two (the sum then is ORT's float32 sum exactly); half
        up otherwise."""
        sa, sb = self._scale(a), self._scale(b)
        if scale is None:
            if self._calib is None:
                raise GraphError(f"add {name}: give its output scale (or calibration data)")
            real = self.values[a].astype(np.float64) * sa + self.values[b] * sb
            scale = self._quantile_scale(real)
            if self.requant == "shift":
                scale = shift_scale(max(sa, sb), scale, least=0)[0]
        ra, rb = ratios if ratios is not None else (sa / scale, sb / scale)
        za, zb = a.type.zero, b.type.zero
        bound = 256 if za or zb else 128  # |a - z_a| <= 255
        ma, mb, shift = fixed_point_pair((ra, rb), (bound, bound), f"add {name}")
        self._shift_only(f"add {name}", ra, ma)
        self._shift_only(f"add {name}", rb, mb)
        extra: dict[str, Any] = {k: v for k, v in (("zero_a", za), ("zero_b", zb),
                                                   ("zero", zero)) if v}
        if even and is_pow2(ma) and is_pow2(mb):
            extra["even"] = True
        return self._add_node(Add, name, (a, b), mult_a=ma, mult_b=mb, shift=shift, lo=lo,
                              hi=hi, scale=scale, **extra)

    def max_pool2d(self, x: Value, kernel: int, stride: int, pad: int = 0,
                   name: str = "maxpool") -> Value:
        return self._add_node(MaxPool2d, name, (x,), kernel=kernel, stride=stride, pad=pad)

    def global_avg_pool(self, x: Value, scale: float | None = None, lo: int = INT8_MIN,
                        hi: int = INT8_MAX, name: str = "avgpool",
                        ratio: float | None = None, zero: int = 0, even: bool = False) -> Value:
        """The mean over each channel's pixels rescaled to ``scale`` (calibrated when None):
        ``sum * mult >> shift`` with ``mult / 2**shift ~ s_x / (H * W * scale)`` (or
        ``ratio``, when known exactly: ``requantize``)."""
        sx = self._scale(x)
        if x.type.dtype != "int8" or len(x.type.shape) != 4:
            infer_type(GlobalAvgPool, (x,), {"mult": 1, "shift": 1, "lo": lo, "hi": hi},
                       f"global_avg_pool {name}")
        hw = x.type.shape[2] * x.type.shape[3]
        if scale is None:
            if self._calib is None:
                raise GraphError(f"global_avg_pool {name}: give its output scale (or "
                                 f"calibration data)")
            scale = self._quantile_scale(self.values[x].astype(np.float64).mean(axis=(2, 3))
                                         * sx)
            if self.requant == "shift":  # a shift alone: the scale carries the 1 / (H*W)
                scale, k = shift_scale(sx / hw, scale)
                mult, shift = fixed_point(2.0 ** -k, hw * 128, f"global_avg_pool {name}")
                return self._add_node(GlobalAvgPool, name, (x,), mult=mult, shift=shift, lo=lo,
                                      hi=hi, scale=scale)
        r = ratio if ratio is not None else sx / (hw * scale)
        zx = x.type.zero
        mult, shift = self.gap_fixed_point(x, r, name)
        extra = {k: v for k, v in (("zero_x", zx), ("zero", zero)) if v}
        return self._add_node(GlobalAvgPool, name, (x,), mult=mult, shift=shift, lo=lo, hi=hi,
                              scale=scale, **extra)

    def global_avg_pool_exact(self, x: Value, ratio: float, scale: float, zero: int = 0,
                              name: str = "avgpool") -> Value:
        """ONNX Runtime's QLinearGlobalAveragePool of ``x`` (``GlobalAvgPool.exact``): each
        channel's sum minus ``H*W * zero_x``, requantized by ORT's float32 ``ratio``
        (``quant_mlas.qlinear_gap_ratio``) to ``scale``, ``zero``; a ``GraphError`` when the
        largest sum times it could leave int32 (the instruction saturates there, ORT would
        not)."""
        _, c, h, w = x.type.shape
        bound = h * w * (INT8_MAX - INT8_MIN)
        if bound * ratio + abs(zero) >= _INT32_MAX:
            raise GraphError(f"global_avg_pool {name}: ratio {ratio:.6g} times the sum's "
                             f"bound {bound} leaves int32")
        word = ort_scale_word(ratio, f"global_avg_pool {name}")
        wv = self.const(f"{name}_words", np.full(c, word, np.uint32).view(np.int32))
        extra = {k: v for k, v in (("zero_x", x.type.zero), ("zero", zero)) if v}
        return self._add_node(GlobalAvgPool, name, (x,), mult=1, shift=0, lo=INT8_MIN,
                              hi=INT8_MAX, scale=scale, mults=wv, exact=True, **extra)

    def gap_fixed_point(self, x: Value, ratio: float, name: str = "avgpool"
                        ) -> tuple[int, int]:
        """The ``(mult, shift)`` of ``global_avg_pool``'s rescale of ``x``'s channel sums by
        ``ratio`` (a multiplier that keeps the largest sum times it inside int32)."""
        hw = x.type.shape[2] * x.type.shape[3]
        mult, shift = fixed_point(ratio, hw * (256 if x.type.zero else 128),
                                  f"global_avg_pool {name}")
        self._shift_only(f"global_avg_pool {name}", ratio, mult)
        return mult, shift

    def pad(self, x: Value, pad: int, value: int, name: str | None = None) -> Value:
        """``x`` (NCHW) padded by ``pad`` on each side with ``value``."""
        return self._add_node(Pad, name or f"{x.name}_pad", (x,), pad=pad, value=value)

    # ------------------------------------------------------------------ helpers

    def _shift_only(self, what: str, ratio: float, mult: int) -> None:
        """In a shift-only graph, a multiplier that is not a power of two is an error."""
        if self.requant == "shift" and not is_pow2(mult):
            raise GraphError(f"{what}: the ratio of scales {ratio:.6g} is not a power of two "
                             f"(multiplier {mult}), but graph {self.name} requantizes by shifts "
                             f"alone (requant='shift'): give scales whose ratio is a power of "
                             f"two, or build it with requant='fixed' (its multipliers need ALU "
                             f"MUL)")

    def _scale(self, v: Value) -> float:
        if v.type.scale is None:
            raise GraphError(f"{v.name} has no quantization scale")
        return v.type.scale

    def _quantile_scale(self, real: np.ndarray) -> float:
        """The scale mapping the ``CALIBRATION_QUANTILE`` of ``|real|`` to 127. ``real`` is the
        caller's own temporary (float64): its magnitudes are taken in place."""
        if not real.size:
            return 1e-12 / INT8_MAX
        np.abs(real, out=real)
        mag = linear_quantile(real.size, CALIBRATION_QUANTILE,
                              lambda lo, hi: top_order_stats(real, lo, hi))
        return max(mag, 1e-12) / INT8_MAX

    def _calibrated(self, x: Value, s_in: float) -> float:
        if self._calib is None:
            raise GraphError(f"requantize {x.name}: give its output scale (or calibration "
                             f"data)")
        acc = self.values[x]
        if acc.dtype.kind not in "iu" or acc.dtype.itemsize > 4 or not acc.size:
            return self._quantile_scale(acc.astype(np.float64) * s_in)
        # the magnitudes of the integers themselves (an unsigned view: |INT32_MIN| is 2**31
        # there), each order statistic scaled after selection: ``float64(|x|) * s_in`` rounds
        # monotonically, so the scaled values sort as the integers do (and ``|x * s| == |x| *
        # s``: the same numbers as the magnitudes of the float64 copy scaled in place)
        mag = np.abs(acc).view(np.dtype(f"u{acc.dtype.itemsize}"))
        q = linear_quantile(mag.size, CALIBRATION_QUANTILE,
                            lambda lo, hi: top_order_stats(mag, lo, hi, s_in))
        return max(q, 1e-12) / INT8_MAX

    def producer(self, v: Value) -> Node | None:
        """The node added so far that computes ``v`` (None for inputs and constants)."""
        return self._producer.get(id(v))

    def magnitude(self, x: Value) -> int:
        """A bound on ``|x|``: for a convolution's or dense layer's output the largest
        ``sum |w| * 128 + |b|`` over its output channels (no input can exceed it), else the
        dtype's range."""
        node = self._producer.get(id(x))
        bound = _channel_bounds(node)
        if bound is not None:
            return int(min(bound.max(), _INT32_MAX))
        if isinstance(node, MatMul):
            return matmul_bound(node)
        return 128 if x.type.dtype == "int8" else _INT32_MAX

    def channel_magnitudes(self, x: Value) -> list[int]:
        """``magnitude`` per channel (axis 1) of a convolution's or dense layer's output."""
        bound = _channel_bounds(self._producer.get(id(x)))
        if bound is not None:
            return [int(min(b, _INT32_MAX)) for b in bound]
        return [self.magnitude(x)] * x.type.shape[1]

    def add_form(self, a: Value, b: Value, form: AddForm, scale: float, name: str = "add",
                 zero: int = 0) -> Value:
        """``a + b`` with the integer form ``form`` (``vta.graph.ort_add.fit_add``: proven
        equal to ONNX Runtime's arithmetic on every input pair) and output ``scale``, ``zero``;
        ``b`` may be ``a`` with ``form.mult_b`` 0 (a rescale of one tensor)."""
        extra = {k: v for k, v in (("zero_a", a.type.zero), ("zero_b", b.type.zero),
                                   ("zero", zero), ("offset", form.offset)) if v}
        return self._add_node(Add, name, (a, b), mult_a=form.mult_a, mult_b=form.mult_b,
                              shift=form.shift, lo=form.lo, hi=form.hi, scale=scale, **extra)

    def add_channels(self, x: Value, form: ChannelForm, channel_values: np.ndarray,
                     scale: float, name: str = "add", zero: int = 0) -> Value:
        """``x`` plus a constant that varies along the channels only (axis 1; ``channel_values``
        its int8 value per channel), with the integer form ``form``
        (``ort_add.fit_channel_add``: proven on all 256 inputs of every channel's value):
        ``clip(((x - z_x) * mult + 2**(shift-1) + offsets[c]) >> shift) + zero)``."""
        offs = np.array([form.offsets[int(v)] for v in channel_values], dtype=np.int32)
        ov = self.const(f"{name}_offsets", offs)
        extra = {k: v for k, v in (("zero_a", x.type.zero), ("zero_b", x.type.zero),
                                   ("zero", zero)) if v}
        return self._add_node(Add, name, (x, x), mult_a=form.mult, mult_b=0, shift=form.shift,
                              lo=form.lo, hi=form.hi, scale=scale, offsets=ov, **extra)

    def lut2(self, a: Value, b: Value, table: np.ndarray, scale: float, name: str,
             zero: int = 0) -> Value:
        """``table[a + 128, b + 128]`` (``Lut2``; ``table`` int8 (256, 256), indexed by the
        operands' int8 forms) with output ``scale`` and ``zero``."""
        t = self.const(f"{name}_table", np.ascontiguousarray(table, dtype=np.int8))
        return self._add_node(Lut2, name, (a, b, t), scale=scale, zero=zero)
    # ------------------------------------------------------------------ transformers

    def matmul(self, a: Value, b: Value, name: str = "matmul") -> Value:
        """``a @ b`` of two int8 activations (``ir.MatMul``; their zero points subtracted)."""
        extra = {k: v for k, v in (("zero_a", a.type.zero), ("zero_b", b.type.zero)) if v}
        return self._add_node(MatMul, name, (a, b), **extra)

    def reshape(self, x: Value, shape: tuple[int, ...], name: str | None = None) -> Value:
        return self._add_node(Reshape, name or f"{x.name}_reshape", (x,), shape=tuple(shape))

    def transpose(self, x: Value, perm: tuple[int, ...], name: str | None = None) -> Value:
        return self._add_node(Transpose, name or f"{x.name}_transpose", (x,), perm=tuple(perm))

    def host_float(self, xs: Sequence[Value], scales: Sequence[float], zeros: Sequence[int],
                   shapes: Sequence[tuple[int, ...]], consts: Sequence[np.ndarray],
                   steps: Sequence[FloatStep], shape: tuple[int, ...], scale: float,
                   zero: int = 0, name: str = "float") -> Value:
        """A float island (``ir.HostFloat``) quantized to ``scale``, ``zero``."""
        node_attrs = {"scales": tuple(scales), "zeros": tuple(zeros),
                      "shapes": tuple(tuple(s) for s in shapes), "steps": tuple(steps),
                      "shape": tuple(shape), "zero": zero, "n_consts": len(consts),
                      "scale": scale}
        t = infer_type(HostFloat, tuple(xs), node_attrs, f"host_float {name}")
        out = Value(self._name(name), t)
        node = HostFloat(tuple(xs), tuple(scales), tuple(zeros),
                         tuple(tuple(s) for s in shapes), tuple(consts), tuple(steps),
                         tuple(shape), out, zero)
        self.nodes.append(node)
        self._producer[id(out)] = node
        if self._calib is not None:
            self.values[out] = interp.eval_node(node, self.values)
        return out

    def qlinear_softmax(self, x: Value, axis: int, x_scale: float, scale: float, zero: int,
                        unsigned: bool = False, name: str = "softmax") -> Value:
        """ONNX Runtime's ``QLinearSoftmax`` of ``x`` (``ir.QLinearSoftmax``) to ``scale``,
        ``zero``."""
        extra = {k: v for k, v in (("zero", zero), ("unsigned", unsigned)) if v}
        return self._add_node(QLinearSoftmax, name, (x,), axis=axis, x_scale=x_scale,
                              scale=scale, **extra)

    def concat(self, xs: Sequence[Value], axis: int, name: str = "concat") -> Value:
        """``xs`` joined along ``axis`` (``ir.Concat``; one scale and zero point)."""
        t = infer_type(Concat, tuple(xs), {"axis": axis}, f"concat {name}")
        out = Value(self._name(name), t)
        node = Concat(tuple(xs), axis, out)
        self.nodes.append(node)
        self._producer[id(out)] = node
        if self._calib is not None:
            self.values[out] = interp.eval_node(node, self.values)
        return out

    def qlinear_avg_pool(self, x: Value, kernel: int, stride: int, pad: int,
                         count_include_pad: bool, x_scale: float, scale: float, zero: int,
                         unsigned: bool = False, name: str = "avg_pool") -> Value:
        """ONNX Runtime's ``QLinearAveragePool`` of ``x`` (``ir.QLinearAvgPool``) to
        ``scale``, ``zero``."""
        extra = {k: v for k, v in (("count_include_pad", count_include_pad),
                                   ("zero_x", x.type.zero), ("zero", zero),
                                   ("unsigned", unsigned)) if v}
        return self._add_node(QLinearAvgPool, name, (x,), kernel=kernel, stride=stride,
                              pad=pad, x_scale=x_scale, scale=scale, **extra)

    def build(self, outputs: Sequence[Value]) -> Graph:
        """The verified graph returning ``outputs``."""
        return verify_graph(Graph(self.name, tuple(self.inputs), tuple(outputs),
                                  tuple(self.nodes)))


def linear_quantile(n: int, q: float,
                    order_stats: Callable[[int, int], tuple[float, float]]) -> float:
    """The ``q`` quantile of ``n`` values by linear interpolation between order statistics
    (Hyndman and Fan's method 7, numpy's ``quantile`` default), the float64 operations in
    numpy's order (``numpy.lib._function_base_impl``: the virtual index ``(n - 1) * q``, its
    floor and fraction, ``_lerp``), so the same float as ``np.quantile``; ``order_stats(lo,
    hi)`` gives the ascending sorted values at positions ``lo`` and ``hi`` (the caller picks how
    to find two order statistics: ``top_order_stats``)."""
    virtual = (n - 1) * q
    if virtual >= n - 1:
        lo = hi = n - 1
    elif virtual < 0:
        lo = hi = 0
    else:
        lo = math.floor(virtual)
        hi = lo + 1
    gamma = virtual - lo  # (outside the range a == b: the value itself, whatever gamma is)
    a, b = order_stats(lo, hi)
    diff = b - a
    return b - diff * (1 - gamma) if gamma >= 0.5 else a + diff * gamma


def top_order_stats(m: np.ndarray, lo: int, hi: int, scale: float = 1.0
                    ) -> tuple[float, float]:
    """The values at sorted positions ``lo`` and ``hi`` (ascending) of the NaN-free ``m``, as
    float64 times ``scale`` (1.0: the values themselves), the values ``np.partition`` finds,
    without partitioning all of ``m`` when they lie near its top (a calibration's 99.99 %
    quantile: the top ten-thousandth): every value at or above a threshold (drawn from every
    16th value: about four times as many as needed) is kept, and those partitioned give the
    positions from ``n - kept`` up exactly, as every value left out is below each kept one.
    A threshold that keeps too few (a sample that misleads) falls back to the partition."""
    flat = m.reshape(-1)
    n = flat.size
    need = n - lo
    if need * _SAMPLE_STEP * 4 <= n:
        sample = flat[::_SAMPLE_STEP].copy()
        r = max(0, sample.size - 4 * (need // _SAMPLE_STEP + 1) - 8)
        sample.partition(r)
        kept = flat[flat >= sample[r]]
        if kept.size >= need:
            base = n - kept.size
            kept.partition([lo - base, hi - base])
            return float(kept[lo - base]) * scale, float(kept[hi - base]) * scale
    part = np.partition(flat, [lo, hi])
    return float(part[lo]) * scale, float(part[hi]) * scale


def _channel_bounds(node: Node | None) -> np.ndarray | None:
    """For a convolution's or dense layer's output with constant weights and bias, per output
    channel ``sum |w| * 128 + |b|`` (int64: no int8 input can give a larger magnitude); None
    for any other producer. int8 weights take their magnitudes in place in an int16 copy
    (|-128| fits), summed in int32 (a row of fewer than 2**24 magnitudes of at most 128 sums
    below 2**31): the same integers as through an int64 copy of every weight, several times
    faster (ResNet-18's 11.7 M weights, the builder's calibration)."""
    if not isinstance(node, (Conv2d, Dense)) or node.weight.data is None \
            or node.bias.data is None:
        return None
    rows = node.weight.data.reshape(node.weight.type.shape[0], -1)
    if rows.dtype == np.int8:
        mag = rows.astype(np.int16)
        np.abs(mag, out=mag)
        acc = np.int32 if rows.shape[1] < 1 << 24 else np.int64
        w = mag.sum(axis=1, dtype=acc).astype(np.int64)
    else:
        w = np.abs(rows.astype(np.int64)).sum(axis=1, dtype=np.int64)
    return w * 128 + np.abs(node.bias.data.astype(np.int64))  # type: ignore[no-any-return]


def matmul_bound(node: MatMul) -> int:
    """A bound on ``|a @ b|`` of an activation matmul: K products of at most 128 * 128 (256
    * 256 when an operand has a zero point: ``|x - z| <= 255``)."""
    k = node.a.type.shape[-1]
    ma = 256 if node.zero_a else 128
    mb = 256 if node.zero_b else 128
    return int(min(k * ma * mb, _INT32_MAX))
