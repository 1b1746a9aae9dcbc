"""The widths of VTA's words, each written once: every layer (the config's entry sizes and ISA
field widths, the encoder, the fetch unit's timing, the resource estimate) reads them here.

The values are apache/tvm-vta@d4a15f6 include/vta/hw_spec_const.h: ``VTA_LOG_INS_WIDTH`` 7
(``VTA_INS_WIDTH`` = 128), ``VTA_LOG_UOP_WIDTH`` 5 (``VTA_UOP_WIDTH`` = 32),
``VTA_OPCODE_BIT_WIDTH`` 3 and ``VTA_ALU_OPCODE_BIT_WIDTH`` 3 (lines 29, 33, 111, 113). A base
module (it imports nothing) so that vta.config and vta.resources can read it.
"""

from __future__ import annotations

__all__ = ["INSN_BITS", "INSN_BYTES", "INSN_HALF_BITS", "UOP_BITS", "OPCODE_BITS",
           "ALU_OPCODE_BITS"]

#: bits of one instruction word (hw_spec_const.h:29, ``VTA_INS_WIDTH``)
INSN_BITS = 128
#: bytes of one instruction word: what the fetch unit reads per instruction
INSN_BYTES = INSN_BITS // 8
#: the word is built from two halves and no field crosses between them (hw_spec.h's structs
#: are two ``uint64_t`` bit-field groups)
INSN_HALF_BITS = INSN_BITS // 2
#: bits of one micro-op: the entry of the micro-op buffer (hw_spec_const.h:33, ``VTA_UOP_WIDTH``)
UOP_BITS = 32
#: the opcode field at the bottom of every instruction (hw_spec_const.h:111)
OPCODE_BITS = 3
#: the ALU function field (hw_spec_const.h:113)
ALU_OPCODE_BITS = 3
