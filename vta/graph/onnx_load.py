"""Read and validate an ONNX model before the importer looks at it.

A model the importer cannot trust is refused here, each with its own named
``OnnxImportError``, never a traceback and never an empty graph that "passes":

* a path that is not a file, a 0-byte file, bytes that are not a model;
* a model without a graph, or a graph with no nodes or no outputs;
* a model ``onnx.checker.check_model(full_check=True)`` rejects (it runs strict shape
  inference too: a ``kernel_shape`` that contradicts the weights, an operator at an opset that
  lacks it, an attribute out of range);
* an initializer whose stored data does not hold its declared shape (truncated
  ``raw_data``).

``onnx`` is an optional extra (``pip install 'vta[onnx]'``); it is imported only when a model
is read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from vta.errors import OnnxImportError

__all__ = ["onnx_module", "read_model", "initializers", "qdq_form", "QDQ_ANCHORS"]


def onnx_module() -> Any:
    """The ``onnx`` package, or an ``OnnxImportError`` saying how to install it."""
    try:
        import onnx
    except ImportError:
        raise OnnxImportError("reading ONNX models needs the onnx package: pip install "
                              "'vta[onnx]'") from None
    return onnx


def _load_file(path: Path) -> Any:
    if not path.is_file():
        reason = "not a file" if path.exists() else "No such file or directory"
        raise OnnxImportError(f"{path}: cannot read an ONNX model: {reason}")
    if path.stat().st_size == 0:
        raise OnnxImportError(f"{path}: the file is empty (0 bytes), not an ONNX model")
    onnx = onnx_module()
    try:
        return onnx.load(str(path))
    except OSError as e:
        raise OnnxImportError(f"{path}: cannot read an ONNX model: "
                              f"{e.strerror or e}") from None
    except Exception as e:  # protobuf's DecodeError for a file that is not a model
        raise OnnxImportError(f"{path}: not an ONNX model ({type(e).__name__})") from None


def read_model(model: str | Path | Any) -> Any:
    """The validated ``ModelProto`` of ``model`` (a path or a ``ModelProto``; module
    docstring)."""
    what = str(model) if isinstance(model, (str, Path)) else "the ONNX model"
    if isinstance(model, (str, Path)):
        model = _load_file(Path(model))
    onnx = onnx_module()
    if not model.HasField("graph"):
        raise OnnxImportError(f"{what}: the model has no graph")
    if len(model.graph.node) == 0:
        raise OnnxImportError(f"{what}: graph {model.graph.name!r} is empty (no nodes)")
    if len(model.graph.output) == 0:
        raise OnnxImportError(f"{what}: graph {model.graph.name!r} has no outputs")
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:  # ValidationError and InferenceError, from the C++ checker
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise OnnxImportError(f"{what}: the ONNX checker rejects the model: {first}") from None
    return model


def initializers(model: Any, what: str = "the ONNX model") -> dict[str, np.ndarray]:
    """Every initializer as a numpy array; one whose data does not hold its declared shape
    (truncated ``raw_data``) is an ``OnnxImportError`` naming it."""
    onnx = onnx_module()
    out = {}
    for t in model.graph.initializer:
        try:
            out[t.name] = onnx.numpy_helper.to_array(t)
        except Exception as e:  # numpy's reshape of too few bytes, an unknown data type
            raise OnnxImportError(f"{what}: initializer {t.name!r} (shape {list(t.dims)}) "
                                  f"cannot be read: its stored data does not hold that shape "
                                  f"({type(e).__name__}: {e})") from None
    return out


#: the float operators a QDQ model wraps in DequantizeLinear / QuantizeLinear for ONNX Runtime to
#: fuse into its integer kernels (QLinearConv, QLinearMatMul, QGemm)
QDQ_ANCHORS = frozenset({"Conv", "MatMul", "Gemm"})


def qdq_form(model: Any) -> bool:
    """Whether ``model`` is in ONNX Runtime's QDQ form: a ``DequantizeLinear`` feeds the data
    input of a float Conv / MatMul / Gemm (``QDQ_ANCHORS``). ORT fuses such a model's groups
    into integer kernels (``onnx_ort.reference_for``), its float GlobalAveragePool among them
    (a QLinearGlobalAveragePool)."""
    made_by = {o: n.op_type for n in model.graph.node for o in n.output}
    return any(n.op_type in QDQ_ANCHORS and n.input and
               made_by.get(n.input[0]) == "DequantizeLinear" for n in model.graph.node)
