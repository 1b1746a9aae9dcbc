"""Accelerator mapping of TC definitions: which values become GEMM, ALU or CPU tasks (and why),
the index structure read off a contraction, planes for results wider than the out buffer, and
end-to-end runs on the cycle-level simulator bit-exact against the TC interpreter."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from vta.compiler.accel.tc_map import AluTask, CpuTask, GemmTask, combine_planes, plan_vta, planes
from vta.compiler.tc import load
from vta.config import HwConfig
from vta.run.targets import AccelTarget
from vta.run.tc import run_vta


def _plan(src: str, sizes: dict[str, int], hw: HwConfig):  # type: ignore[no-untyped-def]
    return plan_vta(load(src).to_ir(sizes), hw)


def _kinds(src: str, sizes: dict[str, int], hw: HwConfig) -> list[str]:
    return [type(t).__name__ for t in _plan(src, sizes, hw).tasks]


def test_contraction_index_structure(pynq: HwConfig) -> None:
    src = ("def g(int8(N,G,C,H,W) I, int8(G,K,C,R,S) W1) -> (O) {\n"
           "  O(n, g, k, h, w) +=! I(n, g, c, 2*h + r, w + s) * W1(g, k, c, r, s)\n}")
    (t,) = _plan(src, {"N": 2, "G": 3, "C": 4, "H": 9, "W": 6, "K": 5, "R": 3, "S": 2},
                 pynq).tasks
    assert isinstance(t, GemmTask)
    assert [a.name for a in t.batch] == ["g"] and [a.name for a in t.cols] == ["k"]
    assert [a.name for a in t.rows] == ["n", "h", "w"]
    assert [a.name for a in t.red] == ["c", "r", "s"]
    assert (t.batches, t.spec.m, t.spec.n, t.spec.k) == (3, 2 * 4 * 5, 5, 4 * 3 * 2)
    assert t.macs == 3 * 40 * 5 * 24
    # two window strides (2 and 1): not one conv2d op, so the host gathers an im2col matrix
    assert t.conv is None
    src = src.replace("w + s", "2*w + s")
    (t,) = _plan(src, {"N": 2, "G": 3, "C": 4, "H": 9, "W": 10, "K": 5, "R": 3, "S": 2},
                 pynq).tasks
    assert isinstance(t, GemmTask) and t.conv is not None and t.batches == 3
    sp = t.conv.spec  # per group, a strided 2-D convolution for the conv2d op
    assert (sp.n, sp.ic, sp.oc, sp.kh, sp.kw, sp.stride, sp.pad) == (2, 4, 5, 3, 2, 2, 0)
    assert (sp.h, sp.w, sp.oh, sp.ow) == (9, 10, 4, 5)


@pytest.mark.parametrize("body, conv", [
    ("O(n,k,h,w) +=! I(n, c, 2*h + r, 2*w + s) * W(k, c, r, s)", True),
    ("O(n,h,w,k) +=! J(n, h + r + 1, w + s, c) * W(k, c, r, s) where r in 0:3, s in 0:3", True),
    ("O(n,k,h) +=! I(n, c, h + r, 0) * W(k, c, r, 0)", True),
    ("O(n,k,h,w) +=! I(n, c, h, w) * W(k, c, 0, 0)", False),
    ("O(n,k,h,w) +=! I(n, c, h + r, w + r) * W(k, c, r, 0)", False),
    ("O(n,k,h,w) +=! I(n, c, h + r, 2*w + s) * W(k, c, r, s)", False),
])
def test_convolution_recognition(pynq: HwConfig, body: str, conv: bool) -> None:
    src = f"def f(int8(N,C,H,H) I, int8(N,H,H,C) J, int8(K,C,R,R) W) -> (O) {{ {body} }}"
    (t,) = _plan(src, {"N": 1, "C": 4, "H": 9, "K": 3, "R": 3}, pynq).tasks
    assert isinstance(t, GemmTask) and (t.conv is not None) == conv


def test_epilogue_chain_and_planes(pynq: HwConfig) -> None:
    src = ("def q(int8(M,K) A, int8(N,K) B, int32(N) b) -> (O) {\n"
           "  T(m, n) +=! A(m, k) * B(n, k)\n"
           "  O(m, n) = int8(fmin(fmax((T(m, n) >> 8) + b(n), 0), 127))\n}")
    (t,) = _plan(src, {"M": 8, "N": 16, "K": 32}, pynq).tasks
    assert isinstance(t, GemmTask) and len(t.stages) == 2 and t.cast == "int8"
    assert [(s.op, s.imm) for s in t.steps] == [("SHR", 8), ("ADD", None), ("MAX", 0),
                                                ("MIN", 127)]
    assert t.bias is not None and t.bias.tensor.name == "b"
    assert planes(t.value_range, t.cast, pynq) == 1
    # a raw int32 result needs as many byte planes as its range: 32 * 128 * 128 < 2^23
    (raw,) = _plan("def r(int8(M,K) A, int8(N,K) B) -> (C) { C(m,n) +=! A(m,k) * B(n,k) }",
                   {"M": 8, "N": 16, "K": 32}, pynq).tasks
    assert isinstance(raw, GemmTask) and planes(raw.value_range, raw.cast, pynq) == 3


def test_pool_and_elementwise_go_to_the_alu(pynq: HwConfig) -> None:
    (t,) = _plan("def p(int8(N,H,W) I) -> (O) {\n"
                 "  O(n,h,w) max=! I(n, 2*h + r, 2*w + s) where r in 0:3, s in 0:3\n}",
                 {"N": 1, "H": 9, "W": 9}, pynq).tasks
    assert isinstance(t, AluTask) and len(t.leaves) == 9 and {s.op for s in t.steps} == {"MAX"}
    assert planes(t.value_range, t.cast, pynq) == 1
    (t,) = _plan("def r(int8(N) A, int8(N) B) -> (O) { O(i) = A(i) > 0 ? A(i) : 0 }", {"N": 9},
                 pynq).tasks
    assert isinstance(t, AluTask) and [(s.op, s.imm) for s in t.steps] == [("MAX", 0)]


@pytest.mark.parametrize("body, reason", [
    ("O(i) = F(i) * 2.0", "floating-point value"),
    ("O(i) = A(i) * B(i) + A(i) * B(i)", "combines two computed values"),
    ("O(i) = A(i) - B(i)", "the ALU has no register SUB"),
    ("O(i) = A(i) + 100000", "does not fit the ALU's 16-bit immediate"),
    ("O(i) = A(i) > 3 ? A(i) : 0", "is not a ReLU"),
    ("O(i) = A(10 - i)", "a copy (no arithmetic)"),
    ("O(i) = A(i) / 2", "FloorDiv"),
    ("O(i) +=! int16(A(i)) * int16(B(k)) where k in 0:4", "not a GEMM"),
])
def test_cpu_fallback_reasons(pynq: HwConfig, body: str, reason: str) -> None:
    src = f"def f(int8(N) A, int8(N) B, fp32(N) F) -> (O) {{ {body} }}"
    plan = _plan(src, {"N": 9}, pynq)
    cpu = [t for t in plan.tasks if isinstance(t, CpuTask)]
    assert cpu and reason in cpu[0].reason, [t.reason for t in cpu]


def test_missing_alu_op_falls_back(pynq: HwConfig) -> None:
    no_max = replace(pynq, alu=replace(pynq.alu, ops=("min", "add", "shr", "mul")))
    src = "def r(int8(N) A) -> (O) { O(i) = fmax(A(i), 0) }"
    (t,) = _plan(src, {"N": 9}, no_max).tasks
    assert isinstance(t, CpuTask) and "has no MAX" in t.reason


def test_combine_planes() -> None:
    v = np.array([0, 1, -1, 2 ** 31 - 1, -2 ** 31, 123456789, -98765], np.int64)
    parts = [((v >> (8 * p)) & 0xFF).astype(np.uint8).view(np.int8) for p in range(4)]
    assert np.array_equal(combine_planes(parts, "int32", 8), v.astype(np.int32))
    small = np.array([-300, 0, 299], np.int64)
    two = [((small >> (8 * p)) & 0xFF).astype(np.uint8).view(np.int8) for p in range(2)]
    assert combine_planes(two, "int32", 8).tolist() == [-300, 0, 299]


RUNS = [
    ("def mm(int8(M,K) A, int8(N,K) B) -> (C) { C(m,n) +=! A(m,k) * B(n,k) }",
     {"M": 20, "N": 18, "K": 37}, ["GemmTask"]),
    ("def dw(int8(N,C,H,W) I, int8(C,R,S) W1) -> (O) {\n"
     "  O(n,c,h,w) +=! I(n,c,h+r,w+s) * W1(c,r,s)\n}",
     {"N": 1, "C": 3, "H": 6, "W": 6, "R": 3, "S": 3}, ["GemmTask"]),
    ("def f(int16(N) A, int8(N) B) -> (O) {\n  O(i) = A(i) * 2\n  O(i) += B(i) >> 1\n"
     "  O(i) *= A(i) > 0 ? 3 : -1\n}", {"N": 11}, ["AluTask", "AluTask", "CpuTask", "AluTask"]),
    ("def p(int32(N,M) A) -> (O) { O(i) *=! A(i, j) }", {"N": 4, "M": 3}, ["AluTask"]),
]


#: what differs on VTA's own ALU (pynq: no MUL) from pynq_mul: a product with a tensor and a
#: product reduction run on the host; a product by 2 is a left shift (SHR by -1) on both
ON_PYNQ = {RUNS[2][0]: ["AluTask", "AluTask", "CpuTask", "CpuTask"], RUNS[3][0]: ["CpuTask"]}


@pytest.mark.parametrize("config", ["pynq_mul", "pynq"])
@pytest.mark.parametrize("src, sizes, kinds", RUNS)
def test_runs_are_bit_exact(src: str, sizes: dict[str, int], kinds: list[str],
                            config: str) -> None:
    d = load(src)
    hw = HwConfig.load(config)
    r = run_vta(d, sizes, AccelTarget(hw), seed=5)
    assert r.passed, r.mismatches
    if config == "pynq":
        kinds = ON_PYNQ.get(src, kinds)
    assert [t.kind for t in r.tasks] == [k[:-4].upper() for k in kinds]
    on_vta = any(t.kind != "CPU" for t in r.tasks)
    assert (r.cycles > 0) == on_vta and (0 < r.fraction <= 1) == on_vta
    assert r.fraction == 1.0 or any(t.kind == "CPU" for t in r.tasks)


def test_a_product_by_a_power_of_two_is_a_shift(pynq: HwConfig) -> None:
    """VTA's ALU has no MUL: ``x * 8`` maps to SHR by -3; ``x * 3`` falls back to the host,
    naming MUL."""
    (t,) = _plan("def f(int32(N) A) -> (O) { O(i) = A(i) * 8 }", {"N": 9}, pynq).tasks
    assert isinstance(t, AluTask) and [(s.op, s.imm) for s in t.steps] == [("SHR", -3)]
    (t,) = _plan("def f(int32(N) A) -> (O) { O(i) = A(i) * 3 }", {"N": 9}, pynq).tasks
    assert isinstance(t, CpuTask) and "pynq's ALU has no MUL" in t.reason


def test_tc_matmul_is_the_gemm_intrinsic(pynq: HwConfig) -> None:
    """The tensor IR a TC matmul lowers to is what the tensorizer matches against the
    accelerator's GEMM intrinsic (1 x 16 x 16 on pynq), like a Python-API compute."""
    from vta.compiler import create_schedule, vta_gemm_intrinsic
    from vta.compiler.ir.lower import lower

    d = load("def mm(int8(M,K) A, int8(N,K) B) -> (C) { C(m,n) +=! A(m,k) * B(n,k) }")
    f = d.to_ir({"M": 4, "N": 32, "K": 64})
    (c,) = f.outputs
    s = create_schedule(c)
    st = s[c]
    m, n = st.axis
    no, ni = st.split(n, 16)
    ko, ki = st.split(st.reduce_axis[0], 16)
    mo, mi = st.split(m, 1)
    st.reorder(mo, no, ko, mi, ni, ki)
    st.tensorize(mi, vta_gemm_intrinsic(pynq))
    assert "tensorize" in str(lower(s, f.args, "mm"))
