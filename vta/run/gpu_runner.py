"""``vta run --target cuda|cuda-emu [--emit-cuda] [--gpu-schedule S] [--profile] WORKLOAD``: the
GPU side of the ``run`` command.

``run_gpu_workload(args)`` builds the workload's default GPU schedule, lowers and renders it,
runs it on a GPU through CuPy (``cuda``) or in the SIMT emulator (``cuda-emu``), and checks the
result bit-exact against numpy, printing PASS or FAIL (with the fraction of outputs the
epilogue's clip saturated; ``--epilogue none`` checks the int32 accumulators). Returns 0 on
PASS, 1 on FAIL. A missing GPU or CuPy is a ``GpuUnavailableError`` (the CLI prints it and exits
2). ``--gpu-schedule mma`` runs the task-mapping kernels (vta.gpu.kernels); ``--profile``
(emulator only) prints the counters of vta.gpu.profile.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from vta.compiler.ir import stmt as S
from vta.compiler.ops.conv2d import Conv2dSpec, conv2d_acc
from vta.compiler.ops.epilogue import saturated_fraction
from vta.compiler.ops.matmul import matmul_acc
from vta.errors import VtaError
from vta.gpu.cuda import render_cuda
from vta.gpu.lower_gpu import lower_for_gpu
from vta.run.gpu_workloads import GpuWorkload, build_func, make_workload, random_inputs, reference

__all__ = ["run_gpu_workload", "add_gpu_arguments"]


def _kernel_layout(w: GpuWorkload, func: S.PrimFunc, arrays: list[np.ndarray]
                   ) -> list[np.ndarray]:
    """The arrays in the kernel's parameter layouts: the task-mapping conv2d takes its weight
    OHWI, (OC, KH*KW*IC); the inputs (and the reference) are drawn OIHW, (OC, IC*KH*KW)."""
    if not (w.is_conv and func.attr("kernel") == "task-mapping"):
        return arrays
    from vta.gpu.kernels.conv2d import ohwi_weight

    s = w.spec
    assert isinstance(s, Conv2dSpec)
    return [arrays[0], ohwi_weight(arrays[1].reshape(s.oc, s.ic, s.kh, s.kw)), *arrays[2:]]


def add_gpu_arguments(p: argparse.ArgumentParser) -> None:
    """The two GPU options of ``vta run`` (for parsers built outside vta/cli.py)."""
    p.add_argument("--target", choices=("vta", "cuda", "cuda-emu"), default="vta",
                   help="vta: the simulated accelerator; cuda: a GPU through CuPy; cuda-emu: "
                        "the lockstep SIMT emulator")
    p.add_argument("--emit-cuda", action="store_true", help="print the generated CUDA kernel")


def run_gpu_workload(args: argparse.Namespace) -> int:
    """Run one workload on the GPU target named by ``args.target`` (see module docstring)."""
    target = getattr(args, "target", "cuda-emu")
    name = getattr(args, "workload", None) or "conv2d"
    dtype = getattr(args, "dtype", None) or "int8"
    schedule = getattr(args, "gpu_schedule", None) or "wmma"
    seed = getattr(args, "seed", None)
    over = {k: getattr(args, k, None) for k in ("batch", "height", "width", "in_channels",
                                                  "out_channels", "kernel", "stride", "pad")}
    raw = getattr(args, "epilogue", None) == "none"
    w = make_workload(name, dtype, getattr(args, "sizes", None) or None, raw=raw, **over)
    built = build_func(w, schedule)
    func = built if built.attr("launch") is not None else lower_for_gpu(built)
    kernel = render_cuda(func)
    if getattr(args, "emit_cuda", False):
        print(kernel.source)
    rng = np.random.default_rng(0 if seed is None else seed)
    arrays = random_inputs(func.params, rng, w.epi)
    want = reference(w, arrays)
    arrays = _kernel_layout(w, func, arrays)
    profile = bool(getattr(args, "profile", False))
    if profile and target != "cuda-emu":
        raise VtaError("--profile counts in the SIMT emulator: use it with --target cuda-emu")
    t0 = time.perf_counter()
    em = None
    if target == "cuda":
        from vta.gpu.runtime import run_kernel

        got = run_kernel(kernel, arrays)[-1]
        where = "GPU"
    else:
        from vta.gpu.emulator import Emulator

        em = Emulator(func, profile=profile)
        em.run(*arrays)
        got = arrays[-1]
        where = "SIMT emulator"
    dt = time.perf_counter() - t0
    ok = bool(np.array_equal(got, want)) if dtype == "int8" else bool(
        np.allclose(got, want, rtol=1e-2, atol=1e-2))
    launch = kernel.launch
    ops = w.spec.ops
    print(f"{w.name} [{w.spec.describe()}] {dtype} on {where}: kernel {kernel.name}, grid "
          f"{launch.grid}, block {launch.block}, {launch.shared_bytes} B shared, "
          f"{ops / 1e9:.3f} GOP, {dt * 1e3:.1f} ms (incl. transfers)")
    if em is not None and em.profile is not None:
        from vta.gpu.profile import print_profile

        print_profile(em.profile)
    check = "bit-exact" if dtype == "int8" else "allclose"
    if dtype == "int8" and w.epi is None:
        detail = " (int32 accumulators, no epilogue)"
    elif w.epi is not None:
        detail = f" ({_saturated(w, arrays):.1%} of outputs saturated)"
    else:
        detail = ""
    print(f"check vs numpy ({check}): {'PASS' if ok else 'FAIL'}{detail}")
    sys.stdout.flush()
    return 0 if ok else 1


def _saturated(w: GpuWorkload, arrays: list[np.ndarray]) -> float:
    """The fraction of ``w``'s outputs its epilogue's clip saturated, on these inputs."""
    assert w.epi is not None
    x, k = arrays[0], arrays[1]
    bias = arrays[2] if w.epi.bias else None
    if isinstance(w.spec, Conv2dSpec):
        s = w.spec
        acc = conv2d_acc(x, k.reshape(s.oc, s.ic, s.kh, s.kw), s)
    else:
        acc = matmul_acc(x, k)
    return saturated_fraction(acc, bias, w.epi, 1)
