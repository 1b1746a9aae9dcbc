"""Where a TC program's text came from: ``Source`` (the text and the name it is reported under)
and ``Pos`` (a line and column in it). Every TC error (``vta.errors.TcError``) carries both,
so it names the file, line and column and shows the line with a caret under the culprit."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Pos", "Source"]


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


