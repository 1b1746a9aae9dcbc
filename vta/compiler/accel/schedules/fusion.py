"""Post-scheduling fusion (Hidet): the anchor is scheduled alone, its epilogue attached after.

A user schedules only the anchor of an accelerator op (``ops.epilogue.PackedOp``: a
convolution or matmul), with the primitives or ``schedules.default``: where its accumulator
tile lives (``cache_write(op.acc, "acc")`` computed at a loop of the output stage), how the
inputs are copied, the tensorize. ``attach_epilogue`` then completes the schedule with every
stage fused after the anchor (the requantization, a residual add, ReLU, a clip: ``op.epilogue``,
built by ``ops.epilogue`` and ``ops.fused.apply_chain``) without the user mentioning them:

* each epilogue stage the schedule left untouched is kept in ``acc`` and computed at the loop
  where the anchor's accumulator is (so it runs on the accumulator tile, as ALU instructions
  chosen by the ALU lowering);
* a widening stage (an int8 operand brought into acc through the GEMM core,
  ``ops.fused.widen``) also gets its operand copied into ``inp`` at that loop, its identity
  weights into ``wgt`` once, and is tensorized onto the GEMM intrinsic;
* per-channel int32 operands (the bias) are copied into ``acc`` once, before the first tile
  (or at ``operands_at``: per virtual thread on banked accumulators, so each thread's epilogue
  reads its own bank);
* per-position int32 operands (shaped like the accumulator: ``ops.chain.POSITION``) are
  copied into ``acc`` at the accumulator tile's loop, a tile beside the accumulator's.

Stages the user did schedule are left as they are. The GPU's counterpart is the output stage of
``vta.gpu.ops``: the same stages inlined into the kernel's store.
"""

from __future__ import annotations

from vta.compiler.accel.insn_intrin import vta_gemm_intrinsic
from vta.compiler.accel.ops.packed_op import PackedOp
from vta.compiler.ir.schedule import AttachAt, Schedule, Stage, reads_of
from vta.compiler.ir.tensor import PlaceholderOp, Reduce, Tensor
from vta.compiler.ops.chain import EYE
from vta.config import HwConfig
from vta.errors import ScheduleError

__all__ = ["attach_epilogue", "anchor_tile"]


def anchor_tile(sch: Schedule, op: PackedOp) -> AttachAt:
    """Where the anchor's accumulator tile is computed: the attach point of the ``acc`` stage
    that ``op.acc`` was ``cache_write``-n into; a ``ScheduleError`` when the schedule has none."""
    copy = sch.stage_of(op.acc)
    cache = None
    if copy is not None:
        for t in reads_of(copy.op.body):
            st = sch.stage_of(t)
            if st is not None and st.scope == "acc" and isinstance(st.op.body, Reduce):
                cache = st
    if cache is None or not isinstance(cache.attach, AttachAt):
        raise ScheduleError(f"post-scheduling fusion of {op.name}: the anchor schedule must "
                            f"compute {op.acc.name} into the acc scratchpad "
                            f"(cache_write({op.acc.name}, 'acc')) at a loop of the output "
                            f"stage (compute_at), so the fused epilogue has a tile to run on")
    return cache.attach


def attach_epilogue(sch: Schedule, op: PackedOp, hw: HwConfig,
                    at: AttachAt | None = None,
                    operands_at: AttachAt | None = None) -> Schedule:
    """Complete ``sch`` (a schedule of ``op``'s anchor) with ``op``'s fused epilogue (module
    docstring) at ``at`` (default: where the anchor's accumulator tile is, ``anchor_tile``),
    its per-channel operands at ``operands_at`` (default: the root, loaded once); returns
    ``sch``."""
    at = at or anchor_tile(sch, op)
    staged = {id(t) for t in op.epilogue}
    widening: list[Stage] = []
    for t in op.epilogue:
        st = sch[t]
        if st.attach is not None or st.scope != "global":
            continue  # scheduled by the user
        st.set_scope("acc")
        st.compute_at(at.stage, at.axis)
        if isinstance(st.op.body, Reduce):
            widening.append(st)
    eye: Tensor | None = None
    for st in widening:
        for p in reads_of(st.op.body):
            if not isinstance(p.op, PlaceholderOp):
                continue
            if p.name == EYE:  # the identity block (ops.fused.identity_weights)
                eye = p
            else:  # the int8 operand: its tile, beside the accumulator's
                c = sch.cache_read(p, "inp", [st])
                sch[c].compute_at(at.stage, at.axis)
        ax, red = st.axis, st.reduce_axis
        st.reorder(red[0], *ax, *red[1:])
        st.tensorize(ax[-2], vta_gemm_intrinsic(hw))
    if eye is not None:
        sch.cache_read(eye, "wgt", [st for st in widening if eye in reads_of(st.op.body)])
    for p in op.inputs:
        readers = [r for r in sch.readers(p) if id(r.tensor) in staged]
        if readers and not any(r is s for r in readers for s in widening):
            c = sch.cache_read(p, "acc", readers)  # loaded once, before the first tile
            if p.shape == op.acc.shape:  # per position: its tile, with the accumulator's
                sch[c].compute_at(at.stage, at.axis)
            elif operands_at is not None:
                sch[c].compute_at(operands_at.stage, operands_at.axis)
    return sch
