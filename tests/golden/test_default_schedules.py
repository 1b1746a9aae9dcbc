"""Every default schedule pinned: ResNet-18's 11 convolutions on every shipped config, and the
whole ResNet-18 graph's kernels on pynq (issue 22: compile speed must not move a choice).

Two levels, each a golden file (``pytest tests/golden --update-golden`` rewrites them, on
purpose only):

* ``schedules/model_rank.txt``: the analytic model's ``REFINE`` best points of each layer
  (``driver.default_points``), in order: the candidates ``compile_workload`` times;
* ``schedules/chosen_<config>.txt``: the schedule ``vta run`` compiles for each layer (the
  model's candidates timed by the timing-only simulator, ``AccelTarget.compile_layer``), and
  the simulator's cycles for it;
* ``schedules/programs_<config>.txt``: a SHA-256 digest of each layer's emitted program (the
  encoded instruction words, every micro-op table's encoded words and the DRAM map): any change
  to what the compiler emits for a default schedule, not only to the schedule, shows here;
* ``schedules/graph_pynq.txt``: each kernel of ``vta run --hw hwconfigs/pynq.yaml resnet18``
  (exact packed layouts, fused chains) with its schedule (slow: it compiles the whole graph).
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import pytest

from vta.compiler.accel import driver
from vta.compiler.ops.workloads import RESNET18, resolve
from vta.config import HwConfig
from vta.graph.compile import compile_graph
from vta.graph.models import MODELS
from vta.isa import Program
from vta.isa.encoding import encode_program, encode_uops
from vta.run.targets import AccelTarget

CONFIGS = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "hwconfigs").glob(
    "*.yaml"))


def _hw(name: str) -> HwConfig:
    return HwConfig.load(str(Path(__file__).resolve().parents[2] / "hwconfigs" / f"{name}.yaml"))


def _point_text(p: object) -> str:
    return str(p)


def model_rank_text() -> str:
    lines = []
    for cfg in CONFIGS:
        hw = _hw(cfg)
        for layer in RESNET18:
            pts = driver.default_points(resolve(f"resnet18:{layer}"), hw)
            lines.append(f"{cfg} {layer}: " + " | ".join(map(_point_text, pts)))
    return "\n".join(lines)


@functools.cache
def _chosen(cfg: str) -> tuple[tuple[str, driver.Compiled], ...]:
    """Each layer's default compile on ``cfg`` (what ``vta run resnet18:Ck`` compiles), once
    for both the schedule and the program pins."""
    t = AccelTarget(_hw(cfg))
    return tuple((layer, t.compile_layer(resolve(f"resnet18:{layer}"))) for layer in RESNET18)


def program_digest(prog: Program, hw: HwConfig) -> str:
    """SHA-256 of what ``prog`` is on the wire: its encoded instruction words, each micro-op
    table's name and encoded words, and the DRAM map (names, kinds, sizes, offsets)."""
    h = hashlib.sha256(encode_program(prog.instructions, hw).tobytes())
    for name in sorted(prog.uops):
        h.update(name.encode())
        h.update(encode_uops(prog.uops[name], hw).tobytes())
    for a in prog.allocations:
        h.update(f"{a.name}:{a.kind}:{a.elems}:{a.offset}:{a.elem_bytes};".encode())
    return h.hexdigest()


def programs_text(cfg: str) -> str:
    hw = _hw(cfg)
    return "\n".join(f"{layer}: insns={len(c.program.instructions)} "
                     f"uops={sum(len(u) for u in c.program.uops.values())} "
                     f"sha256={program_digest(c.program, hw)}" for layer, c in _chosen(cfg))


def chosen_text(cfg: str) -> str:
    t = AccelTarget(_hw(cfg))
    lines = []
    for layer, c in _chosen(cfg):
        s = c.schedule
        lines.append(f"{layer}: fold={c.fold_kind} tco={s.tco} tci={s.tci} th={s.th} "
                     f"tw={s.tw} vthreads={s.vthreads} vt_axis={s.vt_axis} order={s.order} "
                     f"operands={s.operands} cycles={t.cycles(c.program)}")
    return "\n".join(lines)


def graph_text(cfg: str) -> str:
    hw = _hw(cfg)
    t = AccelTarget(hw)
    g = compile_graph(MODELS["resnet18"](batch=1), hw, cost=t.cycles)
    lines = []
    for k, st in enumerate(g.steps):
        detail = getattr(st, "detail", None)
        prog = g.programs[k]
        cycles = t.cycles(prog) if prog is not None else 0
        lines.append(f"{k} {getattr(st, 'kind', type(st).__name__)}: {detail} cycles={cycles}")
    return "\n".join(lines)


def test_model_rank_pinned(golden) -> None:
    golden("schedules/model_rank.txt", model_rank_text())


@pytest.mark.parametrize("cfg", CONFIGS)
def test_chosen_schedules_pinned(cfg: str, golden) -> None:
    golden(f"schedules/chosen_{cfg}.txt", chosen_text(cfg))


@pytest.mark.parametrize("cfg", CONFIGS)
def test_default_programs_pinned(cfg: str, golden) -> None:
    golden(f"schedules/programs_{cfg}.txt", programs_text(cfg))


@pytest.mark.slow
def test_graph_schedules_pinned(golden) -> None:
    golden("schedules/graph_pynq.txt", graph_text("pynq"))
