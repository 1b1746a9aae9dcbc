"""The bounds the tools print are lower bounds: no run beats the classic roofline or the machine
bound, on any shipped configuration or a starved-memory one, for conv2d (strided, padded,
channels that do not fill a block) and matmul; the compulsory traffic counts only what the
computation reads."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.compiler.accel.driver import compulsory_bytes, roofline
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.matmul import MatmulSpec
from vta.compiler.ops.workloads import Workload, resolve
from vta.config import HwConfig
from vta.run.targets import AccelTarget
from vta.sim import simulate

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = {p.stem: HwConfig.from_yaml(p) for p in sorted((ROOT / "hwconfigs").glob("*.yaml"))}
PYNQ = SHIPPED["pynq"]
#: a 1-byte port with a long latency: every layer is memory-bound on it
STARVED = PYNQ.with_changes(name="starved", **{"memory.bus_bytes": 1, "memory.latency": 64})
CONFIGS = [*SHIPPED.values(), STARVED]


@st.composite
def conv_workloads(draw: st.DrawFn) -> Workload:
    k = draw(st.sampled_from([1, 3]))
    stride = draw(st.sampled_from([1, 2]))
    pad = draw(st.integers(0, k - 1))
    hw_ = draw(st.integers(max(k, 3), 12))
    spec = Conv2dSpec(n=1, ic=draw(st.sampled_from([3, 16, 32])), h=hw_, w=hw_,
                      oc=draw(st.sampled_from([16, 32])), kh=k, kw=k, stride=stride, pad=pad)
    return Workload("conv2d", spec)


@st.composite
def matmul_workloads(draw: st.DrawFn) -> Workload:
    return Workload("matmul", MatmulSpec(draw(st.integers(1, 48)), draw(st.integers(1, 48)),
                                         draw(st.integers(1, 48))))


def _cycles(w: Workload, hw: HwConfig) -> tuple[int, dict[str, float]]:
    c = AccelTarget(hw).compile_layer(w)
    return simulate(c.program, hw, timing_only=True).cycles, roofline(c)


def _holds(w: Workload, hw: HwConfig) -> None:
    cycles, b = _cycles(w, hw)
    assert cycles >= b["bound_cycles"], (w, hw.name, cycles, b)
    assert cycles >= b["machine_cycles"], (w, hw.name, cycles, b)
    assert b["machine_cycles"] >= b["bound_cycles"] - 1e-9


@settings(max_examples=15, deadline=None)
@given(w=st.one_of(conv_workloads(), matmul_workloads()), hw=st.sampled_from(CONFIGS))
def test_no_run_beats_a_bound(w: Workload, hw: HwConfig) -> None:
    _holds(w, hw)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(w=st.one_of(conv_workloads(), matmul_workloads()), hw=st.sampled_from(CONFIGS))
def test_no_run_beats_a_bound_thorough(w: Workload, hw: HwConfig) -> None:
    _holds(w, hw)


def test_strided_1x1_reads_a_quarter_of_its_input() -> None:
    """C4 (56x56x64 -> 28x28x128, 1x1, stride 2) reads every other row and column: 28 * 28 * 64
    input bytes of 56 * 56 * 64, plus 64 * 128 weights, 128 * 4 bias bytes; it writes 28 * 28 *
    128 outputs. On the starved port (1 byte a cycle, reads and writes side by side) the
    memory bound is the larger, the writes, and the run takes at least that; counting the
    whole input (56 * 56 * 64 bytes read) would have made a bound above the reads the run
    actually needs."""
    w = resolve("resnet18:C4")
    read, written = compulsory_bytes(w, PYNQ, bias=True)
    assert read == 28 * 28 * 64 + 64 * 128 + 128 * 4 and written == 28 * 28 * 128
    cycles, b = _cycles(w, STARVED)
    assert b["memory_cycles"] == max(read, written) == written
    assert cycles >= b["machine_cycles"] >= written


def test_machine_bound_counts_whole_micro_ops() -> None:
    """C1's reduction is 3 x 7 x 7 = 147 products: any layout needs ceil(147 / 16) = 10 GEMM
    micro-ops per accumulator entry (112 * 112 * 4 entries), more than the true MACs at the
    core's peak; the HLS epilogue adds reset 1 + SHR 2 + ADD 2 + MAX 2 + MIN 2 = 9 a entry."""
    c = AccelTarget(PYNQ).compile_layer(resolve("resnet18:C1"))
    b = roofline(c)
    entries = 112 * 112 * 4
    assert b["gemm_cycles"] == entries * 10 > b["compute_cycles"] == 112 * 112 * 64 * 147 / 256
    assert b["epilogue_per_entry"] == 9 and b["machine_cycles"] == entries * (10 + 9)
    overlap = SHIPPED["pynq_overlap"]
    bo = roofline(AccelTarget(overlap).compile_layer(resolve("resnet18:C1")))
    # beside the GEMMs: reset 1 + SHR 1 + ADD 2 (register) + MAX 1 + MIN 1 = 6 on the ALU
    assert bo["epilogue_per_entry"] == 6
    assert bo["machine_cycles"] == max(entries * 10, entries * 6) == entries * 10
    assert math.isclose(bo["compute_cycles"], b["compute_cycles"])
