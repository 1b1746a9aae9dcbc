"""The DRAM image vta.cc runs on, and where its pointers point.

VTA's ``vta()`` takes one pointer per kind of data (``uops``, ``inputs``, ``weights``,
``biases``, ``outputs``) and addresses each in elements of that kind: a LOAD of inputs with
DRAM address ``a`` reads from ``inputs[a * INP_MAT_AXI_RATIO]`` (bus words), i.e. byte
``a * inp entry bytes`` after the pointer; a LOAD of micro-ops reads ``uops[a]`` (4-byte
words). VTA's PYNQ runtime passes physical addresses with every base 0.

A vta ``Program`` places all its allocations in one byte-addressed image, each at a byte
offset that is a multiple of its element size, and its instructions address allocation
``A``'s element ``i`` as ``A.base + i`` with ``A.base = A.offset // element bytes``
(``vta.isa.program``). So the driver points all five pointers at the image's first byte:
vta.cc then reads and writes exactly the bytes vta's simulators do. ``regions`` lists every
allocation with the pointer that reaches it and its element address; ``vta_byte_offset`` is
vta.cc's pointer arithmetic, for the tests that hold the two in step.
"""

from __future__ import annotations

from dataclasses import dataclass

from tools.vta_oracle.macros import mat_axi_ratio
from vta.config import HwConfig
from vta.isa import Program

__all__ = ["POINTER_OF", "Region", "regions", "vta_byte_offset"]

#: which of vta()'s pointer arguments reaches each kind of allocation
POINTER_OF = {"uop": "uops", "inp": "inputs", "wgt": "weights", "acc": "biases",
              "out": "outputs"}

#: bytes of one micro-op word (vta.cc's uop_T, ap_uint<32>)
_UOP_BYTES = 4


@dataclass(frozen=True)
class Region:
    """One allocation in the image: ``nbytes`` bytes at byte ``offset``, reached through
    vta()'s ``pointer`` at element address ``address`` (what the program's instructions
    hold)."""

    name: str
    kind: str
    offset: int
    nbytes: int
    pointer: str
    address: int


def regions(program: Program, hw: HwConfig) -> list[Region]:
    """Every allocation of ``program`` as a ``Region``, in declaration order."""
    out = []
    for a in program.allocations:
        assert a.offset % a.elem_bytes == 0, f"allocation {a.name} is not element-aligned"
        out.append(Region(a.name, a.kind, a.offset, a.nbytes, POINTER_OF[a.kind], a.base))
    return out


def vta_byte_offset(hw: HwConfig, kind: str, address: int, pointer_base: int = 0) -> int:
    """The byte vta.cc reads or writes for element ``address`` of ``kind``, counted from the
    image's first byte, when vta()'s pointer for that kind is ``pointer_base`` bytes into the
    image: ``uops[address]`` for micro-ops, ``ptr[address * MAT_AXI_RATIO]`` (bus words) for
    the data kinds (vta.cc's ``load_pad_2d``, ``load_2d`` and ``store``)."""
    if kind == "uop":
        return pointer_base + address * _UOP_BYTES
    return pointer_base + address * mat_axi_ratio(hw, kind) * hw.memory.bus_bytes
