"""Whole graphs on the simulated accelerator: every tensor bit-exact, bounds, trace, fusion
versus no fusion, host fallbacks named."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vta.errors import GraphError
from vta.graph.builder import GraphBuilder
from vta.graph.compile import compile_graph
from vta.graph.ir import Graph, Requantize
from vta.graph.place import HostOp, Kernel
from vta.run.graph import run_graph
from vta.run.report import format_run

from .conftest import hw, mini_graph


def test_small_resnet_bit_exact_on_the_accelerator(compiled_small, small_image,  # type: ignore[no-untyped-def]
                                                   tmp_path: Path) -> None:
    trace = tmp_path / "net.json"
    r = run_graph(compiled_small, small_image, trace_path=str(trace))
    s = r.summary()
    assert r.passed and s["passed"] and not s["mismatched_tensors"]
    assert s["host_ops"] == 0 and s["mac_share"] == 1.0 and s["kernels"] == 23
    assert all(row["checked"] > 0 and row["mismatches"] == 0 for row in s["steps"])
    # each kernel's machine bound is a true lower bound on its cycles
    for row in s["steps"]:
        assert row["cycles"] >= row["machine_bound_cycles"] > 0, row["op"]
    assert s["cycles"] == sum(row["cycles"] for row in s["steps"])
    assert s["peak_dram_bytes"] < s["naive_dram_bytes"]
    # one timeline: an ops track with one slice per step, every unit's events after their op
    doc = json.loads(trace.read_text())
    ops = [e for e in doc["traceEvents"] if e.get("cat") == "op"]
    assert [e["args"]["step"] for e in ops] == list(range(23))
    starts = [e["ts"] for e in ops]
    assert starts == sorted(starts) and doc["otherData"]["cycles"] == s["cycles"]
    units = [e for e in doc["traceEvents"] if e.get("cat") == "insn"]
    last = max(e["ts"] + e["dur"] for e in units)
    assert abs(last - s["cycles"] / 100.0) < 1.0  # pynq: 100 MHz, timestamps in us
    text = format_run(s, 100)
    assert "PASS: the outputs and all 23 stored tensors bit-exact" in text
    assert "conv2d+requantize+add+relu" in text and "host fallbacks: none" in text


def test_fusion_saves_dram_traffic_and_cycles(compiled_small, small_resnet: Graph,  # type: ignore[no-untyped-def]
                                              small_image: np.ndarray) -> None:
    fused = run_graph(compiled_small, small_image)
    plain = run_graph(compile_graph(small_resnet, hw(), fusion="requant", refine=1),
                      small_image)
    a, b = fused.summary(), plain.summary()
    assert a["passed"] and b["passed"]
    assert b["kernels"] == 48 and a["kernels"] == 23
    assert a["cycles"] < b["cycles"] and a["dram_bytes"] < b["dram_bytes"]


def _signed_pool_graph(scale: float = 1 / 16) -> Graph:
    """A convolution whose output may be negative, then a padded max-pool; the requantize's
    output ``scale`` (the default makes its scale ratio a power of two: a shift)."""
    rng = np.random.default_rng(2)
    b = GraphBuilder("signed")
    x = b.input("x", (1, 16, 8, 8), 1 / 128)
    w = b.const("w", rng.integers(-40, 40, (16, 16, 3, 3), dtype=np.int8), 1 / 128)
    bias = b.const("b", rng.integers(-99, 99, (16,), dtype=np.int32))
    q = b.requantize(b.conv2d(x, w, bias, pad=1), scale=scale)
    return b.build([b.max_pool2d(q, 3, 2, 1)])


def test_host_fallbacks_are_named_and_still_exact() -> None:
    """A padded max-pool over a maybe-negative input runs on the host (LOAD pads zeros), named,
    and still checks. A requantization multiplier that is not a power of two has no
    instruction on VTA's ALU (no MUL): the graph is refused by node and scale, naming pynq_mul,
    where it runs."""
    g = _signed_pool_graph()
    x = np.random.default_rng(3).integers(-128, 128, (1, 16, 8, 8), dtype=np.int8)
    h = hw()
    cg = compile_graph(g, h)
    kinds = [type(s).__name__ for s in cg.steps]
    assert kinds == ["Kernel", "HostOp"]
    host = cg.steps[1]
    assert isinstance(host, HostOp) and "-inf" in host.reason
    # the host unpacks the convolution's output for the pool, whose output stays on the host
    assert [(t.kind, t.tensor.name) for t in cg.layouts.transforms] == [
        ("pack", "x"), ("unpack", "conv_q")]
    r = run_graph(cg, x)
    s = r.summary()
    assert r.passed and s["host_ops"] == 1 and s["steps"][1]["placement"] == "cpu"
    assert "host fallback: max-pool pads with -inf" in format_run(s, 100)

    g2 = _signed_pool_graph(scale=0.05)
    (mult,) = {n.mult for n in g2.nodes if isinstance(n, Requantize)}
    with pytest.raises(GraphError, match=rf"graph signed: requantize conv_q: its multiplier "
                                         rf"{mult} \(scale ratio [0-9.e-]+ = {mult} / 2\*\*\d+, "
                                         rf"not a power of two\) needs ALU MUL, which pynq does "
                                         rf"not have .* run it on pynq_mul"):
        compile_graph(g2, h)
    cg2 = compile_graph(g2, hw("pynq_mul"))
    assert [type(s).__name__ for s in cg2.steps] == ["Kernel", "HostOp"]
    assert run_graph(cg2, x).passed


def test_linked_programs_address_the_plan(compiled_small) -> None:  # type: ignore[no-untyped-def]
    cg = compiled_small
    mem = cg.memory
    names = {t.name for t in cg.layouts.tensors}
    for k, (st, prog) in enumerate(zip(cg.steps, cg.programs, strict=True)):
        assert isinstance(st, Kernel) and prog is not None
        for a in prog.allocations:
            if a.name in names:
                assert a.offset + a.nbytes <= mem.peak_bytes
            else:
                assert a.offset >= mem.const_base
        # the tensor a kernel writes is named after its graph value
        assert cg.layouts.bindings[k][st.write[0]].name == st.group.output.name


def test_every_kernel_kind_with_a_batch_of_two() -> None:
    """conv + ReLU, max-pool, conv + add + ReLU, a stand-alone add, the average pool and the
    classifier over two images (two row blocks of the packed layouts)."""
    g, x = mini_graph(batch=2)
    cg = compile_graph(g, hw(), refine=1)
    assert [st.kind for st in cg.steps] == ["conv2d", "max", "conv2d", "ewise", "sum", "dense"]
    r = run_graph(cg, x)
    s = r.summary()
    assert r.passed and s["frames_per_s"] == pytest.approx(2 / (s["time_ms"] / 1e3))


def test_average_pool_without_mul_needs_a_power_of_two() -> None:
    """On VTA's ALU (pynq: no MUL) the global average pool runs on the accelerator as the GEMM
    core's sum and shifts when its scale ratio is a power of two (a 4x4 image, equal scales:
    divide by 16); when it is not (3x3: divide by 9) it runs on the host, the step naming the
    pool's multiplier (bit-exact: the interpreter's arithmetic), and on the accelerator of
    pynq_mul. A shift-only graph keeps the 1/9 in the pool's scale (``requant="shift"``): a
    shift again, on pynq's accelerator."""
    rng = np.random.default_rng(9)
    for size, on_vta in ((4, True), (3, False)):
        b = GraphBuilder("gap")
        x = b.input("x", (1, 32, size, size), 0.5)
        g = b.build([b.global_avg_pool(x, scale=0.5)])
        (node,) = g.nodes
        assert (node.mult == 1) == on_vta
        xv = rng.integers(-128, 128, (1, 32, size, size), dtype=np.int8)
        if on_vta:
            cg = compile_graph(g, hw(), refine=1)
        else:
            host = compile_graph(g, hw(), refine=1)
            assert isinstance(host.steps[0], HostOp)
            assert f"its multiplier {node.mult} / 2**{node.shift}" in host.steps[0].reason
            assert "pynq's ALU has no MUL" in host.steps[0].reason
            assert run_graph(host, xv).passed
            cg = compile_graph(g, hw("pynq_mul"), refine=1)
        assert isinstance(cg.steps[0], Kernel)
        assert run_graph(cg, xv).passed
    b = GraphBuilder("gap", calibrate={"x": xv}, requant="shift")
    g = b.build([b.global_avg_pool(b.input("x", xv.shape, 0.5))])
    (node,) = g.nodes
    assert node.mult == 1 and node.out.type.scale == pytest.approx(0.5 * 2 ** node.shift / 9)
    assert run_graph(compile_graph(g, hw(), refine=1), xv).passed
