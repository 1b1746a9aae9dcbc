"""A user's own input and output for a graph run (``vta run --onnx M --input F --output O``).

``read_input`` turns a file into the graph's int8 input, the way the model itself would:

* ``.npy`` of float values: quantized with the model's own input ``QuantizeLinear`` scale
  (``quant.quantize_linear``: ONNX Runtime's arithmetic, float32 division, round half to
  even); of int8 values: taken as already quantized. The shape is the input's, or the input's
  without its leading batch dimension of 1.
* an image (``.png``, ``.jpg``, ``.jpeg``, ``.bmp``): its pixels scaled to [0, 1] (RGB for a
  3-channel input, grayscale for 1 channel; no resizing, no mean/std normalization: a model
  that expects normalized inputs gets a ``.npy``), then quantized as a float ``.npy``.

It returns the float input too (the image as the model's float input, or the int8 values
dequantized), which is what ONNX Runtime is given when it judges the run. ``top5`` lists an
output's five largest classes; ``write_output`` saves an output (int8, as the accelerator
computed it; the scale is in the run's JSON). Every bad file is a ``GraphError`` naming the
file and what is wrong (shape, dtype, size).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from vta.errors import GraphError
from vta.graph.ir import Graph, Value
from vta.graph.quant import quantize_linear

__all__ = ["IMAGE_SUFFIXES", "read_input", "top5", "write_output"]

#: file suffixes read as images (anything else must be .npy)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp")


def _image(path: Path, v: Value) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError  # Pillow: a dependency (matplotlib's too)

    shape = v.type.shape
    if len(shape) != 4 or shape[0] != 1 or shape[1] not in (1, 3):
        raise GraphError(f"{path}: an image feeds a (1, 3, H, W) or (1, 1, H, W) input; input "
                         f"{v.name} is {list(shape)}")
    try:
        with Image.open(path) as im:
            im = im.convert("RGB" if shape[1] == 3 else "L")
            pixels = np.asarray(im, dtype=np.float32) / np.float32(255)
    except (OSError, UnidentifiedImageError) as e:
        raise GraphError(f"{path}: cannot read the image: {e}") from None
    h, w = shape[2], shape[3]
    if pixels.shape[:2] != (h, w):
        raise GraphError(f"{path}: the image is {pixels.shape[1]}x{pixels.shape[0]} pixels; "
                         f"input {v.name} takes {w}x{h} (resize it first)")
    chw = pixels.reshape(h, w, -1).transpose(2, 0, 1)
    return np.ascontiguousarray(chw[None])


def _array(path: Path, v: Value) -> np.ndarray:
    try:
        a = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise GraphError(f"{path}: cannot read a .npy array: {e}") from None
    shape = v.type.shape
    if a.shape == shape[1:] and shape[0] == 1:
        a = a[None]
    if a.shape != shape:
        raise GraphError(f"{path}: shape {list(a.shape)}, but input {v.name} is {list(shape)}")
    if a.dtype != np.int8 and not np.issubdtype(a.dtype, np.floating):
        raise GraphError(f"{path}: dtype {a.dtype}; give float values (quantized with the "
                         f"model's input scale) or int8 (already quantized)")
    if np.issubdtype(a.dtype, np.floating) and not np.all(np.isfinite(a)):
        raise GraphError(f"{path}: the array holds NaN or infinite values")
    return a


def read_input(path: str | Path, graph: Graph) -> tuple[dict[str, np.ndarray],
                                                        dict[str, np.ndarray]]:
    """``(int8 inputs, float inputs)`` by input name from ``path`` (module docstring)."""
    p = Path(path)
    if len(graph.inputs) != 1:
        raise GraphError(f"{p}: graph {graph.name} has {len(graph.inputs)} inputs; --input "
                         f"feeds one")
    if not p.is_file():
        raise GraphError(f"{p}: no such input file")
    v = graph.inputs[0]
    scale = v.type.scale
    if scale is None:
        raise GraphError(f"input {v.name} of graph {graph.name} has no scale to quantize with")
    a = _image(p, v) if p.suffix.lower() in IMAGE_SUFFIXES else _array(p, v)
    if a.dtype == np.int8:
        real = (a.astype(np.float32) - np.float32(v.type.zero)) * np.float32(scale)
        return {v.name: a}, {v.name: real}
    x = a.astype(np.float32)
    return {v.name: quantize_linear(x, scale, v.type.zero)}, {v.name: x}


def top5(out: np.ndarray, scale: float | None, zero: int = 0) -> list[list[dict[str, Any]]]:
    """Per batch row, the five largest entries of ``out`` flattened: class index, int8 value
    and real value (``scale * (value - zero)``); ties in index order."""
    rows = np.asarray(out).reshape(out.shape[0] if out.ndim > 1 else 1, -1)
    result = []
    for row in rows:
        order = np.argsort(-row.astype(np.int64), kind="stable")[:5]
        result.append([{"class": int(i), "value": int(row[i]),
                        "real": None if scale is None else (float(row[i]) - zero) * scale}
                       for i in order])
    return result


def write_output(path: str | Path, out: np.ndarray) -> None:
    """Save ``out`` as ``.npy`` at ``path`` (a ``GraphError`` naming the path on failure)."""
    p = Path(path)
    if p.suffix != ".npy":
        raise GraphError(f"{p}: --output writes a .npy file (give a name ending in .npy)")
    try:
        np.save(p, out, allow_pickle=False)
    except OSError as e:
        raise GraphError(f"{p}: cannot write the output: {e.strerror or e}") from None


def io_summary(graph: Graph, outputs: dict[Value, np.ndarray],
               verdict: dict[str, Any] | None) -> dict[str, Any]:
    """The JSON a graph run adds about its outputs (shape, scale, top-5 per batch row) and,
    for an ONNX model, ONNX Runtime's verdict (``onnx_ort.ort_verdict``)."""
    s: dict[str, Any] = {"outputs": {v.name: {"shape": list(v.type.shape),
                                              "scale": v.type.scale,
                                              "zero_point": v.type.zero,
                                              "top5": top5(outputs[v], v.type.scale,
                                                           v.type.zero)}
                                     for v in graph.outputs}}
    if verdict is not None:
        s["onnx_runtime"] = verdict
    return s


def format_io(s: dict[str, Any]) -> str:
    """``io_summary`` as text lines: each output's top-5 (first batch row) and the verdict."""
    lines = []
    for name, o in s["outputs"].items():
        best = ", ".join(f"{t['class']}:{t['value']}" for t in o["top5"][0])
        lines.append(f"output {name} {o['shape']}: top-5 (class:int8) {best}")
    v = s.get("onnx_runtime")
    if v is not None:
        lines.append(f"ONNX Runtime ({v['reference']}): {v['text']}" if v["judged"] else
                     f"ONNX Runtime: not judged: {v['reason']}")
        w = v.get("as_written")
        if w is not None:  # a QDQ model: ORT's float form beside its fused reference
            lines.append(f"ONNX Runtime as written ({w['reference']}: float Conv / MatMul "
                         f"between DequantizeLinear and QuantizeLinear): {w['text']}")
    return "\n".join(lines)
