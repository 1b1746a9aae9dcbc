"""Post-scheduling fusion (Hidet): a user schedules only the anchor convolution; the fused
epilogue (requantize, residual add of another branch, ReLU) is attached to it automatically,
on the accelerator (ALU instructions on the accumulator tile, the other branch read from DRAM
into acc) and on the GPU (the kernel's output stage)."""

from __future__ import annotations

import numpy as np
import pytest

from vta.compiler.accel.insn_intrin import vta_gemm_intrinsic
from vta.compiler.accel.ops import packing
from vta.compiler.accel.ops.chain_plan import apply_chain
from vta.compiler.accel.ops.conv2d_packed import conv2d_compute
from vta.compiler.accel.ops.packed_op import PackedOp
from vta.compiler.accel.pipeline import compile_func
from vta.compiler.accel.schedules.default import ConvSchedule
from vta.compiler.accel.schedules.fusion import anchor_tile, attach_epilogue
from vta.compiler.ir.lower import lower
from vta.compiler.ir.schedule import AttachAt, Schedule, create_schedule
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.epilogue import Epilogue
from vta.config import HwConfig
from vta.errors import ScheduleError
from vta.graph import interp
from vta.graph.builder import GraphBuilder
from vta.graph.ir import Graph
from vta.graph.passes.fuse import fuse
from vta.graph.place import chain_of
from vta.sim import simulate

from .conftest import hw

SPEC = Conv2dSpec(n=1, ic=32, h=8, w=8, oc=32, kh=3, kw=3, stride=1, pad=1)


def _block() -> tuple[Graph, np.ndarray, np.ndarray]:
    """relu(add(requantize(conv(x)), skip)): one residual block's second half, every scale
    ratio a power of two (VTA's ALU: shifts, no MUL)."""
    rng = np.random.default_rng(5)
    x = rng.integers(0, 128, (1, 32, 8, 8), dtype=np.int8)
    skip = rng.integers(-128, 128, (1, 32, 8, 8), dtype=np.int8)
    b = GraphBuilder("block", calibrate={"x": x, "skip": skip}, requant="shift")
    xv = b.input("x", x.shape, 1 / 128)
    sv = b.input("skip", skip.shape, 1 / 64)
    w = b.const("w", rng.integers(-30, 30, (32, 32, 3, 3), dtype=np.int8), 1 / 128)
    bias = b.const("b", rng.integers(-500, 500, (32,), dtype=np.int32))
    y = b.requantize(b.conv2d(xv, w, bias, pad=1))
    return b.build([b.relu(b.add(y, sv))]), x, skip


def my_anchor_schedule(op: PackedOp, hw_: HwConfig) -> Schedule:
    """A hand-written accelerator schedule of a convolution: 1 output-channel block x 4 rows
    x 8 columns per tile, the input-channel loop outermost in the reduction, one thread. It
    names only the anchor's tensors (data, kernel, accumulator, output)."""
    s = create_schedule(op.out)
    acc = s.cache_write(op.acc, "acc")
    s[op.acc].compute_inline()
    assert op.pad is not None
    inp = s.cache_read(op.pad, "inp", [acc])
    s[op.pad].compute_inline()
    wgt = s.cache_read(op.kernel, "wgt", [acc])
    out = s[op.out]
    n, c, y, x, b, j = out.axis
    co, ci = out.split(c, 1)
    yo, yi = out.split(y, 4)
    out.reorder(n, co, yo, ci, yi, x, b, j)
    s[acc].compute_at(out, yo)
    a = s[acc]
    ic, kh, kw, bi = a.reduce_axis
    sp = a.axis
    a.reorder(ic, *sp[:-2], kh, kw, *sp[-2:], bi)
    s[inp].compute_at(a, ic)
    s[wgt].compute_at(a, ic)
    a.tensorize(sp[-2], vta_gemm_intrinsic(hw_))
    return s


def test_user_anchor_schedule_gets_the_fused_epilogue_on_the_accelerator() -> None:
    h = hw()
    g, x, skip = _block()
    (group,) = fuse(g).nodes
    assert group.name == "conv2d+requantize+add+relu"
    chain, values = chain_of(group.nodes[1:], group.anchor.output)
    assert [v.name for v in values] == ["skip"]
    knobs = ConvSchedule(tco=1, tci=2, th=4, tw=8, vthreads=1)  # the packed layouts
    op = apply_chain(conv2d_compute(SPEC, h, knobs, Epilogue(shift=0, bias=True, clip=False)),
                     chain, h)
    sch = my_anchor_schedule(op, h)
    assert all(sch[t].attach is None for t in op.epilogue)  # the user did not touch them
    attach_epilogue(sch, op, h)
    tile = anchor_tile(sch, op)  # where the user put the accumulator: the row-tile loop
    assert tile.axis.extent == 2 and tile.stage is sch[op.out]
    for t in op.epilogue:  # every fused stage runs there, on the accumulator tile
        at = sch[t].attach
        assert isinstance(at, AttachAt) and at.axis is tile.axis
    assert all(sch[t].scope == "acc" for t in op.epilogue)
    prog = compile_func(lower(sch, op.args, "block"), h).program
    counts: dict[str, int] = {}
    for i in prog.instructions:
        name = type(i).__name__
        counts[name] = counts.get(name, 0) + 1
    P = packing
    g_ = h.gemm
    data = P.pack_data(x, g_.batch, g_.block_in, (1, 2, 8, 8, 1, 16))
    inputs = {"data": P.to_entries(data),
              "kernel": P.to_entries(P.pack_kernel(g.nodes[0].weight.data, 16, 16,
                                                   (2, 2, 3, 3, 16, 16))),
              "bias": P.to_entries(P.pack_bias(g.nodes[0].bias.data, 1, 16, 2)),
              "opnd0": P.to_entries(P.pack_data(skip, 1, 16, (1, 2, 8, 8, 1, 16))),
              "eye": np.eye(16, dtype=np.int8).reshape(1, 16, 16)}
    sim = simulate(prog, h, inputs)
    got = P.unpack_result(np.asarray(sim.outputs["res"]).reshape(1, 2, 8, 8, 1, 16),
                          1, 32, 8, 8)
    want = interp.run_graph(g, {"x": x, "skip": skip})[g.outputs[0]]
    assert np.array_equal(got, want)
    mnemonics = {m for m in sim.stats.insn_counts if m.startswith("ALU")}
    assert mnemonics == {"ALU.ADD", "ALU.SHR", "ALU.MAX", "ALU.MIN"}  # shifts: no MUL


def test_an_anchor_schedule_without_an_accumulator_tile_is_refused() -> None:
    h = hw()
    op = conv2d_compute(SPEC, h, ConvSchedule(1, 2, 4, 8, 1), Epilogue())
    with pytest.raises(ScheduleError, match="must compute conv into the acc scratchpad"):
        attach_epilogue(create_schedule(op.out), op, h)


def test_user_anchor_schedule_gets_the_fused_epilogue_on_the_gpu() -> None:
    """The same fused block on the GPU: a hand-written SIMT schedule of the implicit GEMM
    (block tile, per-thread register tile) that never names the epilogue computes."""
    from vta.gpu.emulator import Emulator
    from vta.gpu.lower_gpu import lower_for_gpu
    from vta.gpu.ops import attach_epilogue as attach_gpu
    from vta.gpu.ops import conv2d_gemm

    g, x, skip = _block()
    (group,) = fuse(g).nodes
    chain, _ = chain_of(group.nodes[1:], group.anchor.output)
    gd = conv2d_gemm(SPEC, "int8", Epilogue(shift=0, bias=True, clip=False), chain=chain)
    s = create_schedule(gd.out)
    cl = s.cache_write(gd.c, "local")
    for t in gd.prologue:  # the anchor's own padding and im2col
        s[t].compute_inline()
    out = s[gd.out]
    m, n = gd.gemm_axes(s)
    by, mi = out.split(m, 16)
    ty, i = out.split(mi, 2)
    bx, ni = out.split(n, 16)
    tx, j = out.split(ni, 2)
    out.reorder(by, bx, ty, tx, i, j)
    out.bind(by, "blockIdx.y")
    out.bind(bx, "blockIdx.x")
    out.bind(ty, "threadIdx.y")
    out.bind(tx, "threadIdx.x")
    s[cl].compute_at(out, tx)
    attach_gpu(s, gd)  # post-scheduling fusion: the epilogue into the output stage
    func = lower_for_gpu(lower(s, list(gd.args), "block"))
    w = group.anchor.weight.data.reshape(32, -1)
    arrays = [x, w, group.anchor.bias.data, skip, np.zeros((1, 32, 8, 8), np.int8)]
    Emulator(func).run(*arrays)
    want = interp.run_graph(g, {"x": x, "skip": skip})[g.outputs[0]]
    assert np.array_equal(arrays[-1], want)
    from vta.gpu.cuda import render_cuda
    from vta.gpu.nvcc import compile_ptx_batch, find_nvcc

    src = render_cuda(func).source
    assert "opnd0[" in src  # the residual branch is read in the output stage
    if find_nvcc() is None:
        pytest.skip("nvcc is not installed: the fused kernel cannot be compiled to PTX")
    compile_ptx_batch([src], "sm_80")
