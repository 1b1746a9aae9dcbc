"""virtual_thread, flatten, coproc_sync, emit: threads interleave, tokens balance."""

from collections import Counter

from _vta_helpers import hw, lowered, run_until
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vta.testing as vt
from vta.compiler.accel.passes.emit import emit_program
from vta.compiler.accel.vta_ir import VTHREAD, Insn
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ops.workloads import Workload
from vta.isa import Finish, Gemm, Load, MemType, Unit, module_of, pops_of, pushes_of
from vta.run.layer import run_layer
from vta.run.targets import AccelTarget


def test_virtual_thread_removes_vthread_loops_and_tags_copies() -> None:
    before = run_until(lowered(), "uop_gen")
    assert any(isinstance(n, S.For) and n.kind is S.ForKind.VTHREAD for n in E.walk(before.body))
    f = run_until(lowered(), "virtual_thread")
    assert not any(isinstance(n, S.For) and n.kind is S.ForKind.VTHREAD for n in E.walk(f.body))
    tags = [n.value for n in E.walk(f.body) if isinstance(n, S.AttrStmt) and n.key is VTHREAD]
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
    assert pushes[(Unit.LOAD, Unit.COMPUTE)] and pushes[(Unit.COMPUTE, Unit.STORE)]
    assert pushes[(Unit.COMPUTE, Unit.LOAD)] and pushes[(Unit.STORE, Unit.COMPUTE)]


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
    assert all(module_of(i) in Unit for i in p.instructions)


def _room_for_every_push(program, depth: int) -> None:  # type: ignore[no-untyped-def]
    """Each queue's k-th push comes after, in program order, the pop that makes room for it
    (the (k - token_depth)-th): fetch is in order, so otherwise a module can stall on a full
    token queue while the pop that would empty it waits, unfetched, behind it."""
    push_at: dict = {}
    pop_at: dict = {}
    for pos, i in enumerate(program.instructions):
        for q in pushes_of(i):
            push_at.setdefault(q, []).append(pos)
        for q in pops_of(i):
            pop_at.setdefault(q, []).append(pos)
    for q, pushes in push_at.items():
        pops = pop_at.get(q, [])
        assert len(pops) == len(pushes), q
        for k in range(depth, len(pushes)):
            assert pops[k - depth] < pushes[k], (q, k, pops[k - depth], pushes[k])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=vt.conv2d_specs(kernels=(1, 3), max_pad=1, max_hw=7, max_channels=12),
       depth=st.integers(1, 3), cmd=st.integers(1, 3), seed=st.integers(0, 100))
def test_token_queues_of_any_depth_never_deadlock(spec, depth: int, cmd: int,  # type: ignore[no-untyped-def]
                                                  seed: int) -> None:
    """Token queues as shallow as one token, command queues as short as one instruction (a
    random config once deadlocked here: compute pushed a second WAR token to load while the
    pop of the first was fetched behind compute's full command queue): the program gives
    every push room before it is issued, and runs bit-exact."""
    hw = vt.small_hw(block=4, **{"queues.token_depth": depth, "queues.command_depth": cmd})
    r = run_layer(Workload("conv2d", spec), AccelTarget(hw), seed=seed)
    _room_for_every_push(r.compiled.program, depth)
    assert r.passed, r.summary()


def test_queued_waits_take_the_general_path_s_tokens(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """An instruction whose conflicts are all with modules it shares a queue with is appended
    in one loop (``_append_queued``), and where every instruction's are, the tokens are worked
    out a queue at a time (``_by_queue``); the tokens are those of the general path (``_add``,
    which also places relays), on a stream with virtual threads and every kind of wait."""
    from vta.compiler.accel.passes import coproc_sync as cs

    flat = run_until(lowered(), "drain_tail")
    fast = cs.insert_tokens(flat, hw("pynq"))

    def general(self, ins, m, latest, at):  # type: ignore[no-untyped-def]
        needs = {p: at[latest[r]] for p, r in self.others[m] if latest[r] >= 0}
        return self._add(ins, m, needs)
    monkeypatch.setattr(cs._Tokens, "_append_queued", general)
    monkeypatch.setattr(cs._Tokens, "_queued_only", lambda self, mods, table: False)
    assert [x.insn for x in _insns(cs.insert_tokens(flat, hw("pynq")))] == \
        [x.insn for x in _insns(fast)]


def test_an_instruction_waiting_alike_is_one_object() -> None:
    """flatten shares a GEMM or ALU instruction among the tiles that evaluate alike; where
    their tokens are the same too, token insertion gives them one instruction object (made
    once)."""
    from vta.compiler.accel.passes.coproc_sync import insert_tokens
    from vta.compiler.ops.conv2d import Conv2dSpec

    spec = Conv2dSpec(n=1, ic=32, h=12, w=6, oc=32, kh=3, kw=3, stride=1, pad=1)
    flat = run_until(lowered(spec), "drain_tail")
    before, out = _insns(flat), _insns(insert_tokens(flat, hw("pynq")))
    assert len(out) == len(before)  # pynq: no relay
    pairs = [(a.insn, b.insn) for a, b in zip(before, out, strict=True)
             if a.uops and b.insn.deps]
    alike = {(id(a), b.deps) for a, b in pairs}
    assert len({id(b) for _a, b in pairs}) == len(alike) < len(pairs)
