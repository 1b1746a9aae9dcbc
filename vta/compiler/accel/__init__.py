"""The accelerator back end: from the tensor IR to an ``isa.Program`` for a ``HwConfig``.

``ops`` (each operator over the packed NCHWnc layout, the runtime's packing, reduction
folding, the epilogue's and fused chains' instruction plans), ``schedules`` (the schedule
space, its analytic model, the default schedule, fusion of epilogues), ``pipeline`` with
``passes/`` (ordered pure passes: DMA insertion, scratchpad allocation, tensorization, micro-op
generation, virtual threads and dependency tokens, emission), ``select`` (instruction
selection), ``cost`` (instruction cycles from the definitions), ``insn_intrin`` (tensor
intrinsics built from instruction definitions), ``pack`` (the accelerator's layout of a logical
compute), ``driver`` (a named workload compiled end to end) and ``tc_map`` (TC definitions
mapped onto GEMM and ALU without a schedule).
"""
