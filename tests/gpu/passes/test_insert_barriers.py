"""insert_barriers: ``__syncthreads`` between shared-memory accesses of different threads."""

import pytest

from vta.compiler.ir import stmt as S
from vta.compiler.ir.builder import alloc, buf, func, let, loop, seq
from vta.compiler.ir.structural import assert_structural_equal
from vta.gpu.dialect import ThreadIndex
from vta.gpu.passes.insert_barriers import GpuLoweringError, insert_barriers

A = buf("A", (128,), "float32")
B = buf("B", (128,), "float32")
SH = buf("s", (32,), "float32", "shared")
TX = ThreadIndex("threadIdx.x")


def _kernel(body: object) -> S.PrimFunc:
    return func("k", [A, B], let(TX, lambda tx: alloc(SH, body(tx)), name="tx"))


def test_read_after_write_and_the_loop_carried_reuse_get_barriers() -> None:
    """Each thread reads what another wrote (RAW: a barrier before the read); the next
    iteration overwrites what others still read (WAR: a barrier at the end of the body)."""
    def body(barriers: bool) -> object:
        def step(tx: object, k: object) -> S.Stmt:
            write = SH.store(A.load(k * 32 + tx), tx)
            read = B.store(SH.load(31 - tx), k * 32 + tx)
            return seq(write, S.Barrier(), read, S.Barrier()) if barriers else seq(write, read)
        return lambda tx: loop(4, lambda k: step(tx, k))

    assert_structural_equal(insert_barriers(_kernel(body(False))), _kernel(body(True)))


def test_an_index_is_not_taken_as_thread_private() -> None:
    """Only first indices that differ by a constant (or double-buffer versions) are known
    disjoint; the same index in another thread's statement is not assumed private."""
    f = _kernel(lambda tx: seq(SH.store(A.load(tx), tx), B.store(SH.load(tx) * 2.0, tx)))
    expected = _kernel(lambda tx: seq(SH.store(A.load(tx), tx), S.Barrier(),
                                      B.store(SH.load(tx) * 2.0, tx)))
    assert_structural_equal(insert_barriers(f), expected)


def test_a_barrier_under_a_thread_dependent_condition_is_refused() -> None:
    f = _kernel(lambda tx: S.IfThenElse(tx < 16, seq(SH.store(A.load(tx), tx),
                                                      B.store(SH.load(31 - tx), tx))))
    with pytest.raises(GpuLoweringError, match=r"k: a barrier would sit under the "
                                               r"thread-dependent condition tx < 16"):
        insert_barriers(f)
