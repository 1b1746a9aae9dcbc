"""virtual_thread, flatten, coproc_sync, emit: threads interleave, tokens balance."""

from collections import Counter

from _vta_helpers import hw, lowered, run_until

from vta.compiler import expr as E
from vta.compiler import stmt as S
from vta.compiler.passes.emit import emit_program
from vta.compiler.vta_ir import Insn
from vta.isa import Finish, Gemm, Load, MemType, Module, module_of, pops_of, pushes_of


def test_virtual_thread_removes_vthread_loops_and_tags_copies() -> None:
    before = run_until(lowered(), "uop_gen")
    assert any(isinstance(n, S.For) and n.kind is S.ForKind.VTHREAD for n in E.walk(before.body))
    f = run_until(lowered(), "virtual_thread")
    assert not any(isinstance(n, S.For) and n.kind is S.ForKind.VTHREAD for n in E.walk(f.body))
    tags = [n.value for n in E.walk(f.body) if isinstance(n, S.AttrStmt) and n.key == "vthread"]
    assert set(tags) == {0, 1}


def _insns(f: S.PrimFunc) -> list[Insn]:
    return [n for n in E.walk(f.body) if isinstance(n, Insn)]


def test_flatten_gives_concrete_stream_without_deps() -> None:
    f = run_until(lowered(), "flatten")
    xs = _insns(f)
    assert xs and all(not x.insn.deps for x in xs)
    # both threads' input tiles land in different SRAM regions
    bases = {x.insn.sram_base for x in xs if isinstance(x.insn, Load) and x.insn.mem is MemType.INP}
    assert any(b >= 80 for b in bases) and any(b < 80 for b in bases)


def test_tokens_balance_and_point_backwards() -> None:
    from vta.compiler.ops.conv2d import Conv2dSpec

    spec = Conv2dSpec(n=1, ic=32, h=12, w=6, oc=32, kh=3, kw=3, stride=1, pad=1)
    f = run_until(lowered(spec), "coproc_sync")
    xs = [x.insn for x in _insns(f)]
    pushes, pops = Counter(), Counter()
    for i in xs:
        for q in pushes_of(i):
            pushes[q] += 1
        for q in pops_of(i):
            pops[q] += 1
            # the k-th pop may only happen after at least k pushes were issued earlier
            assert pushes[q] >= pops[q]
    assert pushes == pops and pushes  # every push is popped, and there is overlap to sync
    assert pushes[(Module.LOAD, Module.COMPUTE)] and pushes[(Module.COMPUTE, Module.STORE)]
    assert pushes[(Module.COMPUTE, Module.LOAD)] and pushes[(Module.STORE, Module.COMPUTE)]


def test_emit_builds_program_with_uops_and_finish() -> None:
    f = run_until(lowered(), "coproc_sync")
    p = emit_program(f, hw())
    assert isinstance(p.instructions[-1], Finish)
    assert isinstance(p.instructions[0], Load) and p.instructions[0].mem is MemType.UOP
    assert [a.name for a in p.allocations] == ["data", "kernel", "bias", "res", "uops"]
    assert [a.kind for a in p.allocations] == ["inp", "wgt", "acc", "out", "uop"]
    n_uops = len(p.uops["uops"])
    for i in p.instructions:
        if isinstance(i, Gemm):
            assert 0 <= i.uop_bgn < i.uop_end <= n_uops
    assert all(module_of(i) in Module for i in p.instructions)
