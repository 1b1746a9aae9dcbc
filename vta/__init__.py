"""vta: co-design a deep-learning accelerator and its compiler.

The public surface is small: hardware descriptions (``HwConfig``), one call from a schedule to
results on either target (``build``, returning a ``Module`` whose calls return a ``Result``),
the accelerator's layout transform of a logical compute (``pack``), and below them the ISA
(``vta.isa``), the simulators (``vta.sim``), the compiler (``vta.compiler``), the GPU backend
(``vta.gpu``) and the property-based testing helpers (``vta.testing``, needs hypothesis).
docs/python_api.md walks through them. The compiler-level names load on first use, so
``import vta`` stays cheap for the command line.
"""

from __future__ import annotations

from vta._collector import collector_paused

# vta's imports without the cycle collector (``collector_paused``: what they make lives as long
# as the process, none of it garbage)
with collector_paused():
    from importlib import import_module
    from typing import TYPE_CHECKING, Any

    # first, before any of vta's dataclasses exists: their generated methods' code is cached
    from vta import _dataclass_code  # noqa: F401 - installs itself (``install``)
    from vta import isa as _isa  # noqa: F401 - registers the built-in instructions
    from vta.config import HwConfig
    from vta.errors import BuildError, HwConfigError, InputError, LayoutError, VtaError
    from vta.version import __version__

if TYPE_CHECKING:
    from vta.compiler.accel.pack import Layout, Packed, pack
    from vta.run.build import TARGETS, GpuLaunch, Module, Result, build

__all__ = ["HwConfig", "HwConfigError", "VtaError", "build", "Module", "Result", "GpuLaunch",
           "BuildError", "InputError", "TARGETS", "pack", "Packed", "Layout", "LayoutError",
           "__version__"]

#: public name -> the module defining it (imported on first use)
_LAZY = {**dict.fromkeys(("build", "Module", "Result", "GpuLaunch", "TARGETS"), "vta.run.build"),
         **dict.fromkeys(("pack", "Packed", "Layout"), "vta.compiler.accel.pack")}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'vta' has no attribute {name!r}")
