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


def test_the_renamed_layer_inputs_x_and_w_still_work() -> None:
    """The issue-25 case: renaming the runner's inputs (x, w -> data, kernel) broke user code
    that read or passed the old names."""
    import numpy as np

    from vta.run.layer import layer_inputs, layer_reference

    spec = resolve("matmul", [16, 16, 16]).spec
    user = layer_inputs(spec, None, 0)
    with pytest.warns(DeprecationWarning, match="'x' is now 'data'"):
        assert user["x"] is user["data"]
    with pytest.warns(DeprecationWarning, match="'w' is now 'kernel'"):
        assert user["w"] is user["kernel"]
    with pytest.raises(KeyError):
        user["nope"]
    want, _ = layer_reference(spec, user, None)
    with pytest.warns(DeprecationWarning, match="is now 'data'|is now 'kernel'"):
        old, _ = layer_reference(spec, {"x": user["data"], "w": user["kernel"]}, None)
    assert np.array_equal(old, want)
