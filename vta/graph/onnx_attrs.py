"""ONNX operator attributes for the importer: each one honored or refused by name.

``node_attrs`` reads a node's attributes and refuses any the importer does not know for that
operator (an attribute silently ignored is a wrong answer: ``auto_pad=SAME_UPPER`` read as
padding 0 shifted every logit). ``window`` resolves a convolution's or pooling window's
``kernel_shape``, ``strides``, ``pads``, ``auto_pad`` and ``dilations`` to the single stride
and padding the graph IR has, computing ``SAME_UPPER`` / ``SAME_LOWER`` / ``VALID`` padding as
the ONNX operator specification defines it, and refuses (naming the attribute and its value)
what the IR cannot express: padding that differs between sides, strides that differ between
axes, dilations other than 1, a kernel that contradicts the weights.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vta.errors import OnnxImportError

__all__ = ["KNOWN_ATTRS", "node_attrs", "Window", "window", "same_pads", "conv_groups"]

_CONV = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")
_POOL = ("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order",
         "strides")

#: the attributes the importer reads, per operator (any other is refused by name)
KNOWN_ATTRS: dict[str, tuple[str, ...]] = {
    "Conv": _CONV, "QLinearConv": _CONV, "MaxPool": _POOL,
    "Gemm": ("alpha", "beta", "transA", "transB"), "QGemm": ("alpha", "transA", "transB"),
    "Flatten": ("axis",), "Reshape": ("allowzero",),
    "QuantizeLinear": ("axis", "saturate", "block_size"),
    "DequantizeLinear": ("axis", "block_size"),
    "QLinearGlobalAveragePool": ("channels_last",),
    "Clip": (),
    "Softmax": ("axis",), "LayerNormalization": ("axis", "epsilon", "stash_type"),
    "Transpose": ("perm",),
    "QLinearSoftmax": ("axis", "opset"), "QLinearMul": (), "QLinearAdd": (),
    "QLinearConcat": ("axis",),
    "QLinearAveragePool": (*_POOL, "channels_last", "count_include_pad"),
}


def node_attrs(node: Any, where: str) -> dict[str, Any]:
    """``node``'s attributes by name; an attribute the importer does not read for this
    operator is an ``OnnxImportError`` naming it."""
    from onnx import helper  # the optional extra: imported only when a model is read

    known = KNOWN_ATTRS.get(node.op_type, ())
    out = {}
    for a in node.attribute:
        if a.name not in known:
            raise OnnxImportError(f"{where}: attribute {a.name} is not supported for "
                                  f"{node.op_type} (the importer reads "
                                  f"{', '.join(known) or 'no attributes'})")
        out[a.name] = helper.get_attribute_value(a)
    return out


@dataclass(frozen=True)
class Window:
    """A square window the graph IR can run: ``kernel`` x ``kernel``, one ``stride``, the same
    ``pad`` on every side."""

    kernel: int
    stride: int
    pad: int
    #: a convolution's ``group`` (1 for pooling windows)
    groups: int = 1


def same_pads(size: int, kernel: int, stride: int, upper: bool) -> tuple[int, int]:
    """``(begin, end)`` padding of one axis under ``auto_pad=SAME_UPPER`` (``upper``) or
    ``SAME_LOWER``: the output has ``ceil(size / stride)`` elements and the odd unit of
    padding goes at the end (upper) or the beginning (lower), as the ONNX Conv specification
    states."""
    out = -(-size // stride)
    total = max(0, (out - 1) * stride + kernel - size)
    small = total // 2
    return (small, total - small) if upper else (total - small, small)


def window(attrs: Mapping[str, Any], in_hw: Sequence[int], where: str,
           weight_hw: Sequence[int] | None = None) -> Window:
    """The IR window of a Conv / QLinearConv / MaxPool with ``attrs`` on an input of spatial
    size ``in_hw`` (``weight_hw``: the convolution's weight's kernel size, which
    ``kernel_shape`` must agree with); every attribute honored or refused by name."""
    ks = list(attrs.get("kernel_shape", weight_hw or []))
    if weight_hw is not None and ks != list(weight_hw):
        raise OnnxImportError(f"{where}: kernel_shape {ks} contradicts the weights' kernel "
                              f"{list(weight_hw)}")
    if len(ks) != 2:
        raise OnnxImportError(f"{where}: kernel_shape {ks}: only 2-D windows are supported")
    dil = list(attrs.get("dilations", [1, 1]))
    if any(d != 1 for d in dil):
        raise OnnxImportError(f"{where}: dilations {dil} are not supported (only 1)")
    if attrs.get("ceil_mode", 0):
        raise OnnxImportError(f"{where}: ceil_mode {attrs['ceil_mode']} is not supported "
                              f"(only 0)")
    if attrs.get("storage_order", 0):
        raise OnnxImportError(f"{where}: storage_order {attrs['storage_order']} (the indices "
                              f"output) is not supported")
    strides = list(attrs.get("strides", [1, 1]))
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else str(auto)
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        per_axis = [same_pads(n, k, s, auto == "SAME_UPPER")
                    for n, k, s in zip(in_hw, ks, strides, strict=True)]
        pads = [per_axis[0][0], per_axis[1][0], per_axis[0][1], per_axis[1][1]]
    elif auto == "VALID":
        pads = [0, 0, 0, 0]
    elif auto == "NOTSET":
        pads = list(attrs.get("pads", [0, 0, 0, 0]))
    else:
        raise OnnxImportError(f"{where}: auto_pad {auto!r} is not one of NOTSET, SAME_UPPER, "
                              f"SAME_LOWER, VALID")
    if auto != "NOTSET" and "pads" in attrs:
        raise OnnxImportError(f"{where}: auto_pad {auto} and pads {list(attrs['pads'])} "
                              f"together (the specification allows one)")
    if ks[0] != ks[1] or strides[0] != strides[1]:
        raise OnnxImportError(f"{where}: kernel_shape {ks} and strides {strides}: only square "
                              f"windows with one stride are supported")
    if len(set(pads)) != 1:
        how = f" (auto_pad {auto})" if auto != "NOTSET" else ""
        raise OnnxImportError(f"{where}: pads {pads} (top, left, bottom, right){how}: "
                              f"asymmetric padding is not supported (the graph IR pads every "
                              f"side equally)")
    return Window(ks[0], strides[0], pads[0])


def conv_groups(attrs: Mapping[str, Any], x_shape: Sequence[int], w_shape: Sequence[int],
                where: str) -> int:
    """A Conv / QLinearConv's ``group`` checked against its input ``x_shape`` (NCHW) and
    weights ``w_shape`` (``(O, C/group, KH, KW)``, as the ONNX specification states): every
    group count that divides both channel counts is honored (1 plain, C depthwise)."""
    groups = int(attrs.get("group", 1))
    if len(x_shape) != 4 or len(w_shape) != 4:
        raise OnnxImportError(f"{where}: a convolution of {list(x_shape)} by weights "
                              f"{list(w_shape)}: only 2-D NCHW by OIHW is supported")
    c, o = x_shape[1], w_shape[0]
    if groups < 1 or c % groups or o % groups:
        raise OnnxImportError(f"{where}: group {groups} does not divide the {c} input and {o} "
                              f"output channels")
    if w_shape[1] * groups != c:
        raise OnnxImportError(f"{where}: weights {list(w_shape)} have {w_shape[1]} input "
                              f"channels per group; the input has {c} channels in {groups} "
                              f"group{'s' if groups > 1 else ''} ({c // groups} each)")
    return groups
