"""Multipliers by shifts and adds on VTA's stock ALU (``quant.shift_add_multipliers``,
``vta run --onnx M --approx shift-add``).

* ``ops.chain.mac`` (Horner's rule over the multipliers' set bits) and ``channel_terms`` (each
  channel's multiplier as exactly P powers of two) compute the products exactly;
* an ONNX model ORT quantized with asymmetric int8 and per-channel weights (multipliers that
  are not powers of two, zero points, a per-channel requantize, an add, a global average pool)
  is refused on pynq by name, and with its multipliers marked ``shift_add`` every group runs on
  the accelerator, bit-exact against the graph interpreter, with the same bits as pynq_mul;
* the CLI: the refusal names ``--approx shift-add``; with it the run passes and prints ORT's
  agreement; ``--approx`` is refused by name where it does not apply (a layer, a built-in
  network, a config with MUL).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from vta.cli import main  # noqa: E402
from vta.compiler.ir import expr as E  # noqa: E402
from vta.compiler.ops.chain import CHANNEL_SHIFT_MAX, channel_terms, mac  # noqa: E402
from vta.errors import CompileError, GraphError  # noqa: E402
from vta.gpu.nvcc import compile_ptx_batch, find_nvcc  # noqa: E402
from vta.graph.compile import compile_graph  # noqa: E402
from vta.graph.ir import Add, GlobalAvgPool, Requantize  # noqa: E402
from vta.graph.onnx_import import load_onnx  # noqa: E402
from vta.graph.onnx_ort import Format, quantize, small_cnn  # noqa: E402
from vta.graph.place import Kernel  # noqa: E402
from vta.graph.quant import quantize_linear, shift_add_multipliers  # noqa: E402
from vta.run.graph import compile_for, run_graph  # noqa: E402
from vta.run.targets import CudaEmuTarget  # noqa: E402

from .conftest import ROOT, hw  # noqa: E402

PYNQ = str(ROOT / "hwconfigs" / "pynq.yaml")


def _eval(e: E.Expr, env: dict[E.Var, np.ndarray]) -> np.ndarray:
    if isinstance(e, E.Var):
        return env[e]
    if isinstance(e, E.IntImm):
        return np.int64(e.value)  # type: ignore[return-value]
    a, b = _eval(e.a, env), _eval(e.b, env)  # type: ignore[attr-defined]
    r = {E.Add: np.add, E.Shl: np.left_shift, E.Sub: np.subtract}[type(e)](a, b)
    return ((r + 2**31) % 2**32) - 2**31  # type: ignore[no-any-return]


@pytest.mark.parametrize("mults", [(1,), (3,), (0b1011011,), (12345, 0), (32767, 77), (0, 5)])
def test_mac_is_the_products_sum(mults: tuple[int, ...]) -> None:
    vs = [E.Var(f"v{k}", "int32") for k in range(len(mults))]
    rng = np.random.default_rng(0)
    data = {v: rng.integers(-300, 300, 1000) for v in vs}
    got = _eval(mac(E.const(0, "int32"), list(zip(vs, mults, strict=True))), data)
    assert np.array_equal(got, sum(data[v] * m for v, m in zip(vs, mults, strict=True)))


def test_channel_terms_are_exactly_p_powers_of_two() -> None:
    mults = [6, 8, 7, 1000, 2**15 + 3, 96]
    p = max(bin(m).count("1") for m in mults)
    for m, shifts in zip(mults, channel_terms(mults), strict=True):
        assert len(shifts) == p and all(0 <= s <= CHANNEL_SHIFT_MAX for s in shifts)
        h = 1  # Horner: h = 1; h = (h << g) + 1; ...; h << e_P
        for g in shifts[:-1]:
            h = (h << g) + 1
        assert h << shifts[-1] == m
    assert channel_terms([3, 2**16 + 1]) == [[1, 0], [16, 0]]  # a gap of 16: one SHR
    with pytest.raises(CompileError, match="channel 1's multiplier 131073"):
        channel_terms([3, 2**17 + 1])  # a gap of 17: beyond one SHR
    with pytest.raises(CompileError, match="channel 0's multiplier 1 has no 2-term"):
        channel_terms([1, 3])


@pytest.fixture(scope="module")
def a8_per_channel() -> object:
    return quantize(small_cnn(0), Format("QDQ", "a8", True), seed=1)


def test_shift_add_runs_an_asymmetric_per_channel_model_on_pynq(a8_per_channel: object) -> None:
    g = load_onnx(a8_per_channel)
    with pytest.raises(GraphError, match=r"needs ALU MUL.*vta run --approx shift-add"):
        compile_graph(g, hw(), refine=1)
    sa = shift_add_multipliers(g)
    marked = {type(n) for n in sa.nodes if getattr(n, "shift_add", False)}
    assert marked == {Requantize, Add, GlobalAvgPool}
    assert any(isinstance(n, Requantize) and n.mults is not None and n.shift_add
               for n in sa.nodes)
    cg = compile_graph(sa, hw(), refine=1)
    assert all(isinstance(s, Kernel) for s in cg.steps)
    v = sa.inputs[0]
    x = np.random.default_rng(7).standard_normal(v.type.shape).astype(np.float32)
    feed = {v.name: quantize_linear(x, v.type.scale or 1.0, v.type.zero)}
    r = run_graph(cg, feed)
    assert r.passed
    mul = run_graph(compile_graph(g, hw("pynq_mul"), refine=1), feed)
    assert all(np.array_equal(r.outputs[o], mul.outputs[o]) for o in sa.outputs)
    assert r.cycles > mul.cycles  # shifts and adds cost more ALU instructions than MUL


def test_shift_add_on_the_gpu_path(a8_per_channel: object) -> None:
    """The GPU kernels inline the same stages (Horner's rule in the output stage): the SIMT
    emulator gives the interpreter's bits, and nvcc compiles every kernel (PTX)."""
    sa = shift_add_multipliers(load_onnx(a8_per_channel))
    v = sa.inputs[0]
    x = np.random.default_rng(7).standard_normal(v.type.shape).astype(np.float32)
    cg = compile_for(sa, CudaEmuTarget())
    assert run_graph(cg, {v.name: quantize_linear(x, v.type.scale or 1.0, v.type.zero)}).passed
    if find_nvcc() is None:
        pytest.skip("nvcc is not installed: the kernels cannot be compiled to PTX")
    compile_ptx_batch([k.source for k, _ in filter(None, cg.kernels)], "sm_80")


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("onnx") / "cnn_a8.onnx"
    onnx.save(quantize(small_cnn(0), Format("QOperator", "a8", False), seed=1), str(p))
    return p


def test_cli_refuses_then_runs_with_approx(model_file: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--onnx", str(model_file), "--hw", PYNQ]) != 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "--approx shift-add" in err and "needs ALU MUL" in err
    assert main(["run", "--onnx", str(model_file), "--hw", PYNQ, "--approx", "shift-add"]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and re.search(r"ONNX Runtime .*int8 values equal", out)
    assert "host fallbacks: none" in out


@pytest.mark.parametrize(("argv", "match"), [
    (["run", "resnet18:C2", "--approx", "shift-add"], "applies to a whole graph"),
    (["run", "resnet18", "--approx", "shift-add"], "applies to --onnx FILE"),
])
def test_approx_refused_where_it_does_not_apply(argv: list[str], match: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and re.search(match, err), err


def test_approx_refused_on_a_config_with_mul(model_file: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--onnx", str(model_file), "--hw", str(ROOT / "hwconfigs" / "pynq_mul.yaml"),
            "--approx", "shift-add"]
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "pynq_mul multiplies" in err, err
