"""``vta tc show`` and ``vta run --tc``: output, and the one-line errors with exit status 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from vta.cli import main

MLP = """# a fully connected layer with ReLU
def fc(int8(B,M) I, int8(N,M) W) -> (O) {
  T(b, n) +=! I(b, m) * W(n, m)
  O(b, n) = fmax(T(b, n), 0)
}
"""


def _file(tmp_path: Path, text: str, name: str = "f.tc") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _file(tmp_path, MLP)
    assert main(["tc", "show", f]) == 0
    out = capsys.readouterr().out
    assert "domain: [B, M, N] -> { S1[b, n, m] :" in out and "O: output int32 (B, N)" in out
    assert main(["tc", "show", f, "--size", "B=2,M=8,N=4"]) == 0
    assert "O: output int32 (B, N) = [2, 4]" in capsys.readouterr().out


@pytest.mark.parametrize("text, args, msg", [
    (MLP.replace("+=!", "+="), [], "'+=' without '!' accumulates"),
    (MLP.replace("W(n, m)", "W(n, m"), [], "f.tc:4:3: expected ',' or ')'"),
    (MLP, ["--size", "B=2"], "needs a value for size M, N"),
    (MLP, ["--size", "B=two"], "not an integer"),
    (MLP, ["--entry", "g"], "no definition named 'g'"),
])
def test_show_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                     args: list[str], msg: str) -> None:
    assert main(["tc", "show", _file(tmp_path, text), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vta: error: ") and msg in err.splitlines()[0]
    assert "Traceback" not in err


def test_show_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["tc", "show", str(tmp_path / "nope.tc")]) == 2
    assert "cannot read file" in capsys.readouterr().err


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tc"
PYNQ = str(Path(__file__).resolve().parents[2] / "hwconfigs" / "pynq.yaml")


def test_run_on_the_simulator(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["run", "--hw", PYNQ, "--tc", str(EXAMPLES / "conv.tc"), "--entry", "conv2d",
               "--size", "N=1,C=16,H=8,W=8,K=16,R=3,S=3"])
    out = capsys.readouterr().out
    assert rc == 0 and "PASS: bit-exact against the TC interpreter" in out
    assert ("GEMM 1 x conv2d N=1 16x8x8 -> 16x6x6 k=3x3 s=1 p=0 + ALU SHR 8 ADD reg MAX 0 "
            "MIN 127, 1 plane(s)") in out
    assert "100.0% of the work" in out


def test_run_reports_the_cpu_fallback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _file(tmp_path, "def s(fp32(N) B, fp32(K) W) -> (A) { A(i) +=! B(i + k) * W(k) }")
    assert main(["run", "--tc", f, "--size", "N=12,K=3"]) == 0
    out = capsys.readouterr().out
    assert "statement 1 (A(i) +=! B(i + k) * W(k)): CPU fallback: not a GEMM: a float32 value" \
        in out
    assert "0.0% of the work" in out


def test_run_json_and_the_emulator(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["run", "--tc", str(EXAMPLES / "maxpool.tc"), "--size", "N=1,C=2,H=9,W=9",
                 "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["passed"] and s["accelerator_fraction"] == 1.0 and s["tasks"][0]["kind"] == "ALU"
    assert main(["run", "--tc", str(EXAMPLES / "mlp.tc"), "--size", "B=2,M=16,N=8,P=4",
                 "--target", "cuda-emu", "--emit-cuda"]) == 0
    out = capsys.readouterr().out
    assert "__global__" in out and "on the SIMT emulator: 2 kernel(s)" in out and "PASS" in out


@pytest.mark.parametrize("args, msg", [
    (["--size", "M=8,K=8"], "needs a value for size N"),
    (["--size", "M=8,K=8,N=8", "--entry", "mm"], "no definition named 'mm'"),
    (["--size", "M=8;K=8"], "--size M=8;K=8: not an integer"),
    (["--size", "M=8,K=8,N=8", "--target", "cuda"], "CuPy"),
    (["--size", "M=8,K=8,N=8", "--trace", "t.json", "--tco", "2"],
     "--tco, --trace apply to named workloads"),
    (["--size", "M=8,K=8,N=8", "--emit-cuda"], "--emit-cuda needs --target cuda-emu or cuda"),
])
def test_run_errors(capsys: pytest.CaptureFixture[str], args: list[str], msg: str) -> None:
    from vta.gpu.runtime import gpu_available

    if "--target" in args and gpu_available():
        pytest.skip("a GPU is present: the cuda target runs")
    assert main(["run", "--tc", str(EXAMPLES / "matmul.tc"), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vta: error: ") and msg in err and "Traceback" not in err


def test_run_empty_range(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--tc", str(EXAMPLES / "conv.tc"), "--entry", "conv2d",
                 "--size", "N=1,C=2,H=2,W=8,K=2,R=3,S=3"]) == 2
    assert "index h has an empty range at sizes" in capsys.readouterr().err


def test_float_run_prints_placement_and_never_bit_exact(
        capsys: pytest.CaptureFixture[str]) -> None:
    import json

    for target in ("vta", "cuda-emu"):
        assert main(["run", "--tc", str(EXAMPLES / "softmax.tc"), "--size", "N=3,D=8",
                     "--target", target]) == 0
        out = capsys.readouterr().out
        assert "PASS: within 0.001 against the TC interpreter" in out and "bit-exact" not in out
        assert "placement:\n  statement 1 (mx(n) max=! I(n, d)): " in out
    assert "statement 4 (O(n, d) = e(n, d) / s(n)): GPU, kernel softmax_k2_O" in out
    assert main(["run", "--tc", str(EXAMPLES / "intermediate.tc"), "--size", "M=6,K=40,N=12",
                 "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert [p["placement"] for p in s["placement"]] == [
        "accelerator ALU", "accelerator GEMM", "accelerator GEMM"]
    assert main(["run", "--tc", str(EXAMPLES / "softmax.tc"), "--size", "N=3,D=8",
                 "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert {p["placement"] for p in s["placement"]} == {"host"}
    assert "float32" in s["placement"][1]["reason"] or "floating" in s["placement"][1]["reason"]


@pytest.mark.parametrize("text, msg", [
    ("def f(float(N) A) -> (O) { O(i) = A.0 }", "not supported: dimension specifiers"),
    ("def f(float(N) A) -> (O) { O(-1) = A(0) }", "not supported: '-' as a left-hand index"),
    ("def f(float(N) A) -> (O) { O(i) = A(i) <=> }", "expected a name after '<=>'"),
])
def test_unsupported_constructs_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          text: str, msg: str) -> None:
    assert main(["tc", "show", _file(tmp_path, text)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vta: error: ") and msg in err and "Traceback" not in err


def test_show_reports_the_annotation_and_scalars(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    f = _file(tmp_path, "def f(float(N) A, float s) -> (O, T) {\n"
                        "  O(i) = A(i) * s <=> scale(A, s)\n  T +=! A(i)\n}")
    assert main(["tc", "show", f, "--size", "N=4"]) == 0
    out = capsys.readouterr().out
    assert "def f(float32(N) A, float32 s) -> (O, T)" in out
    assert "equivalent (<=>, reported, not checked): scale(A, s)" in out
    assert "T: output float32 () = []" in out


def test_lookup_tables_run_and_bad_indices_are_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # random index tables stay inside the table they index
    for target in ("vta", "cuda-emu"):
        assert main(["run", "--tc", str(EXAMPLES / "lookup.tc"), "--entry", "embedding",
                     "--size", "V=4,D=2,B=2,L=3", "--target", target]) == 0
        assert "PASS" in capsys.readouterr().out
    # an index computed past the table is a named error, exit status 2
    f = _file(tmp_path, "def g(float(V) T, int32(N) I) -> (O) { O(n) = T(I(n) + V) }")
    for target in ("vta", "cuda-emu"):
        assert main(["run", "--tc", f, "--size", "V=4,N=3", "--target", target]) == 2
        err = capsys.readouterr().err
        assert err.startswith("vta: error: ") and "load from T" in err
        assert "Traceback" not in err
