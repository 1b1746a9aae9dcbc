"""The accelerator's default schedule for a packed logical compute (``vta.pack``).

A user's logical matmul or convolution, packed by ``vta.compiler.accel.pack.pack``, has the shape
of the built-in ops (``ops.matmul``, ``ops.conv2d``): a contraction over blocked operands (an
input that may go through a padding stage), element-wise epilogue stages reading the previous
stage and at most one more tensor (a bias), and a narrowing output. ``schedule_packed`` turns
it into the ``PackedOp`` the default schedule (``schedules.default.schedule_op``) takes, with
the axis roles (``n``, ``oc``, ``oh``, ``ow``) read off the GEMM's roles, and picks the knobs
with the same cost model (``ranked_schedules``) among the schedules whose tiles divide the
packed extents (``pack`` pads only to whole blocks, and the accelerator takes whole tiles).
Anything else (two contractions, an epilogue reading two tensors) is refused by name: write
the schedule with the primitives.
"""

from __future__ import annotations

from typing import Any

from vta.compiler.accel.ops.packed_op import PackedOp
from vta.compiler.accel.pack import Packed, PackedGemm
from vta.compiler.accel.schedules.default import ConvSchedule, ranked_schedules, schedule_op
from vta.compiler.ir import expr as E
from vta.compiler.ir import poly
from vta.compiler.ir.schedule import Schedule
from vta.compiler.ir.tensor import (
    ComputeOp,
    PlaceholderOp,
    Reduce,
    Tensor,
    TensorRead,
    post_order,
    tensor_reads,
)
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.config import HwConfig
from vta.errors import ScheduleError

__all__ = ["packed_op", "schedule_packed"]


def _reads(t: Tensor) -> list[TensorRead]:
    op = t.op
    assert isinstance(op, ComputeOp)
    return tensor_reads(op.body)


def _fail(why: str) -> ScheduleError:
    return ScheduleError(f"schedule_packed: {why}; write the accelerator schedule with the "
                         f"schedule primitives instead")


def packed_op(p: Packed) -> tuple[PackedOp, PackedGemm]:
    """The ``PackedOp`` (inputs, padding stage, reduction, epilogue, output, roles) of a
    packed compute with one contraction."""
    if len(p.gemms) != 1:
        raise _fail(f"the compute has {len(p.gemms)} contractions, the default schedule one")
    gm = p.gemms[0]
    outs = [t for t in p.args if isinstance(t.op, ComputeOp)]
    if len(outs) != 1:
        raise _fail(f"{len(outs)} outputs, the default schedule computes one")
    out = outs[0]
    order = [t for t in post_order([out]) if isinstance(t.op, ComputeOp)]
    chain = order[order.index(gm.c) + 1:]
    pad = None
    data = gm.x
    if isinstance(gm.x.op, ComputeOp):  # a padding stage over the input
        src = [r.tensor for r in _reads(gm.x)]
        if len(set(src)) != 1 or not isinstance(src[0].op, PlaceholderOp):
            raise _fail(f"stage {gm.x.name} before the GEMM reads more than one input")
        pad, data = gm.x, src[0]
    if not isinstance(gm.y.op, PlaceholderOp):
        raise _fail(f"the GEMM's weights {gm.y.name} are computed, not an input")
    extra: list[Tensor] = []
    prev = gm.c
    for t in chain:
        others = [r.tensor for r in _reads(t) if r.tensor is not prev]
        for o in others:
            if o not in extra:
                extra.append(o)
        prev = t
    if len(extra) > 1 or any(not isinstance(o.op, PlaceholderOp) for o in extra):
        raise _fail(f"the epilogue reads {', '.join(o.name for o in extra)}; the default "
                    f"schedule loads one bias")
    floats = [t.name for t in p.args if t.dtype.startswith("float")]
    if floats:
        raise ScheduleError(f"schedule_packed: {', '.join(floats)} "
                            f"{'is' if len(floats) == 1 else 'are'} floating point; the "
                            f"accelerator computes integers: floats run on the GPU (build for "
                            f"'cuda-emu' or 'cuda')")
    if not chain:
        raise ScheduleError(f"schedule_packed: the output {out.name} is the GEMM's {out.dtype} "
                            f"accumulator; the accelerator stores its out dtype: end the "
                            f"compute with a narrowing stage ({out.name}[i].astype(...)), or "
                            f"build for 'cuda-emu'/'cuda'")
    if chain[-1] is not out:
        raise _fail(f"the output {out.name} is not the end of the GEMM's epilogue")
    c_op = gm.c.op
    assert isinstance(c_op, ComputeOp)
    if gm.bi != 0:
        raise _fail(f"the GEMM {gm.c.name} reduces over its channel blocks after other axes; "
                    f"the default schedule needs them first (list that axis first in sum_)")
    spatial = [k for k in range(len(c_op.axes) - 2) if k not in (gm.b, gm.bo)]
    if len(spatial) > 2:
        raise _fail(f"the GEMM {gm.c.name} has {len(spatial)} spatial axes besides its "
                    f"blocks; the default schedule tiles at most two (rows, columns)")
    roles = {"oc": gm.bo}
    if spatial:
        roles.update(zip(("oh", "ow")[2 - len(spatial):], spatial, strict=True))
        if gm.b is not None:
            roles["n"] = gm.b
    elif gm.b is not None:
        roles["ow"] = gm.b  # a matmul: row blocks are the output columns (ops.matmul)
    inputs = (data, gm.y, *extra)
    return PackedOp(out.name, inputs, pad, gm.c, tuple(chain[:-1]), out, roles), gm


def _spec(op: PackedOp, gm: PackedGemm) -> Conv2dSpec:
    """The convolution the cost model sizes tiles for (extents in blocks and pixels)."""
    c = op.acc.op
    assert isinstance(c, ComputeOp) and isinstance(c.body, Reduce)
    ext = {r: c.axes[k].extent for r, k in op.roles.items()}
    red = c.body.axes
    window = [r.extent for r in red[1:-1]]  # between the channel blocks and the lanes
    kh, kw = [*window, 1, 1][:2]
    stride = 1
    oh = c.axes[op.roles["oh"]] if "oh" in op.roles else None
    if oh is not None:
        for n in E.walk(c.body):
            if isinstance(n, TensorRead) and n.tensor is gm.x:
                for i in n.indices:
                    terms, _ = poly.linear_form(i)
                    if terms.get(oh.var, 0) > 1:
                        stride = terms[oh.var]
    g_b, g_bi, g_bo = c.axes[-2].extent, red[-1].extent, c.axes[-1].extent
    oh_e, ow_e = ext.get("oh", 1), ext.get("ow", 1)
    return Conv2dSpec(n=ext.get("n", 1) * g_b, ic=red[0].extent * g_bi,
                      h=(oh_e - 1) * stride + kh, w=(ow_e - 1) * stride + kw,
                      oc=ext["oc"] * g_bo, kh=kh, kw=kw, stride=stride)


def _divides(op: PackedOp, s: ConvSchedule) -> bool:
    c = op.acc.op
    assert isinstance(c, ComputeOp) and isinstance(c.body, Reduce)
    ext = {r: c.axes[k].extent for r, k in op.roles.items()}
    tile = {"oc": s.tco, "oh": s.th, "ow": s.tw}
    vt = s.vt_axis if s.vt_axis in ext else "ow"
    for r, t in tile.items():
        if r not in ext:
            continue
        if ext[r] % t:
            return False
        if s.vthreads > 1 and r == vt and (ext[r] // t) % s.vthreads:
            return False
    return c.body.axes[0].extent % s.tci == 0


def schedule_packed(p: Packed, hw: HwConfig, **knobs: Any) -> Schedule:
    """The default accelerator schedule of the packed compute ``p`` (module docstring);
    ``knobs`` force any of ``tco``, ``tci``, ``th``, ``tw``, ``vthreads``, ``vt_axis`` (in
    blocks and pixels of the packed compute)."""
    op, gm = packed_op(p)
    vthreads = knobs.pop("vthreads", None)
    # the packed compute's own padding stage keeps every input row (no strided row view)
    ranked = ranked_schedules(_spec(op, gm), hw, 1 << 30, vthreads=vthreads, row_view=False,
                              **knobs)
    fits = [s for s in ranked if _divides(op, s)]
    if not fits and vthreads is None:
        ranked = ranked_schedules(_spec(op, gm), hw, 1 << 30, vthreads=1, row_view=False,
                                  **knobs)
        fits = [s for s in ranked if _divides(op, s)]
    if not fits:
        raise _fail(f"no schedule the model ranks for {op.out.name} has tiles dividing its "
                    f"packed extents {op.acc.shape}")
    return schedule_op(op, hw, fits[0])
