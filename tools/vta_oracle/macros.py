"""The compile-time configuration of vta.cc for one ``HwConfig``: VTA's VTA_LOG_* macros.

VTA describes its hardware by log2 sizes (tvm-vta ``config/vta_config.json``); its
``config/pkg_config.py`` derives ``LOG_BLOCK_IN = LOG_BLOCK_OUT = LOG_BLOCK``,
``LOG_OUT_WIDTH = LOG_INP_WIDTH`` and ``LOG_OUT_BUFF_SIZE = LOG_ACC_BUFF_SIZE + LOG_OUT_WIDTH -
LOG_ACC_WIDTH``, and passes each as ``-DVTA_<KEY>=<value>`` together with
``VTA_LOG_BUS_WIDTH`` (the AXI data width in bits, log2). ``vta_macros`` derives the same
numbers from our ``HwConfig`` and refuses, naming the field, a config vta.cc cannot express:

* ``gemm.block_out`` different from ``gemm.block_in`` (one ``LOG_BLOCK``);
* ``gemm.out_dtype`` narrower or wider than ``gemm.inp_dtype`` (``LOG_OUT_WIDTH``), or
  ``scratchpad.out`` other than the accumulator buffer at out width (``LOG_OUT_BUFF_SIZE``);
* a size that is not a power of two (every VTA size is a log2);
* ``memory.bus_bytes`` wider than an entry of some buffer (vta.cc splits each entry into
  ``*_MAT_AXI_RATIO`` bus words, which must be a whole number >= 1);
* ``alu.imm_bits`` other than 16 (``VTA_ALUOP_IMM_BIT_WIDTH``);
* SRAM indices wider than VTA's fixed 16-bit SRAM base, or an accumulator deeper than the
  input buffer (vta.cc's GEMM micro-op reads its wgt field after an inp-wide src field, while
  vta's micro-op has a src field as wide as the wider of the two);
* ``alu.separate_pipeline`` (vta.cc has one compute module, so other token queues).

The instruction layout itself is checked against the built design (``build.check_layout``).
"""

from __future__ import annotations

from tools.vta_oracle.errors import OracleConfigError
from vta.config import DTYPE_BITS, HwConfig

__all__ = ["vta_macros", "macro_flags", "mat_axi_ratio", "MACRO_ORDER"]

#: the macros, in the order pkg_config.py emits them (VTA_ prefix omitted)
MACRO_ORDER = ("LOG_INP_WIDTH", "LOG_WGT_WIDTH", "LOG_ACC_WIDTH", "LOG_BATCH", "LOG_BLOCK",
               "LOG_UOP_BUFF_SIZE", "LOG_INP_BUFF_SIZE", "LOG_WGT_BUFF_SIZE",
               "LOG_ACC_BUFF_SIZE", "LOG_BLOCK_IN", "LOG_BLOCK_OUT", "LOG_OUT_WIDTH",
               "LOG_OUT_BUFF_SIZE", "LOG_BUS_WIDTH")

#: VTA's fixed field widths (hw_spec_const.h) that vta's ISA derives from the config
_VTA_SRAM_ADDR_BITS = 16
_VTA_IMM_BITS = 16


def _log2(hw: HwConfig, field: str, value: int) -> int:
    """``log2(value)``, or an OracleConfigError naming ``field`` when it is not a power of 2."""
    if value < 1 or value & (value - 1):
        raise OracleConfigError(f"{hw.name}: {field}: vta.cc describes sizes as powers of two "
                                f"(log2), got {value}")
    return value.bit_length() - 1


def _dtype_log(hw: HwConfig, field: str) -> int:
    name = getattr(hw.gemm, field.split(".")[1])
    bits = DTYPE_BITS.get(name)
    if bits is None:
        raise OracleConfigError(f"{hw.name}: {field}: vta.cc's datapath is signed integers "
                                f"(ap_int), got {name}")
    return _log2(hw, field, bits)


def vta_macros(hw: HwConfig) -> dict[str, int]:
    """The VTA_* macros (without the prefix) vta.cc is compiled with for ``hw``, in
    ``MACRO_ORDER`` (module docstring: what is refused)."""
    g, sp = hw.gemm, hw.scratchpad
    if g.block_out != g.block_in:
        raise OracleConfigError(f"{hw.name}: gemm.block_out: vta.cc has one block size "
                                f"(LOG_BLOCK) for inputs and outputs, got block_in "
                                f"{g.block_in} and block_out {g.block_out}")
    if hw.alu.separate_pipeline:
        raise OracleConfigError(f"{hw.name}: alu.separate_pipeline: vta.cc runs GEMM and ALU "
                                f"in one compute module (no ALU queue or tokens of its own)")
    if hw.alu.imm_bits != _VTA_IMM_BITS:
        raise OracleConfigError(f"{hw.name}: alu.imm_bits: vta.cc's ALU immediate is "
                                f"{_VTA_IMM_BITS} bits (VTA_ALUOP_IMM_BIT_WIDTH), got "
                                f"{hw.alu.imm_bits}")
    m: dict[str, int] = {
        "LOG_INP_WIDTH": _dtype_log(hw, "gemm.inp_dtype"),
        "LOG_WGT_WIDTH": _dtype_log(hw, "gemm.wgt_dtype"),
        "LOG_ACC_WIDTH": _dtype_log(hw, "gemm.acc_dtype"),
        "LOG_BATCH": _log2(hw, "gemm.batch", g.batch),
        "LOG_BLOCK": _log2(hw, "gemm.block_in", g.block_in),
        "LOG_UOP_BUFF_SIZE": _log2(hw, "scratchpad.uop", sp.uop),
        "LOG_INP_BUFF_SIZE": _log2(hw, "scratchpad.inp", sp.inp),
        "LOG_WGT_BUFF_SIZE": _log2(hw, "scratchpad.wgt", sp.wgt),
        "LOG_ACC_BUFF_SIZE": _log2(hw, "scratchpad.acc", sp.acc),
    }
    m["LOG_BLOCK_IN"] = m["LOG_BLOCK_OUT"] = m["LOG_BLOCK"]
    m["LOG_OUT_WIDTH"] = m["LOG_INP_WIDTH"]
    if _dtype_log(hw, "gemm.out_dtype") != m["LOG_OUT_WIDTH"]:
        raise OracleConfigError(f"{hw.name}: gemm.out_dtype: vta.cc's output width is the "
                                f"input width (LOG_OUT_WIDTH = LOG_INP_WIDTH), got "
                                f"{g.out_dtype} with {g.inp_dtype} inputs")
    m["LOG_OUT_BUFF_SIZE"] = m["LOG_ACC_BUFF_SIZE"] + m["LOG_OUT_WIDTH"] - m["LOG_ACC_WIDTH"]
    if _log2(hw, "scratchpad.out", sp.out) != m["LOG_OUT_BUFF_SIZE"]:
        raise OracleConfigError(f"{hw.name}: scratchpad.out: vta.cc's output buffer has one "
                                f"entry per accumulator entry ({1 << m['LOG_OUT_BUFF_SIZE']} "
                                f"bytes here), got {sp.out}")
    m["LOG_BUS_WIDTH"] = _log2(hw, "memory.bus_bytes", hw.memory.bus_bytes) + 3
    _check_widths(hw)
    for kind in ("inp", "wgt", "acc", "out"):
        mat_axi_ratio(hw, kind)  # refuses a bus wider than an entry
    return {k: m[k] for k in MACRO_ORDER}


def _check_widths(hw: HwConfig) -> None:
    """The SRAM index and micro-op fields vta's ISA derives agree with VTA's fixed ones."""
    w = hw.isa
    if w.sram_addr != _VTA_SRAM_ADDR_BITS:
        deepest = max(("uop", "inp", "wgt", "acc", "out"), key=hw.depth)
        raise OracleConfigError(f"{hw.name}: scratchpad.{deepest}: {hw.depth(deepest)} entries "
                                f"need {w.sram_addr}-bit SRAM addresses; vta.cc's SRAM base is "
                                f"{_VTA_SRAM_ADDR_BITS} bits (VTA_MEMOP_SRAM_ADDR_BIT_WIDTH)")
    if w.acc_idx > w.inp_idx:
        raise OracleConfigError(f"{hw.name}: scratchpad.acc: {hw.acc_depth} accumulator entries "
                                f"but {hw.inp_depth} input entries; vta.cc's GEMM micro-op "
                                f"takes its wgt field after an inp-wide src field "
                                f"(VTA_UOP_GEM_2_0), vta's after an acc-wide one")


def mat_axi_ratio(hw: HwConfig, kind: str) -> int:
    """vta.cc's ``*_MAT_AXI_RATIO``: bus words per entry of buffer ``kind`` (inp, wgt, acc,
    out); an OracleConfigError naming ``memory.bus_bytes`` when it is not a whole number >= 1."""
    eb, bus = hw.elem_bytes(kind), hw.memory.bus_bytes
    if eb < bus or eb % bus:
        raise OracleConfigError(f"{hw.name}: memory.bus_bytes: vta.cc moves whole {kind} entries "
                                f"({eb} bytes) as bus words, so the bus may be at most {eb} "
                                f"bytes wide, got {bus}")
    return eb // bus


def macro_flags(macros: dict[str, int]) -> list[str]:
    """``-DVTA_KEY=value`` for every macro, as pkg_config.py passes them to the compiler."""
    return [f"-DVTA_{k}={v}" for k, v in macros.items()]
