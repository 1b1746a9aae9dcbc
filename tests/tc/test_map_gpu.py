"""GPU automatic mapping of TC definitions: fusion, tiling, thread mapping, shared-memory
promotion and unrolling, with explicit ``MappingOptions``; every kernel rendered, compiled to
PTX for sm_80 and sm_90 and run in the SIMT emulator (race checking on) bit-exact against the
TC interpreter."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from vta.compiler.tc import load
from vta.compiler.tc.frontend import random_inputs
from vta.compiler.tc.interp import NP_DTYPE
from vta.errors import MappingError
from vta.gpu.cuda import render_cuda
from vta.gpu.emulator import Emulator
from vta.gpu.lower_gpu import lower_for_gpu
from vta.gpu.tc_map import GpuProgram, MappingOptions, map_gpu, resolve

NvccCheck = Callable[[list[str]], None]

MATMUL = "def mm(int8(M,K) A, int8(N,K) B) -> (C) { C(m,n) +=! A(m,k) * B(n,k) }"
MLP = """def mlp(int8(B,M) I, int8(N,M) W, int32(N) b) -> (O) {
  T(i, j) +=! I(i, k) * W(j, k)
  O(i, j) = int8(fmin(fmax((T(i, j) >> 4) + b(j), 0), 127))
}"""

PROGRAMS: list[tuple[str, str, dict[str, int]]] = [
    ("matmul", MATMUL, {"M": 40, "N": 50, "K": 37}),
    ("conv", "def c(int8(N,C,H,W) I, int8(K,C,R,S) W1) -> (O) {\n"
             "  O(n,k,h,w) +=! I(n, c, 2*h + r, 2*w + s) * W1(k, c, r, s)\n}",
     {"N": 2, "C": 5, "H": 13, "W": 11, "K": 6, "R": 3, "S": 3}),
    ("mlp", MLP, {"B": 3, "M": 20, "N": 6}),
    ("stencil_fp32", "def s(fp32(N) B, fp32(K) K1) -> (A) { A(i) +=! B(i + k) * K1(k) }",
     {"N": 20, "K": 3}),
    ("pool", "def p(int8(N,C,H,W) I) -> (O) {\n"
             "  O(n,c,h,w) max=! I(n,c,2*h+r,2*w+s) where r in 0:2, s in 0:2\n}",
     {"N": 2, "C": 3, "H": 8, "W": 7}),
    ("rewrites", "def f(int16(N) A, int16(N) B) -> (O) {\n  O(i) = A(i) * 2\n"
                 "  O(i) += B(i) >> 1\n  O(i) *= A(i) > 0 ? 3 : -1\n"
                 "  P(i) +=! A(k) * B(i) where k in 1:3\n  O(i) max= P(i) where i in 1:4\n}",
     {"N": 6}),
    ("prod", "def q(int32(N,M) A) -> (O) { O(i) *=! A(i, j) }", {"N": 4, "M": 5}),
    ("casts_fp16", "def c(fp16(N) A, int8(N) B) -> (O, Q) {\n  O(i) = int8(A(i) * 3.0) + B(i)\n"
                   "  Q(i) = fp16(abs(B(i)) + A(i))\n}", {"N": 7}),
    ("kron", "def k(int8(M,N) A, int8(P,Q) B) -> (O) { O(i, k, j, l) = A(i, j) * B(k, l) }",
     {"M": 3, "N": 4, "P": 5, "Q": 6}),
    ("reverse", "def r(int8(I) B) -> (A) { A(i) = B(10 - i) }", {"I": 5}),
]


def emulate(src: str, sizes: dict[str, int], opts: MappingOptions | None = None,
            seed: int = 1) -> tuple[GpuProgram, list[str]]:
    """Map, lower, render and emulate every kernel; assert the outputs equal the interpreter."""
    d = load(src)
    c = d.at(sizes)
    ins = random_inputs(d, c, seed)
    ref = d.interpret(c, ins)
    prog = map_gpu(d.to_ir(sizes), opts)
    bufs = dict(ins)
    for name, (shape, dt) in prog.buffers.items():
        bufs[name] = np.zeros(shape, NP_DTYPE[dt])
    for o in d.cdef.outputs:
        bufs[o] = np.zeros(c.shapes[o], NP_DTYPE[d.cdef.tensors[o].dtype])
    sources = []
    for k in prog.kernels:
        func = lower_for_gpu(k.func)
        sources.append(render_cuda(func).source)
        Emulator(func).run(*(bufs[n] for n in (*k.inputs, k.output)))
    for o in d.cdef.outputs:
        if bufs[o].dtype.kind == "f":
            np.testing.assert_allclose(bufs[o], ref[o], rtol=1e-2, atol=1e-2)
        else:
            assert np.array_equal(bufs[o], ref[o]), o
    return prog, sources


@pytest.mark.parametrize("name, src, sizes", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_default_mapping_is_exact(name: str, src: str, sizes: dict[str, int]) -> None:
    emulate(src, sizes)


def test_kernels_compile_for_sm80_and_sm90(nvcc_check: NvccCheck) -> None:
    sources: list[str] = []
    for _, src, sizes in PROGRAMS:
        sources += emulate(src, sizes)[1]
    nvcc_check(sources)


def test_matmul_structure() -> None:
    prog, (src,) = emulate(MATMUL, {"M": 64, "N": 64, "K": 48})
    (k,) = prog.kernels
    assert set(k.shared) == {"A", "B"}
    assert k.knobs.threads == (8, 32) and k.knobs.tile == (16, 32) and k.knobs.kt == 16
    assert "__shared__" in src and "__syncthreads();" in src and "C_local" in src
    assert "blockIdx.y" in src and "threadIdx.x" in src


def test_epilogue_fusion_and_fission() -> None:
    prog, _ = emulate(MLP, {"B": 3, "M": 20, "N": 6})
    assert len(prog.kernels) == 1 and prog.kernels[0].statements == (1, 2)
    assert not prog.buffers
    prog, _ = emulate(MLP, {"B": 3, "M": 20, "N": 6}, MappingOptions(fusion="min"))
    assert [k.statements for k in prog.kernels] == [(1,), (2,)]
    assert prog.buffers == {"T": ((3, 6), "int32")}
    # a reduction read at another point cannot fuse into its reader: two launches
    prog, _ = emulate("def f(int8(N,M) A) -> (O) {\n  T(i) +=! A(i, j)\n"
                      "  O(i) = T(i) + T(N - 1 - i)\n}", {"N": 9, "M": 5})
    assert len(prog.kernels) == 2


@pytest.mark.parametrize("opts", [
    MappingOptions(tile=(8, 16), threads=(4, 8), reduction_tile=5),
    MappingOptions(tile=(7, 9), threads=(7, 3), reduction_tile=37),
    MappingOptions(threads=(64,), unroll=0),
    MappingOptions(use_shared=False, fusion="min"),
    MappingOptions(tile=(40, 1), threads=(4, 1), max_shared_bytes=64),
])
def test_explicit_options(opts: MappingOptions) -> None:
    prog, _ = emulate(MATMUL, {"M": 40, "N": 50, "K": 37}, opts)
    k = prog.kernels[0]
    if opts.tile is not None:
        assert k.knobs.tile == opts.tile
    if not opts.use_shared:
        assert k.shared == ()


def test_shared_budget_halves_the_reduction_tile() -> None:
    prog, _ = emulate(MATMUL, {"M": 32, "N": 32, "K": 64},
                      MappingOptions(reduction_tile=64, max_shared_bytes=1024))
    k = prog.kernels[0]
    assert k.knobs.kt is not None and k.knobs.kt < 64 and set(k.shared) == {"A", "B"}


def test_resolve_defaults_are_derived_from_the_shape() -> None:
    r = resolve(MappingOptions(), (1, 64, 56, 56), 576)
    assert r.threads == (1, 1, 8, 32) and r.tile == (1, 1, 16, 32) and r.kt == 16
    r = resolve(MappingOptions(), (5,), None)
    assert r.threads == (5,) and r.kt is None
    r = resolve(MappingOptions(tile=(4, 4), threads=(2,)), (3, 8, 8), None)
    assert r.tile == (1, 4, 4) and r.threads == (1, 1, 2)


@pytest.mark.parametrize("opts, msg", [
    (MappingOptions(threads=(64, 32)), "2048 threads per block"),
    (MappingOptions(threads=(2, 2, 2, 2)), "at most three thread dimensions"),
    (MappingOptions(tile=(4, 4), threads=(8, 8)), "threads must not exceed the tile"),
    (MappingOptions(fusion="some"), "fusion must be 'max' or 'min'"),
    (MappingOptions(tile=(0, 4)), "tile must be positive integers"),
    (MappingOptions(reduction_tile=0), "reduction_tile must be >= 1"),
])
def test_option_errors(opts: MappingOptions, msg: str) -> None:
    d = load(MATMUL)
    with pytest.raises(MappingError, match=msg):
        map_gpu(d.to_ir({"M": 16, "N": 16, "K": 16}), opts)
