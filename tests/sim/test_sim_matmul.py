"""A tiled 64x64x64 int8 GEMM: numpy's exact answer, and double buffering pays off."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vta.sim import run_reference, simulate, write_trace
from vta.sim.examples import matmul_expected, matmul_program, pack_matmul, unpack_matmul


@pytest.fixture(scope="module")
def operands():
    rng = np.random.default_rng(64)
    return (rng.integers(-128, 128, (64, 64), dtype=np.int8),
            rng.integers(-128, 128, (64, 64), dtype=np.int8))


@pytest.mark.parametrize("nbuf", [1, 2])
def test_tiled_matmul_is_exact(pynq, operands, nbuf):
    a, w = operands
    program = matmul_program(pynq, 64, 64, 64, tile_m=16, nbuf=nbuf)
    inputs = pack_matmul(pynq, a, w)
    result = simulate(program, pynq, inputs)
    got = unpack_matmul(pynq, result.outputs["C"], 64, 64)
    np.testing.assert_array_equal(got, matmul_expected(pynq, a, w))
    ref = run_reference(program, pynq, inputs)["C"]
    np.testing.assert_array_equal(ref, result.outputs["C"])
    assert result.stats.gemm_ops == 64 * 4 * 4
    assert result.stats.acc_hazards == 0


def test_double_buffering_is_faster(pynq, operands):
    inputs = pack_matmul(pynq, *operands)
    serial = simulate(matmul_program(pynq, 64, 64, 64, 16, nbuf=1), pynq, inputs)
    double = simulate(matmul_program(pynq, 64, 64, 64, 16, nbuf=2), pynq, inputs)
    assert double.cycles < serial.cycles
    assert double.stats.utilization > serial.stats.utilization
    assert double.stats.gemm_cycles == serial.stats.gemm_cycles
    timing = simulate(matmul_program(pynq, 64, 64, 64, 16, nbuf=2), pynq, timing_only=True)
    assert timing.cycles == double.cycles and timing.outputs == {}


def test_trace_has_one_track_per_unit(pynq, tmp_path):
    program = matmul_program(pynq, 64, 64, 64, 16, nbuf=2)
    path = tmp_path / "trace.json"
    result = simulate(program, pynq, trace_path=str(path))
    doc = json.loads(path.read_text())
    events = doc["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert sorted(names.values()) == ["compute", "fetch", "load", "store"]
    slices = [e for e in events if e["ph"] == "X" and e["cat"] == "insn"]
    executed = [e for e in slices if names[e["tid"]] != "fetch"]
    assert len(executed) == len(program.instructions)
    gemm = next(e for e in executed if e["name"] == "GEMM" and not e["args"]["reset"])
    assert gemm["args"]["asm"].startswith("GEMM uop=")
    assert gemm["dur"] == gemm["args"]["cycles"] / pynq.board.clock_mhz
    last_end = max(e["ts"] + e["dur"] for e in slices)
    assert last_end == pytest.approx(result.time_us)
    stalls = [e for e in events if e["ph"] == "X" and e["cat"] == "stall"]
    assert any(e["name"].startswith("pop ") for e in stalls)
    write_trace(result, tmp_path / "again.json")
    assert json.loads((tmp_path / "again.json").read_text()) == doc


def test_report_and_dict(pynq):
    from vta.sim import format_report
    result = simulate(matmul_program(pynq, 64, 64, 64, 16, nbuf=2), pynq)
    text = format_report(result, pynq)
    for word in ("cycles", "GOP/s", "GEMM utilization", "compute", "memory wait", "wgt"):
        assert word in text
    d = result.to_dict()
    assert d["cycles"] == result.cycles and set(d["units"]) == {"fetch", "load", "compute",
                                                                 "store"}
    json.dumps(d)
    for u in result.stats.units.values():
        assert u.busy + u.token + u.queue + u.memory + u.idle == result.cycles


def test_small_c2_variant_is_exact(pynq):
    """The benchmark's conv program (bench/c2_program.py), shrunk: 8x8, 32 channels."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from c2_program import c2_program, conv2d_expected, pack_c2, unpack_c2

    rng = np.random.default_rng(5)
    data = rng.integers(-128, 128, (1, 32, 8, 8), dtype=np.int8)
    kernel = rng.integers(-128, 128, (32, 32, 3, 3), dtype=np.int8)
    program = c2_program(pynq, rows=2, size=8, channels=32)
    result = simulate(program, pynq, pack_c2(pynq, data, kernel))
    got = unpack_c2(pynq, result.outputs["O"], 32, 8)
    np.testing.assert_array_equal(got, conv2d_expected(pynq, data, kernel))
    assert result.stats.gemm_ops == 8 * 8 * 9 * 2 * 2 and result.stats.acc_hazards == 0
