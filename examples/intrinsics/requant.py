"""A fused fixed-point requantize instruction for the accelerator's ALU.

A quantized network rescales every accumulator to int8 with a fixed-point multiplier:
``out = clip(((acc + bias) * mult + 2**(shift-1)) >> shift, lo, hi)``. An ALU with MUL needs six
passes over the accumulator tile for it (ADD bias, MUL, ADD rounding, SHR, MAX, MIN); VTA's own
ALU has no MUL at all, so the baseline runs on ``hwconfigs/pynq_mul.yaml`` (pynq with ALU MUL,
64 more DSP48). This script adds ``ALU.REQUANT``, a new function of the ALU opcode that does the
multiplication, the rounding shift and the clip in one micro-op, registers it with
``vta.intrinsics``, and compiles ResNet-18 layer C2 and the whole 20-convolution ResNet-18 for
pynq_mul with and without it: the compiler's instruction selection picks REQUANT wherever the
epilogue's expression matches its pattern, the simulator and the reference interpreter execute
its numpy semantics, and its timing comes from its own duration function. Nothing under
``vta/`` mentions it.

    python examples/intrinsics/requant.py            # C2 and ResNet-18 on pynq_mul, +- REQUANT
    python examples/intrinsics/requant.py --layers C2  # one layer

docs/custom_intrinsics.md walks through this file.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vta import intrinsics as vi
from vta.config import HwConfig
from vta.run.targets import AccelTarget

ROOT = Path(__file__).resolve().parents[2]
NAME = "ALU.REQUANT"


# ----------------------------------------------------------------------------- 1. its fields

@dataclass(frozen=True, slots=True)
class Requant(vi.MicroOpLoop):
    """``acc[dst] = clip(((acc[dst] * mult) + 2**(shift-1)) >> shift, clip_lo, clip_hi)`` over
    the usual micro-op loop (``MicroOpLoop``: reset, uop range, iterations, destination
    factors); no register operand: every parameter is an immediate."""

    mult: int
    shift: int
    clip_lo: int
    clip_hi: int
    deps: vi.Deps = vi.NO_DEPS


# ----------------------------------------------------------------------------- 2. its encoding

def layout(hw: Any) -> tuple[tuple[vi.Field, ...], tuple[vi.Field, ...]]:
    """The ALU's word with the src factors' bits reused: REQUANT reads no register operand, so
    the shift and the clip bounds go where ALU keeps its src factors, and the multiplier where it
    keeps ``use_imm`` and ``imm``. The function field ``op`` stays where the ALU has it, so the
    decoder tells REQUANT from ALU.ADD by its value (5)."""
    w = hw.isa
    spare = 2 * w.acc_idx - (5 + 8 + 8)
    return vi.loop_head(w), (
        vi.Field("dst_factor_out", w.acc_idx), vi.Field("dst_factor_in", w.acc_idx),
        vi.Field("shift", 5), vi.Field("clip_lo", 8, signed=True),
        vi.Field("clip_hi", 8, signed=True), vi.Field("_spare", spare),
        vi.Field("op", w.alu_opcode),
        vi.Field("mult", 64 - 4 * w.acc_idx - w.alu_opcode, signed=True))


# ----------------------------------------------------------------------------- 3. semantics

def semantics(insn: Requant, dst: np.ndarray, operands: dict[str, np.ndarray],
              hw: HwConfig) -> np.ndarray:
    """What one micro-op does to one accumulator entry (int64 in and out). The product and the
    rounding add wrap to the accumulator's width exactly as ALU MUL and ADD would, so the
    fused instruction computes the same bits as the six-instruction sequence it replaces."""
    bits = 32 if hw.gemm.acc_dtype == "int32" else 16
    y = vi.wrap(dst * insn.mult, bits)
    y = vi.wrap(y + ((1 << insn.shift) >> 1), bits) >> insn.shift
    return np.clip(y, insn.clip_lo, insn.clip_hi)


# ----------------------------------------------------------------------------- 4. the pattern

def pattern(t: Any, x: Any, mult: Any, shift: Any, lo: Any, hi: Any) -> Any:
    """What the compiler looks for in an epilogue (``t`` builds tensor-IR expressions): ``x`` is
    the accumulator entry, the other arguments are the instruction's immediate fields."""
    rounding = t.const(1) << (shift - 1)
    return t.min_(t.max_((x * mult + rounding) >> shift, lo), hi)


# ----------------------------------------------------------------------------- 5. timing

def issue(insn: Requant, hw: HwConfig) -> int:
    """Cycles per micro-op: the ALU's issues per accumulator vector at this unit's initiation
    interval (a config parameter, ``intrinsics: requant: {ii: ...}``)."""
    intrinsic = hw.intrinsic("requant")
    assert intrinsic is not None
    return vi.alu_issues(hw) * intrinsic.param("ii")


def depth(hw: HwConfig) -> int:
    """The ALU's pipeline plus the multiplier's extra stages."""
    intrinsic = hw.intrinsic("requant")
    assert intrinsic is not None
    return hw.alu.pipeline_depth + intrinsic.param("extra_depth")


def _uop_order(insn: Requant, hw: HwConfig) -> str | None:
    return None if insn.uop_end >= insn.uop_bgn else "uop_end is before uop_bgn"


REQUANT = vi.InstructionDef(
    name=NAME, cls=Requant, opcode=vi.Opcode.ALU, function=("op", 5), layout=layout,
    unit=vi.Unit.COMPUTE,
    duration=lambda i, hw: vi.loop_cycles(i, hw, issue(i, hw), depth(hw)),
    asm=vi.microop_syntax(NAME), check=_uop_order,
    operands=(vi.Operand("dst", "acc", writes=True,
                         factors=("dst_factor_out", "dst_factor_in")),),
    kind="update", semantics=semantics, issue=issue, pipeline_depth=depth,
    pattern=vi.elementwise_patterns(pattern, "requant", register_operand=False,
                                    immediates=("mult", "shift", "clip_lo", "clip_hi"),
                                    selector=None),
    requires="requant",
    doc="fused fixed-point requantize: multiply by an immediate, rounding shift, clip")


def define() -> vi.InstructionDef:
    """Register REQUANT (once): the config intrinsic ``requant`` with its parameters."""
    if NAME not in {d.name for d in vi.registered()}:
        vi.register(REQUANT, params={"ii": 1, "extra_depth": 2},
                    example={"mult": 3, "shift": 4, "clip_lo": -128, "clip_hi": 127})
    return REQUANT


# ----------------------------------------------------------------------------- using it

def calibrated(conv: Any, seed: int = 0) -> Any:
    """A fixed-point epilogue whose scale maps the layer's accumulators (on the random int8
    data the run uses) onto int8 with few outputs saturated: ``mult / 2**shift`` is about
    ``127 / (3 sigma)`` of the accumulator, as a calibrated quantized network would have. The
    shift stays <= 15 so that the ALU's 16-bit immediate can hold the rounding term: both
    sides compute the same function."""
    from vta.compiler.ops.epilogue import Epilogue

    sigma = float(np.sqrt(conv.ic * conv.kh * conv.kw) * (256 / np.sqrt(12)) ** 2)
    scale = 127 / (3 * sigma)
    shift = 15
    mult = round(scale * (1 << shift))
    while mult >= 1 << 15 and shift > 1:
        shift -= 1
        mult = round(scale * (1 << shift))
    return Epilogue(kind="fixed_point", mult=max(1, mult), shift=shift, bias=True, clip_lo=-128,
                    clip_hi=127)


def run(layers: list[str] | None = None, hw_path: Path = ROOT / "hwconfigs/pynq_mul.yaml",
        seed: int = 0) -> dict[str, Any]:
    """Every layer of ResNet-18 (or ``layers``) with the calibrated fixed-point epilogue, on
    ``hw_path`` (pynq_mul: its ALU has MUL) and on the same with REQUANT; bit-exact against
    numpy either way."""
    from vta.compiler.ops.workloads import resolve_network
    from vta.run.layer import run_layer

    define()
    base = HwConfig.from_yaml(hw_path)
    # REQUANT is not VTA's instruction: the config with it does not claim to be stock VTA
    fused = base.with_changes(**{"stock": False, "intrinsics.requant": {}})
    net = resolve_network("resnet18", layers=layers)
    assert net is not None
    rows = []
    for w, count in net.layers:
        epi = calibrated(w.spec, seed)
        row: dict[str, Any] = {"layer": w.name, "count": count}
        for label, hw in (("mul", base), ("requant", fused)):
            r = run_layer(w, AccelTarget(hw), seed=seed, epilogue=epi)
            counts = r.stats.insn_counts
            row[label] = {"cycles": r.cycles, "passed": r.passed,
                          "alu_insns": sum(v for k, v in counts.items() if k.startswith("ALU")),
                          "requant_insns": counts.get(NAME, 0),
                          "utilization": r.stats.utilization}
        rows.append(row)
    total = {label: sum(r[label]["cycles"] * r["count"] for r in rows)
             for label in ("mul", "requant")}
    return {"hw": base.name, "layers": rows, "network_cycles": total,
            "passed": all(r[k]["passed"] for r in rows for k in ("mul", "requant"))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", help="comma-separated ResNet-18 layers (default: all C1..C11)")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = p.parse_args(argv)
    res = run(args.layers.upper().split(",") if args.layers else None)
    print(f"{res['hw']} (ADD, MUL, ADD, SHR, MAX, MIN) against {res['hw']} + REQUANT (ADD, "
          f"REQUANT)")
    print(f"{'layer':12} {'x':>2} {'MUL cycles':>13} {'REQUANT cycles':>15} {'saved':>7} "
          f"{'ALU insns':>10} {'ok':>3}")
    for r in res["layers"]:
        s, q = r["mul"], r["requant"]
        print(f"{r['layer']:12} {r['count']:>2} {s['cycles']:>13,} {q['cycles']:>15,} "
              f"{1 - q['cycles'] / s['cycles']:>7.1%} {s['alu_insns']:>4} -> {q['alu_insns']:<4}"
              f"{'ok' if s['passed'] and q['passed'] else 'BAD':>3}")
    t = res["network_cycles"]
    print(f"network ({sum(r['count'] for r in res['layers'])} convolutions): "
          f"{t['mul']:,} -> {t['requant']:,} cycles ({1 - t['requant'] / t['mul']:.1%} fewer)"
          f"; every layer bit-exact against numpy: {res['passed']}")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))
    return 0 if res["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
