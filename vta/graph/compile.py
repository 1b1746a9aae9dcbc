"""Compile a whole graph for the accelerator: fuse, place, plan layouts and memory, link.

::

    graph (verified)
      │ passes.fold_pad       zero-point pads into their convolutions (pad_value: LOAD pads
      │                       with 0, a per-position bias adds the difference)
      │ passes.split_matmul   products of two activations: dense layers whose weight the
      │                       host packs at run time, one per head
      │ passes.fuse           element-wise operators into their producer's epilogue
      v
    fused groups
      │ place                 each group a kernel (conv2d / matmul / window ops, chains
      │                       attached by post-scheduling fusion) or a named host fallback
      v
    steps
      │ passes.layout         packed NCHWnc between kernels; host packs at the input and
      │                       unpacks at the output (and around host fallbacks)
      │ passes.memory         DRAM offsets of the activations, freed space reused; constants
      │ link                  every kernel's program relocated to that DRAM map
      v
    CompiledGraph             (vta.run.graph.run_graph simulates it and checks every tensor)

The compiler never runs the simulator: ``cost`` (the timing-only simulator, passed by
``vta.run``) decides among the schedule model's best candidates.

A graph with ONNX Runtime's float32 requantization (``Requantize.exact``, an ONNX model
imported with ``requant="ort"``) needs the ``requant_f32`` intrinsic (``ALU.REQUANT_F32``,
``hwconfigs/pynq_requant.yaml``) and is refused up front on a config without it, the same way.

A graph whose requantization multipliers are not all powers of two (``quant.needs_mul``: a
fixed-point requantization, ``resnet18_fixed``, an ONNX model's arbitrary scales) needs ALU MUL;
on hardware without it (VTA's own: ``stock: true``) it is refused up front, naming the node, its
multiplier and scales and the configs that have MUL, instead of every kernel falling back to
the host.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from vta.compiler.accel import driver
from vta.config import HwConfig, shipped_configs
from vta.errors import GraphError
from vta.graph.ir import GlobalAvgPool, Graph, Requantize
from vta.graph.link import link_program
from vta.graph.passes.fold_pad import fold_pads
from vta.graph.passes.fuse import fuse
from vta.graph.passes.memory import MemoryPlan, plan_memory
from vta.graph.passes.plan_layouts import LayoutPlan, plan_layouts
from vta.graph.passes.split_matmul import split_matmuls
from vta.graph.place import Cost, HostOp, Kernel, Step, place_all
from vta.graph.quant import effective_ratio, exact_requantizes, needs_mul
from vta.isa import Program
from vta.resources import REQUANT_F32

__all__ = ["CompiledGraph", "compile_graph", "check_multipliers"]


@dataclass
class CompiledGraph:
    """A graph compiled for ``hw``: the fused graph's steps, their linked programs (None for a
    host step), the layout and memory plans."""

    graph: Graph
    fused: Graph
    hw: HwConfig
    fusion: str
    steps: list[Step]
    programs: list[Program | None]
    layouts: LayoutPlan
    memory: MemoryPlan
    compile_s: float

    @property
    def kernels(self) -> list[Kernel]:
        return [s for s in self.steps if isinstance(s, Kernel)]

    @property
    def host_ops(self) -> list[HostOp]:
        return [s for s in self.steps if isinstance(s, HostOp)]

    @property
    def macs(self) -> int:
        return self.graph.macs

    @property
    def accelerated_macs(self) -> int:
        return sum(k.macs for k in self.kernels)


def accelerator_graph(graph: Graph) -> Graph:
    """``graph`` as the accelerator compiles it: zero-point pads folded into their
    convolutions (a per-position bias, ``passes.fold_pad``) and products of two activations
    made dense layers with runtime weights (``passes.split_matmul``). Each pass gives back the
    same object when it has nothing to do, so this is the identity on its own result:
    ``vta run`` interprets this graph (the reference every tensor is checked against) while
    the workers compile it, and ``compile_graph`` keeps it as its ``graph``."""
    graph = fold_pads(graph)
    return split_matmuls(graph)


def compile_graph(graph: Graph, hw: HwConfig, *, fusion: str = "full", cost: Cost | None = None,
                  refine: int = driver.REFINE, memo: driver.CompileMemo | None = None,
                  place: Callable[[Graph], list[Step]] | None = None) -> CompiledGraph:
    """Compile ``graph`` for ``hw`` (module docstring); ``fusion`` is the fusion level
    (``"full"``, or ``"requant"`` for the unfused baseline); ``memo``: a compile cache
    (``driver.compile_workload``'s), which answers every kernel it holds. ``place``: how the
    fused graph's groups are placed, when not ``place_all(fused, hw, cost, refine, memo)``
    (``vta.run.compile_pool`` compiles them on every core first; it must give the same
    steps)."""
    t0 = time.perf_counter()
    check_multipliers(graph, hw)
    graph = accelerator_graph(graph)
    fused = fuse(graph, fusion)
    steps = place(fused) if place is not None else place_all(fused, hw, cost, refine, memo)
    layouts = plan_layouts(fused, steps, hw)
    memory = plan_memory(fused, steps, layouts, hw)
    programs: list[Program | None] = [
        link_program(st.program, k, layouts.bindings[k], memory) if isinstance(st, Kernel)
        else None for k, st in enumerate(steps)]
    return CompiledGraph(graph, fused, hw, fusion, steps, programs, layouts, memory,
                         time.perf_counter() - t0)


def check_multipliers(graph: Graph, hw: HwConfig) -> None:
    """A ``GraphError`` when ``graph`` has an exact requantize (ORT's arithmetic) and ``hw``
    lacks the ``requant_f32`` intrinsic, or a requantization multiplier that is not a power of
    two (``quant.needs_mul``) and ``hw``'s ALU has no MUL: the first such node, its multiplier
    and ratio of scales, how many more, and the shipped configs with MUL to run it on."""
    exact = exact_requantizes(graph)
    if exact and hw.intrinsic(REQUANT_F32) is None:
        more = f" (and {len(exact) - 1} more)" if len(exact) > 1 else ""
        have = [n for n, p in shipped_configs().items()
                if HwConfig.from_yaml(p).intrinsic(REQUANT_F32) is not None]
        raise GraphError(
            f"graph {graph.name}: {exact[0].op} {exact[0].output.name}: ONNX Runtime's float32 "
            f"arithmetic (imported with requant='ort'){more} needs the {REQUANT_F32} "
            f"intrinsic (ALU.REQUANT_F32), which {hw.name} does not list; run it on "
            f"{', '.join(have) or 'a config listing it under intrinsics:'}, or import the "
            f"model with fixed-point requantization")
    if "mul" in hw.alu.ops:
        return
    # a global average pool whose 1/(h*w) is not a shift runs on the host (place: HostFallback)
    need = [x for x in needs_mul(graph) if not isinstance(x[0], GlobalAvgPool)]
    if not need:
        return
    node, what, mult, shift = need[0]
    more = f" (and {len(need) - 1} more)" if len(need) > 1 else ""
    per_channel = isinstance(node, Requantize) and node.mults is not None
    hint = ("" if per_channel else ", or give it power-of-two scale ratios (every "
            "requantization a shift)") + ", or multiply by shifts and adds (" \
        "quant.shift_add_multipliers; vta run --approx shift-add)"
    kind = "per-channel multipliers: a vector multiply by a channel operand" if per_channel \
        else "not a power of two"
    why = "VTA's ALU has no MUL" if hw.stock else "its alu.ops has no mul"
    raise GraphError(
        f"graph {graph.name}: {node.op} {node.output.name}: its {what} {mult} (scale ratio "
        f"{effective_ratio(mult, shift):.6g} = {mult} / 2**{shift}, {kind}) needs "
        f"ALU MUL{more}, which {hw.name} does not have ({why}: alu.ops "
        f"{', '.join(hw.alu.ops)}); run it on {_with_mul(hw)}{hint}")


def _with_mul(hw: HwConfig) -> str:
    """The shipped configs whose ALU has MUL, ``hw``'s own variant (``<name>_mul``) first."""
    names = [n for n, p in shipped_configs().items() if "mul" in HwConfig.from_yaml(p).alu.ops]
    mine = f"{hw.name}_mul"
    if mine in names:
        return f"{mine} ({hw.name} with ALU MUL: hwconfigs/{mine}.yaml)"
    return f"a config with mul in alu.ops (shipped: {', '.join(names)})" if names else \
        "a config with mul in alu.ops"
