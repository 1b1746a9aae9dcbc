"""vta.pack: the accelerator's blocked layout of a logical compute.

The layouts found are VTA's (the runtime's packing of the built-in ops gives the same arrays),
``Layout.pack``/``unpack`` round-trip, the packed compute is the logical one (the interpreter
agrees on both), and computes that do not fit are refused naming the tensor and index."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import vta.testing as vt
from vta.compiler import (
    LayoutError,
    compute,
    create_schedule,
    pack,
    pack_bias,
    pack_data,
    pack_kernel,
    pack_matrix,
    placeholder,
    reduce_axis,
    run_func,
    sum_,
)
from vta.compiler.accel.pack import Lane, Layout
from vta.compiler.ir.expr import select
from vta.compiler.ir.lower import lower
from vta.config import HwConfig


def dense(M: int, N: int, K: int, shift: int = 6) -> list:  # type: ignore[type-arg]
    return vt.logical_dense(M, N, K, shift)


def conv(N: int, C: int, H: int, OC: int, k: int, s: int, p: int) -> list:  # type: ignore[type-arg]
    data = placeholder((N, C, H, H), "int8", "data")
    kern = placeholder((OC, C, k, k), "int8", "kernel")
    OH = (H + 2 * p - k) // s + 1
    pad = compute((N, C, H + 2 * p, H + 2 * p), lambda n, c, y, x: select(
        (y >= p) & (y < H + p) & (x >= p) & (x < H + p), data[n, c, y - p, x - p], 0),
        "data_pad")
    ic, kh, kw = reduce_axis(C, "ic"), reduce_axis(k, "kh"), reduce_axis(k, "kw")
    out = compute((N, OC, OH, OH), lambda n, o, y, x: sum_(
        pad[n, ic, y * s + kh, x * s + kw].astype("int32") * kern[o, ic, kh, kw].astype("int32"),
        [ic, kh, kw]), "conv")
    return [data, kern, out]


def interpret(args: list, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:  # type: ignore[type-arg]
    """Run the unscheduled compute of ``args`` on ``inputs`` (arrays in its own layout)."""
    f = lower(create_schedule([t for t in args if hasattr(t.op, "body")]), args)
    mem = {b.name: (inputs[b.name] if b.name in inputs else np.zeros(b.shape, b.dtype))
           for b in f.params}
    run_func(f, mem)
    return mem


def test_dense_layouts_are_vtas(pynq: HwConfig) -> None:
    P = pack(dense(5, 40, 50), pynq)
    L = P.layouts
    assert L["x"].packed_shape == (5, 4, 1, 16) and L["w"].packed_shape == (3, 4, 16, 16)
    assert L["bias"].packed_shape == (3, 1, 16) and L["res"].packed_shape == (5, 3, 1, 16)
    assert L["bias"].entry == (Lane("b", None, 1), Lane("bo", 0, 16))
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (5, 50), dtype=np.int8)
    w = rng.integers(-128, 128, (40, 50), dtype=np.int8)
    b = rng.integers(-9, 9, 40, dtype=np.int32)
    # the same arrays as the runtime's packing of the built-in matmul op
    assert np.array_equal(L["x"].pack(x), pack_matrix(x, 1, 16, (5, 4)))
    assert np.array_equal(L["w"].pack(w), pack_matrix(w, 16, 16, (3, 4)))
    assert np.array_equal(L["bias"].pack(b), pack_bias(b, 1, 16, 3))
    names = [t.name for t in P.args]
    assert names == ["x", "w", "bias", "res"]
    acc = P["acc"].op
    assert [a.name for a in acc.axes] == ["i_o", "j_o", "i_i", "j_i"]  # type: ignore[attr-defined]
    assert [a.name for a in acc.body.axes] == ["k_o", "k_i"]  # type: ignore[attr-defined]


def test_conv_layouts_are_nchwnc(pynq: HwConfig) -> None:
    P = pack(conv(1, 20, 7, 24, 3, 2, 1), pynq)
    L = P.layouts
    assert L["data"].packed_shape == (1, 2, 7, 7, 1, 16)
    assert L["kernel"].packed_shape == (2, 2, 3, 3, 16, 16)
    assert L["conv"].packed_shape == (1, 2, 4, 4, 1, 16)
    rng = np.random.default_rng(1)
    d = rng.integers(-128, 128, (1, 20, 7, 7), dtype=np.int8)
    k = rng.integers(-128, 128, (24, 20, 3, 3), dtype=np.int8)
    assert np.array_equal(L["data"].pack(d), pack_data(d, 1, 16, (1, 2, 7, 7)))
    assert np.array_equal(L["kernel"].pack(k), pack_kernel(k, 16, 16, (2, 2, 3, 3)))


def transposed() -> list:  # type: ignore[type-arg]
    """A dense layer whose output is stored transposed (its layout follows the GEMM's)."""
    x, w, bias, res = dense(3, 20, 24)
    t = compute((20, 3), lambda j, i: res[i, j], "t")
    return [x, w, bias, t]


@pytest.mark.parametrize("make", [lambda: dense(3, 20, 24), lambda: conv(2, 5, 6, 7, 3, 1, 1),
                                  lambda: conv(1, 16, 5, 16, 1, 2, 0), transposed])
def test_packed_compute_means_the_same(make, pynq: HwConfig) -> None:  # type: ignore[no-untyped-def]
    """The packed compute on packed arrays, unpacked, equals the logical one (small blocks:
    batch 2 pads the rows too)."""
    for hw in (pynq, vt.small_hw(batch=2, block=4)):
        args = make()
        ins = vt.random_inputs(args, 3)
        want = interpret(args, ins)
        P = pack(make(), hw)
        packed = {n: P.layouts[n].pack(a) for n, a in ins.items()}
        got = interpret(list(P.args), packed)
        for t in args:
            if hasattr(t.op, "body"):
                assert np.array_equal(P.layouts[t.name].unpack(got[t.name]), want[t.name])


@settings(max_examples=40, deadline=None)
@given(shape=vt.shapes(3, 1, 7), f1=st.sampled_from([1, 2, 4]), f2=st.sampled_from([1, 3, 16]),
       d1=st.integers(0, 2), d2=st.sampled_from([None, 0, 1, 2]), seed=vt.seeds())
def test_layout_round_trip(shape, f1, f2, d1, d2, seed) -> None:  # type: ignore[no-untyped-def]
    if d2 == d1:
        d2 = None
    lay = Layout("t", shape, "int16", (Lane("b", d1, f1), Lane("bo", d2, f2)))
    a = np.random.default_rng(seed).integers(-999, 999, shape).astype(np.int16)
    p = lay.pack(a)
    assert p.shape == lay.packed_shape
    assert np.array_equal(lay.unpack(p), a)
    assert np.array_equal(lay.unpack(p.reshape(-1, f1, f2)), a)  # the simulator's entry view
    if d2 is None:  # a broadcast lane repeats the tensor
        assert all(np.array_equal(p[..., 0], p[..., j]) for j in range(f2))


def test_layout_rejects_bad_arrays(pynq: HwConfig) -> None:
    L = pack(dense(2, 16, 16), pynq).layouts["x"]
    with pytest.raises(LayoutError, match=r"x: logical array has shape \[3, 16\], expected "
                                          r"\[2, 16\]"):
        L.pack(np.zeros((3, 16), np.int8))
    with pytest.raises(LayoutError, match="x: logical array has dtype int32, expected int8"):
        L.pack(np.zeros((2, 16), np.int32))


def test_refusals_name_the_tensor(pynq: HwConfig) -> None:
    a = placeholder((4, 4), "int8", "a")
    ew = compute((4, 4), lambda i, j: a[i, j] + 1, "ew")
    with pytest.raises(LayoutError, match="no contraction"):
        pack([a, ew], pynq)
    x = placeholder((4, 32), "int8", "x")
    w = placeholder((32, 32), "int8", "w")
    k = reduce_axis(32, "k")
    # every output axis indexes both operands: nothing for the block_out lanes
    bad = compute((4,), lambda i: sum_(x[i, k].astype("int32") * w[i, k].astype("int32"), k),
                  "bad")
    with pytest.raises(LayoutError, match="contraction bad: cannot map it onto the GEMM core: "
                                          "no output axis indexes a dimension of w"):
        pack([x, w, bad], pynq)
    # a stage reading the accumulators both ways round: one tensor, two layouts
    w3 = placeholder((4, 32), "int8", "w3")
    sq = compute((4, 4), lambda i, j: sum_(x[i, k].astype("int32") * w3[j, k].astype("int32"),
                                           k), "sq")
    sym = compute((4, 4), lambda i, j: sq[i, j] + sq[j, i], "sym")
    with pytest.raises(LayoutError, match=r"tensor sq needs two accelerator layouts: "
                                          r"sq\[4, 4\] -> .*\(the GEMM sq\) and .*\(read by sym\)"):
        pack([x, w3, sym], pynq)
    # K = 20 is padded to 32, and a stage that adds 1 would not keep the padding zero
    x2 = placeholder((4, 20), "int8", "x2")
    w2 = placeholder((32, 20), "int8", "w2")
    k2 = reduce_axis(20, "k")
    inc = compute((4, 20), lambda i, j: x2[i, j] + 1, "inc")
    c2 = compute((4, 32), lambda i, j: sum_(inc[i, k2].astype("int32")
                                            * w2[j, k2].astype("int32"), k2), "c2")
    with pytest.raises(LayoutError, match=r"contraction c2: its reduction axis k \(20\) is "
                                          r"padded to 16-element blocks, and stage inc"):
        pack([x2, w2, c2], pynq)
    with pytest.raises(LayoutError, match="no tensor named 'nope'"):
        pack(dense(2, 16, 16), pynq)["nope"]
