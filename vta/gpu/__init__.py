"""The GPU back end: the same loop-nest IR lowered to CUDA (``lower_gpu`` with ``passes/``:
thread binding, barriers, warp buffers, register checks), rendered (``cuda``), run on a GPU
(``runtime``, CuPy) or in the lockstep SIMT emulator (``emulator``, with ``profile``'s
counters); the device's limits (``target``: ``GpuTarget``), nvcc and ptxas's resource report
(``nvcc``); GPU schedules of the operators (``ops``, ``schedules``, ``implicit_gemm``,
``window``), GPU intrinsics (``intrinsic``: one definition each; ``wmma``, ``mma``), the
task-mapping kernels (``taskmap``, ``kernels/``), the schedule spaces (``space``) and the TC
mapper (``tc_map``). Imports the target-neutral compiler (``vta.compiler.ir``, ``ops``,
``tc``), never the accelerator's back end."""
