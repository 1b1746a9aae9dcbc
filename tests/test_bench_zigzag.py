"""bench/zigzag_compare.py without running ZigZag: it skips cleanly when zigzag-dse is
missing, derives ZigZag's architecture from the HwConfig (one definition per fact), keeps the
buffers' depths across the grid, and its Kendall tau is the textbook tau-b."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest
from _bench import load_bench

from vta.config import HwConfig

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def zz() -> ModuleType:
    return load_bench("zigzag_compare")


def test_skips_without_zigzag(zz: ModuleType, monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for name in [m for m in sys.modules if m == "zigzag" or m.startswith("zigzag.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "zigzag", None)  # import zigzag raises ImportError
    monkeypatch.setattr(sys, "argv", ["zigzag_compare.py", "--out", str(tmp_path / "o.json")])
    assert zz.main() == 0
    out = capsys.readouterr().out
    assert out.startswith("skipped: zigzag-dse is not installed") and "[bench]" in out
    assert not (tmp_path / "o.json").exists()


def test_architecture_from_the_config(zz: ModuleType, pynq: HwConfig) -> None:
    """pynq: a 16x16 array, an inp entry (128 bits), a wgt entry (2,048 bits) and an acc entry
    (512 bits) a cycle, the scratchpads' sizes in bits, DRAM at 64 bits a cycle."""
    acc = zz.zigzag_accelerator(pynq)
    assert acc["operational_array"]["sizes"] == [16, 16]
    mem = acc["memories"]
    widths = {k: {p["bandwidth_max"] for p in m["ports"]} for k, m in mem.items()}
    assert widths == {"acc_buf": {512}, "inp_buf": {128}, "wgt_buf": {2048}, "dram": {64}}
    assert (mem["inp_buf"]["size"], mem["wgt_buf"]["size"], mem["acc_buf"]["size"]) == \
        (32768 * 8, 262144 * 8, 131072 * 8)
    layer = zz.zigzag_layer("C2", pynq)[0]
    assert layer["loop_sizes"] == [1, 64, 64, 56, 56, 3, 3]
    assert layer["padding"] == [[1, 1], [1, 1]]


def test_grid_variants_keep_depths(zz: ModuleType, pynq: HwConfig) -> None:
    for n in (8, 32):
        hw = zz.variant(pynq, n, 16)
        assert (hw.gemm.block_in, hw.gemm.block_out, hw.memory.bus_bytes) == (n, n, 16)
        assert all(hw.depth(k) == pynq.depth(k) for k in ("inp", "wgt", "acc", "out"))


def test_kendall_tau_and_ranks(zz: ModuleType) -> None:
    assert zz.kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert zz.kendall_tau([1, 2, 3, 4], [40, 30, 20, 10]) == -1.0
    # one swapped pair of 6 pairs: (5 - 1) / 6
    assert zz.kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)
    assert zz.ranks([30.0, 10.0, 20.0]) == [3, 1, 2]
