"""Ops: packing round trips, numpy references against direct formulas."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.compiler.accel.ops import packing
from vta.compiler.ops.conv2d import Conv2dSpec, conv2d_reference
from vta.compiler.ops.epilogue import Epilogue, apply_epilogue
from vta.compiler.ops.matmul import MatmulSpec, matmul_reference
from vta.errors import ShapeError


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 3), c=st.integers(1, 40), h=st.integers(1, 5), w=st.integers(1, 5),
       b=st.sampled_from([1, 2]), blk=st.sampled_from([16, 32]))
def test_pack_unpack_roundtrip_with_channel_padding(n: int, c: int, h: int, w: int, b: int,
                                                    blk: int) -> None:
    x = np.random.default_rng(0).integers(-128, 128, (n, c, h, w), dtype=np.int8)
    shape = (-(-n // b), -(-c // blk), h, w + 1, b, blk)
    p = packing.pack_data(x, b, blk, shape)
    assert p.shape == shape
    # channel c of image i is lane (i % b, c % blk) of block (i // b, c // blk)
    assert p[0, 0, 0, 0, 0, 0] == x[0, 0, 0, 0]
    back = packing.unpack_result(p, n, c, h, w)
    assert np.array_equal(back, x)
    assert not p[..., w, :, :].any()  # padding is zero


def test_pack_matrix_roundtrip() -> None:
    x = np.arange(5 * 20, dtype=np.int32).reshape(5, 20).astype(np.int8)
    p = packing.pack_matrix(x, 2, 16, (3, 2))
    assert p.shape == (3, 2, 2, 16)
    assert p[1, 1, 0, 3] == x[2, 19]  # row 2 = lane 0 of row block 1; column 19 = 16 + 3
    assert not p[2, :, 1].any() and not p[:, 1, :, 4:].any()  # zero padding
    assert np.array_equal(packing.unpack_matrix(p, 5, 20), x)


def test_conv2d_compute_defines_the_packed_op_in_the_tensor_ir() -> None:
    from vta.compiler.accel.ops.conv2d_packed import conv2d_compute, packed_dims
    from vta.compiler.accel.schedules.default import ConvSchedule
    from vta.compiler.ir.interp import run_func
    from vta.compiler.ir.lower import lower
    from vta.compiler.ir.schedule import create_schedule
    from vta.config import HwConfig

    hw = HwConfig.from_yaml(__import__("_vta_helpers").ROOT / "hwconfigs" / "pynq.yaml")
    spec = Conv2dSpec(n=1, ic=20, h=5, w=4, oc=18, kh=3, kw=3, stride=2, pad=1)
    sch = ConvSchedule(1, 1, 2, 2, 1)
    op = conv2d_compute(spec, hw, sch, Epilogue())
    assert [t.name for t in op.epilogue] == ["res_shr", "res_bias", "res_clip"]
    P = packed_dims(spec, hw, sch)
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (1, 20, 5, 4), dtype=np.int8)
    k = rng.integers(-128, 128, (18, 20, 3, 3), dtype=np.int8)
    bias = rng.integers(-3000, 3000, (18,), dtype=np.int32)
    f = lower(create_schedule(op.out), op.args)  # the unscheduled definition
    got = np.zeros(P.res_shape, np.int8)
    run_func(f, {"data": packing.pack_data(x, 1, 16, P.data_shape),
                 "kernel": packing.pack_kernel(k, 16, 16, P.kernel_shape),
                 "bias": packing.pack_bias(bias, 1, 16, P.ocb),
                 "res": got})
    out = packing.unpack_result(got, 1, 18, spec.oh, spec.ow)
    assert np.array_equal(out, conv2d_reference(x, k, bias, spec, Epilogue()))


def _conv_direct(x, k, spec):  # type: ignore[no-untyped-def]
    out = np.zeros((spec.n, spec.oc, spec.oh, spec.ow), np.int64)
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (spec.pad,) * 2, (spec.pad,) * 2))
    for oy in range(spec.oh):
        for ox in range(spec.ow):
            win = xp[:, :, oy * spec.stride: oy * spec.stride + spec.kh,
                     ox * spec.stride: ox * spec.stride + spec.kw]
            out[:, :, oy, ox] = np.einsum("ncrq,ocrq->no", win, k.astype(np.int64))
    return out.astype(np.int32)


def test_conv2d_reference_matches_direct_loop() -> None:
    spec = Conv2dSpec(n=2, ic=5, h=7, w=6, oc=3, kh=3, kw=2, stride=2, pad=1)
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (2, 5, 7, 6), dtype=np.int8)
    k = rng.integers(-128, 128, (3, 5, 3, 2), dtype=np.int8)
    bias = rng.integers(-500, 500, (3,), dtype=np.int32)
    epi = Epilogue()
    got = conv2d_reference(x, k, bias, spec, epi)
    acc = _conv_direct(x, k, spec)
    want = np.clip((acc >> 8) + bias[None, :, None, None], 0, 127).astype(np.int8)
    assert np.array_equal(got, want)


def test_matmul_reference_and_epilogue_semantics() -> None:
    x = np.array([[127, -128]], np.int8)
    w = np.array([[127, 0], [-128, -128]], np.int8)
    y = matmul_reference(x, w, np.array([1, 2], np.int32), Epilogue(shift=4, clip_lo=-100,
                                                                       clip_hi=100))
    # 16129 >> 4 = 1008 + 1 -> clip 100 ; (-16256 + 16384) = 128 >> 4 = 8 + 2 = 10
    assert y.tolist() == [[100, 10]]
    # arithmetic shift rounds toward minus infinity; int32 wraps
    assert apply_epilogue(np.array([[-1]], np.int32), None, Epilogue(bias=False, clip_lo=-128),
                          1).tolist() == [[-1]]


def test_bad_shapes_are_named_errors() -> None:
    with pytest.raises(ShapeError, match="pad must be smaller"):
        Conv2dSpec(n=1, ic=1, h=4, w=4, oc=1, kh=1, kw=1, pad=1)
    with pytest.raises(ShapeError, match="does not fit"):
        Conv2dSpec(n=1, ic=1, h=2, w=2, oc=1, kh=5, kw=5, pad=1)
    with pytest.raises(ShapeError, match="M must be >= 1"):
        MatmulSpec(0, 1, 1)
