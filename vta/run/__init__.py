"""Running compiled code on a target and checking it: the one run layer every entry point uses.

``targets`` (where code runs: ``AccelTarget`` the simulated accelerator, ``CudaEmuTarget`` the
SIMT emulator, ``CudaTarget`` a GPU; each compiles, executes, runs its own oracle and
measures), ``check`` (the one PASS/FAIL rule), and the runs written against them: ``layer``
(a named workload), ``network`` (a network's layers one by one), ``graph`` (a whole graph,
ONNX included), ``tc`` (a Tensor Comprehensions definition) and ``build`` (``vta.build``: a
user's schedule). ``report`` and ``plot`` present a run; ``gpu_workloads`` builds the GPU
schedules of the named workloads. docs/architecture.md describes the layer.
"""
