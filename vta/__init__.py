"""vta: co-design a deep-learning accelerator and its compiler.

The public surface is small: hardware descriptions (``HwConfig``), the ISA (``vta.isa``), the
simulators (``vta.sim``), the compiler (``vta.compiler``) and the GPU backend (``vta.gpu``).
"""

from vta import isa as _isa  # noqa: F401 - registers the built-in instructions and their checks
from vta.config import HwConfig, HwConfigError

__version__ = "0.1.0"

__all__ = ["HwConfig", "HwConfigError", "__version__"]
