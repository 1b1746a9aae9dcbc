"""The VTA lowering pipeline: an ordered list of pure passes, each with the reason for its place.

``compile_func(func, hw)`` runs them and returns the ``isa.Program`` plus the IR after every
pass (``--dump-ir PASS`` prints one, ``--dump-ir all`` all of them). Every pass is a pure
function ``(PrimFunc, HwConfig) -> PrimFunc`` in its own file under ``passes/``, whose
docstring states what must hold before and after it; the structural verifier runs on the
pipeline's input and result, and after each pass where ``VERIFY_EVERY_PASS`` (the tests).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from vta._collector import collector_paused
from vta.compiler.accel.passes.acc_inplace import reuse_acc_buffers
from vta.compiler.accel.passes.coproc_sync import insert_tokens
from vta.compiler.accel.passes.drain_tail import drain_tail
from vta.compiler.accel.passes.emit import emit_program
from vta.compiler.accel.passes.flatten import flatten
from vta.compiler.accel.passes.hoist_resets import hoist_resets
from vta.compiler.accel.passes.inject_dma import inject_dma
from vta.compiler.accel.passes.lower_alu import lower_alu
from vta.compiler.accel.passes.region_inference import infer_regions
from vta.compiler.accel.passes.scratchpad_alloc import allocate_scratchpads
from vta.compiler.accel.passes.tensorize import tensorize
from vta.compiler.accel.passes.unit_loops import fold_unit_loops
from vta.compiler.accel.passes.uop_gen import generate_uops
from vta.compiler.accel.passes.virtual_thread import inject_virtual_thread
from vta.compiler.ir import stmt as S
from vta.compiler.ir.verify import verify, verify_after
from vta.config import HwConfig
from vta.errors import UnknownPass, VerifyError
from vta.isa import Program, disassemble

__all__ = ["PASSES", "PASS_NAMES", "VERIFY_EVERY_PASS", "CompileResult", "compile_func",
           "UnknownPass", "collector_paused"]

Pass = Callable[[S.PrimFunc, HwConfig], S.PrimFunc]

#: (name, pass, why it is here) in order.
PASSES: tuple[tuple[str, Pass, str], ...] = (
    ("unit_loops", fold_unit_loops,
     "first: lower keeps one-iteration tile loops whose variable is pinned to 0 by isl; "
     "later passes read on-chip indices relative to their allocation"),
    ("region_inference", infer_regions,
     "every later pass trusts that on-chip accesses stay inside the buffers lower sized"),
    ("acc_inplace", reuse_acc_buffers,
     "before allocation: element-wise epilogue stages take over their producer's acc buffer "
     "(the ALU updates in place, and acc space is what limits the tile)"),
    ("scratchpad_alloc", allocate_scratchpads,
     "DMA, GEMM and ALU statements address SRAM entries, so bases (one copy per virtual "
     "thread) must exist first; capacity errors surface here, at compile time"),
    ("inject_dma", inject_dma,
     "copy stages become LOAD/STORE before tensorize so the remaining scalar nests are only "
     "compute (the tensorize region and the epilogue)"),
    ("tensorize", tensorize,
     "replaces the GEMM-shaped region (and the init nest) by GEMM nests on the intrinsic"),
    ("lower_alu", lower_alu,
     "after tensorize: what is left on acc buffers is the element-wise epilogue for the ALU"),
    ("uop_gen", generate_uops,
     "needs every GEMM/ALU nest with affine indices to fold loops into iter_out/iter_in and "
     "enumerate the rest as micro-ops"),
    ("virtual_thread", inject_virtual_thread,
     "after uop generation (micro-ops are per-thread expressions) and before flattening: "
     "interleaves the threads' stages"),
    ("flatten", flatten,
     "token insertion reasons about concrete SRAM ranges of instructions in program order"),
    ("hoist_resets", hoist_resets,
     "needs the concrete SRAM ranges flatten gives and must precede token insertion: on a "
     "separate ALU pipeline a reset moves up to just after the store it must follow"),
    ("drain_tail", drain_tail,
     "on the flat stream, before the tokens: the last instruction's parts and the store "
     "pieces are ordered by their SRAM ranges like any other instructions"),
    ("coproc_sync", insert_tokens,
     "last IR pass: any reordering after it would invalidate the push/pop pairing"),
)
PASS_NAMES = (*(n for n, _, _ in PASSES), "emit")
#: former pass names, still accepted by ``dump`` (``vta run --dump-ir``) for one release
RENAMED = {"bound_inference": "region_inference"}


@dataclass
class CompileResult:
    program: Program
    ir: dict[str, S.PrimFunc] = field(default_factory=dict)
    seconds: float = 0.0

    def dump(self, which: str) -> str:
        """The IR after pass ``which`` (or every pass for ``all``), as text."""
        if which == "all":
            return "\n\n".join(self.dump(n) for n in [*self.ir, "emit"])
        which = RENAMED.get(which, which)
        if which == "emit":
            return "# after emit\n" + disassemble(self.program)
        if which not in self.ir:
            raise UnknownPass(f"unknown pass {which!r}; expected one of: input, "
                              f"{', '.join(PASS_NAMES)}, all")
        f = self.ir[which]
        prev = list(self.ir.values())[list(self.ir).index(which) - 1] if which != "input" else None
        note = " (unchanged)" if prev is not None and prev.body is f.body else ""
        return f"# after {which}{note}\n{f}"


#: Verify the IR after every pass (True), or only the input and the pipeline's result (False,
#: the default). The tests turn it on (tests/conftest.py), as TVM runs its IR verifiers in
#: debug builds: after every pass the check is about a twentieth of a compile, once at the end
#: it is a fraction of that, and a broken result is still caught there, the pipeline then run
#: again from its input checking after every pass to name the pass that broke it.
VERIFY_EVERY_PASS = False


def compile_func(func: S.PrimFunc, hw: HwConfig, *, keep_ir: bool = True,
                 verify_every_pass: bool | None = None) -> CompileResult:
    """Run the VTA pipeline on a lowered function, verifying its input and the IR after the
    last pass, or after every pass that changed it where ``verify_every_pass`` (default
    ``VERIFY_EVERY_PASS``) says so; a ``VerifyError`` names the pass that broke the IR either
    way (``_run``). The cycle collector is paused meanwhile (``collector_paused``)."""
    t0 = time.perf_counter()
    every = VERIFY_EVERY_PASS if verify_every_pass is None else verify_every_pass
    with collector_paused():
        verify(func)
        try:
            ir, program = _run(func, hw, keep_ir=keep_ir, every=every)
        except VerifyError:
            if every:
                raise
            _run(func, hw, keep_ir=False, every=True)  # names the pass that broke it
            raise
    return CompileResult(program, ir, time.perf_counter() - t0)


def _run(func: S.PrimFunc, hw: HwConfig, *, keep_ir: bool, every: bool
         ) -> tuple[dict[str, S.PrimFunc], Program]:
    """The passes and ``emit`` on a verified ``func``: the IR after each (``keep_ir``) and the
    program. The IR is verified after every pass that changed it (``every``; a pass that
    returns its input unchanged left it verified) or once after the last pass."""
    ir: dict[str, S.PrimFunc] = {"input": func} if keep_ir else {}
    name = "input"
    changed = False
    for name, fn, _why in PASSES:
        before, func = func, fn(func, hw)
        if func is not before:
            changed = True
            if every:
                verify_after(name, func)
        if keep_ir:
            ir[name] = func
    if changed and not every:
        verify_after(name, func)
    return ir, emit_program(func, hw)


