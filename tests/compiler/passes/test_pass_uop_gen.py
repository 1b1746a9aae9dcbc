"""uop_gen: each ``ComputeNest`` becomes a ``ComputeInsn``: loops folded into iter_out/iter_in
or enumerated as micro-ops, whichever the hardware's timing makes faster."""

import math

from _accel_ir import PYNQ

from vta.compiler.accel.passes import uop_gen
from vta.compiler.accel.passes.uop_gen import generate_uops
from vta.compiler.accel.vta_ir import ComputeInsn, ComputeNest, Offsets, UopTable
from vta.compiler.ir import expr as E
from vta.compiler.ir.builder import buf, func, loop, seq
from vta.compiler.ir.structural import assert_structural_equal
from vta.config import HwConfig
from vta.isa import AluOp
from vta.isa.builtins import ALU, GEMM
from vta.isa.defs import instance

C = buf("c_acc", (8, 1, 16), "int32", "acc")
A = buf("a_inp", (8, 1, 16), "int8", "inp")
W = buf("w_wgt", (4, 16, 16), "int8", "wgt")
Z = E.IntImm(0)


def test_chisel_timing_folds_both_loops_into_one_micro_op() -> None:
    """On VTA's Chisel design folding costs nothing: the reduction over 4 weight blocks is
    iter_out (dst and src factor 0, wgt 1), the 8 rows iter_in (dst and src 1): 1 micro-op."""
    k, x = E.Var("k"), E.Var("x")
    before = func("f", [], ComputeNest(GEMM, False, ((k, 4), (x, 8)), ("dst", "src", "wgt"),
                                       (x, x, k), (), (C, A, W)))
    table = UopTable((Z, Z, Z), Offsets(((0, 0, 0),)))
    expected = func("f", [], ComputeInsn(GEMM, False, table, 4, 8,
                                         (("dst", 0, 1), ("src", 0, 1), ("wgt", 1, 0))))
    assert_structural_equal(generate_uops(before, HwConfig.load("pynq_tsim")), expected)


def test_hls_timing_enumerates_a_short_loop_as_micro_ops() -> None:
    """On VTA's HLS design each folded loop entry refills the pipeline: two rows are two
    micro-ops (the immediate form's src is the dst), the base moving with the tile loop."""
    x = E.Var("x")
    params = (("imm", 8), ("use_imm", True))
    before = func("f", [], loop(3, lambda t: ComputeNest(ALU[AluOp.SHR], False, ((x, 2),),
                                                         ("dst",), (t * 2 + x,), params, (C,))))

    def insn(t: E.Var) -> ComputeInsn:
        table = UopTable((t * 2, t * 2, Z), Offsets(((0, 0, 0), (1, 1, 0))))
        return ComputeInsn(ALU[AluOp.SHR], False, table, 1, 1, (("dst", 0, 0), ("src", 0, 0)),
                           params)

    expected = func("f", [], loop(3, insn))
    assert_structural_equal(generate_uops(before, PYNQ), expected)


def test_nests_of_one_shape_share_the_choice_and_the_offsets() -> None:
    """Two nests of the same instruction over loops of the same extents and coefficients (an
    epilogue's instructions, a kernel's candidates) are folded once (``_nest_choice``'s memo)
    and share one offsets tuple; each keeps its own variables."""
    def nest(_t: E.Var) -> ComputeNest:
        x = E.Var("x")
        return ComputeNest(ALU[AluOp.SHR], False, ((x, 2),), ("dst",), (x,),
                           (("imm", 8), ("use_imm", True)), (C,))

    uop_gen._nest_choice.cache_clear()
    got = generate_uops(func("f", [], seq(loop(1, nest), loop(1, nest))), PYNQ)
    first, second = (s.body for s in got.body.stmts)
    assert uop_gen._nest_choice.cache_info().hits == 1
    assert first.uops.offsets is second.uops.offsets
    assert_structural_equal(first, second)


def test_scores_peel_only_where_the_loops_left_do_not_fit(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Scoring a folding asks ``_peel`` only when the loops it leaves hold more micro-ops than
    the buffer; the scores are those of peeling every option (which peels nothing where they
    fit)."""
    v = E.Var("v")
    merged = [(v, 4, (8, 8, 0)), (v, 8, (1, 1, 0)), (v, 3, (0, 0, 1))]
    cost = (lambda o, i, n: float(o * i * (n + 5)), lambda n: float(n), 2)
    args = ((11, 11, 10), 4, 16, True, (1 << 14) - 1, cost)
    real = uop_gen._peel
    asked: list[int] = []

    def counted(rem, ext, red, max_uops):  # type: ignore[no-untyped-def]
        asked.append(math.prod(ext[k] for k in rem))
        return real(rem, ext, red, max_uops)
    monkeypatch.setattr(uop_gen, "_peel", counted)
    got = uop_gen._choose(merged, *args)
    assert asked and all(n > 16 for n in asked)

    ref = []  # every option's score with its loops peeled by ``_peel``
    for _score, fo, fi, _m in got:
        rem = [k for k in range(3) if k not in (fo, fi)]
        kept, outer = real(rem, [lp[1] for lp in merged], [lp[2][0] == 0 for lp in merged], 16)
        n_uops, copies = math.prod(merged[k][1] for k in kept), math.prod(
            merged[k][1] for k in outer)
        n_o = merged[fo][1] if fo is not None else 1
        n_i = merged[fi][1] if fi is not None else 1
        ref.append(-(2 * copies * cost[0](n_o, n_i, n_uops) + cost[1](n_uops * copies)))
    assert [s[1] for s, *_ in got] == ref


def test_uop_load_asks_the_shared_memo_once_per_count(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A nest's foldings ask the micro-op load's cycles of a few counts many times: each count
    goes to the memo shared across nests (keyed by the config, hashed in Python) once."""
    asked: list[int] = []

    def cycles(hw: HwConfig, n: int) -> float:
        asked.append(n)
        return float(n)

    monkeypatch.setattr(uop_gen, "_uop_load_cycles", cycles)
    load = uop_gen._uop_load.__wrapped__(PYNQ)  # a function of its own (not the config's)
    assert [load(n) for n in (4, 4, 8, 4)] == [4.0, 4.0, 8.0, 4.0]
    assert asked == [4, 8]


def test_nests_of_one_instruction_share_its_timings() -> None:
    """The timing functions are made once per instruction and config, so a second nest (an
    equal prototype, another object) does not ask the definition's duration of a folding
    again, and the micro-op loads' per-count memo is the config's."""
    uop_gen._insn_cycles.cache_clear()
    first = uop_gen._insn_cycles(GEMM, instance(GEMM, reset=False), PYNQ)
    second = uop_gen._insn_cycles(GEMM, instance(GEMM, reset=False), PYNQ)
    assert second is first
    want = GEMM.duration(instance(GEMM, reset=False, iter_out=2, iter_in=3, uop_end=4), PYNQ)
    assert first(2, 3, 4) == second(2, 3, 4) == want
    info = first.cache_info()  # type: ignore[attr-defined]
    assert (info.misses, info.hits) == (1, 1)
    assert uop_gen._uop_load(PYNQ) is uop_gen._uop_load(PYNQ)
