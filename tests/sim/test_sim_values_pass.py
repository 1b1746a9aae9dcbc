"""The values pass's shortcuts (round 13 of issue 22): the executor's one loop over the
completed instructions (``_Executor.run_all``), LOADs noted only in the GEMM shadows that
exist (``FastGemm.refresh``), a DRAM view of rows reaching the image's end without
``as_strided`` (``dram_rows``), and a LOAD issued again copied by the views found on its
first issue (``kernels.load_copy``). Each gives what the plain way gives."""

from __future__ import annotations

import numpy as np
import pytest

from tests.sim.test_sim_gemm_paths import gemm_program
from vta.config import HwConfig
from vta.isa import Uop
from vta.sim import random_inputs, run_reference, simulate
from vta.sim.dram import Dram
from vta.sim.gemm import FastGemm
from vta.sim.kernels import Ctx, Sram, dram_rows
from vta.sim.machine import _Executor


def _conv_program(hw: HwConfig):
    uops = [Uop(dst=c * 64, src=t, wgt=c * 3 + t) for c in range(2) for t in range(3)]
    return gemm_program(hw, uops, 2, 4, (8, 1, 8, 1, 0, 0), 4 * 64)


def test_the_values_pass_runs_in_the_executors_loop(pynq: HwConfig, monkeypatch) -> None:
    """``Machine._values`` hands the whole order to ``_Executor.run_all`` (no per-instruction
    ``__call__``), and the accumulators stay the reference interpreter's; ``__call__`` of one
    instruction still executes it."""
    program = _conv_program(pynq)
    inputs = random_inputs(program, pynq, 0)

    def refused(self, *args) -> None:
        raise AssertionError("the values pass called the executor per instruction")

    monkeypatch.setattr(_Executor, "__call__", refused)
    got = simulate(program, pynq, inputs).outputs["C"]
    np.testing.assert_array_equal(got, run_reference(program, pynq, inputs)["C"])
    monkeypatch.undo()
    ex = _Executor(program, pynq, inputs)
    load = program.instructions[1]  # LOAD inp: written into the scratchpad
    from vta.sim.machine import _static
    ex(1, load, _static(program, pynq)[1])
    assert ex.sram.data["inp"].any()


def test_a_load_is_noted_only_in_the_shadows_made(pynq: HwConfig) -> None:
    """Before any product reads a shadow, LOADs leave no list of entries to mirror (the shadow
    made later copies the whole SRAM); once one is made, later LOADs are listed for it alone
    and mirrored on its next read."""
    sram = Sram(pynq)
    g = FastGemm(sram, True, g_defn())
    g.refresh(sram, "inp", 0, 4)
    assert all(not v for v in g._stale.values())
    rng = np.random.default_rng(1)
    sram.data["inp"][:8] = rng.integers(-128, 128, sram.data["inp"][:8].shape)
    shadow = g._sync("inp", False)
    np.testing.assert_array_equal(shadow, sram.data["inp"])
    sram.data["inp"][2:5] = rng.integers(-128, 128, sram.data["inp"][2:5].shape)
    g.refresh(sram, "inp", 2, 5)
    assert g._stale["inp", False] == [(2, 5)] and g._stale["inp", True] == []
    np.testing.assert_array_equal(g._sync("inp", False), sram.data["inp"])


def g_defn():
    from vta.isa.builtins import GEMM
    return GEMM


@pytest.mark.parametrize("rows,cols,stride", [(3, 2, 5), (4, 3, 3), (2, 4, 2), (5, 1, 7)])
def test_rows_reaching_the_images_end_are_a_writable_view(pynq: HwConfig, rows: int, cols: int,
                                                          stride: int) -> None:
    """``dram_rows`` of rows whose last stride would pass the image's end (the last row ends
    at its last entry; a stride below the row's length overlaps them): the bytes
    ``as_strided`` names, a view that writes through."""
    program = _conv_program(pynq)
    dram = Dram(program, pynq)
    eb = dram.elem_bytes["out"]
    dram.buf[...] = np.arange(dram.buf.size, dtype=np.uint64).astype(np.uint8)
    base = dram.buf.size // eb - ((rows - 1) * stride + cols)
    ctx = Ctx(0, program.instructions[0], program)
    got = dram_rows(dram, ctx, "out", base, rows, cols, stride)
    want = np.lib.stride_tricks.as_strided(dram.buf[base * eb:], (rows, cols * eb),
                                           (stride * eb, 1))
    np.testing.assert_array_equal(got, want)
    assert np.shares_memory(got, dram.buf) and got.flags.writeable
    got[-1, -1] = 17
    assert dram.buf[(base + (rows - 1) * stride + cols) * eb - 1] == 17


def test_a_reissued_load_is_its_copy_again(monkeypatch) -> None:
    """A LOAD object issued again on the same image reuses its ``load_copy`` (found once),
    and writes DRAM's bytes as they are now (a STORE may have changed them), the same
    entries as a fresh scratchpad's LOAD; on another image it is found again."""
    from vta.isa import Load, MemType, ProgramBuilder
    from vta.sim import kernels
    from vta.sim.kernels import exec_load
    from vta.testing import small_hw

    hw = small_hw(batch=1, block=4, depth=128)
    b = ProgramBuilder(hw)
    b.alloc("D", "inp", 64)
    program = b.build()
    found = []
    real = kernels.load_copy
    monkeypatch.setattr(kernels, "load_copy", lambda *a: found.append(1) or real(*a))
    insn = Load(MemType.INP, 3, 2, 3, 4, 6, 1, 0, 1, 1)  # padded, rows apart
    ctx = Ctx(0, insn, program)
    sram = Sram(hw)
    rng = np.random.default_rng(3)
    images = [Dram(program, hw), Dram(program, hw)]
    for k, dram in enumerate((images[0], images[0], images[1])):
        dram.write_all(random_inputs(program, hw, k))
        sram.data["inp"][...] = rng.integers(-100, 100, sram.data["inp"].shape)
        fresh = Sram(hw)
        fresh.data["inp"][...] = sram.data["inp"]
        assert exec_load(sram, dram, insn, ctx) == exec_load(fresh, dram, insn, ctx)
        np.testing.assert_array_equal(sram.data["inp"], fresh.data["inp"])
    # the first image: found for both scratchpads; the same image again: found for the
    # fresh one only; a new image: found for both
    assert len(found) == 2 + 1 + 2


@pytest.mark.parametrize("n,applied", [(1, 1), (5, 1), (21, 1), (22, 2), (45, 3)])
def test_stacked_sums_wait_for_the_next_reader_and_stay_exact(pynq: HwConfig, monkeypatch,
                                                              n: int, applied: int) -> None:
    """``n`` accumulating GEMMs of three taps (``m`` = 3) onto one acc run, then a STORE: the
    executor's GEMM sums their float32 products and adds them to acc when the STORE comes
    (``FastGemm.flush``), a new sum begun where one more would pass float32's exact range
    (pynq: 63 ops of 16 int8 products, 21 GEMMs); the outputs stay the reference
    interpreter's (full-range inputs: sums near the bound)."""
    from dataclasses import replace

    from _sim_helpers import counting_calls

    from vta.isa import Deps

    calls = counting_calls(monkeypatch, FastGemm, ("_apply", "_defer"))
    # entries 0..7 (one run of acc), each reading taps t of pixel 8 o + i
    uops = [Uop(dst=0, src=t, wgt=t) for t in range(3)]
    base = gemm_program(pynq, uops, 2, 4, (4, 1, 8, 1, 0, 0), 8)
    insns = list(base.instructions)
    g = insns[4]
    insns[4:5] = [replace(g, deps=Deps())] * (n - 1) + [g]
    program = replace(base, instructions=tuple(insns))
    inputs = random_inputs(program, pynq, n)
    got = simulate(program, pynq, inputs).outputs["C"]
    np.testing.assert_array_equal(got, run_reference(program, pynq, inputs)["C"])
    assert calls == {"_defer": n, "_apply": applied}


def test_a_gemm_run_alone_adds_at_once() -> None:
    """``FastGemm.run`` outside the executor (``defers`` off, the default) adds each product
    to acc before it returns: nothing pending."""
    from vta.isa.builtins import GEMM
    from vta.testing import small_hw

    g = FastGemm(Sram(small_hw()), True, GEMM)
    assert g.defers is False and g.pending == {}
