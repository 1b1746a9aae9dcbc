"""Operators for the accelerator: conv2d, matmul/dense, the requantizing epilogue, and the
runtime's packing between user layouts (NCHW, row-major matrices) and the packed NCHWnc layout."""

from vta.compiler.ops.conv2d import Conv2dSpec, conv2d_reference
from vta.compiler.ops.epilogue import Epilogue, apply_epilogue
from vta.compiler.ops.matmul import MatmulSpec, matmul_reference

__all__ = ["Conv2dSpec", "Epilogue", "MatmulSpec", "apply_epilogue", "conv2d_reference",
           "matmul_reference"]
