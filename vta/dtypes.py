"""The element types the accelerator's datapath supports, with their widths: the bottom layer
every hardware fact about widths reads (the config's entry sizes, the resource estimate)."""

from __future__ import annotations

__all__ = ["DTYPE_BITS"]

#: Integer element types the datapath supports, with their width in bits.
DTYPE_BITS: dict[str, int] = {"int8": 8, "int16": 16, "int32": 32}
