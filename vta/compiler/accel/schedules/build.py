"""Build a schedule from a point of the space: the schedule primitives for the tile knobs.

``schedule_op`` expresses a point's knobs (``schedules.space.ConvSchedule``) with the schedule
primitives on the op's tensor IR (``ops.epilogue.PackedOp``) and ``lower_op`` lowers it
(vta.compiler.ir.lower); ``driver.build`` wraps them into the one function that turns a point of
the space into a compiled program (layout, op, schedule, pipeline):

* ``cache_read`` data_pad -> inp (the padding stage ``compute_inline``d into the copy),
  kernel -> wgt; ``cache_write`` of the reduction into acc (its global stage inlined into the
  epilogue);
* the output tiled over oc / oh / ow (``split`` + ``reorder``; ``order`` ``oc``: channel
  tiles outside the pixel tiles, ``px``: inside them), the threads' axis split off and marked
  ``virtual_thread``; the reduction ``compute_at`` the tile loop;
* the reduction's channel axis split into an outer ic loop (the input copy, and the weight
  copy unless it covers every channel, ``compute_at`` it) and the batch x block loops
  ``tensorize``d onto ``vta_gemm_intrinsic(hw)``. When one tile covers every input channel,
  the operand the outer loops reuse is hoisted to them: in ``oc`` order the weights, copied
  once per output-channel tile (reused by every pixel tile), in ``px`` order the input,
  copied once per pixel tile (reused by every channel tile);
* the epilogue is not scheduled here: post-scheduling fusion (``schedules.fusion``) attaches
  it, and any fused operator, to the accumulator tile; its per-channel operands (the bias)
  go to acc once before the first tile (``operands`` ``once``) or with each output-channel
  tile (``tile``; per thread, into its own bank, on banked accumulators), as fusion does for a
  user's own anchor schedule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vta.compiler.accel.insn_intrin import vta_gemm_intrinsic
from vta.compiler.accel.schedules.fusion import attach_epilogue
from vta.compiler.accel.schedules.space import ConvSchedule
from vta.compiler.ir.lower import lower
from vta.compiler.ir.schedule import AttachAt, Schedule, create_schedule
from vta.compiler.ir.tensor import IterVar
from vta.config import HwConfig

if TYPE_CHECKING:
    from vta.compiler.accel.ops.packed_op import PackedOp
    from vta.compiler.ir import stmt as S

__all__ = ["schedule_op", "lower_op"]


def schedule_op(op: PackedOp, hw: HwConfig, s: ConvSchedule) -> Schedule:
    """The schedule primitives for knobs ``s`` on ``op`` (see the module docstring)."""
    sch = create_schedule(op.out)
    acc = sch.cache_write(op.acc, "acc")
    sch[op.acc].compute_inline()
    inp = sch.cache_read(op.pad if op.pad is not None else op.data, "inp", [acc])
    wgt = sch.cache_read(op.kernel, "wgt", [acc])
    if op.pad is not None:
        sch[op.pad].compute_inline()
    out = sch[op.out]
    axes = out.axis
    role = {r: axes[k] for r, k in op.roles.items()}
    vt_role = s.vt_axis if s.vt_axis in role else "ow"
    outer: list[IterVar] = [role["n"]] if "n" in role else []
    inner: list[IterVar] = []
    level: dict[str, IterVar] = {}
    tiles = (("oc", s.tco), ("oh", s.th), ("ow", s.tw))
    if s.order == "px":
        tiles = (*tiles[1:], tiles[0])
    for r, f in tiles:
        if r not in role:
            continue
        t, i = out.split(role[r], f)
        inner.append(i)
        if s.vthreads > 1 and r == vt_role:
            o, vt = out.split(t, s.vthreads)
            outer += [o, vt]
            level[r] = vt
        else:
            outer.append(t)
            level[r] = t
    out.reorder(*outer, *inner, *axes[-2:])
    if s.vthreads > 1:
        out.virtual_thread(level[vt_role])
    tile = outer[-1]
    sch[acc].compute_at(out, tile)
    a = sch[acc]
    red = a.reduce_axis
    ic_o, ic_i = a.split(red[0], s.tci)
    sp = a.axis
    a.reorder(ic_o, *sp[:-2], ic_i, *red[1:-1], *sp[-2:], red[-1])
    hoist = s.tci >= op.kernel.shape[1]
    pixels = [level[r] for r in ("oh", "ow") if r in level]
    if hoist and s.order == "px" and pixels:
        sch[inp].compute_at(out, pixels[-1])  # once per pixel tile, for every channel tile
    else:
        sch[inp].compute_at(a, ic_o)
    if hoist:
        sch[wgt].compute_at(out, level["oc"])  # once per channel tile (per tile in px order)
    else:
        sch[wgt].compute_at(a, ic_o)
    a.tensorize(sp[-2], vta_gemm_intrinsic(hw))
    # the epilogue (requantization, fused operators) on the accumulator tile; the bias (and
    # any per-channel operand) one LOAD ACC before the first tile, or with each channel tile
    # (per thread into its own accumulator bank on banked accumulators)
    at = None
    if s.operands_per_tile(hw):
        # at the channel tile (inside every thread in px order); banked accumulators with
        # threads on rows in oc order: at the thread, so each bank holds its own copy
        banked_rows = hw.alu.acc_banks > 1 and s.vthreads > 1 and s.order == "oc"
        at = AttachAt(out, level[vt_role] if banked_rows else level["oc"])
    return attach_epilogue(sch, op, hw, operands_at=at)


def lower_op(op: PackedOp, hw: HwConfig, s: ConvSchedule) -> S.PrimFunc:
    """``schedule_op`` lowered to the loop-nest IR the VTA pipeline compiles."""
    return lower(schedule_op(op, hw, s), op.args, op.name)
