"""What each operator computes, for every target: the problem (``Conv2dSpec``, ``MatmulSpec``,
``DepthwiseSpec``, ``WindowSpec``), its bit-exact numpy reference, the requantizing epilogue
(``epilogue``) and fused element-wise chains (``chain``) as tensor-IR stages, and the named
workloads (``workloads``: ResNet-18's layers, matmul, dense). The accelerator's packed forms are
in ``vta.compiler.accel.ops``, the GPU's in ``vta.gpu``."""

from vta.compiler.ops.conv2d import Conv2dSpec, conv2d_reference
from vta.compiler.ops.epilogue import Epilogue, apply_epilogue
from vta.compiler.ops.matmul import MatmulSpec, matmul_reference

__all__ = ["Conv2dSpec", "Epilogue", "MatmulSpec", "apply_epilogue", "conv2d_reference",
           "matmul_reference"]
