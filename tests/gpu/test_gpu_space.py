"""The GPU kernels' schedule spaces: sampled points of every family build, render and compile
to PTX (nvcc, sm_80 and sm_90) or are refused with their reason; on a GPU, a small tuning job
times kernels and keeps the fastest."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from vta.compiler.ir.space import enumerate_space
from vta.compiler.ops.workloads import Workload, resolve
from vta.gpu.space import GpuSpace
from vta.run.gpu_workloads import make_workload
from vta.run.targets import CudaEmuTarget
from vta.tune.gpu import gpu_func
from vta.tune.job import Job, TrialTask

from .conftest import gpu_or_skip


@pytest.mark.parametrize("kind", ["simt", "wmma", "mma"])
@pytest.mark.parametrize("name, sizes", [("matmul", [64, 96, 64]), ("resnet18:C11", [])])
def test_sampled_points_compile_or_are_refused(kind: str, name: str, sizes: list[int],
                                               nvcc_check: Callable[[Iterable[str]], None]
                                               ) -> None:
    gw = make_workload(name, "int8", sizes or None)
    w = Workload(gw.name, gw.spec)
    problem = GpuSpace(kind).bind(gw.spec)
    e = enumerate_space(problem)
    assert e.valid and all(msg for msg in e.examples.values())
    points = [problem.default(), *random.Random(0).sample(e.valid, 4)]
    sources = []
    for p in points:
        kernel = CudaEmuTarget().compile(gpu_func(TrialTask(w, None, p, gw.epi, "cuda", kind,
                                                            "int8")))
        assert kernel.func.params and kernel.source
        sources.append(kernel.source)
    nvcc_check(sources)


@pytest.mark.gpu
def test_a_small_gpu_tuning_job(tmp_path: Path) -> None:
    gpu_or_skip()
    from vta.tune.cache import Cache
    from vta.tune.executor import LocalExecutor
    from vta.tune.tuner import tune

    gw = make_workload("matmul", "int8", [256, 256, 256])
    job = Job(Workload(gw.name, gw.spec), None, trials=6, epilogue=gw.epi, target="cuda",
              kernel="wmma")
    with LocalExecutor(1) as ex, Cache(tmp_path / "g.sqlite") as c:
        [r] = tune([job], ex, c)
    assert r.best_cost is not None and r.default_cost is not None
    assert 0 < r.best_cost <= r.default_cost and r.failed == 0
    assert r.key.target == "cuda:wmma"
    assert resolve("matmul", [256, 256, 256]).spec == gw.spec
