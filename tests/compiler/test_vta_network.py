"""Whole networks (``vta run resnet18``), the model's ranked schedules refined by the
timing-only simulator, the strided-row input of one-row strided kernels and the bias loaded
once."""

import json

import pytest
from _vta_helpers import ROOT, hw

from vta.cli import main
from vta.compiler.accel.ops.conv2d_packed import packed_dims, row_subsampled
from vta.compiler.accel.schedules.default import ConvSchedule, default_schedule, ranked_schedules
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.workloads import RESNET18, RESNET18_REPEATS, Workload, resolve_network
from vta.errors import UnknownWorkload
from vta.run.layer import run_layer
from vta.run.network import run_network
from vta.run.targets import AccelTarget

PYNQ = str(ROOT / "hwconfigs" / "pynq.yaml")


def test_resnet18_has_its_twenty_convolutions() -> None:
    net = resolve_network("resnet18")
    assert net is not None
    assert [w.name for w, _ in net.layers] == [f"resnet18:{k}" for k in RESNET18]
    assert sum(n for _, n in net.layers) == 20 == sum(RESNET18_REPEATS.values())
    assert resolve_network("conv2d") is None
    with pytest.raises(UnknownWorkload, match="C99"):
        resolve_network("resnet18", layers=["C99"])


def test_network_subset_is_bit_exact_and_sums_repeats() -> None:
    net = resolve_network("resnet18", layers=["C10", "C11"])
    assert net is not None
    r = run_network(net, AccelTarget(hw()))
    assert r.passed
    s = r.summary()
    assert [row["repeats"] for row in s["layers"]] == [1, 3]
    assert s["cycles"] == sum(row["cycles"] * row["repeats"] for row in s["layers"])
    assert s["convolutions"] == 4
    assert 0 < s["utilization"] <= 1 and 0 < s["of_machine_bound"] <= 1
    assert s["time_ms"] == pytest.approx(s["cycles"] / (hw().board.clock_mhz * 1e3))


def test_cli_runs_a_network(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--hw", PYNQ, "resnet18", "--layers", "c10", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["network"] == "resnet18" and s["passed"] and len(s["layers"]) == 1
    assert main(["run", "--hw", PYNQ, "resnet18", "--layers", "C10"]) == 0
    out = capsys.readouterr().out
    assert "total" in out and "PASS" in out


STRIDED = Conv2dSpec(n=1, ic=32, h=12, w=12, oc=32, kh=1, kw=1, stride=2, pad=0)


def test_one_row_strided_kernel_loads_only_the_rows_it_reads() -> None:
    h = hw()
    sch = ConvSchedule(tco=2, tci=2, th=6, tw=6, vthreads=1)
    assert row_subsampled(packed_dims(STRIDED, h, sch))
    r = run_layer(Workload("strided", STRIDED), AccelTarget(h), tco=2, tci=2, th=6, tw=6,
                  vthreads=1)
    assert r.passed
    # 6 rows of the 12 (every other one), each of the 11 columns the tile spans, 2 ic blocks
    assert r.stats.bytes["inp"] == 2 * 6 * 11 * h.elem_bytes("inp")
    # output rows padded past the image: the rows would leave it, so the dense copy is kept
    assert not row_subsampled(packed_dims(STRIDED, h, ConvSchedule(2, 2, 4, 6, 1)))
    assert run_layer(Workload("strided", STRIDED), AccelTarget(h), tco=2, tci=2, th=4, tw=6,
                        vthreads=1).passed


@pytest.mark.parametrize("name", ["pynq", "research_32x32"])
def test_strided_rows_with_threads_are_bit_exact(name: str) -> None:
    assert run_layer(Workload("strided", STRIDED), AccelTarget(hw(name))).passed


def test_ranked_schedules_and_refinement() -> None:
    h = hw()
    spec = Conv2dSpec(n=1, ic=64, h=14, w=14, oc=64, kh=1, kw=1, stride=2)
    ranked = ranked_schedules(spec, h, 3)
    assert ranked[0] == default_schedule(spec, h) and len(set(ranked)) == 3
    w = Workload("c", spec)
    assert AccelTarget(h).compile_layer(w).schedule in ranked
    assert AccelTarget(h).compile_layer(w, refine=1).schedule == ranked[0]


def test_bias_is_loaded_once() -> None:
    r = run_layer(Workload("strided", STRIDED), AccelTarget(hw()), tco=1, tci=2, th=6, tw=6,
                  vthreads=1)
    assert r.passed and r.stats.insn_counts["LOAD.ACC"] == 1
