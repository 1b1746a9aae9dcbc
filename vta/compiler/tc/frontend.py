"""The TC frontend in one call: read, parse, type-check, infer ranges, instantiate, describe.

``load_file(path, entry)`` gives a ``Definition`` (the checked definition and its symbolic
ranges); ``Definition.at(sizes)`` instantiates it (concrete ranges and shapes);
``Definition.to_ir(sizes)`` lowers it to the tensor IR; ``describe`` is what ``vta tc show``
prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vta.compiler.tc.ast import TCast, TRead
from vta.compiler.tc.interp import NP_DTYPE, interpret
from vta.compiler.tc.parser import parse
from vta.compiler.tc.ranges import Concrete, DefRanges, infer, instantiate, reads_of
from vta.compiler.tc.sema import CheckedDef, check
from vta.compiler.tc.to_ir import COMBINER, TcFunc, to_ir
from vta.errors import TcError, TcSizeError

__all__ = ["Definition", "load", "load_file", "definitions", "parse_sizes", "describe",
           "random_inputs"]


@dataclass(frozen=True)
class Definition:
    """A checked TC definition with its (symbolic) ranges."""

    cdef: CheckedDef
    ranges: DefRanges

    @property
    def name(self) -> str:
        return self.cdef.name

    def at(self, sizes: dict[str, int]) -> Concrete:
        return instantiate(self.ranges, sizes)

    def to_ir(self, sizes: dict[str, int]) -> TcFunc:
        return to_ir(self.cdef, self.at(sizes))

    def interpret(self, concrete: Concrete, inputs: dict[str, np.ndarray]
                  ) -> dict[str, np.ndarray]:
        """The reference values of every tensor the definition defines."""
        return interpret(self.cdef, concrete, inputs)


def load(text: str, name: str = "<tc>", entry: str | None = None) -> Definition:
    """Parse, check and range-infer definition ``entry`` of TC source ``text``."""
    cdef = check(parse(text, name), entry)
    return Definition(cdef, infer(cdef))


def load_file(path: str | Path, entry: str | None = None) -> Definition:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise TcError(f"{path}: cannot read file: {e.strerror or e}") from None
    return load(text, str(path), entry)


def definitions(path: str | Path) -> list[str]:
    """The names of the definitions in a TC file (parsed, not checked)."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise TcError(f"{path}: cannot read file: {e.strerror or e}") from None
    return [d.name for d in parse(text, str(path)).defs]


def parse_sizes(text: str | None) -> dict[str, int]:
    """``"N=1,C=64"`` -> ``{"N": 1, "C": 64}``."""
    out: dict[str, int] = {}
    if not text:
        return out
    for part in text.split(","):
        name, sep, value = part.strip().partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise TcSizeError(f"--size {text!r}: expected NAME=VALUE pairs separated by commas "
                              f"(e.g. N=1,C=64), got {part.strip()!r}")
        try:
            v = int(value)
        except ValueError:
            raise TcSizeError(f"--size {name}={value.strip()}: not an integer") from None
        if name in out:
            raise TcSizeError(f"--size: {name} is given twice")
        out[name] = v
    return out


def random_inputs(d: Definition, concrete: Concrete, seed: int = 0) -> dict[str, np.ndarray]:
    """Random values for every input: full-range 8-bit integers (int8 -128..127, uint8
    0..255; wider integers a few bits wider than 8 so products stay varied), 0/1 for bool,
    standard normal floats; an integer input read directly as another read's index (a lookup
    table's indices) in that dimension's bounds."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    lookups = _lookup_bounds(d, concrete)
    for t in d.cdef.inputs:
        shape = concrete.shapes[t.name]
        dt = NP_DTYPE[t.dtype]
        if t.name in lookups:  # an index table: values inside the tensor it indexes
            out[t.name] = rng.integers(0, lookups[t.name], shape).astype(dt)
        elif t.dtype.startswith("float"):
            out[t.name] = rng.standard_normal(shape).astype(dt)
        elif t.dtype == "bool":
            out[t.name] = rng.integers(0, 2, shape).astype(dt)
        elif t.dtype.startswith("uint"):
            out[t.name] = rng.integers(0, 256 if t.dtype == "uint8" else 1 << 12,
                                       shape).astype(dt)
        else:
            lim = 128 if t.dtype == "int8" else 1 << 11
            out[t.name] = rng.integers(-lim, lim, shape).astype(dt)
    return out


def _lookup_bounds(d: Definition, concrete: Concrete) -> dict[str, int]:
    """Integer inputs read directly as another read's index (``LUT(idx(b, l), d)``): the
    size of the smallest dimension they index (random tables stay in bounds)."""
    out: dict[str, int] = {}
    for st in d.cdef.stmts:
        for r in reads_of(st.rhs):
            for dim, e in enumerate(r.indices):
                while isinstance(e, TCast):
                    e = e.a
                if isinstance(e, TRead) and e.version < 0:
                    n = concrete.shapes[r.tensor][dim]
                    out[e.tensor] = min(out.get(e.tensor, n), n)
    return out


def describe(d: Definition, concrete: Concrete | None = None) -> str:
    """What ``vta tc show`` prints: per statement its inferred domain (isl, symbolic in the
    sizes), the range of each index, the reduction and any precondition; then every tensor's
    type and shape (and, at given sizes, the concrete ranges and shapes)."""
    c, r = d.cdef, d.ranges
    sig = ", ".join(f"{t.dtype}({', '.join(map(str, t.dims))}) {t.name}" if t.dims
                    else f"{t.dtype} {t.name}" for t in c.inputs)
    lines = [f"def {c.name}({sig}) -> ({', '.join(c.outputs)})",
             f"sizes: {', '.join(c.sizes) or '(none)'}"]
    for sr in r.stmts:
        st = sr.stmt
        lines.append(sr.stmt.label[0].upper() + sr.stmt.label[1:])
        lines.append(f"  domain: {sr.domain}")
        rngs = ", ".join(f"{v} in {r.range_text(st.index, v)}" for v in st.vars)
        lines.append(f"  ranges: {rngs or '(none: one point)'}")
        if sr.tc_ranges:
            tc = ", ".join(f"{v} in {r.range_text(st.index, v, tc=True)}" for v in sr.tc_ranges)
            lines.append(f"  TC's ranges: {tc} (a new tensor starts at 0 here: the points "
                         f"below 0 are not computed)")
        if st.reduce:
            init = "identity" if st.bang else f"previous {st.tensor}"
            lines.append(f"  reduction: {COMBINER[st.op]} over {', '.join(st.reduce)} "
                         f"(starting from the {init})")
        if st.equivalent is not None:
            lines.append(f"  equivalent (<=>, reported, not checked): {st.equivalent}")
        for acc, ok, _bad in sr.preconditions:
            lines.append(f"  precondition: {acc.text} stays in bounds only when "
                         f"{ok.gist_params(r.context).params()}")
        if concrete is not None:
            lines.append("  at these sizes: " + ", ".join(
                f"{v} in {lo}:{hi}" for v, (lo, hi) in concrete.ranges[st.index].items())
                + f"  ({concrete.points(st.index):,} points)")
    lines.append("tensors:")
    for name, info in c.tensors.items():
        shape = ", ".join(r.shape_text(name)) if info.kind != "input" \
            or info.shape_of is not None else ", ".join(map(str, info.dims))
        line = f"  {name}: {info.kind} {info.dtype} ({shape})"
        if info.shape_of is not None:
            line += f" (the starting values of {info.shape_of})"
        if concrete is not None:
            line += f" = {list(concrete.shapes[name])}"
        lines.append(line)
    return "\n".join(lines)
