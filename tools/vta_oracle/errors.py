"""The oracle's errors: each names what is missing or wrong (a variable, a field, a file)."""

from __future__ import annotations

from vta.errors import VtaError

__all__ = ["OracleError", "OracleSourceError", "OracleConfigError", "OracleBuildError",
           "OracleRunError"]


class OracleError(VtaError):
    """Base of the oracle's errors."""


class OracleSourceError(OracleError):
    """A source tree is not given or is not what it should be; the message names the
    command-line flag and the environment variable that give it."""


class OracleConfigError(OracleError, ValueError):
    """A hardware config or program vta.cc cannot express; the message names the field."""


class OracleBuildError(OracleError):
    """g++ failed to build the driver, or the built design disagrees with vta's encoding."""


class OracleRunError(OracleError):
    """The driver failed on a program (vta.cc's final assertion, a crash)."""
