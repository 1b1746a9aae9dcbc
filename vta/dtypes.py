"""The scalar types: one ``DType`` per name, the bottom layer every fact about a type reads.

A ``DType`` says everything the rest of the code needs of a scalar type: its width, whether it
is signed, a float or a boolean, its numpy dtype, its CUDA C type, its size in bytes and the
range of values it holds. ``DTYPES`` holds every type the IR knows; ``dtype(name)`` looks one
up, naming the culprit when the name is unknown. What the operators *do* on these types (wrap,
division, shifts) is ``vta.compiler.ir.semantics``.

``DTYPE_BITS`` is the subset the accelerator's datapath supports (the config's entry sizes, the
resource estimate), read from the same table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["DType", "DTYPES", "dtype", "DTYPE_BITS", "DATAPATH_DTYPES"]


@dataclass(frozen=True, slots=True)
class DType:
    """One scalar type. ``kind`` is ``"int"`` (two's complement), ``"uint"``, ``"float"`` or
    ``"bool"``; ``ctype`` is its CUDA C spelling."""

    name: str
    bits: int
    kind: str
    ctype: str

    @property
    def np(self) -> np.dtype[Any]:
        """The numpy dtype holding values of this type."""
        return np.dtype(np.bool_) if self.kind == "bool" else np.dtype(self.name)

    @property
    def bytes(self) -> int:
        """Bytes one element occupies in memory (a bool takes one)."""
        return max(1, self.bits // 8)

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        """An integer type (signed or unsigned; not bool)."""
        return self.kind in ("int", "uint")

    @property
    def signed(self) -> bool:
        return self.kind in ("int", "float")

    @property
    def min(self) -> int | float:
        """The smallest value (integers and bool exact; floats: the most negative finite)."""
        if self.kind == "int":
            return -(1 << (self.bits - 1))
        if self.kind in ("uint", "bool"):
            return 0
        return float(np.finfo(self.np).min)

    @property
    def max(self) -> int | float:
        """The largest value (integers and bool exact; floats: the largest finite)."""
        if self.kind == "int":
            return (1 << (self.bits - 1)) - 1
        if self.kind == "uint":
            return (1 << self.bits) - 1
        if self.kind == "bool":
            return 1
        return float(np.finfo(self.np).max)

    def __str__(self) -> str:
        return self.name


#: every scalar type the IR knows, by name
DTYPES: dict[str, DType] = {d.name: d for d in (
    DType("int8", 8, "int", "signed char"),
    DType("int16", 16, "int", "short"),
    DType("int32", 32, "int", "int"),
    DType("int64", 64, "int", "long long"),
    DType("uint8", 8, "uint", "unsigned char"),
    DType("uint16", 16, "uint", "unsigned short"),
    DType("uint16", 16, "uint", "unsigned short"),
    DType("uint32", 32, "uint", "unsigned int"),
    DType("float16", 16, "float", "half"),
    DType("float32", 32, "float", "float"),
    DType("float64", 64, "float", "double"),
    DType("bool", 1, "bool", "bool"),
)}


def dtype(name: str) -> DType:
    """The ``DType`` called ``name`` (``KeyError`` naming the known types otherwise)."""
    try:
        return DTYPES[name]
    except KeyError:
        raise KeyError(f"unknown scalar type {name!r} (known: {', '.join(DTYPES)})") from None


#: the integer element types the accelerator's datapath supports
DATAPATH_DTYPES: tuple[str, ...] = ("int8", "int16", "int32")

#: the datapath's element types with their width in bits (read from ``DTYPES``)
DTYPE_BITS: dict[str, int] = {n: DTYPES[n].bits for n in DATAPATH_DTYPES}
