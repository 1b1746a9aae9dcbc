"""Shared fixtures for the VTA pipeline tests: a small conv2d defined in the tensor IR,
scheduled with the primitives and lowered (``lower``) under fixed knobs."""

from __future__ import annotations

from pathlib import Path

from vta.compiler.accel.ops.conv2d_packed import conv2d_compute
from vta.compiler.accel.pipeline import PASSES
from vta.compiler.accel.schedules.default import ConvSchedule, lower_op
from vta.compiler.ir import stmt as S
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.epilogue import Epilogue
from vta.config import HwConfig

ROOT = Path(__file__).resolve().parents[2]
HWCONFIGS = sorted((ROOT / "hwconfigs").glob("*.yaml"))


def hw(name: str = "pynq") -> HwConfig:
    return HwConfig.from_yaml(ROOT / "hwconfigs" / f"{name}.yaml")


SPEC = Conv2dSpec(n=1, ic=32, h=6, w=6, oc=32, kh=3, kw=3, stride=1, pad=1)
SCH = ConvSchedule(tco=2, tci=2, th=3, tw=6, vthreads=2, vt_axis="oh")


def lowered(spec: Conv2dSpec = SPEC, sch: ConvSchedule = SCH, name: str = "pynq") -> S.PrimFunc:
    h = hw(name)
    return lower_op(conv2d_compute(spec, h, sch, Epilogue()), h, sch)


def run_until(func: S.PrimFunc, last: str, name: str = "pynq") -> S.PrimFunc:
    """Run the pipeline's passes up to and including ``last``."""
    h = hw(name)
    for pname, fn, _ in PASSES:
        func = fn(func, h)
        if pname == last:
            return func
    raise KeyError(last)


def nodes(func: S.PrimFunc, cls: type) -> list:
    from vta.compiler.ir.expr import walk

    return [n for n in walk(func.body) if isinstance(n, cls)]
