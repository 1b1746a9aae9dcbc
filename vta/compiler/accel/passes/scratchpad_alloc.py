"""Scratchpad allocation: an SRAM base (in entries) for every on-chip buffer, per scope.

Pre:  bound inference has run; on-chip buffers are ``Allocate``d with packed shapes whose last
      two dims form one scratchpad entry (batch x block).
Post: the same body; ``attr(SRAM)`` = ((buffer, base, entries), ...) where ``base`` is an
      expression: a constant, or ``c + vt * entries`` for a buffer allocated inside a virtual
      thread loop (each thread gets its own copy, as VTA's InjectVirtualThread duplicates
      buffers; on banked accumulators, ``c + vt * bank``: each thread's copy in its own bank).
      Buffers of a scope are laid out one after another. Capacity is checked here, at
      compile time: ``ScratchpadOverflow`` names the buffer, the bytes needed and available.
      The out scratchpad mirrors acc (same entry indices), so acc-scope buffers cover both.
"""

from __future__ import annotations

from vta.compiler.accel.passes._common import entries_of
from vta.compiler.accel.vta_ir import SRAM
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.config import HwConfig
from vta.errors import CompileError, ScratchpadOverflow

__all__ = ["allocate_scratchpads", "ScratchpadOverflow"]

_SCOPES = ("inp", "wgt", "acc")


def allocate_scratchpads(func: S.PrimFunc, hw: HwConfig) -> S.PrimFunc:
    used = {k: 0 for k in _SCOPES}
    table: list[tuple[S.Buffer, E.Expr, int]] = []

    def visit(s: S.Stmt, vt: tuple[E.Var, int] | None) -> None:
        if isinstance(s, S.SeqStmt):
            for x in s.stmts:
                visit(x, vt)
            return
        if isinstance(s, S.For):
            inner = (s.var, s.extent.value) if s.kind is S.ForKind.VTHREAD else vt  # type: ignore[attr-defined]
            visit(s.body, inner)
            return
        if isinstance(s, S.Allocate):
            b = s.buffer
            if b.scope in ("out", "uop"):
                raise CompileError(f"{func.name}: buffer {b.name}: scope {b.scope} is managed by "
                                   f"the pipeline (use acc for results)")
            if b.scope == "acc" and hw.alu.acc_banks > 1:
                _check_entry(func, b, hw)
                table.append(_banked(func, b, vt, used, hw))
            elif b.scope in _SCOPES:
                _check_entry(func, b, hw)
                n = entries_of(b)
                copies = vt[1] if vt else 1
                start = used[b.scope]
                need = start + n * copies
                depth = hw.depth(b.scope)
                if need > depth:
                    eb = hw.elem_bytes(b.scope)
                    thr = f" x {copies} virtual threads" if copies > 1 else ""
                    raise ScratchpadOverflow(
                        f"{func.name}: buffer {b.name} ({b.scope}) needs {n * copies * eb} bytes "
                        f"({n} entries{thr}), available {(depth - start) * eb} bytes of "
                        f"{depth * eb} ({hw.name}, {start * eb} bytes used by other buffers)",
                        b, n, copies, depth - start)
                base: E.Expr = E.IntImm(start) + (vt[0] * n if vt else 0)
                table.append((b, base, n))
                used[b.scope] = need
            visit(s.body, vt)
            return
        body = getattr(s, "body", None)
        if isinstance(body, S.Stmt):
            visit(body, vt)
        elif isinstance(s, S.IfThenElse):
            visit(s.then_case, vt)
            if s.else_case is not None:
                visit(s.else_case, vt)

    visit(func.body, None)
    return func.with_attr(SRAM, tuple(table))


def _banked(func: S.PrimFunc, b: S.Buffer, vt: tuple[E.Var, int] | None,
            used: dict[str, int], hw: HwConfig) -> tuple[S.Buffer, E.Expr, int]:
    """An acc buffer on banked accumulators (``alu.acc_banks``): every thread's copy at the
    same offset of a bank of its own (``c + vt * bank``), so one thread's epilogue on the
    separate ALU and the other thread's GEMMs never want the same bank; a buffer shared by
    the threads lies in bank 0 (the same offset stays free in the others)."""
    n = entries_of(b)
    bank = hw.depth("acc") // hw.alu.acc_banks
    copies = vt[1] if vt else 1
    start = used["acc"]
    eb = hw.elem_bytes("acc")
    if copies > hw.alu.acc_banks:
        raise ScratchpadOverflow(f"{func.name}: buffer {b.name} (acc) has {copies} virtual-thread "
                                 f"copies but {hw.name} has {hw.alu.acc_banks} accumulator banks")
    if start + n > bank:
        raise ScratchpadOverflow(
            f"{func.name}: buffer {b.name} (acc) needs {n * eb} bytes ({n} entries) in each of "
            f"{copies} banks, available {(bank - start) * eb} bytes of a {bank * eb}-byte bank "
            f"({hw.name}, {hw.alu.acc_banks} banks; {start * eb} bytes used by other buffers)")
    used["acc"] = start + n
    base: E.Expr = E.IntImm(start) + (vt[0] * bank if vt else 0)
    return b, base, n


def _check_entry(func: S.PrimFunc, b: S.Buffer, hw: HwConfig) -> None:
    g = hw.gemm
    want = {"inp": (g.batch, g.block_in), "wgt": (g.block_out, g.block_in),
            "acc": (g.batch, g.block_out)}[b.scope]
    if b.ndim < 2 or tuple(b.shape[-2:]) != want:
        raise CompileError(f"{func.name}: buffer {b.name} ({b.scope}) must end in one entry "
                           f"{want} of {hw.name}, got shape {b.shape}")
