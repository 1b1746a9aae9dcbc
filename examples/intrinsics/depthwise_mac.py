"""A depthwise (per-channel) vector multiply-accumulate unit, so depthwise conv2d runs well on
the accelerator.

MobileNet's depthwise layers multiply each channel by its own 3x3 filter. The stock accelerator
can only run them as GEMMs whose weight block is diagonal: one 16x16 tensor op per output pixel,
tap and block of 16 channels, 16 useful MACs of 256, with a 256-byte weight block per tap. This
script adds ``DWMAC`` (a new opcode): ``acc[dst] += inp[src] * inp[wgt_base + wgt]`` lane by lane,
one weight *vector* per channel block and tap, read from the input scratchpad; ``vectors``
accumulator entries per cycle (a config parameter: the unit's multipliers are 16 x vectors).
It registers DWMAC with ``vta.intrinsics``, compiles MobileNet-V1's depthwise layers with it and
without it (the stock diagonal-GEMM lowering), simulates both bit-exact against numpy, and
prints the cycles. Nothing under ``vta/`` mentions it.

    python examples/intrinsics/depthwise_mac.py
    python examples/intrinsics/depthwise_mac.py --vectors 1,4 --json out.json
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
NAME = "DWMAC"

#: MobileNet-V1's depthwise 3x3 stride-1 layers: (input H=W, channels)
MOBILENET_DW = {"dw1": (112, 32), "dw2": (56, 128), "dw3": (14, 512), "dw4": (7, 1024)}


@dataclass(frozen=True, slots=True)
class DwMac(vi.MicroOpLoop):
    """``for o, i, u: acc[u.dst + o*dst_factor_out + i*dst_factor_in] += inp[u.src + ...] *
    inp[wgt_base + u.wgt]`` (lane by lane)."""

    src_factor_out: int
    src_factor_in: int
    wgt_base: int
    deps: vi.Deps = vi.NO_DEPS


def layout(hw: Any) -> tuple[tuple[vi.Field, ...], tuple[vi.Field, ...]]:
    """GEMM's low half; the high half holds the acc and inp factors and the base of the weight
    vectors in the input scratchpad (the micro-op's wgt field is the offset from it)."""
    w = hw.isa
    return vi.loop_head(w), (
        vi.Field("dst_factor_out", w.acc_idx), vi.Field("dst_factor_in", w.acc_idx),
        vi.Field("src_factor_out", w.inp_idx), vi.Field("src_factor_in", w.inp_idx),
        vi.Field("wgt_base", w.inp_idx))


def semantics(insn: DwMac, operands: dict[str, np.ndarray], hw: HwConfig) -> np.ndarray:
    """Each execution's contribution: the activation entry times the weight entry, lane by lane
    (int64; the machine adds it into the accumulator with wraparound)."""
    return operands["src"] * operands["wgt"]


def pattern(t: Any, hw: HwConfig) -> list[tuple[Any, dict[Any, str], dict[str, Any]]]:
    """What ``tensorize`` matches: one accumulator entry of products of an input entry and a
    weight entry, lane by lane (each execution adds into its destination)."""
    g = hw.gemm
    shape = (g.batch, g.block_in)
    x = t.placeholder(shape, g.inp_dtype, "dw_x")
    w = t.placeholder(shape, g.inp_dtype, "dw_w")
    out = t.compute((g.batch, g.block_out),
                    lambda i, j: x[i, j].astype(g.acc_dtype) * w[i, j].astype(g.acc_dtype),
                    "dw_out")
    return [(out, {x: "src", w: "wgt", out: "dst"}, {})]


def _param(hw: HwConfig, key: str) -> int:
    intrinsic = hw.intrinsic("dwmac")
    assert intrinsic is not None
    return int(intrinsic.param(key))


def issue(insn: DwMac, hw: HwConfig) -> int:
    return _param(hw, "ii")


def duration(insn: DwMac, hw: HwConfig) -> int:
    """``vectors`` executions per issue, ``ii`` cycles apart; the pipeline fills and drains as
    the config's timing model says (per micro-op loop entry on VTA's HLS design)."""
    return vi.loop_cycles(insn, hw, issue(insn, hw), _param(hw, "pipeline_depth"),
                          per_issue=_param(hw, "vectors"))


def _check(insn: DwMac, hw: HwConfig) -> str | None:
    if hw.gemm.block_in != hw.gemm.block_out:
        return "DWMAC needs block_in == block_out (one channel per lane)"
    return None if insn.uop_end >= insn.uop_bgn else "uop_end is before uop_bgn"


DWMAC = vi.InstructionDef(
    name=NAME, cls=DwMac, opcode=5, layout=layout, unit=vi.Unit.COMPUTE,
    duration=duration, asm=vi.microop_syntax(NAME), check=_check,
    operands=(vi.Operand("dst", "acc", writes=True, factors=("dst_factor_out", "dst_factor_in")),
              vi.Operand("src", "inp", factors=("src_factor_out", "src_factor_in")),
              vi.Operand("wgt", "inp", base="wgt_base")),
    kind="accumulate", semantics=semantics, issue=issue,
    pipeline_depth=lambda hw: _param(hw, "pipeline_depth"),
    macs=lambda i, hw: hw.gemm.batch * hw.gemm.block_out,
    pattern=pattern, requires="dwmac",
    doc="depthwise vector MAC: acc[dst] += inp[src] * inp[wgt_base + wgt], lane by lane")


def define() -> vi.InstructionDef:
    """Register DWMAC (once), with the config intrinsic ``dwmac`` and its parameters."""
    if NAME not in {d.name for d in vi.registered()}:
        vi.register(DWMAC, params={"vectors": 1, "ii": 1, "pipeline_depth": 4})
    return DWMAC


def intrinsic(hw: HwConfig) -> vi.TensorIntrinsic:
    """DWMAC's tensor intrinsic on ``hw`` (what ``tensorize`` matches)."""
    (intrin,) = vi.instruction_intrinsics(define(), hw)
    return intrin


def with_dwmac(hw: HwConfig, vectors: int) -> HwConfig:
    # DWMAC is not VTA's instruction: the config with it does not claim to be stock VTA
    return hw.with_changes(**{"stock": False, "intrinsics.dwmac": {"vectors": vectors}})


def run_layer(spec: Any, hw: HwConfig, *, custom: bool, seed: int = 0,
              check_reference: bool = False) -> Any:
    """One depthwise layer: on DWMAC (vector weights in the input scratchpad) or stock (the
    diagonal-GEMM lowering)."""
    from vta.run.layer import run_depthwise

    if custom:
        return run_depthwise(spec, AccelTarget(hw), seed=seed, check_reference=check_reference,
                             intrinsic=intrinsic(hw), weight_scope="inp", layout="vector")
    return run_depthwise(spec, AccelTarget(hw), seed=seed, check_reference=check_reference)


def run(vectors: list[int], hw_path: Path = ROOT / "hwconfigs/pynq.yaml") -> dict[str, Any]:
    from vta.compiler.ops.depthwise import DepthwiseSpec

    define()
    stock = HwConfig.from_yaml(hw_path)
    rows = []
    for name, (size, channels) in MOBILENET_DW.items():
        spec = DepthwiseSpec(1, channels, size, size, 3, 1, 1)
        r = run_layer(spec, stock, custom=False)
        row: dict[str, Any] = {"layer": name, "shape": spec.describe(),
                               "stock": _row(r)}
        for v in vectors:
            row[f"dwmac_x{v}"] = _row(run_layer(spec, with_dwmac(stock, v), custom=True))
        rows.append(row)
    return {"hw": stock.name, "vectors": vectors, "layers": rows,
            "passed": all(v["passed"] for r in rows for k, v in r.items() if isinstance(v, dict))}


def _row(r: Any) -> dict[str, Any]:
    return {"cycles": r.cycles, "passed": r.passed, "gops": r.gops,
            "dram_bytes": int(sum(r.stats.bytes.values())),
            "schedule": str(r.compiled.schedule)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vectors", default="1,4",
                   help="DWMAC widths to try (accumulator entries per cycle), e.g. 1,4")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = p.parse_args(argv)
    vectors = [int(v) for v in args.vectors.split(",")]
    res = run(vectors)
    head = f"{'layer':6} {'shape':58} {'stock (GEMM diag)':>18}"
    print(head + "".join(f" {'DWMAC x' + str(v):>14}" for v in vectors) + "  ok")
    for r in res["layers"]:
        s = r["stock"]
        cells = "".join(f" {r[f'dwmac_x{v}']['cycles']:>9,} "
                        f"{s['cycles'] / r[f'dwmac_x{v}']['cycles']:>3.1f}x" for v in vectors)
        ok = all(v["passed"] for v in r.values() if isinstance(v, dict))
        print(f"{r['layer']:6} {r['shape']:58} {s['cycles']:>18,}{cells}  {'ok' if ok else 'BAD'}")
    print(f"every layer bit-exact against numpy: {res['passed']}")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))
    return 0 if res["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
