"""Design-space sweeps: grid files (errors name the file and field), refused points, a small
sweep's rows (cycles, board fit, Pareto front, bit-exact check), the CSV and the PNG, ``vta
sweep``; the board table and the resource estimate against VTA's published PYNQ facts."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from vta.cli import main
from vta.config import HwConfig
from vta.errors import BoardError, SweepError
from vta.resources import BOARDS, board, fits, published_comparison, shares
from vta.sim.energy import Energy
from vta.tune.cache import Cache
from vta.tune.executor import LocalExecutor
from vta.tune.sweep import load_grid, plot, run_sweep, sweep_workloads, write_csv

ROOT = Path(__file__).resolve().parents[2]
PYNQ = ROOT / "hwconfigs" / "pynq.yaml"

GRID = f"""
name: tiny
base: {PYNQ}
boards: [pynq-z1, zcu104]
trials: 2
grid:
  memory.bus_bytes: [8, 16]
points:
  separate ALU: {{alu.separate_pipeline: true, alu.acc_banks: 2}}
  small core: {{gemm.block_in: 8, gemm.block_out: 8}}
  banks alone: {{alu.acc_banks: 2}}
"""


def write(tmp_path: Path, text: str, name: str = "g.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("text, culprit", [
    ("base: x.yaml\ngrd: {}", "grd: unknown key (did you mean 'grid'?)"),
    ("name: x", "base: missing"),
    (f"base: {PYNQ}\ngrid: {{memory.bus_byte: [8]}}",
     "grid.memory.bus_byte: unknown HwConfig field 'memory.bus_byte' (did you mean "
     "'memory.bus_bytes'?)"),
    (f"base: {PYNQ}\ngrid: {{memory.bus_bytes: 8}}", "grid.memory.bus_bytes: expected a "
     "non-empty list"),
    (f"base: {PYNQ}\nboards: [pynq-z3]", "boards: unknown board 'pynq-z3'"),
    (f"base: {PYNQ}\ntrials: -1", "trials: expected an integer >= 0"),
    (f"base: {PYNQ}\npoints: {{a: {{alu.lanes: 8}}}}\ngrid: {{alu.lanes: [8]}}\n", None),
    (f"base: {PYNQ}\npoints: {{a: {{gemm.bogus: 1}}}}", "points.a.gemm.bogus: unknown"),
    ("base: [", "not valid YAML"),
])
def test_grid_errors_name_the_file_and_field(tmp_path: Path, text: str,
                                             culprit: str | None) -> None:
    path = write(tmp_path, text)
    if culprit is None:  # a grid point and a named point may share the changes, not the name
        assert len(load_grid(path).points) == 2
        return
    with pytest.raises(SweepError) as e:
        load_grid(path)
    assert str(e.value).startswith(str(path)) and culprit in str(e.value)


def test_a_small_sweep(tmp_path: Path) -> None:
    """Two bus widths, a separate ALU, a small core whose buffers' depths overflow the ISA
    fields and banks without a separate ALU (both refused by the schema): valid points tuned,
    checked bit-exact and placed on the Pareto front."""
    grid = load_grid(write(tmp_path, GRID))
    assert [p.name for p in grid.points] == ["bus_bytes=8", "bus_bytes=16", "separate ALU",
                                             "small core", "banks alone"]
    with LocalExecutor(1) as ex:
        res = run_sweep(grid, ["matmul:32x32x32"], ex, trials=2)
    rows = {p.point.name: p for p in res.points}
    assert rows["banks alone"].status == "refused" and "alu.acc_banks" in \
        rows["banks alone"].reason
    assert rows["small core"].status == "refused" and "ISA fields" in rows["small core"].reason
    ok = [p for p in res.points if p.status == "ok"]
    assert len(ok) == 3 and all(p.passed and p.cycles > 0 for p in ok)
    assert all(p.cycles <= p.default_cycles for p in ok)
    assert all(p.fits["pynq-z1"] and p.fits["zcu104"] for p in ok)
    assert any(p.pareto for p in ok)
    for p in ok:  # nothing on the front is beaten on every axis
        if p.pareto:
            assert not any(o.ms < p.ms and all(o.resources[k] <= p.resources[k]
                                               for k in ("dsp", "bram36", "lut")) for o in ok)
    # bus width changes no resource: the slower of the two bus widths is not on the front
    b8, b16 = rows["bus_bytes=8"], rows["bus_bytes=16"]
    assert b16.cycles <= b8.cycles and (b8.pareto is False or b8.cycles == b16.cycles)
    csv_path, png = tmp_path / "s.csv", tmp_path / "s.png"
    write_csv(res, csv_path)
    plot(res, png)
    table = list(csv.DictReader(csv_path.open()))
    assert [r["point"] for r in table] == [p.point.name for p in res.points]
    assert {"cycles", "frames_per_s", "dsp", "bram36", "lut", "fits_pynq-z1", "fits_zcu104",
            "pareto", "passed", "status", "reason"} <= set(table[0])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_vta_sweep_writes_the_csv_and_the_plot(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    grid = write(tmp_path, f"base: {PYNQ}\nboards: [pynq-z1]\ngrid: {{memory.bus_bytes: [8]}}\n")
    out = tmp_path / "res" / "sweep"
    assert main(["sweep", "--grid", str(grid), "matmul:16x16x16", "--trials", "0", "--workers",
                 "1", "--out", str(out), "--cache", str(tmp_path / "c.sqlite")]) == 0
    text = capsys.readouterr().out
    assert "bus_bytes=8" in text and "wrote" in text
    assert out.with_suffix(".csv").exists() and out.with_suffix(".png").exists()
    for argv, culprit in ((["sweep", "--grid", str(tmp_path / "none.yaml"), "resnet18"],
                           "none.yaml: cannot read"),
                          (["sweep", "--grid", str(grid), "resnet19"], "unknown workload"),
                          (["sweep", "--grid", str(grid), "matmul", "--trials", "-1"],
                           "--trials must be >= 0")):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("vta: error:") and culprit in err and err.count("\n") == 1


def test_sweep_workloads_expand_a_network() -> None:
    [(name, layers)] = sweep_workloads(["resnet18"])
    assert name == "resnet18" and len(layers) == 11 and sum(n for _, n in layers) == 20
    [(_, [(w, n)])] = sweep_workloads(["matmul:8x16x32"])
    assert (w.spec.m, w.spec.n, w.spec.k, n) == (8, 16, 32, 1)  # type: ignore[union-attr]


def test_boards_and_the_published_pynq_facts() -> None:
    assert board("PYNQ-Z1") is BOARDS["pynq-z1"] and board("xczu7ev") is BOARDS["zcu104"]
    with pytest.raises(BoardError, match="did you mean 'zcu104'"):
        board("zcu14")
    b = BOARDS["pynq-z1"]
    assert (b.dsp, b.bram36, b.lut) == (220, 140, 53200)
    assert (BOARDS["zcu104"].dsp, BOARDS["zcu104"].bram36, BOARDS["zcu104"].lut) == \
        (1728, 312, 230400)
    hw = HwConfig.from_yaml(PYNQ)
    est = hw.resource_estimate()
    assert fits(est, b.limits) and max(shares(est, b.limits).values()) < 1
    rows = {r[0]: r for r in published_comparison(hw)}
    assert rows["on-chip buffers"][3] == "same sizes"
    assert rows["GEMM MACs per cycle"][3] == "same core"
    assert rows["fits the xc7z020"][3] == "agrees"
    wide = hw.with_changes(**{"gemm.block_out": 32})
    assert not fits(wide.resource_estimate(), b.limits)
    assert {r[0]: r for r in published_comparison(wide)}["fits the xc7z020"][3].startswith(
        "DISAGREES")


def test_vta_info_names_the_boards_and_the_published_facts(
        capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["info", "--hw", str(PYNQ), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    # 128 DSP48 of 220: the GEMM core alone (VTA's ALU has no MUL; pynq_mul's would be 87%)
    assert s["boards"]["pynq-z1"].startswith("fits (dsp 58%")
    assert s["resources"]["dsp"] == 128 and s["stock"] is True
    facts = s["against VTA's published PYNQ design"]
    assert facts["fits the xc7z020"].endswith("agrees")
    assert "not in VTA_REFERENCE.md" in facts["synthesised utilisation"]


ENERGY_GRID = f"""
name: energy
base: {PYNQ}
boards: [pynq-z1]
trials: 2
grid:
  memory.bus_bytes: [8, 16]
points:
  fast clock: {{board.clock_mhz: 200.0}}
  half energy: {{energy.scale: 0.5}}
"""


def test_sweep_energy_is_what_vta_run_reports(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Each layer's energy on each point is the energy ``vta run`` reports for the same
    configuration and layer with the sweep's tuned schedule (from its cache), the point's is
    its two layers' summed, and its energy-delay product is
    that energy times the point's latency: a clock change alters the EDP, not the energy; an
    energy scale (which no cycle depends on) alters the energy, not the cycles."""
    grid = load_grid(write(tmp_path, ENERGY_GRID))
    cache = tmp_path / "c.sqlite"
    with LocalExecutor(1) as ex, Cache(cache) as c:
        res = run_sweep(grid, ["matmul:32x32x32", "matmul:16x16x16"], ex, cache=c, trials=2,
                        check=False)
    rows = {p.point.name: p for p in res.points}
    assert all(p.status == "ok" and p.energy is not None for p in res.points)
    for p in res.points:
        assert p.hw is not None and p.energy is not None
        hw_yaml = tmp_path / f"{p.point.name.replace(' ', '_')}.yaml"
        hw_yaml.write_text(yaml.safe_dump(p.hw.to_dict()))
        total = Energy.zero()
        for layer, size in zip(p.layers, ("32", "16"), strict=True):
            assert main(["run", "matmul", size, size, size, "--hw", str(hw_yaml), "--cache",
                         str(cache), "--json"]) == 0
            ran = json.loads(capsys.readouterr().out)
            assert ran["tuned"]["point"] == layer["schedule"]  # the sweep's best schedule
            assert ran["cycles"] == layer["cycles"]
            assert layer["energy_uj"] == ran["energy"]["total_uj"] > 0
            total = total + Energy({k: v * 1e6 for k, v in
                                    ran["energy"]["components_uj"].items()})
        assert p.energy_uj == pytest.approx(total.total_uj, rel=1e-12)  # the layers summed
        assert p.energy_uj == pytest.approx(sum(x["energy_uj"] for x in p.layers), rel=1e-12)
        assert p.edp == pytest.approx(p.energy_uj * p.cycles / (p.hw.board.clock_mhz * 1e3),
                                      rel=1e-12)
        assert p.row(grid.boards)["energy_uj"] == p.energy_uj
        assert p.row(grid.boards)["edp_uj_ms"] == p.edp
    base, fast, half = (rows["bus_bytes=8"], rows["fast clock"], rows["half energy"])
    assert fast.cycles == base.cycles and fast.energy_uj == base.energy_uj
    assert fast.edp == pytest.approx(base.edp / 2)
    assert half.cycles == base.cycles and half.energy_uj == pytest.approx(base.energy_uj / 2)
    csv_path, png = tmp_path / "e.csv", tmp_path / "e.png"
    write_csv(res, csv_path)
    table = {r["point"]: r for r in csv.DictReader(csv_path.open())}
    assert float(table["fast clock"]["energy_uj"]) == fast.energy_uj
    assert float(table["fast clock"]["edp_uj_ms"]) == fast.edp
    summary = res.summary()
    assert summary["points"][0]["energy"] == base.energy.summary()
    plot(res, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    old = json.loads(json.dumps(summary, default=str))  # a summary from before energy: drawn
    for r in old["points"]:
        del r["energy_uj"], r["edp_uj_ms"]
    plot(old, tmp_path / "old.png")
    assert (tmp_path / "old.png").exists()
