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
    (MLP.replace("W(n, m)", "W(n, m"), [], "f.tc:4:3: expected',' or ')'"),
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
