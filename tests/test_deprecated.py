"""Names renamed by the package layout, kept for one release: each still works and warns (or,
for a pass name, is still accepted)."""

from __future__ import annotations

import pytest

from vta import cli
from vta.compiler.ops.workloads import resolve
from vta.config import HwConfig


def test_the_old_runner_names_run_with_a_warning() -> None:
    from vta.runner import compile_workload, run_workload

    w, hw = resolve("matmul", [16, 16, 16]), HwConfig.load("pynq")
    with pytest.warns(DeprecationWarning, match="vta.run.layer.run_layer"):
        r = run_workload(w, hw)
    assert r.passed
    with pytest.warns(DeprecationWarning, match="compile_layer"):
        assert compile_workload(w, hw).program.instructions == r.compiled.program.instructions


def test_intrinsics_module_is_now_unit() -> None:
    import vta.intrinsics as vi

    with pytest.warns(DeprecationWarning, match="now vta.intrinsics.Unit"):
        assert vi.Module is vi.Unit


def test_dump_ir_takes_the_old_pass_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "matmul", "16", "16", "16", "--dump-ir", "bound_inference"]) == 0
    assert "# after region_inference" in capsys.readouterr().out
