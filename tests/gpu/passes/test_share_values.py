"""share_values: each value a statement reads twice is bound to a local once (before/expected),
index arithmetic and guarded values stay inline, the pass is idempotent, and a chain of fused
stages renders and emulates in size linear in its stages (the tree would double per stage)."""

import itertools
from collections.abc import Callable

import numpy as np

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.builder import buf, func, let, loop
from vta.compiler.ir.structural import assert_structural_equal
from vta.compiler.ops.chain import even_round_stage, shift_add_channel_stage
from vta.gpu.cuda import render_cuda
from vta.gpu.dialect import LAUNCH, LaunchConfig, ThreadIndex
from vta.gpu.emulator import Emulator
from vta.gpu.kernels.common import finish
from vta.gpu.passes.share_values import share_stmt, share_values
from vta.gpu.target import GPU_TARGET, gpu_target

ACC = buf("acc", (64,), "int32")
BIAS = buf("bias", (64,), "int32")
OUT = buf("out", (64,), "int32")
MASK = buf("mask", (64,), "int32")


def _x(i: E.Expr) -> E.Expr:
    return ACC.load(i) + BIAS.load(i)


def test_a_shared_value_is_bound_once_before_its_statement() -> None:
    def body(x: Callable[[E.Expr], E.Expr]) -> S.Stmt:
        return loop(64, lambda i: OUT.store(((x(i) << 2) + x(i)) >> 1, i))

    # two separately built, structurally equal copies of acc[i] + bias[i] are one value
    before = func("k", [ACC, BIAS, OUT], body(_x))
    expected = func("k", [ACC, BIAS, OUT], loop(64, lambda i: let(
        _x(i), lambda t: OUT.store(((t << 2) + t) >> 1, i))))
    after = share_values(before)
    assert_structural_equal(after, expected)
    assert share_values(after) is after  # idempotent: nothing shared is left


def test_values_are_bound_in_dependency_order() -> None:
    def body(i: E.Expr) -> S.Stmt:
        x = _x(i)
        y = E.max_(x + 7, x) >> 3  # x twice; y twice
        return OUT.store(y * y, i)

    expected = func("k", [ACC, BIAS, OUT], loop(64, lambda i: let(
        _x(i), lambda t0: let(E.max_(t0 + 7, t0) >> 3, lambda t1: OUT.store(t1 * t1, i)))))
    assert_structural_equal(share_values(func("k", [ACC, BIAS, OUT], loop(64, body))), expected)


def test_index_arithmetic_and_single_reads_stay_inline() -> None:
    def body(i: E.Expr) -> S.Stmt:
        j = (i * 4 + 1) % 64  # shared, but no load: address arithmetic
        return OUT.store(ACC.load(j) + BIAS.load(j), j)

    before = func("k", [ACC, BIAS, OUT], loop(16, body))
    assert share_values(before) is before


def test_a_value_read_only_under_a_guard_is_not_hoisted() -> None:
    def guarded(i: E.Expr) -> S.Stmt:
        x = ACC.load(i + 60) + 1  # out of bounds where the guard is false
        return OUT.store(E.select(i < 4, x * x, 0), i)

    before = func("k", [ACC, OUT], loop(64, guarded))
    assert share_values(before) is before

    def both(i: E.Expr) -> S.Stmt:
        x = _x(i)
        return OUT.store(E.select(MASK.load(i) > 0, x * 3, 0) + x, i)

    expected = func("k", [ACC, BIAS, MASK, OUT], loop(64, lambda i: let(
        _x(i), lambda t: OUT.store(E.select(MASK.load(i) > 0, t * 3, 0) + t, i))))
    assert_structural_equal(share_values(func("k", [ACC, BIAS, MASK, OUT], loop(64, both))),
                            expected)


def test_conditions_and_let_values_are_shared_too() -> None:
    def body(i: E.Expr) -> S.Stmt:
        x = _x(i)
        return let(x * x, lambda y: S.IfThenElse(E.And(x > 0, x < 9), OUT.store(y, i)))

    expected = func("k", [ACC, BIAS, OUT], loop(64, lambda i: let(
        _x(i), lambda t0: let(t0 * t0, lambda y: let(
            _x(i), lambda t1: S.IfThenElse(E.And(t1 > 0, t1 < 9), OUT.store(y, i)))))))
    assert_structural_equal(share_values(func("k", [ACC, BIAS, OUT], loop(64, body))), expected)


# ---------------------------------------------------------------- a chain of fused stages

SHIFTS = tuple(buf(f"d{k}", (64,), "int32") for k in range(3))


def _chain(x: E.Expr, c: E.Expr, stages: int) -> E.Expr:
    """``stages`` rounds of a 3-term per-channel shift-add requantize then a round half to
    even: each reads the running value several times (the stage constructors share it)."""
    sa = shift_add_channel_stage((0, 1, 2), 0, 2, 0, -100000, 100000)
    ev = even_round_stage(1, -100000, 100000)
    for _ in range(stages):
        x = ev.fn(sa.fn(x, *[d.load(c) for d in SHIFTS]))
    return x


def _kernel(stages: int, shared: bool) -> S.PrimFunc:
    params = (ACC, *SHIFTS, OUT)
    if shared:
        return finish(f"chain{stages}", params,
                      lambda tid, bx, by: OUT.store(_chain(ACC.load(tid), tid, stages), tid),
                      (1, 1), 64)
    tid = E.Var("tid")  # the same frame, without the pass: the tree as written
    body = S.LetStmt(tid, ThreadIndex("threadIdx.x"),
                     OUT.store(_chain(ACC.load(tid), tid, stages), tid))
    return S.PrimFunc(f"chain{stages}", params, body, (
        (S.TARGET, "cuda"), (GPU_TARGET, gpu_target(None)),
        (LAUNCH, LaunchConfig((1, 1, 1), (64, 1, 1), 0))))


def _run(f: S.PrimFunc) -> np.ndarray:
    rng = np.random.default_rng(3)
    acc = rng.integers(-2**20, 2**20, 64, dtype=np.int32)
    shifts = [(-rng.integers(0, 4, 64)).astype(np.int32) for _ in SHIFTS]
    out = np.zeros(64, np.int32)
    Emulator(f).run(acc, *shifts, out)
    return out


def test_a_stage_chain_emulates_the_same_bits_bound_as_inline() -> None:
    assert np.array_equal(_run(_kernel(3, True)), _run(_kernel(3, False)))


def test_the_source_grows_linearly_with_the_stages(nvcc_check) -> None:
    sizes = [len(render_cuda(_kernel(n, True)).source) for n in range(1, 7)]
    steps = [b - a for a, b in itertools.pairwise(sizes)]
    # about a constant per stage (the locals' names grow a digit, the first stage folds)
    assert max(steps) < 400 and max(steps) <= 1.5 * min(steps), sizes
    tree = [len(render_cuda(_kernel(n, False)).source) for n in (2, 3)]
    assert tree[1] - tree[0] > 4 * max(steps), tree  # the tree as printed before
    nvcc_check([render_cuda(_kernel(6, True)).source])


def test_share_stmt_leaves_statements_without_expressions() -> None:
    s = S.seq(S.Barrier(), S.Evaluate(E.IntImm(0)))
    assert share_stmt(s) is s
