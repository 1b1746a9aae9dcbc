"""A separate ALU pipeline (alu.separate_pipeline, alu.acc_banks): the ALU module's routing and
tokens, the relays the token pass inserts, accumulator bank conflicts in the simulator, and
the compiler exploiting the overlap (bit-exact, faster than VTA's serial compute module)."""

from __future__ import annotations

from pathlib import Path

from vta.compiler.accel.passes.coproc_sync import insert_tokens
from vta.compiler.accel.vta_ir import Insn
from vta.compiler.ir import stmt as S
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.workloads import Workload, resolve
from vta.config import HwConfig
from vta.isa import (
    Alu,
    AluOp,
    Deps,
    Finish,
    Gemm,
    Load,
    MemType,
    ProgramBuilder,
    Store,
    Unit,
    Uop,
    module_of,
    pops_of,
    pushes_of,
)
from vta.run.layer import run_layer
from vta.run.targets import AccelTarget
from vta.sim import simulate

ROOT = Path(__file__).resolve().parents[2]
PYNQ = HwConfig.from_yaml(ROOT / "hwconfigs" / "pynq.yaml")
OVERLAP = HwConfig.from_yaml(ROOT / "hwconfigs" / "pynq_overlap.yaml")


def test_alu_routing_and_token_chain() -> None:
    """On the overlap config ALU instructions go to the ALU module, whose flags name the
    chain compute <-> alu <-> store; GEMM's "next" is the ALU, STORE's "prev" is the ALU."""
    alu = Alu(AluOp.ADD, False, 0, 1, 1, 1, 0, 0, 0, 0, True, 1,
              Deps(pop_prev=True, pop_next=True, push_prev=True, push_next=True))
    assert module_of(alu) is Unit.COMPUTE and module_of(alu, OVERLAP) is Unit.ALU
    assert pops_of(alu, OVERLAP) == [(Unit.COMPUTE, Unit.ALU), (Unit.STORE, Unit.ALU)]
    assert pushes_of(alu, OVERLAP) == [(Unit.ALU, Unit.COMPUTE), (Unit.ALU, Unit.STORE)]
    g = Gemm(False, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, Deps(pop_next=True, push_next=True))
    assert pops_of(g, OVERLAP) == [(Unit.ALU, Unit.COMPUTE)]
    assert pushes_of(g, OVERLAP) == [(Unit.COMPUTE, Unit.ALU)]
    st = Store(MemType.OUT, 0, 0, 1, 1, 1, Deps(pop_prev=True))
    assert pops_of(st, OVERLAP) == [(Unit.ALU, Unit.STORE)]


def _flat(insns: list[Insn]) -> S.PrimFunc:
    return S.PrimFunc("t", (), S.SeqStmt(tuple(insns)))


def test_token_pass_relays_compute_to_store_through_the_alu() -> None:
    """A GEMM whose result a STORE reads, with no ALU instruction between them: compute and
    store share no queue on the chain, so the pass inserts an ALU instruction without micro-ops
    that pops the GEMM's token and pushes one to the STORE (on VTA's chain: a direct token)."""
    gemm = Insn(Gemm(False, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0), uops=(Uop(0, 0, 0),))
    store = Insn(Store(MemType.OUT, 0, 0, 1, 1, 1))
    out = [x.insn for x in insert_tokens(_flat([gemm, store]), OVERLAP).body.stmts]
    assert [module_of(x, OVERLAP) for x in out] == [Unit.COMPUTE, Unit.ALU, Unit.STORE]
    relay = out[1]
    assert isinstance(relay, Alu) and relay.n_ops == 0
    assert out[0].deps == Deps(push_next=True)
    assert relay.deps == Deps(pop_prev=True, push_next=True)
    assert out[2].deps == Deps(pop_prev=True)
    stock = [x.insn for x in insert_tokens(_flat([gemm, store]), PYNQ).body.stmts]
    assert len(stock) == 2 and stock[0].deps == Deps(push_next=True)


def test_token_pass_finds_orders_that_already_hold() -> None:
    """GEMM -> ALU -> STORE -> (ALU reset) -> GEMM again on the same entries: the second GEMM
    must follow the STORE (it rewrites the out entry the STORE reads); it waits for the reset,
    which waited for the STORE, so no relay is needed (the vector clocks see the order)."""
    u = (Uop(0, 0, 0),)
    gemm = Insn(Gemm(False, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0), uops=u)
    shr = Insn(Alu(AluOp.SHR, False, 0, 1, 1, 1, 0, 0, 0, 0, True, 2), uops=u)
    store = Insn(Store(MemType.OUT, 0, 0, 1, 1, 1))
    reset = Insn(Alu(AluOp.ADD, True, 0, 1, 1, 1, 0, 0, 0, 0, True, 0), uops=u)
    out = [x.insn for x in insert_tokens(_flat([gemm, shr, store, reset, gemm]), OVERLAP)
           .body.stmts]
    assert len(out) == 5  # no relay
    assert out[3].deps == Deps(pop_next=True, push_prev=True)  # reset: after the STORE
    assert out[4].deps.pop_next  # the second GEMM waits for the reset


def _bank_program(alu_dst: int) -> object:
    """LOAD.UOP, then a GEMM over 64 acc entries of bank 0 and an ALU over 64 entries at
    ``alu_dst``, with no token between them (they touch different data)."""
    b = ProgramBuilder(OVERLAP)
    ua = b.alloc("U", "uop", 0)
    pos = b.add_uops("U", [Uop(i, 0, 0) for i in range(64)]
                     + [Uop(alu_dst + i, 0, 0) for i in range(64)])
    b.extend([Load(MemType.UOP, 0, ua.base + pos, 1, 128, 128, deps=Deps(push_next=True)),
              Gemm(False, 0, 64, 4, 1, 0, 0, 0, 0, 0, 0),
              Alu(AluOp.SHR, False, 64, 128, 4, 1, 0, 0, 0, 0, True, 1,
                  deps=Deps(pop_prev=True)),
              Finish()])
    return b.build()


def test_bank_conflicts_serialise_gemm_and_alu() -> None:
    """The GEMM (256 executions, HLS: 4 * (64 + 4) + 2 control = 274 cycles) and the ALU
    (4 * (64 * 1 + 4) + 2 = 274) run side by side when the ALU's entries lie in the other bank
    (acc entry 1024+ of 2048), and one after the other in the same bank: the later waits
    ``conflict`` cycles."""
    apart = simulate(_bank_program(1024), OVERLAP, timing_only=True)  # type: ignore[arg-type]
    same = simulate(_bank_program(512), OVERLAP, timing_only=True)  # type: ignore[arg-type]
    conflict = sum(u.conflict for u in same.stats.units.values())
    assert sum(u.conflict for u in apart.stats.units.values()) == 0
    assert conflict >= 274 - 1 and same.cycles >= apart.cycles + 272
    assert apart.stats.units["alu"].busy == 274 and apart.stats.units["alu"].insns == 1


def test_overlap_runs_bit_exact_and_faster() -> None:
    """A conv2d on the overlap config: the machine and the reference interpreter agree with
    numpy, the ALU module executes the epilogue and resets, and the run is faster than on
    pynq (its epilogue no longer serial with the GEMMs)."""
    w = Workload("conv2d", Conv2dSpec(n=1, ic=32, h=14, w=14, oc=32, kh=3, kw=3, pad=1))
    r = run_layer(w, AccelTarget(OVERLAP), check_reference=True)
    assert r.passed and r.reference_agrees
    assert r.stats.units["alu"].insns > 0
    assert "alu" not in run_layer(w, AccelTarget(PYNQ)).stats.units
    assert r.cycles < run_layer(w, AccelTarget(PYNQ)).cycles
    s = r.summary()
    assert not s["serial_epilogue"] and s["of_machine_bound"] <= 1


def test_overlap_c2_gemm_utilization() -> None:
    """ResNet-18 C2 on pynq_overlap: the GEMM core busy at least 95% of the run (the epilogue,
    resets and stores of one thread run beside the other thread's GEMMs)."""

    c = AccelTarget(OVERLAP).compile_layer(resolve("resnet18:C2"))
    st = simulate(c.program, OVERLAP, timing_only=True).stats
    assert st.utilization >= 0.95, st.utilization
