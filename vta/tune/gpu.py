"""Tuning the GPU kernels: their spaces (``vta.gpu.space``) searched with kernels timed on a GPU.

A GPU trial builds the point's kernel (the SIMT or WMMA schedule lowered by the GPU pipeline,
or the task-mapping kernel), renders it, checks it once bit-exact against numpy, and times it
with CUDA events (the median of ``REPS`` launches after ``WARMUP``); its cost is milliseconds.
Timing needs a GPU: the SIMT emulator executes kernels statement by statement on the CPU and
counts instructions and transactions, but it cannot say how long a kernel takes on a GPU, so
``vta tune --target cuda`` refuses to run without one (``--space`` lists the space anywhere).
The trials of one GPU run in one process (``--workers 1``): kernels timed side by side would
share the device and time each other.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import time
from typing import Any

import numpy as np

from vta.compiler.accel.schedules.space import Point, enumerate_space
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.errors import VtaError
from vta.gpu.space import GpuProblem, GpuSpace, knobs_of
from vta.tune.cache import TuneKey, compiler_version

__all__ = ["gpu_problem", "gpu_key", "measure_gpu", "tune_gpu_command", "WARMUP", "REPS"]

WARMUP = 3
REPS = 20


def gpu_problem(job: Any) -> GpuProblem:
    return GpuSpace(job.kernel, job.dtype).bind(job.workload.spec)


def gpu_key(job: Any, device: str) -> TuneKey:
    """The cache key of a GPU job on the GPU called ``device``."""
    from vta.tune.tuner import op_text

    op = op_text(job.workload, job.epilogue)
    dev = hashlib.sha256(device.encode()).hexdigest()[:16]
    return TuneKey(op, job.dtype, f"cuda:{job.kernel}", dev, device, compiler_version(),
                   GpuSpace(job.kernel, job.dtype).name)


def build_gpu(task: Any) -> Any:
    """The rendered kernel of ``task.point`` (a ``CudaKernel``) and its lowered function."""
    from vta.gpu import schedules as G
    from vta.gpu.cuda import render_cuda
    from vta.gpu.kernels.conv2d import mma_conv2d
    from vta.gpu.kernels.gemm import mma_gemm
    from vta.gpu.lower_gpu import lower_for_gpu

    spec, kb = task.workload.spec, knobs_of(task.kernel, task.dtype, task.point)
    conv = isinstance(spec, Conv2dSpec)
    if task.kernel == "simt":
        f = (G.conv2d_simt if conv else G.matmul_simt)(spec, task.dtype, task.epilogue,
                                                       knobs=kb)
    elif task.kernel == "wmma":
        f = (G.conv2d_wmma if conv else G.matmul_wmma)(spec, task.dtype, task.epilogue,
                                                       knobs=kb)
    else:
        f = (mma_conv2d if conv else mma_gemm)(spec, task.dtype, task.epilogue, kb)
    func = f if f.attr("launch") is not None else lower_for_gpu(f)
    return render_cuda(func), func


def measure_gpu(task: Any) -> Any:
    """Build, check and time one GPU point (module docstring)."""
    from vta.gpu.runtime import GpuKernel, require_cupy
    from vta.run.gpu_workloads import GpuWorkload, random_inputs, reference
    from vta.tune.tuner import Outcome

    cp = require_cupy()
    method = f"CUDA events, median of {REPS} ({_device()})"
    t0 = time.perf_counter()
    try:
        kernel, func = build_gpu(task)
        gw = GpuWorkload(task.workload.name, task.workload.spec, task.dtype, task.epilogue)
        arrays = random_inputs(func.params, np.random.default_rng(0), task.epilogue)
        want = reference(gw, arrays)
        if func.attr("kernel") == "task-mapping" and gw.is_conv:
            from vta.gpu.kernels.conv2d import ohwi_weight

            s = gw.spec
            assert isinstance(s, Conv2dSpec)
            arrays[1] = ohwi_weight(arrays[1].reshape(s.oc, s.ic, s.kh, s.kw))
        dev = [cp.asarray(np.ascontiguousarray(a)) for a in arrays]
        k = GpuKernel(kernel)
        k(*dev)
        got = cp.asnumpy(dev[-1])
        if not np.array_equal(got, want.reshape(got.shape)):
            return Outcome(None, "wrong result: the kernel differs from numpy (a bug in vta)",
                           time.perf_counter() - t0, method)
        for _ in range(WARMUP):
            k(*dev)
        cp.cuda.runtime.deviceSynchronize()
        times = []
        for _ in range(REPS):
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            k(*dev)
            stop.record()
            stop.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, stop))
    except VtaError as e:
        return Outcome(None, f"{type(e).__name__}: {e}", time.perf_counter() - t0, method)
    return Outcome(float(statistics.median(times)), None, time.perf_counter() - t0, method)


def _device() -> str:
    from vta.gpu.runtime import gpu_name

    return str(gpu_name())


def tune_gpu_command(args: argparse.Namespace) -> int:
    """``vta tune --target cuda [--gpu-schedule simt|wmma|mma]`` (module docstring)."""
    from vta.run.gpu_workloads import make_workload
    from vta.tune.tuner import Job

    kernel = args.gpu_schedule or "wmma"
    if args.target == "cuda-emu" and not args.space:
        raise VtaError("vta tune --target cuda-emu: the SIMT emulator runs a kernel on the CPU "
                       "and counts its instructions, but cannot time it on a GPU; tune with "
                       "--target cuda on a machine with a GPU (--space lists the space here)")
    for flag in ("layers", "cluster"):
        if getattr(args, flag):
            raise VtaError(f"--{flag} does not apply to --target {args.target}")
    if args.hw is not None:
        raise VtaError(f"--hw does not apply to --target {args.target} (it describes the "
                       f"accelerator)")
    over = {k: getattr(args, k) for k in ("batch", "height", "width", "in_channels",
                                          "out_channels", "kernel", "stride", "pad")}
    gw = make_workload(args.workload, "int8", args.sizes or None, **over)
    from vta.compiler.ops.workloads import Workload

    job = Job(Workload(gw.name, gw.spec), None, trials=args.trials, search=args.search,
              seed=args.seed or 0, epilogue=gw.epi, target="cuda", kernel=kernel, dtype="int8")
    problem = gpu_problem(job)
    if args.space:
        e = enumerate_space(problem)
        print(f"{gw.name}: space {problem.name}, {e.size} points, {len(e.valid)} fit; default "
              f"{problem.default()}")
        for k in problem.knobs:
            print(f"  {k:8} {', '.join(map(str, problem.domain(k, {})))}")
        for why, n in e.refused.items():
            print(f"  refused {n:6} {why}: e.g. {e.examples[why]}")
        return 0
    from vta.errors import GpuUnavailableError
    from vta.gpu.runtime import require_cupy

    try:
        require_cupy()
    except GpuUnavailableError as e:
        why = str(e).split(". Use --target cuda-emu")[0]  # the emulator is no way to tune
        raise GpuUnavailableError(f"vta tune --target cuda times kernels on a GPU: {why}; the "
                                  f"SIMT emulator cannot time a GPU kernel, so nothing is tuned "
                                  f"without one (--space lists the space)") from None
    if args.workers not in (None, 1):
        raise VtaError("--workers: one GPU runs one trial at a time (kernels timed side by "
                       "side would time each other); leave --workers out")
    from vta.tune.commands import RichProgress, _open_cache, _tune_table
    from vta.tune.executor import LocalExecutor
    from vta.tune.tuner import tune

    with _open_cache(args, create=True) as cache, LocalExecutor(1) as ex, \
            RichProgress(quiet=args.json) as progress:
        results = tune([job], ex, cache, progress)
    if args.json:
        import json

        print(json.dumps([r.summary() for r in results], indent=2, default=str))
    else:
        print(_tune_table(results, {}).replace("cycles", "ms"))
    return 0


def default_point(job: Any) -> Point:
    return gpu_problem(job).default()
