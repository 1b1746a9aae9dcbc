"""vta's version (the package's ``__version__``; part of the tuning cache's compiler key)."""

__version__ = "0.1.0"
