"""End to end: compiled programs on the simulator equal numpy exactly (and the reference
interpreter equals the cycle-level machine), over drawn shapes, configs and schedule knobs."""

from _vta_helpers import HWCONFIGS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.matmul import MatmulSpec
from vta.compiler.schedules.default import ScheduleError
from vta.compiler.workloads import Workload
from vta.config import HwConfig
from vta.runner import run_workload

CONFIGS = {p.stem: HwConfig.from_yaml(p) for p in HWCONFIGS}


@st.composite
def conv_specs(draw):  # type: ignore[no-untyped-def]
    k = draw(st.sampled_from([1, 3, 7]))
    pad = draw(st.integers(0, min(3, k - 1)))
    stride = draw(st.sampled_from([1, 2]))
    h = draw(st.integers(max(1, k - 2 * pad), 9))
    w = draw(st.integers(max(1, k - 2 * pad), 9))
    return Conv2dSpec(n=draw(st.integers(1, 2)), ic=draw(st.integers(1, 40)), h=h, w=w,
                      oc=draw(st.integers(1, 40)), kh=k, kw=k, stride=stride, pad=pad)


@st.composite
def knobs(draw):  # type: ignore[no-untyped-def]
    out = {"vthreads": draw(st.sampled_from([None, 1, 2]))}
    if draw(st.booleans()):
        out["th"] = draw(st.integers(1, 4))
    if draw(st.booleans()):
        out["vt_axis"] = draw(st.sampled_from(["oh", "oc"]))
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=conv_specs(), cfg=st.sampled_from(sorted(CONFIGS)), kn=knobs(),
       seed=st.integers(0, 1000))
def test_conv2d_bit_exact(spec: Conv2dSpec, cfg: str, kn: dict, seed: int) -> None:
    try:
        r = run_workload(Workload("conv2d", spec), CONFIGS[cfg], seed=seed,
                         check_reference=True, **kn)
    except ScheduleError:
        return  # a forced knob that cannot fit: compile-time error (tested elsewhere)
    assert r.mismatches == 0 and r.reference_agrees, r.summary()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(1, 70),
       cfg=st.sampled_from(sorted(CONFIGS)), lh=st.booleans(), seed=st.integers(0, 1000))
def test_matmul_bit_exact(m: int, n: int, k: int, cfg: str, lh: bool, seed: int) -> None:
    r = run_workload(Workload("matmul", MatmulSpec(m, n, k)), CONFIGS[cfg], seed=seed,
                     latency_hiding=lh, check_reference=True)
    assert r.mismatches == 0 and r.reference_agrees, r.summary()


def test_resnet_c2_bit_exact_with_and_without_latency_hiding() -> None:
    from vta.compiler.workloads import resolve

    hw = CONFIGS["pynq"]
    on = run_workload(resolve("conv2d"), hw)
    off = run_workload(resolve("conv2d"), hw, latency_hiding=False)
    assert on.passed and off.passed
    assert on.cycles < off.cycles
