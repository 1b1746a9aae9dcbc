"""Schedule spaces of the GPU kernels: the knobs of the SIMT, WMMA and task-mapping kernels.

The same shape of space as the accelerator's (``vta.compiler.accel.schedules.space``; points
and enumeration are ``vta.compiler.ir.space``): knobs whose values come from the GPU's hardware
facts, the same rules for every problem, bound to one problem for pruning. Knobs and values:

* ``simt`` (``schedules.SimtKnobs``): block tile ``bm`` x ``bn`` of 32, 64 or 128, K slice
  ``bk`` 8, 16 or 32, per-thread register tile ``tm`` x ``tn`` of 2, 4 or 8;
* ``wmma`` (``schedules.WmmaKnobs``): ``bm``, ``bn`` multiples of the 16x16 WMMA tile (32 ...
  256), ``bk`` 16, 32 or 64, ``warps_m`` x ``warps_n`` warps of 1, 2 or 4;
* ``mma`` (``kernels.gemm.MmaKnobs``): ``bm``, ``bn`` 32 ... 256, ``bk`` one, two or four
  ``mma.sync`` k-steps of the dtype (``mma.MMA_SHAPES``), warps as above, ``stages`` 2, 3 or 4
  shared buffers in the ``cp.async`` ring.

A point is refused (with its reason) when the knobs break their own rules (tiles not a
multiple of the warps' tiles, a vector that does not divide ``bk``), when a block would have
more than ``GpuTarget.max_threads`` threads, or when a tile is larger than the problem needs (a
block tile past the smallest one of the space covering M or N: the same kernel with idle warps). The
lowering checks the rest when a point is built (registers per thread, shared memory), and a
point it refuses is counted as the tuner's failure with its message.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from vta.compiler.ir.space import Point
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.matmul import MatmulSpec
from vta.errors import GpuLoweringError, ScheduleError, VtaError
from vta.gpu import schedules as G
from vta.gpu.kernels.gemm import MmaKnobs
from vta.gpu.mma import MMA_SHAPES
from vta.gpu.target import DEFAULT_TARGET, WARP_LANES

__all__ = ["GpuSpace", "GpuProblem", "KINDS", "knobs_of"]

KINDS = ("simt", "wmma", "mma")


def _domains(kind: str, dtype: str) -> dict[str, tuple[int, ...]]:
    if kind == "simt":
        return {"bm": (32, 64, 128), "bn": (32, 64, 128), "bk": (8, 16, 32), "tm": (2, 4, 8),
                "tn": (2, 4, 8)}
    tiles = (32, 64, 128, 256)
    warps = (1, 2, 4)
    if kind == "wmma":
        return {"bm": tiles, "bn": tiles, "bk": (16, 32, 64), "warps_m": warps,
                "warps_n": warps}
    k = MMA_SHAPES[dtype].k
    return {"bm": tiles, "bn": tiles, "bk": (k, 2 * k, 4 * k), "warps_m": warps,
            "warps_n": warps, "stages": (2, 3, 4)}


def _gemm_dims(spec: Conv2dSpec | MatmulSpec) -> tuple[int, int, int]:
    """(M, N, K) of the implicit GEMM."""
    if isinstance(spec, Conv2dSpec):
        return spec.n * spec.oh * spec.ow, spec.oc, spec.ic * spec.kh * spec.kw
    return spec.m, spec.n, spec.k


def knobs_of(kind: str, dtype: str, point: Point) -> Any:
    """The kernel family's knob object of ``point``."""
    v = point.as_dict()
    if kind == "simt":
        return G.SimtKnobs(v["bm"], v["bn"], v["bk"], v["tm"], v["tn"])
    if kind == "wmma":
        return G.WmmaKnobs(v["bm"], v["bn"], v["bk"], v["warps_m"], v["warps_n"], True,
                           16 if dtype == "int8" else 8)
    return MmaKnobs(v["bm"], v["bn"], v["bk"], v["warps_m"], v["warps_n"], v["stages"])


@dataclass(frozen=True)
class GpuSpace:
    """The space of one kernel family for one dtype (module docstring)."""

    kind: str
    dtype: str = "int8"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise VtaError(f"unknown GPU kernel family {self.kind!r}; expected one of "
                           f"{', '.join(KINDS)}")

    @property
    def name(self) -> str:
        return f"cuda.{self.kind}"

    @property
    def knobs(self) -> tuple[str, ...]:
        return tuple(_domains(self.kind, self.dtype))

    def bind(self, spec: Conv2dSpec | MatmulSpec) -> GpuProblem:
        return GpuProblem(self, spec)


@dataclass(frozen=True)
class GpuProblem:
    """A ``GpuSpace`` bound to one problem."""

    rules: GpuSpace
    spec: Conv2dSpec | MatmulSpec

    KINDS: ClassVar[tuple[str, ...]] = KINDS

    @property
    def name(self) -> str:
        return self.rules.name

    @property
    def knobs(self) -> tuple[str, ...]:
        return self.rules.knobs

    def domain(self, knob: str, point: Mapping[str, Any]) -> tuple[Any, ...]:
        return _domains(self.rules.kind, self.rules.dtype)[knob]

    def points(self) -> Iterator[Point]:
        doms = _domains(self.rules.kind, self.rules.dtype)
        yield from self._points(doms, list(doms), {})

    def _points(self, doms: dict[str, tuple[int, ...]], left: list[str],
                partial: dict[str, Any]) -> Iterator[Point]:
        if not left:
            yield Point.of(self.knobs, partial)
            return
        for v in doms[left[0]]:
            yield from self._points(doms, left[1:], {**partial, left[0]: v})

    def default(self) -> Point:
        """The point of the kernel family's default knobs for this problem (the schedule
        ``vta run --target cuda`` uses), moved into the space where it lies outside."""
        kind = self.rules.kind
        if kind == "simt":
            d = G.SimtKnobs()
            values: dict[str, Any] = {"bm": d.bm, "bn": d.bn, "bk": d.bk, "tm": d.tm, "tn": d.tn}
        elif kind == "wmma":
            w = (G.WmmaKnobs() if isinstance(self.spec, MatmulSpec) else
                 G.WmmaKnobs(bm=64, bn=64, bk=32, warps_m=2, warps_n=2))
            values = {"bm": w.bm, "bn": w.bn, "bk": w.bk, "warps_m": w.warps_m,
                      "warps_n": w.warps_n}
        else:
            m = MmaKnobs().resolved(self.rules.dtype)
            values = {"bm": m.bm, "bn": m.bn, "bk": m.bk, "warps_m": m.warps_m,
                      "warps_n": m.warps_n, "stages": m.stages}
        M, N, _ = _gemm_dims(self.spec)
        values["bm"] = min(values["bm"], self._cover(M))
        values["bn"] = min(values["bn"], self._cover(N))
        return Point.of(self.knobs, values)

    def _cover(self, extent: int) -> int:
        """The smallest block tile of the space covering ``extent`` (else the largest)."""
        tiles = _domains(self.rules.kind, self.rules.dtype)["bm"]
        return next((t for t in tiles if t >= extent), tiles[-1])

    def refusal(self, point: Point) -> tuple[str, str] | None:
        v = point.as_dict()
        doms = _domains(self.rules.kind, self.rules.dtype)
        for k, vals in doms.items():
            if v.get(k) not in vals:
                return ("outside the space", f"{k}={v.get(k)} is not a value of {self.name} "
                        f"({k} takes {', '.join(map(str, vals))})")
        kind = self.rules.kind
        threads = ((v["bm"] // v["tm"]) * (v["bn"] // v["tn"]) if kind == "simt"
                   else WARP_LANES * v["warps_m"] * v["warps_n"])
        if kind == "simt" and (v["bm"] % v["tm"] or v["bn"] % v["tn"]):
            pass  # the knobs' own check names it
        elif threads > DEFAULT_TARGET.max_threads:
            return ("threads per block", f"{point}: {threads} threads per block (at most "
                    f"{DEFAULT_TARGET.max_threads})")
        try:
            kb = knobs_of(kind, self.rules.dtype, point)
            kb.check(self.rules.dtype) if kind == "mma" else kb.check()
        except (ScheduleError, GpuLoweringError) as e:
            return ("knob rule", str(e))
        M, N, _ = _gemm_dims(self.spec)
        if kind == "wmma" and min(M, N) < 16:
            return ("smaller than a tile", f"the GEMM {M}x{N} is smaller than one 16x16 WMMA "
                    f"tile; tune the simt kernels")
        for knob, extent in (("bm", M), ("bn", N)):
            if v[knob] > self._cover(extent):
                return ("tile larger than the problem", f"{knob}={v[knob]} is larger than "
                        f"{self._cover(extent)}, the smallest tile covering {extent}")
        return None
