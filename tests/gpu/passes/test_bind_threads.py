"""bind_threads: thread-bound loops become thread-index lets (guarded where shorter than the
launch) and the launch shape is recorded."""

import pytest

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.builder import buf, func, let, loop, seq
from vta.compiler.ir.structural import assert_structural_equal
from vta.gpu.dialect import LaunchConfig, ThreadIndex
from vta.gpu.passes.bind_threads import GpuLoweringError, bind_threads

A = buf("A", (128,), "float32")
B = buf("B", (128,), "float32")
T = S.ForKind.THREAD_BINDING


def test_loops_become_lets_with_a_guard_and_the_launch_shape() -> None:
    before = func("k", [A, B], loop(4, lambda bx: seq(
        loop(32, lambda tx: B.store(A.load(bx * 32 + tx), bx * 32 + tx), kind=T,
             thread="threadIdx.x"),
        loop(16, lambda tx: B.store(0.0, bx * 32 + tx), kind=T, thread="threadIdx.x")),
        kind=T, thread="blockIdx.x"))
    tx_ = ThreadIndex("threadIdx.x")
    expected = func("k", [A, B], let(ThreadIndex("blockIdx.x"), lambda bx: seq(
        let(tx_, lambda tx: B.store(A.load(bx * 32 + tx), bx * 32 + tx)),
        let(tx_, lambda tx: S.IfThenElse(E.Cmp("<", tx_, E.IntImm(16)),
                                         B.store(0.0, bx * 32 + tx))))),
        launch=LaunchConfig((4, 1, 1), (32, 1, 1), 0))
    assert_structural_equal(bind_threads(before), expected)


def test_too_many_threads_are_refused_naming_the_loops() -> None:
    f = func("k", [A], loop(64, lambda ty: loop(32, lambda tx: A.store(0.0, tx), kind=T,
                                                 thread="threadIdx.x", name="tx"),
                            kind=T, thread="threadIdx.y", name="ty"))
    with pytest.raises(GpuLoweringError, match=r"k: 32x64x1 = 2048 threads per block exceed the "
                                               r"CUDA limit of 1024 on sm_80 \(threadIdx.x = "
                                               r"32 \(loop tx of stage \?\); threadIdx.y = 64"):
        bind_threads(f)
