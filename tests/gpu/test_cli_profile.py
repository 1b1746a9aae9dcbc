"""``vta run --target cuda-emu --gpu-schedule mma --profile``: the task-mapping kernels from the
command line, with the emulator's counters printed; ``--profile`` on a GPU target is a named
error (exit 2)."""

from __future__ import annotations

import pytest

from vta import cli


@pytest.mark.parametrize("workload", ["resnet18:C10", "matmul"])
def test_profile_prints_the_counters(workload: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli.main(["run", "--target", "cuda-emu", "--gpu-schedule", "mma", "--profile",
                   workload])
    out = capsys.readouterr().out
    assert rc == 0 and "PASS" in out
    assert "bank conflicts 0;" in out and "(1.00x the minimum)" in out
    for kind in ("cp.async", "ldmatrix", "mma.sync", "bar.sync"):
        assert kind in out


def test_profile_of_a_wmma_schedule(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "--target", "cuda-emu", "--profile", "resnet18:C10"]) == 0
    out = capsys.readouterr().out
    assert "wmma.mma" in out and "PASS" in out


def test_profile_needs_the_emulator(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "--target", "cuda", "--profile", "matmul"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vta: error:") and "--target cuda-emu" in err
