"""The graph level: whole networks of quantized operators, fused, placed and planned.

``ir`` (typed graph, operators with exact integer semantics), ``builder`` (``GraphBuilder``),
``printer``, ``verify``, ``interp`` (the numpy interpreter, independent of the compiler),
``models`` (a seeded quantized ResNet-18), ``onnx_import`` (the optional ONNX reader), the
passes (``passes.fuse``, ``passes.layout``, ``passes.memory``), ``place`` (each fused group an
accelerator kernel or a named host fallback), ``link`` and ``compile`` (``compile_graph``);
``vta.run.graph.run_graph`` simulates a compiled graph and checks every tensor, ``gpu`` runs the
same graph through the GPU path. See docs/graph.md.
"""
