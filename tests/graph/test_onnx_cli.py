"""``vta run --onnx M --input X --output O``: a user's own float array, int8 array or image
through the model's own input quantization, the output written and its top-5 reported, and
ONNX Runtime's agreement printed beside the self-check; every bad input a named error with a
non-zero exit (skipped without onnx / onnxruntime)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
PIL_Image = pytest.importorskip("PIL.Image")

from vta.cli import main  # noqa: E402
from vta.graph import models  # noqa: E402
from vta.graph.onnx_ort import (  # noqa: E402
    Format,
    calibration_inputs,
    ort_tensors,
    quantize,
    small_cnn,
)
from vta.graph.quant import quantize_linear  # noqa: E402

from .conftest import ROOT, SMALL  # noqa: E402

PYNQ_MUL = str(ROOT / "hwconfigs" / "pynq_mul.yaml")


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("onnx") / "cnn.onnx"
    onnx.save(quantize(small_cnn(0), Format("QOperator", "s8", False), seed=1), str(p))
    return p


def _run(model: Path, *extra: str) -> int:
    return main(["run", "--onnx", str(model), "--hw", PYNQ_MUL, *extra])


def test_a_float_npy_is_quantized_by_the_models_scale_and_judged_by_ort(
        model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    x = calibration_inputs(small_cnn(0), 99, 1)[0]
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "y.npy"
    assert _run(model, "--input", str(tmp_path / "x.npy"), "--output", str(out), "--json") == 0
    s = json.loads(capsys.readouterr().out)
    y = np.load(out)
    want = ort_tensors(onnx.load(str(model)), {"x": x})["y_quantized"]
    assert y.dtype == np.int8 and y.shape == (1, 10)
    assert np.abs(y.astype(int) - want).max() <= 1
    top = s["outputs"]["y_quantized"]["top5"][0]
    assert [t["class"] for t in top] == list(np.argsort(-y[0].astype(int), kind="stable")[:5])
    v = s["onnx_runtime"]
    assert v["judged"] and v["reference"].endswith("ORT_DISABLE_ALL") and v["tensors"] == 5
    assert v["max_diff"] <= 1


def test_an_int8_npy_and_an_image(model: Path, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    g = onnx.load(str(model))
    scale = float(onnx.numpy_helper.to_array(
        next(t for t in g.graph.initializer if t.name == "x_scale")))
    pixels = (np.random.default_rng(0).random((8, 8, 3)) * 255).astype(np.uint8)
    PIL_Image.fromarray(pixels).save(tmp_path / "img.png")
    xq = quantize_linear(pixels.transpose(2, 0, 1)[None].astype(np.float32) / 255, scale)
    np.save(tmp_path / "xq.npy", xq[0])  # without the batch dimension
    assert _run(model, "--input", str(tmp_path / "img.png"), "--output",
                str(tmp_path / "a.npy")) == 0
    text = capsys.readouterr().out
    assert "output y_quantized [1, 10]: top-5 (class:int8) " in text
    assert "ONNX Runtime (onnxruntime " in text and "CPU, ORT_DISABLE_ALL): " in text
    assert _run(model, "--input", str(tmp_path / "xq.npy"), "--output",
                str(tmp_path / "b.npy")) == 0
    assert np.array_equal(np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy"))


@pytest.mark.parametrize("what,match", [
    ("shape", r"x\.npy: shape \[1, 3, 9, 9\], but input x is \[1, 3, 8, 8\]"),
    ("dtype", r"x\.npy: dtype int32; give float values"),
    ("nan", r"x\.npy: the array holds NaN"),
    ("missing", r"nope\.npy: no such input file"),
    ("image-size", r"img\.png: the image is 8x9 pixels; input x takes 8x8"),
    ("not-an-image", r"img\.png: cannot read the image"),
    ("output", r"y\.txt: --output writes a \.npy file"),
])
def test_bad_inputs_are_named_with_a_nonzero_exit(model: Path, tmp_path: Path, what: str,
                                                  match: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--input", str(tmp_path / "x.npy")]
    if what == "shape":
        np.save(tmp_path / "x.npy", np.zeros((1, 3, 9, 9), np.float32))
    elif what == "dtype":
        np.save(tmp_path / "x.npy", np.zeros((1, 3, 8, 8), np.int32))
    elif what == "nan":
        np.save(tmp_path / "x.npy", np.full((1, 3, 8, 8), np.nan, np.float32))
    elif what == "missing":
        args = ["--input", str(tmp_path / "nope.npy")]
    elif what == "image-size":
        PIL_Image.fromarray(np.zeros((9, 8, 3), np.uint8)).save(tmp_path / "img.png")
        args = ["--input", str(tmp_path / "img.png")]
    elif what == "not-an-image":
        (tmp_path / "img.png").write_bytes(b"not a png")
        args = ["--input", str(tmp_path / "img.png")]
    else:
        np.save(tmp_path / "x.npy", np.zeros((1, 3, 8, 8), np.float32))
        args += ["--output", str(tmp_path / "y.txt")]
    assert _run(model, *args) != 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert re.search(match, err), err


def test_input_and_output_are_refused_for_a_layer(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "conv2d", "--input", "x.npy"]) != 0
    assert "--input applies to a whole graph" in capsys.readouterr().err


@pytest.mark.slow  # 47 s on 2 cores: the same --input code as the ONNX tests above
def test_resnet18_takes_an_input_and_writes_its_output(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``vta run resnet18 --input image.npy --output logits.npy`` (the small ResNet-18 of the
    default suite): a float input quantized with the graph's input scale, the logits written
    and their top-5 listed; ONNX Runtime does not judge a model that is not ONNX."""
    monkeypatch.setitem(models.MODELS, "resnet18",
                        lambda batch=1: models.resnet18(batch=batch, **SMALL))
    g = models.resnet18(**SMALL)
    v = g.inputs[0]
    x = np.random.default_rng(1).standard_normal(v.type.shape[1:]).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "logits.npy"
    assert main(["run", "resnet18", "--input", str(tmp_path / "x.npy"), "--output",
                 str(out), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    y = np.load(out)
    assert y.shape == g.outputs[0].type.shape and y.dtype == np.int8
    assert [t["class"] for t in s["outputs"][g.outputs[0].name]["top5"][0]] == \
        list(np.argsort(-y[0].astype(int), kind="stable")[:5])
    assert "onnx_runtime" not in s


def test_a_qdq_model_is_judged_on_orts_fused_kernels_and_as_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A QDQ model's verdict: ORT's fused integer kernels (the reference,
    ``onnx_ort.reference_for``) and, named beside it, ORT's graph as written (float Conv)."""
    p = tmp_path / "qdq.onnx"
    onnx.save(quantize(small_cnn(0), Format("QDQ", "a8", True), seed=1), str(p))
    assert _run(p) == 0
    text = capsys.readouterr().out
    assert ("CPU, ORT_ENABLE_EXTENDED, session.qdqisint8allowed=1, float fusions off): "
            in text)
    assert "ONNX Runtime as written (onnxruntime " in text and \
        "CPU, ORT_DISABLE_ALL: float Conv / MatMul between DequantizeLinear and " in text
    assert _run(p, "--json") == 0
    v = json.loads(capsys.readouterr().out)["onnx_runtime"]
    assert v["judged"] and v["tensors"] == 5 and v["max_diff"] <= 1
    assert v["as_written"]["reference"].endswith("ORT_DISABLE_ALL")
    assert v["as_written"]["tensors"] == 5
