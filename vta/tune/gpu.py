"""Tuning the GPU kernels: their spaces (``vta.gpu.space``) searched with kernels timed on a GPU.

A GPU trial builds the point's kernel (the SIMT or WMMA schedule lowered by the GPU pipeline,
or the task-mapping kernel), renders it, refuses it where nvcc is present and ptxas reports it
spilling registers or exceeding a limit of its ``GpuTarget`` (``vta.gpu.nvcc.check_kernel``:
the trial fails with that message), checks it once bit-exact against numpy, and times it
with CUDA events (``CudaTarget.measure``: the median of its ``REPS`` launches after
``WARMUP``); its cost is milliseconds.
Timing needs a GPU: the SIMT emulator executes kernels statement by statement on the CPU and
counts instructions and transactions, but it cannot say how long a kernel takes on a GPU, so
``vta tune --target cuda`` refuses to run without one (``--space`` lists the space anywhere).
The trials of one GPU run in one process (``--workers 1``): kernels timed side by side would
share the device and time each other.
"""

from __future__ import annotations

import hashlib
import time

from vta.compiler.ir import stmt as S
from vta.compiler.ir.space import Point
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.errors import VtaError
from vta.gpu import schedules as G
from vta.gpu.kernels.conv2d import mma_conv2d
from vta.gpu.kernels.gemm import mma_gemm
from vta.gpu.nvcc import check_kernel, find_nvcc
from vta.gpu.space import GpuProblem, GpuSpace, knobs_of
from vta.gpu.target import target_of
from vta.run.check import compare
from vta.run.gpu_workloads import GpuWorkload
from vta.run.layer import GpuLayer, layer_inputs, layer_reference
from vta.run.targets import CudaTarget
from vta.tune.cache import TuneKey, compiler_version
from vta.tune.job import Job, Outcome, TrialTask, op_text

__all__ = ["gpu_problem", "gpu_key", "gpu_func", "measure_gpu", "default_point"]


def gpu_problem(job: Job) -> GpuProblem:
    return GpuSpace(job.kernel, job.dtype).bind(job.workload.spec)


def gpu_key(job: Job, device: str) -> TuneKey:
    """The cache key of a GPU job on the GPU called ``device``."""
    op = op_text(job.workload, job.epilogue)
    dev = hashlib.sha256(device.encode()).hexdigest()[:16]
    return TuneKey(op, job.dtype, f"cuda:{job.kernel}", dev, device, compiler_version(),
                   GpuSpace(job.kernel, job.dtype).name)


def gpu_func(task: TrialTask) -> S.PrimFunc:
    """The scheduled kernel of ``task.point`` (the task-mapping kernels come lowered)."""
    spec, kb = task.workload.spec, knobs_of(task.kernel, task.dtype, task.point)
    if isinstance(spec, Conv2dSpec):
        if task.kernel == "simt":
            return G.conv2d_simt(spec, task.dtype, task.epilogue, knobs=kb)
        if task.kernel == "wmma":
            return G.conv2d_wmma(spec, task.dtype, task.epilogue, knobs=kb)
        return mma_conv2d(spec, task.dtype, task.epilogue, kb)
    if task.kernel == "simt":
        return G.matmul_simt(spec, task.dtype, task.epilogue, knobs=kb)
    if task.kernel == "wmma":
        return G.matmul_wmma(spec, task.dtype, task.epilogue, knobs=kb)
    return mma_gemm(spec, task.dtype, task.epilogue, kb)


def measure_gpu(task: TrialTask) -> Outcome:
    """Build, check and time one GPU point (module docstring): the kernel runs once on the
    layer's inputs and must equal numpy, then ``CudaTarget.measure`` times it."""
    target = CudaTarget()
    t0 = time.perf_counter()
    method = f"CUDA events, median of {target.REPS}"
    try:
        kernel = target.compile(gpu_func(task))
        if find_nvcc() is not None:
            check_kernel(kernel.cuda, target_of(kernel.func))
        gw = GpuWorkload(task.workload.name, task.workload.spec, task.dtype, task.epilogue)
        layer = GpuLayer(gw, kernel)
        user = layer_inputs(gw.spec, task.epilogue, 0, task.dtype)
        want, _ = layer_reference(gw.spec, user, task.epilogue)
        packed = layer.pack(user)
        got = layer.unpack(target.execute(kernel, packed).outputs)
        if not compare(want, got).passed:
            return Outcome(None, "wrong result: the kernel differs from numpy (a bug in vta)",
                           time.perf_counter() - t0, method)
        m = target.measure(kernel, packed)
    except VtaError as e:
        return Outcome(None, f"{type(e).__name__}: {e}", time.perf_counter() - t0, method)
    return Outcome(m.value, None, time.perf_counter() - t0, m.method)


def default_point(job: Job) -> Point:
    return gpu_problem(job).default()
