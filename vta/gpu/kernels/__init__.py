"""Kernels written at thread granularity with task mappings (vta.gpu.taskmap) and the warp-level
PTX statements (vta.gpu.mma): a multi-stage tensor-core GEMM and an implicit-GEMM conv2d, both
with the fused requantizing epilogue. They are loop-nest IR like every scheduled kernel, so
``render_cuda`` and the SIMT emulator take them unchanged."""
