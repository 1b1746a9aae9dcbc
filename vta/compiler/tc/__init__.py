"""The Tensor Comprehensions frontend (docs/tc.md).

A TC definition such as::

    def conv2d(int8(N,C,H,W) I, int8(K,C,R,S) W1) -> (O) {
        O(n, k, h, w) +=! I(n, c, h + r, w + s) * W1(k, c, r, s)
    }

is parsed (``parser``), type-checked (``sema``), its index ranges inferred with isl
(``ranges``, TC's rule), and lowered at concrete sizes to the same tensor IR the Python API
builds (``to_ir``). ``interp`` is the independent numpy reference every compiled result is
checked against. ``map_gpu`` and ``map_vta`` map a definition to the two targets without a
user schedule.
"""

from vta.compiler.tc.frontend import (
    Definition,
    definitions,
    describe,
    load,
    load_file,
    parse_sizes,
)
from vta.errors import TcError, TcRangeError, TcSizeError, TcSyntaxError, TcTypeError

__all__ = ["Definition", "TcError", "definitions", "TcRangeError", "TcSizeError", "TcSyntaxError",
           "TcTypeError", "describe", "load", "load_file", "parse_sizes"]
