"""The calibrated epilogue keeps the check informative; the raw mode checks int32 accumulators.

* calibration: the shift follows the reduction length; on every ResNet-18 layer and on random
  shapes under 5% of the outputs saturate (numpy only: the epilogue is fixed by the shape, so
  no compile is needed to know it);
* the runner and the GPU path use it (same shift as the compiled program, bias within bounds);
* ``--epilogue none`` is bit-exact on the simulator and on the SIMT emulator;
* a planted off-by-one in one accumulator entry (an extra ``ALU.ADD imm=1`` in the program,
  run by the simulated machine) fails the raw check, and a planted one-step error fails the
  calibrated check; a single wrong accumulator in the output fails both targets' checks.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from _vta_helpers import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

import vta.run.targets as targets
from vta.compiler.ops.conv2d import Conv2dSpec, conv2d_acc
from vta.compiler.ops.epilogue import (
    Epilogue,
    apply_epilogue,
    calibrated_epilogue,
    random_bias,
    saturated_fraction,
)
from vta.compiler.ops.matmul import MatmulSpec, matmul_acc
from vta.compiler.ops.workloads import RESNET18, Workload, resolve
from vta.config import HwConfig
from vta.errors import CompileError
from vta.isa import Alu, AluOp, Deps, Gemm, Program
from vta.run.layer import LayerRun, layer_inputs, run_layer
from vta.run.targets import AccelTarget, CudaEmuTarget

LIMIT = 0.05


def hw() -> HwConfig:
    return HwConfig.from_yaml(ROOT / "hwconfigs" / "pynq.yaml")


def layer_saturation(w: Workload, seed: int, epi: Epilogue | None = None) -> float:
    """The saturated fraction of ``w`` under ``epi`` (its calibrated epilogue by default), on
    the runner's input distribution."""
    rng = np.random.default_rng(seed)
    s, epi = w.spec, epi or w.epilogue
    if isinstance(s, Conv2dSpec):
        x = rng.integers(-128, 128, (s.n, s.ic, s.h, s.w), dtype=np.int8)
        k = rng.integers(-128, 128, (s.oc, s.ic, s.kh, s.kw), dtype=np.int8)
        acc, oc = conv2d_acc(x, k, s), s.oc
    else:
        x = rng.integers(-128, 128, (s.m, s.k), dtype=np.int8)
        k = rng.integers(-128, 128, (s.n, s.k), dtype=np.int8)
        acc, oc = matmul_acc(x, k), s.n
    return saturated_fraction(acc, random_bias(epi, oc, rng), epi, 1)


#: outputs a random-shape saturation test pools before comparing with ``LIMIT``: a layer of
#: 16 outputs with one saturated reads 6.25 %, which says nothing about its rate
POOLED_OUTPUTS = 1024


def pooled_saturation(w: Workload, seed: int) -> float:
    """``layer_saturation`` of ``w`` over consecutive seeds from ``seed``, enough of them that
    at least ``POOLED_OUTPUTS`` outputs are counted (each draw weighs the same: equal
    sizes)."""
    s = w.spec
    if isinstance(s, Conv2dSpec):
        outputs = s.n * s.oc * s.oh * s.ow
    else:
        outputs = s.m * s.n
    draws = -(-POOLED_OUTPUTS // max(1, outputs))
    return sum(layer_saturation(w, seed + d) for d in range(draws)) / draws


# ----------------------------------------------------------------------------- calibration


def test_shift_grows_with_the_reduction() -> None:
    shifts = [calibrated_epilogue(k).shift for k in (1, 16, 147, 576, 4608, 1 << 20)]
    assert shifts == sorted(shifts) and shifts[0] == 8 and shifts[-1] < 31
    assert calibrated_epilogue(576).shift == 12  # C2: 64 channels x 3x3
    e = calibrated_epilogue(576)
    assert (e.bias, e.clip, e.clip_lo, e.clip_hi, e.bias_bound) == (True, True, -128, 127, 32)
    with pytest.raises(CompileError, match="reduction length must be >= 1"):
        calibrated_epilogue(0)


@pytest.mark.parametrize("layer", list(RESNET18))
def test_resnet18_layers_rarely_saturate(layer: str) -> None:
    w = resolve(f"resnet18:{layer}")
    frac = layer_saturation(w, seed=1)
    assert frac < LIMIT, (layer, frac)
    # ... where VTA's fixed benchmark epilogue (shift 8, clip 0..127) pins most of them
    assert layer_saturation(w, seed=1, epi=Epilogue()) > 0.5


@settings(max_examples=40)
@given(st.integers(1, 2), st.integers(1, 40), st.integers(3, 12), st.integers(1, 40),
       st.sampled_from([(1, 0), (3, 1), (3, 0), (5, 2), (7, 3)]), st.sampled_from([1, 2]),
       st.integers(0, 1000))
def test_random_conv_shapes_rarely_saturate(n: int, ic: int, h: int, oc: int,
                                            kp: tuple[int, int], stride: int,
                                            seed: int) -> None:
    k, p = kp
    if h + 2 * p < k:
        return
    w = Workload("c", Conv2dSpec(n, ic, h, h, oc, k, k, stride, p))
    assert pooled_saturation(w, seed) < LIMIT


@settings(max_examples=40)
@given(st.integers(1, 64), st.integers(1, 64), st.integers(1, 3000), st.integers(0, 1000))
def test_random_matmuls_rarely_saturate(m: int, n: int, k: int, seed: int) -> None:
    assert pooled_saturation(Workload("m", MatmulSpec(m, n, k)), seed) < LIMIT


def test_a_tiny_layer_is_judged_on_pooled_draws() -> None:
    """The draw CI once met (2x2 outputs of 2 images x 2 channels, seed 280): one of 16
    saturated reads 6.25 % alone; pooled over enough draws the layer saturates rarely."""
    w = Workload("c", Conv2dSpec(2, 1, 5, 5, 2, 3, 3, 2, 0))
    assert layer_saturation(w, 280) == 1 / 16
    assert pooled_saturation(w, 280) < LIMIT


def test_saturated_fraction_counts_what_the_clip_changed() -> None:
    acc = np.array([[-1000, 0, 1000, 127 << 4]], np.int32)
    epi = Epilogue(shift=4, bias=False, clip_lo=-50, clip_hi=50)
    assert apply_epilogue(acc, None, epi, 1).tolist() == [[-50, 0, 50, 50]]
    assert saturated_fraction(acc, None, epi, 1) == 0.75
    # no clip: the narrowing wraps (the low 8 bits), nothing saturates
    none = Epilogue.none(8)
    assert apply_epilogue(np.array([[0x12345678]], np.int32), None, none, 1).tolist() == \
        [[0x56]]
    assert saturated_fraction(acc, None, none, 1) == 0.0


# ----------------------------------------------------------------------------- the runner


def test_runner_uses_the_calibrated_epilogue_and_its_bias_bound() -> None:
    w = resolve("matmul", [16, 32, 576])
    r = run_layer(w, AccelTarget(hw()), seed=3)
    c = r.compiled
    assert c.epilogue == w.epilogue == calibrated_epilogue(576)
    assert r.passed and r.saturated < LIMIT and r.summary()["saturated"] == r.saturated
    user = layer_inputs(w.spec, c.epilogue, 3)
    assert np.abs(user["bias"]).max() <= c.epilogue.bias_bound
    # the SHR in the program is the calibrated shift
    shifts = {i.imm for i in c.program.instructions if isinstance(i, Alu) and i.op == AluOp.SHR}
    assert shifts == {c.epilogue.shift}


@pytest.mark.parametrize("name,sizes", [("matmul", [20, 48, 40]), ("resnet18:C4", None)])
def test_raw_accumulators_are_bit_exact_on_the_simulator(name: str,
                                                         sizes: list[int] | None) -> None:
    over = {"height": 8, "in_channels": 20, "out_channels": 24} if sizes is None else {}
    w = resolve(name, sizes, **over)
    r = run_layer(w, AccelTarget(hw()), seed=5, raw=True, check_reference=True)
    assert r.passed and r.raw_slices == 4 and r.reference_agrees
    assert r.compiled.epilogue == Epilogue.none()
    assert not any(isinstance(i, Alu) for i in r.compiled.program.instructions)
    assert r.summary()["check"] == "int32 accumulators"


def test_raw_accumulators_on_an_int32_output_port() -> None:
    h = hw().with_changes(**{"gemm.out_dtype": "int32", "scratchpad.out": 131072})
    r = run_layer(resolve("matmul", [16, 16, 64]), AccelTarget(h), raw=True)
    assert r.passed and r.raw_slices == 1


@settings(max_examples=6)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(1, 300), st.integers(0, 99))
def test_raw_random_matmuls(m: int, n: int, k: int, seed: int) -> None:
    assert run_layer(resolve("matmul", [m, n, k]), AccelTarget(hw()), seed=seed, raw=True).passed


# ----------------------------------------------------------------------------- planted bugs


def plant(program: Program, delta: int) -> Program:
    """``program`` with ``ALU.ADD imm=delta`` on one accumulator entry (the first micro-op's
    destination of the first accumulating GEMM), run just before that GEMM with its pops."""
    insns = list(program.instructions)
    k = next(i for i, x in enumerate(insns) if isinstance(x, Gemm) and not x.reset)
    g = insns[k]
    d = g.deps
    add = Alu(AluOp.ADD, False, g.uop_bgn, g.uop_bgn + 1, 1, 1, 0, 0, 0, 0, True, delta,
              deps=Deps(pop_prev=d.pop_prev, pop_next=d.pop_next))
    insns[k:k + 1] = [add, dataclasses.replace(g, deps=Deps(push_prev=d.push_prev,
                                                             push_next=d.push_next))]
    return dataclasses.replace(program, instructions=tuple(insns))


def planted_run(monkeypatch: pytest.MonkeyPatch, delta: int | None, raw: bool,
                shape: list[int]) -> LayerRun:
    real = targets.simulate

    def sim(program: Program, *args, **kw):  # type: ignore[no-untyped-def]
        d = delta if delta is not None else 1 << calibrated_epilogue(shape[2]).shift
        return real(plant(program, d), *args, **kw)

    monkeypatch.setattr(targets, "simulate", sim)
    return run_layer(resolve("matmul", shape), AccelTarget(hw()), seed=11, raw=raw)


@pytest.mark.parametrize("shape", [[16, 16, 16], [5, 40, 100]])
def test_planted_off_by_one_fails_the_raw_check(monkeypatch: pytest.MonkeyPatch,
                                                shape: list[int]) -> None:
    assert planted_run(monkeypatch, 0, True, shape).passed  # planting itself is harmless
    r = planted_run(monkeypatch, 1, True, shape)
    g = hw().gemm
    assert not r.passed and 1 <= r.mismatches <= g.batch * g.block_out
    assert r.mismatches == min(g.block_out, shape[1])  # every real lane of the entry


def test_planted_one_step_error_fails_the_calibrated_check(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An accumulator off by one output step (2**shift) shows in every lane that did not
    saturate: with the calibrated epilogue, all of them."""
    assert planted_run(monkeypatch, 0, False, [16, 16, 64]).passed
    r = planted_run(monkeypatch, None, False, [16, 16, 64])
    assert not r.passed and r.mismatches == 16


def test_one_wrong_accumulator_in_the_output_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """Exactly one accumulator's low byte off by one (in the readback) is one mismatch."""
    real = targets.simulate
    calls: list[int] = []

    def sim(program: Program, hw_: HwConfig, inputs=None, **kw):  # type: ignore[no-untyped-def]
        res = real(program, hw_, inputs, **kw)
        if kw.get("timing_only"):  # the compiler's cost oracle
            return res
        if not calls:  # slice 0: the accumulators' low bytes
            out = res.outputs["res"]
            out.flags.writeable = True  # a fault planted in the readback (outputs are read-only)
            out.reshape(-1)[3] += 1
        calls.append(1)
        return res

    monkeypatch.setattr(targets, "simulate", sim)
    r = run_layer(resolve("matmul", [16, 16, 16]), AccelTarget(hw()), raw=True)
    assert not r.passed and r.mismatches == 1 and len(calls) == 4


# ----------------------------------------------------------------------------- GPU emulator


def gpu_run(raw: bool) -> LayerRun:
    return run_layer(resolve("matmul", [24, 40, 72]), CudaEmuTarget(), raw=raw)


@pytest.mark.parametrize("raw", [False, True])
def test_gpu_emulator_checks(raw: bool) -> None:
    r = gpu_run(raw)
    line = r.check.line()
    assert r.passed and line.startswith("PASS: ")
    assert ("int32 accumulators" in line) == raw
    assert ("saturated" in line) == (not raw)


def test_gpu_raw_reference_is_the_accumulators() -> None:
    from vta.run.gpu_workloads import make_workload

    w = make_workload("resnet18:C4", raw=True, height=8, in_channels=20, out_channels=24)
    assert w.epi is None
    c = make_workload("resnet18:C4", height=8, in_channels=20, out_channels=24)
    assert c.epi == resolve("resnet18:C4", height=8, in_channels=20, out_channels=24).epilogue


def test_gpu_emulator_catches_one_wrong_accumulator(monkeypatch: pytest.MonkeyPatch) -> None:
    from vta.gpu import emulator

    real = emulator.Emulator.run

    def run(self, *arrays):  # type: ignore[no-untyped-def]
        real(self, *arrays)
        arrays[-1].reshape(-1)[7] += 1

    monkeypatch.setattr(emulator.Emulator, "run", run)
    r = gpu_run(True)
    assert not r.passed and r.mismatches == 1
    assert r.check.line().startswith("FAIL: 1 int32 accumulators differ from numpy")
