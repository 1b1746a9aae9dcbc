"""Zero-point padding on the accelerator: ``passes.fold_pad`` folds a ``pad`` with an input's
zero point into the convolution reading it (``pad_value``), and the accelerator pads with 0 and
adds the difference as a per-position bias (``place.pad_correction``, an int32 operand loaded
with each accumulator tile): the pass before and after, the correction against its definition,
and whole graphs bit-exact with no host step."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from vta.compiler.accel.ops.window_packed import compile_window
from vta.compiler.ops.chain import POSITION, Chain, ChainOperand, bias_stage
from vta.compiler.ops.window import WindowSpec
from vta.errors import CompileError, GraphError, ScheduleError
from vta.graph import interp
from vta.graph.builder import GraphBuilder
from vta.graph.compile import compile_graph
from vta.graph.interp import grouped_conv2d_int32
from vta.graph.ir import Conv2d, Graph, Pad
from vta.graph.passes.fold_pad import fold_pads
from vta.graph.place import pad_correction
from vta.graph.printer import format_graph
from vta.graph.verify import verify_graph
from vta.run.graph import compile_for, run_graph
from vta.run.targets import CudaEmuTarget

from .conftest import hw
from .test_zero_points import per_channel_graph, zero_graph


def _same_values(before: Graph, after: Graph, x: np.ndarray) -> None:
    """Every value of ``after`` has the integers it has in ``before``."""
    eb = interp.run_graph(before, {before.inputs[0].name: x})
    ea = interp.run_graph(after, {after.inputs[0].name: x})
    for v in after.values():
        if v in ea and v in eb:
            assert np.array_equal(ea[v], eb[v]), v.name


def test_the_pad_folds_into_its_convolution() -> None:
    g, x = zero_graph()
    f = fold_pads(g)
    assert not any(isinstance(n, Pad) for n in f.nodes)
    assert len(f.nodes) == len(g.nodes) - 1
    conv = f.nodes[0]
    assert isinstance(conv, Conv2d) and conv.x is g.inputs[0]
    assert (conv.pad, conv.pad_value) == (1, -7)
    assert "pad=1, pad_value=-7" in format_graph(f)
    _same_values(g, f, x)


def test_a_graph_without_pads_is_returned_as_is() -> None:
    b = GraphBuilder("plain")
    x = b.input("x", (1, 16, 4, 4), 0.1)
    w = b.const("w", np.ones((16, 16, 3, 3), np.int8), 0.1)
    g = b.build([b.requantize(b.conv2d(x, w, b.const("b", np.zeros(16, np.int32)), pad=1),
                              ratio=0.01)])
    assert fold_pads(g) is g


def _padded(reader: str, pad: int = 1, kernel: int = 3) -> Graph:
    """``pad(x, pad, 5)`` read by ``reader``: a conv (pad 0 or its own pad 1), or also a
    relu, or the graph's output."""
    rng = np.random.default_rng(0)
    b = GraphBuilder("p")
    x = b.input("x", (1, 16, 6, 6), 0.1, zero=5)
    p = b.pad(x, pad, 5)
    w = b.const("w", rng.integers(-9, 9, (16, 16, kernel, kernel), dtype=np.int8), 0.1)
    bias = b.const("b", np.zeros(16, np.int32))
    c = b.conv2d(p, w, bias, pad=1 if reader == "padded conv" else 0)
    y = b.requantize(c, ratio=0.01)
    outs = [y]
    if reader == "relu":
        outs.append(b.relu(p))
    if reader == "output":
        outs.append(p)
    return b.build(outs)


@pytest.mark.parametrize("reader", ["padded conv", "relu", "output", "small kernel"])
def test_a_pad_another_reader_needs_stays(reader: str) -> None:
    """A pad read by anything but convolutions without padding of their own (or whose kernel
    is not larger than the pad: the conv's pad stays below its kernel) is kept."""
    g = _padded(reader, pad=3 if reader == "small kernel" else 1)
    assert fold_pads(g) is g


def _conv_graph(groups: int, stride: int, zero: int, pad: int = 1, kernel: int = 3,
                size: int = 9) -> tuple[Graph, np.ndarray]:
    """``pad(x, pad, zero)`` then a (grouped) convolution, requantized per tensor: the
    importer's form of an asymmetric input's padded convolution."""
    rng = np.random.default_rng(groups * 7 + stride)
    c = 32
    x = rng.integers(-128, 128, (1, c, size, size), dtype=np.int8)
    b = GraphBuilder("pad")
    xv = b.input("x", x.shape, 0.02, zero=zero)
    w = rng.integers(-127, 128, (c, c // groups, kernel, kernel), dtype=np.int8)
    bias = rng.integers(-999, 999, c).astype(np.int32)
    conv = b.conv2d(b.pad(xv, pad, zero), b.const("w", w, 0.01), b.const("b", bias),
                    stride=stride, groups=groups)
    return b.build([b.requantize(conv, ratio=0.02 * 0.01 / 0.3, zero=-3)]), x


@pytest.mark.parametrize("groups,stride", [(1, 1), (32, 1), (32, 2), (2, 2)])
def test_the_correction_is_the_padding_it_replaces(groups: int, stride: int) -> None:
    """``conv(pad_z(x)) = conv(pad_0(x)) + pad_correction`` on every position, and the
    correction is 0 wherever the window lies inside the image."""
    g, x = _conv_graph(groups, stride, zero=-128)
    f = fold_pads(g)
    conv = next(n for n in f.nodes if isinstance(n, Conv2d))
    assert conv.pad_value == -128
    w = conv.weight.data
    assert w is not None
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-128)
    want = grouped_conv2d_int32(xp, w, stride, 0, groups).astype(np.int64)
    zero_padded = grouped_conv2d_int32(x, w, stride, 1, groups).astype(np.int64)
    corr = pad_correction(conv)
    assert corr.dtype == np.int32 and corr.shape == want.shape
    assert np.array_equal(zero_padded + corr, want)
    inner = corr[:, :, 1:-1, 1:-1]  # 9x9, pad 1: only the first and last rows and columns
    assert not inner.any()
    assert corr[:, :, 0, :].any()
    _same_values(g, f, x)


@pytest.mark.parametrize("groups,stride,zero,size", [(1, 1, -7, 9), (32, 2, -128, 9),
                                                     (32, 1, 127, 4), (1, 2, 33, 6)])
def test_padded_convolutions_run_on_the_accelerator(groups: int, stride: int, zero: int,
                                                    size: int) -> None:
    """pynq_mul: no host step, every MAC on the accelerator, every tensor equal to the
    interpreter's, and the interpreter's output equal to the unfolded graph's."""
    g, x = _conv_graph(groups, stride, zero, size=size)
    cg = compile_graph(g, hw("pynq_mul"), refine=1)
    assert not cg.host_ops
    r = run_graph(cg, {"x": x})
    s = r.summary()
    assert r.passed, s["mismatched_tensors"]
    assert s["mac_share"] == 1.0
    want = interp.run_graph(g, {"x": x})[g.outputs[0]]
    assert np.array_equal(r.outputs[cg.graph.outputs[0]], want)
    assert cg.kernels[0].consts["opnd0"].dtype == np.int32  # the per-position bias


@pytest.mark.parametrize("make", [zero_graph, per_channel_graph])
def test_the_asymmetric_graphs_need_no_host_step(make) -> None:  # type: ignore[no-untyped-def]
    g, x = make()
    r = run_graph(compile_graph(g, hw("pynq_mul"), refine=1), {"x": x})
    s = r.summary()
    assert r.passed, s["mismatched_tensors"]
    assert s["mac_share"] == 1.0
    assert [st["ops"] for st in s["steps"] if st["placement"] == "cpu"] == []


def test_a_position_operand_has_no_prep_and_no_window_takes_one() -> None:
    with pytest.raises(CompileError, match="only a 'tensor' operand has a prep"):
        ChainOperand("o", POSITION, lambda v: v)
    with pytest.raises(CompileError, match="kind must be one of"):
        ChainOperand("o", "pixel")
    chain = Chain((bias_stage(0),), (ChainOperand("opnd0", POSITION),))
    with pytest.raises(ScheduleError, match=r"per-position operands \(opnd0\) are a conv"):
        compile_window(WindowSpec("ewise", 1, 16, 4, 4), hw("pynq"), chain)


def test_verify_names_a_pad_value_outside_int8() -> None:
    g, _ = zero_graph()
    f = fold_pads(g)
    conv = f.nodes[0]
    assert isinstance(conv, Conv2d)
    bad = dataclasses.replace(conv, pad_value=300)
    with pytest.raises(GraphError, match=r"pad_value must be an integer in \[-128, 127\], got 300"):
        verify_graph(f.with_nodes([bad, *f.nodes[1:]]))


@pytest.mark.parametrize("make", [zero_graph, per_channel_graph,
                                  lambda: _conv_graph(32, 2, -128)])
def test_the_gpu_path_folds_the_pads_too(make) -> None:  # type: ignore[no-untyped-def]
    """cuda-emu: the per-position bias an int32 operand of the convolution's epilogue (read
    from global memory at the output's index), bit-exact, no host step."""
    g, x = make()
    r = run_graph(compile_for(g, CudaEmuTarget()), {"x": x})
    s = r.summary()
    assert r.passed, s["mismatched_tensors"]
    assert not [row["ops"] for row in s["steps"] if row["kernel"] == "host"]
