"""Errors of the TC frontend. Each names the file, line and column and shows the line with a
caret under the culprit, so a user sees at once what is wrong and where."""

from __future__ import annotations

from dataclasses import dataclass

from vta.errors import VtaError

__all__ = ["Pos", "Source", "TcError", "TcSyntaxError", "TcTypeError", "TcRangeError",
           "TcSizeError"]


@dataclass(frozen=True, slots=True)
class Pos:
    """A position in a TC source: 1-based line and column."""

    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.line}:{self.col}"


@dataclass(frozen=True)
class Source:
    """The text of a TC file and the name it is reported under."""

    text: str
    name: str = "<tc>"

    def line(self, n: int) -> str:
        lines = self.text.splitlines()
        return lines[n - 1] if 1 <= n <= len(lines) else ""

    def snippet(self, pos: Pos) -> str:
        """The source line of ``pos`` and a caret under its column."""
        text = self.line(pos.line).expandtabs(1)
        return f"    {text}\n    {' ' * (pos.col - 1)}^"

    def locate(self, pos: Pos) -> str:
        return f"{self.name}:{pos}"


class TcError(VtaError):
    """A TC program is malformed; the message names the place (and shows it when known)."""

    def __init__(self, message: str, source: Source | None = None,
                 pos: Pos | None = None) -> None:
        self.message, self.source, self.pos = message, source, pos
        if source is not None and pos is not None:
            text = f"{source.locate(pos)}: {message}\n{source.snippet(pos)}"
        elif source is not None:
            text = f"{source.name}: {message}"
        else:
            text = message
        super().__init__(text)


class TcSyntaxError(TcError):
    """The text does not follow the TC grammar (docs/tc.md)."""


class TcTypeError(TcError):
    """A name, arity, dtype or statement form is wrong (unknown tensor, index of a float, a
    reduction index without a reduction operator, ...)."""


class TcRangeError(TcError):
    """Range inference failed: an index whose range is ambiguous or unbounded (add a ``where``
    clause), an empty range, or an access that reads outside its tensor."""


class TcSizeError(TcError):
    """The sizes given for a definition are missing, unknown or not positive integers."""
