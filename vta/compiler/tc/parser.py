"""Lexer and recursive-descent parser of the TC language (grammar: docs/tc.md).

``parse(text, name)`` returns a ``TcFile`` of every ``def`` in the text. Errors are
``TcSyntaxError``s naming the file, line and column, with the line and a caret.

Two lexical details of TC: a reduction operator may be followed by ``!`` with no space in
between (``+=!``: initialise with the identity; ``+= !x`` is a logical not), and ``max=`` /
``min=`` are the identifiers ``max``/``min`` directly followed by ``=``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vta.compiler.tc import ast as A
from vta.compiler.tc.source import Pos, Source
from vta.errors import TcSyntaxError

__all__ = ["Token", "tokenize", "parse"]


@dataclass(frozen=True, slots=True)
class Token:
    """``kind`` is ``id``, ``int``, ``float``, ``op`` or ``eof``; ``glued`` when no space
    separates it from the previous token."""

    kind: str
    text: str
    pos: Pos
    glued: bool


_OPS = ("->", "<=>", "+=", "*=", "==", "!=", "<=", ">=", "&&", "||", "<<", ">>",
        "+", "-", "*", "/", "%", "(", ")", "{", "}", ",", ":", "?", "=", "!", "<", ">", ".")
_TOKEN = re.compile(
    r"(?P<ws>[ \t\r\f\v]+)|(?P<nl>\n)|(?P<comment>(#|//)[^\n]*)"
    r"|(?P<float>(\d+\.\d*|\.\d+)([eE][+-]?\d+)?|\d+[eE][+-]?\d+)"
    r"|(?P<int>\d+)|(?P<id>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>" + "|".join(re.escape(o) for o in _OPS) + ")")


def tokenize(src: Source) -> list[Token]:
    """The tokens of ``src`` (comments ``# ...`` and ``// ...`` and white space dropped)."""
    out: list[Token] = []
    line, col, i, glued = 1, 1, 0, False
    text = src.text
    while i < len(text):
        m = _TOKEN.match(text, i)
        if m is None:
            raise TcSyntaxError(f"unexpected character {text[i]!r}", src, Pos(line, col))
        kind = m.lastgroup
        s = m.group()
        if kind == "nl":
            line, col, glued = line + 1, 1, False
        elif kind in ("ws", "comment"):
            col, glued = col + len(s), False
        else:
            assert kind is not None
            out.append(Token(kind, s, Pos(line, col), glued))
            col, glued = col + len(s), True
        i = m.end()
    out.append(Token("eof", "", Pos(line, col), False))
    return out


#: binary operators by precedence level, loosest first (the ternary sits above them all)
_LEVELS: tuple[tuple[str, ...], ...] = (
    ("||",), ("&&",), ("==", "!="), ("<", "<=", ">", ">="), ("<<", ">>"), ("+", "-"),
    ("*", "/", "%"),
)


class _Parser:
    def __init__(self, src: Source) -> None:
        self.src = src
        self.toks = tokenize(src)
        self.k = 0

    # ------------------------------------------------------------------ helpers

    @property
    def tok(self) -> Token:
        return self.toks[self.k]

    def peek(self, n: int = 1) -> Token:
        return self.toks[min(self.k + n, len(self.toks) - 1)]

    def fail(self, what: str, tok: Token | None = None) -> TcSyntaxError:
        t = tok or self.tok
        found = "end of file" if t.kind == "eof" else repr(t.text)
        return TcSyntaxError(f"expected {what}, found {found}", self.src, t.pos)

    def at(self, text: str) -> bool:
        return self.tok.kind in ("op", "id") and self.tok.text == text

    def take(self) -> Token:
        t = self.tok
        self.k += 1
        return t

    def expect(self, text: str, what: str | None = None) -> Token:
        if not self.at(text):
            raise self.fail(what or f"'{text}'")
        return self.take()

    def ident(self, what: str) -> Token:
        if self.tok.kind != "id":
            raise self.fail(what)
        return self.take()

    # ------------------------------------------------------------------ definitions

    def program(self) -> A.TcFile:
        defs = []
        while self.tok.kind != "eof":
            defs.append(self.definition())
        if not defs:
            raise TcSyntaxError("no definition ('def name(...) -> (...) { ... }') in the file",
                                self.src, self.tok.pos)
        return A.TcFile(tuple(defs), self.src)

    def definition(self) -> A.Def:
        start = self.expect("def", "'def'")
        name = self.ident("a definition name").text
        self.expect("(")
        params: list[A.Param] = []
        if not self.at(")"):
            params.append(self.param())
            while self.at(","):
                self.take()
                params.append(self.param())
        self.expect(")", "',' or ')' after a parameter")
        self.expect("->", "'->' and the outputs")
        returns = self.returns()
        self.expect("{")
        stmts = []
        while not self.at("}"):
            if self.tok.kind == "eof":
                raise self.fail("'}' closing the definition")
            stmts.append(self.statement())
        self.take()
        names = tuple(r if isinstance(r, A.Ident) else A.Ident(r.name, r.pos) for r in returns)
        typed = tuple(r if isinstance(r, A.Param) else None for r in returns)
        return A.Def(name, tuple(params), names, tuple(stmts), start.pos, typed)

    def param(self) -> A.Param:
        t = self.ident("a parameter type (int8, int16, int32, fp16, fp32)")
        dims: list[str | int] = []
        dpos: list[Pos] = []
        if self.at("("):
            self.take()
            while True:
                d = self.tok
                if d.kind == "id":
                    dims.append(d.text)
                elif d.kind == "int":
                    dims.append(int(d.text))
                else:
                    raise self.fail("a size variable or an integer")
                dpos.append(d.pos)
                self.take()
                if self.at(")"):
                    self.take()
                    break
                self.expect(",", "',' or ')' in the sizes")
        name = self.ident("the parameter's name").text
        return A.Param(t.text, tuple(dims), name, t.pos, tuple(dpos))

    def returns(self) -> list[A.Ident | A.Param]:
        paren = self.at("(")
        if paren:
            self.take()
        out = [self.output()]
        while self.at(","):
            self.take()
            out.append(self.output())
        if paren:
            self.expect(")", "',' or ')' after an output")
        return out

    def output(self) -> A.Ident | A.Param:
        """An output name, or a typed one (``int32(M, N) O``, ``float O``)."""
        if self.tok.kind == "id" and (self.peek().kind == "id" or self.peek().text == "("):
            return self.param()
        return self._ident_node("an output name")

    def _ident_node(self, what: str) -> A.Ident:
        t = self.ident(what)
        return A.Ident(t.text, t.pos)

    # ------------------------------------------------------------------ statements

    def statement(self) -> A.Stmt:
        """``T(i, j) op rhs [where ...] [<=> f(...)]``; ``T = ...`` and ``T() = ...`` write a
        0-rank tensor; an integer index on the left (``T(0)``) becomes an index variable
        fixed by a ``where`` range of one value."""
        start = self.ident("a statement ('Out(i, j) = ...')")
        idx: list[A.Ident] = []
        where: list[A.Where] = []
        if self.at("("):
            self.take()
            while not self.at(")"):
                if idx:
                    self.expect(",", "',' or ')' after an index")
                t = self.tok
                if t.kind == "int":  # O(0): a constant index
                    self.take()
                    var = f"__lhs{len(idx)}"
                    idx.append(A.Ident(var, t.pos))
                    where.append(A.WhereRange(var, A.Num(int(t.text), False, t.pos),
                                              A.Num(int(t.text) + 1, False, t.pos), t.pos))
                elif t.kind == "id":
                    idx.append(self._ident_node("an index variable"))
                else:
                    raise TcSyntaxError(f"not supported: {t.text!r} as a left-hand index (an "
                                        f"index variable or an integer is)" if t.kind != "eof"
                                        else "expected ')' closing the indices", self.src, t.pos)
            self.take()
        op_tok = self.tok
        op, bang = self.assignment()
        rhs = self.expr()
        if self.at("where"):
            self.take()
            where.append(self.where_clause())
            while self.at(","):
                self.take()
                where.append(self.where_clause())
        equivalent = None
        if self.at("<=>"):
            self.take()
            name = self.ident("a name after '<=>' (as in '<=> matmul(A, B)')")
            e = self.postfix(name)
            end = self.tok.pos
            line = self.src.line(name.pos.line)
            equivalent = line[name.pos.col - 1:end.col - 1].strip() \
                if end.line == name.pos.line else render_untyped(e)
        return A.Stmt(start.text, tuple(idx), op, bang, rhs, tuple(where), start.pos,
                      op_tok.pos, equivalent)

    def assignment(self) -> tuple[str, bool]:
        t = self.tok
        if t.kind == "op" and t.text in ("+=", "*="):
            self.take()
            op = t.text[0]
        elif t.kind == "id" and t.text in ("max", "min") and self.peek().text == "=" \
                and self.peek().glued:
            self.take()
            self.take()
            op = t.text
        elif t.kind == "op" and t.text == "=":
            self.take()
            if self.at("!") and self.tok.glued:
                raise TcSyntaxError("'=!' is not an operator: '=' assigns; the '!' forms are "
                                    "'+=!', '*=!', 'max=!', 'min=!'", self.src, self.tok.pos)
            return "=", False
        else:
            raise self.fail("an assignment ('=', '+=', '*=', 'max=', 'min=', or their '!' "
                            "forms)")
        bang = self.at("!") and self.tok.glued
        if bang:
            self.take()
        return op, bang

    def where_clause(self) -> A.Where:
        t = self.tok
        if t.kind == "id" and t.text == "exists":
            self.take()
            name = self.ident("a tensor read after 'exists'")
            e = self.postfix(name)
            if not isinstance(e, A.Apply):
                raise self.fail("'(' of a tensor read after 'exists'")
            return A.WhereExists(e, t.pos)
        var = self.ident("an index variable ('where i in 0:N' or 'where x = expr')")
        if self.at("=") and not self.peek().text == "=":
            self.take()
            return A.WhereLet(var.text, self.expr(), var.pos)
        self.expect("in", "'in' (as in 'where i in 0:N') or '=' (as in 'where x = expr')")
        lo = self.expr()
        self.expect(":", "':' between the bounds ('lo:hi')")
        hi = self.expr()
        return A.WhereRange(var.text, lo, hi, var.pos)

    # ------------------------------------------------------------------ expressions

    def expr(self) -> A.Expr:
        cond = self.binary(0)
        if self.at("?"):
            q = self.take()
            t = self.expr()
            self.expect(":", "':' of the conditional expression")
            f = self.expr()
            return A.Ternary(cond, t, f, q.pos)
        return cond

    def binary(self, level: int) -> A.Expr:
        if level == len(_LEVELS):
            return self.unary()
        a = self.binary(level + 1)
        while self.tok.kind == "op" and self.tok.text in _LEVELS[level]:
            op = self.take()
            b = self.binary(level + 1)
            a = A.Binary(op.text, a, b, op.pos)
        return a

    def unary(self) -> A.Expr:
        if self.tok.kind == "op" and self.tok.text in ("-", "+", "!"):
            op = self.take()
            return A.Unary(op.text, self.unary(), op.pos)
        return self.primary()

    def primary(self) -> A.Expr:
        t = self.tok
        if t.kind == "int":
            self.take()
            return A.Num(int(t.text), False, t.pos)
        if t.kind == "float":
            self.take()
            return A.Num(float(t.text), True, t.pos)
        if t.kind == "id":
            if t.text in ("def", "where", "in"):
                raise self.fail("an expression")
            self.take()
            return self.postfix(t)
        if self.at("("):
            self.take()
            e = self.expr()
            self.expect(")", "')' closing the parenthesis")
            return e
        raise self.fail("an expression")

    def postfix(self, name: Token) -> A.Expr:
        if not self.at("("):
            if self.at(".") or (self.tok.kind == "float" and self.tok.text.startswith(".")
                                and self.tok.glued):
                raise TcSyntaxError("not supported: dimension specifiers ('T.0'); name the "
                                    "size variable instead", self.src, self.tok.pos)
            return A.Ident(name.text, name.pos)
        self.take()
        args: list[A.Expr] = []
        if not self.at(")"):
            args.append(self.expr())
            while self.at(","):
                self.take()
                args.append(self.expr())
        self.expect(")", "',' or ')' in the argument list")
        return A.Apply(name.text, tuple(args), name.pos)


def render_untyped(e: A.Expr) -> str:
    """TC text of an untyped expression (for the ``<=>`` annotation)."""
    if isinstance(e, A.Num):
        return repr(e.value)
    if isinstance(e, A.Ident):
        return e.name
    if isinstance(e, A.Unary):
        return f"{e.op}{render_untyped(e.a)}"
    if isinstance(e, A.Binary):
        return f"{render_untyped(e.a)} {e.op} {render_untyped(e.b)}"
    if isinstance(e, A.Ternary):
        return f"{render_untyped(e.cond)} ? {render_untyped(e.t)} : {render_untyped(e.f)}"
    assert isinstance(e, A.Apply)
    return f"{e.name}({', '.join(render_untyped(a) for a in e.args)})"


def parse(text: str, name: str = "<tc>") -> A.TcFile:
    """Parse TC source ``text`` (reported as ``name``) into its definitions."""
    return _Parser(Source(text, name)).program()
