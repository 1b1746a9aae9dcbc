"""Custom instructions through ``vta.intrinsics``: registration errors name the definition and
the problem, the config lists what the hardware implements, and one hardware fact moves the
compiler's costs and the simulator's cycles together."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from vta import intrinsics as vi
from vta.config import HwConfig
from vta.errors import HwConfigError
from vta.isa import Alu, AluOp, Opcode, by_name, decode, encode
from vta.isa.builtins import ALU, GEMM, alu_issue, elementwise_patterns, loop_head

ROOT = Path(__file__).resolve().parents[1]
PYNQ = HwConfig.from_yaml(ROOT / "hwconfigs/pynq.yaml")
#: pynq without the claim to be stock VTA: it may list a user's instruction
EXT = PYNQ.with_changes(stock=False)
#: pynq with ALU MUL (VTA's own ALU has none)
MUL = HwConfig.from_yaml(ROOT / "hwconfigs/pynq_mul.yaml")


@dataclass(frozen=True, slots=True)
class Scale(vi.MicroOpLoop):
    """A test instruction: ``acc[dst] *= imm`` (immediate only)."""

    imm: int
    deps: vi.Deps = vi.NO_DEPS


def _layout(hw: Any) -> tuple[tuple[vi.Field, ...], tuple[vi.Field, ...]]:
    w = hw.isa
    return loop_head(w), (vi.Field("dst_factor_out", w.acc_idx),
                          vi.Field("dst_factor_in", w.acc_idx), vi.Field("imm", 16, signed=True))


def _scale(**over: Any) -> vi.InstructionDef:
    base = vi.InstructionDef(
        name="TEST.SCALE", cls=Scale, opcode=6, layout=_layout, unit=vi.Unit.COMPUTE,
        duration=lambda i, hw: vi.microop_cycles(vi.n_ops(i), 1, 3),
        asm=vi.microop_syntax("TEST.SCALE"),
        operands=(vi.Operand("dst", "acc", writes=True,
                             factors=("dst_factor_out", "dst_factor_in")),),
        kind="update", semantics=lambda i, dst, ops, hw: dst * i.imm,
        issue=lambda i, hw: 1, pipeline_depth=lambda hw: 3,
        pattern=elementwise_patterns(lambda t, x, m: x * m, "scale", register_operand=False,
                                     selector=None),
        requires="scale")
    return replace(base, **over)


@pytest.fixture
def scratch():
    """Registered test definitions are removed again."""
    names: list[str] = []
    yield names
    for n in ["TEST.SCALE", *names]:
        vi.unregister(n)


# ------------------------------------------------------------------ a definition that works

def test_register_round_trips_and_lists_in_the_config(scratch) -> None:
    d = vi.register(_scale(), params={"speed": 1})
    assert by_name("TEST.SCALE") is d
    hw = EXT.with_changes(**{"intrinsics.scale": {"speed": 3}})
    assert hw.intrinsic("scale").param("speed") == 3 and hw.hash != EXT.hash
    insn = Scale(False, 0, 2, 3, 4, 5, 6, -7)
    assert decode(encode(insn, hw), hw) == insn
    from vta.isa import assemble, disassemble
    from vta.isa.asm import format_insn

    text = format_insn(insn)
    assert text == "TEST.SCALE uop=0:2 iter=3,4 dst=5,6 imm=-7"
    prog = assemble(f".alloc O out 1\n{text}\nFINISH\n", hw)
    assert prog.instructions[0] == insn and assemble(disassemble(prog), hw) == prog
    # hardware that does not list the intrinsic cannot encode it
    with pytest.raises(vi.DefinitionError, match=r"TEST\.SCALE is not implemented by pynq"):
        from vta.isa.defs import require

        require(d, EXT)
    from vta.isa import IsaError

    with pytest.raises(IsaError, match="do not list 'scale'"):
        encode(insn, EXT)
    # a config that claims to be stock VTA runs VTA's instructions alone
    with pytest.raises(HwConfigError, match=r"pynq\.yaml: intrinsics\.scale: an intrinsic is "
                                            r"not VTA's instruction, but this config claims to "
                                            r"be stock VTA \(stock: true\)"):
        PYNQ.with_changes(**{"intrinsics.scale": {"speed": 3}})


def test_config_rejects_unknown_intrinsics_and_params(scratch) -> None:
    vi.register(_scale(), params={"speed": 1})
    with pytest.raises(HwConfigError, match=r"intrinsics\.scal: unknown intrinsic \(did you mean "
                                            r"'scale'\?\)"):
        EXT.with_changes(**{"intrinsics.scal": {}})
    with pytest.raises(HwConfigError, match=r"intrinsics\.scale\.sped: unknown key \(did you "
                                            r"mean 'speed'\?\)"):
        EXT.with_changes(**{"intrinsics.scale": {"sped": 2}})
    with pytest.raises(HwConfigError, match=r"intrinsics\.scale\.speed: expected an integer"):
        EXT.with_changes(**{"intrinsics.scale": {"speed": "fast"}})
    assert EXT.with_changes(**{"intrinsics.scale": None}).intrinsic("scale").param("speed") == 1


def test_yaml_lists_intrinsics(tmp_path: Path, scratch) -> None:
    vi.register(_scale(), params={"speed": 1})
    text = (ROOT / "hwconfigs/pynq.yaml").read_text() + "intrinsics:\n  scale: {speed: 2}\n"
    p = tmp_path / "hw.yaml"
    p.write_text(text)
    with pytest.raises(HwConfigError, match=rf"{p}: intrinsics\.scale: an intrinsic is not "
                                            rf"VTA's instruction"):
        HwConfig.from_yaml(p)  # pynq.yaml claims to be stock VTA
    text = text.replace("\nstock: true", "\nstock: false")
    p.write_text(text)
    assert HwConfig.from_yaml(p).intrinsic("scale").param("speed") == 2
    p.write_text(text.replace("scale:", "zoom:"))
    with pytest.raises(HwConfigError, match=rf"{p}: intrinsics\.zoom: unknown intrinsic"):
        HwConfig.from_yaml(p)


# ------------------------------------------------------------------ what register refuses

BAD: list[tuple[str, dict[str, Any], str]] = [
    ("opcode taken", {"opcode": Opcode.GEMM}, "opcode 2 is taken by 'GEMM'"),
    ("function collides", {"opcode": Opcode.ALU, "function": ("op", int(AluOp.ADD))},
     "encoding collides with 'ALU.ADD'"),
    ("other function field", {"opcode": Opcode.ALU, "function": ("imm", 5)},
     "tells its members apart by field 'op'"),
    ("opcode out of range", {"opcode": 9}, "opcode must be in 0..7"),
    ("bad name", {"name": "scale me"}, "the name must be a mnemonic"),
    ("two writers", {"operands": (vi.Operand("dst", "acc", writes=True),
                                  vi.Operand("src", "acc", writes=True))},
     "exactly one operand, 'dst' in acc, is written"),
    ("unknown scratchpad", {"operands": (vi.Operand("dst", "acc", writes=True),
                                         vi.Operand("src", "uop"))}, "addresses 'uop'"),
    ("missing fields", {"operands": (vi.Operand("dst", "acc", writes=True,
                                                factors=("dst_factor_out", "step")),)},
     "lacks the micro-op fields step"),
    ("no semantics", {"semantics": None}, "needs semantics"),
    ("duration zero", {"duration": lambda i, hw: 0}, "duration must be a positive integer"),
    ("duration float", {"duration": lambda i, hw: 2.5}, "got 2.5"),
    ("duration bool", {"duration": lambda i, hw: True}, "got True"),
    ("duration raises", {"duration": lambda i, hw: 1 // 0}, "duration failed"),
    ("issue zero", {"issue": lambda i, hw: 0}, "issue must be a positive integer"),
    ("semantics float", {"semantics": lambda i, dst, ops, hw: dst * 0.5},
     "semantics returned float64"),
    ("semantics shape", {"semantics": lambda i, dst, ops, hw: dst[:, 0]},
     r"expected integers of shape \(3, 1, 16\)"),
    ("semantics raises", {"semantics": lambda i, dst, ops, hw: dst[99]}, "semantics failed"),
    ("layout overflow", {"layout": lambda hw: (loop_head(hw.isa), (vi.Field("imm", 70),))},
     "needs 70 bits in the high 64-bit half"),
    ("layout unknown field", {"layout": lambda hw: (loop_head(hw.isa), (vi.Field("gain", 8),))},
     "layout field 'gain' is not a field of Scale"),
    ("pattern not a compute", {"pattern": lambda t, hw: [(42, {}, {})]},
     "decl must be a tensor made by compute"),
    ("pattern binds unknown", {"pattern": elementwise_patterns(
        lambda t, x, m: x * m, "s", register_operand=False, immediates=("gain",),
        selector=None)}, "binds s_gain to 'gain'"),
    ("pattern raises", {"pattern": lambda t, hw: 1 // 0}, "its pattern cannot be built"),
    ("pattern unbound", {"pattern": lambda t, hw: _unbound(t, hw)}, "every placeholder"),
]


def _unbound(t: Any, hw: Any) -> list[Any]:
    x = t.placeholder((1, 16), "int32", "x")
    y = t.placeholder((1, 16), "int32", "y")
    out = t.compute((1, 16), lambda i, j: x[i, j] + y[i, j], "o")
    return [(out, {x: "dst", out: "dst"}, {})]


@pytest.mark.parametrize("case,over,message", BAD, ids=[b[0] for b in BAD])
def test_register_refuses_with_a_named_error(case: str, over: dict[str, Any], message: str,
                                             scratch) -> None:
    d = _scale(**over)
    with pytest.raises(vi.DefinitionError, match=message) as exc:
        vi.register(d, params={})
    assert repr(d.name)[1:-1] in str(exc.value) or d.name in str(exc.value) \
        or "opcode" in message
    # nothing half-registered stays behind
    assert d.name not in {x.name for x in vi.registered()} or by_name(d.name) is not d


def test_duplicate_name_needs_replace(scratch) -> None:
    vi.register(_scale(), params={})
    with pytest.raises(vi.DefinitionError, match=r"'TEST\.SCALE' is already defined"):
        vi.register(_scale(), params={})
    vi.register(_scale(), params={}, replace=True)


# ------------------------------------------------------------------ one fact, every layer

def _c2_candidates(hw: HwConfig) -> list[Any]:
    from vta.compiler.accel.driver import build, space_of
    from vta.compiler.accel.schedules.model import rank
    from vta.compiler.ops.epilogue import Epilogue
    from vta.compiler.ops.workloads import Workload, resnet18_layer

    w = Workload("C2", resnet18_layer("C2"))
    ranked = rank(space_of(w, hw), Epilogue(), limit=4, prefer_two_threads=True)
    return [build(w, hw, p, epilogue=Epilogue()).program for _, p in ranked]


@pytest.mark.parametrize("change", [{"alu.ii": 3}, {"memory.latency": 80, "memory.bus_bytes": 16},
                                    {"gemm.pipeline_depth": 7}])
def test_a_changed_fact_moves_compiler_costs_and_simulator_together(change) -> None:
    """Each candidate schedule of C2 compiled for pynq and for a variant with one hardware fact
    changed: the busy cycles the compiler's cost functions assign to every unit equal the
    simulator's on both, and the simulator's compute unit moves by exactly what the changed
    definition says."""
    from vta.compiler.accel.cost import unit_busy
    from vta.sim import simulate

    variant = PYNQ.with_changes(**change)
    for program in _c2_candidates(PYNQ):
        busy = {}
        for hw in (PYNQ, variant):
            sim = simulate(program, hw, timing_only=True).stats
            predicted = unit_busy(program, hw)
            for unit in ("load", "compute", "store"):
                assert predicted[unit] == sim.units[unit].busy, (change, unit)
            busy[hw.name if hw is PYNQ else "variant"] = predicted
        if "alu.ii" in change:
            regs = [i for i in program.instructions if isinstance(i, Alu) and not i.use_imm]
            delta = sum(i.n_ops * (alu_issue(i, variant) - alu_issue(i, PYNQ)) for i in regs)
            assert delta > 0 and busy["variant"]["compute"] - busy["pynq"]["compute"] == delta


def test_selection_uses_what_the_config_enables() -> None:
    """Without MUL in alu.ops (VTA's ALU: pynq) a multiplying epilogue has no cover: a named
    error; a multiplier that is a power of two is a left shift (SHR by a negative amount)."""
    from vta.compiler.accel.ops.epilogue_plan import epilogue_plan
    from vta.compiler.ops.epilogue import Epilogue
    from vta.errors import CompileError

    epi = Epilogue(kind="fixed_point", mult=3, shift=4)
    names = [s.intrin.instruction.name for s in epilogue_plan(epi, MUL)]
    assert names == ["ALU.ADD", "ALU.MUL", "ALU.ADD", "ALU.SHR", "ALU.MAX", "ALU.MIN"]
    with pytest.raises(CompileError, match="no instruction of pynq computes it"):
        epilogue_plan(epi, PYNQ)
    assert [s.intrin.instruction.name for s in epilogue_plan(Epilogue(), PYNQ)] == [
        "ALU.SHR", "ALU.ADD", "ALU.MAX", "ALU.MIN"]
    four = Epilogue(kind="fixed_point", mult=4, shift=4)
    for hw in (PYNQ, MUL):  # as cheap as a MUL where there is one: the ALU's own form wins
        plan = epilogue_plan(four, hw)
        assert [s.intrin.instruction.name for s in plan] == [
            "ALU.ADD", "ALU.SHR", "ALU.ADD", "ALU.SHR", "ALU.MAX", "ALU.MIN"]
        assert plan[1].fields["imm"] == -2


def test_builtins_are_definitions_too() -> None:
    assert GEMM.kind == "accumulate" and ALU[AluOp.SHR].function == ("op", 3)
    assert {d.name for d in vi.registered()} >= {"LOAD", "STORE", "GEMM", "FINISH",
                                                 *(f"ALU.{op.name}" for op in AluOp)}
    alu = Alu(AluOp.MUL, False, 0, 1, 2, 3, 4, 5, 6, 7, True, -3)
    assert decode(encode(alu, MUL), MUL) == alu
    rng = np.random.default_rng(1)
    x = rng.integers(-1000, 1000, (4, 1, 16))
    assert np.array_equal(ALU[AluOp.SHR].update(replace(alu, op=AluOp.SHR, imm=-2), x, {}, PYNQ),
                          x * 4)


def test_tensorize_carries_the_match_through_lower() -> None:
    """The match is robust to the region's loop order and to names, and ``lower`` leaves it on
    the region with each intrinsic tensor bound to the lowered buffer the back ends read."""
    from vta.compiler.accel.insn_intrin import vta_gemm_intrinsic
    from vta.compiler.ir import stmt as S
    from vta.compiler.ir.expr import walk
    from vta.compiler.ir.intrin import TensorizeRegion
    from vta.compiler.ir.lower import lower
    from vta.compiler.ir.schedule import create_schedule
    from vta.compiler.ir.tensor import compute, placeholder, reduce_axis, sum_

    X = placeholder((4, 32), "int8", "activations")
    W = placeholder((16, 32), "int8", "filters")
    r = reduce_axis(32, "depth")
    Y = compute((4, 16), lambda row, col: sum_(X[row, r].astype("int32")
                                               * W[col, r].astype("int32"), r), "Y")
    s = create_schedule(Y)
    row, col = s[Y].axis
    ro, ri = s[Y].split(row, 1)
    ko, ki = s[Y].split(s[Y].reduce_axis[0], 16)
    s[Y].reorder(ro, ko, col, ri, ki)  # the region's loops in another order: col, row, k
    intrin = vta_gemm_intrinsic(PYNQ)
    s[Y].tensorize(col, intrin)
    f = lower(s, [X, W, Y])
    regions = [n.value for n in walk(f.body)
               if isinstance(n, S.AttrStmt) and n.key is S.TENSORIZE]
    assert len(regions) == 1 and isinstance(regions[0], TensorizeRegion)
    reg = regions[0]
    assert reg.intrin is intrin and reg.buffer("src").name == "activations"
    assert reg.buffer("wgt").name == "filters" and reg.buffer("dst").name == "Y"
    assert set(reg.loops) == {*intrin.op.axes, *intrin.op.reduce_axes}
