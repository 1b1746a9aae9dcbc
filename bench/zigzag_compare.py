"""vta beside ZigZag on the same pynq-like architecture: ResNet-18's convolutions, per layer and
over a small grid of hardware variants.

ZigZag (zigzag-dse, KU Leuven; Mei et al., "ZigZag: Enlarging Joint Architecture-Mapping
Design Space Exploration for DNN Accelerators", IEEE TC 2021) is an analytical explorer: it
searches spatial and temporal mappings of a layer onto a memory hierarchy and estimates
latency and energy, with no values and no instruction stream. vta compiles the layer
(default schedule, no cache) and runs the program through the timing-only cycle-level
simulator.

The architecture given to ZigZag is derived from the same ``HwConfig`` (one definition per
fact): a ``block_out`` x ``block_in`` MAC array (D1 unrolls output channels K, D2 input
channels C, as VTA's GEMM core does), the inp, wgt and acc scratchpads at their sizes, each
port as wide as VTA's GEMM core reads it a cycle (an inp entry, a wgt entry, an acc entry
read and written), and DRAM at ``memory.bus_bytes`` a cycle, one port shared by every operand
(``memory.shared_port``). Per-access energies are vta's own (``vta.sim.energy``: Horowitz's
45 nm figures, SRAM per byte by buffer size, times the port's bytes), so the two energy models
differ in what they count, not in their unit costs. ZigZag's own assumptions stay its own
(memory latency 1, its latency model of stalls and on-/off-loading).

Per layer at ``--hw``: cycles from each, their ratio, and each tool's wall (vta: compile and
simulate; ZigZag: its mapping search and cost model, ``opt=latency``, ``lpf_limit`` 6). Over
the grid (array sizes x DRAM bus widths; buffers keep their depth in entries): each tool's
ResNet-18 total (every layer times its repeats), the rank of each variant, and Kendall's tau
between the two rankings (tau-b, ties counted).

    python bench/zigzag_compare.py [--hw hwconfigs/pynq.yaml] [--layers C1,...,C11]
        [--arrays 8,16,32] [--bus 4,8,16] [--grid-layers C2,C5,C8,C11] [--no-grid]

Without zigzag-dse (``pip install -e '.[bench]'``) it prints why and exits 0. Prints tables and
writes bench/results/zigzag_compare.json.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vta.compiler.ops.workloads import RESNET18, RESNET18_REPEATS, resolve  # noqa: E402
from vta.config import DTYPE_BITS, HwConfig  # noqa: E402
from vta.run.targets import AccelTarget  # noqa: E402
from vta.sim.energy import HOROWITZ_45NM, sram_pj_per_byte  # noqa: E402

#: the buffer depths (entries) every grid variant keeps: pynq's
_DEPTH_KINDS = ("inp", "wgt", "acc", "out")


def zigzag_available() -> str | None:
    """None when zigzag-dse imports, else why not."""
    try:
        import zigzag.api  # noqa: F401
    except ImportError as e:
        return f"zigzag-dse is not installed ({e}); pip install -e '.[bench]' to compare"
    return None


def variant(base: HwConfig, n: int, bus: int) -> HwConfig:
    """``base`` with an n x n GEMM core and a ``bus``-byte DRAM bus, each buffer keeping its
    depth in entries (its bytes scale with the entry)."""
    changes: dict[str, Any] = {"name": f"{n}x{n}_bus{bus}", "gemm.block_in": n,
                               "gemm.block_out": n, "memory.bus_bytes": bus}
    g = base.gemm
    lanes = {"inp": g.batch * n, "wgt": n * n, "acc": g.batch * n, "out": g.batch * n}
    for kind in _DEPTH_KINDS:
        bits = DTYPE_BITS[base.entry(kind).dtype]
        changes[f"scratchpad.{kind}"] = base.depth(kind) * lanes[kind] * bits // 8
    return base.with_changes(**changes)


def _port(name: str, kind: str, bits: int, alloc: list[str]) -> dict[str, Any]:
    return {"name": name, "type": kind, "bandwidth_min": bits, "bandwidth_max": bits,
            "allocation": alloc}


def _sram(size: int, operand: str, port_bytes: int, ports: list[dict[str, Any]]
          ) -> dict[str, Any]:
    pj = sram_pj_per_byte(size) * port_bytes
    return {"size": size * 8, "r_cost": pj, "w_cost": pj, "area": 0, "latency": 1,
            "auto_cost_extraction": False, "operands": [operand], "ports": ports,
            "served_dimensions": ["D1", "D2"]}


def zigzag_accelerator(hw: HwConfig) -> dict[str, Any]:
    """ZigZag's accelerator description of ``hw`` (module docstring)."""
    g = hw.gemm
    if g.batch != 1:
        raise SystemExit(f"{hw.name}: ZigZag's array here is block_out x block_in; batch "
                         f"{g.batch} is not mapped")
    acc_bits = g.block_out * DTYPE_BITS[g.acc_dtype]
    inp_bits = g.block_in * DTYPE_BITS[g.inp_dtype]
    wgt_bits = g.block_in * g.block_out * DTYPE_BITS[g.wgt_dtype]
    dram_bits = hw.memory.bus_bytes * 8
    dram_pj = HOROWITZ_45NM["dram_byte"] * hw.memory.bus_bytes
    mac_pj = HOROWITZ_45NM["mult8"] + HOROWITZ_45NM["add32"]
    return {
        "name": hw.name,
        "memories": {
            "acc_buf": _sram(hw.scratchpad.acc, "O", acc_bits // 8, [
                _port("r_port_1", "read", acc_bits, ["O, tl"]),
                _port("w_port_1", "write", acc_bits, ["O, fl"]),
                _port("r_port_2", "read", acc_bits, ["O, th"]),
                _port("w_port_2", "write", acc_bits, ["O, fh"])]),
            "inp_buf": _sram(hw.scratchpad.inp, "I1", inp_bits // 8, [
                _port("r_port_1", "read", inp_bits, ["I1, tl"]),
                _port("w_port_1", "write", inp_bits, ["I1, fh"])]),
            "wgt_buf": _sram(hw.scratchpad.wgt, "I2", wgt_bits // 8, [
                _port("r_port_1", "read", wgt_bits, ["I2, tl"]),
                _port("w_port_1", "write", wgt_bits, ["I2, fh"])]),
            "dram": {"size": 10**10, "r_cost": dram_pj, "w_cost": dram_pj, "area": 0,
                     "latency": 1, "auto_cost_extraction": False,
                     "operands": ["I1", "I2", "O"],
                     "ports": [_port("rw_port_1", "read_write", dram_bits,
                                     ["I1, fh", "I1, tl", "I2, fh", "I2, tl", "O, fh",
                                      "O, tl", "O, fl", "O, th"])],
                     "served_dimensions": ["D1", "D2"]},
        },
        "operational_array": {"input_precision": [DTYPE_BITS[g.inp_dtype],
                                                  DTYPE_BITS[g.wgt_dtype]],
                              "unit_energy": mac_pj, "unit_area": 1,
                              "dimensions": ["D1", "D2"], "sizes": [g.block_out, g.block_in]},
    }


def zigzag_mapping(hw: HwConfig) -> list[dict[str, Any]]:
    """K over D1 and C over D2: VTA's GEMM core (an inp vector times a wgt block)."""
    return [{"name": "default",
             "spatial_mapping": {"D1": [f"K, {hw.gemm.block_out}"],
                                 "D2": [f"C, {hw.gemm.block_in}"]},
             "memory_operand_links": {"O": "O", "W": "I2", "I": "I1"}}]


def zigzag_layer(name: str, hw: HwConfig) -> list[dict[str, Any]]:
    """ResNet-18 layer ``name`` as a ZigZag workload (one conv layer, padding included)."""
    size, ic, oc, k, pad, stride = RESNET18[name]
    out = (size + 2 * pad - k) // stride + 1
    g = hw.gemm
    return [{
        "id": 0, "name": name, "operator_type": "Conv",
        "equation": "O[b][k][oy][ox]+=W[k][c][fy][fx]*I[b][c][iy][ix]",
        "dimension_relations": [f"ix={stride}*ox+1*fx", f"iy={stride}*oy+1*fy"],
        "loop_dims": ["B", "K", "C", "OY", "OX", "FY", "FX"],
        "loop_sizes": [1, oc, ic, out, out, k, k],
        "operand_precision": {"W": DTYPE_BITS[g.wgt_dtype], "I": DTYPE_BITS[g.inp_dtype],
                              "O": DTYPE_BITS[g.acc_dtype], "O_final": DTYPE_BITS[g.out_dtype]},
        "operand_source": {"I": 0},
        "pr_loop_dims": ["IX", "IY"], "pr_loop_sizes": [size + 2 * pad, size + 2 * pad],
        "padding": [[pad, pad], [pad, pad]],
    }]


def run_zigzag(name: str, hw: HwConfig, tmp: Path) -> dict[str, Any]:
    """ZigZag's latency-optimal mapping of layer ``name`` on ``hw``: cycles, energy, wall."""
    from zigzag.api import get_hardware_performance_zigzag

    acc, mapping = tmp / "acc.yaml", tmp / "map.yaml"
    acc.write_text(yaml.safe_dump(zigzag_accelerator(hw), sort_keys=False))
    mapping.write_text(yaml.safe_dump(zigzag_mapping(hw), sort_keys=False))
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        energy, latency, _ = get_hardware_performance_zigzag(
            zigzag_layer(name, hw), str(acc), str(mapping), opt="latency",
            dump_folder=str(tmp / "out"), loma_show_progress_bar=False)[:3]
    return {"cycles": int(latency), "energy_uj": energy / 1e6,
            "wall_s": time.perf_counter() - t0}


def run_vta(name: str, hw: HwConfig) -> dict[str, Any]:
    """vta's default schedule for layer ``name`` on ``hw`` (compiled cold), timed by the
    timing-only simulator."""
    target = AccelTarget(hw)
    w = resolve(f"resnet18:{name}")
    t0 = time.perf_counter()
    compiled = target.compile_layer(w)
    t1 = time.perf_counter()
    cycles = target.cycles(compiled.program)
    t2 = time.perf_counter()
    return {"cycles": int(cycles), "compile_s": t1 - t0, "sim_s": t2 - t1, "wall_s": t2 - t0}


def kendall_tau(a: list[float], b: list[float]) -> float:
    """Kendall's tau-b of two equally long score lists (ties in either counted as ties)."""
    conc = disc = ta = tb = 0
    for i in range(len(a)):
        for j in range(i + 1, len(a)):
            da, db = a[i] - a[j], b[i] - b[j]
            if da == 0 and db == 0:
                continue
            if da == 0:
                ta += 1
            elif db == 0:
                tb += 1
            elif (da > 0) == (db > 0):
                conc += 1
            else:
                disc += 1
    denom = ((conc + disc + ta) * (conc + disc + tb)) ** 0.5
    return (conc - disc) / denom if denom else 1.0


def ranks(values: list[float]) -> list[int]:
    """1 for the smallest (fastest) value."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0] * len(values)
    for r, i in enumerate(order, 1):
        out[i] = r
    return out


def per_layer(hw: HwConfig, layers: list[str], tmp: Path) -> list[dict[str, Any]]:
    rows = []
    print(f"{'layer':5} {'vta cycles':>11} {'zigzag cycles':>13} {'zz/vta':>7} "
          f"{'vta compile s':>13} {'vta sim s':>9} {'zigzag s':>8}", flush=True)
    for name in layers:
        v, z = run_vta(name, hw), run_zigzag(name, hw, tmp)
        rows.append({"layer": name, "repeats": RESNET18_REPEATS[name], "vta": v, "zigzag": z,
                     "zigzag_over_vta": z["cycles"] / v["cycles"]})
        print(f"{name:5} {v['cycles']:>11,} {z['cycles']:>13,} {z['cycles'] / v['cycles']:>7.3f} "
              f"{v['compile_s']:>13.2f} {v['sim_s']:>9.2f} {z['wall_s']:>8.1f}", flush=True)
    return rows


def grid(base: HwConfig, arrays: list[int], buses: list[int], layers: list[str],
         tmp: Path) -> dict[str, Any]:
    points = []
    print(f"{'variant':12} {'vta cycles':>12} {'zigzag cycles':>13} {'vta s':>6} "
          f"{'zigzag s':>8}", flush=True)
    for n in arrays:
        for bus in buses:
            hw = variant(base, n, bus)
            vt = zt = 0
            vs = zs = 0.0
            for name in layers:
                v, z = run_vta(name, hw), run_zigzag(name, hw, tmp)
                rep = RESNET18_REPEATS[name]
                vt += v["cycles"] * rep
                zt += z["cycles"] * rep
                vs += v["wall_s"]
                zs += z["wall_s"]
            points.append({"variant": hw.name, "array": n, "bus_bytes": bus, "vta_cycles": vt,
                           "zigzag_cycles": zt, "vta_wall_s": vs, "zigzag_wall_s": zs})
            print(f"{hw.name:12} {vt:>12,} {zt:>13,} {vs:>6.1f} {zs:>8.1f}", flush=True)
    rv = ranks([p["vta_cycles"] for p in points])
    rz = ranks([p["zigzag_cycles"] for p in points])
    for p, a, b in zip(points, rv, rz, strict=True):
        p["vta_rank"], p["zigzag_rank"] = a, b
    tau = kendall_tau([p["vta_cycles"] for p in points], [p["zigzag_cycles"] for p in points])
    same = rv == rz
    print(f"ranks (1 = fastest) vta {rv}, zigzag {rz}: Kendall tau-b {tau:.3f}"
          f"{' (the same order)' if same else ''}")
    return {"layers": layers, "points": points, "kendall_tau_b": tau, "same_order": same}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", default=str(ROOT / "hwconfigs" / "pynq.yaml"))
    ap.add_argument("--layers", default=",".join(RESNET18), help="per-layer comparison")
    ap.add_argument("--arrays", default="8,16,32", help="grid: n of the n x n array")
    ap.add_argument("--bus", default="4,8,16", help="grid: DRAM bus bytes a cycle")
    ap.add_argument("--grid-layers", default=",".join(RESNET18),
                    help="grid: the layers summed (each times its repeats)")
    ap.add_argument("--no-grid", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "zigzag_compare.json"))
    args = ap.parse_args()
    why = zigzag_available()
    if why is not None:
        print(f"skipped: {why}")
        return 0
    logging.disable(logging.WARNING)  # ZigZag logs every stage at INFO
    from importlib.metadata import version

    base = HwConfig.from_yaml(args.hw)
    layers = [x for x in args.layers.split(",") if x]
    for name in layers + args.grid_layers.split(","):
        if name not in RESNET18:
            raise SystemExit(f"unknown layer {name!r}; expected some of {', '.join(RESNET18)}")
    load = os.getloadavg()
    result: dict[str, Any] = {"hw": base.name, "zigzag_version": version("zigzag-dse"),
                              "load_average_at_start": [round(x, 2) for x in load]}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        print(f"== per layer on {base.name} (zigzag-dse {result['zigzag_version']}) ==")
        rows = per_layer(base, layers, tmp)
        tot = {k: sum(r[k]["cycles"] * r["repeats"] for r in rows) for k in ("vta", "zigzag")}
        walls = {"vta_compile_s": sum(r["vta"]["compile_s"] for r in rows),
                 "vta_sim_s": sum(r["vta"]["sim_s"] for r in rows),
                 "zigzag_s": sum(r["zigzag"]["wall_s"] for r in rows)}
        print(f"ResNet-18 ({sum(r['repeats'] for r in rows)} convolutions): vta "
              f"{tot['vta']:,} cycles, zigzag {tot['zigzag']:,} "
              f"({tot['zigzag'] / tot['vta']:.3f}x); wall for the {len(rows)} distinct layers: "
              f"vta compile {walls['vta_compile_s']:.1f} s + simulate {walls['vta_sim_s']:.1f} "
              f"s, zigzag {walls['zigzag_s']:.1f} s")
        result.update(layers=rows, network_cycles=tot, walls=walls)
        if not args.no_grid:
            print("== grid: array size x DRAM bus ==")
            result["grid"] = grid(base, [int(x) for x in args.arrays.split(",")],
                                  [int(x) for x in args.bus.split(",")],
                                  args.grid_layers.split(","), tmp)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
