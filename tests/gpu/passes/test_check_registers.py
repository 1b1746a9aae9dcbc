"""check_registers: register tiles counted against the per-thread register file."""

import pytest

from vta.compiler.ir.builder import alloc, buf, func
from vta.compiler.ir.structural import assert_structural_equal
from vta.gpu.passes.check_registers import REGISTER_OVERHEAD, GpuLoweringError, check_registers

A = buf("A", (4,), "float32")


def test_estimate_is_recorded() -> None:
    """Tiles (64 + 8 halves = 68 registers) plus the ptxas-calibrated overhead."""
    acc = buf("acc", (64,), "float32", "local")
    half = buf("h", (8,), "float16", "local")  # two halves a register
    before = func("k", [A], alloc(acc, alloc(half, A.store(0.0, 0))))
    expected = func("k", [A], before.body, registers=68 + REGISTER_OVERHEAD)
    assert_structural_equal(check_registers(before), expected)


def test_tiles_past_the_register_file_are_refused_naming_them() -> None:
    big = buf("acc", (256,), "float32", "local")
    f = func("k", [A], alloc(big, A.store(0.0, 0)))
    with pytest.raises(GpuLoweringError, match=r"k: register tiles acc\[256\] need 256 registers "
                                               r"per thread \(limit 255 on sm_80\)"):
        check_registers(f)
