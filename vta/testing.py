"""Property-based testing across targets: hypothesis strategies and ``assert_same_on_targets``.

The project's own differential tests are written with this module, and so can a user's: draw a
shape, a hardware config and schedule knobs with the strategies below, and demand the same
integers from every layer with one call::

    from hypothesis import given
    import vta.testing as vt

    @given(shape=vt.matmul_shapes(max_m=24), hw=vt.hw_configs(dtypes=vt.INT8), seed=vt.seeds())
    def test_dense(shape, hw, seed):
        vt.assert_same_on_targets(lambda: dense(*shape), {"vta": on_vta, "cuda": on_gpu},
                                  hw=hw, seed=seed)

``assert_same_on_targets(compute_fn, schedules, inputs)`` builds the logical compute
``compute_fn()`` once per schedule, runs it on every layer the schedule's target has - the
accelerator's cycle-level simulator, its ISA reference interpreter and the IR interpreter on the
scheduled function (``"vta..."``); the SIMT emulator and, when CuPy finds a GPU, the GPU
(``"cuda..."``) - and compares every output with the tensor-IR interpreter on the *unscheduled*
compute (the compute's meaning). The first differing element is reported with its indices.

Strategies: hardware configs (``shipped_hw``, ``small_hw``, ``random_hw``: random valid ones,
``hw_configs``: all three, filterable by GEMM dtypes), shapes (``dims``, ``shapes``,
``matmul_shapes``, ``matmul_specs``, ``conv2d_specs``), dtypes, epilogues, inputs (``seeds``,
``inputs_for``) and schedule knobs (``workload_knobs`` for the accelerator's default schedule,
``simt_knobs``, ``wmma_knobs``). Needs hypothesis (``pip install 'vta[test]'``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from vta.compiler.accel.pack import pack
from vta.compiler.ir.interp import run_func
from vta.compiler.ir.lower import lower
from vta.compiler.ir.schedule import create_schedule
from vta.gpu.runtime import gpu_available
from vta.run.build import build
from vta.run.check import differing

try:
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis import strategies as st
except ImportError as e:  # pragma: no cover - hypothesis is in the test extra
    raise ImportError("vta.testing needs hypothesis: pip install 'vta[test]' (or hypothesis)"
                      ) from e

from vta.compiler.ir.expr import max_, min_
from vta.compiler.ir.tensor import (
    ComputeOp,
    PlaceholderOp,
    Tensor,
    compute,
    placeholder,
    post_order,
    reduce_axis,
    sum_,
)
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.config import HwConfig, shipped_configs
from vta.dtypes import DATAPATH_DTYPES, DTYPES
from vta.errors import VtaError
from vta.gpu.schedules import SimtKnobs, WmmaKnobs

__all__ = [
    "INT8", "small_hw", "shipped_hw", "random_hw", "hw_configs", "dims", "shapes",
    "matmul_shapes", "matmul_specs", "conv2d_specs", "dtypes", "epilogues", "seeds",
    "inputs_for", "random_inputs", "workload_knobs", "simt_knobs", "wmma_knobs",
    "assert_same_on_targets", "first_difference", "reference_outputs", "Mismatch",
    "logical_dense", "dense_acc", "PROFILES", "register_profiles",
]

#: hypothesis profiles for vta's property tests (``register_profiles``): ``default`` (60
#: examples; the test suite's), ``thorough`` (1000; a nightly run), and ``fast`` (10 examples
#: and no shrinking: a failing example is reported as drawn, at once, instead of after
#: minutes of shrinking a compile-heavy example). No deadline in any: one example compiles and
#: simulates a program, whose time depends on the machine's load.
PROFILES: dict[str, dict[str, Any]] = {
    "default": {"max_examples": 60},
    "thorough": {"max_examples": 1000},
    "fast": {"max_examples": 10,
             "phases": (Phase.explicit, Phase.reuse, Phase.generate, Phase.target)},
}


def register_profiles(load: str | None = None) -> None:
    """Register ``PROFILES`` with hypothesis (each without a deadline, and without the
    too-slow health check: a compile is slow by nature), and load ``load`` when given (a
    user's conftest: ``vta.testing.register_profiles("fast")``; pytest's
    ``--hypothesis-profile=fast`` picks one too)."""
    for name, kw in PROFILES.items():
        settings.register_profile(name, deadline=None,
                                  suppress_health_check=[HealthCheck.too_slow], **kw)
    if load is not None:
        if load not in PROFILES:
            raise VtaError(f"no hypothesis profile {load!r} (vta.testing has "
                           f"{', '.join(PROFILES)})")
        settings.load_profile(load)

#: GEMM dtypes (input, weight, output) of the shipped configs: ``hw_configs(dtypes=INT8)``
INT8 = ("int8", "int8", "int8")


class Mismatch(AssertionError):
    """Two layers computed different values; the message names the layer, the output, the
    first differing element's indices and both values."""


def dense_acc(M: int, N: int, K: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``(x, w, bias, acc)``: a dense layer's int8 operands, its int32 bias and the int32
    accumulator ``acc = x @ w.T``, for a user's epilogue to be written on."""
    x = placeholder((M, K), "int8", "x")
    w = placeholder((N, K), "int8", "w")
    bias = placeholder((N,), "int32", "bias")
    k = reduce_axis(K, "k")
    acc = compute((M, N), lambda i, j: sum_(x[i, k].astype("int32") * w[j, k].astype("int32"),
                                            k), "acc")
    return x, w, bias, acc


def logical_dense(M: int, N: int, K: int, shift: int = 6) -> list[Tensor]:
    """``[x, w, bias, res]``: a dense layer written as a user's logical compute (the Python
    API's running example): ``res = clip((x @ w.T >> shift) + bias, -128, 127)`` as int8, the
    epilogue in separate stages."""
    x, w, bias, acc = dense_acc(M, N, K)
    shr = compute((M, N), lambda i, j: (acc[i, j] >> shift) + bias[j], "shr")
    clip = compute((M, N), lambda *i: min_(max_(shr[i], -128), 127), "clip")
    res = compute((M, N), lambda *i: clip[i].astype("int8"), "res")
    return [x, w, bias, res]


# ---------------------------------------------------------------------------- hardware


def small_hw(batch: int = 1, block: int = 4, depth: int = 64, **changes: Any) -> HwConfig:
    """A pynq-like config with small blocks and ``depth``-entry scratchpads (fast to test,
    and small enough that random indices hit the edges); ``changes`` as
    ``HwConfig.with_changes`` takes them (``"alu.lanes": 4``)."""
    data = {
        "name": f"small_b{batch}_k{block}",
        "gemm": {"batch": batch, "block_in": block, "block_out": block},
        "scratchpad": {"uop": depth * 4, "inp": depth * batch * block,
                       "wgt": depth * block * block, "acc": depth * batch * block * 4,
                       "out": depth * batch * block},
        "memory": {"bus_bytes": 8, "latency": 8, "burst_bytes": 32, "outstanding": 2},
    }
    hw = HwConfig.from_dict(data, source="<small_hw>")
    return hw.with_changes(**changes) if changes else hw


@functools.cache
def shipped_hw() -> tuple[HwConfig, ...]:
    """Every shipped configuration (``vta.config.shipped_configs``: pynq, ultra96, zcu104,
    de10nano, research_32x32, and the pynq variants)."""
    return tuple(HwConfig.from_yaml(p) for p in shipped_configs().values())


@functools.cache
def _small() -> tuple[HwConfig, ...]:
    return (small_hw(),
            small_hw(batch=2, block=4, **{"alu.lanes": 4, "memory.shared_port": False}),
            small_hw(block=8, **{"queues.command_depth": 2, "queues.token_depth": 2,
                                 "queues.fetch_batch": 3}))


#: bytes per element of the datapath's types (``vta.dtypes.DTYPES``)
_BYTES = {n: DTYPES[n].bytes for n in DATAPATH_DTYPES}


@st.composite
def random_hw(draw: st.DrawFn, dtypes: tuple[str, str, str] | None = None) -> HwConfig:
    """A small random valid config: batch, block_in != block_out, dtypes (``dtypes`` fixes
    input, weight and output types), depths, pipeline, ALU, queue and memory parameters, and
    the semantics variants (``alu.shift_bits``, ``alu.reset``, ``gemm.reset_out``: vta.cc's
    or a fix, docs/hwconfig.md)."""
    g: dict[str, Any] = {"batch": draw(st.sampled_from([1, 2, 4])),
                         "block_in": draw(st.sampled_from([2, 4, 8])),
                         "block_out": draw(st.sampled_from([2, 4, 8])),
                         "inp_dtype": draw(st.sampled_from(["int8", "int8", "int16"])),
                         "wgt_dtype": draw(st.sampled_from(["int8", "int8", "int16"])),
                         "acc_dtype": "int32",
                         "out_dtype": draw(st.sampled_from(["int8", "int8", "int16", "int32"])),
                         "pipeline_depth": draw(st.integers(1, 6)),
                         "ii": draw(st.integers(1, 2)),
                         "reset_out": draw(st.sampled_from(["sum", "sum", "keep", "zero"]))}
    if dtypes is not None:
        g["inp_dtype"], g["wgt_dtype"], g["out_dtype"] = dtypes
    inp_b = g["batch"] * g["block_in"] * _BYTES[g["inp_dtype"]]
    wgt_b = g["block_out"] * g["block_in"] * _BYTES[g["wgt_dtype"]]
    acc_b = g["batch"] * g["block_out"] * 4
    out_b = g["batch"] * g["block_out"] * _BYTES[g["out_dtype"]]
    depth = st.sampled_from([64, 128])  # a padded LOAD image is up to 56 entries
    acc_depth = draw(depth)
    bus = draw(st.sampled_from([4, 8, 16]))
    data = {
        "name": "random_small",
        "timing_model": draw(st.sampled_from(["hls", "chisel"])),
        "gemm": g,
        "alu": {"ops": ["min", "max", "add", "shr", "mul"],
                "lanes": draw(st.sampled_from([1, 2, 4, 8, 16])),
                "ii": draw(st.integers(1, 3)), "ii_imm": draw(st.integers(1, 2)),
                "pipeline_depth": draw(st.integers(1, 6)),
                "imm_bits": draw(st.sampled_from([8, 12, 16])),
                "reset": draw(st.sampled_from(["ignored", "ignored", "zero"])),
                **({} if (bits := draw(st.sampled_from([None, None, 6, 32]))) is None
                   else {"shift_bits": bits})},
        "scratchpad": {"uop": draw(depth) * 4, "inp": draw(depth) * inp_b,
                       "wgt": draw(depth) * wgt_b, "acc": acc_depth * acc_b,
                       "out": acc_depth * out_b},
        "queues": {"command_depth": draw(st.integers(1, 4)),
                   "token_depth": draw(st.integers(1, 4)),
                   "fetch_batch": draw(st.integers(1, 4))},
        "memory": {"bus_bytes": bus, "latency": draw(st.integers(0, 40)),
                   "burst_bytes": bus * draw(st.integers(1, 4)),
                   "outstanding": draw(st.integers(1, 4)),
                   "row_overhead": draw(st.integers(0, 2)),
                   "shared_port": draw(st.booleans())},
    }
    return HwConfig.from_dict(data, source="<random_hw>")


def _gemm_dtypes(hw: HwConfig) -> tuple[str, str, str]:
    return hw.gemm.inp_dtype, hw.gemm.wgt_dtype, hw.gemm.out_dtype


def hw_configs(*, shipped: bool = True, small: bool = True, random: bool = True,
               dtypes: tuple[str, str, str] | None = None,
               separate_alu: bool = True) -> st.SearchStrategy[HwConfig]:
    """Small fixed configs, every shipped config and small random valid ones (each family
    can be switched off); ``dtypes`` keeps those whose GEMM input, weight and output types are
    these (``INT8`` for an int8 compute); ``separate_alu=False`` leaves out hardware whose ALU
    is a pipeline of its own (``alu.separate_pipeline``: its tokens run through a fourth
    module, which hand-written programs for VTA's three-module chain do not carry)."""
    def keep(hs: Sequence[HwConfig]) -> list[HwConfig]:
        return [h for h in hs if (dtypes is None or _gemm_dtypes(h) == tuple(dtypes))
                and (separate_alu or not h.alu.separate_pipeline)]

    parts: list[st.SearchStrategy[HwConfig]] = []
    for on, family in ((small, _small), (shipped, shipped_hw)):
        hs = keep(family()) if on else []
        if hs:
            parts.append(st.sampled_from(hs))
    if random:
        parts.append(random_hw(dtypes))
    if not parts:
        raise VtaError("hw_configs: every family is switched off or filtered out")
    return st.one_of(*parts)


# ---------------------------------------------------------------------------- shapes, data


def dims(lo: int = 1, hi: int = 64) -> st.SearchStrategy[int]:
    """A dimension's extent."""
    return st.integers(lo, hi)


def shapes(ndim: int, lo: int = 1, hi: int = 16) -> st.SearchStrategy[tuple[int, ...]]:
    """A shape of ``ndim`` extents in ``[lo, hi]``."""
    return st.tuples(*(dims(lo, hi) for _ in range(ndim)))


def matmul_shapes(max_m: int = 80, max_n: int = 80, max_k: int = 80,
                  min_size: int = 1) -> st.SearchStrategy[tuple[int, int, int]]:
    """``(M, N, K)`` of a matrix product, sizes that are multiples of no tile in particular."""
    return st.tuples(dims(min_size, max_m), dims(min_size, max_n), dims(min_size, max_k))


def matmul_specs(max_m: int = 80, max_n: int = 80, max_k: int = 80
                 ) -> st.SearchStrategy[MatmulSpec]:
    """``matmul_shapes`` as the ops' ``MatmulSpec``."""
    return st.builds(MatmulSpec, dims(1, max_m), dims(1, max_n), dims(1, max_k))


@st.composite
def conv2d_specs(draw: st.DrawFn, kernels: Sequence[int] = (1, 3, 7),
                 strides: Sequence[int] = (1, 2), max_pad: int = 3, min_hw: int = 1,
                 max_hw: int = 9, max_batch: int = 2, max_channels: int = 40) -> Conv2dSpec:
    """An NCHW convolution: square kernel from ``kernels``, pad up to ``max_pad`` (and below
    the kernel), an input of ``min_hw..max_hw`` rows and columns that the kernel fits."""
    k = draw(st.sampled_from(list(kernels)))
    pad = draw(st.integers(0, min(max_pad, k - 1)))
    stride = draw(st.sampled_from(list(strides)))
    h = draw(st.integers(max(min_hw, k - 2 * pad), max(max_hw, k - 2 * pad)))
    w = draw(st.integers(max(min_hw, k - 2 * pad), max(max_hw, k - 2 * pad)))
    return Conv2dSpec(n=draw(st.integers(1, max_batch)), ic=draw(st.integers(1, max_channels)),
                      h=h, w=w, oc=draw(st.integers(1, max_channels)), kh=k, kw=k,
                      stride=stride, pad=pad)


def dtypes(*names: str) -> st.SearchStrategy[str]:
    """One of ``names`` (default: the integer types the accelerator's GEMM takes)."""
    return st.sampled_from(list(names) or ["int8", "int16"])


#: both epilogue forms: VTA's shift-bias-clip and the fixed-point requantization (its rounding
#: term within the ALU's 16-bit immediate, so an accelerator whose ALU has MUL runs it too; VTA's
#: own ALU, a ``stock`` config, refuses its multiplier by name)
def epilogues() -> st.SearchStrategy[Epilogue]:
    """A requantizing epilogue (``vta.compiler.ops.epilogue.Epilogue``), either form."""
    return st.one_of(
        st.builds(lambda shift, bias, lo, span: Epilogue(shift, bias, lo, min(127, lo + span)),
                  st.integers(0, 12), st.booleans(), st.integers(-128, 20), st.integers(0, 255)),
        st.builds(lambda shift, mult, bias, lo, span: Epilogue(
            shift, bias, lo, min(127, lo + span), kind="fixed_point", mult=mult),
            st.integers(1, 15), st.integers(-(1 << 15), (1 << 15) - 1).filter(bool),
            st.booleans(), st.integers(-128, 20), st.integers(0, 255)))


def seeds() -> st.SearchStrategy[int]:
    """A seed for ``random_inputs`` (hypothesis shrinks it; the arrays follow)."""
    return st.integers(0, 2 ** 32 - 1)


def _placeholders(tensors: Sequence[Tensor]) -> list[Tensor]:
    outs = [t for t in tensors if isinstance(t.op, ComputeOp)]
    seen = [t for t in tensors if isinstance(t.op, PlaceholderOp)]
    for t in post_order(outs):
        if isinstance(t.op, PlaceholderOp) and all(t is not s for s in seen):
            seen.append(t)
    return seen


def random_inputs(tensors: Sequence[Tensor], seed: int = 0, *,
                  int32_bound: int = 1 << 10) -> dict[str, np.ndarray]:
    """An array for every placeholder of ``tensors``' compute, by name: integers of 8 or 16
    bits uniform over their range, wider ones (a bias) within ``int32_bound``, floats
    standard normal."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for t in _placeholders(tensors):
        dt = np.dtype(t.dtype)
        if dt.kind in "iu" and dt.itemsize <= 2:
            info = np.iinfo(dt)
            out[t.name] = rng.integers(info.min, info.max, t.shape, dtype=dt, endpoint=True)
        elif dt.kind in "iu":
            out[t.name] = rng.integers(-int32_bound, int32_bound, t.shape, dtype=dt,
                                       endpoint=True)
        elif dt.kind == "b":
            out[t.name] = rng.integers(0, 1, t.shape, endpoint=True).astype(dt)
        else:
            out[t.name] = rng.standard_normal(t.shape).astype(dt)
    return out


def inputs_for(tensors: Sequence[Tensor]) -> st.SearchStrategy[dict[str, np.ndarray]]:
    """Inputs for ``tensors``' placeholders (``random_inputs`` of a drawn seed)."""
    return seeds().map(lambda s: random_inputs(tensors, s))


# ---------------------------------------------------------------------------- schedule knobs


@st.composite
def workload_knobs(draw: st.DrawFn) -> dict[str, Any]:
    """Knobs the accelerator's default schedule model can be forced with (``vthreads``, and
    sometimes ``th`` and ``vt_axis``; ``vta.run.layer.run_layer(**knobs)``)."""
    out: dict[str, Any] = {"vthreads": draw(st.sampled_from([None, 1, 2]))}
    if draw(st.booleans()):
        out["th"] = draw(st.integers(1, 4))
    if draw(st.booleans()):
        out["vt_axis"] = draw(st.sampled_from(["oh", "oc"]))
    return out


def simt_knobs() -> st.SearchStrategy[SimtKnobs]:
    """SIMT schedule tiles (block, K slice, register tile) within 1024 threads a block."""
    return st.builds(SimtKnobs, st.sampled_from([16, 32, 64]), st.sampled_from([16, 32, 64]),
                     st.sampled_from([4, 8, 16]), st.sampled_from([1, 2, 4]),
                     st.sampled_from([1, 2, 4]), st.booleans()
                     ).filter(lambda k: (k.bm // k.tm) * (k.bn // k.tn) <= 1024)


@st.composite
def wmma_knobs(draw: st.DrawFn, vec: int = 1) -> WmmaKnobs:
    """Tensor-core schedule tiles: 1-2 warps each way, 1-2 fragments a warp, K slices of 16
    or 32, with or without double buffering; copies ``vec`` elements wide."""
    wm, wn = draw(st.sampled_from([1, 2])), draw(st.sampled_from([1, 2]))
    bm = 16 * wm * draw(st.sampled_from([1, 2]))
    bn = 16 * wn * draw(st.sampled_from([1, 2]))
    bk = draw(st.sampled_from([16, 32]))
    return WmmaKnobs(bm, bn, bk, wm, wn, draw(st.booleans()), vec=vec)


# ---------------------------------------------------------------------------- comparing


def first_difference(got: np.ndarray, want: np.ndarray, rtol: float = 0.0, atol: float = 0.0
                     ) -> tuple[tuple[int, ...], Any, Any, int] | None:
    """``(index, got, want, how many differ)`` of the first element (in C order) where ``got``
    and ``want`` differ (floats: beyond ``atol + rtol * |want|``), or None. Shapes must match."""
    if got.shape != want.shape:
        raise Mismatch(f"shape {list(got.shape)} where {list(want.shape)} was expected")
    floats = got.dtype.kind == "f" or want.dtype.kind == "f"
    bad = differing(want, got, rtol, atol) if floats else differing(want, got)
    n = int(np.count_nonzero(bad))
    if n == 0:
        return None
    idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), bad.shape))
    return idx, got[idx].item(), want[idx].item(), n


def _compare(label: str, got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray],
             against: str, rtol: float, atol: float) -> None:
    for name, w in want.items():
        if name not in got:
            raise Mismatch(f"{label}: output {name} is missing")
        d = first_difference(np.asarray(got[name]), np.asarray(w), rtol, atol)
        if d is not None:
            idx, g, e, n = d
            raise Mismatch(f"{label}: output {name}{list(idx)} = {g}, {against} gives {e} "
                           f"({n} of {w.size} elements differ)")


def reference_outputs(compute_fn: Callable[[], Sequence[Tensor]],
                      inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The outputs of the *unscheduled* compute in the tensor-IR interpreter: its meaning."""
    args = list(compute_fn())
    outs = [t for t in args if isinstance(t.op, ComputeOp)]
    func = lower(create_schedule(outs), args, "reference")
    arrays: dict[str, np.ndarray] = {}
    for t, b in zip(args, func.params, strict=True):
        if isinstance(t.op, ComputeOp):
            arrays[b.name] = np.zeros(t.shape, np.dtype(t.dtype))
        else:
            if t.name not in inputs:
                raise VtaError(f"no input array for {t.name}")
            arrays[b.name] = np.ascontiguousarray(inputs[t.name], np.dtype(t.dtype))
    run_func(func, {b: arrays[b.name] for b in func.params})
    return {t.name: arrays[t.name] for t in outs}


Schedules = Mapping[str, Callable[..., Any]]


def _target_of(label: str) -> str:
    if label.startswith("vta"):
        return "vta"
    if label.startswith("cuda"):
        return "cuda"
    raise VtaError(f"schedule label {label!r}: start it with 'vta' (the accelerator) or 'cuda' "
                   f"(the GPU, emulated and real)")


def _use_gpu(gpu: bool | str) -> bool:
    if gpu is False:
        return False

    if gpu == "auto":
        return gpu_available()
    return True


def assert_same_on_targets(compute_fn: Callable[[], Sequence[Tensor]], schedules: Schedules,
                           inputs: Mapping[str, np.ndarray] | None = None, *,
                           hw: HwConfig | None = None, seed: int = 0,
                           gpu: bool | str = "auto",
                           expected: Callable[[Mapping[str, np.ndarray]],
                                              Mapping[str, np.ndarray]] | None = None,
                           rtol: float = 0.0, atol: float = 0.0) -> dict[str, Any]:
    """Run ``compute_fn()`` (a fresh logical compute: its parameters, inputs then outputs)
    under each of ``schedules`` and raise ``Mismatch`` unless every layer gives the same
    outputs as the tensor-IR interpreter on the unscheduled compute (module docstring).

    ``schedules`` maps a label starting with ``"vta"`` or ``"cuda"`` to a function
    ``(tensors, hw) -> Schedule | (Schedule, params)``: for the accelerator ``tensors`` is the
    ``Packed`` compute (``vta.pack``: iterate it or index it by name), for the GPU the logical
    tensors. ``inputs`` default to ``random_inputs(.., seed)``; ``expected(inputs)`` (a numpy
    reference) is checked against the interpreter too; ``gpu``: ``"auto"`` runs the real GPU
    when CuPy finds one, ``True`` requires it. Floats compare within ``atol + rtol * |x|``.
    Returns each run's ``vta.Result`` by label (``"vta"``, ``"vta/reference"``,
    ``"vta/interp"``, ``"cuda"``, ``"cuda/gpu"``...)."""
    probe = list(compute_fn())
    data = dict(inputs) if inputs is not None else random_inputs(probe, seed)
    want = reference_outputs(compute_fn, data)
    if expected is not None:
        _compare("the tensor-IR interpreter", want, expected(data), "the expected function",
                 rtol, atol)
    runs: dict[str, Any] = {}
    for label, fn in schedules.items():
        target = _target_of(label)
        args = list(compute_fn())
        if target == "vta":
            if hw is None:
                raise VtaError(f"schedule {label!r} is for the accelerator: pass hw=")
            packed = pack(args, hw)
            mod = build(fn(packed, hw), packed, "vta", hw=hw)
            runs[label] = mod(data)
            runs[f"{label}/reference"] = mod.reference(data)
            runs[f"{label}/interp"] = mod.interpret(data)
        else:
            sched = fn(args, hw)
            mod = build(sched, None if isinstance(sched, tuple) else args, "cuda-emu")
            runs[label] = mod(data)
            if _use_gpu(gpu):
                real = build(sched, None if isinstance(sched, tuple) else args, "cuda")
                runs[f"{label}/gpu"] = real(data)
    for label, r in runs.items():
        _compare(label, r.outputs, want, "the interpreter on the unscheduled compute", rtol,
                 atol)
    return runs
