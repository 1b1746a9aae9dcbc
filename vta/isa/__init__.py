"""The accelerator's instruction set: typed instructions, exact 128-bit encoding, assembly text.

Every instruction is an ``InstructionDef`` (``vta.isa.defs``): its encoding, unit, duration,
semantics and syntax in one object that the assembler, the encoder, both simulators and the
compiler read. The built-ins (``vta.isa.builtins``) are registered on import; a user's
instruction is registered the same way (``vta.intrinsics``). See docs/isa.md.
"""

from vta.config import add_check
from vta.errors import AsmError, DefinitionError, IsaError, ProgramError
from vta.isa import (
    builtins,  # noqa: F401 - registers LOAD, STORE, GEMM, ALU.*, FINISH
    requant,  # noqa: F401 - registers ALU.REQUANT_F32 (intrinsic requant_f32)
)
from vta.isa.asm import assemble, disassemble, format_insn
from vta.isa.defs import (
    AsmSyntax,
    Field,
    InstructionDef,
    Operand,
    _config_check,
    available,
    by_name,
    definition_of,
    module_of,
    pops_of,
    pushes_of,
    registered,
)
from vta.isa.encoding import (
    check_fields,
    decode,
    decode_program,
    decode_uop,
    decode_uops,
    encode,
    encode_program,
    encode_uop,
    encode_uops,
    layout,
    uop_layout,
)
from vta.isa.insn import (
    FLAG_QUEUES,
    Alu,
    AluOp,
    Deps,
    Finish,
    Gemm,
    Instruction,
    Load,
    MemType,
    MicroOpLoop,
    Opcode,
    Store,
    Unit,
    Uop,
    flag_for,
    flag_queues,
    n_ops,
    queue_of,
    token_queues,
)
from vta.isa.program import DRAM_ALIGN, KINDS, Allocation, Program, ProgramBuilder

add_check(_config_check)  # every HwConfig built from now on checks the instruction formats

__all__ = [
    "Allocation", "Alu", "AluOp", "AsmError", "AsmSyntax", "DRAM_ALIGN", "DefinitionError",
    "Deps", "FLAG_QUEUES", "Field", "Finish", "Gemm", "Instruction", "InstructionDef",
    "IsaError", "KINDS", "Load", "MemType", "MicroOpLoop", "Unit", "Opcode", "Operand", "Program",
    "ProgramBuilder", "ProgramError", "Store", "Uop", "assemble", "available",
    "by_name", "check_fields", "decode", "decode_program", "decode_uop", "decode_uops",
    "definition_of",
    "disassemble", "encode", "encode_program", "encode_uop", "encode_uops", "flag_for",
    "format_insn",
    "flag_queues", "layout", "module_of", "n_ops", "pops_of", "pushes_of", "queue_of",
    "registered", "token_queues", "uop_layout",
]
