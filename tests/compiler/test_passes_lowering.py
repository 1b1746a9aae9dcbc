"""inject_dma, tensorize, lower_alu, uop_gen: before/after structure."""

from _vta_helpers import lowered, nodes, run_until

from vta.compiler.accel.passes._common import evaluate
from vta.compiler.accel.passes.uop_gen import fold_loops
from vta.compiler.accel.schedules.default import ConvSchedule
from vta.compiler.accel.vta_ir import SRAM, ComputeInsn, ComputeNest, DmaLoad, DmaStore
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ops.conv2d import Conv2dSpec

GEMM_NAME = "GEMM"


def _stage(f: S.PrimFunc, name: str) -> S.Stmt:
    from vta.compiler.accel.passes._common import stages

    return next(s for s in stages(f.body) if s.value == name).body


def test_inject_dma_input_copy_becomes_padded_2d_loads() -> None:
    before = run_until(lowered(), "scratchpad_alloc")
    assert not nodes(before, DmaLoad)
    f = run_until(lowered(), "inject_dma")
    inp = _stage(f, "data_pad_inp")
    # one DMA per input-channel block (3-D copy split into 2-D DMAs)
    assert isinstance(inp, S.For) and inp.extent == E.IntImm(2)
    dma = inp.body
    assert isinstance(dma, DmaLoad) and dma.mem == "inp"
    # first row tile (oh_o = 0, vt = 0): one row and one column of zero padding at the top/left
    env = {v: 0 for v in E.free_vars(dma)}
    assert [evaluate(x, env) for x in (dma.pad_y0, dma.pad_x0, dma.pad_x1)] == [1, 1, 1]
    assert evaluate(dma.y_size, env) == 4 and evaluate(dma.x_size, env) == 6
    assert evaluate(dma.x_stride, env) == 6
    # weights: one contiguous 2-D DMA; the out copy: a STORE
    assert isinstance(_stage(f, "kernel_wgt"), DmaLoad)
    assert nodes(f, DmaStore)


def test_tensorize_replaces_region_with_gemm_nest() -> None:
    f = run_until(lowered(), "tensorize")
    assert not any(isinstance(n, S.AttrStmt) and n.key is S.TENSORIZE for n in E.walk(f.body))
    gemms = [g for g in nodes(f, ComputeNest) if g.instruction.name == GEMM_NAME]
    reset = [g for g in gemms if g.reset]
    upd = [g for g in gemms if not g.reset]
    assert len(reset) == 1 and len(upd) == 1
    assert [n for _, n in upd[0].loops] == [2, 3, 6, 2, 3, 3]  # co y x ci r q
    before = run_until(lowered(), "inject_dma")
    region = [n for n in E.walk(before.body) if isinstance(n, S.AttrStmt) and n.key is S.TENSORIZE]
    assert len(region) == 1 and [lp.extent.value for lp in _loops(region[0].body)] == [1, 16, 16]


def _loops(s: S.Stmt) -> list[S.For]:
    out = []
    while isinstance(s, S.For):
        out.append(s)
        s = s.body
    return out


def test_lower_alu_epilogue_order() -> None:
    f = run_until(lowered(), "lower_alu")
    ops = [(a.instruction.name, dict(a.params).get("imm")) for a in nodes(f, ComputeNest)
           if a.instruction.name.startswith("ALU.")]
    assert ops == [("ALU.SHR", 8), ("ALU.ADD", None), ("ALU.MAX", 0), ("ALU.MIN", 127)]


def test_uop_gen_folds_big_loops() -> None:
    """Timed as VTA's Chisel design (one pipeline drain per instruction), folding costs nothing,
    so the fewest micro-ops win: x (6) and y (3) or a channel loop fold; the ALU's immediate
    forms are one micro-op over a folded loop."""
    f = run_until(lowered(name="pynq_tsim"), "uop_gen", name="pynq_tsim")
    insns = nodes(f, ComputeInsn)
    gemm = next(g for g in insns if g.instruction.name == GEMM_NAME and not g.reset)
    assert gemm.iter_out * gemm.iter_in * len(gemm.uops) == 2 * 3 * 6 * 2 * 9
    assert len(gemm.uops) <= 2 * 9 * 2 * 3
    alu = [a for a in insns if a.instruction.name.startswith("ALU.")]
    assert all(len(a.uops) == 1 for a in alu if dict(a.params)["use_imm"])  # one uop


def test_uop_gen_enumerates_where_each_loop_entry_fills_the_pipeline() -> None:
    """Timed as VTA's HLS design, every entry of the micro-op loop pays the fill: an ALU
    instruction over the tile's 2 x 3 x 6 = 36 entries costs ``36 * (2 + 4) + 2`` cycles as one
    micro-op looped 36 times but ``36 * 2 + 4 + 2`` as 36 micro-ops (2: the compute call's
    control cycles); the compiler enumerates them (or 18 twice, ``2 * (18 * 2 + 4) + 2``, when
    loading 18 fewer micro-ops pays for the fill: the same tensor ops, a fraction of the
    cycles)."""
    from _vta_helpers import hw

    from vta.isa import by_name
    from vta.isa.defs import instance

    pynq = hw("pynq")
    f = run_until(lowered(), "uop_gen")
    alu = [a for a in nodes(f, ComputeInsn) if a.instruction.name.startswith("ALU.")
           and dict(a.params)["use_imm"]]
    assert alu and all(a.iter_out * a.iter_in * len(a.uops) == 2 * 3 * 6 for a in alu)
    assert all(len(a.uops) >= 18 and a.iter_out * a.iter_in <= 2 for a in alu)
    shr = by_name("ALU.SHR")
    looped = instance(shr, use_imm=True, iter_out=1, iter_in=36, uop_end=1)
    listed = instance(shr, use_imm=True, iter_out=1, iter_in=1, uop_end=36)
    assert (shr.duration(looped, pynq), shr.duration(listed, pynq)) == (36 * 6 + 2, 36 * 2 + 6)


def test_fold_loops_avoids_hazards_and_merges() -> None:
    a, b, c = E.Var("a"), E.Var("b"), E.Var("c")
    # a (4) and b (8) compose in every field (a = 8 * b): they merge into one loop of 32
    fo = fold_loops([(a, 4), (b, 8), (c, 3)], [(8, 8, 0), (1, 1, 0), (0, 0, 1)], (11, 11, 10),
                    4, 100, True)
    exts = sorted([fo.fo[0], fo.fi[0]])
    assert exts == [3, 32] and fo.uop_loops == []
    # a reduction as iter_in with a single uop would revisit an acc entry every op: the
    # reduction goes outside, the spatial loop inside
    fo = fold_loops([(a, 4), (c, 50)], [(1, 1, 0), (0, 0, 1)], (11, 11, 10), 4, 100, True)
    assert (fo.fo[0], fo.fi[0]) == (50, 4) and fo.fi[1][0] == 1


def test_strided_1x1_lowering_has_no_padding() -> None:
    spec = Conv2dSpec(n=1, ic=16, h=8, w=8, oc=16, kh=1, kw=1, stride=2, pad=0)
    f = run_until(lowered(spec, ConvSchedule(1, 1, 2, 4, 1)), "inject_dma")
    for d in nodes(f, DmaLoad):
        env = {v: 0 for v in E.free_vars(d)}
        assert evaluate(d.pad_x0, env) == 0 and evaluate(d.pad_y0, env) == 0


def test_inject_dma_refuses_a_select_that_is_not_padding() -> None:
    import pytest

    from vta.compiler.accel.passes.inject_dma import inject_dma
    from vta.errors import CompileError

    g = S.Buffer("g", (8, 1, 16), "int8")
    o = S.Buffer("o", (8, 1, 16), "int8", "inp")
    y, b, i = E.Var("y"), E.Var("b"), E.Var("i")
    body = E.select(y < 5, g.load(y, b, i), E.const(0, "int8"))  # 5 is not g's extent
    nest = S.For(y, E.IntImm(0), E.IntImm(8), S.For(b, E.IntImm(0), E.IntImm(1), S.For(
        i, E.IntImm(0), E.IntImm(16), o.store(body, y, b, i))))
    f = S.PrimFunc("f", (g,), S.Allocate(o, S.AttrStmt(S.STAGE, "o", nest)),
                   ((SRAM, ((o, E.IntImm(0), 8),)),))
    with pytest.raises(CompileError, match="not a bound of g"):
        inject_dma(f, __import__("_vta_helpers").hw())
