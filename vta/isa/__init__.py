"""The accelerator's instruction set: typed instructions, exact 128-bit encoding, assembly text.

See docs/isa.md for the bit layout and the semantics (the reference interpreter in
``vta.sim.reference`` is the executable definition).
"""

from vta.isa.asm import AsmError, assemble, disassemble, format_insn
from vta.isa.encoding import (
    IsaError,
    check_fields,
    decode,
    decode_program,
    decode_uop,
    encode,
    encode_program,
    encode_uop,
    layout,
    uop_layout,
)
from vta.isa.insn import (
    TOKEN_QUEUES,
    Alu,
    AluOp,
    Deps,
    Finish,
    Gemm,
    Instruction,
    Load,
    MemType,
    Module,
    Opcode,
    Store,
    Uop,
    module_of,
    pops_of,
    pushes_of,
)
from vta.isa.program import DRAM_ALIGN, KINDS, Allocation, Program, ProgramBuilder, ProgramError

__all__ = [
    "Allocation", "Alu", "AluOp", "AsmError", "DRAM_ALIGN", "Deps", "Finish", "Gemm",
    "Instruction", "IsaError", "KINDS", "Load", "MemType", "Module", "Opcode", "Program",
    "ProgramBuilder", "ProgramError", "Store", "TOKEN_QUEUES", "Uop", "assemble",
    "check_fields", "decode", "decode_program", "decode_uop", "disassemble", "encode",
    "encode_program", "encode_uop", "format_insn", "layout", "module_of", "pops_of",
    "pushes_of", "uop_layout",
]
