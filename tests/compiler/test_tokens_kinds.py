"""coproc_sync reads a stream as kinds of instructions (``_Tokens._kinds``): the table of
conflicts gathered from the kinds' accesses (``_gather``) is the one read from every
instruction's own ``accesses``, with fewer kinds than instructions."""

from __future__ import annotations

import numpy as np
from _vta_helpers import hw, lowered, run_until

from vta.compiler.accel.passes._common import flat_stream
from vta.compiler.accel.passes.coproc_sync import _gather, _Tokens, accesses, conflicts
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.isa import module_of


def test_gather_reads_each_elements_rows_of_its_kind() -> None:
    table = np.arange(12).reshape(6, 2)  # kind 0: rows 0-1, kind 1: row 2, kind 2: rows 3-5
    start, size = np.array([0, 2, 3]), np.array([2, 1, 3])
    kind = np.array([2, 0, 0, 1, 2])
    got = _gather(table, start, kind, size[kind])
    expected = np.concatenate([table[start[k]:start[k] + size[k]] for k in kind])
    assert (got == expected).all()
    assert _gather(table, start, kind[:0], size[kind[:0]]).shape == (0, 2)


def test_the_table_of_kinds_is_that_of_every_instruction() -> None:
    spec = Conv2dSpec(n=1, ic=32, h=12, w=6, oc=32, kh=3, kw=3, stride=1, pad=1)
    flat = flat_stream(run_until(lowered(spec), "drain_tail"))
    assert flat is not None
    insns = flat[0]
    for changes in ({}, {"alu.separate_pipeline": True, "alu.acc_banks": 2}):
        h = hw("pynq").with_changes(**changes)
        tokens = _Tokens(h)
        rows, table = tokens._table(insns)
        mods = [module_of(x.insn, h) for x in insns]
        assert rows.tolist() == [int(m) for m in mods]
        each = [(int(m), accesses(x, h)) for m, x in zip(mods, insns, strict=True)]
        assert (table == conflicts(each, tokens.depth, len(tokens.row))).all()
        assert 0 < len(tokens.kinds) < len(insns)
