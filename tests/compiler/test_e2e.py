"""End to end: compiled programs on the simulator equal numpy exactly (and the reference
interpreter equals the cycle-level machine), over drawn shapes, configs and schedule knobs."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vta.testing as vt
from vta.compiler.accel.schedules.default import ScheduleError
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.matmul import MatmulSpec
from vta.compiler.ops.workloads import Workload
from vta.run.layer import run_layer
from vta.run.targets import AccelTarget

CONFIGS = {h.name: h for h in vt.shipped_hw()}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=vt.conv2d_specs(), cfg=st.sampled_from(sorted(CONFIGS)), kn=vt.workload_knobs(),
       seed=st.integers(0, 1000))
def test_conv2d_bit_exact(spec: Conv2dSpec, cfg: str, kn: dict, seed: int) -> None:
    try:
        r = run_layer(Workload("conv2d", spec), AccelTarget(CONFIGS[cfg]), seed=seed,
                         check_reference=True, **kn)
    except ScheduleError:
        return  # a forced knob that cannot fit: compile-time error (tested elsewhere)
    assert r.mismatches == 0 and r.reference_agrees, r.summary()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=vt.matmul_shapes(40, 40, 70), cfg=st.sampled_from(sorted(CONFIGS)),
       lh=st.booleans(), seed=st.integers(0, 1000))
def test_matmul_bit_exact(shape: tuple[int, int, int], cfg: str, lh: bool, seed: int) -> None:
    r = run_layer(Workload("matmul", MatmulSpec(*shape)), AccelTarget(CONFIGS[cfg]), seed=seed,
                     latency_hiding=lh, check_reference=True)
    assert r.mismatches == 0 and r.reference_agrees, r.summary()


def test_resnet_c2_bit_exact_with_and_without_latency_hiding() -> None:
    from vta.compiler.ops.workloads import resolve

    hw = CONFIGS["pynq"]
    on = run_layer(resolve("conv2d"), AccelTarget(hw))
    off = run_layer(resolve("conv2d"), AccelTarget(hw), latency_hiding=False)
    assert on.passed and off.passed
    assert on.cycles < off.cycles
