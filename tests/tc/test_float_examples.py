"""The float examples of examples/tc/ (softmax, the normalisations, average pooling, lookup
tables), each checked against a numpy reference written here, independently of the TC
interpreter, on the interpreter, the accelerator target (the host runs what the integer GEMM
core and ALU cannot, and says so per statement) and the GPU emulator; every kernel compiles to
PTX."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from vta.compiler.tc import load_file
from vta.config import HwConfig
from vta.errors import EmulatorError, InterpError, TcRangeError
from vta.run.targets import AccelTarget, CudaEmuTarget
from vta.run.tc import run_gpu, run_vta

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tc"
Arrays = dict[str, np.ndarray]


def _f(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _softmax(a: Arrays) -> Arrays:
    x = a["I"].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"O": e / e.sum(axis=1, keepdims=True)}


def _moments(a: Arrays) -> Arrays:
    x = a["I"].astype(np.float64)
    return {"mean": x.mean(axis=1), "var": x.var(axis=1)}


def _layernorm(a: Arrays) -> Arrays:
    x = a["I"].astype(np.float64)
    m, v = x.mean(axis=2, keepdims=True), x.var(axis=2, keepdims=True)
    return {"O": (x - m) / np.sqrt(v + 1e-5) * a["gamma"] + a["beta"]}


def _batchnorm(a: Arrays) -> Arrays:
    x = a["I"].astype(np.float64)
    m, v = x.mean(axis=(0, 2, 3), keepdims=True), x.var(axis=(0, 2, 3), keepdims=True)
    g, b = a["gamma"].reshape(1, -1, 1, 1), a["beta"].reshape(1, -1, 1, 1)
    return {"O": g * (x - m) / np.sqrt(v + 1e-5) + b}


def _groupnorm(a: Arrays) -> Arrays:
    x = a["I"].astype(np.float64)
    m, v = x.mean(axis=(2, 3, 4), keepdims=True), x.var(axis=(2, 3, 4), keepdims=True)
    g, b = a["gamma"][None, :, :, None, None], a["beta"][None, :, :, None, None]
    return {"O": g * (x - m) / np.sqrt(v + 1e-5) + b}


def _avgpool(a: Arrays) -> Arrays:
    x = a["I"].astype(np.float64)
    b, c, h, w = x.shape
    oh, ow = (h - 2) // 2 + 1, (w - 2) // 2 + 1
    win = x[:, :, :2 * oh, :2 * ow].reshape(b, c, oh, 2, ow, 2)
    return {"O": win.mean(axis=(3, 5))}


def _embedding(a: Arrays) -> Arrays:
    return {"O": a["LUT"][a["idx"]]}


def _embedding_bag(a: Arrays) -> Arrays:
    return {"O": a["LUT"].astype(np.float64)[a["idx"]].sum(axis=1)}


def _lookup_inputs(rng: np.random.Generator, s: dict[str, int]) -> Arrays:
    return {"LUT": _f(rng, s["V"], s["D"]),
            "idx": rng.integers(0, s["V"], (s["B"], s["L"])).astype(np.int32)}


Case = tuple[str, str | None, dict[str, int],
             Callable[[np.random.Generator, dict[str, int]], Arrays], Callable[[Arrays], Arrays]]

CASES: list[Case] = [
    ("softmax.tc", None, {"N": 5, "D": 33}, lambda r, s: {"I": 3 * _f(r, 5, 33)}, _softmax),
    ("norms.tc", "moments", {"N": 4, "K": 37}, lambda r, s: {"I": _f(r, 4, 37) + 2}, _moments),
    ("norms.tc", "layernorm", {"T": 2, "B": 3, "C": 16},
     lambda r, s: {"I": _f(r, 2, 3, 16), "gamma": _f(r, 16), "beta": _f(r, 16)}, _layernorm),
    ("norms.tc", "batchnorm", {"N": 2, "C": 3, "H": 4, "W": 5},
     lambda r, s: {"I": _f(r, 2, 3, 4, 5), "gamma": _f(r, 3), "beta": _f(r, 3)}, _batchnorm),
    ("norms.tc", "groupnorm", {"N": 2, "G": 2, "D": 3, "H": 4, "W": 3},
     lambda r, s: {"I": _f(r, 2, 2, 3, 4, 3), "gamma": _f(r, 2, 3), "beta": _f(r, 2, 3)},
     _groupnorm),
    ("avgpool.tc", None, {"B": 2, "C": 3, "H": 7, "W": 6},
     lambda r, s: {"I": _f(r, 2, 3, 7, 6)}, _avgpool),
    ("lookup.tc", "embedding", {"V": 10, "D": 6, "B": 3, "L": 4}, _lookup_inputs, _embedding),
    ("lookup.tc", "embedding_bag", {"V": 10, "D": 6, "B": 3, "L": 4}, _lookup_inputs,
     _embedding_bag),
]
IDS = [c[1] or c[0].removesuffix(".tc") for c in CASES]


def _check(got: Arrays, want: Arrays) -> None:
    for name, w in want.items():
        np.testing.assert_allclose(got[name].astype(np.float64), w, rtol=1e-4, atol=1e-5,
                                   err_msg=name)


@pytest.mark.parametrize("file, entry, sizes, make, ref", CASES, ids=IDS)
def test_float_example(pynq: HwConfig, nvcc_check: Callable[[list[str]], None], file: str,
                       entry: str | None, sizes: dict[str, int],
                       make: Callable[[np.random.Generator, dict[str, int]], Arrays],
                       ref: Callable[[Arrays], Arrays]) -> None:
    d = load_file(EXAMPLES / file, entry)
    inputs = make(np.random.default_rng(3), sizes)
    want = ref(inputs)
    _check(d.interpret(d.at(sizes), inputs), want)
    v = run_vta(d, sizes, AccelTarget(pynq), inputs)
    assert v.passed and v.check is not None and "bit-exact" not in v.check.line()
    _check(v.outputs, want)
    # float work stays on the host, and each statement says so
    assert all(t.kind == "CPU" for t in v.tasks) and v.fraction == 0.0
    assert {p["placement"] for p in v.summary()["placement"]} == {"host"}
    g = run_gpu(d, sizes, CudaEmuTarget(), inputs=inputs)
    assert g.passed, g.mismatches
    _check(g.outputs, want)
    nvcc_check(g.sources)


def test_lookup_out_of_bounds_is_named() -> None:
    """An index outside the table is a named error on every target, never a silent read."""
    d = load_file(EXAMPLES / "lookup.tc", "embedding")
    sizes = {"V": 10, "D": 6, "B": 3, "L": 4}
    inputs = _lookup_inputs(np.random.default_rng(0), sizes)
    inputs["idx"][1, 2] = 10
    with pytest.raises(TcRangeError, match=r"LUT\(idx\(b, l\), d\) reads index 10 of "
                                           r"dimension 0 of LUT \(size 10\)"):
        d.interpret(d.at(sizes), inputs)
    with pytest.raises(InterpError, match="load from LUT: index 10 out of range"):
        run_vta(d, sizes, AccelTarget(HwConfig.load("pynq")), inputs, check=False)
    with pytest.raises(EmulatorError, match="load from LUT"):
        run_gpu(d, sizes, CudaEmuTarget(), inputs=inputs, check=False)
