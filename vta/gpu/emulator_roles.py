"""Warp roles: branches of a kernel that run concurrently and wait on each other.

A warp-specialised kernel splits its block by warps into roles (CUTLASS's producer warpgroup
issuing TMA and the consumer warpgroups issuing ``wgmma``) that synchronise only through
``mbarrier`` waits: the producer runs up to a ring's depth ahead of the consumers and then
waits until they release a slot, so no single instruction order of the two runs it. The
lockstep emulator runs one instruction stream for a whole batch of blocks; a kernel marks such
a split with ``warp_roles`` (an ``AttrStmt`` of key ``WARP_ROLES`` over an if / else-if chain
on warp-uniform conditions), which renders as the plain chain and which the emulator runs with
``RoleScheduler``: each role's branch in its own host thread, one thread running at a time
(the batch's state is shared), a role that must wait (``block``) handing over to the next role
that can run, and a wait no role can ever satisfy reported as a deadlock naming every role's
wait. Outside a role split a wait that cannot complete in program order is an error as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.errors import EmulatorError

__all__ = ["WARP_ROLES", "warp_roles", "role_branches", "RoleScheduler", "ROLES_STATE"]

#: over an if / else-if chain: its branches are warp roles that run concurrently (``int``: the
#: number of roles, the final ``else`` included)
WARP_ROLES: S.AttrKey[int] = S.AttrKey("warp_roles", __name__)

#: the key of the running scheduler in the batch's dialect state (``_Ctx.dialect``)
ROLES_STATE = "warp_roles"


def warp_roles(roles: Sequence[tuple[E.Expr | None, S.Stmt]]) -> S.Stmt:
    """The statement running ``roles`` concurrently: ``(condition, body)`` pairs tested in
    order, each condition a function of the warp (every lane of a warp takes the same branch),
    the last one's condition ``None`` (the rest of the block)."""
    if len(roles) < 2 or roles[-1][0] is not None or any(c is None for c, _ in roles[:-1]):
        raise EmulatorError("warp_roles: two or more (condition, body) roles, only the last "
                            "without a condition")
    chain: S.Stmt = roles[-1][1]
    for cond, body in reversed(roles[:-1]):
        assert cond is not None
        chain = S.IfThenElse(cond, body, chain)
    return S.AttrStmt(WARP_ROLES, len(roles), chain)


def role_branches(s: S.AttrStmt) -> list[tuple[E.Expr | None, S.Stmt]]:
    """The ``(condition, body)`` roles of a ``warp_roles`` statement (inverse of it)."""
    out: list[tuple[E.Expr | None, S.Stmt]] = []
    node: S.Stmt = s.body
    while len(out) < s.value - 1:
        if not isinstance(node, S.IfThenElse) or node.else_case is None:
            raise EmulatorError(f"warp_roles: {s.value} roles need an if / else-if chain of "
                                f"{s.value - 1} conditions, found {type(node).__name__}")
        out.append((node.cond, node.then_case))
        node = node.else_case
    out.append((None, node))
    return out


class _Abort(BaseException):
    """Ends a role's thread when another role failed (not an error of its own)."""


class RoleScheduler:
    """Runs the roles of one ``warp_roles`` split on one batch (module docstring). ``env`` is
    the batch's variable bindings at the split; each role binds its own variables on a copy,
    swapped in when the role runs."""

    def __init__(self, ctx: Any, names: Sequence[str]) -> None:
        self.ctx = ctx
        self.names = list(names)
        n = len(names)
        self.cv = threading.Condition()
        self.turn = 0
        self.ready: list[Callable[[], bool] | None] = [None] * n
        self.what: list[str] = [""] * n
        self.done = [False] * n
        self.error: BaseException | None = None
        self.envs = [dict(ctx.env) for _ in range(n)]

    def run(self, bodies: Sequence[Callable[[], None]]) -> None:
        """Run every role to its end; re-raise the first error (deadlocks included)."""
        saved, errs = self.ctx.env, np.geterr()
        self.ctx.env = self.envs[0]
        threads = [threading.Thread(target=self._role, args=(i, fn, errs), daemon=True,
                                    name=f"vta-role-{self.names[i]}")
                   for i, fn in enumerate(bodies)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.ctx.env = saved
        if self.error is not None:
            raise self.error

    def _role(self, i: int, fn: Callable[[], None], errs: dict[str, str]) -> None:
        with self.cv:
            while self.turn != i and self.error is None:
                self.cv.wait()
        try:
            if self.error is None:
                with np.errstate(**errs):  # type: ignore[arg-type]
                    fn()
        except _Abort:
            return
        except BaseException as e:  # the role's own failure: stop every role, report it
            with self.cv:
                if self.error is None:
                    self.error = e
                self.cv.notify_all()
            return
        with self.cv:
            self.done[i] = True
            self._hand_over(i)

    def block(self, ready: Callable[[], bool], what: str) -> None:
        """Called by the running role when it must wait until ``ready()``: other roles run
        meanwhile; returns once ``ready()`` holds and it is this role's turn again."""
        i = self.turn
        with self.cv:
            self.ready[i], self.what[i] = ready, what
            while True:
                if self.error is not None:
                    raise _Abort
                if ready():
                    self.ready[i] = None
                    self.turn = i
                    self.ctx.env = self.envs[i]
                    return
                self._hand_over(i)
                while self.turn != i and self.error is None:
                    self.cv.wait()

    def _hand_over(self, i: int) -> None:
        """Give the turn to the next role after ``i`` that can run (holding the lock)."""
        n = len(self.names)
        for d in range(1, n + 1):
            j = (i + d) % n
            if self.done[j]:
                continue
            r = self.ready[j]
            if r is None or r():
                self.turn = j
                self.ctx.env = self.envs[j]
                self.cv.notify_all()
                return
        if not all(self.done):
            waits = "; ".join(f"{self.names[j]} waits on {self.what[j]}" for j in range(n)
                              if not self.done[j])
            self.error = EmulatorError(f"warp roles deadlock: no role can run ({waits})")
        self.turn = -1
        self.cv.notify_all()
