"""The error hierarchy. Every error a user can cause derives from ``VtaError``; the CLI prints
its message (which names the file, field, instruction or shape at fault) and exits non-zero."""

from __future__ import annotations

__all__ = ["VtaError"]


class VtaError(Exception):
    """Base of every user-facing error in vta."""
